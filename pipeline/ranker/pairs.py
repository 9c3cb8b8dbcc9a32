"""Training and evaluation pairs: two implementations of one task, on one configuration, one clearly faster.

In: a `RankData` (implementations with measured times per configuration) and the noise
threshold `min_gap` (slower time / faster time; 1.2 by default, from `ranker.min_gap`).
Out: `Pair`s (indices into `data.impls`) with the gap and a tag: `strategy` when the two carry
different strategy labels (e.g. tiled_shared vs naive), `variant` when they are parameter
variants of one strategy: the same label, or the same code up to its numbers and comments (two tile
sizes, block sizes or unroll factors of one kernel, whatever their labels say). Pairs closer than `min_gap` are dropped: within
measurement noise their order is a coin toss, and training on it teaches nothing.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from pipeline.ranker.dataset import RankData

GAP_BUCKETS = ((1.2, 1.5), (1.5, 2.0), (2.0, float("inf")))
"""Gap buckets of the evaluation report: [low, high)."""


_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_NUMBER = re.compile(r"(?<![A-Za-z_0-9])(?:0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)[fFuUlL]*")


@lru_cache(maxsize=65536)
def code_skeleton(code: str) -> str:
    """The code without comments, every number replaced by '#', whitespace collapsed: two
    implementations with one skeleton differ only in parameters (tile, block size, unroll factor)."""
    return " ".join(_NUMBER.sub("#", _COMMENT.sub(" ", code)).split())


def is_variant(a, b) -> bool:
    """Two implementations of one task are parameter variants of one strategy."""
    return a.strategy == b.strategy or code_skeleton(a.code) == code_skeleton(b.code) != ""


@dataclass(frozen=True)
class Pair:
    task_id: str
    config: str
    faster: int  # index into RankData.impls
    slower: int
    gap: float  # slower time / faster time, >= min_gap
    kind: str  # 'strategy' | 'variant'


def make_pairs(data: RankData, min_gap: float = 1.2) -> list[Pair]:
    """Every pair of implementations of the same task and configuration whose times differ by at least `min_gap`x."""
    if min_gap < 1.0:
        raise ValueError(f"min_gap {min_gap} must be >= 1 (a ratio slower / faster)")
    groups: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for i, im in enumerate(data.impls):
        for config, t in im.times_ms.items():
            groups.setdefault((im.task_id, config), []).append((i, t))
    pairs = []
    for (task_id, config), members in sorted(groups.items()):
        members.sort(key=lambda m: (m[1], data.impls[m[0]].name))
        for a in range(len(members)):
            for b in range(a + 1, len(members)):
                (fi, ft), (si, st) = members[a], members[b]
                gap = st / ft
                if gap >= min_gap:
                    kind = "variant" if is_variant(data.impls[fi], data.impls[si]) else "strategy"
                    pairs.append(Pair(task_id, config, fi, si, gap, kind))
    return pairs


def pair_arrays(pairs: list[Pair]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(faster indices, slower indices, gaps) as arrays."""
    return (np.array([p.faster for p in pairs], dtype=np.int64), np.array([p.slower for p in pairs], dtype=np.int64),
            np.array([p.gap for p in pairs], dtype=np.float64))
