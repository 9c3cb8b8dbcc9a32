"""The generator interface: prompts as token ids in, sampled tokens with their logprobs out.

In: `GenerationRequest`s (a prompt's token ids and how many samples of it) and one
`SamplingSpec`. Out: a `GenerationResult` holding, per request, `n` `Sample`s (token ids, the
generator's logprob of each, decoded text, why sampling stopped) and the weight version that
produced every one of them. The backends that implement it are the table `BACKENDS`
(pipeline/core/generator_backends.py), chosen by `rollout.backend` and built by backends.py: `make_generator`:
- `vllm` (vllm_backend.py): the vLLM offline engine, pinned to 0.32.0; the CPU build runs here.
- `transformers` (hf_backend.py): `model.generate`; GPU hosts without vLLM, and the fallback.

Logprobs are those of the distribution actually sampled from: log_softmax(logits / temperature)
after top-p truncation (with top_p = 1, simply the tempered distribution). The learner's ratio
denominator must use the same definition. Weight updates take Hugging Face parameter names and
shapes (`model.named_parameters()` of the same architecture) and bump the weight version; the
driver calls `update_weights` only between generation calls, so a sample never mixes versions.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Literal

from pipeline.core.config import ConfigError, ModelSection, RolloutSection
from pipeline.rollout.parsing import AnswerSpec, Extracted


@dataclass(frozen=True)
class SamplingSpec:
    """How to sample; one spec per generation call. With `seed`, the call's samples depend only on
    the seed, the requests and the weights (request i is sampled with seed + i)."""
    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None

    @classmethod
    def from_config(cls, cfg: RolloutSection) -> SamplingSpec:
        return cls(max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_p=cfg.top_p)


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt (token ids, chat template already applied) and the number of samples wanted. With `answer`,
    the generator also reads each sample's code (`Sample.extracted`), where the samples are, so the driver
    does not parse every answer itself."""
    prompt_ids: list[int]
    n: int = 1
    answer: AnswerSpec | None = None


@dataclass(frozen=True)
class Sample:
    """One sampled response. `logprobs[i]` is the generator's logprob of `token_ids[i]`; a response that
    ended with the end-of-turn token includes it (finish_reason 'stop'), one cut at the token
    limit does not (finish_reason 'length')."""
    token_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: Literal["stop", "length"]
    extracted: Extracted | None = None  # the answer's code read with the request's AnswerSpec, if it had one


@dataclass(frozen=True)
class GenerationResult:
    """Samples per request, in request order, all from weights `weight_version`."""
    samples: list[list[Sample]]
    weight_version: int
    elapsed_s: float
    backend: str = ""
    tokens_generated: int = field(default=0)


class GenerationError(ValueError):
    """A request the generator cannot serve (our bug: the episode manages context length). Settings
    that do not fit this host (rollout.device, rollout.backend) are a ConfigError, the user's to fix."""


class Generator(ABC):
    """A backend holding one copy of the policy. Subclasses call this constructor, set `device`, implement
    `_generate` and `_load_weights`, and, to be named in the backend table, `from_config`; this base loads the
    tokenizer, checks requests, times calls and keeps the weight version. Callers use only the members
    declared here (tests/rollout/test_rollout_backends.py checks every backend of the table has them all)."""

    backend: str = ""
    """The backend's name in the table (pipeline/core/generator_backends.py); results carry it."""
    model_path: Path
    max_model_len_tokens: int
    """Prompt plus response, in tokens: the longest request the generator serves."""
    tokenizer: object
    """The model's Hugging Face tokenizer."""
    eos_id: int
    """The end-of-turn token: sampling stops after it, and a response that ends with it finished ('stop')."""
    device: str
    """Where the policy runs: 'cpu' or 'cuda'."""
    weight_version: int
    """The version of the weights generating now: 0 for the model's own, then each update's."""

    def __init__(self, model_path: str | Path, max_model_len_tokens: int):
        from pipeline.rollout.tiny_model import load_tokenizer

        self.model_path = Path(model_path)
        self.max_model_len_tokens = max_model_len_tokens
        self.tokenizer = load_tokenizer(model_path)
        self.eos_id = self.tokenizer.eos_token_id
        self.weight_version = 0

    @classmethod
    def from_config(cls, model_path: str | Path, model_cfg: ModelSection, rollout_cfg: RolloutSection,
                    seed: int) -> Generator:
        """Start this backend on the model at `model_path` for a run: how `make_generator` builds every backend
        of the table. A generator that is never named in the table (a test's fake) need not define it."""
        raise NotImplementedError(f"{cls.__name__} defines no from_config, so no rollout.backend can name it; "
                                  "define one (see pipeline/rollout/hf_backend.py) before adding it to the table")

    def generate(self, requests: list[GenerationRequest], sampling: SamplingSpec) -> GenerationResult:
        """Sample `request.n` responses for every request; see the module docstring for logprobs."""
        for i, req in enumerate(requests):
            if req.n < 1 or not req.prompt_ids:
                raise GenerationError(f"request {i}: n = {req.n} and {len(req.prompt_ids)} prompt tokens; "
                                      "a request needs a prompt and n >= 1")
            if len(req.prompt_ids) + sampling.max_new_tokens > self.max_model_len_tokens:
                raise GenerationError(f"request {i}: {len(req.prompt_ids)} prompt tokens + max_new_tokens "
                                      f"{sampling.max_new_tokens} exceed max_model_len_tokens "
                                      f"{self.max_model_len_tokens}; trim the context before generating")
        if not requests:
            return GenerationResult([], self.weight_version, 0.0, self.backend)
        t0 = time.perf_counter()
        samples = with_extracted(requests, self._generate(requests, sampling))
        elapsed = time.perf_counter() - t0
        tokens = sum(len(s.token_ids) for group in samples for s in group)
        return GenerationResult(samples, self.weight_version, elapsed, self.backend, tokens)

    def update_weights(self, named_tensors: Iterable[tuple[str, object]], version: int) -> None:
        """Load `(hf_name, tensor)` pairs into the policy (all or some parameters) and set the version."""
        if version <= self.weight_version:
            raise ValueError(f"update_weights: version {version} is not newer than the current "
                             f"{self.weight_version}; pass the learner's next version number")
        self._load_weights(list(named_tensors))
        self.weight_version = version

    def decode(self, token_ids: list[int]) -> str:
        """Text of a response, without special tokens."""
        return self.tokenizer.decode(token_ids, skip_special_tokens=True)

    def close(self) -> None:
        """Release the engine (processes, memory); the generator cannot be used afterwards."""

    @abstractmethod
    def _generate(self, requests: list[GenerationRequest], sampling: SamplingSpec) -> list[list[Sample]]:
        """Per request, `n` samples."""

    @abstractmethod
    def _load_weights(self, named_tensors: list[tuple[str, object]]) -> None:
        """Copy the given parameters into the model."""


def with_extracted(requests: list[GenerationRequest], samples: list[list[Sample]]) -> list[list[Sample]]:
    """`samples` (per request) with each one's code read by its request's AnswerSpec; identical texts are read
    once (a group's samples often repeat)."""
    out = []
    for req, group in zip(requests, samples, strict=True):
        if req.answer is None:
            out.append(group)
            continue
        read: dict[tuple[str, str], Extracted] = {}
        for sample in group:
            key = (sample.text, sample.finish_reason)
            if key not in read:
                read[key] = req.answer.extract(*key)
        out.append([replace(sample, extracted=read[(sample.text, sample.finish_reason)]) for sample in group])
    return out


def resolve_device(cfg: RolloutSection) -> str:
    """The transformers backend's device: cuda when asked, or under 'auto' when torch sees one."""
    import torch

    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("rollout.device = 'cuda' but torch sees no CUDA device; use rollout.device=auto "
                          "or cpu, or run on a GPU host")
    if cfg.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return cfg.device
