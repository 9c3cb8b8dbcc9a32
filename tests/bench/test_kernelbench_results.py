"""eval_results.json in KernelBench's layout, read back by a copy of KernelBench's own analysis, and
the reader of its published baseline timing files."""
import json
import os

import numpy as np
import pytest

from pipeline.scoring.bench import final_results, outcome_of
from pipeline.scoring.metrics import Outcome
from pipeline.scoring.kernelbench import (BaselineError, eval_results_by_level, load_baseline_times,
                                          published_comparison, write_eval_results)
from pipeline.core.records import ConfigResult, EvalResult, Timing

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * {k}


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''
NAMES = {1: "1_Scale.py", 2: "2_Scale_slow.py", 3: "3_Wrong.py", 4: "4_Broken.py", 5: "5_Missing.py",
         6: "6_Reference_fails.py", 10: "10_No_published_time.py"}
PUBLISHED_MS = {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0, 5: 1.0, 6: 1.0}  # problem 10 has no published time


# ---- a faithful copy of KernelBench's analysis (scripts/benchmark_eval_analysis.py, kernelbench/score.py) ----

def kb_fastp(is_correct, baseline_speed, actual_speed, n, p):
    filtered_baseline_speed = np.array([x for i, x in enumerate(baseline_speed) if is_correct[i]])
    filtered_actual_speed = np.array([x for i, x in enumerate(actual_speed) if is_correct[i]])
    speed_up = filtered_baseline_speed / filtered_actual_speed
    fast_p_score = np.sum(speed_up > p)
    return (fast_p_score / n) if n > 0 else 0


def kb_geometric_mean_speed_ratio_correct_only(is_correct, baseline_speed, actual_speed, n):
    filtered_baseline_speed = np.array([x for i, x in enumerate(baseline_speed) if is_correct[i]])
    filtered_actual_speed = np.array([x for i, x in enumerate(actual_speed) if is_correct[i]])
    speed_up = filtered_baseline_speed / filtered_actual_speed
    prod = np.prod(speed_up)
    n_correct = np.sum(is_correct)
    return (prod ** (1 / n_correct)) if n_correct > 0 else 0


def kb_dataset(problem_dir):
    """LocalKernelBenchDataset: problem id (file name prefix) -> file name."""
    return {int(f.split("_")[0]): f for f in os.listdir(problem_dir) if f.endswith(".py")}


def kb_analyze(eval_file_path, baseline_file_path, problem_dir, level):
    dataset = kb_dataset(problem_dir)
    with open(eval_file_path) as f:
        eval_results = json.load(f)
    with open(baseline_file_path) as f:
        baseline_results = json.load(f)
    total_count, total_eval = len(dataset), len(eval_results)
    stripped = {}
    for key, result in eval_results.items():
        entry = [r for r in result if r["sample_id"] == 0]
        assert len(entry) <= 1, "Multiple entries for sample_id = 0"
        if len(entry) == 1:
            stripped[key] = entry[0]
    eval_results = stripped
    for pid in sorted(dataset):  # patch
        if str(pid) not in eval_results:
            eval_results[str(pid)] = {"sample_id": 0, "compiled": False, "correctness": False, "metadata": {},
                                      "runtime": -1.0, "runtime_stats": {}}
    compiled_count = sum(e["compiled"] == True for e in eval_results.values())  # noqa: E712 (as written there)
    correct_count = sum(e["correctness"] == True for e in eval_results.values())  # noqa: E712
    is_correct, baseline_speed, actual_speed = [], [], []
    for pid in sorted(dataset):
        if str(pid) not in eval_results:
            continue
        entry = eval_results[str(pid)]
        if dataset[pid] not in baseline_results[f"level{level}"]:
            continue
        is_correct.append(entry["correctness"])
        actual_speed.append(entry["runtime"])
        baseline_speed.append(baseline_results[f"level{level}"][dataset[pid]]["mean"])
    is_correct, baseline_speed, actual_speed = np.array(is_correct), np.array(baseline_speed), np.array(actual_speed)
    n = len(is_correct)
    p_values = [0.0, 0.5, 0.8, 1.0, 1.5, 2.0]
    return {"total_count": total_count, "total_eval": total_eval, "compiled_count": compiled_count,
            "correct_count": correct_count, "n": n,
            "geo_mean_speedup": float(kb_geometric_mean_speed_ratio_correct_only(is_correct, baseline_speed,
                                                                                 actual_speed, n)),
            "fast_p": {str(p): float(kb_fastp(is_correct, baseline_speed, actual_speed, n, p)) for p in p_values}}


# ---- fixtures ---------------------------------------------------------------------------------------------

def timed(median_ms, baseline_ms=0.9):
    t = Timing(median_ms=median_ms, iqr_ms=0.0135, min_ms=median_ms * 0.9, trials=50)
    return [ConfigResult(name="seed0", passed=True), ConfigResult(name="seed1", passed=True),
            ConfigResult(name="timing", passed=True, time=t,
                         baseline_time=Timing(median_ms=baseline_ms, iqr_ms=0.01, min_ms=baseline_ms, trials=50))]


def result(pid, verdict, configs=(), reason="", speedup=None, stage=("gate", "compile")):
    return EvalResult(task_id=f"kernelbench/level1/{NAMES[pid][:-3]}", candidate_hash=f"h{pid}", format="kernelbench",
                      verdict=verdict, reason=reason, configs=list(configs), speedup=speedup, gpu="NVIDIA H200",
                      stage_s={s: 0.1 for s in stage}, compile_log="error: x undeclared" if verdict == "compile_error"
                      else "")


@pytest.fixture
def run(tmp_path):
    """Problems 1..6 and 10 of a level-1 directory, their published times, and one run over them:
    1 correct at 0.5 ms (sample 0) plus a runtime error (sample 1), 2 correct at 2.0 ms, 3 incorrect,
    4 compile error, 5 missing, 6 the evaluator's own failure, 10 correct at 0.25 ms (no published time)."""
    level_dir = tmp_path / "KernelBench" / "level1"
    level_dir.mkdir(parents=True)
    for pid, name in NAMES.items():
        (level_dir / name).write_text(PROBLEM.format(k=pid))
    hw = tmp_path / "results" / "timing" / "H100_Test"
    hw.mkdir(parents=True)
    published = {"level1": {NAMES[p]: {"mean": ms, "std": 0.01, "min": ms, "max": ms, "num_trials": 100,
                                       "hardware": "NVIDIA H100 80GB HBM3", "device": "cuda:0"}
                            for p, ms in PUBLISHED_MS.items()}}
    (hw / "baseline_time_torch.json").write_text(json.dumps(published))
    results = [(result(1, "correct", timed(0.5), speedup=1.8), 0),
               (result(1, "runtime_error", reason="illegal memory access", stage=("gate", "compile", "load")), 1),
               (result(2, "correct", timed(2.0), speedup=0.45), 0),
               (result(3, "incorrect", [ConfigResult(name="seed0", passed=False, max_error=40.0),
                                        ConfigResult(name="seed1", passed=True)], reason="seed0: mismatch"), 0),
               (result(4, "compile_error", reason="the candidate does not compile", stage=("gate",)), 0),
               (result(6, "not_executed", reason="compiled but not run: task kernelbench/level1/6_Reference_fails: "
                                                 "building inputs or running the reference failed: OOM"), 0),
               (result(10, "correct", timed(0.25), speedup=3.6), 0)]
    outcomes = [outcome_of(r, k, 0) for r, k in results]
    outcomes.insert(5, Outcome("kernelbench/level1/5_Missing", 0, 0, "missing"))
    return tmp_path, outcomes, [r for r, _ in results]


def test_eval_results_read_by_kernelbench_analysis(run):
    root, outcomes, results = run
    selected = final_results(outcomes, results)
    by_level = eval_results_by_level(selected)
    written = write_eval_results(root / "out", by_level)
    assert written == {1: root / "out" / "eval_results.json"}
    raw = json.loads(written[1].read_text())
    assert list(raw) == ["1", "2", "3", "4", "6", "10"]  # problem-id order, the missing answer left out
    assert [e["sample_id"] for e in raw["1"]] == [0, 1]
    for entries in raw.values():
        assert all(set(e) == {"sample_id", "compiled", "correctness", "metadata", "runtime", "runtime_stats"}
                   for e in entries)
    first = raw["1"][0]
    assert first["correctness"] and first["runtime"] == 0.5 and first["runtime_stats"]["mean"] == 0.5
    assert first["runtime_stats"]["num_trials"] == 50 and first["runtime_stats"]["std"] == pytest.approx(0.0135 / 1.349)
    assert first["metadata"]["correctness_trials"] == "(3 / 3)" and first["metadata"]["ref_runtime"] == 0.9
    assert raw["1"][1] == {**raw["1"][1], "compiled": True, "correctness": False, "runtime": -1.0, "runtime_stats": {}}
    assert raw["1"][1]["metadata"]["runtime_error"] == "illegal memory access"
    assert raw["3"][0]["metadata"]["correctness_trials"] == "(1 / 2)" and not raw["3"][0]["correctness"]
    assert raw["4"][0]["compiled"] is False and "undeclared" in raw["4"][0]["metadata"]["compilation_error"]
    failed = raw["6"][0]["metadata"]
    assert failed["excluded_from_cudaperf_summary"] and "reference failed" in failed["evaluator_error"]

    kb = kb_analyze(written[1], root / "results/timing/H100_Test/baseline_time_torch.json",
                    root / "KernelBench/level1", 1)
    assert kb["total_count"] == 7 and kb["total_eval"] == 6 and kb["n"] == 6  # problem 10: not in the baseline
    assert kb["compiled_count"] == 5 and kb["correct_count"] == 3  # 1, 2, 3, 6, 10 compiled; 1, 2, 10 correct
    assert kb["fast_p"] == {"0.0": pytest.approx(2 / 6), "0.5": pytest.approx(1 / 6), "0.8": pytest.approx(1 / 6),
                            "1.0": pytest.approx(1 / 6), "1.5": pytest.approx(1 / 6), "2.0": 0.0}
    assert kb["geo_mean_speedup"] == pytest.approx(1.0)  # sqrt(1.0/0.5 * 1.0/2.0)


def test_published_comparison_leaves_evaluator_failures_out(run):
    root, outcomes, results = run
    baseline = load_baseline_times(root / "results/timing/H100_Test/baseline_time_torch.json")
    cmp = published_comparison(final_results(outcomes, results), baseline)
    assert cmp["hardware"] == "H100_Test" and cmp["gpu"] == "NVIDIA H100 80GB HBM3"
    assert cmp["problems_with_time"] == 6 and cmp["problems_without_time"] == ["kernelbench/level1/10_No_published_time"]
    # judged tasks with a time: 1 (2.0x and a failure), 2 (0.5x), 3, 4, 5 (missing); 6 is the evaluator's failure
    assert cmp["fast_p"]["0"] == pytest.approx((1 / 2 + 1) / 5) and cmp["fast_p_best"]["0"] == pytest.approx(2 / 5)
    assert cmp["fast_p"]["1"] == pytest.approx((1 / 2) / 5) and cmp["fast_p"]["2"] == 0.0
    assert cmp["speedup"]["n"] == 2 and cmp["speedup"]["geomean"] == pytest.approx(1.0)
    row = next(r for r in cmp["problems"] if r["problem_id"] == 1)
    assert row["published_ms"] == 1.0 and row["live_baseline_ms"] == 0.9 and row["live_over_published"] == 0.9
    assert [s["speedup_published"] for s in row["samples"]] == [2.0, None]


def test_several_levels_get_a_file_each(tmp_path):
    r1 = EvalResult(task_id="kernelbench/level1/19_ReLU", candidate_hash="a", format="kernelbench", verdict="incorrect")
    r2 = EvalResult(task_id="kernelbench/level2/7_Conv", candidate_hash="b", format="kernelbench", verdict="correct")
    selected = [(r, outcome_of(r, 0, 0)) for r in (r1, r2)]
    written = write_eval_results(tmp_path, eval_results_by_level(selected))
    assert written == {1: tmp_path / "kernelbench_level1/eval_results.json",
                       2: tmp_path / "kernelbench_level2/eval_results.json"}
    assert json.loads(written[2].read_text())["7"][0]["runtime"] == -1.0  # correct but never timed


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_load_baseline_times(tmp_path):
    entry = {"mean": 2.5, "std": 0.1, "min": 2.4, "max": 2.9, "num_trials": 100, "hardware": "GPU X", "device": "cuda:0"}
    write(tmp_path / "results/timing/A/baseline_time_torch.json", {"level1": {"19_ReLU.py": entry, "20_X.py": None}})
    write(tmp_path / "results/timing/B/baseline_time_torch.json", {"level1": {"19_ReLU.py": {**entry, "mean": 5.0}}})
    write(tmp_path / "results/timing/B/baseline_time_torch_compile_inductor_default.json",
          {"level1": {"19_ReLU.py": {**entry, "mean": 1.0}}})
    a = load_baseline_times(tmp_path / "results/timing/A/baseline_time_torch.json")
    assert a.hardware == "A" and a.gpu == "GPU X" and a.mean_ms(1, "19_ReLU.py") == 2.5
    assert a.mean_ms(1, "20_X.py") is None and a.mean_ms(2, "19_ReLU.py") is None
    assert load_baseline_times(tmp_path / "results/timing/B").mean_ms(1, "19_ReLU.py") == 5.0
    assert load_baseline_times(tmp_path, "B").mean_ms(1, "19_ReLU.py") == 5.0
    compiled = load_baseline_times(tmp_path, "B", variant="baseline_time_torch_compile_inductor_default")
    assert compiled.mean_ms(1, "19_ReLU.py") == 1.0 and compiled.variant.endswith("inductor_default")
    with pytest.raises(BaselineError, match="several hardware .*A, B.*--baseline-hardware"):
        load_baseline_times(tmp_path)
    with pytest.raises(BaselineError, match="no baseline_time_torch.json for hardware 'C'; use one of A, B"):
        load_baseline_times(tmp_path / "results/timing", "C")
    with pytest.raises(BaselineError, match="does not exist"):
        load_baseline_times(tmp_path / "nowhere.json")
    with pytest.raises(BaselineError, match="is not JSON"):
        load_baseline_times(write(tmp_path / "bad.json", "{"))
    with pytest.raises(BaselineError, match="not in KernelBench's layout"):
        load_baseline_times(write(tmp_path / "flat.json", {"19_ReLU.py": entry}))
    with pytest.raises(BaselineError, match="level1/19_ReLU.py has no positive 'mean'"):
        load_baseline_times(write(tmp_path / "nomean.json", {"level1": {"19_ReLU.py": {"std": 1}}}))

