"""benchmarks/experiments/second_turn_cpu.py: turn 1 against turn 2 over the samples that have both."""
import pytest


def test_second_turn_pairs_each_samples_two_turns(benchmark_script):
    second = benchmark_script("experiments.second_turn_cpu").second_turn
    rows = [{"task": "a", "sample": 0, "turn": 0, "verdict": "format_error"},
            {"task": "a", "sample": 0, "turn": 1, "verdict": "not_executed"},
            {"task": "a", "sample": 1, "turn": 0, "verdict": "not_executed"},
            {"task": "a", "sample": 1, "turn": 1, "verdict": "compile_error"},
            {"task": "b", "sample": 0, "turn": 0, "verdict": "not_executed"},
            {"task": "b", "sample": 0, "turn": 1, "verdict": "not_executed"},
            {"task": "b", "sample": 1, "turn": 0, "verdict": "compile_error"}]  # one turn only: left out
    out = second(rows)
    assert out["samples_with_two_turns"] == 3
    assert out["turn1_compiled"]["mean"] == pytest.approx(2 / 3) and out["turn2_compiled"]["mean"] == pytest.approx(2 / 3)
    assert out["turn2_compiled_after_turn1_failed"]["mean"] == 1.0 and out["turn2_compiled_after_turn1_failed"]["n"] == 1
    assert out["turn2_compiled_after_turn1_compiled"]["mean"] == 0.5
    assert out["turn2_verdicts"] == {"compile_error": 1, "not_executed": 2}
