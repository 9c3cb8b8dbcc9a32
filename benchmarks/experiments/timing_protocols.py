"""Where a per-call time comes from: the same compiled kernels timed by several procedures, side by side.

    python benchmarks/experiments/timing_protocols.py --out benchmarks/results/v8/timing_protocols_h200.json

For a few built-in implementations (honest code), on the evaluator's own buffers and timing slots,
in this trusted process (no child, no IPC), per-call milliseconds of:
  single        one call on slot 0, the L2 flushed (memset) before each, CUDA events around the call
                (the conventional harness; KernelBench's and the previous protocol's shape)
  single_rw     as `single`, but the flush reads and writes its buffer (a stronger eviction)
  rotate        one call per trial on slot k = trial mod slots, flushed before each (fresh memory each call)
  batch         the evaluator's shape: every slot staged, one flush, then one call per slot back to back,
                CUDA events around the whole batch, the GPU idle when it starts
  batch_queued  as `batch`, with the flush queued just before the first event (no idle start)
  batch_flush   a flush before each call of the batch, inside the window; the flushes' own time subtracted
and, in a candidate's child process (the evaluator's sandbox, then eval.sandbox=none), from that child's own
CUDA events after the trusted side staged the inputs and flushed the L2:
  batch_with_child  `batch` in this process while a loaded child is alive
  child_single  a batch of one call on slot 0
  child_same    a batch of k calls all on slot 0
  child_rotate  a batch of one call on each of k slots (the evaluator's timed batch)
  child_last    a batch of one call on the last slot (a slot other than the checked set)
  child_same_last  a batch of k calls all on the last slot
  child_rotate_nostage  as child_rotate, the inputs staged once before all trials (each trial only flushes)
  child_rotate_twice    one call on each of k slots, twice over (per call of the 2k)
  child_pairs           two calls on each of k slots in turn (0, 0, 1, 1, ...)
The figures go to JSON with the GPU's name and date; a table is printed at the end.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipeline.core.config import CompileSection, EvalSection  # noqa: E402
from pipeline.core.records import Candidate  # noqa: E402
from pipeline.tasks import load_tasks  # noqa: E402
from trusted_timing import in_process_runner  # noqa: E402  (benchmarks/ is this script's directory)

PICKS = [("torch2cuda/scale_bias_sigmoid", "row_blocks_vec4"), ("torch2cuda/rmsnorm", "block_per_row_vec4"),
         ("torch2cuda/sum_dim", "split_dim1_shared"), ("torch2cuda/gelu", "vec4"), ("torch2cuda/relu", "vec4"),
         ("c2cuda/dot", "float4_two_pass"), ("c2cuda/saxpy", "naive"), ("c2cuda/inclusive_scan", "three_phase_shared"),
         ("torch2cuda/layernorm", "block_per_row")]


def main() -> None:
    import torch
    from pipeline.evaluation.evaluator import Evaluator
    from pipeline.evaluation.timing.timed_rounds import stage
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--picks", default="", help="comma-separated task ids to keep (default: all)")
    args = ap.parse_args()
    picks = [p for p in PICKS if not args.picks or p[0] in args.picks.split(",")]
    tasks = {t.id: t for t in load_tasks("builtin")}
    ev = Evaluator(EvalSection(result_cache_dir=""), CompileSection(cache_dir=tempfile.mkdtemp()), use_gpu=True)
    drv, fb = ev.driver, ev.cfg.l2_flush_bytes
    flush_t = torch.empty(fb // 4, dtype=torch.float32, device="cuda")
    start, end = drv.event(), drv.event()
    rows = []

    def write(rows: list) -> None:
        Path(args.out).write_text(json.dumps({"gpu": ev.gpu_name, "date": datetime.now(timezone.utc).isoformat(
            timespec="seconds"), "rows": rows}, indent=1))

    def window(launch) -> float:
        drv.record(start)
        launch()
        drv.record(end)
        drv.synchronize()
        return drv.elapsed_ms(start, end)

    def flush() -> None:
        drv.memset_async(ev.flush_ptr, 1, fb)

    for task_id, name in picks:
        task = tasks[task_id]
        impl = next(i for i in task.implementations if i.name == name)
        group = ev.prepare_group(task)
        try:
            r = in_process_runner(ev, task, group, impl.code, impl.format)
            comp = ev.compiler.compile(Candidate(task_id=task.id, code=impl.code, format=impl.format), task)
            entry = task.function if impl.format == "c2cuda" else "launch"
            drv.make_current()
            for ci, cd in enumerate(group.configs):
                if not cd.time:
                    continue
                k = min(len(cd.slots), 16)
                fresh = [cd.fresh(777 + s) for s in range(k)]
                stage(drv, group, [cd.slots[s] for s in range(k)], fresh)
                drv.synchronize()
                for _ in range(3):
                    r.call(ci, 0)
                drv.synchronize()
                res: dict[str, list[float]] = {p: [] for p in ("single", "single_rw", "rotate", "batch",
                                                               "batch_queued", "batch_flush", "flush")}
                for t in range(args.trials):
                    flush(); res["single"].append(window(lambda: r.call(ci, 0)))
                    flush_t.add_(1.0); res["single_rw"].append(window(lambda: r.call(ci, 0)))
                    flush(); res["rotate"].append(window(lambda: r.call(ci, t % k)))
                    if t % 4 == 0:
                        stage(drv, group, [cd.slots[s] for s in range(k)], fresh)
                        flush(); drv.synchronize()
                        res["batch"].append(window(lambda: [r.call(ci, s) for s in range(k)]) / k)
                        stage(drv, group, [cd.slots[s] for s in range(k)], fresh)
                        drv.synchronize(); flush()
                        res["batch_queued"].append(window(lambda: [r.call(ci, s) for s in range(k)]) / k)
                        stage(drv, group, [cd.slots[s] for s in range(k)], fresh)
                        drv.synchronize()
                        fl = window(lambda: [flush() for s in range(k)])
                        both = window(lambda: [(flush(), r.call(ci, s)) for s in range(k)])
                        res["flush"].append(fl / k)
                        res["batch_flush"].append((both - fl) / k)
                for sandbox in ("bwrap", "none"):
                    ev.cfg = ev.cfg.model_copy(update={"sandbox": sandbox})
                    child = ev.start_child(False)
                    try:
                        reply = ev.load_into_child(child, group, impl.format, comp, entry, impl.code)
                        assert reply.get("ok"), reply
                        tag = "" if sandbox == "bwrap" else "_nosandbox"
                        got = []  # this process's own rotation while the child holds a context of its own
                        for t in range(max(4, args.trials // 3)):
                            stage(drv, group, [cd.slots[s] for s in range(k)], fresh)
                            flush(); drv.synchronize()
                            got.append(window(lambda: [r.call(ci, s) for s in range(k)]) / k)
                        res["batch_with_child" + tag] = got
                        for what, slots in (("child_single", [0]), ("child_same", [0] * k),
                                            ("child_rotate", list(range(k))), ("child_last", [k - 1]),
                                            ("child_same_last", [k - 1] * k),
                                            ("child_rotate_nostage", list(range(k))),
                                            ("child_rotate_twice", list(range(k)) * 2),
                                            ("child_pairs", [s for s in range(k) for _ in (0, 1)])):
                            got = []
                            stage(drv, group, [cd.slots[s] for s in range(k)], fresh)
                            for t in range(max(4, args.trials // 3)):
                                if what != "child_rotate_nostage":
                                    stage(drv, group, [cd.slots[s] for s in range(k)], fresh)
                                flush()
                                drv.synchronize()
                                rep = child.request({"op": "run", "config": ci, "slots": slots}, 60)
                                got.append(rep["events_ms"] / len(slots))
                            res[what + tag] = got
                    finally:
                        child.close()
                ev.cfg = ev.cfg.model_copy(update={"sandbox": "bwrap"})
                row = {"task": task_id, "implementation": name, "config": cd.name, "slots": k,
                       **{p: statistics.median(v) for p, v in res.items()}}
                rows.append(row)
                print(json.dumps(row), flush=True)
                write(rows)  # after every row: a run stopped early keeps what it measured
        except Exception as e:  # noqa: BLE001 - a benchmark row
            print(f"{task_id}/{name}: {type(e).__name__}: {e}", flush=True)
        finally:
            ev.release_group(group)
    cols = ("single", "rotate", "batch", "batch_with_child", "child_single", "child_same", "child_rotate",
            "child_last", "child_same_last", "child_rotate_nostage", "child_rotate_twice", "child_pairs",
            "child_rotate_nosandbox")
    print(f"{'implementation':52s} {'k':>3s} " + " ".join(f"{c[-12:]:>12s}" for c in cols))
    for r in rows:
        print(f"{r['task'] + '/' + r['implementation'] + ' ' + r['config']:52s} {r['slots']:3d} "
              + " ".join(f"{r.get(c, 0):12.4f}" for c in cols))


if __name__ == "__main__":
    main()
