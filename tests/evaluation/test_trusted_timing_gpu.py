"""The trusted clock on a real GPU, with the static gate and artefact checks switched off: a candidate
that rewrites the harness of its own process (Python or native), memoises, counts calls, drifts or
changes behaviour by shape gets its true time or a failing verdict, never a reward it did not earn."""
import pytest

from timing_hacks import HONEST, TIMING_HACKS
from pipeline.core.records import Candidate

pytestmark = pytest.mark.gpu
FAILING = {"rejected", "incorrect", "runtime_error", "timeout"}


@pytest.fixture(scope="module")
def open_evaluator(eval_cfg, compile_cfg):
    """An evaluator whose static checks pass everything (only the run-time defences remain)."""
    from concurrent.futures import ThreadPoolExecutor
    from pipeline.evaluation import evaluator as ev_module
    from pipeline.evaluation.build.compile import Compiler
    compiler = Compiler(compile_cfg)
    sources = {h[3] for h in TIMING_HACKS if h[2] == "kernelbench"} | {HONEST["torch2cuda/relu"]["kernelbench"]}
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(compiler.compile_kernelbench, sorted(sources)))
    from pipeline.evaluation.build import artifact
    mp = pytest.MonkeyPatch()
    mp.setattr(ev_module, "check_candidate", lambda *a, **k: [])
    mp.setattr(artifact, "check_built", lambda *a, **k: [])
    yield ev_module.Evaluator(eval_cfg.model_copy(update={"run_timeout_s": 20.0}), compile_cfg, use_gpu=True)
    mp.undo()


@pytest.fixture(scope="module")
def honest_speedups(open_evaluator, builtin_tasks):
    out = {}
    for task_id, by_fmt in HONEST.items():
        for fmt, code in by_fmt.items():
            r = open_evaluator.evaluate(builtin_tasks[task_id], [Candidate(task_id=task_id, code=code, format=fmt)])[0]
            assert r.verdict == "correct", f"honest {task_id} {fmt}: {r.verdict}: {r.reason}"
            out[(task_id, fmt)] = r.speedup
    return out


@pytest.mark.parametrize("name,task_id,fmt,code", TIMING_HACKS, ids=[h[0] for h in TIMING_HACKS])
def test_timing_hack_gets_its_true_time_or_fails(open_evaluator, builtin_tasks, honest_speedups,
                                                 name, task_id, fmt, code):
    r = open_evaluator.evaluate(builtin_tasks[task_id], [Candidate(task_id=task_id, code=code, format=fmt)])[0]
    honest = honest_speedups[(task_id, fmt)]
    print(f"{name}: {r.verdict} speedup={r.speedup} honest={honest:.3f} flags={r.flags} reason={r.reason[:160]}")
    if r.verdict == "correct":
        assert r.speedup <= honest * 1.10, f"{name}: rewarded {r.speedup:.3f}x against an honest {honest:.3f}x"
    else:
        assert r.verdict in FAILING, f"{name}: {r.verdict}: {r.reason}"
        assert r.speedup is None


def test_every_timed_call_is_checked(open_evaluator, builtin_tasks):
    """The result records how many calls a batch had and what a batch costs besides them."""
    task = builtin_tasks["c2cuda/saxpy"]
    r = open_evaluator.evaluate(task, [Candidate(task_id=task.id, code=HONEST["c2cuda/saxpy"]["c2cuda"] + "\n// again\n",
                                                 format="c2cuda")])[0]
    timed = [c for c in r.configs if c.time is not None]
    assert r.verdict == "correct" and timed
    for c in timed:
        assert c.calls_per_batch >= 2 and c.batch_overhead_ms > 0 and c.time.trials >= 20
        assert c.floor_ms and c.time.median_ms > c.floor_ms
