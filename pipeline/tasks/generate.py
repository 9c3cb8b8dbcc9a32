"""The generated task dataset: tasks are code, regenerated on demand (deterministic from a seed).

    generate_tasks(seed=0) -> list[Task]          # every family module of pipeline/tasks/families
    normalised_reference(task) -> str             # comments/space stripped, identifiers renamed
    kernelbench_overlap(tasks) -> dict            # torch2cuda tasks matching a KernelBench op pattern

The checks that need only a CPU (pipeline/dataset/checks.py) run from `cudaperf data build
--check-compile | --check-references | --check-gate` after a generator changed.
"""
from __future__ import annotations

import ast
import io
import keyword
import re
import tokenize
import zlib
from collections import Counter
from functools import lru_cache

import numpy as np

from pipeline.core.records import Task

GENERATOR_VERSION = "1"


def generate_tasks(seed: int = 0) -> list[Task]:
    """Every generated task, sorted by id; the same seed always gives the same tasks."""
    from pipeline.tasks.families import MODULES
    tasks: list[Task] = []
    for name, module in MODULES.items():
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        tasks += module.generate(rng)
    ids = Counter(t.id for t in tasks)
    dup = [i for i, c in ids.items() if c > 1]
    if dup:
        raise ValueError(f"generated task ids are not unique: {dup[:5]}; fix the variant names of their family")
    return sorted(tasks, key=lambda t: t.id)


@lru_cache(maxsize=4)
def cached_tasks(seed: int = 0) -> tuple[Task, ...]:
    """generate_tasks(seed), built once per process (callers must not modify the tasks)."""
    return tuple(generate_tasks(seed))


# --- normalised references --------------------------------------------------------------------------
_C_KEEP = set("""auto break case char const continue default do double else enum extern float for goto if inline
int long register restrict return short signed sizeof static struct switch typedef union unsigned void volatile
while size_t int64_t int32_t uint32_t uint64_t""".split())
_C_TOKEN = re.compile(r"0[xX][0-9a-fA-F]+[uUlL]*|[A-Za-z_]\w*|\d+\.?\d*(?:[eE][-+]?\d+)?[fFuUlL]*"
                      r"|\.\d+(?:[eE][-+]?\d+)?[fF]?|\S")


def _normalise_c(src: str) -> str:
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    src = re.sub(r"//[^\n]*", " ", src)
    src = re.sub(r"^\s*#[^\n]*", " ", src, flags=re.M)
    defined = set(re.findall(r"\b([A-Za-z_]\w*)\s*\([^;{}]*\)\s*\{", src))
    tokens = _C_TOKEN.findall(src)
    names: dict[str, str] = {}
    out = []
    for i, tok in enumerate(tokens):
        if re.match(r"[A-Za-z_]", tok) and tok not in _C_KEEP:
            called = i + 1 < len(tokens) and tokens[i + 1] == "("
            if not called or tok in defined:
                tok = names.setdefault(tok, f"v{len(names)}")
        out.append(tok)
    return " ".join(out)


_PY_KEEP = {"torch", "nn", "F", "self", "super", "math"} | set(dir(__builtins__) if isinstance(__builtins__, dict)
                                                                 else dir(__builtins__))


def _normalise_py(src: str) -> str:
    tree = ast.parse(src)
    # size globals (`batch_size = 16`) are configuration, not substance
    tree.body = [n for n in tree.body if not (isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant))]
    text = ast.unparse(tree)
    names: dict[str, str] = {}
    out = []
    toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    for i, tok in enumerate(toks):
        s = tok.string
        if tok.type == tokenize.NAME and not keyword.iskeyword(s) and s not in _PY_KEEP:
            prev = toks[i - 1].string if i else ""
            nxt = toks[i + 1].string if i + 1 < len(toks) else ""
            if prev != "." and not (nxt == "=" and prev in "(,"):
                s = names.setdefault(s, f"v{len(names)}")
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT):
            out.append(s)
    return " ".join(out)


def normalised_reference(task: Task) -> str:
    """The reference with comments, layout and identifier names removed, for uniqueness checks."""
    return _normalise_c(task.reference) if task.kind == "c2cuda" else _normalise_py(task.reference)


# --- KernelBench overlap ------------------------------------------------------------------------------
# Operator vocabularies of KernelBench's level 1 (single operators) and level 2 (a matmul or
# convolution followed by element-wise, normalisation or reduction operators), by name only.
KB_LEVEL1_OPS = {
    "relu", "leaky_relu", "sigmoid", "tanh", "gelu", "selu", "elu", "hardtanh", "hardsigmoid", "softplus",
    "softsign", "silu", "swish", "mish", "softmax", "log_softmax", "matmul", "mm", "bmm", "linear", "sum", "mean",
    "max", "min", "argmax", "argmin", "prod", "cumsum", "cumprod", "norm", "layer_norm", "batch_norm",
    "instance_norm", "group_norm", "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d",
    "avg_pool3d", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "cross_entropy", "mse_loss", "smooth_l1_loss", "huber_loss", "kl_div", "cosine_similarity",
    "triplet_margin_loss", "hinge_embedding_loss", "diag", "tril", "triu", "sqrt", "abs", "einsum",
}
KB_LEVEL2_MAIN = {"matmul", "mm", "bmm", "linear", "conv1d", "conv2d", "conv3d", "conv_transpose2d",
                  "conv_transpose3d", "einsum"}
KB_LEVEL2_EPILOGUE = KB_LEVEL1_OPS | {"add", "sub", "mul", "div", "clamp", "exp", "log", "logsumexp", "where",
                                     "dropout", "hardswish", "relu6", "scale", "tanh", "erf", "square", "pow"}
_OP_ALIASES = {"maximum": "max", "minimum": "min", "amax": "max", "amin": "min", "rsqrt": "sqrt", "square": "square"}


def forward_operators(reference: str) -> set[str]:
    """Names of the torch functions, modules and tensor methods called in the reference's forward,
    plus matmul for '@'."""
    tree = ast.parse(reference)
    ops: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "forward":
            for sub in ast.walk(node):
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
                    ops.add(_OP_ALIASES.get(sub.func.attr, sub.func.attr))
                elif isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.MatMult):
                    ops.add("matmul")
    return ops - {"to", "view", "reshape", "contiguous", "unsqueeze", "squeeze", "full_like", "flatten",
                  "transpose", "permute", "size", "float"}


def kernelbench_overlap(tasks: list[Task]) -> dict[str, int]:
    """How many torch2cuda tasks match a KernelBench level-1 pattern (one operator of its list, alone)
    or a level-2 pattern (a matmul/convolution plus only operators of its epilogue list)."""
    level1 = level2 = 0
    total = 0
    for t in tasks:
        if t.kind != "torch2cuda":
            continue
        total += 1
        ops = forward_operators(t.reference)
        if len(ops) == 1 and ops <= KB_LEVEL1_OPS:
            level1 += 1
        elif ops & KB_LEVEL2_MAIN and ops <= KB_LEVEL2_EPILOGUE:
            level2 += 1
    return {"torch2cuda": total, "level1_pattern": level1, "level2_pattern": level2}


# --- statistics ------------------------------------------------------------------------------------
def summary(tasks: list[Task]) -> dict:
    kinds = Counter(t.kind for t in tasks)
    fams = Counter(t.family for t in tasks)
    impls = [len(t.implementations) for t in tasks]
    return {"tasks": len(tasks), "c2cuda": kinds["c2cuda"], "torch2cuda": kinds["torch2cuda"],
            "families": len(fams), "largest_family": max(fams.items(), key=lambda kv: kv[1]) if fams else None,
            "implementations": sum(impls), "min_implementations": min(impls) if impls else 0,
            "family_counts": dict(sorted(fams.items())), "kernelbench_overlap": kernelbench_overlap(tasks)}
