"""benchmarks/lock_replay.py: a lock trace replayed through a lock's policy on the CPU."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import lock_replay  # noqa: E402

def convoy_trace(evaluators: int = 3, rounds: int = 6, window_s: float = 0.01, checks_s: float = 0.03) -> list:
    """Holds as the convoy gave them: every evaluator's window, then its checks, one evaluator after the other;
    each evaluator also starts a warm child (shared) in another thread after its second round."""
    out, t = [], 100.0
    ends = {}
    for k in range(rounds):
        for pid in range(evaluators):
            requested = ends.get(pid, 100.0)
            out.append({"lock": "l", "pid": pid, "mode": "exclusive", "why": "timing: a round's windows",
                        "requested": requested, "granted": t, "released": t + window_s})
            out.append({"lock": "l", "pid": pid, "mode": "shared", "why": "timing: a round's checks",
                        "requested": t + window_s, "granted": t + window_s, "released": t + window_s + checks_s})
            if k == 1:
                out.append({"lock": "l", "pid": pid, "mode": "shared", "why": "a child's warm start",
                            "requested": t + window_s + 0.001, "granted": t + window_s + 0.001,
                            "released": t + window_s + 0.021})
            t += window_s + checks_s
            ends[pid] = t
    return out


def test_lanes_follow_the_thread_that_held_the_lock():
    records = convoy_trace(evaluators=2, rounds=3)
    found = lock_replay.lanes(records)
    assert sorted(found) == [(0, "main", 0), (0, "warm", 0), (1, "main", 0), (1, "warm", 0)]
    assert [r["why"] for r in found[(0, "main", 0)]].count("timing: a round's windows") == 3
    assert lock_replay.lane_of("a candidate's load") == "load" and lock_replay.lane_of("group: its buffers") == "main"


def test_a_convoy_is_undone_by_this_lock(tmp_path):
    """The trace of a convoy (each timer waited out the checks of the one before): replayed through this
    checkout's lock, the timers go first and the checks overlap, in well under the trace's span."""
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in convoy_trace()))
    out = tmp_path / "r.json"
    assert lock_replay.main([str(trace), "--scale", "1", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    now = result["policies"]["this checkout"]
    assert now["span_s"] < 0.8 * result["trace_span_s"], "the timers did not go first"
    assert now["exclusive_s"] == pytest.approx(result["trace_exclusive_s"], rel=0.5)


def test_an_empty_trace_is_one_clear_error(tmp_path, capsys):
    (tmp_path / "e.jsonl").write_text("")
    assert lock_replay.main([str(tmp_path / "e.jsonl")]) == 2
    assert "eval.lock_trace_path" in capsys.readouterr().err
