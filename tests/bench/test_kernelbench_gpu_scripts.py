"""The GPU scripts benchmarks/kernelbench_baseline.py and kernelbench_memory.py on CPU: --help, and
their pure helpers (ratio summary, timing statistics, size ranking on the meta device)."""
import itertools
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
KB = ROOT / "tests" / "data" / "kernelbench" / "KernelBench"


@pytest.fixture(scope="module")
def scripts(benchmark_script):
    return benchmark_script("kernelbench_baseline"), benchmark_script("kernelbench_memory")


def test_help_works_without_a_gpu(scripts, capsys):
    for script in scripts:
        with pytest.raises(SystemExit) as e:
            script.main(["--help"])
        assert e.value.code == 0
    assert "--budget-s" in capsys.readouterr().out


def test_timing_stats_and_ratio_summary(scripts):
    baseline, _ = scripts
    stats = baseline.timing_stats([1.0, 2.0, 3.0, 4.0], "GPU X", "cuda:0")
    assert stats == {"mean": 2.5, "std": float(f"{math.sqrt(1.25):.3g}"), "min": 1.0, "max": 4.0, "num_trials": 4,
                     "hardware": "GPU X", "device": "cuda:0"}
    ours = {"a.py": {"mean": 1.0}, "b.py": {"mean": 4.0}, "c.py": {"mean": 1.1}, "d.py": None, "e.py": {"mean": 1.0}}
    published = {"a.py": {"mean": 1.0}, "b.py": {"mean": 2.0}, "c.py": {"mean": 2.2}, "d.py": {"mean": 1.0}}
    s = baseline.ratio_summary(ours, published)
    assert s["ratios"] == {"a.py": 1.0, "b.py": 2.0, "c.py": 0.5} and s["n"] == 3
    assert s["not_compared"] == ["d.py", "e.py"]
    assert s["quantiles"]["0.5"] == 1.0 and s["quantiles"]["0"] == 0.5 and s["quantiles"]["0.25"] == 0.75
    assert s["outside_0.5_1.5"] == {"b.py": 2.0}  # 0.5 itself is inside
    assert s["geomean"] == pytest.approx(1.0)


def test_problem_selection(scripts):
    baseline, _ = scripts
    assert [f.name for f in baseline.problem_files(KB / "level1")] == ["1_Scaled_Tanh.py", "2_Row_Sum.py"]
    assert [f.name for f in baseline.problem_files(KB / "level1", "2")] == ["2_Row_Sum.py"]
    assert [f.name for f in baseline.problem_files(KB / "level1", "1_Scaled_Tanh")] == ["1_Scaled_Tanh.py"]


def test_size_ranking_on_meta(scripts, tmp_path):
    _, memory = scripts
    huge = (KB / "level1" / "1_Scaled_Tanh.py").read_text().replace("batch_size = 8", "batch_size = 4096") \
        .replace("features = 777", "features = 393216")  # 6 GiB in, 6 GiB out: never allocated here
    (tmp_path / "3_Huge_Tanh.py").write_text(huge)
    for f in (KB / "level1").glob("*.py"):
        (tmp_path / f.name).write_text(f.read_text())
    ranked = memory.largest_problems(tmp_path, 3)
    assert [f.name for f, _ in ranked] == ["3_Huge_Tanh.py", "1_Scaled_Tanh.py", "2_Row_Sum.py"]
    assert len(memory.largest_problems(tmp_path, 1)) == 1
    size = ranked[0][1]
    assert size["inputs"] == size["outputs"] == 4096 * 393216 * 4 and size["total"] == 2 * size["inputs"]
    row_sum = ranked[2][1]
    assert row_sum["inputs"] == 33 * 129 * 4 and row_sum["outputs"] == 33 * 4
    table = memory.format_table([{"problem": "level1/3_Huge_Tanh.py", "size": size, "kernelbench": {
        "max_allocated": 12 << 30, "max_reserved": 13 << 30, "device_used_peak": 14 << 30}}])
    assert "12.00" in table and "14.00" in table


def test_memory_sampler_keeps_the_peak(scripts):
    _, memory = scripts
    values = itertools.chain([5, 9, 7], itertools.repeat(3))
    with memory.DeviceMemorySampler(lambda: next(values), interval_s=0.0) as sampler:
        pass
    assert sampler.peak == 9


def test_inputs_are_made_on_the_device_itself_not_copied_there(scripts):
    baseline, _ = scripts
    import torch
    huge = (KB / "level1" / "1_Scaled_Tanh.py").read_text().replace("batch_size = 8", "batch_size = 4096") \
        .replace("features = 777", "features = 393216")  # 6 GiB: made on the meta device, never allocated
    context: dict = {}
    exec(compile(huge, "<problem>", "exec"), context)
    inputs = baseline.make_inputs(torch, context, torch.device("meta"), on_gpu=True)
    assert [x.device.type for x in inputs if isinstance(x, torch.Tensor)] == ["meta"]
    assert inputs[0].shape == (4096, 393216)


def test_the_memory_script_compiles_every_answer_once_before_measuring(scripts, tmp_path):
    _, memory = scripts
    problems = sorted((KB / "level1").glob("*.py"))[:2]
    answers = tmp_path / "answers"
    answers.mkdir()
    first = problems[0]
    (answers / f"level_1_problem_{first.name.split('_')[0]}_sample_0_kernel.py").write_text("class ModelNew: pass\n")
    assert memory.answer_path(answers, 1, first) is not None and memory.answer_path(answers, 1, problems[1]) is None
    compiled = []

    class Evaluator:
        def gate_and_compile(self, task, cand, comp):
            compiled.append((task.id, cand.format, cand.code))
            return SimpleNamespace(comp=SimpleNamespace(ok=True, extensions={"ext": "/built/ext.so"}))
    built = memory.precompile(Evaluator(), [(1, p) for p in problems], answers)
    assert [(fmt, code) for _, fmt, code in compiled] == [("kernelbench", "class ModelNew: pass\n")]
    assert compiled[0][0].endswith(first.stem)
    assert memory._extensions(built, 1, first) == {"ext": "/built/ext.so"}  # what KernelBench's side then loads
    assert memory._extensions(built, 1, problems[1]) is None


@pytest.fixture(scope="module")
def agreement(benchmark_script):
    return benchmark_script("kernelbench_agreement")


def test_agreement_help_works_without_a_gpu(agreement, capsys):
    with pytest.raises(SystemExit) as e:
        agreement.main(["--help"])
    assert e.value.code == 0 and "--original-sizes" in capsys.readouterr().out


def test_agreement_pairs_answers_with_problems_of_each_size_set(agreement, tmp_path):
    answers = tmp_path / "answers"
    answers.mkdir()
    for name in ("level_1_problem_2_sample_0_kernel.py", "level_1_problem_1_sample_0_kernel.py",
                 "level_2_problem_1_sample_0_kernel.py", "level_1_problem_9_sample_0_kernel.py", "notes.py"):
        (answers / name).write_text("class ModelNew: pass\n")
    found = agreement.answer_problems(answers, KB, [1, 2])
    assert [(lv, p.stem, a.name.split("_sample")[0]) for lv, p, a in found] == [
        (1, "1_Scaled_Tanh", "level_1_problem_1"), (1, "2_Row_Sum", "level_1_problem_2"),
        (2, "1_Linear_GELU", "level_2_problem_1")]  # problem 9 has no problem file here
    assert [p.stem for _, p, _ in agreement.answer_problems(answers, KB, [1], "2_Row_Sum")] == ["2_Row_Sum"]
    assert [p.stem for _, p, _ in agreement.answer_problems(answers, KB, [2], "1")] == ["1_Linear_GELU"]
    assert [(lv, p.stem) for lv, p, _ in agreement.answer_problems(answers, KB, [1, 2], "2/1")] == [
        (2, "1_Linear_GELU")]  # level/id: that level's problem only
    assert [(lv, p.stem) for lv, p, _ in agreement.answer_problems(answers, KB, [1, 2], "2/1,2,1/1")] == [
        (2, "1_Linear_GELU"), (1, "2_Row_Sum"), (1, "1_Scaled_Tanh")]  # in the order asked for


def test_spearman_and_agreement_summary(agreement):
    assert agreement.ranks([3.0, 1.0, 3.0, 2.0]) == [3.5, 1.0, 3.5, 2.0]
    assert agreement.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert agreement.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert agreement.spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]) == pytest.approx(0.8)  # 1 - 6*4/(5*24)
    assert agreement.spearman([1, 2], [1, 2]) is None and agreement.spearman([1, 1, 1], [1, 2, 3]) is None
    assert agreement.agreement(1.05, 1.0) == (pytest.approx(1.05), True)
    assert agreement.agreement(0.3, 0.93)[1] is False and agreement.agreement(None, 1.0) == (None, False)
    rows = [{"answer": "a", "sizes": "original", "speedup_ours": 1.0, "speedup_kernelbench": 1.05, "ratio": 0.95,
             "within": True, "verdict": "correct"},
            {"answer": "b", "sizes": "original", "speedup_ours": 0.3, "speedup_kernelbench": 0.93, "ratio": 0.32,
             "within": False, "verdict": "correct"},
            {"answer": "c", "sizes": "today", "speedup_ours": 2.0, "speedup_kernelbench": 2.1, "ratio": 0.95,
             "within": True, "verdict": "correct"},
            {"answer": "d", "sizes": "today", "error": "RuntimeError: out of memory", "within": False}]
    s = agreement.summarize(rows)
    assert (s["rows"], s["with_both_speedups"], s["within"]) == (4, 3, 2)
    assert s["spearman"] == pytest.approx(1.0)  # the same order on both sides, whatever the ratios
    assert [(o["answer"], o["why"]) for o in s["outside"]] == [
        ("b", "outside the tolerance (no trial shapes measured)"), ("d", "RuntimeError: out of memory")]
    text = agreement.table(rows)
    assert "level" not in text.splitlines()[0] and len(text.splitlines()) == 5 and "out of memory" in text


def test_runs_merge_into_one_report_with_the_median_figures_beside(agreement, tmp_path, capsys):
    def row(answer, ours, ref_mean, ref_median, ans=1.0, error=None):
        r = {"answer": answer, "sizes": "original", "speedup_ours": ours, "verdict": "correct",
             "kernelbench": {"reference": {"mean_ms": ref_mean, "median_ms": ref_median},
                             "answer": {"mean_ms": ans, "median_ms": ans}}, "speedup_kernelbench": ref_mean / ans}
        r["ratio"], r["within"] = agreement.agreement(ours, r["speedup_kernelbench"])
        return {"answer": answer, "sizes": "original", "error": error, "within": False} if error else r
    first = {"device": "H100", "command": "one", "rows": [row("a", 1.0, 2.5, 1.0), row("b", 2.0, 2.0, 2.0)]}
    second = {"device": "H100", "command": "two", "rows": [row("a", 0, 0, 0, error="budget"), row("c", 3.0, 3.0, 3.1)]}
    paths = []
    for k, run in enumerate((first, second)):
        paths.append(tmp_path / f"{k}.json")
        paths[-1].write_text(json.dumps(run))
    assert agreement.main(["--kernelbench-dir", "x", "--merge", *map(str, paths), "--out", str(tmp_path / "m.json")]) == 0
    merged = json.loads((tmp_path / "m.json").read_text())
    assert [r["answer"] for r in merged["rows"]] == ["a", "b", "c"] and merged["commands"] == ["one", "two"]
    assert "error" not in merged["rows"][0]  # a row that did not run keeps the one that did
    s = merged["summary"]
    assert s["within"] == 2 and s["within_median"] == 3  # a's mean is off by an outlier, its median agrees
    assert "against KernelBench's medians: 3" in capsys.readouterr().out


def scaled_tanh_answer():
    """An honest answer to the stand-in problem 1_Scaled_Tanh, as KernelBench's ModelNew."""
    import torch

    class ModelNew(torch.nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale

        def forward(self, x):
            return torch.tanh(x) * self.scale
    return ModelNew


def test_kernelbench_side_times_each_trial_shape_on_the_same_inputs(agreement):
    """The KernelBench side's flow on CPU with a stand-in timer: the answer and the reference each timed alone in
    every trial shape, the headline the chosen method's, the speedup KernelBench's (mean over mean)."""
    import torch
    ModelNew = scaled_tanh_answer()
    timed = []
    per_shape = {"current": ([0.2, 0.2, 0.5], [0.4] * 3), "original": ([0.1] * 3, [0.3] * 3),
                 "idle_launch": ([0.3] * 3, [0.5] * 3)}  # ms: calls short enough for every shape

    def times(fn, inputs, shape):
        timed.append((type(fn).__name__, shape))
        fn(*inputs)
        return per_shape[shape][0 if isinstance(fn, ModelNew) else 1]
    for method, speedup in (("current", 4.0 / 3.0), ("idle_launch", 5.0 / 3.0)):
        timed.clear()
        args = SimpleNamespace(warmup=3, trials=3, kernelbench_method=method)
        row = agreement.measure_kernelbench(torch, (KB / "level1" / "1_Scaled_Tanh.py").read_text(), "", {},
                                            torch.device("cpu"), args, times=times, new_cls=ModelNew)
        assert row["correct_kernelbench"] is True and row["method"] == method
        assert row["speedup"] == pytest.approx(speedup)
        assert row["shapes"]["original"]["speedup"] == pytest.approx(3.0)
        assert sorted(timed) == sorted((side, shape) for shape in agreement.SHAPES for side in ("ModelNew", "Model"))
    assert row["shapes"]["current"]["answer"]["mean_ms"] == pytest.approx(0.3)
    assert row["shapes"]["current"]["answer"]["median_ms"] == pytest.approx(0.2)


def test_long_calls_are_timed_in_the_headline_shape_only_unless_asked(agreement):
    """Where both calls take OTHER_SHAPES_BELOW_MS or more in the headline's shape, the other shapes are not timed
    and the row says so; a short call on either side, or --all-shapes, times all three."""
    import torch
    ModelNew = scaled_tanh_answer()
    long_ms = agreement.OTHER_SHAPES_BELOW_MS
    every = list(agreement.SHAPES)
    for answer_ms, all_shapes, timed_shapes in ((long_ms, False, ["current"]), (long_ms * 0.9, False, every),
                                                 (long_ms, True, every)):
        timed = []

        def times(fn, inputs, shape):
            timed.append(shape)
            return [answer_ms if isinstance(fn, ModelNew) else long_ms * 3] * 3
        args = SimpleNamespace(warmup=3, trials=3, kernelbench_method="current", all_shapes=all_shapes)
        row = agreement.measure_kernelbench(torch, (KB / "level1" / "1_Scaled_Tanh.py").read_text(), "", {},
                                            torch.device("cpu"), args, times=times, new_cls=ModelNew)
        assert sorted(set(timed)) == sorted(timed_shapes) and sorted(row["shapes"]) == sorted(timed_shapes)
        assert row["speedup"] == pytest.approx(long_ms * 3 / answer_ms)
        assert ("shapes_not_timed" in row) == (timed_shapes == ["current"])
    outside = {"answer": "a", "sizes": "today", "verdict": "correct", "speedup_ours": 1.0, "kernelbench": row}
    row.pop("shapes_not_timed", None)
    row["shapes"] = {"current": row["shapes"]["current"]}
    assert agreement.explain(outside) == "outside the tolerance (no trial shapes measured)"
    row["shapes_not_timed"] = "only the headline's trial shape"
    assert agreement.explain(outside) == "outside the tolerance (only the headline's trial shape)"


def test_a_row_outside_says_whether_the_trial_shape_explains_it(agreement):
    """Outside the tolerance of KernelBench's current harness but within it of KernelBench's tools in the
    evaluator's own trial shape: the row names the shape and the microseconds the hidden launch takes off each
    side; outside both: the row says it is not the shape; a failure says what failed."""
    def stats(ms):
        return {"mean_ms": ms, "median_ms": ms}

    def row(ours, shapes):
        kb = {"shapes": {k: {"answer": stats(a), "reference": stats(r), "speedup": r / a} for k, (a, r) in shapes.items()}}
        kb.update(answer=kb["shapes"]["current"]["answer"], reference=kb["shapes"]["current"]["reference"],
                  speedup=kb["shapes"]["current"]["speedup"])
        r = {"answer": "level_1_problem_19_sample_0_kernel.py", "sizes": "original", "verdict": "correct",
             "speedup_ours": ours, "kernelbench": kb, "speedup_kernelbench": kb["speedup"]}
        r["ratio"], r["within"] = agreement.agreement(ours, kb["speedup"])
        return r
    # the answer: 8 us of GPU work behind a 10 us launch; the reference 12 us behind 6 us
    shape_row = row(18 / 18, {"current": (0.008, 0.012), "idle_launch": (0.018, 0.018), "original": (0.006, 0.010)})
    why = agreement.explain(shape_row)
    assert shape_row["within"] is False and why.startswith("the trial's shape")
    assert "hides 10.0 us of the answer's 18.0 us and 6.0 us of the reference's 18.0 us" in why
    assert "1.67x" in why  # without a flush
    other = row(0.5, {"current": (0.008, 0.012), "idle_launch": (0.018, 0.018), "original": (0.006, 0.010)})
    other["ours"] = {"median_ms": 0.036, "baseline_median_ms": 0.018}
    why = agreement.explain(other)
    assert why.startswith("not the trial's shape: ours 0.5x against KernelBench's current 1.5x, original 1.67x")
    assert "the answer: ours 36.0 us against 18.0 us in the evaluator's shape" in why
    # between KernelBench's own shapes (1.0x to 1.67x, 10 % either side), yet 1.7 times the one in the evaluator's shape
    between = row(1.7, {"current": (0.008, 0.012), "idle_launch": (0.018, 0.018), "original": (0.006, 0.010)})
    assert agreement.explain(between).startswith("KernelBench's own trial shapes disagree on this answer")
    assert "1.67 apart" in agreement.explain(between)
    # shapes within 10 % of each other do not "disagree": 1.15x against 1.0-1.05x is not the shape's
    close = row(1.15, {"current": (0.010, 0.010), "idle_launch": (0.010, 0.010), "original": (0.010, 0.0105)})
    assert agreement.explain(close).startswith("not the trial's shape")
    # the evaluator's shape read faster than the current harness on one side (noise): nothing hidden, never < 0
    noisy = row(1.0, {"current": (0.012, 0.010), "idle_launch": (0.010, 0.0101), "original": (0.010, 0.010)})
    assert "hides nothing of the answer's 10.0 us and 0.1 us of the reference's" in agreement.explain(noisy)
    failed = {"answer": "x", "sizes": "today", "verdict": "incorrect", "within": False}
    assert agreement.explain(failed) == "our verdict is incorrect"
    unjudged = {**failed, "verdict": "evaluator_error", "ours": {"reason": "not judged: it needs about 87.8 GiB"}}
    assert agreement.explain(unjudged) == "our verdict is evaluator_error: not judged: it needs about 87.8 GiB"
    long = row(2.0, {"current": (0.5, 1.0), "idle_launch": (0.51, 1.01), "original": (0.5, 1.0)})
    s = agreement.summarize([shape_row, other, between, failed, long])
    assert [o["why"][:14] for o in s["outside"]] == ["the trial's sh", "not the trial'", "KernelBench's ", "our verdict is"]
    assert (s["shapes"]["idle_launch"]["rows"], s["shapes"]["idle_launch"]["within"]) == (4, 2)
    assert s["shapes"]["current"]["within"] == 1
    assert s["regimes"] == {"short": {"rows": 3, "within": 0}, "long": {"rows": 1, "within": 1}}
    degenerate = {**long, "answer": "level_1_problem_19_sample_0_kernel.py", "degenerate": "copying input0 passes"}
    s2 = agreement.summarize([shape_row, other, between, failed, long, degenerate])
    assert (s2["rows"], s2["within"], s2["regimes"]) == (s["rows"], s["within"], s["regimes"])
    assert s2["degenerate"] == [{"answer": degenerate["answer"], "sizes": "original", "why": "copying input0 passes"}]
    text = agreement.table([shape_row])
    assert "10 / 6" in text.splitlines()[1]
