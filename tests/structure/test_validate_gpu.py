"""The H200 validation script: it imports, builds its probe and its ncu executables here (not run),
predicts what ncu should measure, and reads ncu's CSV."""
import json
import os

import pytest

from pipeline.structure import validate_gpu as V


@pytest.mark.integration
def test_builds_everything_without_running(tmp_path, nvcc):
    occ = V.build_occupancy_exe(str(tmp_path), "sm_90", nvcc)
    assert occ["ok"], occ["log"][-2000:]
    assert os.access(occ["exe"], os.X_OK)
    res = occ["resources"]
    assert len(res) == 25 and res["occ_1_0_1"].barriers == 16 and res["occ_1_12288_0"].shared_bytes == 49152
    assert res["occ_160_0_0"].registers > res["occ_16_0_0"].registers > res["occ_1_0_0"].registers
    assert V.OCC_SOURCE.count("int blocks[] = {32, 64, 96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 1024}") == 1
    assert len(res) * 13 * 5 >= 50  # kernels x block sizes x dynamic smem sizes compared on the GPU
    builds = V.build_ncu_executables(str(tmp_path), "sm_90", nvcc)
    assert len(builds) == len(V.KERNELS) >= 20
    assert all(b["ok"] for b in builds), [b["log"] for b in builds if not b["ok"]]
    assert all(os.access(b["exe"], os.X_OK) for b in builds)


def test_static_predictions_match_the_hand_labels():
    preds, source = V.static_predictions()
    assert source.startswith("static analysis")
    for name, _, _, _, classes, sectors, ways in V.KERNELS:
        p = preds[name]
        assert p["classes"] == classes and p["sectors"] == sectors and p["bank_ways"] == ways, name


NCU_CSV = '''==PROF== Connected to process 123 (/tmp/k_gather)
==PROF== Profiling "K" - 0: 0%....50%....100% - 1 pass
no error
==PROF== Disconnected from process 123
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","123","k_gather","127.0.0.1","K","1","7","(256, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics","l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio","sector","17.95"
"0","123","k_gather","127.0.0.1","K","1","7","(256, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum","","1,024"
'''


def test_parse_ncu_csv_and_compare():
    vals = V.parse_ncu_csv(NCU_CSV)
    assert vals[V.METRICS[0]] == 17.95 and vals[V.METRICS[2]] == 1024.0
    preds, _ = V.static_predictions()
    rows = V.coalescing_table(preds, {"gather": vals, "stride32": {V.METRICS[0]: 4.0},
                                      "smem_conflict": {V.METRICS[0]: 4.0, V.METRICS[2]: 0.0}})
    by = {r["kernel"]: r for r in rows}
    assert by["gather"]["agree"] is True and by["stride32"]["agree"] is False
    assert by["smem_conflict"]["bank_agree"] is False and by["coalesced"]["agree"] is None


def test_main_writes_json_when_everything_is_skipped(tmp_path, capsys):
    out = tmp_path / "v.json"
    assert V.main(["--out", str(out), "--skip-occupancy", "--skip-ncu"]) == 0
    d = json.loads(out.read_text())
    assert d["occupancy"] == [] and d["coalescing"] == [] and d["errors"] == []


def test_a_failing_step_is_reported_and_the_script_goes_on(tmp_path, capsys):
    out = tmp_path / "v.json"
    assert V.main(["--out", str(out), "--skip-occupancy", "--ncu", "/nonexistent/ncu", "--nvcc",
                   "/nonexistent/nvcc", "--workdir", str(tmp_path / "w")]) == 0
    d = json.loads(out.read_text())
    assert d["coalescing"] and all(r["error"] for r in d["coalescing"])


def _script(path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_occupancy_comparison_logic_with_a_stand_in_probe(tmp_path):
    """The probe's output format, as the H200 would print it, through the comparison (nothing runs on a GPU)."""
    lines = [
        '{"device": "NVIDIA H200", "cc": "9.0", "smem_per_sm": 233472, "smem_optin": 232448, "reserved": 1024, '
        '"regs_per_sm": 65536, "max_threads_per_sm": 2048, "max_blocks_per_sm": 32, "sms": 132}',
        '{"kernel": "k32", "regs": 32, "static_smem": 0, "max_threads": 1024, "block": 256, "dyn": 0, '
        '"blocks": 8, "err": "no error"}',
        '{"kernel": "k40", "regs": 40, "static_smem": 0, "max_threads": 1024, "block": 64, "dyn": 0, '
        '"blocks": 24, "err": "no error"}',
        '{"kernel": "k40", "regs": 40, "static_smem": 0, "max_threads": 1024, "block": 64, "dyn": 0, '
        '"blocks": 25, "err": "no error"}',
    ]
    exe = _script(tmp_path / "probe", "cat <<'EOF'\n" + "\n".join(lines) + "\nEOF\n")
    rows = V.run_occupancy({"exe": exe, "resources": {}}, "sm_90")
    assert rows[0]["device"]["cc"] == "9.0"
    assert [r["match"] for r in rows[1:]] == [True, True, False]
    bad = _script(tmp_path / "nogpu", 'echo \'{"error": "no device"}\'; exit 1\n')
    try:
        V.run_occupancy({"exe": bad, "resources": {}}, "sm_90")
    except RuntimeError as e:
        assert "no device" in str(e)
    else:
        raise AssertionError("a probe without a device must raise")


def test_ncu_runner_with_a_stand_in_ncu(tmp_path):
    fake_ncu = _script(tmp_path / "ncu", "cat <<'EOF'\n" + NCU_CSV + "EOF\n")
    out = V.run_ncu([{"name": "gather", "exe": "/bin/true", "ok": True, "log": ""},
                     {"name": "float4", "exe": "", "ok": False, "log": "nvcc: error"}], fake_ncu, 10)
    assert out["gather"][V.METRICS[0]] == 17.95 and "build failed" in out["float4"]["error"]
