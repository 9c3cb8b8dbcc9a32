"""Fakes for rollout tests: a generator that answers from a script (and one a test can register as a
backend), and an evaluator with chosen verdicts.

Both implement the real interfaces (pipeline.rollout.generation.Generator; the evaluation callable
`evaluate(task, candidates) -> list[EvalResult]`), optionally slowly, and count what they did,
so scheduler tests can check batching, grouping and overlap without a model or a GPU.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

from pipeline.core.records import EvalResult
from pipeline.rollout.generation import Generator, Sample

ASSISTANT_HEADER = "<|im_start|>assistant"
MAX_MODEL_LEN = 2048  # context length of the rollout tests' tiny model


def turn_of(prompt_text: str) -> int:
    """Which turn a ChatML prompt asks for (0 for the first): the number of assistant headers minus one."""
    return prompt_text.count(ASSISTANT_HEADER) - 1


class ScriptedGenerator(Generator):
    """Answers `respond(prompt_text, sample_index)`, tokenized and ended with the end-of-turn token."""

    backend = "scripted"

    def __init__(self, model_path, max_model_len_tokens: int, respond: Callable[[str, int], str],
                 delay_s: float = 0.0, logprob: float = -0.5):
        super().__init__(model_path, max_model_len_tokens)
        self.respond = respond
        self.delay_s = delay_s
        self.logprob = logprob
        self.calls: list[list[int]] = []  # per call, n of each request

    def _generate(self, requests, sampling):
        self.calls.append([r.n for r in requests])
        time.sleep(self.delay_s)
        out = []
        for r in requests:
            text = self.tokenizer.decode(r.prompt_ids)
            group = []
            for k in range(r.n):
                ids = self.tokenizer.encode(self.respond(text, k), add_special_tokens=False)
                ids = ids[:sampling.max_new_tokens - 1] + [self.tokenizer.eos_token_id]
                group.append(Sample(ids, [self.logprob] * len(ids), self.decode(ids), "stop"))
            out.append(group)
        return out

    def _load_weights(self, named_tensors):
        pass


class CannedGenerator(ScriptedGenerator):
    """A backend a test registers in the backend table: every sample is `CANNED_ANSWER`, on the CPU."""

    backend = "canned"
    CANNED_ANSWER = "```cuda\n// no kernel yet\n```"

    def __init__(self, model_path, max_model_len_tokens: int, seed: int):
        super().__init__(model_path, max_model_len_tokens, lambda text, k: self.CANNED_ANSWER)
        self.device = "cpu"
        self.seed = seed

    @classmethod
    def from_config(cls, model_path, model_cfg, rollout_cfg, seed):
        return cls(model_path, model_cfg.max_model_len_tokens, seed)


class FakeEvaluator:
    """`verdict(task, candidate) -> (verdict, speedup)`; sleeps `delay_s` per call; thread-safe counters."""

    def __init__(self, verdict: Callable, delay_s: float = 0.0):
        self.verdict = verdict
        self.delay_s = delay_s
        self.calls: list[tuple[str, int]] = []  # (task id, candidates)
        self.max_concurrent = 0
        self._running = 0
        self._lock = threading.Lock()

    def __call__(self, task, candidates):
        with self._lock:
            self.calls.append((task.id, len(candidates)))
            self._running += 1
            self.max_concurrent = max(self.max_concurrent, self._running)
        time.sleep(self.delay_s)
        with self._lock:
            self._running -= 1
        results = []
        for cand in candidates:
            verdict, speedup = self.verdict(task, cand)
            results.append(EvalResult(task_id=task.id, candidate_hash=cand.content_hash(), format=cand.format,
                                      turn=cand.turn, verdict=verdict, speedup=speedup,
                                      reason="" if verdict == "correct" else f"fake verdict {verdict}"))
        return results
