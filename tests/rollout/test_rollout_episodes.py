"""Multi-turn episodes against the CPU evaluator: a scripted generator (fixed answers, so the
not_executed and compile_error paths and their feedback are exercised) and the real tiny model on
every backend of the table (garbage answers: format_error turns, but real token ids and logprobs). Every record
must be consistent: turn boundaries, masks and logprobs line up with the tokens."""
import pytest

from rollout_fakes import MAX_MODEL_LEN, FakeEvaluator, ScriptedGenerator, turn_of

from pipeline.core.generator_backends import BACKENDS
from pipeline.evaluation.feedback import format_feedback
from pipeline.rollout.conversation import ChatFormat
from pipeline.rollout.scheduler import EpisodeScheduler, ThreadQueue, run_episodes_locally


def check_consistent(outcome, chat: ChatFormat, max_model_len: int, max_new_tokens: int) -> None:
    """Everything the learner relies on, checked against the tokens themselves."""
    traj = outcome.trajectory
    assert [j.turn for j in outcome.turns] == traj.turns and outcome.fully_judged
    for k, turn in enumerate(traj.turns):
        assert len(turn.logprobs) == len(turn.response_ids) > 0
        assert all(lp <= 1e-4 for lp in turn.logprobs)
        assert len(turn.response_ids) <= max_new_tokens
        assert len(turn.prompt_ids) + max_new_tokens <= max_model_len
        assert turn.response_text == chat.tokenizer.decode(turn.response_ids, skip_special_tokens=True)
        assert (turn.response_ids[-1] == chat.eos_id) == (turn.finish_reason == "stop")
        result = outcome.turns[k].result
        assert turn.feedback == format_feedback(result) and result.turn == k
        if k and turn.kept_turns == list(range(k)):  # untrimmed: the previous turn's context, its answer, the glue
            prev = traj.turns[k - 1]
            glue = chat.glue_ids(prev.feedback, prev.response_ids)
            assert turn.prompt_ids == prev.prompt_ids + prev.response_ids + glue
            assert prev.feedback in chat.tokenizer.decode(glue)
    if all(t.kept_turns == list(range(k)) for k, t in enumerate(traj.turns)):  # untrimmed: one growing sequence
        whole = traj.turns[-1].prompt_ids + traj.turns[-1].response_ids
        for turn in traj.turns:  # each turn's context and answer are a prefix of the last turn's sequence
            start = len(turn.prompt_ids)
            assert whole[:start] == turn.prompt_ids and whole[start:start + len(turn.response_ids)] == turn.response_ids


def scripted_answers(naive_code: str):
    """Turn 0: prose only; turn 1: the naive implementation; turn 2: it with a compile error."""
    broken = naive_code.replace("threadIdx.x", "threadIdx.q", 1)

    def respond(prompt_text: str, sample: int) -> str:
        turn = turn_of(prompt_text)
        if turn == 0:
            return "I would launch one thread per element."
        return f"Here it is.\n```cuda\n{naive_code if turn == 1 else broken}```\n"
    return respond


@pytest.mark.parametrize("task_id", ["c2cuda/saxpy", "torch2cuda/relu"])
def test_three_turn_scripted_episode_against_cpu_evaluator(task_id, builtin_tasks, model_path, rollout_cfg,
                                                           cpu_evaluator):
    task = builtin_tasks[task_id]
    naive = task.baseline().code
    gen = ScriptedGenerator(model_path, MAX_MODEL_LEN, scripted_answers(naive))
    cfg = rollout_cfg.model_copy(update={"samples_per_task": 1, "max_new_tokens": 512,
                                         "stop_when_speedup_at_least": 1.0})
    outcomes, stats = run_episodes_locally([task], gen, cpu_evaluator.evaluate, cfg)
    (outcome,) = outcomes
    traj = outcome.trajectory
    assert [r.verdict for r in outcome.results()] == ["format_error", "not_executed", "compile_error"]
    assert traj.stop_reason == "turn_budget"  # not_executed is never a success
    assert outcome.turns[0].candidate is None and outcome.turns[1].candidate.code == naive.strip("\n") + "\n"
    assert "no fenced code block" in traj.turns[0].feedback
    assert "could not be run here" in traj.turns[1].feedback
    assert "does not compile" in traj.turns[2].feedback and "threadIdx" in traj.turns[2].feedback
    # each feedback is the next turn's user message
    assert traj.turns[0].feedback in gen.tokenizer.decode(traj.turns[1].prompt_ids)
    assert traj.turns[1].feedback in gen.tokenizer.decode(traj.turns[2].prompt_ids)
    check_consistent(outcome, ChatFormat(gen.tokenizer), MAX_MODEL_LEN, cfg.max_new_tokens)
    assert stats.turns == 3 and stats.format_errors == 1 and stats.evaluation_calls == 2


@pytest.mark.integration
@pytest.mark.parametrize("backend", list(BACKENDS))
def test_tiny_model_episodes_give_consistent_records(backend, generator_of, builtin_tasks, rollout_cfg, cpu_evaluator):
    gen = generator_of(backend)
    tasks = [builtin_tasks["c2cuda/saxpy"], builtin_tasks["torch2cuda/relu"]]
    cfg = rollout_cfg.model_copy(update={"max_turns": 3, "max_new_tokens": 32})
    outcomes, stats = run_episodes_locally(tasks, gen, cpu_evaluator.evaluate, cfg, step=7)
    assert [(o.trajectory.task_id, o.trajectory.group_index) for o in outcomes] == \
        [("c2cuda/saxpy", 0), ("c2cuda/saxpy", 1), ("torch2cuda/relu", 0), ("torch2cuda/relu", 1)]
    chat = ChatFormat(gen.tokenizer)
    for outcome in outcomes:
        traj = outcome.trajectory
        assert traj.episode_id.startswith("s7/") and traj.weight_version == gen.weight_version
        assert len(traj.turns) == 3 and traj.stop_reason == "turn_budget"
        assert all(r.verdict in ("format_error", "compile_error", "rejected", "not_executed") for r in outcome.results())
        check_consistent(outcome, chat, MAX_MODEL_LEN, cfg.max_new_tokens)
    assert stats.generation_calls == 3 and stats.sequences_generated == 12  # every turn of all four in one batch
    # the first turn's batch asked for two samples of each task's one prompt
    first = [o.trajectory.turns[0] for o in outcomes]
    assert first[0].prompt_ids == first[1].prompt_ids != first[2].prompt_ids


def test_success_ends_an_episode_early(builtin_tasks, model_path, rollout_cfg):
    task = builtin_tasks["c2cuda/saxpy"]
    gen = ScriptedGenerator(model_path, MAX_MODEL_LEN, scripted_answers(task.baseline().code))
    fast = FakeEvaluator(lambda t, c: ("correct", 1.5 if c.turn == 2 else 0.9))
    cfg = rollout_cfg.model_copy(update={"samples_per_task": 1, "max_turns": 5, "max_new_tokens": 512,
                                         "stop_when_speedup_at_least": 1.2})
    (outcome,), _ = run_episodes_locally([task], gen, fast, cfg)
    assert outcome.trajectory.stop_reason == "success" and len(outcome.trajectory.turns) == 3
    assert [r.speedup for r in outcome.results()] == [None, 0.9, 1.5]  # turn 0 was a format_error
    never = cfg.model_copy(update={"stop_when_speedup_at_least": None, "max_turns": 4})
    (outcome,), _ = run_episodes_locally([task], gen, fast, never)
    assert outcome.trajectory.stop_reason == "turn_budget" and len(outcome.trajectory.turns) == 4


def test_old_turns_are_trimmed_and_a_full_context_stops_the_episode(builtin_tasks, model_path, rollout_cfg):
    task = builtin_tasks["c2cuda/saxpy"]
    gen = ScriptedGenerator(model_path, MAX_MODEL_LEN, lambda text, k: "word " * 150)  # same answer every turn
    evaluate = FakeEvaluator(lambda t, c: ("not_executed", None))
    cfg = rollout_cfg.model_copy(update={"samples_per_task": 1, "max_turns": 6, "max_new_tokens": 200})
    chat = ChatFormat(gen.tokenizer)

    def run(max_model_len):
        with ThreadQueue(gen.generate, 1) as gq, ThreadQueue(evaluate, 1) as eq:
            (outcome,), _ = EpisodeScheduler(cfg, chat, max_model_len, gq, eq).run([task])
        return outcome
    free = run(MAX_MODEL_LEN).trajectory.turns  # every turn adds the same exchange (answer and feedback)
    opening, exchange = len(free[0].prompt_ids), len(free[1].prompt_ids) - len(free[0].prompt_ids)
    limit = opening + cfg.max_new_tokens + 2 * exchange + exchange // 2  # room for two earlier turns, not three
    outcome = run(limit)
    turns = outcome.trajectory.turns
    assert len(turns) == 6 and [t.kept_turns for t in turns] == [[], [0], [0, 1], [1, 2], [2, 3], [3, 4]]
    assert all(len(t.prompt_ids) + cfg.max_new_tokens <= limit for t in turns)
    check_consistent(outcome, chat, limit, cfg.max_new_tokens)
    outcome = run(opening + cfg.max_new_tokens + exchange // 2)  # not even the newest turn fits
    assert outcome.trajectory.stop_reason == "context" and len(outcome.trajectory.turns) == 1
