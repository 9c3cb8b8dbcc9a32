"""Generated tasks on a real GPU: every implementation of a sample (one task per family by default)
is `correct` under the real Evaluator.

Run on the GPU host:
    python -m pytest -m gpu tests/dataset/test_generate_gpu.py -q -s
CUDAPERF_GEN_PER_FAMILY=N samples N tasks per family (default 1: one per family, c2cuda and
torch2cuda alternating; 2: one of each kind). The summary printed at
the end also reports, for the sample, the share of tasks whose two non-naive implementations
differ by at least 1.3x on some timing configuration (the dataset's done-criterion; reported here,
asserted on the measured dataset)."""
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from pipeline.dataset.checks import sample_tasks
from pipeline.tasks.generate import cached_tasks
from pipeline.core.records import Candidate

pytestmark = pytest.mark.gpu

PER_FAMILY = int(os.environ.get("CUDAPERF_GEN_PER_FAMILY", "1"))


def _sample():
    """PER_FAMILY tasks of every family: with 1, c2cuda and torch2cuda alternate between families
    (about 4 minutes on an H200); with N > 1, N // 2 (at least 1) of each kind."""
    per_kind = sample_tasks(list(cached_tasks(0)), per_group=max(1, PER_FAMILY // 2))
    if PER_FAMILY > 1:
        return per_kind
    by_family: dict[str, list] = {}
    for t in per_kind:
        by_family.setdefault(t.family, []).append(t)
    kinds = ("c2cuda", "torch2cuda")
    return [next((t for t in group if t.kind == kinds[k % 2]), group[0])
            for k, (_, group) in enumerate(sorted(by_family.items()))]


SAMPLE = _sample()
RESULTS: dict[str, list] = {}


@pytest.fixture(scope="module")
def evaluator(eval_cfg, compile_cfg):
    """A GPU evaluator with short timing (correctness is the point here); every implementation of the
    sample built up front, in parallel, so the evaluations hit the compile cache."""
    from pipeline.evaluation.build.compile import Compiler
    from pipeline.evaluation.evaluator import Evaluator
    compiler = Compiler(compile_cfg)
    sources = sorted({i.code for t in SAMPLE for i in t.implementations})
    with ThreadPoolExecutor(max(4, (os.cpu_count() or 8) - 2)) as pool:
        list(pool.map(compiler.compile_cuda, sources))
    cfg = eval_cfg.model_copy(update={"run_timeout_s": 60.0, "warmup_trials": 1, "timing_trials": 10,
                                      "timing_rounds": 1, "timing_budget_s": 0.5})
    return Evaluator(cfg, compile_cfg, use_gpu=True)


@pytest.mark.parametrize("task", SAMPLE, ids=[t.id for t in SAMPLE])
def test_every_implementation_is_correct(evaluator, task):
    cands = [Candidate(task_id=task.id, code=i.code, format=i.format) for i in task.implementations]
    results = evaluator.evaluate(task, cands)
    RESULTS[task.id] = list(zip(task.implementations, results))
    bad = [f"{i.name}: {r.verdict}: {r.reason}" for i, r in zip(task.implementations, results) if r.verdict != "correct"]
    assert not bad, f"{task.id}: " + "; ".join(bad)


def test_summary():
    """Prints the sample's verdicts and how far apart its non-naive implementations are; at least
    70 % of the tasks must have two non-naive implementations 1.3x apart (the dataset's criterion)."""
    assert RESULTS, "no task of the sample was evaluated: run this test together with the sample tests above"
    spread_ok = 0
    lines = []
    for task_id, pairs in sorted(RESULTS.items()):
        times: dict[str, dict[str, float]] = {}
        for impl, r in pairs:
            if impl.strategy != "naive" and r.verdict == "correct":
                times[impl.name] = {c.name: c.time.median_ms for c in r.configs if c.time}
        best = 1.0
        names = sorted(times)
        for a in names:
            for b in names:
                for cfg, ta in times[a].items():
                    tb = times[b].get(cfg)
                    if tb and ta > 0:
                        best = max(best, tb / ta)
        spread_ok += best >= 1.3
        correct = sum(r.verdict == "correct" for _, r in pairs)
        lines.append(f"{task_id}: {correct}/{len(pairs)} correct, widest non-naive ratio {best:.2f}x")
    print("\n" + "\n".join(lines))
    print(f"\nsample: {len(RESULTS)} tasks, {sum(len(p) for p in RESULTS.values())} implementations, "
          f"{sum(r.verdict == 'correct' for p in RESULTS.values() for _, r in p)} correct; "
          f"tasks with two non-naive implementations >= 1.3x apart: {spread_ok}/{len(RESULTS)} "
          f"({spread_ok / len(RESULTS):.0%})")
    assert spread_ok >= 0.7 * len(RESULTS), f"only {spread_ok} of {len(RESULTS)} sampled tasks have two " \
        "non-naive implementations at least 1.3x apart"
