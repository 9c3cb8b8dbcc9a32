"""SFT's held-out check: the new checkpoint sampled on held-out tasks, one turn, scored as `cudaperf bench`
scores a policy."""
from __future__ import annotations

from pathlib import Path

from pipeline.core.config import RunConfig
from pipeline.core.records import Task


def heldout_check(cfg: RunConfig, tasks: list[Task], checkpoint: Path, out: Path, open_cluster) -> dict:
    """Sample the new checkpoint on the held-out tasks (single turn) and report its rates (scoring/bench.py)."""
    from pipeline.scoring.bench import print_summary, run_bench

    bench_cfg = cfg.model_copy(update={
        "model": cfg.model.model_copy(update={"path": str(checkpoint)}),
        "rollout": cfg.rollout.model_copy(update={"samples_per_task": cfg.sft.heldout_samples_per_task,
                                                  "max_turns": 1})})
    report = run_bench(bench_cfg, tasks, out / "heldout_bench", suite=f"heldout:{cfg.sft.heldout_source}",
                       cluster=open_cluster(bench_cfg))
    print(f"held-out check on {cfg.sft.heldout_source}:")
    print_summary(report)
    s = report["summary"]
    return {k: s[k] for k in ("tasks", "samples", "verdicts", "compile_rate", "execute_rate", "correct_rate")}
