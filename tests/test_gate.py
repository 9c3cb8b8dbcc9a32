"""Tests of pipeline/evaluation/gate/__init__.py (+ gate/cuda.py, gate/python.py): the static gate before compile and run.

Run: .venv/bin/pytest tests/test_gate.py -q   (CPU only, about a second)
Every built-in implementation must pass; each rule has at least one hand-written hack that must be
rejected with that rule and the right 1-based line; comments and strings must not trigger rules.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from pipeline.evaluation.gate import check_candidate, cuda_sources_of, extract_load_inline
from pipeline.core.records import Candidate, Task

TASK_DIR = Path(__file__).resolve().parents[1] / "pipeline" / "assets" / "builtin_tasks"


def _load(path: Path) -> Task:
    return Task.model_validate(yaml.safe_load(path.read_text()))


TASKS = {t.id: t for t in map(_load, sorted(TASK_DIR.glob("*/*.yaml")))}
SAXPY, RELU = TASKS["c2cuda/saxpy"], TASKS["torch2cuda/relu"]


def gate(code: str, fmt: str, task: Task | None = None, profile: str = "strict"):
    task = task or (SAXPY if fmt == "c2cuda" else RELU)
    return check_candidate(Candidate(task_id=task.id, code=textwrap.dedent(code), format=fmt), task, profile)


def line_of(code: str, needle: str) -> int:
    lines = textwrap.dedent(code).splitlines()
    return next(i + 1 for i, text in enumerate(lines) if needle in text)


def assert_rejects(code: str, fmt: str, rule: str, needle: str, task: Task | None = None,
                   profile: str = "strict") -> None:
    """The gate rejects `code` under `rule` at the line containing `needle`, and says so in the message."""
    errors = [f for f in gate(code, fmt, task, profile) if f.severity == "error"]
    line = line_of(code, needle)
    hits = [f for f in errors if f.rule == rule and f.line == line]
    assert hits, f"expected {rule} at line {line}, got {[f.message for f in errors]}"
    assert f"line {line}:" in hits[0].message and rule in hits[0].message and hits[0].source == "gate"


def assert_passes(code: str, fmt: str, task: Task | None = None, profile: str = "strict") -> None:
    errors = [f.message for f in gate(code, fmt, task, profile) if f.severity == "error"]
    assert not errors, errors


C2CUDA = """\
#include <cuda_runtime.h>
__global__ void saxpy_kernel(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" void saxpy(int n, float a, const float* x, float* y) {
    saxpy_kernel<<<(n + 255) / 256, 256>>>(n, a, x, y);
    // BODY
}
"""


def c2cuda(body: str = "", top: str = "") -> str:
    return top + C2CUDA.replace("    // BODY\n", textwrap.indent(textwrap.dedent(body), "    "))


KB = '''\
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    relu_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    // CUDA
    return y;
}
"""
cpp_source = "torch::Tensor relu_cuda(torch::Tensor x);"
relu_ext = load_inline(name="relu_ext", cpp_sources=cpp_source, cuda_sources=cuda_source, functions=["relu_cuda"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        # INIT

    def forward(self, x):
        # FORWARD
        return relu_ext.relu_cuda(x.contiguous())
'''


def kb(forward: str = "", init: str = "", cuda: str = "", top: str = "", base: str = KB) -> str:
    code = top + base
    for mark, text, indent in (("# FORWARD", forward, 8), ("# INIT", init, 8), ("// CUDA", cuda, 4)):
        text = textwrap.dedent(text)
        text += "\n" if text and not text.endswith("\n") else ""
        code = code.replace(" " * indent + mark + "\n", textwrap.indent(text, " " * indent))
    return code


# --- every built-in implementation passes -----------------------------------------------------
IMPLS = [(t, impl) for t in TASKS.values() for impl in t.implementations]


@pytest.mark.parametrize("task,impl", IMPLS, ids=[f"{t.id}:{i.name}" for t, i in IMPLS])
def test_builtin_implementations_pass(task, impl):
    findings = check_candidate(Candidate(task_id=task.id, code=impl.code, format=impl.format), task)
    assert not [f for f in findings if f.severity == "error"], [f.message for f in findings]


def test_templates_pass():
    assert_passes(c2cuda(), "c2cuda")
    assert_passes(kb(), "kernelbench")


# --- CUDA rules (c2cuda and light) ------------------------------------------------------------
@pytest.mark.parametrize("rule,body,needle", [
    ("side-stream", "cudaStream_t s; cudaStreamCreate(&s);", "cudaStreamCreate"),
    ("side-stream", "saxpy_kernel<<<1, 256, 0, cudaStreamPerThread>>>(n, a, x, y);", "cudaStreamPerThread"),
    ("side-stream", "saxpy_kernel<<<1, 256, 0, (cudaStream_t)2>>>(n, a, x, y);", "(cudaStream_t)2"),
    ("threads", "std::thread t([=] { saxpy_kernel<<<1, 1>>>(n, a, x, y); }); t.join();", "std::thread"),
    ("threads", "pthread_t t; pthread_create(&t, 0, 0, 0);", "pthread_create"),
    ("process-or-file-or-network", 'FILE* f = fopen("/tmp/ref.bin", "rb");', "fopen"),
    ("process-or-file-or-network", 'system("nvidia-smi");', "system"),
    ("process-or-file-or-network", 'const char* v = getenv("SEED");', "getenv"),
    ("timing-tamper", "cudaEvent_t e; cudaEventCreate(&e); cudaEventRecord(e);", "cudaEventRecord"),
    ("timing-tamper", "cudaDeviceReset();", "cudaDeviceReset"),
    ("timing-tamper", "cudaGraph_t g; cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal);", "cudaGraph_t"),
    ("ipc", "cudaIpcMemHandle_t h; cudaIpcGetMemHandle(&h, y);", "cudaIpcGetMemHandle"),
    ("driver-api", "CUcontext c; cuCtxGetCurrent(&c);", "cuCtxGetCurrent"),
    ("inline-asm-host", 'asm volatile("nop");', "asm volatile"),
])
def test_cuda_rules_in_the_entry_point(rule, body, needle):
    assert_rejects(c2cuda(body), "c2cuda", rule, needle)


def test_openmp_pragma():
    code = c2cuda(top="", body="#pragma omp parallel for\nfor (int i = 0; i < 4; ++i) {}")
    assert_rejects(code, "c2cuda", "threads", "#pragma omp")


def test_forbidden_includes():
    assert_rejects(c2cuda(top="#include <cudnn.h>\n"), "c2cuda", "forbidden-include", "<cudnn.h>")
    assert_rejects(c2cuda(top="#include <fstream>\n"), "c2cuda", "forbidden-include", "<fstream>")
    assert_rejects(c2cuda(top='#include "../../secret.h"\n'), "c2cuda", "forbidden-include", "secret.h")
    assert_rejects(c2cuda(top="#include <torch/extension.h>\n"), "c2cuda", "forbidden-include", "torch/extension")
    assert_rejects(c2cuda(top="#define H <fstream>\n#include H\n"), "c2cuda", "forbidden-include", "#include H")
    assert_rejects(c2cuda(top="%:include <fstream>\n"), "c2cuda", "forbidden-include", "%:include")
    assert_passes(c2cuda(top="#include <cub/cub.cuh>\n#include <cooperative_groups/reduce.h>\n#include <cstdint>\n"),
                  "c2cuda")
    # header-only or declarations whose calls stay checked by name (cuda.h: the driver API, refused as driver-api)
    assert_passes(c2cuda(top="#include <cuda.h>\n#include <math_constants.h>\n#include <vector>\n#include <limits>\n"),
                  "c2cuda")


def test_load_time_code():
    top = "__attribute__((constructor)) static void warm() {}\n"
    assert_rejects(c2cuda(top=top), "c2cuda", "load-time-code", "constructor")
    assert_rejects(c2cuda(top="[[gnu::destructor]] void bye() {}\n"), "c2cuda", "load-time-code", "destructor")


def test_precision_downgrade_on_a_float_task():
    top = textwrap.dedent("""\
        #include <cuda_fp16.h>
        __global__ void half_kernel(int n, const float* x, __half* t) {
            int i = threadIdx.x;
            if (i < n) t[i] = __float2half(x[i]);
        }
        """)
    assert_rejects(c2cuda(top=top), "c2cuda", "precision-downgrade", "__half* t")
    assert_rejects(c2cuda(top=top), "c2cuda", "precision-downgrade", "__float2half")
    wmma = "#include <mma.h>\n__device__ void f() { nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, " \
           "nvcuda::wmma::row_major> a; }\n"
    assert_rejects(c2cuda(top=wmma), "c2cuda", "precision-downgrade", "wmma::fragment")
    ptx = '__device__ float f(float v) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v)); return v; }\n'
    assert_rejects(c2cuda(top=ptx), "c2cuda", "precision-downgrade", "cvt.rn.f16")


def test_precision_rule_only_applies_to_float32_tasks():
    int_task = TASKS["c2cuda/histogram"]
    assert all(a.ctype.replace("const ", "").split("*")[0].strip() in ("int", "unsigned int") for a in int_task.args)
    code = next(i.code for i in int_task.implementations) + "__device__ __half h;\n"
    assert not [f for f in gate(code, "c2cuda", int_task) if f.rule == "precision-downgrade"]
    # a variable that happens to be called half is not the half type
    assert_passes(c2cuda("int half = n / 2; (void)half;"), "c2cuda")


def test_no_device_code_and_missing_entry_point():
    host_only = 'extern "C" void saxpy(int n, float a, const float* x, float* y) { }\n'
    assert_rejects(host_only, "c2cuda", "no-device-code", "saxpy")
    no_c_linkage = C2CUDA.replace('extern "C" ', "")
    assert_rejects(no_c_linkage, "c2cuda", "missing-entry-point", "void saxpy(")
    renamed = C2CUDA.replace('void saxpy(', 'void my_saxpy(')
    assert_rejects(renamed, "c2cuda", "missing-entry-point", "#include")  # nothing to point at: line 1
    wrong_arity = C2CUDA.replace("float a, const float* x, float* y) {\n    saxpy_kernel",
                                 "float a, const float* x) {\n    float* y = 0; saxpy_kernel")
    assert_rejects(wrong_arity, "c2cuda", "missing-entry-point", 'extern "C"')
    # C linkage given by an earlier declaration counts
    declared = 'extern "C" void saxpy(int, float, const float*, float*);\n' + no_c_linkage
    assert_passes(declared, "c2cuda")
    light = next(i.code for i in RELU.implementations if i.format == "light")
    assert_rejects(light.replace("int launch(", "int run("), "light", "missing-entry-point", "#include <cstdint>")


def test_symbol_aliases_and_digraphs():
    assert_rejects(c2cuda(top='static int run(const char*) __attribute__((weakref("system")));\n'), "c2cuda",
                   "symbol-alias", "weakref")
    assert_rejects(c2cuda(top='extern "C" int run(const char*) __asm__("system");\n'), "c2cuda",
                   "inline-asm-host", "__asm__")
    assert_rejects(c2cuda(top="%:define LAUNCH 1\n"), "c2cuda", "digraph", "%:define")
    assert_rejects(c2cuda('__libc_system("id");'), "c2cuda", "process-or-file-or-network", "__libc_system")


def test_light_side_stream_and_macro_hiding():
    light = next(i.code for i in RELU.implementations if i.format == "light")
    hidden = "#define MAKE_STREAM cudaStreamCreate\n" + light
    assert_rejects(hidden, "light", "side-stream", "#define MAKE_STREAM")
    pasted = "#define CAT(a, b) a##b\n" + light
    assert_rejects(pasted, "light", "token-paste", "#define CAT")
    spliced = light.replace("return (int)cudaGetLastError();",
                            "cudaStream_t s; cudaStream\\\nCreate(&s); return 0;")
    assert_rejects(spliced, "light", "side-stream", "cudaStream\\")
    assert_rejects("#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1\n" + light, "light", "side-stream", "PER_THREAD")


# --- comments and strings never trigger a rule ------------------------------------------------
def test_comments_and_strings_pass():
    body = """\
        // no std::thread here, no cudaStreamCreate, no fopen("x"), no cudaEventRecord, no __half
        /* system("rm -rf /"); #include <fstream>  __attribute__((constructor)) asm("nop") */
        const char* note = "cudaStreamCreate std::thread fopen getenv cudaIpcGetMemHandle __half";
        const char* raw = R"(cudaDeviceReset(); pthread_create)";
        (void)note; (void)raw;
        """
    assert_passes(c2cuda(body), "c2cuda")
    # a method that happens to be called open is not open(2)
    assert_passes(c2cuda(top="struct Gate { __host__ bool open() const { return true; } };\n",
                         body="Gate g; (void)g.open();"), "c2cuda")
    assert_passes(kb(cuda="// no cudaStreamCreate, no std::thread, no at::matmul here\n"), "kernelbench")
    assert_passes(kb(forward="# torch.matmul(x, w) and x @ w would be rejected; Model is the reference\n"),
                  "kernelbench")
    assert_passes(kb(top='"""Uses no torch.matmul, no gc, no sys.modules, no try/except."""\n'), "kernelbench")


# --- kernelbench (Python) rules ---------------------------------------------------------------
def test_syntax_error():
    assert_rejects(kb(forward="return (x\n"), "kernelbench", "syntax", "return (x")


def test_no_modelnew_and_subclassing():
    assert_rejects(KB.replace("class ModelNew", "class Replacement"), "kernelbench", "no-modelnew", "import torch")
    sub = KB.replace("class ModelNew(nn.Module):", "class ModelNew(Model):")
    assert_rejects(sub, "kernelbench", "subclass-reference", "class ModelNew(Model)")
    assert_rejects(sub, "kernelbench", "reference-use", "class ModelNew(Model)")


FORWARD_RULES = [
    ("reference-use", "return Model()(x)", "Model()"),
    ("introspection", "import gc\nref = [o for o in gc.get_objects() if isinstance(o, torch.Tensor)]", "gc.get_objects"),
    ("introspection", "import sys\nref = sys.modules['__main__']", "sys.modules"),
    ("introspection", "cls = self.__class__.__mro__", "__mro__"),
    ("introspection", "name = 'wei' + 'ght'\nw = getattr(self, name)", "getattr"),
    ("introspection", "y = eval('x')", "eval"),
    ("try-fallback", "try:\n    return relu_ext.relu_cuda(x)\nexcept Exception:\n    return Model()(x)", "try:"),
    ("torch-compute-in-forward", "return torch.matmul(x, x)", "torch.matmul"),
    ("torch-compute-in-forward", "w = x.t()\nreturn x @ w", "x @ w"),
    ("torch-compute-in-forward", "return x.relu()", "x.relu()"),
    ("torch-compute-in-forward", "import torch.nn.functional as F\nreturn F.relu(x)", "F.relu"),
    ("torch-compute-in-forward", "mm = torch.mm\nreturn mm(x, x)", "mm(x, x)"),
    ("torch-compute-in-forward", "return x.to(torch.float64)", ".to(torch"),
    ("side-stream", "s = torch.cuda.Stream()", "torch.cuda.Stream"),
    ("threads", "import threading\nthreading.Thread(target=print).start()", "import threading"),
    ("timing-tamper", "torch.cuda.synchronize = lambda: None", "synchronize ="),
    ("timing-tamper", "e = torch.cuda.Event(enable_timing=True)", "torch.cuda.Event"),
    ("precision-downgrade", "return relu_ext.relu_cuda(x.half()).float()", ".half()"),
    ("tensor-subclass", "return x.as_subclass(torch.Tensor)", "as_subclass"),
]


@pytest.mark.parametrize("rule,forward,needle", FORWARD_RULES)
def test_python_rules_in_forward(rule, forward, needle):
    assert_rejects(kb(forward=forward), "kernelbench", rule, needle)


def test_torch_submodule_call():
    code = kb(init="self.linear = nn.Linear(16, 16)\n", forward="x = self.linear(x)\n")
    assert_rejects(code, "kernelbench", "torch-compute-in-forward", "self.linear(x)")
    # a parameter made with nn.Parameter, and weights read from an nn module, are fine
    ok = kb(init="self.w = nn.Parameter(torch.randn(4))\nself.lin = nn.Linear(4, 4)\n",
            forward="w = self.lin.weight\nb = self.w.contiguous()\n")
    assert_passes(ok, "kernelbench")


MODULE_LEVEL_RULES = [
    ("import os\n", "process-or-file-or-network", "import os"),
    ("import numpy as np\n", "forbidden-import", "import numpy"),
    ("import time\ntime.perf_counter = lambda: 0.0\n", "timing-tamper", "time.perf_counter ="),
    ("import torch\nsetattr(torch.cuda, 'synchronize', print)\n", "timing-tamper", "setattr"),
    ("from torch.utils.cpp_extension import load\n", "dynamic-build", "import load"),
    ("import torch\nx = torch._C\n", "introspection", "torch._C"),
]


@pytest.mark.parametrize("top,rule,needle", MODULE_LEVEL_RULES)
def test_python_rules_at_module_level(top, rule, needle):
    assert_rejects(kb(top=top), "kernelbench", rule, needle)


def test_dynamic_load_inline_sources():
    built = KB.replace('cpp_source = "torch::Tensor relu_cuda(torch::Tensor x);"',
                       'cpp_source = "torch::Tensor relu_cuda(torch::Tensor x);".replace("relu", "relu")')
    assert_rejects(built, "kernelbench", "dynamic-build", "cpp_source = ")  # points at the computed value
    fn = KB.replace("cuda_sources=cuda_source", "cuda_sources=open('k.cu').read()")
    assert_rejects(fn, "kernelbench", "dynamic-build", "relu_ext = load_inline")
    twice = KB.replace('cpp_source = "', 'cpp_source = ""\ncpp_source = "')
    assert_rejects(twice, "kernelbench", "dynamic-build", "relu_ext = load_inline")
    flags = KB.replace('functions=["relu_cuda"]', 'functions=["relu_cuda"], extra_cuda_cflags=["-Xcompiler", "-fopenmp"]')
    assert_rejects(flags, "kernelbench", "compile-flags", "relu_ext = load_inline")
    ldflags = KB.replace('functions=["relu_cuda"]', 'functions=["relu_cuda"], extra_ldflags=["-lcuda"]')
    assert_rejects(ldflags, "kernelbench", "dynamic-build", "relu_ext = load_inline")
    alias = kb(forward="build = load_inline\n")
    assert_rejects(alias, "kernelbench", "dynamic-build", "build = load_inline")
    with pytest.raises(ValueError):
        extract_load_inline(fn)


def test_constant_sources_extract():
    code = KB.replace('cuda_sources=cuda_source', 'cuda_sources=[cuda_source + "\\n// tail\\n", f"// part two\\n"]')
    assert_passes(code, "kernelbench")
    (build,) = extract_load_inline(code)
    assert build["name"] == "relu_ext" and build["functions"] == ["relu_cuda"]
    assert build["cpp_sources"] == ["torch::Tensor relu_cuda(torch::Tensor x);"]
    assert build["cuda_sources"][0].endswith("// tail\n") and build["cuda_sources"][1] == "// part two\n"
    assert build["extra_cflags"] == [] and build["line"] == line_of(code, "relu_ext = load_inline")


LOAD_INLINE_CPP_RULES = [
    ("side-stream", "auto s = at::cuda::getStreamFromPool();\n", "getStreamFromPool"),
    ("threads", "std::thread t([] {}); t.join();\n", "std::thread"),
    ("timing-tamper", "cudaEvent_t e; cudaEventCreate(&e);\n", "cudaEventCreate"),
    ("torch-compute-in-forward", "return torch::relu(x);\n", "torch::relu"),
    ("torch-compute-in-forward", "return x.clamp_min(0).sum();\n", ".sum()"),
    ("process-or-file-or-network", 'FILE* f = fopen("/proc/self/maps", "r");\n', "fopen"),
    ("introspection", 'pybind11::module_::import("os");\n', "module_::import"),
]


def test_cuda_rules_inside_load_inline_map_lines_back():
    for rule, cuda, needle in LOAD_INLINE_CPP_RULES:
        code = kb(cuda=cuda)
        assert_rejects(code, "kernelbench", rule, needle)
    assert cuda_sources_of(Candidate(task_id=SAXPY.id, code=C2CUDA, format="c2cuda")) == [(C2CUDA, 0)]
    sources = cuda_sources_of(Candidate(task_id=RELU.id, code=KB, format="kernelbench"))
    text, offset = next(s for s in sources if "__global__" in s[0])
    assert offset + text.splitlines().index("__global__ void relu_kernel(const float* x, float* y, int64_t n) {") + 1 \
        == line_of(KB, "__global__ void relu_kernel")


def test_kernelbench_without_kernel():
    code = KB.replace("__global__ void relu_kernel", "__device__ void relu_kernel")
    assert_rejects(code, "kernelbench", "no-device-code", "relu_ext = load_inline")
    no_ext = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
    assert_rejects(no_ext, "kernelbench", "no-device-code", "import torch.nn")


KERNELBENCH_EXAMPLE = """\
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

elementwise_add_source = \"\"\"
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void elementwise_add_kernel(const float* a, const float* b, float* out, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        out[idx] = a[idx] + b[idx];
    }
}

torch::Tensor elementwise_add_cuda(torch::Tensor a, torch::Tensor b) {
    auto size = a.numel();
    auto out = torch::zeros_like(a);

    const int block_size = 256;
    const int num_blocks = (size + block_size - 1) / block_size;

    elementwise_add_kernel<<<num_blocks, block_size>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), size);

    return out;
}
\"\"\"

elementwise_add_cpp_source = (
    "torch::Tensor elementwise_add_cuda(torch::Tensor a, torch::Tensor b);"
)

# Compile the inline CUDA code for element-wise addition
elementwise_add = load_inline(
    name="elementwise_add",
    cpp_sources=elementwise_add_cpp_source,
    cuda_sources=elementwise_add_source,
    functions=["elementwise_add_cuda"],
    verbose=True,
    extra_cflags=[""],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.elementwise_add = elementwise_add

    def forward(self, a, b):
        return self.elementwise_add.elementwise_add_cuda(a, b)
"""


def test_kernelbench_published_example_passes():
    """KernelBench's own example answer (with its extra_cflags=[""], extra_ldflags=[""]) runs unchanged."""
    assert_passes(KERNELBENCH_EXAMPLE, "kernelbench", TASKS["torch2cuda/relu"])
    (build,) = extract_load_inline(KERNELBENCH_EXAMPLE)
    assert build["extra_cflags"] == [] and build["functions"] == ["elementwise_add_cuda"]
