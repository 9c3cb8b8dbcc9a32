"""The ranker's data: implementations with code, pre-run features and measured times per configuration.

In: the measured dataset (a pyarrow Table of the schema in pipeline/tasks/measured.py, from
`load_measurements`), or the evaluator's benchmark JSON (`benchmarks/results/v1/evaluator_h200.json`:
one speedup per implementation of the built-in tasks, a small real development set), and the
tasks the rows refer to (`pipeline.tasks.load_tasks`, for the code and the work model).
Out: a `RankData`: one `Impl` per (task, implementation) that ran correctly, its time per
configuration, and (from `assign_splits`) its task's split. Touches nothing; features missing from
the rows are filled by the caller (`fill_features`, nvcc and a cache).

Only correct, timed rows are kept; the PyTorch reference (`pytorch_eager`) is not an
implementation a policy could write and has no CUDA code, so it is never ranked.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline.core.errors import UserError
from pipeline.ranker.features import FeatureCache, feature_vector, task_features

log = logging.getLogger(__name__)

REFERENCE_IMPL = "pytorch_eager"


class RankDataError(UserError, ValueError):
    """The data cannot be used for ranking; the message says why and what to do."""


@dataclass
class Impl:
    """One known implementation of a task, with its measured times (ms) per configuration."""
    task_id: str
    family: str
    split: str
    kind: str
    name: str
    strategy: str
    format: str
    code: str
    features: dict
    times_ms: dict[str, float] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return self.task_id, self.name


@dataclass
class RankData:
    impls: list[Impl]
    tasks: dict  # task id -> Task
    source: str = ""

    def vectors(self) -> np.ndarray:
        """Feature matrix (one row per impl, columns FEATURE_NAMES)."""
        cache: dict[str, dict] = {}
        rows = []
        for im in self.impls:
            if im.task_id not in cache:
                cache[im.task_id] = task_features(self.tasks[im.task_id])
            rows.append(feature_vector(im.features, cache[im.task_id]))
        return np.vstack(rows) if rows else np.zeros((0, 0))

    def subset(self, keep) -> "RankData":
        """The impls for which keep(impl) is true."""
        return RankData([im for im in self.impls if keep(im)], self.tasks, self.source)

    def content_hash(self) -> str:
        """A hash of what a ranker learns from: impl identities, codes, features and times."""
        h = hashlib.sha256()
        for im in sorted(self.impls, key=lambda i: i.key):
            h.update(json.dumps([im.task_id, im.name, im.strategy, hashlib.sha256(im.code.encode()).hexdigest(),
                                 im.features, sorted(im.times_ms.items())], sort_keys=True, default=str).encode())
        return h.hexdigest()[:16]

    def families(self) -> list[str]:
        return sorted({im.family for im in self.impls})


def task_index(sources: list[str]) -> dict:
    """Tasks by id from each task source that loads (`builtin`, `generated`, a directory, ...)."""
    from pipeline.tasks import TaskError, load_tasks
    out, problems = {}, []
    for src in sources:
        try:
            out.update({t.id: t for t in load_tasks(src)})
        except (TaskError, ValueError, OSError, ImportError) as e:
            problems.append(f"{src}: {e}")
    if not out:
        raise RankDataError(f"no task source loaded ({'; '.join(problems) or 'none given'}); set "
                            "ranker.task_sources to sources that load, e.g. [builtin, generated]")
    return out


def from_measurements(table, tasks: dict, source: str = "") -> RankData:
    """RankData from the measured-dataset table: correct, timed rows of implementations with CUDA code.
    Rows of a task whose code changed since it was measured (its `task_hash` differs) are left out:
    their times and features belong to other code."""
    rows = table.to_pylist() if hasattr(table, "to_pylist") else list(table)
    by_key: dict[tuple[str, str], Impl] = {}
    missing_tasks: set[str] = set()
    stale: set[str] = set()
    current: dict[str, str] = {}
    for r in rows:
        if r["impl_name"] == REFERENCE_IMPL or not r["correct"] or r["median_ms"] is None:
            continue
        if not r["median_ms"] > 0 or math.isnan(r["median_ms"]):
            continue
        task = tasks.get(r["task_id"])
        if task is None:
            missing_tasks.add(r["task_id"])
            continue
        if r.get("task_hash"):
            if r["task_id"] not in current:
                current[r["task_id"]] = task.measured_hash()
            if current[r["task_id"]] != r["task_hash"]:
                stale.add(r["task_id"])
                continue
        key = (r["task_id"], r["impl_name"])
        im = by_key.get(key)
        if im is None:
            impl = next((i for i in task.implementations if i.name == r["impl_name"]), None)
            if impl is None:
                missing_tasks.add(f"{r['task_id']}:{r['impl_name']}")
                continue
            feats = json.loads(r["features_json"]) if r.get("features_json") else {}
            im = by_key[key] = Impl(r["task_id"], r["family"], "", r["kind"], r["impl_name"],  # split: assign_splits
                                    r["strategy"], impl.format, impl.code, feats)
        im.times_ms[r["config"]] = float(r["median_ms"])
    if not by_key:
        hint = (f" ({len(missing_tasks)} task ids not found in the task sources, e.g. {sorted(missing_tasks)[:3]}; "
                "add their source to ranker.task_sources)") if missing_tasks else ""
        if stale:
            hint += (f" ({len(stale)} tasks changed since they were measured; run `cudaperf data measure` again "
                     "for them)")
        raise RankDataError(f"no correct, timed implementation rows to rank{hint}")
    if stale:
        log.warning("%d measured tasks changed since their measurement and are left out (measure them again)",
                    len(stale))
    return RankData(list(by_key.values()), tasks, source)


def from_evaluator_benchmark(path: str | Path, tasks: dict) -> RankData:
    """The development set: speedups of the built-in implementations from `benchmarks/evaluator_throughput.py`.

    A speedup is baseline time / implementation time, so 1 / speedup is a time relative to the
    task's baseline: comparable within a task, which is all a pair needs. The geometric mean
    over the timed configurations is the one configuration, 'geomean'.
    """
    try:
        per = json.loads(Path(path).read_text())["ours"]["per_candidate"]
    except (OSError, ValueError, KeyError) as e:
        raise RankDataError(f"{path}: not an evaluator benchmark JSON with ours.per_candidate ({e}); pass the "
                            "file benchmarks/evaluator_throughput.py wrote") from None
    impls = []
    for key, rec in sorted(per.items()):
        task_id, _, name = key.rpartition("/")
        task = tasks.get(task_id)
        impl = next((i for i in task.implementations if i.name == name), None) if task else None
        if impl is None or rec.get("verdict") != "correct" or not rec.get("speedup"):
            continue
        impls.append(Impl(task_id, task.family, "", task.kind, name, impl.strategy, impl.format, impl.code, {},
                          {"geomean": 1.0 / float(rec["speedup"])}))
    if not impls:
        raise RankDataError(f"{path}: no correct implementation of a known task in it")
    return RankData(impls, tasks, str(path))


def load_data(path: str | Path | None, task_sources: list[str]) -> RankData:
    """RankData from `path`: an evaluator benchmark .json, or Parquet measurements (a file or a
    directory; None is pipeline/assets/measured/)."""
    tasks = task_index(task_sources)
    if path is not None and str(path).endswith(".json"):
        return from_evaluator_benchmark(path, tasks)
    from pipeline.tasks.measured import MeasurementsError, load_measurements
    try:
        table = load_measurements(path)
    except MeasurementsError as e:
        raise RankDataError(str(e)) from None
    return from_measurements(table, tasks, str(path or "pipeline/assets/measured"))


def fill_features(data: RankData, cache: FeatureCache) -> int:
    """Compute (or read from the cache) the features of every impl whose row carried none; returns
    how many were filled. Rows' own features (the evaluator's, with run-time launch configurations)
    are preferred and left as they are."""
    todo = [im for im in data.impls if not im.features]
    if todo:
        for im, feats in zip(todo, cache.get_many([(im.code, im.format) for im in todo])):
            im.features = feats
    return len(todo)


def assign_splits(data: RankData, test_families: list[str] | None = None, seed: int = 0) -> None:
    """Give every impl its split: 'test' for `test_families` when given (the rest 'train'), else the
    split the task reader gives its task, `split_of_task` at `seed` (`data.split_seed`), so a ranker
    holds out exactly what a policy is evaluated on. The rows' own `split` column is a record of the
    split when they were measured and is not read: a row measured before a family or the held-out split
    existed would say otherwise."""
    if test_families is not None:
        chosen = set(test_families)
        for im in data.impls:
            im.split = "test" if im.family in chosen else "train"
        return
    from pipeline.tasks.splits import split_of_task
    for im in data.impls:
        im.split = split_of_task(data.tasks[im.task_id], seed)


def family_folds(families: list[str], k: int, seed: int = 0) -> list[list[str]]:
    """`k` disjoint groups of families (for cross-validation by family), deterministic in `seed`."""
    if k < 2 or k > len(families):
        raise RankDataError(f"--cv {k}: need 2 <= K <= the number of families ({len(families)})")
    order = sorted(families, key=lambda f: hashlib.sha256(f"{seed}\0{f}".encode()).hexdigest())
    return [order[i::k] for i in range(k)]
