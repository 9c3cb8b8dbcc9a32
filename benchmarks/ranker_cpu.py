"""CPU time of `cudaperf rank train` and `eval` at dataset scale, on synthetic measurements.

Builds a synthetic measured dataset of about N implementations (tests/ranker/_synthetic.py: the
features come with the rows, as features_json does in the real data), then times: pair
construction, GBT training, neural training (scratch encoder), and scoring/evaluation of the
held-out families. Writes benchmarks/results/v1/ranker_cpu.json with the machine and versions.

  .venv/bin/python benchmarks/ranker_cpu.py [--impls 10000] [--out benchmarks/results/v1/ranker_cpu.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "ranker"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--impls", type=int, default=10000)
    p.add_argument("--out", default=None, help="JSON file to write (default: a new file under benchmarks/results/v<evaluator version>/)")
    args = p.parse_args()
    import lightgbm
    import torch
    from _synthetic import synthetic_data
    from pipeline.core.config import RankerSection
    from pipeline.ranker.dataset import assign_splits
    from pipeline.ranker.pairs import make_pairs
    from pipeline.ranker.fit import evaluate_rankers, train_split
    families = max(4, args.impls // (6 * 5))
    t0 = time.perf_counter()
    data = synthetic_data(n_families=families, tasks_per_family=5, seed=1)
    test = [f for i, f in enumerate(data.families()) if i % 7 == 0]
    assign_splits(data, test)
    phases = {"make_data_s": time.perf_counter() - t0}
    cfg = RankerSection()
    t0 = time.perf_counter()
    pairs = make_pairs(data, cfg.min_gap)
    phases["pairs_s"] = time.perf_counter() - t0
    trained = train_split(data, cfg, ["gbt", "neural"], seed=0)
    for kind, (_, m) in trained.items():
        phases[f"train_{kind}_s"] = m["train_s"]
    t0 = time.perf_counter()
    results = evaluate_rankers(data, {k: r for k, (r, _) in trained.items()}, cfg.min_gap)
    phases["evaluate_s"] = time.perf_counter() - t0
    out = {
        "machine": {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
                    "torch": torch.__version__, "lightgbm": lightgbm.__version__,
                    "date": datetime.now(timezone.utc).isoformat(timespec="seconds")},
        "implementations": len(data.impls), "tasks": len(data.tasks), "families": len(data.families()),
        "pairs": len(pairs), "phases": {k: round(v, 2) for k, v in phases.items()},
        "total_s": round(sum(phases.values()), 2),
        "held_out_accuracy": {n: round(m["accuracy"], 4) for n, m in results.items()},
    }
    if args.out is None:
        from benchmarks.results_path import fresh_result_path
        args.out = str(fresh_result_path("ranker_cpu.json"))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
