"""C types of c2cuda arguments: element dtypes, pointers and const-ness of a `ArgSpec.ctype`."""
from __future__ import annotations

from pipeline.core.records import ArgSpec
from pipeline.core.errors import TaskError


# element type (qualifiers removed) -> numpy dtype name; one table for pointers and scalars
CTYPE_DTYPES = {
    "float": "float32", "double": "float64",
    "unsigned char": "uint8", "uint8_t": "uint8",
    "int": "int32", "int32_t": "int32", "unsigned": "uint32", "unsigned int": "uint32", "uint32_t": "uint32",
    "long long": "int64", "int64_t": "int64", "long": "int64", "size_t": "uint64", "uint64_t": "uint64",
}


def split_ctype(ctype: str) -> tuple[str, bool, bool]:
    """'const float* __restrict__' -> ('float', is_pointer=True, is_const=True)."""
    text = " ".join(ctype.replace("*", " * ").split())
    pointer = text.count("*")
    words = [w for w in text.replace("*", " ").split() if w not in ("__restrict__", "__restrict", "restrict")]
    const = "const" in words
    base = " ".join(w for w in words if w != "const")
    if pointer > 1:
        raise TaskError(f"C type '{ctype}' is a pointer to a pointer; only plain pointers and scalars are supported")
    return base, pointer == 1, const


def arg_dtype(arg: ArgSpec) -> str:
    """numpy dtype name of an argument's elements (pointers) or value (scalars)."""
    base, _, _ = split_ctype(arg.ctype)
    if base not in CTYPE_DTYPES:
        raise TaskError(f"argument '{arg.name}' has C type '{arg.ctype}' with element type '{base}', which is not "
                        f"supported; use one of: {', '.join(CTYPE_DTYPES)}")
    return CTYPE_DTYPES[base]


def is_pointer(arg: ArgSpec) -> bool:
    return split_ctype(arg.ctype)[1]
