"""`cudaperf bench`: sample a policy (or read ready answers) on a suite, evaluate everything, report.

    cudaperf bench --model PATH --suite kernelbench|c2cuda|torch2cuda|pareval [--kernelbench-dir DIR] [--levels 1,2]
                   [--tasks SOURCE] [--turns K] [--samples N] [--limit N] [--shard K/N] [--out DIR] [--config FILE]
                   [section.key=value ...]
    cudaperf bench --answers DIR --suite ...      (score a directory of ready answers, no model)

Suites: `kernelbench` is a KernelBench checkout (pipeline.tasks.load_kernelbench; torch2cuda,
answered in the light format, or KernelBench `ModelNew` files with --answers); `c2cuda` and `torch2cuda`
are the tasks of that kind in `--tasks` (default the dataset's test split, `generated:test`;
`generated:heldout`, `builtin` and `pareval`, ParEval's problems to translate from C, work too);
`pareval` is ParEval's problems in its own form (task source `pareval:kernel`): the policy completes
the `__global__` kernel of ParEval's prompt, answers are `DIR/<problem>.cu` (e.g.
`03_dense_la_axpy.cu`), and the harness launches the kernel as ParEval's driver does
(pipeline/tasks/pareval.py); report.json adds ParEval's own numbers (`pareval_report`).
Every sample is an episode of up to `--turns` turns (rollout settings from the config: the
evaluator's feedback is the next turn's message, as in RL), evaluated by the compile and evaluator
pools (actors/cluster.py). Speedups are against the naive CUDA baseline (c2cuda) or eager PyTorch
and, for the kernelbench suite, torch.compile where it builds (`eval.compile_baseline`).
Out (--out, default run.output_dir/run.name/bench): report.json (summary: verdicts, compile,
execute and correct rates, fast_p for p = 0, 1, 1.5, 2, speedups, pass@k, evaluator failures
counted apart; per-turn curves; one row per evaluated turn; meta with the gate profile) and PNG
plots. With --answers, each task's rows are also appended to rows.partial.jsonl as they are judged
(and a progress line printed), so a run stopped early keeps its finished work. Numbers are defined
in pipeline/scoring/metrics.py. The kernelbench suite also writes
eval_results.json in KernelBench's own layout (pipeline/scoring/kernelbench.py; one file per level
under kernelbench_level<L>/ when several levels ran), and with --baseline-json FILE (a KernelBench
results/timing/<hardware>/baseline_time_torch.json, or a directory holding such files, with
--baseline-hardware to pick one) report.json's `published_baseline` gives, per problem, the published
time beside our live-measured baseline and fast_p against the published times.

Answers (--answers DIR): for task id T, the files DIR/T.cu or DIR/T.py (one sample), every file
in DIR/T/ (several samples), the same with '/' in T written '__', and for KernelBench tasks
`level_<L>_problem_<N>_sample_<S>_kernel.py` (KernelBench's own naming). A task without an answer
counts as a sample with verdict `missing`.
"""
from __future__ import annotations

import json
import math
import platform
import re
import sys
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

from pipeline.scoring.metrics import (COMPILED_VERDICTS, EXECUTED_VERDICTS, FAST_P_THRESHOLDS, Outcome,
                                    final_outcomes, is_evaluator_failure, summarize, turn_curves)
from pipeline.core.config import RunConfig
from pipeline.core.errors import UserError
from pipeline.core.lost_work import ItemFailed
from pipeline.scoring.kernelbench import (BaselineTimes, eval_results_by_level, published_comparison, write_eval_results)
from pipeline.core.records import Candidate, EvalResult, Task
from pipeline.tasks import load_candidate_file, load_kernelbench, load_tasks
from pipeline.tasks.pareval import in_kernel_form, kernel_candidate

ANSWER_SUFFIXES = (".cu", ".py")


class BenchError(UserError, ValueError):
    """A bench invocation that cannot run; the message names the problem and the fix."""


# ---- outcomes ------------------------------------------------------------------------------------

def outcome_of(result: EvalResult, sample: int, turn: int) -> Outcome:
    """The benchmark's view of one evaluation. A `rejected` candidate compiled (or ran) only when the
    evaluator got past that stage before rejecting it, which its stage times record; an evaluator
    failure compiled when the compile stage ran."""
    verdict = result.verdict
    stopped_late = verdict in ("rejected", "evaluator_error")
    compiled = verdict in COMPILED_VERDICTS or (stopped_late and "compile" in result.stage_s)
    executed = verdict in EXECUTED_VERDICTS or (verdict == "rejected" and "load" in result.stage_s)
    usable = {k: v if v is not None and math.isfinite(v) and v > 0 else None  # NaN, inf, <= 0: not a speedup
              for k, v in (("speedup", result.speedup), ("compiled", result.speedup_compiled))}
    unknown_speed = verdict == "correct" and result.speedup is not None and usable["speedup"] is None
    return Outcome(result.task_id, sample, turn, verdict, usable["speedup"], usable["compiled"], compiled, executed,
                   is_evaluator_failure(verdict, result.reason) or unknown_speed)


def outcomes_from_episodes(episodes) -> list[Outcome]:
    """One Outcome per evaluated turn of every episode (EpisodeOutcome, rollout/episodes.py)."""
    return [outcome_of(r, ep.trajectory.group_index, t) for ep in episodes for t, r in enumerate(ep.results())]


# ---- task selection ---------------------------------------------------------------------------------

def suite_tasks(suite: str, kernelbench_dir: str | None, levels: list[int], source: str, limit: int,
                split_seed: int = 0, shard: tuple[int, int] = (0, 1)) -> list[Task]:
    """The tasks of a suite (module docstring): shard K of N takes every N-th task from the K-th (in id
    order, so each shard spreads over the families), then the first `limit` of those when limit > 0."""
    if suite == "kernelbench":
        if not kernelbench_dir:
            raise BenchError("--suite kernelbench needs --kernelbench-dir DIR, a clone of "
                             "github.com/ScalingIntelligence/KernelBench")
        tasks = load_kernelbench(kernelbench_dir, levels)
    elif suite == "pareval":
        tasks = load_tasks("pareval:kernel")
    else:
        tasks = [t for t in load_tasks(source, split_seed=split_seed) if t.kind == suite]
    if not tasks:
        raise BenchError(f"suite {suite} has no tasks (source '{kernelbench_dir or source}'); point it at tasks "
                         "of that kind")
    k, n = shard
    tasks = tasks[k::n]
    return tasks[:limit] if limit > 0 else tasks


def answer_files(answers_dir: Path, task: Task) -> list[Path]:
    """The answer files of one task (module docstring), sorted."""
    found: list[Path] = []
    keys = {task.id, task.id.replace("/", "__")} | ({task.pareval.problem} if task.pareval else set())
    for key in keys:
        found += [answers_dir / f"{key}{s}" for s in ANSWER_SUFFIXES if (answers_dir / f"{key}{s}").is_file()]
        if (answers_dir / key).is_dir():
            found += [f for f in (answers_dir / key).iterdir() if f.suffix in ANSWER_SUFFIXES and f.is_file()]
    m = re.fullmatch(r"kernelbench/level(\d+)/(\d+)_.*", task.id)
    if m:
        found += answers_dir.glob(f"level_{m.group(1)}_problem_{m.group(2)}_sample_*_kernel.py")
    return sorted(set(found))


# ---- running -----------------------------------------------------------------------------------------

def run_model(cfg: RunConfig, tasks: list[Task], queue) -> list:
    """Episodes of every task with the generator `cfg.model.path` names; EpisodeOutcomes in task order."""
    from pipeline.rollout.backends import make_generator
    from pipeline.rollout.scheduler import EpisodeScheduler, ThreadQueue
    from pipeline.rollout.conversation import ChatFormat

    generator = make_generator(cfg.model, cfg.rollout, cfg.run.seed)
    try:
        with ThreadQueue(generator.generate, 1) as generation:
            scheduler = EpisodeScheduler(cfg.rollout, ChatFormat(generator.tokenizer), generator.max_model_len_tokens,
                                         generation, queue)
            episodes, _ = scheduler.run(tasks)
    finally:
        generator.close()
    return episodes


def answer_candidate(path: Path, task: Task) -> Candidate:
    """One answer file as a candidate. A ParEval problem in its own form (suite pareval): the file holds
    the kernel, which the harness launches as ParEval's driver does (`pipeline/tasks/pareval.py`)."""
    cand = load_candidate_file(path, task)
    return kernel_candidate(task, cand.code) if in_kernel_form(task) else cand


def run_answers(tasks: list[Task], answers_dir: Path, queue, progress: Path | None = None
                ) -> tuple[list[Outcome], list[dict], list[EvalResult]]:
    """Evaluate every answer file; tasks without one get a `missing` outcome (and no result). As each
    task's answers are judged, one line goes to stderr and their rows are appended to `progress`
    (JSON lines), so a run that is stopped keeps what it finished. Files become candidates by `answer_candidate`."""
    outcomes, rows, evaluated, tickets = [], [], [], {}
    t0, done = time.perf_counter(), 0
    for task in tasks:
        files = answer_files(answers_dir, task)
        if not files:
            outcomes.append(Outcome(task.id, 0, 0, "missing"))
            rows.append({"task": task.id, "sample": 0, "turn": 0, "verdict": "missing", "file": None})
            continue
        cands = [answer_candidate(f, task) for f in files]
        tickets[queue.submit(task, cands)] = (task, files)
    print(f"judging {sum(len(f) for _, f in tickets.values())} answers of {len(tickets)} tasks "
          f"(tasks without an answer: {len(tasks) - len(tickets)}); the first results come once they compile",
          file=sys.stderr, flush=True)
    while tickets:
        ticket, results = queue.next_completed()
        task, files = tickets.pop(ticket)
        lost = results if isinstance(results, ItemFailed) else next((r for r in results if isinstance(r, ItemFailed)),
                                                                     None)
        if lost is not None:
            raise RuntimeError(f"the evaluation of {task.id} was lost on every retry: {lost}")
        finished = []
        for k, (f, r) in enumerate(zip(files, results)):
            outcomes.append(outcome_of(r, k, 0))
            finished.append(_row(r, k, 0) | {"file": str(f)})
            evaluated.append(r)
        rows += finished
        done += 1
        verdicts = ", ".join(f"{r['verdict']}" + (f" {r['speedup']:.2f}x" if r["speedup"] else "") for r in finished)
        print(f"[{done}/{done + len(tickets)}] {task.id}: {verdicts} ({time.perf_counter() - t0:.0f} s)",
              file=sys.stderr, flush=True)
        if progress is not None:
            with open(progress, "a") as fh:
                fh.writelines(json.dumps(row) + "\n" for row in finished)
    return outcomes, rows, evaluated


def _row(result: EvalResult, sample: int, turn: int) -> dict:
    return {"task": result.task_id, "sample": sample, "turn": turn, "verdict": result.verdict,
            "reason": result.reason[:300], "speedup": result.speedup, "speedup_compiled": result.speedup_compiled,
            "gpu": result.gpu, "peak_memory_bytes": getattr(result, "peak_memory_bytes", None),
            "struct_score": result.features.get("struct.score")}


def final_results(outcomes: list[Outcome], results: list[EvalResult]) -> list[tuple[EvalResult | None, Outcome]]:
    """Each (task, sample)'s best turn (the one the summary counts) with its result; None for a missing
    answer. `results` are those of `outcomes` in order, missing answers having none."""
    evaluated = [o for o in outcomes if o.verdict != "missing"]
    if len(evaluated) != len(results):
        raise ValueError(f"{len(results)} results for {len(evaluated)} evaluated outcomes; they must pair one to one")
    by_key = {(o.task_id, o.sample, o.turn): r for o, r in zip(evaluated, results)}
    return [(by_key.get((o.task_id, o.sample, o.turn)), o) for o in final_outcomes(outcomes)]


def build_report(outcomes: list[Outcome], rows: list[dict], meta: dict) -> dict:
    """The JSON report: headline numbers of each sample's best turn, per-turn curves, rows, metadata."""
    return {"meta": meta, "summary": summarize(final_outcomes(outcomes)), "per_turn": turn_curves(outcomes),
            "outcomes": [asdict(o) for o in outcomes], "rows": rows}


def write_plots(report: dict, out_dir: Path) -> list[Path]:
    """fast_p bars, the verdict histogram, the speedup distribution and (multi-turn) the per-turn curves."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s, written = report["summary"], []
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    keys = [f"{p:g}" for p in FAST_P_THRESHOLDS]
    x = range(len(keys))
    a.bar([i - 0.2 for i in x], [s["fast_p"][k] for k in keys], 0.4, label="per sample")
    a.bar([i + 0.2 for i in x], [s["fast_p_best"][k] for k in keys], 0.4, label="best of samples")
    a.set_xticks(list(x), [f"fast_{k}" for k in keys])
    a.set_ylim(0, 1)
    a.set_title(f"fast_p vs {report['meta']['baseline']}")
    a.legend()
    b.bar(list(s["verdicts"]), list(s["verdicts"].values()))
    b.set_title("verdicts")
    b.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    written.append(out_dir / "fast_p_verdicts.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)
    speedups = [o["speedup"] for o in report["outcomes"] if o["verdict"] == "correct" and o["speedup"]]
    if speedups:
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.hist(speedups, bins=30)
        ax.axvline(1.0, color="k", linestyle="--")
        ax.set_xlabel(f"speedup vs {report['meta']['baseline']}")
        ax.set_title("correct samples")
        written.append(out_dir / "speedups.png")
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    if len(report["per_turn"]) > 1:
        fig, ax = plt.subplots(figsize=(6, 4))
        turns = [c["turn"] for c in report["per_turn"]]
        for key in ("compile_rate", "execute_rate", "correct_rate", "fast_1"):
            ax.plot(turns, [c[key] for c in report["per_turn"]], marker="o", label=key)
        ax.set_xlabel("turn")
        ax.set_ylim(0, 1)
        ax.legend()
        written.append(out_dir / "per_turn.png")
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    return written


def run_bench(cfg: RunConfig, tasks: list[Task], out_dir: Path, *, suite: str, answers_dir: Path | None = None,
              queue=None, cluster=None, published: BaselineTimes | None = None) -> dict:
    """Sample (or read answers), evaluate, write report.json, plots and (kernelbench suite)
    eval_results.json into out_dir; returns the report. `queue` is an evaluation WorkQueue; without
    one, `cluster.evaluation()` gives one for this call (the compile and evaluator pools of `cfg`).
    `published`: KernelBench baseline times to compare against (module docstring)."""
    if queue is None:
        with cluster.evaluation() as (queue, _):
            return run_bench(cfg, tasks, out_dir, suite=suite, answers_dir=answers_dir, queue=queue,
                             published=published)
    if answers_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        progress = out_dir / "rows.partial.jsonl"
        progress.unlink(missing_ok=True)
        outcomes, rows, results = run_answers(tasks, answers_dir, queue, progress)
    else:
        episodes = run_model(cfg, tasks, queue)
        outcomes = outcomes_from_episodes(episodes)
        rows = [_row(r, ep.trajectory.group_index, t) for ep in episodes for t, r in enumerate(ep.results())]
        results = [r for ep in episodes for r in ep.results()]
    kinds = {t.kind for t in tasks}
    meta = {"suite": suite, "model": None if answers_dir else cfg.model.path,
            "answers": str(answers_dir) if answers_dir else None, "tasks": len(tasks),
            "samples_per_task": None if answers_dir else cfg.rollout.samples_per_task,
            "turns": 1 if answers_dir else cfg.rollout.max_turns, "temperature": cfg.rollout.temperature,
            "baseline": "naive CUDA" if kinds == {"c2cuda"} else "PyTorch eager",
            "compiled_baseline": "torch.compile" if cfg.eval.compile_baseline and "torch2cuda" in kinds else None,
            "gate_profile": getattr(cfg.eval, "gate_profile", "strict"),
            "gpus": sorted({r.get("gpu") for r in rows if r.get("gpu")}), "machine": platform.node(),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    report = build_report(outcomes, rows, meta)
    out_dir.mkdir(parents=True, exist_ok=True)
    if suite == "pareval":
        report["pareval"] = pareval_report(cfg, tasks, outcomes, results)
    if suite == "kernelbench":
        selected = final_results(outcomes, results)
        written = write_eval_results(out_dir, eval_results_by_level(selected))
        meta["kernelbench_eval_results"] = {f"level{lv}": str(p) for lv, p in written.items()}
        if published is not None:
            report["published_baseline"] = published_comparison(selected, published)
    (out_dir / "report.json").write_text(json.dumps(report, indent=2))
    if answers_dir is None:  # what the policy wrote, next to how it was judged, for reading by eye
        from pipeline.rollout.episodes import turn_rows
        with open(out_dir / "samples.jsonl", "w") as f:
            f.writelines(json.dumps(row) + "\n" for ep in episodes for row in turn_rows(ep))
    report["plots"] = [str(p) for p in write_plots(report, out_dir)]
    return report


def pareval_report(cfg: RunConfig, tasks: list[Task], outcomes: list[Outcome], results: list[EvalResult]) -> dict:
    """ParEval's own numbers beside ours: pass@1, speedup@1 and efficiency@1 per problem type and over all
    (`metrics.pareval_metrics`, ParEval's definitions). Its speedups are against the serial reference:
    each problem's C reference (`baseline.hpp` over pointers) is timed here, on this host's CPU, on the
    problem's timed configuration (ParEval's problem size), and a correct answer's runtime is its trusted
    time there (measured only for problems with a valid sample). A missing answer counts as one sample
    that failed."""
    from pipeline.scoring.metrics import ParEvalProblem, pareval_metrics
    from pipeline.evaluation.build.compile import Compiler
    from pipeline.evaluation.checks.reference_c import build_c2cuda, time_c_reference
    by_task: dict[str, list[EvalResult | None]] = {}  # each sample's final turn (None: a missing answer)
    for r, o in final_results(outcomes, results):
        by_task.setdefault(o.task_id, []).append(r)
    compiler, problems, per_problem = Compiler(cfg.compile), [], {}
    for task in tasks:
        timed = [c.name for c in task.configs if c.time]
        if task.pareval is None or not timed:
            continue
        config = timed[-1]
        rs = by_task.get(task.id, [])
        valid = [r is not None and r.verdict == "correct" for r in rs]
        runtimes: list[float | None] = []
        for r, ok in zip(rs, valid):
            times = [c.time.median_ms for c in r.configs if c.name == config and c.time is not None] if ok else []
            runtimes.append(times[0] / 1e3 if times else None)
        serial_s = None  # needed only for a speedup, i.e. where some sample is valid
        if any(valid):  # ParEval's serial baseline: built with -O3, the mean of 5 runs
            ref = compiler.compile_c_reference(task.reference, optimize="-O3")
            serial_s = time_c_reference(build_c2cuda(task, seed=0), ref.artifact, config) if ref.ok else None
        per_problem[task.pareval.problem] = {"type": task.pareval.problem_type, "config": config,
                                             "serial_s": serial_s, "valid": valid, "runtimes_s": runtimes}
        # a problem whose serial time could not be taken still counts for pass@k, with no speedup
        problems.append(ParEvalProblem(task.pareval.problem, task.pareval.problem_type, valid,
                                       runtimes if serial_s else [None] * len(runtimes), serial_s or 0.0,
                                       task.pareval.problem_size or 1))
    return {"per_problem": per_problem, "metrics": pareval_metrics(problems, ks=(1,)),
            "efficiency_defined": all(t.pareval.problem_size for t in tasks if t.pareval is not None),
            "serial_host": platform.processor() or platform.machine()}


def print_summary(report: dict) -> None:
    s, meta = report["summary"], report["meta"]
    print(f"{s['tasks']} tasks, {s['samples']} samples (best turn of each); gate profile "
          f"{meta.get('gate_profile', 'strict')}; verdicts: " + ", ".join(f"{k} {v}" for k, v in s["verdicts"].items()))
    failures = s.get("evaluator_failures", {})
    if failures.get("samples"):
        print(f"evaluator failures (not the candidates'; left out of every rate): {failures['samples']} samples, "
              + ", ".join(f"{k} {v}" for k, v in failures["verdicts"].items())
              + f"; {failures['tasks_without_verdict']} tasks without any verdict")
    print(f"compile {s['compile_rate']:.1%}  execute {s['execute_rate']:.1%}  correct {s['correct_rate']:.1%}  "
          + "  ".join(f"fast_{k} {v:.1%}" for k, v in s["fast_p"].items()))
    sp = s["speedup"]
    if sp["n"]:
        print(f"speedup vs {report['meta']['baseline']} over {sp['n']} correct: mean {sp['mean']:.3f}, "
              f"geomean {sp['geomean']:.3f}")
    if s.get("speedup_compiled", {}).get("n"):
        print(f"speedup vs torch.compile: geomean {s['speedup_compiled']['geomean']:.3f}")
    print("  ".join(f"{k} {v:.3f}" for k, v in s["pass_at_k"].items()))
    for c in report["per_turn"] if len(report["per_turn"]) > 1 else []:
        print(f"  turn {c['turn']}: correct {c['correct_rate']:.1%}, fast_1 {c['fast_1']:.1%}")
    pub = report.get("published_baseline")
    if pub:
        print(f"against the published {pub['variant']} times of {pub['hardware']} ({pub['problems_with_time']} "
              "problems with a time): " + "  ".join(f"fast_{k} {v:.1%}" for k, v in pub["fast_p"].items()))
    par = report.get("pareval")
    if par:
        every = par["metrics"].get("all", {})
        print(f"ParEval's numbers over {int(every.get('problems', 0))} problems (speedups against the serial "
              f"reference on this host's CPU): pass@1 {every.get('pass@1') or 0:.3f}  speedup@1 "
              f"{every.get('speedup@1') or 0:.2f}" + (f"  efficiency@1 {every.get('efficiency@1') or 0:.2e}"
                                                      if par["efficiency_defined"] else ""))
    for level, path in meta.get("kernelbench_eval_results", {}).items():
        print(f"KernelBench eval_results ({level}): {path}")
