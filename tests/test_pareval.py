"""ParEval's CUDA problems as tasks (pipeline/tasks/pareval.py) on CPU: every problem loads, its C reference and
every kernel of its own compile, the kernels pass the gate, the prompt's kernel matches the task's arguments,
and an answer in ParEval's form becomes a c2cuda candidate whose launch is the driver's."""
import concurrent.futures as cf
import re
import shutil
import subprocess

import pytest

from pipeline.core.config import CompileSection, EvalSection
from pipeline.evaluation.evaluator import Evaluator
from pipeline.evaluation.gate import check_candidate
from pipeline.tasks.pareval import (WRAPPER_MARK, kernel_candidate, launch_prologue, launch_wrapper, load_pareval,
                                   task_from_file)
from pipeline.core.records import Candidate
from pipeline.tasks.c_types import split_ctype
from pipeline.core.errors import TaskError

TASKS = load_pareval()


pytestmark = pytest.mark.integration


def test_problems_load_with_ids_types_and_a_naive_kernel_each():
    assert TASKS, "no ParEval problems"
    for t in TASKS:
        assert t.id == f"pareval/{t.pareval.problem}" and t.kind == "c2cuda"
        assert t.family == f"pareval_{t.pareval.problem_type}"
        assert t.function == f"run_{t.pareval.kernel}"
        assert t.pareval.problem_size > 0  # ParEval's DRIVER_PROBLEM_SIZE: its efficiency's resources
        assert t.baseline() is not None and WRAPPER_MARK in t.baseline().code


def _params(signature: str) -> list[tuple[str, str]]:
    """(type without spaces or array bounds, name) of each parameter of a C declaration's parameter list."""
    out = []
    for part in signature.split(","):
        part = re.sub(r"\[[^\]]*\]", "*", part.strip())  # size_t bins[256] -> size_t* bins
        m = re.fullmatch(r"(.*?)([A-Za-z_]\w*)\s*(\*?)", part)
        base, ptr, const = split_ctype((m.group(1) + m.group(3)).strip())
        out.append((("const " if const else "") + base + ("*" if ptr else ""), m.group(2)))
    return out


@pytest.mark.parametrize("task", TASKS, ids=[t.id for t in TASKS])
def test_the_prompts_kernel_takes_the_tasks_arguments_in_order(task):
    m = re.search(rf"__global__\s+void\s+{task.pareval.kernel}\s*\(([^)]*)\)\s*{{\s*$", task.pareval.prompt.strip())
    assert m, "the prompt ends with the kernel's opening line"
    params = _params(m.group(1))
    assert [n for _, n in params] == [a.name for a in task.args]
    for (typ, name), a in zip(params, task.args):
        want = _params(f"{task.pareval.casts.get(name, a.ctype)} {name}")[0][0]
        assert typ == want, f"{name}: the prompt says {typ}, the task {want}"


def test_every_reference_and_kernel_compiles_and_passes_the_gate(tmp_path):
    assert shutil.which("nvcc") and shutil.which("gcc"), "nvcc and gcc are needed on PATH (install the CUDA toolkit)"
    jobs = []
    for t in TASKS:
        jobs.append((f"{t.id}:reference", ["gcc", "-O2", "-std=c11", "-shared", "-fPIC"], t.reference, "c"))
        for impl in t.implementations:
            findings = check_candidate(Candidate(task_id=t.id, code=impl.code, format="c2cuda"), t)
            assert not [f.message for f in findings if f.severity == "error"], (t.id, impl.name)
            jobs.append((f"{t.id}:{impl.name}", ["nvcc", "-arch=sm_90", "-O3", "-shared", "-Xcompiler", "-fPIC"],
                         impl.code, "cu"))

    def build(job):
        name, cmd, code, ext = job
        d = tmp_path / name.replace("/", "_").replace(":", "__")
        d.mkdir()
        (d / f"src.{ext}").write_text(code)
        proc = subprocess.run([*cmd, "-o", str(d / "lib.so"), str(d / f"src.{ext}"), "-lm"],
                              capture_output=True, text=True, timeout=300)
        return name, proc.returncode, proc.stderr[-1500:]
    with cf.ThreadPoolExecutor(2) as pool:
        failures = [f"{n}:\n{log}" for n, rc, log in pool.map(build, jobs) if rc]
    assert not failures, "\n\n".join(failures)


def test_an_answer_in_pareval_form_is_launched_by_the_harness(tmp_path):
    task = next(t for t in TASKS if t.pareval.problem == "03_dense_la_axpy")
    kernel = task.pareval.prompt.splitlines()[-1] + "\n    size_t i = blockIdx.x * blockDim.x + threadIdx.x;\n" \
        "    if (i < N) z[i] = alpha * x[i] + y[i];\n}\n"
    cand = kernel_candidate(task, kernel)
    assert cand.format == "c2cuda" and cand.code.startswith(kernel.rstrip())
    assert "::axpy<<<dim3((unsigned)((N + 1023) / 1024)), dim3(1024)>>>(alpha, x, y, z, N);" in cand.code
    ev = Evaluator(EvalSection(result_cache_dir=""), CompileSection(cache_dir=str(tmp_path)), use_gpu=False)
    assert ev.evaluate(task, [cand])[0].verdict == "not_executed"  # gated and compiled; no GPU here
    # an answer that brings its own entry point collides with the harness's: the launch stays the driver's,
    # also when a macro of the answer renames the harness's entry or redefines what its launch uses
    own = kernel + f'extern "C" void {task.function}(double a, const double* x, const double* y, double* z, ' \
                   f'size_t N) {{ axpy<<<1, 1>>>(a, x, y, z, N); }}\n'
    assert ev.evaluate(task, [kernel_candidate(task, own)])[0].verdict == "compile_error"
    renamed = own + f"#define {task.function} {task.function}_of_the_harness\n"
    assert ev.evaluate(task, [kernel_candidate(task, renamed)])[0].verdict == "compile_error"
    grid = kernel + "#define dim3(...) dim3(1)\n#define N 1\n"
    cand = kernel_candidate(task, grid)
    assert cand.code.index("#undef dim3") > cand.code.index("#define dim3") and "#undef N\n" in cand.code
    assert ev.evaluate(task, [cand])[0].verdict == "not_executed"  # compiles, with the driver's launch


def test_a_completion_of_parevals_prompt_is_an_answer_too(tmp_path):
    """ParEval's own generated outputs are the kernel's body, completing its prompt; they are scored as
    ParEval's harness scores them, the prompt before the completion."""
    task = next(t for t in TASKS if t.pareval.problem == "14_geometry_closest_pair_1d")
    body = ("    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;\n"
            "    if (i == 0) { double best = 1e300; for (size_t a = 0; a < N; ++a) for (size_t b = a + 1; b < N; ++b)\n"
            "        best = fmin(best, distanceBetweenPoints(x[a], x[b])); *distance = N < 2 ? 0 : best; }\n}\n")
    cand = kernel_candidate(task, body)
    assert cand.code.count(task.pareval.prompt.strip().splitlines()[-1]) == 1
    assert cand.code.count("distanceBetweenPoints(double x1, double x2)") == 1  # from the prompt, not twice
    ev = Evaluator(EvalSection(result_cache_dir=""), CompileSection(cache_dir=str(tmp_path)), use_gpu=False)
    r = ev.evaluate(task, [cand])[0]
    assert r.verdict == "not_executed", (r.verdict, r.reason[:300], r.compile_log[-800:])


def test_an_answer_may_repeat_the_helpers_parevals_prompt_shows(tmp_path):
    """ParEval's prompt shows the driver's helpers (a device function, a struct, a constant table); an answer
    that repeats them compiles, and one that leaves them out gets them from the harness."""
    from pipeline.tasks.pareval import driver_helpers, problem_kernels
    ev = Evaluator(EvalSection(result_cache_dir=""), CompileSection(cache_dir=str(tmp_path)), use_gpu=False)
    with_helpers = [t for t in TASKS if t.pareval.helpers.strip() and not t.pareval.helpers.strip().startswith("#")]
    assert with_helpers
    cands = []
    for task in with_helpers:
        kernel = problem_kernels(task)["naive"]
        assert driver_helpers(task, kernel).strip()  # the kernels of the files leave them out
        assert len(driver_helpers(task, task.pareval.helpers + kernel)) < len(driver_helpers(task, kernel))
        cands.append((task, kernel_candidate(task, task.pareval.helpers + "\n" + kernel)))
    for task, cand in cands:
        r = ev.evaluate(task, [cand])[0]
        assert r.verdict == "not_executed", (task.id, r.verdict, r.reason[:300], r.compile_log[-800:])


def test_outputs_the_driver_fills_are_filled_before_the_launch():
    task = next(t for t in TASKS if t.pareval.problem == "03_dense_la_axpy").model_copy(deep=True)
    from pipeline.core.records import ParEvalFill
    task.pareval.fill = [ParEvalFill(arg="z", count="N"), ParEvalFill(arg="z", count="N", value="-1.0")]
    code = launch_wrapper(task)
    zero, other, launch = (code.index("cudaMemsetAsync(z, 0, (size_t)(N) * sizeof(double), 0);"),
                           code.index("pareval_fill<double><<<1024, 256>>>(z, (size_t)(N), "
                                      "pareval_fill_value_1(alpha, x, y, z, N));"),
                           code.index("::axpy<<<"))
    assert zero < other < launch
    prologue = launch_prologue(task)  # before the answer: its macros cannot change the value
    assert "template <typename T> __global__ void pareval_fill" in prologue
    assert ("static double pareval_fill_value_1(double alpha, const double* x, const double* y, double* z, "
            "size_t N) { return (double)(-1.0); }") in prologue
    task.pareval.fill = [ParEvalFill(arg="w", count="N")]
    with pytest.raises(TaskError, match="names 'w', which is not one of the arguments"):
        launch_wrapper(task)


def test_a_problem_file_without_kernels_names_the_fix(tmp_path):
    src = (next(t for t in TASKS if t.pareval.problem == "03_dense_la_axpy")).source_path
    text = open(src).read()
    bad = tmp_path / "p.yaml"
    bad.write_text(text.split("  kernels:")[0])
    with pytest.raises(TaskError, match="'pareval.kernels' has no kernel with 'strategy: naive'"):
        task_from_file(bad)
    bad.write_text(text.replace("  kernels:", "  kernel_form: true\n  kernels:"))
    with pytest.raises(TaskError, match="set by the task source"):
        task_from_file(bad)
    bad.write_text(text + "implementations: []\n")
    with pytest.raises(TaskError, match="under 'pareval.kernels'"):
        task_from_file(bad)
    bad.write_text("id: x\n")
    with pytest.raises(TaskError, match="needs a 'pareval' section"):
        task_from_file(bad)


def test_bench_scores_answers_in_pareval_form(tmp_path):
    """`cudaperf bench --answers DIR --suite pareval`: DIR/<problem>.cu holds a kernel; without a GPU every one
    that gates and compiles is not_executed, one that defines the harness's entry fails to compile, and a
    problem without a file is missing."""
    import json

    from pipeline.cli import main as cudaperf
    from pipeline.scoring.bench import answer_files
    from pipeline.tasks.pareval import problem_kernels
    task = next(t for t in TASKS if t.pareval.problem == "03_dense_la_axpy")
    (tmp_path / "answers").mkdir()
    (tmp_path / "answers" / "03_dense_la_axpy.cu").write_text(problem_kernels(task)["naive"])
    assert answer_files(tmp_path / "answers", task) == [tmp_path / "answers" / "03_dense_la_axpy.cu"]
    out = tmp_path / "report"
    assert cudaperf(["bench", "--answers", str(tmp_path / "answers"), "--suite", "pareval", "--out", str(out),
                 "--config", "configs/local.yaml", "compile.workers=1"]) == 0
    report = json.loads((out / "report.json").read_text())
    by_task = {r["task"]: r["verdict"] for r in report["rows"]}
    assert by_task[task.id] == "not_executed"
    assert set(by_task.values()) - {"not_executed"} <= {"missing"} and len(by_task) == len(TASKS)
    # ParEval's numbers: the serial reference timed on this CPU; nothing ran on a GPU, so nothing passed
    par = report["pareval"]
    axpy = par["per_problem"]["03_dense_la_axpy"]
    assert axpy["config"] == "timed" and axpy["serial_s"] is None and axpy["valid"] == [False]
    assert par["metrics"]["all"]["pass@1"] == 0.0 and par["metrics"]["all"]["speedup@1"] == 0.0


def test_in_parevals_own_form_the_policy_sees_parevals_prompt_and_its_kernel_is_launched_for_it():
    from pipeline.rollout.parsing import parse_response
    from pipeline.rollout.prompts import entry_point, task_prompt
    from pipeline.tasks import load_tasks
    kernel_tasks = {t.id: t for t in load_tasks("pareval:kernel")}
    task = kernel_tasks["pareval/03_dense_la_axpy"]
    assert task.pareval.kernel_form and entry_point(task) == "axpy"
    assert not next(t for t in load_tasks("pareval") if t.id == task.id).pareval.kernel_form
    prompt = task_prompt(task)
    assert task.pareval.prompt.strip() in prompt and "axpy<<<dim3((N + 1023) / 1024), dim3(1024)>>>" in prompt
    assert "run_axpy" not in prompt  # the harness's entry is not the policy's business
    body = "    size_t i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < N) z[i] = alpha * x[i] + y[i];\n}"
    cand = parse_response(task, f"Here:\n```cuda\n{task.pareval.prompt.strip()}\n{body}\n```\n", turn=1)
    assert isinstance(cand, Candidate) and cand.format == "c2cuda" and cand.turn == 1
    assert WRAPPER_MARK in cand.code and 'extern "C" void run_axpy(' in cand.code
    wrong = parse_response(task, "```cuda\n__global__ void other(float* p) { }\n```", turn=0)
    assert wrong.verdict == "format_error" and "__global__ void axpy" in wrong.reason



@pytest.mark.gpu
@pytest.mark.parametrize("task", TASKS, ids=[t.id for t in TASKS])
def test_on_the_gpu_every_kernel_of_ours_passes_in_pareval_form_and_an_empty_one_fails(eval_cfg, compile_cfg, task):
    """The harness checked with answers of its own: each problem's kernels, launched as ParEval's driver
    launches them, are correct under the evaluator's protocol; a kernel that writes nothing is not."""
    from pipeline.tasks.pareval import problem_kernels
    ev = Evaluator(eval_cfg, compile_cfg, use_gpu=True)
    kernels = problem_kernels(task)
    empty = task.pareval.prompt.strip().splitlines()[-1] + "\n}\n"
    results = ev.evaluate(task, [kernel_candidate(task, k) for k in kernels.values()] + [kernel_candidate(task, empty)])
    for name, r in zip(kernels, results):
        assert r.verdict == "correct", f"{task.id}/{name}: {r.verdict}: {r.reason}"
        assert r.speedup and r.speedup > 0
    assert results[-1].verdict == "incorrect", results[-1].reason


def test_parevals_speedup_is_against_the_serial_reference_timed_here(tmp_path):
    from pipeline.scoring.bench import pareval_report
    from pipeline.scoring.metrics import Outcome
    from pipeline.core.config import RunConfig
    from pipeline.core.records import ConfigResult, EvalResult, Timing
    task = next(t for t in TASKS if t.pareval.problem == "03_dense_la_axpy")
    t = Timing(median_ms=2.0, iqr_ms=0.0, min_ms=2.0, trials=10)
    good = EvalResult(task_id=task.id, candidate_hash="a", format="c2cuda", verdict="correct",
                      configs=[ConfigResult(name="odd", time=Timing(median_ms=9.0, iqr_ms=0, min_ms=9, trials=1)),
                               ConfigResult(name="timed", time=t)])
    wrong = good.model_copy(update={"verdict": "incorrect", "candidate_hash": "b"})
    cfg = RunConfig.model_validate({"compile": {"cache_dir": str(tmp_path)}})
    report = pareval_report(cfg, [task], [Outcome(task.id, 0, 0, "correct"), Outcome(task.id, 1, 0, "incorrect")],
                            [good, wrong])
    row = report["per_problem"]["03_dense_la_axpy"]
    assert row["valid"] == [True, False] and row["runtimes_s"] == [0.002, None]
    # one of two samples valid: pass@1 1/2; speedup@1 over the valid one only (ParEval's definition)
    m = report["metrics"]["all"]
    assert m["pass@1"] == 0.5 and m["speedup@1"] == pytest.approx(row["serial_s"] / 0.002)


def test_no_configuration_can_be_passed_by_a_kernel_that_does_nothing(tmp_path):
    """In every configuration, timed ones included, each output differs beyond the tolerance from what a
    kernel that writes nothing leaves there (the value the harness fills it with, or an in-place input), so
    no answer can skip its work at one size and pass: ParEval's absolute bounds are loose beside some
    results (a closest-pair distance of 1e-5 under an allowance of 1e-4). Where the answer is a coin flip
    (is a value present), doing nothing may pass one input set, never four seeds' worth of them."""
    import numpy as np
    import torch

    from pipeline.evaluation.build.compile import Compiler
    from pipeline.evaluation.checks.comparison import compare
    from pipeline.evaluation.checks.reference_c import _c_call, _c_function, build_c2cuda
    compiler = Compiler(CompileSection(cache_dir=str(tmp_path)))

    def idle_passes(task, fn, seed: int, only=None) -> set[tuple[str, str]]:
        """(config, output) pairs where doing nothing passes on every input set of this seed."""
        group = build_c2cuda(task, seed=seed)
        fills = {f.arg: f.value.strip() for f in task.pareval.fill}
        pointer_args = [a for a in task.args if split_ctype(a.ctype)[1]]
        found = set()
        for cd in group.configs:
            for a, b in zip(pointer_args, cd.buffers):
                if only is not None and (cd.name, a.name) not in only:
                    continue
                if a.role != "inout" and fills.get(a.name) not in ("0", "0.0"):
                    continue  # poisoned before every call, or a fill (INT_MAX, N + 1) meaning "none found"
                passes = 0
                for inputs in cd.input_sets:
                    host, args = _c_call(group, cd, inputs)
                    fn(*args)
                    idle = inputs[b] if a.role == "inout" else np.zeros_like(host[b])
                    passes += compare(torch.from_numpy(np.ascontiguousarray(idle)), torch.from_numpy(host[b]),
                                      task.tolerance)[0]
                if passes == len(cd.input_sets):
                    found.add((cd.name, a.name))
        return found

    weak = []
    for task in TASKS:
        ref = compiler.compile_c_reference(task.reference)
        assert ref.ok, (task.id, ref.log[-500:])
        fn = _c_function(task, ref.artifact)
        suspects = idle_passes(task, fn, 1)
        for seed in (2, 3, 4):
            if suspects:
                suspects = idle_passes(task, fn, seed, suspects)
        weak += [f"{task.id} {config} {arg}" for config, arg in sorted(suspects)]
    assert not weak, weak
