"""Evaluation of rankers on held-out pairs: accuracy by gap bucket and pair kind, Kendall tau within tasks.

In: a `RankData` (the held-out implementations), its `Pair`s, and one score per implementation
from each ranker. Out: a metrics dict per ranker, and a report directory (`report.md` with the
tables, `accuracy.png`, `metrics.json`).

- Pairwise accuracy: the share of pairs whose faster implementation scores higher (a tie counts
  one half), per gap bucket [1.2, 1.5), [1.5, 2), [2, inf), and for gap >= 1.5 (the goal), each
  for `strategy` pairs (different strategies), `variant` pairs (one strategy, other parameters)
  and all.
- Kendall tau-b between scores and speed (-time) within each (task, configuration) with at least
  two implementations, averaged over those groups; a group where the ranker gives every
  implementation the same score has tau 0 (it says nothing).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from pipeline.ranker.pairs import GAP_BUCKETS, Pair

KINDS = ("strategy", "variant", "all")


def bucket_label(low: float, high: float) -> str:
    return f"{low:g}-{high:g}x" if math.isfinite(high) else f"{low:g}x+"


def kendall_tau_b(x, y) -> float:
    """Kendall's tau-b of two equal-length sequences (ties in either handled); nan when undefined."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = len(x)
    conc = disc = tx = ty = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                tx += 1
            elif dy == 0:
                ty += 1
            elif dx == dy:
                conc += 1
            else:
                disc += 1
    denom = math.sqrt((conc + disc + tx) * (conc + disc + ty))
    return (conc - disc) / denom if denom > 0 else float("nan")


def _acc(correct: list[float]) -> dict:
    return {"n": len(correct), "accuracy": float(np.mean(correct)) if correct else None}


def evaluate_scores(data, pairs: list[Pair], scores: np.ndarray) -> dict:
    """Metrics of one ranker's `scores` (one per impl of `data`) on `pairs`."""
    credit = []
    for p in pairs:
        d = scores[p.faster] - scores[p.slower]
        credit.append(1.0 if d > 0 else 0.5 if d == 0 else 0.0)
    out: dict = {"pairs": len(pairs), "buckets": {}, "gap_ge_1.5": {}}
    for kind in KINDS:
        sel = [c for c, p in zip(credit, pairs) if kind == "all" or p.kind == kind]
        out["buckets"][kind] = {"all": _acc(sel)}
        for low, high in GAP_BUCKETS:
            out["buckets"][kind][bucket_label(low, high)] = _acc(
                [c for c, p in zip(credit, pairs) if (kind == "all" or p.kind == kind) and low <= p.gap < high])
        out["gap_ge_1.5"][kind] = _acc([c for c, p in zip(credit, pairs)
                                        if (kind == "all" or p.kind == kind) and p.gap >= 1.5])
    groups: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for i, im in enumerate(data.impls):
        for config, t in im.times_ms.items():
            groups.setdefault((im.task_id, config), []).append((scores[i], -t))
    taus = []
    for members in groups.values():
        if len(members) >= 2:
            tau = kendall_tau_b([m[0] for m in members], [m[1] for m in members])
            taus.append(0.0 if math.isnan(tau) else tau)
    out["kendall_tau"] = float(np.mean(taus)) if taus else None
    out["tau_groups"] = len(taus)
    out["accuracy"] = out["buckets"]["all"]["all"]["accuracy"]
    return out


def merge_folds(fold_metrics: list[dict]) -> dict:
    """Pool per-fold metrics (cross-validation): accuracies weighted by pair counts, tau by groups."""
    def pool(cells):
        n = sum(c["n"] for c in cells)
        acc = sum(c["accuracy"] * c["n"] for c in cells if c["n"]) / n if n else None
        return {"n": n, "accuracy": acc}
    first = fold_metrics[0]
    out: dict = {"pairs": sum(m["pairs"] for m in fold_metrics), "buckets": {}, "gap_ge_1.5": {}}
    for kind in KINDS:
        out["buckets"][kind] = {b: pool([m["buckets"][kind][b] for m in fold_metrics]) for b in first["buckets"][kind]}
        out["gap_ge_1.5"][kind] = pool([m["gap_ge_1.5"][kind] for m in fold_metrics])
    groups = sum(m["tau_groups"] for m in fold_metrics)
    out["tau_groups"] = groups
    out["kendall_tau"] = (sum((m["kendall_tau"] or 0.0) * m["tau_groups"] for m in fold_metrics) / groups
                          if groups else None)
    out["accuracy"] = out["buckets"]["all"]["all"]["accuracy"]
    return out


def _cell(c: dict) -> str:
    return "-" if not c["n"] else f"{c['accuracy']:.1%} ({c['n']})"


def report_markdown(results: dict[str, dict], title: str, notes: list[str] = ()) -> str:
    """Markdown tables: a summary, then accuracy by gap bucket for each pair kind."""
    labels = [bucket_label(lo, hi) for lo, hi in GAP_BUCKETS]
    lines = [f"# {title}", ""] + [f"- {n}" for n in notes] + ([""] if notes else [])
    lines += ["| ranker | pairs | accuracy | gap >= 1.5x | strategy, >= 1.5x | variant, >= 1.5x | Kendall tau |",
              "|---|---|---|---|---|---|---|"]
    for name, m in results.items():
        tau = "-" if m["kendall_tau"] is None else f"{m['kendall_tau']:.3f} ({m['tau_groups']})"
        lines.append(f"| {name} | {m['pairs']} | {_cell(m['buckets']['all']['all'])} | {_cell(m['gap_ge_1.5']['all'])}"
                     f" | {_cell(m['gap_ge_1.5']['strategy'])} | {_cell(m['gap_ge_1.5']['variant'])} | {tau} |")
    for kind in KINDS:
        lines += ["", f"Accuracy by gap, {kind} pairs (accuracy (pairs)):", "",
                  "| ranker | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
        for name, m in results.items():
            lines.append(f"| {name} | " + " | ".join(_cell(m["buckets"][kind][b]) for b in labels) + " |")
    return "\n".join(lines) + "\n"


def plot_accuracy(results: dict[str, dict], path: Path) -> None:
    """Grouped bars: accuracy per gap bucket and ranker, one panel per pair kind."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [bucket_label(lo, hi) for lo, hi in GAP_BUCKETS]
    fig, axes = plt.subplots(1, len(KINDS), figsize=(5 * len(KINDS), 4), sharey=True)
    width = 0.8 / max(1, len(results))
    for ax, kind in zip(axes, KINDS):
        for r, (name, m) in enumerate(results.items()):
            vals = [m["buckets"][kind][b]["accuracy"] or 0.0 for b in labels]
            ax.bar(np.arange(len(labels)) + r * width, vals, width, label=name)
        ax.axhline(0.5, color="grey", lw=0.8, ls="--")
        ax.set_xticks(np.arange(len(labels)) + width * (len(results) - 1) / 2, labels)
        ax.set_title(f"{kind} pairs")
        ax.set_xlabel("time gap (slower / faster)")
    axes[0].set_ylabel("pairwise accuracy")
    axes[0].set_ylim(0, 1)
    axes[-1].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(results: dict[str, dict], out_dir: str | Path, title: str, notes: list[str] = (),
                 extra: dict | None = None) -> Path:
    """report.md, accuracy.png and metrics.json in `out_dir`; returns the report path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(report_markdown(results, title, notes) + "\n![accuracy](accuracy.png)\n")
    plot_accuracy(results, out / "accuracy.png")
    (out / "metrics.json").write_text(json.dumps({"rankers": results, **(extra or {})}, indent=1))
    return out / "report.md"
