"""The one interface every ranker has: `score(task, code, features) -> float`, higher = faster.

A ranker scores one implementation of one task at a time; only differences of scores within a
task mean anything (P(a faster than b) = sigmoid(score_a - score_b) for the trained rankers,
which are fitted with a pairwise logistic, i.e. Bradley-Terry, loss). `features` is the
evaluator's features dict; only its allow-listed keys are read (pipeline/ranker/features.py).
Subclasses implement `_score(X, codes)` on a feature matrix and the codes, and `fit`.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from pipeline.ranker.features import feature_vector, task_features


class ScoreInput(NamedTuple):
    task: object  # pipeline.core.records.Task
    code: str
    features: dict


class Ranker(ABC):
    kind = ""

    def score(self, task, code: str, features: dict) -> float:
        """The score of one implementation (higher = predicted faster)."""
        return float(self.score_batch([ScoreInput(task, code, features)])[0])

    def score_batch(self, inputs: Sequence[ScoreInput]) -> np.ndarray:
        """Scores of many implementations at once (any tasks), in order."""
        if not inputs:
            return np.zeros(0)
        per_task: dict[str, dict] = {}
        rows = []
        for inp in inputs:
            tid = inp.task.id
            if tid not in per_task:
                per_task[tid] = task_features(inp.task)
            rows.append(feature_vector(inp.features, per_task[tid]))
        return self._score(np.vstack(rows), [inp.code for inp in inputs])

    def score_data(self, data) -> np.ndarray:
        """Scores of every implementation of a RankData, in order."""
        return self._score(data.vectors(), [im.code for im in data.impls])

    @abstractmethod
    def _score(self, X: np.ndarray, codes: list[str]) -> np.ndarray:
        """Scores of the rows of the feature matrix `X` (with their codes), in order."""

    @abstractmethod
    def fit(self, data, pairs) -> dict:
        """Train on `pairs` over `data.impls`; returns training metrics."""

    def save_files(self, directory: Path) -> dict:
        """Write the model's files into `directory`; returns its settings for the manifest. Only
        trained rankers (gbt, neural) have files; a heuristic has nothing to save."""
        raise NotImplementedError(f"a {self.kind or type(self).__name__} ranker has no files to save")

    @classmethod
    def load_files(cls, directory: Path, settings: dict) -> "Ranker":
        """The ranker saved in `directory` by `save_files`."""
        raise NotImplementedError(f"a {cls.kind or cls.__name__} ranker has no files to load")


def pair_accuracy(scores: np.ndarray, faster: np.ndarray, slower: np.ndarray) -> float:
    """Share of pairs ordered right (ties count one half)."""
    if len(faster) == 0:
        return float("nan")
    d = scores[faster] - scores[slower]
    return float(np.mean((d > 0) + 0.5 * (d == 0)))
