"""KernelBench tasks are judged at least as loosely as KernelBench's own float32 check
(torch.allclose, atol = rtol = 1e-4), so an answer its harness accepts is not called incorrect here."""
import torch

from pipeline.evaluation.reference import compare
from pipeline.records import Tolerance
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


def test_an_output_within_kernelbench_allclose_passes_a_kernelbench_task(tmp_path):
    path = tmp_path / "level1" / "23_Softmax.py"
    path.parent.mkdir()
    path.write_text(PROBLEM)
    tol = kernelbench_task(path).tolerance
    ref = torch.softmax(torch.randn(64, 4096, generator=torch.Generator().manual_seed(0)), dim=1)  # rms ~ 3e-4
    out = ref + 0.9e-4 * torch.sign(torch.randn(ref.shape, generator=torch.Generator().manual_seed(1)))
    assert torch.allclose(out, ref, atol=1e-4, rtol=1e-4)  # KernelBench accepts it
    assert compare(out, ref, tol)[0]
    assert not compare(out, ref, Tolerance())[0]  # the default relative tolerance of built-in tasks does not
    wrong = ref + 3e-4
    assert not torch.allclose(wrong, ref, atol=1e-4, rtol=1e-4)
    assert not compare(wrong, ref, tol)[0]
