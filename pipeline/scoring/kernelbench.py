"""KernelBench's own file formats: our results out as `eval_results.json`, its published baseline times in.

In: the EvalResult of each (task, sample) of a `cudaperf bench --suite kernelbench` run (its best
turn, as the summary counts it; None for a missing answer) with its Outcome; a KernelBench baseline timing JSON
(`results/timing/<hardware>/baseline_time_torch.json` or a `baseline_time_torch_compile_*.json`).
Out: per level, the dict KernelBench's `scripts/eval_from_generations.py` writes and
`scripts/benchmark_eval_analysis.py` reads, and the comparison of our samples with a published
baseline. Touches only the files it is asked to write.

eval_results.json (one file per level, as KernelBench runs one level per run):
    {"<problem id>": [{"sample_id": 0, "compiled": bool, "correctness": bool, "metadata": {...},
                       "runtime": ms or -1.0, "runtime_stats": {...} or {}}, ...], ...}
keys in problem-id order, samples in sample order. `runtime` is the median time (ms) of the timing
configuration when the sample is correct, -1.0 otherwise (KernelBench: the mean of its trials).
`runtime_stats` keeps KernelBench's keys (mean, std, min, max, num_trials, hardware) with what our
evaluator measures: mean holds the median, std the IQR / 1.349, max is not recorded (null);
`statistic` says so. `metadata` holds KernelBench's keys where one fits (compilation_error,
runtime_error, correctness_issue, correctness_trials, hardware) and ours (`cudaperf_verdict`,
`cudaperf_reason`, live speedups, `peak_memory_bytes`). A result the evaluator itself failed on
(metrics.is_evaluator_failure) is written not correct with `evaluator_error` in its metadata:
KernelBench's analysis counts every problem of the level as not correct unless it passed, so only
our own summary can leave it out. Answers that were missing get no entry (the analysis patches
those in as failures itself).
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

from pipeline.scoring.metrics import Outcome, fast_p, speedup_stats
from pipeline.core.errors import UserError
from pipeline.core.records import ConfigResult, EvalResult, Timing

# The thresholds KernelBench's benchmark_eval_analysis.py reports.
KERNELBENCH_P_VALUES = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
BASELINE_VARIANT = "baseline_time_torch"
_TASK_ID = re.compile(r"kernelbench/level(\d+)/((\d+)_.*)")
_IQR_PER_STD = 1.349  # IQR of a normal distribution, in standard deviations


class BaselineError(UserError, ValueError):
    """A baseline timing file that cannot be used; the message names the problem and the fix."""


def problem_of(task_id: str) -> tuple[int, int, str] | None:
    """(level, problem id, KernelBench file name) of a task id 'kernelbench/level1/19_ReLU'; None otherwise."""
    m = _TASK_ID.fullmatch(task_id)
    return (int(m.group(1)), int(m.group(3)), f"{m.group(2)}.py") if m else None


def timed_config(result: EvalResult) -> ConfigResult | None:
    """The timing configuration's result (the one named 'timing', else the first timed one)."""
    timed = [c for c in result.configs if c.time is not None]
    return next((c for c in timed if c.name == "timing"), timed[0] if timed else None)


def runtime_stats(timing: Timing, hardware: str) -> dict:
    """KernelBench's runtime_stats keys filled from our Timing (module docstring)."""
    return {"mean": timing.median_ms, "std": timing.iqr_ms / _IQR_PER_STD, "min": timing.min_ms, "max": None,
            "num_trials": timing.trials, "hardware": hardware, "median": timing.median_ms, "iqr": timing.iqr_ms,
            "statistic": "mean holds cudaperf's median over timed calls, std its IQR / 1.349; max is not recorded"}


def _trials(result: EvalResult) -> str:
    checked = [c for c in result.configs if c.passed is not None]
    return f"({sum(bool(c.passed) for c in checked)} / {len(checked)})"


def eval_entry(result: EvalResult, outcome: Outcome) -> dict:
    """One KernelBench eval_results entry for one sample (module docstring)."""
    verdict, reason = result.verdict, result.reason
    meta: dict = {"hardware": result.gpu, "cudaperf_verdict": verdict, "cudaperf_reason": reason[:2000],
                  "candidate_hash": result.candidate_hash}
    peak = getattr(result, "peak_memory_bytes", None)
    if peak is not None:
        meta["peak_memory_bytes"] = peak
    if outcome.evaluator_failure:
        meta["evaluator_error"] = reason
        meta["excluded_from_cudaperf_summary"] = True
    elif verdict in ("compile_error", "format_error"):
        meta["compilation_error_name"] = f"cudaperf.{verdict}"
        meta["compilation_error"] = (result.compile_log or reason)[-4000:]
    elif verdict == "rejected":
        meta["rejected"] = reason
        meta["rejected_rules"] = list(result.flags)
    elif verdict == "runtime_error":
        meta["runtime_error_name"] = "cudaperf.runtime_error"
        meta["runtime_error"] = reason
    elif verdict == "timeout":
        meta["timeout"] = reason
    elif verdict == "incorrect":
        meta["correctness_issue"] = reason
        meta["correctness_trials"] = _trials(result)
    elif verdict == "not_executed":
        meta["not_executed"] = reason
    elif verdict == "correct":
        meta["correctness_trials"] = _trials(result)
    entry = {"sample_id": outcome.sample, "compiled": bool(outcome.compiled), "correctness": verdict == "correct",
             "metadata": meta, "runtime": -1.0, "runtime_stats": {}}
    timed = timed_config(result)
    if timed is not None and timed.baseline_time is not None:
        meta["ref_runtime"] = timed.baseline_time.median_ms
    if result.speedup is not None:
        meta["speedup_vs_live_eager"] = result.speedup
    if result.speedup_compiled is not None:
        meta["speedup_vs_live_torch_compile"] = result.speedup_compiled
    if verdict == "correct" and timed is not None:
        entry["runtime"] = timed.time.median_ms
        entry["runtime_stats"] = runtime_stats(timed.time, result.gpu)
    return entry


def eval_results_by_level(selected: list[tuple[EvalResult | None, Outcome]]) -> dict[int, dict[str, list[dict]]]:
    """Per level, the eval_results.json dict of the KernelBench tasks among `selected` (one pair per
    task and sample); other tasks and missing answers are left out (a level whose every answer is
    missing gets an empty dict)."""
    levels: dict[int, dict[int, list[dict]]] = {}
    for result, outcome in selected:
        key = problem_of(outcome.task_id)
        if key is None:
            continue
        problems = levels.setdefault(key[0], {})  # a level of the run gets its file even when all are missing
        if result is not None:
            problems.setdefault(key[1], []).append(eval_entry(result, outcome))
    return {lv: {str(pid): sorted(entries, key=lambda e: e["sample_id"]) for pid, entries in sorted(probs.items())}
            for lv, probs in sorted(levels.items())}


def write_eval_results(out_dir: Path, by_level: dict[int, dict]) -> dict[int, Path]:
    """out_dir/eval_results.json for a one-level run; out_dir/kernelbench_level<L>/eval_results.json per
    level otherwise (KernelBench's analysis reads <eval_results_dir>/<run_name>/eval_results.json)."""
    written = {}
    for lv, results in by_level.items():
        folder = out_dir if len(by_level) == 1 else out_dir / f"kernelbench_level{lv}"
        path = folder / "eval_results.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=2))
        written[lv] = path
    return written


# ---- published baseline times -----------------------------------------------------------------------

@dataclass(frozen=True)
class BaselineTimes:
    """A KernelBench baseline timing file: times[level key][problem file name] is its runtime_stats
    ({mean, std, min, max, num_trials, hardware, device}, ms) or None where KernelBench recorded none.
    `hardware` is the results/timing directory name (e.g. H100_Modal), `gpu` the device name inside."""
    path: str
    hardware: str
    gpu: str
    variant: str
    times: dict[str, dict[str, dict | None]]

    def mean_ms(self, level: int, file_name: str) -> float | None:
        stats = self.times.get(f"level{level}", {}).get(file_name)
        return stats["mean"] if stats else None


def _baseline_file(path: Path, hardware: str | None, variant: str) -> Path:
    """The JSON file a file, a hardware directory, a results/timing directory or a checkout names."""
    if path.is_file():
        return path
    if not path.is_dir():
        raise BaselineError(f"baseline timing '{path}' does not exist; pass a KernelBench "
                            f"results/timing/<hardware>/{variant}.json file or a directory holding one.")
    if (path / f"{variant}.json").is_file():
        return path / f"{variant}.json"
    timing = next((d for d in (path / "results" / "timing", path / "timing", path) if d.is_dir()
                   and any(d.glob(f"*/{variant}.json"))), None)
    if timing is None:
        raise BaselineError(f"baseline timing directory '{path}' holds no {variant}.json (directly, per hardware, "
                            f"or under results/timing/); pass the JSON file itself.")
    found = sorted(p.parent.name for p in timing.glob(f"*/{variant}.json"))
    if hardware is None:
        if len(found) == 1:
            return timing / found[0] / f"{variant}.json"
        raise BaselineError(f"baseline timing directory '{timing}' has {variant}.json for several hardware "
                            f"({', '.join(found)}); pick one with --baseline-hardware NAME (the `hardware` argument).")
    if hardware not in found:
        raise BaselineError(f"baseline timing directory '{timing}' has no {variant}.json for hardware '{hardware}'; "
                            f"use one of {', '.join(found)}.")
    return timing / hardware / f"{variant}.json"


def load_baseline_times(path_or_dir: str | Path, hardware: str | None = None,
                        variant: str = BASELINE_VARIANT) -> BaselineTimes:
    """A KernelBench baseline timing file (layout {"level1": {"19_ReLU.py": {"mean": ms, ...}}}), from
    the file itself, its hardware directory, a results/timing directory or a KernelBench checkout
    (`hardware` picks among several, `variant` the file: baseline_time_torch or e.g.
    baseline_time_torch_compile_inductor_default). Raises BaselineError with the fix."""
    path = _baseline_file(Path(path_or_dir).expanduser(), hardware, variant)
    try:
        raw = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise BaselineError(f"baseline timing file '{path}' cannot be read ({e}); pass a readable JSON file.") from None
    except json.JSONDecodeError as e:
        raise BaselineError(f"baseline timing file '{path}' is not JSON (line {e.lineno}: {e.msg}); pass a "
                            f"KernelBench results/timing/<hardware>/*.json file.") from None
    if not isinstance(raw, dict) or not raw or not all(re.fullmatch(r"level\d+", str(k)) for k in raw):
        raise BaselineError(f"baseline timing file '{path}' is not in KernelBench's layout (top-level keys "
                            f"'level1', 'level2', ...); pass a results/timing/<hardware>/*.json file.")
    problems = []
    for level, entries in raw.items():
        if not isinstance(entries, dict):
            problems.append(f"{level} is not an object of problem files")
            continue
        for name, stats in entries.items():
            if stats is None:
                continue
            mean = stats.get("mean") if isinstance(stats, dict) else None
            if not isinstance(mean, (int, float)) or not math.isfinite(mean) or mean <= 0:
                problems.append(f"{level}/{name} has no positive 'mean' time")
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise BaselineError(f"baseline timing file '{path}' has unusable entries ({shown}); fix or regenerate it "
                            f"with KernelBench's scripts/generate_baseline_time.py.")
    gpu = next((st.get("hardware", "") for e in raw.values() for st in e.values() if st), "")
    return BaselineTimes(path=str(path), hardware=hardware or path.parent.name, gpu=str(gpu), variant=path.stem,
                         times=raw)


def published_comparison(selected: list[tuple[EvalResult | None, Outcome]], baseline: BaselineTimes) -> dict:
    """Per KernelBench problem, the published baseline time beside our live-measured one and each
    sample's speedup against it (published mean / our candidate median); fast_p, fast_p_best and
    speedups against it over the judged samples (missing answers count, as in the summary) of the
    problems that have a published time."""
    problems: dict[str, dict] = {}
    outcomes = []
    for result, outcome in selected:
        key = problem_of(outcome.task_id)
        if key is None:
            continue
        level, pid, name = key
        published = baseline.mean_ms(level, name)
        row = problems.setdefault(outcome.task_id, {"task": outcome.task_id, "level": level, "problem_id": pid,
                                                    "file": name, "published_ms": published, "live_baseline_ms": None,
                                                    "live_over_published": None, "samples": []})
        timed = timed_config(result) if result is not None else None
        if timed is not None and timed.baseline_time is not None and row["live_baseline_ms"] is None:
            row["live_baseline_ms"] = timed.baseline_time.median_ms
            if published:
                row["live_over_published"] = timed.baseline_time.median_ms / published
        runtime = timed.time.median_ms if timed is not None and timed.time is not None else None
        speedup = published / runtime if published and runtime and outcome.correct else None
        row["samples"].append({"sample": outcome.sample, "verdict": outcome.verdict, "runtime_ms": runtime,
                               "speedup_published": speedup, "speedup_live": outcome.speedup})
        if published and not outcome.evaluator_failure:
            outcomes.append(replace(outcome, speedup=speedup, speedup_compiled=None))
    fast = {f"{p:g}": fast_p(outcomes, p) for p in KERNELBENCH_P_VALUES}
    return {"file": baseline.path, "hardware": baseline.hardware, "gpu": baseline.gpu, "variant": baseline.variant,
            "problems_with_time": sum(r["published_ms"] is not None for r in problems.values()),
            "problems_without_time": sorted(t for t, r in problems.items() if r["published_ms"] is None),
            "fast_p": {k: v[0] for k, v in fast.items()}, "fast_p_best": {k: v[1] for k, v in fast.items()},
            "speedup": speedup_stats(outcomes), "problems": list(problems.values())}
