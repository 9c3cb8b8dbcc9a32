"""The generator a configuration names: `make_generator` builds the backend `rollout.backend` names in the table
`BACKENDS` (pipeline/core/generator_backends.py: name -> the dotted path of its `Generator` class, the modules it
needs, what to install). Apart from generation.py, so that the interface does not import the backends that
implement it (each backend imports the interface); the classes are imported by path, only when built.
"""
from __future__ import annotations

import importlib

from pipeline.core.config import ConfigError, ModelSection, RolloutSection
from pipeline.core.generator_backends import BACKENDS, unknown_backend
from pipeline.rollout.generation import Generator


def generator_class(name: str) -> type[Generator]:
    """The `Generator` subclass backend `name` of the table names (imported, not started)."""
    if problem := unknown_backend(name):
        raise ConfigError(problem)
    module, _, attr = BACKENDS[name].generator.rpartition(".")
    cls = getattr(importlib.import_module(module), attr)
    if not (isinstance(cls, type) and issubclass(cls, Generator)):
        raise TypeError(f"backend '{name}' names {BACKENDS[name].generator}, which is not a Generator subclass; "
                        "point its table entry at one")
    return cls


def make_generator(model_cfg: ModelSection, rollout_cfg: RolloutSection, seed: int,
                   backend: str | None = None) -> Generator:
    """Build the generator `rollout_cfg.backend` (or `backend`) names, on the model `model_cfg.path` names."""
    from pipeline.rollout.tiny_model import resolve_model_path

    name = backend or rollout_cfg.backend
    if problem := unknown_backend(name):
        raise ConfigError(problem)
    entry = BACKENDS[name]
    for module in entry.requires:  # hosts where vLLM cannot be installed (the GPU test machine) lack it
        try:
            importlib.import_module(module)
        except ImportError as e:
            others = [n for n in BACKENDS if n != name]
            raise ConfigError(f"rollout.backend = '{name}' but {module} cannot be imported ({e}); install "
                              f"{entry.install}" + (f", or set rollout.backend to one of: {', '.join(others)}"
                                                    if others else "")) from e
    return generator_class(name).from_config(resolve_model_path(model_cfg), model_cfg, rollout_cfg, seed)
