"""Task files and records validated: YAML or a dict in, a `Task` out, or `TaskError` with one sentence per
problem naming the file, the field and the fix."""
from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any, Iterable

import yaml
from pydantic import ValidationError

from pipeline.core.records import Task
from pipeline.core.errors import TaskError
from pipeline.tasks.c_types import arg_dtype, is_pointer, split_ctype
from pipeline.tasks.expressions import eval_expr, expr_names, parse_init
from pipeline.tasks.reference_module import REQUIRED_DEFS, config_params, module_names


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
    from pipeline.core import records
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
            problems.append(f"{path}: field '{where}' is missing; add it (see pipeline/core/records.py for its meaning).")
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
    if task.tolerance.rtol < 0 or task.tolerance.atol < 0 or task.tolerance.atol_abs < 0:
        p.append(f"{path}: field 'tolerance' has a negative value; rtol, atol and atol_abs must be >= 0.")
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
            if field == "init" and kind == "records" and not _records_fit(a):
                p.append(f"{path}: field '{where}.init' = '{text}' draws records, whose fields are 4- or 8-byte "
                         f"integers or floats; give '{a.name}' a pointer type of 4- or 8-byte integers such as "
                         f"'const size_t*' and cast it to the struct where it is used.")
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
                        init = parse_init(text, cfg.params)
                        n_fields = len(init[1]) if init[0] == "records" else 1
                        if ptr and eval_expr(a.size, cfg.params) % n_fields:
                            raise TaskError(f"size '{a.size}' gives {eval_expr(a.size, cfg.params)} elements, not a "
                                            f"whole number of records of {n_fields} fields")
                        if ptr and init[0] == "records" and arg_dtype(a).startswith("uint") and any(
                                kind == "randint" and lo < 0 for kind, lo, _ in init[1]):
                            raise TaskError(f"a randint field draws negative numbers into '{a.ctype}', which holds "
                                            f"none (and would sort them as huge ones); draw from 0 up or use a signed "
                                            f"type")
                        if ptr and init[0] == "graph" and eval_expr(a.size, cfg.params) != init[1] ** 2:
                            raise TaskError(f"size '{a.size}' gives {eval_expr(a.size, cfg.params)} elements, not the "
                                            f"{init[1]} x {init[1]} of the graph's adjacency matrix")
                except TaskError as e:
                    p.append(f"{path}: field '{where}.{field}' in config '{cfg.name}': {e}.")
    return p


def _records_fit(arg) -> bool:
    """Whether an argument can hold records(...): a pointer to 4- or 8-byte integers (whose floating-point
    fields are stored bit for bit as float32 or float64)."""
    try:
        dtype = arg_dtype(arg)
    except TaskError:
        return True  # the type's own error is reported
    return is_pointer(arg) and dtype in ("int32", "uint32", "int64", "uint64")


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
