"""KernelBench tasks are judged element by element at least as loosely as KernelBench's own float32 check
(torch.allclose, atol = rtol = 1e-4), so an answer its harness accepts for its values is not called incorrect
here; but its absolute 1e-4 does not pass outputs far smaller than that (a long softmax row) as zeros or as
noise: the output as a whole must be within 1 % of the reference's norm."""
import torch

from pipeline.evaluation.checks.comparison import compare
from pipeline.tasks import kernelbench_task

PROBLEM = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.softmax(x, dim=1)

def get_inputs():
    return [torch.randn(64, 4096)]

def get_init_inputs():
    return []
'''


def _softmax_task(tmp_path):
    path = tmp_path / "level1" / "23_Softmax.py"
    path.parent.mkdir()
    path.write_text(PROBLEM)
    return kernelbench_task(path).tolerance


def test_an_output_within_kernelbench_allclose_passes_a_kernelbench_task(tmp_path):
    tol = _softmax_task(tmp_path)
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(64, 4096, generator=g)  # values of order 1, as most KernelBench outputs
    out = ref + 1.5e-4 * torch.sign(torch.randn(ref.shape, generator=g))  # rtol*|ref| + atol lets 1e-4 to 6e-4 off
    close = (out - ref).abs() <= 1e-4 + 1e-4 * ref.abs()
    assert torch.allclose(out[close], ref[close], atol=1e-4, rtol=1e-4)
    out = torch.where(close, out, ref)  # the elements KernelBench accepts as they are, the rest exact
    assert torch.allclose(out, ref, atol=1e-4, rtol=1e-4)  # KernelBench accepts it
    assert compare(out, ref, tol)[0]
    wrong = ref + 3e-4 * (1 + ref.abs())
    assert not torch.allclose(wrong, ref, atol=1e-4, rtol=1e-4)
    assert not compare(wrong, ref, tol)[0]


def test_tiny_outputs_are_not_passed_as_zeros_or_noise(tmp_path):
    tol = _softmax_task(tmp_path)
    g = torch.Generator().manual_seed(1)
    ref = torch.softmax(0.5 * torch.randn(16, 393216, generator=g), dim=1)  # values near 2.5e-6, all < 1e-4
    for fake in (torch.zeros_like(ref), ref + 0.9e-4 * torch.sign(torch.randn(ref.shape, generator=g))):
        assert torch.allclose(fake, ref, atol=1e-4, rtol=1e-4)  # KernelBench's check accepts both
        ok, _, why = compare(fake, ref, tol)
        assert not ok and "of the reference's norm" in why
    honest = torch.softmax(torch.log(ref.double()), dim=1).float()  # computed again another way: 1e-7 off
    assert compare(honest, ref, tol)[0]


def test_a_reference_that_is_rounding_noise_is_judged_elementwise_only(tmp_path):
    """A normalised output's mean is about 1e-10 in float32: rounding noise of values of the inputs' size, which
    two correct answers round differently. The 1 % of the norm does not apply there; it still does to a long
    softmax row, whose values lie far above that noise, so zeros are still refused."""
    from pipeline.evaluation.checks.comparison import rounding_floor
    tol = _softmax_task(tmp_path)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(32, 4096, generator=g)
    norm = (x - x.mean(dim=1, keepdim=True)) / x.std(dim=1, keepdim=True)
    ref = norm.mean(dim=1)  # about 1e-8 of rounding, its true value 0
    other = norm.double().mean(dim=1).float()  # the same answer, rounded another way
    assert not compare(other, ref, tol)[0]  # without the floor: "off by 1 of the reference's norm"
    floor = rounding_floor(tol, [x])
    assert compare(other, ref, tol, floor)[0]
    assert not compare(ref + 2e-4, ref, tol, floor)[0]  # the elementwise allowance still holds
    soft_in = 0.5 * torch.randn(8, 393216, generator=g)  # values near 2.5e-6, all below the absolute 1e-4
    soft = torch.softmax(soft_in, dim=1)
    ok, _, why = compare(torch.zeros_like(soft), soft, tol, rounding_floor(tol, [soft_in]))
    assert not ok and "of the reference's norm" in why
