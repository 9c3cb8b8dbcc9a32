"""Arg-reductions (family argreduce): the index of the first maximum (or minimum) of f(x).

Ties go to the lowest index in every implementation, so results are exact and deterministic:
naive (one block of 1024 threads), two_pass_tree (shared-memory trees, partials per block),
warp_shuffle (value and index shuffled together), vector_loads (16-byte loads) and packed_atomic
(value made order-preserving and packed with the inverted index into one 64-bit atomicMax).
"""
from __future__ import annotations

from pipeline.tasks.families._kit import (FLOAT, UNARY, DType, Impl, TorchModule, arg, arg_names, c2cuda_task,
                                         configs, dedent, signature, tfill, torch_task)
from pipeline.tasks.families.elementwise import Elementwise, _elem_fn
from pipeline.core.records import Tolerance

INT = DType("int", "", "", 4, "int4", 4, Tolerance(rtol=0, atol=0))

_COMMON = """
#define THREADS 256
#define MAX_BLOCKS 1024
// is (vb, ib) a better candidate than (va, ia)? ties go to the lower index
__device__ __forceinline__ bool better(${T} va, ${I} ia, ${T} vb, ${I} ib) {
    return vb ${CMP} va || (vb == va && ib < ia);
}
__device__ __forceinline__ void warp_best(${T}& v, ${I}& i) {
    for (int o = 16; o > 0; o >>= 1) {
        ${T} ov = __shfl_xor_sync(0xffffffffu, v, o);
        ${I} oi = __shfl_xor_sync(0xffffffffu, i, o);
        if (better(v, i, ov, oi)) { v = ov; i = oi; }
    }
}
"""
_NAIVE = """
// One block of 1024 threads: each scans a strided slice, then a shared-memory tree of (value, index).
__global__ void arg_naive(${SIG}) {
    __shared__ ${T} sv[1024];
    __shared__ ${I} si[1024];
    ${T} best = ${IDENT};
    ${I} bi = 0x7fffffff;
    for (int i = threadIdx.x; i < n; i += 1024) {
        ${T} v = ${CALL_I};
        if (better(best, bi, v, i)) { best = v; bi = i; }
    }
    sv[threadIdx.x] = best;
    si[threadIdx.x] = bi;
    __syncthreads();
    for (int w = 512; w > 0; w >>= 1) {
        if (threadIdx.x < w && better(sv[threadIdx.x], si[threadIdx.x], sv[threadIdx.x + w], si[threadIdx.x + w])) {
            sv[threadIdx.x] = sv[threadIdx.x + w];
            si[threadIdx.x] = si[threadIdx.x + w];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) ${OUT}[0] = si[0];
}
static void run(${SIG}, cudaStream_t stream) {
    arg_naive<<<1, 1024, 0, stream>>>(${NAMES});
}
"""
_TWO_PASS = """
// Pass 1: ${PASS1_NOTE}; one (value, index) per block. Pass 2: one block picks the best partial.
__device__ ${T} g_val[MAX_BLOCKS];
__device__ ${I} g_idx[MAX_BLOCKS];
${BLOCK_BEST}
__global__ void __launch_bounds__(THREADS) arg_pass1(${SIG}) {
    ${T} best = ${IDENT};
    ${I} bi = 0x7fffffff;
    int stride = gridDim.x * THREADS;
${LOOP}
    block_best(best, bi);
    if (threadIdx.x == 0) { g_val[blockIdx.x] = best; g_idx[blockIdx.x] = bi; }
}
__global__ void __launch_bounds__(THREADS) arg_pass2(int blocks, ${I}* out) {
    ${T} best = ${IDENT};
    ${I} bi = 0x7fffffff;
    for (int b = threadIdx.x; b < blocks; b += THREADS)
        if (better(best, bi, g_val[b], g_idx[b])) { best = g_val[b]; bi = g_idx[b]; }
    block_best(best, bi);
    if (threadIdx.x == 0) out[0] = bi;
}
static void run(${SIG}, cudaStream_t stream) {
    int blocks = (n / ${PER} + THREADS - 1) / THREADS;
    if (blocks < 1) blocks = 1;
    if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
    arg_pass1<<<blocks, THREADS, 0, stream>>>(${NAMES});
    arg_pass2<<<1, THREADS, 0, stream>>>(blocks, ${OUT});
}
"""
_BLOCK_TREE = """
__device__ void block_best(${T}& best, ${I}& bi) {  // shared-memory tree; result in thread 0
    __shared__ ${T} sv[THREADS];
    __shared__ ${I} si[THREADS];
    sv[threadIdx.x] = best;
    si[threadIdx.x] = bi;
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w && better(sv[threadIdx.x], si[threadIdx.x], sv[threadIdx.x + w], si[threadIdx.x + w])) {
            sv[threadIdx.x] = sv[threadIdx.x + w];
            si[threadIdx.x] = si[threadIdx.x + w];
        }
        __syncthreads();
    }
    best = sv[0];
    bi = si[0];
}
"""
_BLOCK_SHFL = """
__device__ void block_best(${T}& best, ${I}& bi) {  // warp shuffles, then warp 0 over the warps' bests
    __shared__ ${T} wv[THREADS / 32];
    __shared__ ${I} wi[THREADS / 32];
    warp_best(best, bi);
    if ((threadIdx.x & 31) == 0) { wv[threadIdx.x >> 5] = best; wi[threadIdx.x >> 5] = bi; }
    __syncthreads();
    best = threadIdx.x < THREADS / 32 ? wv[threadIdx.x] : ${IDENT};
    bi = threadIdx.x < THREADS / 32 ? wi[threadIdx.x] : (${I})0x7fffffff;
    warp_best(best, bi);
}
"""
_SCALAR_LOOP = """    for (int i = blockIdx.x * THREADS + threadIdx.x; i < n; i += stride) {
        ${T} v = ${CALL_I};
        if (better(best, bi, v, i)) { best = v; bi = i; }
    }"""
_VEC_LOOP = """    int nv = n / 4;
    for (int q = blockIdx.x * THREADS + threadIdx.x; q < nv; q += stride) {
        ${V} xv = reinterpret_cast<const ${V}*>(${X})[q];
        ${T} v0 = elem(xv.x), v1 = elem(xv.y), v2 = elem(xv.z), v3 = elem(xv.w);
        if (better(best, bi, v0, 4 * q)) { best = v0; bi = 4 * q; }
        if (better(best, bi, v1, 4 * q + 1)) { best = v1; bi = 4 * q + 1; }
        if (better(best, bi, v2, 4 * q + 2)) { best = v2; bi = 4 * q + 2; }
        if (better(best, bi, v3, 4 * q + 3)) { best = v3; bi = 4 * q + 3; }
    }
    for (int i = 4 * nv + blockIdx.x * THREADS + threadIdx.x; i < n; i += stride) {
        ${T} v = ${CALL_I};
        if (better(best, bi, v, i)) { best = v; bi = i; }
    }"""
_PACKED = """
// Each value is mapped to an unsigned key with the same order, packed above the inverted index,
// and one 64-bit atomicMax per warp keeps the best (ties: the lowest index has the largest key).
__device__ unsigned long long g_key;
__device__ __forceinline__ unsigned long long pack(${T} v, int i) {
    unsigned int k = ${ORDER};
    ${FLIP}
    return ((unsigned long long)k << 32) | (unsigned long long)(0xffffffffu - (unsigned int)i);
}
__global__ void arg_init() { g_key = 0ull; }
__global__ void __launch_bounds__(THREADS) arg_packed(${SIG}) {
    unsigned long long key = 0ull;
    for (int i = blockIdx.x * THREADS + threadIdx.x; i < n; i += gridDim.x * THREADS) {
        unsigned long long k = pack(${CALL_I}, i);
        if (k > key) key = k;
    }
    for (int o = 16; o > 0; o >>= 1) {
        unsigned long long other = __shfl_xor_sync(0xffffffffu, key, o);
        if (other > key) key = other;
    }
    if ((threadIdx.x & 31) == 0 && key != 0ull) atomicMax(&g_key, key);
}
__global__ void arg_unpack(${I}* out) { out[0] = (${I})(0xffffffffu - (unsigned int)(g_key & 0xffffffffull)); }
static void run(${SIG}, cudaStream_t stream) {
    int blocks = (n + THREADS - 1) / THREADS;
    if (blocks > 132 * 8) blocks = 132 * 8;
    arg_init<<<1, 1, 0, stream>>>();
    arg_packed<<<blocks, THREADS, 0, stream>>>(${NAMES});
    arg_unpack<<<1, 1, 0, stream>>>(${OUT});
}
"""
_ORDER = {"float": "(__float_as_uint(v) & 0x80000000u) ? ~__float_as_uint(v) : (__float_as_uint(v) | 0x80000000u)",
          "int": "(unsigned int)v ^ 0x80000000u"}


def implementations(e: Elementwise, op: str, index_t: str, args) -> list[Impl]:
    dt = e.dt
    ident = {("float", "max"): "-3.0e38f", ("float", "min"): "3.0e38f",
             ("int", "max"): "(-2147483647 - 1)", ("int", "min"): "2147483647"}[dt.name, op]
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), OUT="index", CALL_I=f"elem({e.ins[0]}[i])",
               I=index_t, CMP=">" if op == "max" else "<", IDENT=ident, X=e.ins[0],
               ORDER=_ORDER[dt.name], FLIP="k = ~k;" if op == "min" else "")
    head = _elem_fn(e) + tfill(dedent(_COMMON), dt, **ctx)

    def code(tpl, **kw):
        return tfill(dedent(tpl), dt, **{**ctx, **kw})
    scalar = code(_SCALAR_LOOP)
    return [
        Impl("naive", "naive", head + code(_NAIVE)),
        Impl("two_pass_tree", "shared_tree", head + code(_TWO_PASS, BLOCK_BEST=code(_BLOCK_TREE), LOOP=scalar, PER=1,
                                                         PASS1_NOTE="grid-stride scan, shared-memory tree")),
        Impl("warp_shuffle", "warp_shuffle", head + code(_TWO_PASS, BLOCK_BEST=code(_BLOCK_SHFL), LOOP=scalar, PER=1,
                                                         PASS1_NOTE="grid-stride scan, warp shuffles")),
        Impl("vector_loads", "vectorized", head + code(_TWO_PASS, BLOCK_BEST=code(_BLOCK_SHFL), LOOP=code(_VEC_LOOP),
                                                       PER=4, PASS1_NOTE="16-byte loads of four elements, shuffles")),
        Impl("packed_atomic", "atomics", head + code(_PACKED)),
    ]


_FLOAT_MAPS = ["identity", "abs", "square", "sin", "cos", "tanh", "sigmoid", "softsign", "sq_plus_x", "cube", "gelu",
               "silu", "mish", "neg_exp_sq", "atan", "tanhshrink", "log1p_abs", "hardswish"]
_INT_MAPS = {"identity": "r = ${x};", "abs": "r = ${x} < 0 ? -${x} : ${x};", "square": "r = ${x} * ${x};",
             "mod17": "r = ${x} % 17;", "xor_shift": "r = ${x} ^ (${x} >> 3);", "affine_mod": "r = (${x} * 7 + 3) % 101;",
             "neg_square": "r = -${x} * ${x} + 5 * ${x};", "low_bits": "r = ${x} & 255;"}


def _c(e: Elementwise, op: str, name: str):
    fn = f"argreduce_{op}_{name}_{e.dt.name}"
    args = [arg("n", "int", "scalar"), arg("x", f"const {e.dt.name}*", "in", "n", e.init), arg("index", "int*", "out", "1")]
    cmp = ">" if op == "max" else "<"
    stmts = e.body({"x": "x[i]"}).replace("\n", "\n        ")
    ref = (f"void {fn}({signature(args)}) {{\n    int best_i = 0;\n    {e.dt.name} best = 0;\n"
           f"    for (int i = 0; i < n; ++i) {{\n        {e.dt.name} r;\n        {stmts}\n"
           f"        if (i == 0 || r {cmp} best) {{ best = r; best_i = i; }}\n    }}\n    index[0] = best_i;\n}}\n")
    if e.dt is FLOAT:
        ref = "#include <math.h>\n\n" + ref
    cfgs = configs([{"n": 1000}, {"n": 4099}, {"n": 250007}], [{"n": 1 << 24}, {"n": 10000019}])
    return c2cuda_task("argreduce", f"{op}_{name}_{e.dt.name}", fn, ref, args, cfgs, f"{e.flops + 1}*n", "4*n + 4",
                       implementations(e, op, "int", args), Tolerance(rtol=0, atol=0),
                       f"index of the first {op}imum of {name}(x), {e.dt.name}")


def _t(u: str, op: str):
    e = Elementwise(FLOAT, ["x"], "index", [f"r = {UNARY[u].c};"], UNARY[u].flops)
    args = [arg("n", "int", "scalar"), arg("x", "const float*", "in", "n"), arg("index", "long long*", "out", "1")]
    module = TorchModule(inputs=[("x", "torch.randn(n)")], forward=[f"return torch.arg{op}({UNARY[u].texpr('x')})"],
                         sizes={"n": 1 << 20})
    cfgs = configs([{"n": 1000}, {"n": 4099}, {"n": 250007}], [{"n": 1 << 24}, {"n": 10000019}])
    launch = "    run((int)numel_of(sizes, 0), (const float*)inputs[0], (long long*)outputs[0], stream);"
    return torch_task("argreduce", f"{op}_{u}", module.source(), cfgs, f"{e.flops + 1}*n", "4*n + 8",
                      implementations(e, op, "long long", args), launch, Tolerance(rtol=0, atol=0),
                      f"arg{op} of {u}(x) over a vector (first index on ties)")


_FLAT_EXTREMA = {"neg_exp_sq": {"max"}, "sin": {"max", "min"}, "cos": {"max", "min"}, "silu": {"min"},
                 "gelu": {"min"}, "mish": {"min"}, "hardswish": {"min"}, "sq_plus_x": {"min"}}
"""Maps whose maximum or minimum lies inside the input range, where f is flat: many inputs come
within an ulp of the extremum, and C's libm and CUDA's (or a fused multiply-add) round them
differently, so the first index of the extremum differs between two correct programs. The C→CUDA
tasks leave those (map, op) pairs out; the PyTorch ones compare CUDA with CUDA and keep them."""


def argreduce_tasks(rng) -> list:
    out = []
    for k, u in enumerate(_FLOAT_MAPS):
        for op in ("max", "min"):
            e = Elementwise(FLOAT, ["x"], "index", [f"r = {UNARY[u].c};"], UNARY[u].flops)
            if op not in _FLAT_EXTREMA.get(u, ()):
                out.append(_c(e, op, u))
            out.append(_t(u, op))
    for name, stmt in _INT_MAPS.items():
        for op in ("max", "min"):
            e = Elementwise(INT, ["x"], "index", [stmt], 2, init="randint(-1000, 1000)")
            out.append(_c(e, op, name))
    return out
