"""Dataset measurement on a real GPU: every built-in c2cuda and light implementation verified and
timed in worker processes, plus one implementation that kills its CUDA context (illegal address),
which must cost only itself. Prints the throughput. Run: python -m pytest -m gpu -q tests/dataset"""
import json
import time

import pytest

from pipeline.core.config import load_config
from pipeline.dataset import measure as M
from pipeline.tasks.measured import load_measurements

pytestmark = pytest.mark.gpu

ILLEGAL_ADDRESS = r'''
__global__ void bad_kernel(int n, const float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) ((float*)0x10)[i * 4096] = y[i];
}
extern "C" void saxpy(int n, float a, const float* x, float* y) {
    bad_kernel<<<(n + 255) / 256, 256>>>(n, y);
}
'''


@pytest.fixture(scope="module")
def measured(builtin_tasks, compile_cfg, tmp_path_factory):
    saxpy = builtin_tasks["c2cuda/saxpy"]
    bad = saxpy.implementations[1].model_copy(update={"name": "illegal_address", "strategy": "vectorized",
                                                      "code": ILLEGAL_ADDRESS})
    crashing = saxpy.model_copy(update={"id": "c2cuda/saxpy_with_crash", "family": "test_crash",
                                        "implementations": saxpy.implementations + [bad]})
    tasks = list(builtin_tasks.values()) + [crashing]
    out = tmp_path_factory.mktemp("measured")
    cfg = load_config(None, [f"compile.cache_dir={compile_cfg.cache_dir}", f"data.measured_dir={out}"])
    t0 = time.perf_counter()
    summary = M.measure_shard(cfg, tasks, (0, 1), out, generator_version="builtin")
    wall = time.perf_counter() - t0
    print("\n".join(summary.lines()))
    impls = sum(len(M.measured_impls(t)) for t in tasks)
    print(f"measured {len(tasks)} tasks, {impls} implementations in {wall:.1f} s "
          f"({60 * len(tasks) / wall:.1f} tasks/min, {impls / wall:.2f} implementations/s, compile included)")
    return tasks, summary, load_measurements(out).to_pylist()


def test_every_builtin_implementation_passes(measured):
    tasks, summary, rows = measured
    assert summary.complete and summary.measured == len(tasks)
    bad = sorted({f"{r['task_id']}:{r['impl_name']}: {r['error'][:300]}" for r in rows
                  if not r["correct"] and r["task_id"] != "c2cuda/saxpy_with_crash"})
    assert not bad, "\n".join(bad)
    assert len(rows) == sum((len(M.measured_impls(t)) + (t.kind == "torch2cuda")) * len(t.configs) for t in tasks)


def test_a_crashing_implementation_costs_only_itself(measured):
    _, summary, rows = measured
    mine = {(r["impl_name"], r["config"]): r for r in rows if r["task_id"] == "c2cuda/saxpy_with_crash"}
    assert summary.worker_restarts >= 1
    crash = [r for (impl, _), r in mine.items() if impl == "illegal_address"]
    assert all(not r["correct"] and ("ILLEGAL_ADDRESS" in r["error"] or "crashed" in r["error"]) for r in crash)
    others = [r for (impl, _), r in mine.items() if impl != "illegal_address"]
    assert others and all(r["correct"] for r in others)


def test_timings_and_metadata_are_sane(measured):
    tasks, _, rows = measured
    timed = [r for r in rows if r["median_ms"] is not None]
    timing_configs = {(t.id, c.name) for t in tasks for c in t.configs if c.time}
    assert {(r["task_id"], r["config"]) for r in timed} == timing_configs
    for r in timed:
        assert 0 < r["min_ms"] <= r["median_ms"] < 10_000 and r["iqr_ms"] >= 0 and r["trials"] >= 5, r
    untimed = [r for r in rows if (r["task_id"], r["config"]) not in timing_configs]
    assert all(r["median_ms"] is None for r in untimed)
    assert any(r["impl_name"] == "pytorch_eager" and r["median_ms"] for r in timed)
    assert {r["gpu_name"] for r in rows} and all(r["gpu_name"] and r["sm_clock_mhz"] > 0 and r["driver"] and r["cuda"]
                                                 for r in rows)
    feats = [json.loads(r["features_json"]) for r in rows if r["strategy"] != "reference" and r["correct"]]
    assert all(f.get("ptxas.registers_max", 0) > 0 and "occ.occupancy" in f for f in feats)
    sgemm = {r["impl_name"]: r["median_ms"] for r in timed if r["task_id"] == "c2cuda/sgemm"}
    assert sgemm["naive"] > 1.3 * min(v for k, v in sgemm.items() if k != "naive"), sgemm
