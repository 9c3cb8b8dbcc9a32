import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# DELIBERATELY WRONG: the block reduction has no __syncthreads() between its tree steps, so warps
# read partial sums other warps have not written yet. The result changes from run to run (and so
# from seed to seed); an evaluator must call it incorrect.
sigmoid_sum_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void sigmoid_row_sum_kernel(const float* __restrict__ x, float* __restrict__ out, int cols) {
    extern __shared__ float sdata[];
    const float* row = x + (int64_t)blockIdx.x * cols;
    float acc = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) acc += 1.0f / (1.0f + __expf(-row[j]));
    sdata[threadIdx.x] = acc;
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sdata[threadIdx.x] += sdata[threadIdx.x + s];
    }
    if (threadIdx.x == 0) out[blockIdx.x] = sdata[0];
}

torch::Tensor sigmoid_row_sum(torch::Tensor x) {
    auto out = torch::empty({x.size(0), 1}, x.options());
    const int threads = 1024;
    sigmoid_row_sum_kernel<<<(unsigned int)x.size(0), threads, threads * sizeof(float)>>>(
        x.data_ptr<float>(), out.data_ptr<float>(), (int)x.size(1));
    return out;
}
"""

sigmoid_sum = load_inline(
    name="kb_bad_l2_56_racy_row_sum",
    cpp_sources="torch::Tensor sigmoid_row_sum(torch::Tensor x);",
    cuda_sources=sigmoid_sum_source,
    functions=["sigmoid_row_sum"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(input_size, hidden_size)
        self.sigmoid_sum = sigmoid_sum

    def forward(self, x):
        return self.sigmoid_sum.sigmoid_row_sum(self.linear(x))
