import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# nn.Linear in torch; subtract, multiply and ReLU fused.
sub_mul_relu_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>


__global__ void sub_mul_relu_kernel(const float* __restrict__ x, float* __restrict__ out, float subtract_value, float multiply_value, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = x[i];
        out[i] = fmaxf((v - subtract_value) * multiply_value, 0.0f);
    }
}

torch::Tensor sub_mul_relu_cuda(torch::Tensor x, double subtract_value, double multiply_value) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32,
                "sub_mul_relu_cuda: x must be a contiguous float32 CUDA tensor");
    auto out = torch::empty_like(x);
    int64_t n = x.numel();
    const int threads = 256;
    int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 132 * 32);
    sub_mul_relu_kernel<<<(int)blocks, threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), (float)subtract_value, (float)multiply_value, n);
    return out;
}
"""

sub_mul_relu_cpp_source = "torch::Tensor sub_mul_relu_cuda(torch::Tensor x, double subtract_value, double multiply_value);"

sub_mul_relu = load_inline(
    name="kb_l2_9_sub_mul_relu",
    cpp_sources=sub_mul_relu_cpp_source,
    cuda_sources=sub_mul_relu_source,
    functions=["sub_mul_relu_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, subtract_value, multiply_value):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.subtract_value = subtract_value
        self.multiply_value = multiply_value
        self.sub_mul_relu = sub_mul_relu

    def forward(self, x):
        x = self.linear(x)
        return self.sub_mul_relu.sub_mul_relu_cuda(x, self.subtract_value, self.multiply_value)
