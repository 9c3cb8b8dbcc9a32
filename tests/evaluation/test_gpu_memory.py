"""Device memory by budget, without a GPU: the ledger shared by evaluator processes of one GPU, the
estimate of a group's peak from sizes alone (meta device), and a comparison whose temporaries stay
small beside large tensors."""
import multiprocessing as mp
import time

import pytest
import torch

from pipeline.evaluation.checks import fused_check, reference_torch
from pipeline.evaluation.checks.buffer_layout import add_timing_slots, arena_layout
from pipeline.evaluation.gpu.memory_budget import MemoryBudget, MemoryTooLarge, MemoryWaitTimeout
from pipeline.evaluation.checks.comparison import compare
from pipeline.evaluation.checks.footprint import ConfigBytes, config_bytes, group_footprint
from pipeline.evaluation.checks.group_data import TaskBroken
from pipeline.evaluation.checks.reference_c import build_c2cuda
from pipeline.core.records import Tolerance
from pipeline.tasks import kernelbench_task, load_tasks

EXACT = Tolerance(rtol=0, atol=0)

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


CHAIN = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)

    def forward(self, x):
        y = torch.nn.functional.gelu(self.conv(x))  # two tensors of 4 GiB alive at once
        y.relu_()  # in place: nothing new
        return y.flatten(1).mean(dim=1)  # a view, then 64 KiB out

def get_inputs():
    return [torch.rand(16384, 3, 128, 128)]

def get_init_inputs():
    return [4]
'''


def test_the_forwards_intermediate_tensors_are_counted_at_their_peak(tmp_path):
    """A conv -> GELU chain holds the conv's output and the GELU's at once: 8 GiB the inputs, parameters and
    outputs do not show; views and in-place results add nothing; the group's footprint reserves them three times
    (the float64 twin's, twice, and the candidate's process)."""
    path = tmp_path / "level2" / "7_Conv_GELU_Mean.py"
    path.parent.mkdir()
    path.write_text(CHAIN)
    sizes = config_bytes(kernelbench_task(path))
    assert [c.intermediates for c in sizes] == [8 * GB] * 3 and sizes[0].outputs == 16384 * 4
    assert [c.intermediates_float64 for c in sizes] == [16 * GB] * 3  # as the float64 twin holds them
    plain = [ConfigBytes(c.name, c.inputs, c.outputs, c.params, c.time) for c in sizes]
    assert group_footprint(sizes, 4 * GB, 0) == group_footprint(plain, 4 * GB, 0) + 3 * sizes[0].intermediates
    linear = tmp_path / "level1" / "7_Linear_ReLU.py"
    linear.parent.mkdir()
    linear.write_text(PROBLEM)  # Linear then ReLU: the Linear's 4 GiB output is alive beside the ReLU's 4 GiB
    assert [c.intermediates for c in config_bytes(kernelbench_task(linear))] == [4 * GB] * 3


def test_each_new_storage_counts_once_and_no_arguments():
    """ForwardPeak on the meta device: a result that is a view of what its call made (einsum) counts; an
    argument's storage (in place, out=, views, detach) never does; a tuple's parts each count; the outputs can be
    left out of the peak."""
    from pipeline.evaluation.checks.footprint import ForwardPeak
    with torch.device("meta"):
        a, b = torch.rand(8, 64, 64), torch.rand(8, 64, 64)
        mib = 8 * 64 * 64 * 4
        with ForwardPeak() as held:
            e = torch.einsum("bij,bjk->bik", a, b)  # returned as a view of its own result
        assert held.peak == mib
        with ForwardPeak() as held:
            a.detach().relu_()
            torch.add(a, 1, out=b)
            a.view(-1).transpose(0, 0)
            a.add_(1)
        assert held.peak == 0
        with ForwardPeak() as held:
            values, indices = a.max(dim=2)  # float32 and int64 of 8 x 64 each
            x = torch.tanh(a)
            y = torch.sigmoid(x)
            del x  # the tanh's storage ends here
            z = y.sum(dim=0)
        assert held.peak == 8 * 64 * 12 + 2 * mib
        assert held.peak_without([values, indices, z]) == 2 * mib  # the tanh's and the sigmoid's
        assert held.peak_without([y]) == 8 * 64 * 12 + mib  # the tanh freed before the sum was made
        with ForwardPeak() as held:
            half = a.half() * 2  # two float16 tensors of mib / 2 each; in float64 four times as large
        assert held.peak == mib and held.peak_without([half], float64=True) == 2 * mib
        assert held.peak_without([], float64=True) == 4 * mib
    assert e.shape == (8, 64, 64)


RECURRENT = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, features, hidden, layers):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, layers, batch_first=True)

    def forward(self, x):
        out, _ = self.lstm(x)
        return out[:, -1, :]

def get_inputs():
    return [torch.rand(10, 512, 64)]

def get_init_inputs():
    return [64, 128, 4]
'''


def test_a_recurrent_reference_is_sized_on_the_cpu_as_it_runs(tmp_path):
    """On the meta device an LSTM of 512 steps decomposes into Python-level steps (tens of seconds a
    configuration); its sizes come from one CPU run instead, and agree with it, the caller's random state untouched."""
    path = tmp_path / "level3" / "35_LSTM.py"
    path.parent.mkdir()
    path.write_text(RECURRENT)
    torch.manual_seed(5)
    state = torch.random.get_rng_state()
    t0 = time.monotonic()
    sizes = config_bytes(kernelbench_task(path))
    assert time.monotonic() - t0 < 25  # the meta device takes about 40 s here, the CPU about 1
    assert torch.equal(torch.random.get_rng_state(), state)
    lstm = torch.nn.LSTM(64, 128, 4, batch_first=True)
    assert [(c.inputs, c.outputs, c.params) for c in sizes] == [
        (10 * 512 * 64 * 4, 10 * 128 * 4, sum(p.numel() for p in lstm.state_dict().values()) * 4)] * 3


def test_a_recurrent_reference_too_large_or_failing_on_the_cpu_is_sized_on_the_meta_device(tmp_path, monkeypatch):
    """Configurations with equal parameters are sized once; over CPU_RUN_BYTES of inputs and parameters the meta
    device sizes a recurrent reference (nothing of its size on the host), and so it does where the CPU run raises."""
    from pipeline.evaluation.checks import footprint
    path = tmp_path / "level3" / "35_LSTM.py"
    path.parent.mkdir()
    path.write_text(RECURRENT.replace("torch.rand(10, 512, 64)", "torch.rand(10, 8, 64)"))
    task = kernelbench_task(path)
    devices, fail_on_cpu = [], []
    real_forward = torch.nn.LSTM.forward

    def forward(self, x, *a, **k):  # records where it runs; raises on the CPU when asked to
        devices.append(x.device.type)
        if fail_on_cpu and x.device.type == "cpu":
            raise RuntimeError("no CPU kernel")
        return real_forward(self, x, *a, **k)
    monkeypatch.setattr(torch.nn.LSTM, "forward", forward)
    want = [(c.inputs, c.outputs, c.params) for c in config_bytes(task)]
    assert devices == ["cpu"] and want[0][1] == 10 * 128 * 4  # one CPU run for the three configurations
    devices.clear()
    monkeypatch.setattr(footprint, "CPU_RUN_BYTES", 0)
    assert [(c.inputs, c.outputs, c.params) for c in config_bytes(task)] == want and devices == ["meta"]
    devices.clear()
    monkeypatch.setattr(footprint, "CPU_RUN_BYTES", 1 << 30)
    fail_on_cpu.append(1)
    assert [(c.inputs, c.outputs, c.params) for c in config_bytes(task)] == want and devices == ["cpu", "meta"]


def test_the_footprint_follows_the_largest_configuration_not_their_sum():
    one = [ConfigBytes("timing", 6 * GB, 6 * GB, 0, True)]
    three = [ConfigBytes("seed0", 6 * GB, 6 * GB), ConfigBytes("seed1", 6 * GB, 6 * GB)] + one
    assert group_footprint(three, 4 * GB, 0) == group_footprint(one, 4 * GB, 0)  # the timing configuration's size
    assert group_footprint(one, 4 * GB, 0) < 15 * 6 * GB  # within 3x of a 3x-the-input harness (18 GiB), plus the
    # float64 anchor of the check set in use (twice the outputs) and the float64 twin of an anchored timed call
    # (twice its inputs and outputs)
    assert group_footprint([ConfigBytes("t", GB, GB, 0, True)], 4 * GB, 0) < group_footprint(one, 4 * GB, 0)
    assert group_footprint([ConfigBytes("t", GB, GB, 2 * GB)], 0, 0) >= group_footprint(
        [ConfigBytes("t", GB, GB, 0)], 0, 0) + 6 * GB  # parameters: the reference's, the shared and the candidate's
    assert group_footprint([ConfigBytes("t", GB, GB, 0, stored=True)], 0, 0) == group_footprint(
        [ConfigBytes("t", GB, GB, 0)], 0, 0) + 4 * GB + 4 * GB - 2 * GB  # c2cuda keeps two sets of inputs and
    # outputs and their float64 anchors, where torch2cuda holds the anchor of one set made on demand


def test_chunked_comparison_matches_the_whole_tensor_rule(monkeypatch):
    monkeypatch.setattr(fused_check, "COMPARE_CHUNK", 1000)
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(10_500, generator=g)
    assert compare(ref.clone(), ref, Tolerance(rtol=1e-4, atol=1e-4))[0]
    out = ref.clone()
    out[7777] += 1.0  # in the eighth chunk
    ok, err, why = compare(out, ref, Tolerance(rtol=1e-4, atol=1e-4))
    assert not ok and "1 of 10500" in why and "flat index 7777" in why
    out = ref.clone()
    out[10_400] = float("nan")  # in the last, partial chunk
    ok, _, why = compare(out, ref, Tolerance(rtol=1e-4, atol=1e-4))
    assert not ok and "1 of 10500 output elements are NaN" in why
    ints = torch.arange(5000)
    bad = ints.clone()
    bad[4999] += 1
    assert compare(ints.clone(), ints, EXACT)[0] and compare(bad, ints, EXACT)[2] == "1 of 5000 elements differ"


SMALL = PROBLEM.replace("batch = 1 << 20", "batch = 64").replace("features = 1024", "features = 32")


def _small_group(tmp_path, monkeypatch, keep_bytes):
    monkeypatch.setattr(reference_torch, "DEVICE", "cpu")
    path = tmp_path / "level1" / "7_Linear_ReLU.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(SMALL)
    return reference_torch.build_torch2cuda(kernelbench_task(path), seed=5, init_seed=9, keep_sets_bytes=keep_bytes)


def test_check_sets_are_made_from_their_seeds_and_large_ones_are_not_kept(tmp_path, monkeypatch):
    group = _small_group(tmp_path, monkeypatch, keep_bytes=0)  # every set counts as large
    cd = group.configs[0]
    assert not cd.input_sets and not cd.keep_sets
    inputs, expected = cd.check_set(0)
    x = next(t for b, t in inputs.items() if group.buffers[b].role == "in")
    (out_b, out), = expected.items()
    assert group.buffers[out_b].role == "out" and out.shape == (64, 32)
    w = {group.buffers[b].name.split(".", 1)[1]: t for b, t in inputs.items() if group.buffers[b].role == "param"}
    assert torch.allclose(out, torch.relu(x @ w["fc.weight"].T + w["fc.bias"]))  # the reference's own outputs
    inputs1, _ = cd.check_set(1)
    assert 0 not in cd._made and not torch.equal(next(iter(inputs1.values())), x)  # one set held, new inputs
    again, expected_again = cd.check_set(0)
    assert torch.equal(next(iter(again.values())), x) and torch.equal(expected_again[out_b], out)  # same seed
    cd.drop_sets()
    assert not cd._made


def test_small_groups_keep_their_sets(tmp_path, monkeypatch):
    group = _small_group(tmp_path, monkeypatch, keep_bytes=1 << 30)
    cd = group.configs[0]
    first = cd.check_set(0)
    assert cd.check_set(1) and cd.check_set(0) is first
    cd.drop_sets()
    assert cd.check_set(0) is first


def test_configurations_share_one_region_after_the_parameters(tmp_path, monkeypatch):
    group = _small_group(tmp_path, monkeypatch, keep_bytes=1 << 30)
    add_timing_slots(group, memory_bytes=1 << 20, max_slots=4)
    sizes = arena_layout(group)
    params = [b for b in group.buffers if b.role == "param"]
    assert all(b.arena == 0 for b in group.buffers) and sizes[1] == 0
    per_config = max(sum(-(-group.buffers[b].nbytes // 512) * 512 for b in set(cd.buffers + sum(cd.slots, [])) if
                         group.buffers[b].role != "param") for cd in group.configs)
    assert sizes[0] == sum(-(-b.nbytes // 512) * 512 for b in params) + per_config  # not the sum of configs
    for cd in group.configs:  # within a configuration nothing overlaps
        spans = sorted((group.buffers[b].offset, group.buffers[b].offset + group.buffers[b].nbytes)
                       for b in set(cd.buffers + sum(cd.slots, [])))
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
        assert all(group.buffers[b].offset % 512 == 0 for b in cd.buffers)


@pytest.mark.integration
def test_c2cuda_baseline_slots_live_in_their_own_allocation():
    saxpy = next(t for t in load_tasks("builtin") if t.id == "c2cuda/saxpy")
    group = build_c2cuda(saxpy, seed=1)
    add_timing_slots(group, memory_bytes=64 << 20, max_slots=4)
    sizes = arena_layout(group)
    assert sizes[1] > 0
    assert all((b.arena == 1) == b.baseline_only for b in group.buffers)


def test_a_group_too_large_for_the_gpu_is_the_evaluators_failure_naming_its_sizes(tmp_path, compile_cfg):
    from pipeline.core.config import EvalSection
    from pipeline.evaluation.build.compile import CompileResult
    from pipeline.evaluation.evaluator import Evaluator, Prepared
    from pipeline.core.records import Candidate
    path = tmp_path / "level1" / "7_Linear_ReLU.py"
    path.parent.mkdir()
    path.write_text(PROBLEM)  # 4 GiB in, 4 GiB out
    task = kernelbench_task(path)
    ev = Evaluator(EvalSection(result_cache_dir=""), compile_cfg, use_gpu=False)
    ev.memory = MemoryBudget("0", 2 * GB, directory=str(tmp_path))
    cand = Candidate(task_id=task.id, code="class ModelNew: pass", format="kernelbench")
    results = [None]
    ev._run_on_gpu(task, [cand], {0: Prepared(CompileResult(ok=True), [], {}, {})}, [0], results)
    r = results[0]
    assert r.verdict == "evaluator_error" and r.speedup is None
    assert "inputs 4.0 GiB, outputs 4.0 GiB" in r.reason and "budget of 2.0 GiB" in r.reason


def test_a_reused_pid_does_not_keep_a_dead_holders_reservation(tmp_path):
    import json
    import os
    budget = MemoryBudget("0", 10 * GB, directory=str(tmp_path))
    with open(budget.path, "w") as f:  # this very pid, but a start time it never had: a dead holder's entry
        json.dump({"old": {"pid": os.getpid(), "start": "1", "bytes": 9 * GB}}, f)
    assert budget.reserved() == 0
    with budget.reserve(9 * GB, "now", timeout_s=1):
        assert budget.reserved() == 9 * GB


def test_zero_size_outputs_have_a_signed_sum_of_zero():
    from pipeline.evaluation.timing.checksums import signed_sum
    assert float(signed_sum(torch.zeros(0), torch.ones(0))) == 0.0


IN_PLACE = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x.mul_(2)

def get_inputs():
    return [torch.rand(8, 8)]

def get_init_inputs():
    return []
"""


def test_a_reference_that_writes_its_inputs_does_not_change_the_stored_set(tmp_path, monkeypatch):
    monkeypatch.setattr(reference_torch, "DEVICE", "cpu")
    path = tmp_path / "level1" / "9_InPlace.py"
    path.parent.mkdir()
    path.write_text(IN_PLACE)
    group = reference_torch.build_torch2cuda(kernelbench_task(path), seed=1, init_seed=2, keep_sets_bytes=0)
    inputs, expected = group.configs[0].check_set(0)
    (x,), (y,) = inputs.values(), expected.values()
    assert torch.allclose(y, 2 * x)  # the inputs kept are those before the reference wrote them


def test_a_check_set_whose_reference_fails_is_the_evaluators_failure(tmp_path, monkeypatch):
    monkeypatch.setattr(reference_torch, "DEVICE", "cpu")
    group = _small_group(tmp_path, monkeypatch, keep_bytes=0)
    cd = group.configs[0]
    cd.run_reference = lambda fresh: (_ for _ in ()).throw(RuntimeError("CUDA out of memory"))
    with pytest.raises(TaskBroken, match="making check set 2 .*out of memory"):
        cd.check_set(1)


@pytest.mark.integration
def test_c2cuda_timing_sets_before_their_baseline_has_run():
    saxpy = next(t for t in load_tasks("builtin") if t.id == "c2cuda/saxpy")
    group = build_c2cuda(saxpy, seed=1)
    timing = next(cd for cd in group.configs if cd.time)
    inputs, expected = timing.check_set(0)
    assert inputs and expected == {}  # staged for the baseline, which then gives the expected outputs


def test_shared_parameters_a_candidate_damaged_are_put_back(tmp_path, monkeypatch, compile_cfg):
    from pipeline.core.config import EvalSection
    from pipeline.evaluation.evaluator import Evaluator
    group = _small_group(tmp_path, monkeypatch, keep_bytes=1 << 30)
    for cd in group.configs:
        for b, value in cd.param_values.items():
            group.buffers[b].view = value.clone()
    ev = Evaluator(EvalSection(result_cache_dir=""), compile_cfg, use_gpu=False)
    assert not ev._restore_params(group)
    b, value = next(iter(group.configs[2].param_values.items()))
    group.buffers[b].view.add_(1.0)  # written out of bounds by a candidate checked on another configuration
    assert ev._restore_params(group) and torch.equal(group.buffers[b].view, value)


def test_the_footprint_counts_the_calibration_childrens_scratch():
    """Each trusted calibration child writes as many bytes per call as the candidate's outputs (capped):
    that scratch is the group's memory too, up to the cap, and only for timed configurations."""
    timed = [ConfigBytes("timing", GB, GB // 8, 0, True)]
    cap = 256 << 20
    assert group_footprint(timed, 0, 0, calibration_max=cap) == group_footprint(timed, 0, 0) + 2 * (GB // 8)
    big = [ConfigBytes("timing", GB, 4 * GB, 0, True)]
    assert group_footprint(big, 0, 0, calibration_max=cap) == group_footprint(big, 0, 0) + 2 * cap
    untimed = [ConfigBytes("seed0", GB, 4 * GB, 0, False)]
    assert group_footprint(untimed, 0, 0, calibration_max=cap) == group_footprint(untimed, 0, 0)


def test_the_group_rounds_kept_count_once_per_timing_configuration():
    """eval.group_rounds keeps at most timing_memory_bytes of round sets per timing configuration for the group."""
    timed, untimed = ConfigBytes("timing", GB, GB, 0, True), ConfigBytes("seed0", GB, GB, 0, False)
    assert group_footprint([untimed, timed], 0, 0, round_sets_bytes=GB) == group_footprint([untimed, timed], 0, 0) + GB
    assert group_footprint([untimed], 0, 0, round_sets_bytes=GB) == group_footprint([untimed], 0, 0)


def test_calibration_children_give_their_scratch_back_or_are_replaced():
    """When a group ends, each live null child frees its calibration scratch; one that fails to is ended
    (and started afresh when next needed), so a broken child cannot spoil later groups."""
    from pipeline.evaluation.evaluator import Evaluator

    class Child:
        def __init__(self, reply=None, dead=False):
            self.reply, self.closed, self.asked = reply, False, []
            self.proc = type("P", (), {"poll": lambda _self: 1 if dead else None})()

        def request(self, msg, timeout):
            self.asked.append(msg["op"])
            if isinstance(self.reply, Exception):
                raise self.reply
            return self.reply

        def close(self):
            self.closed = True
    ev = Evaluator.__new__(Evaluator)
    good, refused, broken, dead = Child({"ok": True}), Child({"ok": False}), Child(OSError("pipe")), Child(dead=True)
    ev._null_children = {0: good, 1: refused, 2: broken, 3: dead}
    ev._free_calibration_scratch()
    assert good.asked == ["free_scratch"] and not good.closed
    assert refused.closed and broken.closed and dead.asked == []
    assert set(ev._null_children) == {0, 3}


SMALL_PROBLEM = PROBLEM.replace("batch = 1 << 20", "batch = 64")


def test_the_memory_plan_lists_what_each_card_must_refuse_with_the_evaluators_own_estimate(tmp_path, capsys):
    """`cudaperf data memory`: every task's row is the reservation the evaluator makes (group_memory_need), judged
    against each card's budget; a bad card list is one line and exit status 2."""
    import json
    from pipeline.cli import main as cudaperf
    from pipeline.core.config import EvalSection
    from pipeline.evaluation.evaluator import group_memory_need
    level = tmp_path / "KernelBench" / "level1"
    level.mkdir(parents=True)
    (level / "1_Linear_ReLU_large.py").write_text(PROBLEM)  # 4 GiB in, 4 GiB out: never allocated
    (level / "2_Linear_ReLU_small.py").write_text(SMALL_PROBLEM)
    out = tmp_path / "plan.json"
    assert cudaperf(["data", "memory", "--kernelbench-dir", str(tmp_path), "--levels", "1", "--gpu-memory-gib",
                     "40,200", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    rows = {r["task"]: r for r in json.loads(out.read_text())["rows"]}
    large, small = rows["kernelbench/level1/1_Linear_ReLU_large"], rows["kernelbench/level1/2_Linear_ReLU_small"]
    task = kernelbench_task(level / "1_Linear_ReLU_large.py")
    assert large["need_bytes"] == group_memory_need(task, EvalSection())[0]
    assert large["inputs_bytes"] == large["outputs_bytes"] == large["intermediates_bytes"] == 4 * GB  # Linear, ReLU
    assert "seed0: 4.0 / 4.0 / 0.0 / 4.0" in printed
    assert 36 * GB < large["need_bytes"] < 180 * GB and large["fits"] == {"40": False, "200": True}
    assert small["fits"] == {"40": True, "200": True}
    assert "1_Linear_ReLU_large" in printed and "2_Linear_ReLU_small" not in printed  # only what some card refuses
    assert "a 40 GiB card (evaluation budget 36.0 GiB, eval.gpu_memory_fraction 0.9): 1 of 2 tasks fit, 1 refused" \
        in printed
    assert cudaperf(["data", "memory", "--kernelbench-dir", str(tmp_path), "--levels", "1",
                     "--gpu-memory-gib", "eighty"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--gpu-memory-gib 'eighty'" in err[0] and "e.g. --gpu-memory-gib 79.2,139" in err[0]
    for bad in (["--gpu-memory-gib", "nan"], ["--gpu-memory-gib", "0"], ["--levels", "1,x"]):
        assert cudaperf(["data", "memory", "--kernelbench-dir", str(tmp_path), *bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and bad[1] in err[0] and "e.g." in err[0]
