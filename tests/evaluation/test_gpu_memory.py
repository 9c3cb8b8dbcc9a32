"""Device memory by budget, without a GPU: the ledger shared by evaluator processes of one GPU, the
estimate of a group's peak from sizes alone (meta device), and a comparison whose temporaries stay
small beside large tensors."""
import multiprocessing as mp
import time

import pytest
import torch

from pipeline.evaluation import reference
from pipeline.evaluation.gpu_memory import MemoryBudget, MemoryTooLarge, MemoryWaitTimeout
from pipeline.evaluation.reference import ConfigBytes, compare, config_bytes, group_footprint
from pipeline.tasks import kernelbench_task, load_tasks

GB = 1 << 30


def test_a_second_reservation_waits_until_the_first_is_released(tmp_path):
    a = MemoryBudget("0", 10 * GB, directory=str(tmp_path), poll_s=0.01)
    b = MemoryBudget("0", 10 * GB, directory=str(tmp_path), poll_s=0.01)
    with a.reserve(7 * GB, "task one", timeout_s=5):
        assert b.reserved() == 7 * GB
        with pytest.raises(MemoryWaitTimeout, match="task two waited"):
            with b.reserve(4 * GB, "task two", timeout_s=0.1):
                pass
        with b.reserve(3 * GB, "task three", timeout_s=0.1):  # fits beside the first
            assert a.reserved() == 10 * GB
    assert a.reserved() == 0


def _hold(directory, started, release):
    budget = MemoryBudget("0", 10 * GB, directory=directory, poll_s=0.01)
    with budget.reserve(8 * GB, "held elsewhere", timeout_s=5):
        started.set()
        release.wait(10)


def test_another_process_is_waited_for_and_a_dead_one_holds_nothing(tmp_path):
    ctx = mp.get_context("fork")
    started, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold, args=(str(tmp_path), started, release))
    proc.start()
    assert started.wait(10)
    budget = MemoryBudget("0", 10 * GB, directory=str(tmp_path), poll_s=0.01)
    t0 = time.monotonic()
    threading_release = ctx.Process(target=lambda: (time.sleep(0.3), release.set()))
    threading_release.start()
    with budget.reserve(4 * GB, "waits", timeout_s=5):
        assert time.monotonic() - t0 >= 0.25  # it waited for the other process to let go
    proc.join(5)
    threading_release.join(5)
    killed = ctx.Process(target=_hold, args=(str(tmp_path), ctx.Event(), ctx.Event()))  # never released
    killed.start()
    time.sleep(0.5)
    killed.kill()
    killed.join(5)
    with budget.reserve(9 * GB, "after a killed holder", timeout_s=1):
        pass


def test_a_group_larger_than_the_whole_budget_is_refused_at_once_naming_the_sizes(tmp_path):
    budget = MemoryBudget("0", 10 * GB, directory=str(tmp_path))
    with pytest.raises(MemoryTooLarge, match=r"needs about 12\.0 GiB.*budget of 10\.0 GiB"):
        with budget.reserve(12 * GB, "task big", timeout_s=60):
            pass


PROBLEM = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.fc = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.fc(x))

batch = 1 << 20
features = 1024

def get_inputs():
    return [torch.rand(batch, features)]

def get_init_inputs():
    return [features]
'''


def test_sizes_come_from_the_meta_device_without_allocating(tmp_path):
    path = tmp_path / "level1" / "7_Linear_ReLU.py"
    path.parent.mkdir()
    path.write_text(PROBLEM)  # 4 GiB of inputs: never allocated here
    sizes = config_bytes(kernelbench_task(path))
    assert [(c.inputs, c.outputs, c.params) for c in sizes] == [(4 * GB, 4 * GB, 4 * (1024 * 1024 + 1024))] * 3
    assert [c.time for c in sizes] == [False, False, True]
    saxpy = next(t for t in load_tasks("builtin") if t.id == "c2cuda/saxpy")
    large = next(c for c in config_bytes(saxpy) if c.name == "large")
    assert large.inputs == 2 * 4 * (1 << 24) and large.outputs == 4 * (1 << 24)  # x and y in, y out


def test_the_footprint_grows_with_the_data_and_counts_the_slots_once():
    small = [ConfigBytes("a", GB, GB, 0, True)]
    big = [ConfigBytes("a", 4 * GB, 4 * GB, 0, True)]
    assert group_footprint(big, 4 * GB, 0) > 3 * group_footprint(small, 4 * GB, 0) - 3 * GB
    assert group_footprint(small, 1 * GB, 0) < group_footprint(small, 4 * GB, 0)


def test_chunked_comparison_matches_the_whole_tensor_rule(monkeypatch):
    monkeypatch.setattr(reference, "COMPARE_CHUNK", 1000)
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(10_500, generator=g)
    assert compare(ref.clone(), ref, 1e-4, 1e-4)[0]
    out = ref.clone()
    out[7777] += 1.0  # in the eighth chunk
    ok, err, why = compare(out, ref, 1e-4, 1e-4)
    assert not ok and "1 of 10500" in why and "flat index 7777" in why
    out = ref.clone()
    out[10_400] = float("nan")  # in the last, partial chunk
    ok, _, why = compare(out, ref, 1e-4, 1e-4)
    assert not ok and "1 of 10500 output elements are NaN" in why
    ints = torch.arange(5000)
    bad = ints.clone()
    bad[4999] += 1
    assert compare(ints.clone(), ints, 0, 0)[0] and compare(bad, ints, 0, 0)[2] == "1 of 5000 elements differ"
