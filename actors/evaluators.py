"""Ray actor shells for evaluation (EvaluatorActor, CompilerActor) and the pools that supervise them.

Each shell builds one core object from `pipeline/evaluation` and forwards calls to it; the domain
logic (gate, compile, sandboxed run, check, timing, features) lives there and runs without Ray.
Resources are set here from what the driver passes, never inside the actors:
- evaluators: `eval.workers_per_gpu` actors per GPU (`num_gpus=1/k`, so Ray sets CUDA_VISIBLE_DEVICES, and the
  evaluator's candidate child processes inherit it); with no GPU, one CPU evaluator whose
  results say `not_executed`.
- compilers: `compile_cfg.workers` CPU actors, one CPU each (nvcc runs in their child processes).

Usage (driver):
    queue = CompileThenEvaluate(make_compiler_pool(cfg.compile, retries, cfg.eval.gate_profile),
                                make_evaluator_pool(cfg.eval, cfg.compile, num_gpus_available=n))
    ticket = queue.submit(task, candidates); ...; ticket, results = queue.next_completed()
or, for a fixed list of groups, `evaluate_groups(compilers, evaluators, groups)`.
"""
from __future__ import annotations

import math
import os
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import ray
from ray.actor import ActorHandle

from actors.pool import NO_RAY_RESTARTS, PoolWaiter, SupervisedPool
from pipeline.core.lost_work import ItemFailed

if TYPE_CHECKING:  # the core modules are imported lazily in the actors (see their constructors)
    from pipeline.core.config import CompileSection, EvalSection, TrustedLimits
    from pipeline.core.records import Candidate, EvalResult, Task
    from pipeline.evaluation.build.compile import CompileResult


class EvaluatorActor:
    """Owns one `Evaluator`, pinned to the GPU Ray gave this actor (or to none, CPU-only)."""

    calls_per_actor = 1  # calls one actor serves at once (a simulation's stand-in may serve several GPUs' calls)

    def __init__(self, eval_cfg: EvalSection, compile_cfg: CompileSection, use_gpu: bool):
        # Imported here so that this module (and the driver) import without the core module
        # and its heavy dependencies; only the actor's process needs them.
        from pipeline.evaluation.evaluator import Evaluator

        self._evaluator = Evaluator(eval_cfg, compile_cfg, use_gpu=use_gpu)

    def evaluate(self, task: Task, candidates: list[Candidate],
                 compiled: list[CompileResult] | None = None) -> list[EvalResult]:
        """Evaluate a group of candidates for one task; one EvalResult per candidate, in order.
        `compiled` (optional) holds the compile pool's results for the same candidates."""
        return self._evaluator.evaluate(task, candidates, compiled)

    def ping(self) -> str:
        """Liveness check: answers once the constructor has finished."""
        return "ok"

    def pid(self) -> int:
        """The actor's process id (tests and logs use it to tell a replacement from the original)."""
        return os.getpid()


class CompilerActor:
    """Owns one `Compiler`; its content-addressed cache is shared through `compile_cfg.cache_dir`."""

    calls_per_actor = 1  # as EvaluatorActor's

    def __init__(self, compile_cfg: CompileSection, gate_profile: str = "strict", limits: TrustedLimits | None = None):
        """`limits`: the caps of the gate, the artefact check and the structural analysis run here (eval.limits;
        None: the schema's)."""
        from pipeline.core.config import TrustedLimits
        from pipeline.evaluation.build.compile import Compiler  # lazily, as in EvaluatorActor

        self._compiler = Compiler(compile_cfg)
        self._profile = gate_profile
        self._limits = limits or TrustedLimits()

    def compile_group(self, candidates: list[Candidate], task: Task) -> list[CompileResult]:
        """`compile` of several candidates of one task, one after another: one round trip for the driver."""
        return [self.compile(c, task) for c in candidates]

    def compile(self, candidate: Candidate, task: Task) -> CompileResult:
        """Compile one candidate for its task and check what was built (bounded.checked_build: the gate, the
        artefact check and the structural analysis each in a worker with OS limits), so that the evaluator's
        serial CPU work is only reading the findings; failures are a verdict in the result, not an exception.
        The result carries its artefact files, so an evaluator on another node can use it, and the seconds this
        worker spent on it (`worker_s`: the compilers' busy time)."""
        from pipeline.evaluation.bounded import checked_build
        t0 = time.perf_counter()
        packed = checked_build(self._compiler, candidate, task, self._profile, self._limits).packed()
        return packed.model_copy(update={"worker_s": time.perf_counter() - t0})

    def ping(self) -> str:
        """Liveness check: answers once the constructor has finished."""
        return "ok"

    def pid(self) -> int:
        """The actor's process id."""
        return os.getpid()


def make_evaluator_pool(eval_cfg: EvalSection, compile_cfg: CompileSection, num_gpus_available: int,
                        gpu_fraction: float = 1.0, placement: dict | None = None,
                        actor_cls: type = EvaluatorActor) -> SupervisedPool:
    """Build the evaluator pool: one GPU actor per GPU, or one CPU actor when there is none.

    `num_gpus_available` is the number of GPUs the driver gives to evaluation (it resolves
    `eval_cfg.gpus` against what Ray sees). Dead actors are replaced and their groups retried up
    to `eval_cfg.max_retries` times. `gpu_fraction` is the share of each of those GPUs that its
    evaluators take together (below 1 when a generator and the learner run on the same GPU). `placement`:
    Ray options that put each actor on an evaluator node (actors/placement.py); `actor_cls`: the actor (a
    simulation passes a stand-in with the same methods).
    """
    if not 0 < gpu_fraction <= 1:
        raise ValueError(f"make_evaluator_pool: gpu_fraction = {gpu_fraction} must be in (0, 1]")
    if num_gpus_available < 0:
        raise ValueError(f"make_evaluator_pool: num_gpus_available = {num_gpus_available}; pass 0 for a "
                         "CPU-only evaluator or the number of GPUs given to evaluation")
    use_gpu = num_gpus_available > 0
    per_gpu = eval_cfg.workers_per_gpu if use_gpu else 1
    workers = num_gpus_available * per_gpu if use_gpu else 1
    actors, calls, concurrency = _actors_serving(actor_cls, workers, "make_evaluator_pool: evaluators")
    # each actor stands for `calls` evaluators, and takes their GPU shares
    options = {"num_cpus": 1, "num_gpus": calls * gpu_fraction / per_gpu if use_gpu else 0, **NO_RAY_RESTARTS,
               **concurrency, **(placement or {})}
    remote_cls = ray.remote(actor_cls)

    def make_actor(slot: int) -> ActorHandle:
        return remote_cls.options(**options).remote(eval_cfg, compile_cfg, use_gpu)

    return SupervisedPool(make_actor, size=actors, max_retries=eval_cfg.max_retries, max_in_flight_per_actor=calls)


def make_compiler_pool(compile_cfg: CompileSection, max_retries: int, gate_profile: str = "strict",
                       placement: dict | None = None, actor_cls: type = CompilerActor,
                       limits: TrustedLimits | None = None) -> SupervisedPool:
    """Build the compile pool: `compile_cfg.workers` CPU actors, one CPU each.

    `max_retries` bounds resubmissions of one candidate after its compiler actor died (the driver
    passes `cfg.eval.max_retries`). `placement` and `actor_cls` as in `make_evaluator_pool`; `limits`: the caps
    of the gate, the artefact check and the structural analysis in the workers (the driver passes
    `cfg.eval.limits`).
    """
    if compile_cfg.workers < 1:
        raise ValueError(f"compile.workers = {compile_cfg.workers}: the compile pool needs at least one "
                         "worker; set compile.workers=1 or more")
    actors, calls, concurrency = _actors_serving(actor_cls, compile_cfg.workers,
                                                 "make_compiler_pool: compile.workers")
    remote_cls = ray.remote(actor_cls)
    options = {"num_cpus": 1, **NO_RAY_RESTARTS, **concurrency, **(placement or {})}

    def make_actor(slot: int) -> ActorHandle:
        return remote_cls.options(**options).remote(compile_cfg, gate_profile, limits)

    return SupervisedPool(make_actor, size=actors, max_retries=max_retries, max_in_flight_per_actor=calls)


def _actors_serving(actor_cls: type, workers: int, what: str) -> tuple[int, int, dict]:
    """(actors, calls each, their Ray concurrency option) for `workers` served by actors of
    `actor_cls.calls_per_actor` calls at once (1 for the real actors; a simulation's stand-in may serve more)."""
    calls = actor_cls.calls_per_actor
    if workers % calls:
        raise ValueError(f"{what} = {workers} cannot be served by actors of {calls} calls each; use a multiple "
                         f"of {calls}")
    return workers // calls, calls, {"max_concurrency": calls} if calls > 1 else {}


def evaluate_groups(compilers: SupervisedPool, evaluators: SupervisedPool,
                    groups: list[tuple[Task, list[Candidate]]], on_group=None, candidates_per_call: int = 1) -> list[list]:
    """Compile every candidate in the CPU pool and evaluate each group as soon as its last
    candidate compiled (a `CompileThenEvaluate` queue), so GPUs start while other groups still
    compile. Results per group, in order (an `ItemFailed` record stands for work lost on every retry);
    `on_group(index, results)` is called as each group finishes (progress for the user)."""
    queue = CompileThenEvaluate(compilers, evaluators, candidates_per_call=candidates_per_call)
    index = {queue.submit(task, cands): g for g, (task, cands) in enumerate(groups)}
    results: list[list | None] = [None] * len(groups)
    while index:
        ticket, value = queue.next_completed()
        g = index.pop(ticket)
        results[g] = value
        if on_group is not None:
            on_group(g, value)
    return results


PART_MIN_FRACTION = 0.25  # the smallest part of a group handed to an idle evaluator before the group has compiled


@dataclass
class _Group:
    task: Any
    candidates: list
    compiled: list                                  # CompileResult, or None (lost: the evaluator compiles it)
    missing: int                                    # candidates still compiling
    ready: list[int] = field(default_factory=list)  # compiled, not yet handed to an evaluator
    parts: int = 0                                  # parts with an evaluator
    results: list = field(default_factory=list)

    @property
    def min_part(self) -> int:
        return max(1, math.ceil(PART_MIN_FRACTION * len(self.candidates)))


class CompileThenEvaluate:
    """The episode scheduler's evaluation WorkQueue over a compile pool and an evaluator pool:
    `submit(task, candidates) -> ticket` compiles the candidates in parallel on the CPU workers and
    `next_completed(timeout_s) -> (ticket, results)` returns finished groups, results in candidate order.

    A group goes to an evaluator as soon as its last candidate compiled. While an evaluator would otherwise
    wait, a group's evaluation starts on its first compiled candidates instead: what has compiled (at least
    PART_MIN_FRACTION of the group) goes to the idle evaluator as a part, and the rest follows as it compiles.
    A part is measured like a group (its own inputs and baseline), so parts are made only when a GPU is idle.
    A candidate whose compile was lost on every retry is compiled by the evaluator itself; a part lost on every
    retry stands as `ItemFailed` in its candidates' places (the whole group as one `ItemFailed` when it was one
    part). `compile_s`: the compile workers' seconds (each result's `worker_s`) over every compile taken in so far."""

    def __init__(self, compilers: SupervisedPool, evaluators: SupervisedPool, waiter: Any = None,
                 candidates_per_call: int = 1):
        """`waiter`: what `next_completed` waits on (`wait(timeout_s)`), by default one `ray.wait` over both pools;
        `candidates_per_call`: candidates of a group that one compile call carries (compile.candidates_per_call)."""
        self.compilers, self.evaluators = compilers, evaluators
        self.candidates_per_call = candidates_per_call
        self.waiter = waiter if waiter is not None else PoolWaiter((compilers, evaluators))
        self._next = 0
        self._groups: dict[int, _Group] = {}
        self._compile_of: dict[int, tuple[int, list[int]]] = {}    # compile ticket -> (ticket, indices)
        self._eval_of: dict[int, tuple[int, list[int]]] = {}       # evaluate ticket -> (ticket, indices of the part)
        self._done: deque[tuple[int, Any]] = deque()
        self._with_ready: dict[int, None] = {}  # tickets of groups holding compiled candidates not yet handed over
        self.parts_split = 0  # groups' parts handed over before the group had compiled (for tests and logs)
        self.compile_s = 0.0  # the compilers' busy seconds: the training loop's busy/compiler

    def submit(self, task, candidates: list) -> int:
        ticket, self._next = self._next, self._next + 1
        n = len(candidates)
        self._groups[ticket] = _Group(task, list(candidates), [None] * n, n, results=[None] * n)
        if not candidates:
            del self._groups[ticket]
            self._done.append((ticket, []))
        per_call = self.candidates_per_call
        for start in range(0, n, per_call):
            chunk = list(range(start, min(n, start + per_call)))
            call = self.compilers.submit("compile_group", [candidates[k] for k in chunk], task)
            self._compile_of[call] = (ticket, chunk)
        return ticket

    def next_completed(self, timeout_s: float | None = None) -> tuple[int, Any]:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            got = self.poll()
            if got is not None:
                return got
            if not self._compile_of and not self._eval_of:
                raise RuntimeError("CompileThenEvaluate: nothing in flight; submit() before waiting")
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            self.waiter.wait(remaining)  # one wait over both pools

    def poll(self) -> tuple[int, Any] | None:
        """A finished group's `(ticket, results)`, or None; takes in what the pools settled, without waiting."""
        for pool, table, take in ((self.compilers, self._compile_of, self._compiled),
                                  (self.evaluators, self._eval_of, self._evaluated)):
            while (got := pool.poll()) is not None:
                done, value = got
                take(*table.pop(done), value)
        return self._done.popleft() if self._done else None

    def _compiled(self, ticket: int, indices: list[int], value: Any) -> None:
        group = self._groups[ticket]
        if not isinstance(value, ItemFailed):
            self.compile_s += sum(c.worker_s for c in value)
        for j, index in enumerate(indices):  # a call lost on every retry: the evaluator compiles those itself
            group.compiled[index] = None if isinstance(value, ItemFailed) else value[j]
        group.missing -= len(indices)
        group.ready.extend(indices)
        if group.missing:
            self._with_ready[ticket] = None
        else:  # its last candidate compiled: the group (what of it is still here) goes to the evaluators
            self._send(ticket, group)
        self._hand_over()

    def _evaluated(self, ticket: int, part: list[int], value: Any) -> None:
        group = self._groups[ticket]
        group.parts -= 1
        for j, i in enumerate(part):
            group.results[i] = value if isinstance(value, ItemFailed) else value[j]
        if not group.missing and not group.ready and not group.parts:
            del self._groups[ticket]
            lost = {id(r) for r in group.results if isinstance(r, ItemFailed)}
            whole = len(lost) == 1 and all(isinstance(r, ItemFailed) for r in group.results)
            self._done.append((ticket, group.results[0] if whole else group.results))
        self._hand_over()

    def _hand_over(self) -> None:
        """While evaluators are idle, the oldest groups' compiled candidates go as parts (a group whose last
        candidate compiled has gone whole already). Nothing to do, and nothing looked at, while every evaluator
        is busy: the common case of a full cluster, where the groups waiting are many."""
        if self.evaluators.outstanding() >= self.evaluators.capacity or not self._with_ready:
            return
        for ticket in sorted(self._with_ready):  # only groups with compiled candidates waiting, oldest first
            if self.evaluators.outstanding() >= self.evaluators.capacity:
                return
            group = self._groups[ticket]
            if len(group.ready) >= group.min_part:
                self.parts_split += 1
                self._send(ticket, group)

    def _send(self, ticket: int, group: _Group) -> None:
        part, group.ready = sorted(group.ready), []
        self._with_ready.pop(ticket, None)
        group.parts += 1
        self._eval_of[self.evaluators.submit("evaluate", group.task, [group.candidates[i] for i in part],
                                             [group.compiled[i] for i in part])] = (ticket, part)
