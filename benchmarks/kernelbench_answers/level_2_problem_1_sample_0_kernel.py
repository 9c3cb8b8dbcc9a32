import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# nn.Conv2d stays torch; ReLU and the per-channel bias add are one kernel.
relu_bias_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>


__global__ void relu_bias_kernel(const float* __restrict__ x, float* __restrict__ out, const float* __restrict__ bias, int64_t n, int64_t channels, int64_t hw) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c = (i / hw) % channels;
        float v = x[i];
        out[i] = fmaxf(v, 0.0f) + bias[c];
    }
}

torch::Tensor relu_bias_cuda(torch::Tensor x, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32,
                "relu_bias_cuda: x must be a contiguous float32 CUDA tensor");
    auto out = torch::empty_like(x);
    int64_t n = x.numel();
    const int threads = 256;
    int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 132 * 32);
    relu_bias_kernel<<<(int)blocks, threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), bias.data_ptr<float>(), n, x.size(1), x.numel() / (x.size(0) * x.size(1)));
    return out;
}
"""

relu_bias_cpp_source = "torch::Tensor relu_bias_cuda(torch::Tensor x, torch::Tensor bias);"

relu_bias = load_inline(
    name="kb_l2_1_relu_bias",
    cpp_sources=relu_bias_cpp_source,
    cuda_sources=relu_bias_source,
    functions=["relu_bias_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.relu_bias = relu_bias

    def forward(self, x):
        x = self.conv(x)
        return self.relu_bias.relu_bias_cuda(x, self.bias)
