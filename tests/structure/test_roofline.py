"""Arithmetic intensity, roofline floor and position from a task's work model."""
import math

import pytest

from pipeline.core.records import WorkModel
from pipeline.structure.roofline import (Ceilings, arithmetic_intensity, roofline_floor_ms, roofline_for_config,
                                         roofline_point, work_for_config)


def test_work_for_config_and_intensity():
    flops, nbytes = work_for_config(WorkModel(flops="2*n", bytes="12*n"), {"n": 1 << 20})
    assert (flops, nbytes) == (2 << 20, 12 << 20)
    assert arithmetic_intensity(flops, nbytes) == pytest.approx(1 / 6)
    assert arithmetic_intensity(5, 0) == math.inf and arithmetic_intensity(0, 0) == 0.0
    gemm = WorkModel(flops="2*M*N*K", bytes="4*(M*K + K*N + M*N)")
    f, b = work_for_config(gemm, {"M": 4096, "N": 4096, "K": 4096})
    assert arithmetic_intensity(f, b) == pytest.approx(2 * 4096 / 12)


def test_bad_expression_names_it():
    with pytest.raises(ValueError, match="'m'"):
        work_for_config(WorkModel(flops="2*m", bytes="4"), {"n": 3})
    with pytest.raises(ValueError, match="not allowed"):
        work_for_config(WorkModel(flops="__import__('os')", bytes="4"), {})


def test_floor_takes_the_slower_roof():
    assert roofline_floor_ms(0, 4.8e9, 4.8e12, 1e15) == pytest.approx(1.0)  # 4.8 GB at 4.8 TB/s
    assert roofline_floor_ms(67e9, 1, 4.8e12, 67e12) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        roofline_floor_ms(1, 1, 0, 1)


def test_point_memory_bound_saxpy():
    n = 1 << 24  # saxpy: 2n FLOPs, 12n bytes; 0.0468 ms at 4.3 TB/s
    p = roofline_point(2 * n, 12 * n, 0.1)
    assert p.bound == "memory" and p.intensity == pytest.approx(1 / 6)
    assert p.achieved_bandwidth_bytes_per_s == pytest.approx(12 * n / 1e-4)
    assert p.bandwidth_fraction == pytest.approx(12 * n / 1e-4 / 4.3e12)
    assert p.roofline_fraction == pytest.approx(12 * n / 4.3e12 * 1e3 / 0.1)
    assert all(k.startswith("roofline.") for k in p.to_dict())


def test_point_compute_bound_gemm_bf16():
    c = Ceilings()
    f, b = 2 * 8192 ** 3, 2 * 3 * 8192 ** 2
    p = roofline_point(f, b, 2.0, c, dtype="bf16")
    assert p.bound == "compute" and p.ridge_intensity == pytest.approx(790e12 / 4.3e12)
    assert p.flops_fraction == pytest.approx(f / 2e-3 / 790e12)
    with pytest.raises(ValueError, match="dtype"):
        roofline_point(f, b, 2.0, c, dtype="fp8")


def test_roofline_for_config():
    p = roofline_for_config(WorkModel(flops="batch*dim", bytes="8*batch*dim"), {"batch": 256, "dim": 65536}, 0.05)
    assert p.bytes == 8 * 256 * 65536 and p.bound == "memory"
