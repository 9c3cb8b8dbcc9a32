"""Bench and SFT fixtures: a tiny model per session, the environment restored after the
in-process learner (which sets the process-group variables) and Ray, and the scripts of benchmarks/."""
import importlib
import os
import shutil
import sys
from pathlib import Path

import pytest

from pipeline.core.config import ModelSection

BUILTIN = Path(__file__).resolve().parents[2] / "pipeline" / "assets" / "builtin_tasks"


@pytest.fixture(scope="session", autouse=True)
def restore_environment():
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="session")
def benchmark_script():
    """`benchmark_script("learning")` imports benchmarks/learning.py (the repository root is on sys.path
    while the session runs)."""
    root = str(BUILTIN.parents[1])
    sys.path.insert(0, root)
    yield lambda name: importlib.import_module(f"benchmarks.{name}")
    sys.path.remove(root)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def small_task_dir(tmp_path_factory) -> Path:
    """Two short c2cuda tasks and one light torch2cuda task, as a task source directory."""
    d = tmp_path_factory.mktemp("tasks")
    for rel in ("c2cuda/saxpy.yaml", "c2cuda/gather.yaml", "torch2cuda/relu.yaml"):
        shutil.copy(BUILTIN / rel, d / rel.replace("/", "_"))
    return d


@pytest.fixture(scope="session")
def model_cfg(tiny_dir) -> ModelSection:
    return ModelSection(tiny_dir=tiny_dir, max_model_len_tokens=2048)
