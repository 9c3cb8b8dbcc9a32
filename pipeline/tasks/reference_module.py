"""The torch2cuda reference module: the names it defines and a configuration's parameters of a task."""
from __future__ import annotations

import ast
import functools
from typing import NamedTuple

from pipeline.core.records import InputConfig, Task


REQUIRED_DEFS = ("Model", "get_inputs", "get_init_inputs")


class ModuleNames(NamedTuple):
    """What a Python module defines at its top level."""
    defined: frozenset[str]        # classes, functions and assigned globals
    assigned: frozenset[str]       # assigned globals only (`batch_size = 16`)
    literals: dict[str, int | float]  # numeric literal value of each global assigned one


@functools.lru_cache(maxsize=256)
def module_names(source: str) -> ModuleNames:
    """Top-level names of a module's source; raises SyntaxError if it does not parse."""
    tree = ast.parse(source)
    defined: set[str] = set()
    assigned: set[str] = set()
    literals: dict[str, int | float] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
        targets: list[ast.expr] = []
        value = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):  # `n *= 2`: no literal now
            assigned.add(node.target.id)
            literals.pop(node.target.id, None)
        for t in targets:  # in order: a later assignment replaces an earlier literal (`h = w = 2048`, `h, w = 32, 32`)
            pairs = [(t, value)] if isinstance(t, ast.Name) else \
                list(zip(t.elts, value.elts)) if isinstance(t, ast.Tuple) and isinstance(value, ast.Tuple) and \
                len(t.elts) == len(value.elts) else [(e, None) for e in getattr(t, "elts", [])]
            for name, v in pairs:
                if isinstance(name, ast.Name):
                    assigned.add(name.id)
                    literal = _numeric_literal(v)
                    if literal is None:
                        literals.pop(name.id, None)
                    else:
                        literals[name.id] = literal
    return ModuleNames(frozenset(defined | assigned), frozenset(assigned), literals)


def _numeric_literal(node: ast.expr | None) -> int | float | None:
    """The number a literal expression evaluates to, or None (not a literal, or not a number)."""
    if node is None:
        return None
    try:
        v = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def config_params(task: Task, config: InputConfig) -> dict[str, int | float]:
    """The params a config's expressions see: for torch2cuda the reference's numeric globals
    overridden by the config's params; for c2cuda the config's params alone."""
    if task.kind == "torch2cuda":
        try:
            literals = module_names(task.reference).literals
        except SyntaxError:
            literals = {}
        return {**literals, **config.params}
    return dict(config.params)
