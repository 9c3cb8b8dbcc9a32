"""Walk one `__global__` kernel's syntax tree and record what its threads do, symbolically.

In: a parsed translation unit (`Unit`) and one kernel (`cuda_ast.FunctionInfo`). Out: `KernelFacts`:
every global/shared/constant memory access site with its coalescing class relative to
threadIdx.x (and, for shared memory, its bank-conflict degree), barriers and whether they sit
under a thread-dependent branch or loop, warp primitives, atomics, loops.

How: an abstract interpreter over statements. Each variable holds a `symbolic.Val` (index
arithmetic as a polynomial in threadIdx.x and uniform symbols) or a `Ptr` (an array plus a byte
offset). Branches are evaluated on copies of the environment and joined; loops are run twice
without recording to find what their body changes (the loop variable keeps its tx term and
gets a fresh symbol for the rest), then once more while recording; each access is weighted by
the trip counts of its loops (constant bounds counted, capped at 16; others 16). `__device__` functions
called from the kernel are inlined (depth 4). Macros are expanded by re-parsing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction

from pipeline.structure import symbolic as S
from pipeline.structure.lanes import bank_conflict_ways, lane_pattern
from pipeline.structure.cuda_ast import (VECTOR_TYPES, FunctionInfo, Macros, base_type_name, declarator_name,
                                         eval_const, line, parse_number, text, type_bytes, walk)

WARP_SHUFFLES = {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync"}
WARP_VOTES = {"__ballot_sync", "__any_sync", "__all_sync", "__activemask", "__match_any_sync", "__match_all_sync"}
BARRIERS = {"__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or", "__barrier_sync"}
LOAD_INTRINSICS = {"__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv"}
STORE_INTRINSICS = {"__stcg", "__stcs", "__stwb", "__stwt"}
BLOCK_BUILTINS = {"blockIdx", "blockDim", "gridDim"}
MAX_INLINE_DEPTH = 4
UNKNOWN_TRIPS = 16  # weight of a loop whose trip count is not a constant; known counts are capped here


@dataclass
class Ptr:
    """An address: `base` array in a memory `space`, a byte offset, and remaining row extents."""
    base: str
    space: str  # global | shared | local | constant
    elem_type: str
    elem_bytes: int
    offset: S.Val = field(default_factory=lambda: S.const(0))
    dims: tuple = ()  # extents of the array object pointed to: () for an element, (33,) for a row of 33
    scalar: bool = False  # a `__shared__` scalar: naming it reads or writes memory

    def retyped(self, type_text: str) -> "Ptr":
        name = base_type_name(type_text)
        return replace(self, elem_type=name, elem_bytes=type_bytes(name) or 4, dims=())


@dataclass
class Access:
    """One memory access site, as seen by a warp."""
    space: str
    kind: str  # load | store | atomic
    array: str
    text: str
    line: int
    klass: str  # coalesced | strided | broadcast | indirect | unknown
    stride_bytes: object  # Fraction, symbolic Poly, or None
    elem_type: str
    elem_bytes: int
    loop_depth: int
    weight: float  # product of the enclosing loops' estimated trip counts (each capped at 16)
    selective: bool  # under a thread-dependent equality test (`if (lane == 0)`): few threads run it
    sectors: float | None = None  # 32-byte sectors one warp request touches (global), None if unknown
    bank_ways: int | None = None  # shared: worst distinct words per bank, None if unknown

    @property
    def vector(self) -> bool:
        return self.elem_type in VECTOR_TYPES


@dataclass
class KernelFacts:
    accesses: list[Access] = field(default_factory=list)
    barriers: list[tuple[int, bool, bool]] = field(default_factory=list)  # (line, divergent, after divergent return)
    warp_ops: dict[str, int] = field(default_factory=lambda: {"shuffle": 0, "vote": 0, "reduce": 0, "syncwarp": 0,
                                                              "coop_groups": 0})
    loops: int = 0
    grid_stride_loops: int = 0
    max_loop_depth: int = 0
    shared_used: set = field(default_factory=set)


@dataclass
class Unit:
    """What a kernel's analysis needs from its translation unit."""
    macros: Macros
    consts: dict
    device_functions: dict  # name -> [FunctionInfo]
    globals: dict  # name -> Ptr (__device__ and __constant__ arrays)


class KernelWalker:
    """Abstract interpretation of one kernel; call `run()` once."""

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

    # ---------------------------------------------------------------- entry
    def run(self) -> KernelFacts:
        env: dict = {}
        for p in self.kernel.params:
            self._bind_param(p, env, None)
        for t in self.kernel.template_params:
            env.setdefault(t, self._const_or_sym(t))
        self.stmt(self.kernel.body, env)
        return self.facts

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
                                          math.prod(self.weights), self.selective, pat.sectors, ways))

    def note_barrier(self, node) -> None:
        if self.recording:
            self.facts.barriers.append((line(node), self.guarded, self.divergent_return))

    def note_warp(self, kind: str) -> None:
        if self.recording:
            self.facts.warp_ops[kind] += 1

    # ----------------------------------------------------------- statements
    def stmt(self, node, env: dict) -> None:
        if node is None:
            return
        t = node.type
        if t in ("compound_statement", "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif",
                 "else_clause"):
            for c in node.named_children:
                self.stmt(c, env)
        elif t == "declaration":
            self.declaration(node, env)
        elif t == "expression_statement":
            for c in node.named_children:
                self.eval(c, env)
        elif t == "if_statement":
            self.if_stmt(node, env)
        elif t == "for_statement":
            self.loop(node, env, node.child_by_field_name("initializer"), node.child_by_field_name("condition"),
                      node.child_by_field_name("update"), node.child_by_field_name("body"))
        elif t == "while_statement":
            self.loop(node, env, None, node.child_by_field_name("condition"), None, node.child_by_field_name("body"))
        elif t == "do_statement":
            self.loop(node, env, None, node.child_by_field_name("condition"), None, node.child_by_field_name("body"))
        elif t == "return_statement":
            vals = [self.eval(c, env) for c in node.named_children]
            self.returns.extend(vals)
            if self.guarded and not self.inline_stack:
                self.divergent_return = True
        elif t == "switch_statement":
            cond = self.eval(node.child_by_field_name("condition"), env)
            self.push_guard(None, cond)
            branch = dict(env)
            self.stmt(node.child_by_field_name("body"), branch)
            self.guards.pop()
            self.merge(env, env, branch, line(node))
        elif t in ("labeled_statement", "case_statement"):
            for c in node.named_children:
                if c.type not in ("statement_identifier", "number_literal", "identifier"):
                    self.stmt(c, env)

    def declaration(self, node, env: dict) -> None:
        quals = {text(c) for c in node.children if c.type in ("type_qualifier", "storage_class_specifier")} | \
            {text(c) for c in node.children if not c.is_named}
        type_text = text(node.child_by_field_name("type"))
        for d in node.children_by_field_name("declarator"):
            target = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
            name = declarator_name(d)
            if target is not None and target.type == "array_declarator":
                env[name] = self.array(target, type_text, "shared" if "__shared__" in quals else "local")
                if d.type == "init_declarator":
                    self.eval(d.child_by_field_name("value"), env)
                continue
            if "__shared__" in quals:  # a scalar in shared memory
                env[name] = Ptr(name, "shared", base_type_name(type_text), type_bytes(type_text) or 4, scalar=True)
                continue
            if d.type != "init_declarator":
                env[name] = S.sym(f"{name}@{line(d)}")
                continue
            value_node = d.child_by_field_name("value")
            self._note_group(name, type_text, value_node)
            if value_node is not None and value_node.type in ("argument_list", "initializer_list"):
                args = [self.eval(a, env) for a in value_node.named_children]
                v = args[0] if len(args) == 1 else S.opaque(f"{name}@{line(d)}", *[a for a in args
                                                                                 if isinstance(a, S.Val)])
            else:
                v = self.eval(value_node, env)
            if isinstance(v, Ptr) and target is not None and target.type == "pointer_declarator":
                declared = base_type_name(type_text)
                if declared != v.elem_type and type_bytes(declared) and declared != "auto":
                    v = v.retyped(declared)
            env[name] = v

    def array(self, decl, type_text: str, space: str) -> Ptr:
        dims = []
        node = decl
        while node is not None and node.type == "array_declarator":
            size = node.child_by_field_name("size")
            dims.append(eval_const(size, self.unit.consts, self.unit.macros) if size is not None else None)
            node = node.child_by_field_name("declarator")
        dims.reverse()
        name = declarator_name(decl)
        rows = tuple(d if d is not None else S.sym(f"{name}.dim{i + 1}") for i, d in enumerate(dims[1:]))
        return Ptr(name, space, base_type_name(type_text), type_bytes(type_text) or 4, S.const(0), rows)

    def if_stmt(self, node, env: dict) -> None:
        cond = self.eval(node.child_by_field_name("condition"), env)
        then, alt = node.child_by_field_name("consequence"), node.child_by_field_name("alternative")
        c = cond.constant() if isinstance(cond, S.Val) else None
        if c is not None:  # a compile-time constant condition: only one branch exists
            self.stmt(then if c else alt, env)
            return
        self.push_guard(node.child_by_field_name("condition"), cond)
        a, b = dict(env), dict(env)
        self.stmt(then, a)
        self.stmt(alt, b)
        self.guards.pop()
        self.merge(env, a, b, line(node))

    def merge(self, env: dict, a: dict, b: dict, at: int) -> None:
        for name in list(env):
            x, y = a.get(name, env[name]), b.get(name, env[name])
            env[name] = self.join(x, y, f"{name}@{at}")

    def join(self, x, y, tag: str):
        if x is y:
            return x
        if isinstance(x, S.Val) and isinstance(y, S.Val):
            return S.join(x, y, tag)
        if isinstance(x, Ptr) and isinstance(y, Ptr) and (x.base, x.space, x.elem_bytes) == (y.base, y.space,
                                                                                             y.elem_bytes):
            return replace(x, offset=S.join(x.offset, y.offset, tag))
        return x if isinstance(x, Ptr) else S.UNKNOWN

    def trip_count(self, env: dict, cond, update) -> int | None:
        """Iterations of `for (v = a; v OP b; v STEP)` when a, b and the step are constants."""
        if cond is None or update is None:
            return None
        if update.type == "update_expression":
            var, op, step = update.child_by_field_name("argument"), "-=" if "--" in text(update) else "+=", 1
        elif update.type == "assignment_expression":
            var, op = update.child_by_field_name("left"), text(update.child_by_field_name("operator"))
            step = self.eval(update.child_by_field_name("right"), dict(env))
            step = step.constant() if isinstance(step, S.Val) else None
        else:
            return None
        if var is None or var.type != "identifier" or step is None:
            return None
        while cond.type in ("parenthesized_expression", "condition_clause") and cond.named_children:
            cond = cond.named_children[-1]
        if cond.type != "binary_expression" or text(cond.child_by_field_name("left")) != text(var):
            return None
        bound = self.eval(cond.child_by_field_name("right"), dict(env))
        start = env.get(text(var))
        b = bound.constant() if isinstance(bound, S.Val) else None
        v = start.constant() if isinstance(start, S.Val) else None
        cmp = {"<": lambda x: x < b, "<=": lambda x: x <= b, ">": lambda x: x > b, ">=": lambda x: x >= b,
               "!=": lambda x: x != b}.get(text(cond.child_by_field_name("operator")))
        apply = {"+=": lambda x: x + step, "-=": lambda x: x - step, "*=": lambda x: x * step,
                 "<<=": lambda x: x * 2 ** int(step), ">>=": lambda x: Fraction(int(x) >> int(step)),
                 "/=": lambda x: Fraction(int(x / step)) if step else x}.get(op)
        if b is None or v is None or cmp is None or apply is None:
            return None
        n = 0
        while cmp(v) and n < 4096:
            nxt = apply(v)
            if nxt == v:
                return None
            v, n = nxt, n + 1
        return n

    def loop(self, node, env: dict, init, cond, update, body) -> None:
        if init is not None:
            (self.declaration if init.type == "declaration" else self.eval)(init, env)
        at = line(node)
        self.depth += 1
        saved = self.recording
        self.recording = False
        trips = self.trip_count(env, cond, update)
        self.weights.append(float(UNKNOWN_TRIPS if trips is None else max(1, min(trips, UNKNOWN_TRIPS))))
        entry = dict(env)
        for _ in range(2):  # find what the body changes, then widen to a fixed point
            trial = dict(entry)
            self.eval(cond, trial)
            self.stmt(body, trial)
            self.eval(update, trial)
            self.merge(entry, entry, trial, at)
        self.recording = saved
        c = self.eval(cond, entry) if cond is not None else S.const(1)
        if self.recording:
            self.facts.loops += 1
            self.facts.max_loop_depth = max(self.facts.max_loop_depth, self.depth)
            if update is not None and "gridDim" in text(update):
                self.facts.grid_stride_loops += 1
        self.push_guard(None, c)
        inside = dict(entry)
        self.stmt(body, inside)
        self.eval(update, inside)
        self.guards.pop()
        self.depth -= 1
        self.weights.pop()
        self.merge(env, entry, inside, at)

    def _note_group(self, name: str, type_text: str, value) -> None:
        src = type_text + " " + text(value)
        if "tiled_partition" in src or "thread_block_tile" in src or "coalesced_threads" in src:
            self.groups[name] = "tile"
        elif "grid_group" in src or "this_grid" in src:
            self.groups[name] = "grid"
        elif "thread_block" in src:
            self.groups[name] = "block"

    # ---------------------------------------------------------- expressions
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


def collect_unit(root, macros: Macros, consts: dict, funcs: list[FunctionInfo]) -> Unit:
    """Device functions by name and file-scope `__device__` / `__constant__` arrays."""
    device: dict = {}
    for f in funcs:
        if f.is_device:
            device.setdefault(f.name, []).append(f)
    globals_: dict = {}
    for n in root.children:
        if n.type != "declaration":
            continue
        quals = {text(c) for c in n.children}
        space = "constant" if "__constant__" in quals else "global" if "__device__" in quals else None
        if space is None:
            continue
        ty = text(n.child_by_field_name("type"))
        for d in n.children_by_field_name("declarator"):
            globals_[declarator_name(d)] = Ptr(declarator_name(d), space, base_type_name(ty), type_bytes(ty) or 4)
    return Unit(macros, consts, device, globals_)
