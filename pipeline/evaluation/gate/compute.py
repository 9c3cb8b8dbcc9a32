"""The static gate, torch compute in forward: what a gate profile without torch_compute (strict) refuses.

    check_compute(tree, aliases, out)   # appends torch-compute-in-forward findings to `out`

In every function forward can reach (all but __init__ and a copied reference): torch calls other than
allocation and device queries, calling or iterating a torch module kept on self, the @ operator, tensor
methods that compute (COMPUTE_METHODS on any receiver; on a known tensor, every method but metadata, views
and allocation), .to(...) other than to a device, and operators applied to tensors (`x * (x > 0)`, `-x`,
`x > 0`). Which expressions are tensors is worked out per function (_check_tensor_operations); arithmetic on
shapes stays allowed. The child's runtime check (torch_guard) refuses what this misses.
"""
from __future__ import annotations

import ast
import re

from pipeline.core.records import Finding
from pipeline.evaluation.compute_ops import ALLOWED_OPS, VIEW_COMPOSITES  # noqa: F401  (re-exported)
from pipeline.evaluation.gate.cuda import COMPUTE_METHODS
from pipeline.evaluation.gate.python_names import (
    LOAD_INLINE,
    NOT_SUBMODULES,
    TORCH_ALLOCATIONS,
    qualified_name,
    reference_nodes,
    rule_finding,
    short_text,
)


def check_compute(tree: ast.Module, aliases: dict[str, str], out: list[Finding]) -> None:
    """No torch compute in any function the forward pass can reach (all but __init__ and the copied reference)."""
    skip = reference_nodes(tree) | {id(x) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "__init__"
                              for x in ast.walk(n)}
    checked = {id(x) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
               for x in ast.walk(n)} - skip
    exts, exported, torch_attrs = set(), set(), {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign) and len(n.targets) == 1:
            target, value = ast.unparse(n.targets[0]), n.value
            q = qualified_name(value.func if isinstance(value, ast.Call) else value, aliases) or ""
            if q == LOAD_INLINE or ast.unparse(value) in exts:
                exts.add(target)
            elif q.startswith("torch.") and q not in NOT_SUBMODULES and target.startswith("self."):
                torch_attrs[target] = q
        if isinstance(n, ast.keyword) and n.arg == "functions":
            exported |= {c.value for c in ast.walk(n.value) if isinstance(c, ast.Constant)}
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    for n in ast.walk(tree):
        if id(n) not in checked:
            continue
        line = getattr(n, "lineno", 1)
        if isinstance(n, (ast.BinOp, ast.AugAssign)) and isinstance(n.op, ast.MatMult):
            out.append(rule_finding("torch-compute-in-forward", line, "uses the @ operator (a torch matmul)"))
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and ast.unparse(n) in torch_attrs:
            up = parents.get(id(n))  # reading self.linear.weight is fine; calling or iterating self.linear is not
            if not (isinstance(up, ast.Attribute) and up.attr not in ("forward", "__call__", "_call_impl")):
                out.append(rule_finding("torch-compute-in-forward", line, f"calls or passes on {ast.unparse(n)}, "
                                                                f"a torch module or function ({torch_attrs[ast.unparse(n)]})"))
        if not isinstance(n, ast.Call):
            continue
        q = qualified_name(n.func, aliases)
        if q and q.startswith("torch.") and q not in TORCH_ALLOCATIONS and not q.startswith(
                ("torch.cuda.", "torch.utils.", "torch.nn.init.")):
            out.append(rule_finding("torch-compute-in-forward", line, f"calls {q}"))
        elif q is None and isinstance(n.func, ast.Attribute) and n.func.attr in COMPUTE_METHODS \
                and n.func.attr not in exported and ast.unparse(n.func.value) not in exts:
            out.append(rule_finding("torch-compute-in-forward", line, f"calls the tensor method .{n.func.attr}()"))
        elif q is None and isinstance(n.func, ast.Attribute) and n.func.attr == "to" and not _device_only(n):
            out.append(rule_finding("torch-compute-in-forward", line, "converts with .to(...) other than to a device"))
    _check_tensor_operations(tree, aliases, checked, parents, exts, exported, torch_attrs, out)


# Tensor methods forward may call under a profile without torch_compute: metadata, views, layout and
# allocation. Any other method called on a tensor (x.clamp_min(0.), x.threshold(...)) computes.
_NO_COMPUTE_METHODS = frozenset("""size dim numel stride data_ptr contiguous is_contiguous view view_as reshape reshape_as
flatten unflatten squeeze unsqueeze transpose permute t expand expand_as narrow select unbind split chunk element_size
nelement get_device storage_offset ndimension is_floating_point is_complex detach requires_grad_ cuda new_empty
new_zeros new_empty_strided untyped_storage movedim swapaxes swapdims as_strided dim_order to type""".split())
# methods whose result is a number, not a tensor (arithmetic on it is shape arithmetic)
_SCALAR_METHODS = frozenset("""size dim numel stride data_ptr is_contiguous element_size nelement get_device
storage_offset ndimension is_floating_point is_complex item tolist dim_order untyped_storage""".split())
_TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "data", "real", "imag", "grad"})
# torch calls in forward whose result is not a tensor
_NOT_TENSOR_CALLS = {"torch.Size", "torch.device", "torch.finfo", "torch.iinfo", "torch.is_tensor", "torch.no_grad",
                     "torch.inference_mode", "torch.get_default_dtype"}
_NOT_TENSOR_ANNOTATIONS = re.compile(r"(int|float|bool|str|bytes|tuple|list|dict|None|Optional\[(int|float|bool)\])\b.*")


def _check_tensor_operations(tree: ast.Module, aliases: dict[str, str], checked: set[int], parents: dict[int, ast.AST],
                             exts: set[str], exported: set[str], torch_attrs: dict[str, str], out: list[Finding]) -> None:
    """Operators and methods applied to tensors in code forward can reach: `x * (x > 0)`, `-x`, `x.clamp_min(0.)`.

    A tensor is: a parameter of forward (other than self, unless annotated int, float, ...), a parameter of a
    function of the file that forward's code calls with a tensor there, a name assigned a tensor, self.X assigned
    a torch tensor or nn.Parameter in __init__ (or registered as a buffer), the weight or bias of a torch module of
    self, what the extension's functions and torch calls return, and items, views and results of the above.
    Arithmetic on shapes (x.size(0) * 2, x.shape[1] + 1, x.numel()) is not torch compute.
    """
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
             and id(n) in checked]
    by_name: dict[str, list] = {}
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            by_name.setdefault(n.name, []).append(n)
        elif isinstance(n, ast.Assign) and isinstance(n.value, ast.Lambda):
            for t in n.targets:
                by_name.setdefault(ast.unparse(t).removeprefix("self."), []).append(n.value)
    tensor_attrs = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call):
            q = qualified_name(n.value.func, aliases) or ""
            if q in ("torch.nn.Parameter", "torch.nn.Buffer") or (
                    q.startswith("torch.") and not q.startswith(("torch.nn.", "torch.cuda.", "torch.utils."))
                    and q not in _NOT_TENSOR_CALLS):
                tensor_attrs |= {ast.unparse(t) for t in n.targets if ast.unparse(t).startswith("self.")}
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "register_buffer" \
                and n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str):
            tensor_attrs.add(f"self.{n.args[0].value}")
    names: dict[int, set[str]] = {id(f): set() for f in funcs}

    def params(f) -> list[ast.arg]:
        a = f.args
        return a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]

    for f in funcs:
        if getattr(f, "name", "") == "forward":
            names[id(f)] |= {a.arg for a in params(f)[1:] if a.annotation is None
                             or not _NOT_TENSOR_ANNOTATIONS.fullmatch(ast.unparse(a.annotation))}
        names[id(f)] |= {a.arg for a in params(f) if a.annotation is not None
                         and qualified_name(a.annotation, aliases) == "torch.Tensor"}

    def enclosing(node) -> list:
        chain, n = [], parents.get(id(node))
        while n is not None:
            if id(n) in names:
                chain.append(n)
            n = parents.get(id(n))
        return chain

    def tensor(e, scope: set[str]) -> bool:
        if isinstance(e, ast.Name):
            return e.id in scope
        if isinstance(e, ast.Attribute):
            text = ast.unparse(e)
            return text in tensor_attrs or (e.attr in _TENSOR_ATTRS and tensor(e.value, scope)) or (
                ast.unparse(e.value) in torch_attrs and bool(re.fullmatch(r"\w*(weight|bias)\w*|running_\w+", e.attr)))
        if isinstance(e, ast.Subscript):
            return tensor(e.value, scope)
        if isinstance(e, (ast.Starred, ast.NamedExpr)):
            return tensor(e.value, scope)
        if isinstance(e, ast.Call):
            q = qualified_name(e.func, aliases) or ""
            if q.startswith("torch.") and q not in _NOT_TENSOR_CALLS:
                return True
            return isinstance(e.func, ast.Attribute) and (
                (tensor(e.func.value, scope) and e.func.attr not in _SCALAR_METHODS)
                or ast.unparse(e.func.value) in exts)
        if isinstance(e, ast.BinOp):
            return tensor(e.left, scope) or tensor(e.right, scope)
        if isinstance(e, ast.UnaryOp):
            return tensor(e.operand, scope)
        if isinstance(e, ast.IfExp):
            return tensor(e.body, scope) or tensor(e.orelse, scope)
        if isinstance(e, (ast.Tuple, ast.List)):
            return any(tensor(x, scope) for x in e.elts)
        return False

    def scope_of(node) -> set[str]:
        return set().union(*(names[id(f)] for f in enclosing(node)))

    for _ in range(8):  # names assigned tensors, and parameters given tensors, until nothing changes
        before = sum(map(len, names.values()))
        for f in funcs:
            for n in ast.walk(f):
                if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr, ast.For,
                                  ast.comprehension)) and getattr(n, "value", getattr(n, "iter", None)) is not None:
                    value = n.iter if isinstance(n, (ast.For, ast.comprehension)) else n.value
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                    inner = enclosing(n)[0] if enclosing(n) else f
                    if tensor(value, scope_of(n)):
                        names[id(inner)] |= {t.id for tt in targets for t in ast.walk(tt) if isinstance(t, ast.Name)}
                elif isinstance(n, ast.Call):
                    callee = n.func.id if isinstance(n.func, ast.Name) else n.func.attr if (
                        isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                        and n.func.value.id == "self") else None
                    targets = [n.func] if isinstance(n.func, ast.Lambda) else by_name.get(callee, [])
                    scope = scope_of(n)
                    for g in (t for t in targets if id(t) in names):
                        ps = params(g)[1:] if _is_method(g, parents) else params(g)
                        for a, p in zip(n.args, ps):
                            if tensor(a, scope):
                                names[id(g)].add(p.arg)
                        for k in n.keywords:
                            if k.arg and tensor(k.value, scope):
                                names[id(g)].add(k.arg)
        if sum(map(len, names.values())) == before:
            break

    for n in ast.walk(tree):
        if id(n) not in checked or not isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.AugAssign, ast.Call)):
            continue
        scope, line = scope_of(n), getattr(n, "lineno", 1)
        if isinstance(n, ast.BinOp) and not isinstance(n.op, ast.MatMult) and (
                tensor(n.left, scope) or tensor(n.right, scope)):
            out.append(rule_finding("torch-compute-in-forward", line, f"applies the operator {_OPS.get(type(n.op), '?')} to a "
                                                            f"tensor ({short_text(n)}), which torch computes"))
        elif isinstance(n, ast.UnaryOp) and not isinstance(n.op, ast.Not) and tensor(n.operand, scope):
            out.append(rule_finding("torch-compute-in-forward", line, f"applies a unary operator to a tensor ({short_text(n)}), "
                                                            f"which torch computes"))
        elif isinstance(n, ast.Compare) and not all(isinstance(o, (ast.Is, ast.IsNot)) for o in n.ops) and any(
                tensor(x, scope) for x in [n.left, *n.comparators]):
            out.append(rule_finding("torch-compute-in-forward", line, f"compares a tensor ({short_text(n)}), which torch computes"))
        elif isinstance(n, ast.AugAssign) and not isinstance(n.op, ast.MatMult) and (
                tensor(n.target, scope) or tensor(n.value, scope)):
            out.append(rule_finding("torch-compute-in-forward", line, f"updates a tensor with {_OPS.get(type(n.op), '?')}= "
                                                            f"({short_text(n)}), which torch computes"))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and tensor(n.func.value, scope) \
                and n.func.attr not in _NO_COMPUTE_METHODS and n.func.attr not in exported \
                and not re.fullmatch(r"__\w+__", n.func.attr):
            out.append(rule_finding("torch-compute-in-forward", line, f"calls the tensor method .{n.func.attr}() on "
                                                            f"{short_text(n.func.value)}"))


def _is_method(f, parents: dict[int, ast.AST]) -> bool:
    """Whether `f` is defined in a class body (its first parameter is self)."""
    return isinstance(parents.get(id(f)), ast.ClassDef)


_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
        ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^", ast.BitAnd: "&", ast.MatMult: "@"}


def _device_only(call: ast.Call) -> bool:
    return all(k.arg in ("device", "non_blocking") for k in call.keywords) and all(
        (isinstance(a, ast.Constant) and isinstance(a.value, str)) or
        (isinstance(a, (ast.Attribute, ast.Name, ast.Call)) and ast.unparse(getattr(a, "func", a)).endswith("device"))
        for a in call.args)
