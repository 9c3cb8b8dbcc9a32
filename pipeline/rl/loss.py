"""Policy-gradient and supervised losses over padded token batches: pure functions, CPU-testable.

In: per-token tensors of shape [B, L], aligned with `input_ids` (pipeline/rl/batch.py): entry
[b, j] belongs to token `input_ids[b, j]`, i.e. it is the log-probability of token j given tokens
< j. Column 0 never carries a loss. `mask` is 1.0 on the policy's own (response) tokens and 0.0
on prompts, feedback messages and padding.
Out: a scalar loss (differentiable in `logprobs`) and detached statistics.

Aggregation (`mode`) turns [B, L] per-token values into one number:
- token_mean:          sum over all masked tokens / (number of masked tokens)
- seq_mean_token_sum:  sum over sequences of their token sum / (number of sequences)
- seq_mean_token_mean: sum over sequences of their token mean / (number of sequences)
Gradient accumulation over micro-batches needs the denominator of the whole step (all
micro-batches, all ranks), not of one micro-batch: pass `denominator`
(`aggregation_denominator` computes it); without it the micro-batch's own count is used.
A "sequence" is one turn; one with no masked token is not counted.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

Aggregation = Literal["token_mean", "seq_mean_token_sum", "seq_mean_token_mean"]
LOG_RATIO_LIMIT = 20.0  # |log ratio| is clamped here so exp() cannot overflow on wildly stale tokens


def aggregation_denominator(mode: Aggregation, masks: Sequence[torch.Tensor]) -> float:
    """The denominator of `mode` over several [B, L] masks: masked tokens, or sequences with any."""
    if mode == "token_mean":
        return float(sum(m.sum().item() for m in masks))
    if mode in ("seq_mean_token_sum", "seq_mean_token_mean"):
        return float(sum((m.sum(dim=-1) > 0).sum().item() for m in masks))
    raise ValueError(f"token aggregation {mode!r} is not one of token_mean, seq_mean_token_sum, seq_mean_token_mean")


def aggregate(values: torch.Tensor, mask: torch.Tensor, mode: Aggregation,
              denominator: float | None = None) -> torch.Tensor:
    """[B, L] values, [B, L] mask -> scalar, by `mode` (module docstring); 0 when nothing is masked. A mask
    of weights instead of 0/1 (SFT's per-token weights) makes the means weighted means."""
    if values.shape != mask.shape or values.dim() != 2:
        raise ValueError(f"values {tuple(values.shape)} and mask {tuple(mask.shape)} must both be [B, L]")
    mask = mask.to(values.dtype)
    masked = torch.where(mask > 0, values * mask, torch.zeros_like(values))
    if mode == "token_mean":
        numerator = masked.sum()
    elif mode == "seq_mean_token_sum":
        numerator = masked.sum(dim=-1).sum()
    elif mode == "seq_mean_token_mean":
        numerator = (masked.sum(dim=-1) / mask.sum(dim=-1).clamp(min=1.0)).sum()
    else:
        raise ValueError(f"token aggregation {mode!r} is not one of token_mean, seq_mean_token_sum, "
                         "seq_mean_token_mean")
    if denominator is None:
        denominator = aggregation_denominator(mode, [mask])
    return numerator / max(float(denominator), 1.0)


def token_logprobs(logits: torch.Tensor, input_ids: torch.Tensor, temperature: float = 1.0,
                   chunk_rows: int = 4, top_p: float = 1.0) -> torch.Tensor:
    """[B, L, V] logits of a causal LM, [B, L] input ids -> [B, L] float32 log p(token j | tokens < j).

    Column 0 is 0 (no context). The numbers are those of the distribution a generator sampled from:
    logits divided by `temperature`, then, with `top_p` < 1, truncated to the nucleus (`nucleus_mask`)
    and renormalised, as the generators' top-p does (transformers' TopPLogitsWarper, vLLM's sampler). A
    token outside the nucleus (possible only under weights other than the sampler's) gets
    -LOG_RATIO_LIMIT - 30, far below any sampled token, never -inf. Rows are processed `chunk_rows` at a
    time so that only that many [L, V] float32 copies exist at once.
    """
    if logits.dim() != 3 or logits.shape[:2] != input_ids.shape:
        raise ValueError(f"logits {tuple(logits.shape)} must be [B, L, V] for input_ids {tuple(input_ids.shape)}")
    out = []
    for start in range(0, logits.shape[0], chunk_rows):
        lg = logits[start:start + chunk_rows, :-1].float() / temperature
        target = input_ids[start:start + chunk_rows, 1:]
        if top_p < 1.0:
            lg = lg.masked_fill(~nucleus_mask(lg, top_p), float("-inf"))
        picked = lg.gather(-1, target.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(lg, dim=-1)
        picked = picked.clamp(min=-LOG_RATIO_LIMIT - 30.0)
        out.append(torch.nn.functional.pad(picked, (1, 0)))
    return torch.cat(out, dim=0)


def nucleus_mask(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """[..., V] -> bool [..., V]: the tokens top-p sampling keeps. Sorted by probability, the least likely
    tokens whose total mass is at most 1 - top_p are dropped, the most likely always kept (transformers'
    TopPLogitsWarper and vLLM's rule: drop where the ascending cumulative mass is <= 1 - top_p)."""
    probs_sorted, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=False)
    drop_sorted = probs_sorted.cumsum(dim=-1) <= 1.0 - top_p
    drop_sorted[..., -1] = False
    return ~torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)


@torch.no_grad()
def token_entropy(logits: torch.Tensor, temperature: float = 1.0, chunk_rows: int = 4) -> torch.Tensor:
    """[B, L, V] logits -> [B, L] entropy (nats) of the distribution each column's token was drawn
    from (aligned like `token_logprobs`; column 0 is 0). No gradient."""
    out = []
    for start in range(0, logits.shape[0], chunk_rows):
        lg = logits[start:start + chunk_rows, :-1].float() / temperature
        logp = torch.log_softmax(lg, dim=-1)
        out.append(torch.nn.functional.pad(-(logp.exp() * logp).sum(-1), (1, 0)))
    return torch.cat(out, dim=0)


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B, L] per-token k3 estimate of KL(policy || reference): exp(d) - d - 1 with d = ref - policy.

    Non-negative, 0 where the two agree, 0 outside the mask."""
    d = torch.where(mask > 0, ref_logprobs - logprobs, torch.zeros_like(logprobs))
    d = d.clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
    return torch.exp(d) - d - 1.0


def ppo_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
             mode: Aggregation = "token_mean", clip_eps: float = 0.2, clip_eps_high: float | None = None,
             ref_logprobs: torch.Tensor | None = None, kl_coef: float = 0.0,
             denominator: float | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO-clip policy loss with an optional KL penalty to a frozen reference.

    logprobs: [B, L] under the policy being trained (differentiable); old_logprobs: [B, L] under
    the policy that sampled the tokens (the generator's); advantages: [B, L] (a turn's advantage
    on each of its tokens); mask: [B, L]; ref_logprobs: [B, L] or None.
    Per token: ratio r = exp(logprobs - old_logprobs),
        pg = max(-A * r, -A * clip(r, 1 - clip_eps, 1 + clip_eps_high)),
    loss = aggregate(pg) + kl_coef * aggregate(k3 KL). With r = 1 the loss is -aggregate(A).
    Statistics (token means over this micro-batch, detached, whatever `mode`): pg_loss, kl (to the
    reference), clip_frac (share of tokens where the clipped branch is taken), approx_kl (k3
    estimate of KL(old || new)), ratio_mean; and tokens (the masked count).
    """
    for name, t in (("old_logprobs", old_logprobs), ("advantages", advantages), ("mask", mask)):
        if t.shape != logprobs.shape:
            raise ValueError(f"{name} {tuple(t.shape)} must match logprobs {tuple(logprobs.shape)} ([B, L])")
    high = clip_eps if clip_eps_high is None else clip_eps_high
    on = mask > 0
    log_ratio = torch.where(on, logprobs - old_logprobs, torch.zeros_like(logprobs))
    ratio = torch.exp(log_ratio.clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT))
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - clip_eps, 1.0 + high)
    per_token = torch.maximum(unclipped, clipped)
    pg = aggregate(per_token, mask, mode, denominator)
    loss = pg
    kl = torch.zeros_like(per_token)
    if ref_logprobs is not None and kl_coef > 0:
        if ref_logprobs.shape != logprobs.shape:
            raise ValueError(f"ref_logprobs {tuple(ref_logprobs.shape)} must match logprobs {tuple(logprobs.shape)}")
        kl = kl_k3(logprobs, ref_logprobs, mask)
        loss = loss + kl_coef * aggregate(kl, mask, mode, denominator)
    with torch.no_grad():
        n = on.sum().clamp(min=1)
        stats = {
            "pg_loss": float(torch.where(on, per_token, 0.0).sum() / n), "kl": float(torch.where(on, kl, 0.0).sum() / n),
            "clip_frac": float(((clipped > unclipped) & on).sum() / n),
            "approx_kl": float((torch.where(on, ratio - 1.0 - log_ratio, torch.zeros_like(ratio))).sum() / n),
            "ratio_mean": float(torch.where(on, ratio, torch.zeros_like(ratio)).sum() / n),
            "tokens": float(on.sum()),
        }
    return loss, stats


def sft_loss(logprobs: torch.Tensor, mask: torch.Tensor, mode: Aggregation = "token_mean",
             denominator: float | None = None) -> torch.Tensor:
    """Cross-entropy on the masked tokens: aggregate(-logprobs). logprobs, mask: [B, L]."""
    return aggregate(-logprobs, mask, mode, denominator)
