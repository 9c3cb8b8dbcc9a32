"""cudaperf bench on CPU: ready answers (the tasks' own implementations) and a tiny model on the
built-in c2cuda tasks. Without a GPU every compiled answer is not_executed and never correct; the
report must still be complete."""
import json

import pytest

from pipeline.cli import main as cudaperf
from pipeline.scoring.bench import answer_files
from pipeline.core.records import Task
from pipeline.tasks import load_tasks

pytestmark = pytest.mark.slow
LIMIT = 3


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    """Every implementation of the first LIMIT built-in c2cuda tasks, but the first task's only
    under DIR/<id>.cu and the last one left out (missing)."""
    d = tmp_path_factory.mktemp("answers")
    tasks = [t for t in load_tasks("builtin") if t.kind == "c2cuda"][:LIMIT]
    first, middle = tasks[0], tasks[1]
    (d / f"{first.id}.cu").parent.mkdir(parents=True, exist_ok=True)
    (d / f"{first.id}.cu").write_text(first.baseline().code)
    (d / middle.id).mkdir(parents=True)
    for impl in middle.implementations:
        (d / middle.id / f"{impl.name}.cu").write_text(impl.code)
    broken = middle.baseline().code + "\n__global__ void broken_k(float* p) { p[threadIdx.x] = undeclared_value; }\n"
    (d / middle.id / "broken.cu").write_text(broken)
    return d, tasks


def test_answer_file_names(tmp_path):
    kb = Task(id="kernelbench/level1/19_ReLU", kind="torch2cuda", family="relu", reference="", configs=[])
    (tmp_path / "level_1_problem_19_sample_0_kernel.py").write_text("")
    (tmp_path / "level_1_problem_190_sample_0_kernel.py").write_text("")
    (tmp_path / "kernelbench__level1__19_ReLU.cu").write_text("")
    assert [p.name for p in answer_files(tmp_path, kb)] == ["kernelbench__level1__19_ReLU.cu",
                                                            "level_1_problem_19_sample_0_kernel.py"]


@pytest.mark.integration
def test_bench_answers_on_cpu(answers, tmp_path):
    d, tasks = answers
    out = tmp_path / "report"
    rc = cudaperf(["bench", "--answers", str(d), "--suite", "c2cuda", "--tasks", "builtin", "--limit", str(LIMIT),
               "--out", str(out), "--config", "configs/local.yaml", "compile.workers=1"])
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    s = report["summary"]
    n_middle = len(tasks[1].implementations) + 1
    assert s["tasks"] == LIMIT and s["samples"] == 1 + n_middle + 1
    assert s["verdicts"] == {"compile_error": 1, "missing": 1, "not_executed": n_middle}
    assert s["correct_rate"] == 0.0 and all(v == 0.0 for v in s["fast_p"].values())
    assert s["pass_at_k"]["pass@1"] == 0.0 and s["speedup"]["n"] == 0
    assert s["compile_rate"] == pytest.approx(n_middle / s["samples"]) and s["execute_rate"] == 0.0
    assert report["meta"]["baseline"] == "naive CUDA" and report["per_turn"][0]["turn"] == 1
    assert {r["verdict"] for r in report["rows"] if r["file"] and r["file"].endswith("broken.cu")} == {"compile_error"}
    assert (out / "fast_p_verdicts.png").stat().st_size > 1000


@pytest.mark.integration
def test_bench_tiny_model_multi_turn(tiny_dir, tmp_path):
    out = tmp_path / "model"
    rc = cudaperf(["bench", "--model", "tiny", "--suite", "c2cuda", "--tasks", "builtin", "--limit", "2", "--samples", "2",
               "--turns", "2", "--out", str(out), "--config", "configs/local.yaml", f"model.tiny_dir={tiny_dir}",
               "rollout.backend=transformers", "rollout.max_new_tokens=16", "compile.workers=1"])
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    assert report["summary"]["samples"] == 4 and report["summary"]["correct_rate"] == 0.0
    assert len(report["per_turn"]) == 2  # garbage never succeeds, so every episode runs both turns
    assert report["per_turn"][1]["samples_with_this_turn"] == 4
    assert {o["turn"] for o in report["outcomes"]} == {0, 1}
    assert (out / "per_turn.png").is_file()
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 8 and {(s["sample"], s["turn"]) for s in samples} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert all(s["verdict"] and s["response"] and s["finish_reason"] == "length" for s in samples)


def test_bench_errors(capsys):
    from pipeline.cli import main as cudaperf  # the CLI reports user errors, as one line each
    assert cudaperf(["bench", "--suite", "kernelbench", "--answers", "/nonexistent"]) == 2
    assert "--kernelbench-dir" in capsys.readouterr().err
    assert cudaperf(["bench", "--suite", "c2cuda", "--answers", "/nonexistent", "--tasks", "builtin"]) == 2
    assert "not a directory" in capsys.readouterr().err


@pytest.mark.integration
def test_bench_refuses_tasks_the_degeneracy_registry_does_not_vouch_for(tmp_path, capsys):
    import shutil
    from pipeline.core.assets import BUILTIN_DIR
    shutil.copy(BUILTIN_DIR / "c2cuda" / "saxpy.yaml", tmp_path / "saxpy.yaml")
    text = (tmp_path / "saxpy.yaml").read_text().replace("id: c2cuda/saxpy", "id: c2cuda/saxpy_copy")
    (tmp_path / "saxpy.yaml").write_text(text)
    answers = tmp_path / "answers"
    answers.mkdir()
    args = ["bench", "--answers", str(answers), "--suite", "c2cuda", "--tasks", str(tmp_path / "saxpy.yaml"),
            "--out", str(tmp_path / "out")]
    assert cudaperf(args) == 2
    err = capsys.readouterr().err
    assert "c2cuda/saxpy_copy (not in the registry)" in err and "data.allow_unchecked_tasks=true" in err
    assert cudaperf(args + ["data.allow_unchecked_tasks=true"]) == 0  # the user's explicit choice


@pytest.mark.integration
def test_bench_leaves_out_unvouched_tasks_and_runs_the_rest_of_its_suite(tmp_path, capsys):
    import shutil
    from pipeline.core.assets import BUILTIN_DIR
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    shutil.copy(BUILTIN_DIR / "c2cuda" / "saxpy.yaml", tasks / "saxpy.yaml")  # in the registry as it is
    text = (tasks / "saxpy.yaml").read_text().replace("id: c2cuda/saxpy", "id: c2cuda/saxpy_copy")
    (tasks / "saxpy_copy.yaml").write_text(text)
    answers = tmp_path / "answers"
    answers.mkdir()
    assert cudaperf(["bench", "--answers", str(answers), "--suite", "c2cuda", "--tasks", str(tasks),
                     "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "leaves out 1 task(s)" in out and "c2cuda/saxpy_copy (not in the registry)" in out
    report = (tmp_path / "out" / "report.json").read_text()
    assert "c2cuda/saxpy\"" in report and "saxpy_copy" not in report
