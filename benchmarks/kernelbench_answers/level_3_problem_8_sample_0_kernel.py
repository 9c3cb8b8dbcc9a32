import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# ResNet basic block: convolutions and batch norms stay torch modules (so batch norm behaves as the
# reference's does in either mode); the ReLU after bn1 and the final residual add + ReLU are kernels.
block_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = fmaxf(x[i], 0.0f);
}

__global__ void add_relu_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ y, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = fmaxf(a[i] + b[i], 0.0f);
}

static int blocks_for(int64_t n) { return (int)std::min<int64_t>((n + 255) / 256, 132 * 32); }

torch::Tensor relu_cuda(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    relu_kernel<<<blocks_for(xc.numel()), 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel());
    return y;
}

torch::Tensor add_relu_cuda(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.sizes() == b.sizes(), "add_relu_cuda: shapes differ");
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    auto y = torch::empty_like(ac);
    add_relu_kernel<<<blocks_for(ac.numel()), 256>>>(ac.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(),
                                                    ac.numel());
    return y;
}
"""

block_cpp = """
torch::Tensor relu_cuda(torch::Tensor x);
torch::Tensor add_relu_cuda(torch::Tensor a, torch::Tensor b);
"""

block_ops = load_inline(
    name="kb_l3_8_resnet_block_ops",
    cpp_sources=block_cpp,
    cuda_sources=block_source,
    functions=["relu_cuda", "add_relu_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    expansion = 1

    def __init__(self, in_channels, out_channels, stride=1):
        super(ModelNew, self).__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(out_channels, out_channels, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.downsample = nn.Sequential(
            nn.Conv2d(in_channels, out_channels * self.expansion, kernel_size=1, stride=stride, bias=False),
            nn.BatchNorm2d(out_channels * self.expansion),
        )
        self.stride = stride
        self.ops = block_ops

    def forward(self, x):
        out = self.ops.relu_cuda(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = self.downsample(x)
        return self.ops.add_relu_cuda(out, identity)
