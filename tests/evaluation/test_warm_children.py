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


def test_a_warm_start_holds_the_gpu_only_for_the_childs_cuda_context_and_mapping(tmp_path):
    """The child's process and Python (torch too, for the KernelBench format) start with the GPU's lock free;
    its trusted start on the GPU (hello: the CUDA context) and the mapping of the group's buffers hold it
    shared. The process started without hello has been sent nothing and knows nothing of its sandbox yet."""
    import threading
    from types import SimpleNamespace

    from pipeline.evaluation.evaluator import Evaluator
    from pipeline.evaluation.gpu.lock import GpuLock
    lock = GpuLock("9", str(tmp_path))
    seen = []

    class Child:
        def __init__(self):
            self.ops, self.closed = [], False

        def ready(self):
            seen.append(("ready", held.is_set()))

        def hello(self):
            seen.append(("hello", held.is_set()))
            self.ops.append("hello")

        def request(self, msg, timeout_s):
            seen.append((msg["op"], held.is_set()))
            self.ops.append(msg["op"])
            return {"ok": True}

        def close(self):
            self.closed = True
    held = threading.Event()
    real_shared = lock.shared

    def shared(why=""):
        cm = real_shared(why)

        class Held:
            def __enter__(self):
                cm.__enter__()
                held.set()

            def __exit__(self, *exc):
                held.clear()
                return cm.__exit__(*exc)
        return Held()
    lock.shared = shared

    def start_child(torch_format, hello_now=True):
        seen.append(("spawn", held.is_set(), hello_now))
        return Child()
    ev = SimpleNamespace(gpu_lock=lock, start_child=start_child, cfg=SimpleNamespace(run_timeout_s=5),
                         _buffer_map=lambda group: {})
    child = Evaluator.warm_child(ev, None, True)
    assert seen == [("spawn", False, False), ("ready", False), ("hello", True), ("map", True)]
    assert child.ops == ["hello", "map"]
    import time
    for torch_format in (False, True):  # the real process, started, not yet said hello to
        real = ChildProcess(None, "", 8 << 30, preload_torch=torch_format, hello_now=False)
        try:
            assert real.ops == [] and real.sandbox_info == {} and real.proc.poll() is None
            real.ready()  # Python up, torch imported where asked: the long part, outside the lock
            t0 = time.perf_counter()
            real.hello()
            assert time.perf_counter() - t0 < 1.0  # the trusted start alone (torch's import took seconds here)
            assert real.ops == ["hello"] and real.sandbox_info["sandbox"] == "bwrap"
            assert "ok" in real.request({"op": "probe"}, 60) and real.proc.poll() is None  # it serves requests
        finally:
            real.close()
