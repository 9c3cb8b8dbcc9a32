"""Indirect-access families, part two: embedding, spmv_csr, spmv_ell, histogram (see sparse.py)."""
from __future__ import annotations

from pipeline.tasks.families._kit import (DOUBLE, FLOAT, UNARY, Impl, TorchModule, arg, arg_names, c2cuda_task,
                                         configs, dedent, signature, tfill, torch_task)
from pipeline.core.records import Tolerance

TOL = Tolerance(rtol=1e-4, atol=1e-5)
DTOL = Tolerance(rtol=1e-9, atol=1e-11)
LANES = "xyzw"

# --- embedding ------------------------------------------------------------------------------------------
_E_HEAD = """
#define J ${J}
__device__ __forceinline__ ${T} fpost(${T} x) { return ${OP}; }
__device__ __forceinline__ ${T} emb(${PSIG}, int D, int i, int d) {
    ${T} acc = 0;
    for (int j = 0; j < J; ++j) acc += table[(size_t)ids[(size_t)i * J + j] * D + d];
    return fpost(acc * ${SCALE}${EXTRA});
}
"""
_E_NAIVE = """
// One thread per output element (row i, column d): consecutive threads, consecutive columns.
__global__ void emb_naive(${SIG}) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)n * D) return;
    int i = (int)(t / D), d = (int)(t % D);
    out[t] = emb(${PNAMES}, D, i, d);
}
static void run(${SIG}, cudaStream_t stream) {
    long long total = (long long)n * D;
    emb_naive<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(${NAMES});
}
"""
_E_ROWS = """
// One thread per output row: each thread walks a whole row, so a warp's accesses are D apart.
__global__ void emb_rows(${SIG}) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    for (int d = 0; d < D; ++d) out[(size_t)i * D + d] = emb(${PNAMES}, D, i, d);
}
static void run(${SIG}, cudaStream_t stream) {
    emb_rows<<<(n + 127) / 128, 128, 0, stream>>>(${NAMES});
}
"""
_E_WARP = """
// One warp per output row, lanes along the columns.
__global__ void __launch_bounds__(256) emb_warp(${SIG}) {
    int i = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (i >= n) return;
    for (int d = lane; d < D; d += 32) out[(size_t)i * D + d] = emb(${PNAMES}, D, i, d);
}
static void run(${SIG}, cudaStream_t stream) {
    emb_warp<<<(n + 7) / 8, 256, 0, stream>>>(${NAMES});
}
"""
_E_BLOCK = """
// One block of 128 threads per output row, striding along the columns.
__global__ void __launch_bounds__(128) emb_block(${SIG}) {
    int i = blockIdx.x;
    for (int d = threadIdx.x; d < D; d += 128) out[(size_t)i * D + d] = emb(${PNAMES}, D, i, d);
}
static void run(${SIG}, cudaStream_t stream) {
    emb_block<<<n, 128, 0, stream>>>(${NAMES});
}
"""
_E_VEC = """
// ${W} columns per thread with ${V} loads of the table rows when D % ${W} == 0, else the naive path.
__global__ void __launch_bounds__(256) emb_vec(${SIG}) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int dq = D / ${W};
    if (t >= (long long)n * dq) return;
    int i = (int)(t / dq), q = (int)(t % dq);
    ${V} acc;
${ZERO}
    for (int j = 0; j < J; ++j) {
        ${V} v = reinterpret_cast<const ${V}*>(table + (size_t)ids[(size_t)i * J + j] * D)[q];
${ADD}
    }
    ${V} r;
${FINISH}
    reinterpret_cast<${V}*>(out + (size_t)i * D)[q] = r;
}
__global__ void emb_scalar(${SIG}) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)n * D) return;
    out[t] = emb(${PNAMES}, D, (int)(t / D), (int)(t % D));
}
static void run(${SIG}, cudaStream_t stream) {
    if (D % ${W} == 0) {
        long long total = (long long)n * (D / ${W});
        emb_vec<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(${NAMES});
    } else {
        long long total = (long long)n * D;
        emb_scalar<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(${NAMES});
    }
}
"""


def _emb_impls(dt, J, scale, extra, u, args, idx_t="int"):
    ptr_args = [a for a in args if a.name in ("ids", "table", "pos", "bias")]
    psig = ", ".join(f"{a.ctype} {a.name}" for a in ptr_args)
    pnames = ", ".join(a.name for a in ptr_args)
    ex_c = {"": "", "bias": " + bias[d]", "pos": " + pos[(size_t)(i % 128) * D + d]"}[extra]
    lanes = LANES[:dt.width]
    ex_v = {"": "", "bias": " + bias[{W} * q + {k}]", "pos": " + pos[(size_t)(i % 128) * D + {W} * q + {k}]"}[extra]
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), PSIG=psig, PNAMES=pnames, J=J, SCALE=dt.lit(scale),
               EXTRA=ex_c, OP=tfill(UNARY[u].c, dt, x="x"),
               ZERO="\n".join(f"    acc.{c} = 0;" for c in lanes),
               ADD="\n".join(f"        acc.{c} += v.{c};" for c in lanes),
               FINISH="\n".join(f"    r.{c} = fpost(acc.{c} * {dt.lit(scale)}{ex_v.format(W=dt.width, k=k)});"
                                for k, c in enumerate(lanes)))
    head = tfill(dedent(_E_HEAD), dt, **ctx)

    def code(t):
        return head + tfill(dedent(t), dt, **ctx)
    return [Impl("naive", "naive", code(_E_NAIVE)), Impl("row_threads", "uncoalesced", code(_E_ROWS)),
            Impl("warp_per_row", "warp_per_row", code(_E_WARP)), Impl("block_per_row", "block_per_row", code(_E_BLOCK)),
            Impl("vector_loads", "vectorized", code(_E_VEC))]


def embedding_tasks(rng) -> list:
    out = []
    forms = [(1, 1.0, ""), (1, 2.0, ""), (1, 1.0, "bias"), (1, 1.0, "pos"), (4, 0.25, ""), (4, 1.0, ""), (8, 0.125, ""),
             (3, 1.0 / 3.0, "bias"), (2, 0.5, "pos")]
    ops = ["identity", "relu", "tanh", "gelu", "sigmoid", "silu", "square", "abs", "softsign"]
    for k, (J, scale, extra) in enumerate(forms):
        for e, u in enumerate(ops):
            if (k + e) % 2:
                continue
            dt = (FLOAT, DOUBLE)[(k + e // 2) % 2]
            kind = "lookup" if J == 1 else ("bag_mean" if abs(scale * J - 1) < 1e-9 else "bag_sum")
            variant = f"{kind}{J}_s{round(scale, 3)}_{extra or 'plain'}_{u}_{dt.name}".replace(".", "p")
            fn = f"embedding_{variant}"
            args = [arg("n", "int", "scalar"), arg("D", "int", "scalar"), arg("V", "int", "scalar"),
                    arg("ids", "const int*", "in", f"n*{J}", "randint(0, V)"),
                    arg("table", f"const {dt.name}*", "in", "V*D")]
            if extra == "bias":
                args.append(arg("bias", f"const {dt.name}*", "in", "D"))
            if extra == "pos":
                args.append(arg("pos", f"const {dt.name}*", "in", "128*D"))
            args.append(arg("out", f"{dt.name}*", "out", "n*D"))
            ex = {"": "", "bias": " + bias[d]", "pos": " + pos[(size_t)(i % 128) * D + d]"}[extra]
            ref = (f"#include <math.h>\n#include <stddef.h>\n\nvoid {fn}({signature(args)}) {{\n"
                   f"    for (int i = 0; i < n; ++i)\n        for (int d = 0; d < D; ++d) {{\n"
                   f"            {dt.name} acc = 0;\n"
                   f"            for (int j = 0; j < {J}; ++j) acc += table[(size_t)ids[(size_t)i * {J} + j] * D + d];\n"
                   f"            {dt.name} x = acc * {dt.lit(scale)}{ex};\n"
                   f"            out[(size_t)i * D + d] = {tfill(UNARY[u].c, dt, x='x')};\n        }}\n}}\n")
            cfgs = configs([{"n": 7, "D": 33, "V": 50}, {"n": 300, "D": 64, "V": 1000}, {"n": 1000, "D": 5, "V": 3}],
                           [{"n": 32768, "D": 512, "V": 50000}, {"n": 20001, "D": 257, "V": 30011}])
            out.append(c2cuda_task("embedding", variant, fn, ref, args, cfgs, f"{J + 2}*n*D",
                                   f"{dt.size}*D*(n + min(V, {J}*n)) + {4 * J}*n", _emb_impls(dt, J, scale, extra, u, args),
                                   TOL if dt is FLOAT else DTOL, f"{kind} of {J} row(s) x {scale:g}"
                                   f"{' + ' + extra if extra else ''}, then {u}"))
            if (k + e) % 4 == 0:
                out.append(_emb_torch(J, scale, extra, u))
    return out


def _emb_torch(J, scale, extra, u):
    if extra == "pos":
        ids = "torch.randint(0, vocab, (batch, 128, " + str(J) + "))"
    else:
        ids = f"torch.randint(0, vocab, (n, {J}))"
    init = ["self.weight = nn.Parameter(torch.randn(vocab, dim))"]
    term = ""
    if extra == "bias":
        init.append("self.bias = nn.Parameter(torch.randn(dim) * 0.1)")
        term = " + self.bias"
    if extra == "pos":
        init.append("self.pos = nn.Parameter(torch.randn(128, dim) * 0.1)")
        term = " + self.pos"
    body = [f"e = F.embedding(ids, self.weight).sum(dim=-2) * {scale!r}{term}", f"return {UNARY[u].texpr('e')}"]
    sizes = {"vocab": 10000, "dim": 256, **({"batch": 64} if extra == "pos" else {"n": 4096})}
    module = TorchModule([("ids", ids)], body, sizes, init=init, init_args=[("vocab", "vocab"), ("dim", "dim")])
    args = [arg("n", "int", "scalar"), arg("D", "int", "scalar"), arg("V", "int", "scalar"),
            arg("ids", "const long long*", "in", "1"), arg("table", "const float*", "in", "1")]
    if extra:
        args.append(arg(extra, "const float*", "in", "1"))
    args.append(arg("out", "float*", "out", "1"))
    launch = (f"    int n = (int)(numel_of(sizes, 0) / {J}), D = (int)dim_of(sizes, 1, 1), V = (int)dim_of(sizes, 1, 0);\n"
              "    run(n, D, V, (const long long*)inputs[0], (const float*)inputs[1], "
              + ("(const float*)inputs[2], " if extra else "") + "(float*)outputs[0], stream);")
    if extra == "pos":
        cfgs = configs([{"batch": 1, "dim": 33, "vocab": 50}, {"batch": 3, "dim": 64, "vocab": 1000},
                        {"batch": 2, "dim": 5, "vocab": 3}],
                       [{"batch": 256, "dim": 512, "vocab": 50000}, {"batch": 157, "dim": 257, "vocab": 30011}])
        n = "batch*128"
    else:
        cfgs = configs([{"n": 7, "dim": 33, "vocab": 50}, {"n": 300, "dim": 64, "vocab": 1000}, {"n": 1000, "dim": 5, "vocab": 3}],
                       [{"n": 32768, "dim": 512, "vocab": 50000}, {"n": 20001, "dim": 257, "vocab": 30011}])
        n = "n"
    impls = _emb_impls(FLOAT, J, scale, extra, u, args)
    variant = f"j{J}_s{round(scale, 3)}_{extra or 'plain'}_{u}".replace(".", "p")
    return torch_task("embedding", variant, module.source(), cfgs, f"{J + 2}*{n}*dim", f"4*dim*({n} + min(vocab, {J}*{n})) + {8 * J}*{n}",
                      impls, launch, TOL, f"sum of {J} embedding row(s) x {scale:g}{' + ' + extra if extra else ''}, {u}")


# --- sparse matrix-vector products ---------------------------------------------------------------------------
_ROW_START = ("__host__ __device__ __forceinline__ long long row_start(int r, int base, int spread) {\n"
              "    long long q = r / spread, m = r % spread;\n"
              "    return (long long)r * base + q * ((long long)spread * (spread - 1) / 2) + m * (m - 1) / 2;\n}\n")
_CSR_HEAD = _ROW_START + """
__device__ __forceinline__ ${T} term(${T} a, ${T} x) { return ${TERM}; }
__device__ __forceinline__ ${T} finish(${T} acc, ${T} yold) { return ${FIN}; }
"""
_CSR_SCALAR = """
// One thread per row (the scalar CSR kernel): neighbouring threads walk different rows.
__global__ void spmv_scalar(${SIG}) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    long long s = row_start(r, base, spread), e = s + base + r % spread;
    ${T} acc = 0;
    for (long long j = s; j < e; ++j) acc += term(vals[j], x[colidx[j]]);
    y[r] = finish(acc, ${YOLD});
}
static void run(${SIG}, cudaStream_t stream) {
    spmv_scalar<<<(rows + 127) / 128, 128, 0, stream>>>(${NAMES});
}
"""
_CSR_GROUP = """
// ${G} lanes per row (the vector CSR kernel${NOTE}): coalesced reads of the row, shuffle reduction.
__global__ void __launch_bounds__(256) spmv_group(${SIG}) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int r = (int)(t / ${G}), lane = (int)(t % ${G});
    bool active = r < rows;
    ${T} acc = 0;
    if (active) {
        long long s = row_start(r, base, spread), e = s + base + r % spread;
        for (long long j = s + lane; j < e; j += ${G} * ${UNROLL}) {
            acc += term(vals[j], x[colidx[j]]);
            if (${UNROLL} > 1 && j + ${G} < e) acc += term(vals[j + ${G}], x[colidx[j + ${G}]]);
        }
    }
    for (int o = ${G} / 2; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o, ${G});
    if (active && lane == 0) y[r] = finish(acc, ${YOLD});
}
static void run(${SIG}, cudaStream_t stream) {
    long long threads = (long long)rows * ${G};
    spmv_group<<<(unsigned)((threads + 255) / 256), 256, 0, stream>>>(${NAMES});
}
"""


def _csr_impls(dt, term, fin, inout, args):
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), TERM=tfill(term, dt, a="a", x="x"), FIN=tfill(fin, dt),
               YOLD="y[r]" if inout else "0")
    head = tfill(_CSR_HEAD, dt, **ctx)

    def code(t, **kw):
        return head + tfill(dedent(t), dt, **{**ctx, **kw})
    return [Impl("scalar_rows", "naive", code(_CSR_SCALAR)),
            Impl("warp_per_row", "warp_per_row", code(_CSR_GROUP, G=32, UNROLL=1, NOTE="")),
            Impl("subwarp8", "subwarp_per_row", code(_CSR_GROUP, G=8, UNROLL=1, NOTE=", 8-lane groups")),
            Impl("subwarp4", "subwarp_per_row_4", code(_CSR_GROUP, G=4, UNROLL=1, NOTE=", 4-lane groups")),
            Impl("warp_unroll2", "warp_per_row_unrolled", code(_CSR_GROUP, G=32, UNROLL=2, NOTE=", two per lane"))]


_TERMS = {"ax": "${a} * ${x}", "abs_a": "fabs${F}(${a}) * ${x}", "ax2": "${a} * ${x} * ${x}",
          "a2x": "${a} * ${a} * ${x}", "max0": "fmax${F}(${a} * ${x}, 0.0${C})"}


def spmv_tasks(rng) -> list:
    return _csr_tasks(rng) + _ell_tasks(rng)


def _csr_tasks(rng) -> list:
    out = []
    nnz = "rows*base + (rows // spread) * (spread * (spread - 1) // 2) + (rows % spread) * ((rows % spread) - 1) // 2"
    posts = ["identity", "relu", "tanh", "sigmoid", "abs", "softsign", "silu", "square"]
    k = 0
    for tname, term in _TERMS.items():
        for post in posts:
            for inout in (False, True):
                k += 1
                if k % 3 == 0:
                    continue
                dt = (FLOAT, DOUBLE)[k % 2]
                beta = "0.5${C} * yold" if inout else "0"
                fin = UNARY[post].c.replace("${x}", f"(acc + {beta})" if inout else "acc")
                variant = f"{tname}_{post}{'_update' if inout else ''}_{dt.name}"
                fn = f"spmv_csr_{variant}"
                args = [arg("rows", "int", "scalar"), arg("cols", "int", "scalar"), arg("base", "int", "scalar"),
                        arg("spread", "int", "scalar"), arg("vals", f"const {dt.name}*", "in", nnz),
                        arg("colidx", "const int*", "in", nnz, "randint(0, cols)"), arg("x", f"const {dt.name}*", "in", "cols"),
                        arg("y", f"{dt.name}*", "inout" if inout else "out", "rows")]
                ref = ("#include <math.h>\n\n" + _ROW_START.replace("__host__ __device__ __forceinline__ ", "static ")
                       + f"\nvoid {fn}({signature(args)}) {{\n    for (int r = 0; r < rows; ++r) {{\n"
                       f"        long long s = row_start(r, base, spread), e = s + base + r % spread;\n"
                       f"        {dt.name} acc = 0;\n        for (long long j = s; j < e; ++j) {{\n"
                       f"            {dt.name} a = vals[j], x_j = x[colidx[j]];\n"
                       f"            acc += {tfill(term, dt, a='a', x='x_j')};\n"
                       f"        }}\n        {dt.name} yold = y[r];\n        y[r] = {tfill(fin, dt)};\n        (void)yold;\n    }}\n}}\n")
                cfgs = configs([{"rows": 100, "cols": 80, "base": 3, "spread": 5}, {"rows": 1000, "cols": 1000, "base": 0, "spread": 9},
                                {"rows": 33, "cols": 4099, "base": 40, "spread": 33}],
                               [{"rows": 500000, "cols": 1 << 20, "base": 16, "spread": 32},
                                {"rows": 300007, "cols": 200003, "base": 40, "spread": 17}])
                impls = _csr_impls(dt, term, fin, inout, args)
                out.append(c2cuda_task("spmv_csr", variant, fn, ref, args, cfgs, f"2*({nnz})",
                                       f"({dt.size} + 4)*({nnz}) + {dt.size}*(rows + cols)", impls,
                                       Tolerance(rtol=1e-4, atol=1e-4) if dt is FLOAT else DTOL,
                                       f"y = {post}(sum over the row of {tname}{' + 0.5 y' if inout else ''}) for a CSR matrix "
                                       f"with row lengths base + r % spread"))
    return out


_ELL_HEAD = """
#define KNZ ${KNZ}
#define AT(r, j) ${AT}
__device__ __forceinline__ ${T} term(${T} a, ${T} x) { return ${TERM}; }
__device__ __forceinline__ ${T} post(${T} v) { return ${POST}; }
"""
_ELL_NAIVE = """
// One thread per row, nonzeros in order.
__global__ void ell_naive(${SIG}) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    ${T} acc = 0;
    for (int j = 0; j < KNZ; ++j) acc += term(vals[AT(r, j)], x[colidx[AT(r, j)]]);
    y[r] = post(acc);
}
static void run(${SIG}, cudaStream_t stream) {
    ell_naive<<<(rows + 255) / 256, 256, 0, stream>>>(${NAMES});
}
"""
_ELL_UNROLL = """
// One thread per row, the constant-length loop fully unrolled with read-only loads.
__global__ void __launch_bounds__(256) ell_unroll(${SIG}) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    ${T} acc = 0;
#pragma unroll
    for (int j = 0; j < KNZ; ++j) acc += term(__ldg(&vals[AT(r, j)]), __ldg(&x[__ldg(&colidx[AT(r, j)])]));
    y[r] = post(acc);
}
static void run(${SIG}, cudaStream_t stream) {
    ell_unroll<<<(rows + 255) / 256, 256, 0, stream>>>(${NAMES});
}
"""
_ELL_GROUP = """
// ${G} lanes per row, each lane a strided subset of the row's nonzeros, shuffle reduction.
__global__ void __launch_bounds__(256) ell_group(${SIG}) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int r = (int)(t / ${G}), lane = (int)(t % ${G});
    ${T} acc = 0;
    if (r < rows)
        for (int j = lane; j < KNZ; j += ${G}) acc += term(vals[AT(r, j)], x[colidx[AT(r, j)]]);
    for (int o = ${G} / 2; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o, ${G});
    if (r < rows && lane == 0) y[r] = post(acc);
}
static void run(${SIG}, cudaStream_t stream) {
    long long threads = (long long)rows * ${G};
    ell_group<<<(unsigned)((threads + 255) / 256), 256, 0, stream>>>(${NAMES});
}
"""
_ELL_PAIR = """
// Two rows per thread (rows r and r + half), for more independent loads in flight.
__global__ void ell_pair(${SIG}) {
    int half = (rows + 1) / 2;
    int r0 = blockIdx.x * blockDim.x + threadIdx.x;
    if (r0 >= half) return;
    int r1 = r0 + half;
    ${T} a0 = 0, a1 = 0;
    for (int j = 0; j < KNZ; ++j) {
        a0 += term(vals[AT(r0, j)], x[colidx[AT(r0, j)]]);
        if (r1 < rows) a1 += term(vals[AT(r1, j)], x[colidx[AT(r1, j)]]);
    }
    y[r0] = post(a0);
    if (r1 < rows) y[r1] = post(a1);
}
static void run(${SIG}, cudaStream_t stream) {
    ell_pair<<<((rows + 1) / 2 + 255) / 256, 256, 0, stream>>>(${NAMES});
}
"""


def _ell_tasks(rng) -> list:
    out = []
    posts = ["identity", "relu", "tanh", "sigmoid", "abs", "silu", "softsign"]
    for knz in (4, 8, 16, 32):
        for layout in ("row", "col"):
            for t, tname in enumerate(_TERMS):
                post = posts[(knz + t + len(layout)) % len(posts)]
                for dt in ((FLOAT, DOUBLE) if (t + knz // 4) % 2 else (FLOAT,)):
                    at = "(size_t)(r) * KNZ + (j)" if layout == "row" else "(size_t)(j) * rows + (r)"
                    variant = f"k{knz}_{layout}major_{tname}_{post}_{dt.name}"
                    fn = f"spmv_ell_{variant}"
                    args = [arg("rows", "int", "scalar"), arg("cols", "int", "scalar"),
                            arg("vals", f"const {dt.name}*", "in", f"rows*{knz}"),
                            arg("colidx", "const int*", "in", f"rows*{knz}", "randint(0, cols)"),
                            arg("x", f"const {dt.name}*", "in", "cols"), arg("y", f"{dt.name}*", "out", "rows")]
                    term = _TERMS[tname]
                    idx_c = at.replace("KNZ", str(knz)).replace("(r)", "r").replace("(j)", "j")
                    ref = (f"#include <math.h>\n#include <stddef.h>\n\nvoid {fn}({signature(args)}) {{\n"
                           f"    for (int r = 0; r < rows; ++r) {{\n        {dt.name} acc = 0;\n"
                           f"        for (int j = 0; j < {knz}; ++j) {{\n"
                           f"            {dt.name} a = vals[{idx_c}], xv = x[colidx[{idx_c}]];\n"
                           f"            acc += {tfill(term, dt, a='a', x='xv')};\n"
                           f"        }}\n        y[r] = {tfill(UNARY[post].c, dt, x='acc')};\n    }}\n}}\n")
                    ctx = dict(SIG=signature(args), NAMES=arg_names(args), KNZ=knz, AT=at, TERM=tfill(term, dt, a="a", x="x"),
                               POST=tfill(UNARY[post].c, dt, x="v"))
                    head = tfill(dedent(_ELL_HEAD), dt, **ctx)
                    g = min(knz, 32)
                    impls = [Impl("naive", "naive", head + tfill(dedent(_ELL_NAIVE), dt, **ctx)),
                             Impl("unrolled", "loop_unrolling", head + tfill(dedent(_ELL_UNROLL), dt, **ctx)),
                             Impl(f"group{g}", "subwarp_per_row", head + tfill(dedent(_ELL_GROUP), dt, G=g, **ctx)),
                             Impl("group4", "subwarp_per_row_4", head + tfill(dedent(_ELL_GROUP), dt, G=4, **ctx)),
                             Impl("row_pairs", "thread_coarsening", head + tfill(dedent(_ELL_PAIR), dt, **ctx))]
                    if g == 4:
                        impls[3] = Impl("group2", "subwarp_per_row_2", head + tfill(dedent(_ELL_GROUP), dt, G=2, **ctx))
                    cfgs = configs([{"rows": 100, "cols": 80}, {"rows": 1000, "cols": 7}, {"rows": 33, "cols": 4099}],
                                   [{"rows": (1 << 21) // (knz // 4), "cols": 1 << 20}, {"rows": 300007, "cols": 200003}])
                    out.append(c2cuda_task("spmv_ell", variant, fn, ref, args, cfgs, f"{2 * knz}*rows",
                                           f"({dt.size} + 4)*rows*{knz} + {dt.size}*(rows + cols)", impls,
                                           Tolerance(rtol=1e-4, atol=1e-4) if dt is FLOAT else DTOL,
                                           f"y = {post}(A x') for an ELL matrix with {knz} nonzeros per row, {layout}-major, "
                                           f"terms {tname}"))
    return out


# --- histograms ---------------------------------------------------------------------------------------------
_H_HEAD = """
__device__ __forceinline__ int bin_of(${DT} v, int bins) { return ${BIN}; }
"""
_H_GLOBAL = """
// ${NOTE}: one global atomic per element.
__global__ void hist_global(${SIG}) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&hist[bin_of(data[i], bins)], ${W_I});
}
static void run(${SIG}, cudaStream_t stream) {
    cudaMemsetAsync(hist, 0, sizeof(${HT}) * (size_t)bins, stream);
    int blocks = (n + 255) / 256;
    if (blocks > ${MAXB}) blocks = ${MAXB};
    hist_global<<<blocks, 256, 0, stream>>>(${NAMES});
}
"""
_H_SHARED = """
// ${COPIES_NOTE} in shared memory per block, merged with one atomic per bin and block; global
// atomics when the bins do not fit.
__global__ void __launch_bounds__(256) hist_shared(${SIG}, int copies) {
    extern __shared__ unsigned char smem[];
    ${HT}* local = reinterpret_cast<${HT}*>(smem);
    for (int b = threadIdx.x; b < copies * bins; b += 256) local[b] = 0;
    __syncthreads();
    ${HT}* mine = local + ((threadIdx.x >> 5) % copies) * bins;
    for (int i = blockIdx.x * 256 + threadIdx.x; i < n; i += gridDim.x * 256)
        atomicAdd(&mine[bin_of(data[i], bins)], ${W_I});
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += 256) {
        ${HT} total = 0;
        for (int c = 0; c < copies; ++c) total += local[c * bins + b];
        if (total != 0) atomicAdd(&hist[b], total);
    }
}
__global__ void hist_global(${SIG}) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&hist[bin_of(data[i], bins)], ${W_I});
}
static void run(${SIG}, cudaStream_t stream) {
    cudaMemsetAsync(hist, 0, sizeof(${HT}) * (size_t)bins, stream);
    int blocks = (n + 255) / 256;
    if (blocks > 132 * 4) blocks = 132 * 4;
    int copies = (int)((48 * 1024) / (sizeof(${HT}) * (size_t)bins));
    if (copies > ${MAXCOPIES}) copies = ${MAXCOPIES};
    if (copies >= 1) hist_shared<<<blocks, 256, sizeof(${HT}) * (size_t)copies * bins, stream>>>(${NAMES}, copies);
    else hist_global<<<blocks, 256, 0, stream>>>(${NAMES});
}
"""
_INT_BINS = {"mod": "(int)((unsigned)v % (unsigned)bins)", "affine_mod": "(int)(((unsigned)v * 7u + 3u) % (unsigned)bins)",
             "shift_mod": "(int)(((unsigned)v >> 4) % (unsigned)bins)", "xor_mod": "(int)(((unsigned)v ^ ((unsigned)v >> 7)) % (unsigned)bins)",
             "mul_hash": "(int)(((unsigned)v * 2654435761u >> 7) % (unsigned)bins)",
             "digit_sum": "(int)(((unsigned)v % 10u + (unsigned)v / 10u % 10u + (unsigned)v / 100u % 10u) % (unsigned)bins)",
             "high_bits": "(int)(((unsigned)v >> 12) % (unsigned)bins)", "square_mod": "(int)(((unsigned)v * (unsigned)v) % (unsigned)bins)"}
# only correctly rounded operations (no library functions, nothing a compiler may fuse), so the
# C reference and the kernels put every value in the same bin
_FLOAT_BINS = {"uniform": "min((int)(v * (float)bins), bins - 1)",
               "square": "min((int)(v * v * (float)bins), bins - 1)",
               "sqrt": "min((int)(sqrtf(v) * (float)bins), bins - 1)",
               "cube": "min((int)(v * v * v * (float)bins), bins - 1)",
               "reverse": "min((int)((1.0f - v) * (float)bins), bins - 1)"}


def histogram_tasks(rng) -> list:
    out = []
    for kind, table in (("int", _INT_BINS), ("float", _FLOAT_BINS)):
        for bname, bexpr in table.items():
            for weighted in (False, True):
                for ht in (("int", "float") if weighted else ("int",)):
                    variant = f"{kind}_{bname}_{'weighted_' + ht if weighted else 'count'}"
                    fn = f"histogram_{variant}"
                    hctype = "float" if weighted and ht == "float" else "int"
                    args = [arg("n", "int", "scalar"), arg("bins", "int", "scalar"),
                            arg("data", f"const {kind}*", "in", "n", "randint(0, 1000000)" if kind == "int" else "uniform(0, 1)")]
                    if weighted:
                        args.append(arg("weight", f"const {hctype}*", "in", "n", "randint(1, 5)" if hctype == "int" else "uniform(0, 1)"))
                    args.append(arg("hist", f"{hctype}*", "out", "bins"))
                    w_i = "weight[i]" if weighted else "1"
                    ref = (f"#include <math.h>\n\nstatic int imin(int a, int b) {{ return a < b ? a : b; }}\n"
                           f"static int bin_of({kind} v, int bins) {{ return {bexpr.replace('min(', 'imin(')}; }}\n\n"
                           f"void {fn}({signature(args)}) {{\n    for (int b = 0; b < bins; ++b) hist[b] = 0;\n"
                           f"    for (int i = 0; i < n; ++i) hist[bin_of(data[i], bins)] += {w_i};\n}}\n")
                    ctx = dict(SIG=signature(args), NAMES=arg_names(args), DT=kind, BIN=bexpr, W_I=w_i, HT=hctype)
                    head = fill_head(ctx)
                    impls = [Impl("naive", "naive", head + tfill(dedent(_H_GLOBAL), FLOAT, NOTE="One thread per element",
                                                                 MAXB="0x7fffffff", **ctx)),
                             Impl("grid_global", "coalesced", head + tfill(dedent(_H_GLOBAL), FLOAT, NOTE="Grid-stride loop",
                                                                          MAXB="132 * 8", **ctx)),
                             Impl("shared_private", "shared_privatization", head + tfill(
                                 dedent(_H_SHARED), FLOAT, COPIES_NOTE="One histogram copy", MAXCOPIES=1, **ctx)),
                             Impl("warp_copies", "shared_privatization_per_warp", head + tfill(
                                 dedent(_H_SHARED), FLOAT, COPIES_NOTE="Up to one copy per warp", MAXCOPIES=8, **ctx)),
                             Impl("two_copies", "shared_privatization_2", head + tfill(
                                 dedent(_H_SHARED), FLOAT, COPIES_NOTE="Two copies", MAXCOPIES=2, **ctx))]
                    tol = Tolerance(rtol=0, atol=0) if hctype == "int" else Tolerance(rtol=1e-4, atol=1e-4)
                    cfgs = configs([{"n": 1000, "bins": 10}, {"n": 4099, "bins": 257}, {"n": 100003, "bins": 3000}],
                                   [{"n": 1 << 24, "bins": 256}, {"n": 10000019, "bins": 1000}])
                    out.append(c2cuda_task("histogram", variant, fn, ref, args, cfgs, "2*n",
                                           f"{8 if weighted else 4}*n + 4*bins", impls, tol,
                                           f"{'weighted ' if weighted else ''}histogram of {kind} data, bin = {bname}"))
    return out


def fill_head(ctx) -> str:
    return tfill(dedent(_H_HEAD), FLOAT, **ctx)
