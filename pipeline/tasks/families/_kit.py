"""Building blocks of the family generators: templates, dtypes, operator tables, task builders.

Kernel sources are written as plain text with `${name}` placeholders (C braces stay readable) and
filled by `fill`. A family writes its kernels and one host function `run(<the task's args>,
cudaStream_t stream)` per implementation; `c2cuda_entry` and a family's light `launch` wrap that
same host function, so a c2cuda task and a torch2cuda task of one family share their kernels.
Element operators (`UNARY`) carry a C form (float or double via ${F}/${C} suffixes) and a torch
form, so a C reference, the CUDA kernels and a PyTorch reference all compute the same function.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from pipeline.core.records import ArgSpec, Implementation, InputConfig, Task, Tolerance, WorkModel

_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")


def fill(template: str, **values) -> str:
    """Replace every ${name} with str(values[name]); a placeholder without a value raises KeyError."""
    def one(m: re.Match) -> str:
        if m.group(1) not in values:
            raise KeyError(f"template placeholder ${{{m.group(1)}}} has no value (given: {sorted(values)})")
        return str(values[m.group(1)])
    return _PLACEHOLDER.sub(one, template)


def dedent(text: str) -> str:
    """Strip the common indentation of a triple-quoted source and its leading newline."""
    import textwrap
    return textwrap.dedent(text).lstrip("\n")


# --- dtypes ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DType:
    name: str      # C type
    F: str         # math function suffix (expf / exp)
    C: str         # literal suffix (1.0f / 1.0)
    size: int      # bytes
    vec: str       # 16-byte vector type
    width: int     # elements per vector
    tol: Tolerance  # default tolerance of element-wise results

    def lit(self, v: float) -> str:
        text = repr(float(v))
        return text + self.C


FLOAT = DType("float", "f", "f", 4, "float4", 4, Tolerance(rtol=1e-4, atol=1e-5))
DOUBLE = DType("double", "", "", 8, "double2", 2, Tolerance(rtol=1e-9, atol=1e-10))
DTYPES = {"float": FLOAT, "double": DOUBLE}
SQRT_NEAR_ZERO_TOL = Tolerance(rtol=1e-4, atol=1e-3)
"""Float results that end in a square root of a value that may come out near 0: sqrt's slope is
unbounded there, so a rounding difference of an ulp before it (libm vs CUDA math, a fused
multiply-add) becomes ~1e-4 of the output's scale after it, between two correct programs."""


def tfill(template: str, dt: DType, **values) -> str:
    """`fill` with the dtype placeholders ${T}, ${F}, ${C}, ${V} (vector type), ${W} (vector width)."""
    return fill(template, T=dt.name, F=dt.F, C=dt.C, V=dt.vec, W=dt.width, **values)


# --- element operators -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Unary:
    """y = op(x): `c` is a C expression over ${x} (with ${F}/${C}/${T}), `torch` a PyTorch one."""
    name: str
    c: str
    torch: str
    flops: int = 1
    bounded: bool = False  # needs |x| below ~80 (exp of it must stay finite)

    def cexpr(self, x: str, dt: DType) -> str:
        return tfill(self.c, dt, x=x)

    def texpr(self, x: str) -> str:
        return fill(self.torch, x=x)


_U = [
    Unary("identity", "${x}", "${x}", 0),
    Unary("relu", "fmax${F}(${x}, 0.0${C})", "torch.relu(${x})"),
    Unary("leaky_relu", "(${x} > 0.0${C} ? ${x} : 0.01${C} * ${x})", "F.leaky_relu(${x}, 0.01)", 2),
    Unary("leaky_relu_02", "(${x} > 0.0${C} ? ${x} : 0.2${C} * ${x})", "F.leaky_relu(${x}, 0.2)", 2),
    Unary("sigmoid", "(1.0${C} / (1.0${C} + exp${F}(-${x})))", "torch.sigmoid(${x})", 4, True),
    Unary("tanh", "tanh${F}(${x})", "torch.tanh(${x})", 4),
    Unary("silu", "(${x} / (1.0${C} + exp${F}(-${x})))", "F.silu(${x})", 4, True),
    Unary("softplus", "(fmax${F}(${x}, 0.0${C}) + log1p${F}(exp${F}(-fabs${F}(${x}))))", "F.softplus(${x})", 6),
    Unary("gelu_tanh", "(0.5${C} * ${x} * (1.0${C} + tanh${F}(0.7978845608028654${C} * (${x} + 0.044715${C} * ${x} * ${x} * ${x}))))",
          "F.gelu(${x}, approximate='tanh')", 9),
    Unary("gelu", "(0.5${C} * ${x} * (1.0${C} + erf${F}(${x} * 0.7071067811865476${C})))", "F.gelu(${x})", 6),
    Unary("elu", "(${x} > 0.0${C} ? ${x} : expm1${F}(${x}))", "F.elu(${x})", 4),
    Unary("selu", "(1.0507009873554805${C} * (${x} > 0.0${C} ? ${x} : 1.6732632423543772${C} * expm1${F}(${x})))",
          "torch.selu(${x})", 5),
    Unary("hardtanh", "fmin${F}(fmax${F}(${x}, -1.0${C}), 1.0${C})", "F.hardtanh(${x})", 2),
    Unary("relu6", "fmin${F}(fmax${F}(${x}, 0.0${C}), 6.0${C})", "F.relu6(${x})", 2),
    Unary("hardsigmoid", "(fmin${F}(fmax${F}(${x} + 3.0${C}, 0.0${C}), 6.0${C}) / 6.0${C})", "F.hardsigmoid(${x})", 4),
    Unary("hardswish", "(${x} * fmin${F}(fmax${F}(${x} + 3.0${C}, 0.0${C}), 6.0${C}) / 6.0${C})", "F.hardswish(${x})", 5),
    Unary("mish", "(${x} * tanh${F}(fmax${F}(${x}, 0.0${C}) + log1p${F}(exp${F}(-fabs${F}(${x})))))", "F.mish(${x})", 10),
    Unary("softsign", "(${x} / (1.0${C} + fabs${F}(${x})))", "F.softsign(${x})", 3),
    Unary("tanhshrink", "(${x} - tanh${F}(${x}))", "F.tanhshrink(${x})", 5),
    Unary("logsigmoid", "(fmin${F}(${x}, 0.0${C}) - log1p${F}(exp${F}(-fabs${F}(${x}))))", "F.logsigmoid(${x})", 6),
    Unary("square", "(${x} * ${x})", "torch.square(${x})"),
    Unary("cube", "(${x} * ${x} * ${x})", "(${x} * ${x} * ${x})", 2),
    Unary("abs", "fabs${F}(${x})", "torch.abs(${x})"),
    Unary("neg_exp_sq", "exp${F}(-${x} * ${x})", "torch.exp(-${x} * ${x})", 5),
    Unary("sin", "sin${F}(${x})", "torch.sin(${x})", 4),
    Unary("cos", "cos${F}(${x})", "torch.cos(${x})", 4),
    Unary("atan", "atan${F}(${x})", "torch.atan(${x})", 6),
    Unary("erf", "erf${F}(${x})", "torch.erf(${x})", 6),
    Unary("log1p_abs", "log1p${F}(fabs${F}(${x}))", "torch.log1p(torch.abs(${x}))", 5),
    Unary("sqrt_abs", "sqrt${F}(fabs${F}(${x}))", "torch.sqrt(torch.abs(${x}))", 2),
    Unary("inv_sqrt1p", "(1.0${C} / sqrt${F}(1.0${C} + ${x} * ${x}))", "torch.rsqrt(1.0 + ${x} * ${x})", 4),
    Unary("exp", "exp${F}(${x})", "torch.exp(${x})", 4, True),
    Unary("clamp_half", "fmin${F}(fmax${F}(${x}, -0.5${C}), 0.5${C})", "torch.clamp(${x}, -0.5, 0.5)", 2),
    Unary("softshrink", "(${x} > 0.5${C} ? ${x} - 0.5${C} : (${x} < -0.5${C} ? ${x} + 0.5${C} : 0.0${C}))",
          "F.softshrink(${x}, 0.5)", 2),
    Unary("scale_shift", "(1.5${C} * ${x} + 0.25${C})", "(1.5 * ${x} + 0.25)", 2),
    Unary("sq_plus_x", "(${x} * ${x} + ${x})", "(${x} * ${x} + ${x})", 2),
]
UNARY: dict[str, Unary] = {u.name: u for u in _U}
UNBOUNDED_SAFE = [u.name for u in _U if not u.bounded]  # safe on values far from zero (sums, products)
BOUNDED_OK = [u.name for u in _U]


@dataclass(frozen=True)
class Binary:
    """r = a op b as a C expression over ${a}, ${b} and a torch one."""
    name: str
    c: str
    torch: str
    flops: int = 1


_B = [
    Binary("add", "(${a} + ${b})", "(${a} + ${b})"),
    Binary("sub", "(${a} - ${b})", "(${a} - ${b})"),
    Binary("mul", "(${a} * ${b})", "(${a} * ${b})"),
    Binary("max", "fmax${F}(${a}, ${b})", "torch.maximum(${a}, ${b})"),
    Binary("min", "fmin${F}(${a}, ${b})", "torch.minimum(${a}, ${b})"),
    Binary("absdiff", "fabs${F}(${a} - ${b})", "torch.abs(${a} - ${b})", 2),
    Binary("sqdiff", "((${a} - ${b}) * (${a} - ${b}))", "((${a} - ${b}) * (${a} - ${b}))", 3),
    Binary("hypot", "sqrt${F}(${a} * ${a} + ${b} * ${b})", "torch.sqrt(${a} * ${a} + ${b} * ${b})", 4),
    Binary("safe_div", "(${a} / (1.0${C} + fabs${F}(${b})))", "(${a} / (1.0 + torch.abs(${b})))", 3),
    Binary("atan2", "atan2${F}(${a}, ${b})", "torch.atan2(${a}, ${b})", 8),
    Binary("mul_add_half", "(${a} * ${b} + 0.5${C} * ${a})", "(${a} * ${b} + 0.5 * ${a})", 3),
]
BINARY: dict[str, Binary] = {b.name: b for b in _B}


def bin_c(name: str, a: str, b: str, dt: DType) -> str:
    return tfill(BINARY[name].c, dt, a=a, b=b)


def bin_t(name: str, a: str, b: str) -> str:
    return fill(BINARY[name].torch, a=a, b=b)


# --- shared CUDA snippets --------------------------------------------------------------------------
CUDA_HEAD = "#include <cstdint>\n#include <cuda_runtime.h>\n"

# Host helpers of the light format: element count and extents of tensor i (see light_abi.py).
LIGHT_HELPERS = dedent("""
    static int64_t numel_of(const int64_t* sizes, int i) {
        int64_t n = 1;
        for (int d = 0; d < (int)sizes[8 * i]; ++d) n *= sizes[8 * i + 1 + d];
        return n;
    }
    static int64_t dim_of(const int64_t* sizes, int i, int d) {
        int rank = (int)sizes[8 * i];
        return sizes[8 * i + 1 + (d < 0 ? rank + d : d)];
    }
""")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# --- tasks -----------------------------------------------------------------------------------------
def arg(name: str, ctype: str, role: str, size: str = "", init: str = "") -> ArgSpec:
    """A c2cuda argument; scalars default to a param of the same name, inputs to uniform(-1, 1)."""
    if role == "scalar":
        return ArgSpec(name=name, ctype=ctype, role=role, init=init or name)
    return ArgSpec(name=name, ctype=ctype, role=role, size=size, init=init or "uniform(-1, 1)")


def signature(args: list[ArgSpec]) -> str:
    return ", ".join(f"{a.ctype} {a.name}" for a in args)


def arg_names(args: list[ArgSpec]) -> str:
    return ", ".join(a.name for a in args)


def c2cuda_entry(function: str, args: list[ArgSpec]) -> str:
    """The c2cuda entry point: the task's C signature calling `run` on the default stream."""
    return f'extern "C" void {function}({signature(args)}) {{\n    run({arg_names(args)}, 0);\n}}\n'


def light_entry(body: str) -> str:
    """The light entry point around a body that calls `run(..., stream)`."""
    return (LIGHT_HELPERS + 'extern "C" int launch(void* const* inputs, void* const* outputs, const int64_t* sizes, '
            'cudaStream_t stream) {\n' + body.rstrip() + "\n    return (int)cudaGetLastError();\n}\n")


def configs(check: list[dict], timing: list[dict]) -> list[InputConfig]:
    """Check configs (compared with the reference) named small/odd/mid..., then timing configs."""
    names = ["small", "odd", "mid", "edge"]
    out = [InputConfig(name=names[i], params=p) for i, p in enumerate(check)]
    out += [InputConfig(name=["large", "large_odd", "large_wide"][i], params=p, check=True, time=True)
            for i, p in enumerate(timing)]
    return out


@dataclass
class Impl:
    """One implementation: its name, strategy label and the code of kernels + `run` (without entry)."""
    name: str
    strategy: str
    body: str


_NAME = re.compile(r"[A-Za-z0-9_]+")


def _check_names(family: str, variant: str, function: str = "") -> None:
    if not (_NAME.fullmatch(family) and _NAME.fullmatch(variant)) or (function and not function.isidentifier()):
        raise ValueError(f"generated task {family}/{variant} (function {function!r}) has a name that is not a plain "
                         f"identifier; build names from letters, digits and underscores only")


def c2cuda_task(family: str, variant: str, function: str, reference: str, args: list[ArgSpec],
                cfgs: list[InputConfig], flops: str, nbytes: str, impls: list[Impl], tol: Tolerance,
                description: str) -> Task:
    _check_names(family, variant, function)
    entry = c2cuda_entry(function, args)
    return Task(id=f"c2cuda/{family}/{variant}", kind="c2cuda", family=family, description=description,
                reference=reference, function=function, args=args, configs=cfgs,
                work=WorkModel(flops=flops, bytes=nbytes), tolerance=tol,
                implementations=[Implementation(name=i.name, strategy=i.strategy, format="c2cuda",
                                                code=CUDA_HEAD + i.body.rstrip() + "\n\n" + entry) for i in impls])


def torch_task(family: str, variant: str, reference: str, cfgs: list[InputConfig], flops: str, nbytes: str,
               impls: list[Impl], launch_body: str, tol: Tolerance, description: str) -> Task:
    _check_names(family, variant)
    entry = light_entry(launch_body)
    return Task(id=f"torch2cuda/{family}/{variant}", kind="torch2cuda", family=family, description=description,
                reference=reference, configs=cfgs, work=WorkModel(flops=flops, bytes=nbytes), tolerance=tol,
                implementations=[Implementation(name=i.name, strategy=i.strategy, format="light",
                                                code=CUDA_HEAD + i.body.rstrip() + "\n\n" + entry) for i in impls])


@dataclass
class TorchModule:
    """A KernelBench-layout reference: forward body over named inputs, size globals, input makers."""
    inputs: list[tuple[str, str]]        # (argument name, torch expression creating it)
    forward: list[str]                   # body lines of forward (the last returns)
    sizes: dict[str, int]                # module-level size globals
    init: list[str] = field(default_factory=list)      # body lines of __init__ after super()
    init_args: list[tuple[str, str]] = field(default_factory=list)  # (parameter, value expression)

    def source(self) -> str:
        params = "".join(f", {a}" for a, _ in self.init_args)
        init = "".join(f"        {line}\n" for line in self.init)
        fwd = "".join(f"        {line}\n" for line in self.forward)
        sizes = "".join(f"{k} = {v}\n" for k, v in self.sizes.items())
        ins = ", ".join(e for _, e in self.inputs)
        init_vals = ", ".join(v for _, v in self.init_args)
        return (f"import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
                f"class Model(nn.Module):\n    def __init__(self{params}):\n        super().__init__()\n{init}\n"
                f"    def forward(self, {', '.join(n for n, _ in self.inputs)}):\n{fwd}\n\n{sizes}\n\n"
                f"def get_inputs():\n    return [{ins}]\n\n\ndef get_init_inputs():\n    return [{init_vals}]\n")


def pick(rng, items: list, k: int) -> list:
    """k distinct items in a seeded order (all of them when k >= len)."""
    idx = rng.permutation(len(items))[:k]
    return [items[i] for i in sorted(idx)]
