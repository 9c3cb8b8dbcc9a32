"""Ray actor shell for the ranker: owns one `RankerService` (pipeline/ranker/serve.py) on a CPU.

The driver creates it when `reward.w_ranker > 0`, with resources it sets, and calls
`preferences_for_results` for each evaluated group of candidates of one task; the numbers go to
`compute_reward` as `ranker_preference`. No domain logic lives here.

Usage (driver):
    ranker = make_ranker_actor(cfg.ranker, cfg.compile)
    prefs = ray.get(ranker.preferences_for_results.remote(task, candidates, results))
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

import ray
from ray.actor import ActorHandle

if TYPE_CHECKING:
    from pipeline.core.config import CompileSection, RankerSection


class RankerActor:
    """Scores candidates against their task's baseline with one loaded ranker checkpoint."""

    def __init__(self, ranker_cfg: RankerSection, compile_cfg: CompileSection):
        from pipeline.ranker.serve import RankerService  # lazily: only the actor's process needs torch/lightgbm

        self._service = RankerService.from_checkpoint(ranker_cfg.checkpoint, ranker_cfg, compile_cfg)

    def score_batch(self, inputs: list) -> list[float]:
        """Scores of (task, code, features) triples."""
        return self._service.score_batch(inputs)

    def preferences_for_results(self, task, candidates: list, results: list) -> list[float | None]:
        """Preference over the task's baseline in [-1, 1] per correct result, None for the others."""
        return self._service.preferences_for_results(task, candidates, results)

    def manifest(self) -> dict:
        """The loaded checkpoint's manifest (version, features, data hash, metrics)."""
        return self._service.manifest

    def pid(self) -> int:
        return os.getpid()


def make_ranker_actor(ranker_cfg: RankerSection, compile_cfg: CompileSection, num_cpus: float = 1) -> ActorHandle:
    """One ranker actor on `num_cpus` CPUs; refuses a config without a checkpoint."""
    if not ranker_cfg.checkpoint:
        raise ValueError("ranker.checkpoint is empty: train one with `cudaperf rank train --out DIR` and set "
                         "ranker.checkpoint=DIR (or set reward.w_ranker=0)")
    return ray.remote(RankerActor).options(num_cpus=num_cpus, max_restarts=1).remote(ranker_cfg, compile_cfg)
