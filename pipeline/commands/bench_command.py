"""`cudaperf bench`: score a policy or a directory of answers on a suite (the run: pipeline/scoring/bench.py)."""
from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.core.config import add_config_option, load_config
from pipeline.core.errors import UserError

HELP = "benchmark a policy or a directory of answers"
DESCRIPTION = ("sample a policy (or read ready answers) on a suite, evaluate everything, report "
               "(pipeline/scoring/bench.py)")


def kernelbench_levels(text: str) -> list[int]:
    """--levels as level numbers ("1,2,3"), or a UserError naming the form (also `cudaperf data`'s)."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--levels {text!r} is not a comma-separated list of numbers; write e.g. --levels 1,2") from None


def add_parser(commands) -> argparse.ArgumentParser:
    p = commands.add_parser("bench", help=HELP, description=DESCRIPTION)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--model", help="policy directory (Hugging Face model + tokenizer), or 'tiny'")
    what.add_argument("--answers", help="directory of ready answers named after task ids (no model)")
    p.add_argument("--suite", required=True, choices=["kernelbench", "c2cuda", "torch2cuda", "pareval"])
    p.add_argument("--kernelbench-dir", help="KernelBench checkout (suite kernelbench)")
    p.add_argument("--levels", default=None, help="KernelBench levels, e.g. 1,2 (default tasks.kernelbench_levels)")
    p.add_argument("--tasks", default="generated:test", help="task source of the c2cuda and torch2cuda suites "
                   "(default generated:test; generated:heldout, or 'builtin' for the built-in tasks)")
    p.add_argument("--turns", type=int, default=None, help="turns per episode (default rollout.max_turns)")
    p.add_argument("--samples", type=int, default=None, help="samples per task (default rollout.samples_per_task)")
    p.add_argument("--limit", type=int, default=0, help="only the first N tasks (0: all)")
    p.add_argument("--shard", default="0/1", help="K/N: every N-th task from the K-th (0-based), for a suite run "
                   "in parts")
    p.add_argument("--out", default=None, help="report directory (default run.output_dir/run.name/bench)")
    add_config_option(p, "YAML run configuration (eval, compile, rollout, model sections)")
    p.add_argument("--baseline-json", default=None, help="suite kernelbench: KernelBench baseline timing JSON "
                   "(results/timing/<hardware>/baseline_time_torch.json) or a directory holding such files")
    p.add_argument("--baseline-hardware", default=None, help="with a --baseline-json directory: the hardware "
                   "directory to read, e.g. H100_Modal")
    return p


def run(args, open_cluster=None) -> int:
    from pipeline.scoring.bench import print_summary, run_bench, suite_tasks
    from pipeline.scoring.kernelbench import load_baseline_times
    from pipeline.tasks.degenerate import refusal, split_degenerate, unchecked
    overrides = args.overrides  # a UserError ends in pipeline/cli.py, as one line
    pre = ["eval.compile_baseline=true"] if args.suite == "kernelbench" else []  # user overrides come later and win
    if args.model:
        pre.append(f"model.path={args.model}")
    if args.turns is not None:
        pre.append(f"rollout.max_turns={args.turns}")
    if args.samples is not None:
        pre.append(f"rollout.samples_per_task={args.samples}")
    cfg = load_config(args.config, pre + overrides)
    from pipeline.commands.preflight import require_compiler
    require_compiler(cfg)  # no verdict without its compiler (or eval.allow_unbuilt)
    levels = kernelbench_levels(args.levels) if args.levels else cfg.tasks.kernelbench_levels
    from pipeline.dataset.measure import MeasureError, parse_shard
    try:
        shard = parse_shard(args.shard)
    except MeasureError as e:
        raise UserError(str(e)) from None
    tasks = suite_tasks(args.suite, args.kernelbench_dir, levels, args.tasks, args.limit,
                        cfg.data.split_seed, shard)
    missing = [] if cfg.data.allow_unchecked_tasks else unchecked(tasks)
    if missing and len(missing) == len(tasks):
        raise UserError(refusal(missing, "cudaperf bench"))
    if missing:  # the rest of the suite still runs; these are out of every row and aggregate, and said so
        print(refusal(missing, "cudaperf bench", verb="leaves out"), flush=True)
        tasks = [t for t in tasks if t.id not in {i for i, _ in missing}]
    tasks, degenerate = split_degenerate(tasks)
    for task_id, why in degenerate:  # a check a lazy kernel passes says nothing: out of every aggregate
        print(f"left out {task_id}: degenerate ({why}); see docs/fidelity.md")
    answers = Path(args.answers).expanduser() if args.answers else None
    if answers is not None and not answers.is_dir():
        raise UserError(f"--answers {args.answers} is not a directory; pass the directory holding the answers")
    if args.baseline_json and args.suite != "kernelbench":
        raise UserError("--baseline-json holds KernelBench baseline times; use it with --suite kernelbench or "
                         "leave it out")
    published = (load_baseline_times(args.baseline_json, args.baseline_hardware) if args.baseline_json
                 else None)
    out = Path(args.out) if args.out else Path(cfg.run.output_dir) / cfg.run.name / "bench"
    report = run_bench(cfg, tasks, out, suite=args.suite, answers_dir=answers, published=published,
                       cluster=open_cluster(cfg) if open_cluster else None)
    print_summary(report)
    print(f"report written to {out / 'report.json'}")
    return 0
