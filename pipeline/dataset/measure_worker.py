"""The GPU side of dataset measurement: a worker process that checks and times trusted implementations.

In (over a multiprocessing pipe from `pipeline.dataset.measure`): one job per task: the task, the
compiled shared library of each implementation to measure and the symbol to call in it (several
implementations may share one library, each under its own symbol), a seed. Out: per
implementation and configuration whether it passed (both input sets, outputs poisoned), its worst
error and its trial times; per timing configuration the PyTorch reference's times (torch2cuda).

The implementations are the dataset's own code (trusted), so they run in this process, many per
process, instead of one sandboxed child each, loaded as the child loads them (`child.NativeRunner`).
Everything else is the evaluator's, through its public group API (`pipeline/evaluation/harness.py`):
inputs and reference outputs, staging and checking (`stage_inputs`, `check_config`), the one
timing function (`timer`), and the GPU lock (checks shared, timing exclusive, so several workers
can share one GPU). A CUDA error can leave the context unusable, so the worker reports the
implementation that was running and exits; the supervisor starts a fresh one. Before each step
the worker says which implementation it is about to run, so a crash or hang that kills this
process without a word still names its cause.
"""
from __future__ import annotations

import importlib
import math
import subprocess
import time
import traceback

WORKER_CLASS = "pipeline.dataset.measure_worker:GpuMeasurer"


class TaskFailed(RuntimeError):
    """The task's own data is unusable here (its reference or naive baseline failed)."""


def resolve(path: str):
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def worker_main(conn, settings: dict, worker_class: str = WORKER_CLASS) -> None:
    """Process entry point: build the measurer, then answer jobs until None arrives."""
    state = {"impl": None, "stage": "startup"}
    try:
        measurer = resolve(worker_class)(settings)
        conn.send({"event": "ready", "info": measurer.info()})
    except Exception as e:  # no GPU, no driver: the supervisor turns this into one clear line
        conn.send({"event": "startup_error", "error": f"{type(e).__name__}: {e}"})
        return

    def report(impl: str | None, stage: str) -> None:
        state["impl"], state["stage"] = impl, stage
        conn.send({"event": "running", "impl": impl, "stage": stage})

    while True:
        job = conn.recv()
        if job is None:
            return
        state["impl"], state["stage"] = None, "prepare"
        try:
            conn.send({"event": "done", "result": measurer.measure(job, report)})
        except TaskFailed as e:
            conn.send({"event": "task_failed", "error": str(e)})
        except Exception as e:
            fatal = measurer.is_fatal(e)
            detail = f"{type(e).__name__}: {e}" if fatal else traceback.format_exc(limit=4)
            conn.send({"event": "fatal" if fatal else "task_failed", "impl": state["impl"], "stage": state["stage"],
                       "error": detail[-2000:]})
            if fatal:  # the CUDA context may be dead: a fresh process takes the next job
                return


def default_entry(task, fmt: str) -> str:
    """The function an implementation of this format exports when built on its own."""
    from pipeline.evaluation import light_abi
    return task.function if fmt == "c2cuda" else light_abi.ENTRY_POINT


def nvcc_release(nvcc: str = "nvcc") -> str:
    """'13.0.88' from `nvcc --version` ('' when nvcc is missing)."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    for line in out.splitlines():
        if "release" in line and ", V" in line:
            return line.rsplit(", V", 1)[1].strip()
    return ""


def driver_version(lib) -> str:
    """The NVIDIA driver's version as nvidia-smi prints it, else the CUDA driver API version."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "-i", "0"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        if out:
            return out.splitlines()[0].strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    import ctypes
    v = ctypes.c_int()
    lib.cuDriverGetVersion(ctypes.byref(v))
    return f"cuda-api {v.value // 1000}.{v.value % 1000 // 10}"


class GpuMeasurer:
    """Checks and times every implementation of a task in this process, on GPU 0 of this process."""

    def __init__(self, settings: dict):
        from pipeline.core.config import CompileSection, EvalSection
        from pipeline.evaluation.evaluator import Evaluator
        from pipeline.evaluation.harness import GroupHarness
        self.eval_cfg = EvalSection.model_validate(settings["eval"])
        self.compile_cfg = CompileSection.model_validate(settings["compile"])
        self.rounds = max(1, self.eval_cfg.timing_rounds)
        self.ev: GroupHarness = Evaluator(self.eval_cfg, self.compile_cfg, use_gpu=True)
        self.driver = self.ev.driver

    def info(self) -> dict:
        import torch
        dev = self.driver.info()
        return {"gpu_name": dev.name, "sm_clock_mhz": dev.clock_khz // 1000, "mem_clock_mhz": dev.memory_clock_khz // 1000,
                "driver": driver_version(self.driver.lib), "cuda": nvcc_release(self.compile_cfg.nvcc),
                "torch_version": torch.__version__}

    @staticmethod
    def is_fatal(e: BaseException) -> bool:
        from pipeline.evaluation.gpu.driver import CudaError
        return isinstance(e, CudaError) or "CUDA error" in str(e)

    # --- one task ---------------------------------------------------------------------------
    def measure(self, job: dict, report) -> dict:
        from pipeline.core.records import Task
        task = Task.model_validate(job["task"])
        artifacts: dict[str, str] = job["artifacts"]
        entries: dict[str, str] = job.get("entries", {})
        report(None, "prepare")
        t0 = time.perf_counter()
        group = self._group(task, job["seed"])
        stage_s = {"inputs": time.perf_counter() - t0}
        try:
            result = self._measure_group(task, group, artifacts, entries, report, stage_s)
            return {**result, "stage_s": stage_s}
        finally:
            for buf in group.buffers:
                if buf.ptr:
                    self.driver.free(buf.ptr)
                    buf.ptr = 0

    def _group(self, task, seed: int):
        from pipeline.evaluation.gpu import device_views
        from pipeline.evaluation.checks.group_data import TaskBroken, to_device
        from pipeline.evaluation.checks.reference_c import build_c2cuda
        from pipeline.evaluation.checks.reference_torch import build_torch2cuda
        try:
            if task.kind == "c2cuda":
                group = build_c2cuda(task, seed)
                self.ev.run_c_reference(group)
                with self.ev.gpu_lock.shared():
                    to_device(group)
            else:
                with self.ev.gpu_lock.shared():
                    group = build_torch2cuda(task, seed, init_seed=seed ^ 0x5EED)
                    to_device(group)
        except TaskBroken as e:
            raise TaskFailed(str(e)) from None
        except Exception as e:
            if self.is_fatal(e):
                raise
            raise TaskFailed(f"building inputs or running the reference failed: {type(e).__name__}: {e}") from None
        for buf in group.buffers:
            buf.ptr = self.driver.alloc(buf.nbytes)
            buf.view = device_views.view(buf.ptr, buf.shape, buf.dtype)
        self.driver.make_current()
        return group

    def _load(self, group, fmt: str, path: str, entry: str = ""):
        """A NativeRunner (the child's loader, used here in-process) or the reason it cannot run;
        `entry` is the symbol to call, '' for the format's own (`default_entry`)."""
        from pipeline.evaluation.child.main import NativeRunner
        missing = [cd.name for cd in group.configs if fmt not in cd.calls]
        if missing:
            return None, f"configurations {missing} have non-tensor inputs, which the {fmt} format cannot take"
        entry = entry or default_entry(group.task, fmt)
        msg = {"artifact": path, "entry": entry, "format": fmt, "calls": [cd.slot_calls(fmt) for cd in group.configs]}
        try:
            return NativeRunner(msg, [b.ptr for b in group.buffers]), ""
        except (OSError, AttributeError) as e:
            return None, f"loading the library failed: {e}"

    def _call(self, runner, ci: int) -> int:
        ret = runner.call(ci)
        self.driver.synchronize()
        return ret

    def _check(self, group, runner, fmt: str) -> dict:
        """Every check configuration, both input sets, outputs poisoned before each call."""
        configs, first_error = {}, ""
        for ci, cd in enumerate(group.configs):
            if not cd.check:
                continue
            passed, worst, why = True, 0.0, ""
            for si in range(2):
                self.ev.stage_inputs(group, cd, si)
                ret = self._call(runner, ci)
                ok, err, reason, _ = self.ev.check_config(group, cd, si)
                if ret and fmt == "light":
                    ok, reason = False, reason or f"launch returned {ret}"
                passed, worst = passed and ok, max(worst, err)
                why = why or reason
            configs[cd.name] = {"passed": passed, "max_error": worst if math.isfinite(worst) else None,
                                "error": why}
            if not passed and not first_error:
                first_error = f"config {cd.name}: {why}"
        return {"error": first_error, "configs": configs}

    def _measure_group(self, task, group, artifacts: dict, entries: dict, report, stage_s: dict) -> dict:
        """Check every implementation, then time those that passed; `stage_s` receives the seconds of
        each stage (check, waiting for the exclusive GPU lock, timing) for the supervisor's summary."""
        from pipeline.evaluation.checks.group_data import TaskBroken
        from pipeline.evaluation.checks.reference_c import adopt_baseline_outputs
        impls = [i for i in task.implementations if i.name in artifacts]
        results, runners = {}, {}
        t0 = time.perf_counter()
        with self.ev.gpu_lock.shared():
            if task.kind == "c2cuda":
                base = task.baseline()
                if base is None or base.name not in artifacts:
                    raise TaskFailed("its naive baseline is missing or did not build, so nothing can be checked")
                report(base.name, "baseline")
                runner, why = self._load(group, "c2cuda", artifacts[base.name], entries.get(base.name, ""))
                if runner is None:
                    raise TaskFailed(f"its naive baseline cannot run: {why}")
                try:  # the evaluator's procedure, with the baseline in this process instead of a child
                    adopt_baseline_outputs(group, self.ev.stage_inputs, lambda ci, cd: self._call(runner, ci))
                except TaskBroken as e:
                    raise TaskFailed(str(e)) from None
            for impl in impls:
                report(impl.name, "check")
                runner, why = self._load(group, impl.format, artifacts[impl.name], entries.get(impl.name, ""))
                if runner is None:
                    results[impl.name] = {"error": why, "configs": {}}
                    continue
                results[impl.name] = self._check(group, runner, impl.format)
                if not results[impl.name]["error"]:
                    runners[impl.name] = runner
        stage_s.update(check=time.perf_counter() - t0, lock_wait=0.0, time=0.0)
        reference: dict[str, list[float]] = {}
        for ci, cd in enumerate(group.configs):
            if not cd.time:
                continue
            times = {name: [] for name in runners}
            ref_times: list[float] = []
            per_round = max(1, self.eval_cfg.timing_trials // self.rounds)
            timer = self.ev.timer(per_round)
            t0 = time.perf_counter()
            with self.ev.gpu_lock.exclusive():
                t1 = time.perf_counter()
                stage_s["lock_wait"] += t1 - t0
                self.ev.stage_inputs(group, cd, 0)
                for _ in range(self.rounds):  # rounds interleave the implementations, so drift hits all alike
                    for name, runner in runners.items():
                        report(name, "time")
                        times[name] += timer(lambda: runner.call(ci))
                    if task.kind == "torch2cuda":
                        report(None, "time reference")
                        group.reference_calls[ci]()  # makes its input set (untimed)
                        ref_times += timer(group.reference_calls[ci])
                stage_s["time"] += time.perf_counter() - t1
            for name in runners:
                results[name]["configs"].setdefault(cd.name, {"passed": None, "max_error": None, "error": ""})
                results[name]["configs"][cd.name]["times_ms"] = times[name]
            if ref_times:
                reference[cd.name] = ref_times
        return {"impls": results, "reference": reference}
