"""Timing one configuration of one candidate: rounds of baseline and candidate batches on fresh inputs.

In: the evaluator (its config, trusted clock and null children), the group, a timing configuration
with its slots (`reference.add_timing_slots`), the candidate's child. Out: per-call times of the
candidate, the baseline and (torch2cuda, where it builds) the torch.compile'd reference, or a
`Stop` with the verdict when a timed call went wrong.

Every round, under the GPU's exclusive lock:
 1. fresh inputs for each slot, made on the GPU with a new secret seed (so no call can reuse an
    earlier result, whatever it is keyed on);
 2. the baseline's batch (the naive CUDA implementation in a trusted child, or the PyTorch
    reference in this process) on those inputs, timed by the trusted clock; its outputs are the
    expected outputs of this round;
 3. the inputs staged again into every slot, every output (inout included) poisoned, the L2 flushed;
 4. the candidate's batch, one call per slot, timed by the trusted clock from "go" until the
    trusted probe after "done" completed;
 5. every slot checked: inputs unchanged, outputs right at the task's tolerance. A call that skipped
    its work, drifted after the first calls, or behaves differently at this size fails here.
The first round is a warm-up (checked, not counted); it also sets how many slots a batch uses, so
that a batch lasts about `eval.timing_batch_s` and the fixed cost of a batch (measured on its own
with empty batches of trusted processes, and subtracted) stays small against it.
"""
from __future__ import annotations

import math
import secrets
import time

from pipeline.evaluation.outcome import Stop, child_failure, judge_reply
from pipeline.evaluation.reference import ConfigData, GroupData, compare, poison_byte
from pipeline.evaluation.sandbox import ChildFailed


class Times:
    """Per-call milliseconds of one configuration, and how they were measured."""

    def __init__(self):
        self.candidate: list[float] = []
        self.baseline: list[float] = []
        self.compiled: list[float] = []
        self.calls_per_batch = 1
        self.overhead_ms = 0.0


def stage(driver, group: GroupData, slot_buffers: list[list[int]], fresh_sets: list[dict]) -> None:
    """Write each slot's fresh inputs into its buffers and poison every output of it."""
    for bufs, fresh in zip(slot_buffers, fresh_sets):
        for j, b in enumerate(bufs):
            buf = group.buffers[b]
            if j in fresh:
                buf.view.copy_(fresh[j].reshape(buf.view.shape))
            else:
                driver.memset_async(buf.ptr, poison_byte(buf.dtype), buf.nbytes)


def _out_positions(group: GroupData, cd: ConfigData) -> list[int]:
    return [j for j, b in enumerate(cd.buffers) if group.buffers[b].role in ("out", "inout")]


def check_slots(group: GroupData, cd: ConfigData, slots: list[int], fresh_sets: list[dict],
                expected: list[dict], what: str) -> None:
    """Every slot's inputs unchanged and outputs within tolerance, or a Stop naming the call."""
    import torch
    tol = group.task.tolerance
    for n, (k, fresh, want) in enumerate(zip(slots, fresh_sets, expected)):
        for j, b in enumerate(cd.slots[k]):
            buf = group.buffers[b]
            if buf.role in ("in", "param") and not torch.equal(buf.view, fresh[j].reshape(buf.view.shape)):
                raise Stop("rejected", f"config {cd.name}: {what}, call {n + 1} modified its input "
                                       f"'{buf.name.split('.', 1)[1].split('#')[0]}'", ["input-mutation"])
            if j in want:
                ok, _, why = compare(buf.view, want[j].reshape(buf.view.shape), tol.rtol, tol.atol)
                if not ok:
                    raise Stop("incorrect", f"config {cd.name}: {what}, call {n + 1} of the batch was wrong: "
                                            f"output '{buf.name.split('.', 1)[1].split('#')[0]}': {why}",
                               ["wrong-in-timed-call"])


def time_config(ev, group: GroupData, ci: int, cd: ConfigData, child, fmt: str) -> Times:
    """The rounds of one timing configuration (see the module docstring); holds the exclusive lock."""
    cfg, clock = ev.cfg, ev.clock
    times = Times()
    outs = _out_positions(group, cd)
    null = ev.null_child(fmt)
    empty = {"op": "run", "config": ci, "slots": []}
    cand_overhead = clock.overhead(lambda: null.request(empty, cfg.run_timeout_s))
    if group.baseline_child is not None:
        base_overhead = clock.overhead(lambda: group.baseline_child.request(empty, cfg.run_timeout_s))
    else:
        base_overhead = clock.overhead(lambda: None)
    copy_s = _output_copy_s(ev, group, cd) if fmt == "kernelbench" else 0.0
    times.overhead_ms = 1e3 * cand_overhead
    n_calls = 1
    deadline = time.perf_counter() + cfg.timing_budget_s
    rounds = 0
    while True:
        slots = list(range(n_calls))
        seed = secrets.randbits(31)
        fresh_sets = [cd.fresh(seed * 64 + k) for k in slots]
        base_s, expected = _baseline_batch(ev, group, ci, cd, slots, fresh_sets, outs)
        compiled_s = _in_process_batch(ev, cd.run_compiled, fresh_sets)[0] if cd.run_compiled else None
        stage(ev.driver, group, [cd.slots[k] for k in slots], fresh_sets)
        clock.flush_l2()
        reply: dict = {}

        def run() -> None:
            nonlocal reply
            reply = child.request({"op": "run", "config": ci, "slots": slots},
                                  cfg.run_timeout_s + cfg.timing_budget_s)
        try:
            t = clock.batch(run)
        except ChildFailed as e:
            raise child_failure(e, f"timing on {cd.name}") from None
        judge_reply(reply, f"timing on {cd.name}")
        _check_probes(cfg, cd, t)
        check_slots(group, cd, slots, fresh_sets, expected, "timed batch" if rounds else "warm-up batch")
        per_call = lambda s, overhead: 1e3 * max(s - overhead, 0.0) / len(slots)  # noqa: E731
        if rounds == 0:  # warm-up: sets the batch size from the baseline's time per call
            base_call_s = max(per_call(base_s, base_overhead) / 1e3, 1e-7)
            n_calls = max(1, min(len(cd.slots), math.ceil(cfg.timing_batch_s / base_call_s)))
            times.calls_per_batch = n_calls
        else:
            times.candidate.append(max(per_call(t.seconds, cand_overhead) - 1e3 * copy_s, 1e-6))
            times.baseline.append(per_call(base_s, base_overhead))
            if compiled_s is not None:
                times.compiled.append(per_call(compiled_s, base_overhead))
        rounds += 1
        timed = rounds - 1
        enough = timed * n_calls >= cfg.timing_trials or time.perf_counter() > deadline
        if timed >= cfg.timing_rounds and enough:
            return times


def _check_probes(cfg, cd: ConfigData, t) -> None:
    limit = cfg.busy_probe_limit_s
    if t.probe_after_s > limit:
        raise Stop("rejected", f"config {cd.name}: the GPU was still busy {1e3 * t.probe_after_s:.2f} ms after the "
                               f"candidate's process said its calls were done: work was left running",
                   ["work-after-done"])
    if t.probe_before_s > limit:
        raise Stop("rejected", f"config {cd.name}: the GPU was busy ({1e3 * t.probe_before_s:.2f} ms for a probe) "
                               f"before the timed calls started: the candidate left work running between calls",
                   ["work-between-calls"])


def _baseline_batch(ev, group: GroupData, ci: int, cd: ConfigData, slots: list[int], fresh_sets: list[dict],
                    outs: list[int]) -> tuple[float, list[dict]]:
    """The baseline's timed batch on this round's inputs: (seconds, expected outputs per slot)."""
    from pipeline.evaluation.reference import TaskBroken
    if cd.run_reference is not None:  # torch2cuda: the PyTorch reference, in this process
        seconds, results = _in_process_batch(ev, cd.run_reference, fresh_sets)
        return seconds, [dict(zip(outs, r)) for r in results]
    stage(ev.driver, group, [cd.baseline_slots[k] for k in slots], fresh_sets)
    ev.clock.flush_l2()
    reply: dict = {}

    def run() -> None:  # the baseline child's slot k + 1 is cd.baseline_slots[k] (its slot 0 is the checked set)
        nonlocal reply
        reply = group.baseline_child.request({"op": "run", "config": ci, "slots": [k + 1 for k in slots]},
                                             ev.cfg.run_timeout_s)
    try:
        t = ev.clock.batch(run)
    except ChildFailed as e:
        raise TaskBroken(f"task {group.task.id}: timing the naive baseline failed: {e}") from e
    if not reply.get("ok"):
        raise TaskBroken(f"task {group.task.id}: timing the naive baseline failed: {reply.get('error')}")
    expected = [{j: group.buffers[cd.baseline_slots[k][j]].view.clone() for j in outs} for k in slots]
    return t.seconds, expected


def _in_process_batch(ev, call, fresh_sets: list[dict]) -> tuple[float, list]:
    ev.clock.flush_l2()
    results: list = []
    t = ev.clock.batch(lambda: results.extend(call(f) for f in fresh_sets))
    return t.seconds, results


def _output_copy_s(ev, group: GroupData, cd: ConfigData) -> float:
    """KernelBench-format children copy each returned tensor into the harness's output buffer inside the
    timed window; the trusted side times the same copy itself and takes it off the candidate's time."""
    import torch
    outs = [group.buffers[b].view for b in cd.buffers if group.buffers[b].role == "out"]
    copies = [torch.empty_like(o) for o in outs]
    n = 8

    def run() -> None:
        for _ in range(n):
            for c, o in zip(copies, outs):
                c.copy_(o)
    ev.clock.batch(run)  # warm
    seconds = min(ev.clock.batch(run).seconds for _ in range(3))
    return max(seconds - ev.clock.overhead(lambda: None, 5), 0.0) / n
