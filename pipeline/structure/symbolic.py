"""Symbolic values of index expressions: polynomials over named symbols, with threadIdx.x as 'tx'.

In: nothing but Python numbers and names. Out: `Poly` (exact rational polynomial over symbols)
and `Val` (a Poly, or None for "varies across the lanes of a warp in a way we do not model",
plus an `indirect` flag for values that come from a memory load), and the arithmetic the
access analysis needs: +, -, *, division and modulo with the warp-level approximations below,
shifts, masks, opaque functions and the join of two values at control-flow merges.

Conventions:
- 'tx', 'ty', 'tz' stand for threadIdx.x/y/z. Lanes of a warp are 32 consecutive values of
  threadIdx.x (blockDim.x a multiple of 32 assumed); 'ty', 'tz' are uniform within a warp.
- Lane atoms are the symbols that vary across a warp: 'tx' (lane t), 'tx*k//c' (floor(k t / c))
  and 'tx*k%c' ((k t) mod c), made by `/` and `%` of k*tx by a constant c; the uniform rest of
  the dividend is assumed to be a multiple of c (aligned warps), as it is for
  blockIdx.x*blockDim.x. `(k*tx + r) / c` with 32k <= c is warp-uniform; `x % c` with c a
  multiple of 32k keeps k*tx (no wrap inside an aligned warp); `x % n` for a symbolic n keeps
  x's lane terms (the wrap is assumed rare).
- A symbol starting with '~' varies between threads of a block but not within a warp (e.g.
  `threadIdx.x / 32`, threadIdx.y): it matters for barrier divergence, not for coalescing.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

LANE = "tx"
THREAD_SYMBOLS = ("tx", "ty", "tz")


def is_lane(symbol: str) -> bool:
    """Does this symbol vary across the lanes of a warp?"""
    return symbol == LANE or symbol.startswith("tx*")


def atom_value(symbol: str, t: int) -> int:
    """Value of a lane atom in lane t (0..31)."""
    if symbol == LANE:
        return t
    k, _, rest = symbol[3:].partition("//")
    if rest:
        return int(k) * t // int(rest)
    k, _, c = symbol[3:].partition("%")
    return int(k) * t % int(c)
Mono = tuple  # sorted tuple of symbol names; a power repeats the name


class Poly:
    """An exact polynomial: {monomial: coefficient}, monomials as sorted tuples of names."""
    __slots__ = ("terms",)

    def __init__(self, terms: dict | None = None):
        self.terms = {m: Fraction(c) for m, c in (terms or {}).items() if c != 0}

    @staticmethod
    def const(c) -> "Poly":
        return Poly({(): Fraction(c)})

    @staticmethod
    def sym(name: str) -> "Poly":
        return Poly({(name,): Fraction(1)})

    def __add__(self, o: "Poly") -> "Poly":
        t = dict(self.terms)
        for m, c in o.terms.items():
            t[m] = t.get(m, 0) + c
        return Poly(t)

    def __neg__(self) -> "Poly":
        return Poly({m: -c for m, c in self.terms.items()})

    def __sub__(self, o: "Poly") -> "Poly":
        return self + (-o)

    def __mul__(self, o: "Poly") -> "Poly":
        t: dict = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in o.terms.items():
                m = tuple(sorted(m1 + m2))
                t[m] = t.get(m, 0) + c1 * c2
        return Poly(t)

    def scale(self, f) -> "Poly":
        return Poly({m: c * Fraction(f) for m, c in self.terms.items()})

    def __eq__(self, o) -> bool:
        return isinstance(o, Poly) and self.terms == o.terms

    def __hash__(self) -> int:
        return hash(frozenset(self.terms.items()))

    def constant(self) -> Fraction | None:
        """The value when the polynomial has no symbols, else None."""
        if not self.terms:
            return Fraction(0)
        if list(self.terms) == [()]:
            return self.terms[()]
        return None

    def is_zero(self) -> bool:
        return not self.terms

    def degree(self, s: str) -> int:
        return max((m.count(s) for m in self.terms), default=0)

    def coeff(self, s: str) -> "Poly":
        """Coefficient of `s` in the monomials where it appears exactly once."""
        t: dict = {}
        for m, c in self.terms.items():
            if m.count(s) == 1:
                rest = list(m)
                rest.remove(s)
                t[tuple(rest)] = t.get(tuple(rest), 0) + c
        return Poly(t)

    def split(self, s: str) -> tuple["Poly", "Poly"]:
        """(the monomials containing s, the others)."""
        a = {m: c for m, c in self.terms.items() if s in m}
        return Poly(a), Poly({m: c for m, c in self.terms.items() if s not in m})

    def symbols(self) -> set[str]:
        return {s for m in self.terms for s in m}

    def divisible_by(self, c: int) -> bool:
        return all((v / c).denominator == 1 for v in self.terms.values())

    def __repr__(self) -> str:
        return f"Poly({self})"

    def __str__(self) -> str:
        if not self.terms:
            return "0"
        parts = []
        for m, c in sorted(self.terms.items(), key=lambda kv: (-len(kv[0]), kv[0])):
            names = "*".join(_pretty(s) for s in m)
            num = str(c) if c.denominator == 1 else f"({c})"
            if not names:
                parts.append(num)
            elif c == 1:
                parts.append(names)
            elif c == -1:
                parts.append("-" + names)
            else:
                parts.append(f"{num}*{names}")
        return " + ".join(parts).replace("+ -", "- ")


def _pretty(s: str) -> str:
    if s.startswith("tx*"):
        return "(" + s.replace("tx*1", "threadIdx.x").replace("tx*", "threadIdx.x*").replace("//", "/") + ")"
    return {"tx": "threadIdx.x", "ty": "threadIdx.y", "tz": "threadIdx.z"}.get(s, s.lstrip("~"))


@dataclass(frozen=True)
class Val:
    """A symbolic value: `poly` None means it varies across a warp's lanes in an unmodelled way."""
    poly: Poly | None
    indirect: bool = False

    @property
    def lane_dependent(self) -> bool:
        return self.poly is None or any(is_lane(s) for s in self.poly.symbols())

    @property
    def thread_dependent(self) -> bool:
        return self.poly is None or any(s in THREAD_SYMBOLS or s.startswith("~") or is_lane(s)
                                        for s in self.poly.symbols())

    def constant(self) -> Fraction | None:
        return None if self.poly is None else self.poly.constant()


UNKNOWN = Val(None)


def const(c) -> Val:
    return Val(Poly.const(c))


def sym(name: str) -> Val:
    return Val(Poly.sym(name))


def _ind(*vals: Val) -> bool:
    return any(v.indirect for v in vals)


def lane_split(p: Poly) -> tuple[Poly, Poly]:
    """(monomials containing a lane atom, the uniform rest)."""
    lane = {m: c for m, c in p.terms.items() if any(is_lane(s) for s in m)}
    return Poly(lane), Poly({m: c for m, c in p.terms.items() if m not in lane})


def lane_terms(p: Poly | None) -> dict[str, Poly] | None:
    """{lane atom: its coefficient}, or None when some monomial holds two lane atoms (non-linear)
    or the value is not a polynomial."""
    if p is None:
        return None
    out: dict[str, Poly] = {}
    for m, c in p.terms.items():
        atoms = [s for s in m if is_lane(s)]
        if not atoms:
            continue
        if len(atoms) > 1:
            return None
        rest = list(m)
        rest.remove(atoms[0])
        out[atoms[0]] = out.get(atoms[0], Poly()) + Poly({tuple(rest): c})
    return out


def add(a: Val, b: Val) -> Val:
    if a.poly is None or b.poly is None:
        return Val(None, _ind(a, b))
    return Val(a.poly + b.poly, _ind(a, b))


def neg(a: Val) -> Val:
    return a if a.poly is None else Val(-a.poly, a.indirect)


def sub(a: Val, b: Val) -> Val:
    return add(a, neg(b))


def mul(a: Val, b: Val) -> Val:
    if a.poly is None or b.poly is None:
        ca, cb = a.constant(), b.constant()
        if ca == 0 or cb == 0:  # 0 * anything
            return Val(Poly(), _ind(a, b))
        return Val(None, _ind(a, b))
    return Val(a.poly * b.poly, _ind(a, b))


def opaque(label: str, *vals: Val) -> Val:
    """A function of `vals` we do not model: uniform, block-varying or lane-varying like its inputs."""
    if any(v.lane_dependent for v in vals):
        return Val(None, _ind(*vals))
    prefix = "~" if any(v.thread_dependent for v in vals) else ""
    return Val(Poly.sym(prefix + label), _ind(*vals))


def _int(x: Fraction | None) -> int | None:
    return int(x) if x is not None and x.denominator == 1 else None


def _single_tx(a: Val) -> int | None:
    """k when the lane part of `a` is exactly k*tx with k a positive integer."""
    terms = lane_terms(a.poly) if a.poly is not None else None
    if not terms or set(terms) != {LANE}:
        return None
    k = _int(terms[LANE].constant())
    return k if k is not None and k > 0 else None


def _uniform_rest(rest: Poly, c: Fraction | None, label: str) -> Poly:
    """rest / c: exact when it divides, else an opaque (uniform or block-varying) symbol."""
    if c is not None and (c.denominator != 1 or rest.divisible_by(int(c))):
        return rest.scale(1 / c)
    return opaque(label + "#rest", Val(rest)).poly


def div(a: Val, b: Val, label: str) -> Val:
    """a / b (integer division where both are integers), see the module notes for lanes."""
    ca, cb = a.constant(), b.constant()
    if cb is not None and cb == 0:
        return Val(None, _ind(a, b))
    if ca is not None and cb is not None:
        q = ca / cb
        if ca.denominator == 1 and cb.denominator == 1:
            q = Fraction(abs(ca.numerator) // abs(cb.numerator)) * (1 if (ca >= 0) == (cb > 0) else -1)
        return Val(Poly.const(q), _ind(a, b))
    if b.lane_dependent:
        return Val(None, _ind(a, b))
    if not a.lane_dependent:
        if cb is not None and (cb.denominator != 1 or a.poly.divisible_by(int(cb))):
            return Val(a.poly.scale(1 / cb), _ind(a, b))
        return opaque(label, a, b)
    terms = lane_terms(a.poly)
    if terms is None:
        return Val(None, _ind(a, b))
    lane, rest = lane_split(a.poly)
    k, c = _single_tx(a), _int(cb)
    if cb is None:  # symbolic divisor: assumed >= 32k, so warp-uniform
        return Val(Poly.sym("~" + label), _ind(a, b)) if k is not None else Val(None, _ind(a, b))
    if k is not None and c is not None and c > 0:
        if k % c == 0:
            new_lane = Poly.sym(LANE).scale(Fraction(k, c))
        elif 32 * k <= c:
            return Val(Poly.sym("~" + label), _ind(a, b))
        else:
            new_lane = Poly.sym(f"tx*{k}//{c}")
    elif all(co.constant() is not None for co in terms.values()):
        new_lane = lane.scale(1 / cb)  # an approximation: floor ignored
    else:
        return Val(None, _ind(a, b))
    return Val(new_lane + _uniform_rest(rest, cb, label), _ind(a, b))


def mod(a: Val, b: Val, label: str) -> Val:
    """a % b, see the module notes for lanes."""
    ca, cb = a.constant(), b.constant()
    if ca is not None and cb is not None and cb != 0 and ca.denominator == 1 and cb.denominator == 1:
        q = abs(ca.numerator) // abs(cb.numerator) * (1 if (ca >= 0) == (cb > 0) else -1)
        return Val(Poly.const(ca - q * cb), _ind(a, b))
    if b.lane_dependent:
        return Val(None, _ind(a, b))
    if not a.lane_dependent:
        return opaque(label, a, b)
    if lane_terms(a.poly) is None:
        return Val(None, _ind(a, b))
    lane, rest = lane_split(a.poly)
    k, c = _single_tx(a), _int(cb)
    if k is not None and c is not None and c > 0 and c % (32 * k) != 0:
        return Val(Poly.sym(f"tx*{k}%{c}"), _ind(a, b))
    return Val(lane + opaque(label + "#rest", Val(rest), b).poly, _ind(a, b))


def shift_left(a: Val, b: Val, label: str) -> Val:
    cb = b.constant()
    if cb is not None and cb.denominator == 1 and 0 <= cb < 64:
        return mul(a, const(2 ** int(cb)))
    return mul(a, opaque(label + "#pow2", b))


def shift_right(a: Val, b: Val, label: str) -> Val:
    cb = b.constant()
    if cb is not None and cb.denominator == 1 and 0 <= cb < 64:
        return div(a, const(2 ** int(cb)), label)
    return div(a, opaque(label + "#pow2", b), label)


def bit_and(a: Val, b: Val, label: str) -> Val:
    for x, m in ((a, b.constant()), (b, a.constant())):
        if m is not None and m.denominator == 1 and m > 0 and (int(m) + 1) & int(m) == 0:
            return mod(x, const(int(m) + 1), label)
    return opaque(label, a, b)


def join(a: Val, b: Val, name: str) -> Val:
    """The value of a variable after a merge (branch or loop): keeps the common lane terms.

    A merge of a lane-varying value with a uniform one keeps the lane terms (clamps, boundaries:
    `min(i, n-1)`, `i < n ? i : 0`); different lane terms give an unknown (None) value.
    """
    if a == b:
        return a
    ind = _ind(a, b)
    if a.poly is None or b.poly is None or lane_terms(a.poly) is None or lane_terms(b.poly) is None:
        return Val(None, ind)
    (la, ra), (lb, rb) = lane_split(a.poly), lane_split(b.poly)
    if la != lb and not (la.is_zero() or lb.is_zero()):
        return Val(None, ind)
    if la == lb and ra == rb:
        return Val(a.poly, ind)
    lane = lb if la.is_zero() else la
    varying = Val(ra).thread_dependent or Val(rb).thread_dependent or la != lb
    return Val(lane + Poly.sym(("~" if varying else "") + name), ind)
