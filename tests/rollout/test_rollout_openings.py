"""Work kept off the driver: each task's opening prompt tokenized where the tasks are streamed, each answer read
where it was generated. Both give what the driver would have computed itself, and the scheduler then does
neither."""
import numpy as np
import pytest

from rollout_fakes import MAX_MODEL_LEN, FakeEvaluator, ScriptedGenerator

from pipeline.rollout import openings as openings_module
from pipeline.rollout import parsing
from pipeline.rollout.conversation import ChatFormat
from pipeline.rollout.generation import GenerationRequest, Sample, with_extracted
from pipeline.rollout.openings import add_opening_ids, opening_ids, pack_ids, unpack_ids
from pipeline.rollout.parsing import answer_spec, extract_code
from pipeline.rollout.prompts import entry_point, opening_messages
from pipeline.rollout.scheduler import run_episodes_locally
from pipeline.rollout.tiny_model import load_tokenizer
from pipeline.tasks.reader import TaskReader


@pytest.fixture(scope="module")
def chat(model_path):
    return ChatFormat(load_tokenizer(model_path))


@pytest.fixture(scope="module")
def tasks(builtin_tasks):
    return [builtin_tasks[t] for t in ("c2cuda/saxpy", "c2cuda/dot", "torch2cuda/relu", "torch2cuda/gelu")]


def test_batched_openings_are_the_ids_of_each_opening_alone(tasks, chat):
    assert opening_ids(tasks, chat) == [chat.opening_ids(*opening_messages(t)) for t in tasks]
    ids = opening_ids(tasks[:1], chat)[0]
    assert unpack_ids(pack_ids(ids)) == ids and max(ids) > 255  # ids past one byte survive the packing


def test_a_stream_block_gains_each_tasks_opening_ids(tasks, chat, model_path):
    rows = list(TaskReader(tasks, allow_unchecked=True, seed=1).rows())
    block = {k: np.array([r[k] for r in rows], dtype=object) for k in rows[0]}
    out = add_opening_ids(block, str(model_path))
    assert list(out["task_id"]) == [r["task_id"] for r in rows]
    by_id = {t.id: t for t in tasks}
    assert [unpack_ids(b) for b in out["opening_ids"]] == opening_ids([by_id[r["task_id"]] for r in rows], chat)


def test_the_scheduler_tokenizes_only_tasks_that_came_without_ids(tasks, chat, model_path, rollout_cfg, monkeypatch):
    given = {t.id: ids for t, ids in zip(tasks[:3], opening_ids(tasks[:3], chat))}
    tokenized = []
    real = openings_module.opening_ids

    def counting(ts, c):
        tokenized.extend(t.id for t in ts)
        return real(ts, c)
    import pipeline.rollout.scheduler as scheduler_module
    monkeypatch.setattr(scheduler_module, "opening_ids", counting)
    gen = ScriptedGenerator(model_path, MAX_MODEL_LEN, lambda text, k: "no code")
    cfg = rollout_cfg.model_copy(update={"samples_per_task": 2, "max_turns": 1, "max_new_tokens": 64})
    from pipeline.rollout.scheduler import EpisodeScheduler, ThreadQueue
    with ThreadQueue(gen.generate, 1) as gq, ThreadQueue(FakeEvaluator(lambda t, c: ("not_executed", None)), 1) as eq:
        outcomes, _ = EpisodeScheduler(cfg, chat, MAX_MODEL_LEN, gq, eq).run(tasks, 0, given)
    assert tokenized == [tasks[3].id]
    assert [o.trajectory.turns[0].prompt_ids for o in outcomes[:2]] == [given[tasks[0].id]] * 2


def test_the_generator_reads_its_answers_as_the_driver_would(tasks):
    task = tasks[0]
    entry = entry_point(task)
    texts = ["```cuda\nextern \"C\" void %s(int n) { }\n```" % entry, "no block here", "```python\nx = 1\n```",
             "```cuda\nvoid other() { }\n```"]
    samples = [[Sample([1], [0.0], t, "stop") for t in texts] + [Sample([1], [0.0], texts[1], "length")]]
    read = with_extracted([GenerationRequest([1], len(samples[0]), answer_spec(task))], samples)[0]
    assert [s.extracted for s in read] == [extract_code(s.text, entry, s.finish_reason) for s in samples[0]]
    assert read[0].extracted.code and read[-1].extracted.problem != read[1].extracted.problem  # cut-off noted
    assert with_extracted([GenerationRequest([1], 5)], samples)[0] == samples[0]  # no spec: left alone


def test_episodes_take_the_generators_reading_without_parsing_again(tasks, model_path, rollout_cfg, monkeypatch):
    codes = {t.id: t.baseline().code for t in tasks}
    markers = {"c2cuda/saxpy": "void saxpy(", "c2cuda/dot": "void dot(", "torch2cuda/relu": "torch.relu(",
               "torch2cuda/gelu": "gelu"}

    def respond(text, k):
        task_id = next(t for t, m in markers.items() if m in text)
        return f"```cuda\n{codes[task_id]}```"
    gen = ScriptedGenerator(model_path, MAX_MODEL_LEN, respond)
    driver_reads = []
    real = parsing.AnswerSpec.extract
    import threading
    driver = threading.get_ident()

    def extract(self, text, finish_reason="stop"):
        if threading.get_ident() == driver:
            driver_reads.append(text)
        return real(self, text, finish_reason)
    monkeypatch.setattr(parsing.AnswerSpec, "extract", extract)
    cfg = rollout_cfg.model_copy(update={"samples_per_task": 2, "max_turns": 1, "max_new_tokens": 600})
    outcomes, stats = run_episodes_locally(tasks, gen, FakeEvaluator(lambda t, c: ("not_executed", None)), cfg)
    assert stats.format_errors == 0 and all(o.results()[0].verdict == "not_executed" for o in outcomes)
    assert driver_reads == []  # every answer was read in the generator's thread
