"""Sharing one GPU between evaluator processes: correctness work overlaps, timing is exclusive.

Every process that touches a GPU for evaluation (group preparation, loading a candidate,
correctness calls) holds the GPU's lock shared; a timing phase holds it exclusive, so no other
work runs on that GPU while a kernel is timed. Locks are `flock`s on three files per GPU: the
"gate" makes a waiting timer block new shared holders (without it a steady stream of correctness
work could starve timing), and every timer holds the "queue" shared from its request to the end of its turn, so a
new shared holder lets the timers already waiting go first (`_timers_first`, at most `timers_first_s`): their
turns run back to back and the shared holds after them overlap. Without it the timers of several evaluators form a
convoy: each waits out the shared turn (a round's checks and inputs) of the one before, and nothing overlaps.
`flock` locks belong to open files, so threads of one process exclude each other exactly as separate processes
do. A holder's GPU work is done before its lock passes (`idle`, the evaluator's context synchronisation): queued
work of one holder never runs into another's timing. With `trace_path`, every hold is written with its reason and
its times (lock_trace.py).
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time

from pipeline.evaluation.gpu.lock_trace import Hold, LockTrace


class CodeLock:
    """The evaluator's candidate_code: a lock held while a candidate's code may run on the group's buffers (its load)
    or another's outputs are read (its checks, a timed window to its check), so none of them overlap; and whether
    its holder, a timer between its window and its check, is coming back into the GPU's lock (`reentering`), when
    nobody may wait for it while holding the GPU (GpuLock.shared_with)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.reentering = False

    def acquire(self, blocking: bool = True) -> bool:
        return self._lock.acquire(blocking)

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self):
        self._lock.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self._lock.release()


TIMERS_FIRST_S = 0.2  # the longest a new shared holder lets waiting timers go first (they cannot starve it)


class GpuLock:
    def __init__(self, visible_devices: str | None, directory: str = "/tmp", idle=None, trace_path: str = "",
                 timers_first_s: float = TIMERS_FIRST_S):
        self.idle = idle  # called before a shared hold ends: waits until this process's GPU work is done
        self.timers_first_s = timers_first_s
        name = (visible_devices or "0").replace(",", "_")
        self.main_path = os.path.join(directory, f"cudaperf-gpu-{name}.lock")
        self.gate_path = os.path.join(directory, f"cudaperf-gpu-{name}.gate")
        self.queue_path = os.path.join(directory, f"cudaperf-gpu-{name}.queue")  # held shared by every timer
        # every hold, its reason and times, under this GPU's lock's name
        self.trace = LockTrace(trace_path, os.path.basename(self.main_path)) if trace_path else None

    @contextlib.contextmanager
    def shared(self, why: str = ""):
        """Correctness work: many holders at once, never during a timing phase. `why`: the trace's reason."""
        hold = Hold("shared", why)
        with open(self.main_path, "a") as main:
            self._enter_shared(main)
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

    @contextlib.contextmanager
    def shared_with(self, code: "CodeLock", why: str = ""):
        """`shared`, and `code` (the evaluator's candidate_code) with it. Where another thread has `code`, it is
        waited for holding the GPU shared (its holder, a timer's shared turn or another shared holder, lets it go
        without waiting for the GPU), except while its holder is coming back into the GPU's lock from its window
        (`code.reentering`): then a timer queued at the gate would wait for this hold, and this hold for `code`, so
        the GPU is let go and taken again once the holder is back in."""
        attempt = why
        while True:
            with self.shared(attempt):
                if code.acquire(blocking=False) or (not code.reentering and code.acquire()):
                    try:
                        yield
                    finally:
                        code.release()
                    return
            attempt = f"{why} (let go: candidate_code's holder was coming back in)"  # the trace tells them apart
            while code.reentering and code.locked():
                time.sleep(0.0005)

    def _timers_first(self) -> None:
        """Before a new shared hold: wait (at most timers_first_s) until no timer is waiting or timing."""
        deadline = time.monotonic() + self.timers_first_s
        with open(self.queue_path, "a") as queue:
            while True:
                try:
                    fcntl.flock(queue, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        return
                    time.sleep(0.0002)
                    continue
                fcntl.flock(queue, fcntl.LOCK_UN)
                return

    def _enter_shared(self, main) -> None:
        """Take `main` shared behind the timers already waiting: first the queue, then the gate."""
        self._timers_first()
        with open(self.gate_path, "a") as gate:
            fcntl.flock(gate, fcntl.LOCK_EX)
            fcntl.flock(main, fcntl.LOCK_SH)
            fcntl.flock(gate, fcntl.LOCK_UN)

    def _queue(self):
        """A timer's place in the queue (held shared until its turn ends), opened and taken."""
        queue = open(self.queue_path, "a")
        fcntl.flock(queue, fcntl.LOCK_SH)
        return queue

    def turns(self, code=None) -> "Turns":
        """A holder's exclusive and shared turns, switched in place (see Turns)."""
        return Turns(self, code)

    @contextlib.contextmanager
    def exclusive(self, why: str = ""):
        """A timing phase: waits for current shared holders, keeps new ones out until it ends."""
        hold = Hold("exclusive", why)
        with self._queue() as queue, open(self.gate_path, "a") as gate, open(self.main_path, "a") as main:
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
                fcntl.flock(queue, fcntl.LOCK_UN)


class Turns:
    """One holder's turns on a GpuLock, switched in place: `exclusive()` for timing, `shared()` for correctness
    work, `release()` at the end. From exclusive to shared the holder's GPU work is done (`idle`), the lock let go
    and taken again shared behind the timers already waiting (`GpuLock._timers_first`): other evaluators' windows
    run back to back, and the shared turns after them overlap. `code` (a CodeLock, the evaluator's
    candidate_code) is taken with each exclusive turn and kept across that switch into the shared turn after it,
    until the window's check is over (`code_done`) or the turn ends: no other code that needs it (a candidate
    loaded ahead) runs between a timed window and its check. While the holder comes back in it says so
    (`CodeLock.reentering`), and nobody waits for `code` holding the GPU then (`GpuLock.shared_with`), so it
    deadlocks with nobody; an exclusive turn takes `code` only once it holds the GPU alone."""

    def __init__(self, lock: GpuLock, code=None):
        self.lock, self.code = lock, code
        self.mode = ""
        self._main = self._gate = self._queue = None
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
        self._queue = self.lock._queue()
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
        if not self.mode and (self._main is not None or self._gate is not None or self._code_held):
            self.release()  # a turn half taken (an exception between its steps): let all of it go first
        reentering = self.mode == "exclusive" and self._code_held
        try:
            if self.mode == "exclusive":  # the window's work done, the GPU let go (code kept), back in behind timers
                if reentering:
                    self.code.reentering = True
                try:
                    if self.lock.idle is not None:
                        self.lock.idle()
                finally:
                    self._let_go()
                    self.mode = ""
            self._turn("shared", why)  # the exclusive turn's record written once others may go on
            self._main = open(self.lock.main_path, "a")
            self.lock._enter_shared(self._main)
        finally:
            if reentering:
                self.code.reentering = False
        self._take_code()  # kept from the exclusive turn; else its holder holds the GPU shared and does not wait
        self._hold.granted()
        self.mode = "shared"

    def code_done(self) -> None:
        """The window's check is over: `code` goes (a sibling may load now, beside this shared turn's other work);
        the next exclusive turn takes it again."""
        if self._code_held:
            self.code.release()
            self._code_held = False

    def release(self) -> None:
        if not self.mode and self._main is None and self._gate is None and self._hold is None \
                and not self._code_held:
            return  # nothing held, nothing half taken (an exception between the flocks leaves them open)
        try:
            if self.lock.idle is not None:
                self.lock.idle()
        finally:
            if self._code_held:
                self.code.release()
                self._code_held = False
            self._let_go()
            self.mode = ""
            if self._hold is not None:
                self._hold.done(self.lock.trace)
                self._hold = None

    def _let_go(self) -> None:
        """The GPU's lock, its gate and the timer's queue place let go (code is kept)."""
        for f in (self._main, self._gate, self._queue):
            if f is not None:
                fcntl.flock(f, fcntl.LOCK_UN)
                f.close()
        self._main = self._gate = self._queue = None

    def _take_code(self) -> None:
        if self.code is not None and not self._code_held:
            self.code.acquire()
            self._code_held = True
