"""Matrix products: gemm (three layouts, bias, epilogue), batched_gemm (many small matrices of fixed
shape) and outer_product (out[i, j] = epi(g(x_i, y_j)) with an optional accumulated matrix).

gemm: naive (a thread per output, threads along columns), row_threads (threads along rows:
uncoalesced), tiled16 (16 x 16 shared tiles), tiled32_coarse (32 x 32 tiles, 4 rows per thread)
and register_64x64 (64 x 64 block tile, 4 x 4 outputs per thread in registers).
batched_gemm: naive, thread_per_matrix (weak), block_shared (a block per matrix, both operands in
shared memory), unrolled (the constant k loop unrolled), shared_a (only A staged).
outer_product: naive, row_threads (uncoalesced), block_per_row, vector_loads, coarse_rows.
"""
from __future__ import annotations

from pipeline.tasks.families._kit import (BINARY, DOUBLE, FLOAT, SQRT_NEAR_ZERO_TOL, UNARY, UNBOUNDED_SAFE, Impl,
                                         TorchModule, arg, arg_names, bin_t, c2cuda_task, configs, dedent, signature,
                                         tfill, torch_task)
from pipeline.core.records import Tolerance

TOL = Tolerance(rtol=1e-3, atol=1e-4)
DTOL = Tolerance(rtol=1e-9, atol=1e-10)


def _outer_tol(dt, epi: str) -> Tolerance:
    """Outer products are one rounding deep: tight, except a square root of a value that may cancel
    to near 0 (sqrt's slope is unbounded there, and nvcc fuses g + acc into one rounding, gcc not)."""
    if dt.name == "double":
        return DTOL
    return SQRT_NEAR_ZERO_TOL if "sqrt" in epi else Tolerance(rtol=1e-5, atol=1e-6)

_G_HEAD = """
#define A_AT(i, k) A[${A_IDX}]
#define B_AT(k, j) B[${B_IDX}]
__device__ __forceinline__ ${T} epi(${T} acc, int j, const ${T}* bias) {
    ${T} x = ${ALPHA} * acc${BIAS_TERM};
    return ${EPI};
}
"""
_G_NAIVE = """
// One thread per output C[i][j]; threadIdx.x runs along j (coalesced B and C).
__global__ void gemm_naive(${SIG}) {
    int j = blockIdx.x * 16 + threadIdx.x, i = blockIdx.y * 16 + threadIdx.y;
    if (i >= M || j >= N) return;
    ${T} acc = 0;
    for (int k = 0; k < K; ++k) acc += A_AT(i, k) * B_AT(k, j);
    C[(size_t)i * N + j] = epi(acc, j, ${BIAS_ARG});
}
static void run(${SIG}, cudaStream_t stream) {
    gemm_naive<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, stream>>>(${NAMES});
}
"""
_G_ROWS = """
// One thread per output with threadIdx.x running along i: B and C accesses of a warp are strided.
__global__ void gemm_rows(${SIG}) {
    int i = blockIdx.x * 16 + threadIdx.x, j = blockIdx.y * 16 + threadIdx.y;
    if (i >= M || j >= N) return;
    ${T} acc = 0;
    for (int k = 0; k < K; ++k) acc += A_AT(i, k) * B_AT(k, j);
    C[(size_t)i * N + j] = epi(acc, j, ${BIAS_ARG});
}
static void run(${SIG}, cudaStream_t stream) {
    gemm_rows<<<dim3((M + 15) / 16, (N + 15) / 16), dim3(16, 16), 0, stream>>>(${NAMES});
}
"""
_G_TILED16 = """
// 16 x 16 tiles of A and B staged in shared memory; each thread one output.
__global__ void __launch_bounds__(256) gemm_tiled16(${SIG}) {
    __shared__ ${T} As[16][17], Bs[16][17];
    int tx = threadIdx.x, ty = threadIdx.y;
    int j = blockIdx.x * 16 + tx, i = blockIdx.y * 16 + ty;
    ${T} acc = 0;
    for (int k0 = 0; k0 < K; k0 += 16) {
        As[ty][tx] = (i < M && k0 + tx < K) ? A_AT(i, k0 + tx) : (${T})0;
        Bs[ty][tx] = (k0 + ty < K && j < N) ? B_AT(k0 + ty, j) : (${T})0;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 16; ++kk) acc += As[ty][kk] * Bs[kk][tx];
        __syncthreads();
    }
    if (i < M && j < N) C[(size_t)i * N + j] = epi(acc, j, ${BIAS_ARG});
}
static void run(${SIG}, cudaStream_t stream) {
    gemm_tiled16<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, stream>>>(${NAMES});
}
"""
_G_TILED32 = """
// 32 x 32 tiles in shared memory, 32 x 8 threads: each thread computes 4 rows of its column.
__global__ void __launch_bounds__(256) gemm_tiled32(${SIG}) {
    __shared__ ${T} As[32][33], Bs[32][33];
    int tx = threadIdx.x, ty = threadIdx.y;
    int i0 = blockIdx.y * 32, j = blockIdx.x * 32 + tx;
    ${T} acc[4] = {0, 0, 0, 0};
    for (int k0 = 0; k0 < K; k0 += 32) {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            int r = ty + 8 * q;
            As[r][tx] = (i0 + r < M && k0 + tx < K) ? A_AT(i0 + r, k0 + tx) : (${T})0;
            Bs[r][tx] = (k0 + r < K && j < N) ? B_AT(k0 + r, j) : (${T})0;
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < 32; ++kk) {
            ${T} b = Bs[kk][tx];
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[q] += As[ty + 8 * q][kk] * b;
        }
        __syncthreads();
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        int i = i0 + ty + 8 * q;
        if (i < M && j < N) C[(size_t)i * N + j] = epi(acc[q], j, ${BIAS_ARG});
    }
}
static void run(${SIG}, cudaStream_t stream) {
    gemm_tiled32<<<dim3((N + 31) / 32, (M + 31) / 32), dim3(32, 8), 0, stream>>>(${NAMES});
}
"""
_G_REG = """
// 64 x 64 block tile, 16-deep k steps in shared memory, 16 x 16 threads with a 4 x 4 register
// tile each (rows ty + 16q, columns tx + 16p: conflict-free reads, coalesced writes).
__global__ void __launch_bounds__(256) gemm_reg(${SIG}) {
    __shared__ ${T} As[16][64], Bs[16][64];
    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    int bm = blockIdx.y * 64, bn = blockIdx.x * 64;
    ${T} acc[4][4];
#pragma unroll
    for (int q = 0; q < 4; ++q)
#pragma unroll
        for (int p = 0; p < 4; ++p) acc[q][p] = 0;
    for (int k0 = 0; k0 < K; k0 += 16) {
        for (int idx = tid; idx < 1024; idx += 256) {
            int r = idx / 16, kk = idx % 16;
            As[kk][r] = (bm + r < M && k0 + kk < K) ? A_AT(bm + r, k0 + kk) : (${T})0;
            int kb = idx / 64, c = idx % 64;
            Bs[kb][c] = (k0 + kb < K && bn + c < N) ? B_AT(k0 + kb, bn + c) : (${T})0;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 16; ++kk) {
            ${T} a[4], b[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) a[q] = As[kk][ty + 16 * q];
#pragma unroll
            for (int p = 0; p < 4; ++p) b[p] = Bs[kk][tx + 16 * p];
#pragma unroll
            for (int q = 0; q < 4; ++q)
#pragma unroll
                for (int p = 0; p < 4; ++p) acc[q][p] += a[q] * b[p];
        }
        __syncthreads();
    }
#pragma unroll
    for (int q = 0; q < 4; ++q)
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            int i = bm + ty + 16 * q, j = bn + tx + 16 * p;
            if (i < M && j < N) C[(size_t)i * N + j] = epi(acc[q][p], j, ${BIAS_ARG});
        }
}
static void run(${SIG}, cudaStream_t stream) {
    gemm_reg<<<dim3((N + 63) / 64, (M + 63) / 64), dim3(16, 16), 0, stream>>>(${NAMES});
}
"""
_A_IDX = {"N": "(size_t)(i) * K + (k)", "T": "(size_t)(k) * M + (i)"}
_B_IDX = {"N": "(size_t)(k) * N + (j)", "T": "(size_t)(j) * K + (k)"}


def _gemm_impls(dt, layout, epi, alpha, bias, args):
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), A_IDX=_A_IDX[layout[0]], B_IDX=_B_IDX[layout[1]],
               ALPHA=dt.lit(alpha), BIAS_TERM=" + bias[j]" if bias else "", EPI=tfill(UNARY[epi].c, dt, x="x"),
               BIAS_ARG="bias" if bias else "nullptr")
    head = tfill(dedent(_G_HEAD), dt, **ctx)

    def code(t):
        return head + tfill(dedent(t), dt, **ctx)
    return [Impl("naive", "naive", code(_G_NAIVE)), Impl("row_threads", "uncoalesced", code(_G_ROWS)),
            Impl("tiled16", "tiled_shared", code(_G_TILED16)), Impl("tiled32_coarse", "thread_coarsening", code(_G_TILED32)),
            Impl("register_64x64", "register_tiling", code(_G_REG))]


def gemm_tasks(rng) -> list:
    out = []
    epis = ["identity", "relu", "gelu_tanh", "sigmoid", "tanh", "silu", "leaky_relu", "abs", "softplus", "hardtanh",
            "elu", "mish", "softsign", "gelu", "relu6", "hardswish", "selu", "square", "logsigmoid", "atan"]
    layouts = ["NN", "NT", "TN"]
    alphas = [1.0, 0.5, 2.0, 0.125]
    for k, epi in enumerate(epis):
        for j, layout in enumerate(layouts):
            for bias in (False, True):
                alpha = alphas[(k + j + bias) % 4]
                dts = (FLOAT, DOUBLE) if (k + j + bias) % 3 == 0 else (FLOAT,)
                for dt in dts:
                    out.append(_gemm_c(dt, layout, epi, alpha, bias))
                if (k + 2 * j + bias) % 4 == 0:
                    out.append(_gemm_t(layout, epi, alpha, bias))
    return out


def _gemm_args(dt, bias, sized=True):
    a = [arg("M", "int", "scalar"), arg("N", "int", "scalar"), arg("K", "int", "scalar"),
         arg("A", f"const {dt.name}*", "in", "M*K" if sized else "1"), arg("B", f"const {dt.name}*", "in", "K*N" if sized else "1")]
    if bias:
        a.append(arg("bias", f"const {dt.name}*", "in", "N" if sized else "1"))
    return a + [arg("C", f"{dt.name}*", "out", "M*N" if sized else "1")]


def _gemm_c(dt, layout, epi, alpha, bias):
    variant = f"{layout.lower()}_{epi}{'_bias' if bias else ''}_a{str(alpha).replace('.', 'p')}_{dt.name}"
    fn = f"gemm_{variant}"
    args = _gemm_args(dt, bias)
    a_idx = _A_IDX[layout[0]].replace("(i)", "i").replace("(k)", "k")
    b_idx = _B_IDX[layout[1]].replace("(k)", "k").replace("(j)", "j")
    ref = (f"#include <math.h>\n#include <stddef.h>\n\nvoid {fn}({signature(args)}) {{\n"
           f"    for (int i = 0; i < M; ++i)\n        for (int j = 0; j < N; ++j) {{\n            double acc = 0.0;\n"
           f"            for (int k = 0; k < K; ++k) acc += (double)A[{a_idx}] * (double)B[{b_idx}];\n"
           f"            {dt.name} x = {dt.lit(alpha)} * ({dt.name})acc{' + bias[j]' if bias else ''};\n"
           f"            C[(size_t)i * N + j] = {tfill(UNARY[epi].c, dt, x='x')};\n        }}\n}}\n")
    if dt is FLOAT:
        cfgs = configs([{"M": 33, "N": 65, "K": 17}, {"M": 100, "N": 37, "K": 129}, {"M": 1, "N": 300, "K": 257}],
                       [{"M": 1024, "N": 1024, "K": 1024}, {"M": 1000, "N": 999, "K": 777}])
    else:
        cfgs = configs([{"M": 33, "N": 65, "K": 17}, {"M": 100, "N": 37, "K": 129}, {"M": 1, "N": 300, "K": 257}],
                       [{"M": 768, "N": 768, "K": 768}, {"M": 700, "N": 701, "K": 513}])
    lay = {"NN": "A[M,K] B[K,N]", "NT": "A[M,K] B[N,K] (B transposed)", "TN": "A[K,M] (A transposed) B[K,N]"}[layout]
    desc = f"C = {epi}({alpha} * op(A) op(B){' + bias' if bias else ''}) with {lay}, {dt.name}"
    nbytes = f"{dt.size}*(M*K + K*N + M*N{' + N' if bias else ''})"
    return c2cuda_task("gemm", variant, fn, ref, args, cfgs, "2*M*N*K", nbytes,
                       _gemm_impls(dt, layout, epi, alpha, bias, args), TOL if dt is FLOAT else DTOL, desc)


def _gemm_t(layout, epi, alpha, bias):
    a_shape = "M, K" if layout[0] == "N" else "K, M"
    b_shape = "K, N" if layout[1] == "N" else "N, K"
    a_expr = "a" if layout[0] == "N" else "a.t()"
    b_expr = "b" if layout[1] == "N" else "b.t()"
    body = f"{alpha} * torch.matmul({a_expr}, {b_expr})" + (" + self.bias" if bias else "")
    module = TorchModule([("a", f"torch.randn({a_shape})"), ("b", f"torch.randn({b_shape})")],
                         [f"x = {body}", f"return {UNARY[epi].texpr('x')}"], {"M": 512, "N": 512, "K": 512},
                         init=["self.bias = nn.Parameter(torch.randn(n) * 0.1)"] if bias else [],
                         init_args=[("n", "N")] if bias else [])
    cfgs = configs([{"M": 33, "N": 65, "K": 17}, {"M": 100, "N": 37, "K": 129}, {"M": 1, "N": 300, "K": 257}],
                   [{"M": 1024, "N": 1024, "K": 1024}, {"M": 1000, "N": 999, "K": 777}])
    m_dim, k_dim = ("0", "1") if layout[0] == "N" else ("1", "0")
    n_dim = "1" if layout[1] == "N" else "0"
    launch = (f"    int M = (int)dim_of(sizes, 0, {m_dim}), K = (int)dim_of(sizes, 0, {k_dim}), "
              f"N = (int)dim_of(sizes, 1, {n_dim});\n"
              f"    run(M, N, K, (const float*)inputs[0], (const float*)inputs[1], "
              + ("(const float*)inputs[2], " if bias else "") + "(float*)outputs[0], stream);")
    variant = f"{layout.lower()}_{epi}{'_bias' if bias else ''}_a{str(alpha).replace('.', 'p')}"
    return torch_task("gemm", variant, module.source(), cfgs, "2*M*N*K", f"4*(M*K + K*N + M*N{' + N' if bias else ''})",
                      _gemm_impls(FLOAT, layout, epi, alpha, bias, _gemm_args(FLOAT, bias, False)), launch, TOL,
                      f"{epi}({alpha} * {a_expr} @ {b_expr}{' + bias' if bias else ''})")


# --- batched small GEMMs ---------------------------------------------------------------------------------
_BG_HEAD = """
#define BM ${BM}
#define BN ${BN}
#define BK ${BK}
__device__ __forceinline__ ${T} epi(${T} x) { return ${EPI}; }
"""
_BG_NAIVE = """
// One thread per output element of the whole batch.
__global__ void bgemm_naive(${SIG}) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)batch * BM * BN) return;
    int b = (int)(t / (BM * BN)), i = (int)(t / BN % BM), j = (int)(t % BN);
    const ${T}* a = A + (size_t)b * BM * BK;
    const ${T}* bb = B + (size_t)b * BK * BN;
    ${T} acc = 0;
    for (int k = 0; k < BK; ++k) acc += a[i * BK + k] * bb[k * BN + j];
    C[t] = epi(acc);
}
static void run(${SIG}, cudaStream_t stream) {
    long long total = (long long)batch * BM * BN;
    bgemm_naive<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(${NAMES});
}
"""
_BG_MATRIX = """
// One thread per matrix: the whole BM x BN product sequentially (little parallelism, strided loads).
__global__ void bgemm_matrix(${SIG}) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= batch) return;
    const ${T}* a = A + (size_t)b * BM * BK;
    const ${T}* bb = B + (size_t)b * BK * BN;
    ${T}* c = C + (size_t)b * BM * BN;
    for (int i = 0; i < BM; ++i)
        for (int j = 0; j < BN; ++j) {
            ${T} acc = 0;
            for (int k = 0; k < BK; ++k) acc += a[i * BK + k] * bb[k * BN + j];
            c[i * BN + j] = epi(acc);
        }
}
static void run(${SIG}, cudaStream_t stream) {
    bgemm_matrix<<<(batch + 127) / 128, 128, 0, stream>>>(${NAMES});
}
"""
_BG_SHARED = """
// ${MPB} matrices per block of 256 threads: ${STAGE_NOTE} staged in shared memory with coalesced
// loads, then each thread computes outputs of its matrix.
#define MPB ${MPB}
__global__ void __launch_bounds__(256) bgemm_shared(${SIG}) {
    __shared__ ${T} sa[MPB * BM * BK];
    ${SB_DECL}
    int b0 = blockIdx.x * MPB;
    int nb = min(MPB, batch - b0);
    for (int e = threadIdx.x; e < nb * BM * BK; e += 256) sa[e] = A[(size_t)b0 * BM * BK + e];
    ${SB_LOAD}
    __syncthreads();
    for (int o = threadIdx.x; o < nb * BM * BN; o += 256) {
        int m = o / (BM * BN), i = o / BN % BM, j = o % BN;
        const ${T}* a = sa + m * BM * BK;
        const ${T}* bb = ${B_SRC};
        ${T} acc = 0;
#pragma unroll
        for (int k = 0; k < BK; ++k) acc += a[i * BK + k] * bb[k * BN + j];
        C[(size_t)b0 * BM * BN + o] = epi(acc);
    }
}
static void run(${SIG}, cudaStream_t stream) {
    bgemm_shared<<<(batch + MPB - 1) / MPB, 256, 0, stream>>>(${NAMES});
}
"""
_BG_UNROLL = """
// One thread per output element, the constant-length k loop fully unrolled, read-only cache loads.
__global__ void __launch_bounds__(256) bgemm_unroll(${SIG}) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)batch * BM * BN) return;
    int b = (int)(t / (BM * BN)), i = (int)(t / BN % BM), j = (int)(t % BN);
    const ${T}* __restrict__ a = A + (size_t)b * BM * BK + i * BK;
    const ${T}* __restrict__ bb = B + (size_t)b * BK * BN + j;
    ${T} acc = 0;
#pragma unroll
    for (int k = 0; k < BK; ++k) acc += __ldg(a + k) * __ldg(bb + k * BN);
    C[t] = epi(acc);
}
static void run(${SIG}, cudaStream_t stream) {
    long long total = (long long)batch * BM * BN;
    bgemm_unroll<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(${NAMES});
}
"""
_SHAPES = [(4, 4, 4), (8, 8, 8), (16, 16, 16), (8, 16, 4), (16, 8, 32), (4, 32, 8), (32, 4, 16), (2, 64, 8),
           (16, 16, 4), (12, 12, 12), (3, 3, 3), (6, 10, 5), (32, 8, 8), (5, 7, 9)]


def _bg_impls(dt, shape, epi, args):
    bm, bn, bk = shape
    mpb = max(1, min(16, 2048 // (bm * bk + bk * bn)))
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), BM=bm, BN=bn, BK=bk, EPI=tfill(UNARY[epi].c, dt, x="x"), MPB=mpb)
    head = tfill(dedent(_BG_HEAD), dt, **ctx)
    both = dict(SB_DECL=f"__shared__ {dt.name} sb[MPB * BK * BN];",
                SB_LOAD="for (int e = threadIdx.x; e < nb * BK * BN; e += 256) sb[e] = B[(size_t)b0 * BK * BN + e];",
                B_SRC="sb + m * BK * BN", STAGE_NOTE="A and B")
    only_a = dict(SB_DECL="", SB_LOAD="", B_SRC="B + (size_t)(b0 + m) * BK * BN", STAGE_NOTE="A only")

    def code(t, **kw):
        return head + tfill(dedent(t), dt, **{**ctx, **kw})
    return [Impl("naive", "naive", code(_BG_NAIVE)), Impl("thread_per_matrix", "thread_per_matrix", code(_BG_MATRIX)),
            Impl("block_shared", "tiled_shared", code(_BG_SHARED, **both)), Impl("unrolled", "loop_unrolling", code(_BG_UNROLL)),
            Impl("shared_a", "tiled_shared_partial", code(_BG_SHARED, **only_a))]


def batched_tasks(rng) -> list:
    out = []
    epis = ["identity", "relu", "tanh", "sigmoid", "gelu_tanh", "silu", "abs", "softplus", "square", "leaky_relu"]
    for s, shape in enumerate(_SHAPES):
        bm, bn, bk = shape
        per = max(bm * bk, bk * bn, bm * bn)
        big = min(1 << 20, (1 << 23) // per)
        for e, epi in enumerate(pick_list(epis, s)):
            dt = (FLOAT, DOUBLE)[(s + e) % 2]
            variant = f"{bm}x{bn}x{bk}_{epi}_{dt.name}"
            fn = f"batched_gemm_{variant}"
            args = [arg("batch", "int", "scalar"), arg("A", f"const {dt.name}*", "in", f"batch*{bm * bk}"),
                    arg("B", f"const {dt.name}*", "in", f"batch*{bk * bn}"), arg("C", f"{dt.name}*", "out", f"batch*{bm * bn}")]
            ref = (f"#include <math.h>\n#include <stddef.h>\n\nvoid {fn}({signature(args)}) {{\n"
                   f"    for (int b = 0; b < batch; ++b)\n        for (int i = 0; i < {bm}; ++i)\n"
                   f"            for (int j = 0; j < {bn}; ++j) {{\n                double acc = 0.0;\n"
                   f"                for (int k = 0; k < {bk}; ++k)\n"
                   f"                    acc += (double)A[((size_t)b * {bm} + i) * {bk} + k] * (double)B[((size_t)b * {bk} + k) * {bn} + j];\n"
                   f"                {dt.name} x = ({dt.name})acc;\n"
                   f"                C[((size_t)b * {bm} + i) * {bn} + j] = {tfill(UNARY[epi].c, dt, x='x')};\n            }}\n}}\n")
            cfgs = configs([{"batch": 1}, {"batch": 7}, {"batch": 33}], [{"batch": big}, {"batch": big * 5 // 8 + 3}])
            out.append(c2cuda_task("batched_gemm", variant, fn, ref, args, cfgs, f"{2 * bm * bn * bk}*batch",
                                   f"{dt.size * (bm * bk + bk * bn + bm * bn)}*batch", _bg_impls(dt, shape, epi, args),
                                   TOL if dt is FLOAT else DTOL, f"{epi}(A_b @ B_b) for a batch of {bm}x{bk} @ {bk}x{bn}"))
            if e % 3 == 0:
                module = TorchModule([("a", f"torch.randn(batch, {bm}, {bk})"), ("b", f"torch.randn(batch, {bk}, {bn})")],
                                     [f"return {UNARY[epi].texpr('torch.bmm(a, b)')}"], {"batch": 4096})
                targs = [arg("batch", "int", "scalar"), arg("A", "const float*", "in", "1"), arg("B", "const float*", "in", "1"),
                         arg("C", "float*", "out", "1")]
                launch = ("    run((int)dim_of(sizes, 0, 0), (const float*)inputs[0], (const float*)inputs[1], "
                          "(float*)outputs[0], stream);")
                cfgs = configs([{"batch": 1}, {"batch": 7}, {"batch": 33}], [{"batch": big}, {"batch": big * 5 // 8 + 3}])
                out.append(torch_task("batched_gemm", f"{bm}x{bn}x{bk}_{epi}", module.source(), cfgs,
                                      f"{2 * bm * bn * bk}*batch", f"{4 * (bm * bk + bk * bn + bm * bn)}*batch",
                                      _bg_impls(FLOAT, shape, epi, targs), launch, TOL,
                                      f"{epi}(bmm) of {bm}x{bk} and {bk}x{bn} matrices"))
    return out


def pick_list(items, s, k=6):
    """k items of `items`, rotated by s (deterministic variety across shapes)."""
    return [items[(s * 3 + i) % len(items)] for i in range(k)]


# --- outer products -------------------------------------------------------------------------------------
_O_HEAD = """
__device__ __forceinline__ ${T} cell(${T} a, ${T} b${ACC_PARAM}) {
    ${T} x = ${G}${ACC_TERM};
    return ${EPI};
}
"""
_O_NAIVE = """
// One thread per output; threadIdx.x along columns (coalesced).
__global__ void outer_naive(${SIG}) {
    int j = blockIdx.x * 32 + threadIdx.x, i = blockIdx.y * 8 + threadIdx.y;
    if (i < M && j < N) out[(size_t)i * N + j] = cell(x[i], y[j]${ACC_IJ});
}
static void run(${SIG}, cudaStream_t stream) {
    outer_naive<<<dim3((N + 31) / 32, (M + 7) / 8), dim3(32, 8), 0, stream>>>(${NAMES});
}
"""
_O_ROWS = """
// One thread per output with threadIdx.x along rows: each warp store touches 32 rows.
__global__ void outer_rows(${SIG}) {
    int i = blockIdx.x * 32 + threadIdx.x, j = blockIdx.y * 8 + threadIdx.y;
    if (i < M && j < N) out[(size_t)i * N + j] = cell(x[i], y[j]${ACC_IJ});
}
static void run(${SIG}, cudaStream_t stream) {
    outer_rows<<<dim3((M + 31) / 32, (N + 7) / 8), dim3(32, 8), 0, stream>>>(${NAMES});
}
"""
_O_BLOCKROW = """
// One block per row: x[i] read once, the block strides along the row.
__global__ void __launch_bounds__(256) outer_blockrow(${SIG}) {
    int i = blockIdx.x;
    ${T} xi = x[i];
    for (int j = threadIdx.x; j < N; j += 256) out[(size_t)i * N + j] = cell(xi, y[j]${ACC_IJ});
}
static void run(${SIG}, cudaStream_t stream) {
    outer_blockrow<<<M, 256, 0, stream>>>(${NAMES});
}
"""
_O_VEC = """
// ${W} columns per thread with ${V} loads and stores when N % ${W} == 0 (rows aligned), else scalar.
__global__ void __launch_bounds__(256) outer_vec(${SIG}) {
    int q = blockIdx.x * 256 + threadIdx.x, i = blockIdx.y;
    int nq = N / ${W};
    if (q >= nq) return;
    ${T} xi = x[i];
    ${V} yv = reinterpret_cast<const ${V}*>(y)[q];
${ACC_LOAD}
    ${V} r;
${COMPUTE}
    reinterpret_cast<${V}*>(out + (size_t)i * N)[q] = r;
}
__global__ void outer_scalar(${SIG}) {
    int j = blockIdx.x * 256 + threadIdx.x, i = blockIdx.y;
    if (j < N) out[(size_t)i * N + j] = cell(x[i], y[j]${ACC_IJ});
}
static void run(${SIG}, cudaStream_t stream) {
    if (N % ${W} == 0) outer_vec<<<dim3((N / ${W} + 255) / 256, M), 256, 0, stream>>>(${NAMES});
    else outer_scalar<<<dim3((N + 255) / 256, M), 256, 0, stream>>>(${NAMES});
}
"""
_O_COARSE = """
// Each thread computes 4 rows of one column (y[j] loaded once, coalesced along columns).
__global__ void __launch_bounds__(256) outer_coarse(${SIG}) {
    int j = blockIdx.x * 32 + threadIdx.x, i0 = blockIdx.y * 32 + threadIdx.y;
    if (j >= N) return;
    ${T} yj = y[j];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        int i = i0 + 8 * q;
        if (i < M) out[(size_t)i * N + j] = cell(x[i], yj${ACC_IJ});
    }
}
static void run(${SIG}, cudaStream_t stream) {
    outer_coarse<<<dim3((N + 31) / 32, (M + 31) / 32), dim3(32, 8), 0, stream>>>(${NAMES});
}
"""


def _o_impls(dt, g, epi, acc, args):
    lanes = "xyzw"[:dt.width]
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), G=tfill(BINARY[g].c, dt, a="a", b="b"),
               EPI=tfill(UNARY[epi].c, dt, x="x"), ACC_PARAM=f", {dt.name} c" if acc else "",
               ACC_TERM=" + c" if acc else "", ACC_IJ=", acc[(size_t)i * N + j]" if acc else "",
               ACC_LOAD=(f"    {dt.vec} cv = reinterpret_cast<const {dt.vec}*>(acc + (size_t)i * N)[q];" if acc else ""),
               COMPUTE="\n".join(f"    r.{c} = cell(xi, yv.{c}{', cv.' + c if acc else ''});" for c in lanes))
    head = tfill(dedent(_O_HEAD), dt, **ctx)

    def code(t):
        return head + tfill(dedent(t), dt, **ctx)
    return [Impl("naive", "naive", code(_O_NAIVE)), Impl("row_threads", "uncoalesced", code(_O_ROWS)),
            Impl("block_per_row", "block_per_row", code(_O_BLOCKROW)), Impl("vector_loads", "vectorized", code(_O_VEC)),
            Impl("coarse_rows", "thread_coarsening", code(_O_COARSE))]


def outer_tasks(rng) -> list:
    out = []
    gs = ["mul", "add", "sub", "absdiff", "sqdiff", "max", "min", "hypot", "safe_div", "mul_add_half", "atan2"]
    for k, g in enumerate(gs):
        epis = [UNBOUNDED_SAFE[(k * 5 + i * 7) % len(UNBOUNDED_SAFE)] for i in range(4)]
        for e, epi in enumerate(epis):
            for acc in (False, True):
                dt = (FLOAT, DOUBLE)[(k + e + acc) % 2]
                variant = f"{g}_{epi}{'_acc' if acc else ''}_{dt.name}"
                fn = f"outer_{variant}"
                args = [arg("M", "int", "scalar"), arg("N", "int", "scalar"), arg("x", f"const {dt.name}*", "in", "M"),
                        arg("y", f"const {dt.name}*", "in", "N")]
                if acc:
                    args.append(arg("acc", f"const {dt.name}*", "in", "M*N"))
                args.append(arg("out", f"{dt.name}*", "out", "M*N"))
                accterm = " + acc[(size_t)i * N + j]" if acc else ""
                ref = (f"#include <math.h>\n#include <stddef.h>\n\nvoid {fn}({signature(args)}) {{\n"
                       f"    for (int i = 0; i < M; ++i)\n        for (int j = 0; j < N; ++j) {{\n"
                       f"            {dt.name} v = {tfill(BINARY[g].c, dt, a='x[i]', b='y[j]')}{accterm};\n"
                       f"            out[(size_t)i * N + j] = {tfill(UNARY[epi].c, dt, x='v')};\n        }}\n}}\n")
                cfgs = configs([{"M": 7, "N": 1000}, {"M": 33, "N": 4099}, {"M": 1000, "N": 33}],
                               [{"M": 4096, "N": 4096}, {"M": 3001, "N": 2001}])
                nbytes = f"{dt.size}*(M + N + {2 if acc else 1}*M*N)"
                out.append(c2cuda_task("outer_product", variant, fn, ref, args, cfgs, f"{BINARY[g].flops + 2}*M*N", nbytes,
                                       _o_impls(dt, g, epi, acc, args), _outer_tol(dt, epi), f"out[i][j] = {epi}({g}(x[i], y[j]){' + acc[i][j]' if acc else ''})"))
                if (k + e + acc) % 3 == 0:
                    out.append(_outer_t(g, epi, acc))
    return out


def _outer_t(g, epi, acc):
    inputs = [("x", "torch.randn(M)"), ("y", "torch.randn(N)")] + ([("c", "torch.randn(M, N)")] if acc else [])
    body = bin_t(g, "x.unsqueeze(1)", "y.unsqueeze(0)") + (" + c" if acc else "")
    module = TorchModule(inputs, [f"v = {body}", f"return {UNARY[epi].texpr('v')}"], {"M": 1024, "N": 1024})
    args = [arg("M", "int", "scalar"), arg("N", "int", "scalar"), arg("x", "const float*", "in", "1"),
            arg("y", "const float*", "in", "1")] + ([arg("acc", "const float*", "in", "1")] if acc else []) + \
        [arg("out", "float*", "out", "1")]
    launch = ("    int M = (int)dim_of(sizes, 0, 0), N = (int)dim_of(sizes, 1, 0);\n"
              "    run(M, N, (const float*)inputs[0], (const float*)inputs[1], "
              + ("(const float*)inputs[2], " if acc else "") + "(float*)outputs[0], stream);")
    cfgs = configs([{"M": 7, "N": 1000}, {"M": 33, "N": 4099}, {"M": 1000, "N": 33}],
                   [{"M": 4096, "N": 4096}, {"M": 3001, "N": 2001}])
    return torch_task("outer_product", f"{g}_{epi}{'_acc' if acc else ''}", module.source(), cfgs,
                      f"{BINARY[g].flops + 2}*M*N", f"4*(M + N + {2 if acc else 1}*M*N)", _o_impls(FLOAT, g, epi, acc, args),
                      launch, _outer_tol(FLOAT, epi), f"{epi}({g} of x[:, None] and y[None, :]{' + c' if acc else ''})")


def generate(rng) -> list:
    return gemm_tasks(rng) + batched_tasks(rng) + outer_tasks(rng)
