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
`if constexpr (false)`, `while (0)`, `#if 0`, a `switch`, `?:`, `&&` and `||` on a constant),
statements after a jump (`return`, `throw`, `break`, `continue`, `goto`) or a call that never returns
(`exit`, `abort`, `__builtin_unreachable`... when the source does not define the name) up to the next
statement holding a label, and unevaluated operands (`sizeof`, `decltype`, `noexcept`).
What the walk cannot resolve makes kernels *possible*, never definite: a lambda's code where it is
not called by the name it is stored under (or invoked where it is written), a `catch` handler, both
sides of an `if constexpr` the parse cannot fold (a template parameter), each definition of an
overloaded name (which one a call reaches is not resolved; the C-linkage one of an entry is), a kernel or
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
# calls that never return: what follows them in a block cannot run (unless the source defines the name itself)
NORETURN = {"exit", "_Exit", "quick_exit", "abort", "terminate", "__builtin_unreachable", "__builtin_trap", "__trap",
            "unreachable"}
# operands the compiler never evaluates: nothing named in them runs
UNEVALUATED = ("sizeof_expression", "alignof_expression", "decltype", "offsetof_expression", "static_assert_declaration",
               "noexcept", "requires_expression", "requires_clause", "type_descriptor")
_JUMPS = ("return_statement", "throw_statement", "break_statement", "continue_statement", "goto_statement")
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
        self.c_linkage = _c_linkage_names(root)
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
        defs = self.by_name.get(name, [])
        sole_c = [f for f in defs if f.name in self.c_linkage]
        for f in defs:
            local: dict = {}
            lambdas: dict = {}
            for n in A.walk(f.body):
                if n.type == "declaration":
                    local.update(A.const_declarations(n, {**self.consts, **local}, self.macros))
                elif n.type == "init_declarator":
                    value = n.child_by_field_name("value")
                    if value is not None and value.type == "lambda_expression":
                        lambdas[A.declarator_name(n.child_by_field_name("declarator"))] = value
            # overloads: which definition a call reaches is not resolved here, so each may run (possible);
            # a C-linkage one, the entry, runs for certain
            top = DEFINITE if len(defs) == 1 or (len(sole_c) == 1 and f is sole_c[0]) else POSSIBLE
            self._scan_body(f.body, s, local, lambdas, top)
        return s

    def _noreturn(self, stmt) -> bool:
        """A statement that never completes: a jump, or a call of exit/abort/... the source does not define."""
        if stmt.type in _JUMPS:
            return True
        if stmt.type != "expression_statement" or not stmt.named_children:
            return False
        call = stmt.named_children[0]
        if call.type != "call_expression":
            return False
        name = _callee_name(call.child_by_field_name("function"))
        return name in NORETURN and name not in self.by_name and name not in self.macros.objects and \
            name not in self.macros.functions

    def _live_statements(self, kids: list) -> list:
        """The statements of a block that can run: none after one that never completes, until a label
        (anything holding a label can be jumped into)."""
        out, cut = [], False
        for c in kids:
            if cut and (c.type == "case_statement" or any(d.type == "labeled_statement" for d in A.walk(c))):
                cut = False
            if not cut:
                out.append(c)
                cut = self._noreturn(c)
        return out

    def _switch_live(self, n, local: dict) -> list | None:
        """The case statements a switch on a constant can run (from the matching case, falling through
        while no case ends in a jump); None when its condition is not a constant."""
        v = self._fold(n.child_by_field_name("condition"), local)
        body = n.child_by_field_name("body")
        if v is None or body is None:
            return None
        cases = [c for c in body.named_children if c.type == "case_statement"]
        if len(cases) != len([c for c in body.named_children if c.type != "comment"]):
            return None  # statements outside any case: read as usual
        start = next((i for i, c in enumerate(cases) if c.child_by_field_name("value") is not None and
                      self._fold(c.child_by_field_name("value"), local) == v), None)
        if start is None:
            if any(c.child_by_field_name("value") is not None and
                   self._fold(c.child_by_field_name("value"), local) is None for c in cases):
                return None
            start = next((i for i, c in enumerate(cases) if c.child_by_field_name("value") is None), len(cases))
        live = []
        for c in cases[start:]:
            live.append(c)
            stmts = [k for k in c.named_children if k != c.child_by_field_name("value")]
            if stmts and self._live_statements(stmts) != stmts or (stmts and self._noreturn(stmts[-1])):
                break
        return live

    def _scan_body(self, body, s: _Scan, local: dict, lambdas: dict | None = None, top: int = DEFINITE) -> None:
        """Launches, calls and references of one body into `s`. `lambdas`: the body's lambdas by the name they
        are stored under (their code counts where it is called; elsewhere a lambda is only possible)."""
        lambdas = lambdas or {}
        stack = [(body, top)]
        seen_lambdas: set = set()

        def run_lambda(lam, mode: int) -> None:
            key = (lam.id, mode)
            if key not in seen_lambdas:
                seen_lambdas.add(key)
                stack.extend((c, mode) for c in lam.children)
        while stack:
            n, mode = stack.pop()
            t = n.type
            if t in UNEVALUATED:
                continue
            if t == "lambda_expression":  # a lambda that is only defined (or passed on) may never run
                run_lambda(n, min(mode, POSSIBLE))
                continue
            if t == "catch_clause":  # runs only if something throws
                stack.extend((c, min(mode, POSSIBLE)) for c in n.children)
                continue
            if t == "conditional_expression" or (t == "binary_expression" and A.text(
                    n.child_by_field_name("operator")) in ("&&", "||", "and", "or")):
                first = n.child_by_field_name("condition" if t == "conditional_expression" else "left")
                v = self._fold(first, local)
                dead = None
                if v is not None and t == "conditional_expression":
                    dead = n.child_by_field_name("alternative" if v else "consequence")
                elif v is not None and bool(v) == (A.text(n.child_by_field_name("operator")) in ("||", "or")):
                    dead = n.child_by_field_name("right")  # short-circuited
                stack.extend((c, mode) for c in reversed(n.children) if c != dead)
                continue
            if t == "switch_statement":
                live = self._switch_live(n, local)
                if live is not None:
                    stack.extend((c, mode) for c in reversed(live))
                    continue
            if t == "if_statement" and any(c.type == "constexpr" for c in n.children) and \
                    self._fold(n.child_by_field_name("condition"), local) is None:
                # a compile-time branch on what the parse cannot fold (a template parameter): either side may be
                # the one compiled in
                stack.extend((c, min(mode, POSSIBLE)) for c in reversed(n.children))
                continue
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
            if t in ("compound_statement", "case_statement"):
                stack.extend((c, mode) for c in reversed(self._live_statements(list(n.children))))
                continue
            if t == "call_expression":
                fn = n.child_by_field_name("function")
                args = n.child_by_field_name("arguments")
                launch = next((c for c in n.children if c.type == "kernel_call_syntax"), None)
                name = _callee_name(fn)
                if fn is not None and (fn.type == "lambda_expression" or name in lambdas) and launch is None:
                    run_lambda(fn if fn.type == "lambda_expression" else lambdas[name], mode)  # a lambda called here
                    if args is not None:
                        stack.append((args, mode))
                    continue
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
