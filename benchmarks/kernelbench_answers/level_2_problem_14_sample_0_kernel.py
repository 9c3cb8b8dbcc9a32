import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# sum_j (x W^T)[b, j] / 2 * s == (x . colsum(W))[b] * s / 2: no GEMM at all. One kernel sums the
# weight's rows (in double), a second takes one dot product per batch row; both in one extension,
# returned together as a std::vector (the output and the column sums).
fused_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <vector>

__global__ void weight_colsum_kernel(const float* __restrict__ w, double* __restrict__ colsum, int hidden, int input) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= input) return;
    double acc = 0.0;
    for (int h = 0; h < hidden; ++h) acc += (double)w[(int64_t)h * input + k];
    colsum[k] = acc;
}

__global__ void row_dot_kernel(const float* __restrict__ x, const double* __restrict__ colsum,
                               float* __restrict__ out, int input, double factor) {
    __shared__ double partial[256];
    const float* xr = x + (int64_t)blockIdx.x * input;
    double acc = 0.0;
    for (int k = threadIdx.x; k < input; k += blockDim.x) acc += (double)xr[k] * colsum[k];
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = (float)(partial[0] * factor);
}

std::vector<torch::Tensor> gemm_divide_sum_scale(torch::Tensor x, torch::Tensor weight, double scaling_factor) {
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous(), "contiguous inputs expected");
    int batch = (int)x.size(0), input = (int)x.size(1), hidden = (int)weight.size(0);
    TORCH_CHECK(weight.size(1) == input, "weight must be (hidden, input)");
    auto colsum = torch::empty({input}, x.options().dtype(torch::kFloat64));
    auto out = torch::empty({batch, 1}, x.options());
    weight_colsum_kernel<<<(input + 255) / 256, 256>>>(weight.data_ptr<float>(), colsum.data_ptr<double>(), hidden, input);
    row_dot_kernel<<<batch, 256>>>(x.data_ptr<float>(), colsum.data_ptr<double>(), out.data_ptr<float>(), input,
                                   scaling_factor / 2.0);
    return {out, colsum};
}
"""

fused_cpp = "std::vector<torch::Tensor> gemm_divide_sum_scale(torch::Tensor x, torch::Tensor weight, double scaling_factor);"

fused = load_inline(
    name="kb_l2_14_gemm_divide_sum_scale",
    cpp_sources=fused_cpp,
    cuda_sources=fused_source,
    functions=["gemm_divide_sum_scale"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super(ModelNew, self).__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))
        self.scaling_factor = scaling_factor
        self.fused = fused

    def forward(self, x):
        out, _ = self.fused.gemm_divide_sum_scale(x, self.weight, self.scaling_factor)
        return out
