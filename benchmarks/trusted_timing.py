"""Trusted-clock timing on one GPU: honest speedups before and after, and timing stability.

    python benchmarks/trusted_timing.py --out benchmarks/results/v13/trusted_timing_h200.json \
        [--before benchmarks/results/v1/evaluator_h200.json]

1. Every c2cuda and light implementation of the built-in tasks (all known correct) through one
   in-process evaluator (no Ray), with empty result caches: verdict, speedup, calls per batch and
   batch overhead per timing configuration. Side by side with the speedups of the same candidates
   in `--before` (the evaluator's benchmark JSON of the previous protocol, child-side CUDA events),
   as the ratio after/before.
   Beside them, in the same run, the conventional single-call measurement of the same compiled code
   (`single_call`: this trusted process calls the library itself, CUDA events around each call, the L2
   flushed before each, as KernelBench's harness and the previous protocol did), candidate and baseline
   alike, as the ratio trusted/single per speedup and per time: the protocol's own shift, free of
   day-to-day drift of the GPU.
2. Stability: one kernel (saxpy naive, sgemm naive) timed in 10 separate evaluations; spread (max/min - 1)
   of the per-configuration medians and of the speedup the evaluation reports (what reaches a reward: its
   baseline is timed in the same rounds, so a change of the GPU's clocks between evaluations cancels).
Figures go to JSON with the machine, versions and date; a table is printed at the end.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# CUDAPERF_ROOT: measure another checkout's evaluator with this script (gpu_checks.sh timed: before and after)
sys.path.insert(0, os.environ.get("CUDAPERF_ROOT") or str(ROOT))

from pipeline.core.config import CompileSection, EvalSection  # noqa: E402
from pipeline.core.records import Candidate  # noqa: E402
from pipeline.tasks import load_tasks  # noqa: E402

STABILITY = [("c2cuda/saxpy", "naive"), ("c2cuda/sgemm", "naive")]


def machine() -> dict:
    import torch
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm",
                          "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    return {"python": platform.python_version(), "torch": torch.__version__, "nvidia_smi": smi,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def precompile(ev, tasks) -> None:
    """Gate, compile and artefact checks of every candidate at once (cached), as the compile pool would."""
    from concurrent.futures import ThreadPoolExecutor
    jobs = [(t, Candidate(task_id=t.id, code=i.code, format=i.format)) for t in tasks.values()
            for i in t.implementations if i.format in ("c2cuda", "light")]
    from pipeline.evaluation.checks.fidelity import C_FLOAT64_PRELUDE
    baselines = [C_FLOAT64_PRELUDE + t.baseline().code for t in tasks.values() if t.kind == "c2cuda" and t.baseline()]
    with ThreadPoolExecutor(12) as pool:  # and the naive baselines built in float64 (timed calls' anchors)
        list(pool.map(lambda j: ev.gate_and_compile(j[0], j[1], None), jobs))
        list(pool.map(ev.compiler.compile_cuda, baselines))


def honest(ev, tasks, partial: Path | None = None) -> dict:
    """Every c2cuda and light implementation of `tasks` through the evaluator; with `partial`, the rows so far are
    written there after each task, so a run stopped by its time limit still leaves its figures."""
    out = {}
    for task in tasks.values():
        impls = [i for i in task.implementations if i.format in ("c2cuda", "light")]
        if not impls:
            continue
        t0 = time.perf_counter()
        results = ev.evaluate(task, [Candidate(task_id=task.id, code=i.code, format=i.format) for i in impls])
        per = (time.perf_counter() - t0) / len(impls)
        print(f"{task.id}: {[r.verdict for r in results]} {per:.2f} s each", flush=True)
        for impl, r in zip(impls, results):
            if r.verdict != "correct":
                print(f"  {impl.name}: {r.verdict}: {r.reason[:300]}", flush=True)
        for impl, r in zip(impls, results):
            out[f"{task.id}/{impl.name}"] = {
                "verdict": r.verdict, "reason": r.reason[:200], "speedup": r.speedup, "seconds": per,
                "flags": r.flags, "stage_s": r.stage_s, "timing_parts_s": r.timing_parts_s,
                "configs": {c.name: {"median_ms": c.time.median_ms, "iqr_ms": c.time.iqr_ms, "trials": c.time.trials,
                                     "baseline_ms": c.baseline_time.median_ms, "calls_per_batch": c.calls_per_batch,
                                     "trusted_ms": c.trusted_time.median_ms if c.trusted_time else None,
                                     "overhead_ms": c.batch_overhead_ms, "floor_ms": c.floor_ms}
                            for c in r.configs if c.time is not None}}
        if partial is not None:
            partial.write_text(json.dumps({"partial": True, "per_candidate": out}, indent=1))
    return out


def in_process_runner(ev, task, group, code: str, fmt: str):
    """Honest (built-in) c2cuda or light code compiled and loaded in this trusted process, called on the
    group's own buffers: the benchmarks' conventional measurement, never a candidate's path."""
    from pipeline.evaluation.child.main import NativeRunner
    comp = ev.compiler.compile(Candidate(task_id=task.id, code=code, format=fmt), task)
    entry = task.function if fmt == "c2cuda" else "launch"
    return NativeRunner({"artifact": comp.artifact, "entry": entry, "format": fmt,
                         "calls": [c.slot_calls(fmt) for c in group.configs]}, [b.ptr for b in group.buffers])


def single_call(ev, tasks, trials: int = 50) -> dict:
    """Every implementation's speedup and per-configuration times measured the conventional way (see the
    module docstring), on the evaluator's own buffers, inputs from the task's generator: honest code only."""
    from pipeline.evaluation.timing.timed_rounds import stage
    from pipeline.evaluation.timing.statistics import time_calls
    out = {}
    for task in tasks.values():
        impls = [i for i in task.implementations if i.format in ("c2cuda", "light")]
        if not impls:
            continue
        try:
            group = ev.prepare_group(task)
        except Exception as e:  # noqa: BLE001 - a benchmark row, not a verdict
            print(f"single-call {task.id}: {e}", flush=True)
            continue
        try:
            def runner(code: str, fmt: str):
                return in_process_runner(ev, task, group, code, fmt)
            base = runner(task.baseline().code, "c2cuda") if task.kind == "c2cuda" else None
            ev.driver.make_current()
            per_impl: dict[str, dict] = {i.name: {} for i in impls}
            for ci, cd in enumerate(group.configs):
                if not cd.time:
                    continue
                fresh = cd.fresh(12345 + ci)
                stage(ev.driver, group, [cd.slots[0]], [fresh])
                ev.driver.synchronize()

                def timed(call) -> float:
                    return statistics.median(time_calls(ev.driver, call, ev.flush_ptr, ev.cfg.l2_flush_bytes,
                                                        3, trials, 5.0))
                if base is not None:
                    base_ms = timed(lambda: base.call(ci, 0))
                else:
                    ref_set = cd.reference_copy(fresh)
                    base_ms = timed(lambda: cd.run_reference(ref_set))
                for impl in impls:
                    r = runner(impl.code, impl.format)
                    per_impl[impl.name][cd.name] = {"median_ms": timed(lambda: r.call(ci, 0)), "baseline_ms": base_ms}
            for name, configs in per_impl.items():
                logs = [math.log(c["baseline_ms"] / c["median_ms"]) for c in configs.values()]
                out[f"{task.id}/{name}"] = {"speedup": math.exp(sum(logs) / len(logs)) if logs else None,
                                            "configs": configs}
        except Exception as e:  # noqa: BLE001
            print(f"single-call {task.id}: {type(e).__name__}: {e}", flush=True)
        finally:
            ev.release_group(group)
    return out


def stability(ev, tasks, runs: int) -> list:
    out = []
    for task_id, impl_name in STABILITY:
        task = tasks[task_id]
        impl = next(i for i in task.implementations if i.name == impl_name)
        medians: dict[str, list[float]] = {}
        speedups: list[float] = []
        # a comment makes each evaluation a new candidate (no result reuse); compiled all at once first
        cands = [Candidate(task_id=task.id, code=impl.code + f"\n// run {k}\n", format=impl.format) for k in range(runs)]
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(10) as pool:
            list(pool.map(lambda c: ev.gate_and_compile(task, c, None), cands))
        for cand in cands:
            r = ev.evaluate(task, [cand])[0]
            assert r.verdict == "correct", r.reason
            speedups.append(r.speedup)
            for c in r.configs:
                if c.time is not None:
                    medians.setdefault(c.name, []).append(c.time.median_ms)
        out.append({"task": task_id, "implementation": impl_name, "configs": {
            name: {"medians_ms": m, "median_ms": statistics.median(m), "spread_pct": 100 * (max(m) / min(m) - 1)}
            for name, m in medians.items()},
            "speedups": speedups, "speedup_spread_pct": 100 * (max(speedups) / min(speedups) - 1)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--before", default=str(ROOT / "benchmarks/results/v1/evaluator_h200.json"))
    ap.add_argument("--stability-runs", type=int, default=10, help="separate evaluations per stability kernel (0: none)")
    ap.add_argument("--skip-single-call", action="store_true", help="leave out the conventional single-call measurement")
    args = ap.parse_args()
    from pipeline.evaluation.evaluator import Evaluator
    tasks = {t.id: t for t in load_tasks("builtin")}
    ev = Evaluator(EvalSection(result_cache_dir=""), CompileSection(cache_dir=tempfile.mkdtemp()), use_gpu=True)
    t0 = time.perf_counter()
    precompile(ev, tasks)
    print(f"gate and compile: {time.perf_counter() - t0:.0f} s", flush=True)
    after = honest(ev, tasks, partial=Path(args.out))
    wall = time.perf_counter() - t0
    before = json.loads(Path(args.before).read_text()) if args.before else {}
    # the evaluator benchmark's JSON, or another run of this script (an earlier evaluator on the same GPU)
    before = before["ours_one_worker"]["per_candidate"] if "ours_one_worker" in before else before.get("per_candidate", {})
    compare = {}
    for key, r in after.items():
        b = before.get(key, {}).get("speedup")
        if b and r["speedup"]:
            compare[key] = {"before": b, "after": r["speedup"], "ratio": r["speedup"] / b}
    single = {} if args.skip_single_call else single_call(ev, tasks)
    for key, r in after.items():
        s = single.get(key)
        if s and s["speedup"] and r["speedup"]:
            compare.setdefault(key, {}).update(single=s["speedup"], ratio_single=r["speedup"] / s["speedup"], configs={
                n: {"candidate_trusted_over_single": c["median_ms"] / s["configs"][n]["median_ms"],
                    "baseline_trusted_over_single": c["baseline_ms"] / s["configs"][n]["baseline_ms"]}
                for n, c in r["configs"].items() if n in s["configs"]})
    ratios = [c["ratio"] for c in compare.values() if "ratio" in c]
    singles = [c["ratio_single"] for c in compare.values() if "ratio_single" in c]
    from pipeline.evaluation.evaluator import EVALUATOR_VERSION
    report = {"machine": machine(), "evaluator_version": EVALUATOR_VERSION, "candidates": len(after), "wall_s": wall,
              "candidates_per_minute": 60 * len(after) / wall,
              "verdicts": {v: sum(r["verdict"] == v for r in after.values()) for v in {r["verdict"] for r in after.values()}},
              "per_candidate": after, "before_after": compare,
              "ratio_summary": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
                                "within_3pct": sum(abs(r - 1) <= 0.03 for r in ratios),
                                "within_10pct": sum(abs(r - 1) <= 0.10 for r in ratios), "n": len(ratios)}
              if ratios else {},
              "single_call": single,
              "ratio_single_summary": {"median": statistics.median(singles), "min": min(singles),
                                       "max": max(singles), "within_3pct": sum(abs(r - 1) <= 0.03 for r in singles),
                                       "within_10pct": sum(abs(r - 1) <= 0.10 for r in singles), "n": len(singles)}
              if singles else {},
              "stability": []}
    Path(args.out).write_text(json.dumps(report, indent=1))  # written now, so a later timeout loses nothing
    report["stability"] = stability(ev, tasks, args.stability_runs) if args.stability_runs > 0 else []
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(f"{'candidate':48s} {'verdict':10s} {'before':>8s} {'after':>8s} {'ratio':>6s} {'single':>8s} "
          f"{'t/s':>6s} {'cand t/s':>17s} {'base t/s':>17s} {'calls':>5s}")
    for key, r in after.items():
        c = compare.get(key, {})
        calls = ",".join(str(v["calls_per_batch"]) for v in r["configs"].values())
        per = c.get("configs", {}).values()
        cand_ts = ",".join(f"{v['candidate_trusted_over_single']:.3f}" for v in per)
        base_ts = ",".join(f"{v['baseline_trusted_over_single']:.3f}" for v in per)
        print(f"{key:48s} {r['verdict']:10s} {c.get('before', 0):8.3f} {r['speedup'] or 0:8.3f} "
              f"{c.get('ratio', 0):6.3f} {c.get('single', 0):8.3f} {c.get('ratio_single', 0):6.3f} "
              f"{cand_ts:>17s} {base_ts:>17s} {calls:>5s}")
    print("ratio after/before:", json.dumps(report["ratio_summary"]))
    print("ratio trusted/single-call:", json.dumps(report["ratio_single_summary"]))
    for s in report["stability"]:
        for name, c in s["configs"].items():
            print(f"stability {s['task']}/{s['implementation']} {name}: median {c['median_ms']:.4f} ms, "
                  f"spread {c['spread_pct']:.2f} %")
        print(f"stability {s['task']}/{s['implementation']} speedup: spread {s['speedup_spread_pct']:.2f} % "
              f"over {len(s['speedups'])} evaluations")
    print(f"wrote {args.out}: {len(after)} candidates in {wall:.0f} s ({report['candidates_per_minute']:.1f}/min)")


if __name__ == "__main__":
    main()
