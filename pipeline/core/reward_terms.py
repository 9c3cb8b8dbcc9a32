"""The reward's terms as one table, the `reward` section of the configuration that weights them, and the
ordering check that section runs over the table.

In: nothing at import. Out: `TERMS` (name -> `RewardTerm`: the config field that weights the term, what it
reads, its value for one evaluated turn, its bounds for each verdict, a note when an input it reads is
unusable), `RewardSection`, and `ordering_problems(cfg)`. `pipeline/rl/reward.py:compute_reward` sums the
table's terms; the config check evaluates every term's bounds over every verdict and tests each rule of
`ORDERINGS` (a caught hack earns the least; a correct candidate earns more than any honest failure), so a new
term that breaks a rule is refused when the config loads, with its field named. The table lives in core, beside
the section it is checked with, because the configuration may not import the `rl` layer.
Touches nothing; no state. A term is a pure function of the result, the config and the ranker's preference.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pipeline.core.records import EvalResult, Verdict

VERDICTS: tuple[str, ...] = get_args(Verdict)
FAILURE_VERDICTS = ("format_error", "compile_error", "runtime_error", "timeout", "incorrect", "rejected")
"""Hard failures: each earns its own configured value (the field of the same name) and nothing else."""
HONEST_FAILURES = tuple(v for v in FAILURE_VERDICTS if v != "rejected")
UNJUDGED = ("evaluator_error", "unbuilt")
"""Verdicts that say nothing of the candidate: 0 in every term, and no part in their group's advantages."""
VALUE_FIELDS = {**{v: v for v in FAILURE_VERDICTS}, "not_executed": "compiled_value", "correct": "correct_value"}
"""The config field holding each judged verdict's own value (the `base` term)."""


class RewardSection(BaseModel):
    """The unified reward (pipeline/rl/reward.py). A hard failure earns its value alone; a correct
    candidate earns correct_value + speedup, structure and ranker terms."""
    model_config = ConfigDict(extra="forbid", validate_assignment=True)  # as config.Section, which imports this module

    format_error: float = Field(-0.5, description="reward of a response with no usable code block")
    compile_error: float = Field(-0.3, description="reward of a candidate that did not compile")
    runtime_error: float = Field(-0.2, description="reward of a candidate that crashed")
    timeout: float = Field(-0.2, description="reward of a candidate that ran past its time limit")
    incorrect: float = Field(-0.1, description="reward of a candidate whose outputs were wrong")
    rejected: float = Field(-1.0, description="reward of a caught reward hack; must be the lowest reward possible")
    compiled_value: float = Field(0.0, description="reward of a not_executed candidate (gated and compiled, no GPU), "
                                  "before its structure term")
    correct_value: float = Field(1.0, description="reward of a correct candidate, before its other terms")
    w_speedup: float = Field(0.5, ge=0, description="weight of log(speedup) in a correct candidate's reward")
    speedup_clip_low: float = Field(0.25, gt=0, description="speedups (baseline time / candidate time) below this "
                                    "count as this before the log")
    speedup_clip_high: float = Field(16.0, gt=0, description="speedups above this count as this before the log")
    w_struct: float = Field(0.2, ge=0, description="weight of the structural score (features 'struct.score', in [0, 1]) "
                            "for correct candidates measured faster than the baseline (and not_executed ones where "
                            "struct_not_executed is on)")
    struct_not_executed: bool = Field(False, description="give not_executed candidates (compiled, never run: CPU runs) "
                                      "the structure term too; the score then counts code that may never run")
    w_ranker: float = Field(0.0, ge=0, description="weight of the ranker's preference for the candidate over the "
                            "task's baseline, in [-1, 1]; 0 turns the term off")

    @model_validator(mode="after")
    def _ordering(self) -> "RewardSection":
        problems = []
        if self.speedup_clip_low >= self.speedup_clip_high:
            problems.append(f"speedup_clip_low={self.speedup_clip_low} must be below speedup_clip_high="
                            f"{self.speedup_clip_high}")
        problems += ordering_problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self


# ---- the inputs a term reads: unusable values count as absent (the term's neutral 0) ----------------------

def structural_score(result: EvalResult) -> float | None:
    """The result's structural score in [0, 1], or None when the evaluator did not produce a usable one
    (absent, not a number, NaN, infinite or outside [0, 1]: the struct term's note says which)."""
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


def speedup_term(speedup: float | None, cfg: RewardSection) -> float:
    """w_speedup * log(clip(speedup, low, high)); 0 when nothing usable was timed (None, NaN, inf, <= 0)."""
    speedup = usable_speedup(speedup)
    if speedup is None:
        return 0.0
    clipped = min(max(speedup, cfg.speedup_clip_low), cfg.speedup_clip_high)
    return cfg.w_speedup * math.log(clipped)


def span(*values: float) -> tuple[float, float]:
    """(lowest, highest) of the values a term can take."""
    return min(values), max(values)


def no_note(result: EvalResult, preference: float | None) -> str | None:
    """The note of a term whose inputs are always usable: none."""
    return None


# ---- the table ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RewardTerm:
    """One component of the reward. `value` is 0 wherever the term does not apply; `bounds` must hold every
    value `value` can return for that verdict (the ordering check trusts them, and a test samples them)."""
    weight_field: str | None  # the RewardSection field that scales it; None: the verdict's own value (VALUE_FIELDS)
    reads: str  # what it reads besides the config
    description: str
    value: Callable[[EvalResult, RewardSection, float | None], float]  # (result, cfg, ranker preference) -> value
    bounds: Callable[[str, RewardSection], tuple[float, float]]  # (verdict, cfg) -> (lowest, highest)
    note: Callable[[EvalResult, float | None], str | None] = no_note  # why an input it reads was not used

    def field_for(self, verdict: str) -> str | None:
        """The config field behind this term's value for `verdict`."""
        return self.weight_field if self.weight_field is not None else VALUE_FIELDS.get(verdict)


def _base(result: EvalResult, cfg: RewardSection, preference: float | None) -> float:
    field = VALUE_FIELDS.get(result.verdict)  # evaluator_error and unbuilt: neither blamed nor rewarded
    return float(getattr(cfg, field)) if field else 0.0


def _base_bounds(verdict: str, cfg: RewardSection) -> tuple[float, float]:
    field = VALUE_FIELDS.get(verdict)
    return span(float(getattr(cfg, field)) if field else 0.0)


def _speedup(result: EvalResult, cfg: RewardSection, preference: float | None) -> float:
    return speedup_term(result.speedup, cfg) if result.verdict == "correct" else 0.0


def _speedup_bounds(verdict: str, cfg: RewardSection) -> tuple[float, float]:
    if verdict != "correct":
        return 0.0, 0.0
    return span(0.0, cfg.w_speedup * math.log(cfg.speedup_clip_low), cfg.w_speedup * math.log(cfg.speedup_clip_high))


def _speedup_note(result: EvalResult, preference: float | None) -> str | None:
    if result.verdict == "correct" and result.speedup is not None and usable_speedup(result.speedup) is None:
        return f"speedup = {result.speedup} is not a finite positive number: speedup term 0"
    return None


def _struct(result: EvalResult, cfg: RewardSection, preference: float | None) -> float:
    if result.verdict == "correct":  # the score cannot tell code that runs from a branch that never does:
        speedup = usable_speedup(result.speedup)  # it only adds to a measured gain
        applies = speedup is not None and speedup > 1.0
    else:  # CPU runs, whose only signal it is, where asked
        applies = result.verdict == "not_executed" and cfg.struct_not_executed
    return cfg.w_struct * (structural_score(result) or 0.0) if applies else 0.0


def _struct_bounds(verdict: str, cfg: RewardSection) -> tuple[float, float]:
    applies = verdict == "correct" or (verdict == "not_executed" and cfg.struct_not_executed)
    return span(0.0, cfg.w_struct) if applies else (0.0, 0.0)


def _struct_note(result: EvalResult, preference: float | None) -> str | None:
    score = result.features.get("struct.score")
    if score is not None and not isinstance(score, (str, bool)) and structural_score(result) is None:
        return f"struct.score = {score} is not a number in [0, 1]: structure term 0"
    return None


def _ranker(result: EvalResult, cfg: RewardSection, preference: float | None) -> float:
    if result.verdict != "correct" or cfg.w_ranker == 0:
        return 0.0
    if preference is None:
        raise ValueError(f"reward.w_ranker={cfg.w_ranker} but no ranker preference was given for a correct "
                         f"candidate of task {result.task_id}; pass one or set reward.w_ranker=0")
    return cfg.w_ranker * (usable_preference(preference) or 0.0)


def _ranker_bounds(verdict: str, cfg: RewardSection) -> tuple[float, float]:
    return span(-cfg.w_ranker, 0.0, cfg.w_ranker) if verdict == "correct" else (0.0, 0.0)


def _ranker_note(result: EvalResult, preference: float | None) -> str | None:
    if result.verdict == "correct" and preference is not None and usable_preference(preference) is None:
        return f"ranker preference = {preference} is not a number in [-1, 1]: ranker term 0"
    return None


TERMS: dict[str, RewardTerm] = {
    "base": RewardTerm(
        None, "the verdict", "the verdict's own value: a hard failure's field, compiled_value (not_executed) or "
        "correct_value; 0 for evaluator_error and unbuilt", _base, _base_bounds),
    "speedup": RewardTerm(
        "w_speedup", "EvalResult.speedup", "correct only: w_speedup * log(speedup clipped to [speedup_clip_low, "
        "speedup_clip_high]); 0 when nothing usable was timed", _speedup, _speedup_bounds, _speedup_note),
    "struct": RewardTerm(
        "w_struct", "EvalResult.features['struct.score'] in [0, 1]", "w_struct * structural score, for a correct "
        "candidate measured faster than its baseline, and a not_executed one under struct_not_executed",
        _struct, _struct_bounds, _struct_note),
    "ranker": RewardTerm(
        "w_ranker", "the ranker's preference for the candidate over the baseline, in [-1, 1]", "correct only: "
        "w_ranker * preference; required when w_ranker > 0", _ranker, _ranker_bounds, _ranker_note),
}
"""Every component of the reward, in the order `compute_reward` reports them; all always present (0 where
they do not apply). A term's name is its key here and in the logged metrics (`reward/<name>_mean`)."""


# ---- the rules the check derives from the table -----------------------------------------------------------

@dataclass(frozen=True)
class Ordering:
    """Every reward a `below` verdict can earn must be less than every reward an `above` verdict can earn.
    `subject` is the side the rule is about: the message names it first, and its own value is the fix."""
    below: tuple[str, ...]
    above: tuple[str, ...]
    rule: str
    subject: Literal["below", "above"]


ORDERINGS = (
    Ordering(("rejected",), tuple(v for v in VERDICTS if v != "rejected"),
             "must be below every other reward so a caught hack earns the least", "below"),
    Ordering(HONEST_FAILURES, ("correct",),
             "must exceed every honest failure's reward so a correct candidate earns more than any failure", "above"),
)


def verdict_bounds(verdict: str, cfg: RewardSection) -> dict[str, tuple[float, float]]:
    """Each term's (lowest, highest) value for `verdict` under `cfg`; their sums bound the verdict's reward."""
    return {name: term.bounds(verdict, cfg) for name, term in TERMS.items()}


def _parts(verdict: str, bounds: dict[str, tuple[float, float]], end: int) -> list[tuple[str, float, str | None]]:
    """(term, its bound at `end` (0 lowest, 1 highest), its config field) of every term that is not 0 there."""
    return [(name, b[end], TERMS[name].field_for(verdict)) for name, b in bounds.items() if b[end] != 0.0]


def _describe(verdict: str, total: float, parts: list, end: int, as_subject: bool) -> str:
    """How one side of a broken rule reads: its own field alone (`reward.rejected=-1`), or its terms and their sum."""
    if verdict in UNJUDGED:
        return f"the neutral reward of {' and '.join(UNJUDGED)} is {total:g}"
    if len(parts) == 1 and parts[0][2] == VALUE_FIELDS.get(verdict):
        return f"reward.{parts[0][2]}={total:g}"
    listed = ", ".join(f"{name} {value:g} from reward.{field}" for name, value, field in parts) or "no term"
    if as_subject:
        return f"the {('lowest', 'highest')[end]} {verdict} reward ({listed}; {total:g} in all)"
    return f"{verdict} can earn {total:g} ({listed})"


def ordering_problems(cfg: RewardSection) -> list[str]:
    """One sentence per rule of ORDERINGS that `cfg` breaks: which verdict can earn too much or too little, by
    which terms, and the fix (move the subject's own value, or lower a weight that widens the overlap)."""
    bounds = {v: verdict_bounds(v, cfg) for v in VERDICTS}
    low = {v: sum(b[0] for b in bounds[v].values()) for v in VERDICTS}
    high = {v: sum(b[1] for b in bounds[v].values()) for v in VERDICTS}
    problems = []
    for rule in ORDERINGS:
        top = max(rule.below, key=high.__getitem__)  # the best a `below` verdict can do
        bottom = min(rule.above, key=low.__getitem__)  # the worst an `above` verdict can do
        if high[top] < low[bottom]:
            continue
        gap = high[top] - low[bottom]
        top_parts, bottom_parts = _parts(top, bounds[top], 1), _parts(bottom, bounds[bottom], 0)
        if rule.subject == "below":
            subject = _describe(top, high[top], top_parts, 1, True)
            witness = _describe(bottom, low[bottom], bottom_parts, 0, False)
            own = VALUE_FIELDS.get(top)
            fix = [f"lower reward.{own} below {getattr(cfg, own) - gap:g}"] if own else []
        else:
            subject = _describe(bottom, low[bottom], bottom_parts, 0, True)
            witness = _describe(top, high[top], top_parts, 1, False)
            own = VALUE_FIELDS.get(bottom)
            fix = [f"raise reward.{own} above {getattr(cfg, own) + gap:g}"] if own else []
        # weights of the terms that lift the `below` side or pull the `above` side down
        widening = [f for name, v, f in top_parts if TERMS[name].weight_field and v > 0]
        widening += [f for name, v, f in bottom_parts if TERMS[name].weight_field and v < 0]
        if widening:
            fix.append("lower " + ", ".join(f"reward.{f}" for f in dict.fromkeys(widening)))
        problems.append(f"{subject} {rule.rule}, but {witness}; {' or '.join(fix)}")
    return problems
