"""Weight sync, learner -> generators: after the learner's update is exported (gathered in buckets, Hugging
Face names) and loaded into a generator, the generator's logprobs of what it samples equal the learner's
logprobs of the same tokens, for every backend of the table (the vLLM engine on CPU, transformers); before the
sync they do not (the check can fail)."""
import pytest
import torch

from pipeline.core.config import LearnerSection, RLSection
from pipeline.core.generator_backends import BACKENDS
from pipeline.rl.batch import TrainSequence, make_microbatches
from pipeline.rollout.generation import GenerationRequest, SamplingSpec

pytestmark = [pytest.mark.slow, pytest.mark.integration]  # a real engine per backend: CI's second run
TEMPERATURE = 0.8


@pytest.fixture(scope="module")
def trained_learner(one_rank_group, model_path):
    from pipeline.rl.learner import Learner
    from pipeline.rl.update import build_policy
    cfg = LearnerSection(lr=3e-2, max_tokens_per_microbatch=4096, sync_bucket_bytes=1 << 20)
    learner = Learner(cfg, RLSection(), build_policy(model_path, cfg), temperature=TEMPERATURE, seed=0)
    g = torch.Generator().manual_seed(0)
    seqs = [TrainSequence(torch.randint(0, 4000, (40,), generator=g).tolist(), 10, [-8.0] * 30, 1.0, ("e", i))
            for i in range(4)]
    learner.train_step(make_microbatches(seqs, 4096))  # a large step: the weights move far from the initial ones
    return learner


def worst_gap(learner, gen) -> float:
    prompts = [gen.tokenizer.encode(t, add_special_tokens=False)
               for t in ("__global__ void saxpy(int n, float a, const float* x, float* y) {", "import torch\n")]
    result = gen.generate([GenerationRequest(p, 2) for p in prompts], SamplingSpec(24, TEMPERATURE))
    seqs = [TrainSequence(p + s.token_ids, len(p), s.logprobs, 0.0, ("e", k))
            for k, (p, group) in enumerate(zip(prompts, result.samples)) for s in group]
    worst = 0.0
    for mb, lp in zip(mbs := make_microbatches(seqs, 4096), learner.logprobs(mbs)):
        on = mb.response_mask > 0
        worst = max(worst, (lp[on] - mb.old_logprobs[on]).abs().max().item())
    return worst


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_generator_logprobs_equal_the_learners_after_a_sync(backend, generator_of, trained_learner):
    from pipeline.rl.update import export_for_generators
    gen = generator_of(backend)
    from transformers import AutoModelForCausalLM
    initial = AutoModelForCausalLM.from_pretrained(str(gen.model_path), dtype=torch.float32).state_dict()
    gen.update_weights(list(initial.items()), gen.weight_version + 1)  # as other tests may have left it
    assert worst_gap(trained_learner, gen) > 0.05, "before the sync the generator should disagree"
    version = gen.weight_version + 1
    gen.update_weights(export_for_generators(trained_learner), version)
    assert gen.weight_version == version
    assert worst_gap(trained_learner, gen) < 2e-3
