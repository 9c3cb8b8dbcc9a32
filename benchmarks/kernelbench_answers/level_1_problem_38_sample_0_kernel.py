import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# x / mean(|x|, dim=1): one block per row (32768 rows of 65535), a block sum then a scaling pass.
# The input holds 2^31 elements, so every offset is 64-bit.
l1_norm_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void l1_norm_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t dim) {
    extern __shared__ float partial[];
    int64_t row = blockIdx.x;
    const float* xr = x + row * dim;
    float* yr = y + row * dim;
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) s += fabsf(xr[j]);
    partial[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) partial[threadIdx.x] += partial[threadIdx.x + k];
        __syncthreads();
    }
    float mean = partial[0] / (float)dim;
    float inv = 1.0f / mean;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) yr[j] = xr[j] * inv;
}

torch::Tensor l1_norm_cuda(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "l1_norm_cuda expects a contiguous 2-D tensor");
    auto y = torch::empty_like(x);
    const int threads = 512;
    l1_norm_kernel<<<(unsigned int)x.size(0), threads, threads * sizeof(float)>>>(x.data_ptr<float>(),
                                                                                  y.data_ptr<float>(), x.size(1));
    return y;
}
"""

l1_norm = load_inline(
    name="kb_l1_38_l1_norm",
    cpp_sources="torch::Tensor l1_norm_cuda(torch::Tensor x);",
    cuda_sources=l1_norm_source,
    functions=["l1_norm_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.l1_norm = l1_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l1_norm.l1_norm_cuda(x)
