"""A step's bookkeeping without Ray: rewards on turns (lost episodes left out), metrics by hand, busy
fractions, the run state's RNG round trip, the metrics log on resume, and LoRA merging."""
import dataclasses
import json
import math
import random
import sys

import pytest
import torch

from pipeline.core.config import RewardSection, RLSection
from pipeline.core.node_roles import timed_roles
from pipeline.core.records import EvalResult, Trajectory, Turn
from pipeline.rl.reward import TERMS
from pipeline.rl.step import busy_fractions, prepare_step, ranker_preferences, rollout_metrics
from pipeline.rl.tracking import MetricsLog, RunState, checkpoint_dir, latest_checkpoint, read_metrics
from pipeline.rl.update import merge_lora
from pipeline.rollout.episodes import EpisodeOutcome, JudgedTurn


def result(verdict, speedup=None, score=None):
    return EvalResult(task_id="t", candidate_hash="h", format="c2cuda", verdict=verdict, speedup=speedup,
                      features={} if score is None else {"struct.score": score})


def outcome(episode, verdicts, results=None, stop="turn_budget"):
    """An episode of len(verdicts) turns; `results` judge its first turns (fewer: a lost evaluation)."""
    turns = [Turn(prompt_ids=[1, 2], response_ids=[3] * (k + 1), logprobs=[-0.5] * (k + 1)) for k in range(len(verdicts))]
    results = list(results or [])
    traj = Trajectory(task_id="t", episode_id=episode, turns=turns, stop_reason=stop)
    return EpisodeOutcome(traj, [JudgedTurn(turn, None, results[k] if k < len(results) else None)
                                 for k, turn in enumerate(turns)])


def test_rewards_returns_and_metrics_by_hand():
    cfg = RewardSection()  # compile_error -0.3, correct 1 + 0.5 log(speedup) + 0.2 score, format -0.5
    a = outcome("a", ["compile_error", "correct"], [result("compile_error"), result("correct", 2.0, 0.5)],
                stop="success")
    b = outcome("b", ["format_error", "format_error"], [result("format_error"), result("format_error")])
    lost = outcome("c", ["not_executed"], [], stop="error")  # its evaluation was lost: no result
    trajs = prepare_step([a, b, lost], cfg, RLSection(gamma=0.5, normalise_by_std=False))
    assert [e.trajectory.episode_id for e in trajs] == ["a", "b"]
    assert [t.result.verdict for t in trajs[0].turns] == ["compile_error", "correct"]  # each turn with its result
    correct = 1.0 + 0.5 * math.log(2.0) + 0.2 * 0.5
    assert [t.reward for t in trajs[0].turns] == pytest.approx([-0.3, correct])
    assert trajs[0].turns[1].reward_terms == pytest.approx(dict.fromkeys(TERMS, 0.0) | {
        "base": 1.0, "speedup": 0.5 * math.log(2.0), "struct": 0.1})
    assert [t.return_ for t in trajs[0].turns] == pytest.approx([-0.3 + 0.5 * correct, correct])
    assert [t.return_ for t in trajs[1].turns] == pytest.approx([-0.75, -0.5])
    # group (t, turn 0) = {a: -0.3 + 0.5 c, b: -0.75}: mean-centred without std
    gap = (-0.3 + 0.5 * correct) - (-0.75)
    assert trajs[0].turns[0].advantage == pytest.approx(gap / 2)
    assert trajs[1].turns[0].advantage == pytest.approx(-gap / 2)

    with pytest.raises(dataclasses.FrozenInstanceError):  # scored once, never changed after
        trajs[0].turns[0].advantage = 5.0
    m = rollout_metrics([a, b, lost], trajs)
    assert m["rollout/episodes"] == 3 and m["rollout/lost_episodes"] == 1 and m["rollout/turns"] == 4
    assert m["reward/turn_mean"] == pytest.approx((-0.3 + correct - 1.0) / 4)
    assert m["reward/episode_mean"] == pytest.approx((-0.3 + correct - 1.0) / 2)
    assert m["correct/turn_fraction"] == 0.25 and m["correct/episode_fraction"] == 0.5
    assert m["speedup/correct_geomean"] == pytest.approx(2.0) and m["speedup/best_mean"] == pytest.approx(2.0)
    assert m["rollout/turns_used_mean"] == 2.0 and m["rollout/response_tokens_mean"] == 1.5
    assert m["verdict/format_error"] == 0.5 and m["stop/error"] == 1.0 and m["stop/success"] == 1.0
    assert m["reward/speedup_mean"] == pytest.approx(0.5 * math.log(2.0) / 4)


def test_not_executed_earns_compile_and_structure_terms_only():
    out = outcome("a", ["not_executed"], [result("not_executed", score=0.5)])
    (traj,) = prepare_step([out], RewardSection(compiled_value=0.1, w_struct=0.4, struct_not_executed=True), RLSection())
    assert traj.turns[0].reward == pytest.approx(0.1 + 0.2)
    assert rollout_metrics([out], [traj])["correct/turn_fraction"] == 0.0


def test_ranker_term_reaches_correct_turns_only():
    from pipeline.core.records import Task
    task = Task(id="t", kind="c2cuda", family="f", reference="", function="f", configs=[])
    a = outcome("a", ["incorrect", "correct"], [result("incorrect"), result("correct", 2.0, 0.5)])
    b = outcome("b", ["compile_error"], [result("compile_error")])
    asked = []

    def prefer(t, cands, results):  # what RankerService.preferences_for_results returns: a number per correct result
        asked.append((t.id, [r.verdict for r in results]))
        return [0.6 if r.verdict == "correct" else None for r in results]
    prefs = ranker_preferences([a, b], {"t": task}, lambda items: [prefer(*item) for item in items])
    assert prefs == [[None, 0.6], [None]]
    assert asked == [("t", ["incorrect", "correct"])]  # an episode with no correct turn is not sent to the ranker
    trajs = prepare_step([a, b], RewardSection(w_ranker=0.3), RLSection(), prefs)
    assert trajs[0].turns[1].reward_terms["ranker"] == pytest.approx(0.18)
    assert trajs[0].turns[0].reward_terms["ranker"] == 0.0
    with pytest.raises(ValueError, match="no ranker preference"):  # the term on without preferences is an error
        prepare_step([a], RewardSection(w_ranker=0.3), RLSection())
    with pytest.raises(ValueError, match="gave 1 preferences for 2 judged turns"):
        prepare_step([a], RewardSection(w_ranker=0.3), RLSection(), [[0.6]])


def test_ranker_term_without_a_checkpoint_is_a_config_error():
    from pipeline.core.config import ConfigError, load_config
    from pipeline.rl.loop import check_placement
    cfg = load_config("configs/local.yaml", ["reward.w_ranker=0.2"])
    with pytest.raises(ConfigError, match="ranker.checkpoint"):
        check_placement(cfg, gpus=0)


def test_lora_without_peft_is_one_config_error_naming_the_extra(monkeypatch):
    """The optional extra hidden, as on a host installed without it: one line before any actor starts."""
    from pipeline.core.config import ConfigError, load_config
    from pipeline.rl.loop import check_placement
    cfg = load_config("configs/local.yaml", ["learner.lora_rank=8"])
    check_placement(cfg, gpus=0)  # installed (the test extra brings peft): no complaint
    monkeypatch.setitem(sys.modules, "peft", None)  # an import of peft now fails, as where it is missing
    with pytest.raises(ConfigError, match=r"learner.lora_rank = 8 needs peft.*pip install -e '\.\[lora\]'"):
        check_placement(cfg, gpus=0)
    check_placement(load_config("configs/local.yaml", []), gpus=0)  # LoRA off: peft is not needed


def test_busy_fractions_of_every_timed_role_compilers_included():
    got = busy_fractions({"generator": 3.0, "evaluator": 2.0, "learner": 1.0, "compiler": 4.0},
                         {"generator": 2, "evaluator": 4, "learner": 1, "compiler": 2}, wall_s=5.0)
    assert got == pytest.approx({"busy/generator": 0.3, "busy/evaluator": 0.1, "busy/learner": 0.2,
                                 "busy/compiler": 0.4})
    assert set(got) == {f"busy/{r.name}" for r in timed_roles()}  # the table decides, not a list of its own
    with pytest.raises(ValueError, match="must be positive"):
        busy_fractions({}, {}, 0.0)


def test_a_timed_role_the_loop_does_not_measure_is_an_error_not_a_zero():
    with pytest.raises(ValueError, match=r"timed role\(s\) \['compiler'\]"):
        busy_fractions({"generator": 3.0, "evaluator": 2.0, "learner": 1.0},
                       {"generator": 2, "evaluator": 4, "learner": 1, "compiler": 2}, wall_s=5.0)


def test_the_step_line_and_progress_bar_show_every_timed_role():
    from pipeline.commands.train_command import step_line
    from pipeline.rl.tracking import headline
    row = {"step": 1, **{f"busy/{r.name}": 0.25 for r in timed_roles()}}
    assert "busy gen 0.25 eval 0.25 learn 0.25 comp 0.25" in step_line(row)
    assert headline(row) == {r.short: "0.25" for r in timed_roles()}


def test_run_state_restores_every_rng():
    random.seed(1), torch.manual_seed(1)
    state = RunState(step=3, reader={"epoch": 0, "position": 2}, weight_version=3)
    state.capture_rng()
    expected = (random.random(), torch.rand(3), __import__("numpy").random.rand())
    restored = RunState.from_dict(json.loads(json.dumps(state.to_dict())))
    random.seed(99), torch.manual_seed(99)
    restored.restore_rng()
    again = (random.random(), torch.rand(3), __import__("numpy").random.rand())
    assert again[0] == expected[0] and torch.equal(again[1], expected[1]) and again[2] == expected[2]
    assert restored.step == 3 and restored.reader == {"epoch": 0, "position": 2}


def test_metrics_log_drops_steps_after_the_resumed_checkpoint(tmp_path):
    log = MetricsLog(tmp_path)
    for step in (1, 2, 3):
        log.write(step, {"reward/turn_mean": step / 10, "speedup/correct_geomean": float("nan")})
    assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2, 3]
    assert read_metrics(tmp_path)[0]["speedup/correct_geomean"] is None  # NaN is written as null
    resumed = MetricsLog(tmp_path, resume_after_step=2)
    resumed.write(3, {"reward/turn_mean": 0.5})
    assert [(r["step"], r["reward/turn_mean"]) for r in read_metrics(tmp_path)] == [(1, 0.1), (2, 0.2), (3, 0.5)]
    assert latest_checkpoint(tmp_path) is None
    for step in (1, 2):
        checkpoint_dir(tmp_path, step).mkdir(parents=True)
    (checkpoint_dir(tmp_path, 1) / "run_state.json").write_text("{}")  # step 2 never completed
    assert latest_checkpoint(tmp_path) == checkpoint_dir(tmp_path, 1)


def test_merge_lora_by_hand():
    w, a, b = torch.ones(2, 3), torch.arange(3.0).reshape(1, 3), torch.tensor([[1.0], [2.0]])
    named = {"base_model.model.model.layers.0.mlp.up_proj.base_layer.weight": w,
             "base_model.model.model.layers.0.mlp.up_proj.lora_A.default.weight": a,
             "base_model.model.model.layers.0.mlp.up_proj.lora_B.default.weight": b,
             "base_model.model.lm_head.weight": torch.zeros(4, 3)}
    merged = dict(merge_lora(named, scale=0.5))
    assert set(merged) == {"model.layers.0.mlp.up_proj.weight", "lm_head.weight"}
    assert torch.equal(merged["model.layers.0.mlp.up_proj.weight"], w + 0.5 * b @ a)


def test_shuffled_advantages_are_a_permutation_within_each_group_only():
    from pipeline.core.config import RLSection
    from pipeline.rl.advantages import returns_and_advantages
    tasks = ["a", "a", "a", "b", "b"]
    rewards = [[1.0], [0.0], [-1.0], [2.0], [0.0]]
    verdicts = [["correct"]] * 5
    _, plain = returns_and_advantages(tasks, rewards, verdicts, RLSection())
    _, shuffled = returns_and_advantages(tasks, rewards, verdicts, RLSection(shuffle_advantages=True))
    assert sorted(x for x, in shuffled[:3]) == sorted(x for x, in plain[:3])  # group a keeps its values
    assert sorted(x for x, in shuffled[3:]) == sorted(x for x, in plain[3:])
    assert shuffled != plain  # and moves them (seeded by the group: the same every time)
    assert returns_and_advantages(tasks, rewards, verdicts, RLSection(shuffle_advantages=True))[1] == shuffled


def test_negative_advantages_are_scaled_by_their_weight_and_positives_kept():
    from pipeline.core.config import RLSection
    from pipeline.rl.advantages import returns_and_advantages
    tasks = ["a", "a", "a", "a"]
    rewards = [[1.0], [0.0], [-1.0], [1.0]]
    verdicts = [["correct"]] * 4
    _, plain = returns_and_advantages(tasks, rewards, verdicts, RLSection())
    for w in (0.0, 0.25):
        _, scaled = returns_and_advantages(tasks, rewards, verdicts, RLSection(negative_advantage_weight=w))
        assert [a for a, in scaled] == [a if a >= 0 else w * a for a, in plain]
    assert min(a for a, in plain) < 0 and max(a for a, in plain) > 0  # both signs were there to scale


def test_the_share_of_groups_whose_returns_all_tie_is_logged():
    cfg = RewardSection()
    same = [outcome(f"s{k}", ["compile_error"], [result("compile_error")]) for k in range(2)]
    mixed = [outcome(f"m{k}", ["compile_error"], [result(v)]) for k, v in enumerate(["compile_error", "format_error"])]
    for o in mixed:
        o.trajectory.task_id = "u"
    outcomes = same + mixed
    metrics = rollout_metrics(outcomes, prepare_step(outcomes, cfg, RLSection()))
    assert metrics["advantage/collapsed_group_fraction"] == 0.5


def test_training_curves_show_on_a_cpu_what_a_cpu_can_see():
    from pipeline.rl.tracking import PLOTTED, curve_panels
    cpu = [{"step": 1, "verdict/not_executed": 0.5, "verdict/format_error": 0.5}]
    gpu = [{"step": 1, "verdict/correct": 0.25, "verdict/compile_error": 0.75}]
    assert [k for k, _ in curve_panels(cpu)] == ["reward/turn_mean", "compiled", "verdicts", "rollout/turns_used_mean"]
    assert curve_panels(gpu) == PLOTTED


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0], ids=["nan", "inf", "negative"])
def test_a_non_finite_value_in_one_result_leaves_the_step_finite_and_says_so(bad):
    """One turn's NaN structural score, NaN speedup or negative speedup: every reward, return, advantage and
    metric of the step stays finite, that turn carries a note naming the value, and the rest are scored as usual."""
    honest = [outcome("a", ["correct"], [result("correct", 2.0, 0.5)]),
              outcome("b", ["incorrect"], [result("incorrect")])]
    broken = [outcome("c", ["correct"], [result("correct", 2.0, bad)]),
              outcome("d", ["correct"], [result("correct", bad, 0.5)])]
    scored = prepare_step(honest + broken, RewardSection(), RLSection())
    turns = [t for e in scored for t in e.turns]
    assert all(math.isfinite(x) for t in turns for x in (t.reward, t.return_, t.advantage))
    assert not turns[0].reward_notes and not turns[1].reward_notes
    assert "struct.score" in turns[2].reward_notes[0] and "speedup" in turns[3].reward_notes[0]
    metrics = rollout_metrics(honest + broken, scored)
    assert metrics["reward/unusable_input_turns"] == 2.0
    assert all(math.isfinite(v) for k, v in metrics.items() if k.startswith(("reward/", "speedup/")))


def test_unbuilt_turns_earn_nothing_and_stay_out_of_their_group():
    built = [outcome("a", ["correct"], [result("correct", 2.0)]), outcome("b", ["incorrect"], [result("incorrect")])]
    unbuilt = outcome("c", ["unbuilt"], [result("unbuilt")])
    with_unbuilt = prepare_step(built + [unbuilt], RewardSection(), RLSection())
    alone = prepare_step(built, RewardSection(), RLSection())
    assert with_unbuilt[2].turns[0].reward == 0.0 and with_unbuilt[2].turns[0].advantage == 0.0
    assert [e.turns[0].advantage for e in with_unbuilt[:2]] == [e.turns[0].advantage for e in alone]
