# Habits of LLM answers: <cuda.h> included for nothing, CUDART_INF_F from <math_constants.h>,
# std::numeric_limits from <limits>.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
#include <cuda.h>
#include <cuda_runtime.h>
#include <math_constants.h>
#include <limits>
#include <torch/extension.h>

__global__ void row_max_kernel(const float* __restrict__ x, float* __restrict__ out, int cols) {
    int row = blockIdx.x;
    float m = -CUDART_INF_F;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, x[row * cols + j]);
    for (int offset = 16; offset > 0; offset >>= 1) m = fmaxf(m, __shfl_down_sync(0xffffffff, m, offset));
    if (threadIdx.x == 0) out[row] = m;
}

torch::Tensor row_max(torch::Tensor x) {
    static_assert(std::numeric_limits<float>::has_infinity, "float has infinity");
    auto out = torch::empty({x.size(0)}, x.options());
    row_max_kernel<<<x.size(0), 32>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.size(1));
    return out;
}
"""

row_max_ext = load_inline(name="row_max_ext", cpp_sources="torch::Tensor row_max(torch::Tensor x);",
                          cuda_sources=source, functions=["row_max"])


class ModelNew(nn.Module):
    def forward(self, x):
        return row_max_ext.row_max(x)
