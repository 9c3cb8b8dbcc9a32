"""The transformers backend on a GPU (the H200 host, where vLLM is not installed): it samples on cuda,
honours max_new_tokens, and its logprobs match a forward pass of the same weights, in float32 and
bfloat16."""
import pytest
import torch

from pipeline.rollout.backends import make_generator
from pipeline.rollout.generation import GenerationRequest, SamplingSpec

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype,max_error,mean_error", [("float32", 2e-3, 2e-3), ("bfloat16", 0.5, 0.05)])
def test_transformers_backend_on_cuda(model_cfg, model_path, rollout_cfg, dtype, max_error, mean_error):
    from transformers import AutoModelForCausalLM
    cfg = model_cfg.model_copy(update={"dtype": dtype})
    gen = make_generator(cfg, rollout_cfg.model_copy(update={"device": "auto"}), seed=0, backend="transformers")
    assert gen.device == "cuda"
    state = {k: v.clone() for k, v in gen.model.state_dict().items()}
    gen.update_weights([(k, v * 20 if k == "lm_head.weight" else v) for k, v in state.items()], 1)
    prompt = gen.tokenizer.encode("__global__ void saxpy(int n, float a, const float* x, float* y) {",
                                  add_special_tokens=False)
    result = gen.generate([GenerationRequest(prompt, 4)], SamplingSpec(32, temperature=0.7))
    assert result.weight_version == 1 and all(len(s.token_ids) <= 32 for s in result.samples[0])
    reference = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=getattr(torch, dtype)).cuda().eval()
    reference.load_state_dict(dict(gen.model.state_dict()))
    errors = []
    for sample in result.samples[0]:
        ids = torch.tensor([prompt + sample.token_ids], device="cuda")
        with torch.no_grad():
            logits = reference(ids).logits[0, len(prompt) - 1:-1].float() / 0.7
        expected = torch.log_softmax(logits, -1).gather(1, ids[0, len(prompt):, None])[:, 0].cpu()
        errors.append((expected - torch.tensor(sample.logprobs)).abs())
    errors = torch.cat(errors)  # bfloat16: cached decoding and a full forward round differently
    assert errors.max().item() < max_error and errors.mean().item() < mean_error, (errors.max(), errors.mean())
    gen.close()
