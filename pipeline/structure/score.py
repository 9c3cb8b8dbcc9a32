"""The structural score in [0, 1] of a kernel, from its structural features; and its fitting.

In: a kernel's `StaticFeatures`, its `OccupancyResult` and ptxas `KernelResources` (either may
be missing), optionally the roofline fraction of a measured run. Out: named components, each in
[0, 1] with 1 = no problem seen, and their weighted mean.

Formula (every component is a ratio or a penalty, never a count, so decorations such as
`#pragma unroll`, `__launch_bounds__` without effect on ptxas, or an unused `__shared__` array
cannot raise it; w(a) weighs an access by the estimated trip counts of its loops, `Access.weight`):

    coalescing     = sum_a w(a) q(a) / sum_a w(a) over global loads and stores a, where
                     q = ideal sectors / sectors of one warp request for coalesced and strided
                     accesses (1 when unit-stride, 1/8 for a 4-byte load with one sector per
                     lane), 1 broadcast, 0.5 unknown, 0.25 indirect
    vectorization  = sum_a w(a) [a through float2/float4/int4...] / sum_a w(a)   (same accesses)
    occupancy      = min(1, theoretical occupancy / occupancy_target)   (0 if the launch cannot run)
    spills         = 1 - min(1, (spill store + spill load bytes) / spill_scale_bytes)
    bank_conflicts = 1 - weighted mean over shared accesses of (ways - 1) / 31
    sync_safety    = 0 if any __syncthreads() sits under a thread-dependent branch, else 1
    atomics        = 1 - share of global traffic that is atomics every lane sends to one address
    roofline       = min(1, roofline floor / measured time)                (measured runs only)

    score = sum_c W_c * component_c / sum_c W_c    over the components that have evidence
            (no global access: no coalescing/vectorization term; no shared access: no bank term;
            no atomics, no ptxas report, no timing: likewise; no launch configuration, or a
            block size known only from `__launch_bounds__`: no occupancy term)

A file's score is the mean of its kernels' scores weighted by 1 + sum_a w(a) over their global
accesses, over the kernels its entry points launch (`reach.py`); a kernel that may be launched
but is not proven to be counts only where it lowers that mean (`conservative_combine`). Every
score is a finite number in [0, 1]: an undefined ratio gives no credit, never NaN. The weights W_c (`ScoreWeights`) are defaults until `fit_weights` fits them to
measured times: a pairwise logistic regression, within each task, of "a is faster than b" on
the component differences (a component missing on one side takes its NEUTRAL value), with
non-negative weights (every component is oriented so that more is better), normalised to sum 1.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, fields, replace

import numpy as np

from pipeline.structure.lanes import ideal_sectors

COMPONENTS = ("coalescing", "vectorization", "occupancy", "spills", "bank_conflicts", "sync_safety", "atomics",
              "roofline")
CLASS_QUALITY = {"coalesced": 1.0, "broadcast": 1.0, "unknown": 0.5, "indirect": 0.25, "strided": 0.0}


def access_quality(access) -> float:
    """q(a) of the formula: sector efficiency for (un)coalesced accesses, a constant otherwise."""
    if access.klass in ("coalesced", "strided") and access.sectors:
        return min(1.0, ideal_sectors(access.elem_bytes) / access.sectors)
    return CLASS_QUALITY[access.klass]
# Value a missing component takes when fitting (no evidence of a problem, or the middle).
NEUTRAL = {"coalescing": 1.0, "vectorization": 0.0, "occupancy": 0.5, "spills": 1.0, "bank_conflicts": 1.0,
           "sync_safety": 1.0, "atomics": 1.0, "roofline": 0.5}


@dataclass(frozen=True)
class ScoreWeights:
    """Weights of the components (relative; only their ratios matter) and two shape parameters."""
    coalescing: float = 0.35
    vectorization: float = 0.05
    occupancy: float = 0.20
    spills: float = 0.10
    bank_conflicts: float = 0.10
    sync_safety: float = 0.10
    atomics: float = 0.05
    roofline: float = 0.20
    occupancy_target: float = 0.5  # occupancy at and above which the occupancy component is 1
    spill_scale_bytes: float = 128.0  # spilled bytes per thread at which the spill component is 0

    def vector(self) -> np.ndarray:
        return np.array([getattr(self, c) for c in COMPONENTS], dtype=float)


def score_components(static=None, occ=None, resources=None, roofline_fraction: float | None = None,
                     weights: ScoreWeights = ScoreWeights()) -> dict[str, float]:
    """Components of the formula above that have evidence (see the module docstring)."""
    comp: dict[str, float] = {}
    if static is not None:
        glob = [a for a in static.accesses if a.space == "global" and a.kind in ("load", "store")]
        total = sum(a.weight for a in glob)
        if total > 0:
            comp["coalescing"] = _ratio(sum(a.weight * access_quality(a) for a in glob), total, 0.0)
            comp["vectorization"] = _ratio(sum(a.weight for a in glob if a.vector), total, 0.0)
        shared = [a for a in static.accesses if a.space == "shared" and a.kind in ("load", "store")]
        if shared:
            comp["bank_conflicts"] = 1.0 - static.bank_conflict_cost
        comp["sync_safety"] = 0.0 if static.divergent_barriers else 1.0
        if static.atomics_global:
            comp["atomics"] = 1.0 - static.contended_atomic_fraction
    if occ is not None and not occ.error:
        comp["occupancy"] = _ratio(occ.occupancy, weights.occupancy_target, 1.0 if occ.occupancy > 0 else 0.0)
    elif occ is not None:
        comp["occupancy"] = 0.0
    if resources is not None and resources.spills_known:
        spilled = resources.spill_bytes
        comp["spills"] = 1.0 - _ratio(spilled, weights.spill_scale_bytes, 1.0 if spilled else 0.0)
    if roofline_fraction is not None and math.isfinite(roofline_fraction):
        comp["roofline"] = max(0.0, min(1.0, roofline_fraction))
    return {c: _finite(v, default=0.0) for c, v in comp.items()}  # an undefined ratio (inf/inf) is no credit


def structural_score(components: dict[str, float], weights: ScoreWeights = ScoreWeights()) -> float:
    """Weighted mean of the components present, in [0, 1]; 0.5 when there is no evidence at all. A
    component that is not a finite number counts as 0 (no evidence of quality)."""
    num = den = 0.0
    for c, v in components.items():
        w = getattr(weights, c)
        if not (math.isfinite(w) and w > 0):
            continue
        num += w * _finite(v, default=0.0)
        den += w
    return _finite(num / den) if den > 0 else 0.5


def _finite(x: float, lo: float = 0.0, hi: float = 1.0, default: float = 0.5) -> float:
    """x clamped to [lo, hi]; `default` when it is NaN or infinite (no evidence)."""
    return default if not math.isfinite(x) else max(lo, min(hi, x))


def _weight(traffic: float) -> float:
    """1 + traffic, finite and at least 1 (NaN weighs 1, infinity 1e300)."""
    traffic = float(traffic)
    return 1.0 + (0.0 if math.isnan(traffic) else min(max(traffic, 0.0), 1e300))


def _ratio(num: float, den: float, default: float) -> float:
    """num / den in [0, 1]; `default` when the quotient is undefined (zero, NaN or infinite parts)."""
    try:
        q = float(num) / float(den)
    except (ZeroDivisionError, OverflowError):
        return default
    return _finite(q, default=default)


def combine(scores: list[tuple[float, float]]) -> float:
    """A file's score from (kernel score, kernel global traffic weight) pairs; always in [0, 1]."""
    if not scores:
        return 0.5
    weights = [_weight(t) for _, t in scores]
    top = max(weights)
    den = sum(w / top for w in weights)  # scaled so that huge weights cannot overflow to inf
    return _finite(sum(_finite(s) * w / top for (s, _), w in zip(scores, weights)) / den)


def conservative_combine(definite: list[tuple[float, float]],
                         possible: list[tuple[float, float]]) -> tuple[float, list[int]]:
    """The lowest file score over every choice of the possible kernels to count beside the definite ones
    (at least one kernel when there are any), and the indices of the possible kernels that choice counts.

    The lowest weighted mean takes the possible kernels in order of score, each while it is below the
    mean so far; so a kernel the analysis cannot prove launched never raises the score.
    """
    chosen: list[int] = []
    order = sorted(range(len(possible)), key=lambda i: _finite(possible[i][0]))
    if not definite and order:
        chosen.append(order.pop(0))
    for i in order:
        current = combine(definite + [possible[j] for j in chosen])
        if _finite(possible[i][0]) < current:
            chosen.append(i)
        else:
            break
    return combine(definite + [possible[j] for j in chosen]), chosen


# ------------------------------------------------------------------------------ fitting
@dataclass
class Sample:
    """One measured implementation: its task, its score components, its median time."""
    task_id: str
    components: dict
    time_ms: float


def _as_sample(s) -> Sample:
    if isinstance(s, Sample):
        return s
    if isinstance(s, dict):
        return Sample(s["task_id"], s["components"], float(s["time_ms"]))
    return Sample(*s)


def _pairs(samples, min_ratio: float) -> list[tuple[Sample, Sample]]:
    """(faster, slower) pairs of the same task whose times differ by at least `min_ratio`."""
    by_task: dict[str, list[Sample]] = {}
    for s in map(_as_sample, samples):
        by_task.setdefault(s.task_id, []).append(s)
    out = []
    for items in by_task.values():
        for a, b in itertools.combinations(items, 2):
            lo, hi = sorted((a.time_ms, b.time_ms))
            if lo > 0 and hi / lo >= min_ratio:
                out.append((a, b) if a.time_ms < b.time_ms else (b, a))
    return out


def _vec(components: dict) -> np.ndarray:
    return np.array([components.get(c, NEUTRAL[c]) for c in COMPONENTS], dtype=float)


def fit_weights(samples, base: ScoreWeights = ScoreWeights(), l2: float = 1e-3, steps: int = 3000,
                lr: float = 1.0, min_ratio: float = 1.05) -> ScoreWeights:
    """Fit the component weights to measured times by maximising within-task rank agreement.

    `samples`: Sample, (task_id, components, time_ms) tuples or dicts with those keys. Minimises
    mean log(1 + exp(-w . (x_fast - x_slow))) + l2 |w|^2 over w >= 0 by projected gradient
    descent, then normalises w to sum 1. With no usable pair, returns `base` unchanged.
    """
    pairs = _pairs(samples, min_ratio)
    if not pairs:
        return base
    X = np.stack([_vec(f.components) - _vec(s.components) for f, s in pairs])
    w = base.vector() / max(base.vector().sum(), 1e-12)
    for _ in range(steps):
        z = np.clip(X @ w, -50, 50)
        grad = -(X.T @ (1.0 / (1.0 + np.exp(z)))) / len(X) + 2 * l2 * w
        w = np.maximum(0.0, w - lr * grad)
    if w.sum() <= 1e-12:
        return base
    w = w / w.sum()
    return replace(base, **{c: float(v) for c, v in zip(COMPONENTS, w)})


def rank_agreement(samples, weights: ScoreWeights = ScoreWeights(), min_ratio: float = 1.05) -> float:
    """Share of within-task (faster, slower) pairs the score orders correctly (ties count half)."""
    pairs = _pairs(samples, min_ratio)
    if not pairs:
        return float("nan")
    good = 0.0
    for f, s in pairs:
        a, b = structural_score(f.components, weights), structural_score(s.components, weights)
        good += 1.0 if a > b + 1e-12 else 0.5 if abs(a - b) <= 1e-12 else 0.0
    return good / len(pairs)


def weights_dict(weights: ScoreWeights) -> dict:
    return {f.name: getattr(weights, f.name) for f in fields(weights)}
