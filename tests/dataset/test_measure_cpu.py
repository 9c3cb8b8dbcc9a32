"""Measurement up to the GPU: shards, resume, rows, compilation and features, the no-GPU error, and
the supervision of worker processes (a stand-in measurer crashes, hangs and fails on purpose)."""
import json

import pyarrow.parquet as pq
import pytest

from conftest import saxpy_variant
from pipeline.core.config import load_config
from pipeline.dataset import measure as M
from pipeline.tasks.measured import SCHEMA, load_measurements, read_file


pytestmark = pytest.mark.integration


@pytest.fixture
def cfg(compile_cfg, tmp_path):
    return load_config(None, [f"compile.cache_dir={compile_cfg.cache_dir}", f"data.measured_dir={tmp_path / 'repo'}",
                              "data.gpu_workers=2", "data.task_timeout_s=8", "data.compile_workers=2"])


def test_shard_arguments_and_assignment(builtin_tasks):
    assert M.parse_shard("3/8") == (3, 8)
    assert M.parse_shards("1,2,5/8") == [(1, 8), (2, 8), (5, 8)] and M.parse_shards("1-3,2/8") == [(1, 8), (2, 8), (3, 8)]
    for bad in ("8/8", "x", "1/0", "-1/4", "1-8/8", "/8"):
        with pytest.raises(M.MeasureError, match="--shard"):
            M.parse_shards(bad)
    with pytest.raises(M.MeasureError, match="one is expected"):
        M.parse_shard("1,2/8")
    tasks = list(builtin_tasks.values())
    shards = [M.tasks_of_shard(tasks, k, 5, set())[0] for k in range(5)]
    assert sorted(t.id for s in shards for t in s) == sorted(t.id for t in tasks)  # each task in exactly one
    # a task's shard depends on its id only, not on the other tasks
    assert M.tasks_of_shard(tasks[:3], 1, 5, set())[0] == [t for t in shards[1] if t in tasks[:3]]
    mine, todo = M.tasks_of_shard(tasks, 0, 1, {(tasks[0].id, tasks[0].measured_hash())})
    assert len(mine) == len(tasks) and tasks[0] not in todo and len(todo) == len(tasks) - 1


def test_task_hash_follows_the_code(saxpy):
    changed = saxpy.model_copy(update={"implementations": [saxpy.implementations[0].model_copy(
        update={"code": saxpy.implementations[0].code + "\n// changed\n"})] + saxpy.implementations[1:]})
    assert saxpy.measured_hash() == saxpy.model_copy(update={"source_path": "elsewhere.yaml"}).measured_hash()
    assert saxpy.measured_hash() != changed.measured_hash()


def test_prepare_compiles_and_computes_the_evaluators_features(saxpy, cfg):
    from pipeline.evaluation.evaluator import Evaluator
    from pipeline.core.records import Candidate
    ev = Evaluator(cfg.eval.model_copy(update={"result_cache_dir": ""}), cfg.compile, use_gpu=False)
    broken = saxpy.implementations[2].model_copy(update={"name": "broken", "code": "this is not CUDA"})
    task = saxpy.model_copy(update={"implementations": saxpy.implementations + [broken]})
    prep = M.prepare_task(task, ev)  # the batch fails on 'broken': each implementation is then built alone
    assert set(prep.artifacts) == {i.name for i in saxpy.implementations} and "compile error" in prep.failures["broken"]
    assert "candidate.cu" in prep.failures["broken"] and "error" in prep.failures["broken"]
    assert prep.entries == {i.name: "saxpy" for i in saxpy.implementations} and len(set(prep.artifacts.values())) == 3
    impl = saxpy.implementations[1]
    features = json.loads(prep.features[impl.name])
    comp = ev.compiler.compile_cuda(impl.code)
    assert features == json.loads(json.dumps(ev.structure_features(Candidate(task_id=task.id, code=impl.code,
                                                                     format=impl.format), comp)[0], sort_keys=True))
    assert features["ptxas.registers_max"] > 0 and "occ.occupancy" in features


def test_batch_compiled_features_equal_those_of_single_builds(cfg):
    """Per implementation, a batched build gives the features of a build of its own: the namespace
    and the cut ptxas report change nothing (the first task calls a libdevice function that ptxas
    reports apart from the kernels, after each kernel that calls it)."""
    from concurrent.futures import ThreadPoolExecutor

    from pipeline.tasks.generate import generate_tasks
    from pipeline.evaluation.evaluator import Evaluator
    ev = Evaluator(cfg.eval.model_copy(update={"result_cache_dir": ""}), cfg.compile, use_gpu=False)
    tasks = generate_tasks()
    picks = [next(t for t in tasks if t.id == "c2cuda/scatter/add_sin_into_double")]
    for kind, family in [("c2cuda", "gemm"), ("c2cuda", "stencil_2d"), ("torch2cuda", "softmax"),
                         ("torch2cuda", "conv2d"), ("torch2cuda", "sort_segments")]:
        picks.append(next(t for t in tasks if t.kind == kind and t.family == family))
    with ThreadPoolExecutor(2) as pool:
        batched = list(pool.map(lambda t: M.prepare_task(t, ev, batch_compile=True), picks))
        single = list(pool.map(lambda t: M.prepare_task(t, ev, batch_compile=False), picks))
    for task, b, s in zip(picks, batched, single):
        names = [i.name for i in M.measured_impls(task)]
        assert not b.failures and not s.failures and len(set(b.artifacts.values())) == 1, task.id
        entry = task.function if task.kind == "c2cuda" else "launch"
        assert b.entries == {n: f"cpbatch{k}z_{entry}" for k, n in enumerate(names)}
        assert s.entries == {n: entry for n in names}
        for n in names:
            assert json.loads(b.features[n]) == json.loads(s.features[n]), (task.id, n)
        assert json.loads(b.features[names[0]])["ptxas.registers_max"] > 0


def test_rows_follow_the_schema_and_record_failures(saxpy, cfg):
    prep = M.PreparedTask(saxpy, artifacts={i.name: "x.so" for i in saxpy.implementations},
                          features={i.name: "{}" for i in saxpy.implementations})
    ctx = M.RowContext({"gpu_name": "G", "sm_clock_mhz": 1, "mem_clock_mhz": 1, "driver": "d", "cuda": "c",
                        "torch_version": "t"}, "test", 0)
    result = {"impls": {"naive": {"error": "", "configs": {"large": {"passed": True, "max_error": 0.2,
                                                                      "times_ms": [2.0, 1.0, 3.0, 2.5, 1.5]}}}},
              "reference": {}}
    rows = M.task_rows(prep, result, {"coarsened_x4": "crashed"}, "", ctx)
    table = M.rows_to_table(rows)
    assert table.schema == SCHEMA and table.num_rows == 3 * len(saxpy.configs)
    naive_large = next(r for r in rows if r["impl_name"] == "naive" and r["config"] == "large")
    assert naive_large["correct"] and naive_large["median_ms"] == 2.0 and naive_large["min_ms"] == 1.0
    assert naive_large["trials"] == 5 and naive_large["split"] in ("train", "val", "test")
    crashed = [r for r in rows if r["impl_name"] == "coarsened_x4"]
    assert all(not r["correct"] and r["error"] == "crashed" and r["median_ms"] is None for r in crashed)
    unmeasured = [r for r in rows if r["impl_name"] == "grid_stride_vec4"]
    assert all(not r["correct"] and r["error"] == "not measured" for r in unmeasured)
    failed = M.task_rows(prep, None, {}, "C reference crashed", ctx)
    assert all(not r["correct"] and r["error"].startswith("task failed") for r in failed)


def test_without_a_gpu_measure_says_so(saxpy, cfg, tmp_path, monkeypatch):
    from pipeline.evaluation.gpu import driver as cuda_driver
    monkeypatch.setattr(cuda_driver, "gpu_count", lambda: 0)
    with pytest.raises(M.MeasureError, match="no NVIDIA GPU.*--compile-only"):
        M.measure_shard(cfg, [saxpy], (0, 1), tmp_path / "out")


def test_compile_only_builds_the_shard(saxpy, cfg, tmp_path):
    tasks = [saxpy_variant(saxpy, f"c2cuda/v{i}", f"fam{i}", ["naive", "vec", "coarse"]) for i in range(2)]
    s = M.measure_shard(cfg, tasks, (0, 1), tmp_path / "out", compile_only=True)
    assert s.measured == 2 and s.impls_correct == 6 and s.impls_failed == 0
    assert not (tmp_path / "out").exists()


def test_workers_survive_crashes_hangs_and_cuda_errors_and_reruns_resume(saxpy, cfg, tmp_path):
    tasks = [saxpy_variant(saxpy, "c2cuda/ok", "fam_ok", ["naive", "vec", "coarse"]),
             saxpy_variant(saxpy, "c2cuda/crashy", "fam_crash", ["naive", "crash_me", "coarse"]),
             saxpy_variant(saxpy, "c2cuda/hangs", "fam_hang", ["naive", "hang_me", "cudafail_me", "coarse"]),
             saxpy_variant(saxpy, "c2cuda/brokenref", "broken_reference", ["naive", "vec", "coarse"]),
             saxpy_variant(saxpy, "c2cuda/nocref", "fam_nocref", ["naive", "vec", "coarse"]).model_copy(
                 update={"reference": "void saxpy(int n, float a, const float* x, float* y) { oops }"})]
    out = tmp_path / "out"
    s = M.measure_shard(cfg, tasks, (0, 1), out, worker_class="fake_measurer:FakeMeasurer", require_gpu=False,
                        generator_version="test", log=lambda *_: None)
    assert s.complete and s.measured == 5 and s.worker_restarts == 3
    table = load_measurements(out)
    rows = table.to_pylist()
    by = {(r["task_id"], r["impl_name"], r["config"]): r for r in rows}
    assert len(rows) == sum(len(t.implementations) * len(t.configs) for t in tasks)
    assert by[("c2cuda/ok", "coarse", "large")]["median_ms"] == 3.0
    assert all(by[("c2cuda/ok", i, "small")]["correct"] for i in ("naive", "vec", "coarse"))
    assert "crashed its process" in by[("c2cuda/crashy", "crash_me", "large")]["error"]
    assert by[("c2cuda/crashy", "coarse", "large")]["correct"]  # measured again in a fresh worker
    assert "no result within" in by[("c2cuda/hangs", "hang_me", "small")]["error"]
    assert "ILLEGAL_ADDRESS" in by[("c2cuda/hangs", "cudafail_me", "small")]["error"]
    assert by[("c2cuda/hangs", "coarse", "large")]["correct"] and by[("c2cuda/hangs", "naive", "large")]["correct"]
    assert all(r["error"].startswith("task failed") for r in rows if r["task_id"] == "c2cuda/brokenref")
    nocref = [r for r in rows if r["task_id"] == "c2cuda/nocref"]
    assert nocref and all("C reference does not compile" in r["error"] for r in nocref)
    assert {r["gpu_name"] for r in rows} == {"Fake GPU"} and {r["generator_version"] for r in rows} == {"test"}
    meta = pq.read_schema(M.shard_path(out, 0, 1)).metadata
    assert meta[b"complete"] == b"true"
    again = M.measure_shard(cfg, tasks, (0, 1), out, worker_class="fake_measurer:FakeMeasurer", require_gpu=False,
                            log=lambda *_: None)
    assert again.measured == 0 and again.already_measured == 5 and again.complete
    retried = M.measure_shard(cfg, tasks, (0, 1), out, retry_failed=True, worker_class="fake_measurer:FakeMeasurer",
                              require_gpu=False, log=lambda *_: None)
    assert retried.measured == 4  # the four tasks with a failure; their old rows are replaced
    assert read_file(M.shard_path(out, 0, 1)).num_rows == len(rows)


def test_a_time_budget_stops_cleanly_and_the_rerun_finishes(saxpy, cfg, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_MEASURE_DELAY_S", "1.0")
    tasks = [saxpy_variant(saxpy, f"c2cuda/t{i}", f"fam{i}", ["naive", "vec", "coarse"]) for i in range(6)]
    out = tmp_path / "out"
    cfg1 = cfg.model_copy(update={"data": cfg.data.model_copy(update={"gpu_workers": 1})})
    first = M.measure_shard(cfg1, tasks, (0, 1), out, minutes=0.04, worker_class="fake_measurer:FakeMeasurer",
                            require_gpu=False, log=lambda *_: None)
    assert first.complete == (first.measured == 6)
    written = set(read_file(M.shard_path(out, 0, 1))["task_id"].to_pylist()) if first.measured else set()
    assert len(written) == first.measured
    second = M.measure_shard(cfg1, tasks, (0, 1), out, worker_class="fake_measurer:FakeMeasurer",
                             require_gpu=False, log=lambda *_: None)
    assert second.already_measured == first.measured and first.measured + second.measured == 6 and second.complete
    assert sorted(set(read_file(M.shard_path(out, 0, 1))["task_id"].to_pylist())) == sorted(t.id for t in tasks)


def test_several_shards_share_one_set_of_workers(saxpy, cfg, tmp_path, monkeypatch):
    tasks = [saxpy_variant(saxpy, f"c2cuda/t{i}", f"fam{i}", ["naive", "vec", "coarse"]) for i in range(6)]
    started, real = [], M.WorkerPool.__init__

    def counting(self, *a, **kw):
        started.append(1)
        real(self, *a, **kw)
    monkeypatch.setattr(M.WorkerPool, "__init__", counting)
    out = tmp_path / "out"
    summaries = M.measure_shards(cfg, tasks, [(0, 2), (1, 2)], out, worker_class="fake_measurer:FakeMeasurer",
                                 require_gpu=False, log=lambda *_: None)
    assert len(started) == 1 and [s.shard for s in summaries] == ["0/2", "1/2"]
    assert all(s.complete for s in summaries) and sum(s.measured for s in summaries) == 6
    for s in summaries:  # where the workers' time went, summed over each shard's tasks
        assert s.stage_s == {"check": 1.0 * s.measured, "time": 2.0 * s.measured} and s.starved_s >= 0
        assert any(line.startswith("GPU workers (worker-seconds): check") for line in s.lines())
    for k, s in zip(range(2), summaries):
        ids = set(read_file(M.shard_path(out, k, 2))["task_id"].to_pylist())
        assert ids == {t.id for t in M.tasks_of_shard(tasks, k, 2, set())[0]} and len(ids) == s.measured
