"""Evaluator benchmark on one GPU: throughput against the conventional path, and timing stability.

    python benchmarks/evaluator_throughput.py --out benchmarks/results/v1/evaluator_h200.json

1. Conventional (KernelBench's way): 8 honest KernelBench-format candidates (the light
   implementations of 8 parameter-free built-in torch2cuda tasks, wrapped in load_inline), each
   in a fresh process that builds, checks and times it beside the reference
   (benchmarks/conventional_eval.py), as many at once as the host's cores allow.
2. This evaluator: every c2cuda and light implementation of the built-in tasks (the same 8 light
   ones included) through the Ray compile pool and the evaluator pool of one GPU, caches empty;
   once with one evaluator on the GPU and once with `--workers-per-gpu` evaluators sharing it
   (correctness work overlaps, timing stays exclusive), side by side.
   Also the GRPO shape (`--group-task`, `--group-size`): one task, 64 samples, each a distinct candidate
   (the task's implementations in turn, each copy marked by a comment), one group; with --group-kind realistic,
   64 distinct answers: the implementations and their source mutants (`realistic_group`), correct and not.
3. Verdict agreement on the 8 shared candidates.
4. Timing stability: one kernel timed in 10 separate evaluations; spread of the medians.
5. The adaptive stop (`--timing-ci`, eval.timing_ci): the 4-evaluator run and the stability check again with
   it, the rate side by side and each candidate's speedup against the run without it.
6. Where the time goes: per run, the seconds of each stage summed over its candidates (EvalResult.stage_s:
   gate, compile, load, check, timing, and within timing the lock wait and each part of the rounds),
   per candidate and as a share of the top-level stages (`stage_breakdown`); and who held the GPU's lock, how,
   for how long and why, with the waits (`lock_trace`: pipeline/evaluation/gpu/lock_trace.py).
Figures go to JSON with the machine, versions and date.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# CUDAPERF_ROOT: measure another checkout's evaluator with this script (gpu_checks.sh throughput: before and after)
sys.path.insert(0, os.environ.get("CUDAPERF_ROOT") or str(ROOT))

from pipeline.core.config import load_config  # noqa: E402
from pipeline.core.lost_work import ItemFailed  # noqa: E402
from pipeline.core.records import Candidate  # noqa: E402
from pipeline.evaluation.timing.timed_rounds import BASELINE_DRIFT  # noqa: E402
from pipeline.tasks import load_tasks  # noqa: E402

SHARED = ["torch2cuda/relu", "torch2cuda/gelu", "torch2cuda/softmax", "torch2cuda/matmul", "torch2cuda/maxpool2d",
          "torch2cuda/mse_loss", "torch2cuda/permute", "torch2cuda/sum_dim"]

WRAPPER = r'''
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <vector>
static void push_shape(std::vector<int64_t>& sizes, at::IntArrayRef shape) {
    sizes.push_back((int64_t)shape.size());
    for (auto d : shape) sizes.push_back(d);
    for (size_t k = shape.size() + 1; k < 8; ++k) sizes.push_back(0);
}
std::vector<torch::Tensor> run_light(std::vector<torch::Tensor> tensors) {
    std::vector<void*> ins; std::vector<int64_t> sizes;
    for (auto& t : tensors) { ins.push_back(t.data_ptr()); push_shape(sizes, t.sizes()); }
    std::vector<torch::Tensor> outs;
OUT_ALLOCS
    std::vector<void*> outp;
    for (auto& o : outs) { outp.push_back(o.data_ptr()); push_shape(sizes, o.sizes()); }
    launch(ins.data(), outp.data(), sizes.data(), at::cuda::getCurrentCUDAStream());
    return outs;
}
'''


def kernelbench_wrapper(task, light_code: str, name: str) -> str:
    """A KernelBench ModelNew that runs a light candidate through load_inline (output shapes fixed
    to the reference's own default sizes, found by running it on the meta device)."""
    import torch
    ns: dict = {}
    exec(task.reference, ns)
    model = ns["Model"](*ns["get_init_inputs"]()).to("meta")
    outs = model(*[x.to("meta") if isinstance(x, torch.Tensor) else x for x in ns["get_inputs"]()])
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    allocs = "\n".join(f"    outs.push_back(torch::empty(std::vector<int64_t>{{{', '.join(str(d) for d in o.shape)}}}, tensors[0].options()));"
                       for o in outs)
    cuda = light_code + WRAPPER.replace("OUT_ALLOCS", allocs)
    return (f"import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n"
            f"cuda_source = {cuda!r}\ncpp_source = 'std::vector<torch::Tensor> run_light(std::vector<torch::Tensor> tensors);'\n"
            f"ext = load_inline(name={name!r}, cpp_sources=cpp_source, cuda_sources=cuda_source, functions=['run_light'])\n\n\n"
            "class ModelNew(nn.Module):\n    def __init__(self, *args):\n        super().__init__()\n\n"
            "    def forward(self, *xs):\n        outs = ext.run_light([x.contiguous() for x in xs])\n"
            "        return outs[0] if len(outs) == 1 else tuple(outs)\n")


def conventional(tasks: dict, workdir: Path) -> dict:
    jobs = []
    for k, tid in enumerate(SHARED):
        task = tasks[tid]
        light = next(i for i in task.implementations if i.format == "light")
        d = workdir / f"conv{k}"
        d.mkdir(parents=True)
        (d / "reference.py").write_text(task.reference)
        (d / "candidate.py").write_text(kernelbench_wrapper(task, light.code, f"bench_ext_{k}"))
        jobs.append(d)
    at_once = min(len(jobs), max(1, (os.cpu_count() or 2) // 2))
    env = dict(os.environ, MAX_JOBS=str(max(1, (os.cpu_count() or 2) // at_once)))

    def run(d: Path) -> dict:
        env_d = dict(env, TORCH_EXTENSIONS_DIR=str(d / "ext"))
        subprocess.run([sys.executable, str(ROOT / "benchmarks/conventional_eval.py"), str(d / "reference.py"),
                        str(d / "candidate.py"), str(d / "out.json")], env=env_d, cwd=d, timeout=900,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return json.loads((d / "out.json").read_text()) if (d / "out.json").exists() else {"correct": False}
    t0 = time.perf_counter()
    with ThreadPoolExecutor(at_once) as pool:
        results = list(pool.map(run, jobs))
    wall = time.perf_counter() - t0
    return {"candidates": len(jobs), "at_once": at_once, "wall_s": wall, "seconds_per_candidate": wall / len(jobs),
            "candidates_per_minute_per_gpu": 60 * len(jobs) / wall,
            "per_candidate": {tid: r for tid, r in zip(SHARED, results)}}


def candidate_groups(tasks: dict) -> list:
    """The benchmark's candidate set: every c2cuda and light implementation of the tasks, grouped by task."""
    groups = []
    for task in tasks.values():
        cands = [Candidate(task_id=task.id, code=i.code, format=i.format)
                 for i in task.implementations if i.format in ("c2cuda", "light")]
        if cands:
            groups.append((task, cands))
    return groups


TOP_STAGES = ("gate", "compile", "load", "check", "timing")


def stage_breakdown(per_candidate: dict) -> dict:
    """Seconds per stage summed over the candidates' stage_s (with the timing stage's parts as timing_<part>),
    the mean per candidate that has the stage, and each stage's share of all top-level seconds."""
    totals: dict[str, float] = {}
    counts: dict[str, int] = {}
    for row in per_candidate.values():
        for stage, seconds in (row.get("stage_s") or {}).items():
            totals[stage] = totals.get(stage, 0.0) + seconds
            counts[stage] = counts.get(stage, 0) + 1
    top = sum(totals.get(s, 0.0) for s in TOP_STAGES)
    return {stage: {"total_s": total, "mean_s": total / counts[stage], "share": total / top if top else None}
            for stage, total in sorted(totals.items(), key=lambda kv: -kv[1])}


def speedup_ratios(per: dict, reference: dict) -> dict:
    """Each candidate's speedup in `per` over its speedup in `reference` (both correct), and their spread."""
    ratios = {k: r["speedup"] / reference[k]["speedup"] for k, r in per.items()
              if r.get("speedup") and reference.get(k, {}).get("speedup")}
    values = sorted(ratios.values())
    return {"n": len(values), "median": statistics.median(values) if values else None,
            "min": values[0] if values else None, "max": values[-1] if values else None,
            "within_2pct": sum(abs(v - 1) <= 0.02 for v in values),
            "within_3pct": sum(abs(v - 1) <= 0.03 for v in values), "per_candidate": ratios}


def headline(run: dict) -> dict:
    """A run's figures without its per-candidate rows and breakdown, for printing."""
    return {k: v for k, v in run.items() if k not in ("per_candidate", "stage_breakdown", "speedup_ratio_to_ours",
                                                       "stability", "lock_trace", "rounds")}


def sample_group(task, size: int) -> list:
    """One task's GRPO-shaped group: `size` distinct candidates, its c2cuda/light implementations in turn,
    each copy marked by a comment (so none is a duplicate the evaluator would skip)."""
    impls = [i for i in task.implementations if i.format in ("c2cuda", "light")]
    if not impls:
        raise SystemExit(f"--group-task {task.id} has no c2cuda or light implementation; name one that has.")
    return [Candidate(task_id=task.id, code=impls[k % len(impls)].code + f"\n// sample {k}\n",
                      format=impls[k % len(impls)].format) for k in range(size)]


# Source mutants of a CUDA implementation, as a policy's samples differ from the known answers: (name, pattern,
# replacement), each applied at its first match. Some keep the answer correct at another speed (no_restrict; block_128
# and half_grid where the kernel covers its range whatever the launch), some make it wrong (bound_le reads past the
# end, minus, skip_block, block_128 or half_grid where each thread owns fixed elements), one does not compile.
MUTATIONS = (
    ("block_128", r"\b256\b", "128"),
    ("no_restrict", r"__restrict__\s*", ""),
    ("half_grid", r"<<<\s*([A-Za-z_]\w*)\s*,", r"<<<(\1 + 1) / 2,"),
    ("bound_le", r"(\bi\s*)<(\s*n\b)", r"\1<=\2"),
    ("minus", r"(\ba\s*\*\s*[\w\[\]\.]+\s*)\+", r"\1-"),
    ("skip_block", r"(__global__[^{]*\{)", r"\1\n    if (blockIdx.x == 1) return;"),
    ("unclosed", r"\}\s*$", ""),
)


def source_mutants(code: str) -> list[tuple[str, str]]:
    """(name, code) of every MUTATIONS entry that changes `code`."""
    import re
    out = []
    for name, pattern, replacement in MUTATIONS:
        mutated = re.sub(pattern, replacement, code, count=1, flags=re.S)
        if mutated != code:
            out.append((name, mutated))
    return out


def realistic_group(task, size: int) -> list:
    """One task's group of `size` distinct answers as a policy writes them: the task's c2cuda implementations and
    their source mutants (correct and not, one that does not compile), in turn; beyond their number, repeats
    marked by a comment. Compiled through the pool like training's samples, so the compile time and the
    failures are in the figure."""
    impls = [i for i in task.implementations if i.format == "c2cuda"]
    if not impls:
        raise SystemExit(f"--group-task {task.id} has no c2cuda implementation for the realistic group; name one.")
    pool = [(i.name, i.code) for i in impls] + [(f"{i.name}/{m}", c) for i in impls for m, c in source_mutants(i.code)]
    return [Candidate(task_id=task.id, format="c2cuda",
                      code=pool[k % len(pool)][1] + (f"\n// sample {k}\n" if k >= len(pool) else ""))
            for k in range(size)]


def timed_rounds_of(result) -> dict:
    """Per timed configuration of a result: calls per batch, timed rounds, why they ended, the baseline's drift
    (getattr: an earlier checkout's results, CUDAPERF_ROOT, lack the newer fields)."""
    out = {}
    for c in result.configs:
        if c.time is not None:
            out[c.name] = {"calls_per_batch": c.calls_per_batch, "trials": c.time.trials,
                           "rounds": c.time.trials // max(c.calls_per_batch or 1, 1),
                           "stop": getattr(c, "timing_stop", None), "baseline_drift": getattr(c, "baseline_drift", None)}
    return out


def rounds_summary(per_candidate: dict) -> dict:
    """Over a run's candidates: timed rounds per configuration (mean, max), and how many configurations ended
    by each reason and fell back to alternation (drift past 2 %)."""
    rows = [c for r in per_candidate.values() for c in (r.get("timed") or {}).values()]
    if not rows:
        return {}
    stops: dict[str, int] = {}
    for c in rows:
        stops[str(c["stop"])] = stops.get(str(c["stop"]), 0) + 1
    return {"configurations": len(rows), "rounds_mean": sum(c["rounds"] for c in rows) / len(rows),
            "rounds_max": max(c["rounds"] for c in rows), "stops": stops,
            "drift_fallbacks": sum(1 for c in rows if (c["baseline_drift"] or 0) > BASELINE_DRIFT)}


def rate_bounds(report: dict, candidates: int) -> dict:
    """What one GPU's lock allowed a run of `candidates` (its trace's report, lock_trace.lock_report): the seconds
    a candidate held it exclusive and shared (the unions over the run) and the rates they bound.
    `per_minute_if_only_windows`: were the exclusive turns (the timed windows, which nothing may share) all the GPU
    did; `per_minute_as_held`: were the GPU never left idle, the shared turns as long as they were. A rate far
    below `as_held` points at idle gaps, `as_held` far below `if_only_windows` at the shared turns, and a goal
    above `if_only_windows` needs fewer or shorter windows."""
    if candidates <= 0:
        return {"exclusive_s_per_candidate": None, "shared_s_per_candidate": None,
                "per_minute_if_only_windows": None, "per_minute_as_held": None}
    exclusive, shared = report["exclusive_s"] / candidates, report["shared_s"] / candidates
    return {"exclusive_s_per_candidate": exclusive, "shared_s_per_candidate": shared,
            "per_minute_if_only_windows": 60 / exclusive if exclusive > 0 else None,
            "per_minute_as_held": 60 / (exclusive + shared) if exclusive + shared > 0 else None}


def bounds_line(bounds: dict) -> str:
    if bounds["exclusive_s_per_candidate"] is None:
        return "per candidate: no candidate in the run"
    fmt = lambda v: f"{v:.0f}" if v else "-"  # noqa: E731
    return (f"per candidate: the GPU held exclusive {bounds['exclusive_s_per_candidate']:.3f} s (at most "
            f"{fmt(bounds['per_minute_if_only_windows'])} a minute were the windows all it did), shared "
            f"{bounds['shared_s_per_candidate']:.3f} s (at most {fmt(bounds['per_minute_as_held'])} a minute as held)")


def print_lock_trace(run: dict) -> None:
    """A run's lock trace as a table, with the rates it bounds (`rate_bounds`), where it has one."""
    if run["lock_trace"] and "span_s" in run["lock_trace"]:
        from pipeline.evaluation.gpu.lock_trace import report_table
        print(report_table(run["lock_trace"]), flush=True)
        if run.get("rate_bounds"):
            print(bounds_line(run["rate_bounds"]), flush=True)


def lock_trace_report(trace: str | None, since: float = 0.0) -> dict | None:
    """Who held the GPU's lock in a run (pipeline/evaluation/gpu/lock_trace.py), None without a trace; one GPU's
    report, or {lock: report} where several GPUs' evaluators wrote it."""
    if not trace:
        return None
    from pipeline.evaluation.gpu.lock_trace import by_lock, lock_report, read_trace
    locks = by_lock(read_trace(trace, since))
    if len(locks) <= 1:
        return lock_report(next(iter(locks.values()), []))
    return {lock: lock_report(records) for lock, records in locks.items()}


def ours(tasks: dict, cfg, workers_per_gpu: int, num_gpus: int = 1, repeats: int = 1, groups: list | None = None,
         trace_path: str = "") -> dict:
    """The candidate set through the compile pool and an evaluator pool on `num_gpus` GPUs (a Ray of its own).
    With `repeats` > 1 the set is evaluated that many times over, each copy of a task a group of its own
    (compiled once through the compile cache, executed and timed every time). `trace_path`: where the GPU lock's
    trace goes (a temporary file otherwise)."""
    import ray
    from actors.evaluators import evaluate_groups, make_compiler_pool, make_evaluator_pool
    from actors.cluster import start_ray
    groups = groups if groups is not None else candidate_groups(tasks) * repeats
    n = sum(len(c) for _, c in groups)
    update = {"workers_per_gpu": workers_per_gpu}
    trace, since = None, time.time()  # this run's holds only: those asked for from now on
    if "lock_trace_path" in type(cfg.eval).model_fields:  # an earlier checkout's evaluator (CUDAPERF_ROOT) has none
        trace = trace_path or cfg.eval.lock_trace_path
        if not trace:
            fd, trace = tempfile.mkstemp(prefix="cudaperf-lock-", suffix=".jsonl")
            os.close(fd)
        update["lock_trace_path"] = trace
    cfg = cfg.model_copy(update={"eval": cfg.eval.model_copy(update=update)})
    start_ray(os.cpu_count() or 1, num_gpus=num_gpus)
    with make_compiler_pool(cfg.compile, 1) as compilers, \
            make_evaluator_pool(cfg.eval, cfg.compile, num_gpus) as evaluators:
        evaluators.map("ping", [()] * evaluators.size)  # the evaluators' own start-up is not counted
        compilers.map("ping", [()] * compilers.size)
        t0 = time.perf_counter()
        results = evaluate_groups(compilers, evaluators, groups)
        wall = time.perf_counter() - t0
    ray.shutdown()
    per = {}
    for g, ((task, cands), rs) in enumerate(zip(groups, results)):
        copy = g // (len(groups) // repeats)
        if isinstance(rs, ItemFailed):  # the group was lost on every retry: its candidates count as lost
            rs = [rs] * len(cands)
        for impl_code, r in zip(cands, rs):
            if isinstance(r, ItemFailed):
                per[f"{task.id}/#{g}/{len(per)}/lost"] = {"verdict": "lost", "reason": str(r)[:200], "speedup": None,
                                                          "stage_s": {}}
                continue
            name = next((i.name for i in task.implementations if i.code == impl_code.code), None)
            key = f"{task.id}/{name}" + (f"#{copy}" if copy else "") if name else f"{task.id}/sample{len(per)}"
            per[key] = {"verdict": r.verdict, "reason": r.reason[:200], "speedup": r.speedup,
                        "stage_s": {**r.stage_s, **{f"timing_{k}": v for k, v in r.timing_parts_s.items()}},
                        "timed": timed_rounds_of(r)}
    verdicts: dict[str, int] = {}
    for v in per.values():
        verdicts[v["verdict"]] = verdicts.get(v["verdict"], 0) + 1
    return {"workers_per_gpu": workers_per_gpu, "gpus": num_gpus, "candidates": n, "wall_s": wall,
            "seconds_per_candidate": wall / n, "candidates_per_minute": 60 * n / wall,
            "candidates_per_minute_per_gpu": 60 * n / wall / num_gpus, "verdicts": verdicts,
            "stage_breakdown": stage_breakdown(per), "rounds": rounds_summary(per),
            "lock_trace": (report := lock_trace_report(trace, since)),
            "rate_bounds": rate_bounds(report, n) if report and "span_s" in report else None,
            "per_candidate": per}


def stability(tasks: dict, cfg, task_id: str, runs: int = 10) -> dict:
    from pipeline.evaluation.evaluator import Evaluator
    ev = Evaluator(cfg.eval, cfg.compile, use_gpu=True)
    task = tasks[task_id]
    impl = task.baseline()
    marker = "#" if impl.format == "kernelbench" else "//"
    medians: dict[str, list[float]] = {}
    for k in range(runs):
        r = ev.evaluate(task, [Candidate(task_id=task.id, code=impl.code + f"\n{marker} run {k}\n", format=impl.format)])[0]
        for c in r.configs:
            if c.time:
                medians.setdefault(c.name, []).append(c.time.median_ms)
    out = {}
    for name, ms in medians.items():
        mid = statistics.median(ms)
        out[name] = {"medians_ms": ms, "median_ms": mid, "spread_pct": 100 * (max(ms) - min(ms)) / mid,
                     "stdev_pct": 100 * statistics.pstdev(ms) / statistics.mean(ms)}
    return {"task": task_id, "implementation": impl.name, "configs": out}


def machine() -> dict:
    import torch
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem",
                              "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except FileNotFoundError:  # a host without a GPU: the run goes on (its candidates are not_executed)
        smi = "no nvidia-smi"
    return {"host": platform.node(), "python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "nvidia_smi": smi, "cpus": os.cpu_count(),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--skip-conventional", action="store_true")
    ap.add_argument("--workers-per-gpu", type=int, default=4, help="evaluators sharing the GPU in the second run")
    ap.add_argument("--group-task", default="c2cuda/saxpy", help="the task of the GRPO-shaped group ('' skips it)")
    ap.add_argument("--group-size", type=int, default=64)
    ap.add_argument("--timing-ci", type=float, default=0.01, help="eval.timing_ci of the side-by-side run (0 skips it)")
    ap.add_argument("--group-only", action="store_true", help="only the GRPO-shaped group and its stage breakdown "
                    "(fits one 10-minute GPU call)")
    ap.add_argument("--with-conventional", action="store_true", help="--group-only: the conventional path too, "
                    "in the same call, and each group's rate against it")
    ap.add_argument("--group-rounds", choices=("off", "on", "both"), default="off",
                    help="--group-only: eval.group_rounds off, on, or both one after the other on the same candidates "
                    "(verdicts and speedups side by side: speedup_ratio_to_unshared)")
    ap.add_argument("--timing-baseline", default="", help="--group-only: eval.timing_baseline of every run "
                    "(bracket, chained, every_round; default: the config's)")
    ap.add_argument("--trace-dir", default="", help="--group-only: keep each run's GPU lock trace there as <run>.lock.jsonl")
    ap.add_argument("--more-workers", type=lambda v: [int(x) for x in v.split(",") if x], default=[],
                    help="--group-only: after the other runs, the copies group again with each of these numbers of "
                    "evaluators sharing the GPU (e.g. 8), key ours_group_w<N>")
    ap.add_argument("--group-kind", choices=("copies", "realistic", "both"), default="copies",
                    help="--group-only: copies of the task's implementations, distinct answers with their source "
                    "mutants compiled through the pool (realistic_group), or both, one after the other")
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():  # its evaluators need a GPU: without one they never start
        raise SystemExit("evaluator_throughput: no CUDA GPU is visible; run it on a GPU host "
                         "(bash benchmarks/gpu_checks.sh group).")
    work = Path(tempfile.mkdtemp(prefix="cudaperf-bench-"))
    def config(cache: str):  # each run starts from an empty compile cache
        return load_config(None, ["eval.result_cache_dir=", f"compile.cache_dir={work}/{cache}",
                                  f"compile.workers={max(2, (os.cpu_count() or 4) - 4)}"])
    cfg = config("cache")
    tasks = {t.id: t for t in load_tasks("builtin")}
    if args.group_task and args.group_task not in tasks:  # said before any run starts
        raise SystemExit(f"--group-task {args.group_task} is not a built-in task; name one of {', '.join(sorted(tasks))}")
    report = {"machine": machine()}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    def save(report: dict) -> None:  # after every part: a run stopped by its time limit keeps what it measured
        out.write_text(json.dumps(report, indent=2))
    if args.group_only:
        kinds = {"copies": ("ours_group", sample_group), "realistic": ("ours_group_realistic", realistic_group)}
        for kind in (["copies", "realistic"] if args.group_kind == "both" else [args.group_kind]):
            base_key, make = kinds[kind]
            group = [(tasks[args.group_task], make(tasks[args.group_task], args.group_size))]
            for shared in ([False, True] if args.group_rounds == "both" else [args.group_rounds == "on"]):
                key = base_key + ("_rounds" if shared else "")
                run_cfg = config(f"cache-{key}")
                update = {"group_rounds": shared, **({"timing_baseline": args.timing_baseline} if args.timing_baseline else {})}
                run_cfg = run_cfg.model_copy(update={"eval": run_cfg.eval.model_copy(update=update)})
                trace = str(Path(args.trace_dir) / f"{key}.lock.jsonl") if args.trace_dir else ""
                report[key] = run = ours(tasks, run_cfg, args.workers_per_gpu, groups=group, trace_path=trace)
                if shared and base_key in report:  # the same candidates without: verdicts and speedups side by side
                    before = report[base_key]["per_candidate"]
                    run["speedup_ratio_to_unshared"] = speedup_ratios(run["per_candidate"], before)
                    run["verdicts_differ_from_unshared"] = sorted(
                        k for k, r in run["per_candidate"].items() if k in before and r["verdict"] != before[k]["verdict"])
                print(f"ours, one group of {args.group_size} ({args.group_task}, {kind}, eval.group_rounds={shared}, "
                      f"eval.timing_baseline={run_cfg.eval.timing_baseline}), "
                      f"{args.workers_per_gpu} evaluators:", headline(run), run["verdicts"], flush=True)
                print("timed rounds:", run["rounds"], flush=True)
                print("stages (s per candidate, share):", ", ".join(
                    f"{s} {v['mean_s']:.3f} ({100 * v['share']:.0f} %)" if v["share"] is not None else
                    f"{s} {v['mean_s']:.3f}" for s, v in run["stage_breakdown"].items()), flush=True)
                print_lock_trace(run)
                save(report)
        if args.with_conventional:  # the conventional path in the same call, and the ratio of each group to it
            conv = report["conventional"] = conventional(tasks, work / "conventional")
            conv["workload"] = ("the light answers of 8 built-in torch2cuda tasks, one process each (not the group's "
                                "task): the ratio compares rates per GPU across the two workloads")
            for key in [k for k in report if k.startswith("ours_group")]:
                report[f"rate_ratio_{key}"] = (report[key]["candidates_per_minute_per_gpu"] /
                                               conv["candidates_per_minute_per_gpu"])
            print("conventional:", {k: v for k, v in conv.items() if k != "per_candidate"},
                  {k: v for k, v in report.items() if k.startswith("rate_ratio")}, flush=True)
            save(report)
        for n in args.more_workers:  # the copies group again with more evaluators sharing the GPU: does the rate scale?
            key = f"ours_group_w{n}"
            trace = str(Path(args.trace_dir) / f"{key}.lock.jsonl") if args.trace_dir else ""
            report[key] = run = ours(tasks, config(f"cache-{key}"), n, groups=[(tasks[args.group_task], sample_group(
                tasks[args.group_task], args.group_size))], trace_path=trace)
            if "ours_group" in report:
                run["speedup_ratio_to_ours_group"] = speedup_ratios(run["per_candidate"], report["ours_group"]["per_candidate"])
            print(f"ours, one group of {args.group_size} ({args.group_task}, copies), {n} evaluators:", headline(run),
                  run["verdicts"], flush=True)
            print_lock_trace(run)
            save(report)
        return
    report["ours_one_worker"] = ours(tasks, config("cache-1"), 1)
    print("ours, 1 evaluator:", headline(report["ours_one_worker"]), flush=True)
    report["ours"] = ours(tasks, cfg, args.workers_per_gpu)
    print(f"ours, {args.workers_per_gpu} evaluators:",
          headline(report["ours"]), flush=True)
    if args.group_task:
        group = [(tasks[args.group_task], sample_group(tasks[args.group_task], args.group_size))]
        report["ours_group"] = ours(tasks, config("cache-group"), args.workers_per_gpu, groups=group)
        print(f"ours, one group of {args.group_size} ({args.group_task}), {args.workers_per_gpu} evaluators:",
              headline(report["ours_group"]),
              flush=True)
    save(report)
    report["stability"] = [stability(tasks, cfg, "c2cuda/saxpy"), stability(tasks, cfg, "c2cuda/sgemm")]
    save(report)
    if args.timing_ci:
        ci_cfg = config("cache-ci")
        ci_cfg = ci_cfg.model_copy(update={"eval": ci_cfg.eval.model_copy(update={"timing_ci": args.timing_ci})})
        run = report["ours_timing_ci"] = ours(tasks, ci_cfg, args.workers_per_gpu)
        run["speedup_ratio_to_ours"] = speedup_ratios(run["per_candidate"], report["ours"]["per_candidate"])
        run["stability"] = [stability(tasks, ci_cfg, "c2cuda/saxpy"), stability(tasks, ci_cfg, "c2cuda/sgemm")]
        print(f"ours with eval.timing_ci={args.timing_ci}:", headline(run), flush=True)
        save(report)
    for name in ("ours_one_worker", "ours", "ours_group", "ours_timing_ci"):
        if name in report:
            print(f"stages of {name} (s per candidate, share):", ", ".join(
                f"{s} {v['mean_s']:.3f} ({100 * v['share']:.0f} %)" for s, v in report[name]["stage_breakdown"].items()
                if v["share"] is not None), flush=True)
    print("stability:", json.dumps(report["stability"])[:1500], flush=True)
    if not args.skip_conventional:
        report["conventional"] = conventional(tasks, work / "conventional")
        conv = report["conventional"]
        print("conventional:", {k: v for k, v in conv.items() if k != "per_candidate"}, flush=True)
        agree = {}
        for tid in SHARED:
            light = next(i.name for i in tasks[tid].implementations if i.format == "light")
            a = conv["per_candidate"][tid].get("correct", False)
            b = report["ours"]["per_candidate"].get(f"{tid}/{light}", {}).get("verdict") == "correct"
            agree[tid] = {"conventional_correct": a, "ours_correct": b, "agree": a == b,
                          "conventional_speedup": conv["per_candidate"][tid].get("speedup"),
                          "ours_speedup": report["ours"]["per_candidate"].get(f"{tid}/{light}", {}).get("speedup")}
        report["agreement"] = agree
        report["rate_ratio"] = (report["ours"]["candidates_per_minute_per_gpu"] /
                                conv["candidates_per_minute_per_gpu"])
        report["rate_ratio_one_worker"] = (report["ours_one_worker"]["candidates_per_minute_per_gpu"] /
                                           conv["candidates_per_minute_per_gpu"])
        print("rate ratio:", report["rate_ratio"], "agreement:", sum(v["agree"] for v in agree.values()), "/", len(agree))
    save(report)


if __name__ == "__main__":
    main()
