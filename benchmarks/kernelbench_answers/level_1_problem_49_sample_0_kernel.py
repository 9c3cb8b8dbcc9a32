import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

max_reduce_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <float.h>

// max over dimension `dim` of a contiguous tensor viewed as (outer, reduce, inner)
__global__ void max_reduce_kernel(const float* __restrict__ x, float* __restrict__ out,
                                  int64_t outer, int64_t reduce, int64_t inner) {
    int64_t total = outer * inner;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
        int64_t o = t / inner, i = t % inner;
        const float* p = x + o * reduce * inner + i;
        float m = -FLT_MAX;
        for (int64_t r = 0; r < reduce; ++r) {
            float v = p[r * inner];
            m = (v > m || v != v) ? v : m;  // NaN wins, as in torch.max
        }
        out[t] = m;
    }
}

torch::Tensor max_reduce_cuda(torch::Tensor x, int64_t dim) {
    auto xc = x.contiguous();
    if (dim < 0) dim += xc.dim();
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= xc.size(d);
    for (int64_t d = dim + 1; d < xc.dim(); ++d) inner *= xc.size(d);
    std::vector<int64_t> sizes;
    for (int64_t d = 0; d < xc.dim(); ++d) if (d != dim) sizes.push_back(xc.size(d));
    auto out = torch::empty(sizes, xc.options());
    int threads = 256;
    int64_t blocks = std::min<int64_t>((outer * inner + threads - 1) / threads, 65535);
    max_reduce_kernel<<<(int)blocks, threads>>>(xc.data_ptr<float>(), out.data_ptr<float>(), outer, xc.size(dim), inner);
    return out;
}
"""

max_reduce = load_inline(
    name="kb_l1_49_max_reduce",
    cpp_sources="torch::Tensor max_reduce_cuda(torch::Tensor x, int64_t dim);",
    cuda_sources=max_reduce_source,
    functions=["max_reduce_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim
        self.max_reduce = max_reduce

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.max_reduce.max_reduce_cuda(x, self.dim)
