"""CPU checks of generated tasks: every implementation compiles, every reference runs.

    check_compile(tasks, workers, batch) -> list[str]        # one line per implementation that fails nvcc
    check_gate(tasks) -> list[str]                            # one line per implementation the static gate rejects
    check_c_references(tasks, workers) -> list[str]          # C references: gcc, run on small configs
    check_torch_references(tasks) -> list[str]               # PyTorch references: run on CPU, small configs
    sample_tasks(tasks, n) -> list[Task]                      # a spread over families

Compiling one small .cu costs about a second of fixed nvcc overhead, so `check_compile` builds many
implementations with one nvcc call (`Compiler.compile_cuda_batch`, as measurement does). A batch
that fails is compiled again one implementation at a time (through the project's Compiler and its
cache) to name the culprit.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pipeline.core.records import Task


def sample_tasks(tasks: list[Task], n: int = 0, per_group: int = 0) -> list[Task]:
    """About n tasks (or `per_group` tasks of every (family, kind) group) spread evenly over the
    groups and evenly spaced within each (deterministic)."""
    groups: dict[tuple[str, str], list[Task]] = {}
    for t in sorted(tasks, key=lambda t: t.id):
        groups.setdefault((t.family, t.kind), []).append(t)
    if not groups:
        return []
    per = per_group or max(1, -(-n // len(groups)))
    out: list[Task] = []
    for key in sorted(groups):
        g = groups[key]
        out += g[::max(1, len(g) // per)][:per]
    return out


def check_compile(tasks: list[Task], workers: int = 2, batch: int = 40, progress: bool = False,
                  compile_cfg=None) -> list[str]:
    """Compile every implementation of `tasks` with nvcc; one line per failing implementation."""
    from pipeline.core.config import CompileSection
    from pipeline.dataset.measure_worker import default_entry
    from pipeline.evaluation.build.compile import Compiler
    cfg = compile_cfg or CompileSection()
    units = [(f"{t.id}/{i.name}", i.code, default_entry(t, i.format))
             for t in tasks for i in t.implementations if i.format in ("c2cuda", "light")]
    batches = [units[k:k + batch] for k in range(0, len(units), batch)]
    compiler = Compiler(cfg)
    scratch = tempfile.TemporaryDirectory(prefix="cudaperf-check-")  # batch libraries are not worth caching
    batcher = Compiler(cfg.model_copy(update={"cache_dir": scratch.name}))
    failures: list[str] = []
    done = 0

    def one(b):
        if batcher.compile_cuda_batch([code for _, code, _ in b], [entry for _, _, entry in b]) is not None:
            return []
        bad = []
        for label, code, _ in b:
            res = compiler.compile_cuda(code)
            if not res.ok:
                bad.append(f"{label}: {res.log.strip().splitlines()[0] if res.log.strip() else 'failed'}")
        return bad or [f"batch of {len(b)} starting at {b[0][0]}: fails together, compiles alone"]

    with scratch, ThreadPoolExecutor(max(1, workers)) as pool:
        for bad in pool.map(one, batches):
            failures += bad
            done += 1
            if progress:
                print(f"\rcompiled {done}/{len(batches)} batches, {len(failures)} failures", end="", file=sys.stderr,
                      flush=True)
    if progress:
        print(file=sys.stderr)
    return failures


def check_gate(tasks: list[Task]) -> list[str]:
    """Run the evaluator's static gate on every implementation; one line per rejected one."""
    from pipeline.evaluation.gate import check_candidate
    from pipeline.core.records import Candidate
    failures = []
    for t in tasks:
        for impl in t.implementations:
            cand = Candidate(task_id=t.id, code=impl.code, format=impl.format)
            errors = [f.message for f in check_candidate(cand, t) if f.severity == "error"]
            if errors:
                failures.append(f"{t.id}/{impl.name}: {errors[0]}")
    return failures


# --- C references ------------------------------------------------------------------------------------
def small_configs(task: Task) -> Task:
    """The task with only its check configurations that are not timing ones (what the C reference runs on)."""
    return task.model_copy(update={"configs": [c for c in task.configs if c.check and not c.time]})


def run_references(payload: list[dict]) -> list[dict]:
    """In a child process: run each C reference library on its task's small configs; report problems."""
    import numpy as np
    from pipeline.evaluation.checks.reference_c import build_c2cuda, run_c_reference
    out = []
    for item in payload:
        task = Task.model_validate(item["task"])
        group = build_c2cuda(task, seed=1234)
        run_c_reference(group, item["library"])
        problems = []
        for cd in group.configs:
            for outputs in cd.expected:
                for b, arr in outputs.items():
                    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
                        problems.append(f"config {cd.name}: output '{group.buffers[b].name}' has "
                                        f"{int((~np.isfinite(arr)).sum())} non-finite values")
            if len(cd.expected) == 2:
                same = all(np.array_equal(cd.expected[0][b], cd.expected[1][b]) for b in cd.expected[0])
                if same and cd.expected[0] and any(group.buffers[b].role == "out" for b in cd.expected[0]):
                    problems.append(f"config {cd.name}: the outputs do not depend on the inputs")
        out.append({"id": task.id, "problems": problems})
    return out


def check_c_references(tasks: list[Task], workers: int = 2, chunk: int = 40, compile_cfg=None) -> list[str]:
    """gcc-compile every c2cuda task's C reference and run it on its small configs in child processes."""
    from pipeline.core.config import CompileSection
    from pipeline.evaluation.build.compile import Compiler
    compiler = Compiler(compile_cfg or CompileSection())
    failures: list[str] = []
    items = []
    for t in tasks:
        if t.kind != "c2cuda":
            continue
        res = compiler.compile_c_reference(t.reference)
        if not res.ok:
            failures.append(f"{t.id}: C reference does not compile: {res.log.strip()[:300]}")
            continue
        items.append({"task": json.loads(small_configs(t).model_dump_json()), "library": res.artifact})

    def run_chunk(part: list[dict]) -> list[str]:
        with tempfile.TemporaryDirectory(prefix="cudaperf-refs-") as d:
            Path(d, "in.json").write_text(json.dumps(part))
            proc = subprocess.run([sys.executable, "-m", "pipeline.dataset.checks", "in.json", "out.json"], cwd=d,
                                  capture_output=True, text=True, timeout=600,
                                  env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
            if proc.returncode != 0:
                if len(part) > 1:
                    return [f for p in part for f in run_chunk([p])]
                return [f"{part[0]['task']['id']}: C reference crashed (exit {proc.returncode}): {proc.stderr[-300:]}"]
            result = json.loads(Path(d, "out.json").read_text())
        return [f"{r['id']}: {p}" for r in result for p in r["problems"]]

    chunks = [items[k:k + chunk] for k in range(0, len(items), chunk)]
    with ThreadPoolExecutor(max(1, workers)) as pool:
        for bad in pool.map(run_chunk, chunks):
            failures += bad
    return failures


def check_torch_references(tasks: list[Task]) -> list[str]:
    """Run every torch2cuda reference on CPU on its small check configs, twice with different inputs;
    outputs must be finite and must change with the inputs."""
    import torch
    from pipeline.evaluation.checks.reference_torch import load_reference_module
    from pipeline.tasks import config_params
    failures = []
    for t in tasks:
        if t.kind != "torch2cuda":
            continue
        for cfg in t.configs:
            if cfg.time:
                continue
            try:
                ns = load_reference_module(t, config_params(t, cfg))
                torch.manual_seed(0)
                model = ns["Model"](*ns["get_init_inputs"]())
                runs = []
                for seed in (1, 2):
                    torch.manual_seed(seed)
                    with torch.no_grad():
                        out = model(*ns["get_inputs"]())
                    runs.append(list(out) if isinstance(out, (tuple, list)) else [out])
                for o in runs[0]:
                    if o.is_floating_point() and not bool(torch.isfinite(o).all()):
                        failures.append(f"{t.id}: config {cfg.name}: non-finite output")
                if all(torch.equal(a, b) for a, b in zip(*runs)):
                    failures.append(f"{t.id}: config {cfg.name}: the outputs do not depend on the inputs")
            except Exception as e:  # a generator bug: report it with the task, never stop the check
                failures.append(f"{t.id}: config {cfg.name}: {type(e).__name__}: {e}")
    return failures


if __name__ == "__main__":  # child process of check_c_references
    src, dst = sys.argv[1:3]
    Path(dst).write_text(json.dumps(run_references(json.loads(Path(src).read_text()))))
