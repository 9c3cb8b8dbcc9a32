"""The evaluator's CPU path per candidate, before and after, side by side in one run (no GPU needed).

    python benchmarks/evaluator_cpu_path.py [--before REV] [--group-size 64] [--out benchmarks/results/v17/evaluator_cpu_path.json]

For each tree (the checkout, and REV checked out in a temporary git worktree), in a fresh compile cache:
- compile pool, per candidate: what a compile worker does (REV: `Compiler.compile`; this tree:
  `bounded.checked_build`, the gate, one nvcc -c, the link, the artefact check), its CPU seconds with
  every child process (nvcc, gcc, nm, objdump), the workers running side by side as a pool would;
- evaluator actor, per candidate: `Evaluator.gate_and_compile` given the worker's result (REV: the gate,
  the artefact check's second nvcc -c and tools, the structure analysis; this tree: the gate, reading the
  worker's findings, the structure analysis), serial, as the actor runs it.
On the 72 built-in implementations (all formats; kernelbench ones cannot build on a CPU and cost only the
gate) and on a group of `--group-size` distinct samples of one c2cuda task. Figures are per candidate, in
seconds, split by format.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MEASURE = r'''
import json, os, resource, sys, time
from concurrent.futures import ProcessPoolExecutor
from pipeline.core.config import CompileSection, EvalSection
from pipeline.evaluation.build.compile import Compiler
from pipeline.evaluation.evaluator import Evaluator
from pipeline.core.records import Candidate
from pipeline.tasks import load_tasks

cache, workers, group_size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tasks = {t.id: t for t in load_tasks("builtin")}

def cpu():
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime

def worker(item):
    task_id, code, fmt = item
    cfg = CompileSection(cache_dir=cache)
    t0 = cpu()
    cand = Candidate(task_id=task_id, code=code, format=fmt)
    try:
        from pipeline.core.config import TrustedLimits
        from pipeline.evaluation.bounded import checked_build
        comp = checked_build(Compiler(cfg), cand, tasks[task_id], "strict", TrustedLimits()).packed()
    except ImportError:
        comp = Compiler(cfg).compile(cand, tasks[task_id]).packed()
    return comp, cpu() - t0

def measure(items):
    with ProcessPoolExecutor(workers) as pool:
        built = list(pool.map(worker, items))
    ev = Evaluator(EvalSection(result_cache_dir=""), CompileSection(cache_dir=cache), use_gpu=False)
    rows = []
    for (task_id, code, fmt), (comp, pool_s) in zip(items, built):
        t0 = cpu()
        ev.gate_and_compile(tasks[task_id], Candidate(task_id=task_id, code=code, format=fmt), comp)
        rows.append({"format": fmt, "pool_s": pool_s, "evaluator_s": cpu() - t0})
    return rows

impls = [(t.id, i.code, i.format) for t in tasks.values() for i in t.implementations]
saxpy = next(i for i in tasks["c2cuda/saxpy"].implementations if i.format == "c2cuda")
group = [("c2cuda/saxpy", saxpy.code + f"\n// sample {k}\n", "c2cuda") for k in range(group_size)]
print(json.dumps({"builtin": measure(impls), "group": measure(group)}))
'''


def measure_tree(tree: Path, workers: int, group_size: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="cudaperf-cpu-path-") as cache:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])]))
        proc = subprocess.run([sys.executable, "-c", MEASURE, cache, str(workers), str(group_size)], cwd=tree, env=env,
                              capture_output=True, text=True)
        if proc.returncode:
            sys.exit(f"error: the measurement in {tree} failed:\n{proc.stderr[-2000:]}")
        out = proc.stdout
    return json.loads(out.strip().splitlines()[-1])


def summarise(rows: list[dict]) -> dict:
    out = {}
    for fmt in sorted({r["format"] for r in rows}) + ["all"]:
        sel = [r for r in rows if fmt == "all" or r["format"] == fmt]
        out[fmt] = {"n": len(sel), "pool_s": sum(r["pool_s"] for r in sel) / len(sel),
                    "evaluator_s": sum(r["evaluator_s"] for r in sel) / len(sel)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="", help="git revision to compare with (default: none, this tree only)")
    ap.add_argument("--before-dir", default="", help="an unpacked tree to compare with instead (a GPU host without "
                                                     "git history: benchmarks/tools/before_carry.sh)")
    ap.add_argument("--group-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=max(1, min(2, os.cpu_count() or 1)))
    ap.add_argument("--out", default=None, help="JSON file to write (default: a new file under benchmarks/results/v<evaluator version>/)")
    args = ap.parse_args()
    trees = {"after": ROOT}
    tmp = None
    if args.before_dir:
        trees = {"before": Path(args.before_dir).resolve(), "after": ROOT}
    elif args.before:
        tmp = tempfile.mkdtemp(prefix="cudaperf-before-")
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", tmp, args.before], check=True,
                       capture_output=True)
        trees = {"before": Path(tmp), "after": ROOT}
    result = {"command": " ".join(["python", "benchmarks/evaluator_cpu_path.py", *sys.argv[1:]]),
              "machine": f"{os.cpu_count()} CPUs", "workers": args.workers,
              "before_rev": args.before or args.before_dir}
    try:
        for name, tree in trees.items():
            rows = measure_tree(tree, args.workers, args.group_size)
            result[name] = {part: summarise(r) for part, r in rows.items()}
            print(name, json.dumps(result[name]["group"]["all"]), json.dumps(result[name]["builtin"]["all"]), flush=True)
    finally:
        if tmp:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", tmp], capture_output=True)
    if args.out is None:
        from benchmarks.results_path import fresh_result_path
        args.out = str(fresh_result_path("evaluator_cpu_path.json"))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"{'':10} {'part':8} {'format':12} {'pool s/cand':>12} {'evaluator s/cand':>17}")
    for name in trees:
        for part in ("builtin", "group"):
            for fmt, v in result[name][part].items():
                print(f"{name:10} {part:8} {fmt:12} {v['pool_s']:12.3f} {v['evaluator_s']:17.3f}")


if __name__ == "__main__":
    main()
