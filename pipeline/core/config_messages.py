"""How a configuration error reads: one pydantic validation error in, one line naming the dotted key, the value
and what was expected out, or for an unknown key the closest valid key (config.load_config lists them all)."""
from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel


def _closest(key: str, valid: list[str], prefix: str) -> str:
    match = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
    if match:
        return f"; did you mean '{prefix}{match[0]}'?"
    return f"; valid keys here: {', '.join(prefix + v for v in sorted(valid))}"


def _model_at(root: type[BaseModel], path: tuple) -> type[BaseModel] | None:
    model: Any = root
    for part in path:
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return None
        model = field.annotation
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def describe_error(err: dict, root: type[BaseModel]) -> str:
    """One line for one pydantic error of a config rooted at `root`: the dotted key, the value and what was
    expected, or, for an unknown key, the closest valid one (or every valid key there)."""
    loc = tuple(str(p) for p in err["loc"])
    key = ".".join(loc)
    if err["type"] == "extra_forbidden":
        parent = _model_at(root, loc[:-1])
        valid = list(parent.model_fields) if parent else []
        prefix = "".join(p + "." for p in loc[:-1])
        return f"unknown key '{key}'{_closest(loc[-1], valid, prefix)}"
    value = err.get("input")
    return f"'{key}' = {value!r}: {err['msg'].lower()} (expected {_expected(root, loc)})"


def _expected(root: type[BaseModel], loc: tuple) -> str:
    parent = _model_at(root, loc[:-1])
    if parent is None or loc[-1] not in parent.model_fields:
        return "a valid value"
    ann = parent.model_fields[loc[-1]].annotation
    return getattr(ann, "__name__", str(ann)).replace("typing.", "")


def override_keys(overrides: list[str]) -> set[tuple[str, ...]]:
    """The dotted keys the command line set (`a.b=1` gives ('a', 'b'))."""
    return {tuple(item.split("=", 1)[0].strip().split(".")) for item in overrides if "=" in item}


def error_source(err: dict, given: set[tuple[str, ...]], path) -> str:
    """Where the value of one pydantic error came from: the command line (an override of that key or a
    section above it), the config file, or the defaults."""
    loc = tuple(str(p) for p in err["loc"])
    if any(loc[:len(k)] == k or k[:len(loc)] == loc for k in given):
        return "from the command line"
    return f"in {path}" if path else "in the defaults"


def describe_schema(model: type[BaseModel], prefix: str = "") -> list[str]:
    """One line per field: dotted key, default and description (for `cudaperf config --describe`)."""
    lines = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            lines += describe_schema(ann, f"{prefix}{name}.")
        else:
            default = field.default_factory() if field.default_factory else field.default
            lines.append(f"{prefix}{name} = {default!r}  # {field.description}")
    return lines
