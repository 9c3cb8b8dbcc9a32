"""The evaluator on a real GPU: known-correct candidates pass, known-bad ones get the right
verdict, and after each bad one the same evaluator still passes a correct one."""
import pytest

from bad_candidates import BAD
from pipeline.core.records import Candidate

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu_evaluator(eval_cfg, compile_cfg, builtin_tasks):
    """One evaluator for every test here; KernelBench-format builds (30-80 s each) are done up
    front, all at once, so the tests below hit the compile cache."""
    from concurrent.futures import ThreadPoolExecutor
    from pipeline.evaluation.build.compile import Compiler
    from pipeline.evaluation.evaluator import Evaluator
    compiler = Compiler(compile_cfg)
    sources = {b[3] for b in BAD if b[2] == "kernelbench"}
    sources |= {i.code for t in KNOWN_GOOD for i in builtin_tasks[t].implementations if i.format == "kernelbench"}
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(compiler.compile_kernelbench, sorted(sources)))
    return Evaluator(eval_cfg.model_copy(update={"run_timeout_s": 15.0}), compile_cfg, use_gpu=True)


KNOWN_GOOD = ["c2cuda/saxpy", "c2cuda/dot", "c2cuda/transpose", "c2cuda/gemv", "torch2cuda/relu",
              "torch2cuda/softmax", "torch2cuda/layernorm", "torch2cuda/linear", "torch2cuda/gelu",
              "torch2cuda/mse_loss"]


@pytest.mark.parametrize("task_id", KNOWN_GOOD)
def test_known_implementations_pass(gpu_evaluator, builtin_tasks, task_id):
    task = builtin_tasks[task_id]
    cands = [Candidate(task_id=task.id, code=i.code, format=i.format) for i in task.implementations]
    results = gpu_evaluator.evaluate(task, cands)
    for impl, r in zip(task.implementations, results):
        assert r.verdict == "correct", f"{task.id}/{impl.name} ({impl.format}): {r.verdict}: {r.reason}"
        assert r.speedup and r.speedup > 0
        timed = [c for c in r.configs if c.time is not None]
        assert timed and all(c.time.median_ms > 0 and c.baseline_time.median_ms > 0 for c in timed)
        assert {"gate", "compile", "load", "check", "timing"} <= set(r.stage_s)


@pytest.mark.parametrize("name,task_id,fmt,code,verdicts,where", BAD, ids=[b[0] for b in BAD])
def test_bad_candidate_then_good_one(gpu_evaluator, builtin_tasks, name, task_id, fmt, code, verdicts, where):
    task = builtin_tasks[task_id]
    good_impl = next(i for i in task.implementations if i.format == fmt)
    marker = "#" if fmt == "kernelbench" else "//"
    good = Candidate(task_id=task_id, code=good_impl.code + f"\n{marker} after {name}\n", format=fmt)
    bad, ok = gpu_evaluator.evaluate(task, [Candidate(task_id=task_id, code=code, format=fmt), good])
    assert bad.verdict in verdicts, f"{name}: got {bad.verdict}: {bad.reason}"
    assert bad.speedup is None
    assert ok.verdict == "correct", f"after {name}: {ok.verdict}: {ok.reason}"


def test_fake_success_output_is_ignored(gpu_evaluator, builtin_tasks):
    """A child that prints a success message on stdout and exits 0 is still a runtime error."""
    name, task_id, fmt, code, verdicts, _ = next(b for b in BAD if b[0] == "fake_success_and_exit")
    r = gpu_evaluator.evaluate(builtin_tasks[task_id], [Candidate(task_id=task_id, code=code, format=fmt)])[0]
    assert r.verdict == "runtime_error" and "ended" in r.reason
