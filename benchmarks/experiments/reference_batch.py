"""Why a PyTorch reference's time per call differs between a batch and single calls.

    python benchmarks/experiments/reference_batch.py --out benchmarks/results/v11/reference_batch_h200.json

For a few built-in torch2cuda tasks, on each timing configuration, the reference (PyTorch eager) in
this trusted process, per-call milliseconds from CUDA events, the L2 flushed before each window:
  single             one call on input set 0, its output dropped (the conventional harness)
  batch              one call on each of k input sets, outputs kept to the end (the evaluator's shape)
  batch_drop         as batch, each output dropped as soon as it is made
  batch_same         k calls on input set 0, outputs kept
  batch_same_drop    k calls on input set 0, outputs dropped
  batch_warm_alloc   as batch, after a batch that made and freed the same outputs (the allocator warm)
  single_queued      as single, the flush queued just before the window (the GPU busy while the host
                     launches; KernelBench's and dataset measurement's shape)
  batch_queued       as batch, the flush queued just before the window (the evaluator's shape since
                     evaluator version 8)
  round_fresh        as a timed round does it: k new input sets made from a new seed and copied for the
                     reference just before, then the evaluator's own batch (timed_rounds._in_process_batch)
  round_fresh_idle   as round_fresh, the host idle for 20 ms before the window (a round's other work)
  round_fresh_idle_warm  as round_fresh_idle, the same batch run once untimed just before (the evaluator's
                     baseline since version 11: timed_rounds.BASELINE_WARM_S)
  round_fresh_busy   as round_fresh, the GPU busy with a large matmul (some ms) just before the window:
                     whether a GPU that idled during the host's work runs the first calls at lower clocks
  child_alive        as round_fresh, with a trusted child of the evaluator (a second process with its own
                     CUDA context, as a candidate's child is in a round) started and idle
  child_frozen       as child_alive, the child frozen (SIGSTOP) as a candidate's is while the baseline runs
  after_child_batch  as child_alive, right after the child ran an empty batch (the GPU switching contexts)
In the evaluator's rounds the reference ran up to 11 % slower per call than its single calls, while
round_fresh, round_fresh_idle and round_fresh_busy stayed within a few % of batch_queued: the child_*
columns test whether the other processes' contexts are the difference.
A table is printed at the end.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipeline.core.config import CompileSection, EvalSection  # noqa: E402
from pipeline.tasks import load_tasks  # noqa: E402

PICKS = ["torch2cuda/relu", "torch2cuda/rmsnorm", "torch2cuda/softmax", "torch2cuda/matmul", "torch2cuda/sum_dim"]


def main() -> None:
    from pipeline.evaluation.evaluator import Evaluator
    from pipeline.evaluation.timing.timed_rounds import _in_process_batch
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--trials", type=int, default=15)
    args = ap.parse_args()
    tasks = {t.id: t for t in load_tasks("builtin")}
    ev = Evaluator(EvalSection(result_cache_dir="", sandbox="none"), CompileSection(cache_dir=tempfile.mkdtemp()), use_gpu=True)
    clock, rows = ev.clock, []

    def write(rows: list) -> None:
        Path(args.out).write_text(json.dumps({"gpu": ev.gpu_name, "date": datetime.now(timezone.utc).isoformat(
            timespec="seconds"), "rows": rows}, indent=1))
    import torch
    heat = torch.randn(4096, 4096, device="cuda")  # one product: about 3 ms of float32 work on an H200
    for task_id in PICKS:
        group = ev.prepare_group(tasks[task_id])
        try:
            for cd in group.configs:
                if not cd.time or cd.run_reference is None:
                    continue
                first = cd.reference_copy(cd.fresh(1))
                for _ in range(3):
                    clock.flush_l2()
                    one = clock.events(lambda: cd.run_reference(first))
                # the evaluator's batch size: calls that fill eval.timing_batch_s
                k = max(1, min(len(cd.slots), math.ceil(ev.cfg.timing_batch_s / max(one, 1e-7))))
                sets = [cd.reference_copy(cd.fresh(100 + s)) for s in range(k)]
                cols = ("single", "batch", "batch_drop", "batch_same", "batch_same_drop", "batch_warm_alloc",
                        "single_queued", "batch_queued", "round_fresh", "round_fresh_idle", "round_fresh_idle_warm",
                        "round_fresh_busy",
                        "child_alive", "child_frozen", "after_child_batch")
                res: dict[str, list[float]] = {p: [] for p in cols}

                def window(calls, keep: bool, queued: bool = False) -> float:
                    kept: list = []
                    if not queued:
                        clock.flush_l2()
                    s = clock.events(lambda: [kept.append(cd.run_reference(f)) if keep else cd.run_reference(f)
                                              for f in calls], flush_first=queued)
                    return 1e3 * s / len(calls)
                for _ in range(2):
                    window(sets, True)
                for _ in range(args.trials):
                    res["single"].append(window(sets[:1], False))
                    res["batch"].append(window(sets, True))
                    res["batch_drop"].append(window(sets, False))
                    res["batch_same"].append(window([sets[0]] * k, True))
                    res["batch_same_drop"].append(window([sets[0]] * k, False))
                    window(sets, True)
                    res["batch_warm_alloc"].append(window(sets, True))
                    res["single_queued"].append(window(sets[:1], False, queued=True))
                    res["batch_queued"].append(window(sets, True, queued=True))
                    for n, (col, idle_s) in enumerate((("round_fresh", 0.0), ("round_fresh_idle", 0.02),
                                                       ("round_fresh_idle_warm", 0.02), ("round_fresh_busy", 0.0))):
                        seed = len(res[col]) * 64 + (n << 20)
                        fresh = [cd.fresh(seed + s) for s in range(k)]
                        if idle_s:
                            time.sleep(idle_s)
                        if col == "round_fresh_idle_warm":
                            _in_process_batch(ev, cd.run_reference, [cd.reference_copy(f) for f in fresh])
                        if col == "round_fresh_busy":
                            heat @ heat
                            clock.driver.synchronize()
                        res[col].append(1e3 * _in_process_batch(ev, cd.run_reference,
                                                                [cd.reference_copy(f) for f in fresh])[0] / k)
                        del fresh
                child = None
                try:  # the same fresh-set batch beside a second process's CUDA context (a trusted child)
                    child = ev.start_child(False)
                    child.request({"op": "probe"}, 60)
                    ci = group.configs.index(cd)
                    for t in range(args.trials):
                        for n, col in enumerate(("child_alive", "child_frozen", "after_child_batch")):
                            if col == "after_child_batch":  # an empty batch of one launch, as a calibration's
                                child.request({"op": "run", "config": ci, "slots": [], "launches": 1}, 60)
                            if col == "child_frozen":
                                child.freeze()
                            fresh = [cd.fresh((t + 7) * 64 + s + (n + 8 << 20)) for s in range(k)]
                            res[col].append(1e3 * _in_process_batch(ev, cd.run_reference,
                                                                    [cd.reference_copy(f) for f in fresh])[0] / k)
                            child.thaw()
                            del fresh
                except Exception as e:  # noqa: BLE001 - a benchmark row: the other columns stand
                    print(f"{task_id} {cd.name}: child columns: {type(e).__name__}: {e}", flush=True)
                finally:
                    if child is not None:
                        child.close()
                res = {c: v for c, v in res.items() if v}
                row = {"task": task_id, "config": cd.name, "k": k, **{p: statistics.median(v) for p, v in res.items()}}
                rows.append(row)
                print(json.dumps(row), flush=True)
                write(rows)  # after every row: a run stopped early keeps what it measured
                del sets
        except Exception as e:  # noqa: BLE001 - a benchmark row
            print(f"{task_id}: {type(e).__name__}: {e}", flush=True)
        finally:
            ev.release_group(group)
    cols = ("single", "single_queued", "batch_queued", "round_fresh", "round_fresh_idle", "round_fresh_idle_warm",
            "round_fresh_busy",
            "child_alive", "child_frozen", "after_child_batch")
    print(f"{'task config':36s} {'k':>3s} " + " ".join(f"{c[-12:]:>12s}" for c in cols))
    for r in rows:
        print(f"{r['task'] + ' ' + r['config']:36s} {r['k']:3d} " + " ".join(f"{r.get(c, float('nan')):12.4f}" for c in cols))


if __name__ == "__main__":
    main()
