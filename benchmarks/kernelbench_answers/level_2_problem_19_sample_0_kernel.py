import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# ConvTranspose2d in torch; exact (erf) GELU and GroupNorm fused: one block per (sample, group), whose
# channels are one contiguous run of the NCHW output. Pass 1 applies GELU in place and sums, pass 2 sums
# the squared deviations from the mean (two-pass variance, double accumulators), pass 3 normalises with
# the GroupNorm module's own weight, bias and eps.
gelu_group_norm_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float gelu_f(float v) {
    return v * 0.5f * (1.0f + erff(v * 0.70710678118654752440f));
}

// sum of v over the block, returned to every thread; red holds 33 doubles
__device__ double block_sum(double v, double* red) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        const int nwarps = (blockDim.x + 31) >> 5;
        v = lane < nwarps ? red[lane] : 0.0;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
        if (lane == 0) red[32] = v;
    }
    __syncthreads();
    double total = red[32];
    __syncthreads();  // red may be reused by the next call
    return total;
}

__global__ void gelu_group_norm_kernel(float* __restrict__ x, const float* __restrict__ gamma,
                                       const float* __restrict__ beta, int64_t channels_per_group, int64_t hw,
                                       int64_t num_groups, float eps) {
    __shared__ double red[33];
    const int64_t group = blockIdx.x;              // n * num_groups + g
    const int64_t g = group % num_groups;
    const int64_t group_size = channels_per_group * hw;
    float* p = x + group * group_size;             // 64-bit offset: the output holds 545M floats

    double s = 0.0;
    for (int64_t i = threadIdx.x; i < group_size; i += blockDim.x) {
        float v = gelu_f(p[i]);
        p[i] = v;
        s += (double)v;
    }
    const double mean = block_sum(s, red) / (double)group_size;

    double sq = 0.0;
    for (int64_t i = threadIdx.x; i < group_size; i += blockDim.x) {
        double d = (double)p[i] - mean;
        sq += d * d;
    }
    const double var = block_sum(sq, red) / (double)group_size;  // biased, as GroupNorm
    const float rstd = (float)(1.0 / sqrt(var + (double)eps));
    const float mean_f = (float)mean;

    for (int64_t cl = 0; cl < channels_per_group; ++cl) {
        const int64_t c = g * channels_per_group + cl;
        const float sc = rstd * gamma[c];
        const float sh = beta[c];
        float* q = p + cl * hw;
        for (int64_t j = threadIdx.x; j < hw; j += blockDim.x) q[j] = (q[j] - mean_f) * sc + sh;
    }
}

torch::Tensor gelu_group_norm_cuda(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, int64_t num_groups,
                                   double eps) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32 && x.dim() == 4,
                "gelu_group_norm_cuda: x must be a contiguous float32 NCHW CUDA tensor");
    const int64_t channels = x.size(1);
    TORCH_CHECK(num_groups > 0 && channels % num_groups == 0, "gelu_group_norm_cuda: channels must divide into groups");
    TORCH_CHECK(gamma.is_contiguous() && beta.is_contiguous() && gamma.numel() == channels && beta.numel() == channels,
                "gelu_group_norm_cuda: weight and bias must hold one value per channel");
    const int64_t hw = x.size(2) * x.size(3);
    const int64_t blocks = x.size(0) * num_groups;
    const int threads = 1024;
    // x is the conv output, a fresh intermediate of forward: GELU and the normalisation are written in place
    gelu_group_norm_kernel<<<(unsigned int)blocks, threads>>>(x.data_ptr<float>(), gamma.data_ptr<float>(),
                                                              beta.data_ptr<float>(), channels / num_groups, hw,
                                                              num_groups, (float)eps);
    return x;
}
"""

gelu_group_norm_cpp_source = (
    "torch::Tensor gelu_group_norm_cuda(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, "
    "int64_t num_groups, double eps);"
)

gelu_group_norm = load_inline(
    name="kb_l2_19_gelu_group_norm",
    cpp_sources=gelu_group_norm_cpp_source,
    cuda_sources=gelu_group_norm_source,
    functions=["gelu_group_norm_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, groups, num_groups):
        super(ModelNew, self).__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride)
        self.group_norm = nn.GroupNorm(num_groups=num_groups, num_channels=out_channels)
        self.gelu_group_norm = gelu_group_norm

    def forward(self, x):
        x = self.conv_transpose(x)
        return self.gelu_group_norm.gelu_group_norm_cuda(x, self.group_norm.weight, self.group_norm.bias,
                                                         self.group_norm.num_groups, self.group_norm.eps)
