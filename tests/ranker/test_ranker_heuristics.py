"""The heuristics read the allow-listed features and order simple cases the way their rule says."""
import numpy as np
import pytest

from pipeline.ranker.base import ScoreInput
from pipeline.ranker.heuristics import HeuristicRanker

from _synthetic import make_task

TASK = make_task("c2cuda/h/t", "h", [])


def _score(rule, *feature_dicts):
    return HeuristicRanker(rule).score_batch([ScoreInput(TASK, "", f) for f in feature_dicts])


def test_higher_occupancy_wins_and_missing_scores_lowest():
    s = _score("occupancy", {"occ.occupancy": 0.25}, {"occ.occupancy": 1.0}, {})
    assert s[1] > s[0] > s[2]


def test_fewer_transactions_win():
    coalesced = {"static.has_global_accesses": True, "static.frac_coalesced": 1.0}
    strided = {"static.has_global_accesses": True, "static.frac_coalesced": 0.5, "static.frac_strided": 0.5}
    vector = {**coalesced, "static.frac_vector": 1.0}
    s = _score("transactions", strided, coalesced, vector)
    assert s[0] == pytest.approx(-18.0)  # half 4 sectors, half 32
    assert s[1] == pytest.approx(-4.0)
    assert s[2] == pytest.approx(-1.0)  # vector accesses: a quarter of the requests


def test_struct_score_is_the_weighted_mean_without_roofline():
    feats = {"struct.coalescing": 1.0, "struct.occupancy": 0.0, "roofline.fraction": 1.0, "struct.roofline": 1.0}
    # weights 0.35 (coalescing) and 0.20 (occupancy); the roofline component is not read
    assert _score("struct_score", feats)[0] == pytest.approx(0.35 / 0.55)
    assert _score("struct_score", {})[0] == 0.5


def test_unknown_heuristic_is_refused():
    with pytest.raises(ValueError, match="occupancy"):
        HeuristicRanker("speed")


def test_heuristics_alone_do_not_solve_the_synthetic_rule(synthetic, trained):
    from pipeline.ranker.fit import evaluate_rankers
    results = evaluate_rankers(synthetic, {}, 1.2)
    accs = {n: m["accuracy"] for n, m in results.items()}
    assert set(accs) == {"heuristic:occupancy", "heuristic:transactions", "heuristic:coalescing",
                         "heuristic:struct_score"}
    assert all(0.3 < a < 0.9 for a in accs.values()), accs
    assert np.isfinite(list(accs.values())).all()
