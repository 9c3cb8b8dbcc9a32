"""Serving for the reward: batched scores equal single scores, and the preference over the task's
baseline fits compute_reward's ranker term."""
import json
import math

import pytest

from pipeline.core.config import RewardSection
from pipeline.ranker.base import ScoreInput
from pipeline.ranker.features import FeatureCache, source_key
from pipeline.ranker.serve import RankerService, preference_from_scores
from pipeline.core.records import Candidate, EvalResult
from pipeline.rl.reward import compute_reward


@pytest.fixture()
def service(tmp_path, synthetic, trained):
    # put the baseline features in the cache as nvcc would, so no compiler runs here
    cache = FeatureCache(tmp_path, workers=1)
    for im in synthetic.impls:
        key = source_key(im.code, im.format, "sm_90")
        path = tmp_path / key[:2] / f"{key}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(im.features))
    return RankerService(trained["gbt"][0], cache, max_batch=3)


def test_preference_is_bradley_terry_in_minus_one_to_one():
    assert preference_from_scores(1.0, 1.0) == 0.0
    assert preference_from_scores(3.0, 1.0) == pytest.approx(2 / (1 + math.exp(-2.0)) - 1)
    assert -1.0 <= preference_from_scores(-100.0, 100.0) <= -0.999


def test_batched_scores_equal_one_at_a_time(service, synthetic):
    inputs = [ScoreInput(synthetic.tasks[im.task_id], im.code, im.features) for im in synthetic.impls[:10]]
    batched = service.score_batch(inputs)  # max_batch=3: four batches
    assert batched == [service.ranker.score(*x) for x in inputs]


def test_preferences_for_results_feed_the_reward(service, synthetic):
    task = synthetic.tasks[synthetic.impls[0].task_id]
    mine = [im for im in synthetic.impls if im.task_id == task.id]
    naive = next(im for im in mine if im.strategy == "naive")
    fast = max(mine, key=lambda im: -im.times_ms["large"])
    cands = [Candidate(task_id=task.id, code=im.code, format="c2cuda") for im in (fast, naive, fast)]
    results = [EvalResult(task_id=task.id, candidate_hash="h", format="c2cuda", verdict="correct", speedup=2.0,
                          features={**fast.features, "roofline.fraction": 0.5}),
               EvalResult(task_id=task.id, candidate_hash="h", format="c2cuda", verdict="correct", speedup=1.0,
                          features=naive.features),
               EvalResult(task_id=task.id, candidate_hash="h", format="c2cuda", verdict="incorrect")]
    prefs = service.preferences_for_results(task, cands, results)
    assert prefs[2] is None
    assert prefs[1] == pytest.approx(0.0)  # the baseline against itself
    assert 0.0 < prefs[0] <= 1.0  # the fastest implementation is preferred to the naive one
    cfg = RewardSection(w_ranker=0.3)
    reward, terms = compute_reward(results[0], cfg, ranker_preference=prefs[0])
    assert terms["ranker"] == pytest.approx(0.3 * prefs[0])


def test_task_without_baseline_is_a_clear_error(service, synthetic):
    task = synthetic.tasks[synthetic.impls[0].task_id].model_copy(deep=True)
    task.implementations = [i for i in task.implementations if i.strategy != "naive"]
    with pytest.raises(ValueError, match="no implementation with strategy 'naive'"):
        service.preferences(task, [("x", {})])
