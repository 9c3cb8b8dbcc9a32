"""Image families: image_pointwise (per-pixel colour transforms of interleaved RGB images: colour
matrices, weighted grey levels, max/min/chroma channels, with gamma or clamping), resize (bilinear
or nearest resampling of planes to a new size, half-pixel centres as in F.interpolate) and pooling
(max, average, min, RMS, max-abs and mean-abs pooling over k x k windows with stride s).

image_pointwise: naive, grid_stride, unroll4, strided_lanes (uncoalesced) and smem_staged (pixels
moved through shared memory so global reads and writes are flat and coalesced).
resize: naive, y_threads (uncoalesced), coarse4 (4 rows per thread), row_block (a block per output
row with the column indices and weights in shared memory), planes_inner (a thread per pixel
position looping over the planes). pooling: naive, y_threads, coarse2 (two outputs per thread),
shared_tile (the input window of 32 x 8 outputs in shared memory), flat (1-D indexing).
"""
from __future__ import annotations

from pipeline.tasks.families._kit import (DOUBLE, FLOAT, UNARY, Impl, TorchModule, arg, arg_names, c2cuda_task, configs,
                                         dedent, signature, tfill, torch_task)
from pipeline.tasks.families.pooling import pooling_tasks
from pipeline.core.records import Tolerance

TOL = Tolerance(rtol=1e-4, atol=1e-5)
DTOL = Tolerance(rtol=1e-10, atol=1e-11)
GAMMA_TOL = Tolerance(rtol=1e-3, atol=1e-4)
"""x^0.45 near 0 multiplies the rounding error of a colour matrix whose terms cancel (the slope is
unbounded at 0): float results differ by ~0.3 % there between two correct evaluation orders."""

# --- per-pixel colour transforms -----------------------------------------------------------------------
_PIX_HEAD = """
#define CO ${CO}
__device__ __forceinline__ void pix(${T} r, ${T} g, ${T} b, ${T}* o) {
    ${BODY}
}
"""
_PIX_NAIVE = """
// One thread per pixel.
__global__ void px_naive(${SIG}) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    ${T} o[CO];
    pix(rgb[3 * p], rgb[3 * p + 1], rgb[3 * p + 2], o);
    for (int c = 0; c < CO; ++c) out[(size_t)CO * p + c] = o[c];
}
static void run(${SIG}, cudaStream_t stream) {
    px_naive<<<(n + 255) / 256, 256, 0, stream>>>(${NAMES});
}
"""
_PIX_GRID = """
// Grid-stride loop over pixels with a grid sized to the GPU.
__global__ void __launch_bounds__(256) px_grid(${SIG}) {
    for (int p = blockIdx.x * 256 + threadIdx.x; p < n; p += gridDim.x * 256) {
        ${T} o[CO];
        pix(rgb[3 * p], rgb[3 * p + 1], rgb[3 * p + 2], o);
        for (int c = 0; c < CO; ++c) out[(size_t)CO * p + c] = o[c];
    }
}
static void run(${SIG}, cudaStream_t stream) {
    int blocks = (n + 255) / 256;
    if (blocks > 132 * 4) blocks = 132 * 4;
    px_grid<<<blocks, 256, 0, stream>>>(${NAMES});
}
"""
_PIX_UNROLL = """
// Four pixels per thread, 256 apart.
__global__ void __launch_bounds__(256) px_unroll(${SIG}) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        int p = blockIdx.x * 1024 + q * 256 + threadIdx.x;
        if (p >= n) return;
        ${T} o[CO];
        pix(rgb[3 * p], rgb[3 * p + 1], rgb[3 * p + 2], o);
        for (int c = 0; c < CO; ++c) out[(size_t)CO * p + c] = o[c];
    }
}
static void run(${SIG}, cudaStream_t stream) {
    px_unroll<<<(n + 1023) / 1024, 256, 0, stream>>>(${NAMES});
}
"""
_PIX_STRIDED = """
// Uncoalesced: lane l of a warp takes the l-th of 32 contiguous chunks of the image.
__global__ void px_strided(${SIG}) {
    int chunk = (n + 31) / 32;
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int p = (t % 32) * chunk + t / 32;
    if (t >= 32 * chunk || p >= n) return;
    ${T} o[CO];
    pix(rgb[3 * p], rgb[3 * p + 1], rgb[3 * p + 2], o);
    for (int c = 0; c < CO; ++c) out[(size_t)CO * p + c] = o[c];
}
static void run(${SIG}, cudaStream_t stream) {
    int threads = 32 * ((n + 31) / 32);
    px_strided<<<(threads + 255) / 256, 256, 0, stream>>>(${NAMES});
}
"""
_PIX_SMEM = """
// 256 pixels per block staged through shared memory: the block reads its 3 x 256 input values and
// writes its CO x 256 outputs as flat, fully coalesced runs.
__global__ void __launch_bounds__(256) px_smem(${SIG}) {
    __shared__ ${T} sin_[3 * 256], sout[CO * 256];
    int p0 = blockIdx.x * 256;
    int np = min(256, n - p0);
    for (int e = threadIdx.x; e < 3 * np; e += 256) sin_[e] = rgb[(size_t)3 * p0 + e];
    __syncthreads();
    if (threadIdx.x < np) {
        ${T} o[CO];
        pix(sin_[3 * threadIdx.x], sin_[3 * threadIdx.x + 1], sin_[3 * threadIdx.x + 2], o);
        for (int c = 0; c < CO; ++c) sout[CO * threadIdx.x + c] = o[c];
    }
    __syncthreads();
    for (int e = threadIdx.x; e < CO * np; e += 256) out[(size_t)CO * p0 + e] = sout[e];
}
static void run(${SIG}, cudaStream_t stream) {
    px_smem<<<(n + 255) / 256, 256, 0, stream>>>(${NAMES});
}
"""


def _pix_impls(dt, body, co, args):
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), CO=co, BODY=body)
    head = tfill(dedent(_PIX_HEAD), dt, **ctx)

    def code(t):
        return head + tfill(dedent(t), dt, **ctx)
    return [Impl("naive", "naive", code(_PIX_NAIVE)), Impl("grid_stride", "coalesced", code(_PIX_GRID)),
            Impl("unroll4", "thread_coarsening", code(_PIX_UNROLL)), Impl("strided_lanes", "uncoalesced", code(_PIX_STRIDED)),
            Impl("smem_staged", "shared_staging", code(_PIX_SMEM))]


_PIX_POST = {"none": ("${v}", "{}"), "clamp01": ("fmin${F}(fmax${F}(${v}, 0.0${C}), 1.0${C})", "torch.clamp({}, 0.0, 1.0)"),
             "gamma": ("pow${F}(fmax${F}(${v}, 0.0${C}), 0.45${C})", "torch.pow(torch.clamp({}, min=0.0), 0.45)"),
             "sigmoid": ("1.0${C} / (1.0${C} + exp${F}(-4.0${C} * (${v} - 0.5${C})))", "torch.sigmoid(4.0 * ({} - 0.5))")}


def pointwise_tasks(rng) -> list:
    out = []
    k = 0
    kinds = []
    for i in range(24):
        kinds.append(("matrix", [[round(float(v), 3) for v in rng.uniform(-0.5, 1.0, 3)] for _ in range(3)],
                      [round(float(v), 3) for v in rng.uniform(-0.1, 0.1, 3)]))
    for i in range(10):
        kinds.append(("gray", [round(float(v), 3) for v in rng.dirichlet([2, 3, 1])], None))
    kinds += [("maxc", None, None), ("minc", None, None), ("chroma", None, None), ("saturation", None, None)]
    for kind, m, bvec in kinds:
        for post in ("none", "clamp01", "gamma", "sigmoid"):
            if (k % 4 == 3 and kind == "matrix") or (kind == "gray" and post == "none" and k % 2):
                k += 1
                continue
            co = 3 if kind == "matrix" else 1
            if kind == "matrix":
                stmts = [f"o[{c}] = {' + '.join(f'{FLOAT.lit(m[c][j])[:-1]}${{C}} * {ch}' for j, ch in enumerate('rgb'))}"
                         f" + {FLOAT.lit(bvec[c])[:-1]}${{C}};" for c in range(3)]
                tex = (f"x @ torch.tensor({m}, dtype=x.dtype, device=x.device).t() + "
                       f"torch.tensor({bvec}, dtype=x.dtype, device=x.device)")
            elif kind == "gray":
                stmts = [f"o[0] = {' + '.join(f'{FLOAT.lit(m[j])[:-1]}${{C}} * {ch}' for j, ch in enumerate('rgb'))};"]
                tex = f"(x * torch.tensor({m}, dtype=x.dtype, device=x.device)).sum(-1)"
            else:
                expr = {"maxc": "fmax${F}(r, fmax${F}(g, b))", "minc": "fmin${F}(r, fmin${F}(g, b))",
                        "chroma": "fmax${F}(r, fmax${F}(g, b)) - fmin${F}(r, fmin${F}(g, b))",
                        "saturation": "(fmax${F}(r, fmax${F}(g, b)) - fmin${F}(r, fmin${F}(g, b))) / (fmax${F}(r, fmax${F}(g, b)) + 1.0e-3${C})"}[kind]
                stmts = [f"o[0] = {expr};"]
                tex = {"maxc": "x.amax(-1)", "minc": "x.amin(-1)", "chroma": "x.amax(-1) - x.amin(-1)",
                       "saturation": "(x.amax(-1) - x.amin(-1)) / (x.amax(-1) + 1e-3)"}[kind]
            cpost, tpost = _PIX_POST[post]
            stmts += [f"o[{c}] = {cpost.replace('${v}', f'o[{c}]')};" for c in range(co)] if post != "none" else []
            body = "\n    ".join(stmts)
            variant = f"{kind}{k}_{post}"
            if k % 3 == 0:
                targs = [arg("n", "int", "scalar"), arg("rgb", "const float*", "in", "1"), arg("out", "float*", "out", "1")]
                module = TorchModule([("x", "torch.rand(h, w, 3)")], [f"v = {tex}", f"return {tpost.format('v')}"],
                                     {"h": 512, "w": 512})
                launch = ("    run((int)(dim_of(sizes, 0, 0) * dim_of(sizes, 0, 1)), (const float*)inputs[0], "
                          "(float*)outputs[0], stream);")
                cfgs = configs([{"h": 7, "w": 33}, {"h": 100, "w": 41}, {"h": 1, "w": 4099}],
                               [{"h": 2048, "w": 2048}, {"h": 1999, "w": 1001}])
                out.append(torch_task("image_pointwise", variant, module.source(), cfgs, "20*h*w", f"{4 * (3 + co)}*h*w",
                                      _pix_impls(FLOAT, tfill(body, FLOAT), co, targs), launch,
                                      GAMMA_TOL if post == "gamma" else TOL,
                                      f"{kind} colour transform of an RGB image, then {post}"))
            else:
                dt = (FLOAT, DOUBLE)[k % 2]
                fn = f"image_pointwise_{variant}_{dt.name}"
                args = [arg("n", "int", "scalar"), arg("rgb", f"const {dt.name}*", "in", "3*n", "uniform(0, 1)"),
                        arg("out", f"{dt.name}*", "out", f"{co}*n")]
                ref = (f"#include <math.h>\n#include <stddef.h>\n\nvoid {fn}({signature(args)}) {{\n"
                       f"    for (int p = 0; p < n; ++p) {{\n        {dt.name} r = rgb[3 * p], g = rgb[3 * p + 1], b = rgb[3 * p + 2];\n"
                       f"        {dt.name} o[{co}];\n        {tfill(body, dt).replace(chr(10) + '    ', chr(10) + '        ')}\n"
                       f"        for (int c = 0; c < {co}; ++c) out[(size_t){co} * p + c] = o[c];\n    }}\n}}\n")
                big = (1 << 22) if dt is FLOAT else (1 << 21)
                cfgs = configs([{"n": 1000}, {"n": 4099}, {"n": 100003}], [{"n": big}, {"n": big * 5 // 8 + 1}])
                out.append(c2cuda_task("image_pointwise", f"{variant}_{dt.name}", fn, ref, args, cfgs, "20*n",
                                       f"{dt.size * (3 + co)}*n", _pix_impls(dt, tfill(body, dt), co, args),
                                       (GAMMA_TOL if post == "gamma" else TOL) if dt is FLOAT else DTOL, f"{kind} colour transform of interleaved RGB pixels, "
                                       f"then {post}, {dt.name}"))
            k += 1
    return out


# --- resize -----------------------------------------------------------------------------------------------
_RS_HEAD = """
__device__ __forceinline__ ${T} post(${T} x) { return ${POST}; }
__device__ __forceinline__ void src_index(int o, int in_size, int out_size, int& i0, int& i1, ${T}& l) {
    ${INDEX}
}
__device__ __forceinline__ ${T} sample(const ${T}* plane, int w, int y0, int y1, ${T} ly, int x0, int x1, ${T} lx) {
    ${SAMPLE}
}
"""
_BILINEAR_INDEX = """${T} scale = (${T})in_size / (${T})out_size;
    ${T} s = ((${T})o + 0.5${C}) * scale - 0.5${C};
    if (s < 0.0${C}) s = 0.0${C};
    i0 = (int)s;
    i1 = i0 < in_size - 1 ? i0 + 1 : i0;
    l = (${T})(s - (${T})i0);"""
"""Source coordinates in the element type: computed in float, a double task's weights would carry
float rounding (and nvcc's fused multiply-add rounds them unlike gcc), far beyond double tolerance."""
_NEAREST_INDEX = """float scale = (float)in_size / (float)out_size;
    i0 = (int)floorf((float)o * scale);
    if (i0 > in_size - 1) i0 = in_size - 1;
    i1 = i0;
    l = 0;"""
_BILINEAR_SAMPLE = """return (1 - ly) * ((1 - lx) * plane[(size_t)y0 * w + x0] + lx * plane[(size_t)y0 * w + x1])
         + ly * ((1 - lx) * plane[(size_t)y1 * w + x0] + lx * plane[(size_t)y1 * w + x1]);"""
_NEAREST_SAMPLE = "return plane[(size_t)y0 * w + x0];"
_RS_NAIVE = """
// One thread per output pixel, threadIdx.x along x.
__global__ void rs_naive(${SIG}) {
    int ox = blockIdx.x * 32 + threadIdx.x, oy = blockIdx.y * 8 + threadIdx.y, p = blockIdx.z;
    if (ox >= w2 || oy >= h2) return;
    int y0, y1, x0, x1; ${T} ly, lx;
    src_index(oy, h, h2, y0, y1, ly);
    src_index(ox, w, w2, x0, x1, lx);
    output[((size_t)p * h2 + oy) * w2 + ox] = post(sample(input + (size_t)p * h * w, w, y0, y1, ly, x0, x1, lx));
}
static void run(${SIG}, cudaStream_t stream) {
    rs_naive<<<dim3((w2 + 31) / 32, (h2 + 7) / 8, planes), dim3(32, 8), 0, stream>>>(${NAMES});
}
"""
_RS_Y = """
// One thread per output pixel with threadIdx.x along y: uncoalesced loads and stores.
__global__ void rs_y(${SIG}) {
    int oy = blockIdx.x * 32 + threadIdx.x, ox = blockIdx.y * 8 + threadIdx.y, p = blockIdx.z;
    if (ox >= w2 || oy >= h2) return;
    int y0, y1, x0, x1; ${T} ly, lx;
    src_index(oy, h, h2, y0, y1, ly);
    src_index(ox, w, w2, x0, x1, lx);
    output[((size_t)p * h2 + oy) * w2 + ox] = post(sample(input + (size_t)p * h * w, w, y0, y1, ly, x0, x1, lx));
}
static void run(${SIG}, cudaStream_t stream) {
    rs_y<<<dim3((h2 + 31) / 32, (w2 + 7) / 8, planes), dim3(32, 8), 0, stream>>>(${NAMES});
}
"""
_RS_COARSE = """
// Four output rows per thread: the column index and weight computed once.
__global__ void __launch_bounds__(256) rs_coarse(${SIG}) {
    int ox = blockIdx.x * 32 + threadIdx.x, p = blockIdx.z;
    if (ox >= w2) return;
    int x0, x1; ${T} lx;
    src_index(ox, w, w2, x0, x1, lx);
    const ${T}* plane = input + (size_t)p * h * w;
    for (int q = 0; q < 4; ++q) {
        int oy = (blockIdx.y * 8 + threadIdx.y) * 4 + q;
        if (oy >= h2) break;
        int y0, y1; ${T} ly;
        src_index(oy, h, h2, y0, y1, ly);
        output[((size_t)p * h2 + oy) * w2 + ox] = post(sample(plane, w, y0, y1, ly, x0, x1, lx));
    }
}
static void run(${SIG}, cudaStream_t stream) {
    rs_coarse<<<dim3((w2 + 31) / 32, (h2 + 31) / 32, planes), dim3(32, 8), 0, stream>>>(${NAMES});
}
"""
_RS_ROW = """
// One block per output row: the column indices and weights computed into shared memory once per
// row, then the block strides along the row.
__global__ void __launch_bounds__(256) rs_row(${SIG}) {
    extern __shared__ unsigned char smem[];
    int* xs0 = reinterpret_cast<int*>(smem);
    int* xs1 = xs0 + w2;
    ${T}* lxs = reinterpret_cast<${T}*>(smem + ((size_t)2 * w2 * sizeof(int) + 15) / 16 * 16);
    int oy = blockIdx.x, p = blockIdx.y;
    for (int ox = threadIdx.x; ox < w2; ox += 256) src_index(ox, w, w2, xs0[ox], xs1[ox], lxs[ox]);
    __syncthreads();
    int y0, y1; ${T} ly;
    src_index(oy, h, h2, y0, y1, ly);
    const ${T}* plane = input + (size_t)p * h * w;
    for (int ox = threadIdx.x; ox < w2; ox += 256)
        output[((size_t)p * h2 + oy) * w2 + ox] = post(sample(plane, w, y0, y1, ly, xs0[ox], xs1[ox], lxs[ox]));
}
static void run(${SIG}, cudaStream_t stream) {
    size_t smem = ((size_t)2 * w2 * sizeof(int) + 15) / 16 * 16 + sizeof(${T}) * (size_t)w2;
    rs_row<<<dim3(h2, planes), 256, smem, stream>>>(${NAMES});
}
"""
_RS_PLANES = """
// One thread per output position looping over all planes (indices and weights computed once).
__global__ void rs_planes(${SIG}) {
    int ox = blockIdx.x * 32 + threadIdx.x, oy = blockIdx.y * 8 + threadIdx.y;
    if (ox >= w2 || oy >= h2) return;
    int y0, y1, x0, x1; ${T} ly, lx;
    src_index(oy, h, h2, y0, y1, ly);
    src_index(ox, w, w2, x0, x1, lx);
    for (int p = 0; p < planes; ++p)
        output[((size_t)p * h2 + oy) * w2 + ox] = post(sample(input + (size_t)p * h * w, w, y0, y1, ly, x0, x1, lx));
}
static void run(${SIG}, cudaStream_t stream) {
    rs_planes<<<dim3((w2 + 31) / 32, (h2 + 7) / 8), dim3(32, 8), 0, stream>>>(${NAMES});
}
"""


def _rs_impls(dt, mode, post, args):
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), POST=tfill(UNARY[post].c, dt, x="x"))
    ctx["INDEX"] = tfill(_BILINEAR_INDEX if mode == "bilinear" else _NEAREST_INDEX, dt)
    ctx["SAMPLE"] = _BILINEAR_SAMPLE if mode == "bilinear" else _NEAREST_SAMPLE + " (void)y1; (void)ly; (void)x1; (void)lx;"
    head = tfill(dedent(_RS_HEAD), dt, **ctx)

    def code(t):
        return head + tfill(dedent(t), dt, **ctx)
    return [Impl("naive", "naive", code(_RS_NAIVE)), Impl("y_threads", "uncoalesced", code(_RS_Y)),
            Impl("coarse4", "thread_coarsening", code(_RS_COARSE)), Impl("row_block", "shared_indices", code(_RS_ROW)),
            Impl("planes_inner", "plane_loop", code(_RS_PLANES))]


def _rs_ref(dt, mode, post, fn, args):
    T = dt.name
    index = tfill(_BILINEAR_INDEX if mode == "bilinear" else _NEAREST_INDEX, dt)
    sample = (_BILINEAR_SAMPLE if mode == "bilinear" else _NEAREST_SAMPLE).replace("plane[", "pl[")
    return (f"#include <math.h>\n#include <stddef.h>\n\n"
            f"static void src_index(int o, int in_size, int out_size, int* pi0, int* pi1, {T}* pl) {{\n"
            f"    int i0, i1; {T} l;\n    {index}\n    *pi0 = i0; *pi1 = i1; *pl = l;\n}}\n\n"
            f"void {fn}({signature(args)}) {{\n    for (int p = 0; p < planes; ++p)\n"
            f"        for (int oy = 0; oy < h2; ++oy)\n            for (int ox = 0; ox < w2; ++ox) {{\n"
            f"                int y0, y1, x0, x1; {T} ly, lx;\n"
            f"                src_index(oy, h, h2, &y0, &y1, &ly);\n                src_index(ox, w, w2, &x0, &x1, &lx);\n"
            f"                const {T}* pl = input + (size_t)p * h * w;\n"
            f"                {T} v;\n                {{ {sample.replace('return', 'v =')} }}\n"
            f"                (void)y1; (void)ly; (void)x1; (void)lx;\n"
            f"                output[((size_t)p * h2 + oy) * w2 + ox] = {tfill(UNARY[post].c, dt, x='v')};\n            }}\n}}\n")


def resize_tasks(rng) -> list:
    out = []
    posts = ["identity", "relu", "tanh", "sigmoid", "square", "abs", "clamp_half", "softsign", "gelu", "sin", "exp",
             "softplus", "silu", "cube"]
    for k, post in enumerate(posts):
        for mode in ("bilinear", "nearest"):
            for dt in (FLOAT, DOUBLE):
                fn = f"resize_{mode}_{post}_{dt.name}"
                args = [arg(s, "int", "scalar") for s in ("planes", "h", "w", "h2", "w2")] + [
                    arg("input", f"const {dt.name}*", "in", "planes*h*w"), arg("output", f"{dt.name}*", "out", "planes*h2*w2")]
                cfgs = configs([{"planes": 1, "h": 7, "w": 9, "h2": 15, "w2": 19}, {"planes": 2, "h": 100, "w": 37, "h2": 33, "w2": 70},
                                {"planes": 3, "h": 31, "w": 64, "h2": 63, "w2": 17}],
                               [{"planes": 4, "h": 1024, "w": 1024, "h2": 2048, "w2": 2048},
                                {"planes": 3, "h": 1999, "w": 1001, "h2": 777, "w2": 1500}])
                out.append(c2cuda_task("resize", f"{mode}_{post}_{dt.name}", fn, _rs_ref(dt, mode, post, fn, args), args, cfgs,
                                       "8*planes*h2*w2", f"{dt.size}*planes*(h2*w2 + min(h*w, 4*h2*w2))",
                                       _rs_impls(dt, mode, post, args), TOL if dt is FLOAT else DTOL,
                                       f"{mode} resampling (half-pixel centres) of each plane to h2 x w2, then {post}"))
        if k < 12:
            module = TorchModule([("x", "torch.randn(planes, 1, h, w)")],
                                 ["v = F.interpolate(x, size=(h2, w2), mode='bilinear', align_corners=False)",
                                  f"return {UNARY[post].texpr('v')}"], {"planes": 4, "h": 256, "w": 256, "h2": 512, "w2": 512})
            targs = [arg(s, "int", "scalar") for s in ("planes", "h", "w", "h2", "w2")] + [
                arg("input", "const float*", "in", "1"), arg("output", "float*", "out", "1")]
            launch = ("    run((int)dim_of(sizes, 0, 0), (int)dim_of(sizes, 0, 2), (int)dim_of(sizes, 0, 3), "
                      "(int)dim_of(sizes, 1, 2), (int)dim_of(sizes, 1, 3),\n        (const float*)inputs[0], (float*)outputs[0], stream);")
            cfgs = configs([{"planes": 1, "h": 7, "w": 9, "h2": 15, "w2": 19}, {"planes": 2, "h": 100, "w": 37, "h2": 33, "w2": 70},
                            {"planes": 3, "h": 31, "w": 64, "h2": 63, "w2": 17}],
                           [{"planes": 4, "h": 1024, "w": 1024, "h2": 2048, "w2": 2048},
                            {"planes": 3, "h": 1999, "w": 1001, "h2": 777, "w2": 1500}])
            out.append(torch_task("resize", f"bilinear_{post}", module.source(), cfgs, "8*planes*h2*w2",
                                  "4*planes*(h2*w2 + min(h*w, 4*h2*w2))", _rs_impls(FLOAT, "bilinear", post, targs), launch,
                                  Tolerance(rtol=1e-4, atol=1e-4), f"bilinear F.interpolate to (h2, w2), then {post}"))
    return out


def generate(rng) -> list:
    return pointwise_tasks(rng) + resize_tasks(rng) + pooling_tasks(rng)
