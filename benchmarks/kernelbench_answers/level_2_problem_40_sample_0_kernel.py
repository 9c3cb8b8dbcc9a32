import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# x * s + x (the residual is the Linear output itself), without the clone.
scale_residual_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>


__global__ void scale_residual_kernel(const float* __restrict__ x, float* __restrict__ out, float scaling_factor, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = x[i];
        out[i] = v * scaling_factor + v;
    }
}

torch::Tensor scale_residual_cuda(torch::Tensor x, double scaling_factor) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32,
                "scale_residual_cuda: x must be a contiguous float32 CUDA tensor");
    auto out = torch::empty_like(x);
    int64_t n = x.numel();
    const int threads = 256;
    int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 132 * 32);
    scale_residual_kernel<<<(int)blocks, threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), (float)scaling_factor, n);
    return out;
}
"""

scale_residual_cpp_source = "torch::Tensor scale_residual_cuda(torch::Tensor x, double scaling_factor);"

scale_residual = load_inline(
    name="kb_l2_40_scale_residual",
    cpp_sources=scale_residual_cpp_source,
    cuda_sources=scale_residual_source,
    functions=["scale_residual_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor
        self.scale_residual = scale_residual

    def forward(self, x):
        x = self.matmul(x)
        return self.scale_residual.scale_residual_cuda(x, self.scaling_factor)
