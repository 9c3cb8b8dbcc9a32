"""Train, validation and test splits of the task dataset, by computation family, and the held-out tasks
of the training families.

In: a family name (or a Task) and a seed. Out: 'train', 'val' or 'test' ('kernelbench' for
KernelBench problems, which are a benchmark and never trained on); for a task also 'heldout'.
Every task of a family lands in the same split, so the splits share no family: a model is tested
on computations it has never seen. The families of the generated dataset are ranked by a hash of
(seed, family) and cut at exact shares (15 % test, 15 % val, the rest train), so the test split
always gets its share however many families there are. A family the generators do not make (a
new one, or one of the built-in tasks) falls back to the same hash against the shares as
thresholds, which needs no list but only meets the shares on average; `split_shares` reports
the real shares of any set of families and `balanced_seed` finds a seed that meets them.

`heldout` (`split_of_task` only): the evaluation split of *unseen tasks of the training families*, new
parameterisations and sizes of computations the policy trains on, never trained on themselves. Of each
training family's tasks of each kind, the HELDOUT_FRACTION ranked first by a hash of (seed, task id) are
held out (exact shares per family and kind, so every family is represented); a task outside the
generated dataset is held out when the same hash falls below the fraction. The family-disjoint `test`
split stays as it is: the two measure different things (new tasks of known computations, and new
computations).
"""
from __future__ import annotations

import functools
import hashlib
from collections import Counter
from typing import Iterable

from pipeline.core.records import Task

SPLITS = ("train", "val", "test")  # by family
HELDOUT = "heldout"
TASK_SPLITS = SPLITS + (HELDOUT,)  # what a task can be in (`generated:<split>`)
HELDOUT_FRACTION = 0.20
FRACTIONS = {"train": 0.70, "val": 0.15, "test": 0.15}
KERNELBENCH_SPLIT = "kernelbench"


def _unit(family: str, seed: int) -> float:
    """A number in [0, 1) fixed by the family name and the seed."""
    digest = hashlib.sha256(f"cudaperf-split\0{seed}\0{family}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


def _generated_tasks() -> list[Task]:
    """The generated dataset's tasks ([] where the generators are not available)."""
    try:
        from pipeline.tasks.generate import cached_tasks
    except ImportError:
        return []
    return cached_tasks(0)


@functools.lru_cache(maxsize=8)
def _dataset_splits(seed: int) -> dict[str, str]:
    """family -> split for the generated dataset's families, by rank at exact shares."""
    return assign_splits({t.family for t in _generated_tasks()}, seed)


def assign_splits(families, seed: int = 0) -> dict[str, str]:
    """Splits for a known set of families: ranked by hash, test and val each round(15 %) of them
    (at least one each from 3 families on), the rest train."""
    ranked = sorted(set(families), key=lambda f: (_unit(f, seed), f))
    n = len(ranked)
    n_test = max(1 if n >= 3 else 0, round(FRACTIONS["test"] * n))
    n_val = max(1 if n >= 3 else 0, round(FRACTIONS["val"] * n))
    return {f: "test" if i < n_test else "val" if i < n_test + n_val else "train" for i, f in enumerate(ranked)}


def split_of_family(family: str, seed: int = 0) -> str:
    """The split every task of `family` belongs to under `seed`."""
    if not family:
        raise ValueError("split_of_family() needs a family name; every Task must have its family set")
    known = _dataset_splits(seed)
    if family in known:
        return known[family]
    u = _unit(family, seed)
    if u < FRACTIONS["test"]:
        return "test"
    if u < FRACTIONS["test"] + FRACTIONS["val"]:
        return "val"
    return "train"


def _task_unit(task_id: str, seed: int) -> float:
    return _unit(f"task\0{task_id}", seed)


def heldout_ids(tasks: Iterable[Task], seed: int = 0) -> set[str]:
    """The held-out task ids among `tasks` of training families: per (family, kind), the round(
    HELDOUT_FRACTION * n) tasks ranked first by hash."""
    groups: dict[tuple[str, str], list[str]] = {}
    for t in tasks:
        if split_of_family(t.family, seed) == "train":
            groups.setdefault((t.family, t.kind), []).append(t.id)
    out: set[str] = set()
    for ids in groups.values():
        ranked = sorted(set(ids), key=lambda i: (_task_unit(i, seed), i))
        out.update(ranked[:round(HELDOUT_FRACTION * len(ranked))])
    return out


@functools.lru_cache(maxsize=8)
def _dataset_heldout(seed: int) -> tuple[frozenset, frozenset]:
    """(the generated dataset's task ids, its held-out ids) under `seed`."""
    tasks = _generated_tasks()
    return frozenset(t.id for t in tasks), frozenset(heldout_ids(tasks, seed))


def is_heldout(task_id: str, seed: int = 0) -> bool:
    """Whether a task of a training family is held out of training (module docstring)."""
    known, held = _dataset_heldout(seed)
    if task_id in known:
        return task_id in held
    return _task_unit(task_id, seed) < HELDOUT_FRACTION


def split_of_task(task: Task, seed: int = 0) -> str:
    """A task's split: KernelBench problems form their own split; others follow their family, except
    the held-out tasks of the training families ('heldout')."""
    if task.id.startswith("kernelbench/"):
        return KERNELBENCH_SPLIT
    split = split_of_family(task.family, seed)
    return HELDOUT if split == "train" and is_heldout(task.id, seed) else split


def split_shares(families: Iterable[str], seed: int = 0) -> dict[str, float]:
    """Share of the distinct `families` in each split (0 for an empty split)."""
    fams = sorted(set(families))
    counts = Counter(split_of_family(f, seed) for f in fams)
    return {s: counts[s] / len(fams) if fams else 0.0 for s in SPLITS}


def shares_ok(shares: dict[str, float], tolerance: float = 0.05) -> bool:
    """Whether every split holds its intended share of families within `tolerance`."""
    return all(abs(shares[s] - FRACTIONS[s]) <= tolerance + 1e-12 for s in SPLITS)


def balanced_seed(families: Iterable[str], tolerance: float = 0.05, start: int = 0, tries: int = 10_000) -> int:
    """The first seed from `start` whose family shares are all within `tolerance` of FRACTIONS."""
    fams = sorted(set(families))
    for seed in range(start, start + tries):
        if shares_ok(split_shares(fams, seed), tolerance):
            return seed
    raise ValueError(f"no seed in [{start}, {start + tries}) splits these {len(fams)} families within "
                     f"{tolerance:.0%} of {FRACTIONS}; widen the tolerance or add families")
