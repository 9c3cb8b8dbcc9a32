"""pooling: k x k windows with stride s over each plane (no padding; output (h - k) / s + 1 rows):
max, average, min, RMS, max-abs and mean-abs pooling, optionally followed by an activation.

Implementations: naive (a thread per output), y_threads (threads along y: uncoalesced),
coarse2 (two neighbouring outputs per thread), shared_tile (the input window of 32 x 8 outputs
staged in shared memory) and flat (1-D indexing over all outputs, 128-thread blocks).
"""
from __future__ import annotations

from pipeline.tasks.families._kit import (DOUBLE, FLOAT, UNARY, Impl, TorchModule, arg, arg_names, c2cuda_task, configs,
                                         dedent, signature, tfill, torch_task)
from pipeline.core.records import Tolerance

# op: (init, update over v, final over acc and KK (window size)), torch expression over x
OPS = {
    "max": ("-1.0e30${C}", "acc = fmax${F}(acc, v);", "acc", "F.max_pool2d(x, K, S)"),
    "avg": ("0.0${C}", "acc += v;", "acc / (${T})KK", "F.avg_pool2d(x, K, S)"),
    "min": ("1.0e30${C}", "acc = fmin${F}(acc, v);", "acc", "-F.max_pool2d(-x, K, S)"),
    "rms": ("0.0${C}", "acc += v * v;", "sqrt${F}(acc / (${T})KK)", "torch.sqrt(F.avg_pool2d(x * x, K, S))"),
    "maxabs": ("0.0${C}", "acc = fmax${F}(acc, fabs${F}(v));", "acc", "F.max_pool2d(torch.abs(x), K, S)"),
    "meanabs": ("0.0${C}", "acc += fabs${F}(v);", "acc / (${T})KK", "F.avg_pool2d(torch.abs(x), K, S)"),
}
_HEAD = """
#define K ${K}
#define S ${S}
#define KK (K * K)
__device__ __forceinline__ ${T} window(const ${T}* plane, int w, int y0, int x0) {
    ${T} acc = ${INIT};
    for (int dy = 0; dy < K; ++dy)
        for (int dx = 0; dx < K; ++dx) { ${T} v = plane[(size_t)(y0 + dy) * w + x0 + dx]; ${UPD} }
    return ${POST};
}
"""
_NAIVE = """
// One thread per output, threadIdx.x along x.
__global__ void pool_naive(${SIG}) {
    int ho = (h - K) / S + 1, wo = (w - K) / S + 1;
    int ox = blockIdx.x * 32 + threadIdx.x, oy = blockIdx.y * 8 + threadIdx.y, p = blockIdx.z;
    if (ox >= wo || oy >= ho) return;
    output[((size_t)p * ho + oy) * wo + ox] = window(input + (size_t)p * h * w, w, oy * S, ox * S);
}
static void run(${SIG}, cudaStream_t stream) {
    int ho = (h - K) / S + 1, wo = (w - K) / S + 1;
    pool_naive<<<dim3((wo + 31) / 32, (ho + 7) / 8, planes), dim3(32, 8), 0, stream>>>(${NAMES});
}
"""
_Y = """
// One thread per output with threadIdx.x along y: uncoalesced.
__global__ void pool_y(${SIG}) {
    int ho = (h - K) / S + 1, wo = (w - K) / S + 1;
    int oy = blockIdx.x * 32 + threadIdx.x, ox = blockIdx.y * 8 + threadIdx.y, p = blockIdx.z;
    if (ox >= wo || oy >= ho) return;
    output[((size_t)p * ho + oy) * wo + ox] = window(input + (size_t)p * h * w, w, oy * S, ox * S);
}
static void run(${SIG}, cudaStream_t stream) {
    int ho = (h - K) / S + 1, wo = (w - K) / S + 1;
    pool_y<<<dim3((ho + 31) / 32, (wo + 7) / 8, planes), dim3(32, 8), 0, stream>>>(${NAMES});
}
"""
_COARSE = """
// Two outputs per thread, 32 apart along x.
__global__ void __launch_bounds__(256) pool_coarse(${SIG}) {
    int ho = (h - K) / S + 1, wo = (w - K) / S + 1;
    int oy = blockIdx.y * 8 + threadIdx.y, p = blockIdx.z;
    if (oy >= ho) return;
    const ${T}* plane = input + (size_t)p * h * w;
    for (int q = 0; q < 2; ++q) {
        int ox = blockIdx.x * 64 + q * 32 + threadIdx.x;
        if (ox < wo) output[((size_t)p * ho + oy) * wo + ox] = window(plane, w, oy * S, ox * S);
    }
}
static void run(${SIG}, cudaStream_t stream) {
    int ho = (h - K) / S + 1, wo = (w - K) / S + 1;
    pool_coarse<<<dim3((wo + 63) / 64, (ho + 7) / 8, planes), dim3(32, 8), 0, stream>>>(${NAMES});
}
"""
_SHARED = """
// The input window of a 32 x 8 output tile staged in shared memory with coalesced loads.
#define TW (31 * S + K)
#define TH (7 * S + K)
__global__ void __launch_bounds__(256) pool_shared(${SIG}) {
    __shared__ ${T} tile[TH][TW];
    int ho = (h - K) / S + 1, wo = (w - K) / S + 1;
    int ox0 = blockIdx.x * 32, oy0 = blockIdx.y * 8, p = blockIdx.z;
    const ${T}* plane = input + (size_t)p * h * w;
    int x0 = ox0 * S, y0 = oy0 * S;
    for (int e = threadIdx.y * 32 + threadIdx.x; e < TH * TW; e += 256) {
        int ty = e / TW, tx = e % TW;
        if (y0 + ty < h && x0 + tx < w) tile[ty][tx] = plane[(size_t)(y0 + ty) * w + x0 + tx];
    }
    __syncthreads();
    int ox = ox0 + threadIdx.x, oy = oy0 + threadIdx.y;
    if (ox >= wo || oy >= ho) return;
    output[((size_t)p * ho + oy) * wo + ox] = window(&tile[0][0], TW, threadIdx.y * S, threadIdx.x * S);
}
static void run(${SIG}, cudaStream_t stream) {
    int ho = (h - K) / S + 1, wo = (w - K) / S + 1;
    pool_shared<<<dim3((wo + 31) / 32, (ho + 7) / 8, planes), dim3(32, 8), 0, stream>>>(${NAMES});
}
"""
_FLAT = """
// 1-D indexing over all outputs of all planes, 128-thread blocks.
__global__ void pool_flat(${SIG}) {
    int ho = (h - K) / S + 1, wo = (w - K) / S + 1;
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)planes * ho * wo) return;
    int ox = (int)(t % wo), oy = (int)(t / wo % ho), p = (int)(t / ((long long)wo * ho));
    output[t] = window(input + (size_t)p * h * w, w, oy * S, ox * S);
}
static void run(${SIG}, cudaStream_t stream) {
    int ho = (h - K) / S + 1, wo = (w - K) / S + 1;
    long long total = (long long)planes * ho * wo;
    pool_flat<<<(unsigned)((total + 127) / 128), 128, 0, stream>>>(${NAMES});
}
"""


def _impls(dt, op, k, s, post, args):
    init, upd, fin, _ = OPS[op]
    post_c = tfill(UNARY[post].c, dt, x=f"({tfill(fin, dt)})")
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), K=k, S=s, INIT=tfill(init, dt), UPD=tfill(upd, dt), POST=post_c)
    head = tfill(dedent(_HEAD), dt, **ctx)

    def code(t):
        return head + tfill(dedent(t), dt, **ctx)
    return [Impl("naive", "naive", code(_NAIVE)), Impl("y_threads", "uncoalesced", code(_Y)),
            Impl("coarse2", "thread_coarsening", code(_COARSE)), Impl("shared_tile", "tiled_shared", code(_SHARED)),
            Impl("flat", "flat_indexing", code(_FLAT))]


WINDOWS = [(2, 2), (3, 2), (3, 1), (4, 4), (5, 3), (2, 1), (3, 3), (7, 4)]


def pooling_tasks(rng) -> list:
    out = []
    posts = ["identity", "relu", "tanh", "sigmoid", "gelu", "silu", "softsign"]
    for i, (k, s) in enumerate(WINDOWS):
        for j, op in enumerate(OPS):
            post = posts[(i + 2 * j) % len(posts)]
            if op == "min" and post == "relu":  # the minimum of a window is almost always negative: relu gives 0
                post = "tanh"
            for dt in ((FLOAT, DOUBLE) if (i + j) % 2 == 0 else (FLOAT,)):
                fn = f"pooling_{op}_k{k}s{s}_{post}_{dt.name}"
                args = [arg(n, "int", "scalar") for n in ("planes", "h", "w")] + [
                    arg("input", f"const {dt.name}*", "in", "planes*h*w"),
                    arg("output", f"{dt.name}*", "out", f"planes*(((h - {k}) // {s}) + 1)*(((w - {k}) // {s}) + 1)")]
                init, upd, fin, _ = OPS[op]
                ref = (f"#include <math.h>\n#include <stddef.h>\n\nvoid {fn}({signature(args)}) {{\n"
                       f"    const int K = {k}, S = {s}, KK = K * K;\n    int ho = (h - K) / S + 1, wo = (w - K) / S + 1;\n"
                       f"    for (int p = 0; p < planes; ++p)\n        for (int oy = 0; oy < ho; ++oy)\n"
                       f"            for (int ox = 0; ox < wo; ++ox) {{\n                {dt.name} acc = {tfill(init, dt)};\n"
                       f"                for (int dy = 0; dy < K; ++dy)\n                    for (int dx = 0; dx < K; ++dx) {{\n"
                       f"                        {dt.name} v = input[((size_t)p * h + oy * S + dy) * w + ox * S + dx];\n"
                       f"                        {tfill(upd, dt)}\n                    }}\n"
                       f"                output[((size_t)p * ho + oy) * wo + ox] = {tfill(UNARY[post].c, dt, x=f'({tfill(fin, dt)})')};\n"
                       f"                (void)KK;\n            }}\n}}\n")
                cfgs = configs([{"planes": 1, "h": 33, "w": 65}, {"planes": 2, "h": 100, "w": 37}, {"planes": 3, "h": 7, "w": 300}],
                               [{"planes": 8, "h": 1024, "w": 1024} if dt is FLOAT else {"planes": 4, "h": 1024, "w": 1024},
                                {"planes": 3, "h": 1999, "w": 1001}])
                out.append(c2cuda_task("pooling", f"{op}_k{k}s{s}_{post}_{dt.name}", fn, ref, args, cfgs,
                                       f"{k * k}*planes*(((h - {k}) // {s}) + 1)*(((w - {k}) // {s}) + 1)",
                                       f"{dt.size}*planes*h*w", _impls(dt, op, k, s, post, args),
                                       Tolerance(rtol=1e-4, atol=1e-5) if dt is FLOAT else Tolerance(rtol=1e-10, atol=1e-11),
                                       f"{op} pooling, {k}x{k} windows, stride {s}, then {post}, {dt.name}"))
            if (i + j) % 2 == 1 or op in ("max", "avg"):
                tex = OPS[op][3].replace("K, S", f"{k}, {s}")
                module = TorchModule([("x", "torch.randn(planes, 1, h, w)")], [f"v = {tex}", f"return {UNARY[post].texpr('v')}"],
                                     {"planes": 8, "h": 512, "w": 512})
                targs = [arg(n, "int", "scalar") for n in ("planes", "h", "w")] + [
                    arg("input", "const float*", "in", "1"), arg("output", "float*", "out", "1")]
                launch = ("    run((int)dim_of(sizes, 0, 0), (int)dim_of(sizes, 0, 2), (int)dim_of(sizes, 0, 3), "
                          "(const float*)inputs[0], (float*)outputs[0], stream);")
                cfgs = configs([{"planes": 1, "h": 33, "w": 65}, {"planes": 2, "h": 100, "w": 37}, {"planes": 3, "h": 7, "w": 300}],
                               [{"planes": 8, "h": 1024, "w": 1024}, {"planes": 3, "h": 1999, "w": 1001}])
                out.append(torch_task("pooling", f"{op}_k{k}s{s}_{post}", module.source(), cfgs,
                                      f"{k * k}*planes*(((h - {k}) // {s}) + 1)*(((w - {k}) // {s}) + 1)", "4*planes*h*w",
                                      _impls(FLOAT, op, k, s, post, targs), launch, Tolerance(rtol=1e-4, atol=1e-5),
                                      f"{op} pooling {k}x{k}/{s} then {post}"))
    return out
