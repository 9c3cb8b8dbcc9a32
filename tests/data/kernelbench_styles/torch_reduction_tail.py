# A custom GELU kernel; the mean over the channels after it is left to torch (the part not rewritten).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

gelu_source = """
#include <torch/extension.h>
__global__ void gelu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678f));
    }
}
torch::Tensor gelu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    gelu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
torch::Tensor gelu_mean_cuda(torch::Tensor x) {
    return gelu_cuda(x).mean({1}, true);
}
"""

gelu = load_inline(name="gelu_ext", cpp_sources="torch::Tensor gelu_cuda(torch::Tensor x);\ntorch::Tensor gelu_mean_cuda(torch::Tensor x);",
                   cuda_sources=gelu_source, functions=["gelu_cuda", "gelu_mean_cuda"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm2d(16)

    def forward(self, x):
        y = gelu.gelu_cuda(x)
        y = torch.mean(y, dim=1, keepdim=True)
        return y.sum(dim=0, keepdim=True) + gelu.gelu_mean_cuda(x)[:1]
