"""The table of reward terms (pipeline/core/reward_terms.py): its rows are consistent with the config, every
term stays within the bounds the config check trusts, the check derives its rules from the table (a new term
that lets a caught hack outrank an honest failure is refused, naming its field), and a term added to the table
passes the check and shows in compute_reward's breakdown (docs/extending.md's recipe, on a scratch row)."""
import itertools
import math

import pytest
from pydantic import Field, ValidationError

from pipeline.core.records import EvalResult
from pipeline.core.reward_terms import (HONEST_FAILURES, ORDERINGS, TERMS, UNJUDGED, VALUE_FIELDS, VERDICTS,
                                        RewardSection, RewardTerm, ordering_problems, span, verdict_bounds)
from pipeline.rl.reward import compute_reward, reward_notes

CONFIGS = [RewardSection(), RewardSection(struct_not_executed=True, compiled_value=0.3),
           RewardSection(w_ranker=0.2, correct_value=1.5), RewardSection(speedup_clip_low=2.0, speedup_clip_high=4.0)]
SPEEDUPS = [None, math.nan, math.inf, -1.0, 0.0, 1e-9, 0.5, 1.0, 1.5, 3.0, 1e9]
PREFERENCES = [None, math.nan, -3.0, -1.0, 0.0, 0.7, 1.0, 3.0]
FEATURE_SAMPLES = {"struct.score": [None, math.nan, -0.5, 0.0, 0.4, 1.0, 2.0, "high"]}
"""Values tried for every feature a term reads (None: absent), usable or not: a term reading a new feature adds it
here, or the bounds test fails (its bounds are never reached)."""


def result(verdict, speedup=None, score=None, **features):
    if score is not None:
        features["struct.score"] = score
    return EvalResult(task_id="c2cuda/saxpy", candidate_hash="h", format="c2cuda", verdict=verdict,
                      speedup=speedup, features=features)


def every_result(verdict):
    """(a result of `verdict`, a ranker preference) for every combination of the sampled values above."""
    names = list(FEATURE_SAMPLES)
    for speedup, *values in itertools.product(SPEEDUPS, *FEATURE_SAMPLES.values()):
        features = {n: v for n, v in zip(names, values) if v is not None}
        for preference in PREFERENCES:
            yield result(verdict, speedup, **features), preference


def check_bounds(verdict: str, cfg: RewardSection) -> None:
    """Every term's value on every sampled result lies within its bounds for `verdict`, and reaches both."""
    bounds = verdict_bounds(verdict, cfg)
    seen = {name: set() for name in TERMS}
    for r, preference in every_result(verdict):
        reward, terms = compute_reward(r, cfg, ranker_preference=preference if preference is not None else 0.0)
        assert list(terms) == list(TERMS) and reward == pytest.approx(sum(terms.values()))
        for name, value in terms.items():
            low, high = bounds[name]
            assert low - 1e-12 <= value <= high + 1e-12, (name, r.speedup, r.features, preference)
            seen[name].add(round(value, 9))
    for name, (low, high) in bounds.items():  # and the bounds are reached, not merely safe
        assert round(low, 9) in seen[name] and round(high, 9) in seen[name], (name, bounds[name], seen[name])


def test_the_table_matches_the_config_and_the_verdicts():
    fields = set(RewardSection.model_fields)
    for name, term in TERMS.items():
        assert term.weight_field is None or term.weight_field in fields, name
        assert term.reads and term.description, name
    assert set(VALUE_FIELDS.values()) <= fields
    assert set(VERDICTS) == set(VALUE_FIELDS) | set(UNJUDGED) and not set(VALUE_FIELDS) & set(UNJUDGED)
    assert all(set(rule.below) | set(rule.above) <= set(VERDICTS) for rule in ORDERINGS)


@pytest.mark.parametrize("cfg", CONFIGS, ids=["default", "cpu", "ranker", "fast-clip"])
@pytest.mark.parametrize("verdict", VERDICTS)
def test_every_term_stays_within_its_bounds(cfg, verdict):
    """The check reasons on the table's bounds; a term whose value leaves them would slip past it."""
    check_bounds(verdict, cfg)


def test_the_shipped_defaults_keep_every_rule():
    assert ordering_problems(RewardSection()) == []
    low = {v: sum(b[0] for b in verdict_bounds(v, RewardSection()).values()) for v in VERDICTS}
    high = {v: sum(b[1] for b in verdict_bounds(v, RewardSection()).values()) for v in VERDICTS}
    assert high["rejected"] < min(low[v] for v in VERDICTS if v != "rejected")
    assert max(high[v] for v in HONEST_FAILURES) < low["correct"]


def test_a_clip_range_above_one_counts_an_untimed_correct_result():
    """A correct result with nothing timed earns a speedup term of 0, below w_speedup * log(speedup_clip_low)
    when that is positive: the lowest correct reward is the smaller of the two."""
    cfg = RewardSection(speedup_clip_low=2.0, speedup_clip_high=4.0)
    assert verdict_bounds("correct", cfg)["speedup"] == (0.0, cfg.w_speedup * math.log(4.0))
    with pytest.raises(ValidationError, match="reward.correct_value=0.05 must exceed every honest failure's"):
        RewardSection(speedup_clip_low=2.0, speedup_clip_high=4.0, correct_value=0.05, incorrect=0.1,
                      runtime_error=0.0, timeout=0.0)


# ---- a negative term that lets a caught hack outrank an honest failure -----------------------------------------

class WithLength(RewardSection):
    """The reward section as a contributor adds a field for a new term."""
    w_length: float = Field(0.0, ge=0, description="weight of the length penalty of an honest failure")


def _length(r: EvalResult, cfg, preference) -> float:
    if r.verdict not in HONEST_FAILURES:
        return 0.0
    return -cfg.w_length * min(1.0, r.features.get("response_tokens", 0) / 1024)


LENGTH = RewardTerm("w_length", "EvalResult.features['response_tokens']",
                    "honest failures only: -w_length * min(1, response tokens / 1024)", _length,
                    lambda verdict, cfg: span(0.0, -cfg.w_length) if verdict in HONEST_FAILURES else (0.0, 0.0))


def test_a_term_that_lets_a_caught_hack_outrank_an_honest_failure_is_refused(monkeypatch):
    monkeypatch.setitem(TERMS, "length", LENGTH)
    assert WithLength(w_length=0.4).w_length == 0.4  # format_error at worst -0.9: still above rejected (-1)
    with pytest.raises(ValidationError) as refused:
        WithLength(w_length=1.0)
    message = refused.value.errors()[0]["msg"]
    assert message == ("Value error, reward.rejected=-1 must be below every other reward so a caught hack earns the "
                       "least, but format_error can earn -1.5 (base -0.5 from reward.format_error, length -1 from "
                       "reward.w_length); lower reward.rejected below -1.5 or lower reward.w_length")
    # what the check prevents: unchecked, a long honest failure earns less than a short caught hack
    unchecked = WithLength.model_construct(w_length=1.0)
    hack = compute_reward(result("rejected", response_tokens=10), unchecked)[0]
    honest = compute_reward(result("format_error", response_tokens=4096), unchecked)[0]
    assert honest < hack
    # the fix the message names works
    assert WithLength(w_length=1.0, rejected=-1.6).rejected == -1.6


def test_a_term_that_pulls_a_correct_result_below_an_honest_failure_is_refused(monkeypatch):
    slow = RewardTerm("w_length", "EvalResult.features['response_tokens']", "correct only: a length penalty",
                      lambda r, cfg, p: 0.0, lambda verdict, cfg: span(0.0, -cfg.w_length) if verdict == "correct"
                      else (0.0, 0.0))
    monkeypatch.setitem(TERMS, "slow", slow)
    assert ordering_problems(WithLength(w_length=0.1)) == []
    problems = ordering_problems(WithLength.model_construct(w_length=0.5))
    assert problems == ["the lowest correct reward (base 1 from reward.correct_value, speedup -0.693147 from "
                        "reward.w_speedup, slow -0.5 from reward.w_length; -0.193147 in all) must exceed every honest "
                        "failure's reward so a correct candidate earns more than any failure, but "
                        "reward.incorrect=-0.1; raise reward.correct_value above 1.09315 or lower reward.w_speedup, "
                        "reward.w_length"]
    with pytest.raises(ValidationError, match="raise reward.correct_value above 1.09315"):  # refused when loaded
        WithLength(w_length=0.5)


# ---- the recipe: a new term, on a scratch row ----------------------------------------------------------------

class WithOccupancy(RewardSection):
    w_occupancy: float = Field(0.1, ge=0, description="weight of the achieved occupancy of a correct candidate")


def usable_occupancy(r: EvalResult) -> float | None:
    value = r.features.get("occupancy")
    return value if isinstance(value, float) and 0.0 <= value <= 1.0 else None


def _occupancy(r: EvalResult, cfg, preference) -> float:
    return cfg.w_occupancy * (usable_occupancy(r) or 0.0) if r.verdict == "correct" else 0.0


def _occupancy_note(r: EvalResult, preference) -> str | None:
    if r.verdict == "correct" and "occupancy" in r.features and usable_occupancy(r) is None:
        return f"occupancy = {r.features['occupancy']} is not a number in [0, 1]: occupancy term 0"
    return None


OCCUPANCY = RewardTerm(
    "w_occupancy", "EvalResult.features['occupancy'] in [0, 1]", "correct only: w_occupancy * occupancy",
    _occupancy, lambda verdict, cfg: span(0.0, cfg.w_occupancy) if verdict == "correct" else (0.0, 0.0),
    _occupancy_note)


def test_a_term_added_to_the_table_is_checked_summed_and_noted(monkeypatch):
    monkeypatch.setitem(TERMS, "occupancy", OCCUPANCY)
    monkeypatch.setitem(FEATURE_SAMPLES, "occupancy", [None, 0.0, 0.5, 1.0, 7.0, math.nan])
    cfg = WithOccupancy()
    assert ordering_problems(cfg) == [] and verdict_bounds("correct", cfg)["occupancy"] == (0.0, 0.1)
    for verdict in VERDICTS:
        check_bounds(verdict, cfg)
    reward, terms = compute_reward(result("correct", 2.0, 0.5, occupancy=0.8), cfg)
    assert list(terms) == [*TERMS] and terms["occupancy"] == pytest.approx(0.08)
    assert reward == pytest.approx(cfg.correct_value + cfg.w_speedup * math.log(2.0) + cfg.w_struct * 0.5 + 0.08)
    assert compute_reward(result("incorrect", occupancy=0.8), cfg)[1]["occupancy"] == 0.0
    assert reward_notes(result("correct", 2.0, occupancy=7.0)) == ["occupancy = 7.0 is not a number in [0, 1]: "
                                                                   "occupancy term 0"]
    from pipeline.rl.step import rollout_metrics  # the step's metrics log every term of the table
    assert "reward/occupancy_mean" in rollout_metrics([], [])
    assert WithOccupancy(w_occupancy=3.0).w_occupancy == 3.0  # it only adds to a correct result: no rule to break
