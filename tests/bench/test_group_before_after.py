"""benchmarks/group_before_after.py: the group before and after in one report."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import group_before_after as gba  # noqa: E402


def run(rate: float, rows: dict) -> dict:
    verdicts: dict[str, int] = {}
    for r in rows.values():
        verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    return {"candidates_per_minute_per_gpu": rate, "verdicts": verdicts, "per_candidate": rows}


def test_the_later_runs_are_set_against_the_copies_before(tmp_path):
    before = {"machine": {"nvidia_smi": "H"}, "ours_group": run(50.0, {
        "t/sample0": {"verdict": "correct", "speedup": 2.0}, "t/sample1": {"verdict": "correct", "speedup": 4.0},
        "t/sample2": {"verdict": "incorrect", "speedup": None}})}
    after = {"machine": {"nvidia_smi": "H"}, "ours_group_rounds": run(300.0, {
        "t/sample0": {"verdict": "correct", "speedup": 2.02}, "t/sample1": {"verdict": "correct", "speedup": 3.0},
        "t/sample2": {"verdict": "correct", "speedup": 1.0}}),
        "ours_group_realistic_rounds": run(200.0, {"t/sample0": {"verdict": "compile_error", "speedup": None}}),
        "conventional": {"candidates_per_minute_per_gpu": 5.0}, "rate_ratio_ours_group_rounds": 60.0}
    (tmp_path / "b.json").write_text(json.dumps(before))
    (tmp_path / "a.json").write_text(json.dumps(after))
    assert gba.main([str(tmp_path / "b.json"), str(tmp_path / "a.json"), "--out", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    rounds = report["ours_group_rounds"]
    assert rounds["verdicts_differ_from_before"] == ["t/sample2"]
    ratio = rounds["speedup_ratio_to_before"]
    assert ratio["n"] == 2 and ratio["within_2pct"] == 1 and ratio["min"] == 0.75
    assert "speedup_ratio_to_before" not in report["ours_group_realistic_rounds"]  # other candidates: no pairs
    assert report["ours_group_before"]["candidates_per_minute_per_gpu"] == 50.0 and report["rate_ratio_ours_group_rounds"] == 60.0
    assert "ours_group_rounds" in gba.table(report)


def test_a_missing_run_is_one_sentence(tmp_path, capsys):
    assert gba.main([str(tmp_path / "none.json"), str(tmp_path / "a.json"), "--out", str(tmp_path / "r.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
