"""The 64-sample group before and after, side by side: `gpu_checks.sh group` writes the evaluator before's run
(group_before.json) and this checkout's runs (group_kinds.json) in one call on one GPU; this puts them in one
report, benchmarks/results/v<N>/group_after_<gpu>.json, in the layout of the runs' own `ours_group`:

    python benchmarks/group_before_after.py gpu-out/group_before.json gpu-out/group_kinds.json --out FILE

Per run: candidates a minute per GPU, verdicts; between before and each later run on the same candidates: the
verdicts that differ and each candidate's speedup after over before (median, spread, how many within 2 %)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from evaluator_throughput import speedup_ratios  # per candidate: after / before, with their median and spread


def compare(before: dict, after: dict) -> dict:
    """The report: every run of both files, and for each run of `after` on the same candidates as before's
    ours_group (the copies), verdicts that differ and the speedup ratios."""
    report = {"machine": after.get("machine"), "machine_before": before.get("machine")}
    if "ours_group" in before:
        report["ours_group_before"] = before["ours_group"]
    for key, run in after.items():
        if key.startswith("ours_group"):
            report[key] = run
            base = before.get("ours_group", {}).get("per_candidate")
            if base and not key.startswith("ours_group_realistic"):
                per = run["per_candidate"]
                run["verdicts_differ_from_before"] = sorted(k for k in per if k in base and
                                                            per[k]["verdict"] != base[k]["verdict"])
                run["speedup_ratio_to_before"] = speedup_ratios(per, base)
        elif key == "conventional" or key.startswith("rate_ratio"):
            report[key] = run
    return report


def table(report: dict) -> str:
    lines = [f"{'run':<28} {'per min':>8} {'verdicts':<40} {'differ':>6} {'speedup after/before':>30}"]
    for key, run in report.items():
        if not key.startswith("ours_group"):
            continue
        r = run.get("speedup_ratio_to_before") or {}
        spread = (f"median {r['median']:.3f} [{r['min']:.3f}, {r['max']:.3f}] {r['within_2pct']}/{r['n']} in 2 %"
                  if r.get("n") else "")
        differ = len(run["verdicts_differ_from_before"]) if "verdicts_differ_from_before" in run else ""
        lines.append(f"{key:<28} {run['candidates_per_minute_per_gpu']:>8.1f} {json.dumps(run['verdicts']):<40} "
                     f"{differ!s:>6} {spread:>30}")
    if "conventional" in report:
        lines.append(f"{'conventional':<28} {report['conventional']['candidates_per_minute_per_gpu']:>8.1f}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    for path in (args.before, args.after):
        if not Path(path).is_file():
            print(f"group_before_after: {path} does not exist; run `bash benchmarks/gpu_checks.sh group` with "
                  f".before.tar.gz carried first", file=sys.stderr)
            return 2
    report = compare(json.loads(Path(args.before).read_text()), json.loads(Path(args.after).read_text()))
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
