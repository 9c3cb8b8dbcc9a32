import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Sum over the middle dimension of (B, R, K), keepdim: output (B, 1, K). Each thread owns one
# (b, k) and walks the R rows; a warp reads 32 neighbouring k at once, so loads stay coalesced.
sum_dim_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void sum_middle_kernel(const float* __restrict__ x, float* __restrict__ out,
                                  int64_t outer, int64_t reduce, int64_t inner) {
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= outer * inner) return;
    int64_t o = t / inner;
    int64_t i = t - o * inner;
    const float* p = x + o * reduce * inner + i;
    float acc = 0.0f;
    for (int64_t r = 0; r < reduce; ++r) acc += p[r * inner];
    out[t] = acc;
}

torch::Tensor sum_dim_cuda(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_contiguous(), "sum_dim_cuda expects a contiguous tensor");
    if (dim < 0) dim += x.dim();
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
    for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
    auto sizes = x.sizes().vec();
    sizes[dim] = 1;
    auto out = torch::empty(sizes, x.options());
    int threads = 256;
    int64_t blocks = (outer * inner + threads - 1) / threads;
    sum_middle_kernel<<<(unsigned int)blocks, threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), outer,
                                                         x.size(dim), inner);
    return out;
}
"""

sum_dim = load_inline(
    name="kb_l1_47_sum_dim",
    cpp_sources="torch::Tensor sum_dim_cuda(torch::Tensor x, int64_t dim);",
    cuda_sources=sum_dim_source,
    functions=["sum_dim_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim
        self.sum_dim = sum_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.sum_dim.sum_dim_cuda(x, self.dim)
