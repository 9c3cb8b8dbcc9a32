"""Timing one configuration of one candidate: rounds of baseline and candidate batches on fresh inputs.

In: the evaluator (its config, trusted clock and null children), the group, a timing configuration
with its slots (`buffer_layout.add_timing_slots`), the candidate's child. Out: per-call times of the
candidate, the baseline and (torch2cuda, where it builds) the torch.compile'd reference, or a
`Stop` with the verdict when a timed call went wrong.

Every round (the GPU's lock exclusive for steps 3 to 5 and for step 2 where the baseline is timed, shared for
the rest: `GpuTurns`):
 1. fresh inputs for each slot, made on the GPU with a new secret seed (so no call can reuse an
    earlier result, whatever it is keyed on), from check set 1's adversarial draw (`ConfigData.timed_inputs`:
    secret scales, spikes in cancelling pairs at secret positions, a secret sub-range of a declared uniform
    range), so that a call that skips elements, rows or terms, or writes what the task's own draw makes
    near-constant at this size, is off by more than the tolerance;
 2. the baseline's batch (the naive CUDA implementation in a trusted child, or the PyTorch
    reference in this process, run once untimed first when its batch is short) on those inputs,
    timed by the trusted clock; its outputs are the expected outputs of this round;
 3. the inputs staged again into every slot (in-place outputs get fresh inputs), every other output
    poisoned, the L2 flushed; the slots are called in a secret random order, and one more slot, a
    decoy, is staged alike but never called (`round_slots`), so a call that writes the slots after its
    own ahead (their inputs are in place before "go") writes into the decoy and is caught, and one that
    computes them into memory of its own must compute the decoy too (an open hole where batching the
    calls gains more than that one call: docs/status.md);
 4. the calibration: a trusted child of the candidate's kind runs a batch of as many operations,
    writing as many bytes per call as the candidate's outputs, each between the marks of its own events and
    wrapped in the same harness code as a call of the candidate (KernelBench format: the dispatch-state
    check, the result's checks), after the same L2 flush, with the same checksums inside its window and
    (KernelBench format) the same copies of results into output buffers, made by the trusted side; its
    window less its own (trusted) GPU time is what the candidate's window costs besides its calls (`_calibration`);
 5. the L2 flushed, then the candidate's batch, one call per slot, timed by the trusted clock from "go"
    until the trusted side has seen right outputs in every slot (a secret signed checksum of each,
    against the expected ones, inside the window) and its probe on the GPU has completed;
 6. every slot checked: inputs unchanged, outputs right at the configuration's tolerance (the check
    configurations' criterion), the decoy exactly as staged, and secret calls of the round
    (`eval.timing_anchored_calls`, `anchored_calls`) also within what honest float32 arithmetic
    gets of the float64 reference (`round_anchors`: the float64 twin, or the c2cuda baseline built in float64).
    A call that skipped its work, drifted after the first calls, behaves differently at this size or when
    called back to back, computes in a lower precision, or computed ahead of its calls fails here. Nothing
    that a kernel can observe (size, addresses, count, position, the time between calls) marks the anchored
    calls, so a kernel that does less on the calls it takes for timed ones meets the anchor in every round.
The first round is a warm-up (checked, not counted); it also sets how many slots a batch uses, so
that a batch lasts about `eval.timing_batch_s`.
Times: the trusted baseline's come from CUDA events of trusted processes. The candidate's process
also reports CUDA events, a pair around each call (KernelBench format: around the forward alone, as
KernelBench's own harness times it; the result's checks and its copy into the output buffer come after
the end mark, in neither side's time): a claim, precise but its own. The trusted clock's time of the
same batch is its window less the round's calibration overhead. The claims are the candidate's times
when their median lies at most the measured noise of that overhead (`eval.timing_noise_factor` times
the interquartile range of the calibrations, per call) below the trusted median, so a false claim
gains at most that noise; otherwise the trusted times less that noise are used and the result is
flagged `timing-disagreement` (`believed_times`). The calibration does real GPU work and the same
in-window checksum, so an honest batch's window exceeds its calls by what the calibration's does,
and honest claims are believed (an empty batch left the checksum, the wake-up after GPU work and the
context switch back out, and flipped honest candidates between their claim and a slower time).
A round in which the GPU
was busy just before it or around the candidate's batch (work left running, or another job) is
repeated; after three such rounds the candidate's process is killed: if the GPU then falls idle, the
work was the candidate's own (rejected, `work-left-running`), else the verdict is `evaluator_error` (no fair
time could be taken): the candidate is neither rewarded nor blamed.
"""
from __future__ import annotations

import math
import secrets
import time

from pipeline.evaluation.checks.fidelity import anchored
from pipeline.evaluation.checks.fused_check import RoundCheck
from pipeline.evaluation.checks.group_data import ConfigData, GroupData, TaskBroken, poison_byte
from pipeline.evaluation.child.outcome import Stop, child_failure, judge_reply
from pipeline.evaluation.child.sandbox import ChildFailed
from pipeline.evaluation.harness import EvaluatorParts
from pipeline.evaluation.timing.checksums import Checksums, secret_signs
from pipeline.evaluation.timing.group_timing import ChainedBaseline, keep_round, shared_round
from pipeline.evaluation.timing.statistics import believed_times, claim_noise_ms, overhead_samples, ratio_settled


class Times:
    """Per-call milliseconds of one configuration, and how they were measured."""

    def __init__(self):
        self.candidate: list[float] = []
        self.baseline: list[float] = []
        self.compiled: list[float] = []
        self.trusted: list[float] = []  # the candidate's per-call times by the trusted clock alone
        self.calls_per_batch = 1
        self.overhead_ms = 0.0
        self.disagreements = 0  # rounds whose claimed time lay below what the trusted clock allows
        self.claims_believed = True  # False: the candidate's own times were not believed (see believed_times)
        self.parts_s: dict[str, float] = {}  # wall seconds per part of the rounds (TIMING_PARTS), for the breakdown
        self.baseline_drift: float | None = None  # bracket: |end - start| / start of the baseline's two times
        # why the rounds ended (once timing_rounds were timed): "trials" (timing_trials calls), "settled" (the ratio's
        # 95 % interval within timing_ci), "budget" (timing_budget_s spent first: the interval was not reached)
        self.stop = ""

    def spent(self, part: str, since: float) -> float:
        """Add the seconds from `since` to now to `part`; returns now."""
        now = time.perf_counter()
        self.parts_s[part] = self.parts_s.get(part, 0.0) + now - since
        return now


# The parts of a configuration's rounds in Times.parts_s, back to back from the start of the rounds:
# warm_up    the null child's warm-up batches, the output-copy measure, the secret signs;
# inputs     per round: the busy probe, the new inputs made, staged into the candidate's slots, and the
#            in-window checksums prepared;
# baseline   the baseline's batch with its own staging or reference copies and the expected outputs it
#            gives, and the torch.compile'd reference's batch;
# calibration, candidate (its window), check (every slot after it).
# lock_wait  the turns of the GPU's lock (GpuTurns): waiting for it, and the GPU falling idle before it passes.
TIMING_PARTS = ("warm_up", "inputs", "baseline", "calibration", "candidate", "check", "lock_wait")


class GpuTurns:
    """The GPU's lock (gpu/lock.Turns) through one configuration's rounds. Exclusive while anything is timed:
    in each round the busy probe, the baseline's batch where it is timed (with the in-window checksums' targets
    made from its outputs), the staging of the candidate's slots, the calibration and the candidate's window.
    Shared for the rest: a round's new inputs, the baseline's untimed batch that gives its expected outputs and
    the checksums' targets from them, and the round's checks. So on a GPU shared by several evaluators, one evaluator's checks and input draws overlap the
    others' work, and only the measured windows take the GPU by turns. The evaluator's `candidate_code` lock
    is held from each window to the end of its check (no sibling loaded ahead runs its code on the group's
    buffers in between), and the GPU's work is done before a turn passes. Without a lock (CPU tests) the turns
    only count."""

    def __init__(self, ev: EvaluatorParts, times: Times):
        lock = getattr(ev, "gpu_lock", None)
        self.turns = lock.turns(getattr(ev, "candidate_code", None)) if lock is not None else None
        self.times = times

    def to(self, mode: str, why: str = "") -> float:
        """Hold the lock `mode` ("exclusive" or "shared") for `why` (the lock's trace); the switch's seconds go to
        `lock_wait`. Returns now."""
        t0 = time.perf_counter()
        if self.turns is not None:
            getattr(self.turns, mode)(why)
        return self.times.spent("lock_wait", t0)

    def code_done(self) -> None:
        """The window's check is over: a sibling may load beside the rest of this shared turn (lock.Turns)."""
        if self.turns is not None:
            self.turns.code_done()

    def release(self) -> None:
        if self.turns is not None:
            self.turns.release()


def stage(driver, group: GroupData, slot_buffers: list[list[int]], fresh_sets: list[dict]) -> None:
    """Write each slot's fresh inputs into its buffers and poison every output of it."""
    for bufs, fresh in zip(slot_buffers, fresh_sets):
        for j, b in enumerate(bufs):
            buf = group.buffers[b]
            if j in fresh:
                buf.view.copy_(fresh[j].reshape(buf.view.shape))
            else:
                driver.memset_async(buf.ptr, poison_byte(buf.dtype), buf.nbytes)


DECOY_SLOTS = 1  # per round, a slot staged like the called ones (fresh inputs, poisoned outputs) but never called


def round_slots(n_calls: int, decoys: int) -> tuple[list[int], list[int]]:
    """A round's slots: the `n_calls` called, in a secret random order, and `decoys` staged alike but never
    called, at secret random places among them. Every call's inputs are in place before "go", so a call could
    compute the calls after it and leave them nothing to do; it cannot tell which staged slots will be
    called, and writing into a decoy is caught (`check_round`)."""
    pool = list(range(n_calls + decoys))
    order = sorted(pool, key=lambda _: secrets.randbits(32))
    return order[:n_calls], order[n_calls:]


def _out_positions(group: GroupData, cd: ConfigData) -> list[int]:
    return [j for j, b in enumerate(cd.buffers) if group.buffers[b].role in ("out", "inout")]


def anchored_calls(n_calls: int, count: int) -> list[int]:
    """Which calls of a round (indices into its called slots) are also held to the float64 anchor: `count` of them
    (eval.timing_anchored_calls), chosen in secret, new every round. They are staged, drawn and called like every
    other, so a kernel that does less work on the calls it takes for timed ones does it on these too."""
    return sorted(range(n_calls), key=lambda _: secrets.randbits(32))[:max(1, count)] if n_calls else []


def round_anchors(cd: ConfigData, fresh_sets: list[dict], expected: list[dict], calls: list[int]) -> dict:
    """{n: {position: (float64 output, allowance)}} for each call n in `calls` (cd.timed_anchor), or {} where the
    configuration has none. Trusted work on the trusted copies of the calls' inputs."""
    if cd.timed_anchor is None or not fresh_sets:
        return {}
    found = {}
    for n in calls:
        try:
            table = cd.timed_anchor(fresh_sets[n], expected[n])
        except TaskBroken:
            raise
        except Exception as e:  # noqa: BLE001 - the trusted float64 reference failed: nothing known of the candidate
            raise TaskBroken(f"config {cd.name}: the float64 reference of a timed call failed: {type(e).__name__}: "
                             f"{str(e)[:200]}") from e
        if table:
            found[n] = table
    return found


def check_round(group: GroupData, cd: ConfigData, slots: list[int], fresh_sets: list[dict], expected: list[dict],
                decoys: list[int], decoy_sets: list[dict], what: str, cuda=None, anchors: dict | None = None) -> None:
    """Every called slot's inputs unchanged and outputs within tolerance, then every decoy exactly as staged
    (inputs as written, outputs still poisoned), or a Stop naming the first call that failed. One pass over
    each buffer, read back with one synchronisation (fused_check.RoundCheck): the verdicts are
    `comparison.compare`'s and torch.equal's (fused_check.py; the equivalence is tests/evaluation/test_fused_check.py).
    `anchors` ({call index: {position: (float64 output, allowance)}}, `round_anchors`): those calls' outputs must
    also lie within what honest float32 arithmetic gets of the float64 reference (fidelity.anchored), as a check
    configuration's do."""
    tol = cd.tolerance(group.task.tolerance)
    check = RoundCheck(tol, cuda=cuda)  # cuda: the evaluator's fused_check.CudaPass, where it could build one
    if fresh_sets:
        check.floor_of(fresh_sets[0].values())  # every slot's inputs alike
    for n, (k, fresh, want) in enumerate(zip(slots, fresh_sets, expected)):
        for j, b in enumerate(cd.slots[k]):
            buf = group.buffers[b]
            if buf.role in ("in", "param"):
                check.unchanged(("in", n, j), buf.view, fresh[j].reshape(buf.view.shape))
            if j in want:
                check.output(("out", n, j), buf.view, want[j].reshape(buf.view.shape))
    for d, (k, fresh) in enumerate(zip(decoys, decoy_sets)):
        for j, b in enumerate(cd.slots[k]):
            buf = group.buffers[b]
            if j in fresh:
                check.unchanged(("decoy", d, j), buf.view, fresh[j].reshape(buf.view.shape))
            else:
                check.poisoned(("decoy", d, j), buf.view, poison_byte(buf.dtype))
    check.read()
    for n, (k, want) in enumerate(zip(slots, expected)):
        for j, b in enumerate(cd.slots[k]):
            buf = group.buffers[b]
            name = buf.name.split('.', 1)[1].split('#')[0]
            if buf.role in ("in", "param") and not check.holds(("in", n, j)):
                raise Stop("rejected", f"config {cd.name}: {what}, call {n + 1} modified its input '{name}'",
                           ["input-mutation"])
            if j in want:
                ok, _, why = check.verdict(("out", n, j))
                if not ok:
                    raise Stop("incorrect", f"config {cd.name}: {what}, call {n + 1} of the batch was wrong: "
                                            f"output '{name}': {why}", ["wrong-in-timed-call"])
    for n, table in (anchors or {}).items():
        for j, (ref64, allowance) in table.items():
            buf = group.buffers[cd.slots[slots[n]][j]]
            ok, why = anchored(buf.view, ref64.reshape(buf.view.shape), allowance, check.floor)
            if not ok:
                name = buf.name.split('.', 1)[1].split('#')[0]
                raise Stop("incorrect", f"config {cd.name}: {what}, call {n + 1} of the batch was wrong: "
                                        f"output '{name}': {why}", ["wrong-in-timed-call"])
    for d, k in enumerate(decoys):
        for j, b in enumerate(cd.slots[k]):
            if not check.holds(("decoy", d, j)):
                name = group.buffers[b].name.split('.', 1)[1].split('#')[0]
                raise Stop("rejected", f"config {cd.name}: the batch wrote into '{name}' of a slot it was never called "
                                       f"for (it computed ahead of its calls, or wrote out of its own buffers)",
                           ["computed-ahead"])


def time_config(ev: EvaluatorParts, group: GroupData, ci: int, cd: ConfigData, child, fmt: str) -> Times:
    """The rounds of one timing configuration (see the module docstring), taking the GPU's lock by turns
    (GpuTurns): exclusive for what is timed, shared for inputs and checks.
    The candidate's process is frozen (SIGSTOP) from the start of each round until "go", so it can
    neither watch its buffers being staged nor run host code beside the baseline."""
    times = Times()
    turns = GpuTurns(ev, times)
    try:
        child.freeze()
        return _rounds(ev, group, ci, cd, child, fmt, times, turns)
    finally:
        turns.release()
        child.thaw()


def _empty_batch(ev: EvaluatorParts, ci: int, fmt: str) -> None:
    """One empty batch of the trusted null child (it starts and warms the child)."""
    null = ev.null_child(fmt)
    try:
        reply = null.request({"op": "run", "config": ci, "slots": [], "launches": 1}, ev.cfg.run_timeout_s)
    except ChildFailed as e:
        raise TaskBroken(f"the evaluator's own trusted child failed: {e}") from e
    if not reply.get("ok"):
        raise TaskBroken(f"the evaluator's own empty batch failed: {reply.get('error')}")


CALIBRATION_FILL_MAX = 256 << 20  # bytes a calibration call writes at most (its GPU time is measured, not assumed)


def _harness_copies(dests: list | None, expected: list[dict], outs: list[int]) -> list[tuple]:
    """(destination, source) per output of each call of a round: the copies a KernelBench-format harness makes
    of the calls' results into its output buffers, made by the calibration on the trusted side (the round's
    expected outputs into `output_copy_buffers`); [] for the other formats, whose calls write the buffers."""
    if not dests:
        return []
    return [(dest, want[j]) for want in expected for dest, j in zip(dests, outs)]


def _calibration(ev: EvaluatorParts, ci: int, fmt: str, launches: int, fill_bytes: int, sums: "Checksums",
                 copies: list[tuple] = ()) -> tuple[float, bool]:
    """Seconds of a trusted batch's window that are not its GPU work: what the candidate's window costs
    besides its calls. A trusted child of the candidate's kind, frozen and thawed like it, after the same
    L2 flush, writes `fill_bytes` per call (`launches` operations, as many as the batch has calls, each
    between the marks of its events and, KernelBench format, in the harness code of a call), the trusted
    side makes the harness's `copies` (`_harness_copies`) and the same checksums run inside the window; the
    child's own CUDA events (trusted) give its GPU time, and the window less that time is the overhead: the
    round trip, the harness code and copies between calls, the wake-ups, the in-window checksum, the probe.
    Returns (overhead seconds, whether the GPU was busy with other work around it: then it is no measure)."""
    cfg, null = ev.cfg, ev.null_child(fmt)
    msg = {"op": "run", "config": ci, "slots": [], "launches": launches,
           "fill_bytes": int(min(max(fill_bytes, 4), CALIBRATION_FILL_MAX))}
    if fmt == "kernelbench":
        msg["harness"] = "kernelbench"
    reply: dict = {}

    def run() -> None:
        nonlocal reply
        null.thaw()
        reply = null.request(msg, cfg.run_timeout_s)
        if not reply.get("ok"):
            raise TaskBroken(f"the evaluator's own calibration batch failed: {reply.get('error')}")
        for dest, src in copies:  # the harness's copies, as many and as large as the candidate's batch makes
            dest.copy_(src.reshape(dest.shape))
        sums.hold()  # the candidate's in-window check, on what the slots hold now: the same work
    try:
        null.freeze()
        ev.clock.flush_l2()
        t = ev.clock.batch(run)
    except ChildFailed as e:
        raise TaskBroken(f"the evaluator's own trusted child failed while measuring the cost of a batch: {e}") from e
    finally:
        null.thaw()
    gpu = reply.get("events_ms")
    gpu_s = gpu / 1e3 if isinstance(gpu, (int, float)) and math.isfinite(gpu) and gpu > 0 else 0.0
    busy = max(t.probe_before_s, t.probe_after_s) > cfg.busy_probe_limit_s
    return max(t.seconds - gpu_s, 0.0), busy


def _rounds(ev: EvaluatorParts, group: GroupData, ci: int, cd: ConfigData, child, fmt: str, times: Times, turns: GpuTurns) -> Times:
    import statistics
    cfg, clock = ev.cfg, ev.clock
    t_start = turns.to("shared", "timing: warm-up")  # nothing is timed: beside others' work, never their timing
    outs = _out_positions(group, cd)
    fill = sum(group.buffers[cd.buffers[j]].nbytes for j in outs)  # bytes one call writes
    for _ in range(3):
        _empty_batch(ev, ci, fmt)  # the null child started and warm before anything is measured
    # a KernelBench-format harness copies each result into its output buffer after the call's time: the
    # calibration makes as many copies, so the trusted clock takes them off too (neither side's time holds one)
    dests = output_copy_buffers(group, cd) if fmt == "kernelbench" else None
    reference, compiled = cd.run_reference, cd.run_compiled
    n_calls = 1
    signs = secret_signs(group, cd, outs)
    deadline = time.perf_counter() + cfg.timing_budget_s
    rounds = busy = 0
    claims, trusted, overheads = [], [], []  # per call, ms, of the timed rounds; overhead seconds per batch
    last_base_s = None  # the baseline batch's seconds in the round before (the warm-up round included)
    t = times.spent("warm_up", t_start)
    decoys = DECOY_SLOTS if len(cd.slots) > DECOY_SLOTS else 0
    chained = cfg.timing_baseline == "chained"
    bracket = chained or cfg.timing_baseline == "bracket"
    chain = cd.chained_baseline if chained else None  # the start bracket, already timed
    if chain is not None:
        times.baseline.append(chain.ms)
        times.compiled.extend([chain.compiled_ms] if chain.compiled_ms is not None else [])
    alternating, first_alternating = False, 0
    paired: list[float] = []  # per timed round, the baseline time its candidate time is set against
    while True:
        slots, decoy = round_slots(n_calls, decoys)
        child.freeze()
        t = turns.to("shared", "timing: a round's inputs")  # drawn beside other evaluators' work
        # bracket: the warm-up and the first timed round, unless the chained start bracket stands for both
        timed_base = not bracket or alternating or (rounds <= 1 and chain is None)
        made = shared_round(ev, cd, rounds, len(slots), len(decoy)) if not timed_base else None
        if made is not None:  # eval.group_rounds: this round's sets as the group's first candidate had them
            fresh_sets, decoy_sets, expected = made
        else:
            seed = secrets.randbits(31)
            fresh_sets = [cd.timed_inputs(seed * 64 + k) for k in slots]
            decoy_sets = [cd.timed_inputs(seed * 64 + k) for k in decoy]
        t = times.spent("inputs", t)
        base_s = compiled_s = None
        if made is None and not timed_base:  # untimed: the round's expected outputs only, beside others' work,
            base_s, expected = _baseline_batch(ev, group, ci, cd, slots, fresh_sets, outs, reference=reference,
                                               warm=False)
            keep_round(ev, cd, rounds, fresh_sets, decoy_sets, expected)  # kept for the group where asked
            t = times.spent("baseline", t)
        sums = None if timed_base else Checksums(group, cd, slots, expected, signs)  # trusted tensors only
        t = times.spent("inputs", t)
        t = turns.to("exclusive", "timing: a round's windows")  # from here to the end of the candidate's window
        if clock.probe() > cfg.busy_probe_limit_s:  # something still runs on the GPU: not a fair round
            busy = _busy(ev, cd, busy, "before the round", child)
            continue
        # the candidate's slots staged only now, alone on the GPU: no sibling's code (a load ahead runs when a turn
        # passes) and no work the candidate left queued can see this round's inputs before its window
        stage(ev.driver, group, [cd.slots[k] for k in slots + decoy], fresh_sets + decoy_sets)
        t = times.spent("inputs", t)
        if timed_base:  # the baseline's timed batch, alone on the GPU; its outputs are the round's expected ones
            base_s, expected = _baseline_batch(ev, group, ci, cd, slots, fresh_sets, outs, reference=reference,
                                               warm=warm_baseline(last_base_s))
            last_base_s = base_s
            compiled_s = _in_process_batch(ev, compiled, [cd.reference_copy(f) for f in fresh_sets])[0] \
                if compiled else None
            t = times.spent("baseline", t)
            sums = Checksums(group, cd, slots, expected, signs)
            t = times.spent("inputs", t)
        # what this very round's window costs besides the calls (the warm-up measures it three times)
        copies = _harness_copies(dests, expected, outs)
        calibrations = [_calibration(ev, ci, fmt, len(slots), fill, sums, copies) for _ in range(1 if rounds else 3)]
        t = times.spent("calibration", t)
        if any(b for _, b in calibrations):  # another job's work inflated the overhead: not a fair round
            busy = _busy(ev, cd, busy, "around the calibration", child)
            continue
        round_overheads = [s for s, _ in calibrations]
        overhead_s = round_overheads[-1]
        clock.flush_l2()
        reply: dict = {}
        complete = True

        def run_and_see() -> None:  # the window ends only once the trusted side has seen the outputs
            nonlocal reply, complete
            child.thaw()
            reply = child.request({"op": "run", "config": ci, "slots": slots}, cfg.run_timeout_s + cfg.timing_budget_s)
            complete = sums.hold()
        try:
            window = clock.batch(run_and_see)
        except ChildFailed as e:
            raise child_failure(e, f"timing on {cd.name}") from None
        t = times.spent("candidate", t)
        judge_reply(reply, f"timing on {cd.name}")
        if not complete:
            raise Stop("incorrect", f"config {cd.name}: the outputs were not right when the candidate's process "
                                    f"said its calls were done", ["unfinished-at-done"])
        busy_window = max(window.probe_before_s, window.probe_after_s) > cfg.busy_probe_limit_s
        child.freeze()  # before the GPU passes to other evaluators' windows: no host code of its own beside them
        t = turns.to("shared", "timing: a round's checks")  # behind the timers waiting, beside others' work
        anchors = round_anchors(cd, fresh_sets, expected, anchored_calls(len(slots), cfg.timing_anchored_calls))
        check_round(group, cd, slots, fresh_sets, expected, decoy, decoy_sets,
                    "timed batch" if rounds else "warm-up batch", getattr(ev, "check_pass", None), anchors)
        turns.code_done()
        t = times.spent("check", t)
        if busy_window:
            turns.to("exclusive", "timing: a busy GPU judged")  # with nobody else on it
            busy = _busy(ev, cd, busy, "around the candidate's batch", child)
            continue
        if rounds:
            overheads += round_overheads
        trusted_s = max(window.seconds - overhead_s, 0.0)
        claim = reply.get("events_ms")
        claim_s = claim / 1e3 if isinstance(claim, (int, float)) and math.isfinite(claim) and claim >= 0 else 0.0
        per_call = lambda s: 1e3 * s / len(slots)  # noqa: E731
        if rounds == 0:  # warm-up: sets the batch size from the baseline's time per call (the chain's: its own)
            n_calls = chain.n_calls if chain is not None else \
                max(1, min(len(cd.slots) - decoys, math.ceil(cfg.timing_batch_s / max(base_s, 1e-7))))
            times.calls_per_batch = n_calls
            warm_overheads = round_overheads
        else:
            claims.append(max(per_call(claim_s), 1e-6))  # nothing modelled is taken off
            trusted.append(max(per_call(trusted_s), 1e-6))
            if timed_base:
                times.baseline.append(per_call(base_s))
            paired.append(times.baseline[-1] if timed_base else times.baseline[0])
            if compiled_s is not None:
                times.compiled.append(per_call(compiled_s))
        rounds += 1
        timed = rounds - 1 - first_alternating
        # the interval of the times the result reports if the rounds end now: the claims where believed so far
        settled = cfg.timing_ci > 0 and timed >= 2 and ratio_settled(believed_times(
            claims[first_alternating:], trusted[first_alternating:],
            claim_noise_ms(cfg, overhead_samples(overheads, warm_overheads), n_calls))[0],
            paired[first_alternating:], cfg.timing_ci)
        times.stop = ("trials" if timed * n_calls >= cfg.timing_trials else "settled" if settled else
                      "budget" if time.perf_counter() > deadline else "")
        if timed >= cfg.timing_rounds and times.stop:
            if not bracket or alternating:
                break
            # the baseline once more, at the end, on new inputs: within 2 % of its start, the two bracket every
            # round between; otherwise the GPU drifted, and timing_rounds more rounds time it in every round
            child.freeze()  # as in every round: no host code of the candidate while inputs are made
            seed = secrets.randbits(31)
            end_sets = [cd.timed_inputs(seed * 64 + k) for k in slots]
            t = times.spent("baseline", t)
            t = turns.to("exclusive", "timing: the baseline's end bracket")
            idle = clock.probe() <= cfg.busy_probe_limit_s  # chained: only an end taken on an idle GPU starts the next
            end_s, _ = _baseline_batch(ev, group, ci, cd, slots, end_sets, outs, warm=warm_baseline(last_base_s),
                                       reference=reference)
            end_compiled_s = _in_process_batch(ev, compiled, [cd.reference_copy(f) for f in end_sets])[0] \
                if compiled and chained else None  # chained: the next start's, too
            idle = idle and clock.probe() <= cfg.busy_probe_limit_s  # ... and still idle once it was timed
            t = times.spent("baseline", t)
            end_ms = per_call(end_s)
            times.baseline_drift = abs(end_ms - times.baseline[0]) / times.baseline[0] if times.baseline[0] else 0.0
            if times.baseline_drift <= BASELINE_DRIFT:
                times.baseline.append(end_ms)
                if end_compiled_s is not None:
                    times.compiled.append(per_call(end_compiled_s))
                if chained:
                    cd.chained_baseline = ChainedBaseline(end_ms, n_calls, per_call(end_compiled_s) if
                                                          end_compiled_s is not None else None) if idle else None
                break
            if chained:
                cd.chained_baseline = None  # the GPU drifted: the next candidate times its own start
            alternating, first_alternating = True, len(trusted)
            deadline = time.perf_counter() + cfg.timing_budget_s
    if alternating:  # only the rounds that timed the baseline beside the candidate count
        claims, trusted = claims[first_alternating:], trusted[first_alternating:]
        times.baseline, times.compiled = times.baseline[1:], times.compiled[1:]
    samples = overhead_samples(overheads, warm_overheads)
    noise_ms = claim_noise_ms(cfg, samples, n_calls)
    times.overhead_ms = 1e3 * statistics.median(samples)
    times.trusted = trusted
    times.disagreements = sum(c < t - noise_ms for c, t in zip(claims, trusted))
    times.candidate, times.claims_believed = believed_times(claims, trusted, noise_ms)
    return times


def _busy(ev: EvaluatorParts, cd: ConfigData, busy: int, where: str, child) -> int:
    """Count a round spoilt by other work on the GPU. After three: if the GPU is idle once the candidate's
    process is gone, that process left the work running (a kernel still going after its calls returned),
    and the candidate is rejected; otherwise another job holds the GPU and nothing fair can be measured."""
    if busy + 1 < 3:
        return busy + 1
    if _idle_without(ev, child):
        raise Stop("rejected", f"config {cd.name}: the GPU stayed busy {where} in three rounds while the candidate's "
                               f"process lived, and was idle once it was gone: it left work running on the GPU after "
                               f"its calls returned", ["work-left-running"])
    raise TaskBroken(f"config {cd.name}: the GPU stayed busy {where} in three rounds, also with the candidate's "
                     f"process gone (another job on this GPU), so no fair time could be taken")


IDLE_WAIT_S = 5.0  # how long the GPU may take to end a killed process's kernels and fall idle


def _idle_without(ev: EvaluatorParts, child) -> bool:
    """Kill the candidate's process (its context's kernels end with it) and see whether the GPU falls idle:
    three probes in a row within the limit, in at most IDLE_WAIT_S."""
    child.kill()
    deadline, idle = time.perf_counter() + IDLE_WAIT_S, 0
    while time.perf_counter() < deadline:
        idle = idle + 1 if ev.clock.probe() <= ev.cfg.busy_probe_limit_s else 0
        if idle >= 3:
            return True
        time.sleep(0.05)
    return False


BASELINE_DRIFT = 0.02  # bracket: start and end baseline times further apart than this fall back to alternation
BASELINE_WARM_S = 0.05  # an in-process baseline batch shorter than this runs once untimed just before it is timed


def warm_baseline(last_batch_s: float | None) -> bool:
    """Whether this round's baseline batch runs once untimed first: in the first round, and whenever the
    batch before was short (for a long one, seconds of a KernelBench reference, the host's cold start is
    a small share, and a warm batch would double the round)."""
    return last_batch_s is None or last_batch_s < BASELINE_WARM_S


def _baseline_batch(ev: EvaluatorParts, group: GroupData, ci: int, cd: ConfigData, slots: list[int], fresh_sets: list[dict],
                    outs: list[int], warm: bool = True, reference=None) -> tuple[float, list[dict]]:
    """The baseline's timed batch on this round's inputs: (seconds, expected outputs per slot).
    reference: the in-process reference's call (default cd.run_reference).
    warm: a PyTorch reference (its calls launched from Python, in this process) first runs the same batch
    untimed. A round's other work leaves the host idle for milliseconds before the baseline, and a short
    batch launched from a cold host ran 2-13 % slower per call than the same calls back to back (the
    conventional measurement), while the candidate's batch follows the calibration's batch of as many
    calls; benchmarks/experiments/reference_batch.py measures both (round_fresh_idle, round_fresh_idle_warm)."""
    if cd.run_reference is not None:  # torch2cuda: the PyTorch reference, in this process
        call = reference or cd.run_reference
        if warm:  # the same batch once untimed: the host's launch path and the GPU as warm as in back-to-back calls
            warm_results = _in_process_batch(ev, call, [cd.reference_copy(f) for f in fresh_sets])[1]
            del warm_results
        seconds, results = _in_process_batch(ev, call, [cd.reference_copy(f) for f in fresh_sets])
        return seconds, [dict(zip(outs, r)) for r in results]
    # c2cuda: the naive baseline in its trusted child, whose CUDA events are trusted
    stage(ev.driver, group, [cd.baseline_slots[k] for k in slots], fresh_sets)
    ev.clock.flush_l2()
    try:  # the baseline child's slot k + 1 is cd.baseline_slots[k] (its slot 0 is the checked set)
        reply = group.baseline_child.request({"op": "run", "config": ci, "slots": [k + 1 for k in slots]},
                                             ev.cfg.run_timeout_s)
    except ChildFailed as e:
        raise TaskBroken(f"task {group.task.id}: timing the naive baseline failed: {e}") from e
    if not reply.get("ok"):
        raise TaskBroken(f"task {group.task.id}: timing the naive baseline failed: {reply.get('error')}")
    expected = [{j: group.buffers[cd.baseline_slots[k][j]].view.clone() for j in outs} for k in slots]
    return reply["events_ms"] / 1e3, expected


def _in_process_batch(ev: EvaluatorParts, call, fresh_sets: list[dict]) -> tuple[float, list]:
    """Seconds of a batch of trusted calls in this process, and their results: each call between its own CUDA
    events with the device synchronised before it (TrustedClock.calls: KernelBench's trial, and the shape of the
    candidate's batch), the L2 flush queued first. Timed as one back-to-back batch instead, a small reference
    read 1.3-1.9x faster per call than KernelBench times it (its launches overlapped the GPU's work; the
    candidate's calls are each timed alone), and every honest answer's speedup low by as much
    (benchmarks/results/v20/kernelbench_agreement_h200_batch_baseline.json)."""
    return ev.clock.calls([lambda f=f: call(f) for f in fresh_sets], flush_first=True)


def output_copy_buffers(group: GroupData, cd: ConfigData) -> list:
    """A buffer of each output's shape, made once per configuration, for the calibration's copies (`_harness_copies`)."""
    import torch
    return [torch.empty_like(group.buffers[b].view) for b in cd.buffers if group.buffers[b].role == "out"]
