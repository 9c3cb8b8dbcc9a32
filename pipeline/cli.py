"""The `cudaperf` command: one entry point, one subcommand per job.

  cudaperf eval TASK CANDIDATE [--json] [--config FILE] [section.key=value ...]
  cudaperf verify [--config FILE] [--out FILE] [section.key=value ...]
  cudaperf analyze FILE.cu [--block N] [--arch sm_90]
  cudaperf config [--config FILE] [section.key=value ...]
  cudaperf data build|stats|measure ...      (pipeline/data/cli.py)
  cudaperf rank train|eval ...               (pipeline/ranker/cli.py)
  cudaperf train --config FILE [--resume]    (pipeline/rl/train.py)
  cudaperf sft --config FILE                 (pipeline/sft/)
  cudaperf bench --model PATH --suite ...    (pipeline/bench.py)

User errors (bad config, missing file, no nvcc: any `UserError`, pipeline/errors.py) are caught
once, in `main`, and end with one line naming the problem and the fix and exit status 2; a
candidate's failure is a verdict, never an error of the command.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pipeline.config import RunConfig, describe_schema, load_config, parse_command_line
from pipeline.errors import UserError


def _config(args) -> RunConfig:
    """The run configuration of a built-in subcommand: --config plus the overrides."""
    return load_config(args.config, args.overrides)


def candidate_file_problem(path_arg: str) -> str:
    """One sentence saying why `path_arg` cannot be a candidate file, or '' when it can be read."""
    from pipeline.evaluation.gate import MAX_CANDIDATE_BYTES
    path = Path(path_arg).expanduser()
    if path.is_dir():
        return f"{path} is a directory; pass the path of one candidate file (.cu or .py)."
    if not path.exists():
        return f"{path} does not exist; pass the path of one candidate file (.cu or .py)."
    if not path.is_file():
        return f"{path} is not a regular file; pass the path of one candidate file (.cu or .py)."
    try:
        size = path.stat().st_size
        if size > MAX_CANDIDATE_BYTES:
            return (f"{path} is {size:,} bytes, over the candidate limit of {MAX_CANDIDATE_BYTES:,} bytes; "
                    f"pass a shorter candidate.")
        with path.open("rb") as f:
            data = f.read()
    except OSError as e:
        return f"{path} cannot be read ({e.strerror or e}); check its permissions."
    try:
        if b"\0" in data:
            raise UnicodeDecodeError("utf-8", data, data.index(b"\0"), data.index(b"\0") + 1, "NUL byte")
        data.decode("utf-8")
    except UnicodeDecodeError:
        return f"{path} is not UTF-8 text (it looks binary); pass the candidate's source file."
    return ""


def cmd_eval(args) -> int:
    from pipeline.evaluation.evaluator import Evaluator
    from pipeline.evaluation.feedback import format_feedback
    from pipeline.tasks import load_candidate_file, load_task_arg
    cfg = _config(args)
    problem = candidate_file_problem(args.candidate)
    if problem:
        raise UserError(problem)
    try:
        task = load_task_arg(args.task)  # a bad task or candidate is a TaskError, itself a UserError
        cand = load_candidate_file(args.candidate, task)
    except OSError as e:  # a task file that cannot be read
        raise UserError(f"{e}; check the path and its permissions") from None
    from pipeline.evaluation.cuda_driver import gpu_count
    use_gpu = cfg.eval.gpus != 0 and gpu_count() > 0
    result = Evaluator(cfg.eval, cfg.compile, use_gpu=use_gpu).evaluate(task, [cand])[0]
    if args.json:
        print(result.model_dump_json(indent=2))
        return 0
    print(f"task      {task.id}  ({task.kind}, {cand.format} candidate)")
    print(f"verdict   {result.verdict}" + (f": {result.reason}" if result.reason else ""))
    for c in result.configs:
        parts = [f"{c.name:<12}"]
        if c.passed is not None:
            parts.append("passed" if c.passed else "FAILED")
        if c.max_error is not None:
            parts.append(f"max error {c.max_error:.3g}")
        if c.time:
            parts.append(f"{c.time.median_ms:.4f} ms (iqr {c.time.iqr_ms:.4f}, {c.time.trials} trials)")
        if c.baseline_time:
            parts.append(f"baseline {c.baseline_time.median_ms:.4f} ms")
        print("  " + "  ".join(parts))
    if result.speedup is not None:
        print(f"speedup   {result.speedup:.3f}x")
    print("stages    " + ", ".join(f"{k} {v:.2f}s" for k, v in result.stage_s.items()))
    print("\nfeedback message:\n" + format_feedback(result))
    return 0


def open_cluster(cfg, cpus_needed: int | None = None, num_gpus: int | None = None):
    """The composition root: the one place where `pipeline/` reaches Ray. A `Cluster` (actors/cluster.py)
    for a job's config: it joins the cluster the job was submitted to, or starts a local Ray."""
    from actors.cluster import Cluster
    return Cluster(cfg, cpus_needed, num_gpus)


def cmd_verify(args) -> int:
    from pipeline.verify import verify_tasks
    cfg = _config(args)
    report = verify_tasks(cfg, open_cluster(cfg), out_path=args.out)
    print(json.dumps(report["summary"], indent=2))
    return 0 if report["summary"]["failed"] == 0 else 1


# Subcommands that own their argument parsing: name -> (module, function taking argv, help line); the
# ones in ON_CLUSTER also take `open_cluster`, the way to Ray.
MODULE_COMMANDS = {
    "analyze": ("pipeline.structure.analyze", "main_analyze", "structural analysis of a CUDA file"),
    "data": ("pipeline.data.cli", "main", "build, measure and summarise the task dataset"),
    "rank": ("pipeline.ranker.cli", "main", "train and evaluate the pairwise program ranker"),
    "train": ("pipeline.rl.train", "main", "multi-turn RL training on Ray"),
    "sft": ("pipeline.sft", "main", "supervised warm start of the policy"),
    "bench": ("pipeline.bench", "main", "benchmark a policy or a directory of answers"),
}


ON_CLUSTER = {"train", "sft", "bench"}


def run_module_command(name: str, argv: list[str]) -> int:
    import importlib
    module, fn, _ = MODULE_COMMANDS[name]
    main = getattr(importlib.import_module(module), fn)
    return main(argv, open_cluster) if name in ON_CLUSTER else main(argv)


def cmd_config(args) -> int:
    cfg = _config(args)
    if args.describe:
        print("\n".join(describe_schema()))
    else:
        import yaml
        print(yaml.safe_dump(cfg.model_dump(), sort_keys=False))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cudaperf", description="RL for fast, correct CUDA kernels")
    sub = parser.add_subparsers(dest="command", required=True)

    def with_config(p):
        p.add_argument("--config", default=None, help="YAML run configuration")
        p.epilog = "Any number of section.key=value overrides may follow."
        return p
    p = with_config(sub.add_parser("eval", help="evaluate one candidate against one task"))
    p.add_argument("task", help="task YAML, KernelBench problem .py, or built-in id such as c2cuda/saxpy")
    p.add_argument("candidate", help="candidate file: .cu (c2cuda or light format) or .py (KernelBench ModelNew)")
    p.add_argument("--json", action="store_true", help="print the EvalResult as JSON")
    p.set_defaults(fn=cmd_eval)
    p = with_config(sub.add_parser("verify", help="evaluate every known implementation of the task set"))
    p.add_argument("--out", default=None, help="write the JSON report here")
    p.set_defaults(fn=cmd_verify)
    for name, (_, _, help_line) in MODULE_COMMANDS.items():
        sub.add_parser(name, help=f"{help_line} (see cudaperf {name} -h)", add_help=False)
    p = with_config(sub.add_parser("config", help="print the resolved configuration"))
    p.add_argument("--describe", action="store_true", help="list every key with its default and meaning")
    p.set_defaults(fn=cmd_config)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    module_command = argv[0] if argv and argv[0] in MODULE_COMMANDS else ""
    try:
        if module_command:
            return run_module_command(module_command, argv[1:])
        args, args.overrides = parse_command_line(build_parser(), argv)  # overrides may follow flags such as --json
        return args.fn(args)
    except UserError as e:  # the one catch: every command's user errors end here
        prog = f"cudaperf {module_command}" if module_command else "cudaperf"  # the prefix of its own messages
        print(f"{prog}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
