"""What one warp's access does: per-lane addresses, 32-byte sectors, shared-memory bank conflicts.

In: the symbolic byte offset of an access (`symbolic.Val`) and its element size. Out: a
`LanePattern`: the coalescing class, the sectors one warp request touches, the tx stride (for
messages) and, when every lane term has a numeric coefficient, the per-lane offsets, from which
`bank_conflict_ways` counts the worst number of distinct 4-byte words one bank must serve.

How: the offset is a polynomial whose lane-varying part is a sum of coefficient x lane atom
('tx', 'tx*k//c', 'tx*k%c', see `symbolic`). Lanes t = 0..31 are evaluated; terms with a
symbolic coefficient (a row width `K`, a runtime stride) split the lanes into groups that are
assumed to lie in different sectors (at least 32 bytes apart); the lowest address is taken as
sector-aligned. Classes: 'broadcast' (all lanes one address), 'coalesced' (no more sectors than
32 contiguous elements need: 4 for 4-byte elements, 16 for float4), 'strided' (more),
'indirect' (the lane-varying part was loaded from memory), 'unknown' (not modelled, e.g. tx*tx).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import floor

from pipeline.structure.symbolic import LANE, Poly, Val, atom_value, lane_terms

WARP = 32
SECTOR_BYTES = 32


def ideal_sectors(elem_bytes: int) -> int:
    """Sectors 32 lanes need for 32 contiguous elements."""
    return max(1, -(-WARP * elem_bytes // SECTOR_BYTES))


@dataclass
class LanePattern:
    klass: str  # coalesced | strided | broadcast | indirect | unknown
    sectors: float | None  # 32-byte sectors touched by one warp request (None: unknown)
    stride_bytes: Fraction | Poly | None  # tx stride for messages (bytes)
    offsets: list[Fraction] | None  # per-lane byte offsets when all lane coefficients are numbers

    def efficiency(self, elem_bytes: int) -> float | None:
        """Useful / fetched bytes for one request: ideal sectors / sectors (1 for broadcast)."""
        if self.klass == "broadcast":
            return 1.0
        if self.sectors is None:
            return None
        return min(1.0, ideal_sectors(elem_bytes) / self.sectors)


def lane_pattern(v: Val, elem_bytes: int) -> LanePattern:
    """Coalescing class and sectors of a warp's access at byte offset `v`."""
    if v.poly is None:
        return LanePattern("indirect" if v.indirect else "unknown", WARP if v.indirect else None, None, None)
    terms = lane_terms(v.poly)
    if terms is None:
        return LanePattern("unknown", None, None, None)
    if not terms:
        return LanePattern("broadcast", 1.0, Fraction(0), [Fraction(0)] * WARP)
    numeric = {a: c.constant() for a, c in terms.items() if c.constant() is not None}
    symbolic = {a: c for a, c in terms.items() if c.constant() is None}
    offsets = [sum((c * atom_value(a, t) for a, c in numeric.items()), Fraction(0)) for t in range(WARP)]
    keys = [tuple(atom_value(a, t) for a in sorted(symbolic)) for t in range(WARP)]
    groups: dict[tuple, set] = {}
    low = min(offsets)  # the lowest address of the request is taken as sector-aligned
    for t in range(WARP):
        start = offsets[t] - low
        first, last = floor(start / SECTOR_BYTES), floor((start + elem_bytes - 1) / SECTOR_BYTES)
        groups.setdefault(keys[t], set()).update(range(first, last + 1))
    sectors = float(sum(len(s) for s in groups.values()))
    if len(groups) == 1 and len(set(offsets)) == 1:
        return LanePattern("broadcast", 1.0, Fraction(0), offsets if not symbolic else None)
    klass = "coalesced" if sectors <= ideal_sectors(elem_bytes) else "strided"
    return LanePattern(klass, sectors, _stride(terms), None if symbolic else offsets)


def _stride(terms: dict[str, Poly]) -> Fraction | Poly:
    """The coefficient that explains the stride: tx's, else a symbolic one, else the largest."""
    if LANE in terms:
        c = terms[LANE]
        return c.constant() if c.constant() is not None else c
    sym = [c for c in terms.values() if c.constant() is None]
    if sym:
        return sym[0]
    return max((c.constant() for c in terms.values()), key=abs)


def bank_conflict_ways(offsets: list[Fraction], width: int) -> int:
    """Worst number of distinct 4-byte words one of the 32 banks serves for this warp access.

    8-byte accesses are served a half-warp at a time and 16-byte ones a quarter-warp at a
    time, so only lanes of the same phase compete.
    """
    per_phase = WARP if width <= 4 else max(1, 128 // width)
    words_per_lane = max(1, width // 4)
    worst = 1
    for phase in range(0, WARP, per_phase):
        banks: dict[int, set] = {}
        for t in range(phase, phase + per_phase):
            first = floor(offsets[t] / 4)
            for w in range(words_per_lane):
                banks.setdefault((first + w) % 32, set()).add(first + w)
        worst = max(worst, max(len(s) for s in banks.values()))
    return worst
