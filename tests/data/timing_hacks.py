"""Candidates that attack the timing itself, run with the static gates switched off.

Each entry: (name, task id, format, code). The GPU tests evaluate them with the gate and the
artefact checks bypassed, so only the trusted clock, the checked timed batches and the sandbox
stand between them and a reward: each must end `rejected`/`incorrect`/`runtime_error`/`timeout`,
or be `correct` with no more than the honest kernel's speedup (its true time).
"""
from bad_candidates import kb, relu_light, saxpy

HONEST_SAXPY = saxpy("    if (i < n) y[i] = a * x[i] + y[i];\n")
HONEST_RELU_LIGHT = relu_light()
HONEST_RELU_KB = kb(name="relu_ext_honest_t")

_SAXPY_BODY = "    if (i < n) y[i] = a * x[i] + y[i];\n"


def _saxpy_launch(host: str) -> str:
    return ('}\nextern "C" void saxpy(int n, float a, const float* x, float* y) {\n' + host +
            '    k<<<(n + 255) / 256, 256>>>(n, a, x, y);\n}\n')


# Native code reaching the Python harness of its own process (the child runs it as __main__) through
# the interpreter's C API.
_PY_PATCH = '''extern "C" int PyRun_SimpleString(const char*);
extern "C" int PyGILState_Ensure(void);
extern "C" void PyGILState_Release(int);
__attribute__((constructor)) static void patch_harness() {{
    int g = PyGILState_Ensure();
    PyRun_SimpleString("{code}");
    PyGILState_Release(g);
}}
'''
_NO_SYNC = ("import pipeline.evaluation.gpu.driver as d; d.Driver.synchronize = lambda self: None")
_SKIP_TIMED = ("import sys; c = sys.modules['__main__']; "
               "c.NativeRunner.timed_call = lambda self, cfg, slot, start, end: (start(), end(), 0)[2]")

TIMING_HACKS = [
    # the harness's device-wide sync removed: "done" arrives while the kernels still run
    ("native_patches_sync_away", "torch2cuda/relu", "light",
     "#include <cstdint>\n" + _PY_PATCH.format(code=_NO_SYNC) + HONEST_RELU_LIGHT.replace("#include <cstdint>\n", "")),
    # the harness patched to skip every timed call (checked calls still compute)
    ("native_patches_timed_calls_away", "torch2cuda/relu", "light",
     "#include <cstdint>\n" + _PY_PATCH.format(code=_SKIP_TIMED) + HONEST_RELU_LIGHT.replace("#include <cstdint>\n", "")),
    # Python at module load rewrites the child's harness through torch's re-export of sys
    ("python_patches_harness", "torch2cuda/relu", "kernelbench", kb(
        name="relu_ext_patch_t",
        prefix="import torch\n_c = torch.sys.modules['__main__']\n"
               "_c.TorchRunner.timed_call = lambda self, cfg, slot, start, end: (start(), end(), 0)[2]\n"
               "_d = torch.sys.modules['pipeline.evaluation.gpu.driver']\n_d.Driver.synchronize = lambda self: None\n"
               "import time as _t\n_t.perf_counter = lambda: 0.0\n")),
    # memoised per input buffer: the first result for a pointer is returned again later
    ("python_memoises_per_pointer", "torch2cuda/relu", "kernelbench", kb(
        name="relu_ext_memo_t",
        prefix="_cache = {}\n",
        forward="        k = x.data_ptr()\n        if k not in _cache:\n            _cache[k] = ext.relu_cuda(x)\n"
                "        return _cache[k]")),
    # counts calls: computes for the first ones (the checks), skips the work later
    ("native_counts_calls", "c2cuda/saxpy", "c2cuda", saxpy(
        _SAXPY_BODY, launch=_saxpy_launch("    static int calls = 0;\n    if (++calls > 8) return;\n"))),
    # drifts: right for its first calls, wrong afterwards
    ("native_drifts", "c2cuda/saxpy", "c2cuda", saxpy(
        _SAXPY_BODY, launch=_saxpy_launch("    static int calls = 0;\n    if (++calls > 12) n = n / 2;\n"))),
    # behaves by shape: full work on the small checked sizes, half the work on timing sizes
    ("native_by_shape", "c2cuda/saxpy", "c2cuda", saxpy(
        _SAXPY_BODY, launch=_saxpy_launch("    if (n > 1000000) n = n - n / 4;\n"))),
    # memoised per pointer in native code (one result per x buffer)
    ("native_memoises_per_pointer", "c2cuda/saxpy", "c2cuda", saxpy(
        _SAXPY_BODY, launch='}\nstatic const float* seen[64]; static int nseen = 0;\n'
                            'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
                            '    for (int s = 0; s < nseen; ++s) if (seen[s] == x) return;\n'
                            '    if (nseen < 64) seen[nseen++] = x;\n'
                            '    k<<<(n + 255) / 256, 256>>>(n, a, x, y);\n}\n')),
    # leaves a kernel spinning after the call returns, with the sync removed
    ("native_leaves_work_running", "torch2cuda/relu", "light",
     "#include <cstdint>\n" + _PY_PATCH.format(code=_NO_SYNC) + HONEST_RELU_LIGHT.replace(
         "#include <cstdint>\n", "").replace(
         "    return 0;\n}", "    spin<<<1, 1, 0, stream>>>();\n    return 0;\n}").replace(
         "extern \"C\" int launch", "__global__ void spin() { long long t0 = clock64(); "
                                    "while (clock64() - t0 < 20000000LL) { } }\nextern \"C\" int launch")),
]

HONEST = {"torch2cuda/relu": {"light": HONEST_RELU_LIGHT, "kernelbench": HONEST_RELU_KB},
          "c2cuda/saxpy": {"c2cuda": HONEST_SAXPY}}
