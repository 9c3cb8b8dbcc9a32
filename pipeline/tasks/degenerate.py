"""The degeneracy registry: which tasks' checks a kernel could pass without doing the work, and why.

In: `degeneracy.json` beside this file, written by `cudaperf data degeneracy --update` (the check itself is
`pipeline/evaluation/checks/degeneracy.py`: it runs references, so it lives with the evaluation). Out: for a task, its
entry (verdict, reason) when the entry was made for the task as it is now (the same hash, `registry_hash`).
Tasks whose verdict is `degenerate` are kept out of training (`pipeline/tasks/reader.py`) and of benchmark
aggregates (`pipeline/scoring/metrics.py`), and are reported with their reason; tasks with no current entry, or
one that says `unchecked`, are refused by both unless `data.allow_unchecked_tasks` is set (`refusal`).
Reads the registry; `write_registry` writes it, one line per task.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from pipeline.core.assets import DEGENERACY_REGISTRY
from pipeline.core.records import Task

REGISTRY = DEGENERACY_REGISTRY
MAX_REASON_CHARS = 400  # a registry entry's reason is cut here (the full one is in `--out` reports)


def registry_hash(task: Task) -> str:
    """The hash a registry entry is made for: the task as evaluated (`Task.content_hash`), less how a ParEval
    task's candidate is called (its own form or the kernel form), which the check of its outputs does not read."""
    return (task.model_copy(update={"pareval": None}) if task.pareval is not None else task).content_hash()


@lru_cache(maxsize=4)
def load_registry(path: str = str(REGISTRY)) -> dict:
    """{task id: {"hash", "verdict", "reason"}} of the registry file (empty where there is none)."""
    p = Path(path)
    if not p.is_file():
        return {}
    return json.loads(p.read_text()).get("tasks", {})


def write_registry(entries: dict, path: str = str(REGISTRY)) -> None:
    """Write {task id: entry} sorted by id, one short entry a line ({"hash", "verdict"[, "reason"]})."""
    lines = []
    for task_id, e in sorted(entries.items()):
        short = {"hash": e["hash"], "verdict": e["verdict"]}
        if e.get("reason"):
            short["reason"] = e["reason"][:MAX_REASON_CHARS]
        lines.append(f"  {json.dumps(task_id)}: {json.dumps(short)}")
    Path(path).write_text('{"tasks": {\n' + ",\n".join(lines) + "\n}}\n")
    load_registry.cache_clear()


def entry_of(task: Task, path: str = str(REGISTRY)) -> dict | None:
    """The registry's entry for `task` as it is now, or None (never checked, or changed since)."""
    entry = load_registry(path).get(task.id)
    return entry if entry is not None and entry.get("hash") == registry_hash(task) else None


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


def unchecked(tasks: list[Task], path: str = str(REGISTRY)) -> list[tuple[str, str]]:
    """[(task id, why)] of the tasks the registry does not vouch for: no entry, an entry of an earlier version of
    the task, or the verdict `unchecked`."""
    table = load_registry(path)
    out = []
    for t in tasks:
        entry = table.get(t.id)
        if entry is None:
            out.append((t.id, "not in the registry"))
        elif entry.get("hash") != registry_hash(t):
            out.append((t.id, "changed since it was checked"))
        elif entry.get("verdict") == "unchecked":
            out.append((t.id, f"unchecked: {entry.get('reason', '')}"))
    return out


def source_hint(task_ids: list[str]) -> str:
    """The `--source` option of `cudaperf data degeneracy` that checks these tasks."""
    first = task_ids[0]
    if first.startswith("kernelbench/"):
        return "--kernelbench-dir DIR --levels " + ",".join(sorted({i.split("/")[1].removeprefix("level")
                                                                    for i in task_ids if i.startswith("kernelbench/")}))
    if first.startswith("pareval/"):
        return "--source pareval"
    return "--source generated" if first.count("/") >= 2 else "--source builtin (or the task directory)"


def refusal(missing: list[tuple[str, str]], what: str, verb: str = "refuses") -> str:
    """One sentence refusing `what` (training, a benchmark) on tasks the registry does not vouch for (`verb`:
    "leaves out" where the others go on)."""
    named = ", ".join(f"{i} ({why})" for i, why in missing[:3]) + (f" and {len(missing) - 3} more"
                                                                    if len(missing) > 3 else "")
    return (f"{what} {verb} {len(missing)} task(s) the degeneracy registry does not vouch for: {named}; check them "
            f"with `cudaperf data degeneracy {source_hint([i for i, _ in missing])} --update`, or set "
            f"data.allow_unchecked_tasks=true to use them unchecked")
