"""A KernelBench-format candidate's torch modules run under the reference's float32 numerics.

The reference computes with TF32 off; PyTorch's default leaves cuDNN convolution on TF32. A candidate
that keeps nn.Conv2d for the part it does not rewrite must not be judged incorrect for TF32 rounding
its process was left in, and a candidate that turns TF32 on itself is a precision downgrade."""
import pytest
import torch

from pipeline.evaluation.child import main as child

from pipeline.evaluation.checks import numerics

from pipeline.evaluation.child import torch_guard
from pipeline.evaluation.child.outcome import Stop, judge_reply


@pytest.fixture
def restore_mode():
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.get_float32_matmul_precision())
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]
    torch.set_float32_matmul_precision(saved[2])


class Loaded(Exception):
    pass


def test_the_candidate_module_loads_in_full_float32_whatever_the_process_had(monkeypatch, restore_mode):
    torch.backends.cudnn.allow_tf32 = True  # PyTorch's default for convolutions
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.set_float32_matmul_precision("high")
    seen = {}

    def load(source, extensions):
        seen["mode"] = numerics.float32_mode(torch)
        raise Loaded

    monkeypatch.setattr(torch_guard, "load_candidate", load)
    with pytest.raises(Loaded):
        child.TorchRunner({"source": "", "extensions": {}, "calls": []}, [], [])
    assert seen["mode"] == (False, False, "highest")


def test_a_candidate_that_turns_tf32_back_on_is_rejected(restore_mode):
    runner = child.TorchRunner.__new__(child.TorchRunner)
    numerics.set_full_float32(torch)
    runner.torch, runner.guard, runner.flags = torch, torch_guard, []
    runner.snapshot, runner.threads_before = torch_guard.snapshot(), 10 ** 6
    runner.float32_mode = numerics.float32_mode(torch)
    assert runner.status() == []
    torch.backends.cudnn.allow_tf32 = True
    flags = runner.status()
    assert flags and flags[0].startswith("precision-downgrade")
    with pytest.raises(Stop) as stop:
        judge_reply({"ok": True, "flags": flags}, "check")
    assert stop.value.verdict == "rejected" and "float32" in stop.value.reason


def test_the_trusted_reference_uses_the_same_mode(restore_mode):
    torch.backends.cudnn.allow_tf32 = True
    numerics.set_full_float32(torch)
    assert numerics.float32_mode(torch) == (False, False, "highest")
    assert numerics.mode_changes(torch, (False, False, "highest")) == []


def test_a_candidate_using_the_newer_fp32_precision_setting_is_flagged_not_crashed(restore_mode):
    numerics.set_full_float32(torch)
    expected = numerics.float32_mode(torch)
    saved = torch.backends.cudnn.conv.fp32_precision
    try:
        torch.backends.cudnn.conv.fp32_precision = "tf32"  # PyTorch then refuses to report the older flags
        flags = numerics.mode_changes(torch, expected)
    finally:
        torch.backends.cudnn.conv.fp32_precision = saved
    assert len(flags) == 1 and flags[0].startswith("precision-downgrade")
