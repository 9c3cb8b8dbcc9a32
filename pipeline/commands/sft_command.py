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
    from pipeline.commands.preflight import require_compiler
    from pipeline.sft.run import run_sft
    cfg = load_config(args.config, args.overrides)  # a UserError ends in pipeline/cli.py, as one line
    if cfg.sft.mode == "rejection" or cfg.sft.heldout_source:  # it evaluates samples: no verdict without a compiler
        require_compiler(cfg)
    run_sft(cfg, open_cluster)
    return 0
