"""The in-window checksum of a timed batch (timed_rounds.py, step 5): secret signed sums of every slot's outputs,
read inside the trusted clock's window right after the candidate's "done", against the same sums of the expected
outputs within the tolerance summed over the elements. A child that answers before its work is written, or
writes placeholders first and the results later, fails it. The calibration batch runs the same check, so its
cost is part of the overhead taken off the window.
"""
from __future__ import annotations

import math
import secrets
import time

from pipeline.evaluation.checks.group_data import ConfigData, GroupData


SIGN_PERIOD = 1 << 22  # secret weights repeat with this period, so they stay small beside outputs of many GiB


def secret_signs(group: GroupData, cd: ConfigData, outs: list[int]) -> dict:
    """Random +-1 weights per output (at most SIGN_PERIOD of them, repeated), made here and never mapped
    into any child."""
    import torch
    gen = torch.Generator(device=group.buffers[cd.buffers[outs[0]]].view.device) if outs else None
    if gen is not None:
        gen.manual_seed(secrets.randbits(62))
    return {j: (torch.randint(0, 2, (min(group.buffers[cd.buffers[j]].view.numel(), SIGN_PERIOD),), generator=gen,
                              device=gen.device, dtype=torch.float32) * 2 - 1) for j in outs}


def signed_sum(flat, signs, dtype=None, finite_only: bool = False):
    """sum_i flat[i] * signs[i mod len(signs)], computed a period at a time (in `dtype`, default float32);
    with `finite_only`, Inf and NaN elements count as 0."""
    import torch
    dtype = dtype or torch.float32
    if finite_only:
        return _signed_sum(flat, signs, dtype, lambda part: torch.nan_to_num(part.to(dtype), 0.0, 0.0, 0.0))
    return _signed_sum(flat, signs, dtype, lambda part: part.to(dtype))


def _signed_sum(flat, signs, dtype, convert):
    import torch
    w, period, n = signs.to(dtype), signs.numel(), flat.numel()
    if n == 0:
        return torch.zeros((), dtype=dtype, device=flat.device)
    whole = n // period
    total = torch.zeros((), dtype=dtype, device=flat.device)
    rows = flat[:whole * period].reshape(whole, period)
    step = max(1, (1 << 25) // period)  # rows per step: the converted copy stays near 1 GiB at float64
    for r in range(0, whole, step):
        total = total + (convert(rows[r:r + step]) @ w).sum()
    if n > whole * period:
        total = total + convert(flat[whole * period:]) @ w[:n - whole * period]
    return total


STATISTICS_ROUNDING = 1e-4  # relative margin over a float32 reduction's rounding of |x| and x*x sums (upper bounds)


def expected_statistics(flats: list, signs: list) -> list[tuple[float, float, float, float]]:
    """Per expected output: (elements not finite, sum of |x|, sum of x*x, signed sum with its weights), the last in
    float64 and the Inf and NaN elements counted as 0 in all three sums. The two sums that only bound the tolerance
    are float32 norms (one read each, no copy) raised by STATISTICS_ROUNDING, which covers their rounding; an
    output whose norms are not finite (an Inf or NaN, or squares past float32) is counted exactly, in float64 a
    chunk at a time. One readback for the norms and signed sums, and one more per output counted exactly."""
    import torch

    from pipeline.evaluation.checks.fused_check import COMPARE_CHUNK
    if not flats:
        return []
    nan = torch.tensor(math.nan, dtype=torch.float64, device=flats[0].device)
    rows = [torch.stack([torch.linalg.vector_norm(flat, 1).double(), torch.linalg.vector_norm(flat, 2).double(),
                         signed_sum(flat, w, torch.float64)]) if flat.dtype in (torch.float32, torch.float64)
            else nan.expand(3) for flat, w in zip(flats, signs)]  # other dtypes: counted exactly below
    fast = torch.stack(rows).to("cpu", copy=True).tolist()
    out = []
    for flat, w, (absum, norm, target) in zip(flats, signs, fast):
        if math.isfinite(absum) and math.isfinite(norm) and math.isfinite(target):
            out.append((0.0, absum * (1 + STATISTICS_ROUNDING), norm * norm * (1 + STATISTICS_ROUNDING), target))
            continue
        zero = torch.zeros((), dtype=torch.float64, device=flat.device)
        nonfinite, absum, sq = zero.clone(), zero.clone(), zero.clone()
        for a in range(0, flat.numel(), COMPARE_CHUNK):  # float64 statistics a chunk at a time
            part = flat[a:a + COMPARE_CHUNK].double()
            finite = torch.isfinite(part)
            nonfinite = nonfinite + (~finite).sum()
            part = torch.where(finite, part, 0.0)  # an Inf or NaN expected: left out, on both sides
            absum = absum + part.abs().sum()
            sq = sq + (part * part).sum()
        out.append(tuple(torch.stack([nonfinite, absum, sq, signed_sum(flat, w, torch.float64, True)]).tolist()))
    return out


class Checksums:
    """Inside the timed window, right after "done": a secret signed sum of every slot's outputs against
    the same sum of the expected outputs, within the tolerance summed over the elements (so an output
    that passes the element-wise check always passes this). A child that answers "done" before its
    work is written, or writes placeholders first and the results later, fails it; one reduction per
    output and a single synchronisation keep it short; the calibration batch runs it too, so its cost is
    part of the overhead taken off."""

    def __init__(self, group: GroupData, cd: ConfigData, slots: list[int], expected: list[dict], signs: dict):
        import torch
        tol = cd.tolerance(group.task.tolerance)
        self.views, targets, bounds = [], [], []
        outputs = [(k, j, ref.reshape(-1)) for k, want in zip(slots, expected) for j, ref in want.items()]
        table = expected_statistics([flat for _, _, flat in outputs], [signs[j] for _, j, _ in outputs])
        for (k, j, flat), (nonfinite, absum, sq, target) in zip(outputs, table):
            n = flat.numel()
            if not math.isfinite(absum + sq):  # sums past float64: no sum can hold them; the full
                continue                       # comparison after the batch checks the output
            finite_only = nonfinite > 0
            rms = (sq / n) ** 0.5 if n else 0.0
            self.views.append((group.buffers[cd.slots[k][j]].view.reshape(-1), signs[j], finite_only))
            targets.append(target)
            slack = 4e-7 * (math.log2(max(n, 2)) + 1) * (absum + 1.0)  # fp32 reduction rounding
            bounds.append(tol.rtol * absum + (tol.atol * rms + tol.atol_abs) * n + slack)
        self.targets, self.bounds = torch.tensor(targets, dtype=torch.float64), torch.tensor(bounds, dtype=torch.float64)

    def _sums(self):
        import torch
        return torch.stack([signed_sum(v, w, finite_only=f) for v, w, f in self.views]).double().cpu()

    def hold(self) -> bool:
        if not self.views:
            return True
        ok = (self._sums() - self.targets).abs() <= self.bounds  # negated bound: NaN fails
        return bool(ok.all())

    def cost_s(self) -> float:
        """Seconds the check takes on outputs already in place (taken off the candidate's window)."""
        t0 = time.perf_counter()
        self.hold()
        return time.perf_counter() - t0
