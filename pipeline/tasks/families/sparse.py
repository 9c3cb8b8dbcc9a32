"""Indirect-access families: gather, scatter (atomic add/max into few targets), embedding (row
gathers, bags), spmv_csr (CSR with closed-form row pointers), spmv_ell (fixed nonzeros per row, row-
or column-major) and histogram (counts or weighted sums of computed bins).

gather reuses the element-wise kernels (naive, grid_stride, vector_loads, unroll4, strided_lanes)
with x[idx[i]] as the element. Harness inputs are random, so a CSR matrix's row pointers are a
closed form in the row (rows of length base + r % spread) that reference and kernels compute.
"""
from __future__ import annotations

from pipeline.tasks.families._kit import (DOUBLE, FLOAT, UNARY, Impl, TorchModule, arg, arg_names, c2cuda_task,
                                         configs, dedent, signature, tfill, torch_task)
from pipeline.tasks.families.elementwise import _GRID, _NAIVE, _STRIDED, _UNROLL, _VEC
from pipeline.tasks.families.reductions import _ATOMIC_HELPER
from pipeline.tasks.families.sparse2 import embedding_tasks, histogram_tasks, spmv_tasks
from pipeline.core.records import Tolerance

TOL = Tolerance(rtol=1e-4, atol=1e-5)
DTOL = Tolerance(rtol=1e-9, atol=1e-11)


# --- gather -------------------------------------------------------------------------------------------
def _gather_impls(dt, op, form, args, idx_t="int"):
    ivec = {4: "int4", 2: "int2"}[dt.width]
    extra = {"plain": ("", ""), "weighted": (", w[i]", f", {dt.name} w"), "add": (", y[i]", f", {dt.name} w")}[form]
    comb = {"plain": "v", "weighted": "v * w", "add": "v + w"}[form]
    head = (f"__device__ __forceinline__ {dt.name} elem({dt.name} x{extra[1]}) {{\n"
            f"    {dt.name} v = {tfill(op, dt, x='x')};\n    return {comb};\n}}\n")
    second = {"plain": None, "weighted": "w", "add": "y"}[form]
    lanes = "xyzw"[:dt.width]
    wide = idx_t == "long long"  # 64-bit indices: scalar index loads beside the vector loads
    loads = "" if wide else f"        {ivec} idx_v = reinterpret_cast<const {ivec}*>(idx)[v];"
    if second:
        loads += f"\n        {dt.vec} s_v = reinterpret_cast<const {dt.vec}*>({second})[v];"
    compute = "\n".join(f"        rv.{c} = elem(x[{f'idx[{dt.width} * v + {k}]' if wide else 'idx_v.' + c}]"
                         f"{', s_v.' + c if second else ''});" for k, c in enumerate(lanes))
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), OUT="out", CALL_I=f"elem(x[idx[i]]{extra[0]})",
               LOADS=loads, COMPUTE=compute)
    names = [("naive", "naive", _NAIVE), ("grid_stride", "coalesced", _GRID), ("vector_loads", "vectorized", _VEC),
             ("unroll4", "thread_coarsening", _UNROLL), ("strided_lanes", "uncoalesced", _STRIDED)]
    return [Impl(n, s, head + tfill(dedent(t), dt, **ctx)) for n, s, t in names]


def gather_tasks(rng) -> list:
    out = []
    ops = ["identity", "relu", "square", "abs", "tanh", "sigmoid", "exp", "gelu", "sin", "softsign", "scale_shift", "silu",
           "cos", "softplus", "atan", "erf"]
    for k, u in enumerate(ops):
        for form in ("plain", "weighted", "add"):
            for dt in ((FLOAT, DOUBLE) if (k + len(form)) % 2 else (FLOAT,)):
                variant = f"{form}_{u}_{dt.name}"
                fn = f"gather_{variant}"
                args = [arg("n", "int", "scalar"), arg("m", "int", "scalar"), arg("x", f"const {dt.name}*", "in", "m"),
                        arg("idx", "const int*", "in", "n", "randint(0, m)")]
                if form != "plain":
                    args.append(arg("w" if form == "weighted" else "y", f"const {dt.name}*", "in", "n"))
                args.append(arg("out", f"{dt.name}*", "out", "n"))
                comb = {"plain": "v", "weighted": "v * w[i]", "add": "v + y[i]"}[form]
                ref = (f"#include <math.h>\n\nvoid {fn}({signature(args)}) {{\n    for (int i = 0; i < n; ++i) {{\n"
                       f"        {dt.name} xv = x[idx[i]];\n        {dt.name} v = {tfill(UNARY[u].c, dt, x='xv')};\n"
                       f"        out[i] = {comb};\n    }}\n}}\n")
                big = (1 << 24) if dt is FLOAT else (1 << 23)
                cfgs = configs([{"n": 1000, "m": 100}, {"n": 4099, "m": 5000}, {"n": 100003, "m": 7}],
                               [{"n": big, "m": 1 << 20}, {"n": big * 5 // 8 + 1, "m": 10000019}])
                # x is read at most once from DRAM (min(m, n) elements); idx, the second input and out stream
                nb = f"{dt.size}*min(m, n) + 4*n{' + ' + str(dt.size) + '*n' if form != 'plain' else ''} + {dt.size}*n"
                out.append(c2cuda_task("gather", variant, fn, ref, args, cfgs, f"{UNARY[u].flops + 1}*n", nb,
                                       _gather_impls(dt, UNARY[u].c, form, args), TOL if dt is FLOAT else DTOL,
                                       f"out[i] = {u}(x[idx[i]]){' * w[i]' if form == 'weighted' else ' + y[i]' if form == 'add' else ''}"))
            out.append(_gather_torch(u, form))
    return out


def _gather_torch(u, form):
    inputs = [("x", "torch.randn(m)"), ("idx", "torch.randint(0, m, (n,))")]
    body = UNARY[u].texpr("x[idx]")
    if form != "plain":
        inputs.append(("s", "torch.randn(n)"))
        body = f"{body} * s" if form == "weighted" else f"{body} + s"
    module = TorchModule(inputs, [f"return {body}"], {"n": 1 << 20, "m": 1 << 16})
    args = [arg("n", "int", "scalar"), arg("m", "int", "scalar"), arg("x", "const float*", "in", "1"),
            arg("idx", "const long long*", "in", "1")] + (
        [arg("w" if form == "weighted" else "y", "const float*", "in", "1")] if form != "plain" else []) + [
        arg("out", "float*", "out", "1")]
    launch = ("    run((int)numel_of(sizes, 1), (int)numel_of(sizes, 0), (const float*)inputs[0], "
              "(const long long*)inputs[1], " + ("(const float*)inputs[2], " if form != "plain" else "")
              + "(float*)outputs[0], stream);")
    cfgs = configs([{"n": 1000, "m": 100}, {"n": 4099, "m": 5000}, {"n": 100003, "m": 7}],
                   [{"n": 1 << 24, "m": 1 << 20}, {"n": 10000019, "m": 999999}])
    nbytes = f"4*min(m, n) + {16 if form != 'plain' else 12}*n"  # 8-byte indices
    return torch_task("gather", f"{form}_{u}", module.source(), cfgs, f"{UNARY[u].flops + 1}*n", nbytes,
                      _gather_impls(FLOAT, UNARY[u].c, form, args, "long long"), launch, TOL,
                      f"{u}(x[idx]){' * s' if form == 'weighted' else ' + s' if form == 'add' else ''}")


# --- scatter ------------------------------------------------------------------------------------------
_SC_HEAD = """
__device__ __forceinline__ ${T} fval(${T} x) { return ${OP}; }
__device__ __forceinline__ ${T} combine(${T} a, ${T} b) { return ${COMBINE}; }
${ATOMIC}
"""
_SC_NAIVE = """
// One thread per source element, one global atomic each.
__global__ void sc_naive(${SIG}) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomic_combine(&out[idx[i]], fval(x[i]));
}
static void run(${SIG}, cudaStream_t stream) {
    sc_naive<<<(n + 255) / 256, 256, 0, stream>>>(${NAMES});
}
"""
_SC_GRID = """
// Grid-stride loop, global atomics, ${PER} elements per iteration of a thread.
__global__ void __launch_bounds__(256) sc_grid(${SIG}) {
    int stride = gridDim.x * 256;
    for (int i = blockIdx.x * 256 + threadIdx.x; i < n; i += stride) atomic_combine(&out[idx[i]], fval(x[i]));
}
static void run(${SIG}, cudaStream_t stream) {
    int blocks = (n + 255) / 256;
    if (blocks > 132 * ${GRID_MULT}) blocks = 132 * ${GRID_MULT};
    sc_grid<<<blocks, 256, 0, stream>>>(${NAMES});
}
"""
_SC_SHARED = """
// Shared-memory privatisation: each block combines into its own copy of the m targets, then
// merges its copy into the output with one atomic per touched target.
__global__ void __launch_bounds__(256) sc_shared(${SIG}) {
    extern __shared__ unsigned char smem[];
    ${T}* local = reinterpret_cast<${T}*>(smem);
    for (int b = threadIdx.x; b < m; b += 256) local[b] = ${IDENT};
    __syncthreads();
    for (int i = blockIdx.x * 256 + threadIdx.x; i < n; i += gridDim.x * 256) atomic_combine(&local[idx[i]], fval(x[i]));
    __syncthreads();
    for (int b = threadIdx.x; b < m; b += 256)
        if (local[b] != ${IDENT}) atomic_combine(&out[b], local[b]);
}
__global__ void sc_global(${SIG}) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomic_combine(&out[idx[i]], fval(x[i]));
}
static void run(${SIG}, cudaStream_t stream) {
    int blocks = (n + 255) / 256;
    if (blocks > 132 * ${SH_MULT}) blocks = 132 * ${SH_MULT};
    size_t smem = sizeof(${T}) * (size_t)m;
    if (smem <= 48 * 1024) sc_shared<<<blocks, 256, smem, stream>>>(${NAMES});
    else sc_global<<<blocks, 256, 0, stream>>>(${NAMES});
}
"""


def _scatter_impls(dt, op, comb, args):
    bits = {"float": ("unsigned int", "__float_as_uint", "__uint_as_float"),
            "double": ("unsigned long long", "__double_as_longlong", "__longlong_as_double")}[dt.name]
    ident = "0.0${C}" if comb == "add" else "-1.0e30${C}"
    atomic = _ATOMIC_HELPER["sum" if comb == "add" else "cas"]
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), OP=tfill(op, dt, x="x"), IDENT=tfill(ident, dt),
               COMBINE=tfill("a + b" if comb == "add" else "fmax${F}(a, b)", dt), BITS=bits[0], TO=bits[1], FROM=bits[2])
    ctx["ATOMIC"] = tfill(atomic, dt, **ctx)
    head = tfill(dedent(_SC_HEAD), dt, **ctx)

    def code(t, **kw):
        return head + tfill(dedent(t), dt, **{**ctx, **kw})
    return [Impl("naive", "naive", code(_SC_NAIVE)), Impl("grid_stride", "coalesced", code(_SC_GRID, PER=1, GRID_MULT=8)),
            Impl("shared_private", "shared_privatization", code(_SC_SHARED, SH_MULT=4)),
            Impl("shared_private_wide", "shared_privatization_grid", code(_SC_SHARED, SH_MULT=16)),
            Impl("grid_small", "occupancy_limited", code(_SC_GRID, PER=1, GRID_MULT=1))]


def scatter_tasks(rng) -> list:
    out = []
    ops = ["identity", "relu", "square", "abs", "tanh", "sigmoid", "exp", "gelu", "sin", "softplus", "silu", "cube"]
    for k, u in enumerate(ops):
        for comb in ("add", "max"):
            for inout in (False, True):
                dt = (FLOAT, DOUBLE)[(k + inout) % 2]
                variant = f"{comb}_{u}{'_into' if inout else ''}_{dt.name}"
                fn = f"scatter_{variant}"
                args = [arg("n", "int", "scalar"), arg("m", "int", "scalar"), arg("x", f"const {dt.name}*", "in", "n"),
                        arg("idx", "const int*", "in", "n", "randint(0, m)"),
                        arg("out", f"{dt.name}*", "inout" if inout else "out", "m")]
                init = "" if inout else ("    for (int j = 0; j < m; ++j) out[j] = 0;\n" if comb == "add" else
                                         "    for (int j = 0; j < m; ++j) out[j] = -1.0e30;\n")
                upd = "out[idx[i]] += v;" if comb == "add" else f"out[idx[i]] = fmax{dt.F}(out[idx[i]], v);"
                ref = (f"#include <math.h>\n\nvoid {fn}({signature(args)}) {{\n{init}"
                       f"    for (int i = 0; i < n; ++i) {{\n        {dt.name} xv = x[i];\n"
                       f"        {dt.name} v = {tfill(UNARY[u].c, dt, x='xv')};\n        {upd}\n    }}\n}}\n")
                # the output starts at the identity for 'out' tasks: a cudaMemset-free init kernel in run()
                impls = _scatter_impls(dt, UNARY[u].c, comb, args)
                if not inout:
                    impls = [_with_init(i, dt, comb) for i in impls]
                cfgs = configs([{"n": 1000, "m": 10}, {"n": 4099, "m": 1000}, {"n": 100003, "m": 4099}],
                               [{"n": 1 << 23, "m": 4096}, {"n": 5000011, "m": 1023}])
                out.append(c2cuda_task("scatter", variant, fn, ref, args, cfgs, f"{UNARY[u].flops + 1}*n",
                                       f"{dt.size + 4}*n + {dt.size * (2 if inout else 1)}*m", impls,
                                       Tolerance(rtol=1e-4, atol=1e-4) if dt is FLOAT else DTOL,
                                       f"{'out' if inout else 'zeroed out'}[idx[i]] {comb}= {u}(x[i])"))
            if (k + len(comb)) % 2 == 0:
                out.append(_scatter_torch(u, comb))
    return out


def _with_init(impl: Impl, dt, comb) -> Impl:
    ident = "0" if comb == "add" else f"-1.0e30{dt.C}"
    init = (f"__global__ void init_out(int m, {dt.name}* out) {{\n    int j = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (j < m) out[j] = {ident};\n}}\n")
    body = impl.body.replace("static void run(", "static void run_scatter(")
    args_call = body[body.index("static void run_scatter("):]
    sig = args_call[len("static void run_scatter("):args_call.index(")")]
    names = ", ".join(p.strip().split()[-1].lstrip("*") for p in sig.split(","))
    wrapper = (f"static void run({sig}) {{\n    init_out<<<(m + 255) / 256, 256, 0, stream>>>(m, out);\n"
               f"    run_scatter({names});\n}}\n")
    return Impl(impl.name, impl.strategy, init + body + wrapper)


def _scatter_torch(u, comb):
    red = "sum" if comb == "add" else "amax"
    inputs = [("x", "torch.randn(n)"), ("idx", "torch.randint(0, m, (n,))"), ("base", "torch.randn(m)")]
    body = f"base.scatter_reduce(0, idx, {UNARY[u].texpr('x')}, reduce='{red}')"
    module = TorchModule(inputs, [f"return {body}"], {"n": 1 << 20, "m": 1024})
    args = [arg("n", "int", "scalar"), arg("m", "int", "scalar"), arg("x", "const float*", "in", "1"),
            arg("idx", "const long long*", "in", "1"), arg("out", "float*", "inout", "1")]
    launch = ("    int n = (int)numel_of(sizes, 0), m = (int)numel_of(sizes, 2);\n"
              "    cudaMemcpyAsync(outputs[0], inputs[2], sizeof(float) * (size_t)m, cudaMemcpyDeviceToDevice, stream);\n"
              "    run(n, m, (const float*)inputs[0], (const long long*)inputs[1], (float*)outputs[0], stream);")
    cfgs = configs([{"n": 1000, "m": 10}, {"n": 4099, "m": 1000}, {"n": 100003, "m": 4099}],
                   [{"n": 1 << 23, "m": 4096}, {"n": 5000011, "m": 1023}])
    return torch_task("scatter", f"{comb}_{u}", module.source(), cfgs, f"{UNARY[u].flops + 1}*n", "12*n + 8*m",
                      _scatter_impls(FLOAT, UNARY[u].c, comb, args), launch, Tolerance(rtol=1e-4, atol=1e-4),
                      f"base.scatter_reduce(idx, {u}(x), {red})")


def generate(rng) -> list:
    return gather_tasks(rng) + scatter_tasks(rng) + embedding_tasks(rng) + spmv_tasks(rng) + histogram_tasks(rng)
