# A custom Linear that copies nn.Linear's initialisation, private fan-in helper included.
import math

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

matmul_source = """
#include <torch/extension.h>
#define TILE 16

__global__ void linear_kernel(const float* x, const float* w, const float* b, float* y, int m, int n, int k) {
    __shared__ float xs[TILE][TILE];
    __shared__ float ws[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < (k + TILE - 1) / TILE; ++t) {
        int kx = t * TILE + threadIdx.x, kw = t * TILE + threadIdx.y;
        xs[threadIdx.y][threadIdx.x] = (row < m && kx < k) ? x[row * k + kx] : 0.0f;
        ws[threadIdx.y][threadIdx.x] = (col < n && kw < k) ? w[col * k + kw] : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE; ++i) acc += xs[threadIdx.y][i] * ws[i][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n) y[row * n + col] = acc + b[col];
}

torch::Tensor linear_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    int m = x.size(0), k = x.size(1), n = w.size(0);
    auto y = torch::empty({m, n}, x.options());
    dim3 block(TILE, TILE), grid((n + TILE - 1) / TILE, (m + TILE - 1) / TILE);
    linear_kernel<<<grid, block>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(),
                                   m, n, k);
    return y;
}
"""

linear = load_inline(name="linear_tiled", cpp_sources="torch::Tensor linear_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b);",
                     cuda_sources=matmul_source, functions=["linear_forward"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        fan_in, _ = nn.init._calculate_fan_in_and_fan_out(self.weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        nn.init.uniform_(self.bias, -bound, bound)
        self.gain = torch.nn.init.calculate_gain("relu")

    def forward(self, x):
        return linear.linear_forward(x, self.weight, self.bias)
