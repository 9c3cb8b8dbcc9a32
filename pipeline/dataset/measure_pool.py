"""The measurement's worker processes and their supervisor (`WorkerPool`): spawned interpreters that each own the
GPU's exclusive lock while they time one task, a job each, restarted when one crashes, hangs or dies; the
supervisor's protocol is measure_worker.py's. `measure.py` hands them prepared tasks and writes the rows.
"""
from __future__ import annotations

import hashlib
import multiprocessing as mp
import time
from dataclasses import dataclass
from multiprocessing.connection import wait

from pipeline.core.errors import UserError
from pipeline.dataset.measure_worker import worker_main


class MeasureError(UserError, RuntimeError):
    """A problem the user can fix (no GPU, bad shard, worker cannot start); one line, with the fix."""


def task_seed(task_id: str) -> int:
    return int.from_bytes(hashlib.sha256(f"measure\0{task_id}".encode()).digest()[:4], "big") & 0x7FFFFFFF


@dataclass
class Worker:
    proc: mp.Process
    conn: object
    info: dict
    job: object = None  # measure.Job: the task it is timing
    deadline: float = 0.0
    impl: str | None = None
    stage: str = ""
    jobs_done: int = 0


class WorkerPool:
    """Worker processes on this host's GPU; a dead or hung one is replaced. The trusted-code counterpart
    of `actors/pool.py`'s SupervisedPool: a dead worker is replaced and nothing else is lost (the
    implementation that was running is recorded as failed, the task's others are measured again), but
    plain processes, because dataset measurement runs the project's own implementations on one host,
    without Ray and without the candidates' sandbox."""

    def __init__(self, n: int, settings: dict, worker_class: str, task_timeout_s: float, tasks_per_worker: int,
                 startup_timeout_s: float = 300.0):
        self.settings, self.worker_class = settings, worker_class
        self.task_timeout_s, self.tasks_per_worker = task_timeout_s, tasks_per_worker
        self.startup_timeout_s = startup_timeout_s
        self.ctx = mp.get_context("spawn")  # a fresh interpreter: CUDA never inherited through fork
        self.restarts = 0
        spawned = [self._spawn() for _ in range(n)]  # started together: each takes seconds to import torch
        self.workers = [self._ready(*p) for p in spawned]

    def _spawn(self):
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=worker_main, args=(child, self.settings, self.worker_class), daemon=True)
        proc.start()
        child.close()
        return proc, parent

    def _ready(self, proc, parent) -> Worker:
        if not parent.poll(self.startup_timeout_s):
            proc.kill()
            raise MeasureError(f"a measurement worker did not start within {self.startup_timeout_s:.0f} s; check "
                               "that the GPU is free and torch imports")
        try:
            msg = parent.recv()
        except EOFError:
            proc.join(5)
            raise MeasureError(f"a measurement worker died while starting (exit {proc.exitcode}); run the GPU "
                               "tests (pytest -m gpu tests/dataset) to see why") from None
        if msg["event"] != "ready":
            proc.join(5)
            raise MeasureError(f"a measurement worker could not start: {msg['error']}; run on a host with an "
                               "NVIDIA GPU and driver")
        return Worker(proc, parent, msg["info"])

    def _start(self) -> Worker:
        return self._ready(*self._spawn())

    @property
    def info(self) -> dict:
        return self.workers[0].info

    def idle(self) -> list[Worker]:
        return [w for w in self.workers if w.job is None]

    def busy(self) -> list[Worker]:
        return [w for w in self.workers if w.job is not None]

    def submit(self, w: Worker, job) -> None:  # job: a measure.Job
        prep = job.prep
        w.job, w.impl, w.stage = job, None, "prepare"
        w.deadline = time.monotonic() + self.task_timeout_s
        artifacts = {k: v for k, v in prep.artifacts.items() if k not in job.skipped}  # a library may be shared:
        entries = {k: prep.entries[k] for k in artifacts if k in prep.entries}  # a skipped symbol is never called
        w.conn.send({"task": prep.task.model_dump(mode="json"), "artifacts": artifacts, "entries": entries,
                     "seed": task_seed(prep.task.id)})

    def replace(self, w: Worker) -> None:
        if w.proc.is_alive():
            w.proc.kill()
        w.proc.join(10)
        w.conn.close()
        self.restarts += 1
        fresh = self._start()
        self.workers[self.workers.index(w)] = fresh

    def retire_if_used_up(self, w: Worker) -> None:
        """Each worker keeps every library it loaded; replace it after tasks_per_worker tasks."""
        if w.jobs_done >= self.tasks_per_worker:
            w.conn.send(None)
            self.replace(w)
            self.restarts -= 1  # planned, not a failure

    def events(self, timeout: float) -> list[tuple[Worker, dict]]:
        """Messages from busy workers; a death or an expired deadline becomes a 'died' event."""
        busy = self.busy()
        ready = wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout) if busy else []
        out = []
        for w in busy:
            if w.conn in ready:
                try:
                    while w.conn.poll():
                        out.append((w, w.conn.recv()))
                except (EOFError, OSError):
                    out.append((w, {"event": "died", "error": f"the worker died (exit {w.proc.exitcode}) while "
                                                              f"{w.stage} {w.impl or ''}".strip()}))
                continue
            if not w.proc.is_alive():
                out.append((w, {"event": "died", "error": f"the worker died (exit {w.proc.exitcode}) while {w.stage} "
                                                          f"{w.impl or ''}".strip()}))
            elif time.monotonic() > w.deadline:
                out.append((w, {"event": "died", "error": f"no result within {self.task_timeout_s:.0f} s (hung while "
                                                          f"{w.stage} {w.impl or ''})".strip()}))
        return out

    def close(self) -> None:
        for w in self.workers:
            try:
                w.conn.send(None)
            except (OSError, BrokenPipeError):
                pass
        for w in self.workers:
            w.proc.join(10)
            if w.proc.is_alive():
                w.proc.kill()


# --- one shard ----------------------------------------------------------------------------------------
