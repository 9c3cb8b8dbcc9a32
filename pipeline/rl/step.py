"""One RL step's bookkeeping between rollout and learner: rewards on turns, training selection, metrics.

In: the scheduler's `EpisodeOutcome`s of one step (trajectories, and per turn the candidate and its
`EvalResult`), the `reward` and `rl` config sections, and the seconds each role was busy.
Out: `ScoredEpisode`s, made once and never changed after: per turn the rollout's `Turn`, its
`EvalResult`, and the step's reward, reward terms (with notes on any input of the reward that was NaN,
infinite or out of range and so counted as absent), return and advantage (the learner's input), and a
flat dict of metrics (prefix `rollout/`, `reward/`, `busy/`). The outcomes are not changed; no Ray.

An episode whose generation or evaluation was lost on every retry (stop_reason 'error') has a
last turn without a result: it is not trained on and is counted in `rollout/lost_episodes`.
Busy fractions are a role's busy seconds over the step's wall time times its actor count, for every
timed role of the table of node roles (pipeline/core/node_roles.py; generators: the engines' own
generation time; evaluators: the stage times of freshly evaluated candidates, not of cached ones;
learner: the part of the step's window in which an update or a weight export ran; compilers: the
compile workers' own seconds per candidate), so 1.0 means every actor of the role never idled.
"""
from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pipeline.core.config import RewardSection, RLSection
from pipeline.core.node_roles import timed_roles
from pipeline.core.records import EvalResult, Task, Trajectory, Turn
from pipeline.rl.advantages import returns_and_advantages
from pipeline.rl.reward import TERMS, compute_reward, reward_notes, usable_speedup
from pipeline.rollout.episodes import EpisodeOutcome


@dataclass(frozen=True)
class ScoredTurn:
    """One judged turn as the learner and the metrics see it."""
    turn: Turn                          # what the policy saw and wrote (the rollout's record)
    result: EvalResult                  # how the evaluator judged it
    reward: float
    reward_terms: Mapping[str, float]   # each component of the reward
    return_: float                      # discounted sum of this and later turns' rewards
    advantage: float                    # within the group of the same task and turn index
    reward_notes: tuple[str, ...] = ()  # inputs of the reward that were not usable (NaN, inf, out of range)


@dataclass(frozen=True)
class ScoredEpisode:
    """An episode fit for training (every turn judged), with its scored turns in order."""
    trajectory: Trajectory
    turns: tuple[ScoredTurn, ...]


def ranker_preferences(outcomes: Sequence[EpisodeOutcome], tasks: dict[str, Task],
                       prefer: Callable[[list[tuple[Task, list, list]]], Sequence[Sequence[float | None]]]
                       ) -> list[list[float | None]]:
    """Per outcome and turn, the ranker's preference for the candidate over its task's baseline (None
    where the turn's result is not correct). `prefer(items)` answers many (task, candidates, results)
    at once with the ranker's `preferences_for_results` of each (in process, or through its actor with
    every call sent before any answer is awaited); it is asked only for outcomes with a correct turn."""
    asked = [k for k, o in enumerate(outcomes) if any(r.verdict == "correct" for r in o.results())]
    answers = prefer([(tasks[outcomes[k].trajectory.task_id], [j.candidate for j in outcomes[k].turns if j.result],
                       outcomes[k].results()) for k in asked]) if asked else []
    out: list[list[float | None]] = [[None] * len(o.results()) for o in outcomes]
    for k, answer in zip(asked, answers):
        out[k] = list(answer)
    return out


def prepare_step(outcomes: Sequence[EpisodeOutcome], reward_cfg: RewardSection, rl_cfg: RLSection,
                 preferences: Sequence[Sequence[float | None]] | None = None) -> list[ScoredEpisode]:
    """Rewards (from each turn's EvalResult, and the ranker's preference when the ranker term is on),
    discounted returns and group advantages of one step's episodes. Episodes whose evaluation was lost
    (a turn without a result) or that have no turn are left out; the rest keep their order."""
    usable = [(k, o) for k, o in enumerate(outcomes) if o.fully_judged]
    rewards = []
    for k, o in usable:
        prefs = preferences[k] if preferences is not None else [None] * len(o.turns)
        if len(prefs) != len(o.turns):
            raise ValueError(f"episode {o.trajectory.episode_id}: the ranker gave {len(prefs)} preferences for "
                             f"{len(o.turns)} judged turns; it must answer one per turn (None where not correct)")
        rewards.append([(*compute_reward(j.result, reward_cfg, ranker_preference=p), tuple(reward_notes(j.result, p)))
                        for j, p in zip(o.turns, prefs)])
    returns, advantages = returns_and_advantages(
        [o.trajectory.task_id for _, o in usable], [[r for r, _, _ in rw] for rw in rewards],
        [[j.result.verdict for j in o.turns] for _, o in usable], rl_cfg)
    return [ScoredEpisode(o.trajectory, tuple(
                ScoredTurn(j.turn, j.result, reward, dict(terms), ret, adv, notes)
                for j, (reward, terms, notes), ret, adv in zip(o.turns, rw, rets, advs)))
            for (_, o), rw, rets, advs in zip(usable, rewards, returns, advantages)]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _std(values: Sequence[float]) -> float:
    """Population standard deviation (nan without values)."""
    return statistics.pstdev(values) if values else float("nan")


def rollout_metrics(outcomes: Sequence[EpisodeOutcome], episodes: Sequence[ScoredEpisode]) -> dict[str, float]:
    """Reward, correctness, speedup and turn statistics of one step (episodes scored by prepare_step)."""
    trajectories = [e.trajectory for e in episodes]
    scored = [t for e in episodes for t in e.turns]
    turns = [t.turn for t in scored]
    verdicts = Counter(t.result.verdict for t in scored)
    finals = [e.turns[-1] for e in episodes]
    correct_speedups = [usable_speedup(t.result.speedup) for t in scored if t.result.verdict == "correct"]
    correct_speedups = [s for s in correct_speedups if s is not None]  # NaN, inf or <= 0 are not speedups
    episode_returns = [sum(t.reward for t in e.turns) for e in episodes]
    metrics: dict[str, float] = {
        "rollout/episodes": float(len(outcomes)),
        "rollout/lost_episodes": float(len(outcomes) - len(trajectories)),
        "rollout/turns": float(len(turns)),
        "rollout/turns_used_mean": _mean([len(traj.turns) for traj in trajectories]),
        "rollout/response_tokens_mean": _mean([len(t.response_ids) for t in turns]),
        "rollout/prompt_tokens_mean": _mean([len(t.prompt_ids) for t in turns]),
        "rollout/logprob_mean": _mean([lp for t in turns for lp in t.logprobs]),
        "rollout/truncated_fraction": _mean([float(t.finish_reason == "length") for t in turns]),
        "reward/turn_mean": _mean([t.reward for t in scored]),
        "reward/turn_std": _std([t.reward for t in scored]),
        "reward/episode_mean": _mean(episode_returns),
        "reward/final_turn_mean": _mean([t.reward for t in finals]),
        "reward/advantage_abs_mean": _mean([abs(t.advantage) for t in scored]),
        "reward/unusable_input_turns": float(sum(bool(t.reward_notes) for t in scored)),
        "correct/turn_fraction": _mean([float(t.result.verdict == "correct") for t in scored]),
        "correct/episode_fraction": _mean([float(any(t.result.verdict == "correct" for t in e.turns))
                                           for e in episodes]),
        "speedup/correct_geomean": (math.exp(_mean([math.log(s) for s in correct_speedups]))
                                    if correct_speedups else float("nan")),
        "speedup/best_mean": _mean([max((usable_speedup(t.result.speedup) or 0.0) for t in e.turns
                                        if t.result.verdict == "correct")
                                    for e in episodes if any(t.result.verdict == "correct" for t in e.turns)]),
    }
    groups: dict[tuple[str, int], list[float]] = {}
    for e in episodes:
        for k, t in enumerate(e.turns):
            groups.setdefault((e.trajectory.task_id, k), []).append(t.return_)
    sized = [g for g in groups.values() if len(g) > 1]
    metrics["advantage/collapsed_group_fraction"] = _mean([float(max(g) - min(g) < 1e-9) for g in sized])
    for term in TERMS:
        metrics[f"reward/{term}_mean"] = _mean([t.reward_terms.get(term, 0.0) for t in scored])
    for verdict, n in sorted(verdicts.items(), key=lambda kv: str(kv[0])):
        metrics[f"verdict/{verdict}"] = n / max(len(turns), 1)
    for reason, n in Counter(o.trajectory.stop_reason for o in outcomes).items():
        metrics[f"stop/{reason}"] = float(n)
    return metrics


def busy_fractions(busy_s: dict[str, float], actors: dict[str, int], wall_s: float) -> dict[str, float]:
    """`busy/<role>`: busy seconds / (wall seconds x actors of the role), for each timed role of NODE_ROLES.
    Every timed role must have its busy seconds and its actor count: a role the loop does not measure is a
    ValueError naming it, never a silent 0."""
    if wall_s <= 0:
        raise ValueError(f"busy_fractions: wall time {wall_s} s must be positive")
    names = [r.name for r in timed_roles()]
    unmeasured = [n for n in names if n not in busy_s or n not in actors]
    if unmeasured:
        raise ValueError(f"busy_fractions: no busy seconds or actor count for the timed role(s) {unmeasured} "
                         f"(busy seconds of {sorted(busy_s)}, actors of {sorted(actors)}); measure each timed role "
                         "in pipeline/rl/loop.py or mark it untimed in pipeline/core/node_roles.py")
    return {f"busy/{n}": busy_s[n] / (wall_s * max(actors[n], 1)) for n in names}
