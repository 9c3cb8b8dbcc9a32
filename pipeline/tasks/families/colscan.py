"""Column reductions and row-wise prefix scans of a row-major rows x cols matrix.

col_reduce: out[c] = fin(R over rows of f(x[r, c])); implementations naive (a thread per column,
already coalesced), warp_per_column (lanes walk down a column: uncoalesced, weak), tiled_2d
(32 x 8 threads, partials in shared memory), split_rows_atomic (row chunks combined by atomics)
and vector_loads (a thread per four columns, 16-byte loads when cols allows).
row_scan: inclusive or exclusive scans (sum, max, min) of f(x) along each row; naive (a thread
per row), warp_per_row (shuffle scan of 32-element chunks with a carry), block_per_row
(Hillis-Steele in shared memory), warp_coarse (4 elements per lane, then a shuffle scan) and
block_1024.
"""
from __future__ import annotations

from pipeline.tasks.families._kit import (DOUBLE, FLOAT, UNARY, DType, Impl, TorchModule, arg, arg_names,
                                         c2cuda_task, configs, dedent, signature, tfill, torch_task)
from pipeline.tasks.families.reductions import _ATOMIC_HELPER
from pipeline.core.records import Tolerance

COMB = {"sum": "a + b", "max": "fmax${F}(a, b)", "min": "fmin${F}(a, b)"}
IDENT = {"sum": "0.0${C}", "max": "-1.0e30${C}", "min": "1.0e30${C}"}
FIN = {"none": "v", "mean": "v / (${T})rows", "sqrt": "sqrt${F}(v)"}

_DEV = """
__device__ __forceinline__ ${T} fmap(${T} x) { return ${MAP}; }
__device__ __forceinline__ ${T} comb(${T} a, ${T} b) { return ${COMB}; }
__device__ __forceinline__ ${T} finish(${T} v, int rows) { return ${FIN}; }
"""
_COL_NAIVE = """
// One thread per column walking down the rows; neighbouring threads read neighbouring columns.
__global__ void col_naive(${SIG}) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    ${T} acc = ${IDENT};
    for (int r = 0; r < rows; ++r) acc = comb(acc, fmap(input[(size_t)r * cols + c]));
    output[c] = finish(acc, rows);
}
static void run(${SIG}, cudaStream_t stream) {
    col_naive<<<(cols + 255) / 256, 256, 0, stream>>>(${NAMES});
}
"""
_COL_WARP = """
// One warp per column: lanes take every 32nd row, so each load of a warp hits 32 different rows.
__global__ void col_warp(${SIG}) {
    int c = blockIdx.x * 8 + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (c >= cols) return;
    ${T} acc = ${IDENT};
    for (int r = lane; r < rows; r += 32) acc = comb(acc, fmap(input[(size_t)r * cols + c]));
    for (int o = 16; o > 0; o >>= 1) acc = comb(acc, __shfl_xor_sync(0xffffffffu, acc, o));
    if (lane == 0) output[c] = finish(acc, rows);
}
static void run(${SIG}, cudaStream_t stream) {
    col_warp<<<(cols + 7) / 8, 256, 0, stream>>>(${NAMES});
}
"""
_COL_TILED = """
// 32 x 8 threads per block: 32 columns, 8 row lanes each striding the rows; shared-memory combine.
__global__ void __launch_bounds__(256) col_tiled(${SIG}) {
    __shared__ ${T} part[8][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    ${T} acc = ${IDENT};
    if (c < cols)
        for (int r = threadIdx.y; r < rows; r += 8) acc = comb(acc, fmap(input[(size_t)r * cols + c]));
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        for (int k = 1; k < 8; ++k) acc = comb(acc, part[k][threadIdx.x]);
        output[c] = finish(acc, rows);
    }
}
static void run(${SIG}, cudaStream_t stream) {
    col_tiled<<<(cols + 31) / 32, dim3(32, 8), 0, stream>>>(${NAMES});
}
"""
_COL_ATOMIC = """
// Blocks of 256 columns x 64-row chunks: each thread combines its chunk, then one atomic per
// thread into the output; init and finish kernels around it.
#define CHUNK 64
__global__ void col_init(int cols, ${T}* output) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < cols) output[c] = ${IDENT};
}
__global__ void col_chunks(${SIG}) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    int r0 = blockIdx.y * CHUNK, r1 = min(rows, r0 + CHUNK);
    ${T} acc = ${IDENT};
    for (int r = r0; r < r1; ++r) acc = comb(acc, fmap(input[(size_t)r * cols + c]));
    atomic_combine(&output[c], acc);
}
__global__ void col_finish(int rows, int cols, ${T}* output) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < cols) output[c] = finish(output[c], rows);
}
static void run(${SIG}, cudaStream_t stream) {
    int cb = (cols + 255) / 256;
    col_init<<<cb, 256, 0, stream>>>(cols, output);
    col_chunks<<<dim3(cb, (rows + CHUNK - 1) / CHUNK), 256, 0, stream>>>(${NAMES});
    col_finish<<<cb, 256, 0, stream>>>(rows, cols, output);
}
"""
_COL_VEC = """
// One thread per ${W} adjacent columns with ${V} loads (cols % ${W} == 0), scalar otherwise.
__global__ void __launch_bounds__(256) col_vec(${SIG}) {
    int q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= cols / ${W}) return;
    ${V} acc;
${INIT}
    for (int r = 0; r < rows; ++r) {
        ${V} v = reinterpret_cast<const ${V}*>(input + (size_t)r * cols)[q];
${STEP}
    }
${STORE}
}
__global__ void col_scalar(${SIG}) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    ${T} acc = ${IDENT};
    for (int r = 0; r < rows; ++r) acc = comb(acc, fmap(input[(size_t)r * cols + c]));
    output[c] = finish(acc, rows);
}
static void run(${SIG}, cudaStream_t stream) {
    if (cols % ${W} == 0) col_vec<<<(cols / ${W} + 255) / 256, 256, 0, stream>>>(${NAMES});
    else col_scalar<<<(cols + 255) / 256, 256, 0, stream>>>(${NAMES});
}
"""
_LANES = "xyzw"


def _col_impls(dt: DType, mp: str, op: str, fin: str, args) -> list[Impl]:
    lanes = _LANES[:dt.width]
    bits = {"float": ("unsigned int", "__float_as_uint", "__uint_as_float"),
            "double": ("unsigned long long", "__double_as_longlong", "__longlong_as_double")}[dt.name]
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), MAP=tfill(mp, dt), COMB=tfill(COMB[op], dt),
               FIN=tfill(FIN[fin], dt), IDENT=tfill(IDENT[op], dt), BITS=bits[0], TO=bits[1], FROM=bits[2],
               INIT="\n".join(f"    acc.{c} = {tfill(IDENT[op], dt)};" for c in lanes),
               STEP="\n".join(f"        acc.{c} = comb(acc.{c}, fmap(v.{c}));" for c in lanes),
               STORE="\n".join(f"    output[{dt.width} * q + {k}] = finish(acc.{c}, rows);" for k, c in enumerate(lanes)))
    head = tfill(dedent(_DEV), dt, **ctx)
    atomic = tfill(_ATOMIC_HELPER["sum" if op == "sum" else "cas"], dt, **ctx).replace("combine(cur, v)", "comb(cur, v)")

    def code(t):
        return tfill(dedent(t), dt, **ctx)
    return [Impl("naive", "naive", head + code(_COL_NAIVE)), Impl("warp_per_column", "uncoalesced", head + code(_COL_WARP)),
            Impl("tiled_2d", "tiled_shared", head + code(_COL_TILED)),
            Impl("split_rows_atomic", "atomics", head + atomic + code(_COL_ATOMIC)),
            Impl("vector_loads", "vectorized", head + code(_COL_VEC))]


_CHECK = [{"rows": 1000, "cols": 7}, {"rows": 33, "cols": 4099}, {"rows": 257, "cols": 1001}]
_TIMING = [{"rows": 4096, "cols": 4096}, {"rows": 3001, "cols": 2001}]


def col_reduce_tasks(rng) -> list:
    out = []
    maps = ["identity", "square", "abs", "relu", "sigmoid", "tanh", "exp", "softplus", "gelu", "sin", "cube",
            "log1p_abs", "neg_exp_sq", "silu", "atan", "softsign"]
    for k, u in enumerate(maps):
        for op in ("sum", "max", "min"):
            fin = ("none", "mean", "sqrt")[k % 3] if op == "sum" else "none"
            if fin == "sqrt" and u in ("identity", "sin", "cube", "atan", "tanh", "softsign"):
                fin = "mean"
            for dt in ((FLOAT, DOUBLE) if (k + len(op)) % 2 == 0 else (FLOAT,)):
                fn = f"col_reduce_{op}_{u}_{fin}_{dt.name}"
                args = [arg("rows", "int", "scalar"), arg("cols", "int", "scalar"),
                        arg("input", f"const {dt.name}*", "in", "rows*cols", "uniform(0, 2)"),
                        arg("output", f"{dt.name}*", "out", "cols")]
                acc_t = "double" if op == "sum" else dt.name
                init = {"sum": "0.0", "max": "-INFINITY", "min": "INFINITY"}[op]
                upd = {"sum": "acc[c] += {};", "max": f"acc[c] = fmax{dt.F}(acc[c], {{}});",
                       "min": f"acc[c] = fmin{dt.F}(acc[c], {{}});"}[op]
                fin_c = {"none": "acc[c]", "mean": "acc[c] / rows", "sqrt": "sqrt(acc[c])"}[fin]
                ref = (f"#include <math.h>\n#include <stdlib.h>\n#include <stddef.h>\n\nvoid {fn}({signature(args)}) {{\n"
                       f"    {acc_t}* acc = ({acc_t}*)malloc(sizeof({acc_t}) * (size_t)cols);\n"
                       f"    for (int c = 0; c < cols; ++c) acc[c] = {init};\n"
                       f"    for (int r = 0; r < rows; ++r)\n        for (int c = 0; c < cols; ++c) {{\n"
                       f"            {dt.name} x = input[(size_t)r * cols + c];\n"
                       f"            {upd.format(tfill(UNARY[u].c, dt, x='x'))}\n        }}\n"
                       f"    for (int c = 0; c < cols; ++c) output[c] = ({dt.name})({fin_c});\n    free(acc);\n}}\n")
                mp = UNARY[u].c.replace("${x}", "x")
                tol = Tolerance(rtol=1e-4, atol=1e-5) if dt is FLOAT else Tolerance(rtol=1e-9, atol=1e-11)
                out.append(c2cuda_task("col_reduce", f"{op}_{u}_{fin}_{dt.name}", fn, ref, args, configs(_CHECK, _TIMING),
                                       f"{UNARY[u].flops + 1}*rows*cols", f"{dt.size}*(rows*cols + cols)",
                                       _col_impls(dt, mp, op, fin, args), tol, f"{fin} of the {op} of {u}(x) per column"))
            if (k + len(op)) % 3 == 1:
                fx = UNARY[u].texpr("x")
                expr = {"none": f"torch.{'amax' if op == 'max' else 'amin' if op == 'min' else 'sum'}({fx}, dim=0)",
                        "mean": f"torch.mean({fx}, dim=0)", "sqrt": f"torch.sqrt(torch.sum({fx}, dim=0))"}[fin]
                args = [arg("rows", "int", "scalar"), arg("cols", "int", "scalar"), arg("input", "const float*", "in", "1"),
                        arg("output", "float*", "out", "1")]
                module = TorchModule([("x", "torch.rand(batch_size, dim) * 2")], [f"return {expr}"],
                                     {"batch_size": 1024, "dim": 1024})
                cfgs = configs([{"batch_size": r["rows"], "dim": r["cols"]} for r in _CHECK],
                               [{"batch_size": r["rows"], "dim": r["cols"]} for r in _TIMING])
                launch = ("    int rows = (int)dim_of(sizes, 0, 0), cols = (int)dim_of(sizes, 0, 1);\n"
                          "    run(rows, cols, (const float*)inputs[0], (float*)outputs[0], stream);")
                out.append(torch_task("col_reduce", f"{op}_{u}_{fin}", module.source(), cfgs,
                                      f"{UNARY[u].flops + 1}*batch_size*dim", "4*(batch_size*dim + dim)",
                                      _col_impls(FLOAT, UNARY[u].c.replace("${x}", "x"), op, fin, args), launch,
                                      Tolerance(rtol=1e-4, atol=1e-5), f"{fin} {op} of {u}(x) over dim 0"))
    return out


# --- scans ----------------------------------------------------------------------------------------------
_SCAN_DEV = """
__device__ __forceinline__ ${T} fmap(${T} x) { return ${MAP}; }
__device__ __forceinline__ ${T} comb(${T} a, ${T} b) { return ${COMB}; }
#define EXCLUSIVE ${EXCL}
__device__ __forceinline__ ${T} warp_incl(${T} v, int lane) {
    for (int o = 1; o < 32; o <<= 1) {
        ${T} t = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v = comb(v, t);
    }
    return v;
}
"""
_SCAN_NAIVE = """
// One thread per row, scanning sequentially.
__global__ void scan_naive(${SIG}) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const ${T}* row = input + (size_t)r * cols;
    ${T}* out = output + (size_t)r * cols;
    ${T} acc = ${IDENT};
    for (int c = 0; c < cols; ++c) {
        ${T} v = fmap(row[c]);
        if (EXCLUSIVE) out[c] = acc;
        acc = comb(acc, v);
        if (!EXCLUSIVE) out[c] = acc;
    }
}
static void run(${SIG}, cudaStream_t stream) {
    scan_naive<<<(rows + 127) / 128, 128, 0, stream>>>(${NAMES});
}
"""
_SCAN_WARP = """
// One warp per row: 32-element chunks scanned with __shfl_up_sync, a running carry between chunks.
__global__ void __launch_bounds__(256) scan_warp(${SIG}) {
    int r = blockIdx.x * 8 + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows) return;
    const ${T}* row = input + (size_t)r * cols;
    ${T}* out = output + (size_t)r * cols;
    ${T} carry = ${IDENT};
    for (int base = 0; base < cols; base += 32) {
        int c = base + lane;
        ${T} inc = comb(warp_incl(c < cols ? fmap(row[c]) : ${IDENT}, lane), carry);
        ${T} exc = __shfl_up_sync(0xffffffffu, inc, 1);
        if (lane == 0) exc = carry;
        if (c < cols) out[c] = EXCLUSIVE ? exc : inc;
        carry = __shfl_sync(0xffffffffu, inc, 31);
    }
}
static void run(${SIG}, cudaStream_t stream) {
    scan_warp<<<(rows + 7) / 8, 256, 0, stream>>>(${NAMES});
}
"""
_SCAN_BLOCK = """
// One block of ${NT} threads per row: Hillis-Steele scan of ${NT}-element chunks in double-buffered
// shared memory, a carry between chunks.
__global__ void __launch_bounds__(${NT}) scan_block(${SIG}) {
    __shared__ ${T} buf[2][${NT}];
    const ${T}* row = input + (size_t)blockIdx.x * cols;
    ${T}* out = output + (size_t)blockIdx.x * cols;
    ${T} carry = ${IDENT};
    for (int base = 0; base < cols; base += ${NT}) {
        int c = base + threadIdx.x;
        int pin = 0;
        buf[0][threadIdx.x] = c < cols ? fmap(row[c]) : ${IDENT};
        __syncthreads();
        for (int o = 1; o < ${NT}; o <<= 1) {
            ${T} t = buf[pin][threadIdx.x];
            if (threadIdx.x >= o) t = comb(t, buf[pin][threadIdx.x - o]);
            buf[1 - pin][threadIdx.x] = t;
            pin = 1 - pin;
            __syncthreads();
        }
        ${T} inc = comb(buf[pin][threadIdx.x], carry);
        ${T} exc = threadIdx.x == 0 ? carry : comb(buf[pin][threadIdx.x - 1], carry);
        if (c < cols) out[c] = EXCLUSIVE ? exc : inc;
        carry = comb(buf[pin][${NT} - 1], carry);
        __syncthreads();
    }
}
static void run(${SIG}, cudaStream_t stream) {
    scan_block<<<rows, ${NT}, 0, stream>>>(${NAMES});
}
"""
_SCAN_COARSE = """
// One warp per row, four consecutive elements per lane: a sequential scan in registers, a shuffle
// scan of the lanes' totals, then each lane adds the total before it.
__global__ void __launch_bounds__(256) scan_coarse(${SIG}) {
    int r = blockIdx.x * 8 + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows) return;
    const ${T}* row = input + (size_t)r * cols;
    ${T}* out = output + (size_t)r * cols;
    ${T} carry = ${IDENT};
    for (int base = 0; base < cols; base += 128) {
        ${T} v[4];
        ${T} run = ${IDENT};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            int c = base + 4 * lane + k;
            run = comb(run, c < cols ? fmap(row[c]) : ${IDENT});
            v[k] = run;
        }
        ${T} tot = warp_incl(run, lane);
        ${T} before = __shfl_up_sync(0xffffffffu, tot, 1);
        if (lane == 0) before = ${IDENT};
        before = comb(before, carry);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            int c = base + 4 * lane + k;
            if (c < cols) out[c] = EXCLUSIVE ? (k == 0 ? before : comb(v[k - 1], before)) : comb(v[k], before);
        }
        carry = comb(carry, __shfl_sync(0xffffffffu, tot, 31));
    }
}
static void run(${SIG}, cudaStream_t stream) {
    scan_coarse<<<(rows + 7) / 8, 256, 0, stream>>>(${NAMES});
}
"""


def _scan_impls(dt, mp, op, excl, args) -> list[Impl]:
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), MAP=tfill(mp, dt), COMB=tfill(COMB[op], dt),
               IDENT=tfill(IDENT[op], dt), EXCL=int(excl))
    head = tfill(dedent(_SCAN_DEV), dt, **ctx)

    def code(t, **kw):
        return tfill(dedent(t), dt, **{**ctx, **kw})
    return [Impl("naive", "naive", head + code(_SCAN_NAIVE)), Impl("warp_per_row", "warp_shuffle", head + code(_SCAN_WARP)),
            Impl("block_per_row", "shared_scan", head + code(_SCAN_BLOCK, NT=256)),
            Impl("warp_coarse", "thread_coarsening", head + code(_SCAN_COARSE)),
            Impl("block_1024", "block_size_1024", head + code(_SCAN_BLOCK, NT=1024))]


_SCAN_CHECK = [{"rows": 7, "cols": 1000}, {"rows": 33, "cols": 4099}, {"rows": 1000, "cols": 33}]
_SCAN_TIMING = [{"rows": 4096, "cols": 4096}, {"rows": 2001, "cols": 3001}]


def scan_tasks(rng) -> list:
    out = []
    forms = [("sum", False), ("sum", True), ("max", False), ("min", False)]
    maps = ["identity", "square", "abs", "sigmoid", "exp", "softplus", "neg_exp_sq", "sqrt_abs", "relu", "gelu",
            "tanh", "log1p_abs", "sin", "silu", "inv_sqrt1p", "cube"]
    for k, u in enumerate(maps):
        for op, excl in forms:
            name = f"{'exclusive' if excl else 'inclusive'}_{op}_{u}"
            for dt in ((FLOAT, DOUBLE) if (k + len(name)) % 3 == 0 else (FLOAT,)):
                fn = f"row_scan_{name}_{dt.name}"
                args = [arg("rows", "int", "scalar"), arg("cols", "int", "scalar"),
                        arg("input", f"const {dt.name}*", "in", "rows*cols", "uniform(0, 2)"),
                        arg("output", f"{dt.name}*", "out", "rows*cols")]
                acc_t = "double" if op == "sum" else dt.name
                init = {"sum": "0.0", "max": "-1.0e30", "min": "1.0e30"}[op]
                upd = {"sum": "acc += v;", "max": f"acc = fmax{dt.F}(acc, v);", "min": f"acc = fmin{dt.F}(acc, v);"}[op]
                ref = (f"#include <math.h>\n#include <stddef.h>\n\nvoid {fn}({signature(args)}) {{\n"
                       f"    for (int r = 0; r < rows; ++r) {{\n        {acc_t} acc = {init};\n"
                       f"        for (int c = 0; c < cols; ++c) {{\n"
                       f"            {dt.name} x = input[(size_t)r * cols + c];\n"
                       f"            {dt.name} v = {tfill(UNARY[u].c, dt, x='x')};\n"
                       + (f"            output[(size_t)r * cols + c] = ({dt.name})acc;\n            {upd}\n" if excl else
                          f"            {upd}\n            output[(size_t)r * cols + c] = ({dt.name})acc;\n")
                       + "        }\n    }\n}\n")
                tol = Tolerance(rtol=1e-3, atol=1e-5) if dt is FLOAT else Tolerance(rtol=1e-9, atol=1e-11)
                out.append(c2cuda_task("row_scan", f"{name}_{dt.name}", fn, ref, args, configs(_SCAN_CHECK, _SCAN_TIMING),
                                       f"{UNARY[u].flops + 1}*rows*cols", f"{2 * dt.size}*rows*cols",
                                       _scan_impls(dt, UNARY[u].c.replace("${x}", "x"), op, excl, args), tol,
                                       f"{name.replace('_', ' ')} along each row, {dt.name}"))
            if (k + len(name)) % 3 == 1:
                fx = UNARY[u].texpr("x")
                expr = {("sum", False): f"torch.cumsum({fx}, dim=-1)",
                        ("sum", True): f"torch.cumsum({fx}, dim=-1) - {fx}",
                        ("max", False): f"torch.cummax({fx}, dim=-1).values",
                        ("min", False): f"torch.cummin({fx}, dim=-1).values"}[op, excl]
                args = [arg("rows", "int", "scalar"), arg("cols", "int", "scalar"), arg("input", "const float*", "in", "1"),
                        arg("output", "float*", "out", "1")]
                module = TorchModule([("x", "torch.rand(batch_size, dim) * 2")], [f"return {expr}"],
                                     {"batch_size": 512, "dim": 2048})
                cfgs = configs([{"batch_size": r["rows"], "dim": r["cols"]} for r in _SCAN_CHECK],
                               [{"batch_size": r["rows"], "dim": r["cols"]} for r in _SCAN_TIMING])
                launch = ("    int rows = (int)dim_of(sizes, 0, 0), cols = (int)dim_of(sizes, 0, 1);\n"
                          "    run(rows, cols, (const float*)inputs[0], (float*)outputs[0], stream);")
                out.append(torch_task("row_scan", name, module.source(), cfgs, f"{UNARY[u].flops + 1}*batch_size*dim",
                                      "8*batch_size*dim", _scan_impls(FLOAT, UNARY[u].c.replace("${x}", "x"), op, excl, args),
                                      launch, Tolerance(rtol=1e-3, atol=1e-4), f"{name.replace('_', ' ')} over the last dim"))
    return out


def generate(rng) -> list:
    return col_reduce_tasks(rng) + scan_tasks(rng)
