import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Conv2d in torch, then Mish applied twice in one pass over the output (written in place).
mish_mish_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float softplus_f(float v) {
    return v > 20.0f ? v : log1pf(expf(v));  // torch's softplus threshold
}
__device__ __forceinline__ float mish_f(float v) {
    return v * tanhf(softplus_f(v));
}

__global__ void mish_mish_kernel(const float* x, float* out, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = x[i];
        out[i] = mish_f(mish_f(v));
    }
}

torch::Tensor mish_mish_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32,
                "mish_mish_cuda: x must be a contiguous float32 CUDA tensor");
    auto out = x;  // the input is a fresh intermediate of forward: written in place
    int64_t n = x.numel();
    const int threads = 256;
    int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 132 * 32);
    mish_mish_kernel<<<(int)blocks, threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

mish_mish_cpp_source = "torch::Tensor mish_mish_cuda(torch::Tensor x);"

mish_mish = load_inline(
    name="kb_l2_4_mish_mish",
    cpp_sources=mish_mish_cpp_source,
    cuda_sources=mish_mish_source,
    functions=["mish_mish_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.mish_mish = mish_mish

    def forward(self, x):
        x = self.conv(x)
        return self.mish_mish.mish_mish_cuda(x)
