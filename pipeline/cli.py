"""The `cudaperf` command: one entry point, one subcommand per job, one module per subcommand.

  cudaperf eval TASK CANDIDATE [--json] [--config FILE] [section.key=value ...]
  cudaperf verify [--config FILE] [--out FILE] [section.key=value ...]
  cudaperf analyze FILE.cu [--block N] [--arch sm_90]
  cudaperf config [--config FILE] [--describe] [section.key=value ...]
  cudaperf data build|stats|card|measure|degeneracy ...
  cudaperf rank train|eval ...
  cudaperf train --config FILE [--resume RUN_DIR]
  cudaperf sft --config FILE
  cudaperf bench --model PATH | --answers DIR --suite ...

Each subcommand is `pipeline/commands/<name>_command.py`: `add_parser(subparsers)` and
`run(args, open_cluster)`. User errors (bad config, missing file, no nvcc: any `UserError`,
pipeline/core/errors.py) are caught once, in `main`, and end with one line naming the problem and the
fix and exit status 2; a candidate's failure is a verdict, never an error of the command. Commands that
evaluate check at start that the compiler their verdicts need is there (commands/preflight.py).
"""
from __future__ import annotations

import argparse
import sys

from pipeline.commands import (analyze_command, bench_command, config_command, data_command, eval_command,
                               rank_command, sft_command, train_command, verify_command)
from pipeline.core.config import parse_command_line
from pipeline.core.errors import UserError

COMMANDS = {"eval": eval_command, "verify": verify_command, "analyze": analyze_command, "config": config_command,
            "data": data_command, "rank": rank_command, "train": train_command, "sft": sft_command,
            "bench": bench_command}


def open_cluster(cfg, cpus_needed: int | None = None, num_gpus: int | None = None):
    """The composition root: the one place where `pipeline/` reaches Ray. A `Cluster` (actors/cluster.py)
    for a job's config: it joins the cluster the job was submitted to, or starts a local Ray."""
    from actors.cluster import Cluster
    return Cluster(cfg, cpus_needed, num_gpus)


class UsageError(UserError):
    """A command line argparse refuses, said in one line like every other user error."""

    def __init__(self, prog: str, message: str):
        super().__init__(message)
        self.prog = prog


class CommandParser(argparse.ArgumentParser):
    """argparse, with its usage errors raised as `UsageError` (its subcommands' parsers are of this class too)."""

    def error(self, message):
        raise UsageError(self.prog, message)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="cudaperf", description="RL for fast, correct CUDA kernels")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module in COMMANDS.items():
        module.add_parser(sub).set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args, args.overrides = parse_command_line(build_parser(), argv)  # overrides may follow any flag
    except UsageError as e:  # an unknown flag is found by the top parser: name the subcommand it was given to
        prog = f"cudaperf {argv[0]}" if e.prog == "cudaperf" and argv and argv[0] in COMMANDS else e.prog
        print(f"{prog}: {e}; see {prog} --help", file=sys.stderr)
        return 2
    try:
        return args.run(args, open_cluster)
    except UserError as e:  # the one catch: every command's user errors end here
        print(f"cudaperf {args.command}: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `cudaperf config | head`: the reader left; stop quietly, as Unix tools do
        return pipe_closed()


def pipe_closed() -> int:
    """Exit status 141 (a SIGPIPE's) after the reader of stdout left, with stdout pointed at /dev/null so
    that Python's flush at exit raises nothing more."""
    import os
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 141


if __name__ == "__main__":
    sys.exit(main())
