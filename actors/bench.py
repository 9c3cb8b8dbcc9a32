"""The evaluation side of `cudaperf bench` and `cudaperf sft` on Ray: compile pool, then evaluator pool.

`evaluation_queue(cfg)` starts Ray (or joins the cluster a job was submitted to), builds the two
supervised pools and yields a `CompileThenEvaluate` queue: the episode scheduler's evaluation
`WorkQueue` (`submit(task, candidates) -> ticket`, `next_completed(timeout_s) -> (ticket, results)`).
Each group's candidates are compiled in parallel on the CPU compile workers and the group goes to
an evaluator (one per GPU) as soon as its last candidate compiled, as `evaluate_groups` does for
a fixed list of groups; the queue form lets multi-turn episodes submit while others run.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from actors.evaluation import make_compiler_pool, make_evaluator_pool
from actors.pool import SupervisedPool
from actors.verify import evaluator_gpus, start_ray

POLL_S = 0.05  # bounded wait on one pool while the other also has work in flight


class CompileThenEvaluate:
    """A WorkQueue over a compile pool and an evaluator pool (module docstring)."""

    def __init__(self, compilers: SupervisedPool, evaluators: SupervisedPool):
        self.compilers, self.evaluators = compilers, evaluators
        self._next = 0
        self._groups: dict[int, tuple[Any, list, list, int]] = {}  # ticket -> task, candidates, compiled, missing
        self._compile_of: dict[int, tuple[int, int]] = {}          # compile ticket -> (ticket, index)
        self._eval_of: dict[int, int] = {}                         # evaluate ticket -> ticket
        self._done: deque[tuple[int, Any]] = deque()

    def submit(self, task, candidates: list) -> int:
        ticket, self._next = self._next, self._next + 1
        self._groups[ticket] = (task, list(candidates), [None] * len(candidates), len(candidates))
        if not candidates:
            self._done.append((ticket, []))
        for k, cand in enumerate(candidates):
            self._compile_of[self.compilers.submit("compile", cand, task)] = (ticket, k)
        return ticket

    def next_completed(self, timeout_s: float | None = None) -> tuple[int, Any]:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self._done:
            if not self._compile_of and not self._eval_of:
                raise RuntimeError("CompileThenEvaluate: nothing in flight; submit() before waiting")
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"CompileThenEvaluate: nothing finished within {timeout_s} s")
            both = bool(self._compile_of) and bool(self._eval_of)
            wait = POLL_S if both else remaining
            if wait is not None and remaining is not None:
                wait = min(wait, remaining)
            for pool, table in ((self.compilers, self._compile_of), (self.evaluators, self._eval_of)):
                if not table:
                    continue
                try:
                    done, value = pool.next_completed(timeout_s=wait)
                except TimeoutError:
                    continue
                if pool is self.compilers:
                    self._compiled(*table.pop(done), value)
                else:
                    ticket = table.pop(done)
                    del self._groups[ticket]
                    self._done.append((ticket, value))
        return self._done.popleft()

    def _compiled(self, ticket: int, index: int, value: Any) -> None:
        task, cands, compiled, missing = self._groups[ticket]
        compiled[index] = value if hasattr(value, "ok") else None  # lost: the evaluator compiles it itself
        self._groups[ticket] = (task, cands, compiled, missing - 1)
        if missing - 1 == 0:
            self._eval_of[self.evaluators.submit("evaluate", task, cands, compiled)] = ticket


@contextmanager
def evaluation_queue(cfg) -> Iterator[tuple[CompileThenEvaluate, int]]:
    """(queue, GPUs given to evaluation) for a RunConfig; the pools shut down on exit."""
    start_ray(cfg.compile.workers + 1)
    n_gpus = evaluator_gpus(cfg)
    with make_compiler_pool(cfg.compile, cfg.eval.max_retries) as compilers, \
            make_evaluator_pool(cfg.eval, cfg.compile, n_gpus) as evaluators:
        yield CompileThenEvaluate(compilers, evaluators), n_gpus
