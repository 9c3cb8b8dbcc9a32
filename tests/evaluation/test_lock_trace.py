"""The GPU lock's trace: every hold written with its mode, reason and times, by every process, and its report."""
from __future__ import annotations

import json
import multiprocessing
import time

import pytest

from pipeline.evaluation.gpu.lock import GpuLock
from pipeline.evaluation.gpu.lock_trace import lock_report, main, read_trace, report_table, union_s


def test_union_of_intervals():
    assert union_s([]) == 0.0
    assert union_s([(0, 1), (0.5, 2), (3, 4)]) == pytest.approx(3.0)
    assert union_s([(2, 3), (0, 10)]) == pytest.approx(10.0)


def _hold_exclusive(directory: str, trace: str, seconds: float) -> None:
    with GpuLock("4", directory, trace_path=trace).exclusive("timing: a round's windows"):
        time.sleep(seconds)


def test_holds_of_two_processes_are_traced_with_their_waits(tmp_path):
    """A shared hold in this process waits for another process's exclusive hold: both are in one file, the
    wait is the shared hold's, and the report's union does not count the overlap of waiting as held."""
    trace = str(tmp_path / "lock.jsonl")
    other = multiprocessing.get_context("spawn").Process(target=_hold_exclusive, args=(str(tmp_path), trace, 0.6))
    other.start()
    deadline = time.time() + 30
    while not (tmp_path / "cudaperf-gpu-4.lock").exists() and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # the other process holds it exclusive by now
    lock = GpuLock("4", str(tmp_path), trace_path=trace)
    with lock.shared("a candidate's checks"):
        time.sleep(0.1)
    other.join(30)
    records = read_trace(trace)
    assert sorted((r["mode"], r["why"]) for r in records) == [("exclusive", "timing: a round's windows"),
                                                               ("shared", "a candidate's checks")]
    ex = next(r for r in records if r["mode"] == "exclusive")
    sh = next(r for r in records if r["mode"] == "shared")
    assert sh["granted"] >= ex["released"] - 0.01  # granted only once the exclusive hold ended
    assert sh["granted"] - sh["requested"] > 0.1  # and it waited for it
    report = lock_report(records)
    assert report["exclusive_s"] == pytest.approx(ex["released"] - ex["granted"])
    assert report["shared_s"] == pytest.approx(0.1, abs=0.08)
    by = {(g["mode"], g["why"]): g for g in report["reasons"]}
    assert by[("shared", "a candidate's checks")]["waited_s"] > 0.1
    assert len(report["processes"]) == 2
    assert "timing: a round's windows" in report_table(report)


def test_turns_trace_each_switch_as_its_own_hold(tmp_path):
    trace = str(tmp_path / "t.jsonl")
    turns = GpuLock("5", str(tmp_path), trace_path=trace).turns()
    turns.exclusive("timing: warm-up")
    turns.shared("timing: a round's inputs")
    turns.exclusive("timing: a round's windows")
    turns.release()
    turns.release()  # a second release writes nothing
    records = read_trace(trace)
    assert [(r["mode"], r["why"]) for r in records] == [("exclusive", "timing: warm-up"),
                                                         ("shared", "timing: a round's inputs"),
                                                         ("exclusive", "timing: a round's windows")]
    assert all(r["requested"] <= r["granted"] <= r["released"] for r in records)
    # each turn's record ends where the next begins: the switch from exclusive to shared is one instant
    assert records[0]["released"] <= records[1]["requested"] + 1e-3 and records[1]["released"] <= records[2]["granted"]


def test_no_trace_without_a_path_and_a_cut_line_is_skipped(tmp_path, capsys):
    untraced = GpuLock("6", str(tmp_path))
    with untraced.shared("x"):
        pass
    assert untraced.trace is None and sorted(p.name for p in tmp_path.iterdir()) == ["cudaperf-gpu-6.gate",
                                                                                       "cudaperf-gpu-6.lock",
                                                                                       "cudaperf-gpu-6.queue"]
    path = tmp_path / "cut.jsonl"
    good = {"pid": 1, "mode": "shared", "why": "x", "requested": 0.0, "granted": 0.5, "released": 1.0}
    path.write_text(json.dumps(good) + "\n" + '{"pid": 1, "mode": "excl')
    assert read_trace(str(path)) == [{"lock": "", **good}]  # a trace without lock names: one lock
    assert main([str(path)]) == 0 and "not held 0.50 s" in capsys.readouterr().out
    assert main([str(tmp_path / "missing.jsonl")]) == 2
    assert "eval.lock_trace_path=" in capsys.readouterr().err
    assert lock_report([])["span_s"] == 0.0


def test_each_gpus_lock_is_reported_alone(tmp_path):
    """Evaluators of two GPUs writing one trace: each record names its GPU's lock, the report of both at once is
    refused, `by_lock` splits them, and `since` keeps a run's own holds."""
    from pipeline.evaluation.gpu.lock_trace import by_lock
    trace = str(tmp_path / "two.jsonl")
    with GpuLock("0", str(tmp_path), trace_path=trace).exclusive("timing: a round's windows"):
        pass
    later = time.time()
    with GpuLock("1", str(tmp_path), trace_path=trace).shared("a candidate's checks"):
        pass
    records = read_trace(trace)
    assert sorted(r["lock"] for r in records) == ["cudaperf-gpu-0.lock", "cudaperf-gpu-1.lock"]
    with pytest.raises(ValueError, match="several GPUs"):
        lock_report(records)
    split = by_lock(records)
    assert {k: len(v) for k, v in split.items()} == {"cudaperf-gpu-0.lock": 1, "cudaperf-gpu-1.lock": 1}
    assert lock_report(split["cudaperf-gpu-0.lock"])["shared_s"] == 0.0
    assert [r["lock"] for r in read_trace(trace, since=later)] == ["cudaperf-gpu-1.lock"]


def test_a_turn_half_taken_is_let_go(tmp_path):
    """An exception between the gate's flock and the main lock's leaves the gate open in the Turns: release()
    lets it go (it used to return at once, the mode being unset) and records the hold."""
    import fcntl
    trace = str(tmp_path / "half.jsonl")
    lock = GpuLock("7", str(tmp_path), trace_path=trace)
    turns = lock.turns()
    turns._turn("exclusive", "timing: a round's windows")
    turns._gate = open(lock.gate_path, "a")
    fcntl.flock(turns._gate, fcntl.LOCK_EX)  # as if the main lock's flock had raised here
    turns.release()
    with open(lock.gate_path, "a") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again: raises BlockingIOError otherwise
    assert [r["why"] for r in read_trace(trace)] == ["timing: a round's windows"]


def test_the_report_says_how_many_shared_holders_overlapped():
    """Shared turns one after the other (a convoy) read x1 holders at once; two at the same time read x2."""
    def hold(pid, a, b, mode="shared"):
        return {"lock": "l", "pid": pid, "mode": mode, "why": "timing: a round's checks", "requested": a,
                "granted": a, "released": b}
    one_by_one = [hold(1, 0.0, 1.0), hold(2, 1.0, 2.0), hold(3, 2.0, 2.5, "exclusive"), hold(1, 2.5, 3.5)]
    together = [hold(1, 0.0, 1.0), hold(2, 0.0, 1.0), hold(3, 1.0, 1.5, "exclusive")]
    assert lock_report(one_by_one)["shared_overlap"] == pytest.approx(1.0)
    assert lock_report(together)["shared_overlap"] == pytest.approx(2.0)
    assert "x2.00 holders at once" in report_table(lock_report(together))
    assert lock_report([])["shared_overlap"] == 0.0
