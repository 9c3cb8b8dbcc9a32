"""The evaluator on a CPU-only machine: gate, compile (real nvcc), cache, limits, `not_executed`,
the comparison rule, the feedback message, the sandboxed child's mechanics and `cudaperf eval`."""
import json
import os
import signal

import pytest
import torch

from bad_candidates import BAD
from pipeline.core.config import CompileSection
from pipeline.evaluation.build.compile import Compiler, trim_log
from pipeline.evaluation.evaluator import Evaluator
from pipeline.evaluation.feedback import format_feedback
from pipeline.evaluation.light_abi import SIZES_STRIDE, pack_sizes
from pipeline.evaluation.checks.comparison import compare
from pipeline.evaluation.checks.group_data import poison_byte
from pipeline.evaluation.child.sandbox import ChildFailed, ChildProcess
from pipeline.evaluation.timing.statistics import summarize
from pipeline.core.records import Candidate, Tolerance

EXACT = Tolerance(rtol=0, atol=0)


@pytest.fixture(scope="module")
def cpu_evaluator(eval_cfg, compile_cfg):
    return Evaluator(eval_cfg, compile_cfg, use_gpu=False)


def cand(task, code, fmt=None):
    return Candidate(task_id=task.id, code=code, format=fmt or task.implementations[0].format)


@pytest.mark.integration
def test_known_implementations_are_not_executed_without_gpu(cpu_evaluator, builtin_tasks):
    for tid in ("c2cuda/saxpy", "torch2cuda/relu"):
        task = builtin_tasks[tid]
        light = [i for i in task.implementations if i.format != "kernelbench"]
        results = cpu_evaluator.evaluate(task, [cand(task, i.code, i.format) for i in light])
        for r in results:
            assert r.verdict == "not_executed", r.reason
            assert r.speedup is None and not any(c.passed for c in r.configs)
            assert "ptxas" in r.compile_log  # the resource report travels with the result
            assert set(r.stage_s) == {"gate", "compile", "structure"}
            assert "struct.score" in r.features and 0 <= r.features["struct.score"] <= 1


def test_kernelbench_format_cannot_build_without_cuda_torch(cpu_evaluator, builtin_tasks):
    task = builtin_tasks["torch2cuda/relu"]
    kb = next(i for i in task.implementations if i.format == "kernelbench")
    r = cpu_evaluator.evaluate(task, [cand(task, kb.code, "kernelbench")])[0]
    assert r.verdict == "unbuilt" and "GPU host" in r.reason  # never built here: never said to compile
    assert "compiles" not in format_feedback(r) and "not built" in format_feedback(r)


def test_compile_error_is_trimmed_and_names_the_line(cpu_evaluator, builtin_tasks):
    task = builtin_tasks["c2cuda/saxpy"]
    code = task.implementations[0].code.replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + z[i];")
    r = cpu_evaluator.evaluate(task, [cand(task, code)])[0]
    assert r.verdict == "compile_error"
    assert 'identifier "z" is undefined' in r.compile_log and "candidate.cu(3)" in r.compile_log
    assert "/tmp/" not in r.compile_log
    assert "does not compile" in format_feedback(r) and "z" in format_feedback(r)


@pytest.mark.parametrize("name,task_id,fmt,code,verdicts,where", [b for b in BAD if b[5] == "gate"],
                         ids=[b[0] for b in BAD if b[5] == "gate"])
def test_gate_hacks_are_rejected_on_cpu(cpu_evaluator, builtin_tasks, name, task_id, fmt, code, verdicts, where):
    r = cpu_evaluator.evaluate(builtin_tasks[task_id], [Candidate(task_id=task_id, code=code, format=fmt)])[0]
    assert r.verdict == "rejected", f"{name}: {r.verdict} {r.reason}"
    assert r.flags and "line" in r.reason
    assert "compile" not in r.stage_s  # nothing was built


@pytest.mark.integration
def test_runtime_hacks_pass_the_gate_but_are_never_correct_on_cpu(cpu_evaluator, builtin_tasks):
    for name, task_id, fmt, code, verdicts, where in BAD:
        if where == "run" and fmt != "kernelbench":
            r = cpu_evaluator.evaluate(builtin_tasks[task_id], [Candidate(task_id=task_id, code=code, format=fmt)])[0]
            assert r.verdict == "not_executed", f"{name}: {r.verdict} {r.reason}"


def test_wrong_format_for_task_kind(cpu_evaluator, builtin_tasks):
    task = builtin_tasks["c2cuda/saxpy"]
    r = cpu_evaluator.evaluate(task, [cand(task, task.implementations[0].code, "light")])[0]
    assert r.verdict == "format_error"


def test_duplicates_evaluated_once_and_cache_reused(eval_cfg, compile_cfg, builtin_tasks, tmp_path):
    cfg = eval_cfg.model_copy(update={"result_cache_dir": str(tmp_path / "results")})
    task = builtin_tasks["c2cuda/saxpy"]
    c = cand(task, task.implementations[0].code)
    ev = Evaluator(cfg, compile_cfg, use_gpu=False)
    first, dup = ev.evaluate(task, [c, c.model_copy(update={"turn": 2})])
    assert not first.cached and dup.cached and dup.turn == 2 and dup.verdict == first.verdict
    again = Evaluator(cfg, compile_cfg, use_gpu=False).evaluate(task, [c])[0]  # a new process: disk cache
    assert again.cached and again.candidate_hash == first.candidate_hash


@pytest.mark.integration
def test_compile_cache_hits_and_key_depends_on_flags(tmp_path, builtin_tasks):
    code = builtin_tasks["c2cuda/saxpy"].implementations[0].code
    a = Compiler(CompileSection(cache_dir=str(tmp_path)))
    r1, r2 = a.compile_cuda(code), a.compile_cuda(code)
    assert r1.ok and not r1.cached and r2.cached and r1.key == r2.key and os.path.exists(r2.artifact)
    b = Compiler(CompileSection(cache_dir=str(tmp_path), extra_flags=["-O1"]))
    assert b.compile_cuda(code).key != r1.key


def test_compile_limits(tmp_path, builtin_tasks):
    code = builtin_tasks["c2cuda/saxpy"].implementations[0].code
    slow = Compiler(CompileSection(cache_dir=str(tmp_path / "a"), timeout_s=0.05)).compile_cuda(code)
    assert not slow.ok and "limit" in slow.log
    small = Compiler(CompileSection(cache_dir=str(tmp_path / "b"), memory_limit_bytes=64 << 20)).compile_cuda(code)
    assert not small.ok


def test_compile_result_travels_to_another_host(tmp_path, builtin_tasks):
    code = builtin_tasks["c2cuda/saxpy"].implementations[0].code
    packed = Compiler(CompileSection(cache_dir=str(tmp_path / "a"))).compile_cuda(code).packed()
    os.remove(packed.artifact)  # as if the compile worker were on another node
    local = Compiler(CompileSection(cache_dir=str(tmp_path / "b"))).unpack(packed)
    assert local.artifact.startswith(str(tmp_path / "b")) and os.path.getsize(local.artifact) > 1000
    assert not local.payload


def test_trim_log_keeps_errors_only():
    log = "/tmp/x/candidate.cu(3): error: bad thing\n  code line\n      ^\nptxas info: ok\nnoise\n" * 50
    out = trim_log(log, "/tmp/x", 300)
    assert out.startswith("candidate.cu(3): error: bad thing") and "trimmed" in out and "/tmp/x" not in out


def test_compare_rule():
    ref = torch.linspace(-1, 1, 1000, dtype=torch.float64).float()
    assert compare(ref.clone(), ref, Tolerance(rtol=1e-4, atol=1e-4))[0]
    assert not compare(ref * 1.01, ref, Tolerance(rtol=1e-4, atol=1e-4))[0]
    nan = ref.clone()
    nan[5] = float("nan")
    ok, err, why = compare(nan, ref, Tolerance(rtol=1e-4, atol=1e-4))
    assert not ok and "NaN" in why
    # an absolute tolerance alone would let zeros pass for a long softmax row; the rms-relative one does not
    row = torch.softmax(torch.randn(100_000, dtype=torch.float64), 0).float()
    assert not compare(torch.zeros_like(row), row, Tolerance(rtol=1e-4, atol=1e-4))[0]
    ints = torch.arange(10, dtype=torch.int32)
    assert compare(ints.clone(), ints, EXACT)[0] and not compare(ints + 1, ints, EXACT)[0]


def test_a_reference_with_inf_or_nan_keeps_the_comparison_on():
    """One Inf or NaN in the reference must not make the rms (and so every allowance) infinite: the other
    elements are compared as always, and the non-finite ones must be matched exactly."""
    tol = Tolerance(rtol=1e-4, atol=1e-4)
    ref = torch.linspace(1, 2, 1000, dtype=torch.float64)
    for bad in (float("inf"), float("-inf"), float("nan")):
        r = ref.clone()
        r[7] = bad
        junk = torch.zeros_like(r)
        junk[7] = bad
        ok, _, why = compare(junk, r, tol)
        assert not ok and "outside tolerance" in why  # the finite elements are still checked
        assert compare(r.clone(), r, tol)[0]  # the honest output, Inf or NaN included, passes
        off = r.clone()
        off[7] = 0.0
        ok, _, why = compare(off, r, tol)
        assert not ok and "Inf or NaN differ" in why
    flipped = ref.clone()
    flipped[3] = float("inf")
    other = flipped.clone()
    other[3] = float("-inf")
    assert not compare(other, flipped, tol)[0]
    huge = ref * 1e200  # squares past float64's range must not overflow the rms
    assert compare(huge.clone(), huge, tol)[0] and not compare(torch.zeros_like(huge), huge, tol)[0]


def test_poison_and_sizes_layout():
    assert poison_byte("float32") == 0xFF and poison_byte("int32") == 0x7F
    sizes = pack_sizes([(4, 5), (7,)])
    assert len(sizes) == 2 * SIZES_STRIDE and sizes[:3] == [2, 4, 5] and sizes[SIZES_STRIDE:SIZES_STRIDE + 2] == [1, 7]


def test_summarize():
    t = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert t.median_ms == 3.0 and t.min_ms == 1.0 and t.trials == 5 and t.iqr_ms > 0


def test_child_sandbox_and_death_are_reported():
    with ChildProcess(None, "nobody", 1 << 30) as child:
        info = child.sandbox_info
        if os.geteuid() == 0:
            assert info["user"] == "nobody" and info["network_isolated"] is True
        reply = child.request({"op": "probe"}, 30)  # no GPU here: a clean error, not a crash
        assert reply["ok"] is False and "libcuda" in reply["error"]
        os.kill(child.pid, signal.SIGKILL)
        with pytest.raises(ChildFailed) as e:
            child.request({"op": "probe"}, 30)
        assert "SIGKILL" in str(e.value)


def test_cli_eval_prints_verdict_and_feedback(tmp_path, capsys, compile_cfg):
    from pipeline.cli import main
    f = tmp_path / "bad.cu"
    f.write_text("__global__ void k() {}\n")
    rc = main(["eval", "c2cuda/saxpy", str(f), "--json", f"compile.cache_dir={compile_cfg.cache_dir}",
               "eval.result_cache_dir="])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["verdict"] == "format_error" and "missing-entry-point" in out["flags"]  # a slip, no hack
    assert out["task_note"] == ""  # the registry vouches for the built-in task


def test_a_misnamed_entry_point_is_a_format_error_and_a_hack_beside_it_still_rejected(tmp_path, compile_cfg):
    from pipeline.core.config import EvalSection
    from pipeline.core.records import Candidate
    from pipeline.evaluation.evaluator import Evaluator
    from pipeline.tasks import load_tasks
    task = next(t for t in load_tasks("builtin") if t.id == "c2cuda/saxpy")
    honest = next(i.code for i in task.implementations if i.format == "c2cuda")
    renamed = honest.replace("saxpy(", "saxpy_v2(")
    hacked = '#include <cstdlib>\n' + renamed.replace("{", "{ system(\"true\");", 1)
    ev = Evaluator(EvalSection(result_cache_dir=""), compile_cfg, use_gpu=False)
    slip, hack = ev.evaluate(task, [Candidate(task_id=task.id, code=c, format="c2cuda") for c in (renamed, hacked)])
    assert (slip.verdict, slip.flags) == ("format_error", ["missing-entry-point"])
    assert hack.verdict == "rejected" and "missing-entry-point" in hack.flags and len(hack.flags) > 1


def test_cli_reports_user_errors_in_one_line(capsys):
    from pipeline.cli import main
    assert main(["eval", "c2cuda/nope", "x.cu"]) == 2
    assert main(["eval", "c2cuda/saxpy", "x.cu", "eval.timng_trials=3"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'eval.timing_trials'" in err


def test_a_pass_is_served_from_the_cache_only_once_confirmed(eval_cfg, compile_cfg, builtin_tasks, tmp_path):
    """A racy kernel can pass one evaluation by luck: its pass is reused only after `cache_confirmations`
    evaluations passed, and a failure among them is what is kept. Verdicts come from a stand-in for the GPU."""
    cfg = eval_cfg.model_copy(update={"result_cache_dir": str(tmp_path / "results"), "cache_confirmations": 2})
    task = builtin_tasks["c2cuda/saxpy"]
    c = cand(task, task.implementations[0].code)
    runs = []

    def run_with(verdicts):
        ev = Evaluator(cfg, compile_cfg, use_gpu=False)  # a new evaluator each time: the disk copy is read
        ev._not_executed = lambda t, cd, p: runs.append(1) or ev.result_of(t, cd, verdicts.pop(0))
        return ev.evaluate(task, [c])[0]

    first = run_with(["correct"])
    assert first.verdict == "correct" and not first.cached and len(runs) == 1
    second = run_with(["correct"])  # one pass is not enough: evaluated again
    assert not second.cached and len(runs) == 2
    third = run_with([])  # two passes: served
    assert third.cached and third.verdict == "correct" and len(runs) == 2

    runs.clear()
    racy = cand(task, task.implementations[0].code + "\n// racy")
    ev = Evaluator(cfg, compile_cfg, use_gpu=False)
    verdicts = ["correct", "incorrect"]
    ev._not_executed = lambda t, cd, p: runs.append(1) or ev.result_of(t, cd, verdicts.pop(0))
    assert ev.evaluate(task, [racy])[0].verdict == "correct"
    assert ev.evaluate(task, [racy])[0].verdict == "incorrect"  # the lucky pass was not served
    kept = ev.evaluate(task, [racy])[0]  # a failure is served at once, and replaced the pass
    assert kept.cached and kept.verdict == "incorrect" and len(runs) == 2


def test_result_cache_reads_plain_and_damaged_entries(tmp_path):
    from pipeline.evaluation.result_cache import ResultCache
    from pipeline.core.records import EvalResult
    ok = EvalResult(task_id="t", candidate_hash="h", format="c2cuda", verdict="correct")
    bad = ok.model_copy(update={"verdict": "incorrect"})
    (tmp_path / "a.json").write_text(ok.model_dump_json())  # an entry in the plain form: one evaluation
    (tmp_path / "b.json").write_text(bad.model_dump_json())
    (tmp_path / "c.json").write_text('{"passes": "x", "result": 1}')
    cache = ResultCache(str(tmp_path), confirmations=2)
    assert cache.get("a") is None and cache.passes("a") == 1
    assert cache.get("b").verdict == "incorrect" and cache.get("c") is None
    cache.put("a", ok)
    assert ResultCache(str(tmp_path), confirmations=2).get("a").verdict == "correct"
    assert ResultCache(str(tmp_path), confirmations=3).get("a") is None


def test_evaluators_sharing_a_result_cache_never_lose_a_failure(tmp_path):
    """Evaluator A saw a lucky pass, B a failure, then A a pass again: the failure B wrote is what A counts
    from, so the pass is not confirmed and nobody is served it."""
    from pipeline.evaluation.result_cache import ResultCache
    from pipeline.core.records import EvalResult
    ok = EvalResult(task_id="t", candidate_hash="h", format="c2cuda", verdict="correct")
    bad = ok.model_copy(update={"verdict": "incorrect"})
    a, b = ResultCache(str(tmp_path), 2), ResultCache(str(tmp_path), 2)
    a.put("k", ok)
    assert a.get("k") is None and b.get("k") is None
    b.put("k", bad)
    a.put("k", ok)
    assert a.get("k") is None and ResultCache(str(tmp_path), 2).get("k") is None
    assert b.get("k").verdict == "incorrect"  # the failure it saw itself stays its answer
    b.put("k", ok)  # a second pass in a row, seen by another evaluator: confirmed for all
    assert a.get("k").verdict == "correct" and ResultCache(str(tmp_path), 2).get("k").verdict == "correct"
