"""The collective weight-sync protocol (pipeline/rl/weight_sync.py) on gloo, members as threads of one
process: buckets of mixed dtypes and odd sizes reach every receiver bit for bit under their names, the
figures count what was sent, and a receiver asked for another version than the sender's refuses it."""
import threading
from pathlib import Path

import pytest
import torch

from pipeline.rl.distributed import free_port
from pipeline.rl.weight_sync import SyncGroup, receive_buckets, receive_weights, send_weights

pytestmark = pytest.mark.timeout(120)


def run_members(world: int, member):
    """`member(group)` in one thread per rank of a fresh gloo sync group; their return values, by rank."""
    port, out, errors = free_port(), [None] * world, []

    def run(rank):
        try:
            out[rank] = member(SyncGroup("127.0.0.1", port, rank, world, "gloo", timeout_s=30))
        except Exception as e:  # reported to the test below, with the rank
            errors.append((rank, e))
    threads = [threading.Thread(target=run, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out, errors


def buckets():
    g = torch.Generator().manual_seed(0)
    return [[("a.weight", torch.randn(3, 5, generator=g).to(torch.bfloat16)),  # 30 bytes: the next is realigned
             ("a.bias", torch.randn(7, generator=g))],
            [("b.scale", torch.tensor(2.5, dtype=torch.float16)), ("b.index", torch.arange(5, dtype=torch.int64))],
            [("c.weight", torch.randn(4, 4, generator=g).to(torch.bfloat16).t())]]  # not contiguous


def test_buckets_arrive_bit_for_bit_at_every_receiver():
    sent = buckets()

    def member(group):
        if group.rank == 0:
            return send_weights(group, sent, version=3)
        return [[(n, t.clone()) for n, t in b] for b in receive_buckets(group, 3)]
    out, errors = run_members(3, member)
    assert not errors
    stats = out[0]
    assert stats["buckets"] == 3 and stats["seconds"] > 0
    payload = sum(t.numel() * t.element_size() for b in sent for _, t in b)
    assert payload <= stats["bytes"] < payload + 16 * 5  # each tensor padded to 16 bytes at most
    for received in out[1:]:
        assert [[n for n, _ in b] for b in received] == [[n for n, _ in b] for b in sent]
        for b_sent, b_got in zip(sent, received):
            for (name, a), (_, b) in zip(b_sent, b_got):
                assert a.dtype == b.dtype and a.shape == b.shape, name
                assert torch.equal(a, b), name


def test_a_receiver_refuses_another_version():
    def member(group):
        if group.rank == 0:
            return send_weights(group, buckets()[:1], version=4)
        return receive_weights(group, 5)
    out, errors = run_members(2, member)
    assert out[0]["buckets"] == 1
    assert len(errors) == 1 and errors[0][0] == 1
    assert "sent version 4" in str(errors[0][1]) and "version 5" in str(errors[0][1])


def test_only_rank_zero_sends():
    def member(group):
        if group.rank == 1:
            send_weights(group, buckets(), version=1)
    out, errors = run_members(2, member)
    assert [r for r, _ in errors] == [1] and "only rank 0" in str(errors[0][1])


def test_cluster_yaml_sets_the_collective_env_wherever_ray_starts():
    import yaml

    from pipeline.rl.distributed import COLLECTIVE_ENV
    cfg = yaml.safe_load((Path(__file__).parents[2] / "cluster.yaml").read_text())
    assignments = " ".join(f"{k}={v}" for k, v in COLLECTIVE_ENV.items())
    starts = [c for key in ("head_start_ray_commands", "worker_start_ray_commands") for c in cfg[key]
              if "ray start" in c]
    assert len(starts) == 2 and all(c.startswith(assignments + " ray start") for c in starts)
    assert any(all(f"{k}={v}" in c for k, v in COLLECTIVE_ENV.items()) for c in cfg["setup_commands"])
