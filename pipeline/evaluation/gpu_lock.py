"""Sharing one GPU between evaluator processes: correctness work overlaps, timing is exclusive.

Every process that touches a GPU for evaluation (group preparation, loading a candidate,
correctness calls) holds the GPU's lock shared; a timing phase holds it exclusive, so no other
work runs on that GPU while a kernel is timed. Locks are `flock`s on two files per GPU: the
"gate" makes a waiting timer block new shared holders (without it a steady stream of correctness
work could starve timing). `flock` locks belong to open files, so threads of one process
exclude each other exactly as separate processes do. A holder's GPU work is done before its lock passes
(`idle`, the evaluator's context synchronisation): queued work of one holder never runs into another's timing.
"""
from __future__ import annotations

import contextlib
import fcntl
import os


class GpuLock:
    def __init__(self, visible_devices: str | None, directory: str = "/tmp", idle=None):
        self.idle = idle  # called before a shared hold ends: waits until this process's GPU work is done
        name = (visible_devices or "0").replace(",", "_")
        self.main_path = os.path.join(directory, f"cudaperf-gpu-{name}.lock")
        self.gate_path = os.path.join(directory, f"cudaperf-gpu-{name}.gate")

    @contextlib.contextmanager
    def shared(self):
        """Correctness work: many holders at once, never during a timing phase."""
        with open(self.main_path, "a") as main:
            with open(self.gate_path, "a") as gate:
                fcntl.flock(gate, fcntl.LOCK_EX)
                fcntl.flock(main, fcntl.LOCK_SH)
                fcntl.flock(gate, fcntl.LOCK_UN)
            try:
                yield
            finally:
                try:
                    if self.idle is not None:
                        self.idle()
                finally:
                    fcntl.flock(main, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def exclusive(self):
        """A timing phase: waits for current shared holders, keeps new ones out until it ends."""
        with open(self.gate_path, "a") as gate, open(self.main_path, "a") as main:
            fcntl.flock(gate, fcntl.LOCK_EX)
            try:
                fcntl.flock(main, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(main, fcntl.LOCK_UN)
            finally:
                fcntl.flock(gate, fcntl.LOCK_UN)
