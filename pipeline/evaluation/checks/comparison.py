"""Whether outputs match the reference: the elementwise tolerance, the rounding floor, one check set's verdict.

In: torch tensors on one device (an output and its reference) and the task's Tolerance; for `check_outputs`, a
group's configuration (group_data.py), a check set's index and the candidate's buffers after the call.
Out: (passed, largest normalised error, reason); `check_outputs` adds whether an input was modified. The
criterion itself is written once, in fused_check.py (`RoundCheck`); this module asks it for one output.
"""
from __future__ import annotations

import math

from pipeline.evaluation.checks.fidelity import anchored
from pipeline.evaluation.checks.fused_check import RoundCheck  # the one implementation of the criterion
from pipeline.evaluation.checks.group_data import ConfigData, GroupData
from pipeline.core.records import Tolerance


def rounding_floor(tol: Tolerance, inputs) -> float:
    """For `compare`: the rms below which a float32 reference is rounding noise of a computation on `inputs`
    (ROUNDING_FLOOR times the largest rms of a floating input): a mean of a normalised output is about 1e-10,
    and two correct answers round it differently. 0 when `tol` has no rel_l2 (nothing to compute)."""
    check = RoundCheck(tol)
    check.floor_of(inputs)
    check.read()
    return check.floor


def compare(out, ref, tol: Tolerance, floor: float = 0.0) -> tuple[bool, float, str]:
    """(passed, max normalised error, reason) for torch tensors on one device, at the task's tolerance:
    error per element is |out-ref| / (rtol*|ref| + atol*rms(ref) + atol_abs), rms over the reference's finite
    elements; where the reference itself is Inf or NaN the output must be the same (Inf of the same sign, or
    NaN), and elsewhere NaN or Inf never pass. With `tol.rel_l2` the output as a whole must also be within
    that fraction of the reference's norm, so that an absolute allowance cannot pass tiny outputs (a long
    softmax row) as zeros; not where the reference's rms is at most `floor` (`rounding_floor`): there it is
    rounding noise, and only the elementwise allowance applies, as in KernelBench's harness. Works through the tensors in chunks of COMPARE_CHUNK elements, so its
    temporaries stay small beside tensors of many GiB."""
    check = RoundCheck(tol, floor)
    check.output(0, out, ref)
    check.read()
    return check.verdict(0)


def check_outputs(group: GroupData, cd: ConfigData, si: int, now: dict) -> tuple[bool, float, str, bool]:
    """(passed, max error, reason, inputs_modified) of check set `si` of configuration `cd`, where `now` maps each
    of the configuration's buffer indices to its tensor after the call: inputs and parameters unchanged, each
    output within the task's tolerance of the reference (`compare`), and, where the set has a float64 anchor,
    within what honest float32 arithmetic gets of the float64 reference (fidelity.anchored). The evaluator checks
    a candidate's buffers with it; the mutation campaign (benchmarks/mutation.py) checks mutants' outputs."""
    import torch
    inputs, expected = cd.check_set(si)
    tol = cd.tolerance(group.task.tolerance) if cd.anchor_set(si) else group.task.tolerance  # widened under the anchor
    for b, before in inputs.items():
        if group.buffers[b].role in ("in", "param"):
            if not torch.equal(now[b], before.reshape(now[b].shape)):
                return False, math.inf, f"modified its input '{group.buffers[b].name}'", True
    worst = 0.0
    floor = rounding_floor(tol, inputs.values())
    for b, ref_out in expected.items():
        out = now[b]
        ok, err, why = compare(out, ref_out.reshape(out.shape), tol, floor)
        worst = max(worst, err)
        if not ok:
            return False, err, f"output '{group.buffers[b].name.split('.', 1)[1]}': {why}", False
    for b, (ref64, allowance) in cd.anchor_set(si).items():
        ok, why = anchored(now[b], ref64.reshape(now[b].shape), allowance, floor)
        if not ok:
            return False, math.inf, f"output '{group.buffers[b].name.split('.', 1)[1]}': {why}", False
    return True, worst, "", False
