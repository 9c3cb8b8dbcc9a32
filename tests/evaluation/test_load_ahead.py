"""The evaluator starts the next candidate's process while one runs, but the next candidate's own code (its
load: ModelNew.__init__, static constructors) never runs while another candidate's outputs are checked, so a
candidate cannot spoil a sibling's check. CPU: the evaluator's group loop with its GPU parts replaced."""
import contextlib
import threading
import time
from types import SimpleNamespace

import pipeline.evaluation.runner as runner
from pipeline.evaluation.evaluator import Evaluator
from pipeline.records import Candidate, EvalResult


class FakeChild:
    def __init__(self, k, log):
        self.k, self.log_ = k, log

    def freeze(self): pass
    def thaw(self): pass
    def close(self): pass
    def log(self, n): return ""
    def request(self, msg, timeout): return {"ok": True}


def test_the_next_candidates_load_never_overlaps_a_check(monkeypatch):
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
                         candidate_code=threading.Lock(), gpu_lock=SimpleNamespace(shared=contextlib.nullcontext),
                         cfg=SimpleNamespace(run_timeout_s=5), sandbox_note="", driver=SimpleNamespace(make_current=lambda: None),
                         _restore_params=lambda group: False,
                         _base=lambda task, cand, verdict, reason, **kw: EvalResult(task_id=task.id, candidate_hash="h",
                                                                                    verdict=verdict, reason=reason, format="c2cuda"))
    group = SimpleNamespace(task=SimpleNamespace(id="t", function="f"), configs=[])
    cands = [Candidate(task_id="t", code=f"// {k}", format="c2cuda") for k in range(4)]
    preps = [SimpleNamespace(comp=SimpleNamespace(ptxas_log=""), stage_s={}, findings=[], features={}) for _ in cands]
    results = [None] * 4
    Evaluator._run_all(ev, group, cands, preps, list(range(4)), results)
    assert [r.verdict for r in results] == ["correct"] * 4
    busy: dict[str, int] = {}
    for _, what, k in sorted(events):
        kind = what[:-1]
        busy[kind] = busy.get(kind, 0) + (1 if what.endswith("+") else -1)
        assert not (busy.get("load", 0) and busy.get("check", 0)), f"a load overlapped a check at {what} {k}"
    assert sum(1 for _, w, _ in events if w == "load+") == 4 and sum(1 for _, w, _ in events if w == "check+") == 4
