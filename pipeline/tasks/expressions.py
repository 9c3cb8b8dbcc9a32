"""Size, init and work expressions (`"n"`, `"4*rows*cols"`, `"randint(0, bins)"`): `eval_expr`, a small
evaluator over Python's `ast` that allows numbers, the config's params, arithmetic and a few whitelisted
functions, nothing else; `parse_init` for the init specs of arguments. The bottom of the task layer."""
from __future__ import annotations

import ast
import math
from typing import Any

from pipeline.core.errors import TaskError


def _cdiv(a, b):
    return -(-a // b)


EXPR_FUNCTIONS: dict[str, Any] = {
    "min": min, "max": max, "abs": abs, "int": int, "float": float, "round": round,
    "ceil": math.ceil, "floor": math.floor, "sqrt": math.sqrt, "log2": math.log2, "cdiv": _cdiv,
}
_BINOPS = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a ** b,
}
_MAX_EXPONENT = 64
_MAX_MAGNITUDE = 1e30


def _parse_expr(text: str) -> ast.expr:
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise TaskError(f"expression {text!r} must be a string or a number")
    src = str(text).strip()
    if not src:
        raise TaskError("expression is empty; write a number or a formula over the config's params such as '4*n'")
    try:
        return ast.parse(src, mode="eval").body
    except SyntaxError:
        raise TaskError(f"expression '{src}' is not valid syntax; write arithmetic such as '4*n + 1'") from None


def expr_names(text: str) -> set[str]:
    """The param names an expression uses (function names excluded); raises TaskError on bad syntax."""
    tree = _parse_expr(text)
    calls = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in calls}


def eval_expr(text: str | int | float, params: dict[str, int | float]) -> int | float:
    """Evaluate a size/init/work expression over `params`: numbers, param names, + - * / // % **,
    unary minus, parentheses, and calls of min, max, abs, int, float, round, ceil, floor, sqrt, log2,
    cdiv. Anything else (attributes, subscripts, other calls, strings) raises TaskError."""
    src = str(text).strip()
    tree = _parse_expr(text)

    def ev(node: ast.AST):
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise TaskError(f"expression '{src}': only numbers are allowed as constants, not {node.value!r}")
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in params:
                known = ", ".join(sorted(params)) or "none"
                raise TaskError(f"expression '{src}' uses '{node.id}', which is not a param of this config "
                                f"(known: {known}); add it to the config's params or fix the name")
            value = params[node.id]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TaskError(f"expression '{src}': param '{node.id}' is {value!r}, not a number")
            return value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and abs(b) > _MAX_EXPONENT:
                raise TaskError(f"expression '{src}': exponent {b} is too large (at most {_MAX_EXPONENT})")
            if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and b == 0:
                raise TaskError(f"expression '{src}' divides by zero for these params")
            try:
                v = _BINOPS[type(node.op)](a, b)
            except (OverflowError, ValueError, ZeroDivisionError) as e:
                raise TaskError(f"expression '{src}' cannot be evaluated: {e}") from None
            if isinstance(v, complex) or abs(v) > _MAX_MAGNITUDE:
                raise TaskError(f"expression '{src}' gives {v!r}, which is not a usable size or value")
            return v
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in EXPR_FUNCTIONS:
                name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
                raise TaskError(f"expression '{src}' calls '{name}', which is not allowed; allowed functions: "
                                f"{', '.join(sorted(EXPR_FUNCTIONS))}")
            if node.keywords:
                raise TaskError(f"expression '{src}': keyword arguments are not allowed in '{node.func.id}(...)'")
            args = [ev(a) for a in node.args]
            try:
                return EXPR_FUNCTIONS[node.func.id](*args)
            except (TypeError, ValueError, ZeroDivisionError, OverflowError) as e:
                raise TaskError(f"expression '{src}': {node.func.id}(...) failed: {e}") from None
        raise TaskError(f"expression '{src}': '{ast.unparse(node)}' ({type(node).__name__}) is not allowed; use "
                        f"numbers, param names, + - * / // % **, parentheses and the functions "
                        f"{', '.join(sorted(EXPR_FUNCTIONS))}")

    return ev(tree)


def _parse_draw(tree: ast.expr, src: str, params: dict | None) -> tuple | None:
    """("uniform"|"randint", lo, hi) for a call of uniform or randint, None for anything else."""
    if not (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id in ("uniform", "randint")):
        return None
    kind = tree.func.id
    if len(tree.args) != 2 or tree.keywords:
        raise TaskError(f"init '{src}': {kind} takes exactly two bounds, e.g. '{kind}(0, 10)'")
    lo, hi = (ast.unparse(a) for a in tree.args)
    for part in (lo, hi):
        expr_names(part)  # syntax of each bound
    if params is None:
        return (kind, lo, hi)
    lo_v, hi_v = eval_expr(lo, params), eval_expr(hi, params)
    if not lo_v < hi_v:
        raise TaskError(f"init '{src}': the lower bound {lo_v} must be below the upper bound {hi_v}")
    if kind == "randint":
        if lo_v != int(lo_v) or hi_v != int(hi_v):
            raise TaskError(f"init '{src}': randint bounds must be whole numbers, got {lo_v} and {hi_v}")
        lo_v, hi_v = int(lo_v), int(hi_v)
    return (kind, lo_v, hi_v)


def _parse_records(tree: ast.Call, src: str, params: dict | None) -> tuple:
    """records(field, ..., sorted_by=k): ("records", ((kind, lo, hi), ...), k)."""
    fields = []
    for a in tree.args:
        draw = _parse_draw(a, src, params)
        if draw is None:
            raise TaskError(f"init '{src}': each field of records(...) is uniform(lo, hi) or randint(lo, hi), "
                            f"not '{ast.unparse(a)}'")
        fields.append(draw)
    if not fields:
        raise TaskError(f"init '{src}': records(...) needs at least one field, e.g. 'records(randint(0, n), "
                        f"uniform(-1, 1))'")
    sort_keys = 0
    for kw in tree.keywords:
        if kw.arg != "sorted_by" or not (isinstance(kw.value, ast.Constant) and type(kw.value.value) is int):
            raise TaskError(f"init '{src}': records(...) takes one keyword, sorted_by=<number of leading fields>, "
                            f"not '{ast.unparse(kw)}'")
        sort_keys = kw.value.value
    if not 0 <= sort_keys <= len(fields) or any(f[0] != "randint" for f in fields[:sort_keys]):
        raise TaskError(f"init '{src}': sorted_by={sort_keys} must count leading randint fields (0 to "
                        f"{len(fields)}); records are sorted by those fields, the first most significant")
    return ("records", tuple(fields), sort_keys)


def _parse_graph(tree: ast.Call, src: str, params: dict | None) -> tuple:
    """graph(n, p): ("graph", n, p), an undirected graph's n x n adjacency matrix."""
    if len(tree.args) != 2 or tree.keywords:
        raise TaskError(f"init '{src}': graph takes the node count and the edge probability, e.g. 'graph(n, 2.0 / n)'")
    n, prob = (ast.unparse(a) for a in tree.args)
    for part in (n, prob):
        expr_names(part)
    if params is None:
        return ("graph", n, prob)
    n_v, p_v = eval_expr(n, params), eval_expr(prob, params)
    if n_v != int(n_v) or n_v < 1 or not 0 < p_v < 1:  # 0 or 1 would make every draw the same matrix
        raise TaskError(f"init '{src}': graph needs a whole node count of at least 1 and a probability strictly "
                        f"between 0 and 1 (0 or 1 gives the same graph every time), got {n_v} and {p_v}")
    return ("graph", int(n_v), float(p_v))


def parse_init(text: str, params: dict[str, int | float] | None = None) -> tuple:
    """How an argument is filled: ("uniform", lo, hi), ("randint", lo, hi) (hi exclusive), ("value", expr), or
    ("records", fields, sort_keys) for an array of structs: `records(randint(0, m), uniform(-1, 1), sorted_by=1)`
    draws records of one element per field (randint fields hold integers, uniform fields floating-point numbers
    of the element's width) and sorts them by their first `sort_keys` fields; or ("graph", n, p):
    `graph(n, p)` is the row-major n x n adjacency matrix (0/1) of an undirected graph without loops, each
    edge drawn with probability p.

    Without `params` the bounds and the value are returned as expression strings; with `params`
    they are evaluated to numbers. Raises TaskError on malformed text."""
    src = str(text).strip()
    tree = _parse_expr(src)
    draw = _parse_draw(tree, src, params)
    if draw is not None:
        return draw
    if isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id == "records":
        return _parse_records(tree, src, params)
    if isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id == "graph":
        return _parse_graph(tree, src, params)
    if params is None:
        return ("value", src)
    return ("value", eval_expr(src, params))
