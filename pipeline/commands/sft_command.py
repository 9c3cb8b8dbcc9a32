"""`cudaperf sft --config FILE [section.key=value ...]`: the supervised warm start (pipeline/sft/)."""
from __future__ import annotations

import argparse

from pipeline.core.config import add_config_option, load_config

HELP = "supervised warm start of the policy"
DESCRIPTION = "supervised warm start of the policy: train on the tasks' known implementations, or on its own kept samples"


def add_parser(commands) -> argparse.ArgumentParser:
    return add_config_option(commands.add_parser("sft", help=HELP, description=DESCRIPTION),
                             "YAML run configuration (sections sft, learner, model, tasks, ...)")


def run(args, open_cluster=None) -> int:
    from pipeline.sft.run import run_sft
    run_sft(load_config(args.config, args.overrides), open_cluster)  # a UserError ends in pipeline/cli.py, as one line
    return 0
