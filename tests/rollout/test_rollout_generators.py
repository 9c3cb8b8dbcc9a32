"""Every generator backend of the table (a real vLLM engine on CPU, transformers generate) behind one interface:
the same outputs, the same tokens for the same weights, logprobs equal to a forward pass of those
weights, and weight updates that take effect at once."""
import pytest
import torch

from pipeline.core.generator_backends import BACKENDS
from pipeline.rollout.generation import GenerationError, GenerationRequest, GenerationResult, SamplingSpec

from rollout_fakes import MAX_MODEL_LEN


@pytest.fixture(scope="module")
def generators(generator_of):
    return {name: generator_of(name) for name in BACKENDS}


@pytest.fixture(scope="module")
def initial_state(model_path):
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=torch.float32)
    return {k: v.clone() for k, v in model.state_dict().items()}


def prompts(tokenizer):
    texts = ["__global__ void saxpy(int n, float a, const float* x, float* y) {",
             "import torch\nclass Model(nn.Module):"]
    return [tokenizer.encode(t, add_special_tokens=False) for t in texts]


def constant_weights(state: dict, token: int) -> list[tuple[str, torch.Tensor]]:
    """Weights whose every next-token distribution puts all mass on `token`: attention and MLP outputs are
    zero, every embedding is the same vector, and only `token`'s output row sees it."""
    out = []
    for name, value in state.items():
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            out.append((name, torch.zeros_like(value)))
    out.append(("model.embed_tokens.weight", torch.ones_like(state["model.embed_tokens.weight"])))
    head = torch.zeros_like(state["lm_head.weight"])
    head[token] = 10.0
    out.append(("lm_head.weight", head))
    return out


def sharpened_weights(state: dict) -> list[tuple[str, torch.Tensor]]:
    """The random initial weights with a 20x output layer: peaked distributions, varied logprobs."""
    return [(name, value * 20 if name == "lm_head.weight" else value) for name, value in state.items()]


@pytest.mark.integration
def test_backends_share_one_interface(generators):
    for name, gen in generators.items():
        p1, p2 = prompts(gen.tokenizer)
        result = gen.generate([GenerationRequest(p1, 3), GenerationRequest(p2, 1)], SamplingSpec(24))
        assert isinstance(result, GenerationResult) and result.backend == name
        assert [len(group) for group in result.samples] == [3, 1]
        assert result.weight_version == gen.weight_version and result.elapsed_s > 0
        assert result.tokens_generated == sum(len(s.token_ids) for g in result.samples for s in g)
        for sample in (s for g in result.samples for s in g):
            assert 0 < len(sample.token_ids) <= 24 and len(sample.logprobs) == len(sample.token_ids)
            assert all(isinstance(t, int) for t in sample.token_ids) and all(lp <= 1e-5 for lp in sample.logprobs)
            assert sample.text == gen.decode(sample.token_ids)
            assert sample.finish_reason == ("stop" if sample.token_ids[-1] == gen.eos_id else "length")
        assert gen.generate([], SamplingSpec(8)).samples == []
        with pytest.raises(GenerationError, match="exceed max_model_len_tokens"):
            gen.generate([GenerationRequest([5] * (MAX_MODEL_LEN - 10), 1)], SamplingSpec(24))
        with pytest.raises(GenerationError, match="n >= 1"):
            gen.generate([GenerationRequest(p1, 0)], SamplingSpec(8))
        with pytest.raises(ValueError, match="not newer"):
            gen.update_weights([], gen.weight_version)


@pytest.mark.integration
def test_same_weights_give_the_same_tokens_on_every_backend(generators, initial_state):
    tok = next(iter(generators.values())).tokenizer  # one model: every backend has its tokenizer
    token = tok.encode(" kernel", add_special_tokens=False)[0]
    for name, gen in generators.items():
        gen.update_weights(constant_weights(initial_state, token), gen.weight_version + 1)
        result = gen.generate([GenerationRequest(p, 2) for p in prompts(tok)], SamplingSpec(12, temperature=0.8))
        for sample in (s for g in result.samples for s in g):
            assert sample.token_ids == [token] * 12 and sample.finish_reason == "length", name
            assert max(abs(lp) for lp in sample.logprobs) < 1e-4
        gen.update_weights(constant_weights(initial_state, gen.eos_id), gen.weight_version + 1)
        (stop,), = gen.generate([GenerationRequest(prompts(tok)[0], 1)], SamplingSpec(12)).samples
        assert stop.token_ids == [gen.eos_id] and stop.finish_reason == "stop" and stop.text == "", name


@pytest.mark.integration  # every test here builds both real engines (about 20 s): CI's second run
@pytest.mark.parametrize("temperature,top_p", [(0.7, 1.0), (1.0, 0.8)])
def test_logprobs_match_a_forward_pass_of_the_same_weights(generators, initial_state, model_path, temperature, top_p):
    from transformers import AutoModelForCausalLM, TopPLogitsWarper
    weights = sharpened_weights(initial_state)
    reference = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=torch.float32).eval()
    reference.load_state_dict(dict(weights))
    for name, gen in generators.items():
        before = gen.weight_version
        gen.update_weights(weights, before + 1)
        assert gen.weight_version == before + 1
        ps = prompts(gen.tokenizer)
        result = gen.generate([GenerationRequest(p, 2) for p in ps], SamplingSpec(24, temperature, top_p))
        assert result.weight_version == before + 1
        worst = 0.0
        for prompt, group in zip(ps, result.samples):
            for sample in group:
                ids = torch.tensor([prompt + sample.token_ids])
                with torch.no_grad():
                    logits = reference(ids).logits[0, len(prompt) - 1:-1].float() / temperature
                if top_p < 1:
                    logits = TopPLogitsWarper(top_p)(ids, logits)
                expected = torch.log_softmax(logits, -1).gather(1, torch.tensor(sample.token_ids)[:, None])[:, 0]
                worst = max(worst, (expected - torch.tensor(sample.logprobs)).abs().max().item())
        spread = max(-lp for g in result.samples for s in g for lp in s.logprobs)
        assert spread > 0.5, "the sharpened model should give varied logprobs"
        assert worst < 2e-3, f"{name}: generator logprobs differ from the forward pass by {worst}"
