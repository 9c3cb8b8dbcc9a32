"""Benchmark arithmetic against numbers worked out by hand."""
import math

import pytest

from pipeline.scoring.metrics import (Outcome, fast_p, final_outcomes, geomean, pass_at_k, pass_at_ks, speedup_stats,
                                    summarize, turn_curves)


def o(task, sample, verdict, speedup=None, turn=0, **kw):
    executed = verdict in ("correct", "incorrect", "runtime_error", "timeout")
    return Outcome(task, sample, turn, verdict, speedup, compiled=executed or verdict == "not_executed",
                   executed=executed, **kw)


# Task A: correct at 2.0x, correct at 0.5x, incorrect. Task B: correct at 1.2x, not_executed.
SAMPLES = [o("A", 0, "correct", 2.0), o("A", 1, "correct", 0.5), o("A", 2, "incorrect"),
           o("B", 0, "correct", 1.2), o("B", 1, "not_executed")]


def test_geomean():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([]) is None
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])


def test_pass_at_k_hand_values():
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)      # 1 - C(3,2)/C(5,2)
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)   # 1 - C(7,5)/C(10,5)
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(3, 1, 3) == 1.0                            # fewer wrong samples than k
    with pytest.raises(ValueError):
        pass_at_k(2, 3, 1)


def test_fast_p_mean_and_best():
    assert fast_p(SAMPLES, 0.0) == pytest.approx((7 / 12, 1.0))   # A 2/3, B 1/2
    assert fast_p(SAMPLES, 1.0) == pytest.approx((5 / 12, 1.0))   # A 1/3 (2.0x), B 1/2 (1.2x)
    assert fast_p(SAMPLES, 1.5) == pytest.approx((1 / 6, 0.5))
    assert fast_p(SAMPLES, 2.0) == pytest.approx((0.0, 0.0))      # strictly above p


def test_not_executed_is_never_correct():
    only = [o("C", 0, "not_executed"), o("C", 1, "not_executed")]
    s = summarize(only)
    assert s["correct_rate"] == 0.0 and s["fast_p"]["0"] == 0.0 and s["pass_at_k"]["pass@2"] == 0.0
    assert s["compile_rate"] == 1.0 and s["execute_rate"] == 0.0


def test_speedups_and_summary():
    st = speedup_stats(SAMPLES)
    assert st["n"] == 3 and st["mean"] == pytest.approx(3.7 / 3) and st["geomean"] == pytest.approx(1.2 ** (1 / 3))
    s = summarize(SAMPLES)
    assert s["tasks"] == 2 and s["samples"] == 5
    assert s["verdicts"] == {"correct": 3, "incorrect": 1, "not_executed": 1}
    assert s["correct_rate"] == pytest.approx(0.6) and s["execute_rate"] == pytest.approx(0.8)
    assert s["fast_p_best"]["1.5"] == pytest.approx(0.5)
    # pass@1 = mean(2/3, 1/2); pass@2: A 1 - C(1,2)/C(3,2) = 1, B 1 - C(1,2)/C(2,2) = 1
    assert s["pass_at_k"] == pytest.approx({"pass@1": 7 / 12, "pass@2": 1.0})
    assert "speedup_compiled" not in s
    with_compiled = summarize([o("A", 0, "correct", 2.0, speedup_compiled=0.5)])
    assert with_compiled["speedup_compiled"]["geomean"] == pytest.approx(0.5)
    assert with_compiled["fast_p_compiled"]["0"] == 1.0 and with_compiled["fast_p_compiled"]["1"] == 0.0


def test_pass_at_ks_stops_at_the_fewest_samples():
    assert list(pass_at_ks(SAMPLES)) == ["pass@1", "pass@2"]
    three = [o("A", i, "correct" if i == 0 else "incorrect", 1.0) for i in range(3)]
    assert pass_at_ks(three) == pytest.approx({"pass@1": 1 / 3, "pass@2": 2 / 3, "pass@3": 1.0})


def test_turn_curves_keep_the_best_so_far():
    # sample 0: compile error, then correct 1.1x, then incorrect; sample 1: incorrect, correct 3x (stopped)
    episodes = [o("A", 0, "compile_error", turn=0), o("A", 0, "correct", 1.1, turn=1), o("A", 0, "incorrect", turn=2),
                o("A", 1, "incorrect", turn=0), o("A", 1, "correct", 3.0, turn=1)]
    curves = turn_curves(episodes)
    assert [c["turn"] for c in curves] == [1, 2, 3]
    assert [c["correct_rate"] for c in curves] == [0.0, 1.0, 1.0]
    assert [c["execute_rate"] for c in curves] == [0.5, 1.0, 1.0]
    assert curves[1]["fast_2"] == 0.5 and curves[2]["fast_1"] == 1.0
    assert curves[2]["geomean_speedup"] == pytest.approx(math.sqrt(1.1 * 3.0))
    assert [c["samples_with_this_turn"] for c in curves] == [2, 2, 1]
    final = {x.sample: x for x in final_outcomes(episodes)}
    assert final[0].turn == 1 and final[1].speedup == 3.0


def _arm(correct_by_task: dict[str, list[bool]]) -> list:
    return [Outcome(t, s, 0, "correct" if ok else "incorrect", 2.0 if ok else None, compiled=True, executed=True)
            for t, oks in correct_by_task.items() for s, ok in enumerate(oks)]


def _rate(outcomes):
    return sum(o.correct for o in outcomes) / len(outcomes)


def test_the_interval_over_tasks_collapses_when_every_task_is_alike_and_narrows_with_more_tasks():
    from pipeline.scoring.metrics import task_interval
    same = task_interval(_arm({f"t{i}": [True, False] for i in range(20)}), _rate, resamples=300)
    assert same == {"value": 0.5, "low": 0.5, "high": 0.5}  # a task's samples stay together
    few = task_interval(_arm({f"t{i}": [i % 2 == 0] * 4 for i in range(20)}), _rate, resamples=500)
    many = task_interval(_arm({f"t{i}": [i % 2 == 0] * 4 for i in range(200)}), _rate, resamples=500)
    assert few["low"] < 0.5 < few["high"] and many["low"] < 0.5 < many["high"]
    assert many["high"] - many["low"] < 0.5 * (few["high"] - few["low"])  # about 1/sqrt(10) as wide
    assert 0.2 < few["low"] and few["high"] < 0.8  # binomial over 20 tasks: about +-0.22


def test_a_paired_difference_draws_the_same_tasks_for_both_arms():
    from pipeline.scoring.metrics import paired_difference, task_interval
    # task difficulty varies a lot; arm a solves one more sample than arm b on every task
    a = _arm({f"t{i}": [k <= i % 4 for k in range(4)] for i in range(40)})
    b = _arm({f"t{i}": [k < i % 4 for k in range(4)] for i in range(40)})
    d = paired_difference(a, b, _rate, resamples=500)
    assert d["value"] == pytest.approx(0.25) and d["low"] == pytest.approx(0.25) and d["high"] == pytest.approx(0.25)
    assert d["tasks"] == 40
    unpaired = task_interval(a, _rate, resamples=500)
    assert unpaired["high"] - unpaired["low"] > 0.1  # alone, each arm's rate is uncertain
    assert paired_difference(a, a, _rate, resamples=50)["value"] == 0
    only_a = paired_difference(a, _arm({"elsewhere": [True]}), _rate, resamples=50)
    assert only_a == {"value": None, "low": None, "high": None, "tasks": 0}


def test_pareval_speedup_at_k_follows_its_own_arithmetic():
    from pipeline.scoring.metrics import pareval_speedup_at_k
    # three valid runtimes 1, 2, 4 s against a 8 s serial time: speedups 8, 4, 2
    assert pareval_speedup_at_k([4.0, 1.0, 2.0], 8.0, 1) == pytest.approx((8 + 4 + 2) / 3)  # the mean
    # k = 2: sorted ascending, weights C(j-1, 1) / C(3, 2) with ParEval's C(0, 1) = 1: 1/3, 1/3, 2/3
    assert pareval_speedup_at_k([1.0, 2.0, 4.0], 8.0, 2) == pytest.approx(8 / 3 + 4 / 3 + 2 * 2 / 3)
    # k = N = 3 and k = 5 > N: C(N, k) and every C(j-1, k-1) are 1, so the speedups add up
    assert pareval_speedup_at_k([1.0, 2.0, 4.0], 8.0, 3) == pytest.approx(8 + 4 + 2)
    assert pareval_speedup_at_k([1.0, 2.0, 4.0], 8.0, 5) == pytest.approx(8 + 4 + 2)
    assert pareval_speedup_at_k([], 8.0, 1) is None
    # efficiency: each runtime times its resources
    assert pareval_speedup_at_k([1.0, 2.0], 8.0, 1, [4.0, 4.0]) == pytest.approx((2 + 1) / 2)
    assert pareval_speedup_at_k([0.0], 1.0, 1) == pytest.approx(1e8)  # runtimes below 1e-8 count as 1e-8


def test_pareval_metrics_per_problem_type():
    from pipeline.scoring.metrics import ParEvalProblem, pareval_metrics
    problems = [ParEvalProblem("a", "scan", [True, False], [1.0, None], 4.0, 1024),
                ParEvalProblem("b", "scan", [False, False], [None, 3.0], 4.0, 1024),
                ParEvalProblem("c", "sort", [True, True], [2.0, 4.0], 8.0, 256)]
    m = pareval_metrics(problems, ks=(1, 2))
    assert m["scan"]["pass@1"] == pytest.approx((0.5 + 0.0) / 2) and m["scan"]["pass@2"] == pytest.approx(0.5)
    assert m["scan"]["speedup@1"] == pytest.approx(4.0)  # b has no valid sample: left out of the mean
    assert m["scan"]["efficiency@1"] == pytest.approx(4.0 / 1024)
    assert m["sort"]["speedup@1"] == pytest.approx((4 + 2) / 2) and m["sort"]["speedup@2"] == pytest.approx(4 + 2)
    assert m["all"]["problems"] == 3 and m["all"]["speedup@1"] == pytest.approx((4.0 + 3.0) / 2)
    assert m["all"]["pass@1"] == pytest.approx((0.5 + 0 + 1) / 3)
    none_valid = pareval_metrics([problems[1]], ks=(1,))
    assert none_valid["scan"]["speedup@1"] == 0.0 and none_valid["scan"]["pass@1"] == 0.0
    with pytest.raises(ValueError, match="validity flags"):
        pareval_metrics([ParEvalProblem("x", "t", [True], [], 1.0, 1)])
