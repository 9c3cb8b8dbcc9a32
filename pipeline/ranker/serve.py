"""Serving the ranker to the reward: batched scores and the preference over a task's baseline.

In: a trained ranker (or a checkpoint path), tasks, and candidates with their evaluator features
(`EvalResult.features`; only the allow-listed pre-run keys are read, so `roofline.fraction`,
which a correct result carries, has no effect). Out: scores, and per candidate the ranker term's
input of pipeline/rl/reward.py: `preference = 2 * P(candidate faster than baseline) - 1` in
[-1, 1], with P = sigmoid(score(candidate) - score(baseline)) (the Bradley-Terry reading of the
pairwise scores). The baseline is the task's naive implementation (`Task.baseline()`); its
features are computed here once per task (nvcc and the static analysis, through the feature
cache) and its score is cached.

Usage (the driver, or actors/rankers.py on a CPU node):
    service = RankerService.from_checkpoint(cfg.ranker.checkpoint, cfg.ranker, cfg.compile)
    prefs = service.preferences_for_results(task, candidates, results)   # None where not correct
    reward, terms = compute_reward(result, cfg.reward, ranker_preference=pref)
"""
from __future__ import annotations

import math
from collections.abc import Sequence


from pipeline.ranker.base import Ranker, ScoreInput
from pipeline.ranker.features import FeatureCache


def preference_from_scores(candidate: float, baseline: float) -> float:
    """2 * sigmoid(candidate - baseline) - 1 = tanh((candidate - baseline) / 2), in [-1, 1]."""
    return math.tanh((candidate - baseline) / 2.0)


class RankerService:
    """Batched in-process scoring and baseline preferences; one per process (the ranker actor owns one)."""

    def __init__(self, ranker: Ranker, feature_cache: FeatureCache, max_batch: int = 512, manifest: dict | None = None):
        self.ranker, self.cache, self.max_batch = ranker, feature_cache, max_batch
        self.manifest = manifest or {}
        self._baseline: dict[str, float] = {}

    @classmethod
    def from_checkpoint(cls, path: str, ranker_cfg, compile_cfg) -> "RankerService":
        """Load the checkpoint `path` with the ranker and compile settings of the run config."""
        from pipeline.ranker.checkpoint import load_ranker
        ranker, manifest = load_ranker(path, ranker_cfg.feature_cache_dir)
        cache = FeatureCache(ranker_cfg.feature_cache_dir, compile_cfg.arch, compile_cfg.nvcc,
                             ranker_cfg.feature_workers)
        return cls(ranker, cache, manifest=manifest)

    def score_batch(self, inputs: Sequence[ScoreInput]) -> list[float]:
        """Scores of (task, code, features) triples, computed `max_batch` at a time."""
        out: list[float] = []
        for b in range(0, len(inputs), self.max_batch):
            out += [float(x) for x in self.ranker.score_batch(inputs[b:b + self.max_batch])]
        return out

    def baseline_score(self, task) -> float:
        """The score of the task's naive implementation (computed once per task content)."""
        key = f"{task.id}\0{task.content_hash()}"
        if key not in self._baseline:
            base = task.baseline()
            if base is None:
                raise ValueError(f"task {task.id} has no implementation with strategy 'naive'; the ranker term "
                                 "compares against it: add one or set reward.w_ranker=0")
            feats = self.cache.get_many([(base.code, base.format)])[0]
            self._baseline[key] = self.score_batch([ScoreInput(task, base.code, feats)])[0]
        return self._baseline[key]

    def preferences(self, task, items: Sequence[tuple[str, dict]]) -> list[float]:
        """Preference in [-1, 1] of each (code, features) of `task` over the task's baseline."""
        base = self.baseline_score(task)
        scores = self.score_batch([ScoreInput(task, code, feats) for code, feats in items])
        return [preference_from_scores(s, base) for s in scores]

    def preferences_for_results(self, task, candidates: Sequence, results: Sequence) -> list[float | None]:
        """The reward's `ranker_preference` for each (Candidate, EvalResult) of one task: a number for
        correct results, None for the rest (compute_reward reads it only for correct ones)."""
        if len(candidates) != len(results):
            raise ValueError(f"{len(candidates)} candidates but {len(results)} results for task {task.id}")
        idx = [i for i, r in enumerate(results) if r.verdict == "correct"]
        prefs = self.preferences(task, [(candidates[i].code, results[i].features) for i in idx]) if idx else []
        out: list[float | None] = [None] * len(results)
        for i, p in zip(idx, prefs):
            out[i] = p
        return out
