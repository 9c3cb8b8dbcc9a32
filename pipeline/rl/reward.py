"""The unified reward: one evaluation result (and optionally the ranker's view of it) -> one number.

In: an `EvalResult` (pipeline/core/records.py), the `RewardSection` weights, and, when the ranker term
is on, the ranker's preference for the candidate over the task's baseline implementation.
Out: `(reward, terms)`, where `terms` holds every component (they sum to `reward`), for logging.
Touches nothing else; no state.

The rules (DESIGN.md, "Reward"):
- a hard failure earns its configured value and nothing else: format_error, compile_error,
  runtime_error, timeout, incorrect, rejected (a caught hack; the config checks it is the lowest
  reward any candidate can earn);
- not_executed (gated and compiled where no GPU ran it) earns `compiled_value`, plus
  `w_struct * struct.score` only where `struct_not_executed` asks for it (CPU runs, whose only
  signal it is); it is never counted as correct;
- evaluator_error (the trusted side failed; nothing is known about the candidate) earns 0 in every
  term, and the advantages leave it out of its group (advantages.py);
- correct earns `correct_value + w_speedup * log(clip(speedup, low, high)) + w_struct *
  struct.score + w_ranker * preference`, the structure term only when the candidate was measured
  faster than the baseline.
The structural score is `EvalResult.features["struct.score"]` in [0, 1], read from the compiled
code: it cannot tell code that runs from a branch that never does, so it is a teacher that only
adds to a measured gain, never one that makes a slow or unrun candidate look good; when the
evaluator could not compute it, the term is 0. A correct result without a speedup (nothing was timed) earns a
speedup term of 0, i.e. it counts as as fast as the baseline.
"""
from __future__ import annotations

import math

from pipeline.core.config import RewardSection
from pipeline.core.records import EvalResult

TERMS = ("base", "speedup", "struct", "ranker")
"""Names of the reward's components, always all present in `terms` (0 where they do not apply)."""

FAILURE_VERDICTS = ("format_error", "compile_error", "runtime_error", "timeout", "incorrect", "rejected")


def structural_score(result: EvalResult) -> float | None:
    """The result's structural score in [0, 1], or None when the evaluator did not produce one."""
    value = result.features.get("struct.score")
    if value is None or isinstance(value, (str, bool)):
        return None
    value = float(value)
    if not 0.0 <= value <= 1.0 or math.isnan(value):
        raise ValueError(f"features['struct.score'] = {value} of task {result.task_id} is outside [0, 1]")
    return value


def speedup_term(speedup: float | None, cfg: RewardSection) -> float:
    """w_speedup * log(clip(speedup, low, high)); 0 when nothing was timed (speedup None)."""
    if speedup is None:
        return 0.0
    if not speedup > 0 or math.isnan(speedup):
        raise ValueError(f"speedup {speedup} is not a positive number; the evaluator must report None or > 0")
    clipped = min(max(speedup, cfg.speedup_clip_low), cfg.speedup_clip_high)
    return cfg.w_speedup * math.log(clipped)


def compute_reward(result: EvalResult, cfg: RewardSection,
                   ranker_preference: float | None = None) -> tuple[float, dict[str, float]]:
    """The reward of one evaluated turn and its components.

    `ranker_preference` is the ranker's preference for this candidate over the task's baseline,
    in [-1, 1] (for example 2 * P(candidate is faster) - 1). It is required only when
    `cfg.w_ranker > 0` and the verdict is `correct`; otherwise it is ignored.
    """
    terms = dict.fromkeys(TERMS, 0.0)
    verdict = result.verdict
    if verdict in FAILURE_VERDICTS:
        terms["base"] = float(getattr(cfg, verdict))
    elif verdict == "not_executed":
        terms["base"] = cfg.compiled_value
        score = structural_score(result) or 0.0  # checked even where it earns nothing
        if cfg.struct_not_executed:
            terms["struct"] = cfg.w_struct * score
    elif verdict == "evaluator_error":
        terms["base"] = 0.0  # neutral: neither blamed nor rewarded for the evaluator's own failure
    elif verdict == "correct":
        terms["base"] = cfg.correct_value
        terms["speedup"] = speedup_term(result.speedup, cfg)
        score = structural_score(result) or 0.0  # checked even where it earns nothing
        if result.speedup is not None and result.speedup > 1.0:  # structure adds to a measured gain only
            terms["struct"] = cfg.w_struct * score
        if cfg.w_ranker > 0:
            if ranker_preference is None:
                raise ValueError(f"reward.w_ranker={cfg.w_ranker} but no ranker preference was given for a correct "
                                 f"candidate of task {result.task_id}; pass one or set reward.w_ranker=0")
            if not -1.0 <= ranker_preference <= 1.0:
                raise ValueError(f"ranker preference {ranker_preference} of task {result.task_id} is outside [-1, 1]")
            terms["ranker"] = cfg.w_ranker * ranker_preference
    else:
        raise ValueError(f"verdict {verdict!r} of task {result.task_id} has no reward rule")
    return sum(terms.values()), terms
