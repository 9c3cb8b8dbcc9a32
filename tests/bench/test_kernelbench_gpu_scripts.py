"""The GPU scripts benchmarks/kernelbench_baseline.py and kernelbench_memory.py on CPU: --help, and
their pure helpers (ratio summary, timing statistics, size ranking on the meta device)."""
import itertools
import math
from pathlib import Path

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
    memory.precompile(Evaluator(), [(1, p) for p in problems], answers)
    assert [(fmt, code) for _, fmt, code in compiled] == [("kernelbench", "class ModelNew: pass\n")]
    assert compiled[0][0].endswith(first.stem)
