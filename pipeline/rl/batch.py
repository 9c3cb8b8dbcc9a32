"""Training batches: episodes' turns -> padded micro-batches sized by token count.

In: a step's `ScoredEpisode`s (pipeline/rl/step.py): per turn the prompt and response token ids, the
generator's logprobs, and the advantage the step computed.
Out: `MicroBatch`es, the learner's input. Touches nothing else.

Each turn is one training sequence: `input_ids = prompt_ids + response_ids`. Only the response
tokens are the policy's own, so only they carry a loss (`response_mask`); the prompt, which holds
the task, earlier turns and the evaluator's feedback, does not. Every per-token tensor is [B, L]
and aligned with `input_ids`: column j describes token j (its logprob given tokens < j).
Sequences are right-padded with `pad_id` (attention_mask 0), so positions are unchanged.

Micro-batches are formed by padded token count, B * L <= max_tokens_per_microbatch: sequences
are sorted by length (ties keep their input order) and packed greedily, so padding is small and
the result depends only on the input order. A sequence longer than the budget is an error.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from pipeline.rl.step import ScoredEpisode


@dataclass
class TrainSequence:
    """One turn, ready to pad: ids, where the response starts, generator logprobs, advantage."""
    input_ids: list[int]
    prompt_len: int
    old_logprobs: list[float]  # one per response token, len(input_ids) - prompt_len of them
    advantage: float
    key: tuple[str, int]  # (episode_id, turn index), for tracing a row back to its turn
    weights: list[float] | None = None  # SFT: a loss weight per response token (None: 1 each)

    def __len__(self) -> int:
        return len(self.input_ids)


@dataclass
class MicroBatch:
    """One forward pass worth of sequences. Every tensor is [B, L] (B sequences, L the longest).

    input_ids int64; attention_mask int64 (1 on real tokens); response_mask float32 (1 on the
    policy's tokens, or the sequence's SFT loss weights there; 0 elsewhere); old_logprobs float32
    (the generator's, 0 elsewhere); advantages float32 (the turn's advantage on each of its response
    tokens, 0 elsewhere); ref_logprobs float32 or None (the frozen reference's, filled by the driver
    when rl.kl_coef > 0).
    """
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    response_mask: torch.Tensor
    old_logprobs: torch.Tensor
    advantages: torch.Tensor
    keys: list[tuple[str, int]]
    ref_logprobs: torch.Tensor | None = None

    @property
    def padded_tokens(self) -> int:
        return int(self.input_ids.numel())

    @property
    def policy_tokens(self) -> int:
        return int((self.response_mask > 0).sum().item())


def sequences_from_episodes(episodes: "Sequence[ScoredEpisode]") -> list[TrainSequence]:
    """Every turn of every scored episode as a TrainSequence, in order; turns with no response are skipped."""
    out = []
    for episode in episodes:
        traj = episode.trajectory
        for i, scored in enumerate(episode.turns):
            turn = scored.turn
            if len(turn.logprobs) != len(turn.response_ids):
                raise ValueError(f"episode {traj.episode_id} turn {i} has {len(turn.response_ids)} response tokens "
                                 f"but {len(turn.logprobs)} logprobs; the generator must return one per token")
            if not turn.response_ids:
                continue
            out.append(TrainSequence(list(turn.prompt_ids) + list(turn.response_ids), len(turn.prompt_ids),
                                     list(turn.logprobs), scored.advantage, (traj.episode_id, i)))
    return out


def collate(seqs: Sequence[TrainSequence], pad_id: int = 0) -> MicroBatch:
    """Right-pad sequences into one MicroBatch (shapes in its docstring)."""
    if not seqs:
        raise ValueError("cannot collate an empty list of sequences")
    b, length = len(seqs), max(len(s) for s in seqs)
    input_ids = torch.full((b, length), pad_id, dtype=torch.int64)
    attention = torch.zeros((b, length), dtype=torch.int64)
    resp = torch.zeros((b, length), dtype=torch.float32)
    old = torch.zeros((b, length), dtype=torch.float32)
    adv = torch.zeros((b, length), dtype=torch.float32)
    for row, s in enumerate(seqs):
        n, p = len(s), s.prompt_len
        if p < 1 or len(s.old_logprobs) != n - p:
            raise ValueError(f"sequence {s.key} needs a non-empty prompt and one logprob per response token "
                             f"(prompt {p}, length {n}, logprobs {len(s.old_logprobs)})")
        input_ids[row, :n] = torch.tensor(s.input_ids, dtype=torch.int64)
        attention[row, :n] = 1
        if s.weights is not None and len(s.weights) != n - p:
            raise ValueError(f"sequence {s.key} has {n - p} response tokens but {len(s.weights)} weights")
        resp[row, p:n] = 1.0 if s.weights is None else torch.tensor(s.weights, dtype=torch.float32)
        old[row, p:n] = torch.tensor(s.old_logprobs, dtype=torch.float32)
        adv[row, p:n] = float(s.advantage)
    return MicroBatch(input_ids, attention, resp, old, adv, [s.key for s in seqs])


def pack_by_tokens(seqs: Sequence[TrainSequence], max_tokens_per_microbatch: int) -> list[list[TrainSequence]]:
    """Group sequences so each group's padded size (count x longest) fits the budget.

    Sorted by length (stable), then packed greedily; deterministic for a given input order.
    """
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    groups: list[list[TrainSequence]] = []
    current: list[TrainSequence] = []
    for i in order:
        s = seqs[i]
        if len(s) > max_tokens_per_microbatch:
            raise ValueError(f"sequence {s.key} has {len(s)} tokens, more than learner.max_tokens_per_microbatch="
                             f"{max_tokens_per_microbatch}; raise it to at least the generator's context length")
        if current and (len(current) + 1) * len(s) > max_tokens_per_microbatch:
            groups.append(current)
            current = []
        current.append(s)  # sorted ascending, so s is the longest of `current`
    if current:
        groups.append(current)
    return groups


def make_microbatches(seqs: Sequence[TrainSequence], max_tokens_per_microbatch: int,
                      pad_id: int = 0) -> list[MicroBatch]:
    """Sequences -> padded MicroBatches of at most `max_tokens_per_microbatch` padded tokens each."""
    return [collate(group, pad_id) for group in pack_by_tokens(seqs, max_tokens_per_microbatch)]


def split_across_ranks(seqs: Sequence[TrainSequence], ranks: int) -> list[list[TrainSequence]]:
    """Deal sequences to data-parallel ranks, balancing token counts: longest first, each to the
    rank with the fewest tokens so far (lowest rank on ties); each rank keeps input order."""
    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, not {ranks}")
    load = [0] * ranks
    owner = [0] * len(seqs)
    for i in sorted(range(len(seqs)), key=lambda i: -len(seqs[i])):
        r = min(range(ranks), key=lambda r: (load[r], r))
        owner[i] = r
        load[r] += len(seqs[i])
    return [[s for s, o in zip(seqs, owner) if o == r] for r in range(ranks)]


def split_minibatches(seqs: Sequence[TrainSequence], count: int) -> list[list[TrainSequence]]:
    """Split sequences, in order, into `count` nearly equal consecutive parts (one per optimizer step)."""
    if count < 1:
        raise ValueError(f"minibatch count must be at least 1, not {count}")
    size, extra = divmod(len(seqs), count)
    parts, start = [], 0
    for k in range(count):
        end = start + size + (1 if k < extra else 0)
        parts.append(list(seqs[start:end]))
        start = end
    return [p for p in parts if p]
