"""Replay a GPU lock trace through a lock's policy on this host: how long the same holds take under another policy.

    python benchmarks/lock_replay.py TRACE.jsonl[.gz] [--scale 0.25] [--before-rev REV] [--out FILE]

In: a trace that `eval.lock_trace_path` wrote (lock_trace.py: one line per hold, every evaluator process of one
GPU). Each process's holds are split into lanes by the thread that held them (`lane_of`: the evaluator's main
thread, its warm children's starts, its loads ahead), and each lane is replayed in a thread of its own: the lock
taken in the hold's mode, the hold's duration slept, the lock let go; a shared hold that followed an exclusive
one at once (a timed round's window, then its checks) is that switch (`Turns.shared`). A main lane sleeps the
host time between its holds as the trace has it; a warm start or a load ahead starts as long after the main
lane's hold it followed in the trace as it did there (it waited for that work, not for a time); a load takes
the process's candidate_code as the evaluator does (`GpuLock.shared_with`, or the GPU shared and then the lock,
for a lock module without it), and a main lane's turns keep it from a window to the end of its shared turn (the
trace does not say where the check ends in it). Durations and gaps are multiplied by --scale.
Out: for this checkout's lock (`pipeline/evaluation/gpu/lock.py`) and, with --before-rev, the lock module of
that revision (`git show REV:...`), the replay's span in the trace's seconds, its ratio to the trace's own span,
and the lock report of the replay (exclusive, shared, not held); JSON to --out.

What it assumes: every hold's duration is what it took in the trace, whatever else holds the lock beside it. A
shared hold's GPU work would in fact be time-sliced with other shared holders' (the replay lets them overlap
freely), so the replay bounds what a policy can gain from the shared holds; the exclusive holds are exact.
Runs on any host (no GPU): flocks and sleeps.
"""
from __future__ import annotations

import argparse
import contextlib
import gzip
import importlib.util
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.evaluation.gpu.lock_trace import lock_report  # noqa: E402

SWITCH_S = 1e-3  # a shared hold requested within this of an exclusive one's release, same lane: the turn's switch


def read(path: str) -> list[dict]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip().startswith("{")]


def lane_of(why: str) -> str:
    """The thread a hold came from: a warm child's start (the pool's), a candidate's load ahead, or the rest (the
    group's preparation, checks and timed rounds: the evaluator's main thread)."""
    return "warm" if "warm start" in why else "load" if "candidate's load" in why else "main"


def lanes(records: list[dict]) -> dict:
    """{(pid, lane): holds in order of request}; a lane whose holds overlap in time is split in two."""
    out: dict = {}
    for r in sorted(records, key=lambda r: r["requested"]):
        key, k = (r["pid"], lane_of(r["why"])), 0
        while out.get((*key, k)) and out[(*key, k)][-1]["released"] > r["requested"] + SWITCH_S:
            k += 1
        out.setdefault((*key, k), []).append(r)
    return out


class Anchors:
    """When the replay reached each main-lane hold: a warm start or a load ahead starts as long after the main
    lane's hold it followed in the trace as it did there (the work it waited for, replayed), not at its trace time."""

    def __init__(self):
        self.at: dict = {}
        self.cond = threading.Condition()

    def reached(self, key, requested: float, granted: float) -> None:
        with self.cond:
            self.at[key] = (requested, granted)
            self.cond.notify_all()

    def wait(self, key) -> tuple[float, float]:
        with self.cond:
            self.cond.wait_for(lambda: key in self.at)
            return self.at[key]


def replay(lock_module, records: list[dict], scale: float, directory: str) -> dict:
    """Each lane in a thread, through `lock_module`'s GpuLock; returns the replay's own trace's lock report.
    A main lane replays its host gaps as recorded; a warm or load lane's hold starts after the main-lane hold of
    its process last asked for before it in the trace (and after the lane's hold before), offset as in the trace."""
    trace = str(Path(directory) / "replay.jsonl")
    lock = lock_module.GpuLock("0", directory, trace_path=trace)
    start = min(r["requested"] for r in records)
    all_lanes = lanes(records)
    main = {pid: ln for (pid, kind, k), ln in all_lanes.items() if kind == "main" and k == 0}
    anchors = Anchors()
    t0 = time.time()

    def anchor_of(r: dict):
        ln = main.get(r["pid"], [])
        before = [i for i, m in enumerate(ln) if m["requested"] <= r["requested"]]
        return (r["pid"], before[-1]) if before else None

    make_code = getattr(lock_module, "CodeLock", threading.Lock)
    codes = {pid: make_code() for pid in {r["pid"] for r in records}}  # each process's candidate_code

    def take(turns, loads: contextlib.ExitStack, key, r: dict) -> None:
        """The hold: a load ahead as the evaluator takes it (the GPU shared, then candidate_code; held in `loads`
        until the lane's next hold), the rest by turns."""
        if key[1] != "load":
            getattr(turns, r["mode"])(r["why"])
            return
        code = codes[key[0]]
        loads.enter_context(lock.shared_with(code, r["why"]) if hasattr(lock, "shared_with") else
                            _shared_then(lock, code, r["why"]))

    def run(key, lane: list[dict]) -> None:
        turns = lock.turns(codes[key[0]] if key[1] == "main" else None)
        loads = contextlib.ExitStack()
        last_release, last_mode = None, ""
        for i, r in enumerate(lane):
            gap = r["requested"] - (last_release if last_release is not None else start)
            switch = last_mode == "exclusive" and r["mode"] == "shared" and gap <= SWITCH_S
            if not switch:
                loads.close()
                turns.release()
                a = anchor_of(r) if key[1] != "main" else None
                if a is not None:  # as long after its anchor's start (or grant) as in the trace
                    m = main[a[0]][a[1]]
                    replay_req, replay_granted = anchors.wait(a)
                    base, ref = (replay_granted, m["granted"]) if r["requested"] >= m["granted"] else \
                        (replay_req, m["requested"])
                    target = base + (r["requested"] - ref) * scale
                    time.sleep(max(0.0, target - time.time()))
                else:
                    time.sleep(max(0.0, gap) * scale)
            requested = time.time()
            take(turns, loads, key, r)
            if key[1] == "main":
                anchors.reached((key[0], i), requested, time.time())
            time.sleep(max(0.0, r["released"] - r["granted"]) * scale)
            last_release, last_mode = r["released"], r["mode"]
        loads.close()
        turns.release()
    threads = [threading.Thread(target=run, args=(key, ln), daemon=True) for key, ln in all_lanes.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t0
    report = lock_report(read(trace))
    scaled = {k: (v / scale if isinstance(v, float) else v) for k, v in report.items() if k.endswith("_s")}
    reasons = [{**r, "held_s": r["held_s"] / scale, "waited_s": r["waited_s"] / scale} for r in report["reasons"]]
    return {"wall_s": wall / scale, **scaled, "shared_overlap": report["shared_overlap"], "reasons": reasons}


@contextlib.contextmanager
def _shared_then(lock, code, why: str):
    """A load ahead under a lock module without shared_with: the GPU shared, then candidate_code."""
    with lock.shared(why), code:
        yield


def load_lock(source: str | None):
    """This checkout's lock module, or (source: a file's text) that text as a module."""
    if source is None:
        from pipeline.evaluation.gpu import lock
        return lock
    path = Path(tempfile.mkdtemp()) / "lock_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("lock_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--scale", type=float, default=0.25, help="seconds replayed per second of the trace")
    ap.add_argument("--before-rev", default="", help="also replay through the lock module of this git revision")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    records = read(args.trace)
    if not records:
        print(f"{args.trace}: no holds in it; pass a trace that eval.lock_trace_path wrote.", file=sys.stderr)
        return 2
    own = lock_report(records)
    result = {"trace": args.trace, "scale": args.scale, "holds": len(records), "lanes": len(lanes(records)),
              "trace_span_s": own["span_s"], "trace_exclusive_s": own["exclusive_s"],
              "trace_shared_overlap": own["shared_overlap"], "policies": {}}
    policies = [("this checkout", None)]
    if args.before_rev:
        text = subprocess.run(["git", "show", f"{args.before_rev}:pipeline/evaluation/gpu/lock.py"],
                              capture_output=True, text=True, check=True).stdout
        policies.insert(0, (f"lock at {args.before_rev}", text))
    for name, source in policies:
        with tempfile.TemporaryDirectory() as d:
            r = replay(load_lock(source), records, args.scale, d)
        r["ratio_to_trace"] = r["span_s"] / own["span_s"] if own["span_s"] else None
        result["policies"][name] = r
        print(f"{name:<22} span {r['span_s']:7.2f} s (trace {own['span_s']:.2f} s, x{r['ratio_to_trace']:.2f}): "
              f"exclusive {r['exclusive_s']:.2f} s, shared {r['shared_s']:.2f} s (x{r['shared_overlap']:.2f} holders at "
              f"once), not held {r['not_held_s']:.2f} s",
              flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
