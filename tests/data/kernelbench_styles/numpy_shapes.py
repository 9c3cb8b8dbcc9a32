# Shapes worked out with numpy and itertools in __init__ and forward (host-side arithmetic only).
import itertools
from collections import namedtuple

import numpy as np
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
#include <torch/extension.h>
__global__ void square_kernel(const float* x, float* y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * x[i];
}
torch::Tensor square(torch::Tensor x, int64_t n, int64_t block) {
    auto y = torch::empty_like(x);
    square_kernel<<<(n + block - 1) / block, block>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

square_ext = load_inline(name="square_ext", cpp_sources="torch::Tensor square(torch::Tensor x, int64_t n, int64_t block);",
                         cuda_sources=source, functions=["square"])
Launch = namedtuple("Launch", ["block"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.launch = Launch(block=max(b for b, w in itertools.product([128, 256], [1]) if b * w <= 256))

    def forward(self, x):
        n = int(np.prod(x.shape))
        return square_ext.square(x, n, self.launch.block)
