"""`cudaperf config [--describe]`: the resolved run configuration, or every key with its default and meaning."""
from __future__ import annotations

import argparse

from pipeline.core.config import RunConfig, add_config_option, load_config
from pipeline.core.config_messages import describe_schema

HELP = "print the resolved configuration"


def add_parser(commands) -> argparse.ArgumentParser:
    p = add_config_option(commands.add_parser("config", help=HELP, description=HELP))
    p.add_argument("--describe", action="store_true", help="list every key with its default and meaning")
    return p


def run(args, open_cluster=None) -> int:
    cfg = load_config(args.config, args.overrides)
    if args.describe:
        print("\n".join(describe_schema(RunConfig)))
    else:
        import yaml
        print(yaml.safe_dump(cfg.model_dump(), sort_keys=False))
    return 0
