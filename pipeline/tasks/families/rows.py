"""Row-wise families over a row-major rows x cols matrix: statistics of each row, then either one
value per row or a transformed row.

Families: row_reduce (sum/max/min of f(x) per row with a final transform), softmax (softmax,
log-softmax, softmin, temperature), norm_rows (layer norm, RMS norm, L2 normalisation, with or
without per-column weight and bias), row_loss (logsumexp, cross-entropy with integer labels,
label probabilities). A row computation is: s1 = R1 over the row of map1(x); optionally
s2 = sum of map2(x, s1); then y = outf(x, s1, s2, n, g, b) per element or fin(s1, s2, n, xl)
per row (n: the row length; g, b: weight and bias of the column; xl: the row's labelled element).
Implementations: naive (one thread per row: uncoalesced), warp_per_row (shuffles),
block_per_row (256 threads), vector_loads (256 threads, 16-byte loads when the row allows) and
block_1024 (one 1024-thread block per row: wasteful on short rows).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.tasks.families._kit import (DOUBLE, FLOAT, UNARY, DType, Impl, TorchModule, arg, arg_names,
                                         c2cuda_task, configs, dedent, signature, tfill, torch_task)
from pipeline.core.records import Tolerance

COMB = {"sum": "a + b", "max": "fmax${F}(a, b)", "min": "fmin${F}(a, b)"}
IDENT = {"sum": "0.0${C}", "max": "-1.0e30${C}", "min": "1.0e30${C}"}
# PyTorch rows with a per-column weight and bias (or a normalisation): the bias can cancel an element to
# near 0, where cuDNN/ATen's summation order shows (weighted softmax at temperature 0.5: 1 element of 16.8M
# off by 8e-4 relative on the H200), so the absolute part is 1e-4 of the RMS.
AFFINE_TOL = Tolerance(rtol=1e-4, atol=1e-4)


@dataclass
class RowSpec:
    dt: DType
    map1: str                  # over x
    op1: str                   # sum | max | min
    map2: str = ""             # over x, s1 ('' = no second statistic)
    outf: str = ""             # per element, over x, s1, s2, n, g, b ('' = one value per row)
    fin: str = ""              # per row, over s1, s2, n, xl
    params: list[str] = field(default_factory=list)  # per-column inputs: gamma, beta
    label: bool = False        # an int label per row (xl = x[row, label[row]])
    init: str = "uniform(-3, 3)"
    flops: int = 4

    def args(self):
        a = [arg("rows", "int", "scalar"), arg("cols", "int", "scalar"),
             arg("input", f"const {self.dt.name}*", "in", "rows*cols", self.init)]
        a += [arg(p, f"const {self.dt.name}*", "in", "cols", "uniform(0.5, 1.5)" if p == "gamma" else "uniform(-0.5, 0.5)")
              for p in self.params]
        if self.label:
            a.append(arg("label", "const int*", "in", "rows", "randint(0, cols)"))
        size = "rows*cols" if self.outf else "rows"
        return a + [arg("output", f"{self.dt.name}*", "out", size)]

    def reference(self, fn: str) -> str:
        T, F = self.dt.name, self.dt.F
        acc = "double" if self.op1 == "sum" else T
        init1 = {"sum": "0.0", "max": "-INFINITY", "min": "INFINITY"}[self.op1]
        upd1 = {"sum": "a1 += {m};", "max": f"a1 = fmax{F}(a1, {{m}});", "min": f"a1 = fmin{F}(a1, {{m}});"}[self.op1]
        c = lambda s: tfill(s, self.dt)  # noqa: E731
        lines = [f"#include <math.h>\n#include <stddef.h>\n\nvoid {fn}({signature(self.args())}) {{",
                 f"    {T} n = ({T})cols;",
                 "    for (int r = 0; r < rows; ++r) {",
                 f"        const {T}* row = input + (size_t)r * cols;",
                 f"        {acc} a1 = {init1};",
                 f"        for (int c = 0; c < cols; ++c) {{ {T} x = row[c]; {upd1.format(m=c(self.map1))} }}",
                 f"        {T} s1 = ({T})a1;",
                 f"        {T} s2 = 0;"]
        if self.map2:
            lines += ["        double a2 = 0.0;",
                      f"        for (int c = 0; c < cols; ++c) {{ {T} x = row[c]; a2 += {c(self.map2)}; }}",
                      f"        s2 = ({T})a2;"]
        if self.outf:
            g = "gamma[c]" if "gamma" in self.params else "1"
            b = "beta[c]" if "beta" in self.params else "0"
            lines += ["        for (int c = 0; c < cols; ++c) {",
                      f"            {T} x = row[c], g = {g}, b = {b};",
                      f"            output[(size_t)r * cols + c] = {c(self.outf)};",
                      "        }"]
        else:
            xl = "row[label[r]]" if self.label else "0"
            lines += [f"        {T} xl = {xl};", f"        output[r] = {c(self.fin)};"]
        lines += ["        (void)s2; (void)n;", "    }", "}"]
        return "\n".join(lines) + "\n"


_DEVICE = """
__device__ __forceinline__ ${T} map1(${T} x) { return ${MAP1}; }
__device__ __forceinline__ ${T} comb1(${T} a, ${T} b) { return ${COMB1}; }
__device__ __forceinline__ ${T} map2(${T} x, ${T} s1, ${T} n) { return ${MAP2}; }
__device__ __forceinline__ ${T} outf(${T} x, ${T} s1, ${T} s2, ${T} n, ${T} g, ${T} b) { return ${OUTF}; }
__device__ __forceinline__ ${T} fin(${T} s1, ${T} s2, ${T} n, ${T} xl) { return ${FIN}; }
__device__ __forceinline__ ${T} warp_comb1(${T} v) {
    for (int o = 16; o > 0; o >>= 1) v = comb1(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ ${T} warp_sum(${T} v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
"""
_BLOCK_RED = """
__device__ ${T} block_comb1(${T} v) {  // every thread gets the block's result
    __shared__ ${T} part[32];
    v = warp_comb1(v);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    ${T} r = ${IDENT1};
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) r = comb1(r, part[w]);
    __syncthreads();
    return r;
}
__device__ ${T} block_sum(${T} v) {
    __shared__ ${T} part[32];
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    ${T} r = 0;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) r += part[w];
    __syncthreads();
    return r;
}
"""
_NAIVE = """
// One thread per row: each thread walks its own row, so a warp's loads are cols elements apart.
__global__ void row_naive(${SIG}) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const ${T}* row = input + (size_t)r * cols;
    ${T} n = (${T})cols;
    ${T} s1 = ${IDENT1};
    for (int c = 0; c < cols; ++c) s1 = comb1(s1, map1(row[c]));
    ${T} s2 = 0;
    ${NAIVE_S2}
    ${NAIVE_OUT}
}
static void run(${SIG}, cudaStream_t stream) {
    row_naive<<<(rows + 127) / 128, 128, 0, stream>>>(${NAMES});
}
"""
_WARP = """
// One warp per row: lanes stride the row (coalesced), statistics by warp shuffles.
__global__ void __launch_bounds__(256) row_warp(${SIG}) {
    int r = blockIdx.x * 8 + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= rows) return;
    const ${T}* row = input + (size_t)r * cols;
    ${T} n = (${T})cols;
    ${T} s1 = ${IDENT1};
    for (int c = lane; c < cols; c += 32) s1 = comb1(s1, map1(row[c]));
    s1 = warp_comb1(s1);
    ${T} s2 = 0;
    ${WARP_S2}
    ${WARP_OUT}
}
static void run(${SIG}, cudaStream_t stream) {
    row_warp<<<(rows + 7) / 8, 256, 0, stream>>>(${NAMES});
}
"""
_BLOCK = """
// One block of ${NT} threads per row: strided loops, block-wide reductions through shared memory.
__global__ void __launch_bounds__(${NT}) row_block(${SIG}) {
    int r = blockIdx.x;
    const ${T}* row = input + (size_t)r * cols;
    ${T} n = (${T})cols;
    ${T} s1 = ${IDENT1};
    for (int c = threadIdx.x; c < cols; c += ${NT}) s1 = comb1(s1, map1(row[c]));
    s1 = block_comb1(s1);
    ${T} s2 = 0;
    ${BLOCK_S2}
    ${BLOCK_OUT}
}
static void run(${SIG}, cudaStream_t stream) {
    row_block<<<rows, ${NT}, 0, stream>>>(${NAMES});
}
"""
_VEC = """
// One 256-thread block per row with ${V} loads when rows start 16-byte aligned (cols % ${W} == 0).
template <bool VEC>
__global__ void __launch_bounds__(256) row_vec(${SIG}) {
    int r = blockIdx.x;
    const ${T}* row = input + (size_t)r * cols;
    const ${V}* row_v = reinterpret_cast<const ${V}*>(row);
    ${T} n = (${T})cols;
    int nv = VEC ? cols / ${W} : 0;
    ${T} s1 = ${IDENT1};
    for (int q = threadIdx.x; q < nv; q += 256) {
        ${V} v = row_v[q];
${VEC_S1}
    }
    if (!VEC) for (int c = threadIdx.x; c < cols; c += 256) s1 = comb1(s1, map1(row[c]));
    s1 = block_comb1(s1);
    ${T} s2 = 0;
    ${VEC_S2}
    ${VEC_OUT}
}
static void run(${SIG}, cudaStream_t stream) {
    if (cols % ${W} == 0) row_vec<true><<<rows, 256, 0, stream>>>(${NAMES});
    else row_vec<false><<<rows, 256, 0, stream>>>(${NAMES});
}
"""
_LANES = "xyzw"


def implementations(s: RowSpec) -> list[Impl]:
    dt, args = s.dt, s.args()
    g = lambda c: "gamma[" + c + "]" if "gamma" in s.params else "1"  # noqa: E731
    b = lambda c: "beta[" + c + "]" if "beta" in s.params else "0"  # noqa: E731
    xl = "row[label[r]]" if s.label else "0"
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), MAP1=tfill(s.map1, dt), COMB1=tfill(COMB[s.op1], dt),
               MAP2=tfill(s.map2 or "0", dt), OUTF=tfill(s.outf or "0", dt), FIN=tfill(s.fin or "0", dt),
               IDENT1=tfill(IDENT[s.op1], dt))

    def s2_loop(start, step, reduce):
        if not s.map2:
            return ""
        return f"for (int c = {start}; c < cols; c += {step}) s2 += map2(row[c], s1, n);\n    s2 = {reduce}(s2);"

    def out_loop(start, step, leader):
        if s.outf:
            return (f"for (int c = {start}; c < cols; c += {step})\n"
                    f"        output[(size_t)r * cols + c] = outf(row[c], s1, s2, n, {g('c')}, {b('c')});")
        return f"if ({leader}) output[r] = fin(s1, s2, n, {xl});"

    lanes = _LANES[:dt.width]
    vec_s1 = "\n".join(f"        s1 = comb1(s1, map1(v.{c}));" for c in lanes)
    vec_s2 = ""
    if s.map2:
        vec_s2 = ("for (int q = threadIdx.x; q < nv; q += 256) {\n        " + dt.vec + " v = row_v[q];\n"
                  + "".join(f"        s2 += map2(v.{c}, s1, n);\n" for c in lanes) + "    }\n"
                  "    if (!VEC) for (int c = threadIdx.x; c < cols; c += 256) s2 += map2(row[c], s1, n);\n"
                  "    s2 = block_sum(s2);")
    if s.outf:
        comps = ", ".join(f"outf(v.{c}, s1, s2, n, {g(f'{dt.width} * q + {k}')}, {b(f'{dt.width} * q + {k}')})"
                          for k, c in enumerate(lanes))
        vec_out = ("for (int q = threadIdx.x; q < nv; q += 256) {\n        " + dt.vec + " v = row_v[q];\n"
                   f"        reinterpret_cast<{dt.vec}*>(output + (size_t)r * cols)[q] = make_{dt.vec}({comps});\n    }}\n"
                   "    if (!VEC) " + out_loop("threadIdx.x", "256", ""))
    else:
        vec_out = out_loop("", "", "threadIdx.x == 0")
    naive_s2 = ("for (int c = 0; c < cols; ++c) s2 += map2(row[c], s1, n);" if s.map2 else "")
    ctx.update(NAIVE_S2=naive_s2, NAIVE_OUT=out_loop("0", "1", "true"),
               WARP_S2=s2_loop("lane", "32", "warp_sum"), WARP_OUT=out_loop("lane", "32", "lane == 0"),
               BLOCK_S2=s2_loop("threadIdx.x", "${NT}", "block_sum"), BLOCK_OUT=out_loop("threadIdx.x", "${NT}",
                                                                                          "threadIdx.x == 0"),
               VEC_S1=vec_s1, VEC_S2=vec_s2, VEC_OUT=vec_out)
    head = tfill(dedent(_DEVICE), dt, **ctx)
    blockred = tfill(dedent(_BLOCK_RED), dt, **ctx)

    def code(tpl, **kw):
        text = tfill(dedent(tpl), dt, **{**ctx, **kw})
        return tfill(text, dt, **{**ctx, **kw})  # second pass: placeholders inside inserted loops
    return [Impl("naive", "naive", head + code(_NAIVE)),
            Impl("warp_per_row", "warp_shuffle", head + code(_WARP)),
            Impl("block_per_row", "shared_reduction", head + blockred + code(_BLOCK, NT=256)),
            Impl("vector_loads", "vectorized", head + blockred + code(_VEC)),
            Impl("block_1024", "block_size_1024", head + blockred + code(_BLOCK, NT=1024))]


CHECK = [{"rows": 7, "cols": 1000}, {"rows": 33, "cols": 4099}, {"rows": 1000, "cols": 33}]
TIMING = [{"rows": 4096, "cols": 4096}, {"rows": 2001, "cols": 3001}]


def c_task(family, variant, s: RowSpec, description, tol=None):
    fn = f"{family}_{variant}"
    out_elems = "rows*cols" if s.outf else "rows"
    nbytes = f"{s.dt.size}*(rows*cols + {out_elems} + {len(s.params)}*cols) + {4 if s.label else 0}*rows"
    tol = tol or (Tolerance(rtol=1e-4, atol=1e-5) if s.dt is FLOAT else Tolerance(rtol=1e-9, atol=1e-11))
    return c2cuda_task(family, variant, fn, s.reference(fn), s.args(), configs(CHECK, TIMING),
                       f"{s.flops}*rows*cols", nbytes, implementations(s), tol, description)


def t_task(family, variant, s: RowSpec, forward: list[str], description, init: list[str] = (), tol=None):
    inputs = [("x", "torch.randn(batch_size, dim) * 2")]
    if s.label:
        inputs.append(("target", "torch.randint(0, dim, (batch_size,), dtype=torch.int32)"))
    module = TorchModule(inputs=inputs, forward=forward, sizes={"batch_size": 512, "dim": 2048}, init=list(init),
                         init_args=[("dim", "dim")] if s.params else [])
    cfgs = configs([{"batch_size": r["rows"], "dim": r["cols"]} for r in CHECK],
                   [{"batch_size": r["rows"], "dim": r["cols"]} for r in TIMING])
    # light inputs: x, [target], then parameters in state_dict order
    ptrs = ["(const float*)inputs[0]"]
    k = 1 + s.label
    ptrs += [f"(const float*)inputs[{k + i}]" for i in range(len(s.params))]
    if s.label:
        ptrs.append("(const int*)inputs[1]")
    launch = ("    int rows = (int)dim_of(sizes, 0, 0), cols = (int)dim_of(sizes, 0, 1);\n"
              f"    run(rows, cols, {', '.join(ptrs)}, (float*)outputs[0], stream);")
    out_elems = "batch_size*dim" if s.outf else "batch_size"
    return torch_task(family, variant, module.source(), cfgs, f"{s.flops}*batch_size*dim",
                      f"4*(batch_size*dim + {out_elems} + {len(s.params)}*dim)", implementations(s), launch,
                      tol or Tolerance(rtol=1e-4, atol=1e-5), description)


# --- families ----------------------------------------------------------------------------------------
_RED_MAPS = ["identity", "square", "abs", "relu", "sigmoid", "tanh", "exp", "softplus", "gelu", "silu", "cube", "sin",
             "log1p_abs", "neg_exp_sq", "softsign", "atan"]
_RED_FIN = {"none": "s1", "mean": "s1 / n", "sqrt": "sqrt${F}(s1)"}


def row_reduce_tasks(rng) -> list:
    out = []
    for k, u in enumerate(_RED_MAPS):
        for op in ("sum", "max", "min"):
            if (op, u) in (("min", "relu"), ("max", "neg_exp_sq")):  # saturated: the same value for any input
                continue
            fin = ("none", "mean", "sqrt")[k % 3] if op == "sum" else "none"
            if fin == "sqrt" and u in ("identity", "sin", "cube", "atan", "tanh", "softsign"):
                fin = "mean"
            dt = (FLOAT, DOUBLE)[(k + len(op)) % 2]
            s = RowSpec(dt, UNARY[u].c.replace("${x}", "x"), op, fin=_RED_FIN[fin])
            out.append(c_task("row_reduce", f"{op}_{u}_{fin}_{dt.name}", s, f"{fin} of the {op} of {u}(x) per row"))
            if (k + len(op)) % 3 == 0:
                s = RowSpec(FLOAT, UNARY[u].c.replace("${x}", "x"), op, fin=_RED_FIN[fin])
                fx = UNARY[u].texpr("x")
                expr = {"none": f"torch.{'amax' if op == 'max' else 'amin' if op == 'min' else 'sum'}({fx}, dim=-1)",
                        "mean": f"torch.mean({fx}, dim=-1)", "sqrt": f"torch.sqrt(torch.sum({fx}, dim=-1))"}[fin]
                out.append(t_task("row_reduce", f"{op}_{u}_{fin}", s, [f"return {expr}"], f"{fin} {op} of {u}(x) per row"))
    return out


def softmax_tasks(rng) -> list:
    out = []
    for temp in (1.0, 0.5, 2.0, 0.25, 4.0):
        tl = f"{temp}${{C}}"
        forms = {  # name: (map1, op1, map2, outf, torch forward)
            "softmax": (f"x / {tl}", "max", f"exp${{F}}(x / {tl} - s1)", f"exp${{F}}(x / {tl} - s1) / s2",
                        f"torch.softmax(x / {temp}, dim=-1)"),
            "log_softmax": (f"x / {tl}", "max", f"exp${{F}}(x / {tl} - s1)", f"x / {tl} - s1 - log${{F}}(s2)",
                            f"torch.log_softmax(x / {temp}, dim=-1)"),
            "softmin": (f"x / {tl}", "min", f"exp${{F}}(s1 - x / {tl})", f"exp${{F}}(s1 - x / {tl}) / s2",
                        f"F.softmin(x / {temp}, dim=-1)"),
            "softmax_times_x": (f"x / {tl}", "max", f"exp${{F}}(x / {tl} - s1)", f"x * exp${{F}}(x / {tl} - s1) / s2",
                                f"x * torch.softmax(x / {temp}, dim=-1)"),
            "sigmoid_softmax": (f"1.0${{C}} / (1.0${{C}} + exp${{F}}(-x)) / {tl}", "max",
                                f"exp${{F}}(1.0${{C}} / (1.0${{C}} + exp${{F}}(-x)) / {tl} - s1)",
                                f"exp${{F}}(1.0${{C}} / (1.0${{C}} + exp${{F}}(-x)) / {tl} - s1) / s2",
                                f"torch.softmax(torch.sigmoid(x) / {temp}, dim=-1)"),
            "weighted_softmax": (f"x / {tl}", "max", f"exp${{F}}(x / {tl} - s1)", f"g * exp${{F}}(x / {tl} - s1) / s2 + b",
                                 f"self.weight * torch.softmax(x / {temp}, dim=-1) + self.bias"),
        }
        for name, (m1, op1, m2, of, tf) in forms.items():
            params = ["gamma", "beta"] if name == "weighted_softmax" else []
            variant = f"{name}_t{str(temp).replace('.', 'p')}"
            for dt in (FLOAT, DOUBLE):
                s = RowSpec(dt, m1, op1, m2, of, params=params, flops=8)
                out.append(c_task("softmax", f"{variant}_{dt.name}", s, f"{name} over each row at temperature {temp}"))
            s = RowSpec(FLOAT, m1, op1, m2, of, params=params, flops=8)
            init = ["self.weight = nn.Parameter(torch.rand(dim) + 0.5)", "self.bias = nn.Parameter(torch.rand(dim) - 0.5)"]
            out.append(t_task("softmax", variant, s, [f"return {tf}"], f"{name} over the last dimension, temperature {temp}",
                              init if params else (), AFFINE_TOL if params else None))
    return out


def norm_tasks(rng) -> list:
    out = []
    for eps in (1e-5, 1e-6, 1e-3):
        el = f"{eps}${{C}}"
        forms = {  # name: (map1, op1, map2, outf, params, torch forward, init)
            "layer_norm": ("x", "sum", "(x - s1 / n) * (x - s1 / n)", f"(x - s1 / n) / sqrt${{F}}(s2 / n + {el}) * g + b",
                           ["gamma", "beta"], f"F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, {eps})"),
            "layer_norm_plain": ("x", "sum", "(x - s1 / n) * (x - s1 / n)", f"(x - s1 / n) / sqrt${{F}}(s2 / n + {el})",
                                 [], f"F.layer_norm(x, (x.shape[-1],), None, None, {eps})"),
            "rms_norm": ("x * x", "sum", "", f"x / sqrt${{F}}(s1 / n + {el}) * g", ["gamma"],
                         f"x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + {eps}) * self.weight"),
            "rms_norm_plain": ("x * x", "sum", "", f"x / sqrt${{F}}(s1 / n + {el})", [],
                               f"x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + {eps})"),
            "l2_normalize": ("x * x", "sum", "", f"x / fmax${{F}}(sqrt${{F}}(s1), {el})", [],
                             f"F.normalize(x, dim=-1, eps={eps})"),
            "max_abs_scale": ("fabs${F}(x)", "max", "", f"x / (s1 + {el})", [],
                              f"x / (torch.amax(torch.abs(x), dim=-1, keepdim=True) + {eps})"),
            "layer_norm_gelu": ("x", "sum", "(x - s1 / n) * (x - s1 / n)",
                                f"(x - s1 / n) / sqrt${{F}}(s2 / n + {el}) * g + b", ["gamma", "beta"], ""),
            "center_rows": ("x", "sum", "", "x - s1 / n + 0.0 * " + el, [], ""),
        }
        for name, (m1, op1, m2, of, params, tf) in forms.items():
            if name == "layer_norm_gelu":
                of = "(" + of + ")"
                of = UNARY["gelu"].c.replace("${x}", of)
                tf = f"F.gelu(F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, {eps}))"
            if name == "center_rows":
                if eps != 1e-5:
                    continue
                of, tf = "x - s1 / n", "x - torch.mean(x, dim=-1, keepdim=True)"
            variant = f"{name}_eps{eps:g}".replace("-", "m").replace(".", "p")
            for dt in (FLOAT, DOUBLE):
                s = RowSpec(dt, m1, op1, m2, of, params=params, flops=8)
                out.append(c_task("norm_rows", f"{variant}_{dt.name}", s, f"{name} of each row (eps {eps})"))
            s = RowSpec(FLOAT, m1, op1, m2, of, params=params, flops=8)
            init = ["self.weight = nn.Parameter(torch.rand(dim) + 0.5)"]
            if "beta" in params:
                init.append("self.bias = nn.Parameter(torch.rand(dim) - 0.5)")
            out.append(t_task("norm_rows", variant, s, [f"return {tf}"], f"{name} over the last dimension (eps {eps})",
                              init if params else (), AFFINE_TOL))
    return out


def loss_tasks(rng) -> list:
    out = []
    for temp in (1.0, 0.5, 2.0, 3.0):
        tl = f"{temp}${{C}}"
        forms = {  # name: (map1, op1, map2, fin, label, torch forward)
            "logsumexp": (f"x / {tl}", "max", f"exp${{F}}(x / {tl} - s1)", "s1 + log${F}(s2)", False,
                          f"torch.logsumexp(x / {temp}, dim=-1)"),
            "cross_entropy": (f"x / {tl}", "max", f"exp${{F}}(x / {tl} - s1)", f"s1 + log${{F}}(s2) - xl / {tl}", True,
                              f"F.cross_entropy(x / {temp}, target.long(), reduction='none')"),
            "label_prob": (f"x / {tl}", "max", f"exp${{F}}(x / {tl} - s1)", f"exp${{F}}(xl / {tl} - s1) / s2", True,
                           f"torch.softmax(x / {temp}, dim=-1).gather(1, target.long().unsqueeze(1)).squeeze(1)"),
            "margin_to_max": (f"x / {tl}", "max", "", f"s1 - xl / {tl}", True,
                              f"torch.amax(x / {temp}, dim=-1) - (x / {temp}).gather(1, target.long().unsqueeze(1)).squeeze(1)"),
            "entropy_proxy": (f"x / {tl}", "max", f"exp${{F}}(x / {tl} - s1) * (x / {tl} - s1)", "0.0${C} - s2", False, ""),
            "mean_log_softplus": (f"log1p${{F}}(exp${{F}}(x / {tl}))", "sum", "", "s1 / n", False,
                                  f"torch.mean(torch.log1p(torch.exp(x / {temp})), dim=-1)"),
        }
        for name, (m1, op1, m2, fin, label, tf) in forms.items():
            if not tf:
                continue
            variant = f"{name}_t{str(temp).replace('.', 'p')}"
            for dt in (FLOAT, DOUBLE):
                s = RowSpec(dt, m1, op1, m2, fin=fin, label=label, flops=6)
                out.append(c_task("row_loss", f"{variant}_{dt.name}", s, f"{name} of each row at temperature {temp}"))
            s = RowSpec(FLOAT, m1, op1, m2, fin=fin, label=label, flops=6)
            out.append(t_task("row_loss", variant, s, [f"return {tf}"], f"{name} per row, temperature {temp}"))
    return out


def generate(rng) -> list:
    return row_reduce_tasks(rng) + softmax_tasks(rng) + norm_tasks(rng) + loss_tasks(rng)
