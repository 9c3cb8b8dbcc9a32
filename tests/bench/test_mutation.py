"""The mutation campaign (benchmarks/mutation.py) on two built-in tasks, one of each kind: its mutants change
the result, the check catches every one of them, honest variants pass, and the worker pool survives a task
that fails."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.integration
def test_the_campaign_catches_every_result_changing_mutant_of_two_built_in_tasks(tmp_path):
    out = tmp_path / "mutation.json"
    proc = subprocess.run([sys.executable, "benchmarks/mutation.py", "--builtin", "--only",
                           "torch2cuda/scale_bias_sigmoid,c2cuda/dot", "--workers", "2", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    tasks = {r["task"]: r for r in report["tasks"]}
    assert set(tasks) == {"torch2cuda/scale_bias_sigmoid", "c2cuda/dot"}
    for r in tasks.values():
        assert "skipped" not in r, r
        changing = {k: v for k, v in r["mutants"].items() if v["changing"]}
        assert len(changing) >= 10, r["task"]
        missed = [k for k, v in changing.items() if not v["after"]]
        assert missed == [], (r["task"], missed)
        assert all(r["honest_passed"].values()) and "reference" in r["honest_passed"], r["honest_passed"]
    sbs = tasks["torch2cuda/scale_bias_sigmoid"]["mutants"]
    assert sbs["param_ones#0"]["changing"] or sbs["param_zeros#0"]["changing"]  # a parameter left out counts
    rows = {(row["class"], row["tasks"]): row for row in report["summary"]["rows"]}
    assert rows[("all", "all")]["after_rate"] == 1.0
    assert rows[("all", "all")]["after"] >= rows[("all", "all")]["before"]


def test_a_failing_task_is_listed_with_its_reason(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from mutation import one_task

    from pipeline.tasks import load_tasks
    task = next(t for t in load_tasks("builtin") if t.id == "torch2cuda/relu")
    broken = task.model_copy(update={"reference": task.reference.replace("def forward", "def forwardx")})
    row = one_task((broken.model_dump_json(), 1, 60, 1 << 24))
    assert row["task"] == "torch2cuda/relu" and "skipped" in row
