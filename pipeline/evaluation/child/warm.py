"""Children started before their candidates: the trusted part of a child's start off the critical path.

A child's start has a trusted part, run before any candidate code: bubblewrap, Python (and torch for the
KernelBench format), the Landlock allow-list and the seccomp filter, the CUDA context and the mapping of the
group's buffers over IPC (the child's `map` op). Only the candidate part (dlopen or import, prepare) needs
the candidate. `WarmChildren` keeps `size` children through the trusted part, started in the background,
and hands each out exactly once (`take`): it then serves one candidate and is closed after it, as before.
`warm_start` is one child's trusted start, the GPU's part under the shared lock.
A child is never handed out twice, and no child is handed out after a candidate's code has been loaded in
it (`ChildProcess.ops` records what it was sent: only `hello`, `probe` and `map` before `take`).
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

from pipeline.evaluation.child.sandbox import ChildFailed

TRUSTED_OPS = {"hello", "probe", "map"}  # what a warm child may have been sent before it is handed out


class WarmChildren:
    """`size` children through their trusted start, kept ready; `start()` makes one (in a background thread)."""

    def __init__(self, start: Callable[[], object], size: int = 2):
        self._start, self.size = start, max(0, size)
        self._ready: deque[Future] = deque()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="warm-child")
        self.handed = 0
        self._fill()

    def _fill(self) -> None:
        while len(self._ready) < self.size:
            self._ready.append(self._pool.submit(self._start))

    def take(self):
        """A warmed child, used by no one before and handed to no one after; the next one starts warming."""
        future = self._ready.popleft() if self._ready else self._pool.submit(self._start)
        self._fill()
        child = future.result()  # a failed start raises here, in the candidate's turn (its ChildFailed)
        ops = set(getattr(child, "ops", []))
        if not ops <= TRUSTED_OPS or getattr(child, "handed", False):
            raise RuntimeError(f"a warm child was offered twice or after candidate work ({sorted(ops)})")
        child.handed = True
        self.handed += 1
        return child

    def close(self) -> None:
        """Close every child not handed out (waiting for those still starting)."""
        while self._ready:
            future = self._ready.popleft()
            try:
                future.result().close()
            except Exception:  # a start that failed: nothing to close
                pass
        self._pool.shutdown(wait=True)


def warm_start(start_child: Callable[..., object], gpu_lock, buffer_map: dict, timeout_s: float, torch_format: bool):
    """A candidate's child through its trusted start: sandbox, Python, CUDA context, the group's buffers mapped
    (`buffer_map`, the child's `map` op). The process and its Python (torch too) start beside anything; its CUDA
    context and then its mapping, the parts on the GPU, each hold `gpu_lock` shared, so they never run beside a
    timing phase, and a waiting timer may go between them (the child runs nothing of a candidate's yet); the lock's
    trace times each part."""
    child = start_child(torch_format, hello_now=False)
    try:
        child.ready()  # its Python (torch too) up, before the lock
        with gpu_lock.shared("a child's warm start: its CUDA context"):
            child.hello()
        with gpu_lock.shared("a child's warm start: the group's buffers mapped"):
            judge = child.request({"op": "map", **buffer_map}, timeout_s)
    except BaseException:
        child.close()
        raise
    if not judge.get("ok"):
        child.close()
        raise ChildFailed(f"a warm child could not map the group's buffers: {judge.get('error')}")
    return child
