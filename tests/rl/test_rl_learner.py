"""The DeepSpeed learner on one CPU rank (ZeRO-2): steps lower the loss, accumulation over
micro-batches matches one big pass, export buckets, reference logprobs, checkpoints."""
import pytest
import torch
from _rl_common import BUDGET_TOKENS, fixed_sequences, learner_cfg, on_policy, tiny_model

from pipeline.core.config import LearnerSection, RLSection
from pipeline.rl.batch import make_microbatches
from pipeline.rl.learner import Learner, deepspeed_config, plan_buckets, resolve_bf16, warmup_lr

pytestmark = pytest.mark.slow


@pytest.fixture
def learner(one_rank_group):
    return Learner(learner_cfg(log_entropy=True), RLSection(), tiny_model, seed=0)


def batches(budget=BUDGET_TOKENS):
    return make_microbatches(fixed_sequences(), budget)


def test_pure_helpers():
    assert plan_buckets([4, 4, 4, 10, 1], 8) == [[0, 1], [2], [3], [4]]
    assert plan_buckets([], 8) == []
    ds = deepspeed_config(LearnerSection(zero_stage=3, lr_warmup_steps=5), bf16=True)
    assert ds["zero_optimization"]["stage"] == 3 and ds["bf16"]["enabled"]
    assert ds["optimizer"]["params"]["torch_adam"] and ds["gradient_accumulation_steps"] == 1
    assert [warmup_lr(s, 1.0, 4) for s in (1, 2, 4, 9)] == [0.25, 0.5, 1.0, 1.0] and warmup_lr(1, 0.1, 0) == 0.1
    frozen = deepspeed_config(LearnerSection(), bf16=False, trainable=False)
    assert "optimizer" not in frozen and frozen["zero_optimization"]["stage"] == 0
    assert resolve_bf16("fp32") is False and resolve_bf16("auto") == torch.cuda.is_available()


def test_ppo_step_lowers_the_loss(learner):
    mbs = on_policy(learner, batches())
    assert len(mbs) > 1
    first = learner.train_step(mbs)
    assert first["ratio_mean"] == pytest.approx(1.0, abs=1e-5) and first["clip_frac"] == 0.0
    assert first["loss"] == pytest.approx(-(112 - 104) / 216, abs=1e-5)  # -mean(advantage) over tokens
    assert first["policy_tokens"] == 216 and first["sequences"] == 8 and first["step"] == 1
    assert first["grad_norm"] > 0 and first["entropy"] > 0
    second = learner.train_step(mbs)
    assert second["loss"] < first["loss"] - 0.05
    assert second["approx_kl"] > 0


def test_sft_step_lowers_the_loss(learner):
    mbs = batches()
    first = learner.train_step(mbs, loss="sft")
    second = learner.train_step(mbs, loss="sft")
    assert first["nll"] == pytest.approx(first["loss"], rel=1e-5)
    assert second["loss"] < first["loss"]


def test_accumulation_matches_one_pass(one_rank_group):
    """The step's token normalisation makes three micro-batches equal one big one (the big one
    with gradient checkpointing, which must not change the gradient either)."""
    results = []
    for budget, checkpointing in ((BUDGET_TOKENS, False), (10_000, True)):
        learner = Learner(learner_cfg(gradient_checkpointing=checkpointing), RLSection(), tiny_model, seed=0)
        mbs = on_policy(learner, batches(budget))
        results.append((len(mbs), learner.train_step(mbs)))
    (n_small, small), (n_big, big) = results
    assert n_small > 1 and n_big == 1
    assert small["loss"] == pytest.approx(big["loss"], rel=1e-5)
    assert small["grad_norm"] == pytest.approx(big["grad_norm"], rel=1e-4)


def test_export_buckets_cover_every_parameter_once(learner):
    buckets = list(learner.export_buckets())
    names = [name for bucket in buckets for name, _ in bucket]
    expected = [name for name, _ in learner.engine.module.named_parameters()]
    assert names == expected and len(set(names)) == len(names)
    assert len(buckets) > 1
    for bucket in buckets:
        size = sum(t.numel() * t.element_size() for _, t in bucket)
        assert size <= learner.cfg.sync_bucket_bytes or len(bucket) == 1
    full = learner.state_dict_for_export()
    assert set(full) == set(expected) and full["lm_head.weight"].shape == (512, 128)


def test_reference_model_and_kl(learner):
    ref = Learner(learner_cfg(), RLSection(), tiny_model, trainable=False, seed=0)
    mbs = on_policy(learner, batches())
    for mb, lp in zip(mbs, ref.logprobs(mbs)):
        assert torch.allclose(lp * mb.response_mask, mb.old_logprobs, atol=1e-5)
        mb.ref_logprobs = lp
    with pytest.raises(ValueError, match="trainable=False"):
        ref.train_step(mbs)
    learner.rl = RLSection(kl_coef=0.1)
    first = learner.train_step(mbs)
    assert first["kl"] == pytest.approx(0.0, abs=1e-6)
    assert learner.train_step(mbs)["kl"] > 0
    mbs[0].ref_logprobs = None
    with pytest.raises(ValueError, match="no ref_logprobs"):
        learner.train_step(mbs)


def test_checkpoint_round_trip(learner, tmp_path):
    mbs = on_policy(learner, batches())
    learner.train_step(mbs)
    learner.train_step(mbs)
    learner.save_checkpoint(tmp_path / "ckpt", run_state={"driver_step": 7})
    saved = learner.state_dict_for_export()

    restored = Learner(learner_cfg(log_entropy=True), RLSection(), tiny_model, seed=1)
    assert not torch.equal(restored.state_dict_for_export()["lm_head.weight"], saved["lm_head.weight"])
    state = restored.load_checkpoint(tmp_path / "ckpt")
    assert state == {"driver_step": 7, "learner_step": 2} and restored.step == 2
    got = restored.state_dict_for_export()
    assert all(torch.equal(got[k], saved[k]) for k in saved)
    # the optimizer state came back too: the next step is the same on both
    a, b = learner.train_step(mbs), restored.train_step(mbs)
    assert a["loss"] == pytest.approx(b["loss"], rel=1e-6) and a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-6)
    after_a, after_b = learner.state_dict_for_export(), restored.state_dict_for_export()
    assert all(torch.allclose(after_a[k], after_b[k], atol=1e-7) for k in after_a)
    # the Hugging Face copy loads on its own
    from transformers import Qwen2ForCausalLM
    hf = Qwen2ForCausalLM.from_pretrained(tmp_path / "ckpt" / "hf")
    assert all(torch.equal(p, saved[n]) for n, p in hf.named_parameters())
    with pytest.raises(FileNotFoundError, match="is not a learner checkpoint"):
        restored.load_checkpoint(tmp_path / "nothing")
