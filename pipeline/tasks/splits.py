"""Train, validation and test splits of the task dataset, by computation family, and the held-out tasks
of the training families.

In: a family name (or a Task) and a seed; the frozen table `pipeline/assets/splits.json`. Out: 'train',
'val' or 'test' ('kernelbench' for KernelBench problems, which are a benchmark and never trained on); for
a task also 'heldout'. Every task of a family lands in the same split, so the splits share no family: a
model is tested on computations it has never seen. Everything that needs a split (the task reader and
so RL, the ranker, the measurement rows, the data card) calls `split_of_task` or `split_of_family`.

Seed 0 (`FROZEN_SEED`, the default of `data.split_seed`) reads the frozen table, so adding a family
never moves another one. Its `ranked` part is the generated families ranked by a hash of (seed, family)
and cut at exact shares (15 % test, 15 % val, the rest train; `assign_splits`) when the table was last
rebalanced; its `added` part holds the families added since, each placed by its own hash against the
shares as thresholds (`threshold_split`), which needs no other family. A family the table does not name
(one not frozen yet, or a built-in task's) gets that same threshold split, so freezing a new family does
not change its split either. `cudaperf data splits --freeze` writes new families into the table and drops
removed ones; `--rebalance` ranks every family afresh (it moves families: a new dataset version).
Any other seed is an option for experiments: the generated dataset's current families ranked afresh at
exact shares under that seed, so there a new family can move others. `split_shares` reports the real
shares of any set of families and `balanced_seed` finds a seed that meets them.

`heldout` (`split_of_task` only): the evaluation split of *unseen tasks of the training families*, new
parameterisations and sizes of computations the policy trains on, never trained on themselves. Of each
training family's tasks of each kind, the HELDOUT_FRACTION ranked first by a hash of (seed, task id) are
held out (exact shares per family and kind, so every family is represented); a task outside the
generated dataset is held out when the same hash falls below the fraction. The ranking is within one
family, so a new family moves no held-out task of the others. The family-disjoint `test` split stays as
it is: the two measure different things (new tasks of known computations, and new computations).
"""
from __future__ import annotations

import functools
import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Iterable

from pipeline.core.assets import SPLITS_TABLE
from pipeline.core.errors import UserError
from pipeline.core.records import Task

SPLITS = ("train", "val", "test")  # by family
HELDOUT = "heldout"
TASK_SPLITS = SPLITS + (HELDOUT,)  # what a task can be in (`generated:<split>`)
HELDOUT_FRACTION = 0.20
FRACTIONS = {"train": 0.70, "val": 0.15, "test": 0.15}
KERNELBENCH_SPLIT = "kernelbench"
FROZEN_SEED = 0  # the split seed whose family splits are frozen in SPLITS_TABLE


class SplitsTableError(UserError, ValueError):
    """The frozen split table is missing or malformed; the message says how to restore it."""


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


def generated_families() -> set[str]:
    """The families of the generated dataset (what the frozen table must name)."""
    return {t.family for t in _generated_tasks()}


@functools.lru_cache(maxsize=8)
def _dataset_splits(seed: int) -> dict[str, str]:
    """family -> split for the generated dataset's current families, by rank at exact shares (seeds other
    than FROZEN_SEED)."""
    return assign_splits(generated_families(), seed)


def assign_splits(families, seed: int = 0) -> dict[str, str]:
    """Splits for a known set of families: ranked by hash, test and val each round(15 %) of them
    (at least one each from 3 families on), the rest train."""
    ranked = sorted(set(families), key=lambda f: (_unit(f, seed), f))
    n = len(ranked)
    n_test = max(1 if n >= 3 else 0, round(FRACTIONS["test"] * n))
    n_val = max(1 if n >= 3 else 0, round(FRACTIONS["val"] * n))
    return {f: "test" if i < n_test else "val" if i < n_test + n_val else "train" for i, f in enumerate(ranked)}


def threshold_split(family: str, seed: int = 0) -> str:
    """A family's split from its own hash against the shares as thresholds: needs no other family, meets
    the shares on average only."""
    u = _unit(family, seed)
    if u < FRACTIONS["test"]:
        return "test"
    if u < FRACTIONS["test"] + FRACTIONS["val"]:
        return "val"
    return "train"


# --- the frozen table (seed 0) --------------------------------------------------------------------------
@functools.lru_cache(maxsize=4)
def frozen_table(path: str = str(SPLITS_TABLE)) -> dict[str, dict[str, str]]:
    """{"ranked": {family: split}, "added": {family: split}} of the frozen table (module docstring)."""
    try:
        raw = json.loads(Path(path).read_text())
        table = {"ranked": dict(raw["ranked"]), "added": dict(raw["added"])}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SplitsTableError(f"the frozen split table {path} is missing or unreadable ({e}); restore it from the "
                               f"repository, or write it with `cudaperf data splits --rebalance`") from None
    bad = {f: s for part in table.values() for f, s in part.items() if s not in SPLITS}
    if bad:
        raise SplitsTableError(f"the frozen split table {path} gives unknown splits {bad}; use one of "
                               f"{', '.join(SPLITS)}, or rewrite it with `cudaperf data splits --freeze`")
    return table


def frozen_splits(path: str = str(SPLITS_TABLE)) -> dict[str, str]:
    """family -> split of every family the frozen table names."""
    table = frozen_table(path)
    return {**table["ranked"], **table["added"]}


def refrozen(families: Iterable[str], table: dict, rebalance: bool = False) -> dict[str, dict[str, str]]:
    """The frozen table for the current `families`: the families of `table` keep their split, new ones are
    added by `threshold_split`, removed ones are dropped; with `rebalance`, every family is ranked afresh at
    exact shares (which moves families)."""
    fams = set(families)
    if rebalance:
        return {"ranked": assign_splits(fams, FROZEN_SEED), "added": {}}
    ranked = {f: s for f, s in table["ranked"].items() if f in fams}
    added = {f: s for f, s in table["added"].items() if f in fams}
    added.update({f: threshold_split(f, FROZEN_SEED) for f in fams - set(ranked) - set(added)})
    return {"ranked": ranked, "added": added}


def write_frozen_table(table: dict, path: str = str(SPLITS_TABLE)) -> None:
    """Write the frozen table, one family a line, sorted (a change reads as a small diff)."""
    doc = {"about": f"the split of every generated family at data.split_seed {FROZEN_SEED} "
                    "(pipeline/tasks/splits.py); write it with `cudaperf data splits --freeze`",
           "seed": FROZEN_SEED, "ranked": dict(sorted(table["ranked"].items())),
           "added": dict(sorted(table["added"].items()))}
    Path(path).write_text(json.dumps(doc, indent=1) + "\n")
    frozen_table.cache_clear()


def split_of_family(family: str, seed: int = 0) -> str:
    """The split every task of `family` belongs to under `seed` (module docstring)."""
    if not family:
        raise ValueError("split_of_family() needs a family name; every Task must have its family set")
    known = frozen_splits() if seed == FROZEN_SEED else _dataset_splits(seed)
    return known.get(family) or threshold_split(family, seed)


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
