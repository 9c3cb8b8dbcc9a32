"""Turn returns and group-normalised advantages for multi-turn episodes.

In: per-turn rewards, task ids and verdicts of one step's episodes, the `RLSection` settings.
Out: per turn its return and advantage (`returns_and_advantages`), or the same numbers from the
functions below for plain lists and tensors. Pure: nothing is changed in place.

Returns (Kevin-style): each turn of an episode is a training sample whose return is the
discounted sum of its own and later turns' rewards,
    return_t = sum_{k >= t} gamma^(k - t) * r_k        over the turns of one episode,
so a turn that leads to a good later turn shares in its reward.

Advantages: the baseline comes from the group of samples of the same task AND the same turn
index (the turn-t samples of the task's episodes in this step; episodes that stopped early are
simply absent from later groups):
- grpo: A_i = (R_i - mean(R)) / (std(R) + eps), std the sample standard deviation (n - 1), or
  A_i = R_i - mean(R) without dividing (`normalise_by_std=False`, as in Dr. GRPO);
- rloo: A_i = R_i - mean_{j != i} R_j = n / (n - 1) * (R_i - mean(R)) (leave-one-out, as in
  Dr.Kernel's turn-level TRLOO); never divided by the std.
A group of one sample has no baseline: its advantage is 0. Equal returns give 0 advantages.
`rl.negative_advantage_weight` then scales every negative advantage (1: plain; 0: successes alone).
`rl.shuffle_advantages` (a control, never for training) permutes each group's advantages among its samples.
"""
from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Literal

import torch

from pipeline.core.config import RLSection
from pipeline.rl.reward import UNJUDGED

Estimator = Literal["grpo", "rloo"]


UNJUDGED_VERDICTS = UNJUDGED
"""Turns nothing is known of (reward.UNJUDGED: the evaluator's own failure; code no compiler here could build):
advantage 0, outside their group's mean and spread."""


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """Returns of one episode's turns: [T] rewards -> [T] returns, return_t = sum_{k>=t} gamma^(k-t) r_k."""
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma {gamma} is outside [0, 1]")
    out = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + gamma * running
        out[t] = running
    return out


def group_ids(keys: Sequence[Hashable]) -> torch.Tensor:
    """[N] hashable group keys -> [N] int64 group indices 0..G-1, numbered by first appearance."""
    index: dict[Hashable, int] = {}
    return torch.tensor([index.setdefault(k, len(index)) for k in keys], dtype=torch.int64)


def group_advantages(returns: torch.Tensor, groups: torch.Tensor, estimator: Estimator = "grpo",
                     normalise_by_std: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """Advantages within groups.

    returns: [N] float, one per sample; groups: [N] int64 group index of each sample (0..G-1).
    Returns [N] float64 advantages (see the module docstring for the formulas).
    """
    if returns.dim() != 1 or groups.shape != returns.shape:
        raise ValueError(f"returns {tuple(returns.shape)} and groups {tuple(groups.shape)} must both be [N]")
    if estimator not in ("grpo", "rloo"):
        raise ValueError(f"advantage estimator {estimator!r} is not one of 'grpo', 'rloo'")
    if returns.numel() == 0:
        return torch.zeros(0, dtype=torch.float64)
    r = returns.to(torch.float64)
    g = groups.to(torch.int64)
    n_groups = int(g.max()) + 1
    count = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, g, torch.ones_like(r))
    mean = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, g, r) / count
    centred = r - mean[g]
    n = count[g]
    singleton = n < 2
    if estimator == "rloo":
        adv = centred * n / (n - 1).clamp(min=1)
    else:
        adv = centred
        if normalise_by_std:
            var = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, g, centred**2) / (count - 1).clamp(min=1)
            adv = centred / (var.sqrt()[g] + eps)
    return torch.where(singleton, torch.zeros_like(adv), adv)


def returns_and_advantages(task_ids: Sequence[str], rewards: Sequence[Sequence[float]],
                           verdicts: Sequence[Sequence[str | None]], cfg: RLSection) -> tuple[list[list[float]], list[list[float]]]:
    """Per episode and turn: the discounted return (`cfg.gamma`), and the advantage within the group of
    the same task and turn index (`cfg.advantage_estimator`, `normalise_by_std`, `std_eps`). Pass one
    step's episodes together: groups are formed across the whole list. Turns whose verdict is in
    UNJUDGED_VERDICTS, or whose return is not finite, get advantage 0 and take no part in their group's
    statistics."""
    if not len(task_ids) == len(rewards) == len(verdicts) or any(len(r) != len(v) for r, v in zip(rewards, verdicts)):
        raise ValueError("returns_and_advantages needs one task id, and one verdict per reward, for every episode")
    returns = [discounted_returns(r, cfg.gamma) for r in rewards]
    advantages = [[0.0] * len(r) for r in rewards]
    judged = [(e, t) for e, vs in enumerate(verdicts) for t, v in enumerate(vs)
              if v not in UNJUDGED_VERDICTS and math.isfinite(returns[e][t])]  # a NaN would poison its whole group
    if judged:
        adv = group_advantages(torch.tensor([returns[e][t] for e, t in judged], dtype=torch.float64),
                               group_ids([(task_ids[e], t) for e, t in judged]), cfg.advantage_estimator,
                               cfg.normalise_by_std, cfg.std_eps)
        values = [a * cfg.negative_advantage_weight if a < 0 else a for a in adv.tolist()]
        if cfg.shuffle_advantages:
            values = shuffled_within_groups(values, [(task_ids[e], t) for e, t in judged])
        for (e, t), a in zip(judged, values):
            advantages[e][t] = a
    return returns, advantages


def shuffled_within_groups(values: Sequence[float], keys: Sequence[Hashable]) -> list[float]:
    """`values` permuted among the positions of equal `keys` (a control: each sample gets the advantage of
    another sample of its group); the permutation is seeded by the keys, so a step repeats it."""
    import hashlib
    import random
    out = list(values)
    positions: dict[Hashable, list[int]] = {}
    for i, k in enumerate(keys):
        positions.setdefault(k, []).append(i)
    for key, where in positions.items():
        rng = random.Random(hashlib.sha256(repr(key).encode()).hexdigest())
        taken = [values[i] for i in where]
        rng.shuffle(taken)
        for i, v in zip(where, taken):
            out[i] = v
    return out
