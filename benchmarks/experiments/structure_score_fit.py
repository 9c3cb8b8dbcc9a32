"""Does the structural score track measured speed? Default weights against weights fitted on H200 times.

    python benchmarks/experiments/structure_score_fit.py [--results benchmarks/results/v1/evaluator_h200.json]
                                             [--measured pipeline/assets/measured]
                                             [--out benchmarks/results/v1/structure_score_fit.json]

Measured figures, two sets side by side: the evaluator benchmark's per-implementation speedups of
the built-in tasks on the H200 (within a task, time is proportional to 1 / speedup over the same
baseline), and the measured dataset (`--measured`: each correct implementation's geometric-mean
time over the task's timing configurations; only tasks whose generated code is still the code
that was measured). Features:
`analyze_source` on each implementation, with ptxas run here (nvcc), so only what exists before
the kernel runs; the roofline component (a measured quantity) is left out. A file's components
are the traffic-weighted mean over its kernels. Reported for the default weights and for weights
fitted with `fit_weights`, the latter leave-one-task-out (fitted on the other tasks, scored on the
held-out one): share of within-task pairs (time ratio >= 1.05) ordered correctly, and the mean
Spearman correlation within tasks between score and speed.
"""
from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipeline.structure.analyze import analyze_source  # noqa: E402
from pipeline.structure.score import (COMPONENTS, Sample, ScoreWeights, fit_weights, rank_agreement,  # noqa: E402
                                      structural_score, weights_dict)
from pipeline.tasks import load_tasks  # noqa: E402


def file_components(code: str) -> dict:
    a = analyze_source(code, arch="sm_90")
    total: dict[str, float] = {}
    norm: dict[str, float] = {}
    for k in a.kernels:
        w = 1.0 + k.traffic
        for c, v in k.components.items():
            if c == "roofline":
                continue
            total[c] = total.get(c, 0.0) + w * v
            norm[c] = norm.get(c, 0.0) + w
    return {c: total[c] / norm[c] for c in total}


def spearman(xs: list[float], ys: list[float]) -> float | None:
    import numpy as np
    from scipy.stats import spearmanr
    if len(xs) < 2 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    return float(spearmanr(np.array(xs), np.array(ys)).statistic)


def builtin_samples(results_path: str) -> tuple[list[Sample], str]:
    measured = json.loads(Path(results_path).read_text())
    tasks = {t.id: t for t in load_tasks("builtin")}
    samples: list[Sample] = []
    for key, r in measured["ours"]["per_candidate"].items():
        task_id, name = key.rsplit("/", 1)
        if r["verdict"] != "correct" or not r.get("speedup"):
            continue
        impl = next(i for i in tasks[task_id].implementations if i.name == name)
        samples.append(Sample(task_id, file_components(impl.code), 1.0 / r["speedup"]))
    return samples, measured["machine"]["nvidia_smi"]


def dataset_samples(measured_dir: str) -> tuple[list[Sample], str]:
    """Correct implementations of measured generated tasks whose code is unchanged since measurement."""
    import math
    from concurrent.futures import ProcessPoolExecutor

    from pipeline.tasks.measured import load_measurements
    rows = [r for r in load_measurements(measured_dir).to_pylist() if r["median_ms"] and r["strategy"] != "reference"]
    tasks = {t.id: t for t in load_tasks("generated")}
    times: dict[tuple[str, str], list[float]] = {}
    bad: set[tuple[str, str]] = set()
    for r in rows:
        task = tasks.get(r["task_id"])
        if task is None or task.measured_hash() != r["task_hash"]:
            continue
        key = (r["task_id"], r["impl_name"])
        if not r["correct"]:
            bad.add(key)
        times.setdefault(key, []).append(math.log(r["median_ms"]))
    keys = sorted(k for k in times if k not in bad)
    codes = [next(i.code for i in tasks[t].implementations if i.name == n) for t, n in keys]
    with ProcessPoolExecutor() as pool:
        comps = list(pool.map(file_components, codes, chunksize=8))
    samples = [Sample(t, c, math.exp(sum(times[(t, n)]) / len(times[(t, n)]))) for (t, n), c in zip(keys, comps)]
    gpu = rows[0]["gpu_name"] if rows else "none"
    return samples, gpu


def fit_report(samples: list[Sample], measured_on: str) -> dict:
    from pipeline.structure.score import _pairs
    by_task: dict[str, list[Sample]] = {}
    for s in samples:
        by_task.setdefault(s.task_id, []).append(s)
    npairs = {t: len(_pairs(items, 1.05)) for t, items in by_task.items()}  # rank_agreement's pairs, counted once

    def evaluate(weights_for) -> dict:
        rhos = []
        for tid, items in by_task.items():
            w = weights_for(tid)
            rho = spearman([structural_score(s.components, w) for s in items], [1.0 / s.time_ms for s in items])
            if rho is not None:
                rhos.append(rho)
        right = sum(rank_agreement(by_task[t], weights_for(t)) * n for t, n in npairs.items() if n)
        return {"pair_agreement": right / sum(npairs.values()), "mean_spearman_within_task": sum(rhos) / len(rhos),
                "tasks_with_rho": len(rhos)}

    fitted_all = fit_weights(samples)
    # held out by family: generated ids are kind/family/variant; a built-in task is its own family
    families = {t: t.rsplit("/", 1)[0] if t.count("/") >= 2 else t for t in by_task}
    held = {f: fit_weights([s for s in samples if families[s.task_id] != f]) for f in set(families.values())}
    return {
        "measured_on": measured_on, "implementations": len(samples), "tasks": len(by_task),
        "default": {"weights": weights_dict(ScoreWeights()), **evaluate(lambda t: ScoreWeights())},
        "fitted_held_out": evaluate(lambda t: held[families[t]]),
        "fitted_on_all": {"weights": weights_dict(fitted_all), **evaluate(lambda t: fitted_all)},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", default=str(ROOT / "benchmarks/results/v1/evaluator_h200.json"))
    ap.add_argument("--measured", default=str(ROOT / "pipeline/assets/measured"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/v1/structure_score_fit.json"))
    args = ap.parse_args()
    report = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "components": [c for c in COMPONENTS if c != "roofline"],
              "held_out": "builtin: each task held out in turn; dataset: each family held out in turn",
              "builtin": fit_report(*builtin_samples(args.results)),
              "dataset": fit_report(*dataset_samples(args.measured))}
    Path(args.out).write_text(json.dumps(report, indent=2))
    for name in ("builtin", "dataset"):
        rep = report[name]
        print(f"{name}: {rep['implementations']} implementations, {rep['tasks']} tasks ({rep['measured_on']})")
        for k in ("default", "fitted_held_out", "fitted_on_all"):
            r = rep[k]
            print(f"  {k:<18} pair agreement {r['pair_agreement']:.3f}  mean within-task Spearman "
                  f"{r['mean_spearman_within_task']:+.3f} over {r['tasks_with_rho']} tasks")
        print("  fitted weights:", {c: round(v, 3) for c, v in rep["fitted_on_all"]["weights"].items()
                                     if c in COMPONENTS})


if __name__ == "__main__":
    main()
