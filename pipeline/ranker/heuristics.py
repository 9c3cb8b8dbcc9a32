"""Simple rules the learned rankers must beat, behind the same `score(task, code, features)` interface.

- `occupancy`: higher theoretical occupancy wins (`occ.occupancy`, traffic-weighted over kernels).
- `transactions`: fewer global memory transactions win: the expected 32-byte sectors per warp
  access from the traffic-weighted access classes of the static analysis (coalesced 4,
  broadcast 1, strided and indirect 32, unknown 16; a vector access moves its data in a quarter
  of the instructions, so its share counts 4x less).
- `coalescing`: better coalescing wins (`struct.coalescing`, the access quality of score.py).
- `struct_score`: the project's structural score (score.py's weighted mean of the components),
  recomputed from the allow-listed components, i.e. without the roofline term.
Each reads the allow-listed feature vector only; a missing feature scores lowest.
"""
from __future__ import annotations

import numpy as np

from pipeline.ranker.base import Ranker
from pipeline.ranker.features import FEATURE_NAMES

_IX = {n: i for i, n in enumerate(FEATURE_NAMES)}
SECTORS = {"coalesced": 4.0, "broadcast": 1.0, "strided": 32.0, "indirect": 32.0, "unknown": 16.0}
COMPONENTS = ("coalescing", "vectorization", "bank_conflicts", "sync_safety", "atomics", "occupancy", "spills")


def _col(X: np.ndarray, name: str) -> np.ndarray:
    return X[:, _IX[name]]


def occupancy_rule(X: np.ndarray) -> np.ndarray:
    return np.nan_to_num(_col(X, "occ.occupancy"), nan=-1.0)


def transactions_rule(X: np.ndarray) -> np.ndarray:
    sectors = sum(np.nan_to_num(_col(X, f"static.frac_{c}")) * v for c, v in SECTORS.items())
    vec = np.nan_to_num(_col(X, "static.frac_vector"))
    cost = sectors * (1.0 - 0.75 * vec)
    has = _col(X, "static.has_global_accesses") > 0
    return np.where(has, -cost, -1e9)


def coalescing_rule(X: np.ndarray) -> np.ndarray:
    return np.nan_to_num(_col(X, "struct.coalescing"), nan=-1.0)


def struct_score_rule(X: np.ndarray) -> np.ndarray:
    from pipeline.structure.score import ScoreWeights
    w = ScoreWeights()
    num = np.zeros(len(X))
    den = np.zeros(len(X))
    for c in COMPONENTS:
        v = _col(X, f"struct.{c}")
        present = ~np.isnan(v)
        num += np.where(present, getattr(w, c) * np.nan_to_num(v), 0.0)
        den += np.where(present, getattr(w, c), 0.0)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.5)


RULES = {"occupancy": occupancy_rule, "transactions": transactions_rule, "coalescing": coalescing_rule,
         "struct_score": struct_score_rule}


class HeuristicRanker(Ranker):
    kind = "heuristic"

    def __init__(self, rule: str):
        if rule not in RULES:
            raise ValueError(f"heuristic '{rule}' is not known: use one of {', '.join(RULES)}")
        self.rule = rule

    def _score(self, X: np.ndarray, codes: list[str]) -> np.ndarray:
        return RULES[self.rule](X).astype(np.float64)

    def fit(self, data, pairs) -> dict:
        return {}
