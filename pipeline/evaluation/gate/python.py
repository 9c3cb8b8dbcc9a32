"""The static gate, Python half: the rules of kernelbench-format candidates, read with `ast`.

    check_python(source, float32, profile) -> (findings, load_inline calls)
    (the load_inline calls' constant arguments: python_inline.py)

Names are checked by allow-list (python_allowed.py): every attribute chain that starts at an imported
module (`torch.cuda.Stream`, `F.relu`, `getattr(torch, "sys")`) is resolved on the installed modules
and must reach only modules of the list and names that are not denied; imports, introspection,
try statements, patching and tensor subclasses are refused everywhere in the file (module level,
__init__, forward). A module may only be named, never passed on as a value (`[torch][0]`, `(lambda: torch)()`),
so every chain read from it stays resolvable; on receivers the gate cannot resolve, private attributes, module
names (`.sys`), frame, generator and code attributes (`.gi_frame`, `.f_back`, `co_*`), stream and event
constructors and shared-memory methods are refused by name; attributes are assigned only on self. Torch compute
(torch calls, tensor methods, operators on tensors) is refused only where forward can reach it, and only under a
gate profile (gate.GateProfile) without torch_compute; a profile may add modules. The load_inline sources
must be constants; they are extracted here with their lines mapped into the Python file (their flags,
linker flags and include paths are checked in the package's __init__).
Each finding names the rule (`Finding.rule`) and the 1-based line of the candidate file.
"""
from __future__ import annotations

import ast
import re
import types

from pipeline.core.records import Finding
from pipeline.evaluation.gate.compute import check_compute
from pipeline.evaluation.gate.profile import GateProfile
from pipeline.evaluation.gate.python_allowed import (ALLOWED_NAMES, ATTRIBUTE_BUILTINS, EVENT_ATTRIBUTES, FILE_METHODS,
                                                   FRAME_ATTRIBUTE, FRAME_ATTRIBUTES, IMPORTABLE, INIT_HELPERS,
                                                   INTROSPECTION_NAMES, LOW_DTYPES, MODULE_ATTRIBUTES, MODULE_RULES,
                                                   STREAM_ATTRIBUTES, TORCH_INTERNALS, name_verdict, resolve_module,
                                                   resolve_name, static_attribute)
from pipeline.evaluation.gate.python_inline import (DynamicCode, evaluated_load_inline_calls, load_inline_refs,
                                                  parameters)
from pipeline.evaluation.gate.python_names import LOAD_INLINE, qualified_name, reference_nodes, rule_finding, short_text

# the fix of an attribute set on an object the candidate did not make (two forms: setattr and assignment)
_KEEP_STATE_ON_SELF = "keep state on self; do not patch modules, classes or objects you did not make"

# --- Python (kernelbench) -------------------------------------------------------------------------
def import_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted path it stands for, from imports and plain `x = a.b` assignments."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    for _ in range(2):
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                q = qualified_name(node.value, out)
                if q:
                    out[node.targets[0].id] = q
    return out




def check_python(source: str, float32: bool, profile: GateProfile) -> tuple[list[Finding], list[dict]]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as e:
        return [rule_finding("syntax", getattr(e, "lineno", None) or 1, f"the Python does not parse ({getattr(e, 'msg', e)})")], []
    aliases = import_aliases(tree)
    out: list[Finding] = []
    _check_imports(tree, out, profile)
    _check_modelnew(tree, aliases, out)
    _check_nodes(tree, aliases, float32, out, profile.modules)
    _check_module_values(tree, aliases, out, profile.modules)
    _check_alias_meanings(tree, aliases, out)
    if not profile.torch_compute:
        check_compute(tree, aliases, out)
    calls = []
    for call in evaluated_load_inline_calls(tree, aliases):
        if isinstance(call, DynamicCode):
            out.append(rule_finding("dynamic-build", call.line, call.what))
        else:
            calls.append(call)
    for line in load_inline_refs(tree, aliases):
        out.append(rule_finding("dynamic-build", line, "refers to load_inline other than by calling it"))
    return out, calls


def _check_imports(tree: ast.AST, out: list[Finding], profile: GateProfile) -> None:
    importable = IMPORTABLE | profile.modules
    advice = f"import only {', '.join(sorted(m for m in importable if m != '__future__'))}"
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or any(a.name == "*" for a in node.names)):
            out.append(rule_finding("forbidden-import", node.lineno, "uses a relative or star import"))
            continue
        if isinstance(node, ast.Import):
            bad = [(a.name, None) for a in node.names if a.name not in importable]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            bad = []
            for a in node.names:
                full = f"{mod}.{a.name}"
                if full in ALLOWED_NAMES:  # from torch.autograd import Function
                    continue
                if mod not in importable:
                    bad.append((full, None))
                elif mod == "torch.utils.cpp_extension" and a.name != "load_inline":
                    bad.append((full, None))
                elif mod != "__future__":  # from M import x: x is checked exactly as the name M.x
                    verdict = name_verdict(full, profile.modules)
                    bad += [(full, verdict)] if verdict else []
        else:
            continue
        for name, verdict in bad:
            if name.startswith("torch.utils.cpp_extension."):
                out.append(rule_finding("dynamic-build", node.lineno, f"imports {name}; only load_inline with literal sources is allowed"))
            elif verdict:
                out.append(rule_finding(verdict[0], node.lineno, f"imports {name}: {verdict[1]}"))
            else:
                rule = next((r for r, names in MODULE_RULES if name.split(".")[0] in names), "forbidden-import")
                out.append(rule_finding(rule, node.lineno, f"imports {name}",
                                        advice if rule == "forbidden-import" else None))


def _check_modelnew(tree: ast.Module, aliases: dict[str, str], out: list[Finding]) -> None:
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)
    if cls is None:
        out.append(rule_finding("no-modelnew", 1, "no top-level class ModelNew is defined"))
        return
    bases = [qualified_name(b, aliases) or ast.unparse(b) for b in cls.bases]
    if bases != ["torch.nn.Module"] or cls.keywords or cls.decorator_list:
        what = f"ModelNew derives from {', '.join(bases) or 'nothing'}" if bases != ["torch.nn.Module"] \
            else "ModelNew has a decorator or metaclass"
        out.append(rule_finding("subclass-reference", cls.lineno, what))




def _check_nodes(tree: ast.Module, aliases: dict[str, str], float32: bool, out: list[Finding],
                 modules: frozenset[str]) -> None:
    skip = reference_nodes(tree)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    own = _own_objects(tree, aliases)
    shadowed = _local_names(tree)
    on_the_way = _on_the_way_to_allowed_names(tree, aliases)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 1)
        if isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            out.append(rule_finding("try-fallback", line, "has a try statement (a fallback path)"))
        elif isinstance(node, ast.Name):
            if node.id in ("Model", "get_inputs", "get_init_inputs") and id(node) not in skip:
                out.append(rule_finding("reference-use", line, f"uses the reference's {node.id}"))
            elif (node.id in INTROSPECTION_NAMES and id(node) not in shadowed) or (
                    re.fullmatch(r"__\w+__", node.id) and node.id != "__name__"):
                out.append(rule_finding("introspection", line, f"uses {node.id}"))
            elif node.id in ATTRIBUTE_BUILTINS and id(node) not in called:
                out.append(rule_finding("introspection", line, f"passes on {node.id} (it is allowed only called directly, "
                                                     f"with a constant name)"))
        elif isinstance(node, ast.Attribute):
            if id(node) not in on_the_way:
                _check_attribute(node, aliases, float32, out, modules)
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                _check_attribute_store(node, aliases, out, own)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("getattr", "setattr", "delattr", "hasattr"):
            key = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)) or re.fullmatch(r"__\w+__", key.value):
                out.append(rule_finding("introspection", line, f"calls {node.func.id} with a computed or dunder attribute name"))
            elif key.value in ("Model", "get_inputs", "get_init_inputs"):
                out.append(rule_finding("reference-use", line, f"reaches the reference's {key.value}"))
            elif float32 and key.value in ("half", "bfloat16"):
                out.append(rule_finding("precision-downgrade", line, f"reaches .{key.value} with {node.func.id}, lower "
                                                           f"precision than float32"))
            else:  # a constant name is checked exactly as the attribute it names
                base = qualified_name(node.args[0], aliases)
                _check_name(line, key.value, f"{base}.{key.value}" if base else "", node.args[0], aliases, float32, out,
                            modules)
            if node.func.id in ("setattr", "delattr") and node.args and qualified_name(node.args[0], aliases):
                out.append(rule_finding("timing-tamper", line, f"patches {qualified_name(node.args[0], aliases)} with {node.func.id}"))
            elif node.func.id in ("setattr", "delattr") and node.args and not (
                    isinstance(node.args[0], ast.Name) and node.args[0].id == "self" or _self_rooted(node.args[0])):
                out.append(rule_finding("timing-tamper", line, f"changes an attribute of {short_text(node.args[0])} "
                                                               f"with {node.func.id}, an object other than self",
                                        _KEEP_STATE_ON_SELF))

        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)) and qualified_name(node.value, aliases):
            out.append(rule_finding("timing-tamper", line, f"patches {short_text(node)}, an item of {qualified_name(node.value, aliases)}"))
        elif isinstance(node, ast.MatchClass) and (node.patterns or node.kwd_attrs):
            out.append(rule_finding("introspection", line, f"reads attributes with the class pattern "
                                                           f"{short_text(node)} in a match statement, which the gate "
                                                           f"cannot follow", "read attributes as x.name"))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in (
                "__torch_function__", "__torch_dispatch__"):
            out.append(rule_finding("tensor-subclass", line, f"defines {node.name}"))
        elif isinstance(node, ast.ClassDef) and any(qualified_name(b, aliases) == "torch.Tensor" for b in node.bases):
            out.append(rule_finding("tensor-subclass", line, f"class {node.name} subclasses torch.Tensor"))
        if float32 and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("half", "bfloat16"):
            out.append(rule_finding("precision-downgrade", line, f"converts with .{node.func.attr}(), lower precision than float32"))


def _check_attribute_store(node: ast.Attribute, aliases: dict[str, str], out: list[Finding], own: set[int]) -> None:
    """An attribute assigned or deleted (any target: =, +=, for, with ... as, del): only on the candidate's own
    objects (self, or a name _own_objects vouches for).

    `torch.x = ...`, `type(t).add = f`, `x.data = y` on forward's input: anything else may be a module, a class, the
    harness's tensors or its state.
    """
    line, base = node.lineno, node.value
    root = _root(base)
    if qualified_name(base, aliases):
        out.append(rule_finding("timing-tamper", line, f"patches {short_text(node)}, an attribute of {qualified_name(base, aliases)}"))
    elif not (isinstance(root, ast.Name) and (root.id == "self" or id(root) in own)):
        out.append(rule_finding("timing-tamper", line, f"assigns to {short_text(node)}, an attribute of an object "
                                                       f"other than self or one this code made with torch (what the "
                                                       f"gate cannot name may be torch, the harness or its inputs)",
                                _KEEP_STATE_ON_SELF))


def _own_objects(tree: ast.Module, aliases: dict[str, str]) -> set[int]:
    """ids of Name nodes that stand for an object the candidate made: in one scope (a function, or the module),
    a name every binding of which is a new object: a torch class constructed (`conv = nn.Conv2d(...)`) or a tensor
    created (`w = torch.empty(n)`, _CREATION); a torch call that may return its argument (`torch.Tensor.contiguous(x)`)
    does not count. A loop variable over what self holds (`for m in self.modules():`) counts as self does; nor
    does the first argument of a torch.autograd.Function's staticmethod that the file never
    names other than by defining it (autograd's `ctx`). A name also
    bound any other way there (a parameter, `m = type(x)`, a loop, global) is not vouched for, and neither is a
    name read in a nested function (it may be that function's parameter or the enclosing scope's)."""
    own: set[int] = set()
    # autograd's context: the first argument of a torch.autograd.Function's staticmethod, while the file never
    # names that method (`Fn.forward(torch.Tensor, ...)` would pass any object as ctx; Fn.apply passes autograd's)
    named = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} | {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    autograd_methods = {id(f) for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
                        and any(qualified_name(b, aliases) == "torch.autograd.Function" for b in c.bases)
                        for f in c.body if isinstance(f, ast.FunctionDef) and f.name not in named
                        and [ast.unparse(d) for d in f.decorator_list] == ["staticmethod"]}
    scopes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    for scope in scopes:
        nodes = list(_scope_nodes(scope))
        made = {id(t) for n in nodes if isinstance(n, (ast.Assign, ast.AnnAssign)) and isinstance(n.value, ast.Call)
                and _makes_new(qualified_name(n.value.func, aliases) or "")
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])}
        # `for m in self.modules():` / `for layer in self.layers:` walks what self holds, as self.x.y = ... may
        made |= {id(n.target) for n in nodes if isinstance(n, ast.For) and isinstance(n.target, ast.Name)
                 and _reached_from_self(n.iter)}
        good: dict[str, bool] = {}

        def bind(name: str, ok: bool) -> None:
            good[name] = good.get(name, True) and ok
        if not isinstance(scope, ast.Module):
            for k, a in enumerate(parameters(scope)):
                bind(a.arg, k == 0 and id(scope) in autograd_methods)
        for n in nodes:
            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                bind(n.id, id(n) in made)
            elif isinstance(n, (ast.Global, ast.Nonlocal)):
                for name in n.names:
                    bind(name, False)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not scope:
                bind(n.name, False)
            elif isinstance(n, ast.alias):
                bind((n.asname or n.name).split(".")[0], False)
        own |= {id(n) for n in nodes if isinstance(n, ast.Name) and good.get(n.id)}
    return own


def _on_the_way_to_allowed_names(tree: ast.Module, aliases: dict[str, str]) -> set[int]:
    """ids of the inner attributes of a chain that names one of ALLOWED_NAMES (`torch.autograd` of
    `torch.autograd.Function`): on its own the module would be refused, on the way to the name it is not."""
    out: set[int] = set()
    for node in ast.walk(tree):
        q = qualified_name(node, aliases) if isinstance(node, ast.Attribute) else None
        allowed = next((n for n in ALLOWED_NAMES if q and (q == n or q.startswith(n + "."))), None)
        inner = node.value if allowed else None
        while isinstance(inner, ast.Attribute) and allowed.startswith((qualified_name(inner, aliases) or "\0") + "."):
            out.add(id(inner))
            inner = inner.value
    return out


def _local_names(tree: ast.Module) -> set[int]:
    """ids of Name nodes that are a function's local variable (`def forward(self, input)`, `type = x.dtype`): a
    name bound anywhere in a function (a parameter, an assignment, a loop target) is local throughout it, so it
    never reaches the builtin of that spelling. Targets inside comprehensions (their own scope) do not make a
    name local; names declared global or nonlocal and module-level names (`del` there would uncover the
    builtin) are never counted."""
    out: set[int] = set()
    for scope in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))):
        nodes = list(_scope_nodes(scope))
        comprehension = {id(x) for n in nodes if isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp))
                         for x in ast.walk(n)}
        local = {a.arg for a in parameters(scope)}
        local |= {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                  and id(n) not in comprehension}
        local -= {name for n in nodes if isinstance(n, (ast.Global, ast.Nonlocal)) for name in n.names}
        out |= {id(n) for n in nodes if isinstance(n, ast.Name) and n.id in local}
    return out


# torch functions that return a new tensor, never one of their arguments
_CREATION = {f"torch.{f}" for f in "empty zeros ones full rand randn randint tensor arange linspace eye empty_strided "
             "empty_like zeros_like ones_like full_like rand_like randn_like".split()}


def _makes_new(qual: str) -> bool:
    """Whether calling the torch name `qual` makes a new object: a class of torch (nn.Conv2d, nn.Parameter) or
    a creation function (_CREATION)."""
    if qual in _CREATION:
        return True
    parts = qual.split(".")
    if parts[0] != "torch" or name_verdict(qual):
        return False
    obj = resolve_module("torch")
    for p in parts[1:]:
        obj = static_attribute(obj, p)
    return isinstance(obj, type)


def _reached_from_self(node: ast.AST) -> bool:
    """Whether `node` is self followed by attributes, items and calls of them (`self.modules()`, `self.blocks[0]`)."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return isinstance(node, ast.Name) and node.id == "self"


def _scope_nodes(scope: ast.AST):
    """Every node of `scope`'s own code: its body without the bodies of functions, lambdas and classes defined
    in it (their def nodes are included, as bindings of their names)."""
    todo = list(scope.body) if isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else [scope.body]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            todo.extend(node.decorator_list)  # decorators and defaults run in this scope
            todo.extend(d for d in node.args.defaults + node.args.kw_defaults if d is not None)
        elif isinstance(node, ast.ClassDef):  # its body is a scope of its own; bases and decorators run here
            todo.extend(node.decorator_list + node.bases + [k.value for k in node.keywords])
        elif isinstance(node, ast.Lambda):
            todo.extend(d for d in node.args.defaults + node.args.kw_defaults if d is not None)
        else:
            todo.extend(ast.iter_child_nodes(node))


def _check_alias_meanings(tree: ast.Module, aliases: dict[str, str], out: list[Finding]) -> None:
    """A name that stands for a module or a torch name (`T = torch`, `import torch.nn as nn`) has that one meaning
    in the whole file: the alias table is the file's, not a scope's, so `T = torch` at module level beside
    `T = torch.autograd.Function` in a function would let `T.save` in a third place be read as the wrong one."""
    meanings: dict[str, dict[str | None, int]] = {}

    def bind(name: str, q: str | None, line: int) -> None:
        meanings.setdefault(name, {}).setdefault(q, line)
    assigned: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                bind(a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0], n.lineno)
        elif isinstance(n, ast.ImportFrom):
            for a in n.names:
                bind(a.asname or a.name, f"{n.module}.{a.name}" if n.module and not n.level else None, n.lineno)
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                if isinstance(t, ast.Name):
                    assigned.add(id(t))
                    bind(t.id, qualified_name(n.value, aliases) if n.value is not None else None, n.lineno)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)) and id(n) not in assigned:
            bind(n.id, None, n.lineno)
        elif isinstance(n, ast.arg):
            bind(n.arg, None, n.lineno)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(n.name, None, n.lineno)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            bind(n.name, None, n.lineno)
        elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            bind(n.name, None, n.lineno)
    for name, seen in meanings.items():
        if len(seen) > 1 and any(q is not None for q in seen):
            shown = " and ".join(q or "something else" for q in seen)
            out.append(rule_finding("introspection", max(seen.values()), f"binds {name} to {shown}: a name that "
                                                                         f"stands for a module or a torch name has "
                                                                         f"one meaning in the file",
                                    "give each its own name"))


def _check_module_values(tree: ast.Module, aliases: dict[str, str], out: list[Finding], modules: frozenset[str]) -> None:
    """A module may only be named: read through an attribute (`torch.x`), given to getattr/hasattr, or bound to a
    plain name (`T = torch`, followed as an alias). Anywhere else (`[torch][0]`, `(lambda: torch)()`, `f(torch)`,
    `self.t = torch`, a class attribute, `match torch:`) the value leaves what qualified_name resolves, and every chain read
    from it (`[torch][0]._C`, `.cuda.Stream()`, `.nn.modules.module.sys`) would go unchecked."""
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    for node in ast.walk(tree):
        if not (isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load)
                or isinstance(node, ast.Call)):  # getattr(torch, "cuda") is a module too
            continue
        q = qualified_name(node, aliases)
        if not q or not isinstance(resolve_name(q, modules), types.ModuleType):
            continue
        up = parents.get(id(node))
        if isinstance(up, ast.Attribute) or isinstance(up, ast.Expr) or (
                isinstance(up, ast.Call) and isinstance(up.func, ast.Name) and up.func.id in ATTRIBUTE_BUILTINS
                and up.args and up.args[0] is node) or (
                isinstance(up, ast.Assign) and up.value is node and len(up.targets) == 1
                and isinstance(up.targets[0], ast.Name) and not isinstance(parents.get(id(up)), ast.ClassDef)):
            continue
        out.append(rule_finding("introspection", node.lineno, f"uses the module {q} as a value "
                                                              f"({short_text(up or node)}), where the gate cannot "
                                                              f"follow what is read from it",
                                f"name the module directly ({q}.name) or bind it to a plain name (M = {q})"))


def _check_attribute(node: ast.Attribute, aliases: dict[str, str], float32: bool, out: list[Finding],
                     modules: frozenset[str]) -> None:
    _check_name(node.lineno, node.attr, qualified_name(node, aliases) or "", node.value, aliases, float32, out, modules)


def _check_name(line: int, attr: str, q: str, value: ast.AST, aliases: dict[str, str], float32: bool,
                out: list[Finding], modules: frozenset[str]) -> None:
    """The rules on one attribute `attr` of `value` (written x.attr or getattr(x, "attr")); q: its dotted name;
    modules: the gate profile's extra modules."""
    parts = q.split(".")
    if re.fullmatch(r"__\w+__", attr) and not (attr == "__init__" and (
            (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super")
            or qualified_name(value, aliases) == "torch.nn.Module")):
        out.append(rule_finding("introspection", line, f"accesses the dunder attribute {attr}"))
    elif attr in ("as_subclass", "_make_subclass", "_make_wrapper_subclass"):
        out.append(rule_finding("tensor-subclass", line, f"uses {attr}"))
    elif attr in FILE_METHODS:
        out.append(rule_finding("process-or-file-or-network", line, f"calls .{attr}, which reads or writes files or shared "
                                                         f"memory"))
    elif attr in ("ctypes", "_ctypes", "ctypeslib"):  # numpy arrays carry the ctypes module (a.ctypes._ctypes)
        out.append(rule_finding("process-or-file-or-network", line, f"uses .{attr}, a way to native code"))
    elif attr in FRAME_ATTRIBUTES or FRAME_ATTRIBUTE.fullmatch(attr):
        out.append(rule_finding("introspection", line, f"reads .{attr}, which reaches frames, generators, coroutines or code "
                                             f"objects (the harness's own state)"))
    elif attr in STREAM_ATTRIBUTES or (q.startswith("torch.cuda.") and len(parts) == 3
                                       and re.search(r"(?i)stream", attr) and attr != "current_stream"):
        out.append(rule_finding("side-stream", line, f"uses .{attr}, which makes, wraps or switches to another stream"))
    elif attr in EVENT_ATTRIBUTES:
        out.append(rule_finding("timing-tamper", line, f"uses .{attr}, a CUDA event or graph"))
    elif not q and not _self_rooted(value) and (attr in MODULE_ATTRIBUTES or attr.startswith("_")):
        what = "a module" if attr in MODULE_ATTRIBUTES else "a private attribute"
        out.append(rule_finding("introspection", line, f"reaches .{attr}, {what}, through {short_text(value)}, which "
                                                       f"the gate cannot resolve to a name",
                                "name modules directly (torch.x, F.x) and keep private state on self"))
    elif parts[0] == "torch" and len(parts) > 1:
        if q.startswith("torch.cuda.") and parts[2] in ("Stream", "stream", "set_stream", "ExternalStream", "StreamContext"):
            out.append(rule_finding("side-stream", line, f"uses {q}"))
        elif q == "torch.Stream":
            out.append(rule_finding("side-stream", line, f"uses {q}"))
        elif q == "torch.Event" or (q.startswith("torch.cuda.") and parts[2] in (
                "Event", "graph", "graphs", "CUDAGraph", "make_graphed_callables", "set_device", "set_sync_debug_mode")):
            out.append(rule_finding("timing-tamper", line, f"uses {q}"))
        elif parts[1] == "multiprocessing":
            out.append(rule_finding("threads", line, f"uses {q}"))
        elif parts[1] in TORCH_INTERNALS or (q not in INIT_HELPERS and any(
                p.startswith("_") and not p.startswith("__") for p in parts[1:])) or (
                parts[1] == "utils" and len(parts) > 2 and parts[2] != "cpp_extension"):
            out.append(rule_finding("introspection", line, f"reaches into torch internals ({q})"))
        elif q.startswith("torch.utils.cpp_extension.") and q != LOAD_INLINE:
            out.append(rule_finding("dynamic-build", line, f"uses {q}; only load_inline with literal sources is allowed"))
        elif float32 and LOW_DTYPES.fullmatch(q):
            out.append(rule_finding("precision-downgrade", line, f"uses {q}, lower precision than the task's float32"))
        elif name_verdict(q, modules):
            out.append(rule_finding(*_rule_line_what(name_verdict(q, modules), line)))
    elif float32 and LOW_DTYPES.fullmatch(q):  # numpy.float16
        out.append(rule_finding("precision-downgrade", line, f"uses {q}, lower precision than the task's float32"))
    elif q and name_verdict(q, modules):  # math.x, typing.x, a profile's modules
        out.append(rule_finding(*_rule_line_what(name_verdict(q, modules), line)))


def _root(node: ast.AST) -> ast.AST:
    """The expression an attribute chain starts from: `a` of `a.b.c`, `f(x)` of `f(x).b`."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


def _self_rooted(node: ast.AST) -> bool:
    """Whether `node` is self, super() or an attribute chain on them (the candidate's own objects)."""
    root = _root(node)
    return (isinstance(root, ast.Name) and root.id == "self") or (
        isinstance(root, ast.Call) and isinstance(root.func, ast.Name) and root.func.id == "super")




def _rule_line_what(verdict: tuple[str, str], line: int) -> tuple[str, int, str]:
    return verdict[0], line, verdict[1]
