"""One candidate on a GPU: load in a fresh child, check every configuration, then time it.

Called by `Evaluator` for each candidate of a group, after the group's inputs, references and
buffers exist. Every failure of the candidate becomes a verdict here; the verdict is decided
only from what the trusted side reads back from its own buffers and from its own deadlines.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

from pipeline.evaluation.reference import GroupData, TaskBroken
from pipeline.evaluation.sandbox import ChildFailed, ChildProcess
from pipeline.evaluation.timing import summarize
from pipeline.records import Candidate, ConfigResult, EvalResult, Finding

REJECTING_FLAGS = ("torch-compute-in-forward", "timing-tamper", "threads", "side-stream")


class Stop(Exception):
    """Ends a candidate's run with a verdict."""

    def __init__(self, verdict: str, reason: str, flags: list[str] | None = None):
        super().__init__(reason)
        self.verdict, self.reason, self.flags = verdict, reason, flags or []


def _judge_reply(reply: dict, stage: str) -> None:
    """Turn a child's reply into a Stop when it reports a failure or a runtime-check flag."""
    flags = reply.get("flags") or []
    rejecting = [f for f in flags if f.startswith(REJECTING_FLAGS)]
    if rejecting:
        raise Stop("rejected", rejecting[0], [f.split(":")[0] for f in rejecting])
    if flags:
        raise Stop("incorrect", flags[0], [])
    if not reply.get("ok"):
        what = "a CUDA error" if reply.get("cuda") else "an error"
        raise Stop("runtime_error", f"{stage}: {what}: {reply.get('error', '')}")


def _child_failure(e: ChildFailed, stage: str) -> Stop:
    if e.timeout:
        return Stop("timeout", f"{stage}: {e}")
    return Stop("runtime_error", f"{stage}: {e}")


@dataclass
class Started:
    """A candidate's child, started and loaded (possibly ahead of time, while another one runs)."""
    child: ChildProcess | None
    reply: dict
    failure: Stop | None
    load_s: float


def start_candidate(ev, group: GroupData, cand: Candidate, prep) -> Started:
    entry = group.task.function if cand.format == "c2cuda" else "launch"
    t0 = time.perf_counter()
    child = None
    try:
        child = ev._child(cand.format == "kernelbench")
        reply = ev._load(child, group, cand.format, prep.comp, entry, cand.code)
        return Started(child, reply, None, time.perf_counter() - t0)
    except ChildFailed as e:
        return Started(child, {}, _child_failure(e, "load"), time.perf_counter() - t0)


def run_candidate(ev, group: GroupData, cand: Candidate, prep, started: Started) -> EvalResult:
    task, cfg = group.task, ev.cfg
    stage = dict(prep.stage_s, load=started.load_s)
    findings = list(prep.findings)
    configs = [ConfigResult(name=cd.name) for cd in group.configs]
    verdict, reason, flags, speedup, speedup_compiled = "correct", "", [], None, None
    child = started.child
    try:
        if started.failure is not None:
            raise started.failure
        _judge_reply(started.reply, "loading the candidate")
        t0 = time.perf_counter()
        with ev.gpu_lock.shared():
            _check_all(ev, group, child, configs)
        stage["check"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        speedup, speedup_compiled = _time(ev, group, child, configs, cand.format)
        stage["timing"] = time.perf_counter() - t0
    except Stop as stop:
        verdict, reason, flags = stop.verdict, stop.reason, stop.flags
    except TaskBroken as e:  # the baseline failed while timing: nothing is known about the candidate's speed
        verdict, reason = "not_executed", f"checked, but not timed: {e}"
        findings.append(Finding(source="check" if verdict == "incorrect" else "sandbox", severity="error",
                                message=reason, rule=flags[0] if flags else verdict))
    finally:
        if child is not None:
            if verdict in ("runtime_error", "timeout"):
                log = child.log(800).strip()
                if log:
                    findings.append(Finding(source="sandbox", severity="info", message=f"child output: {log}"))
            child.close()
    if ev.sandbox_note:
        findings.append(Finding(source="sandbox", severity="info", message=ev.sandbox_note))
    features = dict(prep.features)
    fractions = [c.floor_ms / c.time.median_ms for c in configs if c.floor_ms and c.time]
    if fractions and verdict == "correct":  # achieved share of the roofline (1 = at the hardware limit)
        features["roofline.fraction"] = round(math.exp(sum(map(math.log, fractions)) / len(fractions)), 6)
    return ev._base(task, cand, verdict, reason, configs=configs, speedup=speedup if verdict == "correct" else None,
                    speedup_compiled=speedup_compiled if verdict == "correct" else None,
                    flags=flags, findings=findings, stage_s=stage, compile_log=prep.comp.ptxas_log,
                    features=features)


def _check_all(ev, group: GroupData, child: ChildProcess, configs: list[ConfigResult]) -> None:
    """Every check configuration, twice with fresh inputs in the same buffers; a Stop on the first failure."""
    cfg = ev.cfg
    for ci, cd in enumerate(group.configs):
        if not cd.check:
            continue
        for si in range(2):
            ev._stage_inputs(group, cd, si)
            try:
                reply = child.request({"op": "call", "config": ci}, cfg.run_timeout_s)
            except ChildFailed as e:
                raise _child_failure(e, f"config {cd.name}") from None
            _judge_reply(reply, f"config {cd.name}")
            ok, err, why, mutated = ev._check_config(group, cd, si)
            configs[ci].passed, configs[ci].max_error = ok, (err if math.isfinite(err) else None)
            if mutated:
                raise Stop("rejected", f"config {cd.name}: {why}", ["input-mutation"])
            if not ok:
                second = " on the second call with new inputs in the same buffers" if si else ""
                configs[ci].error = why
                raise Stop("incorrect", f"config {cd.name}{second}: {why}")


def _time(ev, group: GroupData, child: ChildProcess, configs: list[ConfigResult],
          fmt: str) -> tuple[float | None, float | None]:
    """Alternate baseline and candidate rounds on each timing config; returns the geomean speedups over
    the baseline and over the torch.compile'd reference (None unless it built for every timed config)."""
    cfg = ev.cfg
    per_round = max(cfg.timing_trials // cfg.timing_rounds, 5)
    logs, compiled_logs = [], []
    for ci, cd in enumerate(group.configs):
        if not cd.time:
            continue
        ev._stage_inputs(group, cd, 0)
        base_ms, cand_ms, compiled_ms = [], [], []
        compiled_call = group.compiled_calls[ci] if group.compiled_calls else None
        with ev.gpu_lock.exclusive():
            for _ in range(cfg.timing_rounds):
                base_ms += group.time_reference(ci, per_round)
                if compiled_call is not None:
                    compiled_ms += group.time_compiled(ci, per_round)
                try:
                    reply = child.request({"op": "time", "config": ci, "warmup": cfg.warmup_trials,
                                           "trials": per_round, "budget_s": cfg.timing_budget_s},
                                          cfg.run_timeout_s + cfg.timing_budget_s * 2)
                except ChildFailed as e:
                    raise _child_failure(e, f"timing on {cd.name}") from None
                _judge_reply(reply, f"timing on {cd.name}")
                cand_ms += reply["times_ms"]
        with ev.gpu_lock.shared():
            _recheck_after_timing(ev, group, child, ci, cd, fmt)
        cand, base = summarize(cand_ms), summarize(base_ms)
        if compiled_ms:
            configs[ci].compiled_baseline_time = summarize(compiled_ms)
            compiled_logs.append(math.log(configs[ci].compiled_baseline_time.median_ms / cand.median_ms))
        configs[ci].time, configs[ci].baseline_time = cand, base
        floor = 1e3 * max(cd.min_bytes / cfg.peak_bandwidth_bytes_per_s, cd.flops / cfg.peak_flops_per_s)
        configs[ci].floor_ms = floor or None
        if floor and cand.median_ms < cfg.implausible_fraction * floor:
            raise Stop("rejected", f"config {cd.name}: {cand.median_ms:.4f} ms is below the roofline floor "
                                   f"{floor:.4f} ms: impossible on this GPU", ["implausible-time"])
        logs.append(math.log(base.median_ms / cand.median_ms))
    speedup = math.exp(sum(logs) / len(logs)) if logs else None
    complete = bool(logs) and len(compiled_logs) == len(logs)
    return speedup, (math.exp(sum(compiled_logs) / len(compiled_logs)) if complete else None)


def _recheck_after_timing(ev, group: GroupData, child: ChildProcess, ci: int, cd, fmt: str) -> None:
    """Outputs written during timing must still be right: catches work skipped on later calls.
    Native candidates wrote into the harness buffers on every timed call; for the
    kernelbench format one more call copies its result in. In-place (inout) outputs are
    left out: repeated calls legitimately change them."""
    if not cd.check:
        return
    if fmt == "kernelbench":
        ev._stage_inputs(group, cd, 0)
        reply = child.request({"op": "call", "config": ci}, ev.cfg.run_timeout_s)
        _judge_reply(reply, f"after timing on {cd.name}")
    expected = {b: v for b, v in cd.expected[0].items() if group.buffers[b].role == "out"}
    if not expected:
        return
    saved = cd.expected[0]
    cd.expected[0] = expected
    try:
        ok, _, why, _ = ev._check_config(group, cd, 0)
    finally:
        cd.expected[0] = saved
    if not ok:
        raise Stop("rejected", f"config {cd.name}: outputs were wrong after the timed calls ({why})",
                   ["changed-after-timing"])

