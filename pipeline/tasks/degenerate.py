"""The degeneracy registry: which tasks' checks a kernel could pass without doing the work, and why.

In: `degeneracy.json` beside this file, written by `cudaperf data degeneracy --update` (the check itself is
`pipeline/evaluation/checks/degeneracy.py`: it runs references, so it lives with the evaluation). Out: for a task, its
entry (verdict, reason) when the entry was made for the task as it is now (the same content hash). Tasks
whose verdict is `degenerate` are kept out of training (`pipeline/tasks/reader.py`) and of benchmark
aggregates (`pipeline/scoring/metrics.py`), and are reported with their reason. Reads one file, writes nothing.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from pipeline.core.assets import DEGENERACY_REGISTRY
from pipeline.core.records import Task

REGISTRY = DEGENERACY_REGISTRY


@lru_cache(maxsize=4)
def load_registry(path: str = str(REGISTRY)) -> dict:
    """{task id: {"hash", "verdict", "reason", ...}} of the registry file (empty where there is none)."""
    p = Path(path)
    if not p.is_file():
        return {}
    return json.loads(p.read_text()).get("tasks", {})


def entry_of(task: Task, path: str = str(REGISTRY)) -> dict | None:
    """The registry's entry for `task` as it is now, or None (never checked, or changed since)."""
    entry = load_registry(path).get(task.id)
    return entry if entry is not None and entry.get("hash") == task.content_hash() else None


def degenerate_reason(task: Task, path: str = str(REGISTRY)) -> str:
    """Why `task` is degenerate ("" when the registry does not say it is)."""
    entry = entry_of(task, path)
    return entry.get("reason", "degenerate") if entry is not None and entry.get("verdict") == "degenerate" else ""


def split_degenerate(tasks: list[Task], path: str = str(REGISTRY)) -> tuple[list[Task], list[tuple[str, str]]]:
    """(usable tasks, [(task id, reason)] of the degenerate ones)."""
    keep, dropped = [], []
    for t in tasks:
        why = degenerate_reason(t, path)
        if why:
            dropped.append((t.id, why))
        else:
            keep.append(t)
    return keep, dropped
