"""Whole-array reductions: one value (or one index) from n elements.

Families: reduce_sum (sum of f(x)), reduce_minmax (max or min of f(x)), dot_product (sum of
g(a, b) or a*b*w), norms (a final transform of a sum: sqrt, mean, rms, log), argreduce (index of
the first maximum or minimum of f(x)). Value reductions share five implementations: naive (one
block of 1024 threads), atomic_blocks (shared tree per block, one atomic per block),
interleaved_tree (the divergent modulo tree, weak), warp_shuffle (grid-stride, shuffles, two
passes, deterministic) and vector_loads (the same with 16-byte loads). Arg-reductions: naive,
two-pass shared tree, warp shuffle, vector loads and a packed 64-bit atomicMax.
"""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.tasks.families._kit import (BINARY, DOUBLE, FLOAT, UNARY, DType, Impl, TorchModule, arg, arg_names,
                                         bin_t, c2cuda_task, configs, dedent, signature, tfill, torch_task)
from pipeline.tasks.families.elementwise import Elementwise, _elem_fn
from pipeline.tasks.families.argreduce import argreduce_tasks
from pipeline.core.records import Tolerance

COMBINE = {"sum": "a + b", "max": "fmax${F}(a, b)", "min": "fmin${F}(a, b)"}
IDENT = {"sum": "0.0${C}", "max": "-1.0e30${C}", "min": "1.0e30${C}"}
FINAL = {"none": "${v}", "mean": "${v} / (${T})n", "sqrt": "sqrt${F}(${v})", "rms": "sqrt${F}(${v} / (${T})n)",
         "log": "log${F}(${v})", "cbrt": "cbrt${F}(${v})"}
TFINAL = {"none": "{}", "mean": "{} / x.numel()", "sqrt": "torch.sqrt({})", "rms": "torch.sqrt({} / x.numel())",
          "log": "torch.log({})", "cbrt": "torch.pow({}, 1.0 / 3.0)"}
TOL = Tolerance(rtol=1e-3, atol=1e-4)

_COMMON = """
#define THREADS 256
#define MAX_BLOCKS 1024
__device__ __forceinline__ ${T} combine(${T} a, ${T} b) { return ${COMBINE}; }
__device__ __forceinline__ ${T} finish(${T} v, int n) { return ${FINAL}; }
__device__ __forceinline__ ${T} warp_reduce(${T} v) {
    for (int o = 16; o > 0; o >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
"""
_NAIVE = """
// One block of 1024 threads: a strided loop per thread, then a shared-memory tree.
__global__ void red_naive(${SIG}) {
    __shared__ ${T} s[1024];
    ${T} acc = ${IDENT};
    for (int i = threadIdx.x; i < n; i += 1024) acc = combine(acc, ${CALL_I});
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int w = 512; w > 0; w >>= 1) {
        if (threadIdx.x < w) s[threadIdx.x] = combine(s[threadIdx.x], s[threadIdx.x + w]);
        __syncthreads();
    }
    if (threadIdx.x == 0) ${OUT}[0] = finish(s[0], n);
}
static void run(${SIG}, cudaStream_t stream) {
    red_naive<<<1, 1024, 0, stream>>>(${NAMES});
}
"""
_ATOMIC_HELPER = {
    "sum": "__device__ __forceinline__ void atomic_combine(${T}* p, ${T} v) { atomicAdd(p, v); }\n",
    "cas": """
__device__ void atomic_combine(${T}* p, ${T} v) {
    ${BITS}* addr = reinterpret_cast<${BITS}*>(p);
    ${BITS} old = *addr, assumed;
    do {
        assumed = old;
        ${T} cur = ${FROM}(assumed);
        ${T} next = combine(cur, v);
        if (next == cur) break;
        old = atomicCAS(addr, assumed, ${TO}(next));
    } while (old != assumed);
}
"""}
_ATOMIC = """
// One element per thread, a shared-memory tree per block, one atomic per block; a last
// one-thread kernel applies the final transform.
__global__ void red_init(${T}* out) { out[0] = ${IDENT}; }
__global__ void red_atomic(${SIG}) {
    __shared__ ${T} s[THREADS];
    int i = blockIdx.x * THREADS + threadIdx.x;
    s[threadIdx.x] = i < n ? ${CALL_I} : ${IDENT};
    __syncthreads();
    ${TREE}
    if (threadIdx.x == 0) atomic_combine(${OUT}, s[0]);
}
__global__ void red_finish(int n, ${T}* out) { out[0] = finish(out[0], n); }
static void run(${SIG}, cudaStream_t stream) {
    red_init<<<1, 1, 0, stream>>>(${OUT});
    red_atomic<<<(n + THREADS - 1) / THREADS, THREADS, 0, stream>>>(${NAMES});
    red_finish<<<1, 1, 0, stream>>>(n, ${OUT});
}
"""
_TREE_SEQ = """for (int w = THREADS / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) s[threadIdx.x] = combine(s[threadIdx.x], s[threadIdx.x + w]);
        __syncthreads();
    }"""
_TREE_INTERLEAVED = """for (int w = 1; w < THREADS; w *= 2) {  // interleaved addressing: divergent warps
        if (threadIdx.x % (2 * w) == 0) s[threadIdx.x] = combine(s[threadIdx.x], s[threadIdx.x + w]);
        __syncthreads();
    }"""
_TWO_PASS = """
// Pass 1: grid-stride accumulation in registers${VEC_NOTE}, warp shuffles, one partial per block.
// Pass 2: one block combines the partials (deterministic, no atomics).
__device__ ${T} g_part[MAX_BLOCKS];
__device__ __forceinline__ ${T} block_reduce(${T} acc) {
    __shared__ ${T} warp_part[THREADS / 32];
    acc = warp_reduce(acc);
    if ((threadIdx.x & 31) == 0) warp_part[threadIdx.x >> 5] = acc;
    __syncthreads();
    acc = threadIdx.x < THREADS / 32 ? warp_part[threadIdx.x] : ${IDENT};
    return warp_reduce(acc);  // valid in warp 0
}
__global__ void __launch_bounds__(THREADS) red_pass1(${SIG}) {
    ${T} acc = ${IDENT};
    int stride = gridDim.x * THREADS;
${LOOP}
    acc = block_reduce(acc);
    if (threadIdx.x == 0) g_part[blockIdx.x] = acc;
}
__global__ void __launch_bounds__(THREADS) red_pass2(int blocks, int n, ${T}* out) {
    ${T} acc = ${IDENT};
    for (int b = threadIdx.x; b < blocks; b += THREADS) acc = combine(acc, g_part[b]);
    acc = block_reduce(acc);
    if (threadIdx.x == 0) out[0] = finish(acc, n);
}
static void run(${SIG}, cudaStream_t stream) {
    int blocks = (n / ${PER} + THREADS - 1) / THREADS;
    if (blocks < 1) blocks = 1;
    if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
    red_pass1<<<blocks, THREADS, 0, stream>>>(${NAMES});
    red_pass2<<<1, THREADS, 0, stream>>>(blocks, n, ${OUT});
}
"""
_SCALAR_LOOP = """    for (int i = blockIdx.x * THREADS + threadIdx.x; i < n; i += stride) acc = combine(acc, ${CALL_I});"""
_VEC_LOOP = """    int nv = n / ${W};
    for (int v = blockIdx.x * THREADS + threadIdx.x; v < nv; v += stride) {
${LOADS}
${COMBINES}
    }
    for (int i = nv * ${W} + blockIdx.x * THREADS + threadIdx.x; i < n; i += stride) acc = combine(acc, ${CALL_I});"""
_LANES = "xyzw"


@dataclass
class Reduction:
    """out[0] = final(combine over i of elem(ins[i]...))."""
    e: Elementwise          # the per-element map (its `out` names the result array)
    op: str                 # sum | max | min
    final: str = "none"
    tforward: list[str] = ()

    @property
    def dt(self) -> DType:
        return self.e.dt

    def args(self):
        a = [arg("n", "int", "scalar")]
        a += [arg(x, f"const {self.dt.name}*", "in", "n", self.e.init) for x in self.e.ins]
        return a + [arg(self.e.out, f"{self.dt.name}*", "out", "1")]

    def reference(self, fn: str) -> str:
        acc_t = "double" if self.op == "sum" else self.dt.name
        init = {"sum": "0.0", "max": "-INFINITY", "min": "INFINITY"}[self.op]
        upd = {"sum": "acc += r;", "max": f"acc = fmax{self.dt.F}(acc, r);", "min": f"acc = fmin{self.dt.F}(acc, r);"}
        stmts = self.e.body({x: f"{x}[i]" for x in self.e.ins}).replace("\n", "\n        ")
        final = tfill(FINAL[self.final], DOUBLE if acc_t == "double" else self.dt, v="acc")
        return (f"#include <math.h>\n\nvoid {fn}({signature(self.args())}) {{\n    {acc_t} acc = {init};\n"
                f"    for (int i = 0; i < n; ++i) {{\n        {self.dt.name} r;\n        {stmts}\n"
                f"        {upd[self.op]}\n    }}\n    {self.e.out}[0] = ({self.dt.name})({final});\n}}\n")


def _call(r: Reduction, index: str) -> str:
    return "elem(" + ", ".join(f"{x}[{index}]" for x in r.e.ins) + ")"


def implementations(r: Reduction) -> list[Impl]:
    dt, args = r.dt, r.args()
    bits = {"float": ("unsigned int", "__float_as_uint", "__uint_as_float"),
            "double": ("unsigned long long", "__double_as_longlong", "__longlong_as_double")}[dt.name]
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), OUT=r.e.out, CALL_I=_call(r, "i"),
               COMBINE=tfill(COMBINE[r.op], dt), IDENT=tfill(IDENT[r.op], dt),
               FINAL=tfill(FINAL[r.final], dt, v="v"), BITS=bits[0], TO=bits[1], FROM=bits[2])
    head = _elem_fn(r.e) + tfill(dedent(_COMMON), dt, **ctx)
    atomic_helper = tfill(_ATOMIC_HELPER["sum" if r.op == "sum" else "cas"], dt, **ctx)
    loads = "\n".join(f"        {dt.vec} {x}_v = reinterpret_cast<const {dt.vec}*>({x})[v];" for x in r.e.ins)
    combines = "\n".join("        acc = combine(acc, elem(" + ", ".join(f"{x}_v.{c}" for x in r.e.ins) + "));"
                         for c in _LANES[:dt.width])
    scalar_loop = tfill(_SCALAR_LOOP, dt, **ctx)
    vec_loop = tfill(_VEC_LOOP, dt, LOADS=loads, COMBINES=combines, **ctx)

    def code(tpl, **kw):
        return tfill(dedent(tpl), dt, **{**ctx, **kw})
    return [
        Impl("naive", "naive", head + code(_NAIVE)),
        Impl("atomic_blocks", "shared_tree", head + atomic_helper + code(_ATOMIC, TREE=_TREE_SEQ)),
        Impl("interleaved_tree", "divergent_tree", head + atomic_helper + code(_ATOMIC, TREE=_TREE_INTERLEAVED)),
        Impl("warp_shuffle", "warp_shuffle", head + code(_TWO_PASS, LOOP=scalar_loop, PER=1, VEC_NOTE="")),
        Impl("vector_loads", "vectorized", head + code(_TWO_PASS, LOOP=vec_loop, PER=dt.width,
                                                        VEC_NOTE=f" with {dt.vec} loads")),
    ]


def _sizes(dt: DType) -> list:
    big = (1 << 24) if dt.size == 4 else (1 << 23)
    return configs([{"n": 1000}, {"n": 4099}, {"n": 250007}], [{"n": big}, {"n": big * 5 // 8 + 3}])


def c_task(family, variant, r: Reduction, description):
    fn = f"{family}_{variant}"
    nbytes = f"{r.dt.size * len(r.e.ins)}*n + {r.dt.size}"
    return c2cuda_task(family, variant, fn, r.reference(fn), r.args(), _sizes(r.dt), f"{r.e.flops + 1}*n", nbytes,
                       implementations(r), TOL if r.dt is FLOAT else Tolerance(rtol=1e-8, atol=1e-9), description)


def t_task(family, variant, r: Reduction, description, make_input: str = "torch.rand(n) * 2"):
    module = TorchModule(inputs=[(x, make_input) for x in r.e.ins], forward=list(r.tforward),
                         sizes={"n": 1 << 20})
    cfgs = configs([{"n": 1000}, {"n": 4099}, {"n": 250007}], [{"n": 1 << 24}, {"n": 10000019}])
    casts = "".join(f"(const float*)inputs[{k}], " for k in range(len(r.e.ins)))
    launch = f"    int n = (int)numel_of(sizes, 0);\n    run(n, {casts}(float*)outputs[0], stream);"
    return torch_task(family, variant, module.source(), cfgs, f"{r.e.flops + 1}*n", f"{4 * len(r.e.ins)}*n + 4",
                      implementations(r), launch, TOL, description)


def _map(u: str, dt: DType, x: str = "x") -> Elementwise:
    return Elementwise(dt, [x], "result", [f"r = {UNARY[u].c};"], UNARY[u].flops, init="uniform(0, 2)")


_SUM_MAPS = ["identity", "square", "abs", "relu", "sigmoid", "tanh", "silu", "softplus", "gelu", "gelu_tanh", "elu",
             "exp", "sin", "cos", "log1p_abs", "sqrt_abs", "softsign", "mish", "cube", "atan", "erf", "inv_sqrt1p",
             "neg_exp_sq", "logsigmoid", "hardswish", "tanhshrink", "scale_shift", "sq_plus_x"]


def sum_tasks(rng) -> list:
    out = []
    for k, u in enumerate(_SUM_MAPS):
        for dt in (FLOAT, DOUBLE):
            out.append(c_task("reduce_sum", f"{u}_{dt.name}", Reduction(_map(u, dt), "sum"), f"sum of {u}(x), {dt.name}"))
        if True:
            r = Reduction(_map(u, FLOAT), "sum", tforward=[f"return torch.sum({UNARY[u].texpr('x')})"])
            out.append(t_task("reduce_sum", u, r, f"sum of {u}(x) over a vector"))
    return out


# Maps that are strictly monotone on [-1, 1], and |x|, x^2 (whose minimum min|x| varies too): the
# extreme then moves with the extreme input. A flat extremum inside the range (cos, exp(-x^2), ...)
# or a saturated one (relu's minimum) would give the same output for every input.
_MINMAX_MAPS = ["identity", "abs", "square", "sin", "tanhshrink", "silu", "mish", "softsign", "log1p_abs", "cube", "atan",
                "hardswish", "tanh", "sigmoid", "softplus", "exp", "erf", "elu", "selu", "scale_shift"]
_MAX_ONLY = ["relu", "gelu", "sq_plus_x"]


def minmax_tasks(rng) -> list:
    out = []
    for k, u in enumerate(_MINMAX_MAPS + _MAX_ONLY):
        for op in ("max",) if u in _MAX_ONLY else ("max", "min"):
            dt = (FLOAT, DOUBLE)[(k + (op == "min")) % 2]
            e = _map(u, dt)
            e.init = "uniform(-1, 1)"
            out.append(c_task("reduce_minmax", f"{op}_{u}_{dt.name}", Reduction(e, op), f"{op} of {u}(x), {dt.name}"))
            r = Reduction(_map(u, FLOAT), op, tforward=[f"return torch.{op}({UNARY[u].texpr('x')})"])
            out.append(t_task("reduce_minmax", f"{op}_{u}", r, f"{op} of {u}(x) over a vector", "torch.rand(n) * 2 - 1"))
    return out


def dot_tasks(rng) -> list:
    out = []
    pairs = ["mul", "sqdiff", "absdiff", "max", "min", "hypot", "mul_add_half", "safe_div", "add"]
    finals = ["none", "sqrt", "mean"]
    for b in pairs:
        for k, fin in enumerate(finals):
            for dt in (FLOAT, DOUBLE):
                e = Elementwise(dt, ["a", "b"], "result", [f"r = {BINARY[b].c};"], BINARY[b].flops, init="uniform(0, 2)")
                out.append(c_task("dot_product", f"{b}_{fin}_{dt.name}", Reduction(e, "sum", fin),
                                  f"{fin} of the sum of ({b})(a_i, b_i), {dt.name}"))
            e = Elementwise(FLOAT, ["a", "b"], "result", [f"r = {BINARY[b].c};"], BINARY[b].flops, init="uniform(0, 2)")
            body = TFINAL[fin].format(f"torch.sum({bin_t(b, 'a', 'b')})").replace("x.numel()", "a.numel()")
            out.append(t_task("dot_product", f"{b}_{fin}", Reduction(e, "sum", fin, [f"return {body}"]),
                              f"{fin} of sum(({b})(a, b))"))
    for dt in (FLOAT, DOUBLE):  # weighted forms with three inputs
        for name, stmt in [("weighted_dot", "r = ${a} * ${b} * ${w};"), ("weighted_sqdiff", "r = ${w} * (${a} - ${b}) * (${a} - ${b});")]:
            e = Elementwise(dt, ["a", "b", "w"], "result", [stmt], 3, init="uniform(0, 2)")
            out.append(c_task("dot_product", f"{name}_{dt.name}", Reduction(e, "sum"), f"{name} of three vectors"))
    return out


def norm_tasks(rng) -> list:
    out = []
    forms = [("l2", "square", "sqrt"), ("rms", "square", "rms"), ("l1_mean", "abs", "mean"), ("l3", "cube", "cbrt"),
             ("log_sum_exp_shifted", "neg_exp_sq", "log"), ("mean_sigmoid", "sigmoid", "mean"),
             ("log_sum_softplus", "softplus", "log"), ("mean_square", "square", "mean"), ("rms_tanh", "tanh", "rms"),
             ("geo_sqrt", "sqrt_abs", "sqrt"), ("mean_gelu", "gelu", "mean"), ("log_sum_exp", "exp", "log"),
             ("l2_silu", "silu", "sqrt"), ("mean_erf", "erf", "mean"), ("cbrt_sum_sq", "square", "cbrt"),
             ("log_sum_sq", "square", "log"), ("mean_cos", "cos", "mean"), ("log_mean_atan", "atan", "log")]
    for k, (name, u, fin) in enumerate(forms):
        for dt in (FLOAT, DOUBLE):
            e = _map(u, dt)
            e.init = "uniform(0, 2)"
            out.append(c_task("norms", f"{name}_{dt.name}", Reduction(e, "sum", fin), f"{fin}(sum {u}(x)), {dt.name}"))
        body = TFINAL[fin].format(f"torch.sum({UNARY[u].texpr('x')})")
        out.append(t_task("norms", name, Reduction(_map(u, FLOAT), "sum", fin, [f"return {body}"]),
                          f"{fin} of the sum of {u}(x)"))
    return out


def generate(rng) -> list:
    return sum_tasks(rng) + minmax_tasks(rng) + dot_tasks(rng) + norm_tasks(rng) + argreduce_tasks(rng)
