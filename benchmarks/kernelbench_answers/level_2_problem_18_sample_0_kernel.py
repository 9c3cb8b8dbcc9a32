import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# After the row sum the tensor is (batch, 1): max, mean and both logsumexps over that size-1
# dimension return it unchanged, so the model is nn.Linear followed by a row sum (one kernel).
row_sum_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void row_sum_kernel(const float* __restrict__ x, float* __restrict__ out, int cols) {
    __shared__ float warp_sums[32];
    const float* row = x + (int64_t)blockIdx.x * cols;
    float acc = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) acc += row[j];
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffff, acc, o);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        acc = threadIdx.x < blockDim.x / 32 ? warp_sums[threadIdx.x] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffff, acc, o);
        if (threadIdx.x == 0) out[blockIdx.x] = acc;
    }
}

torch::Tensor row_sum_keepdim(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "row_sum_keepdim expects a contiguous 2-D tensor");
    auto out = torch::empty({x.size(0), 1}, x.options());
    row_sum_kernel<<<(unsigned int)x.size(0), 512>>>(x.data_ptr<float>(), out.data_ptr<float>(), (int)x.size(1));
    return out;
}
"""

row_sum = load_inline(
    name="kb_l2_18_row_sum",
    cpp_sources="torch::Tensor row_sum_keepdim(torch::Tensor x);",
    cuda_sources=row_sum_source,
    functions=["row_sum_keepdim"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.row_sum = row_sum

    def forward(self, x):
        x = self.linear(x)
        return self.row_sum.row_sum_keepdim(x)
