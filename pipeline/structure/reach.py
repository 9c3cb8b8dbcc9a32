"""Which kernels of a source can run: those reachable from its host entry points by launches.

In: a tree-sitter parse of CUDA source (`cuda_ast`) and its entry points: host function names,
or `C_ENTRY` for "the function with C linkage" (c2cuda exports its entry that way; with several
C-linkage functions, which one is the entry is not known here, so each is only a possible root),
or None for a source analysed on its own (the CLI, the ranker: its one top-level host function,
else each top-level one as a possible root). Out: a `Reach`: the kernels
launched for certain (`definite`), those that may be launched (`possible`), and the kernels
defined but never launched (`unlaunched`).

The walk follows host calls, `<<<...>>>` launches and the launch APIs (`cudaLaunchKernel`,
`cudaLaunchCooperativeKernel`, `cudaLaunchKernelEx`...) from the entry points, through
functions of any kind (a kernel's launches and device calls count once the kernel counts).
Code that cannot run is skipped: a branch whose condition folds to a constant (`if (0)`,
`if constexpr (false)`, `while (0)`, `#if 0`), statements after an unconditional `return` or
`throw`. What the walk cannot resolve makes kernels *possible*, never definite: a kernel or
host function named other than by a call (a function pointer, `&k`, an argument), a name used
by a macro, code under a preprocessor condition it cannot fold, and a launch through a pointer
(which makes every kernel possible). `score.conservative_combine` counts a possible kernel only
where it lowers the score, so nothing unresolved can raise it. A launch under a run-time
condition counts as definite: which branches run is not known at compile time (the structure
term of the reward only adds to a measured speedup for that reason).
Each function body is scanned once (memoised) and each node once per scan: linear in the source.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from pipeline.structure import cuda_ast as A

C_ENTRY = 'extern "C"'
# launch APIs -> index of the argument naming the kernel (None: a driver handle, never resolvable)
LAUNCH_APIS = {"cudaLaunchKernel": 0, "cudaLaunchCooperativeKernel": 0, "cudaLaunchKernelEx": 1,
               "cudaLaunchKernelExC": 1, "cuLaunchKernel": None, "cuLaunchKernelEx": None,
               "cuLaunchCooperativeKernel": None, "cudaGraphAddKernelNode": None,
               "cudaLaunchCooperativeKernelMultiDevice": None}
BINDING_MODULES = ("PYBIND11_MODULE", "TORCH_LIBRARY", "TORCH_LIBRARY_IMPL", "TORCH_LIBRARY_FRAGMENT")
_CONDITIONAL = ("preproc_if", "preproc_ifdef", "preproc_elif", "preproc_else", "preproc_elifdef")
DEFINITE, POSSIBLE = 2, 1


@dataclass
class Reach:
    definite: set[str] = field(default_factory=set)  # kernel names launched on a path from an entry
    possible: set[str] = field(default_factory=set)  # kernel names that may be launched (not in definite)
    unlaunched: list[str] = field(default_factory=list)  # kernels defined in the source and never launched
    entries_found: bool = True  # False when no entry point named was defined
    others: int = POSSIBLE  # mode of a kernel the parse does not see defined (a macro made it): POSSIBLE or DEFINITE

    def mode(self, name: str) -> int:
        """DEFINITE, POSSIBLE or 0 for a kernel name."""
        return DEFINITE if name in self.definite else POSSIBLE if name in self.possible else \
            0 if name in self.unlaunched else self.others


@dataclass
class _Scan:
    """What one function body does: (name, mode) of launches, calls and other references."""
    launches: dict = field(default_factory=dict)
    calls: dict = field(default_factory=dict)
    unresolved: int = 0  # mode of the strongest launch through a pointer (0: none)


def _put(d: dict, name: str, mode: int) -> None:
    if mode > d.get(name, 0):
        d[name] = mode


def _callee_name(fn) -> str:
    """'k' for k, ns::k, k<4>, ns::k<4>; '' for anything else (a pointer, a member, an expression)."""
    while fn is not None:
        if fn.type == "identifier":
            return A.text(fn)
        if fn.type in ("template_function", "qualified_identifier"):
            fn = fn.child_by_field_name("name")
        elif fn.type in ("parenthesized_expression",):
            fn = fn.named_children[0] if fn.named_children else None
        else:
            return ""
    return ""


def _launch_target(arg) -> str:
    """The kernel a launch API's argument names: strips casts, `&` and parentheses."""
    while arg is not None:
        if arg.type == "cast_expression":
            arg = arg.child_by_field_name("value")
        elif arg.type == "pointer_expression" and A.text(arg.child_by_field_name("operator")) == "&":
            arg = arg.child_by_field_name("argument")
        elif arg.type == "parenthesized_expression":
            arg = arg.named_children[0] if arg.named_children else None
        elif arg.type == "call_expression" and _callee_name(arg.child_by_field_name("function")) in (
                "reinterpret_cast", "static_cast", "const_cast"):
            args = arg.child_by_field_name("arguments")
            arg = args.named_children[0] if args is not None and args.named_children else None
        else:
            return _callee_name(arg)
    return ""


class _Walker:
    def __init__(self, root, macros: A.Macros, consts: dict, funcs: list[A.FunctionInfo]):
        self.macros, self.consts = macros, consts
        self.by_name: dict[str, list[A.FunctionInfo]] = {}
        for f in funcs:
            self.by_name.setdefault(f.name, []).append(f)
        self.kernels = {f.name for f in funcs if f.is_kernel}
        self.macro_tokens: dict[str, set[str]] = {}
        self.scans: dict[str, _Scan] = {}

    def _tokens(self, macro: str, seen: set | None = None) -> set[str]:
        """Identifiers a macro's expansion can produce (through the macros it names), memoised."""
        if macro in self.macro_tokens:
            return self.macro_tokens[macro]
        seen = seen if seen is not None else set()
        seen.add(macro)
        body = self.macros.objects.get(macro)
        if body is None:
            body = self.macros.functions[macro][1]
        out: set[str] = set()
        for tok in re.findall(r"[A-Za-z_]\w*", body):
            out.add(tok)
            if tok not in seen and (tok in self.macros.objects or tok in self.macros.functions):
                out |= self._tokens(tok, seen)
        self.macro_tokens[macro] = out
        return out

    def _fold(self, node, local: dict) -> int | None:
        try:
            return A.eval_const(node, {**self.consts, **local}, self.macros)
        except (RecursionError, ValueError, OverflowError):
            return None

    def _reference(self, s: _Scan, name: str, mode: int) -> None:
        """A name used other than by a call: a kernel or function it names may run (possible)."""
        m = min(mode, POSSIBLE)
        if name in self.kernels:
            _put(s.launches, name, m)
        elif name in self.by_name:
            _put(s.calls, name, m)
        elif name in self.macros.objects or name in self.macros.functions:
            for tok in self._tokens(name):
                if tok in self.kernels:
                    _put(s.launches, tok, m)
                elif tok in self.by_name:
                    _put(s.calls, tok, m)

    def scan(self, name: str) -> _Scan:
        """Launches, calls and references of every definition of `name` (memoised)."""
        if name in self.scans:
            return self.scans[name]
        s = _Scan()
        self.scans[name] = s
        for f in self.by_name.get(name, []):
            local: dict = {}
            for n in A.walk(f.body):
                if n.type == "declaration":
                    local.update(A.const_declarations(n, {**self.consts, **local}, self.macros))
            self._scan_body(f.body, s, local)
        return s

    def _scan_body(self, body, s: _Scan, local: dict) -> None:
        stack = [(body, DEFINITE)]
        while stack:
            n, mode = stack.pop()
            t = n.type
            if t in ("if_statement", "while_statement", "for_statement"):
                cond = n.child_by_field_name("condition")
                v = self._fold(cond, local) if cond is not None else None
                live = list(n.children)
                if v == 0:
                    body_field = "consequence" if t == "if_statement" else "body"
                    dead = n.child_by_field_name(body_field)
                    live = [c for c in live if c != dead]
                elif v is not None and t == "if_statement":
                    alt = n.child_by_field_name("alternative")
                    live = [c for c in live if c != alt]
                stack.extend((c, mode) for c in reversed(live))
                continue
            if t == "preproc_if":
                v = self._fold(n.child_by_field_name("condition"), local)
                alt = n.child_by_field_name("alternative")
                kids = [c for c in n.children if c != alt and c.type != "identifier"]
                if v == 0:
                    stack.extend((c, mode) for c in ([alt] if alt is not None else []))
                elif v is not None:
                    stack.extend((c, mode) for c in kids)
                else:
                    stack.extend((c, min(mode, POSSIBLE)) for c in n.children)
                continue
            if t in _CONDITIONAL:
                stack.extend((c, min(mode, POSSIBLE)) for c in n.children)
                continue
            if t == "compound_statement":
                kids, cut = list(n.children), None
                for i, c in enumerate(kids):
                    if c.type in ("return_statement", "throw_statement") and cut is None:
                        cut = i
                    elif cut is not None and c.type in ("labeled_statement", "case_statement"):
                        cut = None  # a label after the return can be jumped to
                    if cut is None or i == cut:
                        stack.append((c, mode))
                continue
            if t == "call_expression":
                fn = n.child_by_field_name("function")
                args = n.child_by_field_name("arguments")
                launch = next((c for c in n.children if c.type == "kernel_call_syntax"), None)
                name = _callee_name(fn)
                if launch is not None:
                    if name in self.kernels:
                        _put(s.launches, name, mode)
                    elif name and name not in self.by_name:  # a kernel defined by a macro, or a pointer
                        _put(s.launches, name, mode)
                        s.unresolved = max(s.unresolved, mode)
                    else:
                        s.unresolved = max(s.unresolved, mode)
                        if fn is not None:
                            stack.append((fn, mode))
                    stack.extend((c, mode) for c in (launch, args) if c is not None)
                    continue
                if name in LAUNCH_APIS:
                    pos = LAUNCH_APIS[name]
                    items = args.named_children if args is not None else []
                    target = _launch_target(items[pos]) if pos is not None and pos < len(items) else ""
                    if target in self.kernels:
                        _put(s.launches, target, mode)
                    else:
                        s.unresolved = max(s.unresolved, mode)
                    stack.extend((c, mode) for c in items if c is not items[pos if pos is not None else 0])
                    if pos is None and items:
                        stack.append((items[0], mode))
                    continue
                if name in self.by_name and name not in self.kernels:
                    _put(s.calls, name, mode)
                    if args is not None:
                        stack.append((args, mode))
                    continue
            if t == "identifier":
                self._reference(s, A.text(n), mode)
                continue
            stack.extend((c, mode) for c in n.children)


def _c_linkage_names(root) -> set[str]:
    """Functions defined or declared inside `extern "C"`."""
    out: set[str] = set()
    for n in A.walk(root):
        if n.type == "linkage_specification" and '"C"' in A.text(n.child_by_field_name("value")):
            for d in A.walk(n):
                if d.type == "function_declarator":
                    out.add(A.declarator_name(d.child_by_field_name("declarator")))
    return out


def bound_functions(root) -> set[str]:
    """Functions named inside PYBIND11_MODULE / TORCH_LIBRARY blocks (what Python can call)."""
    out: set[str] = set()
    for f in A.functions(root):
        if f.name in BINDING_MODULES:
            out |= {A.text(n) for n in A.walk(f.body) if n.type == "identifier"}
    return out


def reachable_kernels(root, macros: A.Macros, consts: dict, funcs: list[A.FunctionInfo],
                      entries: list[str] | None) -> Reach:
    """The kernels reachable from `entries` (see the module docstring); `root` is the parse's root node."""
    w = _Walker(root, macros, consts, funcs)
    host = [f.name for f in funcs if not f.is_kernel and not f.is_device]
    roots: dict[str, int] = {}
    standalone = entries is None
    if entries is None:
        called = {c for f in set(host) for c in w.scan(f).calls}
        top = [h for h in dict.fromkeys(host) if h not in called]
        for h in top:
            roots[h] = DEFINITE if len(top) == 1 or h in BINDING_MODULES else POSSIBLE
    else:
        roots = {n: DEFINITE for n in set(entries) | bound_functions(root) if n in w.by_name}
        if C_ENTRY in entries:  # the entry is one of them: certain only when it is the only one
            c_funcs = sorted(_c_linkage_names(root) & set(host))
            roots.update({n: DEFINITE if len(c_funcs) == 1 else POSSIBLE for n in c_funcs})
    for m in BINDING_MODULES:
        if m in w.by_name:
            roots[m] = DEFINITE
    # breadth-first over (function, mode): a function is rescanned only when its mode rises
    best: dict[str, int] = {}
    launched: dict[str, int] = {}
    unresolved = 0
    todo = list(roots.items())
    while todo:
        name, mode = todo.pop()
        if best.get(name, 0) >= mode:
            continue
        best[name] = mode
        s = w.scan(name)
        unresolved = max(unresolved, min(mode, s.unresolved))
        for k, m in s.launches.items():
            m = min(mode, m)
            if m > launched.get(k, 0):
                launched[k] = m
                if k in w.by_name:
                    todo.append((k, m))
        for c, m in s.calls.items():
            todo.append((c, min(mode, m)))
    reach = Reach(entries_found=bool(roots))
    if standalone and not launched:  # kernels alone (no host code launches any): every kernel counts
        launched = {k: DEFINITE for k in w.kernels}
        reach.others = DEFINITE
    elif not roots or unresolved:  # an entry that is not there, or a launch through a pointer: any kernel may run
        for k in w.kernels:
            launched.setdefault(k, POSSIBLE)
    reach.definite = {k for k, m in launched.items() if m == DEFINITE}
    reach.possible = {k for k, m in launched.items() if m == POSSIBLE}
    reach.unlaunched = sorted(w.kernels - set(launched))
    return reach
