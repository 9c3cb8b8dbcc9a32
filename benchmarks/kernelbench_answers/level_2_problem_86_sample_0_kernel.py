import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# x / divisor then the exact (erf) GELU, fused after nn.Linear.
divide_gelu_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float gelu_f(float v) {
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f));
}

__global__ void divide_gelu_kernel(const float* __restrict__ x, float* __restrict__ out, float divisor, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = x[i];
        out[i] = gelu_f(v / divisor);
    }
}

torch::Tensor divide_gelu_cuda(torch::Tensor x, double divisor) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32,
                "divide_gelu_cuda: x must be a contiguous float32 CUDA tensor");
    auto out = torch::empty_like(x);
    int64_t n = x.numel();
    const int threads = 256;
    int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 132 * 32);
    divide_gelu_kernel<<<(int)blocks, threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), (float)divisor, n);
    return out;
}
"""

divide_gelu_cpp_source = "torch::Tensor divide_gelu_cuda(torch::Tensor x, double divisor);"

divide_gelu = load_inline(
    name="kb_l2_86_divide_gelu",
    cpp_sources=divide_gelu_cpp_source,
    cuda_sources=divide_gelu_source,
    functions=["divide_gelu_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, output_size, divisor):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor
        self.divide_gelu = divide_gelu

    def forward(self, x):
        x = self.linear(x)
        return self.divide_gelu.divide_gelu_cuda(x, self.divisor)
