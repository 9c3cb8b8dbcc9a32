"""The load_inline calls of a kernelbench-format candidate, evaluated: each call's constant arguments (sources,
functions, flags) as the gate checks them and the compile step builds them, or `DynamicCode` saying why an
argument is not a constant. A name is looked up as Python does (the enclosing function's binding, else the
module's); a name an enclosing function binds is never a constant here.
"""
from __future__ import annotations

import ast
import re

from pipeline.evaluation.gate.python_names import LOAD_INLINE, qualified_name

_KEYWORDS = {"name", "cpp_sources", "cuda_sources", "functions", "extra_cflags", "extra_cuda_cflags", "extra_ldflags",
             "extra_include_paths", "verbose", "with_cuda", "with_pytorch_error_handling"}


class DynamicCode(Exception):
    def __init__(self, line: int, what: str):
        super().__init__(what)
        self.line, self.what = line, what


def parameters(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> list[ast.arg]:
    """Every parameter a def or lambda binds: positional-only, ordinary, keyword-only, *args and **kwargs."""
    args = function.args
    return args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]


def _load_inline_calls(tree: ast.AST, aliases: dict[str, str]) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and qualified_name(n.func, aliases) == LOAD_INLINE]


def load_inline_refs(tree: ast.AST, aliases: dict[str, str]) -> list[int]:
    """Lines where load_inline is referred to other than by calling it (aliased, stored, passed on)."""
    called = {id(n.func) for n in _load_inline_calls(tree, aliases)}
    return [n.lineno for n in ast.walk(tree) if isinstance(n, (ast.Name, ast.Attribute)) and id(n) not in called
            and qualified_name(n, aliases) == LOAD_INLINE]


def evaluated_load_inline_calls(tree: ast.Module, aliases: dict[str, str]) -> list[dict | DynamicCode]:
    """Every load_inline call of the file with its constant arguments evaluated (_evaluate_call), or the DynamicCode
    saying why they are not constant. The gate checks and the compile step builds exactly these values.

    A name is looked up as Python does: in the function the call sits in when that function binds it anywhere
    (a parameter, an assignment, nonlocal), else at module level; a name of an enclosing function is not
    followed (it is not constant for this rule)."""
    module = _module_assigns(tree)
    enclosing = _enclosing_functions(tree)
    out: list[dict | DynamicCode] = []
    for call in _load_inline_calls(tree, aliases):
        function = enclosing.get(id(call))
        scope = module
        if function is not None:  # a name an enclosing function binds is that function's: never a constant here
            closure = _enclosing_bound(enclosing, function, tree)
            scope = {**{k: v for k, v in module.items() if k not in closure},
                     **{k: [None] for k in closure}, **_scope_assigns(tree, function)}
        try:
            out.append(_evaluate_call(call, scope))
        except DynamicCode as e:
            out.append(e)
    return out


def _enclosing_bound(enclosing: dict[int, ast.AST], function: ast.AST, tree: ast.Module) -> set[str]:
    """Names bound by the functions around `function` (closures): for `function` they are not module-level."""
    names: set[str] = set()
    outer = enclosing.get(id(function))
    while outer is not None:
        names |= set(_scope_assigns(tree, outer))
        outer = enclosing.get(id(outer))
    return names


def _module_assigns(tree: ast.Module) -> dict[str, list]:
    """Module-level name -> the values bound to it; None for a binding or mutation that is not `name = value`."""
    return _scope_assigns(tree, tree)


def _enclosing_functions(tree: ast.Module) -> dict[int, ast.AST]:
    """id of every node -> the innermost function (def or lambda) whose body it sits in (a default argument or a
    decorator sits in the scope around the def); module-level nodes are absent."""
    out: dict[int, ast.AST] = {}

    def visit(node: ast.AST, function: ast.AST | None) -> None:
        for child in ast.iter_child_nodes(node):
            if function is not None:
                out[id(child)] = function
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                # its body runs in it; its decorators, defaults and annotations run where it is defined
                for name, value in ast.iter_fields(child):
                    for part in value if isinstance(value, list) else [value]:
                        if isinstance(part, ast.AST):
                            inner = child if name == "body" else function
                            if inner is not None:
                                out[id(part)] = inner
                            visit(part, inner)
            else:
                visit(child, function)
    visit(tree, None)
    return out


def _scope_assigns(tree: ast.Module, scope: ast.AST) -> dict[str, list]:
    """Name -> the values bound to it in `scope` (the module, or a function: its parameters are bindings that
    are not `name = value`); None for a binding or mutation that is not `name = value`. Mutations are looked
    for in the whole file (x.append(...), x[i] = ..., x.attr = ..., global x), so a name of the same spelling
    changed anywhere is never taken for a constant."""
    binds: dict[str, list] = {}
    if isinstance(scope, ast.Lambda):
        return {a.arg: [None] for a in parameters(scope)}
    if not isinstance(scope, ast.Module):
        for a in parameters(scope):
            binds.setdefault(a.arg, []).append(None)
    for n in ast.walk(tree):  # mutations anywhere: x.append(...), x[i] = ..., x.attr = ..., global x
        target = n.func.value if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) else \
            n.value if isinstance(n, (ast.Attribute, ast.Subscript)) and isinstance(n.ctx, (ast.Store, ast.Del)) else None
        names = n.names if isinstance(n, (ast.Global, ast.Nonlocal)) else [target.id] if isinstance(target, ast.Name) \
            else [n.name] if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name else \
            [n.rest] if isinstance(n, ast.MatchMapping) and n.rest else []
        for name in names:
            binds.setdefault(name, []).append(None)
    stack = list(scope.body)
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Assign) and all(isinstance(t, ast.Name) for t in n.targets):
            for t in n.targets:
                binds.setdefault(t.id, []).append(n.value)
            continue
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            binds.setdefault(n.target.id, []).append(n.value)
            continue
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            binds.setdefault(n.name, []).append(None)
            continue
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                binds.setdefault(a.asname or a.name.split(".")[0], []).append(None)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            binds.setdefault(n.id, []).append(None)
        stack += list(ast.iter_child_nodes(n))
    return binds


def _evaluate_call(call: ast.Call, assigns: dict[str, list]) -> dict:
    """The constant arguments of one load_inline call, sources as (text, line offset) pieces; raises DynamicCode."""
    line = call.lineno
    if len(call.args) > 3 or any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        raise DynamicCode(line, "calls load_inline with *args, **kwargs or arguments after cuda_sources by position")
    args = dict(zip(("name", "cpp_sources", "cuda_sources"), call.args)) | {k.arg: k.value for k in call.keywords}
    bad = sorted(set(args) - _KEYWORDS)
    if bad:
        raise DynamicCode(line, f"passes load_inline the argument {bad[0]}")
    for key in ("verbose", "with_cuda", "with_pytorch_error_handling"):
        if key in args and not (isinstance(args[key], ast.Constant) and args[key].value in (True, False, None)):
            raise DynamicCode(line, f"passes load_inline a {key} that is not True, False or None")

    def value(key: str) -> tuple[list[tuple[str, int]], bool]:
        node = args.get(key)
        if node is None or (isinstance(node, ast.Constant) and node.value is None):
            return [], True
        return _const(node, assigns, line)
    name, is_list = value("name")
    if is_list or not re.fullmatch(r"[A-Za-z_]\w{0,63}", name[0][0]):
        raise DynamicCode(line, "gives load_inline a name that is not a plain identifier string")
    has_functions = args.get("functions") is not None and not (
        isinstance(args["functions"], ast.Constant) and args["functions"].value is None)
    if has_functions and not all(re.fullmatch(r"[A-Za-z_]\w{0,127}", t) for t, _ in value("functions")[0]):
        # torch pastes each name into the C++ it generates (m.def("<name>", <name>, "<name>")), which no gate reads
        raise DynamicCode(line, "gives load_inline a function name that is not a plain identifier string")
    return {"name": name[0][0], "cpp_sources": value("cpp_sources")[0], "cuda_sources": value("cuda_sources")[0],
            "functions": [t for t, _ in value("functions")[0]] if has_functions else None,
            "extra_cflags": [t.strip() for t, _ in value("extra_cflags")[0] if t.strip()],
            "extra_cuda_cflags": [t.strip() for t, _ in value("extra_cuda_cflags")[0] if t.strip()],
            # KernelBench's own example passes extra_ldflags=[""]: blank entries are dropped
            "extra_ldflags": [t.strip() for t, _ in value("extra_ldflags")[0] if t.strip()],
            "extra_include_paths": [t.strip() for t, _ in value("extra_include_paths")[0] if t.strip()], "line": line}


def _const(node: ast.AST, assigns: dict[str, list], line: int, depth: int = 0) -> tuple[list[tuple[str, int]], bool]:
    """A constant string (one piece) or list of strings (a piece each): ([(text, line offset)], is_list).

    The offset is the file line of the literal's opening quote minus 1, so text line k sits at file line
    offset + k. That is exact for a literal written out in the file (a triple-quoted source starting with
    a newline included) and approximate when a string is concatenated from several literals (the later
    parts are numbered on from the first literal's line) or contains escaped newlines.
    """
    where = getattr(node, "lineno", line)
    if depth > 20:
        raise DynamicCode(line, "passes load_inline an argument that is too deeply indirect")
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [(node.value, node.lineno - 1)], False
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return [("".join(v.value for v in node.values), node.lineno - 1)], False
    if isinstance(node, (ast.List, ast.Tuple)):
        pieces = [_const(e, assigns, line, depth + 1) for e in node.elts]
        if any(is_list for _, is_list in pieces):
            raise DynamicCode(where, "passes load_inline a nested list")
        return [p[0][0] for p in pieces], True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        (left, left_list), (right, right_list) = (_const(x, assigns, line, depth + 1) for x in (node.left, node.right))
        if left_list != right_list:
            raise DynamicCode(where, "adds a string and a list in a load_inline argument")
        return (left + right, True) if left_list else ([(left[0][0] + right[0][0], left[0][1])], False)
    if isinstance(node, ast.Name):
        values = assigns.get(node.id, [])
        if len(values) != 1 or values[0] is None:
            raise DynamicCode(where, f"passes load_inline {node.id}, which is not a variable of the module or of the "
                                  f"enclosing function assigned once")
        return _const(values[0], assigns, line, depth + 1)
    src = ast.unparse(node)
    raise DynamicCode(where, f"builds a load_inline argument at run time ({src if len(src) < 60 else src[:56] + ' ...'})")
