"""Element-wise families: one output element from the same-index elements of the inputs.

Families: elementwise_unary, elementwise_binary, elementwise_fused (three inputs), blas1 (scaled
vector updates with runtime scalars, some in place), polynomial (Horner and rational functions),
activation_backward (dy * f'(x)), integer_hash (unsigned bit mixing, exact).
Every task shares the five kernels below, built around one `elem` device function:
naive (one element per thread), grid_stride, vectorized (16-byte loads, scalar tail),
unrolled (four coalesced elements per thread) and uncoalesced (neighbouring threads ~n/32 apart,
the weak variant).
"""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.tasks.families._kit import (BINARY, DOUBLE, FLOAT, SQRT_NEAR_ZERO_TOL, UNARY, UNBOUNDED_SAFE,
                                         DType, Impl, TorchModule, arg, bin_t, c2cuda_task, configs, dedent,
                                         pick, tfill, torch_task)
from pipeline.core.records import Tolerance

UINT = DType("unsigned int", "", "u", 4, "uint4", 4, Tolerance(rtol=0, atol=0))


@dataclass
class Elementwise:
    """out[i] = elem(ins[i]..., scalars): `steps` are C statements setting r over ${input} placeholders
    and scalar names; `tsteps` the same in torch (r = ...) for torch2cuda tasks."""
    dt: DType
    ins: list[str]
    out: str
    steps: list[str]
    flops: int
    scalars: list[tuple[str, float]] = ()
    tsteps: list[str] = ()
    init: str = "uniform(-3, 3)"

    def args(self):
        a = [arg("n", "int", "scalar")]
        a += [arg(s, self.dt.name, "scalar", init=repr(v)) for s, v in self.scalars]
        a += [arg(x, f"const {self.dt.name}*", "in", "n", self.init) for x in self.ins if x != self.out]
        a.append(arg(self.out, f"{self.dt.name}*", "inout" if self.out in self.ins else "out", "n", self.init))
        return a

    def body(self, access: dict[str, str]) -> str:
        return "\n".join(tfill(s, self.dt, **access) for s in self.steps)

    def reference(self, function: str) -> str:
        from pipeline.tasks.families._kit import signature
        stmts = self.body({x: f"{x}[i]" for x in self.ins}).replace("\n", "\n        ")
        return (f"#include <math.h>\n\nvoid {function}({signature(self.args())}) {{\n"
                f"    for (int i = 0; i < n; ++i) {{\n        {self.dt.name} r;\n        {stmts}\n"
                f"        {self.out}[i] = r;\n    }}\n}}\n")

    def nbytes(self) -> str:
        arrays = len(set(self.ins) | {self.out}) + (1 if self.out in self.ins else 0)
        return f"{self.dt.size * arrays}*n"


def _elem_fn(e: Elementwise) -> str:
    params = ", ".join([f"{e.dt.name} {x}" for x in e.ins] + [f"{e.dt.name} {s}" for s, _ in e.scalars])
    stmts = e.body({x: x for x in e.ins}).replace("\n", "\n    ")
    return (f"__device__ __forceinline__ {e.dt.name} elem({params}) {{\n    {e.dt.name} r;\n    {stmts}\n"
            f"    return r;\n}}\n")


def _call(e: Elementwise, index: str) -> str:
    return "elem(" + ", ".join([f"{x}[{index}]" for x in e.ins] + [s for s, _ in e.scalars]) + ")"


_NAIVE = """
// One thread per element.
__global__ void ew_naive(${SIG}) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) ${OUT}[i] = ${CALL_I};
}
static void run(${SIG}, cudaStream_t stream) {
    ew_naive<<<(n + 255) / 256, 256, 0, stream>>>(${NAMES});
}
"""
_GRID = """
// Grid-stride loop over a grid sized to the GPU: consecutive threads touch consecutive elements.
__global__ void __launch_bounds__(256) ew_grid(${SIG}) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        ${OUT}[i] = ${CALL_I};
}
static void run(${SIG}, cudaStream_t stream) {
    int blocks = (n + 255) / 256;
    if (blocks > 132 * 4) blocks = 132 * 4;
    ew_grid<<<blocks, 256, 0, stream>>>(${NAMES});
}
"""
_VEC = """
// 16-byte vector loads and stores (${W} elements per thread and step), scalar loop for the tail.
__global__ void __launch_bounds__(256) ew_vec(${SIG}) {
    int nv = n / ${W};
    int stride = gridDim.x * blockDim.x;
    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += stride) {
${LOADS}
        ${V} rv;
${COMPUTE}
        reinterpret_cast<${V}*>(${OUT})[v] = rv;
    }
    for (int i = nv * ${W} + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) ${OUT}[i] = ${CALL_I};
}
static void run(${SIG}, cudaStream_t stream) {
    int blocks = (n / ${W} + 255) / 256;
    if (blocks < 1) blocks = 1;
    if (blocks > 132 * 8) blocks = 132 * 8;
    ew_vec<<<blocks, 256, 0, stream>>>(${NAMES});
}
"""
_UNROLL = """
// Thread coarsening: four elements per thread, blockDim apart so each load stays coalesced.
__global__ void __launch_bounds__(256) ew_unroll(${SIG}) {
    int base = blockIdx.x * 1024 + threadIdx.x;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        int i = base + k * 256;
        if (i < n) ${OUT}[i] = ${CALL_I};
    }
}
static void run(${SIG}, cudaStream_t stream) {
    ew_unroll<<<(n + 1023) / 1024, 256, 0, stream>>>(${NAMES});
}
"""
_STRIDED = """
// Uncoalesced: lane l of a warp handles the l-th of 32 contiguous chunks, so the 32 lanes of a
// warp touch addresses about n/32 elements apart on every access.
__global__ void ew_strided(${SIG}) {
    int chunk = (n + 31) / 32;
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int i = (t % 32) * chunk + t / 32;
    if (t < 32 * chunk && i < n) ${OUT}[i] = ${CALL_I};
}
static void run(${SIG}, cudaStream_t stream) {
    int threads = 32 * ((n + 31) / 32);
    ew_strided<<<(threads + 255) / 256, 256, 0, stream>>>(${NAMES});
}
"""
_TEMPLATES = [("naive", "naive", _NAIVE), ("grid_stride", "coalesced", _GRID), ("vector_loads", "vectorized", _VEC),
              ("unroll4", "thread_coarsening", _UNROLL), ("strided_lanes", "uncoalesced", _STRIDED)]
_LANES = "xyzw"


def implementations(e: Elementwise) -> list[Impl]:
    from pipeline.tasks.families._kit import arg_names, signature
    args = e.args()
    loads = "\n".join(f"        {e.dt.vec} {x}_v = reinterpret_cast<const {e.dt.vec}*>({x})[v];" for x in e.ins)
    compute = "\n".join(
        f"        rv.{c} = elem(" + ", ".join([f"{x}_v.{c}" for x in e.ins] + [s for s, _ in e.scalars]) + ");"
        for c in _LANES[:e.dt.width])
    out = []
    for name, strategy, tpl in _TEMPLATES:
        code = tfill(dedent(tpl), e.dt, SIG=signature(args), NAMES=arg_names(args), OUT=e.out, CALL_I=_call(e, "i"),
                     LOADS=loads, COMPUTE=compute)
        out.append(Impl(name, strategy, _elem_fn(e) + code))
    return out


def _c_task(family: str, variant: str, e: Elementwise, description: str, tol: Tolerance | None = None):
    fn = f"{family}_{variant}".replace("-", "_")
    n_big = (1 << 24) if e.dt.size == 4 else (1 << 23)
    cfgs = configs([{"n": 1000}, {"n": 4099}, {"n": 100003}], [{"n": n_big}, {"n": n_big * 5 // 8 + 7}])
    return c2cuda_task(family, variant, fn, e.reference(fn), e.args(), cfgs, f"{e.flops}*n", e.nbytes(),
                       implementations(e), tol or e.dt.tol, description)


def _torch_task(family: str, variant: str, e: Elementwise, description: str, tol: Tolerance | None = None):
    assert e.dt is FLOAT and not e.scalars
    ins = [x for x in e.ins]
    module = TorchModule(inputs=[(x, "torch.randn(batch_size, dim)") for x in ins],
                         forward=[*e.tsteps, "return r"], sizes={"batch_size": 256, "dim": 4096})
    cfgs = configs([{"batch_size": 3, "dim": 1000}, {"batch_size": 7, "dim": 4099}, {"batch_size": 33, "dim": 3001}],
                   [{"batch_size": 4096, "dim": 4096}, {"batch_size": 2001, "dim": 4999}])
    casts = "".join(f"(const float*)inputs[{k}], " for k in range(len(ins)))
    launch = f"    int n = (int)numel_of(sizes, 0);\n    run(n, {casts}(float*)outputs[0], stream);"
    nbytes = f"{4 * (len(ins) + 1)}*batch_size*dim"
    return torch_task(family, variant, module.source(), cfgs, f"{e.flops}*batch_size*dim", nbytes,
                      implementations(e), launch, tol or FLOAT.tol, description)


# --- families --------------------------------------------------------------------------------------
def unary_tasks(rng) -> list:
    out = []
    ops = [u for u in UNARY.values() if u.name != "identity"]
    for u in ops:
        for dt in (FLOAT, DOUBLE):
            e = Elementwise(dt, ["x"], "y", [f"r = {u.c.replace('${x}', '${x}')};"], u.flops)
            out.append(_c_task("elementwise_unary", f"{u.name}_{dt.name}", e, f"y = {u.name}(x) element-wise, {dt.name}"))
        e = Elementwise(FLOAT, ["x"], "y", [f"r = {u.c};"], u.flops, tsteps=[f"r = {u.texpr('x')}"])
        out.append(_torch_task("elementwise_unary", u.name, e, f"{u.name}(x) element-wise"))
    return out


def binary_tasks(rng) -> list:
    out = []
    for b in BINARY.values():
        epis = pick(rng, UNBOUNDED_SAFE, 9)
        for k, u in enumerate(epis):
            steps = [f"r = {b.c.replace('${a}', '${a}')};", f"r = {UNARY[u].c.replace('${x}', 'r')};"]
            dt = FLOAT if k % 2 == 0 else DOUBLE
            e = Elementwise(dt, ["a", "b"], "c", steps, b.flops + UNARY[u].flops)
            out.append(_c_task("elementwise_binary", f"{b.name}_{u}_{dt.name}", e,
                               f"c = {u}(a {b.name} b) element-wise, {dt.name}"))
            if k < 4:
                e = Elementwise(FLOAT, ["a", "b"], "c", steps, e.flops,
                                tsteps=[f"r = {bin_t(b.name, 'a', 'b')}", f"r = {UNARY[u].texpr('r')}"])
                out.append(_torch_task("elementwise_binary", f"{b.name}_{u}", e, f"{u}(a {b.name} b) element-wise"))
    return out


def fused_tasks(rng) -> list:
    """r = u2(u1(a) op1 b) op2 c: three inputs, two operators, two activations."""
    out, seen = [], set()
    ops = ["add", "mul", "sub", "max", "min", "safe_div", "mul_add_half"]
    while len(out) < 150:
        o1, o2 = (ops[i] for i in rng.integers(0, len(ops), 2))
        u1, u2 = (UNBOUNDED_SAFE[i] for i in rng.integers(1, len(UNBOUNDED_SAFE), 2))
        key = (o1, o2, u1, u2)
        if key in seen or u1 == u2:
            continue
        seen.add(key)
        steps = [f"r = {UNARY[u1].c.replace('${x}', '${a}')};", f"r = {BINARY[o1].c.replace('${a}', 'r')};",
                 f"r = {UNARY[u2].c.replace('${x}', 'r')};", f"r = {BINARY[o2].c.replace('${a}', 'r').replace('${b}', '${c}')};"]
        flops = UNARY[u1].flops + UNARY[u2].flops + BINARY[o1].flops + BINARY[o2].flops
        variant = f"{u1}_{o1}_{u2}_{o2}"
        if len(out) % 3 == 2:
            tsteps = [f"r = {UNARY[u1].texpr('a')}", f"r = {bin_t(o1, 'r', 'b')}", f"r = {UNARY[u2].texpr('r')}",
                      f"r = {bin_t(o2, 'r', 'c')}"]
            e = Elementwise(FLOAT, ["a", "b", "c"], "d", steps, flops, tsteps=tsteps)
            out.append(_torch_task("elementwise_fused", variant, e, f"{o2}({u2}({o1}({u1}(a), b)), c)"))
        else:
            dt = FLOAT if len(out) % 3 == 0 else DOUBLE
            e = Elementwise(dt, ["a", "b", "c"], "d", steps, flops)
            tol = SQRT_NEAR_ZERO_TOL if dt is FLOAT and u2 == "sqrt_abs" else None  # u1 is libm's in C, CUDA's here
            out.append(_c_task("elementwise_fused", f"{variant}_{dt.name}", e,
                               f"{o2}({u2}({o1}({u1}(a), b)), c), {dt.name}", tol))
    return out


def blas1_tasks(rng) -> list:
    """Scaled vector updates with runtime scalars alpha/beta, some in place."""
    forms = [  # (name, inputs, output, statement, flops, scalars)
        ("axpy", ["x", "y"], "y", "r = alpha * ${x} + ${y};", 2, ["alpha"]),
        ("axpby", ["x", "y"], "y", "r = alpha * ${x} + beta * ${y};", 3, ["alpha", "beta"]),
        ("waxpby", ["x", "y"], "w", "r = alpha * ${x} + beta * ${y};", 3, ["alpha", "beta"]),
        ("scal", ["x"], "x", "r = alpha * ${x};", 1, ["alpha"]),
        ("xpay", ["x", "y"], "y", "r = ${x} + alpha * ${y};", 2, ["alpha"]),
        ("axpbypcz", ["x", "y", "z"], "z", "r = alpha * ${x} + beta * ${y} + ${z};", 5, ["alpha", "beta"]),
        ("scaled_product", ["x", "y"], "w", "r = alpha * ${x} * ${y};", 2, ["alpha"]),
        ("affine", ["x"], "y", "r = alpha * ${x} + beta;", 2, ["alpha", "beta"]),
        ("lerp", ["x", "y"], "w", "r = ${x} + alpha * (${y} - ${x});", 3, ["alpha"]),
        ("axpy_sq", ["x", "y"], "y", "r = ${y} + alpha * ${x} * ${x};", 3, ["alpha"]),
    ]
    posts = ["identity", "relu", "tanh", "abs", "clamp_half", "sigmoid", "softsign"]
    values = {"alpha": 1.75, "beta": -0.5}
    out = []
    for name, ins, o, stmt, fl, scal in forms:
        for k, post in enumerate(posts):
            dt = (FLOAT, DOUBLE)[k % 2]
            steps = [stmt] + ([] if post == "identity" else [f"r = {UNARY[post].c.replace('${x}', 'r')};"])
            e = Elementwise(dt, ins, o, steps, fl + UNARY[post].flops, [(s, values[s]) for s in scal])
            where = "in place" if o in ins else "into a new vector"
            out.append(_c_task("blas1", f"{name}_{post}_{dt.name}", e, f"{name} ({where}) followed by {post}, {dt.name}"))
    return out


def polynomial_tasks(rng) -> list:
    """Horner evaluation of seeded polynomials and rational functions p(x) / (1 + q x^2)."""
    out = []
    for k in range(110):
        degree = 2 + k % 15
        coef = [round(float(c), 3) for c in rng.uniform(-1, 1, degree + 1)]
        rational = k % 3 == 2
        dt = (FLOAT, DOUBLE)[k % 2] if k < 84 else FLOAT
        steps = [f"r = {dt.lit(coef[0])};"] + [f"r = r * ${{x}} + {dt.lit(c)};" for c in coef[1:]]
        tsteps = [f"r = torch.full_like(x, {coef[0]})"] + [f"r = r * x + {c}" for c in coef[1:]]
        if rational:
            q = round(float(rng.uniform(0.1, 2.0)), 3)
            steps.append(f"r = r / (1.0${{C}} + {dt.lit(q)} * ${{x}} * ${{x}});")
            tsteps.append(f"r = r / (1.0 + {q} * x * x)")
        kind = "rational" if rational else "poly"
        e = Elementwise(dt, ["x"], "y", steps, 2 * degree + 3 * rational, init="uniform(-1, 1)",
                        tsteps=tsteps if dt is FLOAT else ())
        tol = Tolerance(rtol=1e-4, atol=1e-4) if dt is FLOAT else dt.tol
        if k >= 84:
            out.append(_torch_task("polynomial", f"{kind}{degree}_{k}", e, f"degree-{degree} {kind} function", tol))
        else:
            out.append(_c_task("polynomial", f"{kind}{degree}_{k}_{dt.name}", e,
                               f"degree-{degree} {kind} function by Horner's rule, {dt.name}", tol))
    return out


_DERIV = {  # f'(x) as C (over ${x}) and torch (over x)
    "sigmoid": ("(1.0${C} / (1.0${C} + exp${F}(-${x}))) * (1.0${C} - 1.0${C} / (1.0${C} + exp${F}(-${x})))",
                "torch.sigmoid(x) * (1 - torch.sigmoid(x))"),
    "tanh": ("(1.0${C} - tanh${F}(${x}) * tanh${F}(${x}))", "(1 - torch.tanh(x) ** 2)"),
    "relu": ("(${x} > 0.0${C} ? 1.0${C} : 0.0${C})", "(x > 0).to(x.dtype)"),
    "leaky_relu": ("(${x} > 0.0${C} ? 1.0${C} : 0.01${C})", "torch.where(x > 0, 1.0, 0.01)"),
    "softplus": ("(1.0${C} / (1.0${C} + exp${F}(-${x})))", "torch.sigmoid(x)"),
    "silu": ("(1.0${C} / (1.0${C} + exp${F}(-${x}))) * (1.0${C} + ${x} * (1.0${C} - 1.0${C} / (1.0${C} + exp${F}(-${x}))))",
             "torch.sigmoid(x) * (1 + x * (1 - torch.sigmoid(x)))"),
    "elu": ("(${x} > 0.0${C} ? 1.0${C} : exp${F}(${x}))", "torch.where(x > 0, 1.0, torch.exp(x))"),
    "softsign": ("1.0${C} / ((1.0${C} + fabs${F}(${x})) * (1.0${C} + fabs${F}(${x})))", "1 / (1 + torch.abs(x)) ** 2"),
    "hardtanh": ("(${x} > -1.0${C} && ${x} < 1.0${C} ? 1.0${C} : 0.0${C})", "((x > -1) & (x < 1)).to(x.dtype)"),
    "atan": ("1.0${C} / (1.0${C} + ${x} * ${x})", "1 / (1 + x * x)"),
    "gauss": ("(-2.0${C} * ${x} * exp${F}(-${x} * ${x}))", "(-2 * x * torch.exp(-x * x))"),
    "square": ("(2.0${C} * ${x})", "(2 * x)"),
}


def backward_tasks(rng) -> list:
    out = []
    for name, (cd, td) in _DERIV.items():
        for dt in (FLOAT, DOUBLE):
            e = Elementwise(dt, ["dy", "x"], "dx", [f"r = ${{dy}} * ({cd});"], 6)
            out.append(_c_task("activation_backward", f"{name}_{dt.name}", e, f"dx = dy * {name}'(x), {dt.name}"))
        for extra, (cs, ts) in {"": ("", ""), "_plus_x": (" + ${x}", " + x")}.items():
            if extra and len(out) % 2:
                continue
            e = Elementwise(FLOAT, ["dy", "x"], "dx", [f"r = ${{dy}} * ({cd}){cs};"], 6,
                            tsteps=[f"r = dy * ({td}){ts}"])
            out.append(_torch_task("activation_backward", f"{name}{extra}", e, f"dy * {name}'(x){ts}"))
    return out


_XORSHIFT = [(13, 17, 5), (1, 3, 10), (1, 5, 16), (2, 5, 15), (3, 13, 7), (5, 9, 8), (6, 13, 11), (7, 1, 9),
             (9, 5, 1), (11, 7, 12), (13, 3, 27), (15, 3, 25), (17, 15, 26), (3, 1, 14), (5, 21, 12), (7, 25, 12)]
_MULTS = ["0x85ebca6bu", "0xc2b2ae35u", "0x9e3779b1u", "0x27d4eb2fu", "0x165667b1u"]


def hash_tasks(rng) -> list:
    """Unsigned 32-bit mixing: xorshift rounds, multiply-xorshift finalisers, key-seeded mixes (exact)."""
    out = []
    for k, (a, b, c) in enumerate(_XORSHIFT):
        for rounds in (1, 2, 3, 5):
            step = f"r ^= r << {a}; r ^= r >> {b}; r ^= r << {c};"
            steps = ["r = ${x};"] + [step] * rounds
            if k % 2:
                steps.append(f"r = r * {_MULTS[k % len(_MULTS)]} + ${{key}};")
            ins = ["x", "key"] if k % 2 else ["x"]
            e = Elementwise(UINT, ins, "h", steps, 6 * rounds, init="randint(0, 4294967296)")
            out.append(_c_task("integer_hash", f"xorshift_{a}_{b}_{c}_r{rounds}", e,
                               f"{rounds} xorshift round(s) ({a}, {b}, {c}) of each unsigned element"))
    for k, (m1, m2) in enumerate([(m1, m2) for m1 in _MULTS for m2 in _MULTS if m1 != m2][:20]):
        s1, s2, s3 = 15 + k % 3, 13 - k % 4, 16
        steps = ["r = ${x};", f"r ^= r >> {s1};", f"r *= {m1};", f"r ^= r >> {s2};", f"r *= {m2};", f"r ^= r >> {s3};"]
        e = Elementwise(UINT, ["x"], "h", steps, 6, init="randint(0, 4294967296)")
        out.append(_c_task("integer_hash", f"fmix_{k}", e, f"multiply-xorshift finaliser ({m1}, {m2}) of each element"))
    return out


def generate(rng) -> list:
    return (unary_tasks(rng) + binary_tasks(rng) + fused_tasks(rng) + blas1_tasks(rng) + polynomial_tasks(rng)
            + backward_tasks(rng) + hash_tasks(rng))
