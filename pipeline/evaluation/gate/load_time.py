"""Static gate, CUDA/C++ half: globals whose construction runs code when the library loads.

    global_init_findings(root, add)     # `add(rule, text_line, what)` reports a finding

A variable at namespace scope (or a static data member) is built before any entry point runs: by code the
compiler places in the library's initialisers when its initialiser calls a function, builds a lambda or uses
`new`, or when its type is a class (its constructor runs; std::vector, std::string, torch::Tensor, a struct of
the source's own). What stays allowed is constant: variables declared constexpr or constinit, GPU variables
(`__device__`, `__constant__`, `__shared__`, `__managed__`, which CUDA initialises only with constants), pointers,
and variables of arithmetic, enum and CUDA vector types. Function-local statics are not read here: they are built
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


def _text(node: Node) -> str:
    return cuda_ast.text(node)


def _at_namespace_scope(node: Node) -> bool:
    parent = node.parent
    while parent is not None and parent.type in _SCOPES:
        if parent.type == "translation_unit":
            return True
        parent = parent.parent
    return False


def _plain_type(node: Node, enums: set[str]) -> bool:
    """Whether the declared type of `node` has no constructor: arithmetic, enum, CUDA vector or `auto`."""
    kind = node.child_by_field_name("type")
    if kind is None or kind.type in ("primitive_type", "sized_type_specifier", "placeholder_type_specifier",
                                     "enum_specifier"):
        return True
    name = _text(kind).strip()
    return kind.type == "type_identifier" and (name in enums or bool(_PLAIN_TYPES.fullmatch(name)))


def _declarators(node: Node) -> list[Node]:
    return [c for c in node.children_by_field_name("declarator")]


def _why(node: Node, enums: set[str]) -> str:
    """Why the declaration `node` builds something at load time ('' when it does not)."""
    head = _text(node).split("=")[0]
    if _CONSTANT.search(head) or _GPU_VARIABLE.search(_text(node)):
        return ""
    for d in _declarators(node):
        inner = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
        if inner is not None and inner.type in ("function_declarator", "reference_declarator"):
            continue
        value = d.child_by_field_name("value") if d.type == "init_declarator" else node.child_by_field_name(
            "default_value") if node.type == "field_declaration" else None
        if value is not None and any(n.type in _DYNAMIC for n in cuda_ast.walk(value)):
            return "initialises a global by running code"
        pointer = inner is not None and inner.type == "pointer_declarator"
        if not pointer and not _plain_type(node, enums):
            kind = node.child_by_field_name("type")
            return f"defines a global of the class type {_text(kind).strip()[:40] if kind is not None else '?'}"
    return ""


def global_init_findings(root: Node, add) -> None:
    """`load-time-code` for each namespace-scope variable or static data member built at load time (docstring)."""
    enums = {_text(n.child_by_field_name("name")) for n in cuda_ast.walk(root)
             if n.type == "enum_specifier" and n.child_by_field_name("name") is not None}
    for node in cuda_ast.walk(root):
        if node.type == "declaration" and _at_namespace_scope(node):
            why = _why(node, enums)
        elif node.type == "field_declaration" and any(c.type == "storage_class_specifier" and _text(c) == "static"
                                                      for c in node.children):
            why = _why(node, enums)
        else:
            continue
        if why:
            add("load-time-code", node.start_point.row + 1, f"{why}, which runs when the library loads (make it "
                                                            f"constexpr, a pointer, or a local of the entry point)")
