"""What a second turn does for a policy that never saw one, on the CPU-verifiable part of the reward.

    cudaperf bench --model tiny-sft --suite c2cuda --tasks builtin --samples 8 --turns 2 --out DIR \
        --config configs/local.yaml rollout.stop_when_speedup_at_least=null
    python benchmarks/experiments/second_turn_cpu.py DIR/report.json [--out FILE]

From the bench report's rows (one per sample and turn): the compiled rate (gated and built: `not_executed` on a
CPU) of turn 1 and of turn 2 over the same samples, with 95 % bootstrap intervals, and what turn 2 made of each
turn-1 outcome (of the samples that failed turn 1, how many compiled in turn 2; of those that compiled, how many
still did). Out: --out (default benchmarks/results/v<N>/second_turn_cpu.json) and a few lines.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.learning_cpu import COMPILED, bootstrap  # noqa: E402  (after the path)

def second_turn(rows: list[dict]) -> dict:
    """Turn 1 against turn 2 over the samples that have both (rows: task, sample, turn (0-based), verdict)."""
    by = {}
    for r in rows:
        by.setdefault((r["task"], r["sample"]), {})[r["turn"]] = r["verdict"]
    pairs = [(t[0], t[1]) for t in by.values() if 0 in t and 1 in t]
    first = [float(a in COMPILED) for a, _ in pairs]
    second = [float(b in COMPILED) for _, b in pairs]
    failed = [b in COMPILED for a, b in pairs if a not in COMPILED]
    kept = [b in COMPILED for a, b in pairs if a in COMPILED]
    return {"samples_with_two_turns": len(pairs), "turn1_compiled": bootstrap(first), "turn2_compiled": bootstrap(second),
            "turn2_compiled_after_turn1_failed": bootstrap([float(x) for x in failed]),
            "turn2_compiled_after_turn1_compiled": bootstrap([float(x) for x in kept]),
            "turn2_verdicts": {v: sum(1 for _, b in pairs if b == v) for v in sorted({b for _, b in pairs})}}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("report")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    report = json.loads(Path(args.report).read_text())
    result = {"report": args.report, "model": report["meta"].get("model"), **second_turn(report["rows"])}
    if args.out is None:
        from benchmarks.results_path import fresh_result_path
        args.out = str(fresh_result_path("second_turn_cpu.json"))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    for key in ("turn1_compiled", "turn2_compiled", "turn2_compiled_after_turn1_failed",
                "turn2_compiled_after_turn1_compiled"):
        b = result[key]
        print(f"{key:38} {b['mean']:.3f} [{b['lo']:.3f}, {b['hi']:.3f}]  n {b['n']}" if b["n"] else f"{key:38} -")
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
