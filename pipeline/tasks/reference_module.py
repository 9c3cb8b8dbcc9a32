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
        for t in targets:
            if isinstance(t, ast.Name):
                assigned.add(t.id)
                try:
                    v = ast.literal_eval(value)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    continue
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    literals[t.id] = v
            elif isinstance(t, ast.Tuple):
                assigned.update(e.id for e in t.elts if isinstance(e, ast.Name))
    return ModuleNames(frozenset(defined | assigned), frozenset(assigned), literals)


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
