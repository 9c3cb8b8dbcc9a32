import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# x / ||x||_F over a (112, 64, 512, 512) tensor (1.88e9 elements, 7.5 GiB): three kernels in one
# extension. Per-block partial sums of squares (float4 loads, accumulated in double), one block that
# adds the partials and stores the float32 norm on the device, then a grid-stride float4 division.
# Nothing goes back to the host in between; offsets are 64-bit.
fro_norm_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define THREADS 512

__device__ __forceinline__ double warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

__device__ double block_sum_d(double v) {
    __shared__ double shared[THREADS / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum_d(v);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = (threadIdx.x < THREADS / 32) ? shared[threadIdx.x] : 0.0;
    if (warp == 0) v = warp_sum_d(v);
    return v;  // valid in thread 0
}

__global__ void sumsq_partial_kernel(const float* __restrict__ x, double* __restrict__ partial, int64_t n, bool vec4) {
    const int64_t stride = (int64_t)gridDim.x * THREADS;
    const int64_t start = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    double acc = 0.0;
    int64_t done = 0;
    if (vec4) {
        const float4* x4 = reinterpret_cast<const float4*>(x);
        const int64_t n4 = n >> 2;
#pragma unroll 4
        for (int64_t i = start; i < n4; i += stride) {
            const float4 v = x4[i];
            acc += (double)((v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w));
        }
        done = n4 << 2;
    }
    for (int64_t i = done + start; i < n; i += stride) {
        const float v = x[i];
        acc += (double)v * (double)v;
    }
    acc = block_sum_d(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void norm_final_kernel(const double* __restrict__ partial, int nblocks, float* __restrict__ norm) {
    double acc = 0.0;
    for (int i = threadIdx.x; i < nblocks; i += THREADS) acc += partial[i];
    acc = block_sum_d(acc);
    if (threadIdx.x == 0) norm[0] = (float)sqrt(acc);
}

__global__ void divide_kernel(const float* __restrict__ x, const float* __restrict__ norm, float* __restrict__ y,
                              int64_t n, bool vec4) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t start = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const float d = norm[0];
    int64_t done = 0;
    if (vec4) {
        const float4* x4 = reinterpret_cast<const float4*>(x);
        float4* y4 = reinterpret_cast<float4*>(y);
        const int64_t n4 = n >> 2;
        for (int64_t i = start; i < n4; i += stride) {
            float4 v = x4[i];
            v.x = v.x / d;
            v.y = v.y / d;
            v.z = v.z / d;
            v.w = v.w / d;
            y4[i] = v;
        }
        done = n4 << 2;
    }
    for (int64_t i = done + start; i < n; i += stride) y[i] = x[i] / d;
}

torch::Tensor fro_norm_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32,
                "fro_norm_cuda expects a contiguous float32 CUDA tensor");
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return y;
    const bool vec4 = (reinterpret_cast<uintptr_t>(x.data_ptr<float>()) % 16 == 0) &&
                      (reinterpret_cast<uintptr_t>(y.data_ptr<float>()) % 16 == 0);
    const int nblocks = 132 * 8;
    auto partial = torch::empty({nblocks}, x.options().dtype(torch::kFloat64));
    auto norm = torch::empty({1}, x.options());
    sumsq_partial_kernel<<<nblocks, THREADS>>>(x.data_ptr<float>(), partial.data_ptr<double>(), n, vec4);
    norm_final_kernel<<<1, THREADS>>>(partial.data_ptr<double>(), nblocks, norm.data_ptr<float>());
    const int threads = 256;
    const int64_t blocks = std::min<int64_t>((n / 4 + threads) / threads, 132 * 32);
    divide_kernel<<<(unsigned int)blocks, threads>>>(x.data_ptr<float>(), norm.data_ptr<float>(), y.data_ptr<float>(),
                                                     n, vec4);
    return y;
}
"""

fro_norm = load_inline(
    name="kb_l1_37_fro_norm",
    cpp_sources="torch::Tensor fro_norm_cuda(torch::Tensor x);",
    cuda_sources=fro_norm_source,
    functions=["fro_norm_cuda"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.fro_norm = fro_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fro_norm.fro_norm_cuda(x)
