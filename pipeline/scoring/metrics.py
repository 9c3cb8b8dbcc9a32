"""Benchmark arithmetic: per-sample outcomes in, correctness, fast_p, speedups, pass@k and turn curves out.

Pure functions over `Outcome` records (one per evaluated sample and turn), tested by hand-checked
numbers; `cudaperf bench` (scoring/bench.py) builds the outcomes and writes what these return.

Definitions (KernelBench's, extended to several samples per task):
- correct: the verdict is `correct`. `not_executed` (compiled where no GPU ran it) is never correct.
- evaluator failures: a result the evaluator could not reach a verdict on through its own fault
  (`evaluator_error`, `unbuilt` where the host had no compiler for it, a correct result whose speedup
  is not a finite positive number, or `not_executed` because the task's reference or baseline failed;
  see `is_evaluator_failure`) says nothing about the candidate. Such samples are counted on their own
  (`evaluator_failures`) and left out of every rate, fast_p, speedup and pass@k.
- fast_p: a sample counts when it is correct AND its speedup is strictly above p, so fast_0 is the
  correctness rate. `fast_p` is the mean over tasks of the share of a task's samples that count
  (the expected fast_p of one sample); `fast_p_best` counts a task when any of its samples does.
- speedups: over correct samples with a measured speedup; `mean` is arithmetic, `geomean` is
  exp(mean(log)). Speedup is baseline time / candidate time (the evaluator's geometric mean over
  its timing configurations).
- pass@k: the unbiased estimator of Chen et al. (2021), 1 - C(n-c, k) / C(n, k), per task with n
  samples of which c are correct, averaged over tasks; reported for k <= n.
- per-turn curves (multi-turn episodes): at turn t, a sample's state is the best of its turns
  1..t (an episode that stopped early keeps its last state), so the curves never fall.
- intervals: percentile bootstrap over tasks (a task's samples stay together), 95 % by default;
  a difference between two arms on the same tasks draws the same tasks for both (`paired_difference`).
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

FAST_P_THRESHOLDS = (0.0, 1.0, 1.5, 2.0)
# Verdicts of a candidate that compiled, and of one that ran on a GPU. `rejected` is in neither
# list: whether a rejected candidate compiled or ran depends on the stage that rejected it
# (`Outcome.compiled` / `Outcome.executed` carry the answer for each sample).
COMPILED_VERDICTS = ("not_executed", "runtime_error", "timeout", "incorrect", "correct")
EXECUTED_VERDICTS = ("runtime_error", "timeout", "incorrect", "correct")
# Verdicts that say nothing of the candidate (the evaluator's own failure; `unbuilt`: no compiler for it
# on the host), and the reason prefixes the evaluator puts before the cause of a `not_executed`
# (evaluator.py, runner.py).
EVALUATOR_ERROR_VERDICTS = ("evaluator_error", "unbuilt")
_NOT_EXECUTED_PREFIXES = ("compiled but not run: ", "checked, but not timed: ")


def is_evaluator_failure(verdict: str, reason: str) -> bool:
    """Whether a result is the evaluator's failure rather than the candidate's: `evaluator_error`, or
    `not_executed` whose cause names the task or its reference (the evaluator's TaskBroken: our data
    or harness failed). A `not_executed` for want of a GPU is not a failure of either kind."""
    if verdict in EVALUATOR_ERROR_VERDICTS:
        return True
    if verdict != "not_executed":
        return False
    cause = reason
    for prefix in _NOT_EXECUTED_PREFIXES:
        if cause.startswith(prefix):
            cause = cause[len(prefix):]
    return cause.startswith("task ") or "reference" in cause or cause.startswith("the evaluator's own")


@dataclass(frozen=True)
class Outcome:
    """One evaluated turn of one sample. `speedup`: against the suite's baseline (eager PyTorch or
    the naive CUDA version), None unless correct and timed; `speedup_compiled`: against
    torch.compile, None where it was not measured; `evaluator_failure`: the evaluator, not the
    candidate, failed (is_evaluator_failure)."""
    task_id: str
    sample: int
    turn: int
    verdict: str
    speedup: float | None = None
    speedup_compiled: float | None = None
    compiled: bool = False
    executed: bool = False
    evaluator_failure: bool = False

    @property
    def correct(self) -> bool:
        return self.verdict == "correct"


def geomean(values: Iterable[float]) -> float | None:
    """Geometric mean of positive numbers; None for none. A non-positive value is a bug."""
    vals = list(values)
    if not vals:
        return None
    if any(v <= 0 or not math.isfinite(v) for v in vals):
        raise ValueError(f"geomean needs positive finite values, got {vals}")
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task: n samples, c of them correct (Chen et al. 2021)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):  # C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k / i)
        prod *= 1.0 - k / i
    return 1.0 - prod


def counts(outcome: Outcome, p: float, baseline: str = "speedup") -> bool:
    """Whether a sample counts towards fast_p: correct and speedup (of `baseline`) strictly above p."""
    s = getattr(outcome, baseline)
    return outcome.correct and s is not None and s > p


def by_task(outcomes: Iterable[Outcome]) -> dict[str, list[Outcome]]:
    """Outcomes grouped by task id, in first-seen order."""
    groups: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        groups[o.task_id].append(o)
    return dict(groups)


def fast_p(outcomes: Sequence[Outcome], p: float, baseline: str = "speedup") -> tuple[float, float]:
    """(fast_p, fast_p_best) over the tasks in `outcomes` (one outcome per sample; module docstring)."""
    groups = by_task(outcomes)
    if not groups:
        return 0.0, 0.0
    mean_share = sum(sum(counts(o, p, baseline) for o in g) / len(g) for g in groups.values()) / len(groups)
    best = sum(any(counts(o, p, baseline) for o in g) for g in groups.values()) / len(groups)
    return mean_share, best


def speedup_stats(outcomes: Sequence[Outcome], baseline: str = "speedup") -> dict:
    """Mean and geometric mean speedup over correct samples that have one, and how many there were."""
    values = [getattr(o, baseline) for o in outcomes if o.correct and getattr(o, baseline) is not None]
    return {"n": len(values), "mean": (sum(values) / len(values)) if values else None, "geomean": geomean(values)}


def pass_at_ks(outcomes: Sequence[Outcome]) -> dict[str, float]:
    """pass@k averaged over tasks for k = 1, 2, 4, ... up to the fewest samples any task has."""
    groups = by_task(outcomes)
    if not groups:
        return {}
    n_min = min(len(g) for g in groups.values())
    ks = [k for k in (1, 2, 4, 8, 16, 32, 64, 128) if k <= n_min]
    if n_min not in ks:
        ks.append(n_min)
    return {f"pass@{k}": sum(pass_at_k(len(g), sum(o.correct for o in g), k) for g in groups.values()) / len(groups)
            for k in ks}


def judged(outcomes: Iterable[Outcome]) -> list[Outcome]:
    """The outcomes that carry a verdict on the candidate (evaluator failures left out)."""
    return [o for o in outcomes if not o.evaluator_failure]


def verdict_counts(outcomes: Iterable[Outcome]) -> dict[str, int]:
    counts_: dict[str, int] = defaultdict(int)
    for o in outcomes:
        counts_[o.verdict] += 1
    return dict(sorted(counts_.items()))


def summarize(outcomes: Sequence[Outcome]) -> dict:
    """Every headline number for one sample per (task, sample) outcome (one turn each). `tasks` counts
    every task; `samples` and every rate only the judged samples (module docstring)."""
    failed = [o for o in outcomes if o.evaluator_failure]
    all_tasks = len(by_task(outcomes))
    outcomes = judged(outcomes)
    n = len(outcomes)
    summary = {
        "tasks": all_tasks, "samples": n, "verdicts": verdict_counts(outcomes),
        "evaluator_failures": {"samples": len(failed), "verdicts": verdict_counts(failed),
                               "tasks_without_verdict": all_tasks - len(by_task(outcomes))},
        "compile_rate": sum(o.compiled for o in outcomes) / n if n else 0.0,
        "execute_rate": sum(o.executed for o in outcomes) / n if n else 0.0,
        "correct_rate": sum(o.correct for o in outcomes) / n if n else 0.0,
        "fast_p": {}, "fast_p_best": {},
        "speedup": speedup_stats(outcomes),
        "pass_at_k": pass_at_ks(outcomes),
    }
    for p in FAST_P_THRESHOLDS:
        summary["fast_p"][f"{p:g}"], summary["fast_p_best"][f"{p:g}"] = fast_p(outcomes, p)
    if any(o.speedup_compiled is not None for o in outcomes):
        summary["speedup_compiled"] = speedup_stats(outcomes, "speedup_compiled")
        summary["fast_p_compiled"] = {f"{p:g}": fast_p(outcomes, p, "speedup_compiled")[0]
                                      for p in FAST_P_THRESHOLDS}
    return summary


def final_outcomes(outcomes: Sequence[Outcome], upto_turn: int | None = None) -> list[Outcome]:
    """Per (task, sample), the best turn among turns <= upto_turn (all turns when None).

    Best: correct beats everything, then the higher speedup; then executed, then compiled; ties
    go to the later turn. A turn the evaluator failed on ranks below any judged turn."""
    def rank(o: Outcome) -> tuple:
        return (o.correct, o.speedup if o.speedup is not None else -1.0, not o.evaluator_failure, o.executed,
                o.compiled, o.turn)
    best: dict[tuple[str, int], Outcome] = {}
    for o in outcomes:
        if upto_turn is not None and o.turn > upto_turn:
            continue
        key = (o.task_id, o.sample)
        if key not in best or rank(o) > rank(best[key]):
            best[key] = o
    return list(best.values())


def turn_curves(outcomes: Sequence[Outcome]) -> list[dict]:
    """Per turn t (0-based turn index, reported 1-based), the headline numbers of the best-so-far
    states (judged samples only: a sample whose every turn so far failed in the evaluator is left out)."""
    if not outcomes:
        return []
    curves = []
    for t in range(max(o.turn for o in outcomes) + 1):
        states = judged(final_outcomes(outcomes, upto_turn=t))
        n = len(states) or 1  # no judged sample yet: every rate is 0
        entry = {"turn": t + 1, "correct_rate": sum(o.correct for o in states) / n,
                 "execute_rate": sum(o.executed for o in states) / n,
                 "compile_rate": sum(o.compiled for o in states) / n,
                 "samples_with_this_turn": sum(o.turn == t for o in outcomes)}
        for p in FAST_P_THRESHOLDS:
            entry[f"fast_{p:g}"] = fast_p(states, p)[0]
        entry["geomean_speedup"] = speedup_stats(states)["geomean"]
        curves.append(entry)
    return curves


# ---- intervals over tasks --------------------------------------------------------------------------

def resample_tasks(outcomes: Sequence[Outcome], rng) -> list[Outcome]:
    """One bootstrap sample: as many tasks as there are, drawn with replacement, each drawn copy with all its
    outcomes under a task id of its own (so a task drawn twice counts twice in every per-task mean)."""
    tasks = by_task(outcomes)
    return _outcomes_of(tasks, _draw(sorted(tasks), rng))


def _draw(ids: list[str], rng) -> list[str]:
    """As many task ids as there are, drawn from them with replacement."""
    return [ids[rng.randrange(len(ids))] for _ in ids]


def _outcomes_of(tasks: dict[str, list[Outcome]], drawn: list[str]) -> list[Outcome]:
    """The outcomes of the drawn tasks, each drawn copy under a task id of its own."""
    return [o for k, t in enumerate(drawn) for o in _renamed(tasks[t], k)]


def _percentiles(values: list[float], level: float) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    ordered = sorted(values)
    lo = ordered[int(math.floor((1 - level) / 2 * (len(ordered) - 1)))]
    hi = ordered[int(math.ceil((1 + level) / 2 * (len(ordered) - 1)))]
    return lo, hi


def task_intervals(outcomes: Sequence[Outcome], statistics: dict, resamples: int = 2000, seed: int = 0,
                   level: float = 0.95) -> dict[str, dict]:
    """For each named statistic (a function of a list of outcomes), its value and percentile bootstrap interval
    over tasks: {name: {"value", "low", "high"}}; one draw of tasks per resample serves every statistic. A
    resample where a statistic is None (no correct sample, say) is left out of its interval."""
    import random
    rng = random.Random(seed)
    draws: dict[str, list[float]] = {name: [] for name in statistics}
    for _ in range(resamples):
        sample = resample_tasks(outcomes, rng)
        for name, stat in statistics.items():
            v = stat(sample)
            if v is not None:
                draws[name].append(v)
    out = {}
    for name, stat in statistics.items():
        low, high = _percentiles(draws[name], level)
        out[name] = {"value": stat(list(outcomes)), "low": low, "high": high}
    return out


def task_interval(outcomes: Sequence[Outcome], statistic, resamples: int = 2000, seed: int = 0,
                  level: float = 0.95) -> dict:
    """`statistic(outcomes)` and its percentile bootstrap interval over tasks: {"value", "low", "high"}."""
    return task_intervals(outcomes, {"s": statistic}, resamples, seed, level)["s"]


def paired_difference(a: Sequence[Outcome], b: Sequence[Outcome], statistic, resamples: int = 2000, seed: int = 0,
                      level: float = 0.95) -> dict:
    """statistic(a) - statistic(b) for two arms judged on the same tasks, and its bootstrap interval with
    the same tasks drawn for both arms in each resample (so task difficulty cancels). Tasks only one arm
    has are left out. {"value", "low", "high", "tasks"}."""
    import random
    ta, tb = by_task(a), by_task(b)
    shared = sorted(set(ta) & set(tb))

    def diff(ids: list[str]) -> float | None:
        sa, sb = statistic(_outcomes_of(ta, ids)), statistic(_outcomes_of(tb, ids))
        return None if sa is None or sb is None else sa - sb
    rng = random.Random(seed)
    draws = [v for v in (diff(_draw(shared, rng)) for _ in range(resamples)) if v is not None] if shared else []
    low, high = _percentiles(draws, level)
    return {"value": diff(shared) if shared else None, "low": low, "high": high, "tasks": len(shared)}


def _renamed(outcomes: list[Outcome], k: int) -> list[Outcome]:
    from dataclasses import replace
    return [replace(o, task_id=f"{o.task_id}#{k}") for o in outcomes]


# ---- ParEval's numbers -------------------------------------------------------------------------------
# As ParEval's analysis/metrics.py computes them, per problem, then averaged over the problems of each problem
# type (a problem without a valid sample has no speedup or efficiency and is left out of that average):
# - pass@k: the unbiased estimator above over every sample of the problem (`pass_at_k`).
# - speedup_n@k: over the problem's valid samples only, runtimes sorted ascending (fastest first),
#   sum_j C(j-1, k-1) / C(N, k) * T_serial / T_j with N the valid samples, T_serial the best sequential time,
#   and C(a, b) taken as 1 when a < b (ParEval's nCr). k = 1 gives the mean speedup of the valid samples.
#   For k > 1 the terms j >= k are the expected speedup of the slowest of k samples drawn from the valid
#   ones, and each of the j < k terms adds its speedup / C(N, k) on top (from nCr's 1); for N <= k every
#   term has weight 1 (the sum of the speedups). Runtimes below 1e-8 count as 1e-8. These are ParEval's
#   own conventions, kept so that numbers compare with its published ones.
# - efficiency_n@k: the same sum with each T_j multiplied by the sample's resources; for CUDA ParEval
#   takes the problem size (the number of threads the driver launches at least).

def _pareval_comb(a: int, b: int) -> int:
    return 1 if a < b else math.comb(a, b)


def pareval_speedup_at_k(runtimes: Sequence[float], serial_runtime: float, k: int,
                         resources: Sequence[float] | None = None) -> float | None:
    """ParEval's speedup@k of one problem from its valid samples' runtimes (efficiency@k with `resources`,
    one per runtime); None without a valid sample."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if not runtimes:
        return None
    pairs = sorted(zip(runtimes, resources if resources is not None else [1.0] * len(runtimes)),
                   key=lambda p: p[0])
    n = len(pairs)
    return sum(_pareval_comb(j - 1, k - 1) * serial_runtime / (_pareval_comb(n, k) * max(t, 1e-8) * r)
               for j, (t, r) in enumerate(pairs, 1))


@dataclass
class ParEvalProblem:
    """One problem's samples for ParEval's numbers: per sample, valid or not and its runtime (seconds,
    None where it did not run); the best sequential runtime; the problem size (CUDA's resources)."""
    name: str
    problem_type: str
    valid: list[bool]
    runtimes: list[float | None]
    serial_runtime: float
    problem_size: int


def pareval_metrics(problems: Sequence[ParEvalProblem], ks: Sequence[int] = (1, 5, 10)) -> dict:
    """pass@k, speedup@k and efficiency@k (module notes above) per problem type and over all problems
    ('all': the mean over problems, each type's weight its number of problems). pass@k of a problem with
    fewer than k samples is left out (ParEval's estimator reports 1.0 there, whatever the samples did)."""
    per_type: dict[str, list[ParEvalProblem]] = defaultdict(list)
    for p in problems:
        if len(p.valid) != len(p.runtimes):
            raise ValueError(f"problem {p.name}: {len(p.valid)} validity flags for {len(p.runtimes)} runtimes")
        per_type[p.problem_type].append(p)
    per_type["all"] = list(problems)
    out: dict[str, dict] = {}
    for ptype, group in sorted(per_type.items()):
        row: dict[str, float | None] = {"problems": float(len(group))}
        for k in ks:
            passes = [pass_at_k(len(p.valid), sum(p.valid), k) for p in group if len(p.valid) >= k]
            row[f"pass@{k}"] = sum(passes) / len(passes) if passes else None
            for name, with_resources in (("speedup", False), ("efficiency", True)):
                vals = []
                for p in group:
                    times = [t for ok, t in zip(p.valid, p.runtimes) if ok and t is not None]
                    v = pareval_speedup_at_k(times, p.serial_runtime, k,
                                             [float(p.problem_size)] * len(times) if with_resources else None)
                    if v is not None:
                        vals.append(v)
                row[f"{name}@{k}"] = sum(vals) / len(vals) if vals else 0.0  # ParEval fills a type without any: 0
        out[ptype] = row
    return out
