"""Gradient-boosted trees with a pairwise logistic objective (RankNet loss on trees), via LightGBM.

In: a `RankData` and its `Pair`s. Out: a per-implementation score f(x) over the feature vector,
trained so that sigmoid(f(faster) - f(slower)) is high: the loss is log(1 + exp(-(f_a - f_b)))
summed over exactly the pairs given (those beyond the noise threshold), with its gradient and
hessian handed to LightGBM as a custom objective. LightGBM's own lambdarank objective would need
integer relevance labels per query and would also learn from pairs inside the noise band, so
the pairwise loss is written here. Trees read only the allow-listed pre-run features, never code.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from pipeline.ranker.base import Ranker, pair_accuracy
from pipeline.ranker.features import FEATURE_NAMES
from pipeline.ranker.pairs import pair_arrays


def _lgb():
    try:
        import lightgbm
    except ImportError:
        raise RuntimeError("the gbt ranker needs lightgbm: pip install -e '.[ranker]' (or install.sh)") from None
    return lightgbm


def pairwise_logistic_grad(preds: np.ndarray, faster: np.ndarray, slower: np.ndarray,
                           weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Gradient and hessian per item of sum_pairs w * log(1 + exp(-(s_faster - s_slower)))."""
    d = preds[faster] - preds[slower]
    p_wrong = 1.0 / (1.0 + np.exp(np.clip(d, -50, 50)))  # sigmoid(-d)
    w = np.ones_like(d) if weights is None else weights
    grad = np.zeros_like(preds)
    hess = np.zeros_like(preds)
    np.add.at(grad, faster, -w * p_wrong)
    np.add.at(grad, slower, w * p_wrong)
    h = w * p_wrong * (1.0 - p_wrong)
    np.add.at(hess, faster, h)
    np.add.at(hess, slower, h)
    return grad, hess + 1e-9


class GBTRanker(Ranker):
    kind = "gbt"

    def __init__(self, trees: int = 800, learning_rate: float = 0.05, leaves: int = 4, min_data_in_leaf: int = 5,
                 feature_fraction: float = 0.8, seed: int = 0, threads: int = 2):
        self.settings = dict(trees=trees, learning_rate=learning_rate, leaves=leaves,
                             min_data_in_leaf=min_data_in_leaf, feature_fraction=feature_fraction, seed=seed,
                             threads=threads)
        self.booster = None

    def fit(self, data, pairs) -> dict:
        if not pairs:
            raise ValueError("no training pairs: lower ranker.min_gap or add measured implementations")
        lgb = _lgb()
        faster, slower, _ = pair_arrays(pairs)
        used = np.unique(np.concatenate([faster, slower]))  # impls in no pair carry no gradient
        remap = np.full(len(data.impls), -1)
        remap[used] = np.arange(len(used))
        f, s = remap[faster], remap[slower]
        X = data.vectors()[used]
        s_ = self.settings

        def objective(preds, _dataset):
            return pairwise_logistic_grad(preds, f, s)
        params = {"objective": objective, "learning_rate": s_["learning_rate"], "num_leaves": s_["leaves"],
                  "min_data_in_leaf": s_["min_data_in_leaf"], "min_sum_hessian_in_leaf": 1e-4,
                  "feature_fraction": s_["feature_fraction"], "seed": s_["seed"], "num_threads": s_["threads"],
                  "deterministic": True, "force_row_wise": True, "verbose": -1}
        names = [re.sub(r"[^0-9A-Za-z_]", "_", n) for n in FEATURE_NAMES]
        ds = lgb.Dataset(X, label=np.zeros(len(X)), feature_name=names, free_raw_data=False)
        self.booster = lgb.train(params, ds, num_boost_round=s_["trees"])
        return {"train_pairs": len(pairs), "train_accuracy": pair_accuracy(self.booster.predict(X), f, s)}

    def _score(self, X: np.ndarray, codes: list[str]) -> np.ndarray:
        if self.booster is None:
            raise RuntimeError("GBTRanker.score before fit or load")
        return np.asarray(self.booster.predict(X), dtype=np.float64)

    def feature_importance(self) -> dict[str, float]:
        gain = self.booster.feature_importance(importance_type="gain")
        return {n: float(g) for n, g in sorted(zip(FEATURE_NAMES, gain), key=lambda x: -x[1]) if g > 0}

    def save_files(self, directory: Path) -> dict:
        self.booster.save_model(str(directory / "model.txt"))
        return dict(self.settings)

    @classmethod
    def load_files(cls, directory: Path, settings: dict) -> "GBTRanker":
        r = cls(**settings)
        r.booster = _lgb().Booster(model_file=str(directory / "model.txt"))
        return r
