"""Returns and advantages against hand-computed values."""
import math

import pytest
import torch

from pipeline.config import RLSection
from pipeline.records import Trajectory, Turn
from pipeline.rl.advantages import (assign_returns_and_advantages, discounted_returns, group_advantages,
                                    group_ids)


def test_discounted_returns():
    assert discounted_returns([1.0, 0.0, 2.0], 0.5) == [1.0 + 0.25 * 2.0, 1.0, 2.0]
    assert discounted_returns([1.0, 2.0, 3.0], 0.0) == [1.0, 2.0, 3.0]
    assert discounted_returns([1.0, 2.0, 3.0], 1.0) == [6.0, 5.0, 3.0]
    assert discounted_returns([], 0.4) == []
    with pytest.raises(ValueError, match="outside"):
        discounted_returns([1.0], 1.5)


def adv(returns, groups, **kw):
    return group_advantages(torch.tensor(returns), torch.tensor(groups), **kw).tolist()


def test_grpo_with_and_without_std():
    # group 0: [1, 2, 3], mean 2, sample std 1; group 1: [0, 4], mean 2, sample std sqrt(8)
    a = adv([1.0, 2.0, 3.0, 0.0, 4.0], [0, 0, 0, 1, 1], eps=0.0)
    assert a == pytest.approx([-1.0, 0.0, 1.0, -2 / math.sqrt(8), 2 / math.sqrt(8)])
    b = adv([1.0, 2.0, 3.0, 0.0, 4.0], [0, 0, 0, 1, 1], normalise_by_std=False)
    assert b == pytest.approx([-1.0, 0.0, 1.0, -2.0, 2.0])


def test_rloo_is_leave_one_out():
    # R = [1, 2, 6]: baselines (2+6)/2=4, (1+6)/2=3.5, (1+2)/2=1.5
    a = adv([1.0, 2.0, 6.0], [0, 0, 0], estimator="rloo")
    assert a == pytest.approx([1.0 - 4.0, 2.0 - 3.5, 6.0 - 1.5])
    # the std option does not apply to rloo
    assert adv([1.0, 2.0, 6.0], [0, 0, 0], estimator="rloo", normalise_by_std=True) == pytest.approx(a)


@pytest.mark.parametrize("estimator", ["grpo", "rloo"])
def test_singletons_and_equal_returns_give_zero(estimator):
    assert adv([5.0, 3.0, 3.0, 3.0], [0, 1, 1, 1], estimator=estimator) == [0.0, 0.0, 0.0, 0.0]
    assert adv([], [], estimator=estimator) == []


def test_group_ids_number_by_first_appearance():
    assert group_ids([("b", 0), ("a", 0), ("b", 0), ("b", 1)]).tolist() == [0, 1, 0, 2]


def traj(task, episode, rewards):
    turns = [Turn(prompt_ids=[1], response_ids=[2], logprobs=[-1.0], reward=r) for r in rewards]
    return Trajectory(task_id=task, episode_id=episode, turns=turns)


def test_trajectories_grouped_by_task_and_turn():
    # task a: two episodes, one stopped after its first turn; task b: a single episode
    trajs = [traj("a", "a0", [0.0, 1.0]), traj("a", "a1", [1.0]), traj("b", "b0", [2.0, 2.0])]
    assign_returns_and_advantages(trajs, RLSection(gamma=0.5, normalise_by_std=False))
    assert [t.return_ for t in trajs[0].turns] == [0.5, 1.0]
    assert [t.return_ for t in trajs[1].turns] == [1.0]
    # group (a, turn 0) = [0.5, 1.0]: mean 0.75; (a, turn 1) and every b group are singletons
    assert trajs[0].turns[0].advantage == pytest.approx(-0.25)
    assert trajs[1].turns[0].advantage == pytest.approx(0.25)
    assert trajs[0].turns[1].advantage == 0.0
    assert [t.advantage for t in trajs[2].turns] == [0.0, 0.0]


def test_turns_the_evaluator_could_not_judge_take_no_part_in_their_group():
    trajs = [traj("a", f"a{k}", [r]) for k, r in enumerate([1.0, 0.0, 0.0])]
    trajs[2].turns[0].verdict = "evaluator_error"
    trajs[2].turns[0].advantage = 5.0
    assign_returns_and_advantages(trajs, RLSection(gamma=1.0, normalise_by_std=False))
    assert trajs[2].turns[0].advantage == 0.0
    assert trajs[0].turns[0].advantage == pytest.approx(0.5)  # group mean 0.5 over the two judged turns,
    assert trajs[1].turns[0].advantage == pytest.approx(-0.5)  # not 1/3 over all three
