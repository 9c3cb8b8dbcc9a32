import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# ConvTranspose3d in torch; v = conv + add_input, then v * hardswish(v), written over the conv output.
# The reference's bias parameter is created (same name and order) but, as in the reference, unused.
add_hardswish_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void add_hardswish_mul_kernel(float* __restrict__ x, const float* __restrict__ a, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = x[i] + a[i];
        float hs = v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f;  // torch's hardswish, same order
        x[i] = v * hs;
    }
}

torch::Tensor add_hardswish_mul_cuda(torch::Tensor x, torch::Tensor add_input) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32,
                "add_hardswish_mul_cuda: x must be a contiguous float32 CUDA tensor");
    TORCH_CHECK(add_input.is_cuda() && add_input.is_contiguous() && add_input.scalar_type() == torch::kFloat32 &&
                add_input.sizes() == x.sizes(), "add_hardswish_mul_cuda: add_input must be a contiguous float32 tensor of x's shape");
    int64_t n = x.numel();
    const int threads = 256;
    int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 132 * 32);
    // x is the conv output, a fresh intermediate of forward: written in place; add_input is only read
    add_hardswish_mul_kernel<<<(int)blocks, threads>>>(x.data_ptr<float>(), add_input.data_ptr<float>(), n);
    return x;
}
"""

add_hardswish_cpp_source = "torch::Tensor add_hardswish_mul_cuda(torch::Tensor x, torch::Tensor add_input);"

add_hardswish = load_inline(
    name="kb_l2_26_add_hardswish_mul",
    cpp_sources=add_hardswish_cpp_source,
    cuda_sources=add_hardswish_source,
    functions=["add_hardswish_mul_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape):
        super(ModelNew, self).__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.add_hardswish = add_hardswish

    def forward(self, x, add_input):
        x = self.conv_transpose(x)
        return self.add_hardswish.add_hardswish_mul_cuda(x, add_input)
