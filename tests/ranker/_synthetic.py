"""A synthetic measured dataset with a known speed rule, for the ranker tests.

Each family has tasks; each task has implementations of four strategies (two with two parameter
variants: another block size). Features are analysis-like dicts (the keys the evaluator writes),
the code carries the strategy's telltale tokens, and the time follows a hidden rule:
speed = 2.5 * coalescing + 0.8 * vectorised + 0.8 * occupancy - 1.2 * (64 registers or more)
+ 0.8 * (has a barrier: the tiled kernel's reuse) + a task constant + small noise, time = exp(-speed).
So no single heuristic (coalescing, occupancy, transactions, structural score) ranks every pair right.
"""
from __future__ import annotations

import json
import math

import numpy as np

from pipeline.ranker.dataset import Impl, RankData
from pipeline.core.records import Implementation, InputConfig, Task, WorkModel

STRATEGIES = {  # strategy -> (coalescing, vectorised, code body)
    "naive": (0.25, 0, "out[i] = a[i * stride] + b[i * stride];"),
    "coalesced": (0.95, 0, "out[i] = a[i] + b[i];"),
    "tiled_shared": (0.9, 0, "__shared__ float tile[256]; tile[threadIdx.x] = a[i]; __syncthreads(); "
                             "out[i] = tile[threadIdx.x] + b[i];"),
    "vectorized": (0.95, 1, "float4 v = reinterpret_cast<const float4*>(a)[i]; "
                            "reinterpret_cast<float4*>(out)[i] = v;"),
}
VARIANTS = {"naive": (256,), "coalesced": (128, 512), "tiled_shared": (256,), "vectorized": (64, 256)}
CONFIGS = ("large", "large_odd")


def _code(task_id: str, strategy: str, block: int) -> str:
    body = STRATEGIES[strategy][2]
    return (f"// {task_id} {strategy}\n__global__ void k(const float* a, const float* b, float* out, int n, "
            f"int stride) {{\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) {{ {body} }}\n}}\n"
            f"extern \"C\" void f(const float* a, const float* b, float* out, int n) {{\n"
            f"  k<<<(n + {block - 1}) / {block}, {block}>>>(a, b, out, n, 7);\n}}\n")


def _features(strategy: str, block: int, rng) -> dict:
    coal, vec, _ = STRATEGIES.get(strategy, (float(rng.uniform(0.3, 1.0)), int(rng.integers(0, 2)), ""))
    coal = float(np.clip(coal + rng.normal(0, 0.03), 0, 1))
    regs = int(rng.choice([24, 32, 40, 64, 96]))
    occ = float(rng.choice([0.25, 0.5, 0.75, 1.0]))
    return {
        "struct.score": 0.5, "struct.kernels": 1, "struct.arch": "sm_90", "struct.errors": 0,
        "ptxas.available": True, "ptxas.registers_max": regs,
        "ptxas.shared_bytes_max": 1024 * (strategy == "tiled_shared"),
        "ptxas.spill_bytes": 0, "ptxas.stack_frame_bytes_max": 0, "ptxas.barriers_max": int(strategy == "tiled_shared"),
        "occ.available": True, "occ.occupancy": occ, "occ.min_occupancy": occ, "occ.limiter": "registers",
        "occ.threads_per_block": block, "occ.launch_fails": False,
        "struct.coalescing": coal, "struct.vectorization": float(vec), "struct.occupancy": min(1.0, occ / 0.5),
        "struct.sync_safety": 1.0, "struct.spills": 1.0,
        "static.kernel": "k", "static.global_loads": 2, "static.global_stores": 1, "static.vector_loads": vec,
        "static.frac_coalesced": coal, "static.frac_strided": 1 - coal, "static.frac_broadcast": 0.0,
        "static.frac_indirect": 0.0, "static.frac_unknown": 0.0, "static.frac_vector": float(vec),
        "static.has_global_accesses": True, "static.barriers": int(strategy == "tiled_shared"),
        "static.pragma_unroll": int(rng.integers(0, 3)),
    }


def make_task(task_id: str, family: str, impls: list[Implementation]) -> Task:
    return Task(id=task_id, kind="c2cuda", family=family, reference="void f(const float* a, float* out, int n) {}",
                function="f", configs=[InputConfig(name="small", params={"n": 1000}),
                                       *(InputConfig(name=c, params={"n": 1 << 22}, check=False, time=True)
                                         for c in CONFIGS)],
                work=WorkModel(flops="n", bytes="12*n"), implementations=impls)


def speed_of(features: dict) -> float:
    return (2.5 * features["struct.coalescing"] + 0.8 * features["static.frac_vector"] + 0.8 * features["occ.occupancy"]
            - 1.2 * (features["ptxas.registers_max"] >= 64) + 0.8 * features["static.barriers"])


def synthetic_data(n_families: int = 12, tasks_per_family: int = 2, seed: int = 0) -> RankData:
    """RankData of the rule above; families fam00, fam01, ...; splits unset."""
    rng = np.random.default_rng(seed)
    impls, tasks = [], {}
    for f in range(n_families):
        family = f"fam{f:02d}"
        for t in range(tasks_per_family):
            task_id = f"c2cuda/{family}/t{t}"
            constant = rng.normal(0, 1)
            records, mine = [], []
            for strategy, blocks in VARIANTS.items():
                for block in blocks:
                    name = f"{strategy}_{block}"
                    feats = _features(strategy, block, rng)
                    code = _code(task_id, strategy, block)
                    records.append(Implementation(name=name, strategy=strategy, format="c2cuda", code=code))
                    times = {c: math.exp(-(speed_of(feats) + constant + rng.normal(0, 0.03))) * (1 + 0.3 * k)
                             for k, c in enumerate(CONFIGS)}
                    mine.append(Impl(task_id, family, "", "c2cuda", name, strategy, "c2cuda", code, feats, times))
            tasks[task_id] = make_task(task_id, family, records)
            impls += mine
    return RankData(impls, tasks, "synthetic")


def measurement_rows(data: RankData) -> list[dict]:
    """The rows `cudaperf data measure` would write for `data` (schema of pipeline/tasks/measured.py)."""
    from datetime import datetime, timezone

    rows = []
    for im in data.impls:
        measured_hash = data.tasks[im.task_id].measured_hash() if im.task_id in data.tasks else "x"
        for config, t in im.times_ms.items():
            rows.append({
                "task_id": im.task_id, "kind": im.kind, "family": im.family, "split": im.split, "impl_name": im.name,
                "strategy": im.strategy, "format": im.format, "config": config, "correct": True, "max_error": 0.0,
                "median_ms": t, "iqr_ms": t * 0.01, "min_ms": t * 0.99, "trials": 20,
                "features_json": json.dumps(im.features), "error": "", "task_hash": measured_hash,
                "gpu_name": "NVIDIA H200",
                "sm_clock_mhz": 1980, "mem_clock_mhz": 3201, "driver": "580", "cuda": "13.0",
                "torch_version": "2.11", "measured_at": datetime(2026, 12, 2, tzinfo=timezone.utc),
                "generator_version": "1"})
    return rows


def builtin_rows(tasks: list[Task], test_families: set[str], seed: int = 0) -> list[dict]:
    """Measurement rows for the built-in tasks' CUDA implementations with synthetic features and
    times of the rule above (the code is real, so the task sources resolve it)."""
    rng = np.random.default_rng(seed)
    impls = []
    for task in tasks:
        for impl in task.implementations:
            if impl.format == "kernelbench":
                continue
            feats = _features(impl.strategy, 256, rng)
            times = {c: math.exp(-(speed_of(feats) + rng.normal(0, 0.03))) for c in CONFIGS}
            split = "test" if task.family in test_families else "train"
            impls.append(Impl(task.id, task.family, split, task.kind, impl.name, impl.strategy, impl.format,
                              impl.code, feats, times))
    return measurement_rows(RankData(impls, {t.id: t for t in tasks}))
