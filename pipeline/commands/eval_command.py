"""`cudaperf eval TASK CANDIDATE [--json] [--check]`: one candidate through the evaluator, in this process. The verdict
line (and `task_note` in the JSON) says when the degeneracy registry marks the task degenerate, or does not vouch for
it: a lazy kernel could be called correct there. `cudaperf eval --list-tasks` lists the built-in task ids.

Exit status (EXIT_CODES): 0 the candidate was judged (with --check: and its verdict is `correct`); 1 with --check,
any other verdict; 2 a user error (bad task, candidate file or config); 141 the output pipe was closed."""
from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.core.config import add_config_option, load_config
from pipeline.core.errors import UserError

HELP = "evaluate one candidate against one task"
EXIT_CODES = {0: "the candidate was judged (with --check: its verdict is correct)",
              1: "with --check: the verdict is not correct (the verdict line or the JSON says which)",
              2: "a user error: the task, the candidate file or the configuration (one line on stderr)",
              141: "the output pipe closed before everything was printed (for example `| head`)"}


def add_parser(commands) -> argparse.ArgumentParser:
    p = add_config_option(commands.add_parser("eval", help=HELP, description=HELP))
    p.add_argument("task", nargs="?", help="task YAML, KernelBench problem .py, or built-in id such as c2cuda/saxpy")
    p.add_argument("candidate", nargs="?",
                   help="candidate file: .cu (c2cuda or light format) or .py (KernelBench ModelNew)")
    p.add_argument("--json", action="store_true", help="print the EvalResult as JSON")
    p.add_argument("--check", action="store_true", help="exit 1 unless the verdict is correct (for scripts and CI)")
    p.add_argument("--list-tasks", action="store_true", help="list the built-in task ids and exit")
    p.epilog = (p.epilog or "") + " Exit status: " + "; ".join(f"{k} {v}" for k, v in EXIT_CODES.items()) + "."
    return p


def list_tasks() -> int:
    """Every built-in task id with its kind, one per line."""
    from pipeline.tasks import load_tasks
    for t in sorted(load_tasks("builtin"), key=lambda t: t.id):
        print(f"{t.id:<32} {t.kind}")
    return 0


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


def task_note(task, registry: str | None = None) -> str:
    """What the degeneracy registry says of `task`, for the verdict line: "" where its check is sound (ok,
    repaired), else why its verdict says nothing (degenerate) or may say nothing (not vouched for)."""
    from pipeline.tasks.degenerate import REGISTRY, entry_of, unchecked
    path = registry or str(REGISTRY)
    entry = entry_of(task, path)
    if entry is not None and entry["verdict"] == "degenerate":
        return f"task degenerate: {entry.get('reason', '')}; not counted in training or benchmarks"
    missing = unchecked([task], path)
    return f"degeneracy registry: {missing[0][1]}; training and benchmarks refuse the task" if missing else ""


def verdict_line(result, note: str) -> str:
    """`verdict   correct, 20.0x (task degenerate: ...)`: the verdict, its reason, the speedup and the task's note."""
    line = f"verdict   {result.verdict}" + (f": {result.reason}" if result.reason else "")
    if result.speedup is not None:
        line += f", {result.speedup:.3g}x"
    return line + (f" ({note})" if note else "")


def exit_status(result, check: bool) -> int:
    """EXIT_CODES for a judged candidate."""
    return 1 if check and result.verdict != "correct" else 0


def run(args, open_cluster=None) -> int:
    from pipeline.evaluation.evaluator import Evaluator
    from pipeline.evaluation.feedback import format_feedback
    from pipeline.tasks import load_candidate_file, load_task_arg
    if args.list_tasks:
        return list_tasks()
    if not args.task or not args.candidate:
        raise UserError("eval needs a TASK and a CANDIDATE file, as in `cudaperf eval c2cuda/saxpy answer.cu`; "
                        "`cudaperf eval --list-tasks` lists the built-in task ids")
    cfg = load_config(args.config, args.overrides)
    problem = candidate_file_problem(args.candidate)
    if problem:
        raise UserError(problem)
    try:
        task = load_task_arg(args.task)  # a bad task or candidate is a TaskError, itself a UserError
        cand = load_candidate_file(args.candidate, task)
    except OSError as e:  # a task file that cannot be read
        raise UserError(f"{e}; check the path and its permissions") from None
    from pipeline.commands.preflight import require_compiler
    require_compiler(cfg, (cand.format,))  # no verdict without its compiler (or eval.allow_unbuilt)
    from pipeline.evaluation.gpu.driver import gpu_count
    use_gpu = cfg.eval.gpus != 0 and gpu_count() > 0
    result = Evaluator(cfg.eval, cfg.compile, use_gpu=use_gpu).evaluate(task, [cand])[0]
    note = task_note(task)
    if args.json:
        import json
        print(json.dumps({**json.loads(result.model_dump_json()), "task_note": note}, indent=2))
        return exit_status(result, args.check)
    print(f"task      {task.id}  ({task.kind}, {cand.format} candidate)")
    print(verdict_line(result, note))
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
    return exit_status(result, args.check)
