"""Sharing one GPU between evaluator processes: correctness work overlaps, timing is exclusive.

Every process that touches a GPU for evaluation (group preparation, loading a candidate,
correctness calls) holds the GPU's lock shared; a timing phase holds it exclusive, so no other
work runs on that GPU while a kernel is timed. Locks are `flock`s on two files per GPU: the
"gate" makes a waiting timer block new shared holders (without it a steady stream of correctness
work could starve timing). `flock` locks belong to open files, so threads of one process
exclude each other exactly as separate processes do. A holder's GPU work is done before its lock passes
(`idle`, the evaluator's context synchronisation): queued work of one holder never runs into another's timing.
With `trace_path`, every hold is written with its reason and its times (lock_trace.py).
"""
from __future__ import annotations

import contextlib
import fcntl
import os

from pipeline.evaluation.gpu.lock_trace import Hold, LockTrace


class GpuLock:
    def __init__(self, visible_devices: str | None, directory: str = "/tmp", idle=None, trace_path: str = ""):
        self.idle = idle  # called before a shared hold ends: waits until this process's GPU work is done
        name = (visible_devices or "0").replace(",", "_")
        self.main_path = os.path.join(directory, f"cudaperf-gpu-{name}.lock")
        self.gate_path = os.path.join(directory, f"cudaperf-gpu-{name}.gate")
        # every hold, its reason and times, under this GPU's lock's name
        self.trace = LockTrace(trace_path, os.path.basename(self.main_path)) if trace_path else None

    @contextlib.contextmanager
    def shared(self, why: str = ""):
        """Correctness work: many holders at once, never during a timing phase. `why`: the trace's reason."""
        hold = Hold("shared", why)
        with open(self.main_path, "a") as main:
            with open(self.gate_path, "a") as gate:
                fcntl.flock(gate, fcntl.LOCK_EX)
                fcntl.flock(main, fcntl.LOCK_SH)
                fcntl.flock(gate, fcntl.LOCK_UN)
            hold.granted()
            try:
                yield
            finally:
                try:
                    if self.idle is not None:
                        self.idle()
                finally:
                    fcntl.flock(main, fcntl.LOCK_UN)
                    hold.done(self.trace)

    def turns(self, code=None) -> "Turns":
        """A holder's exclusive and shared turns, switched in place (see Turns)."""
        return Turns(self, code)

    @contextlib.contextmanager
    def exclusive(self, why: str = ""):
        """A timing phase: waits for current shared holders, keeps new ones out until it ends."""
        hold = Hold("exclusive", why)
        with open(self.gate_path, "a") as gate, open(self.main_path, "a") as main:
            fcntl.flock(gate, fcntl.LOCK_EX)
            try:
                fcntl.flock(main, fcntl.LOCK_EX)
                hold.granted()
                try:
                    yield
                finally:
                    fcntl.flock(main, fcntl.LOCK_UN)
                    hold.done(self.trace)
            finally:
                fcntl.flock(gate, fcntl.LOCK_UN)


class Turns:
    """One holder's turns on a GpuLock, switched in place: `exclusive()` for timing, `shared()` for correctness
    work, `release()` at the end. From exclusive to shared the lock is converted while the gate is still held,
    so nobody is granted the GPU between the two. `code` (a threading.Lock, the evaluator's candidate_code) is
    taken with each exclusive turn and kept through the shared turn after it; it is given up, with the GPU's
    work done (`idle`), only when the shared turn ends: no other code that needs it (a candidate loaded ahead)
    runs between a timed window and its check. The locks are taken in the order every other holder takes them
    (the GPU's, then `code`), and `code` is never held while waiting at the gate."""

    def __init__(self, lock: GpuLock, code=None):
        self.lock, self.code = lock, code
        self.mode = ""
        self._main = self._gate = None
        self._code_held = False
        self._hold: Hold | None = None  # the turn in progress, for the lock's trace

    def _turn(self, mode: str, why: str) -> None:
        """The trace's bookkeeping: the turn before ends, this one is asked for now."""
        if self._hold is not None:
            self._hold.done(self.lock.trace)
        self._hold = Hold(mode, why)

    def exclusive(self, why: str = "") -> None:
        if self.mode == "exclusive":
            return
        self.release()
        self._turn("exclusive", why)
        self._gate = open(self.lock.gate_path, "a")
        fcntl.flock(self._gate, fcntl.LOCK_EX)
        self._main = open(self.lock.main_path, "a")
        fcntl.flock(self._main, fcntl.LOCK_EX)
        self._take_code()  # free: whoever holds it holds the GPU shared, which no one does now
        self._hold.granted()
        self.mode = "exclusive"

    def shared(self, why: str = "") -> None:
        if self.mode == "shared":
            return
        if self.mode == "exclusive":
            fcntl.flock(self._main, fcntl.LOCK_SH)  # converted under the gate: no one is granted anything between
            fcntl.flock(self._gate, fcntl.LOCK_UN)
            self._gate.close()
            self._gate = None
            self._turn("shared", why)  # the exclusive turn's record written once others may go on
        else:
            self._turn("shared", why)
            with open(self.lock.gate_path, "a") as gate:
                fcntl.flock(gate, fcntl.LOCK_EX)
                self._main = open(self.lock.main_path, "a")
                fcntl.flock(self._main, fcntl.LOCK_SH)
                fcntl.flock(gate, fcntl.LOCK_UN)
            self._take_code()
        self._hold.granted()
        self.mode = "shared"

    def release(self) -> None:
        if not self.mode and self._main is None and self._gate is None and self._hold is None:
            return  # nothing held, nothing half taken (an exception between the flocks leaves them open)
        try:
            if self.lock.idle is not None:
                self.lock.idle()
        finally:
            if self._code_held:
                self.code.release()
                self._code_held = False
            for f in (self._main, self._gate):
                if f is not None:
                    fcntl.flock(f, fcntl.LOCK_UN)
                    f.close()
            self._main = self._gate = None
            self.mode = ""
            if self._hold is not None:
                self._hold.done(self.lock.trace)
                self._hold = None

    def _take_code(self) -> None:
        if self.code is not None and not self._code_held:
            self.code.acquire()
            self._code_held = True
