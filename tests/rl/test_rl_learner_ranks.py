"""ZeRO-3 over two CPU ranks (spawned processes, gloo): one step on split data equals one rank on
the whole batch; the gathered export is the same on both ranks and covers every parameter
once; a sharded checkpoint restores weights and step count."""
import pytest
import torch
import torch.multiprocessing as mp
from _rl_common import fixed_sequences, learner_cfg, on_policy, rank_worker, tiny_model

from pipeline.core.config import RLSection
from pipeline.rl.batch import make_microbatches
from pipeline.rl.distributed import free_port
from pipeline.rl.learner import Learner

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("zero3")
    mp.spawn(rank_worker, args=(2, free_port(), str(out)), nprocs=2, join=True)
    return [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(2)]


def test_step_on_two_ranks_matches_one_rank(two_ranks, one_rank_group):
    r0, r1 = two_ranks
    assert r0["microbatches"] == 2 and r1["microbatches"] == 1  # rank 1 padded with an empty pass
    timing = {"step_s", "tokens_per_s"}  # each rank's own clock; everything else is reduced over ranks
    assert {k: v for k, v in r0["metrics"].items() if k not in timing} == \
        {k: v for k, v in r1["metrics"].items() if k not in timing}
    single = Learner(learner_cfg(zero_stage=2), RLSection(), tiny_model, seed=0)
    one = single.train_step(on_policy(single, make_microbatches(fixed_sequences(), 10_000)))
    two = r0["metrics"]
    assert two["policy_tokens"] == one["policy_tokens"] == 216 and two["sequences"] == 8
    assert two["loss"] == pytest.approx(one["loss"], rel=1e-5)
    assert two["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-4)
    # and the updated weights agree (Adam's first step is about lr * sign(g); allow a few flips)
    single_weights = single.state_dict_for_export()
    exported = {name: t for bucket in r0["buckets"] for name, t in bucket}
    for name, t in single_weights.items():
        close = torch.isclose(exported[name], t, atol=1e-5)
        assert close.float().mean() > 0.999, name


def test_gathered_export_equal_across_ranks_and_complete(two_ranks):
    r0, r1 = two_ranks
    names0 = [[n for n, _ in b] for b in r0["buckets"]]
    assert names0 == [[n for n, _ in b] for b in r1["buckets"]]
    flat = [n for b in names0 for n in b]
    assert len(flat) == len(set(flat)) == len(list(tiny_model().named_parameters()))
    assert set(flat) == {n for n, _ in tiny_model().named_parameters()}
    assert len(names0) > 1
    for b0, b1 in zip(r0["buckets"], r1["buckets"]):
        for (name, t0), (_, t1) in zip(b0, b1):
            assert t0.shape == dict(tiny_model().named_parameters())[name].shape
            assert torch.equal(t0, t1), name
    assert r0["rank0_only"] == len(names0) and r1["rank0_only"] == 0  # by default only rank 0 receives


def test_sharded_checkpoint_restores(two_ranks):
    r0, r1 = two_ranks
    exported = {name: t for bucket in r0["buckets"] for name, t in bucket}
    assert set(r0["restored"]) == set(exported) and r1["restored"] == {}
    assert all(torch.equal(r0["restored"][n], exported[n]) for n in exported)
    assert r0["restored_step"] == r1["restored_step"] == 1
    assert r0["run_state"] == r1["run_state"] == {"driver_step": 1, "learner_step": 1}
