import math

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# minGPT causal self-attention: the projections and the two batched matmuls stay torch; the
# scale, the causal mask and the softmax are one in-place kernel over the (B, heads, T, T) scores.
causal_softmax_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <float.h>

// Scaled causal softmax over the last dimension of att (rows of length T, row r is query r % T),
// in place: one warp per row, entries j > i become 0 (exp(-inf)).
__global__ void causal_softmax_kernel(float* att, int64_t rows, int T, float scale) {
    int lane = threadIdx.x & 31;
    int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) return;
    int i = (int)(row % T);
    float* p = att + row * T;
    float m = -FLT_MAX;
    for (int j = lane; j <= i; j += 32) m = fmaxf(m, p[j] * scale);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
    float s = 0.0f;
    for (int j = lane; j <= i; j += 32) s += expf(p[j] * scale - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    float inv = 1.0f / s;
    for (int j = lane; j < T; j += 32) p[j] = j <= i ? expf(p[j] * scale - m) * inv : 0.0f;
}

torch::Tensor causal_softmax(torch::Tensor att, double scale) {
    TORCH_CHECK(att.is_contiguous() && att.size(-1) == att.size(-2), "causal_softmax expects contiguous (..., T, T)");
    int T = (int)att.size(-1);
    int64_t rows = att.numel() / T;
    const int warps_per_block = 8;
    int64_t blocks = (rows + warps_per_block - 1) / warps_per_block;
    causal_softmax_kernel<<<(unsigned int)blocks, warps_per_block * 32>>>(att.data_ptr<float>(), rows, T, (float)scale);
    return att;
}
"""

causal_softmax = load_inline(
    name="kb_l3_43_causal_softmax",
    cpp_sources="torch::Tensor causal_softmax(torch::Tensor att, double scale);",
    cuda_sources=causal_softmax_source,
    functions=["causal_softmax"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, n_embd, n_head, attn_pdrop, resid_pdrop, max_seqlen):
        super().__init__()
        assert n_embd % n_head == 0
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(attn_pdrop)
        self.resid_dropout = nn.Dropout(resid_pdrop)
        self.register_buffer("bias", torch.tril(torch.ones(max_seqlen, max_seqlen)).view(1, 1, max_seqlen, max_seqlen))
        self.n_head = n_head
        self.n_embd = n_embd
        self.kernels = causal_softmax

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-2, -1)).contiguous()
        att = self.kernels.causal_softmax(att, 1.0 / math.sqrt(k.size(-1)))
        if self.attn_dropout.p > 0:
            att = self.attn_dropout(att)
        y = torch.matmul(att, v)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        y = self.c_proj(y)
        if self.resid_dropout.p > 0:
            y = self.resid_dropout(y)
        return y
