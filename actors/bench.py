"""The evaluation side of `cudaperf bench` and `cudaperf sft` on Ray: compile pool, then evaluator pool.

`evaluation_queue(cfg)` starts Ray (or joins the cluster a job was submitted to), builds the two
supervised pools and yields a `CompileThenEvaluate` queue: the episode scheduler's evaluation
`WorkQueue` (`submit(task, candidates) -> ticket`, `next_completed(timeout_s) -> (ticket, results)`).
Each group's candidates are compiled in parallel on the CPU compile workers and the group goes to
an evaluator as soon as its last candidate compiled (`CompileThenEvaluate`, actors/evaluation.py).
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from actors.evaluation import CompileThenEvaluate, make_compiler_pool, make_evaluator_pool
from actors.verify import evaluator_gpus, start_ray


@contextmanager
def evaluation_queue(cfg) -> Iterator[tuple[CompileThenEvaluate, int]]:
    """(queue, GPUs given to evaluation) for a RunConfig; the pools shut down on exit."""
    start_ray(cfg.compile.workers + 1)
    n_gpus = evaluator_gpus(cfg)
    with make_compiler_pool(cfg.compile, cfg.eval.max_retries) as compilers, \
            make_evaluator_pool(cfg.eval, cfg.compile, n_gpus) as evaluators:
        yield CompileThenEvaluate(compilers, evaluators), n_gpus
