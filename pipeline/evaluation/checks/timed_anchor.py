"""The float64 anchor of a c2cuda group's timed calls: the naive baseline built in float64, in a trusted child.

In: the evaluator (its compiler, children and driver: harness.EvaluatorParts), a group whose timing
configurations have an anchor slot (buffer_layout.add_anchor_slot), and the baseline's CUDA source. Out: each
timed configuration's `timed_anchor` (or, where the float64 build cannot serve, its `timed_anchor_note`);
the anchor's child is the group's `anchor_child`, closed with the group.
"""
from __future__ import annotations

from pipeline.evaluation.checks.fidelity import C_FLOAT64_PRELUDE, anchor_allowance
from pipeline.evaluation.checks.comparison import compare
from pipeline.evaluation.checks.group_data import ANCHOR_CALLS, GroupData, TaskBroken, poison_byte
from pipeline.evaluation.child.sandbox import ChildFailed
from pipeline.evaluation.gpu.driver import CudaError


def attach_timed_anchors(ev, group: GroupData, baseline_code: str) -> None:
    """The float64 anchor of timed calls (ConfigData.timed_anchor): the naive baseline built in float64
    (fidelity.C_FLOAT64_PRELUDE) in a trusted child of its own, on the buffers `add_anchor_slot` made. It must
    agree with the float32 baseline on both check sets of each timing configuration at the task's tolerance;
    where it does not build, load, run or agree (float bit tricks, float4 loads), its child is closed, the timed
    calls keep the tolerance alone and `timed_anchor_note` says why: never the group's failure."""
    import torch
    task, timed = group.task, [(ci, cd) for ci, cd in enumerate(group.configs) if cd.time and cd.anchor_slot]
    if not timed:
        return

    def without(why: str) -> None:
        for _, cd in timed:
            cd.timed_anchor, cd.timed_anchor_note = None, why
        if group.anchor_child is not None:
            group.anchor_child.close()
            group.anchor_child = None
    built = ev.compiler.compile_cuda(C_FLOAT64_PRELUDE + baseline_code)
    if not built.ok:
        return without("the naive baseline does not build in float64")
    child = ev.start_child(False)
    group.anchor_child = child

    def run64(ci: int, cd, inputs: dict) -> dict:
        """{position: float64 output} of one float64 baseline call on `inputs` ({position: tensor})."""
        for j, b in enumerate(cd.anchor_slot):
            buf = group.buffers[b]
            if j in inputs:
                buf.view.copy_(inputs[j].reshape(buf.view.shape))  # float32 -> float64 is exact
            elif buf.role == "out":
                ev.driver.memset_async(buf.ptr, poison_byte(buf.dtype), buf.nbytes)
        ev.driver.synchronize()  # staged before the other process reads them
        reply = child.request({"op": "call", "config": ci}, ev.cfg.run_timeout_s)
        if not reply.get("ok"):
            raise TaskBroken(f"task {task.id}: the float64 naive baseline failed on {cd.name}: {reply.get('error')}")
        return {j: group.buffers[b].view.clone() for j, b in enumerate(cd.anchor_slot)
                if group.buffers[b].role in ("out", "inout")}
    try:
        reply = ev.load_into_child(child, group, "c2cuda", built, task.function, trusted=True,
                                     calls=ANCHOR_CALLS)
        if not reply.get("ok"):
            return without(f"the naive baseline built in float64 does not load: {str(reply.get('error'))[:200]}")
        for ci, cd in timed:
            for si, inputs in enumerate(cd.input_sets):
                got = run64(ci, cd, {j: inputs[b] for j, b in enumerate(cd.buffers) if b in inputs})
                for j, b in enumerate(cd.buffers):
                    ok, _, why = compare(cd.expected[si][b].reshape(-1), got[j].reshape(-1), task.tolerance) \
                        if j in got else (True, 0.0, "")
                    if not ok:
                        return without(f"the naive baseline in float64 disagrees with itself in float32 on "
                                       f"{cd.name}, check set {si + 1} ({why})")
    except (ChildFailed, TaskBroken, CudaError) as e:
        return without(f"the naive baseline in float64 failed: {str(e)[:200]}")

    def anchor_of(ci: int, cd):
        def anchor(fresh_set: dict, expected: dict) -> dict:
            got = run64(ci, cd, fresh_set)
            inputs = [t for t in fresh_set.values()]
            return {j: (o64, anchor_allowance(expected[j], o64, inputs)) for j, o64 in got.items()
                    if j in expected and expected[j].dtype == torch.float32}
        return anchor
    for ci, cd in timed:
        cd.timed_anchor, cd.timed_anchor_note = anchor_of(ci, cd), ""

