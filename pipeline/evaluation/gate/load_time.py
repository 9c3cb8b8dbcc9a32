"""Static gate, CUDA/C++ half: globals whose construction runs code when the library loads.

    global_init_findings(root, add)     # `add(rule, text_line, what)` reports a finding

A variable at namespace scope (or a static data member) is built before any entry point runs: by code the
compiler places in the library's initialisers when its initialiser calls a function, builds a lambda or uses
`new`, or when its type is a class (its constructor runs; std::vector, std::string, torch::Tensor, a struct of
the source's own). What stays allowed is constant: variables declared constexpr or constinit, GPU variables
(`__device__`, `__constant__`, `__shared__`, `__managed__`, which CUDA initialises only with constants), pointers,
and variables of arithmetic, enum and CUDA vector types. A type name counts as such only where the source defines
no class of that name (`struct cudaX_t`, a `float4` of its own namespace) and its own aliases name such types.
A reference is read as its type. An initialiser of an allowed variable may hold only literals, names,
arithmetic, sizeof and casts to such types (INITIALISER_NODES): an object built in it (`S{}`, a user-defined
literal, an operator of a class) runs code, and so does a name of a class-typed global (`int g = t;` converts it). A namespace-scope statement the parser reads as an expression with an error in it (`__typeof__(S{})
g;`) is refused as a declaration it cannot read. Function-local statics are not read here: they are built
on first use, inside the entry point. The artefact check sees the same in what was built (initialiser functions);
here the reason reaches the author before anything compiles. The finding is `load-time-code`.
"""
from __future__ import annotations

import re

from tree_sitter import Node

from pipeline.structure import cuda_ast

_SCOPES = {"translation_unit", "namespace_definition", "declaration_list", "linkage_specification",
           "template_declaration", "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef"}
_GPU_VARIABLE = re.compile(r"\b__(device|constant|shared|managed)__\b|__attribute__\s*\(\(\s*(device|constant|shared"
                           r"|managed)\s*\)\)")
_CONSTANT = re.compile(r"\b(constexpr|constinit|typedef)\b")
_PLAIN_TYPES = re.compile(r"(u?int(8|16|32|64|ptr|max|_least\d+|_fast\d+)_t|size_t|ssize_t|ptrdiff_t|bool|wchar_t"
                          r"|char(8|16|32)_t|(u?char|u?short|u?int|u?long|u?longlong|float|double)[1-4]|dim3"
                          r"|cuda\w+_t|cudaError|__nv_bool)")
_DYNAMIC = {"call_expression", "lambda_expression", "new_expression", "throw_expression", "co_await_expression"}
# what an initialiser of a plain global may hold: nothing in it can build an object or call an operator of a class
INITIALISER_NODES = {
    "number_literal", "char_literal", "string_literal", "string_content", "escape_sequence", "concatenated_string",
    "raw_string_literal", "raw_string_delimiter", "raw_string_content", "true", "false", "null", "nullptr", "identifier", "qualified_identifier",
    "namespace_identifier", "field_identifier", "parenthesized_expression", "binary_expression", "unary_expression",
    "conditional_expression", "comma_expression", "sizeof_expression", "alignof_expression", "cast_expression",
    "type_descriptor", "primitive_type", "sized_type_specifier", "type_identifier", "type_qualifier",
    "abstract_pointer_declarator", "initializer_list", "initializer_pair", "field_designator", "subscript_designator",
    "pointer_expression", "subscript_expression", "subscript_argument_list", "field_expression", "argument_list",
    "comment"}


def _text(node: Node) -> str:
    return cuda_ast.text(node)


def _at_namespace_scope(node: Node) -> bool:
    parent = node.parent
    while parent is not None and parent.type in _SCOPES:
        if parent.type == "translation_unit":
            return True
        parent = parent.parent
    return False


class _Types:
    """The type names of one source: its enums, the names it defines classes of, and its aliases' targets."""

    def __init__(self, root: Node):
        self.enums, self.classes, self.aliases = set(), set(), {}
        for n in cuda_ast.walk(root):
            name = n.child_by_field_name("name")
            if n.type == "enum_specifier" and name is not None:
                self.enums.add(_text(name))
            elif n.type in ("struct_specifier", "class_specifier", "union_specifier") and name is not None \
                    and n.child_by_field_name("body") is not None:
                self.classes.add(_text(name).split("<")[0].split("::")[-1])
            elif n.type == "alias_declaration" and name is not None:
                self.aliases[_text(name)] = n.child_by_field_name("type")
            elif n.type == "type_definition":
                for d in n.children_by_field_name("declarator"):
                    pointer = d.type == "pointer_declarator"
                    self.aliases[_text(d).lstrip("*& ").strip()] = None if pointer else n.child_by_field_name("type")
        self.enums -= self.classes

    def plain(self, kind: Node | None, depth: int = 0) -> bool:
        """Whether the type node `kind` has no constructor: arithmetic, enum, CUDA vector, `auto` or an alias of
        one (None: an alias of a pointer)."""
        if kind is None:
            return True
        if kind.type == "type_descriptor":
            return any(c.type == "abstract_pointer_declarator" for c in kind.children) or \
                self.plain(kind.child_by_field_name("type"), depth)
        if kind.type in ("primitive_type", "sized_type_specifier", "placeholder_type_specifier", "enum_specifier"):
            return True
        name = _text(kind).strip()
        if kind.type != "type_identifier" or name in self.classes:
            return False
        if name in self.aliases:
            return depth < 8 and self.plain(self.aliases[name], depth + 1)
        return name in self.enums or bool(_PLAIN_TYPES.fullmatch(name))


def _plain_type(node: Node, types: _Types) -> bool:
    """Whether the declared type of `node` has no constructor (a declaration without a type has none to read)."""
    kind = node.child_by_field_name("type")
    return kind is not None and types.plain(kind)


def _unreadable_value(value: Node, types: _Types, objects: set[str]) -> str:
    """What in the initialiser `value` may run code ('' when nothing): a node off INITIALISER_NODES, a cast to a
    class, or the name of a class-typed global."""
    for n in cuda_ast.walk(value):
        if not n.is_named:
            continue
        if n.type not in INITIALISER_NODES:
            return n.type.replace("_", " ")
        if n.type == "cast_expression" and not types.plain(n.child_by_field_name("type")):
            return "a cast to a class"
        if n.type == "identifier" and _text(n) in objects and not any(
                a.type in ("sizeof_expression", "alignof_expression") for a in _ancestors(n, value)):
            return f"the class-typed global {_text(n)}"
    return ""


def _ancestors(node: Node, top: Node):
    while node is not None and node.id != top.id:
        node = node.parent
        yield node


def _declarators(node: Node) -> list[Node]:
    return [c for c in node.children_by_field_name("declarator")]


def _why(node: Node, types: _Types, objects: set[str]) -> str:
    """Why the declaration `node` builds something at load time ('' when it does not)."""
    head = _text(node).split("=")[0]
    if _CONSTANT.search(head) or _GPU_VARIABLE.search(_text(node)):
        return ""
    for d in _declarators(node):
        inner = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
        if inner is not None and inner.type == "function_declarator":
            continue
        value = d.child_by_field_name("value") if d.type == "init_declarator" else node.child_by_field_name(
            "default_value") if node.type == "field_declaration" else None
        if value is not None and any(n.type in _DYNAMIC for n in cuda_ast.walk(value)):
            return "initialises a global by running code"
        pointer = inner is not None and inner.type == "pointer_declarator"
        if not pointer and not _plain_type(node, types):
            kind = node.child_by_field_name("type")
            return f"defines a global of the class type {_text(kind).strip()[:40] if kind is not None else '?'}"
        odd = _unreadable_value(value, types, objects) if value is not None else ""
        if odd:
            return f"initialises a global with {odd}, which may build an object or call an operator of a class"
    return ""


def _globals(root: Node):
    """Each namespace-scope variable declaration and static data member of the source."""
    for node in cuda_ast.walk(root):
        if (node.type == "declaration" and _at_namespace_scope(node)) or (
                node.type == "field_declaration" and any(c.type == "storage_class_specifier" and _text(c) == "static"
                                                         for c in node.children)):
            yield node


def global_init_findings(root: Node, add) -> None:
    """`load-time-code` for each namespace-scope variable or static data member built at load time (docstring)."""
    types = _Types(root)
    objects = {_text(d.child_by_field_name("declarator") if d.type == "init_declarator" else d).lstrip("*&(").strip()
               for node in _globals(root) if not _plain_type(node, types) for d in _declarators(node)}
    for node in cuda_ast.walk(root):  # `__typeof__(S{}) g;`: a declaration the parser read as a broken statement
        if node.type == "expression_statement" and _at_namespace_scope(node) and \
                any(c.type == "ERROR" for c in node.children):
            add("load-time-code", node.start_point.row + 1, "has a statement at namespace scope that reads as no "
                                                            "declaration (a global of a type the gate cannot read)")
    for node in _globals(root):
        why = _why(node, types, objects)
        if why:
            add("load-time-code", node.start_point.row + 1, f"{why}, which runs when the library loads (make it "
                                                            f"constexpr, a pointer, or a local of the entry point)")
