"""Arithmetic intensity and roofline position of a kernel from its task's work model.

In: a `WorkModel` (FLOPs and minimum bytes moved, as expressions over a configuration's params,
e.g. flops "2*n", bytes "12*n"), the params of one configuration, a measured time, and the
ceilings of the GPU (`Ceilings`; defaults are the H200 figures of REFERENCES.md).
Out: FLOPs and bytes of the configuration, arithmetic intensity (FLOP/byte), the roofline floor
(the fastest time the hardware allows) and a `RooflinePoint`: achieved bandwidth and FLOP/s as
fractions of the ceilings, which bound applies, and the fraction of the roofline attained
(floor time / measured time, 1 = on the roof).

Expressions are evaluated by `pipeline.tasks.eval_expr` (the project's one safe evaluator; its
TaskError is a ValueError naming the expression), imported when first needed so that this
module stays importable where pydantic is not installed.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Ceilings:
    """Hardware ceilings (H200 defaults). Measured ceilings judge achievement; peaks make floors."""
    bandwidth_bytes_per_s: float = 4.3e12  # measured device copy (bytes read + written)
    peak_bandwidth_bytes_per_s: float = 4.8e12  # datasheet DRAM peak
    flops_per_s: dict | None = None  # dtype -> FLOP/s ceiling; None uses DEFAULT_FLOPS

    def flops(self, dtype: str) -> float:
        table = self.flops_per_s or DEFAULT_FLOPS
        if dtype not in table:
            raise ValueError(f"no FLOP/s ceiling for dtype '{dtype}': known are {', '.join(table)}")
        return table[dtype]


# bf16: measured dense matmul on the H200 (fp16 runs at the same tensor-core rate); fp32: non-tensor peak.
DEFAULT_FLOPS = {"bf16": 790e12, "fp16": 790e12, "fp32": 67e12}


def work_for_config(work, params: dict) -> tuple[float, float]:
    """(FLOPs, minimum bytes) of one configuration; `work` has .flops and .bytes expressions."""
    from pipeline.tasks import eval_expr
    return float(eval_expr(work.flops, params)), float(eval_expr(work.bytes, params))


def arithmetic_intensity(flops: float, nbytes: float) -> float:
    """FLOPs per byte moved (inf when no bytes, 0 when no FLOPs)."""
    if nbytes <= 0:
        return math.inf if flops > 0 else 0.0
    return flops / nbytes


def roofline_floor_ms(flops: float, nbytes: float, peak_bw: float, peak_flops: float) -> float:
    """The fastest time the hardware allows: max(bytes / bandwidth, FLOPs / FLOP rate), in ms."""
    if peak_bw <= 0 or peak_flops <= 0:
        raise ValueError(f"ceilings must be positive (bandwidth {peak_bw}, FLOP/s {peak_flops})")
    return max(nbytes / peak_bw, flops / peak_flops) * 1e3


@dataclass
class RooflinePoint:
    flops: float
    bytes: float
    time_ms: float
    intensity: float  # FLOP/byte
    ridge_intensity: float  # FLOP/byte where the bandwidth and compute roofs meet
    bound: str  # 'memory' | 'compute'
    achieved_bandwidth_bytes_per_s: float
    achieved_flops_per_s: float
    bandwidth_fraction: float  # of the measured bandwidth ceiling
    flops_fraction: float  # of the FLOP/s ceiling for the dtype
    roofline_fraction: float  # floor time (measured ceilings) / measured time, in [0, inf)

    def to_dict(self, prefix: str = "roofline.") -> dict:
        return {prefix + k: (float(v) if isinstance(v, (int, float)) else v) for k, v in asdict(self).items()}


def roofline_point(flops: float, nbytes: float, time_ms: float, ceilings: Ceilings = Ceilings(),
                   dtype: str = "fp32") -> RooflinePoint:
    """Where a measured run sits against the roofs of `ceilings` (measured bandwidth, dtype FLOP/s)."""
    if time_ms <= 0:
        raise ValueError(f"measured time must be positive, got {time_ms} ms")
    bw, fl = ceilings.bandwidth_bytes_per_s, ceilings.flops(dtype)
    seconds = time_ms / 1e3
    intensity = arithmetic_intensity(flops, nbytes)
    ridge = fl / bw
    floor = roofline_floor_ms(flops, nbytes, bw, fl)
    return RooflinePoint(flops, nbytes, time_ms, intensity, ridge, "compute" if intensity > ridge else "memory",
                         nbytes / seconds, flops / seconds, nbytes / seconds / bw, flops / seconds / fl,
                         floor / time_ms)


def roofline_for_config(work, params: dict, time_ms: float, ceilings: Ceilings = Ceilings(),
                        dtype: str = "fp32") -> RooflinePoint:
    """`roofline_point` for one configuration of a task's work model."""
    flops, nbytes = work_for_config(work, params)
    return roofline_point(flops, nbytes, time_ms, ceilings, dtype)
