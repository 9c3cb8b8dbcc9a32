"""Tests of actors/pool.py (SupervisedPool) and actors/evaluators.py on a real local Ray (2 CPUs).

Run: .venv/bin/pytest tests/test_pool.py -q   (about half a minute: actors are real processes)
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
import ray
import yaml

from actors.pool import ItemFailed, PoolItemError, SupervisedPool

DELAY_S = 0.3


pytestmark = pytest.mark.integration


class Squarer:
    """Test actor: slow squares, and methods that crash the process or raise on chosen inputs."""

    def __init__(self, delay_s: float):
        self._delay_s = delay_s
        self._seen: list[int] = []

    def work(self, x: int) -> tuple[int, int]:
        self._seen.append(x)
        time.sleep(self._delay_s)
        return x * x, os.getpid()

    def work_or_die(self, x: int, poison: int) -> tuple[int, int]:
        if x == poison:
            os._exit(1)  # the process dies as on OOM or a segfault
        return self.work(x)

    def work_or_raise(self, x: int, bad: int) -> tuple[int, int]:
        if x == bad:
            self._seen.append(x)
            raise ValueError(f"cannot square {x}")
        return self.work(x)

    def total(self, values: list[int], x: int) -> int:
        return sum(values) + x

    def seen(self) -> list[int]:
        return list(self._seen)

    def pid(self) -> int:
        return os.getpid()


@pytest.fixture(scope="module", autouse=True)
def ray_local():
    # Ray's workers cannot import this test module (tests/ is not a package on their path), so
    # its actor classes travel to them by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def squarer_pool(size: int = 2, max_retries: int = 2, delay_s: float = DELAY_S, **kw) -> SupervisedPool:
    remote_cls = ray.remote(Squarer)

    def make_actor(slot: int):
        return remote_cls.options(num_cpus=0.5, max_restarts=0).remote(delay_s)

    return SupervisedPool(make_actor, size=size, max_retries=max_retries, **kw)


def test_map_returns_results_in_input_order():
    with squarer_pool(delay_s=0.01) as pool:
        early = pool.submit("work", 100)  # another caller's item: map must leave it alone
        results = pool.map("work", [(x,) for x in range(12)])
        assert [r[0] for r in results] == [x * x for x in range(12)]
        assert pool.next_completed(timeout_s=30)[0] == early
        assert pool.restarts == 0 and pool.outstanding() == 0


def test_idle_actors_get_work():
    with squarer_pool(size=2) as pool:
        pids = {ray.get(a.pid.remote()) for a in pool.actors}
        results = pool.map("work", [(x,) for x in range(4)])
        used = [pid for _, pid in results]
        assert set(used) == pids  # both actors worked, so the run took about half of serial
        assert max(used.count(pid) for pid in pids) == 2


def test_many_calls_in_flight_per_actor_and_shared_args():
    with squarer_pool(size=2, delay_s=0.01, max_in_flight_per_actor=3) as pool:
        values = list(range(50_000))  # the same object for every item: put in the store once
        assert pool.map("total", [(values, x) for x in range(8)]) == [sum(values) + x for x in range(8)]
        ref = ray.put(values)  # an ObjectRef passes transparently
        ticket = pool.submit("total", ref, 1)
        assert pool.next_completed(timeout_s=30) == (ticket, sum(values) + 1)


def test_killed_actor_is_replaced_and_its_work_retried():
    with squarer_pool(size=2, max_retries=2) as pool:
        victim = pool.actors[0]
        old_pid = ray.get(victim.pid.remote())
        tickets = {pool.submit("work", x): x for x in range(6)}
        time.sleep(DELAY_S / 2)  # the victim is inside its first item now
        ray.kill(victim, no_restart=True)
        results = dict(pool.next_completed(timeout_s=60) for _ in tickets)
        assert {t: r[0] for t, r in results.items()} == {t: x * x for t, x in tickets.items()}
        assert pool.restarts == 1
        new_pid = ray.get(pool.actors[0].pid.remote())
        assert new_pid != old_pid
        assert old_pid not in {pid for _, pid in results.values()}


def test_item_that_always_kills_its_actor_ends_as_error_result():
    with squarer_pool(size=2, max_retries=1, delay_s=0.05) as pool:
        results = pool.map("work_or_die", [(x, 3) for x in range(6)])
        failed = results[3]
        assert isinstance(failed, ItemFailed) and failed.attempts == 2 and failed.method == "work_or_die"
        assert "lost its actor on all 2 attempts" in str(failed)
        assert [r[0] for i, r in enumerate(results) if i != 3] == [x * x for x in range(6) if x != 3]
        assert pool.restarts == 2


def test_method_exception_is_raised_naming_the_item_and_not_retried():
    with squarer_pool(size=2, delay_s=0.05) as pool:
        with pytest.raises(PoolItemError, match=r"map item 2: .*ValueError.*cannot square 2") as info:
            pool.map("work_or_raise", [(x, 2) for x in range(4)])
        assert isinstance(info.value.__cause__, ray.exceptions.RayTaskError)
        seen = sum(ray.get([a.seen.remote() for a in pool.actors]), [])
        assert seen.count(2) == 1 and pool.restarts == 0
        # the pool stays usable, and next_completed raises with the ticket too
        ok = pool.submit("work_or_raise", 5, 2)
        bad = pool.submit("work_or_raise", 2, 2)
        outcomes = {}
        for _ in range(2):
            try:
                ticket, result = pool.next_completed(timeout_s=30)
                outcomes[ticket] = result[0]
            except PoolItemError as e:
                assert f"item {bad} (work_or_raise)" in str(e)
                outcomes[e.ticket] = "raised"
        assert outcomes == {ok: 25, bad: "raised"}


def test_next_completed_times_out_and_refuses_when_idle():
    with squarer_pool(size=1, delay_s=1.0) as pool:
        ticket = pool.submit("work", 3)
        with pytest.raises(TimeoutError):
            pool.next_completed(timeout_s=0.05)
        assert pool.next_completed(timeout_s=30)[0] == ticket
        with pytest.raises(RuntimeError, match="no work outstanding"):
            pool.next_completed()
        with pytest.raises(ValueError, match="no method 'nope'"):
            pool.submit("nope")
    with pytest.raises(ValueError, match="size = 0"):
        SupervisedPool(lambda slot: None, size=0, max_retries=1)


def test_evaluator_pool_on_cpu(tmp_path):
    from actors.evaluators import make_evaluator_pool
    from pipeline.core.config import CompileSection, EvalSection
    from pipeline.core.records import Candidate, EvalResult, Task

    task_file = Path(__file__).parents[1] / "pipeline" / "assets" / "builtin_tasks" / "c2cuda" / "saxpy.yaml"
    task = Task.model_validate(yaml.safe_load(task_file.read_text()))
    code = task.baseline().code
    group = [Candidate(task_id=task.id, code=code, format="c2cuda"),
             Candidate(task_id=task.id, code="not cuda at all", format="c2cuda", turn=1)]
    eval_cfg, compile_cfg = EvalSection(gpus=0, result_cache_dir=""), CompileSection(cache_dir=str(tmp_path))
    with make_evaluator_pool(eval_cfg, compile_cfg, num_gpus_available=0) as pool:
        assert pool.size == 1
        assert ray.get(pool.actors[0].ping.remote()) == "ok"
        (results,) = pool.map("evaluate", [(task, group)])
    assert [type(r) for r in results] == [EvalResult, EvalResult]
    assert [r.candidate_hash for r in results] == [c.content_hash() for c in group]
    assert results[0].verdict in ("not_executed", "compile_error")  # no GPU here: never "correct"
    assert results[1].verdict != "correct"


class TwoCallsAtOnce:
    """A compiler stand-in that serves two calls at once (a simulation's process standing for two workers)."""
    calls_per_actor = 2

    def __init__(self, compile_cfg, gate_profile="strict", limits=None):
        pass

    def compile_group(self, candidates, task):
        start = time.monotonic()
        time.sleep(DELAY_S)
        return [(os.getpid(), start, time.monotonic())]

    def ping(self) -> str:
        return "ok"


def test_a_pool_of_actors_serving_several_calls_runs_them_at_once(tmp_path):
    from actors.evaluators import make_compiler_pool
    from pipeline.core.config import CompileSection
    with make_compiler_pool(CompileSection(workers=4, cache_dir=str(tmp_path)), max_retries=1,
                            actor_cls=TwoCallsAtOnce) as pool:
        assert (pool.size, pool.capacity) == (2, 4)  # two processes stand for four compile workers
        spans = [r[0] for r in pool.map("compile_group", [([k], "task") for k in range(4)])]
    by_pid = {}
    for pid, start, end in spans:
        by_pid.setdefault(pid, []).append((start, end))
    assert sorted(len(v) for v in by_pid.values()) == [2, 2]
    for (s1, e1), (s2, e2) in by_pid.values():  # each process ran its two calls at the same time
        assert s2 < e1 and s1 < e2
    with pytest.raises(ValueError, match="multiple of 2"):
        make_compiler_pool(CompileSection(workers=3, cache_dir=str(tmp_path)), 1, actor_cls=TwoCallsAtOnce)


def test_compiler_pool(tmp_path):
    from actors.evaluators import make_compiler_pool
    from pipeline.core.config import CompileSection
    from pipeline.evaluation.build.compile import CompileResult
    from pipeline.core.records import Candidate, Task

    task_file = Path(__file__).parents[1] / "pipeline" / "assets" / "builtin_tasks" / "c2cuda" / "saxpy.yaml"
    task = Task.model_validate(yaml.safe_load(task_file.read_text()))
    good = Candidate(task_id=task.id, code=task.baseline().code, format="c2cuda")
    bad = Candidate(task_id=task.id, code="__global__ void k( {", format="c2cuda")
    with make_compiler_pool(CompileSection(workers=1, cache_dir=str(tmp_path)), max_retries=1) as pool:
        assert pool.size == 1
        results = pool.map("compile", [(good, task), (bad, task)])
    assert [type(r) for r in results] == [CompileResult, CompileResult]
    assert results[0].ok or results[0].unavailable  # unavailable: no nvcc on this machine
    assert not results[1].ok


def test_evaluate_groups_compiles_then_evaluates_in_order(tmp_path, builtin_tasks):
    from actors.evaluators import evaluate_groups, make_compiler_pool, make_evaluator_pool
    from pipeline.core.config import CompileSection, EvalSection
    from pipeline.core.records import Candidate

    compile_cfg = CompileSection(cache_dir=str(tmp_path), workers=1)
    groups = []
    for tid in ("c2cuda/saxpy", "torch2cuda/relu"):
        task = builtin_tasks[tid]
        impl = next(i for i in task.implementations if i.format in ("c2cuda", "light"))
        groups.append((task, [Candidate(task_id=tid, code=impl.code, format=impl.format),
                              Candidate(task_id=tid, code=impl.code + "\nstatic int broken = not_declared;\n",
                                        format=impl.format, turn=1)]))
    groups.insert(1, (builtin_tasks["c2cuda/saxpy"], []))  # an empty group gives an empty result list
    with make_compiler_pool(compile_cfg, 1) as compilers, \
            make_evaluator_pool(EvalSection(gpus=0, result_cache_dir=""), compile_cfg, 0) as evaluators:
        seen = []
        results = evaluate_groups(compilers, evaluators, groups, lambda g, value: seen.append((g, len(value))))
    assert [len(r) for r in results] == [2, 0, 2]
    assert sorted(seen) == [(0, 2), (1, 0), (2, 2)]  # each group reported once, as it finished
    for (task, cands), rs in zip(groups, results):
        assert [r.task_id for r in rs] == [task.id] * len(cands)
        assert [r.verdict for r in rs] == ["not_executed", "compile_error"][:len(rs)]


def test_wait_ready_names_an_actor_that_died_on_every_start():
    from actors.cluster import ClusterStartError, Training
    from pipeline.core.errors import UserError
    from pipeline.core.lost_work import ItemFailed

    class Pool:
        size = 2
        actors = ()  # no actor to wait for: the start wait (actors/startup.py) has its own tests

        def __init__(self, results):
            self.results = results

        def map(self, method, args):
            return self.results
    cluster = Training.__new__(Training)
    cluster._pools, cluster._start_timeout_s = [Pool([11, 12])], 60.0
    cluster.wait_ready()  # every actor answered
    cluster._pools.append(Pool([13, ItemFailed(1, "pid", 3, "ActorDiedError: out of memory")]))
    with pytest.raises(ClusterStartError, match="died on every start.*out of memory") as e:
        cluster.wait_ready()
    assert isinstance(e.value, UserError)
