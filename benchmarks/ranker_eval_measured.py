"""The ranker on the measured dataset, both ways docs/ranker.md reports, in one run:
    python benchmarks/ranker_eval_measured.py --out benchmarks/results/v1/ranker_eval_measured.json
`fixed_split`: `cudaperf rank train` then `cudaperf rank eval` (held-out test families of the rows'
split); `cv5`: `cudaperf rank eval --cv 5` (fresh rankers per fold of families). Measured rows of
tasks whose code changed since their measurement are left out by the ranker's loader.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    from pipeline.cli import main as cudaperf

    def rank(argv):
        return cudaperf(["rank", *argv])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="JSON file to write")
    p.add_argument("--rankers", default="gbt,neural")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="cudaperf-rank-") as tmp:
        ck, cv = Path(tmp) / "fixed", Path(tmp) / "cv"
        if rank(["train", "--out", str(ck), "--rankers", args.rankers]) or rank(["eval", "--out", str(ck)]) \
                or rank(["eval", "--out", str(cv), "--cv", "5", "--rankers", args.rankers]):
            print("a ranker command failed (see above)", file=sys.stderr)
            return 1
        fixed = json.loads((ck / "report" / "metrics.json").read_text())["rankers"]
        folds = json.loads((cv / "report" / "metrics.json").read_text())["rankers"]
    import lightgbm
    import torch
    result = {"what": "cudaperf rank train + eval (fixed_split: the rows' held-out test families) and "
                      "rank eval --cv 5 (cv5) on pipeline/assets/measured/, current tasks only",
              "config": "defaults (ranker section of pipeline/core/config.py)",
              "machine": {"host": platform.node(), "python": platform.python_version(), "torch": torch.__version__,
                          "lightgbm": lightgbm.__version__,
                          "date": datetime.now(timezone.utc).isoformat(timespec="seconds")},
              "fixed_split": fixed, "cv5": folds}
    Path(args.out).write_text(json.dumps(result, indent=1))
    for name, block in (("fixed split", fixed), ("5-fold by family", folds)):
        print(f"\n{name}: pairwise accuracy at gaps >= 1.5x")
        for ranker, m in block.items():
            g = m["gap_ge_1.5"]
            print(f"  {ranker:<24} {g['all']['accuracy']:.1%} ({g['all']['n']} pairs)  tau {m['kendall_tau']:.3f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
