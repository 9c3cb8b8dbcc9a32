"""Sharing one GPU's memory by budget between evaluator processes: a worker waits for memory
rather than running out of it.

Every evaluator on a GPU reserves what a group will need (its estimate, `group_footprint`) before
it builds the group, and holds the reservation until the group is released. The reservations of
one GPU live in a small JSON ledger beside the GPU's lock files, changed only under an `flock`;
entries of processes that no longer exist are dropped, so a killed worker never holds memory.

    budget = MemoryBudget(visible_devices, total_bytes=budget_bytes)
    with budget.reserve(nbytes, "task kernelbench/level1/19_ReLU", timeout_s=600):
        ...   # build, check and time the group

A request larger than the whole budget can never be served: `MemoryTooLarge`, at once, naming the
sizes. One that waits longer than `timeout_s`: `MemoryWaitTimeout`. Both are the evaluator's
failures (the verdict `evaluator_error`), never a candidate's.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import time

GIB = float(1 << 30)


class MemoryTooLarge(RuntimeError):
    """A group needs more device memory than this GPU's whole budget."""


class MemoryWaitTimeout(RuntimeError):
    """Other evaluators held the GPU's memory for longer than the wait allows."""


def gib(nbytes: float) -> str:
    return f"{nbytes / GIB:.1f} GiB"


def _started(pid: int) -> str:
    """When process `pid` started (clock ticks since boot, from /proc), '' where unknown: with the pid,
    it tells a live holder from a new process that reuses a dead holder's pid."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _alive(entry: dict) -> bool:
    pid = int(entry["pid"])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        pass
    return not entry.get("start") or _started(pid) in ("", entry["start"])


class MemoryBudget:
    def __init__(self, visible_devices: str | None, total_bytes: int, directory: str = "/tmp", poll_s: float = 0.05):
        name = (visible_devices or "0").replace(",", "_")
        self.path = os.path.join(directory, f"cudaperf-gpu-{name}.memory.json")
        self.lock_path = self.path + ".lock"
        self.total = int(total_bytes)
        self.poll_s = poll_s

    @contextlib.contextmanager
    def _ledger(self):
        with open(self.lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                try:
                    with open(self.path) as f:
                        entries = json.load(f)
                except (OSError, ValueError):
                    entries = {}
                entries = {k: v for k, v in entries.items() if _alive(v)}
                yield entries
                tmp = f"{self.path}.{os.getpid()}.tmp"
                with open(tmp, "w") as f:
                    json.dump(entries, f)
                os.replace(tmp, self.path)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def reserved(self) -> int:
        """Bytes reserved now by live evaluators of this GPU."""
        with self._ledger() as entries:
            return sum(int(v["bytes"]) for v in entries.values())

    def _try(self, token: str, nbytes: int, what: str) -> bool:
        with self._ledger() as entries:
            if sum(int(v["bytes"]) for v in entries.values()) + nbytes > self.total:
                return False
            entries[token] = {"pid": os.getpid(), "start": _started(os.getpid()), "bytes": int(nbytes), "what": what[:200]}
            return True

    def _release(self, token: str) -> None:
        with self._ledger() as entries:
            entries.pop(token, None)

    @contextlib.contextmanager
    def reserve(self, nbytes: int, what: str, timeout_s: float):
        """Hold `nbytes` of the budget for the block, waiting up to `timeout_s` for others to release."""
        if nbytes > self.total:
            raise MemoryTooLarge(f"{what} needs about {gib(nbytes)} of device memory, more than this GPU's whole "
                                 f"evaluation budget of {gib(self.total)}; run it on a GPU with more memory or raise "
                                 f"eval.gpu_memory_fraction")
        token = f"{os.getpid()}-{secrets.token_hex(6)}"
        deadline = time.monotonic() + timeout_s
        while not self._try(token, nbytes, what):
            if time.monotonic() > deadline:
                raise MemoryWaitTimeout(f"{what} waited {timeout_s:.0f} s for {gib(nbytes)} of device memory while "
                                        f"other evaluators held {gib(self.reserved())} of {gib(self.total)}; lower "
                                        f"eval.workers_per_gpu or raise eval.memory_wait_s")
            time.sleep(self.poll_s)
        try:
            yield
        finally:
            self._release(token)
