"""Pairwise families: distance_matrix (metrics and kernels between the rows of X and Y), kmeans_assign
(index, and optionally distance, of the nearest centroid; integer-valued coordinates so distances are
exact and ties go to the lowest index everywhere) and nbody (softened gravity, Coulomb and Yukawa
forces or potentials, structure-of-arrays or packed layouts).

distance_matrix: naive, row_threads (uncoalesced), tiled16, tiled32_coarse, register_4x4.
kmeans_assign: naive (a thread per point), shared_centroids, warp_per_point, two_points, shared_1024.
nbody: naive, tiled256, tiled_unroll, coarse2 (two bodies per thread), tiled64; every strategy sums
the bodies j in the same order, so results agree to rounding.
"""
from __future__ import annotations

from pipeline.tasks.families._kit import (DOUBLE, FLOAT, Impl, TorchModule, arg, arg_names, c2cuda_task, configs, dedent,
                                         signature, tfill, torch_task)
from pipeline.core.records import Tolerance

# metric: (accumulator updates over a, b; final over s0, s1, s2; torch expression over x, y)
METRICS = {
    "sqeuclid": (["s0 += (a - b) * (a - b);"], "s0", "((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)"),
    "euclid": (["s0 += (a - b) * (a - b);"], "sqrt${F}(s0)", "((x[:, None, :] - y[None, :, :]) ** 2).sum(-1).sqrt()"),
    "manhattan": (["s0 += fabs${F}(a - b);"], "s0", "(x[:, None, :] - y[None, :, :]).abs().sum(-1)"),
    "chebyshev": (["s0 = fmax${F}(s0, fabs${F}(a - b));"], "s0", "(x[:, None, :] - y[None, :, :]).abs().amax(-1)"),
    "dot": (["s0 += a * b;"], "s0", "x @ y.t()"),
    "cosine": (["s0 += a * b;", "s1 += a * a;", "s2 += b * b;"], "s0 / fmax${F}(sqrt${F}(s1 * s2), 1.0e-8${C})",
               "(x @ y.t()) / torch.clamp(torch.sqrt((x * x).sum(-1)[:, None] * (y * y).sum(-1)[None, :]), min=1e-8)"),
    "rbf": (["s0 += (a - b) * (a - b);"], "exp${F}(-${G} * s0)", "torch.exp(-${G} * ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1))"),
    "laplace": (["s0 += fabs${F}(a - b);"], "exp${F}(-${G} * s0)", "torch.exp(-${G} * (x[:, None, :] - y[None, :, :]).abs().sum(-1))"),
    "poly2": (["s0 += a * b;"], "(${G} * s0 + 1.0${C}) * (${G} * s0 + 1.0${C})", "(${G} * (x @ y.t()) + 1.0) ** 2"),
    "poly3": (["s0 += a * b;"], "(${G} * s0 + 1.0${C}) * (${G} * s0 + 1.0${C}) * (${G} * s0 + 1.0${C})",
              "(${G} * (x @ y.t()) + 1.0) ** 3"),
    "minkowski3": (["s0 += fabs${F}(a - b) * (a - b) * (a - b);"], "cbrt${F}(s0)",
                   "((x[:, None, :] - y[None, :, :]).abs() ** 3).sum(-1) ** (1.0 / 3.0)"),
    "bray_curtis": (["s0 += fabs${F}(a - b);", "s1 += fabs${F}(a + b);"], "s0 / (s1 + 1.0e-6${C})",
                    "(x[:, None, :] - y[None, :, :]).abs().sum(-1) / ((x[:, None, :] + y[None, :, :]).abs().sum(-1) + 1e-6)"),
    "tanh_dot": (["s0 += a * b;"], "tanh${F}(${G} * s0)", "torch.tanh(${G} * (x @ y.t()))"),
}

_D_HEAD = """
__device__ __forceinline__ void upd(${T}& s0, ${T}& s1, ${T}& s2, ${T} a, ${T} b) { ${UPD} }
__device__ __forceinline__ ${T} fin(${T} s0, ${T} s1, ${T} s2) { return ${FIN}; }
"""
_D_NAIVE = """
// One thread per pair (i, j), threadIdx.x along j.
__global__ void dist_naive(${SIG}) {
    int j = blockIdx.x * 16 + threadIdx.x, i = blockIdx.y * 16 + threadIdx.y;
    if (i >= m || j >= n) return;
    ${T} s0 = 0, s1 = 0, s2 = 0;
    for (int k = 0; k < d; ++k) upd(s0, s1, s2, X[(size_t)i * d + k], Y[(size_t)j * d + k]);
    out[(size_t)i * n + j] = fin(s0, s1, s2);
}
static void run(${SIG}, cudaStream_t stream) {
    dist_naive<<<dim3((n + 15) / 16, (m + 15) / 16), dim3(16, 16), 0, stream>>>(${NAMES});
}
"""
_D_ROWS = """
// One thread per pair with threadIdx.x along i: stores of a warp are n apart.
__global__ void dist_rows(${SIG}) {
    int i = blockIdx.x * 16 + threadIdx.x, j = blockIdx.y * 16 + threadIdx.y;
    if (i >= m || j >= n) return;
    ${T} s0 = 0, s1 = 0, s2 = 0;
    for (int k = 0; k < d; ++k) upd(s0, s1, s2, X[(size_t)i * d + k], Y[(size_t)j * d + k]);
    out[(size_t)i * n + j] = fin(s0, s1, s2);
}
static void run(${SIG}, cudaStream_t stream) {
    dist_rows<<<dim3((m + 15) / 16, (n + 15) / 16), dim3(16, 16), 0, stream>>>(${NAMES});
}
"""
_D_TILED = """
// ${TI} x 16 pairs per block: 16-wide chunks of the X and Y rows staged in shared memory;
// each of the 16 x ${TY} threads computes ${TI} / ${TY} rows of one column.
#define TI ${TI}
#define TY ${TY}
__global__ void __launch_bounds__(16 * TY) dist_tiled(${SIG}) {
    __shared__ ${T} xs[TI][17], ys[16][17];
    int tx = threadIdx.x, ty = threadIdx.y;
    int i0 = blockIdx.y * TI, j = blockIdx.x * 16 + tx;
    ${T} s0[TI / TY], s1[TI / TY], s2[TI / TY];
    for (int q = 0; q < TI / TY; ++q) s0[q] = s1[q] = s2[q] = 0;
    for (int k0 = 0; k0 < d; k0 += 16) {
        for (int r = ty; r < TI; r += TY)
            xs[r][tx] = (i0 + r < m && k0 + tx < d) ? X[(size_t)(i0 + r) * d + k0 + tx] : (${T})0;
        for (int r = ty; r < 16; r += TY) {
            int jj = blockIdx.x * 16 + r;
            ys[r][tx] = (jj < n && k0 + tx < d) ? Y[(size_t)jj * d + k0 + tx] : (${T})0;
        }
        __syncthreads();
        int kmax = min(16, d - k0);
        for (int kk = 0; kk < kmax; ++kk) {
            ${T} b = ys[tx][kk];
            for (int q = 0; q < TI / TY; ++q) upd(s0[q], s1[q], s2[q], xs[ty + TY * q][kk], b);
        }
        __syncthreads();
    }
    for (int q = 0; q < TI / TY; ++q) {
        int i = i0 + ty + TY * q;
        if (i < m && j < n) out[(size_t)i * n + j] = fin(s0[q], s1[q], s2[q]);
    }
}
static void run(${SIG}, cudaStream_t stream) {
    dist_tiled<<<dim3((n + 15) / 16, (m + TI - 1) / TI), dim3(16, TY), 0, stream>>>(${NAMES});
}
"""
_D_REG = """
// 64 x 64 pairs per block, 16 x 16 threads each holding a 4 x 4 block of accumulators; 8-deep
// chunks of X and Y rows in shared memory (stored k-major so reads are conflict-free).
__global__ void __launch_bounds__(256) dist_reg(${SIG}) {
    __shared__ ${T} xs[8][64], ys[8][64];
    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    int bm = blockIdx.y * 64, bn = blockIdx.x * 64;
    ${T} s0[4][4], s1[4][4], s2[4][4];
    for (int q = 0; q < 4; ++q)
        for (int p = 0; p < 4; ++p) s0[q][p] = s1[q][p] = s2[q][p] = 0;
    for (int k0 = 0; k0 < d; k0 += 8) {
        for (int e = tid; e < 512; e += 256) {
            int r = e / 8, kk = e % 8;
            xs[kk][r] = (bm + r < m && k0 + kk < d) ? X[(size_t)(bm + r) * d + k0 + kk] : (${T})0;
            ys[kk][r] = (bn + r < n && k0 + kk < d) ? Y[(size_t)(bn + r) * d + k0 + kk] : (${T})0;
        }
        __syncthreads();
        int kmax = min(8, d - k0);
        for (int kk = 0; kk < kmax; ++kk) {
            ${T} a[4], b[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) a[q] = xs[kk][ty + 16 * q];
#pragma unroll
            for (int p = 0; p < 4; ++p) b[p] = ys[kk][tx + 16 * p];
#pragma unroll
            for (int q = 0; q < 4; ++q)
#pragma unroll
                for (int p = 0; p < 4; ++p) upd(s0[q][p], s1[q][p], s2[q][p], a[q], b[p]);
        }
        __syncthreads();
    }
    for (int q = 0; q < 4; ++q)
        for (int p = 0; p < 4; ++p) {
            int i = bm + ty + 16 * q, j = bn + tx + 16 * p;
            if (i < m && j < n) out[(size_t)i * n + j] = fin(s0[q][p], s1[q][p], s2[q][p]);
        }
}
static void run(${SIG}, cudaStream_t stream) {
    dist_reg<<<dim3((n + 63) / 64, (m + 63) / 64), dim3(16, 16), 0, stream>>>(${NAMES});
}
"""


def _dist_impls(dt, upd, fin, args):
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), UPD=" ".join(upd) + " (void)s1; (void)s2;", FIN=fin)
    head = tfill(dedent(_D_HEAD), dt, **ctx)

    def code(t, **kw):
        return head + tfill(dedent(t), dt, **{**ctx, **kw})
    return [Impl("naive", "naive", code(_D_NAIVE)), Impl("row_threads", "uncoalesced", code(_D_ROWS)),
            Impl("tiled16", "tiled_shared", code(_D_TILED, TI=16, TY=16)),
            Impl("tiled_coarse", "thread_coarsening", code(_D_TILED, TI=64, TY=16)),
            Impl("register_4x4", "register_tiling", code(_D_REG))]


def distance_tasks(rng) -> list:
    out = []
    gammas = [0.5, 0.1, 0.02, 1.0]
    for k, (name, (upd, fin, tex)) in enumerate(METRICS.items()):
        params = gammas if "${G}" in fin else [None]
        for g in params:
            for dt in (FLOAT, DOUBLE):
                gl = dt.lit(g) if g is not None else ""
                f = tfill(fin.replace("${G}", gl), dt)
                u = [tfill(x, dt) for x in upd]
                variant = f"{name}{'_g' + str(g).replace('.', 'p') if g is not None else ''}_{dt.name}"
                fn = f"distance_matrix_{variant}"
                args = [arg("m", "int", "scalar"), arg("n", "int", "scalar"), arg("d", "int", "scalar"),
                        arg("X", f"const {dt.name}*", "in", "m*d"), arg("Y", f"const {dt.name}*", "in", "n*d"),
                        arg("out", f"{dt.name}*", "out", "m*n")]
                ref = (f"#include <math.h>\n#include <stddef.h>\n\nvoid {fn}({signature(args)}) {{\n"
                       f"    for (int i = 0; i < m; ++i)\n        for (int j = 0; j < n; ++j) {{\n"
                       f"            {dt.name} s0 = 0, s1 = 0, s2 = 0;\n            for (int k = 0; k < d; ++k) {{\n"
                       f"                {dt.name} a = X[(size_t)i * d + k], b = Y[(size_t)j * d + k];\n"
                       f"                {' '.join(u)}\n            }}\n"
                       f"            out[(size_t)i * n + j] = {f};\n            (void)s1; (void)s2;\n        }}\n}}\n")
                cfgs = configs([{"m": 7, "n": 33, "d": 3}, {"m": 100, "n": 37, "d": 17}, {"m": 33, "n": 129, "d": 64}],
                               [{"m": 2048, "n": 2048, "d": 64}, {"m": 1500, "n": 1001, "d": 37}])
                tol = Tolerance(rtol=1e-4, atol=1e-4) if dt is FLOAT else Tolerance(rtol=1e-9, atol=1e-10)
                out.append(c2cuda_task("distance_matrix", variant, fn, ref, args, cfgs, f"{2 * len(upd) + 1}*m*n*d",
                                       f"{dt.size}*(m*d + n*d + m*n)", _dist_impls(dt, u, f, args), tol,
                                       f"{name} between every row of X and every row of Y, {dt.name}"))
            if (k + (g or 0) * 10) % 2 == 0 or g is None:
                targs = [arg("m", "int", "scalar"), arg("n", "int", "scalar"), arg("d", "int", "scalar"),
                         arg("X", "const float*", "in", "1"), arg("Y", "const float*", "in", "1"), arg("out", "float*", "out", "1")]
                gl = repr(g) if g is not None else ""
                module = TorchModule([("x", "torch.rand(m, d) * 2 - 1"), ("y", "torch.rand(n, d) * 2 - 1")],
                                     [f"return {tex.replace('${G}', gl)}"], {"m": 512, "n": 512, "d": 32})
                launch = ("    run((int)dim_of(sizes, 0, 0), (int)dim_of(sizes, 1, 0), (int)dim_of(sizes, 0, 1),\n"
                          "        (const float*)inputs[0], (const float*)inputs[1], (float*)outputs[0], stream);")
                cfgs = configs([{"m": 7, "n": 33, "d": 3}, {"m": 100, "n": 37, "d": 17}, {"m": 33, "n": 129, "d": 64}],
                               [{"m": 1024, "n": 1024, "d": 64}, {"m": 700, "n": 1001, "d": 37}])
                f = tfill(fin.replace("${G}", FLOAT.lit(g) if g is not None else ""), FLOAT)
                out.append(torch_task("distance_matrix", f"{name}{'_g' + str(g).replace('.', 'p') if g is not None else ''}",
                                      module.source(), cfgs, f"{2 * len(upd) + 1}*m*n*d", "4*(m*d + n*d + m*n)",
                                      _dist_impls(FLOAT, [tfill(x, FLOAT) for x in upd], f, targs), launch,
                                      Tolerance(rtol=1e-4, atol=1e-4), f"{name} matrix between the rows of x and y"))
    return out


# --- k-means assignment --------------------------------------------------------------------------------------
_K_METRIC = {"sqeuclid": ("(a - b) * (a - b)", "+"), "manhattan": ("fabs${F}(a - b)", "+"),
             "chebyshev": ("fabs${F}(a - b)", "max"), "neg_dot": ("-(a * b)", "+")}
_K_HEAD = """
__device__ __forceinline__ ${T} dist(const ${T}* p, const ${T}* c, int d) {
    ${T} s = 0;
    for (int k = 0; k < d; ++k) { ${T} a = p[k], b = c[k]; s = ${ACC}; }
    return s;
}
"""
_K_NAIVE = """
// One thread per point, centroids read from global memory.
__global__ void km_naive(${SIG}) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int best = 0;
    ${T} bd = dist(points + (size_t)i * d, cent, d);
    for (int j = 1; j < k; ++j) {
        ${T} dj = dist(points + (size_t)i * d, cent + (size_t)j * d, d);
        if (dj < bd) { bd = dj; best = j; }
    }
    ${STORE}
}
static void run(${SIG}, cudaStream_t stream) {
    km_naive<<<(n + 255) / 256, 256, 0, stream>>>(${NAMES});
}
"""
_K_SHARED = """
// One thread per point (${NT} per block); the centroids staged in shared memory in chunks of 64.
__global__ void __launch_bounds__(${NT}) km_shared(${SIG}) {
    extern __shared__ unsigned char smem[];
    ${T}* cs = reinterpret_cast<${T}*>(smem);
    int i = blockIdx.x * ${NT} + threadIdx.x;
    int best = 0;
    ${T} bd = 0;
    for (int j0 = 0; j0 < k; j0 += 64) {
        int nj = min(64, k - j0);
        __syncthreads();
        for (int e = threadIdx.x; e < nj * d; e += ${NT}) cs[e] = cent[(size_t)j0 * d + e];
        __syncthreads();
        if (i < n)
            for (int j = 0; j < nj; ++j) {
                ${T} dj = dist(points + (size_t)i * d, cs + (size_t)j * d, d);
                if (j0 + j == 0 || dj < bd) { bd = dj; best = j0 + j; }
            }
    }
    if (i < n) { ${STORE} }
}
static void run(${SIG}, cudaStream_t stream) {
    km_shared<<<(n + ${NT} - 1) / ${NT}, ${NT}, sizeof(${T}) * 64 * (size_t)d, stream>>>(${NAMES});
}
"""
_K_WARP = """
// One warp per point: lanes take every 32nd centroid, then a shuffle argmin (ties: lower index).
__global__ void __launch_bounds__(256) km_warp(${SIG}) {
    int i = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (i >= n) return;
    int best = 0x7fffffff;
    ${T} bd = 0;
    for (int j = lane; j < k; j += 32) {
        ${T} dj = dist(points + (size_t)i * d, cent + (size_t)j * d, d);
        if (best == 0x7fffffff || dj < bd) { bd = dj; best = j; }
    }
    for (int o = 16; o > 0; o >>= 1) {
        ${T} od = __shfl_xor_sync(0xffffffffu, bd, o);
        int ob = __shfl_xor_sync(0xffffffffu, best, o);
        if (ob != 0x7fffffff && (best == 0x7fffffff || od < bd || (od == bd && ob < best))) { bd = od; best = ob; }
    }
    if (lane == 0) { ${STORE} }
}
static void run(${SIG}, cudaStream_t stream) {
    km_warp<<<(n + 7) / 8, 256, 0, stream>>>(${NAMES});
}
"""
_K_TWO = """
// Two points per thread (i and i + half): each centroid loaded once for both.
__global__ void km_two(${SIG}) {
    int half = (n + 1) / 2;
    int i0 = blockIdx.x * blockDim.x + threadIdx.x;
    if (i0 >= half) return;
    for (int h = 0; h < 2; ++h) {
        int i = i0 + h * half;
        if (i >= n) break;
        int best = 0;
        ${T} bd = dist(points + (size_t)i * d, cent, d);
        for (int j = 1; j < k; ++j) {
            ${T} dj = dist(points + (size_t)i * d, cent + (size_t)j * d, d);
            if (dj < bd) { bd = dj; best = j; }
        }
        ${STORE}
    }
}
static void run(${SIG}, cudaStream_t stream) {
    km_two<<<((n + 1) / 2 + 127) / 128, 128, 0, stream>>>(${NAMES});
}
"""


def kmeans_tasks(rng) -> list:
    out = []
    for name, (term, op) in _K_METRIC.items():
        for dt in (FLOAT, DOUBLE):
            for with_dist in (False, True):
                acc = f"s + {term}" if op == "+" else f"fmax${{F}}(s, {term})"
                acc = tfill(acc, dt)
                variant = f"{name}{'_with_distance' if with_dist else ''}_{dt.name}"
                fn = f"kmeans_assign_{variant}"
                args = [arg("n", "int", "scalar"), arg("k", "int", "scalar"), arg("d", "int", "scalar"),
                        arg("points", f"const {dt.name}*", "in", "n*d", "randint(-8, 9)"),
                        arg("cent", f"const {dt.name}*", "in", "k*d", "randint(-8, 9)"), arg("assign", "int*", "out", "n")]
                store = "assign[i] = best;"
                if with_dist:
                    args.append(arg("mindist", f"{dt.name}*", "out", "n"))
                    store += " mindist[i] = bd;"
                ref = (f"#include <math.h>\n#include <stddef.h>\n\nvoid {fn}({signature(args)}) {{\n"
                       f"    for (int i = 0; i < n; ++i) {{\n        int best = 0;\n        {dt.name} bd = 0;\n"
                       f"        for (int j = 0; j < k; ++j) {{\n            {dt.name} s = 0;\n"
                       f"            for (int q = 0; q < d; ++q) {{\n"
                       f"                {dt.name} a = points[(size_t)i * d + q], b = cent[(size_t)j * d + q];\n"
                       f"                s = {acc};\n            }}\n"
                       f"            if (j == 0 || s < bd) {{ bd = s; best = j; }}\n        }}\n"
                       f"        {store}\n    }}\n}}\n")
                ctx = dict(SIG=signature(args), NAMES=arg_names(args), ACC=acc, STORE=store)
                head = tfill(dedent(_K_HEAD), dt, **ctx)
                impls = [Impl("naive", "naive", head + tfill(dedent(_K_NAIVE), dt, **ctx)),
                         Impl("shared_centroids", "tiled_shared", head + tfill(dedent(_K_SHARED), dt, NT=256, **ctx)),
                         Impl("warp_per_point", "warp_shuffle", head + tfill(dedent(_K_WARP), dt, **ctx)),
                         Impl("two_points", "thread_coarsening", head + tfill(dedent(_K_TWO), dt, **ctx)),
                         Impl("shared_1024", "block_size_1024", head + tfill(dedent(_K_SHARED), dt, NT=1024, **ctx))]
                cfgs = configs([{"n": 100, "k": 7, "d": 3}, {"n": 1000, "k": 65, "d": 5}, {"n": 4099, "k": 3, "d": 17}],
                               [{"n": 1 << 18, "k": 256, "d": 16}, {"n": 200003, "k": 100, "d": 7}])
                out.append(c2cuda_task("kmeans_assign", variant, fn, ref, args, cfgs, "3*n*k*d", f"{dt.size}*(n*d + k*d) + 4*n",
                                       impls, Tolerance(rtol=0, atol=0),
                                       f"nearest centroid by {name} (first on ties){' and its distance' if with_dist else ''}"))
            if dt is FLOAT:
                tex = {"sqeuclid": "((x[:, None, :] - c[None, :, :]) ** 2).sum(-1)",
                       "manhattan": "(x[:, None, :] - c[None, :, :]).abs().sum(-1)",
                       "chebyshev": "(x[:, None, :] - c[None, :, :]).abs().amax(-1)", "neg_dot": "-(x @ c.t())"}[name]
                module = TorchModule([("x", "torch.randint(-8, 9, (n, d)).float()"),
                                      ("c", "torch.randint(-8, 9, (k, d)).float()")],
                                     [f"return torch.argmin({tex}, dim=1)"], {"n": 4096, "k": 64, "d": 8})
                targs = [arg("n", "int", "scalar"), arg("k", "int", "scalar"), arg("d", "int", "scalar"),
                         arg("points", "const float*", "in", "1"), arg("cent", "const float*", "in", "1"),
                         arg("assign", "long long*", "out", "1")]
                ctx = dict(SIG=signature(targs), NAMES=arg_names(targs), ACC=tfill(f"s + {term}" if op == "+" else
                                                                                    f"fmax${{F}}(s, {term})", FLOAT),
                           STORE="assign[i] = best;")
                head = tfill(dedent(_K_HEAD), FLOAT, **ctx)
                impls = [Impl("naive", "naive", head + tfill(dedent(_K_NAIVE), FLOAT, **ctx)),
                         Impl("shared_centroids", "tiled_shared", head + tfill(dedent(_K_SHARED), FLOAT, NT=256, **ctx)),
                         Impl("warp_per_point", "warp_shuffle", head + tfill(dedent(_K_WARP), FLOAT, **ctx)),
                         Impl("two_points", "thread_coarsening", head + tfill(dedent(_K_TWO), FLOAT, **ctx)),
                         Impl("shared_1024", "block_size_1024", head + tfill(dedent(_K_SHARED), FLOAT, NT=1024, **ctx))]
                launch = ("    run((int)dim_of(sizes, 0, 0), (int)dim_of(sizes, 1, 0), (int)dim_of(sizes, 0, 1),\n"
                          "        (const float*)inputs[0], (const float*)inputs[1], (long long*)outputs[0], stream);")
                cfgs = configs([{"n": 100, "k": 7, "d": 3}, {"n": 1000, "k": 65, "d": 5}, {"n": 4099, "k": 3, "d": 17}],
                               [{"n": 1 << 16, "k": 256, "d": 16}, {"n": 50003, "k": 100, "d": 7}])
                out.append(torch_task("kmeans_assign", name, module.source(), cfgs, "3*n*k*d", "4*(n*d + k*d) + 8*n",
                                      impls, launch, Tolerance(rtol=0, atol=0),
                                      f"index of the nearest centroid by {name} (integer-valued coordinates)"))
    return out


# --- n-body ------------------------------------------------------------------------------------------------
# law: (per-pair contribution given dx, dy, dz, r2 (softened), mj; outputs) C statements
LAWS = {
    "gravity_acc": ("${T} inv = 1.0${C} / sqrt${F}(r2); ${T} s = mj * inv * inv * inv; fx += dx * s; fy += dy * s; fz += dz * s;", 3),
    "gravity_pot": ("fx -= mj / sqrt${F}(r2);", 1),
    "coulomb_acc": ("${T} inv = 1.0${C} / sqrt${F}(r2); ${T} s = -qi * mj * inv * inv * inv; fx += dx * s; fy += dy * s; fz += dz * s;", 3),
    "coulomb_pot": ("fx += qi * mj / sqrt${F}(r2);", 1),
    "yukawa_pot": ("${T} r = sqrt${F}(r2); fx += mj * exp${F}(-r * ${L}) / r;", 1),
    "plummer_acc_r": ("${T} inv = 1.0${C} / sqrt${F}(r2); fx += mj * inv * inv * inv * (dx + dy + dz);", 1),
}
_NB_HEAD = """
#define EPS2 ${EPS2}
__device__ __forceinline__ void interact(${T} xi, ${T} yi, ${T} zi, ${T} qi, ${T} xj, ${T} yj, ${T} zj, ${T} mj,
                                         ${T}& fx, ${T}& fy, ${T}& fz) {
    ${T} dx = xj - xi, dy = yj - yi, dz = zj - zi;
    ${T} r2 = dx * dx + dy * dy + dz * dz + EPS2;
    ${LAW}
}
"""
_NB_NAIVE = """
// One thread per body, all other bodies read from global memory.
__global__ void nb_naive(${SIG}) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    ${LOAD_I}
    ${T} fx = 0, fy = 0, fz = 0;
    for (int j = 0; j < n; ++j) { ${LOAD_J} interact(xi, yi, zi, qi, xj, yj, zj, mj, fx, fy, fz); }
    ${STORE}
}
static void run(${SIG}, cudaStream_t stream) {
    nb_naive<<<(n + 255) / 256, 256, 0, stream>>>(${NAMES});
}
"""
_NB_TILED = """
// Bodies staged in shared memory ${NT} at a time; each thread handles ${PER} bod${PLURAL}${UNROLL_NOTE}.
__global__ void __launch_bounds__(${NT}) nb_tiled(${SIG}) {
    __shared__ ${T} sx[${NT}], sy[${NT}], sz[${NT}], sm[${NT}];
    int base = blockIdx.x * ${NT} * ${PER} + threadIdx.x;
    ${T} px[${PER}], py[${PER}], pz[${PER}], pq[${PER}], accx[${PER}], accy[${PER}], accz[${PER}];
    for (int h = 0; h < ${PER}; ++h) {
        int i = base + h * ${NT};
        ${T} xi = 0, yi = 0, zi = 0, qi = 0;
        if (i < n) { ${LOAD_I_NODECL} }
        px[h] = xi; py[h] = yi; pz[h] = zi; pq[h] = qi; accx[h] = accy[h] = accz[h] = 0;
    }
    for (int j0 = 0; j0 < n; j0 += ${NT}) {
        int j = j0 + threadIdx.x;
        if (j < n) { ${LOAD_J} sx[threadIdx.x] = xj; sy[threadIdx.x] = yj; sz[threadIdx.x] = zj; sm[threadIdx.x] = mj; }
        __syncthreads();
        int nj = min(${NT}, n - j0);
        ${PRAGMA}
        for (int t = 0; t < nj; ++t)
            for (int h = 0; h < ${PER}; ++h)
                interact(px[h], py[h], pz[h], pq[h], sx[t], sy[t], sz[t], sm[t], accx[h], accy[h], accz[h]);
        __syncthreads();
    }
    for (int h = 0; h < ${PER}; ++h) {
        int i = base + h * ${NT};
        ${T} fx = accx[h], fy = accy[h], fz = accz[h];
        if (i < n) { ${STORE} }
    }
}
static void run(${SIG}, cudaStream_t stream) {
    nb_tiled<<<(n + ${NT} * ${PER} - 1) / (${NT} * ${PER}), ${NT}, 0, stream>>>(${NAMES});
}
"""


def nbody_tasks(rng) -> list:
    out = []
    for k, (law, (stmt, nout)) in enumerate(LAWS.items()):
        for e, eps in enumerate((0.01, 0.05, 0.2)):
            for layout in ("soa", "packed"):
                for dt in ((FLOAT, DOUBLE) if (k + e) % 2 == 0 else (FLOAT,)):
                    out.append(_nbody_c(law, stmt, nout, eps, layout, dt, k))
            out.append(_nbody_torch(law, eps))
    return out


def _nbody_parts(law, stmt, nout, eps, layout, dt):
    charged = law.startswith("coulomb")
    if layout == "soa":
        pos = [arg(c, f"const {dt.name}*", "in", "n") for c in ("x", "y", "z")]
        pos.append(arg("m", f"const {dt.name}*", "in", "n", "uniform(0.1, 1)" if not charged else "uniform(-1, 1)"))
        lj = "${T} xj = x[j], yj = y[j], zj = z[j], mj = m[j];"
        li = "xi = x[i]; yi = y[i]; zi = z[i]; qi = m[i];"
    else:
        pos = [arg("body", f"const {dt.name}*", "in", "4*n", "uniform(0.1, 1)" if not charged else "uniform(-1, 1)")]
        lj = "${T} xj = body[4 * j], yj = body[4 * j + 1], zj = body[4 * j + 2], mj = body[4 * j + 3];"
        li = "xi = body[4 * i]; yi = body[4 * i + 1]; zi = body[4 * i + 2]; qi = body[4 * i + 3];"
    outs = [arg(c, f"{dt.name}*", "out", "n") for c in (("ax", "ay", "az") if nout == 3 else ("phi",))]
    store = "ax[i] = fx; ay[i] = fy; az[i] = fz;" if nout == 3 else "phi[i] = fx;"
    args = [arg("n", "int", "scalar")] + pos + outs
    law_c = stmt.replace("${L}", dt.lit(2.0))
    return args, li, lj, store, law_c


def _nbody_impls(dt, eps, args, li, lj, store, law_c):
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), EPS2=dt.lit(eps * eps), LAW=tfill(law_c, dt),
               LOAD_I=tfill("${T} xi, yi, zi, qi; " + li, dt), LOAD_I_NODECL=li, LOAD_J=tfill(lj, dt), STORE=store)
    head = tfill(dedent(_NB_HEAD), dt, **ctx)

    def tiled(nt, per, unroll):
        return head + tfill(dedent(_NB_TILED), dt, NT=nt, PER=per, PLURAL="y" if per == 1 else "ies",
                            UNROLL_NOTE=", inner loop unrolled by 8" if unroll else "",
                            PRAGMA="#pragma unroll 8" if unroll else "", **ctx)
    return [Impl("naive", "naive", head + tfill(dedent(_NB_NAIVE), dt, **ctx)),
            Impl("tiled256", "tiled_shared", tiled(256, 1, False)), Impl("tiled_unroll", "loop_unrolling", tiled(256, 1, True)),
            Impl("coarse2", "thread_coarsening", tiled(128, 2, False)), Impl("tiled64", "block_size_64", tiled(64, 1, False))]


def _nbody_c(law, stmt, nout, eps, layout, dt, k):
    args, li, lj, store, law_c = _nbody_parts(law, stmt, nout, eps, layout, dt)
    variant = f"{law}_eps{str(eps).replace('.', 'p')}_{layout}_{dt.name}"
    fn = f"nbody_{variant}"
    T = dt.name
    ref = (f"#include <math.h>\n\nvoid {fn}({signature(args)}) {{\n    for (int i = 0; i < n; ++i) {{\n"
           f"        {T} xi, yi, zi, qi;\n        {li}\n        {T} fx = 0, fy = 0, fz = 0;\n"
           f"        for (int j = 0; j < n; ++j) {{\n            {tfill(lj, dt)}\n"
           f"            {T} dx = xj - xi, dy = yj - yi, dz = zj - zi;\n"
           f"            {T} r2 = dx * dx + dy * dy + dz * dz + {dt.lit(eps * eps)};\n"
           f"            {tfill(law_c, dt)}\n        }}\n        {store}\n        (void)fy; (void)fz; (void)qi;\n    }}\n}}\n")
    cfgs = configs([{"n": 7}, {"n": 100}, {"n": 1000}], [{"n": 16384 if dt is FLOAT else 8192}, {"n": 10007 if dt is FLOAT else 5003}])
    return c2cuda_task("nbody", variant, fn, ref, args, cfgs, "20*n*n", f"{dt.size * 4}*n + {dt.size * nout}*n",
                       _nbody_impls(dt, eps, args, li, lj, store, law_c),
                       Tolerance(rtol=1e-3, atol=1e-3) if dt is FLOAT else Tolerance(rtol=1e-9, atol=1e-9),
                       f"{law.replace('_', ' ')} of n bodies (softening {eps}), {layout} layout, {dt.name}")


def _nbody_torch(law, eps):
    e2 = eps * eps
    lines = ["d = pos[None, :, :] - pos[:, None, :]", f"r2 = (d * d).sum(-1) + {e2!r}", "mj = m[None, :]"]
    ret = {"gravity_acc": ["s = mj / (r2 * torch.sqrt(r2))", "return (d * s[:, :, None]).sum(1)"],
           "gravity_pot": ["return -(mj / torch.sqrt(r2)).sum(1)"],
           "coulomb_acc": ["s = -m[:, None] * mj / (r2 * torch.sqrt(r2))", "return (d * s[:, :, None]).sum(1)"],
           "coulomb_pot": ["return (m[:, None] * mj / torch.sqrt(r2)).sum(1)"],
           "yukawa_pot": ["r = torch.sqrt(r2)", "return (mj * torch.exp(-r * 2.0) / r).sum(1)"],
           "plummer_acc_r": ["return (mj / (r2 * torch.sqrt(r2)) * d.sum(-1)).sum(1)"]}[law]
    module = TorchModule([("pos", "torch.rand(n, 3)"), ("m", "torch.rand(n) * 0.9 + 0.1")], lines + ret, {"n": 2048})
    stmt, nout = LAWS[law]
    # light inputs: pos (n, 3) and m (n); kernels read a packed array of 4 per body built by a tiny pack kernel
    args, li, lj, store, law_c = _nbody_parts(law, stmt, nout, eps, "packed", FLOAT)
    if nout == 3:  # torch returns (n, 3): write the three components interleaved
        store = "ax[3 * i] = fx; ax[3 * i + 1] = fy; ax[3 * i + 2] = fz;"
        args = args[:2] + [arg("ax", "float*", "out", "1")]
    impls = _nbody_impls(FLOAT, eps, args, li, lj, store, law_c)
    pack = ("__global__ void pack_bodies(int n, const float* pos, const float* m, float* body) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) { body[4 * i] = pos[3 * i]; body[4 * i + 1] = pos[3 * i + 1]; body[4 * i + 2] = pos[3 * i + 2];"
            " body[4 * i + 3] = m[i]; }\n}\n__device__ float g_body[4 * 65536];\n")
    impls = [type(i)(i.name, i.strategy, pack + i.body) for i in impls]
    launch = ("    int n = (int)dim_of(sizes, 0, 0);\n    if (n > 65536) return 1;\n    float* body = nullptr;\n"
              "    cudaGetSymbolAddress((void**)&body, g_body);\n"
              "    pack_bodies<<<(n + 255) / 256, 256, 0, stream>>>(n, (const float*)inputs[0], (const float*)inputs[1], body);\n"
              "    run(n, body, (float*)outputs[0], stream);")
    cfgs = configs([{"n": 7}, {"n": 100}, {"n": 1000}], [{"n": 4096}, {"n": 3001}])
    return torch_task("nbody", f"{law}_eps{str(eps).replace('.', 'p')}", module.source(), cfgs, "20*n*n", f"16*n + {4 * nout}*n",
                      impls, launch, Tolerance(rtol=1e-3, atol=1e-3), f"{law.replace('_', ' ')} of n bodies (softening {eps})")


def generate(rng) -> list:
    return distance_tasks(rng) + kmeans_tasks(rng) + nbody_tasks(rng)
