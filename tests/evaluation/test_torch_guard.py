"""The KernelBench-format runtime checks (torch_guard), exercised on CPU tensors."""
import subprocess
import sys

import pytest
import torch

from pipeline.evaluation.child import torch_guard as guard


@pytest.mark.integration
def test_no_false_tamper_flag_in_a_fresh_process():
    """Entering the dispatch mode for the first time imports torch._dynamo, which rewraps torch
    functions; that must not read as the candidate patching them (it once rejected every
    honest KernelBench-format candidate)."""
    code = ("import torch\nfrom pipeline.evaluation.child import torch_guard as g\ns = g.snapshot()\n"
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
    assert guard.output_problems([torch.empty(2, 3)], [out]) == ["output-type: output 0 is not a dense contiguous CUDA tensor"]
    assert guard.output_problems([out, out], [out])[0].startswith("output-type: forward returned 2")


def _run_guarded(fn, audit=True) -> list[str]:
    flags: list[str] = []
    with torch.no_grad(), guard.NoTorchCompute(flags, audit=audit):
        fn()
    return flags


def test_operators_hidden_by_excluding_the_python_key_are_flagged():
    """A C++ extension (c10::impl::ExcludeDispatchKeyGuard) or Python (torch._C._DisableTorchDispatch)
    can hide operators from the dispatch mode; the audit from below the dispatch keys still sees them."""
    x = torch.randn(8, 8)
    python_key = torch._C.DispatchKeySet(torch._C.DispatchKey.Python)

    def excluded():
        with torch._C._ExcludeDispatchKeyGuard(python_key):
            torch.mm(x, x)

    def disabled():
        with torch._C._DisableTorchDispatch():
            torch.relu(x)
    for fn, op in ((excluded, "aten.mm"), (disabled, "aten.relu")):
        flags = _run_guarded(fn)
        assert flags and flags[0].startswith("torch-compute-in-forward") and op in flags[0], flags


def test_a_leaked_exclusion_is_flagged_without_the_audit():
    x = torch.randn(4)
    keep = []

    def leak():
        g = torch._C._DisableTorchDispatch()
        g.__enter__()
        keep.append(g)
        x.numel()
    flags = _run_guarded(leak, audit=False)
    keep.pop().__exit__(None, None, None)
    assert any("dispatch state" in f for f in flags), flags


def test_honest_forward_is_not_flagged_by_the_audit():
    x = torch.randn(4, 4)

    def honest():
        y = torch.empty_like(x)
        x.reshape(-1), x.contiguous(), x.to(x.device), x.t(), x.size(0), y.view(16)
    assert _run_guarded(honest) == []
