"""Task files in, validated `Task` records out (plain Python, no Ray).

In: task YAML files (one `Task` each, the fields of `pipeline.records.Task`), the built-in set under
`pipeline/builtin_tasks/`, a directory of YAML files, a KernelBench checkout or one KernelBench
problem file, and candidate files (`.cu`, `.py`) for a given task.
Out: `Task` and `Candidate` records. Every problem a user can cause raises `TaskError` with one
sentence per problem naming the file, the field and the fix.

Size, init and work expressions (`"n"`, `"4*rows*cols"`, `"randint(0, bins)"`) are evaluated by
`eval_expr`, a small evaluator over Python's `ast` that allows numbers, the config's params,
arithmetic and a few whitelisted functions, nothing else.
"""
from __future__ import annotations

import ast
import difflib
import functools
import logging
import math
import re
from pathlib import Path
from typing import Any, Iterable, NamedTuple

import yaml
from pydantic import ValidationError

from pipeline.errors import UserError
from pipeline.records import ArgSpec, Candidate, InputConfig, Task, WorkModel

log = logging.getLogger(__name__)

BUILTIN_DIR = Path(__file__).parent / "builtin_tasks"
TASK_SUFFIXES = (".yaml", ".yml")


class TaskError(UserError, ValueError):
    """A task file, task source or candidate file a user gave is unusable; the message says why and how to fix it."""


# ----------------------------------------------------------------------------------------------
# Safe expressions
# ----------------------------------------------------------------------------------------------

def _cdiv(a, b):
    return -(-a // b)


EXPR_FUNCTIONS: dict[str, Any] = {
    "min": min, "max": max, "abs": abs, "int": int, "float": float, "round": round,
    "ceil": math.ceil, "floor": math.floor, "sqrt": math.sqrt, "log2": math.log2, "cdiv": _cdiv,
}
_BINOPS = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a ** b,
}
_MAX_EXPONENT = 64
_MAX_MAGNITUDE = 1e30


def _parse_expr(text: str) -> ast.expr:
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise TaskError(f"expression {text!r} must be a string or a number")
    src = str(text).strip()
    if not src:
        raise TaskError("expression is empty; write a number or a formula over the config's params such as '4*n'")
    try:
        return ast.parse(src, mode="eval").body
    except SyntaxError:
        raise TaskError(f"expression '{src}' is not valid syntax; write arithmetic such as '4*n + 1'") from None


def expr_names(text: str) -> set[str]:
    """The param names an expression uses (function names excluded); raises TaskError on bad syntax."""
    tree = _parse_expr(text)
    calls = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in calls}


def eval_expr(text: str | int | float, params: dict[str, int | float]) -> int | float:
    """Evaluate a size/init/work expression over `params`: numbers, param names, + - * / // % **,
    unary minus, parentheses, and calls of min, max, abs, int, float, round, ceil, floor, sqrt, log2,
    cdiv. Anything else (attributes, subscripts, other calls, strings) raises TaskError."""
    src = str(text).strip()
    tree = _parse_expr(text)

    def ev(node: ast.AST):
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise TaskError(f"expression '{src}': only numbers are allowed as constants, not {node.value!r}")
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in params:
                known = ", ".join(sorted(params)) or "none"
                raise TaskError(f"expression '{src}' uses '{node.id}', which is not a param of this config "
                                f"(known: {known}); add it to the config's params or fix the name")
            value = params[node.id]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TaskError(f"expression '{src}': param '{node.id}' is {value!r}, not a number")
            return value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and abs(b) > _MAX_EXPONENT:
                raise TaskError(f"expression '{src}': exponent {b} is too large (at most {_MAX_EXPONENT})")
            if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and b == 0:
                raise TaskError(f"expression '{src}' divides by zero for these params")
            try:
                v = _BINOPS[type(node.op)](a, b)
            except (OverflowError, ValueError, ZeroDivisionError) as e:
                raise TaskError(f"expression '{src}' cannot be evaluated: {e}") from None
            if isinstance(v, complex) or abs(v) > _MAX_MAGNITUDE:
                raise TaskError(f"expression '{src}' gives {v!r}, which is not a usable size or value")
            return v
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in EXPR_FUNCTIONS:
                name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
                raise TaskError(f"expression '{src}' calls '{name}', which is not allowed; allowed functions: "
                                f"{', '.join(sorted(EXPR_FUNCTIONS))}")
            if node.keywords:
                raise TaskError(f"expression '{src}': keyword arguments are not allowed in '{node.func.id}(...)'")
            args = [ev(a) for a in node.args]
            try:
                return EXPR_FUNCTIONS[node.func.id](*args)
            except (TypeError, ValueError, ZeroDivisionError, OverflowError) as e:
                raise TaskError(f"expression '{src}': {node.func.id}(...) failed: {e}") from None
        raise TaskError(f"expression '{src}': '{ast.unparse(node)}' ({type(node).__name__}) is not allowed; use "
                        f"numbers, param names, + - * / // % **, parentheses and the functions "
                        f"{', '.join(sorted(EXPR_FUNCTIONS))}")

    return ev(tree)


def parse_init(text: str, params: dict[str, int | float] | None = None) -> tuple:
    """How an argument is filled: ("uniform", lo, hi), ("randint", lo, hi) (hi exclusive) or ("value", expr).

    Without `params` the bounds and the value are returned as expression strings; with `params`
    they are evaluated to numbers. Raises TaskError on malformed text."""
    src = str(text).strip()
    tree = _parse_expr(src)
    if isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id in ("uniform", "randint"):
        kind = tree.func.id
        if len(tree.args) != 2 or tree.keywords:
            raise TaskError(f"init '{src}': {kind} takes exactly two bounds, e.g. '{kind}(0, 10)'")
        lo, hi = (ast.unparse(a) for a in tree.args)
        for part in (lo, hi):
            expr_names(part)  # syntax of each bound
        if params is None:
            return (kind, lo, hi)
        lo_v, hi_v = eval_expr(lo, params), eval_expr(hi, params)
        if not lo_v < hi_v:
            raise TaskError(f"init '{src}': the lower bound {lo_v} must be below the upper bound {hi_v}")
        if kind == "randint":
            if lo_v != int(lo_v) or hi_v != int(hi_v):
                raise TaskError(f"init '{src}': randint bounds must be whole numbers, got {lo_v} and {hi_v}")
            lo_v, hi_v = int(lo_v), int(hi_v)
        return (kind, lo_v, hi_v)
    if params is None:
        return ("value", src)
    return ("value", eval_expr(src, params))


# ----------------------------------------------------------------------------------------------
# C types of c2cuda arguments
# ----------------------------------------------------------------------------------------------

# element type (qualifiers removed) -> numpy dtype name; one table for pointers and scalars
CTYPE_DTYPES = {
    "float": "float32", "double": "float64",
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


# ----------------------------------------------------------------------------------------------
# Reference module (torch2cuda) inspection
# ----------------------------------------------------------------------------------------------

REQUIRED_DEFS = ("Model", "get_inputs", "get_init_inputs")


class ModuleNames(NamedTuple):
    """What a Python module defines at its top level."""
    defined: frozenset[str]        # classes, functions and assigned globals
    assigned: frozenset[str]       # assigned globals only (`batch_size = 16`)
    literals: dict[str, int | float]  # numeric literal value of each global assigned one


@functools.lru_cache(maxsize=256)
def module_names(source: str) -> ModuleNames:
    """Top-level names of a module's source; raises SyntaxError if it does not parse."""
    tree = ast.parse(source)
    defined: set[str] = set()
    assigned: set[str] = set()
    literals: dict[str, int | float] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
        targets: list[ast.expr] = []
        value = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        for t in targets:
            if isinstance(t, ast.Name):
                assigned.add(t.id)
                try:
                    v = ast.literal_eval(value)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    continue
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    literals[t.id] = v
            elif isinstance(t, ast.Tuple):
                assigned.update(e.id for e in t.elts if isinstance(e, ast.Name))
    return ModuleNames(frozenset(defined | assigned), frozenset(assigned), literals)


def config_params(task: Task, config: InputConfig) -> dict[str, int | float]:
    """The params a config's expressions see: for torch2cuda the reference's numeric globals
    overridden by the config's params; for c2cuda the config's params alone."""
    if task.kind == "torch2cuda":
        try:
            literals = module_names(task.reference).literals
        except SyntaxError:
            literals = {}
        return {**literals, **config.params}
    return dict(config.params)


# ----------------------------------------------------------------------------------------------
# Task files
# ----------------------------------------------------------------------------------------------

_EXPR_FIELDS_ARGS = ("size", "init")


def _loc(loc: Iterable) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _closest_field(name: str, valid: Iterable[str]) -> str:
    valid = sorted(valid)
    match = difflib.get_close_matches(name, valid, n=1, cutoff=0.5)
    if match:
        return f"did you mean '{match[0]}'? (valid fields: {', '.join(valid)})"
    return f"valid fields: {', '.join(valid)}"


def _model_for_loc(loc: tuple):
    """The pydantic model whose field set applies at `loc` (for 'unknown field' messages)."""
    from pipeline import records
    model: Any = Task
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            return None
        ann = field.annotation
        # list[X] / X | None -> X
        inner = getattr(ann, "__args__", None)
        if inner:
            ann = next((a for a in inner if isinstance(a, type) and issubclass(a, records.Record)), ann)
        model = ann
    return model if isinstance(model, type) and issubclass(model, records.Record) else None


def _pydantic_problems(path: str, err: ValidationError) -> list[str]:
    problems = []
    for e in err.errors():
        loc = tuple(e["loc"])
        where = _loc(loc)
        if e["type"] == "missing":
            problems.append(f"{path}: field '{where}' is missing; add it (see pipeline/records.py for its meaning).")
        elif e["type"] == "extra_forbidden":
            parent = _model_for_loc(loc[:-1])
            hint = _closest_field(str(loc[-1]), parent.model_fields) if parent else "remove it"
            problems.append(f"{path}: unknown field '{where}'; remove it or rename it, {hint}.")
        else:
            value = e.get("input")
            shown = repr(value) if len(repr(value)) < 80 else repr(value)[:77] + "..."
            problems.append(f"{path}: field '{where}' = {shown} is invalid ({e['msg'].lower()}); fix the value.")
    return problems


def _coerce_numbers_to_text(raw: dict) -> None:
    """Let YAML numbers stand for expressions (`size: 1024`, `init: 1.5`, `flops: 0`)."""
    for arg in raw.get("args") or []:
        if isinstance(arg, dict):
            for key in _EXPR_FIELDS_ARGS:
                if isinstance(arg.get(key), (int, float)) and not isinstance(arg.get(key), bool):
                    arg[key] = str(arg[key])
    work = raw.get("work")
    if isinstance(work, dict):
        for key in ("flops", "bytes"):
            if isinstance(work.get(key), (int, float)) and not isinstance(work.get(key), bool):
                work[key] = str(work[key])


def task_from_dict(raw: Any, path: str = "<task>") -> Task:
    """Validate a task given as a dict (a parsed YAML file); raises TaskError listing every problem."""
    if not isinstance(raw, dict):
        raise TaskError(f"{path}: a task file must hold a mapping of fields (id, kind, family, reference, "
                        f"configs, ...), not {type(raw).__name__}; rewrite it as 'field: value' lines.")
    raw = dict(raw)
    _coerce_numbers_to_text(raw)
    raw.setdefault("source_path", path)
    try:
        task = Task.model_validate(raw)
    except ValidationError as e:
        raise TaskError("\n".join(_pydantic_problems(path, e))) from None
    problems = validate_task(task, path)
    if problems:
        raise TaskError("\n".join(problems))
    return task


def validate_task(task: Task, path: str = "") -> list[str]:
    """Every semantic problem of a task, one sentence each (empty when the task is usable)."""
    path = path or task.source_path or task.id
    p: list[str] = []
    if not task.id.strip() or any(c.isspace() for c in task.id):
        p.append(f"{path}: field 'id' = {task.id!r} must be non-empty without spaces; use e.g. '{task.kind}/name'.")
    if not task.family.strip():
        p.append(f"{path}: field 'family' is empty; name the computation family, e.g. 'reduction_dot'.")
    if not task.configs:
        p.append(f"{path}: field 'configs' is empty; add at least one input configuration "
                 f"(e.g. '- {{name: small, params: {{n: 1000}}}}').")
    seen: set[str] = set()
    for i, cfg in enumerate(task.configs):
        if cfg.name in seen:
            p.append(f"{path}: field 'configs[{i}].name' = '{cfg.name}' is used twice; give each config its own name.")
        seen.add(cfg.name)
        if not cfg.check and not cfg.time:
            p.append(f"{path}: field 'configs[{i}]' ('{cfg.name}') has check and time both false; "
                     f"set one of them true or remove the config.")
    if task.tolerance.rtol < 0 or task.tolerance.atol < 0:
        p.append(f"{path}: field 'tolerance' has a negative value; rtol and atol must be >= 0.")
    if task.kind == "c2cuda":
        p += _validate_c2cuda(task, path)
    else:
        p += _validate_torch2cuda(task, path)
    p += _validate_work(task, path)
    p += _validate_implementations(task, path)
    return p


def _validate_c2cuda(task: Task, path: str) -> list[str]:
    p: list[str] = []
    if not task.function:
        p.append(f"{path}: field 'function' is missing; c2cuda tasks must name the C function the candidate "
                 f"defines, e.g. 'function: saxpy'.")
    elif not re.search(rf"\b{re.escape(task.function)}\s*\(", task.reference):
        p.append(f"{path}: field 'reference' does not define the function '{task.function}' named in 'function'; "
                 f"make the two agree.")
    if not task.args:
        p.append(f"{path}: field 'args' is missing; list the function's parameters in signature order, each "
                 f"with name, ctype, role (and size for pointers).")
    names = [a.name for a in task.args]
    for i, a in enumerate(task.args):
        where = f"args[{i}] ('{a.name}')"
        if names.count(a.name) > 1 and names.index(a.name) == i:
            p.append(f"{path}: field 'args' names '{a.name}' twice; give each parameter its own name.")
        try:
            arg_dtype(a)
            _, ptr, const = split_ctype(a.ctype)
        except TaskError as e:
            p.append(f"{path}: field '{where}.ctype': {e}.")
            continue
        if ptr:
            if a.role == "scalar":
                p.append(f"{path}: field '{where}.role' is 'scalar' but ctype '{a.ctype}' is a pointer; "
                         f"use in, out or inout.")
            if not a.size.strip():
                p.append(f"{path}: field '{where}.size' is missing; pointer arguments need an element count "
                         f"such as 'n' or 'rows*cols'.")
            if const and a.role in ("out", "inout"):
                p.append(f"{path}: field '{where}.role' is '{a.role}' but ctype '{a.ctype}' is const; "
                         f"drop the const or make the role 'in'.")
        elif a.role != "scalar":
            p.append(f"{path}: field '{where}.role' is '{a.role}' but ctype '{a.ctype}' is not a pointer; "
                     f"use role 'scalar' or a pointer type.")
    if task.args and not any(a.role in ("out", "inout") for a in task.args):
        p.append(f"{path}: field 'args' has no 'out' or 'inout' argument; mark the argument the function writes.")
    # expressions: syntax, then values in every config
    for i, a in enumerate(task.args):
        where = f"args[{i}] ('{a.name}')"
        try:
            ptr = is_pointer(a)
        except TaskError:
            continue
        exprs = []
        if ptr and a.size.strip():
            exprs.append(("size", a.size))
        if a.role in ("in", "inout", "scalar"):
            exprs.append(("init", a.init))
        for field, text in exprs:
            try:
                kind = parse_init(text)[0] if field == "init" else "size"
                if field == "size":
                    expr_names(text)
            except TaskError as e:
                p.append(f"{path}: field '{where}.{field}': {e}.")
                continue
            if field == "init" and ptr and kind == "value":
                p.append(f"{path}: field '{where}.init' = '{text}' fills the whole array with one value; use "
                         f"'uniform(lo, hi)' or 'randint(lo, hi)' so inputs are random.")
                continue
            if field == "init" and not ptr and kind != "value":
                p.append(f"{path}: field '{where}.init' = '{text}' is random; scalar arguments take an expression "
                         f"over the params, such as 'n' or '1.5'.")
                continue
            for cfg in task.configs:
                try:
                    if field == "size":
                        v = eval_expr(text, cfg.params)
                        if v != int(v) or v < 1:
                            raise TaskError(f"size '{text}' gives {v}, not a positive whole number")
                    else:
                        parse_init(text, cfg.params)
                except TaskError as e:
                    p.append(f"{path}: field '{where}.{field}' in config '{cfg.name}': {e}.")
    return p


def _validate_torch2cuda(task: Task, path: str) -> list[str]:
    p: list[str] = []
    if task.function:
        p.append(f"{path}: field 'function' is set but torch2cuda tasks take no function name; remove it.")
    if task.args:
        p.append(f"{path}: field 'args' is set but torch2cuda tasks take their inputs from get_inputs(); remove it.")
    try:
        names = module_names(task.reference)
    except SyntaxError as e:
        p.append(f"{path}: field 'reference' is not valid Python (line {e.lineno}: {e.msg}); fix the module source.")
        return p
    missing = [n for n in REQUIRED_DEFS if n not in names.defined]
    if missing:
        p.append(f"{path}: field 'reference' does not define {', '.join(missing)}; a torch2cuda reference needs "
                 f"a Model class and get_inputs()/get_init_inputs() functions (KernelBench layout).")
    for i, cfg in enumerate(task.configs):
        for name, value in cfg.params.items():
            if name not in names.assigned:
                p.append(f"{path}: field 'configs[{i}].params.{name}' (config '{cfg.name}') is not a module-level "
                         f"global assigned in the reference; assign '{name} = ...' at module level or remove it.")
            elif isinstance(names.literals.get(name), int) and value != int(value):
                p.append(f"{path}: field 'configs[{i}].params.{name}' = {value} is fractional but the reference's "
                         f"'{name}' is an integer; use a whole number.")
    return p


def _validate_work(task: Task, path: str) -> list[str]:
    p: list[str] = []
    for field in ("flops", "bytes"):
        text = getattr(task.work, field)
        try:
            expr_names(text)
        except TaskError as e:
            p.append(f"{path}: field 'work.{field}': {e}.")
            continue
        for cfg in task.configs:
            try:
                v = eval_expr(text, config_params(task, cfg))
                if v < 0:
                    raise TaskError(f"'{text}' gives {v}, a negative amount of work")
            except TaskError as e:
                p.append(f"{path}: field 'work.{field}' in config '{cfg.name}': {e}.")
    return p


def _validate_implementations(task: Task, path: str) -> list[str]:
    p: list[str] = []
    allowed = {"c2cuda": ("c2cuda",), "torch2cuda": ("light", "kernelbench")}[task.kind]
    names: set[str] = set()
    for i, impl in enumerate(task.implementations):
        where = f"implementations[{i}] ('{impl.name}')"
        if impl.name in names:
            p.append(f"{path}: field '{where}.name' is used twice; give each implementation its own name.")
        names.add(impl.name)
        if impl.format not in allowed:
            p.append(f"{path}: field '{where}.format' is '{impl.format}', which a {task.kind} task cannot use; "
                     f"use {' or '.join(allowed)}.")
            continue
        if impl.format == "c2cuda" and task.function and not re.search(
                rf'extern\s+"C"[^;{{]*\b{re.escape(task.function)}\s*\(', impl.code):
            p.append(f"{path}: field '{where}.code' does not define extern \"C\" {task.function}(...); "
                     f"define the task's function with C linkage.")
        if impl.format == "light" and not re.search(r'extern\s+"C"\s+int\s+launch\s*\(', impl.code):
            p.append(f"{path}: field '{where}.code' does not define extern \"C\" int launch(...); follow the light "
                     f"calling convention in pipeline/evaluation/light_abi.py.")
        if impl.format == "kernelbench":
            try:
                defined = module_names(impl.code).defined
            except SyntaxError as e:
                p.append(f"{path}: field '{where}.code' is not valid Python (line {e.lineno}: {e.msg}); fix it.")
                continue
            if "ModelNew" not in defined:
                p.append(f"{path}: field '{where}.code' does not define class ModelNew; KernelBench-style "
                         f"implementations define ModelNew.")
    if task.kind == "c2cuda" and not any(i.strategy == "naive" and i.format == "c2cuda"
                                         for i in task.implementations):
        p.append(f"{path}: field 'implementations' has no 'strategy: naive' c2cuda implementation; every c2cuda "
                 f"task needs a simple, verified naive CUDA version as its GPU baseline.")
    return p


def load_task_file(path: str | Path) -> Task:
    """Load and validate one task YAML file; raises TaskError naming the file, the field and the fix."""
    path = Path(path)
    if not path.is_file():
        raise TaskError(f"{path}: task file does not exist; pass the path of a task YAML file.")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise TaskError(f"{path}: not valid YAML ({' '.join(str(e).split())}); fix the syntax.") from None
    except UnicodeDecodeError:
        raise TaskError(f"{path}: not a UTF-8 text file; save the task file as UTF-8 YAML.") from None
    return task_from_dict(raw, str(path))


def _task_files(directory: Path) -> list[Path]:
    return sorted(f for f in directory.rglob("*") if f.is_file() and f.suffix in TASK_SUFFIXES)


def _check_unique(tasks: list[Task]) -> None:
    first: dict[str, Task] = {}
    for t in tasks:
        if t.id in first:
            raise TaskError(f"task id '{t.id}' is defined twice, in {first[t.id].source_path} and in "
                            f"{t.source_path}; rename one of them.")
        first[t.id] = t


def is_kernelbench_checkout(path: str | Path) -> bool:
    root = Path(path)
    return any((d / "level1").is_dir() or (d / "level2").is_dir() for d in (root / "KernelBench", root))


def load_tasks(source: str | Path, kernelbench_levels: Iterable[int] = (1, 2), split_seed: int = 0) -> list[Task]:
    """Tasks from 'builtin' (pipeline/builtin_tasks/), 'generated' or 'generated:<split>' (the
    generated dataset, pipeline/data/generate.py, optionally one split: train, val or test, the
    families split by `split_seed`, i.e. `data.split_seed`), a directory of task YAML files
    (recursively), a single task YAML file, or a KernelBench checkout; sorted by id. Duplicate ids
    are an error."""
    if str(source) == "generated" or str(source).startswith("generated:"):
        return load_generated(str(source).partition(":")[2], split_seed)
    if str(source) == "builtin":
        files = _task_files(BUILTIN_DIR)
        if not files:
            raise TaskError(f"the built-in task directory {BUILTIN_DIR} holds no task files; reinstall cudaperf.")
    else:
        path = Path(source).expanduser()
        if path.is_file():
            files = [path]
        elif path.is_dir():
            files = _task_files(path)
            if not files:
                if is_kernelbench_checkout(path):
                    return load_kernelbench(path, kernelbench_levels)
                raise TaskError(f"task source '{source}' holds no *.yaml task files and is not a KernelBench "
                                f"checkout; point tasks.source at a directory of task files, a KernelBench "
                                f"checkout, or 'builtin'.")
        else:
            raise TaskError(f"task source '{source}' is neither 'builtin' nor an existing file or directory; "
                            f"set tasks.source to 'builtin', a directory of task YAML files or a KernelBench checkout.")
    tasks = [load_task_file(f) for f in files]
    _check_unique(tasks)
    return sorted(tasks, key=lambda t: t.id)


def load_generated(split: str = "", split_seed: int = 0) -> list[Task]:
    """The generated tasks (all, or those of one split of families by `split_seed`), sorted by id."""
    from pipeline.data.generate import cached_tasks
    from pipeline.data.splits import SPLITS, split_of_family
    if split and split not in SPLITS:
        raise TaskError(f"task source 'generated:{split}' names an unknown split; use 'generated' or "
                        f"'generated:<split>' with split one of {', '.join(SPLITS)}.")
    return [t for t in cached_tasks() if not split or split_of_family(t.family, split_seed) == split]


# ----------------------------------------------------------------------------------------------
# KernelBench
# ----------------------------------------------------------------------------------------------

_NUM_PREFIX = re.compile(r"^\d+_")


def kernelbench_family(stem: str) -> str:
    """'19_ReLU' -> 'relu'; 'x_Conv2d_ReLU_BiasAdd' -> 'conv2d_relu_biasadd'."""
    fam = _NUM_PREFIX.sub("", stem).strip("_").lower()
    return fam or stem.lower()


def kernelbench_task(path: str | Path, level: str | None = None) -> Task:
    """One KernelBench problem file as a torch2cuda task; raises TaskError if the file is unusable.

    `level` ('level1', ...) defaults to the file's directory name when that looks like a level."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"{path}: cannot be read as text ({e}); pass a KernelBench problem .py file.") from None
    try:
        defined = module_names(text).defined
    except SyntaxError as e:
        raise TaskError(f"{path}: is not valid Python (line {e.lineno}: {e.msg}); "
                        f"fix the file or leave it out.") from None
    missing = [n for n in REQUIRED_DEFS if n not in defined]
    if missing:
        raise TaskError(f"{path}: does not define {', '.join(missing)}; a KernelBench problem needs class Model "
                        f"and functions get_inputs and get_init_inputs.")
    if level is None and re.fullmatch(r"level\d+", path.parent.name):
        level = path.parent.name
    task_id = f"kernelbench/{level}/{path.stem}" if level else f"kernelbench/{path.stem}"
    configs = [InputConfig(name="seed0"), InputConfig(name="seed1"), InputConfig(name="timing", time=True)]
    return Task(id=task_id, kind="torch2cuda", family=kernelbench_family(path.stem),
                description=f"KernelBench {level or 'problem'} {path.stem}", reference=text, configs=configs,
                work=WorkModel(flops="0", bytes="0"), source_path=str(path))


def _problem_sort_key(f: Path):
    m = re.match(r"^(\d+)_", f.name)
    return (int(m.group(1)) if m else 1 << 30, f.name)


def load_kernelbench(root: str | Path, levels: Iterable[int] = (1, 2),
                     skipped: list[tuple[str, str]] | None = None) -> list[Task]:
    """KernelBench problems under root/KernelBench/levelN/*.py (or root/levelN/*.py) as torch2cuda
    tasks. A file that does not parse or lacks Model/get_inputs/get_init_inputs is skipped with a
    logged warning (and appended to `skipped` as (path, reason) when a list is given)."""
    root = Path(root).expanduser()
    levels = list(levels)
    base = None
    for cand in (root / "KernelBench", root):
        if any((cand / f"level{lv}").is_dir() for lv in levels):
            base = cand
            break
    if base is None:
        raise TaskError(f"KernelBench checkout '{root}': neither {root}/KernelBench/level<N>/ nor {root}/level<N>/ "
                        f"exists for levels {levels}; point it at a clone of github.com/ScalingIntelligence/KernelBench.")
    tasks: list[Task] = []
    for lv in levels:
        d = base / f"level{lv}"
        if not d.is_dir():
            raise TaskError(f"KernelBench checkout '{root}': level {lv} is missing ({d} does not exist); "
                            f"drop level {lv} from tasks.kernelbench_levels or use a full checkout.")
        for f in sorted(d.glob("*.py"), key=_problem_sort_key):
            try:
                tasks.append(kernelbench_task(f, f"level{lv}"))
            except TaskError as e:
                log.warning("skipping KernelBench problem: %s", e)
                if skipped is not None:
                    skipped.append((str(f), str(e)))
    return tasks


# ----------------------------------------------------------------------------------------------
# Command-line arguments: one task, one candidate
# ----------------------------------------------------------------------------------------------

def load_task_arg(arg: str | Path) -> Task:
    """The TASK of `cudaperf eval TASK CANDIDATE`: a task YAML file, a KernelBench problem .py file,
    or a built-in task id such as 'c2cuda/saxpy'."""
    path = Path(arg).expanduser()
    if path.is_file():
        if path.suffix in TASK_SUFFIXES:
            return load_task_file(path)
        if path.suffix == ".py":
            return kernelbench_task(path)
        raise TaskError(f"{path}: a task must be a .yaml task file or a KernelBench problem .py file, "
                        f"not '{path.suffix or 'no extension'}'; pass one of those or a built-in id.")
    if path.is_dir():
        raise TaskError(f"{path}: is a directory; pass one task file or a built-in id such as 'c2cuda/saxpy'.")
    builtin = {t.id: t for t in load_tasks("builtin")}
    if str(arg) in builtin:
        return builtin[str(arg)]
    close = difflib.get_close_matches(str(arg), list(builtin), n=3, cutoff=0.4)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}?" if close else \
        f"built-in ids: {', '.join(sorted(builtin))}"
    raise TaskError(f"task '{arg}' is neither an existing file nor a built-in task id; {hint}")


def load_candidate_file(path: str | Path, task: Task, turn: int = 0) -> Candidate:
    """A candidate file for `task`: `.py` is KernelBench style (torch2cuda only); `.cu` is the
    c2cuda format for c2cuda tasks and the light format for torch2cuda tasks."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise TaskError(f"{path}: candidate file does not exist; pass the path of a .cu or .py file.")
    suffix = path.suffix.lower()
    if suffix == ".py":
        if task.kind != "torch2cuda":
            raise TaskError(f"{path}: a .py (KernelBench-style) candidate cannot solve the c2cuda task '{task.id}'; "
                            f"write a .cu file defining extern \"C\" {task.function}(...).")
        fmt = "kernelbench"
    elif suffix in (".cu", ".cuh"):
        fmt = "c2cuda" if task.kind == "c2cuda" else "light"
    else:
        raise TaskError(f"{path}: candidate extension '{path.suffix or '(none)'}' is not understood; use .cu "
                        f"(c2cuda or light format) or .py (KernelBench ModelNew).")
    try:
        code = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"{path}: cannot be read as UTF-8 text ({e}); save the candidate as a text file.") from None
    return Candidate(task_id=task.id, code=code, format=fmt, turn=turn)


def select_tasks(tasks_cfg, split_seed: int = 0, source: str | Path | None = None) -> list[Task]:
    """The run's task selection, one rule for every job: the tasks of `tasks_cfg.source` (or `source`)
    whose kind is in `tasks_cfg.kinds`, KernelBench checkouts read at `tasks_cfg.kernelbench_levels`,
    the generated dataset split by `split_seed` (`data.split_seed`)."""
    chosen = tasks_cfg.source if source is None else source
    return [t for t in load_tasks(chosen, tasks_cfg.kernelbench_levels, split_seed) if t.kind in tasks_cfg.kinds]
