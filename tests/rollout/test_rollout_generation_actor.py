"""The generator actor on a real local Ray: generation through the supervised pool, weight broadcast,
a killed generator replaced with the latest weights, and the scheduler driving the pool as the
driver will (transformers backend: a second vLLM engine would double the suite's start-up time)."""
import pytest
import ray
import torch

from rollout_fakes import FakeEvaluator

from actors.generators import PoolQueue, WeightState, make_generator_pool
from pipeline.rollout.conversation import ChatFormat
from pipeline.rollout.generation import GenerationRequest, SamplingSpec
from pipeline.rollout.scheduler import EpisodeScheduler, ThreadQueue
from pipeline.rollout.tiny_model import load_tokenizer


pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ray_local():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def one_token_weights(model_path, token: int) -> list[tuple[str, torch.Tensor]]:
    """Full weights under which every next token is `token` (see test_rollout_generators.constant_weights)."""
    from transformers import AutoModelForCausalLM
    state = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=torch.float32).state_dict()
    out = []
    for name, value in state.items():
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            value = torch.zeros_like(value)
        elif name == "model.embed_tokens.weight":
            value = torch.ones_like(value)
        elif name == "lm_head.weight":
            value = torch.zeros_like(value)
            value[token] = 10.0
        out.append((name, value))
    return out


def test_generator_pool_weights_and_replacement(ray_local, model_cfg, model_path, rollout_cfg, builtin_tasks):
    cfg = rollout_cfg.model_copy(update={"backend": "transformers", "device": "cpu", "samples_per_task": 2,
                                         "max_turns": 2, "max_new_tokens": 8})
    weights = WeightState()
    pool = make_generator_pool(model_cfg, cfg, seed=0, num_gpus_per_actor=0, max_retries=1, weights=weights)
    tok = load_tokenizer(model_path)
    prompt = tok.encode("__global__ void k(float* x)", add_special_tokens=False)
    token = tok.encode(" kernel", add_special_tokens=False)[0]
    generation = PoolQueue(pool, "generate")
    try:
        ticket = generation.submit([GenerationRequest(prompt, 2)], SamplingSpec(8))
        got_ticket, result = generation.next_completed(timeout_s=120)
        assert got_ticket == ticket and result.backend == "transformers" and result.weight_version == 0
        assert [len(s.token_ids) for s in result.samples[0]] == [8, 8]

        weights.broadcast(pool, one_token_weights(model_path, token), version=1)
        assert ray.get(pool.actors[0].weight_version.remote()) == 1
        old_pid = ray.get(pool.actors[0].pid.remote())
        ray.kill(pool.actors[0], no_restart=True)  # the replacement must come back with version 1
        generation.submit([GenerationRequest(prompt, 1)], SamplingSpec(8))
        _, result = generation.next_completed(timeout_s=180)
        assert pool.restarts == 1 and ray.get(pool.actors[0].pid.remote()) != old_pid
        assert result.weight_version == 1 and result.samples[0][0].token_ids == [token] * 8

        evaluator = FakeEvaluator(lambda t, c: ("not_executed", None))
        with ThreadQueue(evaluator, 2) as evaluation:
            scheduler = EpisodeScheduler(cfg, ChatFormat(tok), model_cfg.max_model_len_tokens, generation, evaluation,
                                         generation_slots=pool.size)
            outcomes, stats = scheduler.run([builtin_tasks["c2cuda/saxpy"]], step=3)
        assert len(outcomes) == 2 and all(o.trajectory.weight_version == 1 for o in outcomes)
        assert all([r.verdict for r in o.results()] == ["format_error"] * 2 for o in outcomes)
        assert stats.generation_calls == 2 and evaluator.calls == []  # no code, so nothing to evaluate
    finally:
        pool.shutdown()
