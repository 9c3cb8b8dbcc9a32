"""The unified reward: every verdict, the order of failures, clipping of speedups, the config's checks."""
import math

import pytest

from pipeline.core.config import ConfigError, RewardSection, load_config
from pipeline.core.records import EvalResult
from pipeline.core.reward_terms import RewardTerm
from pipeline.rl.reward import TERMS, UNJUDGED, compute_reward, reward_notes

CFG = RewardSection()
PROBE = RewardTerm("w_probe", "nothing", "0 everywhere: a stand-in for a term added later",
                   lambda result, cfg, preference: 0.0, lambda verdict, cfg: (0.0, 0.0))


@pytest.fixture(autouse=True, params=["shipped terms", "one more term"])
def table(request, monkeypatch):
    """Every test here runs on the shipped table and again with one more term that is 0 everywhere: no test
    pins the set of terms, so adding one breaks none of them."""
    if request.param == "one more term":
        monkeypatch.setitem(TERMS, "probe", PROBE)


def only(**nonzero) -> dict[str, float]:
    """A breakdown with every term of the table 0 but `nonzero`."""
    return dict.fromkeys(TERMS, 0.0) | nonzero


def result(verdict, speedup=None, struct=None, **kw):
    features = {} if struct is None else {"struct.score": struct, "struct.kernels": 1}
    return EvalResult(task_id="c2cuda/saxpy", candidate_hash="h", format="c2cuda", verdict=verdict,
                      speedup=speedup, features=features, **kw)


@pytest.mark.parametrize("verdict", ["format_error", "compile_error", "runtime_error", "timeout", "incorrect",
                                     "rejected"])
def test_hard_failures_earn_their_value_only(verdict):
    # structure and speed never rescue a failure
    reward, terms = compute_reward(result(verdict, speedup=5.0, struct=1.0), CFG, ranker_preference=1.0)
    assert reward == getattr(CFG, verdict)
    assert terms == only(base=getattr(CFG, verdict))


def test_not_executed_earns_compile_and_structure_only_where_asked():
    unrun = result("not_executed", speedup=3.0, struct=0.5)
    # code that never ran earns no structure term unless the config asks (a CPU run, whose only signal it is)
    assert compute_reward(unrun, CFG, ranker_preference=1.0)[1] == only(base=CFG.compiled_value)
    cpu = RewardSection(struct_not_executed=True)
    reward, terms = compute_reward(unrun, cpu, ranker_preference=1.0)
    assert terms == only(base=cpu.compiled_value, struct=cpu.w_struct * 0.5)
    assert reward == pytest.approx(cpu.compiled_value + cpu.w_struct * 0.5)
    # without a structural score (the analysis failed) only the compile term is left
    assert compute_reward(result("not_executed"), cpu)[0] == cpu.compiled_value
    # never as good as a correct candidate of baseline speed
    assert reward < compute_reward(result("correct", speedup=1.0, struct=0.0), cpu)[0]


def test_structure_adds_only_to_a_measured_gain():
    """A never-taken branch with vector loads and shared memory raises the structural score; it must not lift a
    candidate that is not faster than the baseline."""
    for speedup in (None, 0.5, 1.0):
        assert compute_reward(result("correct", speedup=speedup, struct=1.0), CFG)[1]["struct"] == 0.0
    assert compute_reward(result("correct", speedup=1.5, struct=1.0), CFG)[1]["struct"] == CFG.w_struct


def test_correct_terms():
    reward, terms = compute_reward(result("correct", speedup=2.0, struct=0.8), CFG)
    assert terms["base"] == CFG.correct_value
    assert terms["speedup"] == pytest.approx(CFG.w_speedup * math.log(2.0))
    assert terms["struct"] == pytest.approx(CFG.w_struct * 0.8)
    assert terms["ranker"] == 0.0
    assert set(terms) == set(TERMS) and reward == pytest.approx(sum(terms.values()))
    # as fast as the baseline, or nothing timed: no speedup term
    assert compute_reward(result("correct", speedup=1.0), CFG)[1]["speedup"] == 0.0
    assert compute_reward(result("correct", speedup=None), CFG)[1]["speedup"] == 0.0
    # slower than the baseline is penalised but stays above every failure
    slow = compute_reward(result("correct", speedup=0.5), CFG)[0]
    assert CFG.incorrect < slow < CFG.correct_value


def test_huge_and_tiny_speedups_are_clipped():
    high = compute_reward(result("correct", speedup=1e9), CFG)[1]["speedup"]
    assert high == pytest.approx(CFG.w_speedup * math.log(CFG.speedup_clip_high))
    assert compute_reward(result("correct", speedup=CFG.speedup_clip_high * 2), CFG)[1]["speedup"] == high
    low = compute_reward(result("correct", speedup=1e-9), CFG)[1]["speedup"]
    assert low == pytest.approx(CFG.w_speedup * math.log(CFG.speedup_clip_low))


def test_rejected_hack_is_lowest_of_all():
    rejected = compute_reward(result("rejected", speedup=100.0, struct=1.0, flags=["side_stream"]), CFG)[0]
    others = [compute_reward(result(v), CFG)[0] for v in
              ("format_error", "compile_error", "runtime_error", "timeout", "incorrect")]
    others += [compute_reward(result("not_executed", struct=s), CFG)[0] for s in (0.0, 1.0)]
    others += [compute_reward(result("correct", speedup=s, struct=st), CFG)[0]
               for s in (1e-6, 0.3, 1.0, 1e6) for st in (0.0, 1.0)]
    assert all(rejected < o for o in others)


def test_ranker_term_off_by_default_and_required_when_on():
    assert compute_reward(result("correct", speedup=1.0), CFG, ranker_preference=0.9)[1]["ranker"] == 0.0
    cfg = RewardSection(w_ranker=0.1)
    assert compute_reward(result("correct", speedup=1.0), cfg, ranker_preference=-0.5)[1]["ranker"] == \
        pytest.approx(-0.05)
    with pytest.raises(ValueError, match="no ranker preference"):
        compute_reward(result("correct", speedup=1.0), cfg)
    # a preference out of range is not used: the neutral term, and a note naming it
    assert compute_reward(result("correct", speedup=1.0), cfg, ranker_preference=3.0)[1]["ranker"] == 0.0
    assert "ranker preference = 3.0" in reward_notes(result("correct", speedup=1.0), 3.0)[0]
    # failures do not need (or use) the ranker
    assert compute_reward(result("incorrect"), cfg)[0] == cfg.incorrect


def test_bad_evaluator_values_count_as_absent_with_a_note():
    """A speedup of 0 or a structural score past 1 is no number the reward can read: its term is 0 (as when
    the evaluator gives none), never an exception, and the note names the value."""
    r, terms = compute_reward(result("correct", speedup=0.0), CFG)
    assert terms["speedup"] == 0.0 and r == CFG.correct_value
    assert "speedup = 0.0" in reward_notes(result("correct", speedup=0.0))[0]
    r, terms = compute_reward(result("correct", speedup=2.0, struct=1.5), CFG)
    assert terms["struct"] == 0.0 and "struct.score = 1.5" in reward_notes(result("correct", speedup=2.0, struct=1.5))[0]


def test_config_keeps_rejected_lowest_and_correct_above_failures():
    with pytest.raises(ConfigError, match="rejected=-0.2 must be below every other reward"):
        load_config(None, ["reward.rejected=-0.2"])
    with pytest.raises(ConfigError, match="lowest correct reward"):
        load_config(None, ["reward.w_speedup=2.0"])
    with pytest.raises(ConfigError, match="speedup_clip_low=20.0 must be below speedup_clip_high"):
        load_config(None, ["reward.speedup_clip_low=20"])
    assert load_config(None, ["reward.w_ranker=0.2"]).reward.w_ranker == 0.2


def test_the_evaluators_own_failure_is_neutral():
    reward, terms = compute_reward(result("evaluator_error", speedup=3.0, struct=1.0), CFG, ranker_preference=1.0)
    assert reward == 0.0 and set(terms.values()) == {0.0}


# --- non-finite inputs and unjudged verdicts: a finite reward, never an exception -----------------------
NON_FINITE = [math.nan, math.inf, -math.inf]


@pytest.mark.parametrize("value", NON_FINITE, ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("cfg", [RewardSection(), RewardSection(struct_not_executed=True),
                                 RewardSection(w_ranker=0.1, correct_value=1.2)], ids=["default", "cpu", "ranker"])
@pytest.mark.parametrize("verdict", ["correct", "not_executed", "incorrect"])
def test_a_non_finite_structural_score_gives_a_finite_reward_and_a_note(cfg, verdict, value):
    r = result(verdict, speedup=2.0 if verdict == "correct" else None, struct=value)
    reward, terms = compute_reward(r, cfg, ranker_preference=0.5)
    assert math.isfinite(reward) and terms["struct"] == 0.0
    assert reward_notes(r) and "struct.score" in reward_notes(r)[0]


@pytest.mark.parametrize("value", NON_FINITE + [-2.0], ids=["nan", "inf", "-inf", "negative"])
def test_a_non_finite_speedup_or_preference_gives_a_finite_reward_and_a_note(value):
    cfg = RewardSection(w_ranker=0.1, correct_value=1.2)
    r = result("correct", speedup=value, struct=1.0)
    reward, terms = compute_reward(r, cfg, ranker_preference=0.5)
    assert math.isfinite(reward) and terms["speedup"] == 0.0 and terms["struct"] == 0.0  # no measured gain
    assert any("speedup" in n for n in reward_notes(r))
    reward, terms = compute_reward(result("correct", speedup=2.0), cfg, ranker_preference=value)
    assert math.isfinite(reward) and terms["ranker"] == 0.0
    assert any("ranker preference" in n for n in reward_notes(result("correct", speedup=2.0), value))


@pytest.mark.parametrize("verdict", UNJUDGED)
def test_unbuilt_and_evaluator_error_earn_nothing_in_every_term(verdict):
    reward, terms = compute_reward(result(verdict, speedup=5.0, struct=1.0),
                                   RewardSection(struct_not_executed=True, compiled_value=0.3), ranker_preference=1.0)
    assert reward == 0.0 and set(terms.values()) == {0.0}


def test_the_reward_and_the_advantages_agree_on_what_is_unjudged():
    from pipeline.rl.advantages import UNJUDGED_VERDICTS
    assert set(UNJUDGED) == set(UNJUDGED_VERDICTS) == {"evaluator_error", "unbuilt"}


def test_a_non_finite_return_never_poisons_its_group():
    """One NaN reward (from any source) gets advantage 0 and stays out of its group's statistics: the other
    samples' advantages are finite and the same as without it."""
    from pipeline.core.config import RLSection
    from pipeline.rl.advantages import returns_and_advantages
    cfg = RLSection()
    tasks = ["t"] * 4
    _, with_nan = returns_and_advantages(tasks, [[1.0], [0.0], [math.nan], [0.5]], [["correct"]] * 4, cfg)
    _, without = returns_and_advantages(tasks[:3], [[1.0], [0.0], [0.5]], [["correct"]] * 3, cfg)
    flat = [a for ep in with_nan for a in ep]
    assert all(math.isfinite(a) for a in flat) and flat[2] == 0.0
    assert [flat[0], flat[1], flat[3]] == pytest.approx([a for ep in without for a in ep])
    _, unbuilt = returns_and_advantages(tasks, [[1.0], [0.0], [0.0], [0.5]],
                                        [["correct"], ["incorrect"], ["unbuilt"], ["correct"]], cfg)
    assert unbuilt[2] == [0.0] and [unbuilt[0], unbuilt[1], unbuilt[3]] == with_nan[:2] + with_nan[3:]


def test_the_config_keeps_a_caught_hack_below_the_neutral_reward():
    with pytest.raises(ConfigError, match="neutral reward of evaluator_error and unbuilt"):
        load_config(None, ["reward.rejected=0.5", "reward.format_error=0.6", "reward.compile_error=0.6",
                           "reward.runtime_error=0.6", "reward.timeout=0.6", "reward.incorrect=0.6",
                           "reward.compiled_value=0.6", "reward.correct_value=2"])
