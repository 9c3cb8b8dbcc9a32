import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

# Deep narrow MLP (16 hidden layers of 1024). The layers stay the reference's nn.Sequential
# (same parameters, same initialisation); each hidden Linear runs as a bias-free GEMM followed by
# one kernel that adds the bias and applies ReLU.
bias_relu_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                 float* __restrict__ y, int64_t rows, int64_t cols) {
    int64_t n = rows * cols;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = x[i] + bias[i % cols];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias) {
    TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && bias.numel() == x.size(1), "bias_relu: bad shapes");
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    int blocks = (int)std::min<int64_t>((n + 255) / 256, 132 * 32);
    bias_relu_kernel<<<blocks, 256>>>(x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(),
                                      x.size(0), x.size(1));
    return y;
}
"""

bias_relu = load_inline(
    name="kb_l3_3_bias_relu",
    cpp_sources="torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias);",
    cuda_sources=bias_relu_source,
    functions=["bias_relu"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_layer_sizes, output_size):
        super(ModelNew, self).__init__()
        layers = []
        current_input_size = input_size
        for size in hidden_layer_sizes:
            layers.append(nn.Linear(current_input_size, size))
            layers.append(nn.ReLU())
            current_input_size = size
        layers.append(nn.Linear(current_input_size, output_size))
        self.network = nn.Sequential(*layers)
        self.num_hidden = len(hidden_layer_sizes)
        self.bias_relu = bias_relu

    def forward(self, x):
        for k in range(self.num_hidden):
            linear = self.network[2 * k]
            x = self.bias_relu.bias_relu(F.linear(x, linear.weight), linear.bias)
        return self.network[2 * self.num_hidden](x)
