"""Dataset figures from a small synthetic measurement table, the card, the loader and the data CLI."""
import pytest

from conftest import measurement_row as row
from pipeline.dataset.card import format_stats, measurement_stats, task_counts, write_card
from pipeline.tasks.measured import MeasurementsError, load_measurements, rows_to_table, write_table


def synthetic_rows():
    rows = []
    # task a: non-naive 1.0 and 2.0 ms on 'big' (2x apart: diverse); spread naive 4.0 / fastest 1.0 = 4x
    for impl, strategy, t in (("naive", "naive", 4.0), ("tiled", "tiled_shared", 1.0), ("vec", "vectorized", 2.0)):
        rows += [row("c2cuda/a", impl, strategy, "small", None), row("c2cuda/a", impl, strategy, "big", t)]
    # task b: non-naive 1.0 and 1.2 ms (not 1.3x apart); one implementation incorrect
    for impl, strategy, t in (("naive", "naive", 3.0), ("tiled", "tiled_shared", 1.0), ("vec", "vectorized", 1.2)):
        rows.append(row("c2cuda/b", impl, strategy, "big", t))
    rows.append(row("c2cuda/b", "bad", "warp_shuffle", "big", None, correct=False))
    # task c (torch2cuda): the reference at 2.0 ms, two light implementations 0.5 and 1.0 ms (2x: diverse)
    for impl, strategy, t in (("pytorch_eager", "reference", 2.0), ("naive", "naive", 1.0),
                              ("fast", "vectorized", 0.5), ("mid", "coalesced", 1.0)):
        rows.append(row("torch2cuda/c", impl, strategy, "big", t, kind="torch2cuda", family="fam_t"))
    return rows


def test_measurement_stats_on_a_synthetic_table():
    s = measurement_stats(rows_to_table(synthetic_rows()))
    assert s["tasks"] == 3 and s["implementations"] == 10 and s["correct"] == 9
    assert s["failed"] == ["c2cuda/b:bad"]
    assert s["spread_per_task"] == pytest.approx({"c2cuda/a": 4.0, "c2cuda/b": 3.0, "torch2cuda/c": 2.0})
    assert s["diverse_tasks"] == 2 and s["diverse_fraction"] == pytest.approx(2 / 3)
    by = s["speedup_by_strategy"]
    assert by["tiled_shared"]["median"] == pytest.approx(3.5)  # 4/1 and 3/1
    assert by["naive"]["median"] == pytest.approx(1.0)  # c2cuda naive over itself (1) and torch naive (2/1=2)
    assert by["vectorized"]["implementations"] == 3


def test_stats_table_and_card(builtin_tasks, tmp_path):
    tasks = list(builtin_tasks.values())
    counts = task_counts(tasks, 0, {"torch2cuda": 12, "level1_pattern": 5, "level2_pattern": 1})
    text = format_stats(counts, measurement_stats(rows_to_table(synthetic_rows())))
    lines = text.splitlines()
    assert "c2cuda tasks:       12" in lines and "torch2cuda tasks:   12" in lines
    assert f"families:           {len({t.family for t in tasks})}" in lines
    assert any(ln.startswith("kernelbench overlap: 6 of 12") for ln in lines)
    assert any("blas1_axpy" in ln for ln in lines)
    assert any("2 of 3 (66.7%)" in ln for ln in lines)
    card = write_card(tmp_path / "card", counts, measurement_stats(rows_to_table(synthetic_rows())), "builtin", "b")
    body = card.read_text()
    assert "c2cuda tasks:       12" in body
    for png in ("tasks_per_family.png", "spread.png", "speedup_by_strategy.png"):
        assert (tmp_path / "card" / png).stat().st_size > 1000 and f"({png})" in body


def test_loader_keeps_the_latest_measurement_of_a_task(tmp_path, later):
    old = synthetic_rows()
    new = [dict(r, measured_at=later, median_ms=r["median_ms"] and r["median_ms"] * 2) for r in old
           if r["task_id"] == "c2cuda/a"]
    write_table(rows_to_table(old), tmp_path / "shard-000-of-002.parquet")
    write_table(rows_to_table(new), tmp_path / "shard-001-of-002.parquet")
    t = load_measurements(tmp_path)
    a = [r for r in t.to_pylist() if r["task_id"] == "c2cuda/a"]
    assert len(a) == len(new) and all(r["measured_at"] == later for r in a)
    assert t.num_rows == len(old)  # other tasks untouched
    with pytest.raises(MeasurementsError, match="no measurement files"):
        load_measurements(tmp_path / "empty")


def test_data_cli_stats_build_and_errors(tmp_path, capsys):
    from pipeline.cli import main as cudaperf

    def main(argv):  # `cudaperf data ...`: the CLI reports user errors
        return cudaperf(["data", *argv])
    write_table(rows_to_table(synthetic_rows()), tmp_path / "m" / "shard-000-of-001.parquet")
    assert main(["stats", "--source", "builtin", "--measured", str(tmp_path / "m"), "--card", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert "c2cuda tasks:       12" in out and (tmp_path / "c" / "README.md").exists()
    # the synthetic rows name tasks that are not built-in ones: counted as stale, not as measured
    assert "3 measured tasks changed or were removed" in out and "measurements: none yet" in out
    assert main(["build", "--source", "builtin"]) == 1  # 24 tasks are far from the dataset's counts
    out = capsys.readouterr().out
    assert "FAIL  c2cuda tasks 12 >= 3000" in out and "PASS  every c2cuda task lists its naive baseline first" in out
    assert main(["stats", "--source", "no/such/dir"]) == 2
    assert "task source 'no/such/dir'" in capsys.readouterr().err
    assert main(["measure", "--source", "builtin", "--shard", "9/2"]) == 2
    assert "--shard 9/2" in capsys.readouterr().err


def test_only_rows_of_current_tasks_count(builtin_tasks):
    from pipeline.tasks.measured import current_rows
    saxpy, other = builtin_tasks["c2cuda/saxpy"], next(t for i, t in builtin_tasks.items() if i != "c2cuda/saxpy")
    rows = [row(saxpy.id, "naive", "naive", "big", 1.0, task_hash=saxpy.measured_hash()),
            row(other.id, "naive", "naive", "big", 1.0, task_hash="changed-since"),
            row("c2cuda/removed", "naive", "naive", "big", 1.0, task_hash="h")]
    kept, stale = current_rows(rows_to_table(rows), [saxpy, other])
    assert kept["task_id"].to_pylist() == [saxpy.id] and stale == 2
