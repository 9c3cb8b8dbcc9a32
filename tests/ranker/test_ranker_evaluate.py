"""Evaluation metrics against hand-computed values."""
import math

import numpy as np
import pytest

from pipeline.ranker.dataset import Impl, RankData
from pipeline.ranker.evaluate import evaluate_scores, kendall_tau_b, merge_folds, report_markdown
from pipeline.ranker.pairs import make_pairs


def test_kendall_tau_by_hand():
    # (1,2,3,4) vs (1,3,2,4): 5 concordant, 1 discordant pair -> (5 - 1) / 6
    assert kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    assert kendall_tau_b([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # a tie in x: pairs (0,1) tied in x only, (0,2) and (1,2) concordant: 2 / sqrt(3 * 2)
    assert kendall_tau_b([1, 1, 2], [1, 2, 3]) == pytest.approx(2 / math.sqrt(6))
    assert math.isnan(kendall_tau_b([1, 1, 1], [1, 2, 3]))


def _data():
    def impl(task, name, strategy, t):
        return Impl(task, "f", "test", "c2cuda", name, strategy, "c2cuda", "", {}, {"c": t})
    return RankData([impl("a", "n", "naive", 10.0), impl("a", "s1", "tiled", 6.0), impl("a", "s2", "tiled", 2.0),
                     impl("b", "n", "naive", 3.0), impl("b", "v", "vec", 2.2)], {})


def test_accuracy_by_bucket_and_kind_by_hand():
    data = _data()
    pairs = make_pairs(data, 1.2)
    # pairs: a: s1>n 1.67x strategy, s2>n 5x strategy, s2>s1 3x variant; b: v>n 1.36x strategy
    scores = np.array([0.0, 1.0, 0.5, 2.0, 2.0])  # s1>n right, s2>n right, s2>s1 wrong, b tie
    m = evaluate_scores(data, pairs, scores)
    assert m["pairs"] == 4
    assert m["accuracy"] == pytest.approx((1 + 1 + 0 + 0.5) / 4)
    assert m["buckets"]["strategy"]["1.2-1.5x"] == {"n": 1, "accuracy": 0.5}
    assert m["buckets"]["strategy"]["1.5-2x"] == {"n": 1, "accuracy": 1.0}
    assert m["buckets"]["strategy"]["2x+"] == {"n": 1, "accuracy": 1.0}
    assert m["buckets"]["variant"]["2x+"] == {"n": 1, "accuracy": 0.0}
    assert m["buckets"]["variant"]["1.2-1.5x"] == {"n": 0, "accuracy": None}
    assert m["gap_ge_1.5"]["all"] == {"n": 3, "accuracy": pytest.approx(2 / 3)}
    # tau within task a: scores (0, 1, .5) vs speed (-10, -6, -2): concordant (n,s1), (n,s2), discordant (s1,s2)
    # -> 1/3; task b: all scores tied -> 0 by convention; mean 1/6
    assert m["kendall_tau"] == pytest.approx(1 / 6)
    assert m["tau_groups"] == 2
    text = report_markdown({"r": m}, "t")
    assert "| r | 4 | 62.5% (4) | 66.7% (3) |" in text


def test_merge_folds_pools_by_counts():
    data = _data()
    pairs = make_pairs(data, 1.2)
    m1 = evaluate_scores(data, pairs, np.array([0.0, 1.0, 2.0, 0.0, 1.0]))  # all right
    m2 = evaluate_scores(data, pairs[:1], np.array([1.0, 2.0, 0.0, 0.0, 1.0]))  # one pair (s2 > s1), wrong
    pooled = merge_folds([m1, m2])
    assert pooled["pairs"] == 5
    assert pooled["accuracy"] == pytest.approx(4 / 5)
    assert pooled["tau_groups"] == 4
