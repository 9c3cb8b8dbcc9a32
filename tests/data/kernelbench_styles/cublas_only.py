# A square matmul through cuBLAS alone: no __global__ kernel of its own (KernelBench accepts it).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

matmul_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>

torch::Tensor matmul_cublas(torch::Tensor a, torch::Tensor b) {
    static cublasHandle_t handle = nullptr;
    if (handle == nullptr) {
        cublasCreate(&handle);
    }
    cublasSetStream(handle, at::cuda::getCurrentCUDAStream());
    const int n = a.size(0);
    auto out = torch::empty({n, n}, a.options());
    const float alpha = 1.0f, beta = 0.0f;
    // row-major out = a @ b is column-major out^T = b^T a^T
    cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, b.data_ptr<float>(), n,
                a.data_ptr<float>(), n, &beta, out.data_ptr<float>(), n);
    return out;
}
"""

matmul_ext = load_inline(
    name="matmul_cublas_ext",
    cpp_sources="torch::Tensor matmul_cublas(torch::Tensor a, torch::Tensor b);",
    cuda_sources=matmul_source,
    functions=["matmul_cublas"],
    extra_ldflags=["-lcublas"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return matmul_ext.matmul_cublas(A.contiguous(), B.contiguous())
