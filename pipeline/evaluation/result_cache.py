"""EvalResults cached by content: candidate hash, task hash, evaluator version, GPU name and the settings.

The settings part is `settings_digest`: one digest of every setting that can change a verdict, a
speedup or what a result says (the eval and compile sections, but for the fields in LEFT_OUT), the
compiler's version (`compile.toolchain_id`) and torch's version and CUDA; a new config field is in it
unless it is added to LEFT_OUT with its reason.

A result is a pure function of those (inputs are fresh each time, but a correct candidate is
correct on any inputs), so a cached result is reused across groups, steps and runs. Timings in
a cached result were measured when it was first evaluated. An empty directory disables the
disk copy; the in-memory copy always serves duplicates within a process.

A pass is not served until it has been seen `confirmations` times: a kernel with a race (a missing
barrier, a read before another block's write) can pass one evaluation by luck, and a cached lucky
pass would reward every later copy of it. Until then every lookup misses, so the candidate is
evaluated again on new inputs; a failure on any evaluation replaces the passes (it is what the
kernel does). Every other verdict is served at once: a failure, a refusal or a compile error does
not become a pass by evaluating it again. A `not_executed` result (no GPU) is served at once too.
`evaluator_error` and `unbuilt` results are never kept (the evaluator does not put them): they say
what the host lacked, not what the candidate is.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
from pathlib import Path

from pipeline.core.config import CompileSection, EvalSection
from pipeline.core.records import EvalResult

LEFT_OUT = {
    # where things are kept, how many workers run them, and when a result is served: never what it says
    "eval.gpus": "how many evaluator actors run (whether a GPU ran the candidate is in the key: the GPU's name)",
    "eval.workers_per_gpu": "how many evaluators share a GPU (timing stays exclusive)",
    "eval.warm_children": "how many children are started ahead; each serves one candidate alike",
    "eval.gpu_memory_fraction": "decides only waits and evaluator_error, which is never cached",
    "eval.memory_wait_s": "decides only evaluator_error, which is never cached",
    "eval.warmup_trials": "read only by dataset measurement's timer, never by a candidate's evaluation",
    "eval.result_cache_dir": "where this cache lives",
    "eval.lock_trace_path": "where the GPU lock's trace is written; the trace never decides anything",
    "eval.cache_confirmations": "when a cached pass is served, not what it says",
    "eval.max_retries": "resubmissions after an actor died",
    "eval.allow_unbuilt": "decides only `unbuilt`, which is never cached",
    "compile.nvcc": "a path; the compiler's version (compile.toolchain_id) is in the digest instead",
    "compile.cache_dir": "where the artefact cache lives",
    "compile.workers": "how many compile workers run",
    "compile.candidates_per_call": "how candidates are batched to compile workers",
}
"""Settings deliberately left out of `settings_digest`, each with its reason; every other field is in it."""


def _torch_version() -> str:
    try:
        import torch
    except ImportError:
        return "no torch"
    return f"torch {torch.__version__} cuda {torch.version.cuda}"


def settings_digest(eval_cfg: EvalSection, compile_cfg: CompileSection) -> str:
    """16 hex digits over every field of the eval and compile sections not in LEFT_OUT, the compiler's
    version and torch's (the reference and KernelBench builds run in it): a result is served only under
    the settings and tools that made it."""
    from pipeline.evaluation.build.compile import toolchain_id
    kept = {f"{name}.{k}": v for name, section in (("eval", eval_cfg), ("compile", compile_cfg))
            for k, v in section.model_dump(mode="json").items() if f"{name}.{k}" not in LEFT_OUT}
    kept["toolchain"] = toolchain_id(compile_cfg.nvcc)
    kept["torch"] = _torch_version()
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:16]


class ResultCache:
    def __init__(self, directory: str, confirmations: int = 1):
        self.memory: dict[str, tuple[EvalResult, int]] = {}  # key -> (newest result, passes in a row)
        self.confirmations = max(1, confirmations)
        self.dir = Path(os.path.expanduser(directory)) if directory else None
        if self.dir is not None:
            self.dir.mkdir(parents=True, exist_ok=True)

    def _settled(self, entry: tuple[EvalResult, int]) -> bool:
        return entry[0].verdict != "correct" or entry[1] >= self.confirmations

    def _entry(self, key: str) -> tuple[EvalResult, int] | None:
        """The newest entry: from memory once settled, else from the disk copy, which the other evaluators
        sharing it may have changed (a failure they saw, a pass they confirmed)."""
        held = self.memory.get(key)
        if held is not None and (self._settled(held) or self.dir is None):
            return held
        found = self._read(key) if self.dir is not None else None
        if found is not None:
            self.memory[key] = found
            return found
        return held

    def _read(self, key: str) -> tuple[EvalResult, int] | None:
        path = self.dir / f"{key}.json"
        if not path.is_file():
            return None
        try:
            raw = json.loads(path.read_text())
            return ((EvalResult.model_validate(raw["result"]), int(raw["passes"]))
                    if isinstance(raw, dict) and "result" in raw
                    else (EvalResult.model_validate(raw), 1))  # a plain result: one evaluation
        except (ValueError, KeyError, TypeError, OSError):
            return None  # a damaged entry is re-evaluated, then overwritten

    def get(self, key: str) -> EvalResult | None:
        """The cached result, or None when there is none or it is a pass not yet seen `confirmations` times."""
        entry = self._entry(key)
        if entry is None:
            return None
        result, passes = entry
        if result.verdict == "correct" and passes < self.confirmations:
            return None
        return result

    def passes(self, key: str) -> int:
        """Evaluations in a row that passed, as cached (0 when the newest was not a pass)."""
        entry = self._entry(key)
        return entry[1] if entry is not None and entry[0].verdict == "correct" else 0

    def put(self, key: str, result: EvalResult) -> None:
        """Keep `result`; a pass after passes counts one more, any other verdict starts again. With a disk
        copy, the count is read and written under a lock, so evaluators sharing it never lose a failure."""
        if self.dir is None:
            self.memory[key] = (result, self.passes(key) + 1 if result.verdict == "correct" else 1)
            return
        with open(self.dir / ".lock", "a") as lock:  # one for the directory: a put is short
            fcntl.flock(lock, fcntl.LOCK_EX)
            prior = self._read(key)
            passes = (prior[1] if prior and prior[0].verdict == "correct" else 0) + 1 if result.verdict == "correct" else 1
            self.memory[key] = (result, passes)
            tmp = self.dir / f".{key}.{os.getpid()}.tmp"
            tmp.write_text(json.dumps({"passes": passes, "result": result.model_dump(mode="json")}))
            os.replace(tmp, self.dir / f"{key}.json")
