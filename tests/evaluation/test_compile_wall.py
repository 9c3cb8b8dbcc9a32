"""The compile step from the attacker's side: it builds what it is given and runs none of it, every string that
becomes source is gated, and one CPU budget bounds all builds of a candidate."""
from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from pipeline.core.config import CompileSection, TrustedLimits
from pipeline.evaluation import bounded
from pipeline.evaluation.build import artifact
from pipeline.evaluation.build.compile import Compiler, CompileResult
from pipeline.evaluation.build.tool_run import CompileBudget
from pipeline.evaluation.gate import check_candidate
from pipeline.core.records import Candidate

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

# a static constructor that leaves a mark wherever it runs: in the compile step it would run with no seccomp filter
CONSTRUCTOR = r'''
#include <cstdio>
static int mark = [] {
    FILE* f = std::fopen("CONSTRUCTOR_RAN", "w");
    if (f) { std::fputs("ran", f); std::fclose(f); }
    return 1;
}();
int twice(int x) { return 2 * x + mark - 1; }
'''


@pytest.mark.integration
def test_a_built_extension_is_not_imported_in_the_compile_step(tmp_path):
    """torch's load_inline imports what it builds; the build step must stop at the linked library."""
    pytest.importorskip("torch.utils.cpp_extension")
    compiler = Compiler(CompileSection(cache_dir=str(tmp_path / "cache")))
    scratch = tempfile.mkdtemp(prefix="cudaperf-compile-test-")
    try:
        builds = [{"name": "wall_probe", "cpp_sources": [CONSTRUCTOR], "cuda_sources": [], "functions": ["twice"],
                   "extra_cflags": [], "extra_cuda_cflags": [], "extra_ldflags": [], "extra_include_paths": []}]
        result = compiler._build_extensions(builds, scratch)
        assert result.ok, result.log
        so = Path(result.extensions["wall_probe"])
        assert so.is_file() and so.suffix == ".so"
        marks = list(Path(scratch).rglob("CONSTRUCTOR_RAN"))
        assert not marks, f"the extension's constructor ran in the compile step: {marks}"
        assert result.cpu_s > 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _kb(functions: str) -> Candidate:
    code = f'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
cuda_src = """
__global__ void k(float* x) {{ x[threadIdx.x] *= 2.0f; }}
torch::Tensor twice(torch::Tensor x) {{ k<<<1, 32>>>(x.data_ptr<float>()); return x; }}
"""
cpp_src = "torch::Tensor twice(torch::Tensor x);"
ext = load_inline(name="ext", cpp_sources=cpp_src, cuda_sources=cuda_src, functions={functions})
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.twice(x)
'''
    return Candidate(task_id="t", code=code, format="kernelbench")


def test_function_names_that_would_inject_cpp_are_refused(builtin_tasks):
    task = builtin_tasks["torch2cuda/relu"]
    clean = check_candidate(_kb('["twice"]'), task, profile="kernelbench")
    assert not any(f.rule == "dynamic-build" for f in clean), clean
    injected = '[\'twice", twice); } static int x = system("id"); void f() { //\']'
    findings = check_candidate(_kb(injected), task, profile="kernelbench")
    assert any(f.rule == "dynamic-build" and "function name" in f.message for f in findings), findings


@pytest.mark.parametrize("probe", ['#if __has_include("/etc/shadow")\n#define K k_shadow\n#else\n#define K k_none\n#endif',
                                   '#if defined(__has_include_next)\n#endif'])
def test_has_include_cannot_turn_files_into_kernel_names(probe, builtin_tasks):
    code = probe + '\nextern "C" __global__ void k(float* x) { x[0] = 1; }\n'
    task = builtin_tasks["c2cuda/saxpy"]
    findings = check_candidate(Candidate(task_id="t", code=code, format="light"), task)
    assert any(f.rule == "forbidden-include" and "__has_include" in f.message for f in findings), findings


EXPLOSION = "\n".join(["#define X0 a = a * 1.0001f + 1.0f;"] + [f"#define X{i} X{i-1} X{i-1}" for i in range(1, 23)]) + r'''
extern "C" __global__ void k(float* x) { float a = x[0]; X22 x[0] = a; }
'''


@pytest.mark.integration
@needs_nvcc
def test_a_source_that_explodes_in_the_compiler_is_stopped_by_its_budget(tmp_path, builtin_tasks):
    compiler = Compiler(CompileSection(cache_dir=str(tmp_path), cpu_budget_s=3.0))
    t0 = time.monotonic()
    task = builtin_tasks["c2cuda/saxpy"]
    result = compiler.compile(Candidate(task_id=task.id, code=EXPLOSION, format="light"), task)
    wall = time.monotonic() - t0
    assert not result.ok and "compile.cpu_budget_s" in result.log and "3 s" in result.log, result.log
    assert wall < 30, wall
    assert 2.5 < result.cpu_s < 10, result.cpu_s


@needs_nvcc
def test_one_budget_covers_every_build_of_a_candidate(tmp_path, builtin_tasks):
    """The artefact check's own nvcc -E and nvcc -c (for a result without the compile's object and expansions)
    are charged to the budget the compile left; with them, the check builds nothing and charges nothing."""
    cfg = CompileSection(cache_dir=str(tmp_path))
    code = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1; }\n'
    task = builtin_tasks["c2cuda/saxpy"]
    cand = Candidate(task_id=task.id, code=code, format="light")
    budget = CompileBudget.of("light", cfg)
    comp = Compiler(cfg).compile(cand, task, budget)
    assert comp.ok and comp.cpu_s > 0 and budget.left == pytest.approx(cfg.cpu_budget_s - comp.cpu_s)
    spent = CompileBudget(1.0)
    spent.charge(1.0)
    assert comp.object and set(comp.expanded) == {"device", "host"}
    assert artifact.check_built(cand, task, comp, cfg, "strict", spent) == []  # reads what the compile kept
    bare = comp.model_copy(update={"object": "", "expanded": {}})
    with pytest.raises(artifact.BudgetSpent, match="CPU budget"):
        artifact.check_built(cand, task, bare, cfg, "kernelbench", spent)  # a profile not cached yet
    again = Compiler(cfg).compile(cand, task, CompileBudget(0.5))  # from the cache, charged as it was built
    assert again.cached and again.cpu_s == comp.cpu_s


def test_a_cached_build_is_charged_what_it_cost(tmp_path):
    cfg = CompileSection(cache_dir=str(tmp_path))
    compiler = Compiler(cfg)
    entry = tmp_path / "k1"
    entry.mkdir()
    (entry / "result.json").write_text(json.dumps(CompileResult(ok=False, log="x", cpu_s=7.0).model_dump()))
    budget = CompileBudget(10.0)
    assert compiler._cached("k1", lambda s: None, budget).cached and budget.left == pytest.approx(3.0)


HONEST_EXT = r'''
#include <torch/extension.h>
torch::Tensor twice(torch::Tensor x) {
    auto y = torch::empty_like(x);
    auto c = x.contiguous();
    const float* p = c.data_ptr<float>();
    float* q = y.data_ptr<float>();
    for (int64_t i = 0; i < c.numel(); ++i) q[i] = 2 * p[i];
    return y.view({-1});
}
'''
# the strict profile's rule broken from native code: an ATen kernel declared by hand and called below the
# dispatcher, an operator called through at::_ops, and an override of an ATen operator registered for the harness
HACK_EXT = r'''
#include <torch/extension.h>
#include <torch/library.h>
namespace at { namespace native { at::Tensor mul(const at::Tensor& self, const at::Tensor& other); } }
namespace at { namespace cuda { at::Tensor relu(const at::Tensor& self); } }
typedef at::Tensor (*mul_fn)(const at::Tensor&, const at::Tensor&);
torch::Tensor twice(torch::Tensor x) {
    mul_fn below = &at::native::mul;
    return at::cuda::relu(below(x, at::_ops::add_Tensor::call(x, x, 1)));
}
at::Tensor my_copy(const at::Tensor& self) { return self; }
TORCH_LIBRARY_IMPL(aten, CPU, m) { m.impl("alias", my_copy); }
'''


@pytest.mark.integration
def test_strict_extensions_are_judged_on_what_they_link(tmp_path):
    """Torch compute reached from native code is refused from outside the child, on the built library."""
    pytest.importorskip("torch.utils.cpp_extension")
    from pipeline.evaluation.gate import gate_profile
    compiler = Compiler(CompileSection(cache_dir=str(tmp_path / "cache")))
    findings = {}
    for name, src in (("honest", HONEST_EXT), ("hack", HACK_EXT)):
        scratch = tempfile.mkdtemp(prefix="cudaperf-compile-test-")
        try:
            built = compiler._build_extensions([{"name": name, "cpp_sources": [src], "cuda_sources": [],
                                                 "functions": ["twice"]}], scratch)
            assert built.ok, built.log
            findings[name] = {p: artifact.extension_findings(src, built.extensions[name], scratch, gate_profile(p))
                              for p in ("strict", "kernelbench")}
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    assert findings["honest"] == {"strict": [], "kernelbench": []}
    strict = " ".join(f.message for f in findings["hack"]["strict"])
    assert all(f.rule == "torch-compute-in-forward" for f in findings["hack"]["strict"])
    for what in ("below the dispatcher", "add_Tensor", "registers or calls torch operators", "at::cuda::relu"):
        assert what in strict, strict
    assert findings["hack"]["kernelbench"] == []  # torch may compute under that profile


@pytest.mark.parametrize("name,refused", [
    ("at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>)", False),
    ("at::_ops::view::call(at::Tensor const&, c10::ArrayRef<c10::SymInt>)", False),
    ("at::_ops::fill__Scalar::call(at::Tensor&, c10::Scalar const&)", False),
    ("at::TensorBase::__dispatch_contiguous(c10::MemoryFormat) const", False),
    ("c10::impl::ExcludeDispatchKeyGuard::ExcludeDispatchKeyGuard(c10::DispatchKeySet)", False),
    ("at::_ops::slice_scatter::call(at::Tensor const&)", True),
    ("at::_ops::expand_copy::call(at::Tensor const&)", True),
    ("at::_ops::mm::call(at::Tensor const&, at::Tensor const&)", True),
    ("at::native::relu(at::Tensor const&)", True),
    ("at::cuda::blas::gemm<float>(char, char, long)", True),
    ("at::cuda::relu(at::Tensor const&)", True),  # ATen's CUDA kernel of relu, past the dispatcher
    ("at::cuda::add_out(at::Tensor&, at::Tensor const&, at::Tensor const&, c10::Scalar const&)", True),
    ("at::cuda::_softmax(at::Tensor const&, long, bool)", True),
    ("at::cuda::getCurrentCUDABlasHandle()", True),
    ("at::cuda::jit::launch_jitted_pwise_function(at::cuda::NvrtcFunction&, void**, dim3, dim3, int)", True),
    ("at::sparsecuda::mm(at::Tensor const&, at::Tensor const&)", True),
    ("at::compositeexplicitautogradnonfunctional::add(at::Tensor const&, at::Tensor const&)", True),
    ("at::cuda::getCurrentDeviceProperties()", False),
    ("at::cuda::warp_size()", False),
    ("c10::cuda::getCurrentCUDAStream(signed char)", False),
    ("c10::cuda::CUDAStream::query() const", False),
    ("c10::Dispatcher::singleton()", True),
    ("torch::Library::_impl(char const*, torch::CppFunction&&, torch::_RegisterOrVerify) &", True),
])
def test_torch_compute_symbols(name, refused):
    assert bool(artifact.torch_compute_symbol(name)) is refused


@needs_nvcc
def test_the_compile_worker_builds_once_and_checks_what_it_built(tmp_path, builtin_tasks, monkeypatch):
    """One nvcc -c (the object the artefact check reads), the library linked from it; the check runs in the worker
    and the evaluator only reads its findings; a candidate the gate refuses is not built at all."""
    from pipeline.core.config import EvalSection
    from pipeline.evaluation.evaluator import Evaluator
    task = builtin_tasks["c2cuda/saxpy"]
    impl = next(i for i in task.implementations if i.format == "c2cuda")
    cfg = CompileSection(cache_dir=str(tmp_path))
    objects = []
    original = artifact.build_object
    monkeypatch.setattr(artifact, "build_object", lambda *a, **k: objects.append(1) or original(*a, **k))
    comp = bounded.checked_build(Compiler(cfg), Candidate(task_id=task.id, code=impl.code, format="c2cuda"), task,
                                 "strict", TrustedLimits())
    assert comp.ok and Path(comp.object).is_file() and Path(comp.artifact).is_file() and objects == []
    assert comp.built_findings == [] and comp.built_profile == "strict" and "Used" in comp.ptxas_log
    packed = comp.packed()
    assert set(packed.payload) == {"artifact.so", "candidate.o"}
    assert comp.gate_findings == []  # the worker's gate travels with the result too
    features, hints = comp.built_structure  # and the structural analysis of what it built
    assert (features, hints) == bounded.structure(TrustedLimits(), Candidate(task_id=task.id, code=impl.code,
                                                  format="c2cuda"), cfg.arch, comp.ptxas_log, task.function)
    assert features["ptxas.available"] and features["struct.kernels"] >= 1
    checks, gates, analyses = [], [], []  # the evaluator runs these stages in workers: counted where they are sent
    monkeypatch.setattr(bounded, "artifact_check", lambda *a, **k: checks.append(1) or [])
    real_gate, real_structure = bounded.gate, bounded.structure
    monkeypatch.setattr(bounded, "gate", lambda *a, **k: gates.append(1) or real_gate(*a, **k))
    monkeypatch.setattr(bounded, "structure", lambda *a, **k: analyses.append(1) or real_structure(*a, **k))
    ev = Evaluator(EvalSection(result_cache_dir=""), cfg, use_gpu=False)
    r = ev.evaluate(task, [Candidate(task_id=task.id, code=impl.code, format="c2cuda")], [packed])[0]
    assert r.verdict == "not_executed" and checks == [] and gates == [] and analyses == []  # the worker's were read
    assert all(r.features[k] == v for k, v in features.items())
    other = Candidate(task_id=task.id, code=impl.code + "\n// other\n", format="c2cuda")
    ev.evaluate(task, [other], [packed])  # another candidate's build result: its findings are not this one's
    assert checks == [1] and gates == [1] and analyses == [1]
    kb = Evaluator(EvalSection(result_cache_dir="", gate_profile="kernelbench"), cfg, use_gpu=False)
    kb.evaluate(task, [Candidate(task_id=task.id, code=impl.code, format="c2cuda")], [packed])  # made under
    assert checks == [1, 1] and gates == [1, 1] and analyses == [1, 1]  # another profile: checked here
    checks[:], gates[:], analyses[:] = [], [], []
    refused = impl.code.replace("{", "{ system(\"id\");", 1)
    gated = bounded.checked_build(Compiler(cfg), Candidate(task_id=task.id, code=refused, format="c2cuda"), task,
                                  "strict", TrustedLimits())
    assert not gated.ok and "gate" in gated.log and gated.cpu_s == 0 and not gated.key
    gates[:] = []  # the worker's gate above: counted too
    rejected = ev.evaluate(task, [Candidate(task_id=task.id, code=refused, format="c2cuda")], [gated])[0]
    assert rejected.verdict == "rejected" and "process-or-file-or-network" in rejected.flags and gates == []
