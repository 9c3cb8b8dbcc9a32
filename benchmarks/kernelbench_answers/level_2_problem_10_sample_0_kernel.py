import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# ConvTranspose2d in torch; max-pool (k, stride s, no padding), hardtanh, mean over H and W and tanh in one
# kernel: one block per (n, c) plane, each thread pools windows and sums the clamped maxima, a block reduction
# gives the mean. Only the (N, C, 1, 1) result is written.
pool_mean_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <math.h>

__global__ void pool_hardtanh_mean_tanh_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t h,
                                               int64_t w, int64_t ph, int64_t pw, int k, int s, float lo, float hi) {
    __shared__ double red[32];
    const float* plane = x + (int64_t)blockIdx.x * h * w;  // 64-bit offset: the conv output holds 537M floats
    const int64_t pooled = ph * pw;
    double acc = 0.0;
    for (int64_t t = threadIdx.x; t < pooled; t += blockDim.x) {
        const int64_t oh = t / pw, ow = t % pw;
        const float* win = plane + oh * s * w + ow * s;
        float m = -INFINITY;
        for (int i = 0; i < k; ++i)
            for (int j = 0; j < k; ++j) {
                float v = win[(int64_t)i * w + j];
                if (v > m || isnan(v)) m = v;  // max-pool propagates NaN
            }
        m = m < lo ? lo : (m > hi ? hi : m);  // hardtanh is a clamp
        acc += (double)m;
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffff, acc, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) red[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        const int nwarps = (blockDim.x + 31) >> 5;
        acc = lane < nwarps ? red[lane] : 0.0;
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffff, acc, o);
        if (lane == 0) out[blockIdx.x] = tanhf((float)(acc / (double)pooled));
    }
}

torch::Tensor pool_hardtanh_mean_tanh_cuda(torch::Tensor x, int64_t k, int64_t s, double lo, double hi) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32 && x.dim() == 4,
                "pool_hardtanh_mean_tanh_cuda: x must be a contiguous float32 NCHW CUDA tensor");
    const int64_t h = x.size(2), w = x.size(3);
    TORCH_CHECK(k > 0 && s > 0 && h >= k && w >= k, "pool_hardtanh_mean_tanh_cuda: bad pooling window");
    const int64_t ph = (h - k) / s + 1, pw = (w - k) / s + 1;  // floor mode, no padding (nn.MaxPool2d's defaults)
    auto out = torch::empty({x.size(0), x.size(1), 1, 1}, x.options());
    const int64_t planes = x.size(0) * x.size(1);
    const int threads = 256;
    pool_hardtanh_mean_tanh_kernel<<<(unsigned int)planes, threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), h, w,
                                                                      ph, pw, (int)k, (int)s, (float)lo, (float)hi);
    return out;
}
"""

pool_mean_cpp_source = (
    "torch::Tensor pool_hardtanh_mean_tanh_cuda(torch::Tensor x, int64_t k, int64_t s, double lo, double hi);"
)

pool_mean = load_inline(
    name="kb_l2_10_pool_hardtanh_mean_tanh",
    cpp_sources=pool_mean_cpp_source,
    cuda_sources=pool_mean_source,
    functions=["pool_hardtanh_mean_tanh_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, maxpool_kernel_size, maxpool_stride, hardtanh_min, hardtanh_max):
        super(ModelNew, self).__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.maxpool = nn.MaxPool2d(kernel_size=maxpool_kernel_size, stride=maxpool_stride)
        self.hardtanh = nn.Hardtanh(min_val=hardtanh_min, max_val=hardtanh_max)
        self.pool_mean = pool_mean

    def forward(self, x):
        x = self.conv_transpose(x)
        return self.pool_mean.pool_hardtanh_mean_tanh_cuda(x, self.maxpool.kernel_size, self.maxpool.stride,
                                                           self.hardtanh.min_val, self.hardtanh.max_val)
