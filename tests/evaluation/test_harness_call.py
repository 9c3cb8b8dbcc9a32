"""A KernelBench-format call as the child's harness makes it, on CPU tensors: the forward alone between the
marks of its time, then its result's checks and the copy into the output buffer; a result that lies in the
harness's own buffers is refused."""
import pytest
import torch

from pipeline.evaluation.child import torch_guard
from pipeline.evaluation.child.main import TorchRunner


@pytest.fixture(autouse=True)
def results_on_cpu(monkeypatch):
    monkeypatch.setattr(torch_guard, "RESULT_DEVICE", "cpu")

SOURCE = ("import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
          "    def forward(self, x):\n        return x * 2\n")


def spans_of(*tensors):
    return [(t.data_ptr(), t.numel() * t.element_size()) for t in tensors]


def test_harness_memory_finds_any_overlap_with_a_mapped_buffer():
    memory = torch_guard.HarnessMemory([(1000, 100), (3000, 50), (0, 64), (5000, 0)])  # unmapped and empty: none
    assert memory.overlaps(1000, 1004) and memory.overlaps(1099, 1200) and memory.overlaps(900, 1001)
    assert memory.overlaps(2000, 4000)  # spans a whole buffer
    assert not memory.overlaps(1100, 3000) and not memory.overlaps(0, 1000) and not memory.overlaps(3050, 9000)
    assert not memory.overlaps(1050, 1050)  # an empty result holds no memory
    assert not torch_guard.HarnessMemory([]).overlaps(0, 1 << 40)


def test_a_result_in_an_input_or_an_output_buffer_is_refused_and_not_copied():
    x, out, other = torch.randn(8), torch.zeros(8), torch.zeros(16)
    memory = torch_guard.HarnessMemory(spans_of(x, out, other))
    for result in (x, out, other[4:12], x.view(2, 4).reshape(8)):
        flags: list[str] = []
        before = out.clone()
        torch_guard.deliver([result], [out], memory, flags)
        assert flags and flags[0].startswith("output-aliasing"), flags
        assert torch.equal(out, before)  # nothing copied
    flags = []
    mine = x * 2
    torch_guard.deliver([mine], [out], memory, flags)
    assert flags == [] and torch.equal(out, mine)  # its own allocation: checked and copied


def test_a_timed_forward_holds_the_call_alone_between_its_marks():
    seen = []
    flags: list[str] = []

    class Pair(tuple):  # a tuple subclass: taken apart by exact type, so it stays one result
        pass

    results = torch_guard.forward_once(lambda: (seen.append("call"), (torch.ones(2), torch.zeros(2)))[1], flags,
                                       lambda: seen.append("start"), lambda: seen.append("end"))
    assert seen == ["start", "call", "end"] and len(results) == 2 and flags == []
    one = torch_guard.forward_once(lambda: Pair((torch.ones(2),)), flags, lambda: None, lambda: None)
    assert len(one) == 1 and type(one[0]) is Pair
    flags = []
    torch_guard.deliver(one, [torch.zeros(2)], torch_guard.HarnessMemory([]), flags)
    assert flags and flags[0].startswith("output-type")


def test_the_runners_timed_call_marks_the_forward_and_copies_after_it():
    x, out = torch.randn(5), torch.zeros(5)
    runner = TorchRunner({"source": SOURCE, "extensions": {}, "calls": []}, [], spans_of(x, out))
    runner.calls = [[(runner.model_cls(), [x], [out])]]
    seen = []
    original = torch.Tensor.copy_

    def traced_copy(self, src, *a, **k):
        seen.append("copy")
        return original(self, src, *a, **k)
    torch.Tensor.copy_ = traced_copy
    try:
        assert runner.timed_call(0, 0, lambda: seen.append("start"), lambda: seen.append("end")) == 0
    finally:
        torch.Tensor.copy_ = original
    assert seen == ["start", "end", "copy"] and torch.allclose(out, x * 2) and runner.flags == []


def test_a_forward_returning_the_harness_output_buffer_is_flagged():
    """The buffer reached by its address (as `__cuda_array_interface__` would reach it on the GPU)."""
    x, out = torch.randn(5), torch.zeros(5)
    source = SOURCE.replace("return x * 2", "return torch.from_numpy(_target.numpy())")
    runner = TorchRunner({"source": "_target = None\n" + source, "extensions": {}, "calls": []}, [], spans_of(x, out))
    runner.model_cls.forward.__globals__["_target"] = out
    runner.calls = [[(runner.model_cls(), [x], [out])]]
    runner.timed_call(0, 0, lambda: None, lambda: None)
    assert any(f.startswith("output-aliasing") for f in runner.flags), runner.flags


class FakeDriver:
    """Events on a fake GPU clock: each record stamps the time; a memset or a call advances it."""

    def __init__(self):
        self.now, self.stamps, self.log, self.made = 0.0, {}, [], 0

    def event(self):
        self.made += 1
        return self.made

    def record(self, ev, stream=0):
        self.stamps[ev] = self.now
        self.log.append(("record", ev))

    def elapsed_ms(self, a, b):
        return self.stamps[b] - self.stamps[a]

    def memset_async(self, ptr, byte, nbytes, stream=0):
        self.now += 1.0
        self.log.append(("memset", nbytes))

    def alloc(self, nbytes):
        return 4096

    def free(self, ptr):
        pass

    def synchronize(self):
        self.now += 100.0  # time between batches is in no call's pair
        self.log.append(("sync",))

    def info(self):
        return type("Info", (), {"name": "fake"})()


def test_a_batch_reports_the_sum_of_its_calls_own_event_pairs(monkeypatch):
    """`run` marks each call with its own pair of events (made once, reused by later batches) and reports the
    sum of the pairs: what happens between calls and after the last one is in no call's time."""
    import io
    import json

    from pipeline.evaluation.child import main
    driver = FakeDriver()
    monkeypatch.setattr(main, "apply_sandbox", lambda hello: {"driver": driver})
    calls = []

    class Native(main.NativeRunner):
        def __init__(self, msg, ptrs, spans):
            self.flags, self.light = [], False

        def timed_call(self, config, slot, start, end):
            start()
            driver.now += 2.0 + slot  # the call's own work
            calls.append(slot)
            end()
            driver.now += 50.0  # the harness between calls
            return 0
    monkeypatch.setattr(main, "NativeRunner", Native)
    lines = [{"sandbox": "none", "scratch": "/tmp"},
             {"op": "load", "format": "c2cuda", "arenas": [], "buffers": []},
             {"op": "run", "config": 0, "slots": [0, 1, 2]},
             {"op": "run", "config": 0, "slots": [1]},
             {"op": "run", "config": 0, "slots": [], "launches": 2, "fill_bytes": 64}]
    out = io.StringIO()
    main.serve(io.StringIO("".join(json.dumps(m) + "\n" for m in lines)), out)
    replies = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [r["ok"] for r in replies] == [True] * 5, replies
    assert [r["events_ms"] for r in replies[2:]] == [2.0 + 3.0 + 4.0, 3.0, 2.0]  # per pair, nothing between
    assert calls == [0, 1, 2, 1] and driver.made == 6  # three pairs, made once
    memsets = [x for x in driver.log if x[0] == "memset"]
    assert memsets == [("memset", 64), ("memset", 64)]
    # every call (and every calibration operation) ends with the device idle, as a KernelBench trial does
    after_ends = [driver.log[i + 1] for i, x in enumerate(driver.log) if x[0] == "record" and x[1] % 2 == 0]
    assert after_ends == [("sync",)] * 6
