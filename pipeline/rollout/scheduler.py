"""The episode scheduler: tasks in, one finished episode per (task, sample) out, many interleaved.

`samples_per_task` episodes per task run at once, at most `max_episodes_in_flight` of them.
Whenever a generation slot is free, every episode waiting for its next turn goes into one batch
(up to `max_sequences_per_batch` samples; episodes with the same prompt, such as a group's first
turns, share one request with n samples). When a batch returns, each answer is parsed and the
candidates are sent to evaluation grouped by task (the evaluator makes a task's inputs once per
call); answers without code are judged format_error at once. While those evaluations run, the
episodes already evaluated fill the next batch, so generation and evaluation overlap and
batches stay full as long as enough episodes are in flight.

Generation and evaluation are reached through `WorkQueue`s, `submit(*args) -> ticket`,
`poll() -> (ticket, result) | None` and `next_completed(timeout_s) -> (ticket, result)`, so this module
needs no Ray:
- generation: `submit(requests, sampling) -> GenerationResult`;
- evaluation: `submit(task, candidates) -> list[EvalResult]`.
The scheduler waits once over all its in-flight work: a `Waiter` (`wait()` returns when a call of either
queue has finished) given by whoever made the queues (on Ray, one `ray.wait` over the generator, compiler
and evaluator pools: actors/pool.py `PoolWaiter`; locally, one wait over both thread queues' futures).
An `ItemFailed` in place of a result (pipeline/core/lost_work.py: an actor died on every retry) ends the
episodes of that call with stop_reason 'error'.
Reproducible mode (`lockstep=True` with a `seed`): a batch is formed only when nothing is in flight,
so each batch holds every episode ready for its next turn and its make-up does not depend on
timing, and batch k of step s samples with a seed derived from (seed, s, k). The same weights,
tasks and evaluation results then give the same episodes (a resumed run repeats the original).
Locally, `ThreadQueue` runs a Generator and an Evaluator (or fakes) in threads
(`run_episodes_locally`); the driver passes the Ray pools' queues (actors/generators.py).
"""
from __future__ import annotations

import time
from collections import Counter, deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Protocol

from pipeline.core.config import RolloutSection
from pipeline.core.records import Candidate, EvalResult, Task
from pipeline.core.lost_work import ItemFailed
from pipeline.rollout.conversation import ChatFormat
from pipeline.rollout.episodes import Episode, EpisodeOutcome
from pipeline.rollout.generation import GenerationRequest, GenerationResult, Generator, SamplingSpec
from pipeline.rollout.parsing import AnswerSpec, answer_spec
from pipeline.rollout.openings import opening_ids

POLL_S = 0.02  # bounded wait on one queue while the other also has work in flight (queues of two kinds only)


class WorkQueue(Protocol):
    def submit(self, *args: Any) -> int: ...

    def next_completed(self, timeout_s: float | None = None) -> tuple[int, Any]: ...

    def poll(self) -> tuple[int, Any] | None: ...


class Waiter(Protocol):
    def wait(self, timeout_s: float | None = None) -> None:
        """Return once a call of some queue has finished (`poll` then has it); TimeoutError after `timeout_s`."""


class ThreadQueue:
    """A WorkQueue running `fn(*args)` on `workers` threads. An exception in `fn` is a bug: it is raised
    from `next_completed`. Use as a context manager (the threads stop on exit)."""

    def __init__(self, fn: Callable[..., Any], workers: int):
        self._fn = fn
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rollout")
        self._futures: dict[Future, int] = {}
        self._next = 0

    def submit(self, *args: Any) -> int:
        ticket, self._next = self._next, self._next + 1
        self._futures[self._pool.submit(self._fn, *args)] = ticket
        return ticket

    def next_completed(self, timeout_s: float | None = None) -> tuple[int, Any]:
        if not self._futures:
            raise RuntimeError("ThreadQueue: nothing in flight; submit() before waiting")
        done, _ = wait(list(self._futures), timeout=timeout_s, return_when=FIRST_COMPLETED)
        if not done:
            raise TimeoutError(f"ThreadQueue: nothing finished within {timeout_s} s")
        future = next(iter(done))
        return self._futures.pop(future), future.result()

    def poll(self) -> tuple[int, Any] | None:
        future = next((f for f in self._futures if f.done()), None)
        return None if future is None else (self._futures.pop(future), future.result())

    def futures(self) -> list[Future]:
        return list(self._futures)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ThreadQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ThreadWaiter:
    """One wait over the futures of several ThreadQueues."""

    def __init__(self, *queues: ThreadQueue):
        self.queues = queues

    def wait(self, timeout_s: float | None = None) -> None:
        futures = [f for q in self.queues for f in q.futures()]
        if not futures:
            raise RuntimeError("ThreadWaiter: nothing in flight; submit() before waiting")
        done, _ = wait(futures, timeout=timeout_s, return_when=FIRST_COMPLETED)
        if not done:
            raise TimeoutError(f"ThreadWaiter: nothing finished within {timeout_s} s")


@dataclass
class RolloutStats:
    """What one `run` did; `generation_s` sums the generator's own time per call."""
    wall_s: float = 0.0
    episodes: int = 0
    turns: int = 0
    generation_calls: int = 0
    sequences_generated: int = 0
    tokens_generated: int = 0
    generation_s: float = 0.0
    evaluation_calls: int = 0
    format_errors: int = 0
    stop_reasons: dict[str, int] = field(default_factory=dict)

    @property
    def mean_sequences_per_call(self) -> float:
        return self.sequences_generated / self.generation_calls if self.generation_calls else 0.0


class EpisodeScheduler:
    """Runs episodes of many tasks against a generation queue and an evaluation queue."""

    def __init__(self, cfg: RolloutSection, chat: ChatFormat, max_model_len_tokens: int,
                 generation: WorkQueue, evaluation: WorkQueue, generation_slots: int = 1,
                 seed: int | None = None, lockstep: bool = False, waiter: Waiter | None = None):
        """`waiter`: the one wait over both queues (by default one over two ThreadQueues' futures); queues of
        two kinds without a waiter are waited on in turn."""
        if cfg.max_new_tokens >= max_model_len_tokens:
            raise ValueError(f"rollout.max_new_tokens = {cfg.max_new_tokens} leaves no room for a prompt in "
                             f"model.max_model_len_tokens = {max_model_len_tokens}; lower the first or raise "
                             "the second")
        self.cfg = cfg
        self.chat = chat
        self.max_model_len_tokens = max_model_len_tokens
        self.generation = generation
        self.evaluation = evaluation
        self.generation_slots = generation_slots
        self.sampling = SamplingSpec.from_config(cfg)
        self.seed = seed
        self.lockstep = lockstep
        if waiter is None and isinstance(generation, ThreadQueue) and isinstance(evaluation, ThreadQueue):
            waiter = ThreadWaiter(generation, evaluation)
        self.waiter = waiter
        self._openings: dict[str, list[int]] = {}  # task id -> its opening prompt's ids
        self._answers: dict[str, AnswerSpec] = {}   # task id -> what its answers must define (read by the generator)
        self._order: dict[int, int] = {}  # id of an episode of the current run -> its index (batches follow it)

    def run(self, tasks: list[Task], step: int = 0,
            openings: Mapping[str, list[int]] | None = None) -> tuple[list[EpisodeOutcome], RolloutStats]:
        """Run `samples_per_task` episodes of every task to their end; outcomes in (task, sample) order.
        `openings`: task id -> its opening prompt's ids where they were tokenized already (the task stream's
        workers do it, off the driver); the others are tokenized here."""
        t0 = time.perf_counter()
        stats = RolloutStats()
        episodes = []
        self._openings.update(openings or {})
        for task in tasks:
            opening = self._opening(task)
            self._answers.setdefault(task.id, answer_spec(task))
            episodes += [Episode(task, f"s{step}/{task.id}/{g}", g, self.chat, opening, self.cfg,
                                 self.max_model_len_tokens) for g in range(self.cfg.samples_per_task)]
        # Bookkeeping that stays cheap with thousands of episodes in flight: `active` holds the unfinished episodes
        # started, `ready` those waiting for their next turn (not in a batch, not being evaluated); each handled
        # call updates only the episodes it touched.
        self._order = {id(e): i for i, e in enumerate(episodes)}
        waiting: deque[Episode] = deque(episodes)
        active: dict[int, Episode] = {}
        ready: dict[int, Episode] = {}
        gen_jobs: dict[int, list[list[Episode]]] = {}
        eval_jobs: dict[int, list[Episode]] = {}
        batches = 0
        while waiting or active:
            while waiting and len(active) < self.cfg.max_episodes_in_flight:
                episode = waiting.popleft()
                active[id(episode)] = ready[id(episode)] = episode
            while len(gen_jobs) < self.generation_slots and not (self.lockstep and (gen_jobs or eval_jobs)):
                batch = self._batch(ready, active)
                if not batch:
                    break
                requests = [GenerationRequest(prompt, len(group), self._answers[group[0].task.id])
                            for prompt, group in batch]
                gen_jobs[self.generation.submit(requests, self._sampling(step, batches))] = [g for _, g in batch]
                batches += 1
            if not gen_jobs and not eval_jobs:
                if active:
                    raise RuntimeError("EpisodeScheduler: episodes are active but nothing is in flight")
                continue
            for episode in self._wait_one(gen_jobs, eval_jobs, stats):
                if episode.done:
                    active.pop(id(episode), None)
                elif episode.state == "generate":
                    ready[id(episode)] = episode
        stats.wall_s = time.perf_counter() - t0
        stats.episodes = len(episodes)
        stats.turns = sum(len(e.outcome.trajectory.turns) for e in episodes)
        stats.stop_reasons = dict(Counter(e.outcome.trajectory.stop_reason for e in episodes))
        return [e.outcome for e in episodes], stats

    def _opening(self, task: Task) -> list[int]:
        """A task's opening prompt ids, tokenized once per task over the scheduler's life (tasks repeat each epoch)."""
        if task.id not in self._openings:
            self._openings[task.id] = opening_ids([task], self.chat)[0]
        return self._openings[task.id]

    def _sampling(self, step: int, batch: int) -> SamplingSpec:
        """The sampling spec of batch `batch` of step `step`: seeded from (seed, step, batch) when a seed is set."""
        if self.seed is None:
            return self.sampling
        derived = (self.seed * 1_000_003 + step * 10_007 + batch) % (1 << 31)
        return replace(self.sampling, seed=derived)

    def _batch(self, ready: dict[int, Episode], active: dict[int, Episode]) -> list[tuple[list[int], list[Episode]]]:
        """Prompts of episodes ready for their next turn, in episode order, grouped by task and identical prompt,
        within the batch limit; the episodes taken leave `ready` (one whose context is full ends, and leaves
        `active` too)."""
        groups: dict[tuple[str, tuple[int, ...]], list[Episode]] = {}
        sequences = 0
        for episode in sorted(ready.values(), key=lambda e: self._order[id(e)]):
            if sequences >= self.cfg.max_sequences_per_batch:
                break
            del ready[id(episode)]
            prompt = episode.next_prompt()
            if prompt is None:  # the context is full: the episode ended
                del active[id(episode)]
                continue
            groups.setdefault((episode.task.id, tuple(prompt)), []).append(episode)
            sequences += 1
        return [(list(prompt), group) for (_, prompt), group in groups.items()]

    def _wait_one(self, gen_jobs: dict, eval_jobs: dict, stats: RolloutStats) -> list[Episode]:
        """Handle at least one finished call (generation first): one wait over all in-flight work. Returns the
        episodes of the call handled."""
        while True:
            for queue, jobs in ((self.generation, gen_jobs), (self.evaluation, eval_jobs)):
                got = queue.poll() if jobs else None
                if got is not None:
                    return self._on_done(queue, got, gen_jobs, eval_jobs, stats)
            if self.waiter is not None:
                self.waiter.wait()
            else:
                return self._take_turns(gen_jobs, eval_jobs, stats)

    def _on_done(self, queue: WorkQueue, got: tuple[int, Any], gen_jobs: dict, eval_jobs: dict,
                 stats: RolloutStats) -> list[Episode]:
        ticket, value = got
        if queue is self.generation:
            groups = gen_jobs.pop(ticket)
            self._on_generated(groups, value, eval_jobs, stats)
            return [e for group in groups for e in group]
        episodes = eval_jobs.pop(ticket)
        self._on_evaluated(episodes, value)
        return episodes

    def _take_turns(self, gen_jobs: dict, eval_jobs: dict, stats: RolloutStats) -> list[Episode]:
        """Queues of two kinds (an in-process generator beside the evaluators' pools), which no one wait covers:
        a bounded wait on each in turn, or an unbounded one while only one has work."""
        both = bool(gen_jobs) and bool(eval_jobs)
        while True:
            for queue, jobs in ((self.generation, gen_jobs), (self.evaluation, eval_jobs)):
                if not jobs:
                    continue
                try:
                    got = queue.next_completed(timeout_s=POLL_S if both else None)
                except TimeoutError:
                    continue
                return self._on_done(queue, got, gen_jobs, eval_jobs, stats)

    def _on_generated(self, groups: list[list[Episode]], result: GenerationResult, eval_jobs: dict,
                      stats: RolloutStats) -> None:
        if isinstance(result, ItemFailed):  # the pool lost the call on every retry
            for episode in (e for group in groups for e in group):
                episode.fail(f"generation lost: {result}")
            return
        stats.generation_calls += 1
        stats.generation_s += result.elapsed_s
        stats.tokens_generated += result.tokens_generated
        by_task: dict[str, tuple[Task, list[Candidate], list[Episode]]] = {}
        for group, samples in zip(groups, result.samples, strict=True):
            for episode, sample in zip(group, samples, strict=True):
                stats.sequences_generated += 1
                parsed = episode.take_sample(sample, result.weight_version)
                if isinstance(parsed, EvalResult):
                    stats.format_errors += 1
                    episode.take_result(parsed)
                    continue
                entry = by_task.setdefault(episode.task.id, (episode.task, [], []))
                entry[1].append(parsed)
                entry[2].append(episode)
        for task, candidates, episodes in by_task.values():
            eval_jobs[self.evaluation.submit(task, candidates)] = episodes
            stats.evaluation_calls += 1

    @staticmethod
    def _on_evaluated(episodes: list[Episode], results: Any) -> None:
        if isinstance(results, ItemFailed) or len(results) != len(episodes):
            for episode in episodes:
                episode.fail(f"evaluation lost: {results}")
            return
        for episode, result in zip(episodes, results):
            if isinstance(result, ItemFailed):  # its part of the group was lost on every retry
                episode.fail(f"evaluation lost: {result}")
            else:
                episode.take_result(result)


def run_episodes_locally(tasks: list[Task], generator: Generator,
                         evaluate: Callable[[Task, list[Candidate]], list[EvalResult]], cfg: RolloutSection,
                         step: int = 0) -> tuple[list[EpisodeOutcome], RolloutStats]:
    """Episodes of `tasks` with an in-process generator and an evaluation callable (threads, no Ray)."""
    with ThreadQueue(generator.generate, 1) as gen_queue, \
            ThreadQueue(evaluate, cfg.max_evaluations_in_flight) as eval_queue:
        scheduler = EpisodeScheduler(cfg, ChatFormat(generator.tokenizer), generator.max_model_len_tokens,
                                     gen_queue, eval_queue)
        return scheduler.run(tasks, step)
