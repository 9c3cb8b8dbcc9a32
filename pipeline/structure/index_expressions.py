"""Expression half of the kernel walker: the symbolic value of an expression, and the accesses it makes.

In: tree-sitter expression nodes and an environment {variable: `symbolic.Val` or `memory.Ptr`}.
Out: the expression's value; as side effects, access sites (global, shared, constant memory),
barriers and warp primitives recorded in `self.facts` while `self.recording` is on.

Handled: literals, identifiers (locals, constants, #define macros, `__device__` arrays),
threadIdx/blockIdx/blockDim/gridDim fields, arithmetic, shifts and masks (`symbolic`), casts
(including reinterpret_cast to vector types), subscripts of multi-dimensional arrays, pointer
arithmetic and dereference, assignments and compound assignments, ++/--, ?:, min/max, load and
store intrinsics (__ldg, __stcs, ...), atomics, warp shuffles/votes/reductions, cooperative
groups, function-like macros (expanded by re-parsing), and `__device__` functions (inlined with
their arguments bound, depth 4). Statements live in `access.KernelWalker`, which subclasses this.
"""
from __future__ import annotations

import math
from dataclasses import replace

from pipeline.structure import symbolic as S
from pipeline.structure.cuda_ast import FunctionInfo, base_type_name, declarator_name, line, parse_number, text, \
    type_bytes, walk
from pipeline.structure.lanes import bank_conflict_ways, lane_pattern
from pipeline.structure.memory import (BARRIERS, BLOCK_BUILTINS, LOAD_INTRINSICS, MAX_INLINE_DEPTH, STORE_INTRINSICS,
                                       WARP_SHUFFLES, WARP_VOTES, Access, KernelFacts, Ptr, Unit)


class ExpressionWalker:
    """Evaluates expressions of one kernel; `access.KernelWalker` adds the statements."""

    def __init__(self, unit: Unit, kernel: FunctionInfo):
        self.unit, self.kernel = unit, kernel
        self.facts = KernelFacts()
        self.recording = True
        self.depth = 0
        self.weights: list[float] = []  # per enclosing loop: estimated trip count (capped)
        self.guards: list[tuple[bool, bool]] = []  # (thread-dependent, selective) per enclosing condition
        self.divergent_return = False
        self.inline_stack: list[str] = []
        self.returns: list = []
        self.groups: dict[str, str] = {}  # cooperative-groups variable -> 'block' | 'tile' | 'grid'
        self.macro_depth = 0
        self.indirect_locals: set[str] = set()  # local arrays holding values loaded from memory

    def _const_or_sym(self, name: str):
        v = self.unit.consts.get(name)
        return S.const(v) if v is not None else S.sym(name)

    def _bind_param(self, p, env: dict, arg):
        decl = p.child_by_field_name("declarator")
        name = declarator_name(decl)
        if not name:
            return
        ptype = text(p.child_by_field_name("type"))
        is_ptr = decl is not None and decl.type in ("pointer_declarator", "array_declarator")
        if isinstance(arg, Ptr):
            env[name] = arg.retyped(ptype) if is_ptr and base_type_name(ptype) != arg.elem_type and \
                type_bytes(ptype) else arg
        elif arg is not None:
            env[name] = arg
        elif is_ptr:
            env[name] = Ptr(name, "global", base_type_name(ptype), type_bytes(ptype) or 4)
        else:
            env[name] = S.sym(name)

    # ------------------------------------------------------------ recording
    @property
    def guarded(self) -> bool:
        return any(g for g, _ in self.guards)

    @property
    def selective(self) -> bool:
        return any(s for _, s in self.guards)

    def push_guard(self, cond_node, cond) -> None:
        divergent = isinstance(cond, S.Val) and cond.thread_dependent
        equality = cond_node is not None and any(
            n.type == "binary_expression" and text(n.child_by_field_name("operator")) == "=="
            for n in walk(cond_node))
        self.guards.append((divergent, divergent and equality))

    def record(self, ptr: Ptr, kind: str, node) -> None:
        if not self.recording or ptr.space == "local":
            return
        pat = lane_pattern(ptr.offset, ptr.elem_bytes)
        ways = None
        if ptr.space == "shared":
            self.facts.shared_used.add(ptr.base)
            if pat.klass == "broadcast":
                ways = 1
            elif pat.offsets is not None:
                ways = bank_conflict_ways(pat.offsets, ptr.elem_bytes)
        self.facts.accesses.append(Access(ptr.space, kind, ptr.base, text(node)[:80], line(node), pat.klass,
                                          pat.stride_bytes, ptr.elem_type, ptr.elem_bytes, self.depth,
                                          float(math.prod(self.weights)), self.selective, pat.sectors, ways))

    def note_barrier(self, node) -> None:
        if self.recording:
            self.facts.barriers.append((line(node), self.guarded, self.divergent_return))

    def note_warp(self, kind: str) -> None:
        if self.recording:
            self.facts.warp_ops[kind] += 1

    def stmt(self, node, env: dict) -> None:
        """Walk a statement (implemented by access.KernelWalker; inlining needs it)."""
        raise NotImplementedError

    # ---------------------------------------------------------- expressions
    def join(self, x, y, tag: str):
        """The value of a variable after control flow merges (Val with Val, Ptr with Ptr)."""
        if x is y:
            return x
        if isinstance(x, S.Val) and isinstance(y, S.Val):
            return S.join(x, y, tag)
        if isinstance(x, Ptr) and isinstance(y, Ptr) and (x.base, x.space, x.elem_bytes) == (y.base, y.space,
                                                                                             y.elem_bytes):
            return replace(x, offset=S.join(x.offset, y.offset, tag))
        return x if isinstance(x, Ptr) else S.UNKNOWN

    def eval(self, node, env: dict):
        """The value of an expression (a Val or a Ptr), recording the accesses it makes."""
        if node is None:
            return S.UNKNOWN
        t = node.type
        if t == "number_literal":
            v = parse_number(text(node))
            return S.const(v) if v is not None else S.UNKNOWN
        if t in ("true", "false", "null", "nullptr"):
            return S.const(1 if t == "true" else 0)
        if t == "identifier":
            v = self.identifier(text(node), env)
            if isinstance(v, Ptr) and v.scalar:
                self.record(v, "load", node)
                return self.loaded(v)
            return v
        if t in ("parenthesized_expression", "condition_clause"):
            vals = [self.eval(c, env) for c in node.named_children]
            return vals[-1] if vals else S.UNKNOWN
        if t == "field_expression":
            return self.field(node, env)
        if t == "cast_expression":
            v = self.eval(node.child_by_field_name("value"), env)
            ty = text(node.child_by_field_name("type"))
            return v.retyped(ty) if isinstance(v, Ptr) and "*" in ty else v
        if t == "call_expression":
            return self.call(node, env)
        if t in ("subscript_expression", "pointer_expression"):
            if t == "pointer_expression" and text(node.child_by_field_name("operator")) == "&":
                return self.address(node.child_by_field_name("argument"), env) or S.UNKNOWN
            addr = self.address(node, env)
            if addr is None:
                return S.UNKNOWN
            if addr.dims:  # an array object: it decays to a pointer to its first row
                return replace(addr, dims=addr.dims[1:])
            self.record(addr, "load", node)
            return self.loaded(addr)
        if t == "binary_expression":
            return self.binary(node, env)
        if t == "unary_expression":
            v = self.eval(node.child_by_field_name("argument"), env)
            op = text(node.child_by_field_name("operator"))
            if not isinstance(v, S.Val):
                return S.UNKNOWN
            return S.neg(v) if op == "-" else v if op == "+" else S.opaque(f"{op}{text(node)}", v)
        if t == "update_expression":
            return self.assign(node.child_by_field_name("argument"), "+=", S.const(
                -1 if "--" in text(node) else 1), env, node)
        if t == "assignment_expression":
            rhs = self.eval(node.child_by_field_name("right"), env)
            return self.assign(node.child_by_field_name("left"), text(node.child_by_field_name("operator")), rhs,
                               env, node)
        if t == "conditional_expression":
            c = self.eval(node.child_by_field_name("condition"), env)
            a = self.eval(node.child_by_field_name("consequence"), env)
            b = self.eval(node.child_by_field_name("alternative"), env)
            k = c.constant() if isinstance(c, S.Val) else None
            if k is not None:
                return a if k else b
            return self.join(a, b, f"?@{line(node)}:{node.start_point[1]}")
        if t == "comma_expression":
            self.eval(node.child_by_field_name("left"), env)
            return self.eval(node.child_by_field_name("right"), env)
        if t == "sizeof_expression":
            ty = node.child_by_field_name("type")
            n = type_bytes(text(ty)) if ty is not None else None
            return S.const(n) if n else S.sym(text(node))
        vals = [self.eval(c, env) for c in node.named_children]
        return S.opaque(text(node)[:40], *[v for v in vals if isinstance(v, S.Val)])

    def identifier(self, name: str, env: dict):
        if name in env:
            return env[name]
        if name in self.unit.consts:
            return S.const(self.unit.consts[name])
        if name == "warpSize":
            return S.const(32)
        if name in self.unit.macros.objects and self.macro_depth < 20:
            self.macro_depth += 1
            try:
                return self.eval(self.unit.macros.expand_object(name), env)
            finally:
                self.macro_depth -= 1
        if name in self.unit.globals:
            return self.unit.globals[name]
        return S.sym(name)

    def field(self, node, env: dict):
        arg, fld = node.child_by_field_name("argument"), text(node.child_by_field_name("field"))
        base = text(arg)
        if base == "threadIdx" and fld in ("x", "y", "z"):
            return S.sym("t" + fld)
        if base in BLOCK_BUILTINS:
            return S.sym(f"{base}.{fld}")
        v = self.eval(arg, env)
        if isinstance(v, Ptr):  # p->field: a load we cannot size; count it as the element
            if not v.dims and "->" in text(node):
                self.record(v, "load", node)
                return self.loaded(v)
            return S.UNKNOWN
        return v

    def loaded(self, addr: Ptr) -> S.Val:
        """The value read from an address: uniform if every lane reads the same address."""
        if addr.space == "local":
            return S.Val(None, indirect=addr.base in self.indirect_locals)
        if addr.offset.lane_dependent:
            return S.Val(None, indirect=True)
        prefix = "~" if addr.offset.thread_dependent else ""
        return S.Val(S.Poly.sym(f"{prefix}load:{addr.base}[{addr.offset.poly}]"), indirect=True)

    def address(self, node, env: dict) -> Ptr | None:
        """The address an lvalue expression names (None when it is not memory we track)."""
        t = node.type
        if t == "parenthesized_expression" and node.named_children:
            return self.address(node.named_children[-1], env)
        if t == "identifier":
            v = self.identifier(text(node), env)
            return v if isinstance(v, Ptr) else None
        if t == "subscript_expression":
            base = self.eval(node.child_by_field_name("argument"), env)
            idx_nodes = node.child_by_field_name("indices")
            idx_nodes = idx_nodes.named_children if idx_nodes is not None else []
            idx = self.eval(idx_nodes[0], env) if idx_nodes else S.UNKNOWN
            if not isinstance(base, Ptr):
                return None
            return self.index(base, idx if isinstance(idx, S.Val) else S.UNKNOWN)
        if t == "pointer_expression" and text(node.child_by_field_name("operator")) == "*":
            p = self.eval(node.child_by_field_name("argument"), env)
            return p if isinstance(p, Ptr) else None
        v = self.eval(node, env)
        return v if isinstance(v, Ptr) else None

    @staticmethod
    def index(p: Ptr, idx: S.Val) -> Ptr:
        """p + idx: the location of the idx-th object p points to (an element, or a row of `dims`)."""
        row = S.const(1)
        for d in p.dims:
            row = S.mul(row, d if isinstance(d, S.Val) else S.const(d))
        step = S.mul(row, S.const(p.elem_bytes))
        return replace(p, offset=S.add(p.offset, S.mul(idx, step)))

    def binary(self, node, env: dict):
        op = text(node.child_by_field_name("operator"))
        a, b = self.eval(node.child_by_field_name("left"), env), self.eval(node.child_by_field_name("right"), env)
        label = text(node)[:60]
        if isinstance(a, Ptr) and isinstance(b, S.Val) and op in "+-":
            return self.index(a, b if op == "+" else S.neg(b))
        if isinstance(b, Ptr) and isinstance(a, S.Val) and op == "+":
            return self.index(b, a)
        if isinstance(a, Ptr) or isinstance(b, Ptr):
            return S.opaque(label, *[x for x in (a, b) if isinstance(x, S.Val)])
        return self.arith(op, a, b, label)

    @staticmethod
    def arith(op: str, a: S.Val, b: S.Val, label: str) -> S.Val:
        if op == "+":
            return S.add(a, b)
        if op == "-":
            return S.sub(a, b)
        if op == "*":
            return S.mul(a, b)
        if op == "/":
            return S.div(a, b, label)
        if op == "%":
            return S.mod(a, b, label)
        if op == "<<":
            return S.shift_left(a, b, label)
        if op == ">>":
            return S.shift_right(a, b, label)
        if op == "&":
            return S.bit_and(a, b, label)
        return S.opaque(label, a, b)

    def assign(self, left, op: str, rhs, env: dict, node):
        if left is None:
            return S.UNKNOWN
        if left.type == "identifier":
            name = text(left)
            old = env.get(name, self.identifier(name, env))
            if isinstance(old, Ptr) and old.scalar:
                if op != "=":
                    self.record(old, "load", left)
                self.record(old, "store", left)
                return rhs
            if op == "=":
                new = rhs
            elif isinstance(old, Ptr) and isinstance(rhs, S.Val) and op in ("+=", "-="):
                new = self.index(old, rhs if op == "+=" else S.neg(rhs))
            elif isinstance(old, S.Val) and isinstance(rhs, S.Val):
                new = self.arith(op[:-1], old, rhs, f"{name}{op}{text(node)[:40]}")
            else:
                new = S.UNKNOWN
            env[name] = new
            return new
        if left.type == "field_expression" and text(left.child_by_field_name("argument")) in env and \
                isinstance(env[text(left.child_by_field_name("argument"))], S.Val):
            return rhs  # v.x = ... on a local vector value
        addr = self.address(left, env)
        if addr is not None and addr.space == "local" and isinstance(rhs, S.Val) and rhs.indirect:
            self.indirect_locals.add(addr.base)
        if addr is not None and not addr.dims:
            if op != "=":
                self.record(addr, "load", left)
            self.record(addr, "store", left)
        return rhs

    def call(self, node, env: dict):
        fn = node.child_by_field_name("function")
        args_node = node.child_by_field_name("arguments")
        arg_nodes = args_node.named_children if args_node is not None else []
        name = text(fn)
        if fn is not None and fn.type == "template_function":
            tname = text(fn.child_by_field_name("name"))
            if tname.endswith("_cast") and arg_nodes:
                v = self.eval(arg_nodes[0], env)
                targs = fn.child_by_field_name("arguments")
                ty = text(targs.named_children[0]) if targs is not None and targs.named_children else ""
                return v.retyped(ty) if isinstance(v, Ptr) and "*" in ty else v
            name = tname
        if name in self.unit.macros.functions and self.macro_depth < 20:
            expansion = self.unit.macros.expand_call(name, [text(a) for a in arg_nodes])
            if expansion is not None:
                self.macro_depth += 1
                try:
                    return self.eval(expansion, env)
                finally:
                    self.macro_depth -= 1
        short = name.split("::")[-1]
        if short in BARRIERS:
            for a in arg_nodes:
                self.eval(a, env)
            self.note_barrier(node)
            return S.sym(f"{short}@{line(node)}")
        if short == "__syncwarp":
            self.note_warp("syncwarp")
            return S.const(0)
        if fn is not None and fn.type == "field_expression":
            return self.method(fn, arg_nodes, env, node)
        if name.startswith(("cg::", "cooperative_groups::")):
            self.note_warp("reduce" if short.startswith("reduce") else "coop_groups")
        vals = [self.eval(a, env) for a in arg_nodes]
        if short in LOAD_INTRINSICS and vals and isinstance(vals[0], Ptr):
            self.record(vals[0], "load", node)
            return self.loaded(vals[0])
        if short in STORE_INTRINSICS and vals and isinstance(vals[0], Ptr):
            self.record(vals[0], "store", node)
            return S.const(0)
        if short.startswith("atomic") and vals and isinstance(vals[0], Ptr):
            self.record(vals[0], "atomic", node)
            return S.Val(None, indirect=True)
        if short in WARP_SHUFFLES:
            self.note_warp("shuffle")
            return S.Val(None)
        if short in WARP_VOTES:
            self.note_warp("vote")
            return S.opaque(short, *[v for v in vals if isinstance(v, S.Val)][:1])
        if short.startswith("__reduce_") and short.endswith("_sync"):
            self.note_warp("reduce")
            return S.sym(f"{short}@{line(node)}")
        scalars = [v for v in vals if isinstance(v, S.Val)]
        if short in ("min", "max", "umin", "umax", "llmin", "llmax") and len(scalars) == 2:
            ca, cb = scalars[0].constant(), scalars[1].constant()
            if ca is not None and cb is not None:
                return S.const(min(ca, cb) if "min" in short else max(ca, cb))
            return S.join(scalars[0], scalars[1], f"{short}@{line(node)}:{node.start_point[1]}")
        if short in self.unit.device_functions:
            return self.inline(short, vals, env)
        return S.opaque(f"{short}({text(args_node)[:40]})", *scalars)

    def method(self, fn, arg_nodes, env: dict, node):
        obj, meth = text(fn.child_by_field_name("argument")), text(fn.child_by_field_name("field"))
        vals = [self.eval(a, env) for a in arg_nodes]
        kind = self.groups.get(obj) or ("block" if "this_thread_block" in obj else
                                        "grid" if "this_grid" in obj else None)
        if meth == "sync" and kind in ("block", "grid"):
            self.note_barrier(node)
        elif meth == "sync" and kind == "tile":
            self.note_warp("syncwarp")
        elif meth.startswith("shfl"):
            self.note_warp("shuffle")
            return S.Val(None)
        elif meth in ("ballot", "any", "all", "match_any", "match_all"):
            self.note_warp("vote")
        elif meth == "thread_rank":  # a group's linear thread index: consecutive across a warp
            return S.sym(S.LANE)
        elif meth == "meta_group_rank":  # which tile of the block: uniform within a warp
            return S.sym(f"~{obj}.meta_group_rank")
        return S.opaque(f"{obj}.{meth}@{line(node)}", *[v for v in vals if isinstance(v, S.Val)])

    def inline(self, name: str, vals: list, env: dict):
        """Evaluate a __device__ function's body with its parameters bound to the call's values."""
        candidates = [f for f in self.unit.device_functions[name] if len(f.params) == len(vals)]
        if not candidates or name in self.inline_stack or len(self.inline_stack) >= MAX_INLINE_DEPTH:
            return S.opaque(name, *[v for v in vals if isinstance(v, S.Val)])
        fn = candidates[0]
        local: dict = {}
        for p, v in zip(fn.params, vals):
            self._bind_param(p, local, v)
        saved_returns, saved_groups = self.returns, dict(self.groups)
        self.returns = []
        self.inline_stack.append(name)
        self.stmt(fn.body, local)
        self.inline_stack.pop()
        results, self.returns = self.returns, saved_returns
        self.groups = saved_groups
        out = results[0] if results else S.const(0)
        for r in results[1:]:
            out = self.join(out, r, f"{name}#ret")
        return out
