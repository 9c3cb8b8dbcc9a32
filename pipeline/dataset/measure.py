"""Dataset measurement: every implementation of a shard of tasks compiled, verified and timed on the GPU.

In: a task list (generated, built-in or a directory), a shard `K/N`, a time budget. Out: one
Parquet file per shard (`shard-K-of-N.parquet`, schema in `pipeline/tasks/measured.py`), one row
per (task, implementation, configuration), and a printed summary.

How it goes fast: implementations are compiled ahead of the GPU with many nvcc processes at once
(the evaluator's `Compiler` and its cache), all of a task's in one nvcc call and one library
(`data.batch_compile`; a task whose batch fails is built one implementation at a time), their
structural features computed as the evaluator computes them; then worker processes
(`measure_worker.py`) check and time many implementations each, in-process, since they are the
dataset's own trusted code. Several workers can share the GPU: checks overlap, timing is
exclusive (the evaluator's GPU lock).

How it stays safe: a crash, an illegal address or a hang ends only the worker; the supervisor
records the implementation that was running as failed, starts a fresh worker and measures the
task's other implementations again. A shard is assigned its tasks by a hash of their ids, so
the assignment never depends on which other tasks exist; the shard file is rewritten atomically
every `data.checkpoint_s` and at the end, and a rerun skips tasks whose rows (same task content)
are already in the output directory or in `data.measured_dir`. `--minutes` stops dispatching new
tasks when the budget is spent, finishes the tasks in flight and writes.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pipeline.core.config import RunConfig
from pipeline.dataset.measure_pool import MeasureError, Worker, WorkerPool
from pipeline.dataset.measure_worker import WORKER_CLASS, default_entry
from pipeline.tasks.measured import (MEASURED_DIR, REFERENCE_IMPL, REFERENCE_STRATEGY, SCHEMA, parquet_files,
                                    read_file, rows_to_table, write_table)
from pipeline.tasks.splits import split_of_task
from pipeline.core.records import Candidate, Task

MEASURED_FORMATS = ("c2cuda", "light")


# --- shards and what is already done -------------------------------------------------------------
def parse_shards(text: str) -> list[tuple[int, int]]:
    """'3/8' -> [(3, 8)]; '1,2,5/8' and '1-3/8' name several shards of N, measured one after the other."""
    try:
        ks, n = text.split("/")
        n, picks = int(n), []
        for part in ks.split(","):
            lo, _, hi = part.partition("-")
            picks += range(int(lo), int(hi or lo) + 1)
    except ValueError:
        raise MeasureError(f"--shard '{text}' is not K/N; write e.g. --shard 0/8, --shard 1,2/8 or --shard 1-7/8 "
                           "(shards 0 to N-1 of N)") from None
    if n < 1 or not picks or any(not 0 <= k < n for k in picks):
        raise MeasureError(f"--shard {text}: every K must be in 0..N-1 and N at least 1; e.g. --shard 0/8")
    return [(k, n) for k in dict.fromkeys(picks)]


def parse_shard(text: str) -> tuple[int, int]:
    """'3/8' -> (3, 8)."""
    shards = parse_shards(text)
    if len(shards) != 1:
        raise MeasureError(f"--shard {text} names {len(shards)} shards where one is expected; e.g. --shard 0/8")
    return shards[0]


def shard_of(task_id: str, n: int) -> int:
    """The shard of a task among n: a hash of its id, independent of every other task."""
    return int.from_bytes(hashlib.sha256(task_id.encode()).digest()[:8], "big") % n


def shard_path(out_dir: str | Path, k: int, n: int) -> Path:
    return Path(out_dir) / f"shard-{k:03d}-of-{n:03d}.parquet"


def done_keys(dirs: list[Path], retry_failed: bool) -> set[tuple[str, str]]:
    """(task_id, task_hash) of tasks measured in these directories; with retry_failed, only those
    whose every implementation was correct."""
    keys: set[tuple[str, str]] = set()
    for d in dirs:
        for f in parquet_files(d):
            t = read_file(f).select(["task_id", "task_hash", "correct"]).to_pylist()
            bad = {(r["task_id"], r["task_hash"]) for r in t if not r["correct"]}
            keys |= {(r["task_id"], r["task_hash"]) for r in t} - (bad if retry_failed else set())
    return keys


def tasks_of_shard(tasks: list[Task], k: int, n: int, done: set[tuple[str, str]]) -> tuple[list[Task], list[Task]]:
    """(every task of shard k of n, those not measured yet), both sorted by id."""
    mine = sorted((t for t in tasks if shard_of(t.id, n) == k), key=lambda t: t.id)
    return mine, [t for t in mine if (t.id, t.measured_hash()) not in done]


# --- compile ahead of the GPU -----------------------------------------------------------------------
@dataclass
class PreparedTask:
    task: Task
    artifacts: dict[str, str] = field(default_factory=dict)  # implementation -> shared library
    entries: dict[str, str] = field(default_factory=dict)    # implementation -> symbol to call in its library
    failures: dict[str, str] = field(default_factory=dict)   # implementation -> why it is not run
    features: dict[str, str] = field(default_factory=dict)   # implementation -> features JSON
    task_error: str = ""


def measured_impls(task: Task):
    return [i for i in task.implementations if i.format in MEASURED_FORMATS]


def prepare_task(task: Task, evaluator, batch_compile: bool = True) -> PreparedTask:
    """Compile every implementation (and the C reference), and compute its structural features
    exactly as the evaluator does for a candidate (`Evaluator.structure_features`).

    With batch_compile, the implementations are built together into one library (each with its
    share of the ptxas report, so the features are those of a build of its own); when that batch
    does not build, each is compiled alone, so a compile error is recorded against its source."""
    prep = PreparedTask(task)
    compiler = evaluator.compiler
    if task.kind == "c2cuda":
        ref = compiler.compile_c_reference(task.reference)
        if not ref.ok:
            prep.task_error = f"its C reference does not compile: {ref.log}"
    impls = measured_impls(task)
    plain = [default_entry(task, impl.format) for impl in impls]
    batch = compiler.compile_cuda_batch([impl.code for impl in impls], plain) if batch_compile else None
    for k, impl in enumerate(impls):
        comp = batch[k].result if batch is not None else compiler.compile_cuda(impl.code)
        if comp.unavailable:
            raise MeasureError(f"nvcc cannot run here ({comp.log}); install the CUDA toolkit or set compile.nvcc")
        if not comp.ok:
            prep.failures[impl.name] = f"compile error: {comp.log}"
            prep.features[impl.name] = "{}"
            continue
        prep.artifacts[impl.name] = comp.artifact
        prep.entries[impl.name] = batch[k].symbol if batch is not None else plain[k]
        features, _ = evaluator.structure_features(Candidate(task_id=task.id, code=impl.code, format=impl.format), comp)
        prep.features[impl.name] = json.dumps(features, sort_keys=True)
    return prep


# --- rows --------------------------------------------------------------------------------------------
@dataclass
class RowContext:
    gpu: dict
    generator_version: str
    split_seed: int


def task_rows(prep: PreparedTask, result: dict | None, skipped: dict[str, str], task_error: str,
              ctx: RowContext) -> list[dict]:
    """One row per (implementation, configuration), plus the PyTorch reference's rows (torch2cuda)."""
    from pipeline.evaluation.timing.statistics import summarize
    task = prep.task
    result = result or {"impls": {}, "reference": {}}
    task_error = task_error or prep.task_error
    common = {"task_id": task.id, "kind": task.kind, "family": task.family,
              "split": split_of_task(task, ctx.split_seed), "task_hash": task.measured_hash(),
              "measured_at": datetime.now(timezone.utc).replace(microsecond=0),
              "generator_version": ctx.generator_version, **ctx.gpu}
    rows = []

    def row(impl_name, strategy, fmt, cfg_name, correct, error, c, features):
        times = c.get("times_ms") if correct else None
        t = summarize(times) if times else None
        return dict(common, impl_name=impl_name, strategy=strategy, format=fmt, config=cfg_name, correct=correct,
                    max_error=c.get("max_error"), median_ms=t.median_ms if t else None, iqr_ms=t.iqr_ms if t else None,
                    min_ms=t.min_ms if t else None, trials=t.trials if t else 0, features_json=features, error=error)
    for impl in measured_impls(task):
        measured = result["impls"].get(impl.name, {})
        error = (f"task failed: {task_error}" if task_error else prep.failures.get(impl.name)
                 or skipped.get(impl.name) or measured.get("error", "not measured"))
        for cfg in task.configs:
            rows.append(row(impl.name, impl.strategy, impl.format, cfg.name, not error, error,
                            measured.get("configs", {}).get(cfg.name, {}), prep.features.get(impl.name, "{}")))
    if task.kind == "torch2cuda":
        for cfg in task.configs:
            times = result["reference"].get(cfg.name)
            rows.append(row(REFERENCE_IMPL, REFERENCE_STRATEGY, "pytorch", cfg.name, not task_error,
                            f"task failed: {task_error}" if task_error else "",
                            {"times_ms": times} if times else {}, "{}"))
    return rows


# --- the worker processes --------------------------------------------------------------------------
@dataclass
class Job:
    prep: PreparedTask
    skipped: dict[str, str] = field(default_factory=dict)  # implementation -> why (crashed in an earlier try)


@dataclass
class MeasureSummary:
    shard: str
    tasks_in_shard: int
    already_measured: int
    measured: int = 0
    failed_tasks: int = 0
    impls_correct: int = 0
    impls_failed: int = 0
    failures: list[str] = field(default_factory=list)
    rows_written: int = 0
    wall_s: float = 0.0
    path: str = ""
    complete: bool = False
    worker_restarts: int = 0
    compile_only: bool = False
    stage_s: dict = field(default_factory=dict)  # worker-seconds per stage, summed over the tasks measured
    starved_s: float = 0.0  # worker-seconds idle while tasks were still being compiled

    def lines(self) -> list[str]:
        rate = 60 * self.measured / self.wall_s if self.wall_s else 0.0
        what = "compiled" if self.compile_only else "measured"
        out = [f"shard {self.shard}: {self.tasks_in_shard} tasks, {self.already_measured} measured before, "
               f"{self.measured} {what} now in {self.wall_s:.0f} s ({rate:.1f} tasks/min)",
               f"implementations: {self.impls_correct} {'built' if self.compile_only else 'correct'}, "
               f"{self.impls_failed} failed; tasks failed: {self.failed_tasks}; worker restarts: {self.worker_restarts}"]
        if self.stage_s:
            parts = ", ".join(f"{k.replace('_', ' ')} {v:.0f} s" for k, v in self.stage_s.items())
            out.append(f"GPU workers (worker-seconds): {parts}; idle waiting for compiled tasks {self.starved_s:.0f} s")
        out += [f"  FAILED {f}" for f in self.failures[:30]]
        if len(self.failures) > 30:
            out.append(f"  ... and {len(self.failures) - 30} more failures (see the 'error' column)")
        if not self.compile_only:
            state = "complete" if self.complete else "INCOMPLETE: run the same command again to continue"
            out.append(f"wrote {self.rows_written} rows to {self.path or '(nothing)'} ({state})")
        return out


def measure_settings(cfg: RunConfig) -> dict:
    """The evaluator settings a worker runs with: the measurement's trial counts, no result cache."""
    d = cfg.data
    ev = cfg.eval.model_copy(update={"warmup_trials": d.measure_warmup_trials, "timing_trials": d.measure_trials,
                                     "timing_rounds": d.measure_rounds, "timing_budget_s": d.measure_budget_s,
                                     "result_cache_dir": "", "unprivileged_user": ""})
    return {"eval": ev.model_dump(), "compile": cfg.compile.model_dump()}


def _count(summary: MeasureSummary, rows: list[dict]) -> None:
    impls: dict[str, str] = {}
    for r in rows:
        if r["strategy"] != REFERENCE_STRATEGY:
            impls.setdefault(f"{r['task_id']}:{r['impl_name']}", r["error"])
    for key, error in impls.items():
        if error:
            summary.impls_failed += 1
            summary.failures.append(f"{key}: {error.splitlines()[0][:200]}")
        else:
            summary.impls_correct += 1
    if rows and any(r["error"].startswith("task failed") for r in rows):
        summary.failed_tasks += 1


def measure_shard(cfg: RunConfig, tasks: list[Task], shard: tuple[int, int], out_dir: str | Path,
                  minutes: float | None = None, retry_failed: bool = False, compile_only: bool = False,
                  generator_version: str = "", worker_class: str = WORKER_CLASS, require_gpu: bool = True,
                  log=print, pool: "WorkerPool | None" = None) -> MeasureSummary:
    """Measure the tasks of shard K/N not measured yet; see the module docstring. With `pool`, its
    workers measure (and stay open for the next shard); otherwise this call starts and closes its own."""
    from pipeline.evaluation.evaluator import Evaluator
    k, n = shard
    t0 = time.monotonic()
    deadline = t0 + minutes * 60 if minutes else float("inf")
    out_dir = Path(out_dir)
    measured_dir = Path(cfg.data.measured_dir) if cfg.data.measured_dir else MEASURED_DIR
    path = shard_path(out_dir, k, n)
    done = done_keys(list(dict.fromkeys([out_dir, measured_dir])), retry_failed)
    mine, todo = tasks_of_shard(tasks, k, n, done)
    summary = MeasureSummary(f"{k}/{n}", len(mine), len(mine) - len(todo), compile_only=compile_only)
    if not compile_only and require_gpu and todo:
        _require_gpu()
    redo = {t.id for t in todo}
    kept = [r for r in read_file(path).to_pylist() if r["task_id"] not in redo] if path.is_file() else []
    log(f"shard {k}/{n}: {len(mine)} tasks, {len(todo)} to measure ({summary.already_measured} already measured)")
    evaluator = Evaluator(cfg.eval.model_copy(update={"result_cache_dir": ""}), cfg.compile, use_gpu=False)
    compiler_threads = cfg.data.compile_workers or os.cpu_count() or 1
    queue, compiling, retry = deque(todo), deque(), deque()
    rows: list[dict] = []
    own_pool, restarts_before = pool is None, pool.restarts if pool is not None else 0
    last_write = last_log = time.monotonic()

    def write(complete: bool) -> None:
        if not rows and not kept:
            return
        table = rows_to_table(kept + rows) if (kept or rows) else SCHEMA.empty_table()
        write_table(table, path, {"shard": f"{k}/{n}", "complete": str(complete).lower(),
                                  "tasks_in_shard": str(len(mine))})
        summary.rows_written, summary.path = table.num_rows, str(path)

    def finished(new_rows: list[dict], stage_s: dict | None = None) -> None:
        rows.extend(new_rows)
        summary.measured += 1
        _count(summary, new_rows)
        for k, v in (stage_s or {}).items():
            summary.stage_s[k] = summary.stage_s.get(k, 0.0) + v

    with ThreadPoolExecutor(compiler_threads) as compilers:
        try:
            if not compile_only and todo:
                pool = pool or start_pool(cfg, worker_class)
                ctx = RowContext({c: pool.info[c] for c in ("gpu_name", "sm_clock_mhz", "mem_clock_mhz", "driver",
                                                             "cuda", "torch_version")},
                                 generator_version, cfg.data.split_seed)
            starving, tick = 0, time.monotonic()
            while todo:  # (nothing to do: straight to the summary)
                now = time.monotonic()
                summary.starved_s += starving * (now - tick)
                tick = now
                stopping = now > deadline
                while queue and not stopping and len(compiling) < cfg.data.lookahead_tasks:
                    task = queue.popleft()
                    compiling.append((task, compilers.submit(prepare_task, task, evaluator, cfg.data.batch_compile)))
                if stopping:  # no new task starts; those being compiled are dropped
                    for _, f in compiling:
                        f.cancel()
                    compiling.clear()
                if compile_only:
                    if not compiling:
                        break
                    prep = _prepared(*compiling.popleft())
                    summary.measured += 1
                    summary.impls_correct += len(prep.artifacts)
                    summary.impls_failed += len(prep.failures)
                    summary.failures += [f"{prep.task.id}:{i}: {e.splitlines()[0][:200]}" for i, e in prep.failures.items()]
                    continue
                for w in pool.idle():
                    job = retry.popleft() if retry else _next_prepared(compiling)
                    while job is not None and job.prep.task_error:  # nothing of it can run (e.g. its C reference)
                        finished(task_rows(job.prep, None, {}, "", ctx))
                        job = _next_prepared(compiling)
                    if job is None:
                        break
                    pool.submit(w, job)
                starving = len(pool.idle()) if compiling else 0  # tasks to come, none compiled yet
                if not pool.busy() and not retry and not compiling:
                    break
                if pool.busy():
                    events = pool.events(0.25)
                else:
                    _wait_first(compiling, 0.25)
                    events = []
                for w, msg in events:
                    _handle(pool, w, msg, retry, finished, ctx)
                now = time.monotonic()
                if now - last_log > 15:
                    rate = 60 * summary.measured / (now - t0)
                    log(f"shard {k}/{n}: {summary.measured}/{len(todo)} tasks, {rate:.1f} tasks/min, "
                        f"{summary.failed_tasks} failed, {pool.restarts} worker restarts")
                    last_log = now
                if now - last_write > cfg.data.checkpoint_s:
                    write(False)
                    last_write = now
        except BaseException:
            write(False)  # what is finished is kept; the rerun continues from there
            raise
        finally:
            if pool is not None:
                summary.worker_restarts = pool.restarts - restarts_before
                if own_pool:
                    pool.close()
    summary.wall_s = time.monotonic() - t0
    if not compile_only:
        measured_ids = {r["task_id"] for r in rows}
        summary.complete = all(t.id in measured_ids for t in todo)
        write(summary.complete)
        if not summary.path and path.is_file():
            summary.path, summary.complete = str(path), not todo
    return summary


def measure_shards(cfg: RunConfig, tasks: list[Task], shards: list[tuple[int, int]], out_dir: str | Path,
                   minutes: float | None = None, compile_only: bool = False, worker_class: str = WORKER_CLASS,
                   log=print, **kwargs) -> list[MeasureSummary]:
    """Several shards one after the other with one set of GPU workers (started once: each takes
    seconds to start); `minutes` is the budget of them all. Shards not started in time are not in
    the result: rerun the same command to continue."""
    deadline = time.monotonic() + minutes * 60 if minutes else None
    pool, summaries = None, []
    try:
        for shard in shards:
            left = None if deadline is None else (deadline - time.monotonic()) / 60
            if left is not None and left <= 0:
                log(f"time budget spent: shard {shard[0]}/{shard[1]} and later ones not started")
                break
            if pool is None and not compile_only and len(shards) > 1:
                if kwargs.get("require_gpu", True):
                    _require_gpu()
                pool = start_pool(cfg, worker_class)
            summaries.append(measure_shard(cfg, tasks, shard, out_dir, minutes=left, compile_only=compile_only,
                                           worker_class=worker_class, log=log, pool=pool, **kwargs))
    finally:
        if pool is not None:
            pool.close()
    return summaries


def _require_gpu() -> None:
    from pipeline.evaluation.gpu import driver as cuda_driver
    if cuda_driver.gpu_count() == 0:
        raise MeasureError("no NVIDIA GPU is visible to this process; run `cudaperf data measure` on a GPU host, "
                           "or add --compile-only to build and analyse the shard here")


def start_pool(cfg: RunConfig, worker_class: str = WORKER_CLASS) -> WorkerPool:
    """The measurement workers of `cfg.data` (gpu_workers, task_timeout_s, tasks_per_worker)."""
    d = cfg.data
    return WorkerPool(d.gpu_workers, measure_settings(cfg), worker_class, d.task_timeout_s, d.tasks_per_worker)


def _prepared(task: Task, future: Future) -> PreparedTask:
    """A finished compilation; an unexpected error in it fails that task only (nvcc missing stops all)."""
    try:
        return future.result()
    except MeasureError:
        raise
    except Exception as e:  # a task whose data our code cannot handle: recorded, the shard goes on
        return PreparedTask(task, task_error=f"preparing it failed: {type(e).__name__}: {e}")


def _next_prepared(compiling: deque) -> Job | None:
    """The first task whose compilation is done (any order: the GPU should never wait for one)."""
    for item in compiling:
        if item[1].done():
            compiling.remove(item)
            return Job(_prepared(*item))
    return None


def _wait_first(compiling: deque, timeout: float) -> None:
    from concurrent.futures import FIRST_COMPLETED
    from concurrent.futures import wait as wait_futures
    if compiling:
        wait_futures([f for _, f in compiling], timeout, return_when=FIRST_COMPLETED)


def _handle(pool: WorkerPool, w: Worker, msg: dict, retry: deque, finished, ctx: RowContext) -> None:
    """One message of a worker: progress, a result, or its end (which names the culprit)."""
    job = w.job
    if job is None:  # a late message of a worker already replaced
        return
    event = msg["event"]
    if event == "running":
        w.impl, w.stage = msg["impl"], msg["stage"]
        return
    if event in ("done", "task_failed"):
        w.job = None
        w.jobs_done += 1
        result = msg.get("result")
        finished(task_rows(job.prep, result, job.skipped, msg.get("error", "") if result is None else "", ctx),
                 (result or {}).get("stage_s"))
        pool.retire_if_used_up(w)
        return
    # fatal or died: the worker is gone or unusable
    culprit, stage = msg.get("impl", w.impl), msg.get("stage", w.stage)
    w.job = None
    pool.replace(w)
    task = job.prep.task
    base = task.baseline() if task.kind == "c2cuda" else None
    if culprit and stage in ("check", "time") and (base is None or culprit != base.name) \
            and culprit not in job.skipped:
        job.skipped[culprit] = f"crashed its process while {stage}: {msg['error']}"
        retry.appendleft(job)  # the task's other implementations are measured again in a fresh worker
        return
    finished(task_rows(job.prep, None, job.skipped, f"{msg['error']} (while {stage} {culprit or ''})".strip(), ctx))
