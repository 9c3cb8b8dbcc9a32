"""Returns and advantages against hand-computed values."""
import math

import pytest
import torch

from pipeline.core.config import RLSection
from pipeline.rl.advantages import discounted_returns, group_advantages, group_ids, returns_and_advantages


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


def test_episodes_grouped_by_task_and_turn():
    # task a: two episodes, one stopped after its first turn; task b: a single episode
    rewards = [[0.0, 1.0], [1.0], [2.0, 2.0]]
    returns, adv = returns_and_advantages(["a", "a", "b"], rewards, [["correct"] * len(r) for r in rewards],
                                          RLSection(gamma=0.5, normalise_by_std=False))
    assert returns == [[0.5, 1.0], [1.0], [3.0, 2.0]]
    # group (a, turn 0) = [0.5, 1.0]: mean 0.75; (a, turn 1) and every b group are singletons
    assert adv[0][0] == pytest.approx(-0.25) and adv[1][0] == pytest.approx(0.25)
    assert adv[0][1] == 0.0 and adv[2] == [0.0, 0.0]


def test_turns_the_evaluator_could_not_judge_take_no_part_in_their_group():
    _, adv = returns_and_advantages(["a"] * 3, [[1.0], [0.0], [0.0]], [["correct"], ["incorrect"], ["evaluator_error"]],
                                    RLSection(gamma=1.0, normalise_by_std=False))
    assert adv[2][0] == 0.0
    assert adv[0][0] == pytest.approx(0.5)  # group mean 0.5 over the two judged turns,
    assert adv[1][0] == pytest.approx(-0.5)  # not 1/3 over all three


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError, match="one verdict per reward"):
        returns_and_advantages(["a"], [[1.0, 0.0]], [["correct"]], RLSection())
