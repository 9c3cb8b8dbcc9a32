"""PPO-clip, KL and SFT losses on hand-made [B, L] tensors."""
import math

import pytest
import torch

from pipeline.rl.loss import (aggregate, aggregation_denominator, kl_k3, ppo_loss, sft_loss, token_entropy,
                              token_logprobs)

# two sequences: the first has 3 policy tokens, the second 1 (columns 0-1 are prompt)
MASK = torch.tensor([[0, 0, 1, 1, 1], [0, 0, 1, 0, 0]], dtype=torch.float32)
ADV = torch.tensor([[0, 0, 1.0, 1.0, 1.0], [0, 0, -2.0, 0, 0]])


def test_aggregations_by_hand():
    values = torch.tensor([[9.0, 9.0, 1.0, 2.0, 3.0], [9.0, 9.0, 4.0, 9.0, 9.0]])
    assert aggregate(values, MASK, "token_mean").item() == pytest.approx((1 + 2 + 3 + 4) / 4)
    assert aggregate(values, MASK, "seq_mean_token_sum").item() == pytest.approx((6 + 4) / 2)
    assert aggregate(values, MASK, "seq_mean_token_mean").item() == pytest.approx((2 + 4) / 2)
    # a step-wide denominator replaces the micro-batch's own count
    assert aggregate(values, MASK, "token_mean", denominator=8).item() == pytest.approx(10 / 8)
    assert aggregation_denominator("token_mean", [MASK, MASK]) == 8
    assert aggregation_denominator("seq_mean_token_mean", [MASK, torch.zeros(3, 5)]) == 2
    assert aggregate(values, torch.zeros_like(MASK), "token_mean").item() == 0.0


@pytest.mark.parametrize("mode,expected", [("token_mean", -(1 + 1 + 1 - 2) / 4),
                                           ("seq_mean_token_sum", -(3 - 2) / 2),
                                           ("seq_mean_token_mean", -(1 - 2) / 2)])
def test_ratio_one_gives_minus_mean_advantage(mode, expected):
    lp = torch.full((2, 5), -1.5, requires_grad=True)
    loss, stats = ppo_loss(lp, lp.detach().clone(), ADV, MASK, mode)
    assert loss.item() == pytest.approx(expected)
    assert stats["clip_frac"] == 0.0 and stats["ratio_mean"] == pytest.approx(1.0) and stats["approx_kl"] == 0.0
    loss.backward()
    # d loss / d logprob = -A * (aggregation weight) on policy tokens, 0 elsewhere
    assert torch.all(lp.grad[MASK == 0] == 0)
    assert lp.grad[0, 2].item() < 0 < lp.grad[1, 2].item()


def one_token(ratio, advantage, eps=0.2, eps_high=None):
    lp = torch.tensor([[0.0, torch.log(torch.tensor(ratio)).item()]], requires_grad=True)
    mask, adv = torch.tensor([[0.0, 1.0]]), torch.tensor([[0.0, advantage]])
    loss, stats = ppo_loss(lp, torch.zeros(1, 2), adv, mask, clip_eps=eps, clip_eps_high=eps_high)
    loss.backward()
    return loss.item(), lp.grad[0, 1].item(), stats["clip_frac"]


def test_clipping():
    # positive advantage: past 1 + eps the objective is flat (no gradient), below it is not clipped
    assert one_token(1.5, 1.0) == (pytest.approx(-1.2), 0.0, 1.0)
    loss, grad, frac = one_token(0.5, 1.0)
    assert loss == pytest.approx(-0.5) and grad == pytest.approx(-0.5) and frac == 0.0
    # negative advantage: below 1 - eps flat, above it the full (pessimistic) penalty
    assert one_token(0.5, -1.0) == (pytest.approx(0.8), 0.0, 1.0)
    loss, grad, frac = one_token(1.5, -1.0)
    assert loss == pytest.approx(1.5) and grad == pytest.approx(1.5) and frac == 0.0
    # clip-higher: a separate upper range
    assert one_token(1.5, 1.0, eps_high=0.28)[0] == pytest.approx(-1.28)


def test_mask_excludes_non_policy_tokens():
    lp = torch.randn(2, 5)
    old = lp + 0.1 * torch.randn(2, 5)
    base, _ = ppo_loss(lp, old, ADV, MASK)
    # anything at prompt, feedback or padding positions is ignored, even absurd values
    old2, lp2, adv2 = old.clone(), lp.clone(), ADV.clone()
    off = MASK == 0
    old2[off], lp2[off], adv2[off] = -1e4, 50.0, 1e6
    again, stats = ppo_loss(lp2, old2, adv2, MASK)
    assert torch.isfinite(again) and again.item() == pytest.approx(base.item())
    assert stats["tokens"] == 4


def test_kl_term():
    lp = torch.log_softmax(torch.randn(2, 5), -1)
    assert torch.all(kl_k3(lp, lp, MASK) == 0)
    loss_no_kl, _ = ppo_loss(lp, lp, ADV, MASK)
    loss_kl, stats = ppo_loss(lp, lp, ADV, MASK, ref_logprobs=lp, kl_coef=0.5)
    assert loss_kl.item() == pytest.approx(loss_no_kl.item()) and stats["kl"] == 0.0
    ref = lp - 0.3
    kl = kl_k3(lp, ref, MASK)
    assert torch.all(kl[MASK > 0] > 0) and torch.all(kl[MASK == 0] == 0)
    loss_kl, stats = ppo_loss(lp, lp, ADV, MASK, ref_logprobs=ref, kl_coef=0.5)
    expected = torch.exp(torch.tensor(-0.3)) + 0.3 - 1
    assert stats["kl"] == pytest.approx(expected.item(), rel=1e-5)
    assert loss_kl.item() == pytest.approx(loss_no_kl.item() + 0.5 * expected.item(), rel=1e-5)


def test_token_logprobs_entropy_and_sft():
    logits = torch.randn(2, 5, 7)
    ids = torch.randint(0, 7, (2, 5))
    lp = token_logprobs(logits, ids, temperature=0.7, chunk_rows=1)
    ref = torch.log_softmax(logits / 0.7, -1)[:, :-1].gather(-1, ids[:, 1:, None]).squeeze(-1)
    assert lp.shape == (2, 5) and torch.all(lp[:, 0] == 0)
    assert torch.allclose(lp[:, 1:], ref, atol=1e-6)
    ent = token_entropy(logits)
    p = torch.softmax(logits[:, :-1], -1)
    assert torch.allclose(ent[:, 1:], -(p * p.log()).sum(-1), atol=1e-5)
    assert sft_loss(lp, MASK).item() == pytest.approx(-(lp * MASK).sum().item() / 4, rel=1e-6)


def test_shape_errors_name_the_tensors():
    with pytest.raises(ValueError, match="advantages"):
        ppo_loss(torch.zeros(2, 5), torch.zeros(2, 5), torch.zeros(2, 4), MASK)
    with pytest.raises(ValueError, match="token aggregation"):
        aggregate(torch.zeros(2, 5), MASK, "mean")


def test_weighted_mask_gives_weighted_means():
    values = torch.tensor([[9.0, 9.0, 1.0, 2.0, 3.0], [9.0, 9.0, 4.0, 9.0, 9.0]])
    weights = MASK * torch.tensor([[1.0, 1.0, 1.0, 10.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0]])
    assert aggregate(values, weights, "token_mean").item() == pytest.approx((1 + 20 + 3 + 4) / 13)
    assert aggregate(values, weights, "seq_mean_token_mean").item() == pytest.approx(((1 + 20 + 3) / 12 + 4) / 2)
    lp = torch.log(torch.tensor([[0.5, 0.5, 0.5, 0.1, 0.5], [0.5, 0.5, 0.5, 0.5, 0.5]]))
    assert sft_loss(lp, weights).item() == pytest.approx(-(3 * math.log(0.5) + 10 * math.log(0.1)) / 13)


@pytest.mark.parametrize("top_p", [0.9, 0.5, 0.05])
def test_logprobs_under_top_p_are_the_samplers_so_the_first_ratio_is_one(top_p):
    """The learner's logprobs of tokens sampled with top-p equal what the generator recorded (transformers'
    TopPLogitsWarper after the temperature, as hf_backend samples; vLLM uses the same rule), so the first
    pass's ratio exp(new - old) is 1 on every token; without top-p in the learner it is not."""
    from transformers import TemperatureLogitsWarper, TopPLogitsWarper
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(3, 9, 50, generator=gen) * 3
    warped = TopPLogitsWarper(top_p)(None, TemperatureLogitsWarper(0.8)(None, logits[:, :-1].reshape(-1, 50)))
    sampler_lp = torch.log_softmax(warped, -1)
    tokens = torch.multinomial(sampler_lp.exp(), 1, generator=gen).squeeze(-1)
    ids = torch.cat([torch.zeros(3, 1, dtype=torch.long), tokens.reshape(3, 8)], dim=1)
    recorded = sampler_lp.gather(-1, tokens[:, None]).squeeze(-1).reshape(3, 8)
    learner = token_logprobs(logits, ids, temperature=0.8, chunk_rows=2, top_p=top_p)
    assert torch.allclose(torch.exp(learner[:, 1:] - recorded), torch.ones(3, 8), atol=1e-5)
    untruncated = token_logprobs(logits, ids, temperature=0.8)
    assert not torch.allclose(torch.exp(untruncated[:, 1:] - recorded), torch.ones(3, 8), atol=1e-3)
    outside = torch.where(torch.isinf(warped.reshape(3, 8, 50)[0, 0]))[0]
    if len(outside):  # a token the nucleus leaves out: very unlikely, never -inf
        ids[0, 1] = outside[0]
        lp = token_logprobs(logits, ids, temperature=0.8, top_p=top_p)
        assert torch.isfinite(lp).all() and lp[0, 1] < -40
