"""The structural score: ordering, decoration invariance (static only and with real ptxas), fitting."""
import random

import pytest

from pipeline.structure.analyze import analyze_source
from pipeline.structure.occupancy import occupancy
from pipeline.structure.ptxas import KernelResources
from pipeline.structure.score import (COMPONENTS, Sample, ScoreWeights, fit_weights, rank_agreement,
                                      score_components, structural_score)
from pipeline.structure.static import analyze_static

from _kernels import DATA

BASE = """
__global__ void KDECOR scale_rows(const float* __restrict__ in, float* __restrict__ out, int n, int reps) {
    SHARED
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.f;
    PRAGMA
    for (int r = 0; r < 4; ++r) acc += in[(r * n) + i];
    if (i < n) out[i] = acc;
}
void launch(const float* in, float* out, int n) { scale_rows<<<(n + 255) / 256, 256>>>(in, out, n, 4); }
"""
DECORATIONS = {
    "pragma_unroll": {"PRAGMA": "#pragma unroll"},
    "launch_bounds": {"KDECOR": "__launch_bounds__(256)"},
    "unused_shared": {"SHARED": "__shared__ float pad[1024];"},
    "all": {"PRAGMA": "#pragma unroll 4", "KDECOR": "__launch_bounds__(256, 2)",
            "SHARED": "__shared__ float pad[1024]; __shared__ float pad2[16][17];"},
}


def variant(src: str, subs: dict) -> str:
    for key in ("PRAGMA", "KDECOR", "SHARED"):
        src = src.replace(key, subs.get(key, ""))
    return src


@pytest.mark.parametrize("run_nvcc", [False, True], ids=["static", "ptxas"])
@pytest.mark.parametrize("name", list(DECORATIONS))
def test_decorations_do_not_raise_the_score(name, run_nvcc, nvcc):
    base = analyze_source(variant(BASE, {}), run_nvcc=run_nvcc)
    deco = analyze_source(variant(BASE, DECORATIONS[name]), run_nvcc=run_nvcc)
    assert not base.errors and not deco.errors
    assert deco.score <= base.score + 1e-12


@pytest.mark.parametrize("name", ["smem_bank_conflict", "tiled_matmul", "loop_strided_matvec", "atomic_shared_hist"])
def test_decorating_data_kernels_does_not_raise_the_score(name):
    src = (DATA / f"{name}.cu").read_text()
    decorated = src.replace("__global__ void", "__global__ void __launch_bounds__(1024)").replace(
        "    for (", "    #pragma unroll\n    for (").replace("{\n", "{\n    __shared__ float unused_pad[512];\n", 1)
    assert analyze_static(decorated).kernels[-1].pragma_unroll >= 1
    a, b = analyze_source(src, run_nvcc=False), analyze_source(decorated, run_nvcc=False)
    assert b.score <= a.score + 1e-12


def comps(src: str, **kw) -> dict:
    return score_components(analyze_static(src).kernels[-1], **kw)


def test_better_structure_scores_higher():
    read = lambda n: (DATA / f"{n}.cu").read_text()  # noqa: E731
    s = lambda n: structural_score(comps(read(n)))  # noqa: E731
    assert s("coalesced_basic") > s("strided_const") and s("loop_coalesced_matvec_t") > s("loop_strided_matvec")
    assert s("smem_padded") > s("smem_bank_conflict")
    assert s("uniform_barrier") > s("divergent_barrier")
    assert s("warp_shuffle_reduce") > s("atomic_contended")
    assert comps(read("divergent_barrier"))["sync_safety"] == 0.0


def test_components_from_occupancy_and_spills():
    st = analyze_static((DATA / "coalesced_basic.cu").read_text()).kernels[0]
    good = score_components(st, occupancy("sm_90", 256, 32), KernelResources("k", "k", "k", registers=32))
    bad = score_components(st, occupancy("sm_90", 256, 128),
                           KernelResources("k", "k", "k", registers=128, spill_store_bytes=64, spill_load_bytes=64))
    assert good["occupancy"] == 1.0 and bad["occupancy"] == 0.5 and bad["spills"] == 0.0
    assert structural_score(bad) < structural_score(good)
    assert 0.0 <= structural_score(bad) <= 1.0
    fails = score_components(st, occupancy("sm_90", 1024, 80))
    assert fails["occupancy"] == 0.0
    assert score_components(st, roofline_fraction=2.0)["roofline"] == 1.0


def test_fit_weights_recovers_what_drives_time():
    rng = random.Random(0)
    samples = []
    for task in range(40):
        for impl in range(4):
            c = {name: rng.random() for name in COMPONENTS}
            # time depends only on coalescing and occupancy, plus noise
            t = 10.0 * (2.0 - 1.5 * c["coalescing"] - 0.5 * c["occupancy"]) * (1 + 0.05 * rng.random())
            samples.append(Sample(f"t{task}", c, t))
    fitted = fit_weights(samples)
    vec = {c: getattr(fitted, c) for c in COMPONENTS}
    assert sum(vec.values()) == pytest.approx(1.0) and min(vec.values()) >= 0.0
    assert vec["coalescing"] > vec["occupancy"] > max(v for k, v in vec.items() if k not in ("coalescing",
                                                                                           "occupancy"))
    assert rank_agreement(samples, fitted) > rank_agreement(samples, ScoreWeights()) >= 0.5
    assert rank_agreement(samples, fitted) > 0.85


def test_fit_weights_without_pairs_returns_the_base():
    base = ScoreWeights()
    assert fit_weights([("a", {"coalescing": 1.0}, 1.0)], base) is base
    assert fit_weights([{"task_id": "a", "components": {}, "time_ms": 1.0},
                        {"task_id": "a", "components": {}, "time_ms": 1.01}], base) is base
