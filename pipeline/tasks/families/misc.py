"""gemv (y = epi(alpha A x + bias) with A row-major, or its transpose), complex_arith (element-wise
functions of interleaved complex vectors, including contracting fixed-point iterations) and sort_segments
(sort each fixed-size segment of a key array).

gemv N: naive (a thread per row: uncoalesced), warp_per_row, block_per_row, vector_loads,
x_in_shared (a thread per row with x staged in shared memory). gemv T: naive (a thread per column,
coalesced), warp_per_column (weak), tiled_2d, split_rows_atomic, vector_loads.
complex_arith: naive, grid_stride, vector_loads (two complex numbers per 16-byte load), unroll4,
strided_lanes. sort_segments: naive (insertion sort, a thread per segment), odd_even (transposition
sort in shared memory), bitonic_shared, bitonic_warp (register shuffles below 32, shared above),
bitonic_global (a kernel launch per stage, in global memory).
"""
from __future__ import annotations

from pipeline.tasks.families._kit import (DOUBLE, FLOAT, UNARY, DType, Impl, TorchModule, arg, arg_names, c2cuda_task,
                                         configs, dedent, signature, tfill, torch_task)
from pipeline.tasks.families.elementwise import _GRID, _NAIVE, _STRIDED, _UNROLL
from pipeline.tasks.families.sorting import sort_tasks
from pipeline.core.records import Tolerance

TOL = Tolerance(rtol=1e-4, atol=1e-4)
DTOL = Tolerance(rtol=1e-9, atol=1e-10)

# --- gemv ---------------------------------------------------------------------------------------------
_GV_HEAD = """
__device__ __forceinline__ ${T} epi(${T} acc, int r, const ${T}* bias) {
    ${T} x = ${ALPHA} * acc${BIAS};
    return ${EPI};
}
__device__ __forceinline__ ${T} warp_sum(${T} v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
"""
_GN_NAIVE = """
// One thread per row: a warp's loads of A are K elements apart.
__global__ void gemv_naive(${SIG}) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= M) return;
    ${T} acc = 0;
    for (int k = 0; k < K; ++k) acc += A[(size_t)r * K + k] * x[k];
    y[r] = epi(acc, r, ${BIAS_ARG});
}
static void run(${SIG}, cudaStream_t stream) {
    gemv_naive<<<(M + 127) / 128, 128, 0, stream>>>(${NAMES});
}
"""
_GN_WARP = """
// One warp per row: lanes stride the row (coalesced), shuffle reduction.
__global__ void __launch_bounds__(256) gemv_warp(${SIG}) {
    int r = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (r >= M) return;
    ${T} acc = 0;
    for (int k = lane; k < K; k += 32) acc += A[(size_t)r * K + k] * x[k];
    acc = warp_sum(acc);
    if (lane == 0) y[r] = epi(acc, r, ${BIAS_ARG});
}
static void run(${SIG}, cudaStream_t stream) {
    gemv_warp<<<(M + 7) / 8, 256, 0, stream>>>(${NAMES});
}
"""
_GN_BLOCK = """
// One block of 256 threads per row, partial sums combined through shared memory.
__global__ void __launch_bounds__(256) gemv_block(${SIG}) {
    __shared__ ${T} part[8];
    int r = blockIdx.x;
    ${T} acc = 0;
    for (int k = threadIdx.x; k < K; k += 256) acc += A[(size_t)r * K + k] * x[k];
    acc = warp_sum(acc);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        ${T} s = 0;
        for (int w = 0; w < 8; ++w) s += part[w];
        y[r] = epi(s, r, ${BIAS_ARG});
    }
}
static void run(${SIG}, cudaStream_t stream) {
    gemv_block<<<M, 256, 0, stream>>>(${NAMES});
}
"""
_GN_VEC = """
// One warp per row with ${V} loads of A and x when K % ${W} == 0 (rows 16-byte aligned).
template <bool VEC>
__global__ void __launch_bounds__(256) gemv_vec(${SIG}) {
    int r = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (r >= M) return;
    ${T} acc = 0;
    if (VEC) {
        const ${V}* a4 = reinterpret_cast<const ${V}*>(A + (size_t)r * K);
        const ${V}* x4 = reinterpret_cast<const ${V}*>(x);
        for (int q = lane; q < K / ${W}; q += 32) {
            ${V} a = a4[q], b = x4[q];
            acc += ${DOTV};
        }
    } else {
        for (int k = lane; k < K; k += 32) acc += A[(size_t)r * K + k] * x[k];
    }
    acc = warp_sum(acc);
    if (lane == 0) y[r] = epi(acc, r, ${BIAS_ARG});
}
static void run(${SIG}, cudaStream_t stream) {
    if (K % ${W} == 0) gemv_vec<true><<<(M + 7) / 8, 256, 0, stream>>>(${NAMES});
    else gemv_vec<false><<<(M + 7) / 8, 256, 0, stream>>>(${NAMES});
}
"""
_GN_SHX = """
// One thread per row with x staged in shared memory 1024 entries at a time (A still uncoalesced).
__global__ void __launch_bounds__(256) gemv_shx(${SIG}) {
    __shared__ ${T} xs[1024];
    int r = blockIdx.x * 256 + threadIdx.x;
    ${T} acc = 0;
    for (int k0 = 0; k0 < K; k0 += 1024) {
        int nk = min(1024, K - k0);
        __syncthreads();
        for (int e = threadIdx.x; e < nk; e += 256) xs[e] = x[k0 + e];
        __syncthreads();
        if (r < M)
            for (int k = 0; k < nk; ++k) acc += A[(size_t)r * K + k0 + k] * xs[k];
    }
    if (r < M) y[r] = epi(acc, r, ${BIAS_ARG});
}
static void run(${SIG}, cudaStream_t stream) {
    gemv_shx<<<(M + 255) / 256, 256, 0, stream>>>(${NAMES});
}
"""
# transposed: y[c] = epi(alpha * sum_r A[r][c] x[r] + bias[c]), A is K x M (rows r < K, columns c < M)
_GT_NAIVE = """
// One thread per output column walking down the rows: coalesced across the warp.
__global__ void gemvt_naive(${SIG}) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= M) return;
    ${T} acc = 0;
    for (int r = 0; r < K; ++r) acc += A[(size_t)r * M + c] * x[r];
    y[c] = epi(acc, c, ${BIAS_ARG});
}
static void run(${SIG}, cudaStream_t stream) {
    gemvt_naive<<<(M + 255) / 256, 256, 0, stream>>>(${NAMES});
}
"""
_GT_WARP = """
// One warp per output column: lanes take every 32nd row, so each warp load touches 32 rows.
__global__ void gemvt_warp(${SIG}) {
    int c = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (c >= M) return;
    ${T} acc = 0;
    for (int r = lane; r < K; r += 32) acc += A[(size_t)r * M + c] * x[r];
    acc = warp_sum(acc);
    if (lane == 0) y[c] = epi(acc, c, ${BIAS_ARG});
}
static void run(${SIG}, cudaStream_t stream) {
    gemvt_warp<<<(M + 7) / 8, 256, 0, stream>>>(${NAMES});
}
"""
_GT_TILED = """
// 32 columns x 8 row lanes per block; partial sums combined in shared memory.
__global__ void __launch_bounds__(256) gemvt_tiled(${SIG}) {
    __shared__ ${T} part[8][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    ${T} acc = 0;
    if (c < M)
        for (int r = threadIdx.y; r < K; r += 8) acc += A[(size_t)r * M + c] * x[r];
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < M) {
        for (int q = 1; q < 8; ++q) acc += part[q][threadIdx.x];
        y[c] = epi(acc, c, ${BIAS_ARG});
    }
}
static void run(${SIG}, cudaStream_t stream) {
    gemvt_tiled<<<(M + 31) / 32, dim3(32, 8), 0, stream>>>(${NAMES});
}
"""
_GT_SPLIT = """
// Row chunks of 128 in parallel, partial sums added atomically into a scratch vector, then the
// epilogue kernel.
__device__ ${T} g_acc[1 << 20];
__global__ void gemvt_zero(int M) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < M) g_acc[c] = 0;
}
__global__ void gemvt_chunk(${SIG}) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= M) return;
    int r0 = blockIdx.y * 128, r1 = min(K, r0 + 128);
    ${T} acc = 0;
    for (int r = r0; r < r1; ++r) acc += A[(size_t)r * M + c] * x[r];
    atomicAdd(&g_acc[c], acc);
}
__global__ void gemvt_finish(${SIG}) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < M) y[c] = epi(g_acc[c], c, ${BIAS_ARG});
}
static void run(${SIG}, cudaStream_t stream) {
    int cb = (M + 255) / 256;
    gemvt_zero<<<cb, 256, 0, stream>>>(M);
    gemvt_chunk<<<dim3(cb, (K + 127) / 128), 256, 0, stream>>>(${NAMES});
    gemvt_finish<<<cb, 256, 0, stream>>>(${NAMES});
}
"""
_GT_VEC = """
// One thread per ${W} adjacent columns with ${V} loads of A (M % ${W} == 0), scalar otherwise.
__global__ void __launch_bounds__(256) gemvt_vec(${SIG}) {
    int q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= M / ${W}) return;
    ${V} acc;
${ZERO}
    for (int r = 0; r < K; ++r) {
        ${V} a = reinterpret_cast<const ${V}*>(A + (size_t)r * M)[q];
        ${T} xr = x[r];
${FMA}
    }
${STORE}
}
__global__ void gemvt_scalar(${SIG}) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= M) return;
    ${T} acc = 0;
    for (int r = 0; r < K; ++r) acc += A[(size_t)r * M + c] * x[r];
    y[c] = epi(acc, c, ${BIAS_ARG});
}
static void run(${SIG}, cudaStream_t stream) {
    if (M % ${W} == 0) gemvt_vec<<<(M / ${W} + 255) / 256, 256, 0, stream>>>(${NAMES});
    else gemvt_scalar<<<(M + 255) / 256, 256, 0, stream>>>(${NAMES});
}
"""


def _gemv_impls(dt, trans, alpha, bias, epi, args):
    lanes = "xyzw"[:dt.width]
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), ALPHA=dt.lit(alpha), BIAS=" + bias[r]" if bias else "",
               BIAS_ARG="bias" if bias else "nullptr", EPI=tfill(UNARY[epi].c, dt, x="x"),
               DOTV=" + ".join(f"a.{c} * b.{c}" for c in lanes),
               ZERO="\n".join(f"    acc.{c} = 0;" for c in lanes),
               FMA="\n".join(f"        acc.{c} += a.{c} * xr;" for c in lanes),
               STORE="\n".join(f"    y[{dt.width} * q + {k}] = epi(acc.{c}, {dt.width} * q + {k}, {'bias' if bias else 'nullptr'});"
                               for k, c in enumerate(lanes)))
    head = tfill(dedent(_GV_HEAD), dt, **ctx)

    def code(t):
        return head + tfill(dedent(t), dt, **ctx)
    if not trans:
        return [Impl("naive", "naive", code(_GN_NAIVE)), Impl("warp_per_row", "warp_shuffle", code(_GN_WARP)),
                Impl("block_per_row", "shared_reduction", code(_GN_BLOCK)), Impl("vector_loads", "vectorized", code(_GN_VEC)),
                Impl("x_in_shared", "tiled_shared", code(_GN_SHX))]
    return [Impl("naive", "naive", code(_GT_NAIVE)), Impl("warp_per_column", "uncoalesced", code(_GT_WARP)),
            Impl("tiled_2d", "tiled_shared", code(_GT_TILED)), Impl("split_rows_atomic", "atomics", code(_GT_SPLIT)),
            Impl("vector_loads", "vectorized", code(_GT_VEC))]


def gemv_tasks(rng) -> list:
    out = []
    epis = ["identity", "relu", "tanh", "sigmoid", "gelu", "silu", "abs", "softplus", "leaky_relu", "softsign",
            "elu", "hardtanh", "mish", "square"]
    for k, epi in enumerate(epis):
        for trans in (False, True):
            for bias in (False, True):
                alpha = (1.0, 0.5, 2.0, 0.25)[(k + bias) % 4]
                for dt in ((FLOAT, DOUBLE) if (k + trans + bias) % 2 == 0 else (FLOAT,)):
                    variant = f"{'t' if trans else 'n'}_{epi}{'_bias' if bias else ''}_{dt.name}"
                    fn = f"gemv_{variant}"
                    args = [arg("M", "int", "scalar"), arg("K", "int", "scalar"), arg("A", f"const {dt.name}*", "in", "M*K"),
                            arg("x", f"const {dt.name}*", "in", "K")]
                    if bias:
                        args.append(arg("bias", f"const {dt.name}*", "in", "M"))
                    args.append(arg("y", f"{dt.name}*", "out", "M"))
                    a_at = "A[(size_t)k * M + r]" if trans else "A[(size_t)r * K + k]"
                    ref = (f"#include <math.h>\n#include <stddef.h>\n\nvoid {fn}({signature(args)}) {{\n"
                           f"    for (int r = 0; r < M; ++r) {{\n        double acc = 0.0;\n"
                           f"        for (int k = 0; k < K; ++k) acc += (double){a_at} * (double)x[k];\n"
                           f"        {dt.name} v = {dt.lit(alpha)} * ({dt.name})acc{' + bias[r]' if bias else ''};\n"
                           f"        y[r] = {tfill(UNARY[epi].c, dt, x='v')};\n    }}\n}}\n")
                    cfgs = configs([{"M": 7, "K": 1000}, {"M": 1000, "K": 33}, {"M": 257, "K": 4099}],
                                   [{"M": 8192, "K": 4096} if dt is FLOAT else {"M": 4096, "K": 4096}, {"M": 3001, "K": 2999}])
                    layout = "A is K x M, y = A^T x" if trans else "A is M x K"
                    out.append(c2cuda_task("gemv", variant, fn, ref, args, cfgs, "2*M*K", f"{dt.size}*(M*K + K + M)",
                                           _gemv_impls(dt, trans, alpha, bias, epi, args),
                                           Tolerance(rtol=1e-3, atol=1e-4) if dt is FLOAT else DTOL,
                                           f"y = {epi}({alpha} * A x{' + bias' if bias else ''}); {layout}, {dt.name}"))
                if (k + trans + 2 * bias) % 2 == 0:
                    out.append(_gemv_torch(trans, alpha, bias, epi))
    return out


def _gemv_torch(trans, alpha, bias, epi):
    a = "torch.randn(k, m)" if trans else "torch.randn(m, k)"
    prod = "torch.matmul(a.t(), x)" if trans else "torch.matmul(a, x)"
    module = TorchModule([("a", a), ("x", "torch.randn(k)")],
                         [f"v = {alpha} * {prod}" + (" + self.bias" if bias else ""), f"return {UNARY[epi].texpr('v')}"],
                         {"m": 4096, "k": 4096}, init=["self.bias = nn.Parameter(torch.randn(m) * 0.1)"] if bias else [],
                         init_args=[("m", "m")] if bias else [])
    args = [arg("M", "int", "scalar"), arg("K", "int", "scalar"), arg("A", "const float*", "in", "1"),
            arg("x", "const float*", "in", "1")] + ([arg("bias", "const float*", "in", "1")] if bias else []) + \
        [arg("y", "float*", "out", "1")]
    m_dim, k_dim = ("1", "0") if trans else ("0", "1")
    launch = (f"    int M = (int)dim_of(sizes, 0, {m_dim}), K = (int)dim_of(sizes, 0, {k_dim});\n"
              "    run(M, K, (const float*)inputs[0], (const float*)inputs[1], "
              + ("(const float*)inputs[2], " if bias else "") + "(float*)outputs[0], stream);")
    cfgs = configs([{"m": 7, "k": 1000}, {"m": 1000, "k": 33}, {"m": 257, "k": 4099}],
                   [{"m": 8192, "k": 4096}, {"m": 3001, "k": 2999}])
    return torch_task("gemv", f"{'t' if trans else 'n'}_{epi}{'_bias' if bias else ''}_a{str(alpha).replace('.', 'p')}",
                      module.source(), cfgs, "2*m*k", "4*(m*k + k + m)", _gemv_impls(FLOAT, trans, alpha, bias, epi, args),
                      launch, Tolerance(rtol=1e-3, atol=1e-3), f"{epi}({alpha} * {prod}{' + bias' if bias else ''})")
    # (cuBLAS sums the k products in its own order: over k = 4096 float terms the sums differ by ~2e-4
    # of their scale, which an epilogue that squashes large values, e.g. softsign, leaves in full near 0)


# --- complex arithmetic ------------------------------------------------------------------------------------
# ops over complex (ar, ai), (br, bi): C statements setting rr, ri; torch expression over complex a, b
COMPLEX = {
    "mul": ("rr = ar * br - ai * bi; ri = ar * bi + ai * br;", "a * b", 2),
    "conj_mul": ("rr = ar * br + ai * bi; ri = ar * bi - ai * br;", "a.conj() * b", 2),
    "div": ("${T} den = br * br + bi * bi + 1.0${C}; rr = (ar * br + ai * bi) / den; ri = (ai * br - ar * bi) / den;",
            "a / (b + 1.0 / b.conj())", 2),
    "square_plus": ("rr = ar * ar - ai * ai + br; ri = 2.0${C} * ar * ai + bi;", "a * a + b", 2),
    "exp": ("${T} e = exp${F}(ar); rr = e * cos${F}(ai); ri = e * sin${F}(ai);", "torch.exp(a)", 1),
    "normalize": ("${T} m = sqrt${F}(ar * ar + ai * ai) + 1.0e-6${C}; rr = ar / m; ri = ai / m;", "a / (a.abs() + 1e-6)", 1),
    "rotate": ("${T} c = cos${F}(br), s = sin${F}(br); rr = ar * c - ai * s; ri = ar * s + ai * c;", None, 2),
    "lerp_half": ("rr = 0.5${C} * (ar + br); ri = 0.5${C} * (ai + bi);", "0.5 * (a + b)", 2),
    "mul_add_conj": ("rr = ar * br - ai * bi + ar; ri = ar * bi + ai * br - ai;", "a * b + a.conj()", 2),
    "cube": ("${T} sr = ar * ar - ai * ai, si = 2.0${C} * ar * ai; rr = sr * ar - si * ai; ri = sr * ai + si * ar;", "a * a * a", 1),
    "recip": ("${T} den = ar * ar + ai * ai + 1.0${C}; rr = ar / den; ri = -ai / den;", None, 1),
}
_C_HEAD = """
__device__ __forceinline__ ${V2} celem(${PARAMS}) {
    ${T} rr, ri;
    ${BODY}
    return make_${V2}(rr, ri);
}
"""


def _contract(iters: int, scale: float) -> tuple[str, str]:
    """z <- z^2 / 4 + c / 2, `iters` times from z = a * scale, c = b * scale, projected onto the unit
    disc: a contraction (|dz'/dz| <= 1/2), so rounding differences shrink instead of growing."""
    c = (f"${{T}} zr = ar * {scale!r}${{C}}, zi = ai * {scale!r}${{C}}, cr = br * {scale!r}${{C}}, ci = bi * {scale!r}${{C}};\n"
         f"    for (int it = 0; it < {iters}; ++it) {{\n"
         f"        ${{T}} t = 0.25${{C}} * (zr * zr - zi * zi) + 0.5${{C}} * cr;\n"
         f"        zi = 0.5${{C}} * zr * zi + 0.5${{C}} * ci;\n        zr = t;\n"
         f"        ${{T}} m = zr * zr + zi * zi;\n"
         f"        if (m > 1.0${{C}}) {{ ${{T}} inv = 1.0${{C}} / sqrt${{F}}(m); zr *= inv; zi *= inv; }}\n    }}\n"
         f"    rr = zr; ri = zi;")
    return c, f"contract{iters}_s{str(scale).replace('.', 'p')}"


def _complex_impls(dt: DType, body: str, nin: int, args):
    v2 = "float2" if dt is FLOAT else "double2"
    params = ", ".join(f"{dt.name} {p}" for p in ("ar", "ai", "br", "bi")[:2 * nin])
    call = lambda i: "celem(" + ", ".join(  # noqa: E731
        [f"a[2 * {i}]", f"a[2 * {i} + 1]"] + ([f"b[2 * {i}]", f"b[2 * {i} + 1]"] if nin == 2 else [])) + ")"
    store = "${V2} r_ = CALL; out[2 * i] = r_.x; out[2 * i + 1] = r_.y"
    head = tfill(dedent(_C_HEAD), dt, V2=v2, PARAMS=params, BODY=tfill(body, dt))
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), OUT="out")

    # the element-wise templates store `${OUT}[i] = ${CALL_I}`; complex elements store two values
    def adapt(t):
        t = t.replace("${OUT}[i] = ${CALL_I};", "{ " + store.replace("CALL", call("i")) + "; }")
        return t
    vec = f"""
// 16-byte loads: two complex numbers per load${' of each input' if nin == 2 else ''}, a scalar tail.
__global__ void __launch_bounds__(256) cx_vec(${{SIG}}) {{
    int np = n / 2;
    for (int q = blockIdx.x * 256 + threadIdx.x; q < np; q += gridDim.x * 256) {{
        {'float4' if dt is FLOAT else 'double4'} va = reinterpret_cast<const {'float4' if dt is FLOAT else 'double4'}*>(a)[q];
{(f"        {'float4' if dt is FLOAT else 'double4'} vb = reinterpret_cast<const {'float4' if dt is FLOAT else 'double4'}*>(b)[q];") if nin == 2 else ''}
        {v2} r0 = celem(va.x, va.y{', vb.x, vb.y' if nin == 2 else ''});
        {v2} r1 = celem(va.z, va.w{', vb.z, vb.w' if nin == 2 else ''});
        reinterpret_cast<{'float4' if dt is FLOAT else 'double4'}*>(out)[q] = make_{'float4' if dt is FLOAT else 'double4'}(r0.x, r0.y, r1.x, r1.y);
    }}
    if (n % 2 == 1 && blockIdx.x == 0 && threadIdx.x == 0) {{ int i = n - 1; {store.replace('CALL', call('i')).replace('${V2}', v2)}; }}
}}
static void run(${{SIG}}, cudaStream_t stream) {{
    int blocks = (n / 2 + 255) / 256;
    if (blocks < 1) blocks = 1;
    if (blocks > 132 * 8) blocks = 132 * 8;
    cx_vec<<<blocks, 256, 0, stream>>>(${{NAMES}});
}}
"""
    names = [("naive", "naive", _NAIVE), ("grid_stride", "coalesced", _GRID), ("vector_loads", "vectorized", vec),
             ("unroll4", "thread_coarsening", _UNROLL), ("strided_lanes", "uncoalesced", _STRIDED)]
    return [Impl(nm, st, head + tfill(dedent(adapt(t)), dt, V2=v2, **ctx)) for nm, st, t in names]


def complex_tasks(rng) -> list:
    out = []
    ops = dict(COMPLEX)
    for iters in (4, 8, 16, 32, 64, 128):
        for scale in (0.5, 1.0, 1.5):
            body, name = _contract(iters, scale)
            ops[name] = (body, None, 2)
    for k, (name, (body, tex, nin)) in enumerate(ops.items()):
        for dt in (FLOAT, DOUBLE):
            fn = f"complex_arith_{name}_{dt.name}"
            args = [arg("n", "int", "scalar"), arg("a", f"const {dt.name}*", "in", "2*n")]
            if nin == 2:
                args.append(arg("b", f"const {dt.name}*", "in", "2*n"))
            args.append(arg("out", f"{dt.name}*", "out", "2*n"))
            loads = f"{dt.name} ar = a[2 * i], ai = a[2 * i + 1]" + (", br = b[2 * i], bi = b[2 * i + 1]" if nin == 2 else "")
            ref = (f"#include <math.h>\n\nvoid {fn}({signature(args)}) {{\n    for (int i = 0; i < n; ++i) {{\n"
                   f"        {loads};\n        {dt.name} rr, ri;\n        {tfill(body, dt)}\n"
                   f"        out[2 * i] = rr;\n        out[2 * i + 1] = ri;\n    }}\n}}\n")
            big = (1 << 23) if dt is FLOAT else (1 << 22)
            cfgs = configs([{"n": 1000}, {"n": 4099}, {"n": 100003}], [{"n": big}, {"n": big * 5 // 8 + 1}])
            flops = 8 * (int(name[8:].split("_")[0]) if name.startswith("contract") else 1)
            tol = (Tolerance(rtol=1e-3, atol=1e-3) if name.startswith("contract") else TOL) if dt is FLOAT else \
                Tolerance(rtol=1e-7, atol=1e-8)
            out.append(c2cuda_task("complex_arith", f"{name}_{dt.name}", fn, ref, args, cfgs, f"{flops}*n",
                                   f"{2 * dt.size * (nin + 1)}*n", _complex_impls(dt, body, nin, args), tol,
                                   f"complex {name.replace('_', ' ')} of interleaved (re, im) {dt.name} vectors"))
        if tex:
            ins = [("a", "torch.randn(n, 2)")] + ([("b", "torch.randn(n, 2)")] if nin == 2 else [])
            lines = ["a = torch.view_as_complex(a)"] + (["b = torch.view_as_complex(b)"] if nin == 2 else [])
            lines.append(f"return torch.view_as_real({tex})")
            module = TorchModule(ins, lines, {"n": 1 << 20})
            targs = [arg("n", "int", "scalar"), arg("a", "const float*", "in", "1")] + (
                [arg("b", "const float*", "in", "1")] if nin == 2 else []) + [arg("out", "float*", "out", "1")]
            launch = ("    run((int)dim_of(sizes, 0, 0), (const float*)inputs[0], "
                      + ("(const float*)inputs[1], " if nin == 2 else "") + "(float*)outputs[0], stream);")
            cfgs = configs([{"n": 1000}, {"n": 4099}, {"n": 100003}], [{"n": 1 << 23}, {"n": 5000011}])
            # div: a / (b + 1 / conj(b)) is a conj(b) / (|b|^2 + 1), what the kernels compute
            out.append(torch_task("complex_arith", name, module.source(), cfgs, "8*n", f"{8 * (nin + 1)}*n",
                                  _complex_impls(FLOAT, body, nin, targs), launch, TOL, f"complex {name} ({tex})"))
    return out


def generate(rng) -> list:
    return gemv_tasks(rng) + complex_tasks(rng) + sort_tasks(rng)
