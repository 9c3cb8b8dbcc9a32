"""EvalResults cached by content: candidate hash, task hash, evaluator version and GPU name.

A result is a pure function of those (inputs are fresh each time, but a correct candidate is
correct on any inputs), so a cached result is reused across groups, steps and runs. Timings in
a cached result were measured when it was first evaluated. An empty directory disables the
disk copy; the in-memory copy always serves duplicates within a process.
"""
from __future__ import annotations

import os
from pathlib import Path

from pipeline.records import EvalResult


class ResultCache:
    def __init__(self, directory: str):
        self.memory: dict[str, EvalResult] = {}
        self.dir = Path(os.path.expanduser(directory)) if directory else None
        if self.dir is not None:
            self.dir.mkdir(parents=True, exist_ok=True)

    def get(self, key: str) -> EvalResult | None:
        if key in self.memory:
            return self.memory[key]
        if self.dir is not None:
            path = self.dir / f"{key}.json"
            if path.is_file():
                try:
                    result = EvalResult.model_validate_json(path.read_text())
                except ValueError:
                    return None  # a damaged entry is re-evaluated, then overwritten
                self.memory[key] = result
                return result
        return None

    def put(self, key: str, result: EvalResult) -> None:
        self.memory[key] = result
        if self.dir is not None:
            tmp = self.dir / f".{key}.{os.getpid()}.tmp"
            tmp.write_text(result.model_dump_json())
            os.replace(tmp, self.dir / f"{key}.json")
