import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Row softmax, one block per row: a max pass, a sum-of-exponentials pass, a write pass, with
# warp-shuffle block reductions (rows are 393216 long, far beyond one block's registers).
softmax_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <float.h>

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

template <bool IS_MAX>
__device__ float block_reduce(float v, float* shared) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = IS_MAX ? warp_max(v) : warp_sum(v);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    int nwarps = blockDim.x >> 5;
    v = (threadIdx.x < nwarps) ? shared[threadIdx.x] : (IS_MAX ? -FLT_MAX : 0.0f);
    if (warp == 0) v = IS_MAX ? warp_max(v) : warp_sum(v);
    if (threadIdx.x == 0) shared[0] = v;
    __syncthreads();
    float r = shared[0];
    __syncthreads();
    return r;
}

__global__ void softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    __shared__ float shared[32];
    const float* row = x + (int64_t)blockIdx.x * cols;
    float* out = y + (int64_t)blockIdx.x * cols;
    float m = -FLT_MAX;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, row[j]);
    m = block_reduce<true>(m, shared);
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += __expf(row[j] - m);
    s = block_reduce<false>(s, shared);
    float inv = 1.0f / s;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) out[j] = __expf(row[j] - m) * inv;
}

torch::Tensor softmax_cuda(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "softmax_cuda expects a contiguous 2-D tensor");
    auto y = torch::empty_like(x);
    softmax_rows_kernel<<<(unsigned int)x.size(0), 1024>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.size(1));
    return y;
}
"""

softmax_ext = load_inline(
    name="kb_l1_23_softmax",
    cpp_sources="torch::Tensor softmax_cuda(torch::Tensor x);",
    cuda_sources=softmax_source,
    functions=["softmax_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.softmax = softmax_ext

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.softmax.softmax_cuda(x)
