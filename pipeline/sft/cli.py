"""`cudaperf sft`: its command line (pipeline/cli.py calls `main`)."""
from __future__ import annotations

import argparse

from pipeline.config import load_config, parse_command_line
from pipeline.sft.run import run_sft

DESCRIPTION = "supervised warm start of the policy: train on the tasks' known implementations, or on its own kept samples"


def main(argv: list[str], open_cluster=None) -> int:
    p = argparse.ArgumentParser(prog="cudaperf sft", description=DESCRIPTION)
    p.add_argument("--config", default=None, help="YAML run configuration (sections sft, learner, model, tasks, ...)")
    args, overrides = parse_command_line(p, argv)
    run_sft(load_config(args.config, overrides), open_cluster)  # a UserError ends in pipeline/cli.py, as one line
    return 0
