import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Exact (erf) GELU, the default of torch.nn.functional.gelu.
gelu_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <math.h>

__global__ void gelu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    const float inv_sqrt2 = 0.70710678118654752440f;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)blockDim.x * gridDim.x) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + erff(v * inv_sqrt2));
    }
}

torch::Tensor gelu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    const int threads = 256;
    int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 65535);
    gelu_kernel<<<(int)blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

gelu = load_inline(
    name="kb_l1_26_gelu",
    cpp_sources="torch::Tensor gelu_forward(torch::Tensor x);",
    cuda_sources=gelu_source,
    functions=["gelu_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.gelu = gelu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gelu.gelu_forward(x.contiguous())
