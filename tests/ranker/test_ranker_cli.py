"""`cudaperf rank train | eval` on a tiny measured table (the built-in tasks' real code, synthetic
features and times), through the project's Parquet reader."""
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.cli import main as cudaperf

from _synthetic import builtin_rows

TEST_FAMILIES = {"blas3_gemm", "softmax_rows", "transpose", "norm_layernorm", "pool_max2d", "loss_mse"}



def main(argv):  # `cudaperf rank ...`: the CLI reports user errors
    return cudaperf(["rank", *argv])


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory, builtin_tasks):
    from pipeline.tasks.measured import SCHEMA
    d = tmp_path_factory.mktemp("measured")
    rows = builtin_rows(list(builtin_tasks.values()), TEST_FAMILIES)
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), d / "shard-0.parquet")
    return d


@pytest.fixture(scope="module")
def common(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    return ["ranker.task_sources=[builtin]", "ranker.neural_epochs=8", "ranker.gbt_trees=40",
            f"ranker.feature_cache_dir={cache}"]


def test_train_then_eval_writes_checkpoints_and_report(tmp_path, table_dir, common, capsys):
    out = tmp_path / "ranker"
    held_out = ["--test-families", ",".join(sorted(TEST_FAMILIES))]  # the rows' split column is not read
    assert main(["train", "--data", str(table_dir), "--out", str(out), *held_out, *common]) == 0
    for kind in ("gbt", "neural"):
        manifest = json.loads((out / kind / "v0001" / "manifest.json").read_text())
        assert manifest["kind"] == kind and manifest["version"] == 1
        assert set(manifest["test_families"]) == TEST_FAMILIES
        assert manifest["metrics"]["train_pairs"] > 0
    assert main(["eval", "--data", str(table_dir), "--out", str(out), *common]) == 0
    report = (out / "report" / "report.md").read_text()
    for name in ("gbt", "neural", "heuristic:occupancy", "heuristic:transactions"):
        assert f"| {name} |" in report
    assert (out / "report" / "accuracy.png").stat().st_size > 1000
    metrics = json.loads((out / "report" / "metrics.json").read_text())["rankers"]
    assert metrics["gbt"]["pairs"] == metrics["heuristic:occupancy"]["pairs"] > 0
    assert "report:" in capsys.readouterr().out


def test_eval_cross_validation(tmp_path, table_dir, common):
    report = tmp_path / "cv"
    assert main(["eval", "--data", str(table_dir), "--cv", "3", "--rankers", "gbt", "--report", str(report),
                 *common]) == 0
    metrics = json.loads((report / "metrics.json").read_text())["rankers"]
    assert set(metrics) == {"gbt", "heuristic:occupancy", "heuristic:transactions", "heuristic:coalescing",
                            "heuristic:struct_score"}
    assert "3-fold cross-validation" in (report / "report.md").read_text()


def test_rows_of_a_task_changed_since_measurement_are_left_out(builtin_tasks):
    from pipeline.ranker.dataset import from_measurements
    rows = builtin_rows(list(builtin_tasks.values()), TEST_FAMILIES)
    changed = rows[0]["task_id"]
    for r in rows:
        if r["task_id"] == changed:
            r["task_hash"] = "0" * 16  # measured when the task's code was different
    data = from_measurements(rows, builtin_tasks)
    kept = {im.task_id for im in data.impls}
    assert changed not in kept and len(kept) == len({r["task_id"] for r in rows}) - 1


@pytest.mark.parametrize("argv, message", [
    ([], "argument train|eval: invalid choice: 'ranker.task_sources=[builtin]'"),
    (["train", "--rankers", "xgb"], "known rankers are gbt, neural"),
    (["eval", "--checkpoints", "/nonexistent/ckpt", "--data", "/nonexistent/measured"], "no ranker checkpoint"),
])
def test_user_errors_are_one_line(argv, message, capsys, common):
    assert main([*argv, *common[:1]]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_config_errors_name_the_key(capsys):
    assert main(["train", "ranker.min_gap=0.5"]) == 2
    assert "'ranker.min_gap' = 0.5" in capsys.readouterr().err


def test_missing_measurements_name_the_fix(tmp_path, capsys, common):
    assert main(["train", "--data", str(tmp_path / "empty"), *common]) == 2
    assert "cudaperf data measure" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["train"], ["eval", "--cv", "3"]])
def test_the_rank_commands_split_by_data_split_seed_not_the_run_seed(argv, monkeypatch, tmp_path):
    """The ranker holds out what RL holds out: the split seed is `data.split_seed`, whatever `run.seed` is."""
    import pipeline.ranker.fit as fit
    seen = []

    class Stop(Exception):
        pass

    def prepare_data(path, cfg, compile_cfg, test_families=None, split_seed=0, log=print):
        seen.append(split_seed)
        raise Stop
    monkeypatch.setattr(fit, "prepare_data", prepare_data)
    with pytest.raises(Stop):
        main([*argv, "--out", str(tmp_path), "run.seed=3", "data.split_seed=5"])
    assert seen == [5]
