"""The gate's check of what was built (artifact.py): macro-expanded rules, the object's symbols and its
load-time code. Needs nvcc (present on CPU machines and in CI); nothing built here runs."""
import shutil
import textwrap

import pytest

from pipeline.evaluation.build import artifact
from pipeline.evaluation.build.compile import CompileResult
from pipeline.evaluation.evaluator import Evaluator
from pipeline.core.records import Candidate

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")

SAXPY = """\
#include <cuda_runtime.h>
TOP
__global__ void saxpy_kernel(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" void saxpy(int n, float a, const float* x, float* y) {
    saxpy_kernel<<<(n + 255) / 256, 256>>>(n, a, x, y);
    BODY
}
"""


def saxpy(top: str = "", body: str = "") -> str:
    return SAXPY.replace("TOP", textwrap.dedent(top).strip("\n")).replace("BODY", body)


def built(builtin_tasks, compile_cfg, code: str, fmt: str = "c2cuda", task_id: str = "c2cuda/saxpy"):
    task = builtin_tasks[task_id]
    return artifact.check_built(Candidate(task_id=task.id, code=code, format=fmt), task, CompileResult(ok=True),
                                compile_cfg)


def rules_at(findings) -> set[tuple[str, int]]:
    return {(f.rule, f.line) for f in findings if f.severity == "error"}


@pytest.mark.parametrize("name,top,body,rule,line", [
    # an innocent declaration bound to system() by an asm label hidden in a macro
    ("asm-label-macro", '#define BIND(d) d __asm__("system")\nBIND(int run_tool(const char*));', 'run_tool("id");',
     "process-or-file-or-network", 2),
    # a weak reference to pthread_create spelled in a macro
    ("weakref-macro", '#define ALIAS(n) __attribute__((weakref(n)))\n'
                      'static int spawn(void*, void*, void* (*)(void*), void*) ALIAS("pthread_create");',
     "spawn(0, 0, 0, 0);", "threads", 3),
    # a constructor pointer placed in .init_array by a macro
    ("init-array-macro", 'static void early() {}\n#define PLACE(s) __attribute__((used, section(s)))\n'
                         'PLACE(".init_array") static void (*hook)() = early;', "", "load-time-code", 4),
])
@pytest.mark.integration
def test_hidden_by_macros_is_found_after_building(builtin_tasks, compile_cfg, name, top, body, rule, line):
    code = saxpy(top, body)
    from pipeline.evaluation.gate import check_candidate
    task = builtin_tasks["c2cuda/saxpy"]
    gated = check_candidate(Candidate(task_id=task.id, code=code, format="c2cuda"), task)
    # the gate refuses an asm keyword whose statement it cannot read whole; the check of what was built must find
    # each of these on its own all the same (the gate is a teacher, the built check the wall)
    assert not gated or name == "asm-label-macro", "the source gate sees it"
    found = built(builtin_tasks, compile_cfg, code)
    assert (rule, line) in rules_at(found), [f.message for f in found]
    assert all(f"line {f.line}:" in f.message and f"[{f.rule}]" in f.message for f in found)


def test_global_with_a_constructor_is_load_time_code(builtin_tasks, compile_cfg):
    code = saxpy("struct Warm { Warm() { cudaFree(0); } };\nstatic Warm warm;")
    assert "load-time-code" in {f.rule for f in built(builtin_tasks, compile_cfg, code)}


def test_unlisted_symbols_are_named(builtin_tasks, compile_cfg):
    code = saxpy('#include <cstdio>\nextern "C" int rename(const char*, const char*);', 'rename("a", "b");')
    found = built(builtin_tasks, compile_cfg, code)
    assert any("rename" in f.message for f in found), [f.message for f in found]


@pytest.mark.parametrize("name", ["system", "popen", "execve", "fork", "clone", "syscall", "socket", "connect", "dlopen",
                                  "dlsym", "PyRun_SimpleString", "Py_Initialize", "pthread_create", "openat64", "open",
                                  "fopen", "remove", "rename", "opendir", "cudaStreamCreate", "cudaStreamCreateWithFlags",
                                  "cudaLaunchHostFunc", "cudaEventCreate", "cudaEventCreateWithFlags", "cudaIpcGetMemHandle",
                                  "cudaGraphCreate", "cudaLaunchKernel_ptsz", "cuGetProcAddress"])
def test_refused_symbols(name):
    assert not artifact.symbol_allowed(name)


def test_runtime_launch_memory_and_libm_are_allowed():
    for name in ("cudaLaunchKernel", "cudaMalloc", "cudaMemsetAsync", "cudaGetLastError", "cudaFuncSetAttribute",
                 "cudaOccupancyMaxActiveBlocksPerMultiprocessor", "__cudaRegisterFunction", "expf", "sqrt", "memcpy",
                 "__cxa_guard_acquire", "_ZSt20__throw_length_errorPKc", "printf"):
        assert artifact.symbol_allowed(name), name


def test_own_lines_follow_markers_and_drop_headers():
    pre = ('# 0 "c.cu"\n# 1 "/usr/include/h.h" 1 3 4\nint from_header;\n# 2 "c.cu" 2\nint a;\n\nint b;\n'
           '# 9 "c.cu"\n__attribute__((global)) void k() {}\n')
    from pipeline.evaluation.build.compile import own_lines
    assert own_lines(pre, "c.cu") == [(2, "int a;"), (4, "int b;"), (9, "__global__ void k() {}")]


@pytest.mark.integration
def test_every_builtin_native_implementation_passes(builtin_tasks, compile_cfg):
    """The allow-lists were derived from these; a new built-in implementation that fails here needs a
    look at what it calls, not a wider list by reflex."""
    from concurrent.futures import ThreadPoolExecutor
    impls = [(t, i) for t in builtin_tasks.values() for i in t.implementations if i.format != "kernelbench"]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda ti: built(builtin_tasks, compile_cfg, ti[1].code, ti[1].format, ti[0].id), impls))
    failures = [f"{t.id}:{i.name}: {f.message}" for (t, i), found in zip(impls, results) for f in found
                if f.severity == "error"]
    assert len(impls) > 20 and not failures, failures


@pytest.mark.integration
def test_evaluator_rejects_after_compiling(eval_cfg, compile_cfg, builtin_tasks):
    task = builtin_tasks["c2cuda/saxpy"]
    code = saxpy('#define ALIAS(n) __attribute__((weakref(n)))\n'
                 'static int spawn(void*, void*, void* (*)(void*), void*) ALIAS("pthread_create");', "spawn(0, 0, 0, 0);")
    r = Evaluator(eval_cfg, compile_cfg, use_gpu=False).evaluate(task, [Candidate(task_id=task.id, code=code,
                                                                                  format="c2cuda")])[0]
    assert r.verdict == "rejected" and "threads" in r.flags, (r.verdict, r.reason)  # seen only once built
    assert "line 3:" in r.reason and "compile" in r.stage_s
    assert any("pthread_create" in f.message for f in r.findings if f.rule == "threads")


HD_SYSCALL = """\
__host__ __device__ inline long sys1(long nr) {
#ifndef __CUDA_ARCH__
    long r;
    asm volatile("syscall" : "=a"(r) : "a"(nr) : "rcx", "r11", "memory");
    return r;
#else
    return 0;
#endif
}
"""


@pytest.mark.integration
def test_system_call_instructions_in_the_host_code_are_refused(builtin_tasks, compile_cfg, tmp_path):
    """Defence in depth behind the gate's inline-asm-host rule: the object's host code is disassembled."""
    from pipeline.evaluation.gate import gate_profile
    code = saxpy(HD_SYSCALL, "sys1(39);")
    assert artifact.build_object(code, compile_cfg, str(tmp_path)) == ""
    found = artifact.object_findings(code, str(tmp_path / "candidate.o"), str(tmp_path), "c2cuda", True,
                                     gate_profile("strict"))
    hits = [f for f in found if f.rule == "process-or-file-or-network" and "syscall" in f.message]
    assert hits and all("[process-or-file-or-network]" in f.message for f in hits), [f.message for f in found]
    clean = saxpy()
    assert artifact.build_object(clean, compile_cfg, str(tmp_path)) == ""
    assert not artifact.syscall_findings(clean, str(tmp_path / "candidate.o"), str(tmp_path))


def test_ptx_downgrade_built_by_a_function_like_macro_is_found_after_expansion(builtin_tasks, compile_cfg):
    top = ('#define CVT(t) "cvt.rn." t ".f32 %0, %1;"\n'
           '__device__ float lowp(float v) { unsigned short h; asm(CVT("f16") : "=h"(h) : "f"(v)); return v; }')
    assert ("precision-downgrade", 3) in rules_at(built(builtin_tasks, compile_cfg, saxpy(top)))


@pytest.mark.parametrize("name,refused", [
    ("at::launch", True), ("at::intraop_launch", True), ("at::internal::invoke_parallel", True),
    ("c10::ThreadPool::run", True), ("at::set_num_threads", True), ("std::thread::_M_start_thread", True),
    ("GOMP_parallel", True),
    ("at::empty", False), ("at::_ops::relu::call", False), ("c10::cuda::getCurrentCUDAStream", False),
    ("std::this_thread::yield", False)])
def test_torch_thread_pools_are_refused_in_extensions(name, refused):
    assert bool(artifact.THREADS_IN_EXTENSION.fullmatch(name)) == refused


def test_the_compile_keeps_both_preprocessing_passes_and_the_check_reads_each(builtin_tasks, compile_cfg):
    """One nvcc -c leaves the device pass (__CUDA_ARCH__ defined, what `nvcc -E` gives) and the host pass; the
    artefact check scans both, so a macro hidden behind either branch is seen without preprocessing again."""
    from pipeline.evaluation.build.compile import Compiler
    top = ('#define CVT(t) "cvt.rn." t ".f32 %0, %1;"\n'
           '#ifdef __CUDA_ARCH__\nstatic int device_pass_only;\n#else\n'
           '__device__ float lowp(float v) { unsigned short h; asm(CVT("f16") : "=h"(h) : "f"(v)); return v; }\n'
           '#endif')
    task = builtin_tasks["c2cuda/saxpy"]
    cand = Candidate(task_id=task.id, code=saxpy(top), format="c2cuda")
    comp = Compiler(compile_cfg).compile(cand, task)
    assert comp.ok, comp.log
    device, host = (" ".join(t for _, t in comp.expanded[p]) for p in ("device", "host"))
    assert "device_pass_only" in device and "device_pass_only" not in host
    assert "\"cvt.rn.\" \"f16\"" in host and "cvt.rn." not in device
    found = artifact.check_built(cand, task, comp, compile_cfg)
    assert ("precision-downgrade", 6) in rules_at(found), [f.message for f in found]
