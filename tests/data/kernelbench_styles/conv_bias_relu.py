# Level-2 style: the convolution stays an nn.Conv2d module, the bias add and ReLU after it are fused
# into one CUDA epilogue kernel.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

fused_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ out,
                                 int channels, int hw, int total) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < total) {
        int c = (idx / hw) % channels;
        float v = x[idx] + bias[c];
        out[idx] = v > 0.0f ? v : 0.0f;
    }
}

torch::Tensor bias_relu_cuda(torch::Tensor x, torch::Tensor bias) {
    auto out = torch::empty_like(x);
    int total = x.numel();
    int channels = x.size(1);
    int hw = x.size(2) * x.size(3);
    const int block_size = 256;
    const int num_blocks = (total + block_size - 1) / block_size;
    bias_relu_kernel<<<num_blocks, block_size>>>(x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(),
                                                 channels, hw, total);
    return out;
}
"""

fused_cpp_source = "torch::Tensor bias_relu_cuda(torch::Tensor x, torch::Tensor bias);"

bias_relu = load_inline(
    name="bias_relu",
    cpp_sources=fused_cpp_source,
    cuda_sources=fused_source,
    functions=["bias_relu_cuda"],
    verbose=False,
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.bias_relu = bias_relu

    def forward(self, x):
        x = self.conv(x)
        return self.bias_relu.bias_relu_cuda(x, self.bias.view(-1))
