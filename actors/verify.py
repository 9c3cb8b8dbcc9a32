"""`cudaperf verify`: every known implementation of a task set through the compile and evaluator pools.

The job a new user runs first: it exercises the whole evaluation path on Ray (CPU compile
workers, one evaluator per GPU, supervised pools) and reports, per implementation, the verdict,
the speedup over the task's baseline and the time per configuration. On a machine without a GPU
the verdicts are `not_executed` (gated and compiled, never run); any other verdict there, or
anything but `correct` on a GPU, counts as a failure and the command exits non-zero.
"""
from __future__ import annotations

import json
import os
import platform
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import ray

from actors.evaluation import evaluate_groups, make_compiler_pool, make_evaluator_pool
from pipeline.config import RunConfig
from pipeline.rl.distributed import COLLECTIVE_ENV
from pipeline.records import Candidate
from pipeline.tasks import load_tasks


def ray_runtime_env() -> dict:
    """The runtime_env every ray.init of the project passes: COLLECTIVE_ENV in every worker Ray starts."""
    return {"env_vars": dict(COLLECTIVE_ENV)}


def start_ray(cpus_needed: int, num_gpus: int | None = None) -> None:
    """Join the cluster this job was submitted to, or start a local Ray sized for the pools (with
    `num_gpus`, Ray offers only that many of the host's GPUs). This process and every process Ray
    starts get COLLECTIVE_ENV (NVLink multicast off)."""
    os.environ.update(COLLECTIVE_ENV)
    if ray.is_initialized():
        return
    if os.environ.get("RAY_ADDRESS"):
        ray.init(log_to_driver=False, runtime_env=ray_runtime_env())
    else:
        ray.init(num_cpus=max(os.cpu_count() or 1, cpus_needed), num_gpus=num_gpus, include_dashboard=False,
                 log_to_driver=False, runtime_env=ray_runtime_env())


def evaluator_gpus(cfg: RunConfig) -> int:
    """GPUs given to evaluation: eval.gpus, or every GPU Ray sees when it is -1."""
    seen = int(ray.cluster_resources().get("GPU", 0))
    if cfg.eval.gpus > seen:
        raise ValueError(f"eval.gpus = {cfg.eval.gpus} but Ray sees {seen} GPU(s); lower eval.gpus or add GPU nodes")
    return seen if cfg.eval.gpus < 0 else cfg.eval.gpus


def verify_tasks(cfg: RunConfig, out_path: str | None = None) -> dict:
    tasks = [t for t in load_tasks(cfg.tasks.source, cfg.tasks.kernelbench_levels, cfg.data.split_seed)
             if t.kind in cfg.tasks.kinds]
    tasks = [t for t in tasks if t.implementations]
    start_ray(cfg.compile.workers + 1)
    n_gpus = evaluator_gpus(cfg)
    t0 = time.perf_counter()
    groups = [(t, [Candidate(task_id=t.id, code=i.code, format=i.format) for i in t.implementations]) for t in tasks]
    with make_compiler_pool(cfg.compile, cfg.eval.max_retries) as compilers, \
            make_evaluator_pool(cfg.eval, cfg.compile, n_gpus) as evaluators:
        results = evaluate_groups(compilers, evaluators, groups)
        restarts = compilers.restarts + evaluators.restarts
    wall = time.perf_counter() - t0
    expected = "correct" if n_gpus else "not_executed"
    rows = []
    for (task, _), group_results in zip(groups, results):
        if not isinstance(group_results, list):  # the pool's record of a group lost on every retry
            group_results = [group_results] * len(task.implementations)
        for impl, r in zip(task.implementations, group_results):
            if not hasattr(r, "verdict"):
                rows.append({"task": task.id, "implementation": impl.name, "verdict": "lost", "reason": str(r)})
                continue
            rows.append({"task": task.id, "implementation": impl.name, "strategy": impl.strategy,
                         "format": impl.format, "verdict": r.verdict, "reason": r.reason, "speedup": r.speedup,
                         "times_ms": {c.name: c.time.median_ms for c in r.configs if c.time},
                         "baseline_ms": {c.name: c.baseline_time.median_ms for c in r.configs if c.baseline_time},
                         "stage_s": r.stage_s, "gpu": r.gpu})
    verdicts = Counter(row["verdict"] for row in rows)
    summary = {"tasks": len(tasks), "implementations": len(rows), "gpus": n_gpus, "expected_verdict": expected,
               "verdicts": dict(verdicts), "failed": sum(n for v, n in verdicts.items() if v != expected),
               "wall_s": round(wall, 2), "actor_restarts": restarts,
               "candidates_per_minute": round(60 * len(rows) / wall, 1) if wall else None}
    report = {"summary": summary, "rows": rows, "machine": platform.node(),
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    path = Path(out_path) if out_path else Path(cfg.run.output_dir) / cfg.run.name / "verify.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))
    for row in rows:
        if row["verdict"] != expected:
            print(f"FAILED {row['task']}/{row['implementation']}: {row['verdict']}: {row['reason'][:300]}")
    print(f"report written to {path}")
    return report
