"""Fixtures of the dataset tests: synthetic tasks copied from the built-in saxpy (so every
implementation compiles from one of three sources, once per session) and synthetic measurement rows."""
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def saxpy(builtin_tasks):
    return builtin_tasks["c2cuda/saxpy"]


def saxpy_variant(saxpy, task_id: str, family: str, impl_names: list[str]):
    """A copy of c2cuda/saxpy with its own id and family; implementation k takes the code of the
    saxpy implementation k % 3 (naive first) under the name impl_names[k]."""
    impls = [saxpy.implementations[k % 3].model_copy(update={"name": name}) for k, name in enumerate(impl_names)]
    impls[0] = impls[0].model_copy(update={"strategy": "naive"})
    for k in range(1, len(impls)):
        impls[k] = impls[k].model_copy(update={"strategy": "vectorized" if k % 2 else "thread_coarsening"})
    return saxpy.model_copy(update={"id": task_id, "family": family, "implementations": impls})


def measurement_row(task_id, impl, strategy, config, median_ms, correct=True, kind="c2cuda", family="fam",
                    when=datetime(2026, 12, 1, tzinfo=timezone.utc), task_hash="h"):
    """One row of pipeline.tasks.measured.SCHEMA with the fields that matter set."""
    timed = median_ms is not None
    return {"task_id": task_id, "kind": kind, "family": family, "split": "train", "impl_name": impl,
            "strategy": strategy, "format": "c2cuda", "config": config, "correct": correct, "max_error": 0.1,
            "median_ms": median_ms, "iqr_ms": 0.01 if timed else None, "min_ms": median_ms * 0.9 if timed else None,
            "trials": 10 if timed else 0, "features_json": "{}", "error": "" if correct else "wrong",
            "task_hash": task_hash, "gpu_name": "NVIDIA H200", "sm_clock_mhz": 1980, "mem_clock_mhz": 2619,
            "driver": "570.0", "cuda": "13.0.88", "torch_version": "2.13.0", "measured_at": when,
            "generator_version": "test"}


@pytest.fixture
def later():
    return datetime(2026, 12, 2, tzinfo=timezone.utc)
