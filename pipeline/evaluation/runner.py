"""One candidate on a GPU: load in a fresh child, check every configuration, then time it.

Called by `Evaluator` for each candidate of a group, after the group's inputs, references and
buffers exist. Every failure of the candidate becomes a verdict here; the verdict is decided
only from what the trusted side reads back from its own buffers and from its own deadlines.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

from pipeline.core.records import Candidate, ConfigResult, EvalResult, Finding
from pipeline.evaluation.checks.group_data import GroupData, TaskBroken
from pipeline.evaluation.child.outcome import Stop, child_failure, judge_reply
from pipeline.evaluation.child.sandbox import ChildFailed, ChildProcess
from pipeline.evaluation.harness import EvaluatorParts
from pipeline.evaluation.timing.statistics import summarize
from pipeline.evaluation.timing.timed_rounds import time_config


@dataclass
class Started:
    """A candidate's child, started and loaded (possibly ahead of time, while another one runs)."""
    child: ChildProcess | None
    reply: dict
    failure: Stop | None
    load_s: float


def start_candidate(ev: EvaluatorParts, group: GroupData, cand: Candidate, prep, take) -> Started:
    """The candidate's child, `take`n warm (warm.py: sandbox, Python, CUDA context and buffers ready, no candidate
    code yet), with the candidate loaded in it."""
    entry = group.task.function if cand.format == "c2cuda" else "launch"
    t0 = time.perf_counter()
    child = None
    try:
        child = take(cand.format == "kernelbench")  # before the lock: its start takes it shared, behind a waiting timer
        # never beside timing, and its code (ModelNew.__init__, static constructors) never between another's
        # timed window and its check (candidate_code, taken as lock.GpuLock.shared_with takes it)
        with ev.gpu_lock.shared_with(ev.candidate_code, "a candidate's load"):
            reply = ev.load_into_child(child, group, cand.format, prep.comp, entry, cand.code)
            child.freeze()  # loaded ahead: frozen until its turn, before the GPU passes (no host code beside others)
        return Started(child, reply, None, time.perf_counter() - t0)
    except ChildFailed as e:
        return Started(child, {}, child_failure(e, "load"), time.perf_counter() - t0)


def run_candidate(ev: EvaluatorParts, group: GroupData, cand: Candidate, prep, started: Started) -> EvalResult:
    task, cfg = group.task, ev.cfg
    stage = dict(prep.stage_s, load=started.load_s)
    timing_parts: dict[str, float] = {}
    findings = list(prep.findings)
    configs = [ConfigResult(name=cd.name) for cd in group.configs]
    verdict, reason, flags, speedup, speedup_compiled = "correct", "", [], None, None
    child = started.child
    try:
        if started.failure is not None:
            raise started.failure
        judge_reply(started.reply, "loading the candidate")
        t0 = time.perf_counter()
        # no other candidate's code runs while its outputs are checked (candidate_code, taken as everywhere)
        with ev.gpu_lock.shared_with(ev.candidate_code, "a candidate's checks"):
            _check_all(ev, group, child, configs)
        stage["check"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        speedup, speedup_compiled = _time(ev, group, child, configs, cand.format, flags, timing_parts)
        stage["timing"] = time.perf_counter() - t0
        judge_reply(child.request({"op": "status"}, cfg.run_timeout_s), "after timing")  # runtime checks, once more
    except Stop as stop:
        verdict, reason, flags = stop.verdict, stop.reason, stop.flags
    except TaskBroken as e:  # the trusted side failed (a check set, the baseline, the GPU's load): nothing is known
        verdict, reason = "evaluator_error", f"not judged: {e}"
    except ChildFailed as e:
        verdict, reason = child_failure(e, "after timing").verdict, str(e)
    except Exception as e:  # the GPU's memory ran out while this candidate's process held it: its failure
        if type(e).__name__ != "OutOfMemoryError":
            raise
        verdict, reason = "runtime_error", f"the GPU ran out of memory while this candidate ran: {str(e)[:300]}"
    finally:
        if child is not None:
            if verdict in ("runtime_error", "timeout"):
                log = child.log(800).strip()
                if log:
                    findings.append(Finding(source="sandbox", severity="info", message=f"child output: {log}"))
            child.close()
    if verdict != "correct":
        findings.append(Finding(source="check" if verdict == "incorrect" else "sandbox", severity="error",
                                message=reason, rule=flags[0] if flags else verdict))
    if ev.sandbox_note:
        findings.append(Finding(source="sandbox", severity="info", message=ev.sandbox_note))
    features = dict(prep.features)
    fractions = [c.floor_ms / c.time.median_ms for c in configs if c.floor_ms and c.time]
    if fractions and verdict == "correct":  # achieved share of the roofline (1 = at the hardware limit)
        features["roofline.fraction"] = round(math.exp(sum(map(math.log, fractions)) / len(fractions)), 6)
    return ev.result_of(task, cand, verdict, reason, configs=configs, speedup=speedup if verdict == "correct" else None,
                    speedup_compiled=speedup_compiled if verdict == "correct" else None,
                    flags=flags, findings=findings, stage_s=stage, timing_parts_s=timing_parts,
                    compile_log=prep.comp.ptxas_log,
                    features=features)


def _check_all(ev: EvaluatorParts, group: GroupData, child: ChildProcess, configs: list[ConfigResult]) -> None:
    """Every check configuration, twice (three times where it has a wide set) with fresh inputs in the same buffers;
    a Stop on the first failure."""
    cfg = ev.cfg
    for ci, cd in enumerate(group.configs):
        if not cd.check:
            continue
        try:
            for si in range(cd.n_sets):
                ev.stage_inputs(group, cd, si)
                try:
                    reply = child.request({"op": "call", "config": ci, "slot": 0}, cfg.run_timeout_s)
                except ChildFailed as e:
                    raise child_failure(e, f"config {cd.name}") from None
                judge_reply(reply, f"config {cd.name}")
                if reply.get("ret"):
                    raise Stop("runtime_error", f"config {cd.name}: launch returned {reply['ret']} (non-zero means failure)")
                ok, err, why, mutated = ev.check_config(group, cd, si)
                configs[ci].passed, configs[ci].max_error = ok, (err if math.isfinite(err) else None)
                if mutated:
                    raise Stop("rejected", f"config {cd.name}: {why}", ["input-mutation"])
                if not ok:
                    second = {0: "", 1: " on the second call with new inputs in the same buffers",
                              2: " on a third call with wide-range inputs (large logits)"}[si]
                    configs[ci].error = why
                    raise Stop("incorrect", f"config {cd.name}{second}: {why}")
        finally:
            cd.drop_sets()  # large problems: made again for the next candidate, one set held at a time


def _time(ev: EvaluatorParts, group: GroupData, child: ChildProcess, configs: list[ConfigResult],
          fmt: str, flags: list[str], parts: dict[str, float]) -> tuple[float | None, float | None]:
    """Every timing configuration in rounds of baseline and candidate batches (timed_rounds.py), the GPU's
    lock exclusive for what is timed; returns the geomean speedups over the baseline and over the torch.compile'd
    reference (None unless it built for every timed config). Adds to `parts` the seconds spent waiting
    for the lock (`lock_wait`) and in each part of the rounds (timed_rounds.TIMING_PARTS)."""
    logs, compiled_logs = [], []
    for ci, cd in enumerate(group.configs):
        if not cd.time:
            continue
        times = time_config(ev, group, ci, cd, child, fmt)  # takes the GPU's lock by turns (timed_rounds.GpuTurns)
        for part, seconds in times.parts_s.items():
            parts[part] = parts.get(part, 0.0) + seconds
        calls = times.calls_per_batch  # one time per round (per call of its batch); trials count the calls
        cand, base = summarize(times.candidate, calls), summarize(times.baseline, calls)
        if times.compiled:
            configs[ci].compiled_baseline_time = summarize(times.compiled, calls)
            compiled_logs.append(math.log(configs[ci].compiled_baseline_time.median_ms / cand.median_ms))
        configs[ci].time, configs[ci].baseline_time = cand, base
        configs[ci].calls_per_batch, configs[ci].batch_overhead_ms = times.calls_per_batch, times.overhead_ms
        configs[ci].timing_stop, configs[ci].baseline_drift = times.stop, times.baseline_drift
        configs[ci].trusted_time = summarize(times.trusted, calls)
        if not times.claims_believed and "timing-disagreement" not in flags:  # its own clock said less
            flags.append("timing-disagreement")
        configs[ci].passed = True if configs[ci].passed is None else configs[ci].passed
        floor = config_floor_ms(ev.cfg, group, cd)
        configs[ci].floor_ms = floor or None
        if floor and cand.median_ms < ev.cfg.implausible_fraction * floor:
            raise Stop("rejected", f"config {cd.name}: {cand.median_ms:.4f} ms is below the roofline floor "
                                   f"{floor:.4f} ms: impossible on this GPU", ["implausible-time"])
        logs.append(math.log(base.median_ms / cand.median_ms))
    speedup = math.exp(sum(logs) / len(logs)) if logs else None
    complete = bool(logs) and len(compiled_logs) == len(logs)
    return speedup, (math.exp(sum(compiled_logs) / len(compiled_logs)) if complete else None)


def config_floor_ms(cfg, group: GroupData, cd) -> float:
    """The roofline floor (structure.roofline) of this configuration's work, with the compute peak of the
    task's own precision (the fp32 rate for fp32 tasks)."""
    from pipeline.structure.roofline import roofline_floor_ms
    dtypes = {group.buffers[b].dtype for b in cd.buffers}
    floating = [d for d in dtypes if d in cfg.peak_flops_per_s_by_dtype]
    peak = max((cfg.peak_flops_per_s_by_dtype[d] for d in floating), default=max(cfg.peak_flops_per_s_by_dtype.values()))
    return roofline_floor_ms(cd.flops, cd.min_bytes, cfg.peak_bandwidth_bytes_per_s, peak)
