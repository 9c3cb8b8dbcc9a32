"""The transformers generator backend: `model.generate` on one device (a GPU host without vLLM, or CPU).

In: a model directory, the `model` section, a device and a seed. Out: `Generator` (generation.py),
with the same samples, logprobs and weight-update entry point as the vLLM backend.

Sampling is pinned down explicitly rather than taken from the model's generation_config (which
for instruction-tuned models often sets top_k, repetition penalties and a temperature): the
generation config disables every built-in processor, and this module supplies temperature, top-p
and a recorder as `logits_processor`, which transformers runs after its own processors. The
recorder keeps only the current step's log-softmax and, once the next token is known, the
logprob of that token, so memory stays at one batch-by-vocabulary row set however long the
response (`output_scores` would keep all of them).

The KV cache is transformers' static cache, allocated once per call for prompt plus
max_new_tokens: the default dynamic cache concatenates at every step, which on the 2-core CPU
measured 2.2x slower for a rollout batch (96 sequences of about 600 prompt tokens; 885 against
1,938 tokens/s), though faster for one sequence alone (512 against 298). Auto-compilation (which transformers would switch on for a static cache on
a GPU) stays off: rollout batch sizes change from call to call and each shape would recompile.
"""
from __future__ import annotations

from pathlib import Path

from pipeline.core.config import ModelSection, RolloutSection
from pipeline.rollout.generation import GenerationRequest, Generator, Sample, SamplingSpec, resolve_device

DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


class _LogprobRecorder:
    """Last logits processor: records log_softmax(scores)[token] of every sampled token."""

    def __init__(self):
        self._previous = None
        self._steps: list = []

    def __call__(self, input_ids, scores):
        import torch

        if self._previous is not None:  # input_ids now end with the token sampled from the previous scores
            self._steps.append(self._previous.gather(1, input_ids[:, -1:]).squeeze(1))
        self._previous = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, last_tokens):
        """Logprobs [batch, steps]: the final step's token was sampled after the last call."""
        import torch

        if self._previous is not None:
            self._steps.append(self._previous.gather(1, last_tokens[:, None]).squeeze(1))
        return torch.stack(self._steps, dim=1) if self._steps else torch.empty(last_tokens.shape[0], 0)


class HFGenerator(Generator):
    """A Hugging Face causal LM in eval mode, sampling with `generate`."""

    backend = "transformers"

    def __init__(self, model_path: str | Path, model_cfg: ModelSection, device: str, seed: int,
                 max_sequences_per_call: int = 64):
        super().__init__(model_path, model_cfg.max_model_len_tokens)
        import torch
        from transformers import AutoModelForCausalLM

        from pipeline.rollout.tiny_model import padding_id

        torch.manual_seed(seed)
        self.device = device
        self.max_sequences_per_call = max_sequences_per_call
        dtype = getattr(torch, DTYPES[model_cfg.dtype])
        self.model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=dtype)
        self.model.to(device).eval()
        self.pad_id = padding_id(self.tokenizer)

    @classmethod
    def from_config(cls, model_path: str | Path, model_cfg: ModelSection, rollout_cfg: RolloutSection,
                    seed: int) -> HFGenerator:
        """The model on rollout.device (resolved: 'auto' takes cuda where torch sees one), sampling at most
        rollout.max_sequences_per_batch sequences per call."""
        return cls(model_path, model_cfg, resolve_device(rollout_cfg), seed, rollout_cfg.max_sequences_per_batch)

    def _generate(self, requests: list[GenerationRequest], sampling: SamplingSpec) -> list[list[Sample]]:
        import torch

        if sampling.seed is not None:  # one generator stream per call: the same requests give the same samples
            torch.manual_seed(sampling.seed)
        rows = [(i, r.prompt_ids) for i, r in enumerate(requests) for _ in range(r.n)]
        result: list[list[Sample]] = [[] for _ in requests]
        for start in range(0, len(rows), self.max_sequences_per_call):
            chunk = rows[start:start + self.max_sequences_per_call]
            for (i, _), sample in zip(chunk, self._generate_rows([p for _, p in chunk], sampling)):
                result[i].append(sample)
        return result

    def _generate_rows(self, prompts: list[list[int]], sampling: SamplingSpec) -> list[Sample]:
        import torch
        from transformers import GenerationConfig, LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper

        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, p in enumerate(prompts):  # left padding: every row's last prompt token is at the same column
            ids[row, width - len(p):] = torch.tensor(p)
            mask[row, width - len(p):] = 1
        processors = []
        if sampling.temperature != 1.0:
            processors.append(TemperatureLogitsWarper(sampling.temperature))
        if sampling.top_p < 1.0:
            processors.append(TopPLogitsWarper(sampling.top_p))
        recorder = _LogprobRecorder()
        config = GenerationConfig(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, typical_p=1.0,
                                  repetition_penalty=1.0, no_repeat_ngram_size=0, min_new_tokens=0,
                                  max_new_tokens=sampling.max_new_tokens, eos_token_id=self.eos_id,
                                  pad_token_id=self.pad_id, num_return_sequences=1, use_cache=True,
                                  return_dict_in_generate=True, cache_implementation="static",
                                  disable_compile=True)
        with torch.no_grad():
            out = self.model.generate(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                                      generation_config=config,
                                      logits_processor=LogitsProcessorList(processors + [recorder]))
        generated = out.sequences[:, width:]
        logprobs = recorder.finish(generated[:, -1]).cpu() if generated.shape[1] else None
        generated = generated.cpu()
        samples = []
        for row in range(len(prompts)):
            tokens = generated[row].tolist()
            stop = tokens.index(self.eos_id) + 1 if self.eos_id in tokens else None
            tokens = tokens[:stop] if stop else tokens
            row_logprobs = logprobs[row, :len(tokens)].tolist() if logprobs is not None else []
            samples.append(Sample(tokens, row_logprobs, self.decode(tokens), "stop" if stop else "length"))
        return samples

    def _load_weights(self, named_tensors: list[tuple[str, object]]) -> None:
        import torch

        params = dict(self.model.named_parameters())
        unknown = [name for name, _ in named_tensors if name not in params]
        if unknown:
            raise KeyError(f"update_weights: {len(unknown)} name(s) the model does not have, e.g. '{unknown[0]}'; "
                           "pass Hugging Face names of the same architecture (model.named_parameters())")
        with torch.no_grad():
            for name, tensor in named_tensors:
                if tuple(tensor.shape) != tuple(params[name].shape):
                    raise ValueError(f"update_weights: '{name}' has shape {tuple(tensor.shape)}, the model's is "
                                     f"{tuple(params[name].shape)}")
                params[name].copy_(tensor.to(params[name].device, params[name].dtype))

    def close(self) -> None:
        self.model = None
