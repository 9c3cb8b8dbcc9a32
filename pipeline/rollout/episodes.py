"""One multi-turn refinement episode: a task in, an EpisodeOutcome out: the Trajectory and, per turn, one
`JudgedTurn` (the turn, its candidate, its result: the verdict lives in the result alone).

An episode alternates two steps, driven by the scheduler (scheduler.py):
  generate: `next_prompt()` gives the context ids; the scheduler samples; `take_sample()` records
            the turn and parses the answer into a Candidate (or a format_error result);
  evaluate: `take_result()` stores the result and the feedback message (the evaluator's one
            formatter, feedback.py) and decides: stop, or append the turn and its feedback to the
            context as the next user message.
Stopping: success (a correct turn with speedup >= `stop_when_speedup_at_least`, when that is
set), the turn budget (`max_turns`), the context (the next prompt cannot fit, see
conversation.py), or an error (the evaluation of the turn was lost).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.core.config import RolloutSection
from pipeline.evaluation.feedback import format_feedback
from pipeline.core.records import Candidate, EvalResult, Task, Trajectory, Turn
from pipeline.rollout.conversation import ChatFormat, Context
from pipeline.rollout.generation import Sample
from pipeline.rollout.parsing import parse_response


@dataclass
class JudgedTurn:
    """One turn as the driver receives it: what the policy saw and wrote (`turn`, the trajectory's own
    record), the code parsed from it (`candidate`: None where the answer held no usable code) and how it
    was judged (`result`: None until judged, and for good when its evaluation was lost)."""
    turn: Turn
    candidate: Candidate | None
    result: EvalResult | None = None


@dataclass
class EpisodeOutcome:
    """A finished episode as the driver receives it: the trajectory, and its turns, each judged."""
    trajectory: Trajectory
    turns: list[JudgedTurn] = field(default_factory=list)
    error: str = ""

    @property
    def fully_judged(self) -> bool:
        """Every turn has its result (an episode whose evaluation was lost has a turn without one)."""
        return bool(self.turns) and all(j.result is not None for j in self.turns)

    def results(self) -> list[EvalResult]:
        """The results of the judged turns, in order."""
        return [j.result for j in self.turns if j.result is not None]


def turn_rows(outcome: EpisodeOutcome) -> list[dict]:
    """Each turn of a finished episode as one plain row: what the policy wrote and how it was judged."""
    traj = outcome.trajectory
    return [{"task": traj.task_id, "sample": traj.group_index, "turn": t,
             "verdict": j.result.verdict if j.result else None,
             "reason": j.result.reason[:500] if j.result else outcome.error,
             "finish_reason": j.turn.finish_reason, "response": j.turn.response_text}
            for t, j in enumerate(outcome.turns)]


class Episode:
    """The state of one episode; see the module docstring for the protocol."""

    def __init__(self, task: Task, episode_id: str, group_index: int, chat: ChatFormat, opening_ids: list[int],
                 cfg: RolloutSection, max_model_len_tokens: int):
        self.task = task
        self.chat = chat
        self.cfg = cfg
        self.max_model_len_tokens = max_model_len_tokens
        self.context = Context(list(opening_ids))
        self.outcome = EpisodeOutcome(Trajectory(task_id=task.id, episode_id=episode_id, group_index=group_index))
        self.state = "generate"  # generate | evaluate | done
        self._prompt: tuple[list[int], list[int]] | None = None
        self._weight_version: int | None = None

    @property
    def done(self) -> bool:
        return self.state == "done"

    def next_prompt(self) -> list[int] | None:
        """The context ids for the next turn, or None when it cannot fit (the episode is then done)."""
        self._require("generate")
        self._prompt = self.context.prompt(self.max_model_len_tokens, self.cfg.max_new_tokens,
                                           self.cfg.history_turns_kept)
        if self._prompt is None:
            self._finish("context")
            return None
        return self._prompt[0]

    def take_sample(self, sample: Sample, weight_version: int) -> Candidate | EvalResult:
        """Record the sampled turn; return its Candidate, or the format_error result of an unusable answer."""
        self._require("generate")
        if self._prompt is None:
            raise RuntimeError(f"episode {self.outcome.trajectory.episode_id}: take_sample before next_prompt")
        if self._weight_version is None:
            self._weight_version = weight_version
            self.outcome.trajectory.weight_version = weight_version
        elif weight_version != self._weight_version:
            trajectory = self.outcome.trajectory
            raise RuntimeError(f"episode {trajectory.episode_id}: turn {len(trajectory.turns)} came from weights "
                               f"{weight_version}, earlier turns from {self._weight_version}; "
                               "update generator weights only between rollouts")
        prompt_ids, kept = self._prompt
        self._prompt = None
        turn_index = len(self.outcome.trajectory.turns)
        turn = Turn(prompt_ids=prompt_ids, response_ids=list(sample.token_ids), logprobs=list(sample.logprobs),
                    response_text=sample.text, finish_reason=sample.finish_reason, kept_turns=kept)
        self.outcome.trajectory.turns.append(turn)
        parsed = parse_response(self.task, sample.text, turn_index, sample.finish_reason, sample.extracted)
        self.outcome.turns.append(JudgedTurn(turn, parsed if isinstance(parsed, Candidate) else None))
        self.state = "evaluate"
        return parsed

    def take_result(self, result: EvalResult) -> None:
        """Record the last turn's evaluation; stop, or queue its feedback as the next user message."""
        self._require("evaluate")
        judged = self.outcome.turns[-1]
        judged.result = result
        turn = judged.turn
        turn.feedback = format_feedback(result)
        threshold = self.cfg.stop_when_speedup_at_least
        if result.verdict == "correct" and threshold is not None and (result.speedup or 0.0) >= threshold:
            self._finish("success")
        elif len(self.outcome.trajectory.turns) >= self.cfg.max_turns:
            self._finish("turn_budget")
        else:
            self.context.add(turn.response_ids, self.chat.glue_ids(turn.feedback, turn.response_ids))
            self.state = "generate"

    def fail(self, why: str) -> None:
        """End the episode because its generation or evaluation was lost (an actor died on every retry)."""
        self.outcome.error = why
        self._finish("error")

    def _finish(self, reason: str) -> None:
        self.outcome.trajectory.stop_reason = reason
        self.state = "done"

    def _require(self, state: str) -> None:
        if self.state != state:
            raise RuntimeError(f"episode {self.outcome.trajectory.episode_id} is in state '{self.state}', "
                               f"not '{state}'")
