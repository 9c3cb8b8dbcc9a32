"""column_affine: out[r, c] = act(x[r, c] * scale[c] + shift[c]), a per-column scale and shift of a
row-major matrix followed by an activation. A template: copy this file to
`pipeline/tasks/families/<your_module>.py`, rename FAMILY, and replace the computation (the recipe is
"A task family" in docs/extending.md; tests/dataset/test_family_recipe.py runs it as a family).

Implementations: naive (a thread per element), grid_stride (a grid sized to the GPU, coalesced),
block_per_row (a block walks one row), column_threads (a thread keeps one column's scale and shift
in registers and walks 16 rows: adjacent threads read adjacent columns) and row_threads (a thread
walks one row: neighbouring threads are a row apart, the uncoalesced variant).

What a family module provides: `generate(rng) -> list[Task]`, deterministic in `rng` (the registry
entry's own stream, pipeline/tasks/generate.py). Each task has small check configurations and two
timing configurations (`configs`), a C reference (c2cuda) or a PyTorch module (torch2cuda), a work
model (flops and bytes as expressions of the configuration's parameters) and at least five
implementations, the naive one first, each a `run(<the task's args>, cudaStream_t stream)` host
function over its kernels (`_kit.c2cuda_task` and `_kit.torch_task` add the entry points).
"""
from __future__ import annotations

from pipeline.tasks.families._kit import (DOUBLE, FLOAT, UNARY, Impl, TorchModule, arg, arg_names, c2cuda_task,
                                         configs, dedent, signature, tfill, torch_task)

FAMILY = "column_affine"  # the family of every task below: its split is frozen in pipeline/assets/splits.json
ACTIVATIONS = ["identity", "relu", "tanh", "gelu"]  # names of _kit.UNARY: one task per activation and dtype

_HEAD = """
__device__ __forceinline__ ${T} affine(${T} v, ${T} s, ${T} b) {
    ${T} x = v * s + b;
    return ${ACT};
}
"""
_NAIVE = """
// One thread per element.
__global__ void ca_naive(${SIG}) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * cols) return;
    int c = (int)(i % cols);
    out[i] = affine(x[i], scale[c], shift[c]);
}
static void run(${SIG}, cudaStream_t stream) {
    size_t n = (size_t)rows * cols;
    ca_naive<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(${NAMES});
}
"""
_GRID = """
// Grid-stride loop over a grid sized to the GPU.
__global__ void __launch_bounds__(256) ca_grid(${SIG}) {
    size_t n = (size_t)rows * cols;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(i % cols);
        out[i] = affine(x[i], scale[c], shift[c]);
    }
}
static void run(${SIG}, cudaStream_t stream) {
    size_t blocks = ((size_t)rows * cols + 255) / 256;
    ca_grid<<<(unsigned)(blocks < 132 * 8 ? blocks : 132 * 8), 256, 0, stream>>>(${NAMES});
}
"""
_ROW_BLOCK = """
// A block per row: no division per element, and the row's columns are read in order.
__global__ void __launch_bounds__(256) ca_row_block(${SIG}) {
    size_t base = (size_t)blockIdx.x * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[base + c] = affine(x[base + c], scale[c], shift[c]);
}
static void run(${SIG}, cudaStream_t stream) {
    ca_row_block<<<rows, 256, 0, stream>>>(${NAMES});
}
"""
_COLUMNS = """
// A thread per column and 16 rows: scale and shift are read once into registers.
__global__ void __launch_bounds__(256) ca_columns(${SIG}) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    ${T} s = scale[c], b = shift[c];
    int r0 = blockIdx.y * 16;
    for (int r = r0; r < r0 + 16 && r < rows; ++r) out[(size_t)r * cols + c] = affine(x[(size_t)r * cols + c], s, b);
}
static void run(${SIG}, cudaStream_t stream) {
    ca_columns<<<dim3((cols + 255) / 256, (rows + 15) / 16), 256, 0, stream>>>(${NAMES});
}
"""
_ROWS = """
// Uncoalesced: a thread per row walks its columns, so neighbouring threads are a whole row apart.
__global__ void ca_rows(${SIG}) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    for (int c = 0; c < cols; ++c) out[(size_t)r * cols + c] = affine(x[(size_t)r * cols + c], scale[c], shift[c]);
}
static void run(${SIG}, cudaStream_t stream) {
    ca_rows<<<(rows + 127) / 128, 128, 0, stream>>>(${NAMES});
}
"""
_IMPLS = [("naive", "naive", _NAIVE), ("grid_stride", "coalesced", _GRID),  # (name, strategy, code): naive first
          ("block_per_row", "block_per_row", _ROW_BLOCK), ("column_threads", "thread_coarsening", _COLUMNS),
          ("row_threads", "uncoalesced", _ROWS)]


def _args(dt) -> list:
    """The C signature every implementation's `run` shares (scalars first, then the arrays)."""
    return [arg("rows", "int", "scalar"), arg("cols", "int", "scalar"),
            arg("x", f"const {dt.name}*", "in", "rows*cols"), arg("scale", f"const {dt.name}*", "in", "cols"),
            arg("shift", f"const {dt.name}*", "in", "cols"), arg("out", f"{dt.name}*", "out", "rows*cols")]


def _impls(dt, act: str) -> list[Impl]:
    args = _args(dt)
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), ACT=tfill(UNARY[act].c, dt, x="x"))
    head = tfill(dedent(_HEAD), dt, **ctx)
    return [Impl(name, strategy, head + tfill(dedent(body), dt, **ctx)) for name, strategy, body in _IMPLS]


def _reference(dt, act: str, function: str) -> str:
    """The C reference: plain loops, the specification a candidate is checked against."""
    value = tfill(UNARY[act].c, dt, x="v")
    return (f"#include <math.h>\n#include <stddef.h>\n\nvoid {function}({signature(_args(dt))}) {{\n"
            f"    for (int r = 0; r < rows; ++r)\n        for (int c = 0; c < cols; ++c) {{\n"
            f"            {dt.name} v = x[(size_t)r * cols + c] * scale[c] + shift[c];\n"
            f"            out[(size_t)r * cols + c] = {value};\n        }}\n}}\n")


CHECK = [{"rows": 3, "cols": 5}, {"rows": 17, "cols": 1001}, {"rows": 300, "cols": 129}]


def generate(rng) -> list:
    """Every task of the family: a c2cuda task per activation and dtype, a torch2cuda task per activation."""
    out = []
    for act in ACTIVATIONS:
        flops = f"{2 + UNARY[act].flops}*rows*cols"
        for dt in (FLOAT, DOUBLE):
            function = f"{FAMILY}_{act}_{dt.name}"
            timing = [{"rows": 8192 if dt is FLOAT else 4096, "cols": 4096}, {"rows": 3001, "cols": 5003}]
            out.append(c2cuda_task(FAMILY, f"{act}_{dt.name}", function, _reference(dt, act, function), _args(dt),
                                   configs(CHECK, timing), flops, f"{dt.size}*(2*rows*cols + 2*cols)",
                                   _impls(dt, act), dt.tol, f"per-column scale and shift, then {act}, {dt.name}"))
        module = TorchModule([("x", "torch.randn(rows, cols)"), ("scale", "torch.randn(cols)"),
                              ("shift", "torch.randn(cols)")],
                             ["v = x * scale + shift", f"return {UNARY[act].texpr('v')}"], {"rows": 4096, "cols": 4096})
        launch = ("    run((int)dim_of(sizes, 0, 0), (int)dim_of(sizes, 0, 1), (const float*)inputs[0], "
                  "(const float*)inputs[1], (const float*)inputs[2], (float*)outputs[0], stream);")
        out.append(torch_task(FAMILY, act, module.source(), configs(CHECK, [{"rows": 8192, "cols": 4096},
                                                                            {"rows": 3001, "cols": 5003}]),
                              flops, "4*(2*rows*cols + 2*cols)", _impls(FLOAT, act), launch, FLOAT.tol,
                              f"per-column scale and shift of a matrix, then {act}"))
    return out
