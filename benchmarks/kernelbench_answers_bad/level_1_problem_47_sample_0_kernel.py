import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# DELIBERATELY WRONG: reads the (B, R, K) input four floats at a time along K, as if K were a
# multiple of 4. K is 4095 here, so the float4 loads are misaligned from the second row on (a
# CUDA "misaligned address" error) and the last three columns are never summed.
sum_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void sum_dim1_vec4_kernel(const float* __restrict__ x, float* __restrict__ out, int R, int K, int B) {
    int k4 = blockIdx.x * blockDim.x + threadIdx.x;
    int b = blockIdx.y;
    if (k4 * 4 + 3 >= K || b >= B) return;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int r = 0; r < R; ++r) {
        float4 v = *reinterpret_cast<const float4*>(x + ((int64_t)b * R + r) * K + k4 * 4);
        acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
    }
    float* o = out + (int64_t)b * K + k4 * 4;
    o[0] = acc.x; o[1] = acc.y; o[2] = acc.z; o[3] = acc.w;
}

torch::Tensor sum_dim1(torch::Tensor x) {
    int B = (int)x.size(0), R = (int)x.size(1), K = (int)x.size(2);
    auto out = torch::zeros({B, 1, K}, x.options());
    dim3 grid((K / 4 + 255) / 256, B);
    sum_dim1_vec4_kernel<<<grid, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), R, K, B);
    return out;
}
"""

sum_ext = load_inline(
    name="kb_bad_l1_47_sum_vec4",
    cpp_sources="torch::Tensor sum_dim1(torch::Tensor x);",
    cuda_sources=sum_source,
    functions=["sum_dim1"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim
        self.sum_ext = sum_ext

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.sum_ext.sum_dim1(x)
