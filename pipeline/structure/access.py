"""Walk one `__global__` kernel's syntax tree and record what its threads do, symbolically.

In: a parsed translation unit (`memory.Unit`) and one kernel (`cuda_ast.FunctionInfo`). Out:
`memory.KernelFacts`: every global/shared/constant memory access site with its coalescing class
relative to threadIdx.x (and, for shared memory, its bank-conflict degree), barriers and whether
they sit under a thread-dependent branch or loop, warp primitives, atomics, loops.

How: an abstract interpreter over statements (expressions in `expressions.py`). Each variable
holds a `symbolic.Val` (index arithmetic as a polynomial in threadIdx.x and uniform symbols) or
a `memory.Ptr` (an array plus a byte offset). Branches are evaluated on copies of the
environment and joined; loops are run twice without recording to find what their body changes
(the loop variable keeps its tx term and gets a fresh symbol for the rest), then once more
while recording (a loop inside another loop's trial pass gets one trial pass and no recording
pass, so nesting costs O(depth^2) body walks). Each access is weighted by the trip counts of
its loops (constant bounds counted, capped at 16; others 16). A branch or loop whose condition
depends on the thread makes the barriers inside it divergent.
"""
from __future__ import annotations

from fractions import Fraction

from pipeline.structure import symbolic as S
from pipeline.structure.cuda_ast import base_type_name, declarator_name, eval_const, line, text, type_bytes
from pipeline.structure.index_expressions import ExpressionWalker
from pipeline.structure.memory import UNKNOWN_TRIPS, KernelFacts, Ptr


class KernelWalker(ExpressionWalker):
    """Abstract interpretation of one kernel; call `run()` once."""

    # ---------------------------------------------------------------- entry
    def run(self) -> KernelFacts:
        env: dict = {}
        for p in self.kernel.params:
            self._bind_param(p, env, None)
        for t in self.kernel.template_params:
            env.setdefault(t, self._const_or_sym(t))
        self.stmt(self.kernel.body, env)
        return self.facts

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
        # Find what the body changes, then widen to a fixed point: two trial passes, or one when
        # this loop is itself inside another loop's trial pass (keeps nested loops quadratic).
        for _ in range(2 if saved else 1):
            trial = dict(entry)
            self.eval(cond, trial)
            self.stmt(body, trial)
            self.eval(update, trial)
            self.merge(entry, entry, trial, at)
        self.recording = saved
        if not saved:  # a trial pass of an enclosing loop: the widened state is all it needs
            self.depth -= 1
            self.weights.pop()
            self.merge(env, env, entry, at)
            return
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
