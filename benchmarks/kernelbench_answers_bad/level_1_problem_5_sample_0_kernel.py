import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# DELIBERATELY WRONG: scales its input in place and returns it. The first call's output equals
# A * s, but the caller's A is changed (and every later call scales it again). KernelBench's own
# check compares against a reference output computed before, so only an input check catches it.
scale_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void scale_inplace_kernel(float* a, float s, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        a[i] *= s;
}

torch::Tensor scale_inplace(torch::Tensor A, double s) {
    int64_t n = A.numel();
    scale_inplace_kernel<<<132 * 16, 512>>>(A.data_ptr<float>(), (float)s, n);
    return A;
}
"""

scale = load_inline(
    name="kb_bad_l1_5_scale_inplace",
    cpp_sources="torch::Tensor scale_inplace(torch::Tensor A, double s);",
    cuda_sources=scale_source,
    functions=["scale_inplace"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.scale = scale

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return self.scale.scale_inplace(A, s)
