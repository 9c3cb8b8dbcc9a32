"""The evaluator starts the next candidate's process while one runs, but the next candidate's own code (its
load: ModelNew.__init__, static constructors) never runs while another candidate's outputs are checked, so a
candidate cannot spoil a sibling's check. CPU: the evaluator's group loop with its GPU parts replaced."""
import contextlib
import threading
import time
from types import SimpleNamespace

import pytest

import pipeline.evaluation.runner as runner
from pipeline.evaluation.gpu.lock import CodeLock
from pipeline.evaluation.evaluator import Evaluator
from pipeline.core.records import Candidate, EvalResult


class FakeChild:
    def __init__(self, k, log):
        self.k, self.log_ = k, log

    def freeze(self): pass
    def thaw(self): pass
    def close(self): pass
    def log(self, n): return ""
    def request(self, msg, timeout): return {"ok": True}


def with_warm_children(ev, size: int = 0) -> None:
    """The evaluator's warm-children pool over the fake's start_child (its trusted start, as warm.py takes it)."""
    ev.cfg.warm_children = size
    ev.warm_child = lambda group, torch_format: ev.start_child(torch_format)


@pytest.mark.parametrize("warm", [0, 2])
def test_the_next_candidates_load_never_overlaps_a_check(monkeypatch, warm):
    events, lock = [], threading.Lock()

    def mark(what, k):
        with lock:
            events.append((time.perf_counter(), what, k))

    def load_into_child(child, group, fmt, comp, entry, code):
        mark("load+", child.k)
        time.sleep(0.05)  # long enough to overlap a check if nothing kept them apart
        mark("load-", child.k)
        return {"ok": True}

    def check_all(ev, group, child, configs):
        mark("check+", child.k)
        time.sleep(0.05)
        mark("check-", child.k)

    def timing(ev, group, child, configs, fmt, flags, parts):
        time.sleep(0.02)
        return None, None

    monkeypatch.setattr(runner, "_check_all", check_all)
    monkeypatch.setattr(runner, "_time", timing)
    started = iter(range(100))
    ev = SimpleNamespace(start_child=lambda kb: FakeChild(next(started), events), load_into_child=load_into_child,
                         candidate_code=CodeLock(), gpu_lock=SimpleNamespace(shared=contextlib.nullcontext,
                                                                                   shared_with=lambda code, why: code),
                         cfg=SimpleNamespace(run_timeout_s=5), sandbox_note="", driver=SimpleNamespace(make_current=lambda: None),
                         _restore_params=lambda group: False,
                         result_of=lambda task, cand, verdict, reason, **kw: EvalResult(task_id=task.id, candidate_hash="h",
                                                                                    verdict=verdict, reason=reason, format="c2cuda"))
    group = SimpleNamespace(task=SimpleNamespace(id="t", function="f"), configs=[])
    cands = [Candidate(task_id="t", code=f"// {k}", format="c2cuda") for k in range(4)]
    preps = [SimpleNamespace(comp=SimpleNamespace(ptxas_log=""), stage_s={}, findings=[], features={}) for _ in cands]
    results = [None] * 4
    with_warm_children(ev, warm)
    Evaluator._run_all(ev, group, cands, preps, list(range(4)), results)
    assert [r.verdict for r in results] == ["correct"] * 4
    busy: dict[str, int] = {}
    for _, what, k in sorted(events):
        kind = what[:-1]
        busy[kind] = busy.get(kind, 0) + (1 if what.endswith("+") else -1)
        assert not (busy.get("load", 0) and busy.get("check", 0)), f"a load overlapped a check at {what} {k}"
    assert sum(1 for _, w, _ in events if w == "load+") == 4 and sum(1 for _, w, _ in events if w == "check+") == 4



def test_a_load_ahead_a_check_and_another_evaluators_timing_never_deadlock(monkeypatch, tmp_path):
    """The next candidate's load (holding the GPU's shared lock) waits for the candidate_code lock that the
    current candidate's check holds, while another evaluator of the GPU waits for the exclusive lock: the check
    must not then wait for the shared lock behind that evaluator's gate. The evaluator's group loop with real
    GpuLocks (one file pair) and the GPU parts replaced; the interleaving is forced."""
    from pipeline.evaluation.gpu.lock import GpuLock
    code_held, timer_waiting, load_holds_shared = threading.Event(), threading.Event(), threading.Event()
    loop_thread = []

    class ForcingLock:  # the check, once it holds candidate_code, waits until the other evaluator has queued
        def __init__(self):
            self.lock = threading.Lock()
            self.reentering = False

        def locked(self):
            return self.lock.locked()

        def acquire(self, blocking=True):
            got = self.lock.acquire(blocking)
            if got and threading.current_thread() in loop_thread:
                code_held.set()
                timer_waiting.wait(2)
                time.sleep(0.2)
            return got

        def release(self):
            self.lock.release()

        def __enter__(self):
            self.acquire()

        def __exit__(self, *exc):
            self.release()

    started = iter(range(100))

    def start_child(kb):
        k = next(started)
        if k == 1:  # the load ahead: it reaches candidate_code only once the check holds it
            load_holds_shared.set()
            code_held.wait(2)
        return FakeChild(k, [])

    monkeypatch.setattr(runner, "_check_all", lambda ev, group, child, configs: None)
    monkeypatch.setattr(runner, "_time", lambda ev, group, child, configs, fmt, flags, parts: (None, None))
    ev = SimpleNamespace(start_child=start_child, load_into_child=lambda *a: {"ok": True},
                         candidate_code=ForcingLock(), gpu_lock=GpuLock("9", str(tmp_path)),
                         cfg=SimpleNamespace(run_timeout_s=5), sandbox_note="",
                         driver=SimpleNamespace(make_current=lambda: None), _restore_params=lambda group: False,
                         result_of=lambda task, cand, verdict, reason, **kw: EvalResult(task_id=task.id, candidate_hash="h",
                                                                                    verdict=verdict, reason=reason, format="c2cuda"))
    group = SimpleNamespace(task=SimpleNamespace(id="t", function="f"), configs=[])
    cands = [Candidate(task_id="t", code=f"// {k}", format="c2cuda") for k in range(2)]
    preps = [SimpleNamespace(comp=SimpleNamespace(ptxas_log=""), stage_s={}, findings=[], features={}) for _ in cands]
    results, timed = [None, None], []
    with_warm_children(ev)

    def other_evaluator():
        load_holds_shared.wait(2)
        code_held.wait(2)
        threading.Timer(0.05, timer_waiting.set).start()
        with GpuLock("9", str(tmp_path)).exclusive():
            timed.append(True)

    loop = threading.Thread(target=Evaluator._run_all, args=(ev, group, cands, preps, [0, 1], results), daemon=True)
    other = threading.Thread(target=other_evaluator, daemon=True)
    loop_thread.append(loop)
    loop.start()
    other.start()
    loop.join(10)
    other.join(10)
    assert not loop.is_alive() and not other.is_alive(), "deadlock"
    assert [r.verdict for r in results] == ["correct", "correct"] and timed
