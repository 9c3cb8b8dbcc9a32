import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
#include <torch/extension.h>
#include <cuda.h>
#include <cuda_runtime.h>

__global__ void scale_kernel(const float* __restrict__ a, float* __restrict__ c, float s, long long n) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (; idx < n; idx += stride) {
        c[idx] = a[idx] * s;
    }
}

torch::Tensor matrix_scalar_mul_cuda(torch::Tensor A, double s) {
    auto C = torch::empty_like(A);
    long long n = A.numel();
    int block_size = 512;
    int num_blocks = 132 * 16;  // a few waves of blocks, the loop covers the rest
    scale_kernel<<<num_blocks, block_size>>>(A.data_ptr<float>(), C.data_ptr<float>(), (float)s, n);
    return C;
}
"""

cpp_src = "torch::Tensor matrix_scalar_mul_cuda(torch::Tensor A, double s);"

matrix_scalar_mul = load_inline(
    name="kb_l1_5_matrix_scalar_mul",
    cpp_sources=cpp_src,
    cuda_sources=source,
    functions=["matrix_scalar_mul_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.op = matrix_scalar_mul

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return self.op.matrix_scalar_mul_cuda(A.contiguous(), s)
