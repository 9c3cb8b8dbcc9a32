"""Data-movement families: 2-D transposes and 3-D permutations, with a fused element operator.

transpose: out[c, r] = f(in[r, c]) (optionally + other[c, r]); implementations naive (coalesced
reads, strided writes), read_strided (coalesced writes, strided reads), tiled_shared (32 x 32
tile, bank conflicts), tiled_padded (32 x 33 tile) and tiled_coarse (32 x 8 threads, 4 rows each).
permute3d: out = f(in.permute(p)) for the permutations that move the last dimension; naive
(a thread per output element), scatter (a thread per input element), out_coarse4 (4 outputs per
thread), tiled_padded and tiled_shared (a 32 x 32 tile over the input's last dimension and the
dimension that becomes the output's last).
"""
from __future__ import annotations

from pipeline.tasks.families._kit import (DOUBLE, FLOAT, UNARY, DType, Impl, TorchModule, arg, arg_names,
                                         c2cuda_task, configs, dedent, signature, tfill, torch_task)
from pipeline.core.records import Tolerance

INT = DType("int", "", "", 4, "int4", 4, Tolerance(rtol=0, atol=0))
_INT_OPS = {"identity": "${x}", "neg": "(-${x})", "double_plus1": "(2 * ${x} + 1)", "abs": "(${x} < 0 ? -${x} : ${x})"}

_T_NAIVE = """
// One thread per input element: reads are coalesced, writes stride by rows.
__global__ void tr_naive(${SIG}) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) output[(size_t)c * rows + r] = ${EXPR_RC};
}
static void run(${SIG}, cudaStream_t stream) {
    dim3 block(32, 8), grid((cols + 31) / 32, (rows + 7) / 8);
    tr_naive<<<grid, block, 0, stream>>>(${NAMES});
}
"""
_T_READ = """
// One thread per output element: writes are coalesced, reads stride by cols.
__global__ void tr_read(${SIG}) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    int c = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) output[(size_t)c * rows + r] = ${EXPR_RC};
}
static void run(${SIG}, cudaStream_t stream) {
    dim3 block(32, 8), grid((rows + 31) / 32, (cols + 7) / 8);
    tr_read<<<grid, block, 0, stream>>>(${NAMES});
}
"""
_T_TILED = """
// A 32 x 32 tile staged in shared memory (${PAD_NOTE}): coalesced reads and coalesced writes;
// 32 x ${TY} threads, each moving ${PER} elements.
__global__ void __launch_bounds__(32 * ${TY}) tr_tiled(${SIG}) {
    __shared__ ${T} tile[32][32 + ${PAD}];
    int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    for (int j = threadIdx.y; j < 32; j += ${TY}) {
        int r = r0 + j, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[j][threadIdx.x] = input[(size_t)r * cols + c];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < 32; j += ${TY}) {
        int c = c0 + j, r = r0 + threadIdx.x;
        if (r < rows && c < cols) {
            ${T} x = tile[threadIdx.x][j];
            output[(size_t)c * rows + r] = ${EXPR_TILE};
        }
    }
}
static void run(${SIG}, cudaStream_t stream) {
    dim3 block(32, ${TY}), grid((cols + 31) / 32, (rows + 31) / 32);
    tr_tiled<<<grid, block, 0, stream>>>(${NAMES});
}
"""


def _t_impls(dt, op, add, args):
    x_rc = "input[(size_t)r * cols + c]"
    extra = " + other[(size_t)c * rows + r]" if add else ""
    ctx = dict(SIG=signature(args), NAMES=arg_names(args),
               EXPR_RC=tfill(op, dt, x=x_rc) + extra, EXPR_TILE=tfill(op, dt, x="x") + extra)

    def code(t, **kw):
        return tfill(dedent(t), dt, **{**ctx, **kw})
    return [Impl("naive", "naive", code(_T_NAIVE)), Impl("read_strided", "uncoalesced", code(_T_READ)),
            Impl("tiled_shared", "tiled_shared", code(_T_TILED, PAD=0, TY=32, PER=1, PAD_NOTE="no padding: bank conflicts")),
            Impl("tiled_padded", "tiled_padded", code(_T_TILED, PAD=1, TY=32, PER=1, PAD_NOTE="padded to 33 columns")),
            Impl("tiled_coarse", "thread_coarsening", code(_T_TILED, PAD=1, TY=8, PER=4, PAD_NOTE="padded"))]


_CHECK = [{"rows": 7, "cols": 1000}, {"rows": 33, "cols": 4099}, {"rows": 1000, "cols": 33}]
_TIMING = [{"rows": 4096, "cols": 4096}, {"rows": 3001, "cols": 2001}]


def transpose_tasks(rng) -> list:
    out = []
    fops = ["identity", "relu", "abs", "square", "tanh", "sigmoid", "scale_shift", "sin", "gelu", "softsign", "exp",
            "neg_exp_sq", "clamp_half", "silu", "cube", "atan"]
    for k, u in enumerate(fops):
        for add in (False, True):
            for dt in (FLOAT, DOUBLE):
                if (k + add + (dt is DOUBLE)) % 3 == 2:
                    continue
                out.append(_t_c(dt, u, UNARY[u].c, add))
            if (k + add) % 2 == 0:
                out.append(_t_torch(u, add))
    for name, op in _INT_OPS.items():
        for add in (False, True):
            out.append(_t_c(INT, name, op, add))
    return out


def _t_args(dt, add, size_in="rows*cols"):
    a = [arg("rows", "int", "scalar"), arg("cols", "int", "scalar"), arg("input", f"const {dt.name}*", "in", size_in,
                                                                          "randint(-1000, 1000)" if dt is INT else "")]
    if add:
        a.append(arg("other", f"const {dt.name}*", "in", size_in, "randint(-1000, 1000)" if dt is INT else ""))
    return a + [arg("output", f"{dt.name}*", "out", size_in)]


def _t_c(dt, name, op, add):
    variant = f"{name}{'_add' if add else ''}_{dt.name}"
    fn = f"transpose_{variant}"
    args = _t_args(dt, add)
    extra = " + other[(size_t)c * rows + r]" if add else ""
    ref = (f"#include <math.h>\n#include <stddef.h>\n\nvoid {fn}({signature(args)}) {{\n"
           f"    for (int r = 0; r < rows; ++r)\n        for (int c = 0; c < cols; ++c) {{\n"
           f"            {dt.name} x = input[(size_t)r * cols + c];\n"
           f"            output[(size_t)c * rows + r] = {tfill(op, dt, x='x')}{extra};\n        }}\n}}\n")
    tol = dt.tol if dt is not FLOAT else Tolerance(rtol=1e-5, atol=1e-6)
    desc = f"out[c][r] = {name}(in[r][c]){' + other[c][r]' if add else ''}, {dt.name}"
    return c2cuda_task("transpose", variant, fn, ref, args, configs(_CHECK, _TIMING), "rows*cols",
                       f"{dt.size * (3 if add else 2)}*rows*cols", _t_impls(dt, op, add, args), tol, desc)


def _t_torch(u, add):
    args = _t_args(FLOAT, add, "1")
    inputs = [("x", "torch.randn(batch_size, dim)")] + ([("y", "torch.randn(dim, batch_size)")] if add else [])
    body = UNARY[u].texpr("x.t()") + (" + y" if add else "")
    module = TorchModule(inputs, [f"return {body}"], {"batch_size": 1024, "dim": 1024})
    cfgs = configs([{"batch_size": r["rows"], "dim": r["cols"]} for r in _CHECK],
                   [{"batch_size": r["rows"], "dim": r["cols"]} for r in _TIMING])
    ptrs = "(const float*)inputs[0], " + ("(const float*)inputs[1], " if add else "")
    launch = ("    int rows = (int)dim_of(sizes, 0, 0), cols = (int)dim_of(sizes, 0, 1);\n"
              f"    run(rows, cols, {ptrs}(float*)outputs[0], stream);")
    return torch_task("transpose", f"{u}{'_add' if add else ''}", module.source(), cfgs, "batch_size*dim",
                      f"{12 if add else 8}*batch_size*dim", _t_impls(FLOAT, UNARY[u].c, add, args), launch,
                      Tolerance(rtol=1e-5, atol=1e-6), f"{u}(x.t()){' + y' if add else ''}")


# --- 3-D permutations ---------------------------------------------------------------------------------
_P_HEAD = """
// Input (d0, d1, d2) row-major; output dims (d[p0], d[p1], d[p2]); sin/sout: strides of input dim k
// in the input and in the output.
struct Perm { int d[3]; long long sin[3]; long long sout[3]; };
static Perm make_perm(int d0, int d1, int d2) {
    Perm q;
    const int p[3] = {${P0}, ${P1}, ${P2}};
    q.d[0] = d0; q.d[1] = d1; q.d[2] = d2;
    q.sin[0] = (long long)d1 * d2; q.sin[1] = d2; q.sin[2] = 1;
    long long so[3] = {(long long)q.d[p[1]] * q.d[p[2]], q.d[p[2]], 1};
    for (int pos = 0; pos < 3; ++pos) q.sout[p[pos]] = so[pos];
    return q;
}
__device__ __forceinline__ ${T} fop(${T} x) { return ${OP}; }
"""
_P_NAIVE = """
// One thread per output element: output index -> coordinates -> input index; coalesced writes.
__global__ void perm_naive(Perm q, const ${T}* input, ${T}* output, long long total) {
    long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= total) return;
    const int p[3] = {${P0}, ${P1}, ${P2}};
    long long rem = o, src = 0;
    long long e2 = q.d[p[2]], e1 = q.d[p[1]];
    long long i2 = rem % e2; rem /= e2;
    long long i1 = rem % e1; long long i0 = rem / e1;
    src = i0 * q.sin[p[0]] + i1 * q.sin[p[1]] + i2 * q.sin[p[2]];
    output[o] = fop(input[src]);
}
static void run(${SIG}, cudaStream_t stream) {
    Perm q = make_perm(d0, d1, d2);
    long long total = (long long)d0 * d1 * d2;
    perm_naive<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(q, input, output, total);
}
"""
_P_SCATTER = """
// One thread per input element: coalesced reads, writes scattered by the output strides.
__global__ void perm_scatter(Perm q, const ${T}* input, ${T}* output, long long total) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    long long c = i % q.d[2], b = (i / q.d[2]) % q.d[1], a = i / ((long long)q.d[2] * q.d[1]);
    output[a * q.sout[0] + b * q.sout[1] + c * q.sout[2]] = fop(input[i]);
}
static void run(${SIG}, cudaStream_t stream) {
    Perm q = make_perm(d0, d1, d2);
    long long total = (long long)d0 * d1 * d2;
    perm_scatter<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(q, input, output, total);
}
"""
_P_COARSE = """
// Four consecutive output elements per thread (a strided walk of the input for each).
__global__ void perm_coarse(Perm q, const ${T}* input, ${T}* output, long long total) {
    const int p[3] = {${P0}, ${P1}, ${P2}};
    long long o0 = 4 * ((long long)blockIdx.x * blockDim.x + threadIdx.x);
    long long e2 = q.d[p[2]], e1 = q.d[p[1]];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        long long o = o0 + k;
        if (o >= total) return;
        long long i2 = o % e2, i1 = (o / e2) % e1, i0 = o / (e2 * e1);
        output[o] = fop(input[i0 * q.sin[p[0]] + i1 * q.sin[p[1]] + i2 * q.sin[p[2]]]);
    }
}
static void run(${SIG}, cudaStream_t stream) {
    Perm q = make_perm(d0, d1, d2);
    long long total = (long long)d0 * d1 * d2;
    perm_coarse<<<(unsigned)((total + 1023) / 1024), 256, 0, stream>>>(q, input, output, total);
}
"""
_P_TILED = """
// A 32 x 32 shared-memory tile (${PAD_NOTE}) over input dim 2 (contiguous in the input) and input
// dim ${P2} (contiguous in the output); the third dim is the grid's z. Both sides coalesced.
__global__ void __launch_bounds__(256) perm_tiled(Perm q, const ${T}* input, ${T}* output) {
    __shared__ ${T} tile[32][32 + ${PAD}];
    const int dd = ${P2}, de = 3 - 2 - ${P2};  // tile rows: input dim dd; grid z: input dim de
    int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32, e = blockIdx.z;
    int nc = q.d[2], nr = q.d[dd];
    for (int j = threadIdx.y; j < 32; j += 8) {
        int r = r0 + j, c = c0 + threadIdx.x;
        if (r < nr && c < nc) tile[j][threadIdx.x] = input[e * q.sin[de] + r * q.sin[dd] + c];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < 32; j += 8) {
        int c = c0 + j, r = r0 + threadIdx.x;
        if (r < nr && c < nc) output[e * q.sout[de] + c * q.sout[2] + r] = fop(tile[threadIdx.x][j]);
    }
}
static void run(${SIG}, cudaStream_t stream) {
    Perm q = make_perm(d0, d1, d2);
    const int dd = ${P2}, de = 3 - 2 - ${P2};
    dim3 grid((q.d[2] + 31) / 32, (q.d[dd] + 31) / 32, q.d[de]);
    perm_tiled<<<grid, dim3(32, 8), 0, stream>>>(q, input, output);
}
"""
_PERMS = [(0, 2, 1), (2, 1, 0), (1, 2, 0), (2, 0, 1)]


def _p_impls(dt, op, perm, args):
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), P0=perm[0], P1=perm[1], P2=perm[2], OP=tfill(op, dt, x="x"))
    head = tfill(dedent(_P_HEAD), dt, **ctx)

    def code(t, **kw):
        return head + tfill(dedent(t), dt, **{**ctx, **kw})
    return [Impl("naive", "naive", code(_P_NAIVE)), Impl("scatter", "uncoalesced", code(_P_SCATTER)),
            Impl("out_coarse4", "thread_coarsening", code(_P_COARSE)),
            Impl("tiled_padded", "tiled_padded", code(_P_TILED, PAD=1, PAD_NOTE="padded")),
            Impl("tiled_shared", "tiled_shared", code(_P_TILED, PAD=0, PAD_NOTE="unpadded: bank conflicts"))]


_P_CHECK = [{"d0": 3, "d1": 50, "d2": 70}, {"d0": 5, "d1": 33, "d2": 129}, {"d0": 17, "d1": 9, "d2": 31}]
_P_TIMING = [{"d0": 16, "d1": 1024, "d2": 1024}, {"d0": 7, "d1": 999, "d2": 1501}]


def permute_tasks(rng) -> list:
    out = []
    fops = ["identity", "relu", "abs", "tanh", "sigmoid", "square", "scale_shift", "gelu", "sin", "softsign",
            "silu", "clamp_half"]
    for k, u in enumerate(fops):
        for j, perm in enumerate(_PERMS):
            ptxt = "".join(map(str, perm))
            dt = (FLOAT, DOUBLE)[(k + j) % 2]
            fn = f"permute3d_{ptxt}_{u}_{dt.name}"
            args = [arg("d0", "int", "scalar"), arg("d1", "int", "scalar"), arg("d2", "int", "scalar"),
                    arg("input", f"const {dt.name}*", "in", "d0*d1*d2"), arg("output", f"{dt.name}*", "out", "d0*d1*d2")]
            e = ["d0", "d1", "d2"]
            ref = (f"#include <math.h>\n#include <stddef.h>\n\nvoid {fn}({signature(args)}) {{\n"
                   f"    int e[3] = {{d0, d1, d2}};\n    int i[3];\n"
                   f"    for (i[0] = 0; i[0] < d0; ++i[0])\n        for (i[1] = 0; i[1] < d1; ++i[1])\n"
                   f"            for (i[2] = 0; i[2] < d2; ++i[2]) {{\n"
                   f"                {dt.name} x = input[((size_t)i[0] * d1 + i[1]) * d2 + i[2]];\n"
                   f"                size_t o = ((size_t)i[{perm[0]}] * e[{perm[1]}] + i[{perm[1]}]) * e[{perm[2]}] + i[{perm[2]}];\n"
                   f"                output[o] = {tfill(UNARY[u].c, dt, x='x')};\n            }}\n}}\n")
            del e
            out.append(c2cuda_task("permute3d", f"{ptxt}_{u}_{dt.name}", fn, ref, args, configs(_P_CHECK, _P_TIMING),
                                   "d0*d1*d2", f"{2 * dt.size}*d0*d1*d2", _p_impls(dt, UNARY[u].c, perm, args),
                                   dt.tol if dt is DOUBLE else Tolerance(rtol=1e-5, atol=1e-6),
                                   f"out = {u}(in.permute{perm}) for a 3-D {dt.name} array"))
            if (k + j) % 3 == 0:
                targs = [arg("d0", "int", "scalar"), arg("d1", "int", "scalar"), arg("d2", "int", "scalar"),
                         arg("input", "const float*", "in", "1"), arg("output", "float*", "out", "1")]
                module = TorchModule([("x", "torch.randn(d0, d1, d2)")],
                                     [f"return {UNARY[u].texpr(f'x.permute{perm}')}"], {"d0": 8, "d1": 256, "d2": 256})
                launch = ("    run((int)dim_of(sizes, 0, 0), (int)dim_of(sizes, 0, 1), (int)dim_of(sizes, 0, 2),\n"
                          "        (const float*)inputs[0], (float*)outputs[0], stream);")
                out.append(torch_task("permute3d", f"{ptxt}_{u}", module.source(), configs(_P_CHECK, _P_TIMING),
                                      "d0*d1*d2", "8*d0*d1*d2", _p_impls(FLOAT, UNARY[u].c, perm, targs), launch,
                                      Tolerance(rtol=1e-5, atol=1e-6), f"{u}(x.permute{perm})"))
    return out


def generate(rng) -> list:
    return transpose_tasks(rng) + permute_tasks(rng)
