"""A stand-in for measure_worker.GpuMeasurer that needs no GPU, so the supervision of measurement
workers (crash, hang, CUDA error, restart, retry) is tested for real on CPU. Implementations
behave by name: 'crash*' ends the process, 'hang*' never answers, 'cudafail*' raises an error the
worker treats as a dead CUDA context; anything else passes with fixed times (k-th implementation
of a task: k+1 ms; stage seconds: check 1, time 2). Each implementation's symbol is looked up in its library (no GPU needed), so a
job that names a symbol its library lacks fails."""
import ctypes
import os
import time


class FakeCudaError(RuntimeError):
    pass


class FakeMeasurer:
    def __init__(self, settings: dict):
        self.settings = settings

    def info(self) -> dict:
        return {"gpu_name": "Fake GPU", "sm_clock_mhz": 1, "mem_clock_mhz": 2, "driver": "0", "cuda": "0",
                "torch_version": "0"}

    @staticmethod
    def is_fatal(e: BaseException) -> bool:
        return isinstance(e, FakeCudaError)

    def measure(self, job: dict, report) -> dict:
        from pipeline.core.records import Task
        task = Task.model_validate(job["task"])
        report(None, "prepare")
        if task.family == "broken_reference":
            from pipeline.dataset.measure_worker import TaskFailed
            raise TaskFailed("the C reference crashed")
        out = {"impls": {}, "reference": {}}
        for k, impl in enumerate(task.implementations):
            if impl.name not in job["artifacts"]:
                continue
            report(impl.name, "check")
            getattr(ctypes.CDLL(job["artifacts"][impl.name]), job["entries"][impl.name])
            if impl.name.startswith("crash"):
                os._exit(3)
            if impl.name.startswith("hang"):
                time.sleep(3600)
            if impl.name.startswith("cudafail"):
                raise FakeCudaError("CUDA_ERROR_ILLEGAL_ADDRESS")
            configs = {c.name: {"passed": True, "max_error": 0.5, "error": ""} for c in task.configs if c.check}
            for c in task.configs:
                if c.time:
                    configs.setdefault(c.name, {"passed": None, "max_error": None, "error": ""})
                    configs[c.name]["times_ms"] = [float(k + 1)] * 6
            out["impls"][impl.name] = {"error": "", "configs": configs}
        delay = float(os.environ.get("FAKE_MEASURE_DELAY_S", "0"))
        time.sleep(delay)
        out["stage_s"] = {"check": 1.0, "time": 2.0}  # fixed, so the supervisor's sums can be checked
        return out
