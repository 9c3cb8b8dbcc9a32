import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# RMS norm over the feature dimension (dim 1) of (B, C, H, W): one thread per (b, h, w) walks the
# C features (stride H*W, so neighbouring threads read neighbouring addresses), then rescales them.
rms_norm_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void rms_norm_kernel(const float* __restrict__ x, float* __restrict__ y,
                                int64_t batch, int64_t features, int64_t spatial, float eps) {
    int64_t total = batch * spatial;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (int64_t)blockDim.x * gridDim.x) {
        int64_t b = t / spatial;
        int64_t s = t - b * spatial;
        const float* xp = x + b * features * spatial + s;
        float* yp = y + b * features * spatial + s;
        float sum = 0.0f;
        for (int64_t c = 0; c < features; ++c) {
            float v = xp[c * spatial];
            sum += v * v;
        }
        float inv = rsqrtf(sum / (float)features + eps);
        for (int64_t c = 0; c < features; ++c) {
            yp[c * spatial] = xp[c * spatial] * inv;
        }
    }
}

torch::Tensor rms_norm_cuda(torch::Tensor x, double eps) {
    TORCH_CHECK(x.is_contiguous() && x.dim() >= 2, "rms_norm_cuda expects a contiguous (B, C, ...) tensor");
    auto y = torch::empty_like(x);
    int64_t batch = x.size(0), features = x.size(1);
    int64_t spatial = x.numel() / (batch * features);
    int threads = 256;
    int64_t blocks = std::min<int64_t>((batch * spatial + threads - 1) / threads, 132 * 64);
    rms_norm_kernel<<<(int)blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), batch, features, spatial,
                                              (float)eps);
    return y;
}
"""

rms_norm = load_inline(
    name="kb_l1_36_rms_norm",
    cpp_sources="torch::Tensor rms_norm_cuda(torch::Tensor x, double eps);",
    cuda_sources=rms_norm_source,
    functions=["rms_norm_cuda"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super(ModelNew, self).__init__()
        self.num_features = num_features
        self.eps = eps
        self.rms_norm = rms_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rms_norm.rms_norm_cuda(x, self.eps)
