"""Warm children: started through their trusted part before a candidate needs one, each handed out once."""
from __future__ import annotations

import pytest

from pipeline.evaluation.child.sandbox import ChildProcess
from pipeline.evaluation.child.warm import WarmChildren


def start() -> ChildProcess:
    child = ChildProcess(None, "", 1 << 30)  # the real sandboxed child: bwrap, Python, Landlock, seccomp
    child.request({"op": "probe"}, 60)       # trusted work only (a GPU host also maps the group's buffers here)
    return child


def test_a_warm_child_has_run_no_candidate_code_and_is_handed_out_once():
    pool = WarmChildren(start, size=2)
    taken = []
    try:
        for _ in range(3):
            child = pool.take()
            assert set(child.ops) <= {"hello", "probe", "map"} and child.handed
            assert child.proc.poll() is None  # alive, waiting for its one candidate
            taken.append(child)
        assert len({id(c) for c in taken}) == 3 and pool.handed == 3
        assert len({c.pid for c in taken}) == 3  # three processes, never one reused
    finally:
        for c in taken:
            c.close()
        pool.close()


class Fake:
    def __init__(self, ops):
        self.ops, self.closed = ops, False

    def close(self):
        self.closed = True


def test_a_child_that_was_sent_candidate_work_or_handed_before_is_refused():
    made = iter([Fake(["hello", "load"]), Fake(["hello"])])
    pool = WarmChildren(lambda: next(made), size=1)
    with pytest.raises(RuntimeError, match="offered twice or after candidate work"):
        pool.take()
    again = pool.take()
    again.handed = False
    again.handed = True
    pool2 = WarmChildren(lambda: again, size=1)
    with pytest.raises(RuntimeError):
        pool2.take()
    pool.close()
    pool2.close()


def test_unused_warm_children_are_closed():
    made = []
    pool = WarmChildren(lambda: made.append(Fake(["hello"])) or made[-1], size=2)
    pool.take()
    pool.close()
    assert len(made) == 3 and [c.closed for c in made] == [False, True, True]
