"""The driver's evaluation queue (actors/evaluation.CompileThenEvaluate) over stand-in pools, without Ray: a group
goes to an evaluator when its last candidate compiled, or in parts while an evaluator would otherwise wait; results
come back whole and in candidate order, and a lost part stands as ItemFailed in its candidates' places only."""
from __future__ import annotations

import time
from collections import deque

import pytest

from actors.evaluators import CompileThenEvaluate
from pipeline.core.lost_work import ItemFailed


class Pool:
    """Stand-in for SupervisedPool: items finish in submission order, one per next_completed call, while not held."""

    def __init__(self, size: int, work, calls_per_actor: int = 1):
        self.size, self.work, self.held = size, work, False
        self.capacity = size * calls_per_actor  # calls run at once, as SupervisedPool.capacity
        self.queue: deque = deque()
        self.calls: list[tuple] = []
        self._ticket = 0

    def submit(self, method, *args) -> int:
        self._ticket += 1
        self.queue.append((self._ticket, method, args))
        self.calls.append(args)
        return self._ticket

    def outstanding(self) -> int:
        return len(self.queue)

    def next_completed(self, timeout_s=None):
        if self.held or not self.queue:
            raise TimeoutError
        ticket, method, args = self.queue.popleft()
        return ticket, self.work(*args)

    def poll(self):
        try:
            return self.next_completed()
        except TimeoutError:
            return None


class Waiter:
    """Stand-in for PoolWaiter: nothing more finishes while every pool is held or empty."""

    def __init__(self, *pools):
        self.pools = pools

    def wait(self, timeout_s=None):
        if all(p.held or not p.queue for p in self.pools):
            raise TimeoutError


class Built(str):
    """A compile result: its text, and the seconds its worker spent on it, as a real CompileResult's `worker_s`."""
    worker_s = 0.25


def compile_(cands, task):  # compile_group: several candidates of one task per call
    return [Built(f"built {c}") for c in cands]


def evaluate(task, cands, compiled):
    assert compiled == [f"built {c}" for c in cands], "each candidate's own compile result travels with it"
    return [f"result {c}" for c in cands]


def test_an_idle_evaluator_starts_on_the_first_compiled_part():
    compilers, evaluators = Pool(4, compile_), Pool(1, evaluate)
    evaluators.held = True  # the first part still runs while the rest compiles
    queue = CompileThenEvaluate(compilers, evaluators, Waiter(compilers, evaluators))
    cands = [f"c{k}" for k in range(8)]
    ticket = queue.submit("task", cands)
    with pytest.raises(TimeoutError):
        queue.next_completed(timeout_s=0.2)  # every compile has come back; the evaluator holds the first part
    assert [len(c[1]) for c in evaluators.calls] == [2, 6] and queue.parts_split == 1
    assert evaluators.calls[0][1] == ["c0", "c1"]  # a quarter of the group went as soon as it had compiled
    evaluators.held = False
    assert queue.next_completed(timeout_s=5) == (ticket, [f"result {c}" for c in cands])


def test_an_actor_serving_several_calls_counts_as_that_many_evaluators():
    # One actor of two calls at once (a simulation's stand-in for two GPUs), one of them busy: the other is
    # idle, so a group starts on its first compiled part, as with two actors of one call each.
    compilers, evaluators = Pool(4, compile_), Pool(1, evaluate, calls_per_actor=2)
    queue = CompileThenEvaluate(compilers, evaluators, Waiter(compilers, evaluators))
    evaluators.submit("evaluate", "other", [], [])
    evaluators.held = True
    queue.submit("a", [f"a{k}" for k in range(8)])
    with pytest.raises(TimeoutError):
        queue.next_completed(timeout_s=0.2)
    assert [len(c[1]) for c in evaluators.calls[1:]] == [2, 6] and queue.parts_split == 1


def test_a_busy_evaluator_gets_each_group_whole():
    compilers, evaluators = Pool(4, compile_), Pool(1, evaluate)
    queue = CompileThenEvaluate(compilers, evaluators, Waiter(compilers, evaluators))
    evaluators.submit("evaluate", "other", [], [])  # the one evaluator is busy with other work
    evaluators.held = True
    first, second = queue.submit("a", ["a0", "a1", "a2"]), queue.submit("b", ["b0", "b1"])
    with pytest.raises(TimeoutError):
        queue.next_completed(timeout_s=0.2)
    assert [c[1] for c in evaluators.calls[1:]] == [["a0", "a1", "a2"], ["b0", "b1"]] and queue.parts_split == 0
    evaluators.queue.popleft()
    evaluators.held = False
    assert dict(queue.next_completed(timeout_s=5) for _ in range(2)) == {
        first: ["result a0", "result a1", "result a2"], second: ["result b0", "result b1"]}


def test_a_lost_part_is_lost_only_in_its_own_places():
    lost = ItemFailed(7, "evaluate", 3, "actor died")

    def evaluate_losing_the_first_part(task, cands, compiled):
        return lost if "c0" in cands else evaluate(task, cands, compiled)
    compilers, evaluators = Pool(4, compile_), Pool(1, evaluate_losing_the_first_part)
    evaluators.held = True
    queue = CompileThenEvaluate(compilers, evaluators, Waiter(compilers, evaluators))
    ticket = queue.submit("task", [f"c{k}" for k in range(4)])
    with pytest.raises(TimeoutError):
        queue.next_completed(timeout_s=0.2)
    evaluators.held = False
    got_ticket, results = queue.next_completed(timeout_s=5)
    assert got_ticket == ticket and results == [lost, "result c1", "result c2", "result c3"]


def test_a_group_lost_in_one_part_is_one_itemfailed():
    lost = ItemFailed(7, "evaluate", 3, "actor died")
    compilers, evaluators = Pool(4, compile_), Pool(1, lambda task, cands, compiled: lost)
    evaluators.submit("evaluate", "other", [], [])  # busy: the group goes whole, in one part
    evaluators.held = True
    queue = CompileThenEvaluate(compilers, evaluators, Waiter(compilers, evaluators))
    ticket = queue.submit("task", ["c0", "c1"])
    with pytest.raises(TimeoutError):
        queue.next_completed(timeout_s=0.2)
    evaluators.queue.popleft()
    evaluators.held = False
    assert queue.next_completed(timeout_s=5) == (ticket, lost)


def test_a_compile_call_carries_several_candidates_and_their_results_keep_their_places():
    compilers, evaluators = Pool(4, compile_), Pool(2, evaluate)
    queue = CompileThenEvaluate(compilers, evaluators, Waiter(compilers, evaluators), candidates_per_call=3)
    cands = [f"c{k}" for k in range(7)]
    ticket = queue.submit("task", cands)
    assert [call[0] for call in compilers.calls] == [["c0", "c1", "c2"], ["c3", "c4", "c5"], ["c6"]]
    assert queue.next_completed(timeout_s=5) == (ticket, [f"result {c}" for c in cands])


def test_a_compile_call_lost_on_every_retry_leaves_its_candidates_to_the_evaluator():
    lost = ItemFailed(3, "compile_group", 3, "actor died")
    seen = []

    def evaluate_seeing(task, cands, compiled):
        seen.extend(compiled)
        return [f"result {c}" for c in cands]
    compilers = Pool(2, lambda cands, task: lost if "c0" in cands else compile_(cands, task))
    evaluators = Pool(1, evaluate_seeing)
    queue = CompileThenEvaluate(compilers, evaluators, Waiter(compilers, evaluators), candidates_per_call=2)
    ticket = queue.submit("task", ["c0", "c1", "c2", "c3"])
    assert queue.next_completed(timeout_s=5) == (ticket, ["result c0", "result c1", "result c2", "result c3"])
    assert sorted(seen, key=str) == sorted([None, None, "built c2", "built c3"], key=str)


def test_the_compile_workers_seconds_add_up_for_the_compilers_busy_fraction():
    lost = ItemFailed(3, "compile_group", 3, "actor died")
    compilers = Pool(2, lambda cands, task: lost if "c0" in cands else compile_(cands, task))
    evaluators = Pool(1, lambda task, cands, compiled: [f"result {c}" for c in cands])
    queue = CompileThenEvaluate(compilers, evaluators, Waiter(compilers, evaluators), candidates_per_call=2)
    assert queue.compile_s == 0.0
    queue.submit("task", ["c0", "c1", "c2", "c3", "c4"])
    queue.next_completed(timeout_s=5)
    assert queue.compile_s == pytest.approx(3 * Built.worker_s)  # the lost call's two candidates count nothing


def test_a_compile_worker_reports_the_seconds_it_spent_on_a_candidate(builtin_tasks, tmp_path):
    from actors.evaluators import CompilerActor
    from pipeline.core.config import CompileSection
    from pipeline.core.records import Candidate
    task = builtin_tasks["c2cuda/saxpy"]
    refused = Candidate(task_id=task.id, code='extern "C" void saxpy() { system("id"); }', format="c2cuda")
    t0 = time.perf_counter()
    built = CompilerActor(CompileSection(cache_dir=str(tmp_path))).compile(refused, task)  # the shell, without Ray
    assert not built.ok and 0 < built.worker_s <= time.perf_counter() - t0
