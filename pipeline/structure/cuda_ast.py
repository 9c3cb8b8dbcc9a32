"""Shared tree-sitter plumbing for the structure analyses: parsing, macros, constants, functions.

In: CUDA source text. Out: tree-sitter trees and small helpers over them that `static.py`,
`access.py` and `occupancy.py` share: node text and line, C number literals, sizes of scalar
and vector types, the translation unit's `#define`s (object-like and function-like, expanded
by re-parsing the substituted text), integer constant folding over literals, `constexpr` /
`const` globals and macros, and the list of function definitions with their CUDA qualifiers.
Touches nothing outside the process; tree-sitter-cuda must be installed.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from fractions import Fraction

# Bytes of the scalar and vector element types kernels use; unknown types (templates) are None.
TYPE_BYTES: dict[str, int] = {
    "char": 1, "signed char": 1, "unsigned char": 1, "bool": 1, "int8_t": 1, "uint8_t": 1,
    "short": 2, "unsigned short": 2, "int16_t": 2, "uint16_t": 2, "half": 2, "__half": 2,
    "__nv_bfloat16": 2, "nv_bfloat16": 2, "bfloat16": 2,
    "int": 4, "unsigned": 4, "unsigned int": 4, "int32_t": 4, "uint32_t": 4, "float": 4,
    "half2": 4, "__half2": 4, "__nv_bfloat162": 4, "nv_bfloat162": 4, "char4": 4, "uchar4": 4,
    "long": 8, "unsigned long": 8, "long long": 8, "unsigned long long": 8, "int64_t": 8,
    "uint64_t": 8, "size_t": 8, "double": 8, "float2": 8, "int2": 8, "uint2": 8,
    "float4": 16, "int4": 16, "uint4": 16, "double2": 16, "longlong2": 16, "ulonglong2": 16,
    "float3": 12, "int3": 12,
}
# Types whose one access moves several elements at once (a "vector load/store").
VECTOR_TYPES = {"float2", "float4", "int2", "int4", "uint2", "uint4", "double2", "longlong2",
                "ulonglong2", "float3", "int3", "half2", "__half2", "__nv_bfloat162", "char4", "uchar4"}
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct", "static"}


@functools.lru_cache(maxsize=1)
def language():
    """The tree-sitter-cuda Language (loaded once per process)."""
    import tree_sitter_cuda
    from tree_sitter import Language
    return Language(tree_sitter_cuda.language())


def parse(source: str):
    """Parse CUDA source into a tree-sitter Tree."""
    from tree_sitter import Parser
    return Parser(language()).parse(source.encode())


def blank_pragmas(source: str) -> str:
    """The source with every `#pragma` line turned into spaces (same length, same lines).

    tree-sitter-cuda cannot parse a `#pragma unroll` between a loop header and its body
    (`for (...)\n #pragma unroll\n for (...)`): it ends the outer loop there. Analyses parse the
    blanked text; byte offsets and lines stay those of the original.
    """
    if "#pragma" not in source:
        return source
    lines = source.split("\n")
    return "\n".join(" " * len(ln) if ln.lstrip().startswith("#pragma") else ln for ln in lines)


def text(node) -> str:
    return node.text.decode(errors="replace") if node is not None else ""


def line(node) -> int:
    """1-based source line of a node."""
    return node.start_point[0] + 1


def walk(node):
    """All nodes below `node` (pre-order), including itself."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def base_type_name(type_text: str) -> str:
    """'const float' -> 'float', 'unsigned int' -> 'unsigned int', 'std::size_t' -> 'size_t'."""
    words = [w for w in re.split(r"\s+", type_text.replace("*", " ").replace("&", " ").strip())
             if w and w not in _QUALIFIERS]
    name = " ".join(words)
    return name.split("::")[-1]


def type_bytes(type_text: str) -> int | None:
    return TYPE_BYTES.get(base_type_name(type_text))


def parse_number(literal: str) -> Fraction | None:
    """A C number literal as an exact Fraction (integers, hex, floats with suffixes)."""
    s = literal.strip().replace("'", "")
    try:
        if re.fullmatch(r"0[xX][0-9a-fA-F]+[uUlL]*", s):
            return Fraction(int(s.rstrip("uUlL"), 16))
        if re.fullmatch(r"0[bB][01]+[uUlL]*", s):
            return Fraction(int(s.rstrip("uUlL")[2:], 2))
        if re.fullmatch(r"[0-9]+[uUlL]*", s):
            digits = s.rstrip("uUlL")
            return Fraction(int(digits, 8) if len(digits) > 1 and digits.startswith("0") else int(digits))
        return Fraction(s.rstrip("fFlL"))
    except (ValueError, ZeroDivisionError):
        return None


@dataclass
class Macros:
    """The `#define`s of a translation unit; expansions are re-parsed into expression nodes."""
    objects: dict[str, str] = field(default_factory=dict)
    functions: dict[str, tuple[list[str], str]] = field(default_factory=dict)
    _trees: list = field(default_factory=list, repr=False)
    _cache: dict = field(default_factory=dict, repr=False)

    @classmethod
    def collect(cls, root) -> "Macros":
        m = cls()
        for n in walk(root):
            if n.type == "preproc_def" and n.child_by_field_name("value") is not None:
                m.objects[text(n.child_by_field_name("name"))] = text(n.child_by_field_name("value")).strip()
            elif n.type == "preproc_function_def" and n.child_by_field_name("value") is not None:
                params = [text(c) for c in n.child_by_field_name("parameters").named_children]
                m.functions[text(n.child_by_field_name("name"))] = (params, text(n.child_by_field_name("value")).strip())
        return m

    def expression(self, snippet: str):
        """Parse an expression snippet; the node (or None when it does not parse as one)."""
        if snippet in self._cache:
            return self._cache[snippet]
        tree = parse(f"auto __cudaperf_expr = ({snippet});")
        self._trees.append(tree)
        node = None
        for n in walk(tree.root_node):
            if n.type == "init_declarator":
                node = n.child_by_field_name("value")
                break
        if node is not None and (node.has_error or tree.root_node.has_error):
            node = None
        self._cache[snippet] = node
        return node

    def expand_object(self, name: str):
        return self.expression(self.objects[name]) if name in self.objects else None

    def expand_call(self, name: str, args: list[str]):
        """Substitute argument texts into a function-like macro's body and parse the result."""
        params, body = self.functions[name]
        if len(params) != len(args):
            return None
        mapping = {p: f"({a})" for p, a in zip(params, args)}
        expanded = re.sub(r"\b[A-Za-z_]\w*\b", lambda mt: mapping.get(mt.group(0), mt.group(0)), body)
        return self.expression(expanded)


def _cdiv(a: int, b: int) -> int | None:
    """C integer division (truncates toward zero)."""
    if b == 0:
        return None
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


_INT_OPS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: _cdiv(a, b), "%": lambda a, b: a - _cdiv(a, b) * b if b else None,
    "<<": lambda a, b: a << b if 0 <= b < 64 else None, ">>": lambda a, b: a >> b if 0 <= b < 64 else None,
    "&": lambda a, b: a & b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b,
    "<": lambda a, b: int(a < b), ">": lambda a, b: int(a > b), "<=": lambda a, b: int(a <= b),
    ">=": lambda a, b: int(a >= b), "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b),
}


def eval_const(node, consts: dict[str, int], macros: Macros | None = None, depth: int = 0) -> int | None:
    """Fold an integer constant expression; None when it depends on anything not constant."""
    if node is None or depth > 40:
        return None
    t = node.type
    rec = functools.partial(eval_const, consts=consts, macros=macros, depth=depth + 1)
    if t == "number_literal":
        v = parse_number(text(node))
        return int(v) if v is not None and v.denominator == 1 else None
    if t == "char_literal":
        s = text(node).strip("'")
        return ord(s) if len(s) == 1 else None
    if t == "true":
        return 1
    if t in ("false", "null", "nullptr"):  # null: nullptr as the parse reads it
        return 0
    if t == "identifier":
        name = text(node)
        if name in consts:
            return consts[name]
        if name == "warpSize":
            return 32
        if macros is not None and name in macros.objects:
            return rec(macros.expand_object(name))
        return None
    if t in ("parenthesized_expression", "condition_clause"):
        inner = node.named_children
        return rec(inner[-1]) if inner else None
    if t == "cast_expression":
        return rec(node.child_by_field_name("value"))
    if t == "sizeof_expression":
        ty = node.child_by_field_name("type")
        return type_bytes(text(ty)) if ty is not None else None
    if t == "unary_expression":
        v = rec(node.child_by_field_name("argument"))
        op = text(node.child_by_field_name("operator"))
        if v is None:
            return None
        return {"-": -v, "+": v, "~": ~v, "!": int(not v)}.get(op)
    if t == "binary_expression":
        op = text(node.child_by_field_name("operator"))
        a = rec(node.child_by_field_name("left"))
        if op in ("&&", "and", "||", "or") and a is not None and bool(a) == (op in ("||", "or")):
            return int(bool(a))  # short-circuit: the right side is never evaluated
        b = rec(node.child_by_field_name("right"))
        if a is None or b is None:
            return None
        if op in ("&&", "and"):
            return int(bool(a and b))
        if op in ("||", "or"):
            return int(bool(a or b))
        fn = _INT_OPS.get(op)
        return fn(a, b) if fn else None
    if t == "conditional_expression":
        c = rec(node.child_by_field_name("condition"))
        if c is None:
            return None
        return rec(node.child_by_field_name("consequence") if c else node.child_by_field_name("alternative"))
    if t == "call_expression":
        fn = node.child_by_field_name("function")
        args = node.child_by_field_name("arguments")
        name = text(fn)
        if macros is not None and name in macros.functions and args is not None:
            return rec(macros.expand_call(name, [text(a) for a in args.named_children]))
        if fn is not None and fn.type == "template_function" and args is not None and args.named_children:
            if text(fn.child_by_field_name("name")) in ("static_cast", "reinterpret_cast"):
                return rec(args.named_children[0])
        if name in ("min", "max") and args is not None and len(args.named_children) == 2:
            vals = [rec(a) for a in args.named_children]
            if None not in vals:
                return min(vals) if name == "min" else max(vals)
    return None


def collect_constants(root, macros: Macros) -> dict[str, int]:
    """Integer constants visible at file scope: `constexpr`/`const` declarations and macros."""
    consts: dict[str, int] = {}
    for name in macros.objects:
        v = eval_const(macros.expand_object(name), consts, macros)
        if v is not None:
            consts[name] = v
    for n in walk(root):
        if n.type in ("function_definition", "compound_statement"):
            continue
        if n.type == "declaration" and n.parent is not None and n.parent.type in (
                "translation_unit", "namespace_definition", "declaration_list", "preproc_ifdef", "preproc_if"):
            consts.update(const_declarations(n, consts, macros))
    return consts


def const_declarations(decl, consts: dict[str, int], macros: Macros, require_const: bool = True) -> dict[str, int]:
    """Integer values defined by one declaration (`const int T = 128, U = 2*T;`)."""
    quals = {text(c) for c in decl.children if c.type in ("type_qualifier", "storage_class_specifier")}
    if require_const and not quals & {"const", "constexpr"}:
        return {}
    found: dict[str, int] = {}
    for d in decl.children_by_field_name("declarator"):
        if d.type == "init_declarator" and d.child_by_field_name("declarator").type == "identifier":
            v = eval_const(d.child_by_field_name("value"), {**consts, **found}, macros)
            if v is not None:
                found[text(d.child_by_field_name("declarator"))] = v
    return found


@dataclass
class FunctionInfo:
    """A function definition with its CUDA qualifiers."""
    name: str
    node: object
    body: object
    params: list = field(default_factory=list)
    qualifiers: set = field(default_factory=set)
    launch_bounds: list = field(default_factory=list)
    template_params: list[str] = field(default_factory=list)

    @property
    def is_kernel(self) -> bool:
        return "__global__" in self.qualifiers

    @property
    def is_device(self) -> bool:
        return "__device__" in self.qualifiers and "__global__" not in self.qualifiers


def declarator_name(node) -> str:
    """The identifier a (possibly nested pointer/array/function/qualified) declarator declares."""
    while node is not None:
        if node.type in ("identifier", "field_identifier", "type_identifier"):
            return text(node)
        if node.type == "qualified_identifier":
            node = node.child_by_field_name("name")
            continue
        if node.type == "template_function":
            node = node.child_by_field_name("name")
            continue
        nxt = node.child_by_field_name("declarator")
        if nxt is None:
            named = [c for c in node.named_children if c.type not in ("type_qualifier", "parameter_list")]
            nxt = named[0] if named else None
        node = nxt
    return ""


def functions(root) -> list[FunctionInfo]:
    """Every function definition in the translation unit (kernels, device and host functions)."""
    out = []
    for n in walk(root):
        if n.type != "function_definition" or n.child_by_field_name("body") is None:
            continue
        decl = n.child_by_field_name("declarator")
        fdecl = decl
        while fdecl is not None and fdecl.type != "function_declarator":
            fdecl = fdecl.child_by_field_name("declarator")
        if fdecl is None:
            continue
        quals = {text(c) for c in n.children if text(c) in ("__global__", "__device__", "__host__")}
        bounds = [c for c in n.children if c.type == "launch_bounds"]
        tparams: list[str] = []
        if n.parent is not None and n.parent.type == "template_declaration":
            plist = n.parent.child_by_field_name("parameters")
            for p in plist.named_children if plist is not None else []:
                nm = p.child_by_field_name("declarator") or (p.named_children[-1] if p.named_children else None)
                if nm is not None:
                    tparams.append(declarator_name(nm) or text(nm))
        params = fdecl.child_by_field_name("parameters")
        out.append(FunctionInfo(
            name=declarator_name(fdecl.child_by_field_name("declarator")), node=n,
            body=n.child_by_field_name("body"),
            params=[p for p in params.named_children if p.type == "parameter_declaration"] if params else [],
            qualifiers=quals, launch_bounds=[a for b in bounds for a in b.named_children],
            template_params=tparams))
    return out
