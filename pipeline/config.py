"""The run configuration: one typed tree, loaded once from YAML plus `section.key=value` overrides.

In: a YAML file (or none, for all defaults) and a list of dotted overrides from the command line.
Out: a `RunConfig`; each stage receives only its own section. Defaults live only here.
Every problem in a file is reported at once, each naming the key, the value and the fix; an
unknown key names the closest valid one.
"""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class RunSection(Section):
    name: str = Field("cudaperf", description="run name; the run directory is output_dir/name")
    output_dir: str = Field("runs", description="where run directories are written")
    seed: int = Field(0, description="seed of every random choice the run makes")


class TasksSection(Section):
    source: str = Field("builtin", description="'builtin', a directory of task YAML files, or a KernelBench checkout")
    kernelbench_levels: list[int] = Field([1, 2], description="KernelBench levels to load when source is a checkout")
    kinds: list[Literal["c2cuda", "torch2cuda"]] = Field(["c2cuda", "torch2cuda"], description="task kinds used")


class CompileSection(Section):
    arch: str = Field("sm_90", description="GPU architecture compiled for (nvcc -arch)")
    nvcc: str = Field("nvcc", description="the nvcc executable")
    extra_flags: list[str] = Field(["-O3"], description="flags added to every nvcc call")
    timeout_s: float = Field(120.0, description="wall-clock limit of one compilation")
    memory_limit_bytes: int = Field(8 << 30, description="address-space limit of the compiler process")
    kernelbench_timeout_s: float = Field(300.0, description="wall-clock limit of one load_inline build")
    cache_dir: str = Field("~/.cache/cudaperf/compile", description="content-addressed artefact cache")
    workers: int = Field(2, description="CPU compile workers in the pool")
    log_chars: int = Field(2000, description="compiler output kept in a result, trimmed to the errors")


class EvalSection(Section):
    gpus: int = Field(-1, description="evaluator actors, one per GPU; -1 uses every GPU Ray sees, 0 runs CPU-only")
    run_timeout_s: float = Field(30.0, description="wall-clock limit of one candidate's child process per phase")
    child_memory_limit_bytes: int = Field(32 << 30, description="address-space limit of the child (host memory)")
    warmup_trials: int = Field(3, description="untimed calls before timing")
    timing_trials: int = Field(100, description="timed calls per timing round (at most)")
    timing_rounds: int = Field(3, description="rounds alternating baseline and candidate timing")
    timing_budget_s: float = Field(2.0, description="stop adding trials in a round after this long")
    l2_flush_bytes: int = Field(256 << 20, description="bytes written before each trial to flush the L2")
    peak_bandwidth_bytes_per_s: float = Field(4.8e12, description="DRAM peak for the roofline floor (H200: 4.8 TB/s)")
    peak_flops_per_s: float = Field(989e12, description="compute peak for the roofline floor (H200 bf16 dense)")
    implausible_fraction: float = Field(0.5, description="reject times below this fraction of the roofline floor")
    unprivileged_user: str = Field("nobody", description="user the child runs as when the evaluator is root; '' keeps the user")
    result_cache_dir: str = Field("~/.cache/cudaperf/results", description="EvalResult cache by content; '' disables")
    max_retries: int = Field(2, description="times a candidate is resubmitted after its actor died")


class RunConfig(Section):
    run: RunSection = Field(default_factory=RunSection)
    tasks: TasksSection = Field(default_factory=TasksSection)
    compile: CompileSection = Field(default_factory=CompileSection)
    eval: EvalSection = Field(default_factory=EvalSection)


class ConfigError(ValueError):
    """Every problem found in a configuration, one per line."""


def _closest(key: str, valid: list[str], prefix: str) -> str:
    match = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
    if match:
        return f"; did you mean '{prefix}{match[0]}'?"
    return f"; valid keys here: {', '.join(prefix + v for v in sorted(valid))}"


def _model_at(path: tuple) -> type[BaseModel] | None:
    model: Any = RunConfig
    for part in path:
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return None
        model = field.annotation
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _describe(err: dict) -> str:
    loc = tuple(str(p) for p in err["loc"])
    key = ".".join(loc)
    if err["type"] == "extra_forbidden":
        parent = _model_at(loc[:-1])
        valid = list(parent.model_fields) if parent else []
        prefix = "".join(p + "." for p in loc[:-1])
        return f"unknown key '{key}'{_closest(loc[-1], valid, prefix)}"
    value = err.get("input")
    return f"'{key}' = {value!r}: {err['msg'].lower()} (expected {_expected(loc)})"


def _expected(loc: tuple) -> str:
    parent = _model_at(loc[:-1])
    if parent is None or loc[-1] not in parent.model_fields:
        return "a valid value"
    ann = parent.model_fields[loc[-1]].annotation
    return getattr(ann, "__name__", str(ann)).replace("typing.", "")


def _parse_scalar(text: str) -> Any:
    """A command-line value: YAML scalars and lists (`3`, `0.5`, `true`, `[1,2]`, `name`)."""
    if not text.strip():
        return ""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """Set `a.b.c=value` entries into a nested dict; a malformed entry is a ConfigError."""
    problems = []
    for item in overrides:
        if "=" not in item:
            problems.append(f"override '{item}' has no '=': write section.key=value")
            continue
        dotted, value = item.split("=", 1)
        node = raw
        parts = dotted.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                problems.append(f"override '{dotted}': '{part}' is a value, not a section")
                break
        else:
            node[parts[-1]] = _parse_scalar(value)
    if problems:
        raise ConfigError("\n".join(problems))
    return raw


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Load a RunConfig from YAML (or defaults) plus overrides; raise ConfigError listing every problem."""
    raw: dict = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file '{p}' does not exist; pass a path such as configs/local.yaml")
        try:
            raw = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"config file '{p}' is not valid YAML: {e}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"config file '{p}' must hold a mapping of sections, not {type(raw).__name__}")
    raw = apply_overrides(raw, overrides or [])
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as e:
        where = f" in {path}" if path else ""
        lines = [f"  - {_describe(err)}" for err in e.errors()]
        raise ConfigError(f"{len(lines)} problem(s) in the configuration{where}:\n" + "\n".join(lines)) from None


def describe_schema(model: type[BaseModel] = RunConfig, prefix: str = "") -> list[str]:
    """One line per field: dotted key, default and description (for `cudaperf config --help`)."""
    lines = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            lines += describe_schema(ann, f"{prefix}{name}.")
        else:
            default = field.default_factory() if field.default_factory else field.default
            lines.append(f"{prefix}{name} = {default!r}  # {field.description}")
    return lines
