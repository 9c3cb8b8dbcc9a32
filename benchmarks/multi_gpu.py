"""Multi-GPU benchmark: evaluator scaling, GPU-to-GPU bandwidth and weight sync, one RL step; side by side.

    python benchmarks/multi_gpu.py --out benchmarks/results/v17/multi_gpu_h200x8.json [--parts evaluators,sync,train]

On a host with N >= 2 GPUs, in one run (figures to JSON with the machine, versions and date):
- evaluators: the candidate set of benchmarks/evaluator_throughput.py (every c2cuda and light
  implementation of the built-in tasks, `--repeats` copies) through the compile pool and an evaluator
  pool on 1, 2, 4, 8 GPUs (up to N), `--workers-per-gpu` evaluators each; candidates per minute and
  the ratio to 0.9 x GPUs x the one-GPU rate (the goal: at least 1). The compile cache is warmed
  first (that cold run at N GPUs is reported too), so the rates measure the evaluators.
- sync: plain NCCL all-reduce and broadcast between GPU 0 and GPU 1 and over the GPUs the sync uses
  (bus bandwidth, GB/s); then the learner (ZeRO-3 over 2 GPUs; 1 rank when N = 2) and transformers
  generators on the other GPUs, with a random Qwen2 of about `--sync-params-m` million parameters
  (bf16): the collective weight sync (learner rank 0 broadcasts gathered buckets over NCCL) and the
  object-store sync, time and GB/s of each.
- train: two RL steps of configs/h200x8.yaml sized to N GPUs (`train_overrides`), with the busy
  fraction of each role and the sync figures of each step.
With fewer than 2 GPUs it prints one line saying so, writes that to the JSON and exits 0.
NVLink multicast stays off in every process (pipeline/rl/distributed.py COLLECTIVE_ENV).
vLLM's own GPU weight-update path is not exercised here (the generators are the transformers
backend); it runs only where vLLM is installed.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.rl.distributed import COLLECTIVE_ENV  # noqa: E402

os.environ.update(COLLECTIVE_ENV)  # before anything starts CUDA or NCCL, and inherited by every child

from benchmarks.evaluator_throughput import machine, ours  # noqa: E402
from pipeline.core.config import load_config  # noqa: E402
from pipeline.tasks import load_tasks  # noqa: E402

SCALING_GPUS = (1, 2, 4, 8)


def evaluator_scaling(n_gpus: int, workers_per_gpu: int, repeats: int, work: Path) -> dict:
    """Candidates per minute on 1, 2, 4, 8 GPUs (up to n_gpus), after one cold run that fills the compile cache."""
    cfg = load_config(None, ["eval.result_cache_dir=", f"compile.cache_dir={work}/compile-cache",
                             f"compile.workers={max(2, (os.cpu_count() or 4) - 4)}"])
    tasks = {t.id: t for t in load_tasks("builtin")}
    drop = ("per_candidate",)
    out = {"workers_per_gpu": workers_per_gpu, "repeats": repeats,
           "cold": {k: v for k, v in ours(tasks, cfg, workers_per_gpu, n_gpus, 1).items() if k not in drop}}
    print("evaluators, cold compile cache:", out["cold"], flush=True)
    runs = {}
    for n in [g for g in SCALING_GPUS if g <= n_gpus]:
        runs[n] = {k: v for k, v in ours(tasks, cfg, workers_per_gpu, n, repeats).items() if k not in drop}
        print(f"evaluators on {n} GPU(s):", runs[n], flush=True)
    one = runs[1]["candidates_per_minute"]
    for n, r in runs.items():
        r["goal_candidates_per_minute"] = 0.9 * n * one
        r["ratio_to_goal"] = r["candidates_per_minute"] / (0.9 * n * one)
    out["by_gpus"] = {str(n): r for n, r in runs.items()}
    return out


def _bandwidth_worker(rank: int, world: int, port: int, groups: dict, size_bytes: int, iters: int, out: str):
    """One process per GPU: all-reduce and broadcast of `size_bytes` over each named group of ranks."""
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    buf = torch.ones(size_bytes // 2, dtype=torch.bfloat16, device="cuda")
    results = {}
    for name, ranks in groups.items():
        group = dist.new_group(ranks)
        for op in ("all_reduce", "broadcast"):
            if rank in ranks:
                call = (lambda: dist.all_reduce(buf, group=group)) if op == "all_reduce" else \
                    (lambda: dist.broadcast(buf, src=ranks[0], group=group))
                for _ in range(2):  # warm-up: connections and buffers
                    call()
                torch.cuda.synchronize()
                times = []
                for _ in range(iters):
                    t0 = time.perf_counter()
                    call()
                    torch.cuda.synchronize()
                    times.append(time.perf_counter() - t0)
                s, n = statistics.median(times), len(ranks)
                # bus bandwidth as nccl-tests reports it: all-reduce moves 2(n-1)/n of the buffer per rank
                factor = 2 * (n - 1) / n if op == "all_reduce" else 1.0
                results[f"{name}/{op}"] = {"ranks": ranks, "bytes": size_bytes, "median_s": s,
                                           "algbw_gb_per_s": size_bytes / s / 1e9,
                                           "busbw_gb_per_s": factor * size_bytes / s / 1e9}
            dist.barrier()
    if rank == 0:
        Path(out).write_text(json.dumps(results))
    dist.destroy_process_group()


def nccl_bandwidth(n_gpus: int, sync_ranks: list[int], size_bytes: int, iters: int, work: Path) -> dict:
    """Plain NCCL between GPU 0 and GPU 1, and over `sync_ranks` (learner rank 0's GPU and the generators')."""
    import torch.multiprocessing as mp
    from pipeline.rl.distributed import free_port
    groups = {"gpu0_gpu1": [0, 1]}
    if len(sync_ranks) > 1 and sync_ranks != [0, 1]:
        groups["sync_members"] = sync_ranks
    out = work / "bandwidth.json"
    mp.spawn(_bandwidth_worker, args=(n_gpus, free_port(), groups, size_bytes, iters, str(out)), nprocs=n_gpus,
             join=True)
    return json.loads(out.read_text())


def sync_layout(n_gpus: int) -> tuple[int, int]:
    """(learner ranks, generators) of the sync benchmark: ZeRO-3 over 2 GPUs and generators on the rest."""
    ranks = 2 if n_gpus >= 3 else 1
    return ranks, n_gpus - ranks


def weight_sync(n_gpus: int, params_m: int, repeats: int, work: Path) -> dict:
    """Collective and object-store weight sync from a ZeRO-3 learner to transformers generators, on Ray."""
    import ray
    from actors.generators import CollectiveWeightSync, WeightState, make_generator_pool
    from actors.learners import LearnerGroup
    from actors.cluster import start_ray
    from pipeline.rollout.tiny_model import resolve_model_path
    ranks, gens = sync_layout(n_gpus)
    hidden = 2048
    layers = max(1, round(params_m * 1e6 / (16 * hidden * hidden)))  # a layer has about 16 hidden^2 weights
    cfg = load_config(None, ["model.dtype=bfloat16", f"model.tiny_dir={work}/model", f"model.tiny_hidden_size={hidden}",
                             f"model.tiny_layers={layers}", "model.tiny_heads=16", "rollout.backend=transformers",
                             "rollout.device=cuda", f"rollout.generator_actors={gens}", f"learner.ranks={ranks}",
                             "learner.zero_stage=3", "learner.precision=bf16"])
    t0 = time.perf_counter()
    model_path = resolve_model_path(cfg.model)
    build_s = time.perf_counter() - t0
    start_ray(ranks + gens + 1, num_gpus=n_gpus)
    learners = LearnerGroup(cfg.learner, cfg.rl, model_path, cfg.rollout.temperature, 1.0, cfg.run.seed)
    generators = make_generator_pool(cfg.model, cfg.rollout, cfg.run.seed, num_gpus_per_actor=1.0)
    out = {"learner_ranks": ranks, "generators": gens, "hidden": hidden, "layers": layers,
           "model_build_s": build_s, "bucket_bytes": cfg.learner.sync_bucket_bytes}
    try:
        generators.map("ping", [()] * generators.size)
        collective = CollectiveWeightSync(learners, "nccl")
        t0 = time.perf_counter()
        collective.connect(generators)
        out["collective_connect_s"] = time.perf_counter() - t0
        rows = []
        for version in range(1, repeats + 1):
            t0 = time.perf_counter()
            sent = collective.broadcast(generators, version)
            wall = time.perf_counter() - t0
            rows.append({**sent, "wall_s": wall, "gb_per_s_broadcast": sent["bytes"] / sent["seconds"] / 1e9,
                         "gb_per_s_wall": sent["bytes"] / wall / 1e9})
            print(f"collective sync v{version}:", rows[-1], flush=True)
        out["collective"] = rows
        out["bytes"] = rows[-1]["bytes"]
        state, rows = WeightState(), []
        for version in range(repeats + 1, 2 * repeats + 1):
            t0 = time.perf_counter()
            state.broadcast(generators, learners.export_ref(), version)
            wall = time.perf_counter() - t0
            rows.append({"wall_s": wall, "gb_per_s_wall": out["bytes"] / wall / 1e9})
            print(f"object-store sync v{version}:", rows[-1], flush=True)
        out["object_store"] = rows
    finally:
        generators.shutdown()
        learners.shutdown()
        ray.shutdown()
    return out


def train_overrides(n_gpus: int, run_dir: Path) -> list[str]:
    """configs/h200x8.yaml sized to n_gpus: learner ranks and generators on whole GPUs, evaluators on the rest."""
    ranks, rest = (2, n_gpus - 2) if n_gpus >= 4 else (1, n_gpus - 1)
    gens = max(1, rest // 2)
    evals = rest - gens  # 0: the evaluator runs on CPU (verdicts not_executed)
    return [f"learner.ranks={ranks}", f"learner.zero_stage={3 if ranks > 1 else 2}", f"rollout.generator_actors={gens}",
            f"eval.gpus={evals}", f"run.output_dir={run_dir}", "run.name=multi_gpu", "train.steps=2",
            "train.wandb_mode=disabled", "train.progress_bar=false", "train.checkpoint_every_steps=0"]


def rl_steps(n_gpus: int, work: Path) -> dict:
    """Two RL steps of configs/h200x8.yaml on n_gpus: each step's times, busy fractions and sync figures."""
    from actors.cluster import Cluster
    from pipeline.rl.loop import cpus_needed, run_training
    overrides = train_overrides(n_gpus, work / "runs")
    cfg = load_config(ROOT / "configs" / "h200x8.yaml", overrides + [f"compile.cache_dir={work}/compile-cache"])
    run_dir = work / "runs" / "multi_gpu"
    rows = run_training(cfg, run_dir, Cluster(cfg, cpus_needed(cfg)))
    keep = ("step", "time/", "busy/", "sync/", "learner/update_s", "learner/weight_version", "rollout/episodes",
            "rollout/tokens_generated", "reward/turn_mean")
    steps = [{k: v for k, v in r.items() if k.startswith(keep)} for r in rows]
    for s in steps:
        print("RL step:", s, flush=True)
    return {"config": "configs/h200x8.yaml", "overrides": overrides, "steps": steps}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--parts", default="evaluators,sync,train", help="comma-separated: evaluators, sync, train")
    ap.add_argument("--workers-per-gpu", type=int, default=4, help="evaluators per GPU")
    ap.add_argument("--repeats", type=int, default=2, help="copies of the candidate set per scaling run")
    ap.add_argument("--sync-params-m", type=int, default=500, help="parameters of the sync model, in millions")
    ap.add_argument("--sync-repeats", type=int, default=3, help="syncs of each kind")
    ap.add_argument("--bandwidth-mib", type=int, default=1024, help="buffer of the NCCL bandwidth test, MiB")
    args = ap.parse_args()
    import torch
    n_gpus = torch.cuda.device_count()
    report: dict = {"gpus": n_gpus, "collective_env": COLLECTIVE_ENV}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    if n_gpus < 2:
        report["skipped"] = f"{n_gpus} GPU(s) visible; this benchmark needs a host with at least 2"
        print(f"multi_gpu: {report['skipped']}")
        Path(args.out).write_text(json.dumps(report, indent=2))
        return 0
    report["machine"] = machine()
    work = Path(tempfile.mkdtemp(prefix="cudaperf-multi-gpu-"))
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = set(parts) - {"evaluators", "sync", "train"}
    if unknown:
        print(f"multi_gpu: unknown part(s) {sorted(unknown)}; use evaluators, sync, train", file=sys.stderr)
        return 2
    for part in parts:  # each part on its own: one failing still leaves the others' figures
        t0 = time.perf_counter()
        try:
            if part == "evaluators":
                report[part] = evaluator_scaling(n_gpus, args.workers_per_gpu, args.repeats, work)
            elif part == "sync":
                ranks, gens = sync_layout(n_gpus)
                report["bandwidth"] = nccl_bandwidth(n_gpus, [0] + list(range(ranks, n_gpus)),
                                                     args.bandwidth_mib << 20, 10, work)
                print("NCCL bandwidth:", report["bandwidth"], flush=True)
                report[part] = weight_sync(n_gpus, args.sync_params_m, args.sync_repeats, work)
            else:
                report[part] = rl_steps(n_gpus, work)
        except Exception as e:  # reported in the JSON and the summary; the next part still runs
            report[part] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-4000:]}
            print(f"multi_gpu: part {part} failed: {type(e).__name__}: {e}", flush=True)
        report.setdefault("part_s", {})[part] = time.perf_counter() - t0
        Path(args.out).write_text(json.dumps(report, indent=2))
    print(summary(report))
    return 0


def summary(report: dict) -> str:
    """A few lines: scaling ratios, bandwidth against sync speed, busy fractions."""
    lines = [f"==== multi_gpu on {report['gpus']} GPUs ===="]
    evaluators = report.get("evaluators", {})
    for n, r in evaluators.get("by_gpus", {}).items():
        lines.append(f"evaluators {n} GPU(s): {r['candidates_per_minute']:.1f} cand/min, "
                     f"ratio to 0.9*N*one-GPU {r['ratio_to_goal']:.2f}")
    for name, r in report.get("bandwidth", {}).items():
        lines.append(f"nccl {name}: busbw {r['busbw_gb_per_s']:.1f} GB/s")
    sync = report.get("sync", {})
    if sync.get("collective"):
        best = max(sync["collective"], key=lambda r: r["gb_per_s_wall"])
        obj = max(sync.get("object_store", [{}]), key=lambda r: r.get("gb_per_s_wall", 0))
        lines.append(f"weight sync {sync['bytes'] / 1e9:.2f} GB to {sync['generators']} generator(s): collective "
                     f"{best['wall_s']:.2f} s ({best['gb_per_s_wall']:.1f} GB/s wall, {best['gb_per_s_broadcast']:.1f} "
                     f"GB/s broadcast); object store {obj.get('wall_s', float('nan')):.2f} s")
    for s in report.get("train", {}).get("steps", []):
        lines.append(f"RL step {s['step']}: {s.get('time/step_s', float('nan')):.1f} s, busy gen "
                     f"{s.get('busy/generator', float('nan')):.2f} eval {s.get('busy/evaluator', float('nan')):.2f} "
                     f"learn {s.get('busy/learner', float('nan')):.2f}, sync {s.get('time/sync_s', float('nan')):.2f} s")
    lines += [f"{part} FAILED: {report[part]['error']}" for part in ("evaluators", "sync", "train")
              if isinstance(report.get(part), dict) and "error" in report[part]]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
