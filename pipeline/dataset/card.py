"""The dataset's figures and its card, computed from the data itself.

In: the task list and (when measured) the measurement table. Out: `task_counts` (kinds, families,
splits, KernelBench overlap), `measurement_stats` (correct implementations, the spread of times
between strategies, the share of tasks with two non-naive implementations at least 1.3x apart on
some configuration, speedups by strategy), `format_stats` (the table `cudaperf data stats`
prints) and `write_card` (a markdown card with plots drawn from the same numbers).
"""
from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path

from pipeline.tasks.measured import REFERENCE_STRATEGY
from pipeline.tasks.splits import HELDOUT, HELDOUT_FRACTION, TASK_SPLITS, split_of_task
from pipeline.core.records import Task

DIVERSE_RATIO = 1.3  # two non-naive implementations this far apart make a task's ranking informative


def kernelbench_overlap(tasks: list[Task]) -> dict | None:
    """How many torch2cuda tasks match a KernelBench level-1/2 operator pattern, from the generators'
    own `pipeline.tasks.generate.kernelbench_overlap` ({'torch2cuda', 'level1_pattern',
    'level2_pattern'})."""
    from pipeline.tasks.generate import kernelbench_overlap as overlap
    return dict(overlap(tasks))


def task_counts(tasks: list[Task], split_seed: int = 0, overlap: dict | None = None) -> dict:
    kinds = Counter(t.kind for t in tasks)
    families: dict[str, Counter] = defaultdict(Counter)
    for t in tasks:
        families[t.family][t.kind] += 1
    task_split = {t.id: split_of_task(t, split_seed) for t in tasks}
    # a family's split is its tasks' own, the held-out tasks of a training family counting as 'train'
    split_of_family = {t.family: "train" if task_split[t.id] == HELDOUT else task_split[t.id] for t in tasks}
    splits = {s: {"families": sum(1 for f in families if split_of_family[f] == s),
                  "tasks": sum(1 for t in tasks if task_split[t.id] == s)}
              for s in list(TASK_SPLITS) + sorted(set(task_split.values()) - set(TASK_SPLITS))}
    splits[HELDOUT]["families"] = len({t.family for t in tasks if task_split[t.id] == HELDOUT})
    splits[HELDOUT]["per_kind"] = dict(Counter(t.kind for t in tasks if task_split[t.id] == HELDOUT))
    return {"c2cuda": kinds.get("c2cuda", 0), "torch2cuda": kinds.get("torch2cuda", 0), "tasks": len(tasks),
            "families": len(families), "kernelbench_overlap": overlap,
            "per_family": {f: {"split": split_of_family[f], **dict(c), "total": sum(c.values())}
                           for f, c in sorted(families.items())},
            "splits": splits,
            "implementations": Counter(i.strategy for t in tasks for i in t.implementations)}


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def measurement_stats(table) -> dict:
    """Figures from measurement rows (a pyarrow Table of pipeline.tasks.measured.SCHEMA)."""
    rows = table.select(["task_id", "kind", "impl_name", "strategy", "config", "correct", "median_ms", "gpu_name",
                         "measured_at"]).to_pylist()
    impl_ok: dict[tuple[str, str], bool] = {}
    times: dict[tuple[str, str], dict[str, tuple[str, float]]] = defaultdict(dict)  # (task, config) -> impl -> time
    kind_of, gpus = {}, Counter()
    for r in rows:
        kind_of[r["task_id"]] = r["kind"]
        gpus[r["gpu_name"]] += 1
        if r["strategy"] != REFERENCE_STRATEGY:
            key = (r["task_id"], r["impl_name"])
            impl_ok[key] = impl_ok.get(key, True) and bool(r["correct"])
        if r["correct"] and r["median_ms"]:
            times[(r["task_id"], r["config"])][r["impl_name"]] = (r["strategy"], r["median_ms"])
    spread: dict[str, float] = {}
    diverse: set[str] = set()
    speedups: dict[str, list[float]] = defaultdict(list)  # strategy -> per-implementation geomean speedup
    logs: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (task_id, _), by_impl in times.items():
        impls = {n: t for n, (s, t) in by_impl.items() if s != REFERENCE_STRATEGY}
        if len(impls) >= 2:
            spread[task_id] = max(spread.get(task_id, 1.0), max(impls.values()) / min(impls.values()))
        others = [t for n, (s, t) in by_impl.items() if s not in ("naive", REFERENCE_STRATEGY)]
        if len(others) >= 2 and max(others) / min(others) >= DIVERSE_RATIO:
            diverse.add(task_id)
        base = [t for s, t in by_impl.values() if s == (REFERENCE_STRATEGY if kind_of[task_id] == "torch2cuda"
                                                         else "naive")]
        if base:
            for n, (s, t) in by_impl.items():
                if s != REFERENCE_STRATEGY:
                    logs[(task_id, n, s)].append(math.log(base[0] / t))
    for (_, _, strategy), values in logs.items():
        speedups[strategy].append(math.exp(sum(values) / len(values)))
    tasks = sorted({t for t, _ in impl_ok})
    spreads = list(spread.values())
    return {"tasks": len(tasks), "implementations": len(impl_ok), "correct": sum(impl_ok.values()),
            "failed": sorted(f"{t}:{n}" for (t, n), ok in impl_ok.items() if not ok),
            "spread": {"tasks": len(spreads), "median": statistics.median(spreads) if spreads else None,
                       "p10": _quantile(spreads, 0.1) if spreads else None,
                       "p90": _quantile(spreads, 0.9) if spreads else None},
            "spread_per_task": spread,
            "diverse_tasks": len(diverse), "diverse_fraction": len(diverse) / len(tasks) if tasks else 0.0,
            "speedup_by_strategy": {s: {"implementations": len(v), "median": statistics.median(v)}
                                    for s, v in sorted(speedups.items())},
            "speedups": dict(speedups),
            "gpus": dict(gpus), "measured_at": str(max(r["measured_at"] for r in rows)) if rows else ""}


def format_stats(counts: dict, mstats: dict | None) -> str:
    """The table `cudaperf data stats` prints and the card shows."""
    ov = counts["kernelbench_overlap"]
    lines = [f"c2cuda tasks:       {counts['c2cuda']}",
             f"torch2cuda tasks:   {counts['torch2cuda']}",
             f"families:           {counts['families']}",
             "kernelbench overlap: " + (f"{ov['level1_pattern'] + ov['level2_pattern']} of {ov['torch2cuda']} "
                                        f"torch2cuda tasks match a KernelBench operator pattern (level 1: "
                                        f"{ov['level1_pattern']}, level 2: {ov['level2_pattern']})"
                                        if ov is not None else "n/a (pipeline.tasks.generate is not there)"),
             "splits (families / tasks): " + ", ".join(f"{s} {v['families']} / {v['tasks']}"
                                                       for s, v in counts["splits"].items()),
             "", f"{'family':<32} {'split':<11} {'c2cuda':>7} {'torch2cuda':>10} {'share':>7}"]
    for fam, c in counts["per_family"].items():
        lines.append(f"{fam:<32} {c['split']:<11} {c.get('c2cuda', 0):>7} {c.get('torch2cuda', 0):>10} "
                     f"{c['total'] / max(counts['tasks'], 1):>7.1%}")
    lines += ["", "implementations by strategy: " + ", ".join(f"{s} {n}" for s, n in
                                                            counts["implementations"].most_common())]
    if mstats is None:
        lines += ["", "measurements: none yet (run `cudaperf data measure` on a GPU host)"]
        return "\n".join(lines)
    sp = mstats["spread"]
    lines += ["", f"measured tasks:     {mstats['tasks']} of {counts['tasks']} on {', '.join(mstats['gpus']) or '?'}",
              f"implementations correct: {mstats['correct']} of {mstats['implementations']}"]
    if sp["tasks"]:
        lines.append(f"spread of times between strategies (slowest / fastest correct implementation, per task, "
                     f"worst configuration): median {sp['median']:.2f}x, p10 {sp['p10']:.2f}x, p90 {sp['p90']:.2f}x "
                     f"over {sp['tasks']} tasks")
    lines.append(f"tasks with two non-naive implementations >= {DIVERSE_RATIO}x apart on some configuration: "
                 f"{mstats['diverse_tasks']} of {mstats['tasks']} ({mstats['diverse_fraction']:.1%})")
    if mstats["speedup_by_strategy"]:
        lines += ["", f"{'strategy':<24} {'implementations':>15} {'median speedup':>15}   (c2cuda: over naive; "
                      f"torch2cuda: over PyTorch eager)"]
        for s, v in mstats["speedup_by_strategy"].items():
            lines.append(f"{s:<24} {v['implementations']:>15} {v['median']:>14.2f}x")
    for f in mstats["failed"][:20]:
        lines.append(f"FAILED {f}")
    return "\n".join(lines)


def _plots(out: Path, counts: dict, mstats: dict | None) -> list[tuple[str, str]]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    made = []
    fams = list(counts["per_family"].items())
    fig, ax = plt.subplots(figsize=(8, max(3, 0.22 * len(fams))))
    names = [f for f, _ in fams]
    c2 = [c.get("c2cuda", 0) for _, c in fams]
    tc = [c.get("torch2cuda", 0) for _, c in fams]
    ax.barh(names, c2, label="c2cuda")
    ax.barh(names, tc, left=c2, label="torch2cuda")
    ax.set_xlabel("tasks")
    ax.invert_yaxis()
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "tasks_per_family.png", dpi=100)
    plt.close(fig)
    made.append(("Tasks per family", "tasks_per_family.png"))
    if mstats and mstats["spread_per_task"]:
        fig, ax = plt.subplots(figsize=(7, 4))
        values = list(mstats["spread_per_task"].values())
        bins = [1.0 * (max(values) ** (i / 30)) for i in range(31)] if max(values) > 1 else 10
        ax.hist(values, bins=bins)
        ax.set_xscale("log")
        ax.axvline(DIVERSE_RATIO, color="k", linestyle="--", label=f"{DIVERSE_RATIO}x")
        ax.set_xlabel("slowest / fastest correct implementation (worst configuration)")
        ax.set_ylabel("tasks")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "spread.png", dpi=100)
        plt.close(fig)
        made.append(("Spread of times between strategies", "spread.png"))
    if mstats and mstats["speedups"]:
        items = sorted(mstats["speedups"].items())
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.boxplot([v for _, v in items])
        ax.set_xticks(range(1, len(items) + 1), [s for s, _ in items], rotation=45, ha="right")
        ax.set_yscale("log")
        ax.axhline(1.0, color="k", linewidth=0.8)
        ax.set_ylabel("speedup over the baseline")
        fig.tight_layout()
        fig.savefig(out / "speedup_by_strategy.png", dpi=100)
        plt.close(fig)
        made.append(("Speedup by strategy (c2cuda over naive, torch2cuda over PyTorch eager)",
                     "speedup_by_strategy.png"))
    return made


def write_card(out_dir: str | Path, counts: dict, mstats: dict | None, source: str, generator_version: str) -> Path:
    """README.md with the stats table and plots, all under `out_dir`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plots = _plots(out, counts, mstats)
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    text = ["# CudaPerf task dataset card", "",
            f"Generated from the data on {when}: task source `{source}` ({generator_version}); "
            f"measurements: {mstats['measured_at'] + ' on ' + ', '.join(mstats['gpus']) if mstats else 'none yet'}.",
            "", "Tasks are code, regenerated on demand; the measurements are Parquet files under "
            "`pipeline/assets/measured/` (one row per task, implementation and input configuration). Splits are by "
            f"family: no family appears in two of train, val and test; `heldout` holds {100 * HELDOUT_FRACTION:.0f} % "
            "of each training family's tasks of each kind, unseen tasks of known computations that are never "
            "trained on.", "", "```", format_stats(counts, mstats), "```", ""]
    for title, name in plots:
        text += [f"## {title}", "", f"![{title}]({name})", ""]
    path = out / "README.md"
    path.write_text("\n".join(text))
    return path
