import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# x @ W^T by cuBLAS SGEMM on the nn.Linear's own weight (full fp32), then bias add and ReLU in one
# kernel. Row-major y (B, O) is column-major y^T = W x^T: op(W) = T with lda = in_features.
gemm_bias_relu_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <c10/cuda/CUDAStream.h>

__global__ void bias_relu_kernel(float* __restrict__ y, const float* __restrict__ bias, int64_t n, int cols) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = y[i] + bias[i % cols];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

static cublasHandle_t cublas_handle() {
    static cublasHandle_t handle = nullptr;
    if (handle == nullptr) TORCH_CHECK(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
    return handle;
}

torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(), "contiguous inputs expected");
    const int B = (int)x.size(0), I = (int)x.size(1), O = (int)weight.size(0);
    TORCH_CHECK(weight.size(1) == I && bias.numel() == O, "shape mismatch");
    auto y = torch::empty({B, O}, x.options());
    cublasHandle_t handle = cublas_handle();
    cublasSetStream(handle, c10::cuda::getCurrentCUDAStream().stream());
    const float alpha = 1.0f, beta = 0.0f;
    TORCH_CHECK(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, O, B, I, &alpha, weight.data_ptr<float>(), I,
                            x.data_ptr<float>(), I, &beta, y.data_ptr<float>(), O) == CUBLAS_STATUS_SUCCESS,
                "cublasSgemm failed");
    int64_t n = y.numel();
    int blocks = (int)std::min<int64_t>((n + 255) / 256, 132 * 32);
    bias_relu_kernel<<<blocks, 256, 0, c10::cuda::getCurrentCUDAStream().stream()>>>(y.data_ptr<float>(),
                                                                                     bias.data_ptr<float>(), n, O);
    return y;
}
"""

gemm_bias_relu = load_inline(
    name="kb_l2_76_gemm_bias_relu",
    cpp_sources="torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);",
    cuda_sources=gemm_bias_relu_source,
    functions=["gemm_bias_relu"],
    extra_ldflags=["-lcublas"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.gemm_bias_relu = gemm_bias_relu

    def forward(self, x):
        return self.gemm_bias_relu.gemm_bias_relu(x.contiguous(), self.gemm.weight, self.bias)
