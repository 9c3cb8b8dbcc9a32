"""Turns -> padded micro-batches by token count: alignment, budget, determinism, rank split."""
import pytest
import torch

from pipeline.core.records import EvalResult, Trajectory, Turn
from pipeline.rl.batch import (TrainSequence, collate, make_microbatches, pack_by_tokens, sequences_from_episodes,
                               split_across_ranks, split_minibatches)
from pipeline.rl.step import ScoredEpisode, ScoredTurn


def scored(turns, advantages):
    result = EvalResult(task_id="t", candidate_hash="h", format="c2cuda", verdict="incorrect")
    return ScoredEpisode(Trajectory(task_id="t", episode_id="ep", turns=turns),
                         tuple(ScoredTurn(t, result, 0.0, {}, 0.0, a) for t, a in zip(turns, advantages)))


def seq(prompt_len, response_len, advantage=1.0, key=0):
    ids = list(range(100 + key, 100 + key + prompt_len + response_len))
    return TrainSequence(ids, prompt_len, [-0.1 * (i + 1) for i in range(response_len)], advantage, ("e", key))


def test_turns_become_aligned_rows():
    turns = [Turn(prompt_ids=[1, 2, 3], response_ids=[7, 8], logprobs=[-0.5, -0.25]),
             Turn(prompt_ids=[1, 2, 3, 7, 8, 4], response_ids=[9], logprobs=[-2.0]),
             Turn(prompt_ids=[1], response_ids=[], logprobs=[])]
    seqs = sequences_from_episodes([scored(turns, [0.7, -0.3, 0.0])])
    assert [s.key for s in seqs] == [("ep", 0), ("ep", 1)]  # the empty response is skipped
    mb = collate(seqs, pad_id=0)
    assert mb.input_ids.tolist() == [[1, 2, 3, 7, 8, 0, 0], [1, 2, 3, 7, 8, 4, 9]]
    assert mb.attention_mask.tolist() == [[1, 1, 1, 1, 1, 0, 0], [1] * 7]
    assert mb.response_mask.tolist() == [[0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 0, 0, 1]]
    assert mb.old_logprobs[0].tolist() == [0, 0, 0, -0.5, -0.25, 0, 0]
    assert mb.old_logprobs[1, 6].item() == -2.0
    assert mb.advantages[0].tolist() == pytest.approx([0, 0, 0, 0.7, 0.7, 0, 0])
    assert mb.advantages[1].tolist() == pytest.approx([0, 0, 0, 0, 0, 0, -0.3])
    assert mb.padded_tokens == 14 and mb.policy_tokens == 3


def test_sft_weights_fill_the_response_mask():
    weighted = TrainSequence([1, 2, 3, 4, 5], 2, [0.0] * 3, 0.0, ("w", 0), weights=[1.0, 20.0, 1.0])
    mb = collate([weighted, seq(2, 2, key=1)])
    assert mb.response_mask.tolist() == [[0, 0, 1, 20, 1], [0, 0, 1, 1, 0]]
    assert mb.policy_tokens == 5  # tokens are counted, not weighted
    with pytest.raises(ValueError, match="3 response tokens but 2 weights"):
        collate([TrainSequence([1, 2, 3, 4, 5], 2, [0.0] * 3, 0.0, ("w", 1), weights=[1.0, 2.0])])


def test_logprob_count_mismatch_is_an_error():
    turn = Turn(prompt_ids=[1], response_ids=[2, 3], logprobs=[-1.0])
    with pytest.raises(ValueError, match="episode ep turn 0 has 2 response tokens but 1 logprobs"):
        sequences_from_episodes([scored([turn], [0.0])])


def test_microbatches_respect_the_token_budget():
    lengths = [(5, 20), (3, 4), (10, 30), (2, 2), (8, 8), (4, 60), (6, 6), (1, 9)]
    seqs = [seq(p, r, key=i) for i, (p, r) in enumerate(lengths)]
    mbs = make_microbatches(seqs, max_tokens_per_microbatch=64)
    assert all(mb.padded_tokens <= 64 for mb in mbs)
    assert sorted(k for mb in mbs for k in mb.keys) == sorted(s.key for s in seqs)  # each turn exactly once
    # sorted by length, so padding is small: rows within a micro-batch have similar lengths
    assert [mb.input_ids.shape[1] for mb in mbs] == sorted(mb.input_ids.shape[1] for mb in mbs)
    # deterministic: the same input gives the same batches
    again = make_microbatches(seqs, max_tokens_per_microbatch=64)
    assert [mb.keys for mb in again] == [mb.keys for mb in mbs]
    assert all(torch.equal(a.input_ids, b.input_ids) for a, b in zip(again, mbs))
    # a larger budget packs into fewer passes
    assert len(make_microbatches(seqs, 1000)) == 1 < len(mbs)


def test_packing_by_hand():
    seqs = [seq(2, 8, key=0), seq(2, 2, key=1), seq(2, 3, key=2), seq(2, 8, key=3)]
    groups = pack_by_tokens(seqs, 20)
    # lengths 4, 5 fit as 2 x 5 = 10, adding a 10 would be 3 x 10 = 30 > 20; then 10, 10 = 20
    assert [[s.key[1] for s in g] for g in groups] == [[1, 2], [0, 3]]


def test_oversized_sequence_is_an_error():
    with pytest.raises(ValueError, match="raise it to at least the generator's context length"):
        make_microbatches([seq(10, 100)], max_tokens_per_microbatch=64)


def test_split_across_ranks_balances_tokens():
    seqs = [seq(1, n, key=i) for i, n in enumerate([50, 10, 40, 10, 30, 20])]
    parts = split_across_ranks(seqs, 2)
    loads = [sum(len(s) for s in p) for p in parts]
    assert sum(loads) == sum(len(s) for s in seqs) and abs(loads[0] - loads[1]) <= 10
    for p in parts:  # each rank keeps the input order
        keys = [s.key[1] for s in p]
        assert keys == sorted(keys)
    assert split_across_ranks(seqs[:1], 3)[1:] == [[], []]


def test_split_minibatches_in_order():
    seqs = [seq(1, 1, key=i) for i in range(7)]
    parts = split_minibatches(seqs, 3)
    assert [[s.key[1] for s in p] for p in parts] == [[0, 1, 2], [3, 4], [5, 6]]
    assert len(split_minibatches(seqs[:2], 4)) == 2
