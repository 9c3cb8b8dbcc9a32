"""The trusted stages from the attacker's side: a source that makes the gate, the artefact check or the structural
analysis run long, take memory or hand back a huge result ends in a verdict that names the cap, never an exception,
an evaluator_error or a stall; compiler output and the kept preprocessed passes are read within their caps; an
honest candidate's verdict is unchanged. Caps are small here so that each attack stays cheap."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from pipeline.core.config import CompileSection, EvalSection, TrustedLimits
from pipeline.core.records import Candidate, EvalResult
from pipeline.evaluation import bounded
from pipeline.evaluation.bounded import StageCaps, StageLimit, run_stage
from pipeline.evaluation.build.compile import CompileResult, Compiler
from pipeline.evaluation.build.tool_run import CompileBudget, run_limited
from pipeline.evaluation.feedback import format_feedback

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
CAPS = StageCaps("the probe", 3.0, 1.0, 1 << 30, 1 << 20, ("t.wall_s", "t.cpu_s", "t.memory_bytes", "t.result_bytes"))
SMALL = TrustedLimits(gate_wall_s=4, gate_cpu_s=1, check_wall_s=4, check_cpu_s=1, structure_wall_s=4,
                      structure_cpu_s=1)


# --- the runner ------------------------------------------------------------------------------------------
def spin(seconds: float) -> int:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return 1


def allocate(nbytes: int) -> int:
    return len(bytearray(nbytes))


def huge_result(nbytes: int) -> str:
    return "x" * nbytes


def recurse(n: int) -> int:
    return 0 if n == 0 else 1 + recurse(n - 1)


def broken() -> None:
    raise KeyError("a bug of ours")


def start_orphan(marker: str) -> None:
    """Start a tool in its own session (as run_limited does) and wait: the tool must not outlive the stage."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    with open(marker, "w") as f:
        f.write(str(proc.pid))
    time.sleep(60)


@pytest.mark.parametrize("fn, arg, cap", [(spin, 30.0, "cpu"), (time.sleep, 30, "wall"), (allocate, 8 << 30, "memory"),
                                          (huge_result, 8 << 20, "output"), (recurse, 10 ** 6, "depth")])
@pytest.mark.integration
def test_each_cap_stops_the_stage_and_is_named(fn, arg, cap):
    caps = CAPS if cap != "cpu" else StageCaps("the probe", 60, 1.0, 1 << 30, 1 << 20, CAPS.fields)  # cpu before wall
    t0 = time.monotonic()
    got = run_stage(caps, fn, arg)
    assert isinstance(got, StageLimit) and got.cap == cap, got
    assert time.monotonic() - t0 < 30
    sentence = got.sentence()
    assert sentence.startswith("the probe stopped") and sentence.count(".") <= 1 and "simplify the source" in sentence
    assert cap == "depth" or f"t.{ {'cpu': 'cpu_s', 'wall': 'wall_s', 'memory': 'memory_bytes', 'output': 'result_bytes'}[cap]}" in sentence


def address_limit() -> tuple[int, int]:
    import resource
    return resource.getrlimit(resource.RLIMIT_AS)[0], bounded.mapped_bytes()


@pytest.mark.integration
def test_the_memory_cap_counts_from_what_the_fork_server_preloaded():
    """A CUDA build of torch, preloaded in the fork server, reserves more address space than the cap: the cap is
    what a job may map beyond the worker's address space at the fork, so a job still loads a library, and a job
    that maps the cap's worth more is still stopped (the parametrised test above)."""
    limit, now = run_stage(CAPS, address_limit)
    assert now < limit <= now + CAPS.memory_bytes + (64 << 20)  # the job's own mapping since the fork is small
    assert limit >= CAPS.memory_bytes + (100 << 20)  # more than the bare cap: torch and the stages were preloaded
    assert run_stage(CAPS, allocate, 256 << 20) == 256 << 20  # well within the cap beyond the preloaded modules


def test_values_come_back_and_bugs_raise():
    assert run_stage(CAPS, recurse, 50) == 50
    with pytest.raises(RuntimeError, match="a bug of ours"):
        run_stage(CAPS, broken)


@pytest.mark.integration
def test_a_stopped_stage_leaves_no_process_behind(tmp_path):
    marker = tmp_path / "pid"
    got = run_stage(StageCaps("the probe", 1.5, 10, 1 << 30, 1 << 20, CAPS.fields), start_orphan, str(marker))
    assert isinstance(got, StageLimit) and got.cap == "wall"
    pid = int(marker.read_text())
    time.sleep(0.2)
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        state = "gone"
    assert state in ("gone", "Z")  # a zombie waits for whoever reaps orphans here; it runs nothing


def test_a_job_costs_a_fork_not_an_import():
    run_stage(CAPS, recurse, 1)  # the fork server starts once
    t0 = time.perf_counter()
    for _ in range(10):
        run_stage(CAPS, recurse, 1)
    assert (time.perf_counter() - t0) / 10 < 1.0  # measured: 4-10 ms idle; an import of the stages is seconds


# --- the gate ------------------------------------------------------------------------------------------
def _kernelbench(copies: int) -> str:
    body = "__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n" * 180
    return f'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
s = """{body}"""
mod = load_inline(name="m", cpp_sources="", cuda_sources=[{", ".join(["s"] * copies)}], functions=["k"])
class ModelNew(nn.Module):
    def forward(self, x):
        return mod.k(x)
'''


def test_a_source_that_costs_the_gate_minutes_is_rejected_naming_its_cap(tmp_path, builtin_tasks):
    """One 10 KB string named a hundred times in load_inline's sources: the gate scans each copy."""
    from pipeline.evaluation.evaluator import Evaluator
    task = next(t for t in builtin_tasks.values() if t.kind == "torch2cuda")
    ev = Evaluator(EvalSection(result_cache_dir="", gate_profile="kernelbench", limits=SMALL),
                   CompileSection(cache_dir=str(tmp_path)), use_gpu=False)
    t0 = time.monotonic()
    r = ev.evaluate(task, [Candidate(task_id=task.id, code=_kernelbench(150), format="kernelbench")])[0]
    assert r.verdict == "rejected" and r.flags == ["stage-limit"], (r.verdict, r.reason)
    assert r.reason.startswith("the gate stopped") and "eval.limits.gate_" in r.reason
    assert time.monotonic() - t0 < 10


# --- the compile step ----------------------------------------------------------------------------------
def test_compiler_output_is_read_within_its_cap(tmp_path):
    ran = run_limited([sys.executable, "-c", "import sys; sys.stdout.write('x' * 50_000_000)"], str(tmp_path),
                      dict(os.environ), 60, output_bytes=4096)
    assert ran.returncode == 0 and len(ran.stdout) == 4096 and ran.dropped_bytes == 50_000_000 - 4096


@needs_nvcc
def test_a_report_of_many_kernels_past_the_output_cap_is_a_compile_error(tmp_path):
    source = "template <int N> __global__ void k(float* x) { x[threadIdx.x] += N; }\n" + "".join(
        f"template __global__ void k<{i}>(float*);\n" for i in range(60))
    comp = Compiler(CompileSection(cache_dir=str(tmp_path), output_bytes=2048, sandbox="none")).compile_cuda(source)
    assert not comp.ok and "compile.output_bytes" in comp.log and len(comp.ptxas_log) <= 2048


@pytest.mark.integration
@needs_nvcc
def test_a_macro_expansion_bomb_is_a_compile_error_naming_the_preprocessed_cap(tmp_path):
    bomb = "".join(f"#define A{i + 1} A{i} A{i}\n" for i in range(19))  # 2^19 copies of 'ab', one string
    source = ("#define S(x) #x\n#define STR(x) S(x)\n#define A0 ab\n" + bomb + "const char* s = STR(A19);\n"
              "int f() { return s[0]; }\n__global__ void k(float* x) { x[0] = 1.0f; }\n")
    cfg = CompileSection(cache_dir=str(tmp_path), preprocessed_bytes=2 << 20, sandbox="none")
    comp = Compiler(cfg).compile_cuda(source, CompileBudget(60))
    assert not comp.ok and "compile.preprocessed_bytes" in comp.log and not comp.expanded


# --- the artefact check ----------------------------------------------------------------------------------
def test_an_expansion_that_costs_the_artefact_check_minutes_is_rejected_naming_its_cap(tmp_path, builtin_tasks):
    """What a macro bomb leaves in the kept device pass: one line of 60,000 statements for the scan to read."""
    from pipeline.evaluation.evaluator import Evaluator
    task = builtin_tasks["c2cuda/saxpy"]
    impl = next(i for i in task.implementations if i.format == "c2cuda")
    lines = [(1, "__global__ void k(float* x) {"), (2, "x[threadIdx.x] += 1.0f; " * 60_000), (3, "}")]
    comp = CompileResult(ok=True, key="bomb", expanded={"device": lines, "host": lines})
    ev = Evaluator(EvalSection(result_cache_dir="", limits=SMALL), CompileSection(cache_dir=str(tmp_path)),
                   use_gpu=False)
    t0 = time.monotonic()
    r = ev.gate_and_compile(task, Candidate(task_id=task.id, code=impl.code, format="c2cuda"), comp)
    assert isinstance(r, EvalResult) and r.verdict == "rejected" and r.flags == ["stage-limit"], r
    assert r.reason.startswith("the artefact check stopped") and "eval.limits.check_" in r.reason
    assert time.monotonic() - t0 < 10


@needs_nvcc
def test_the_compile_worker_bounds_its_artefact_check_too(tmp_path, builtin_tasks, monkeypatch):
    """A compile worker's check past its cap travels as an error finding; the evaluator rejects naming the cap."""
    task = builtin_tasks["c2cuda/saxpy"]
    impl = next(i for i in task.implementations if i.format == "c2cuda")
    cand = Candidate(task_id=task.id, code=impl.code + "\n// worker\n", format="c2cuda")
    compiler = Compiler(CompileSection(cache_dir=str(tmp_path)))
    tight = TrustedLimits(check_wall_s=0.05)  # no check finishes in 50 ms: the cap, whatever the input
    comp = bounded.checked_build(compiler, cand, task, "strict", tight)
    assert comp.ok and [f.rule for f in comp.built_findings] == ["stage-limit"]
    assert "eval.limits.check_wall_s" in comp.built_findings[0].message
    from pipeline.evaluation.evaluator import Evaluator
    ev = Evaluator(EvalSection(result_cache_dir=""), compiler.cfg, use_gpu=False)
    r = ev.evaluate(task, [cand], [comp.packed()])[0]
    assert r.verdict == "rejected" and "the artefact check stopped" in r.reason


# --- the structural analysis ----------------------------------------------------------------------------
def test_a_source_that_costs_the_structural_analysis_minutes_is_rejected_naming_its_cap(tmp_path):
    from pipeline.evaluation.evaluator import Evaluator
    source = ("__global__ void k(float* x, int a) { int i = threadIdx.x; "
              + "".join(f"x[i*{j}+a] = x[i+{j}];" for j in range(3000)) + " }\n")
    ev = Evaluator(EvalSection(result_cache_dir="", limits=SMALL), CompileSection(cache_dir=str(tmp_path)),
                   use_gpu=False)
    t0 = time.monotonic()
    features, findings = ev.structure_features(Candidate(task_id="-", code=source, format="c2cuda"),
                                               CompileResult(ok=True))
    assert features == {} and [f.rule for f in findings] == ["stage-limit"] and findings[0].severity == "error"
    assert findings[0].message.startswith("the structural analysis stopped") and "eval.limits.structure_" in \
        findings[0].message
    assert time.monotonic() - t0 < 10


@needs_nvcc
def test_the_compile_worker_bounds_its_structural_analysis_too(tmp_path, builtin_tasks):
    """A compile worker's analysis past its cap travels as a stage-limit finding; the evaluator rejects naming it."""
    task = builtin_tasks["c2cuda/saxpy"]
    impl = next(i for i in task.implementations if i.format == "c2cuda")
    heavy = ("__global__ void heavy(float* x, int a) { int i = threadIdx.x; "  # minutes of analysis, seconds of nvcc
             + "".join(f"x[i*{j}+a] = x[i+{j}];" for j in range(3000)) + " }\n")
    cand = Candidate(task_id=task.id, code=heavy + impl.code, format="c2cuda")
    compiler = Compiler(CompileSection(cache_dir=str(tmp_path)))
    tight = SMALL.model_copy(update={"gate_wall_s": 60, "gate_cpu_s": 30, "check_wall_s": 60, "check_cpu_s": 30})
    comp = bounded.checked_build(compiler, cand, task, "strict", tight)
    assert comp.ok and comp.built_findings == []
    features, hints = comp.built_structure
    assert features == {} and [f.rule for f in hints] == ["stage-limit"] and "eval.limits.structure_" in \
        hints[0].message
    from pipeline.evaluation.evaluator import Evaluator
    ev = Evaluator(EvalSection(result_cache_dir=""), compiler.cfg, use_gpu=False)
    r = ev.evaluate(task, [cand], [comp.packed()])[0]
    assert r.verdict == "rejected" and r.flags == ["stage-limit"] and "the structural analysis stopped" in r.reason


@needs_nvcc
def test_a_failed_analysis_in_the_compile_worker_is_left_to_the_evaluator(tmp_path, builtin_tasks, monkeypatch):
    """The analysis' worker failing in the compile worker (our fault) stops nothing there: the build carries no
    analysis, and the evaluator analyses the candidate itself."""
    task = builtin_tasks["c2cuda/saxpy"]
    impl = next(i for i in task.implementations if i.format == "c2cuda")
    cand = Candidate(task_id=task.id, code=impl.code + "\n// the worker's analysis fails\n", format="c2cuda")
    compiler = Compiler(CompileSection(cache_dir=str(tmp_path)))
    real = bounded.structure
    monkeypatch.setattr(bounded, "structure", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("worker died")))
    comp = bounded.checked_build(compiler, cand, task, "strict", TrustedLimits())
    assert comp.ok and comp.built_findings == [] and comp.built_structure is None
    analysed = []
    monkeypatch.setattr(bounded, "structure", lambda *a, **k: analysed.append(1) or real(*a, **k))
    from pipeline.evaluation.evaluator import Evaluator
    r = Evaluator(EvalSection(result_cache_dir=""), compiler.cfg, use_gpu=False).evaluate(task, [cand],
                                                                                         [comp.packed()])[0]
    assert r.verdict == "not_executed" and analysed == [1] and r.features["struct.kernels"] >= 1


# --- what the policy reads -------------------------------------------------------------------------------
def test_feedback_is_capped_with_a_marker():
    r = EvalResult(task_id="t", candidate_hash="h", format="c2cuda", verdict="compile_error", gpu="cpu",
                   evaluator_version="x", reason="r" * 10 ** 6, compile_log="error: " + "e" * 10 ** 7)
    text = format_feedback(r, max_chars=3000)
    assert len(text) <= 3000 and "characters in all" in text and text.startswith("Your code does not compile.")


# --- honest answers ---------------------------------------------------------------------------------------
@pytest.mark.integration
def test_honest_answers_get_the_same_findings_and_features_bounded(tmp_path, builtin_tasks):
    """Every built-in implementation: the bounded gate and structural analysis give what the stages give in-process."""
    from pipeline.evaluation.gate import check_candidate, cuda_sources_of
    from pipeline.evaluation.evaluator import Evaluator
    from pipeline.structure.analyze import analyze_source
    limits = TrustedLimits()
    ev = Evaluator(EvalSection(result_cache_dir=""), CompileSection(cache_dir=str(tmp_path)), use_gpu=False)
    for task in builtin_tasks.values():
        for impl in task.implementations[:2]:
            cand = Candidate(task_id=task.id, code=impl.code, format=impl.format)
            profile = "kernelbench" if impl.format == "kernelbench" else "strict"
            assert bounded.gate(limits, cand, task, profile) == check_candidate(cand, task, profile)
            features, findings = ev.structure_features(cand, CompileResult(ok=True))
            texts = [text for text, _ in cuda_sources_of(cand)]
            direct = analyze_source("\n".join(texts), run_nvcc=False) if texts else None
            assert json.dumps(features, sort_keys=True) == json.dumps(direct.features() if direct else {}, sort_keys=True)
            assert findings == (direct.findings if direct else [])


def test_a_kept_pass_whose_own_lines_expand_past_the_cap_stops_early(tmp_path):
    """Reading a kept preprocessing pass runs in the compile process: a pass just under compile.preprocessed_bytes
    whose own lines are millions of expanded statements (about a minute and GiBs to read whole) stops at
    OWN_EXPANSION_BYTES, within a few seconds, naming it; an honest pass is read whole."""
    import time
    from pipeline.evaluation.build.compile import OWN_EXPANSION_BYTES, ExpansionTooLarge, kept_expansions
    keep = tmp_path / "kept"
    keep.mkdir()
    statement = "y[i] = a * x[i] + y[i];\n"
    (keep / "candidate.cpp1.ii").write_text('# 1 "candidate.cu"\n' + statement * (60 * 2 ** 20 // len(statement)))
    t0 = time.perf_counter()
    with pytest.raises(ExpansionTooLarge, match="simplify the macros"):
        kept_expansions(str(keep), "candidate", 64 << 20)
    assert time.perf_counter() - t0 < 20  # whole: about 3 s per million lines here, 2.6 M lines
    (keep / "candidate.cpp1.ii").write_text('# 1 "candidate.cu"\n' + statement * 100 + '# 1 "h.h" 1\nint q;\n')
    assert len(kept_expansions(str(keep), "candidate", 64 << 20)["device"]) == 100
    assert OWN_EXPANSION_BYTES >= 16 * 256 * 1024  # 16 times the largest candidate the gate reads


def _exits_early(code: int) -> None:
    os._exit(code)


def test_a_worker_that_ends_without_a_limit_is_our_failure_never_the_candidates():
    """A worker that dies with an exit status no limit gives (an import that failed in the fork server, a crash) is
    a bug of ours: RuntimeError (the evaluator's guard makes it that answer's evaluator_error, never cached), not a
    memory verdict that a cache would keep for the candidate."""
    with pytest.raises(RuntimeError, match="exit status 3"):
        bounded.run_stage(bounded.caps_of("gate", TrustedLimits()), _exits_early, 3)


@needs_nvcc
def test_the_artefact_checks_own_preprocessing_is_read_only_within_its_cap(tmp_path):
    """A kernelbench source the compile did not expand is preprocessed by the check itself (`nvcc -E`): past
    compile.preprocessed_bytes the pass is not read, and the check says so as a finding."""
    from pipeline.evaluation.build import artifact
    from pipeline.evaluation.gate import gate_profile
    bomb = "#define A x x x x x x x x\n#define B A A A A A A A A\n#define C B B B B B B B B\n" \
           "#define D C C C C C C C C\nint f() { return 0; }\n" + "D\n" * 256  # 256 lines of 4,096 tokens: 2 MiB
    cfg = CompileSection(cache_dir=str(tmp_path), preprocessed_bytes=1 << 19, sandbox="none")
    found = artifact.preprocessed_findings(bomb, cfg, str(tmp_path), "kernelbench", True, gate_profile("strict"),
                                           drop_includes=True, line_offset=3)
    assert [(f.rule, f.line) for f in found] == [("artifact-check", 4)]
    assert "compile.preprocessed_bytes" in found[0].message
