"""Gate profiles (eval.gate_profile): KernelBench-style answers, written the way LLMs write them
(tests/data/kernelbench_styles/), pass under 'kernelbench'; under 'strict' the ones that leave compute to
torch or link cuBLAS are rejected and the harmless-header and helper ones pass; hacks written in the same
styles, and every hole probe of the gate's other tests, are rejected under both.

Run: .venv/bin/pytest tests/evaluation/test_gate_profiles.py -q   (CPU; the artefact checks need nvcc and
are skipped without it, like tests/evaluation/test_artifact.py; about ten seconds with it)
"""
from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the gate's own test helpers (tests/test_gate.py)

from bad_candidates import BAD, GATE  # noqa: E402
from test_gate import (FORWARD_RULES, LOAD_INLINE_CPP_RULES, MODULE_LEVEL_RULES, RELU, SAXPY,  # noqa: E402
                       assert_passes, assert_rejects, c2cuda, gate, kb)
from test_gate_holes import DISPATCH_STATE_CPP, RE_EXPORTS, STREAMS_AND_PRIVATE  # noqa: E402

from pipeline.evaluation.child import torch_guard  # noqa: E402
from pipeline.evaluation.gate import PROFILES, gate_profile  # noqa: E402
from pipeline.core.records import Candidate  # noqa: E402

STYLES = Path(__file__).resolve().parents[1] / "data" / "kernelbench_styles"
BOTH = ["strict", "kernelbench"]


def style(name: str) -> str:
    return (STYLES / f"{name}.py").read_text()


def errors(code: str, profile: str, fmt: str = "kernelbench") -> list:
    return [f for f in gate(code, fmt, profile=profile) if f.severity == "error"]


# --- KernelBench-style answers ------------------------------------------------------------------
# name -> the rules strict rejects it with (empty: it passes strict too)
STRICT_VERDICTS = {
    "conv_bias_relu": {"torch-compute-in-forward"},          # self.conv(x): an nn.Conv2d computes in forward
    "torch_reduction_tail": {"torch-compute-in-forward"},    # torch.mean / .sum / C++ .mean() for the rest
    "cublas_sgemm": {"forbidden-include", "dynamic-build"},  # <cublas_v2.h>, -lcublas, extra_include_paths
    "cublas_only": {"forbidden-include", "dynamic-build"},  # the same, and no kernel of its own
    "numpy_shapes": {"forbidden-import"},                    # numpy: host compute outside the kernels
    "vector_return": set(),                                  # std::vector<torch::Tensor>, <vector>, ATen/ATen.h
    "multi_kernel": set(),                                   # several kernels in one extension, --restrict
    "cuda_h_constants": set(),                               # <cuda.h>, <math_constants.h>, <limits>
    "nn_init_helpers": set(),                                # nn.init._calculate_fan_in_and_fan_out in __init__
}


def test_every_style_file_has_a_verdict():
    assert sorted(p.stem for p in STYLES.glob("*.py")) == sorted(STRICT_VERDICTS)


@pytest.mark.parametrize("name", sorted(STRICT_VERDICTS))
def test_kernelbench_styles_pass_the_kernelbench_profile(name):
    assert not errors(style(name), "kernelbench"), [f.message for f in errors(style(name), "kernelbench")]


@pytest.mark.parametrize("name", sorted(STRICT_VERDICTS))
def test_kernelbench_styles_under_strict(name):
    found = errors(style(name), "strict")
    assert {f.rule for f in found} == STRICT_VERDICTS[name], [f.message for f in found]
    assert all(f"[{f.rule}]" in f.message and f"line {f.line}:" in f.message for f in found)


def test_the_kernelbench_profile_is_not_a_blanket_pass_for_build_options():
    code, call = style("cublas_sgemm"), "linear_ext = load_inline"
    for old, new, rule, needle in [
            ('extra_ldflags=["-lcublas"]', 'extra_ldflags=["-lcuda"]', "compile-flags", call),
            ('extra_ldflags=["-lcublas"]', 'extra_ldflags=["-Wl,--wrap=cudaLaunchKernel"]', "compile-flags", call),
            ('"-O3", "--restrict"', '"-O3", "-Xcompiler", "-fopenmp"', "compile-flags", call),
            ('"/usr/local/cuda/include"', '"/etc"', "forbidden-include", call),
            ('"/usr/local/cuda/include"', '"/usr/local/cuda/include/../../../etc"', "forbidden-include", call),
            ('"/usr/local/cuda/include"', '"../../secrets"', "forbidden-include", call),
            ("#include <cublas_v2.h>", "#include <cudnn.h>", "forbidden-include", "<cudnn.h>")]:
        changed = code.replace(old, new)
        assert changed != code
        assert_rejects(changed, "kernelbench", rule, needle, profile="kernelbench")
    ok = code.replace('"/usr/local/cuda/include"', '"/usr/local/cuda-13.0/targets/x86_64-linux/include", "include", '
                      '"/opt/conda/lib/python3.11/site-packages/torch/include/torch/csrc/api/include"')
    assert_passes(ok, "kernelbench", profile="kernelbench")


def test_cublas_is_for_the_kernelbench_format_only():
    """c2cuda and light builds have a fixed link line: the profile changes nothing for them."""
    code = c2cuda(top="#include <cublas_v2.h>\n")
    for profile in BOTH:
        assert_rejects(code, "c2cuda", "forbidden-include", "cublas_v2.h", profile=profile)


# --- hacks in the same styles, rejected under both profiles ---------------------------------------
CONV, CUBLAS = style("conv_bias_relu"), style("cublas_sgemm")


def conv_forward(code: str) -> str:
    """The conv answer with `code` as the body of forward."""
    body = "        return self.bias_relu.bias_relu_cuda(x, self.bias.view(-1))\n"
    return CONV.replace(body, textwrap.indent(textwrap.dedent(code), " " * 8))


def conv_init(code: str) -> str:
    end = "        self.bias_relu = bias_relu\n"
    return CONV.replace(end, end + textwrap.indent(textwrap.dedent(code), " " * 8))


def conv_top(code: str) -> str:
    return CONV.replace("class ModelNew", f"{code}\n\nclass ModelNew")


def cublas_host(code: str) -> str:
    """The cuBLAS answer with `code` in its host function, before the GEMM."""
    return CUBLAS.replace("    cublasSetStream(handle", f"    {code}\n    cublasSetStream(handle")


RELU_CALL = "self.bias_relu.bias_relu_cuda"
HACKS = [
    ("thread-start", conv_init("import threading\nthreading.Thread(target=print).start()\n"), "threads",
     "import threading"),
    ("side-stream", conv_forward(f"stream = torch.cuda.Stream()\nwith torch.cuda.stream(stream):\n"
                                 f"    return {RELU_CALL}(x, self.bias.view(-1))\n"),
     "side-stream", "torch.cuda.Stream()"),
    ("patched-synchronize", conv_top("torch.cuda.synchronize = lambda *a, **k: None\n"), "timing-tamper",
     "torch.cuda.synchronize ="),
    ("patched-time", conv_top("import time\ntime.perf_counter = lambda: 0.0\n"), "timing-tamper", "import time"),
    ("try-fallback", conv_forward(f"try:\n    return {RELU_CALL}(x, self.bias.view(-1))\n"
                                  f"except RuntimeError:\n    return torch.relu(x + self.bias)\n"),
     "try-fallback", "try:"),
    ("reference-by-gc", conv_forward("import gc\n"
                                     "ref = next(o for o in gc.get_objects() if type(o).__name__ == 'Model')\n"
                                     "return ref(x)\n"), "introspection", "import gc"),
    ("reference-by-inspect", conv_forward("import inspect\nref = inspect.currentframe().f_back.f_locals['model']\n"
                                          "return ref(x)\n"), "introspection", "import inspect"),
    ("reference-by-sys-modules", conv_forward("import sys\nreturn sys.modules['__main__'].Model()(x)\n"),
     "introspection", "import sys"),
    ("reference-by-name", conv_forward("return Model(3, 16, 3, (16, 1, 1)).cuda()(x)\n"), "reference-use", "Model("),
    ("half-downgrade", conv_forward(f"return {RELU_CALL}(x.half(), self.bias.view(-1)).float()\n"),
     "precision-downgrade", ".half()"),
    ("half-by-getattr", conv_forward(f"return {RELU_CALL}(getattr(x, 'half')(), self.bias.view(-1)).float()\n"),
     "precision-downgrade", "getattr(x, 'half')"),
    ("empty-cache", conv_forward(f"torch.cuda.empty_cache()\nreturn {RELU_CALL}(x, self.bias.view(-1))\n"),
     "torch-state", "empty_cache"),
    ("fp16-dtype", conv_forward(f"return {RELU_CALL}(x.to(torch.float16), self.bias)\n"), "precision-downgrade",
     "torch.float16"),
    ("autocast", conv_forward("with torch.autocast('cuda'):\n    return self.conv(x)\n"), "precision-downgrade",
     "autocast"),
    ("tf32-matmul", conv_top("torch.set_float32_matmul_precision('high')\n"), "torch-state",
     "set_float32_matmul_precision"),
    ("getattr-passed-on", conv_forward("g = getattr\nreturn g(x, '__cl' + 'ass__')\n"), "introspection", "g = getattr"),
    ("cuda-event-timing", conv_forward("e = torch.cuda.Event(enable_timing=True)\nreturn self.conv(x)\n"),
     "timing-tamper", "torch.cuda.Event"),
    ("cublas-tf32", cublas_host("cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH);"), "precision-downgrade",
     "CUBLAS_TF32_TENSOR_OP_MATH"),
    ("cublas-fast-16f", cublas_host("cublasComputeType_t ct = CUBLAS_COMPUTE_32F_FAST_16F;"), "precision-downgrade",
     "CUBLAS_COMPUTE_32F_FAST_16F"),
    ("aten-tf32-switch", cublas_host("at::globalContext().setAllowTF32CuBLAS(true);"), "torch-state",
     "setAllowTF32CuBLAS"),
    ("pool-stream-for-cublas", CUBLAS.replace("cublasSetStream(handle, at::cuda::getCurrentCUDAStream())",
                                              "cublasSetStream(handle, at::cuda::getStreamFromPool())"),
     "side-stream", "getStreamFromPool"),
    ("driver-context", cublas_host("CUcontext ctx; cuCtxCreate(&ctx, 0, 0);").replace(
        "#include <cublas_v2.h>", "#include <cublas_v2.h>\n#include <cuda.h>"), "driver-api", "cuCtxCreate"),
    ("host-thread-cpp", cublas_host("std::thread([] {}).detach();"), "threads", "std::thread"),
    ("torch-save-cpp", cublas_host('torch::save(x, "x.pt");'), "process-or-file-or-network", "torch::save"),
    ("torchscript-cpp", cublas_host('auto m = torch::jit::load("m.pt");'), "process-or-file-or-network",
     "torch::jit::load"),
    ("aten-event-cpp", cublas_host("at::cuda::CUDAEvent ev;"), "timing-tamper", "CUDAEvent"),
    ("half-in-cpp", cublas_host("auto xh = x.half();"), "precision-downgrade", "x.half()"),
    ("scalar-type-half-cpp", cublas_host("auto xh = x.to(at::ScalarType::Half);"), "precision-downgrade",
     "ScalarType::Half"),
]


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize("name,code,rule,needle", HACKS, ids=[h[0] for h in HACKS])
def test_hacks_in_kernelbench_style_are_rejected_under_both(profile, name, code, rule, needle):
    assert_rejects(code, "kernelbench", rule, needle, task=RELU, profile=profile)


NUMPY = style("numpy_shapes")


@pytest.mark.parametrize("code,rule,needle", [
    ("a = np.zeros(1).ctypes._ctypes\n", "process-or-file-or-network", ".ctypes"),
    ("ref = np.load('/tmp/ref.npy', allow_pickle=True)\n", "process-or-file-or-network", "np.load"),
    ("np.save('out.npy', x.cpu().numpy())\n", "process-or-file-or-network", "np.save"),
    ("lib = np.ctypeslib\n", "process-or-file-or-network", "np.ctypeslib"),
    ("t = np.testing\n", "introspection", "np.testing"),
    ("y = np.float16(1.0)\n", "precision-downgrade", "np.float16"),
    ("s = np.lib.stride_tricks\n", "introspection", "np.lib"),
])
def test_numpy_under_the_kernelbench_profile_keeps_the_hack_rules(code, rule, needle):
    shape = "        n = int(np.prod(x.shape))\n"
    hacked = NUMPY.replace(shape, shape + " " * 8 + code)
    assert_rejects(hacked, "kernelbench", rule, needle, task=RELU, profile="kernelbench")


# --- the gate's other hole probes, under both profiles ------------------------------------------
# Exempt under kernelbench, because that profile allows exactly what they probe: torch compute in
# forward (torch-compute-in-forward probes, bad_candidates' torch_op_in_forward) and numpy imports.
def _not_torch_compute(rows):
    return [r for r in rows if r[0] != "torch-compute-in-forward"]


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize("where,code,rule,needle", RE_EXPORTS)
def test_re_export_probes_under_both(profile, where, code, rule, needle):
    assert_rejects(kb(**{where: code}), "kernelbench", rule, needle, profile=profile)


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize("code,rule,needle", STREAMS_AND_PRIVATE)
def test_stream_and_private_probes_under_both(profile, code, rule, needle):
    assert_rejects(kb(forward=code), "kernelbench", rule, needle, profile=profile)
    assert_rejects(kb(init=code), "kernelbench", rule, needle, profile=profile)


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize("cuda,needle", DISPATCH_STATE_CPP)
def test_dispatch_state_probes_under_both(profile, cuda, needle):
    assert_rejects(kb(cuda=cuda), "kernelbench", "dispatch-tamper", needle, profile=profile)


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize("rule,forward,needle", _not_torch_compute(FORWARD_RULES))
def test_forward_probes_under_both(profile, rule, forward, needle):
    assert_rejects(kb(forward=forward), "kernelbench", rule, needle, profile=profile)


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize("rule,cuda,needle", _not_torch_compute(LOAD_INLINE_CPP_RULES))
def test_extension_cpp_probes_under_both(profile, rule, cuda, needle):
    assert_rejects(kb(cuda=cuda), "kernelbench", rule, needle, profile=profile)


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize("top,rule,needle", [r for r in MODULE_LEVEL_RULES if "numpy" not in r[0]])
def test_module_level_probes_under_both(profile, top, rule, needle):
    assert_rejects(kb(top=top), "kernelbench", rule, needle, profile=profile)


GATE_HACKS = [b for b in BAD if b[5] == GATE and b[0] != "torch_op_in_forward"]


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize("name,task_id,fmt,code,verdicts,stage", GATE_HACKS, ids=[b[0] for b in GATE_HACKS])
def test_known_bad_gate_candidates_under_both(profile, name, task_id, fmt, code, verdicts, stage):
    task = SAXPY if fmt == "c2cuda" else RELU
    assert task.id == task_id
    assert [f for f in gate(code, fmt, task, profile) if f.severity == "error"], name


def test_the_exempt_probes_are_exactly_what_kernelbench_allows():
    """The probes left out above fail strict and pass kernelbench: that profile allows what they probe."""
    for rule, forward, needle in FORWARD_RULES:
        if rule == "torch-compute-in-forward":
            assert_rejects(kb(forward=forward), "kernelbench", rule, needle)
            assert not errors(kb(forward=forward), "kernelbench"), forward
    for rule, cuda, needle in LOAD_INLINE_CPP_RULES:
        if rule == "torch-compute-in-forward":
            assert_rejects(kb(cuda=cuda), "kernelbench", rule, needle)
            assert not errors(kb(cuda=cuda), "kernelbench"), cuda
    (torch_op,) = [b for b in BAD if b[0] == "torch_op_in_forward"]
    assert errors(torch_op[3], "strict") and not errors(torch_op[3], "kernelbench")
    assert_passes(kb(top="import numpy as np\n"), "kernelbench", profile="kernelbench")


# --- runtime: the child's torch-compute check follows the profile ---------------------------------
def test_runtime_check_allows_torch_compute_only_under_kernelbench():
    x = torch.randn(4, 4)
    strict_flags: list[str] = []
    with torch.no_grad(), torch_guard.NoTorchCompute(strict_flags, audit=True,
                                                     allow_compute=gate_profile("strict").torch_compute):
        with pytest.raises(RuntimeError, match="aten.mm"):
            torch.mm(x, x)
    assert strict_flags and strict_flags[0].startswith("torch-compute-in-forward")
    kb_flags: list[str] = []
    with torch.no_grad(), torch_guard.NoTorchCompute(kb_flags, audit=True,
                                                     allow_compute=gate_profile("kernelbench").torch_compute):
        y = torch.nn.functional.conv2d(x.view(1, 1, 4, 4), torch.ones(1, 1, 3, 3)).mean() + torch.mm(x, x).sum()
    assert kb_flags == [] and torch.isfinite(y)


class _PassThrough(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def test_runtime_dispatch_state_audit_still_runs_under_kernelbench():
    x = torch.randn(4)
    for make, what in ((torch._C._DisableTorchDispatch, "dispatch state"), (_PassThrough, "dispatch state")):
        flags: list[str] = []
        leaked = None
        try:
            with torch.no_grad(), torch_guard.NoTorchCompute(flags, allow_compute=True):
                leaked = make()  # made and entered in forward, never left (a C++ guard applies when made)
                leaked.__enter__()
                x.relu()
        finally:
            if leaked is not None:
                leaked.__exit__(None, None, None)
        assert any(what in f for f in flags), (what, flags)


def test_the_child_takes_the_profiles_runtime_rule_from_the_load_message(monkeypatch):
    """The evaluator sends the profile's torch_compute with `load` (the child never imports the gate);
    TorchRunner's runtime check of a checked call follows it, and refuses torch compute when it is absent."""
    from pipeline.evaluation.child.main import TorchRunner
    monkeypatch.setattr(torch_guard, "poison_allocator", lambda nbytes: None)  # CUDA only
    source = ("import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
              "    def forward(self, x):\n        return torch.relu(x)\n")
    for profile, raises in ((None, True), ("strict", True), ("kernelbench", False)):
        rule = {"torch_compute": gate_profile(profile).torch_compute} if profile else {}
        runner = TorchRunner({"source": source, "extensions": {}, "calls": []} | rule, [], [])
        x, out = torch.randn(3), torch.empty(3)
        runner.calls = [[(runner.model_cls(), [x], [out])]]
        if raises:
            with pytest.raises(RuntimeError, match="aten.relu"):
                runner.call(0)
        else:
            runner.call(0)
            assert not [f for f in runner.flags if f.startswith("torch-compute")], runner.flags


# --- the evaluator threads the profile through and keeps results apart --------------------------
def test_evaluator_gates_by_profile_and_caches_each_profile_apart(tmp_path, compile_cfg):
    from pipeline.core.config import EvalSection
    from pipeline.evaluation.evaluator import Evaluator
    from pipeline.evaluation.build.compile import CompileResult
    cand = Candidate(task_id=RELU.id, code=style("conv_bias_relu"), format="kernelbench")
    # as on a host without a CUDA build of torch, wherever this runs
    not_built = CompileResult(ok=False, unavailable=True, log="kernelbench-format candidates build only on a GPU host")
    verdicts, keys = {}, {}
    for profile in ("strict", "kernelbench", "strict"):
        cfg = EvalSection(result_cache_dir=str(tmp_path / "results"), gate_profile=profile)
        ev = Evaluator(cfg, compile_cfg, use_gpu=False)
        (r,) = ev.evaluate(RELU, [cand], [not_built])
        verdicts.setdefault(profile, []).append((r.verdict, r.cached))
        keys[profile] = ev._cache_key(RELU, cand)
    assert keys["strict"] != keys["kernelbench"]
    assert verdicts["strict"] == [("rejected", False), ("rejected", True)]
    assert verdicts["kernelbench"][0][0] == "unbuilt" and not verdicts["kernelbench"][0][1]  # passed the gate, unbuilt


def test_the_load_message_carries_the_profiles_runtime_rule(compile_cfg):
    from types import SimpleNamespace

    from pipeline.core.config import EvalSection
    from pipeline.evaluation.build.compile import CompileResult
    from pipeline.evaluation.evaluator import Evaluator
    sent = []
    child = SimpleNamespace(place=lambda p: p, request=lambda msg, timeout: sent.append(msg) or {"ok": True})
    for profile in BOTH:
        ev = Evaluator(EvalSection(result_cache_dir="", gate_profile=profile), compile_cfg, use_gpu=False)
        ev.load_into_child(child, SimpleNamespace(buffers=[], configs=[], arena_handles=[]), "kernelbench", CompileResult(ok=True),
                 "launch", "src")
    assert [m["torch_compute"] for m in sent] == [False, True]


def test_unknown_profile_is_one_clear_sentence():
    with pytest.raises(ValueError, match="unknown gate profile 'lenient'; use one of strict, kernelbench"):
        gate_profile("lenient")
    assert set(PROFILES) == {"strict", "kernelbench"}


def test_config_override_selects_the_profile():
    from pipeline.core.config import ConfigError, load_config
    assert load_config(None, []).eval.gate_profile == "strict"
    assert load_config(None, ["eval.gate_profile=kernelbench"]).eval.gate_profile == "kernelbench"
    with pytest.raises(ConfigError, match="gate_profile"):
        load_config(None, ["eval.gate_profile=lenient"])


# --- what was built (nvcc: preprocessed sources and, for c2cuda, the object's symbols) -------------
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")


def _built(code: str, fmt: str, profile: str, compile_cfg):
    from pipeline.evaluation.build import artifact
    from pipeline.evaluation.build.compile import CompileResult
    task = SAXPY if fmt == "c2cuda" else RELU
    return [f for f in artifact.check_built(Candidate(task_id=task.id, code=code, format=fmt), task,
                                            CompileResult(ok=True), compile_cfg, profile) if f.severity == "error"]


@pytest.mark.integration
@needs_nvcc
@pytest.mark.parametrize("profile", BOTH)
def test_built_check_passes_the_kernelbench_styles(profile, compile_cfg):
    """The artefact check of the kernelbench format (macro-expanded sources; the extension's symbols
    need a CUDA build of torch) agrees with the gate on every style the profile accepts."""
    for name, strict_rules in STRICT_VERDICTS.items():
        if profile == "kernelbench" or not strict_rules:
            found = _built(style(name), "kernelbench", profile, compile_cfg)
            assert not found, (name, [f.message for f in found])


@pytest.mark.integration
@needs_nvcc
def test_built_check_keeps_driver_calls_refused_with_cuda_h(compile_cfg):
    """<cuda.h> is allowed; a driver call it declares is still refused by name, and in the built object."""
    ok = c2cuda(top="#include <cuda.h>\n#include <math_constants.h>\n#include <vector>\n#include <limits>\n"
                    "__device__ float lowest() { return -CUDART_INF_F; }\n",
                body="std::vector<float> v(1, std::numeric_limits<float>::max()); (void)v;")
    assert_passes(ok, "c2cuda")
    assert not _built(ok, "c2cuda", "strict", compile_cfg)
    hidden = c2cuda(top="#include <cuda.h>\n#define PIN(p, n) cuMem##HostRegister(p, n, 0)\n", body="PIN(y, 4 * n);")
    assert "driver-api" in {f.rule for f in _built(hidden, "c2cuda", "strict", compile_cfg)}


@pytest.mark.parametrize("name", ["cuCtxCreate_v2", "cuStreamCreate", "cuLaunchHostFunc", "cuMemHostRegister_v2",
                                  "cuEventCreate", "cuGraphLaunch", "cuIpcGetMemHandle", "cuDevicePrimaryCtxRetain"])
def test_dangerous_driver_symbols_are_refused_in_extensions(name):
    from pipeline.evaluation.build.artifact import DENIED_IN_EXTENSION
    assert DENIED_IN_EXTENSION.fullmatch(name)
    assert not DENIED_IN_EXTENSION.fullmatch("cublasSgemm_v2") and not DENIED_IN_EXTENSION.fullmatch("cublasCreate_v2")


def test_an_answer_without_any_extension_is_still_refused_under_both():
    pure_torch = ("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, A, B):\n"
                  "        return torch.matmul(A, B)\n")
    for profile in BOTH:
        assert "no-device-code" in {f.rule for f in errors(pure_torch, profile)}
