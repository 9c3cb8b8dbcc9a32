"""LoRA learner (learner.lora_rank > 0, peft): only the adapters train, a PPO step lowers the loss on the
fixed batch, and the export merges the adapters into plain Hugging Face weights that give the
learner's own logprobs in a model without peft (what a generator loads)."""
import pytest
import torch
from _rl_common import fixed_sequences, learner_cfg, on_policy, tiny_model

from pipeline.core.config import RLSection
from pipeline.rl.batch import make_microbatches

import peft  # noqa: F401  (the test extra brings it; a missing peft is a failure, not a skip)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("plain")
    torch.manual_seed(0)
    tiny_model().save_pretrained(path)
    return path


def test_lora_step_and_merged_export(one_rank_group, model_dir):
    from transformers import AutoModelForCausalLM

    from pipeline.rl.learner import Learner
    from pipeline.rl.loss import token_logprobs
    from pipeline.rl.update import build_policy, export_for_generators

    cfg = learner_cfg(lr=1e-2, lora_rank=4, lora_alpha=8.0)
    learner = Learner(cfg, RLSection(), build_policy(model_dir, cfg), seed=0)
    params = dict(learner.engine.module.named_parameters())
    trainable = [n for n, p in params.items() if p.requires_grad]
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    mbs = on_policy(learner, make_microbatches(fixed_sequences(), 10_000))
    first = learner.train_step(mbs)
    second = learner.train_step(mbs)
    assert second["loss"] < first["loss"] - 0.01

    exported = dict(export_for_generators(learner))
    plain = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    assert set(exported) == {n for n, _ in plain.named_parameters()}
    before = {n: p.detach().clone() for n, p in plain.named_parameters()}
    plain.load_state_dict(exported, strict=False)
    moved = [n for n, p in plain.named_parameters() if not torch.equal(p, before[n])]
    assert moved and all(n.endswith("proj.weight") for n in moved)  # the adapted layers, nothing else
    (mb,) = mbs
    with torch.no_grad():
        lp = token_logprobs(plain(input_ids=mb.input_ids, attention_mask=mb.attention_mask).logits, mb.input_ids)
    (expected,) = learner.logprobs(mbs)
    on = mb.response_mask > 0
    assert (lp[on] - expected[on]).abs().max().item() < 1e-4
