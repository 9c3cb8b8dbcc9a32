"""`cudaperf bench --suite kernelbench --answers` end to end on CPU with a stand-in evaluation queue:
eval_results.json beside report.json, the published baseline, the gate profile and evaluator
failures kept apart from the candidates' verdicts."""
import json
from pathlib import Path

import pytest

from pipeline.scoring.bench import print_summary, run_bench
from pipeline.scoring.metrics import Outcome, final_outcomes, is_evaluator_failure, summarize, turn_curves
from pipeline.core.config import load_config
from pipeline.scoring.kernelbench import load_baseline_times
from pipeline.core.records import ConfigResult, EvalResult, Timing
from pipeline.tasks import load_kernelbench

KB = Path(__file__).resolve().parents[1] / "data" / "kernelbench"


class CannedQueue:
    """The evaluation WorkQueue interface, answering each candidate by the verdict named in its code."""

    def __init__(self):
        self.pending = []

    def submit(self, task, candidates):
        self.pending.append((task, candidates))
        return len(self.pending) - 1

    def next_completed(self, timeout_s=None):
        for ticket, item in enumerate(self.pending):
            if item is not None:
                self.pending[ticket] = None
                task, cands = item
                return ticket, [self.answer(task, c) for c in cands]
        raise AssertionError("nothing was submitted")

    @staticmethod
    def answer(task, cand):
        verdict = cand.code.split("verdict=")[1].split()[0]
        kw = {}
        if verdict == "correct":
            t = Timing(median_ms=0.25, iqr_ms=0.01, min_ms=0.24, trials=40)
            kw = {"configs": [ConfigResult(name="seed0", passed=True), ConfigResult(name="seed1", passed=True),
                              ConfigResult(name="timing", passed=True, time=t,
                                           baseline_time=Timing(median_ms=0.5, iqr_ms=0.01, min_ms=0.5, trials=40))],
                  "speedup": 2.0}
        reason = ("compiled but not run: task {}: building inputs or running the reference failed: OOM".format(task.id)
                  if verdict == "not_executed" else "")
        return EvalResult(task_id=task.id, candidate_hash=cand.content_hash(), format=cand.format, verdict=verdict,
                          reason=reason, gpu="NVIDIA H200", stage_s={"gate": 0.0, "compile": 0.1}, **kw)


def answer(d: Path, level: int, pid: int, sample: int, verdict: str) -> None:
    (d / f"level_{level}_problem_{pid}_sample_{sample}_kernel.py").write_text(f"# verdict={verdict}\nclass ModelNew: pass\n")


@pytest.fixture
def answers(tmp_path):
    d = tmp_path / "answers"
    d.mkdir()
    answer(d, 1, 1, 0, "correct")
    answer(d, 1, 1, 1, "incorrect")
    answer(d, 1, 2, 0, "not_executed")  # the reference failed: the evaluator's failure
    # level 2's only problem (1_Linear_GELU) has no answer: missing
    published = {"level1": {"1_Scaled_Tanh.py": {"mean": 1.0, "hardware": "H", "device": "cuda:0"},
                            "2_Row_Sum.py": {"mean": 1.0, "hardware": "H", "device": "cuda:0"}}}
    (tmp_path / "baseline.json").write_text(json.dumps(published))
    return d, tmp_path / "baseline.json"


def test_kernelbench_answers_report(answers, tmp_path, capsys):
    d, baseline = answers
    cfg = load_config("configs/local.yaml", ["eval.compile_baseline=true"])
    tasks = load_kernelbench(KB, [1, 2])
    report = run_bench(cfg, tasks, tmp_path / "out", suite="kernelbench", answers_dir=d, queue=CannedQueue(),
                       published=load_baseline_times(baseline))
    s, meta = report["summary"], report["meta"]
    assert meta["gate_profile"] == getattr(cfg.eval, "gate_profile", "strict")
    assert s["tasks"] == 3 and s["samples"] == 3
    assert s["verdicts"] == {"correct": 1, "incorrect": 1, "missing": 1}
    assert s["evaluator_failures"] == {"samples": 1, "verdicts": {"not_executed": 1}, "tasks_without_verdict": 1}
    assert s["correct_rate"] == pytest.approx(1 / 3) and s["fast_p"]["0"] == pytest.approx((1 / 2 + 0) / 2)
    assert all("peak_memory_bytes" in r for r in report["rows"] if r["verdict"] != "missing")
    partial = [json.loads(ln) for ln in (tmp_path / "out/rows.partial.jsonl").read_text().splitlines()]
    assert sorted(r["verdict"] for r in partial) == ["correct", "incorrect", "not_executed"]  # judged rows, as they came
    err = capsys.readouterr().err
    assert "judging 3 answers of 2 tasks (tasks without an answer: 1)" in err  # said before anything is judged
    assert "kernelbench/level1/1_Scaled_Tanh: correct" in err  # then a progress line per task

    one = json.loads((tmp_path / "out/kernelbench_level1/eval_results.json").read_text())
    two = json.loads((tmp_path / "out/kernelbench_level2/eval_results.json").read_text())
    assert list(one) == ["1", "2"] and [e["sample_id"] for e in one["1"]] == [0, 1] and two == {}
    assert one["1"][0]["runtime"] == 0.25 and one["2"][0]["metadata"]["excluded_from_cudaperf_summary"]
    assert meta["kernelbench_eval_results"]["level2"].endswith("kernelbench_level2/eval_results.json")
    assert json.loads((tmp_path / "out/report.json").read_text())["meta"]["kernelbench_eval_results"]

    pub = report["published_baseline"]
    assert pub["problems_with_time"] == 2 and pub["problems_without_time"] == ["kernelbench/level2/1_Linear_GELU"]
    # 1_Scaled_Tanh: 4x and incorrect; 2_Row_Sum: the evaluator's failure, left out
    assert pub["fast_p"]["2"] == pytest.approx(0.5) and pub["fast_p_best"]["2"] == 1.0

    print_summary(report)
    out = capsys.readouterr().out
    assert f"gate profile {meta['gate_profile']}" in out
    assert "evaluator failures (not the candidates'; left out of every rate): 1 samples, not_executed 1" in out
    assert "against the published baseline_time_torch times" not in out  # the file is named baseline.json
    assert "against the published baseline times" in out and "eval_results (level1)" in out


def o(task, sample, verdict, turn=0, failure=False, speedup=None):
    return Outcome(task, sample, turn, verdict, speedup, compiled=verdict != "compile_error",
                   executed=verdict in ("correct", "incorrect"), evaluator_failure=failure)


def test_evaluator_failures_left_out_of_rates():
    samples = [o("A", 0, "correct", speedup=2.0), o("A", 1, "not_executed", failure=True),
               o("B", 0, "evaluator_error", failure=True), o("C", 0, "compile_error")]
    s = summarize(samples)
    assert s["tasks"] == 3 and s["samples"] == 2 and s["verdicts"] == {"compile_error": 1, "correct": 1}
    assert s["evaluator_failures"] == {"samples": 2, "verdicts": {"evaluator_error": 1, "not_executed": 1},
                                       "tasks_without_verdict": 1}
    assert s["correct_rate"] == 0.5 and s["fast_p"]["1"] == 0.5 and s["pass_at_k"] == {"pass@1": 0.5}
    # a judged turn beats a later turn the evaluator failed on
    turns = [o("D", 0, "incorrect", 0), o("D", 0, "not_executed", 1, failure=True)]
    assert final_outcomes(turns)[0].turn == 0
    assert turn_curves([o("E", 0, "evaluator_error", failure=True)])[0]["correct_rate"] == 0.0


def test_is_evaluator_failure():
    assert is_evaluator_failure("evaluator_error", "")
    assert is_evaluator_failure("not_executed", "compiled but not run: task kernelbench/level1/1_X: its reference failed")
    assert is_evaluator_failure("not_executed", "checked, but not timed: task c2cuda/saxpy: timing the naive baseline")
    assert is_evaluator_failure("not_executed", "compiled but not run: the reference could not be built")
    assert not is_evaluator_failure("not_executed", "compiled but not run: no GPU is available to this evaluator")
    assert not is_evaluator_failure("runtime_error", "task exploded")


def test_baseline_json_errors(capsys, tmp_path):
    from pipeline.cli import main as cudaperf
    assert cudaperf(["bench", "--suite", "kernelbench", "--answers", str(tmp_path), "--kernelbench-dir", str(KB),
                     "--baseline-json", str(tmp_path / "none.json"),
                     "data.allow_unchecked_tasks=true"]) == 2  # the problems of tests/data are not in the registry
    assert "does not exist" in capsys.readouterr().err
    assert cudaperf(["bench", "--suite", "c2cuda", "--answers", str(tmp_path), "--tasks", "builtin",
                     "--baseline-json", str(tmp_path / "none.json")]) == 2
    assert "use it with --suite kernelbench" in capsys.readouterr().err
