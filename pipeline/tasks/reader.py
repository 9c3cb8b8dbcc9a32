"""Task sources and the task stream: select tasks, shuffle them by seed, remember where a run is.

In: task sources (`generated`, `generated:<split>`, `builtin`, a directory of task YAML files, a
KernelBench checkout: whatever `pipeline.tasks.load_tasks` takes), filters by kind, family and
split, a shuffle seed; tasks the degeneracy registry marks degenerate are left out (`degenerate` lists them with
their reasons), and tasks it does not vouch for (no current entry, or `unchecked`) are refused with a DataError
unless `allow_unchecked` (`data.allow_unchecked_tasks`). Out: a `TaskReader` whose `rows()` are plain dicts (one per task, in a
seeded order, with its position) that `actors/task_stream.py` turns into a Ray Data stream, and whose
`state()` saved after the rows consumed so far gives, once restored, exactly the tasks not yet
seen. Plain Python: no Ray here.

Order: the selection is sorted by id, then shuffled with a generator seeded by (seed, epoch), so
an epoch's order never depends on the machine or on Python's hash seed. When an epoch ends the
next one starts at position 0 in a new order.
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import asdict, dataclass
from typing import Iterable, Iterator

from pipeline.tasks.splits import split_of_task
from pipeline.core.errors import UserError
from pipeline.core.records import Task
from pipeline.tasks import load_tasks
from pipeline.tasks.degenerate import REGISTRY, refusal, split_degenerate, unchecked


class DataError(UserError, ValueError):
    """A data source or reader state a user gave is unusable; the message says why and how to fix it."""


def _generated(source: str) -> bool:
    return source == "generated" or source.startswith("generated:")


def load_source(source: str, kernelbench_levels: Iterable[int] = (1, 2), split_seed: int = 0) -> list[Task]:
    """The tasks of one source (see the module docstring)."""
    return load_tasks(source, kernelbench_levels, split_seed)


def generator_version(source: str) -> str:
    """What produced a source's tasks: the generators' version for generated tasks, else the source."""
    if _generated(source):
        from pipeline.tasks import generate
        return f"generated-{getattr(generate, 'GENERATOR_VERSION', 'unversioned')}"
    return str(source)


@dataclass
class ReaderState:
    """Where a reader stands; JSON-serialisable (save it with a checkpoint)."""
    fingerprint: str  # hash of the selected task ids and the seed: a state fits only its own selection
    seed: int
    epoch: int
    position: int  # tasks of this epoch's order already consumed


class TaskReader:
    def __init__(self, tasks: list[Task], kinds: Iterable[str] | None = None, families: Iterable[str] | None = None,
                 splits: Iterable[str] | None = None, seed: int = 0, split_seed: int = 0, shuffle: bool = True,
                 allow_unchecked: bool = False, registry: str = str(REGISTRY)):
        """Select `tasks` by kind, family and split (None keeps all), in a `seed`ed order; DataError where the
        degeneracy `registry` does not vouch for a selected task, unless `allow_unchecked`."""
        kinds, families, splits = (set(x) if x is not None else None for x in (kinds, families, splits))
        picked = [t for t in tasks if (kinds is None or t.kind in kinds) and (families is None or t.family in families)
                  and (splits is None or split_of_task(t, split_seed) in splits)]
        missing = [] if allow_unchecked else unchecked(picked, registry)
        if missing:
            raise DataError(refusal(missing, "training"))
        picked, self.degenerate = split_degenerate(picked, registry)  # their checks pass lazy kernels: never trained on
        seen: set[str] = set()
        for t in picked:
            if t.id in seen:
                raise DataError(f"task id '{t.id}' comes from two sources; give each source distinct tasks")
            seen.add(t.id)
        self.tasks = sorted(picked, key=lambda t: t.id)
        self._by_id = {t.id: t for t in self.tasks}
        self.seed, self.split_seed, self.shuffle = seed, split_seed, shuffle
        digest = hashlib.sha256(f"{seed}\0{shuffle}\0{split_seed}\0".encode() + "\0".join(seen_sorted(self.tasks)).encode())
        self.fingerprint = digest.hexdigest()[:16]
        self.epoch, self.position = 0, 0

    @classmethod
    def from_sources(cls, sources: str | Iterable[str] = "generated", kernelbench_levels: Iterable[int] = (1, 2),
                     **selection) -> "TaskReader":
        """A reader over one or several sources, e.g. ['generated', '/path/to/KernelBench']."""
        sources = [sources] if isinstance(sources, str) else list(sources)
        split_seed = selection.get("split_seed", 0)  # 'generated:<split>' and the splits filter agree
        tasks = [t for s in sources for t in load_source(s, kernelbench_levels, split_seed)]
        return cls(tasks, **selection)

    def __len__(self) -> int:
        return len(self.tasks)

    def task(self, row: dict) -> Task:
        """The Task of a row of this reader's `rows`: the reader's own object where it holds it (no parsing: the
        consumer of a stream in the reader's process), else the row's JSON."""
        return self._by_id.get(row["task_id"]) or task_of_row(row)

    def order(self, epoch: int) -> list[Task]:
        """The tasks in the order of one epoch."""
        tasks = list(self.tasks)
        if self.shuffle:
            random.Random(f"{self.seed}:{epoch}").shuffle(tasks)
        return tasks

    def rows(self, epochs: int = 1) -> Iterator[dict]:
        """Rows from the current position to the end of the epoch, then `epochs - 1` whole epochs more.
        Each row: epoch, position, task_id, kind, family, split, task_json."""
        if not self.tasks:
            return
        for epoch in range(self.epoch, self.epoch + epochs):
            start = self.position if epoch == self.epoch else 0
            for pos, task in enumerate(self.order(epoch)[start:], start):
                yield {"epoch": epoch, "position": pos, "task_id": task.id, "kind": task.kind, "family": task.family,
                       "split": split_of_task(task, self.split_seed), "task_json": task.model_dump_json()}

    def consumed(self, row: dict) -> None:
        """Record that `row` (and every row before it) has been used: the state now points after it."""
        self.epoch, self.position = row["epoch"], row["position"] + 1
        if self.position >= len(self.tasks):
            self.epoch, self.position = self.epoch + 1, 0

    def state(self) -> dict:
        return asdict(ReaderState(self.fingerprint, self.seed, self.epoch, self.position))

    def restore(self, state: dict) -> "TaskReader":
        """Continue from a saved state; it must come from a reader with the same selection and seed."""
        try:
            s = ReaderState(**state)
        except TypeError as e:
            raise DataError(f"reader state {state!r} is malformed ({e}); pass a dict saved from TaskReader.state()")
        if s.fingerprint != self.fingerprint:
            raise DataError(f"the saved reader state (fingerprint {s.fingerprint}) belongs to another task selection "
                            f"or seed than this reader ({self.fingerprint}); use the same sources, filters and seed, "
                            f"or start without a state")
        if not 0 <= s.position < max(len(self.tasks), 1):
            raise DataError(f"reader state position {s.position} is outside 0..{len(self.tasks) - 1}")
        self.epoch, self.position = s.epoch, s.position
        return self


def seen_sorted(tasks: list[Task]) -> list[str]:
    return sorted(t.id for t in tasks)


def task_of_row(row: dict) -> Task:
    """The Task a stream row carries."""
    return Task.model_validate_json(row["task_json"])
