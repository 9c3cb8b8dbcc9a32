"""The unified reward: one evaluation result (and optionally the ranker's view of it) -> one number.

In: an `EvalResult` (pipeline/core/records.py), the `RewardSection` weights, and, when the ranker term
is on, the ranker's preference for the candidate over the task's baseline implementation.
Out: `(reward, terms)`, where `terms` holds every component (they sum to `reward`), for logging.
Touches nothing else; no state.

The components are the rows of one table, `TERMS` in pipeline/core/reward_terms.py: each names the config
field that weights it, what it reads, its value and its bounds for every verdict. This module sums them; the
config check evaluates their bounds over every verdict (a caught hack must earn the least, a correct
candidate more than any honest failure), so the rules below hold for every term, present or added.

The rules of the shipped terms (docs/protocol.md, "Reward"):
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

from pipeline.core.records import EvalResult
from pipeline.core.reward_terms import (FAILURE_VERDICTS, TERMS, UNJUDGED, VERDICTS, RewardSection,  # noqa: F401
                                        structural_score, usable_preference, usable_speedup)


def reward_notes(result: EvalResult, ranker_preference: float | None = None) -> list[str]:
    """Why a value the reward reads was not used: each non-finite or out-of-range input, named with its value
    (its term is 0 instead, the neutral value). Empty when every input was usable."""
    return [note for term in TERMS.values() if (note := term.note(result, ranker_preference))]


def compute_reward(result: EvalResult, cfg: RewardSection,
                   ranker_preference: float | None = None) -> tuple[float, dict[str, float]]:
    """The reward of one evaluated turn and its components, one per term of `TERMS` (in its order; they sum
    to the reward).

    `ranker_preference` is the ranker's preference for this candidate over the task's baseline,
    in [-1, 1] (for example 2 * P(candidate is faster) - 1). It is required only when
    `cfg.w_ranker > 0` and the verdict is `correct`; otherwise it is ignored.
    """
    if result.verdict not in VERDICTS:
        raise ValueError(f"verdict {result.verdict!r} of task {result.task_id} has no reward rule")
    terms = {name: term.value(result, cfg, ranker_preference) for name, term in TERMS.items()}
    return sum(terms.values()), terms
