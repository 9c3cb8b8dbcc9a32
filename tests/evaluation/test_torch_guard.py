"""The KernelBench-format runtime checks (torch_guard), exercised on CPU tensors."""
import subprocess
import sys

import pytest
import torch

from pipeline.evaluation import torch_guard as guard


def test_no_false_tamper_flag_in_a_fresh_process():
    """Entering the dispatch mode for the first time imports torch._dynamo, which rewraps torch
    functions; that must not read as the candidate patching them (it once rejected every
    honest KernelBench-format candidate)."""
    code = ("import torch\nfrom pipeline.evaluation import torch_guard as g\ns = g.snapshot()\n"
            "class M(torch.nn.Module):\n    def forward(self, x):\n        return torch.empty_like(x.contiguous())\n"
            "x = torch.randn(3)\nflags = []\nwith torch.no_grad(), g.NoTorchCompute(flags):\n    M()(x)\n"
            "print(flags, g.changes_since(s))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[] []"


def test_compute_ops_raise_and_allocation_passes():
    x = torch.randn(4, 4)
    flags: list[str] = []
    with guard.NoTorchCompute(flags):
        y = torch.empty_like(x)
        with pytest.raises(RuntimeError, match="aten.add"):
            x + 1
    assert y.shape == x.shape and flags and flags[0].startswith("torch-compute-in-forward")


def test_patching_a_timer_is_seen():
    import time
    snap = guard.snapshot()
    original = time.perf_counter
    try:
        time.perf_counter = lambda: 0.0
        assert any("time.perf_counter" in c for c in guard.changes_since(snap))
    finally:
        time.perf_counter = original
    assert guard.changes_since(snap) == []


def test_output_problems():
    out = torch.empty(2, 3)
    assert guard.output_problems(torch.empty(2, 3), [out]) == ["output-type: output 0 is not a dense contiguous CUDA tensor"]
    assert guard.output_problems((out, out), [out])[0].startswith("output-type: forward returned 2")
