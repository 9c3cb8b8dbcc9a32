"""Where the data that ships with the package lives: `pipeline/assets/`, apart from the code.

Generated or measured data and the shipped model are files, not modules: the built-in tasks, the
ParEval-derived tasks, the measured dataset shards and its card, the degeneracy registry, the frozen
family splits and the tiny warm-started policy. `setup.py` ships the folder whole as package data.
"""
from pathlib import Path

PIPELINE_DIR = Path(__file__).resolve().parents[1]
ASSETS_DIR = PIPELINE_DIR / "assets"
BUILTIN_DIR = ASSETS_DIR / "builtin_tasks"          # the built-in task set (YAML, one task a file)
PAREVAL_DIR = ASSETS_DIR / "pareval_tasks"          # tasks from ParEval's drivers (BSD-3, LICENSE inside)
MEASURED_DIR = ASSETS_DIR / "measured"              # measured implementations of the generated dataset
CARD_DIR = ASSETS_DIR / "card"                      # the dataset card's figures
DEGENERACY_REGISTRY = ASSETS_DIR / "degeneracy.json"  # degenerate tasks found by `cudaperf data build`
SPLITS_TABLE = ASSETS_DIR / "splits.json"            # the frozen split of every generated family (data.split_seed 0)
TINY_SFT_DIR = ASSETS_DIR / "tiny_sft"              # the main job's warm-started tiny policy
