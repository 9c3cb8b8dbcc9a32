"""The episode scheduler with fakes: full batches, one evaluation call per task per batch, generation and
evaluation overlapping in time, the in-flight limit, and lost evaluations ending episodes as errors."""
import pytest

from rollout_fakes import MAX_MODEL_LEN, FakeEvaluator, ScriptedGenerator, turn_of

from pipeline.core.lost_work import ItemFailed
from pipeline.rollout.conversation import ChatFormat
from pipeline.rollout.scheduler import EpisodeScheduler, ThreadQueue, run_episodes_locally


MARKERS = {"c2cuda/saxpy": "void saxpy(", "c2cuda/dot": "void dot(", "torch2cuda/relu": "torch.relu(",
           "torch2cuda/gelu": "gelu"}


def naive_answers(tasks):
    """A scripted policy answering each task's prompt with its naive implementation."""
    codes = {t.id: t.baseline().code for t in tasks}

    def respond(prompt_text: str, sample: int) -> str:
        task_id = next(t for t, marker in MARKERS.items() if t in codes and marker in prompt_text)
        return f"```cuda\n{codes[task_id]}```\nturn {turn_of(prompt_text)}, sample {sample}"
    return respond


@pytest.fixture(scope="module")
def four_tasks(builtin_tasks):
    return [builtin_tasks[t] for t in ("c2cuda/saxpy", "c2cuda/dot", "torch2cuda/relu", "torch2cuda/gelu")]


def test_generation_and_evaluation_overlap_and_batches_stay_full(four_tasks, model_path, rollout_cfg):
    # A slow generator (0.3 s per call) and slow evaluations (0.4 s per call, one call per task and
    # batch): run one after the other they would take the sum of both; interleaved, the generator
    # works while evaluations run, and evaluations of different tasks run at once.
    gen = ScriptedGenerator(model_path, MAX_MODEL_LEN, naive_answers(four_tasks), delay_s=0.3)
    evaluator = FakeEvaluator(lambda t, c: ("not_executed", None), delay_s=0.4)
    cfg = rollout_cfg.model_copy(update={"samples_per_task": 3, "max_turns": 3, "max_new_tokens": 600,
                                         "max_evaluations_in_flight": 4, "max_sequences_per_batch": 64})
    outcomes, stats = run_episodes_locally(four_tasks, gen, evaluator, cfg)
    assert len(outcomes) == 12 and all(o.trajectory.stop_reason == "turn_budget" for o in outcomes)
    assert all([r.verdict for r in o.results()] == ["not_executed"] * 3 for o in outcomes)
    assert gen.calls[0] == [3, 3, 3, 3]  # the first batch: each task's prompt once, with n = 3
    assert stats.sequences_generated == 36 and stats.mean_sequences_per_call >= 6
    assert all(n == 3 for _, n in evaluator.calls)  # a task's candidates of one batch in one call
    assert evaluator.max_concurrent >= 2
    # The generator's own measured time (its 0.3 s delay plus tokenizing, slower on a loaded host) plus the
    # evaluations' least time: the serial sum this run would take without overlap.
    serial_s = stats.generation_s + len(evaluator.calls) * 0.4
    assert stats.wall_s < 0.75 * serial_s, (stats.wall_s, serial_s)


def test_in_flight_limit_and_batch_limit(four_tasks, model_path, rollout_cfg):
    gen = ScriptedGenerator(model_path, MAX_MODEL_LEN, naive_answers(four_tasks))
    evaluator = FakeEvaluator(lambda t, c: ("not_executed", None))
    cfg = rollout_cfg.model_copy(update={"samples_per_task": 2, "max_turns": 2, "max_new_tokens": 600,
                                         "max_episodes_in_flight": 3, "max_sequences_per_batch": 2})
    outcomes, stats = run_episodes_locally(four_tasks, gen, evaluator, cfg)
    assert len(outcomes) == 8 and all(len(o.trajectory.turns) == 2 for o in outcomes)
    assert max(sum(call) for call in gen.calls) <= 2
    assert stats.generation_calls == len(gen.calls) >= 8


class LosingQueue:
    """A queue whose calls come back as a pool's are when their actor died on every retry."""

    def __init__(self):
        self.pending = []

    def submit(self, *args):
        self.pending.append(len(self.pending))
        return self.pending[-1]

    def next_completed(self, timeout_s=None):
        ticket = self.pending.pop(0)
        return ticket, ItemFailed(ticket, "evaluate", 3, "ActorDiedError: the actor died")

    def poll(self):
        return self.next_completed() if self.pending else None


def test_lost_generation_or_evaluation_ends_episodes_with_error(four_tasks, model_path, rollout_cfg):
    gen = ScriptedGenerator(model_path, MAX_MODEL_LEN, naive_answers(four_tasks))
    cfg = rollout_cfg.model_copy(update={"samples_per_task": 2, "max_new_tokens": 600})
    with ThreadQueue(gen.generate, 1) as gq:
        scheduler = EpisodeScheduler(cfg, ChatFormat(gen.tokenizer), MAX_MODEL_LEN, gq, LosingQueue())
        outcomes, stats = scheduler.run(four_tasks[:1])
    assert [o.trajectory.stop_reason for o in outcomes] == ["error", "error"]
    assert all(len(o.trajectory.turns) == 1 and "lost its actor" in o.error for o in outcomes)
    assert stats.stop_reasons == {"error": 2}
    evaluator = FakeEvaluator(lambda t, c: ("not_executed", None))
    with ThreadQueue(evaluator, 1) as eq:
        scheduler = EpisodeScheduler(cfg, ChatFormat(gen.tokenizer), MAX_MODEL_LEN, LosingQueue(), eq)
        outcomes, stats = scheduler.run(four_tasks[:1])
    assert all(o.trajectory.stop_reason == "error" and not o.trajectory.turns for o in outcomes)
    assert "generation lost" in outcomes[0].error and evaluator.calls == []


def test_weights_changing_inside_an_episode_is_refused(four_tasks, model_path, rollout_cfg):
    gen = ScriptedGenerator(model_path, MAX_MODEL_LEN, naive_answers(four_tasks))
    original = gen.generate

    def bumping(requests, sampling):
        result = original(requests, sampling)
        gen.weight_version += 1  # as if the driver updated weights between two turns
        return result
    gen.generate = bumping
    evaluator = FakeEvaluator(lambda t, c: ("not_executed", None))
    with pytest.raises(RuntimeError, match="update generator weights only between rollouts"):
        run_episodes_locally(four_tasks[:1], gen, evaluator, rollout_cfg.model_copy(update={"max_new_tokens": 600}))


def test_max_new_tokens_must_leave_room_for_a_prompt(model_path, rollout_cfg):
    gen = ScriptedGenerator(model_path, MAX_MODEL_LEN, lambda text, k: "")
    with pytest.raises(ValueError, match="leaves no room for a prompt"):
        EpisodeScheduler(rollout_cfg.model_copy(update={"max_new_tokens": MAX_MODEL_LEN}), ChatFormat(gen.tokenizer),
                         MAX_MODEL_LEN, None, None)


def test_the_bookkeeping_per_finished_call_touches_only_its_own_episodes(four_tasks, model_path, rollout_cfg,
                                                                          monkeypatch):
    # With thousands of episodes in flight, the driver must not look at every episode on every finished call: the
    # episodes' state is read a bounded number of times each, however many are in flight (it was episodes x calls).
    from pipeline.rollout import episodes as episodes_module
    reads = []
    real = episodes_module.Episode.done
    monkeypatch.setattr(episodes_module.Episode, "done", property(lambda self: reads.append(1) or real.fget(self)))
    gen = ScriptedGenerator(model_path, MAX_MODEL_LEN, naive_answers(four_tasks))
    evaluator = FakeEvaluator(lambda t, c: ("not_executed", None))
    cfg = rollout_cfg.model_copy(update={"samples_per_task": 48, "max_turns": 2, "max_new_tokens": 600,
                                         "max_evaluations_in_flight": 4, "max_sequences_per_batch": 8})
    outcomes, stats = run_episodes_locally(four_tasks, gen, evaluator, cfg)
    episodes = len(outcomes)
    assert episodes == 192 and stats.generation_calls >= 48  # many finished calls, many episodes in flight
    assert len(reads) <= 4 * episodes, (len(reads), episodes, stats.generation_calls + stats.evaluation_calls)
