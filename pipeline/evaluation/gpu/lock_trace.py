"""Who held the GPU's lock, how, for how long and why: a trace of every hold, and its report.

In: the holds of a `GpuLock` (lock.py) in every evaluator process of one GPU, when `eval.lock_trace_path` names a
file: one JSON line per hold, appended by the process that held it (a short append is atomic, so processes
share the file): {"lock" (which GPU's lock), "pid", "mode" ("exclusive" or "shared"), "why", "requested",
"granted", "released"}, times in seconds of the wall clock (comparable across processes).
Out: `lock_report(records)`: per reason and mode, how many holds, the seconds held and the seconds waited for
them; per process the same by mode; over the trace's span, the seconds the lock was held exclusive, held shared
and not held at all (union of intervals). One GPU's lock at a time: `by_lock` splits a trace that several GPUs'
evaluators wrote. What holds the lock exclusive besides the measured windows is the
`exclusive` rows whose reason is not a timing round's; what the evaluators wait for is `waited_s`.

    python -m pipeline.evaluation.gpu.lock_trace TRACE.jsonl     # prints the report as a table
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path


class LockTrace:
    """Appends one line per hold to `path` (made on first use); never raises into the evaluation."""

    def __init__(self, path: str, lock: str = ""):
        self.path, self.lock = path, lock  # lock: the GPU lock's name (its file), so GPUs can be told apart
        self._lock = threading.Lock()

    def record(self, mode: str, why: str, requested: float, granted: float, released: float) -> None:
        line = json.dumps({"lock": self.lock, "pid": os.getpid(), "mode": mode, "why": why or "unnamed",
                           "requested": requested, "granted": granted, "released": released}) + "\n"
        try:
            with self._lock, open(self.path, "a") as f:
                f.write(line)
        except OSError:  # a trace is a measurement aid: an unwritable file must not fail a candidate
            pass


class Hold:
    """One hold in progress: `granted()` once the lock is had, `done(trace)` when it is let go."""

    def __init__(self, mode: str, why: str):
        self.mode, self.why = mode, why
        self.requested = self.granted_at = time.time()

    def granted(self) -> "Hold":
        self.granted_at = time.time()
        return self

    def done(self, trace: LockTrace | None) -> None:
        if trace is not None:
            trace.record(self.mode, self.why, self.requested, self.granted_at, time.time())


def read_trace(path: str, since: float = 0.0) -> list[dict]:
    """The records of a trace file (those asked for at `since` or later); a line cut short (a process killed while
    writing) is skipped."""
    out = []
    for line in Path(path).read_text().splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(r, dict) and {"mode", "requested", "granted", "released"} <= set(r) and r["requested"] >= since:
            out.append({"lock": "", "pid": "?", "why": "unnamed", **r})
    return out


def by_lock(records: list[dict]) -> dict[str, list[dict]]:
    """The records of each GPU's lock."""
    out: dict[str, list[dict]] = {}
    for r in records:
        out.setdefault(r["lock"], []).append(r)
    return out


def union_s(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of (start, end) intervals."""
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def lock_report(records: list[dict]) -> dict:
    """The report of one GPU's lock (module docstring); empty figures for an empty trace. Records of several locks
    are refused: their union would mean nothing (`by_lock`)."""
    if len({r["lock"] for r in records}) > 1:
        raise ValueError("lock_report: the records are of several GPUs' locks; report each of by_lock(records)")
    if not records:
        return {"span_s": 0.0, "exclusive_s": 0.0, "shared_s": 0.0, "not_held_s": 0.0, "shared_overlap": 0.0,
                "reasons": [], "processes": {}}
    start = min(r["requested"] for r in records)
    end = max(r["released"] for r in records)
    held = {m: [(r["granted"], r["released"]) for r in records if r["mode"] == m] for m in ("exclusive", "shared")}
    reasons: dict[tuple[str, str], dict] = {}
    processes: dict[str, dict] = {}
    for r in records:
        hold_s, wait_s = r["released"] - r["granted"], r["granted"] - r["requested"]
        g = reasons.setdefault((r["mode"], r["why"]), {"mode": r["mode"], "why": r["why"], "holds": 0,
                                                       "held_s": 0.0, "waited_s": 0.0})
        g["holds"] += 1
        g["held_s"] += hold_s
        g["waited_s"] += wait_s
        p = processes.setdefault(str(r["pid"]), {"exclusive_s": 0.0, "shared_s": 0.0, "waited_s": 0.0})
        p[f"{r['mode']}_s"] = p.get(f"{r['mode']}_s", 0.0) + hold_s
        p["waited_s"] += wait_s
    span = end - start
    shared_union = union_s(held["shared"])
    return {"span_s": span, "exclusive_s": union_s(held["exclusive"]), "shared_s": shared_union,
            "not_held_s": span - union_s(held["exclusive"] + held["shared"]),
            # holders at once while the lock is held shared: near 1 when shared turns do not overlap (each timer
            # waiting out the one before: a convoy), up to the evaluators' count when they do
            "shared_overlap": sum(b - a for a, b in held["shared"]) / shared_union if shared_union else 0.0,
            "reasons": sorted(reasons.values(), key=lambda g: -(g["held_s"] + g["waited_s"])),
            "processes": processes}


def report_table(report: dict) -> str:
    lines = [f"lock trace over {report['span_s']:.2f} s: exclusive {report['exclusive_s']:.2f} s, shared "
             f"{report['shared_s']:.2f} s (x{report['shared_overlap']:.2f} holders at once), not held "
             f"{report['not_held_s']:.2f} s",
             f"{'mode':<10} {'why':<44} {'holds':>6} {'held s':>8} {'waited s':>9}"]
    for g in report["reasons"]:
        lines.append(f"{g['mode']:<10} {g['why'][:44]:<44} {g['holds']:>6} {g['held_s']:>8.2f} {g['waited_s']:>9.2f}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python -m pipeline.evaluation.gpu.lock_trace TRACE.jsonl", file=sys.stderr)
        return 2
    if not Path(argv[0]).is_file():
        print(f"lock_trace: {argv[0]} does not exist; run with eval.lock_trace_path={argv[0]} first", file=sys.stderr)
        return 2
    for lock, records in sorted(by_lock(read_trace(argv[0])).items()):
        print(f"== {lock or 'the GPU lock'}")
        print(report_table(lock_report(records)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
