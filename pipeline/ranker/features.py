"""The ranker's inputs: the allow-listed pre-run features of an implementation, and their cache.

In: a features dict as the evaluator or the dataset measurement writes it (`Analysis.features()`
of pipeline/structure, possibly with keys added after timing), the Task, or a CUDA source to
analyse here with nvcc. Out: a fixed-length float vector over `FEATURE_NAMES` (NaN = missing),
and, for sources, the features dict computed once and cached on disk by a hash of the source.

The ranker must judge a program only by what exists before it runs (docs/protocol.md, "Reward"), so
the features it reads are an explicit allow-list, not "everything but": a key added later
(`roofline.fraction`, written by the evaluator after timing; Nsight Compute metrics; anything
measured) is never read, because it is not on the list. The module refuses at import a list
entry whose name looks timing-derived, and `struct.score` is not on it because it includes the
roofline component whenever a time was known. Decorations (`#pragma unroll` counts,
`__launch_bounds__` values) are left out for the reason score.py gives: a policy could add them
for reward without changing the program; their real effect shows in the ptxas report.
Task features (kind, arithmetic intensity and bytes of the task's largest timed configuration)
come from the task's work model, which is known before anything runs.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from pipeline.structure.occupancy import LIMITERS

PTXAS = ("ptxas.available", "ptxas.registers_max", "ptxas.shared_bytes_max", "ptxas.spill_bytes",
         "ptxas.stack_frame_bytes_max", "ptxas.barriers_max")
OCCUPANCY = ("occ.available", "occ.occupancy", "occ.min_occupancy", "occ.threads_per_block", "occ.launch_fails")
COMPONENTS = ("struct.kernels", "struct.errors", "struct.coalescing", "struct.vectorization", "struct.bank_conflicts",
              "struct.sync_safety", "struct.occupancy", "struct.spills", "struct.atomics")
STATIC = tuple("static." + k for k in (
    "global_loads", "global_stores", "vector_loads", "vector_stores", "shared_arrays", "shared_arrays_unused",
    "shared_arrays_padded", "shared_bytes_used", "shared_bytes_declared", "dynamic_shared", "shared_loads",
    "shared_stores", "bank_conflicted_accesses", "max_bank_ways", "bank_conflict_cost", "barriers",
    "divergent_barriers", "barriers_after_divergent_return", "atomics_global", "atomics_shared",
    "contended_atomic_fraction", "loops", "grid_stride_loops", "max_loop_depth", "pointer_params", "restrict_params",
    "has_global_accesses", "incomplete", "coalesced_loads", "coalesced_stores", "strided_loads", "strided_stores",
    "broadcast_loads", "broadcast_stores", "indirect_loads", "indirect_stores", "unknown_loads", "unknown_stores",
    "frac_coalesced", "frac_strided", "frac_broadcast", "frac_indirect", "frac_unknown", "frac_load_coalesced",
    "frac_vector", "warp_shuffle", "warp_vote", "warp_reduce", "warp_syncwarp", "warp_coop_groups", "kernels",
    "parse_errors"))
LIMITER_ONE_HOT = tuple(f"occ.limiter={x}" for x in (*LIMITERS, "launch_fails"))
ALLOWED_FEATURES = PTXAS + OCCUPANCY + LIMITER_ONE_HOT + COMPONENTS + STATIC
"""Keys of the features dict the ranker reads (one-hot `occ.limiter=X` from the string `occ.limiter`)."""

TASK_FEATURES = ("task.torch2cuda", "task.log10_intensity", "task.log10_bytes")
FEATURE_NAMES = ALLOWED_FEATURES + TASK_FEATURES
"""The ranker's input vector, in order."""

FORBIDDEN = re.compile(r"roofline|time|_ms\b|_s\b|speedup|measured|achieved|ncu|profile|dram|sectors_per|"
                       r"struct\.score|pragma|launch_bounds", re.IGNORECASE)
"""Names that must never be read: timing- or profile-derived, or decorations (see the docstring)."""



def check_allow_list(names) -> None:
    """Raise if a name on a feature list looks timing-derived or is a decoration (a programming error)."""
    bad = [n for n in names if FORBIDDEN.search(n)]
    if bad:
        raise RuntimeError(f"ranker feature allow-list holds run-time or decoration features {bad}; remove them")


check_allow_list(FEATURE_NAMES)

ANALYSIS_VERSION = "2"  # in the feature cache key (2: the trusted resource report, never-launched kernels left out)
"""Bump when pipeline/structure changes what `features()` returns, so cached features are recomputed."""


def _number(value) -> float:
    """A feature's value as a float; NaN (the models' "missing") for none, text, or an infinite value."""
    if value is None or isinstance(value, str):
        return math.nan
    try:
        value = float(value)
    except (TypeError, ValueError):
        return math.nan
    return value if math.isfinite(value) else math.nan


def task_features(task) -> dict[str, float]:
    """Kind and the work model of the task's largest timed configuration (pre-run facts of the task)."""
    from pipeline.structure.roofline import work_for_config
    from pipeline.tasks import TaskError, config_params
    out = {"task.torch2cuda": float(task.kind == "torch2cuda"), "task.log10_intensity": math.nan,
           "task.log10_bytes": math.nan}
    best = None
    for cfg in task.configs:
        if not cfg.time:
            continue
        try:
            flops, nbytes = work_for_config(task.work, config_params(task, cfg))
        except (TaskError, ValueError, ZeroDivisionError):
            continue
        if best is None or nbytes > best[1]:
            best = (flops, nbytes)
    if best is not None and best[1] > 0:
        out["task.log10_bytes"] = math.log10(best[1])
        out["task.log10_intensity"] = math.log10(max(best[0], 1.0) / best[1])
    return out


def feature_vector(features: dict, task_feats: dict[str, float]) -> np.ndarray:
    """The allow-listed features of one implementation plus its task's, as float64 over FEATURE_NAMES."""
    limiter = features.get("occ.limiter")
    out = np.full(len(FEATURE_NAMES), math.nan)
    for i, name in enumerate(ALLOWED_FEATURES):
        if name.startswith("occ.limiter="):
            out[i] = math.nan if limiter is None else float(name.split("=", 1)[1] == limiter)
        else:
            out[i] = _number(features.get(name))
    for j, name in enumerate(TASK_FEATURES):
        out[len(ALLOWED_FEATURES) + j] = task_feats.get(name, math.nan)
    return out


# --- computing features from source (nvcc + static analysis), cached by source hash ----------

def source_key(code: str, fmt: str, arch: str) -> str:
    """The cache key of one implementation's features."""
    return hashlib.sha256(f"{ANALYSIS_VERSION}\0{arch}\0{fmt}\0{code}".encode()).hexdigest()


def analyze_implementation(code: str, fmt: str, arch: str = "sm_90", nvcc: str = "nvcc") -> dict:
    """The evaluator's compile-time features of one implementation, with nvcc run here for the
    ptxas report (launch configuration from the source, as no run recorded one)."""
    from pipeline.evaluation.gate import cuda_sources_of
    from pipeline.core.records import Candidate
    from pipeline.structure.analyze import analyze_source
    texts = [text for text, _ in cuda_sources_of(Candidate(task_id="-", code=code, format=fmt))]
    if not texts:
        return {}
    return analyze_source("\n".join(texts), arch=arch, run_nvcc=True, nvcc=nvcc).features()


def _analyze_job(job: tuple[str, str, str, str]) -> dict:
    return analyze_implementation(*job)


class FeatureCache:
    """Features of implementation sources, one JSON file per source hash under `directory`."""

    def __init__(self, directory: str | Path, arch: str = "sm_90", nvcc: str = "nvcc", workers: int = 2):
        self.directory = Path(directory).expanduser()
        self.arch, self.nvcc, self.workers = arch, nvcc, max(1, workers)

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get_many(self, sources: list[tuple[str, str]]) -> list[dict]:
        """Features of each (code, format); computes the missing ones in `workers` processes."""
        keys = [source_key(code, fmt, self.arch) for code, fmt in sources]
        out: list[dict | None] = []
        for key in keys:
            path = self._path(key)
            out.append(json.loads(path.read_text()) if path.is_file() else None)
        todo = sorted({k: i for i, (k, v) in enumerate(zip(keys, out)) if v is None}.items())
        if todo:
            jobs = [(*sources[i], self.arch, self.nvcc) for _, i in todo]
            if self.workers > 1 and len(jobs) > 1:
                with ProcessPoolExecutor(self.workers) as pool:
                    computed = list(pool.map(_analyze_job, jobs, chunksize=4))
            else:
                computed = [_analyze_job(j) for j in jobs]
            fresh = {k: feats for (k, _), feats in zip(todo, computed)}
            for key, feats in fresh.items():
                self._write(key, feats)
            out = [v if v is not None else fresh[k] for k, v in zip(keys, out)]
        return out  # type: ignore[return-value]

    def _write(self, key: str, feats: dict) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(feats, default=str))
        os.replace(tmp, path)
