"""What both Python checks of the gate read: the names they treat specially, how a finding of theirs is made
(its advice from rules.py), and how an expression resolves to a dotted path (`F.relu` -> torch.nn.functional.relu).
`python.py` checks the module as a whole, `compute.py` that forward computes nothing with torch."""
from __future__ import annotations

import ast

from pipeline.core.records import Finding
from pipeline.evaluation.gate.rules import PYTHON, make_finding

LOAD_INLINE = "torch.utils.cpp_extension.load_inline"


TORCH_ALLOCATIONS = {"torch.empty", "torch.empty_like", "torch.zeros", "torch.zeros_like", "torch.empty_strided",
                   "torch.Size", "torch.device", "torch.nn.Parameter", "torch.is_tensor", "torch.no_grad",
                   "torch.inference_mode", "torch.finfo", "torch.iinfo", "torch.get_default_dtype"}


NOT_SUBMODULES = {"torch.nn.Parameter", "torch.nn.ParameterList", "torch.nn.ParameterDict", "torch.nn.Buffer"}


def rule_finding(rule: str, line: int, what: str, advice: str | None = None) -> Finding:
    """An error finding of the Python rules: 'line N: what; advice [rule]', the advice from the rules table unless
    `advice` names this finding's own fix."""
    return make_finding(rule, PYTHON, line, what, advice)


def qualified_name(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """Dotted path an expression resolves to (`F.relu` -> torch.nn.functional.relu), or None."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id)
    if isinstance(node, ast.Attribute):
        base = qualified_name(node.value, aliases)
        return f"{base}.{node.attr}" if base else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
        base = qualified_name(node.args[0], aliases)
        return f"{base}.{node.args[1].value}" if base else None
    return None


def reference_nodes(tree: ast.Module) -> set[int]:
    """ids of nodes inside a copied reference (class Model, get_inputs, get_init_inputs): dead code here."""
    skip: set[int] = set()
    for n in tree.body:
        if (isinstance(n, ast.ClassDef) and n.name == "Model") or \
                (isinstance(n, ast.FunctionDef) and n.name in ("get_inputs", "get_init_inputs")):
            skip |= {id(x) for x in ast.walk(n)}
    return skip


def short_text(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 40 else text[:36] + " ..."
