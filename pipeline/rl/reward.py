"""The unified reward: one evaluation result (and optionally the ranker's view of it) -> one number.

In: an `EvalResult` (pipeline/core/records.py), the `RewardSection` weights, and, when the ranker term
is on, the ranker's preference for the candidate over the task's baseline implementation.
Out: `(reward, terms)`, where `terms` holds every component (they sum to `reward`), for logging.
Touches nothing else; no state.

The rules (docs/protocol.md, "Reward"):
- a hard failure earns its configured value and nothing else: format_error, compile_error,
  runtime_error, timeout, incorrect, rejected (a caught hack; the config checks it is the lowest
  reward any candidate can earn);
- not_executed (gated and compiled where no GPU ran it) earns `compiled_value`, plus
  `w_struct * struct.score` only where `struct_not_executed` asks for it (CPU runs, whose only
  signal it is); it is never counted as correct;
- evaluator_error (the trusted side failed; nothing is known about the candidate) and unbuilt (no
  compiler for it on this host, eval.allow_unbuilt) earn 0 in every term, and the advantages leave
  them out of their group (advantages.py): no term pays for code that was not built;
- correct earns `correct_value + w_speedup * log(clip(speedup, low, high)) + w_struct *
  struct.score + w_ranker * preference`, the structure term only when the candidate was measured
  faster than the baseline.
The structural score is `EvalResult.features["struct.score"]` in [0, 1], read from the compiled
code: it cannot tell code that runs from a branch that never does, so it is a teacher that only
adds to a measured gain, never one that makes a slow or unrun candidate look good; when the
evaluator could not compute it, the term is 0. A correct result without a speedup (nothing was timed) earns a
speedup term of 0, i.e. it counts as as fast as the baseline.
No input raises: a structural score, speedup or ranker preference that is NaN, infinite or out of
range counts as absent (its term 0, the neutral value), and `reward_notes` names it with its value.
"""
from __future__ import annotations

import math

from pipeline.core.config import RewardSection
from pipeline.core.records import EvalResult

TERMS = ("base", "speedup", "struct", "ranker")
"""Names of the reward's components, always all present in `terms` (0 where they do not apply)."""

FAILURE_VERDICTS = ("format_error", "compile_error", "runtime_error", "timeout", "incorrect", "rejected")
UNJUDGED = ("evaluator_error", "unbuilt")
"""Verdicts that say nothing of the candidate: 0 in every term, and no part in their group's advantages."""


def structural_score(result: EvalResult) -> float | None:
    """The result's structural score in [0, 1], or None when the evaluator did not produce a usable one
    (absent, not a number, NaN, infinite or outside [0, 1]: `reward_notes` says which)."""
    value = result.features.get("struct.score")
    if value is None or isinstance(value, (str, bool)):
        return None
    try:
        value = float(value)
    except (OverflowError, TypeError, ValueError):  # an int past float's range, or no number at all
        return None
    return value if math.isfinite(value) and 0.0 <= value <= 1.0 else None


def usable_speedup(speedup: float | None) -> float | None:
    """`speedup` when it is a finite positive number, else None (nothing usable was timed)."""
    return speedup if speedup is not None and math.isfinite(speedup) and speedup > 0 else None


def usable_preference(preference: float | None) -> float | None:
    """The ranker's preference when it is a finite number in [-1, 1], else None."""
    return preference if preference is not None and math.isfinite(preference) and -1.0 <= preference <= 1.0 else None


def reward_notes(result: EvalResult, ranker_preference: float | None = None) -> list[str]:
    """Why a value the reward reads was not used: each non-finite or out-of-range input, named with its value
    (its term is 0 instead, the neutral value). Empty when every input was usable."""
    notes = []
    score = result.features.get("struct.score")
    if score is not None and not isinstance(score, (str, bool)) and structural_score(result) is None:
        notes.append(f"struct.score = {score} is not a number in [0, 1]: structure term 0")
    if result.verdict == "correct" and result.speedup is not None and usable_speedup(result.speedup) is None:
        notes.append(f"speedup = {result.speedup} is not a finite positive number: speedup term 0")
    if result.verdict == "correct" and ranker_preference is not None and usable_preference(ranker_preference) is None:
        notes.append(f"ranker preference = {ranker_preference} is not a number in [-1, 1]: ranker term 0")
    return notes


def speedup_term(speedup: float | None, cfg: RewardSection) -> float:
    """w_speedup * log(clip(speedup, low, high)); 0 when nothing usable was timed (None, NaN, inf, <= 0)."""
    speedup = usable_speedup(speedup)
    if speedup is None:
        return 0.0
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
        if cfg.struct_not_executed:
            terms["struct"] = cfg.w_struct * (structural_score(result) or 0.0)
    elif verdict in UNJUDGED:
        terms["base"] = 0.0  # neutral: neither blamed nor rewarded for what the evaluator or the host could not do
    elif verdict == "correct":
        terms["base"] = cfg.correct_value
        speedup = usable_speedup(result.speedup)
        terms["speedup"] = speedup_term(speedup, cfg)
        if speedup is not None and speedup > 1.0:  # structure adds to a measured gain only
            terms["struct"] = cfg.w_struct * (structural_score(result) or 0.0)
        if cfg.w_ranker > 0:
            if ranker_preference is None:
                raise ValueError(f"reward.w_ranker={cfg.w_ranker} but no ranker preference was given for a correct "
                                 f"candidate of task {result.task_id}; pass one or set reward.w_ranker=0")
            terms["ranker"] = cfg.w_ranker * (usable_preference(ranker_preference) or 0.0)
    else:
        raise ValueError(f"verdict {verdict!r} of task {result.task_id} has no reward rule")
    return sum(terms.values()), terms
