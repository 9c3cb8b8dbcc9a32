"""`cudaperf verify`: every known implementation of a task set through the compile and evaluator pools.

The job a new user runs first: it exercises the whole evaluation path on Ray (CPU compile
workers, one evaluator per GPU, supervised pools) and reports, per implementation, the verdict,
the speedup over the task's baseline and the time per configuration. On a machine without a GPU
the verdicts are `not_executed` (gated and compiled, never run); any other verdict there, or
anything but `correct` on a GPU, counts as a failure and the command exits non-zero.
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from pipeline.core.config import RunConfig, add_config_option, load_config
from pipeline.core.lost_work import ItemFailed
from pipeline.core.records import Candidate
from pipeline.tasks import select_tasks
from pipeline.tasks.degenerate import entry_of


def verify_tasks(cfg: RunConfig, cluster, out_path: str | None = None) -> dict:
    """Every implementation of the selected tasks through `cluster.evaluate_groups` (the compile and
    evaluator pools); writes and returns the report."""
    tasks = [t for t in select_tasks(cfg.tasks, cfg.data.split_seed) if t.implementations]
    t0 = time.perf_counter()
    groups = [(t, [Candidate(task_id=t.id, code=i.code, format=i.format) for i in t.implementations]) for t in tasks]
    print(f"verifying {sum(len(c) for _, c in groups)} implementations of {len(groups)} tasks; "
          "each task's verdicts come once all of its implementations compiled and ran", flush=True)
    finished = 0

    def progress(g: int, value) -> None:
        nonlocal finished
        finished += 1
        rows = [value] if isinstance(value, ItemFailed) else value
        verdicts = Counter("lost" if isinstance(r, ItemFailed) else r.verdict for r in rows)
        print(f"[{finished}/{len(groups)}] {groups[g][0].id}: "
              f"{', '.join(f'{v} {n}' for v, n in sorted(verdicts.items()))} ({time.perf_counter() - t0:.0f} s)",
              flush=True)
    results, n_gpus, restarts = cluster.evaluate_groups(groups, progress)
    wall = time.perf_counter() - t0
    expected = "correct" if n_gpus else "not_executed"
    rows = []
    for (task, _), group_results in zip(groups, results):
        if isinstance(group_results, ItemFailed):  # the group was lost on every retry
            group_results = [group_results] * len(task.implementations)
        for impl, r in zip(task.implementations, group_results):
            if isinstance(r, ItemFailed):
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
    fidelity = {t.id: (entry_of(t) or {"verdict": "unchecked", "reason": "not in the degeneracy registry: run "
                                      "cudaperf data degeneracy"}) for t in tasks}
    summary["degeneracy"] = dict(Counter(e["verdict"] for e in fidelity.values()))
    for task_id, e in fidelity.items():
        if e["verdict"] == "degenerate":
            print(f"DEGENERATE {task_id}: {e.get('reason', '')[:300]} (left out of training and benchmark aggregates)")
    report = {"summary": summary, "rows": rows, "degeneracy": fidelity, "machine": platform.node(),
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    path = Path(out_path) if out_path else Path(cfg.run.output_dir) / cfg.run.name / "verify.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))
    for row in rows:
        if row["verdict"] != expected:
            print(f"FAILED {row['task']}/{row['implementation']}: {row['verdict']}: {row['reason'][:300]}")
    print(f"report written to {path}")
    return report


HELP = "evaluate every known implementation of the task set"


def add_parser(commands) -> argparse.ArgumentParser:
    p = add_config_option(commands.add_parser("verify", help=HELP, description=HELP))
    p.add_argument("--out", default=None, help="write the JSON report here")
    return p


def run(args, open_cluster) -> int:
    cfg = load_config(args.config, args.overrides)
    from pipeline.commands.preflight import require_compiler
    require_compiler(cfg)  # no verdict without its compiler (or eval.allow_unbuilt)
    report = verify_tasks(cfg, open_cluster(cfg), out_path=args.out)
    print(json.dumps(report["summary"], indent=2))
    return 0 if report["summary"]["failed"] == 0 else 1
