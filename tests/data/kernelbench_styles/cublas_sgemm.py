# A matmul through cuBLAS (linked with -lcublas), with a bias epilogue kernel of its own.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

gemm_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>

__global__ void add_bias_kernel(float* out, const float* bias, int rows, int cols) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < rows * cols) {
        out[idx] += bias[idx % cols];
    }
}

torch::Tensor linear_cublas(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    static cublasHandle_t handle = nullptr;
    if (handle == nullptr) {
        cublasCreate(&handle);
    }
    cublasSetStream(handle, at::cuda::getCurrentCUDAStream());
    const int m = x.size(0), k = x.size(1), n = weight.size(0);
    auto out = torch::empty({m, n}, x.options());
    const float alpha = 1.0f, beta = 0.0f;
    // row-major out = x @ weight^T is column-major out^T = weight * x^T
    cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, weight.data_ptr<float>(), k,
                x.data_ptr<float>(), k, &beta, out.data_ptr<float>(), n);
    const int threads = 256;
    add_bias_kernel<<<(m * n + threads - 1) / threads, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        out.data_ptr<float>(), bias.data_ptr<float>(), m, n);
    return out;
}
"""

gemm_cpp = "torch::Tensor linear_cublas(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

linear_ext = load_inline(
    name="linear_cublas_ext",
    cpp_sources=gemm_cpp,
    cuda_sources=gemm_source,
    functions=["linear_cublas"],
    extra_cuda_cflags=["-O3", "--restrict"],
    extra_ldflags=["-lcublas"],
    extra_include_paths=["/usr/local/cuda/include"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features))
        self.bias = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        return linear_ext.linear_cublas(x.contiguous(), self.weight, self.bias)
