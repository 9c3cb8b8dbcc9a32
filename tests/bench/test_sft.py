"""cudaperf sft on CPU with the tiny model: pairs in the RL prompt format, the loss falls, the
checkpoint loads as a policy; rejection mode trains on the policy's own kept samples."""
import json
import re

import pytest

from pipeline.core.config import ConfigError, SFTSection, load_config
from pipeline.core.records import Implementation
from pipeline.rollout.parsing import answer_text, extract_code
from pipeline.rollout.prompts import entry_point, opening_messages
from pipeline.cli import main as cudaperf
from pipeline.sft import (answer_head, encode_pairs, fastest_first, name_drills, rename_word, renamed,
                          supervised_pairs)
from pipeline.tasks import load_tasks

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_pairs_rename_and_order(small_task_dir):
    tasks = load_tasks(small_task_dir)
    pairs, stats = supervised_pairs(tasks, SFTSection(rename_copies_per_pair=2, keep_fastest_per_task=2), 0, {})
    assert stats["order_strategy"] == 3 and stats["pairs"] == len(pairs)
    saxpy = [(t, a) for t, a in pairs if t.id.startswith("c2cuda/saxpy")]
    assert len(saxpy) == 2 * 3  # two fastest implementations, each plus two renamed copies
    for task, answer in pairs:  # every answer parses back to code defining the task's entry point
        assert extract_code(answer, entry_point(task)).code is not None
    for task, answer in saxpy[1:3]:
        assert task.function != "saxpy" and task.function in opening_messages(task)[1]
        assert "saxpy(" not in answer and f"{task.function}(" in answer
    # measured times win over strategy order, and an implementation measured incorrect is dropped
    task = next(t for t in tasks if t.id == "c2cuda/saxpy")
    names = [i.name for i in task.implementations]
    measured = {(task.id, names[0]): 1.0, (task.id, names[1]): None}
    measured.update({(task.id, n): 2.0 for n in names[2:]})
    ordered, how = fastest_first(task, task.implementations, measured)
    assert how == "measured" and [i.name for i in ordered][0] == names[0] and names[1] not in [i.name for i in ordered]
    strategy, how = fastest_first(task, [Implementation(name="a", strategy="naive", format="c2cuda", code=""),
                                         Implementation(name="b", strategy="vectorized", format="c2cuda", code="")], {})
    assert how == "strategy" and [i.name for i in strategy] == ["b", "a"]
    only_renamed, _ = supervised_pairs(tasks, SFTSection(rename_copies_per_pair=2, rename_keep_original=False,
                                                         keep_fastest_per_task=2), 0, {})
    saxpy_renamed = [t for t, _ in only_renamed if t.id.startswith("c2cuda/saxpy")]
    assert len(saxpy_renamed) == 2 * 2 and all(t.function != "saxpy" for t in saxpy_renamed)
    assert len({t.function for t in saxpy_renamed}) == 4  # every copy its own made-up name
    new_task = renamed(task, "fused_op")
    assert new_task.function == "fused_op" and "fused_op" in new_task.reference and not new_task.implementations
    assert rename_word("saxpy(saxpy_n); saxpy2", "saxpy", "op") == "op(saxpy_n); saxpy2"  # whole words only


def test_name_drills_are_answer_openings_under_made_up_names(small_task_dir, model_cfg):
    from pipeline.rollout.conversation import ChatFormat
    from pipeline.rollout.tiny_model import load_tokenizer, resolve_model_path
    generated = [t for t in load_tasks("generated:train") if t.kind == "c2cuda"]
    tasks = generated[::700]  # several families, all written with a static run() the entry calls
    pairs, _ = supervised_pairs(tasks, SFTSection(keep_fastest_per_task=1, entry_first=True), 0, {})
    drills = name_drills(pairs, 2, 0)
    c_pairs = [(t, a) for t, a in pairs if t.kind == "c2cuda"]
    assert c_pairs and len(drills) == 2 * len(c_pairs)
    for (task, answer), (d1, h1), (d2, h2) in zip(c_pairs, drills[::2], drills[1::2]):
        for drill, head in ((d1, h1), (d2, h2)):
            assert drill.function not in (task.function, "") and drill.function in drill.reference
            assert task.function not in head and f'extern "C" void {drill.function}(' in head
            assert head.rstrip().endswith("}") and "__global__" not in head and len(head) < len(answer) / 2
        assert d1.function != d2.function
    # without the entry first (or with an entry that calls its kernels directly, as the small tasks'
    # do) there is no short opening to drill on
    late, _ = supervised_pairs(tasks, SFTSection(keep_fastest_per_task=1), 0, {})
    assert all(answer_head(t, a) is None for t, a in late) and not name_drills(late, 2, 0)
    small, _ = supervised_pairs(load_tasks(small_task_dir), SFTSection(entry_first=True), 0, {})
    assert not name_drills(small, 2, 0)
    with pytest.raises(ConfigError, match="name_drills_per_pair needs entry_first=true"):
        load_config("configs/local.yaml", ["sft.name_drills_per_pair=2", "sft.entry_first=false"])
    chat = ChatFormat(load_tokenizer(resolve_model_path(model_cfg)))
    seqs, _ = encode_pairs(drills, chat, 4096, end_turn=False)
    full, _ = encode_pairs(drills, chat, 4096)
    assert [s.input_ids + [chat.eos_id] for s in seqs] == [s.input_ids for s in full]


def test_entry_name_tokens_carry_the_loss_weight(small_task_dir, model_cfg):
    from pipeline.rollout.conversation import ChatFormat
    from pipeline.rollout.tiny_model import load_tokenizer, resolve_model_path
    tasks = load_tasks(small_task_dir)
    pairs, _ = supervised_pairs(tasks, SFTSection(rename_copies_per_pair=1, keep_fastest_per_task=1,
                                                  entry_first=True), 0, {})
    tokenizer = load_tokenizer(resolve_model_path(model_cfg))
    chat = ChatFormat(tokenizer)
    plain, _ = encode_pairs(pairs, chat, 4096)
    weighted, _ = encode_pairs(pairs, chat, 4096, entry_name_weight=20.0)
    assert [s.input_ids for s in plain] == [s.input_ids for s in weighted] and all(s.weights is None for s in plain)
    kinds = set()
    for (task, answer), s in zip(pairs, weighted):
        kinds.add(task.kind)
        if task.kind != "c2cuda":
            assert s.weights is None
            continue
        response = s.input_ids[s.prompt_len:]
        assert len(s.weights) == len(response) and set(s.weights) == {1.0, 20.0}
        heavy = [t for t, w in zip(response, s.weights) if w == 20.0]
        mentions = len(re.findall(rf"\b{entry_point(task)}\b", answer))
        assert tokenizer.decode(heavy).count(entry_point(task)) == mentions >= 1
        assert len(heavy) <= mentions * (len(tokenizer.encode(entry_point(task), add_special_tokens=False)) + 2)
    assert kinds == {"c2cuda", "torch2cuda"}


def test_supervised_sft_lowers_loss_and_writes_a_policy(small_task_dir, tiny_dir, tmp_path):
    out = tmp_path / "sft"
    rc = cudaperf(["sft", "--config", "configs/local.yaml", f"tasks.source={small_task_dir}", "model.path=tiny",
               f"model.tiny_dir={tiny_dir}",
               f"sft.output_dir={out}", "sft.epochs=8", "sft.sequences_per_step=5", "sft.rename_copies_per_pair=1",
               "sft.entry_first=true", "sft.keep_fastest_per_task=1", "learner.lr=0.005", "sft.log_every_steps=100",
               f"sft.heldout_source={small_task_dir}", "sft.heldout_samples_per_task=1",
               "rollout.backend=transformers", "rollout.max_new_tokens=16", "compile.workers=1"])
    assert rc == 0
    log = [json.loads(line) for line in (out / "sft_log.jsonl").read_text().splitlines()]
    assert len(log) == 8 and all(m["policy_tokens"] > 0 for m in log)  # all 5 sequences in one step per epoch
    first_epoch = [m["loss"] for m in log if m["epoch"] == 0]
    last_epoch = [m["loss"] for m in log if m["epoch"] == 7]
    assert sum(last_epoch) / len(last_epoch) < 0.8 * sum(first_epoch) / len(first_epoch)
    summary = json.loads((out / "sft_summary.json").read_text())
    assert summary["sequences"] == 2 * 2 + 1 and summary["checkpoint"] == str(out / "hf")
    heldout = summary["heldout"]  # the new policy sampled on held-out tasks through bench (CPU: never correct)
    assert heldout["tasks"] == 3 and heldout["samples"] == 3 and heldout["correct_rate"] == 0.0
    assert (out / "heldout_bench" / "report.json").is_file()
    # the checkpoint is a policy `model.path` can name: both generator backends' loader and the learner's
    from pipeline.core.config import ModelSection, RolloutSection
    from pipeline.rollout.backends import make_generator
    from pipeline.rollout.generation import GenerationRequest, SamplingSpec
    gen = make_generator(ModelSection(path=str(out / "hf"), max_model_len_tokens=2048),
                         RolloutSection(backend="transformers", device="cpu"), seed=0)
    result = gen.generate([GenerationRequest([1, 2, 3], 2)], SamplingSpec(max_new_tokens=8))
    assert len(result.samples[0]) == 2 and gen.tokenizer.chat_template
    gen.close()


def test_a_step_budget_redoes_the_same_policy_bit_for_bit(small_task_dir, tiny_dir, tmp_path):
    """sft.max_steps, unlike a time budget, stops every run at the same step: the same config gives the same
    weights (weights_sha256), so an experiment can redo its SFT start where its files are gone."""
    summaries = []
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        out = tmp_path / name
        rc = cudaperf(["sft", "--config", "configs/local.yaml", f"tasks.source={small_task_dir}", "model.path=tiny",
                   f"model.tiny_dir={tiny_dir}", f"sft.output_dir={out}", "sft.epochs=50", "sft.max_steps=3",
                   "sft.sequences_per_step=2", "sft.heldout_source=", f"run.seed={seed}"])
        assert rc == 0
        summaries.append(json.loads((out / "sft_summary.json").read_text()))
        assert len((out / "sft_log.jsonl").read_text().splitlines()) == summaries[-1]["steps"] == 3
    a, b, c = (s["weights_sha256"] for s in summaries)
    assert a == b and len(a) == 64
    assert c != a  # another seed shuffles the pairs otherwise: the fingerprint tells policies apart


def test_rejection_mode_trains_on_kept_samples(small_task_dir, tiny_dir, tmp_path):
    """On CPU nothing is correct, so the test keeps format-valid compiled samples (not_executed): the
    round must sample, evaluate through the pools and report what it kept."""
    out = tmp_path / "rej"
    rc = cudaperf(["sft", "--config", "configs/local.yaml", f"tasks.source={small_task_dir}", "model.path=tiny",
               f"model.tiny_dir={tiny_dir}",
               f"sft.output_dir={out}", "sft.mode=rejection", "sft.rejection_keep=[not_executed]",
               "rollout.backend=transformers", "rollout.samples_per_task=2", "rollout.max_turns=1",
               "rollout.max_new_tokens=16", "compile.workers=1"])
    assert rc == 0
    summary = json.loads((out / "sft_summary.json").read_text())
    (round0,) = summary["rounds"]
    assert sum(round0["verdicts"].values()) == 3 * 2
    assert round0["kept_turns"] == round0["verdicts"].get("not_executed", 0)
    assert summary["steps"] == (1 if round0["kept_turns"] else 0)
    assert (out / "hf" / "config.json").is_file()


def test_bad_arguments_are_one_line_errors(capsys):
    from pipeline.cli import main as cudaperf  # the CLI reports user errors, as one line each
    assert cudaperf(["sft", "--config", "configs/local.yaml", "sft.mode=wrong"]) == 2
    assert "sft.mode" in capsys.readouterr().err
    assert cudaperf(["sft", "--bogus"]) == 2  # an unknown flag: argparse's usage error, one line, exit status 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and "unrecognized arguments: --bogus; see cudaperf sft --help" in err


def test_rejection_sequences_keep_the_policys_own_tokens():
    from pipeline.core.records import EvalResult, Trajectory, Turn
    from pipeline.rollout.episodes import EpisodeOutcome, JudgedTurn
    from pipeline.sft import rejection_sequences

    def result(verdict):
        return EvalResult(task_id="t", candidate_hash="h", format="c2cuda", verdict=verdict)
    turns = [Turn(prompt_ids=[1, 2], response_ids=[5, 6, 7], logprobs=[0.0] * 3),
             Turn(prompt_ids=[1, 2, 5, 6, 7, 9], response_ids=[8], logprobs=[0.0]),
             Turn(prompt_ids=[1, 2, 5, 6, 7, 9, 8, 9], response_ids=[], logprobs=[])]
    ep = EpisodeOutcome(Trajectory(task_id="t", episode_id="e", turns=turns),
                        [JudgedTurn(t, None, result(v)) for t, v in zip(turns, ["correct", "incorrect", "correct"])])
    seqs = rejection_sequences([ep], ["correct"])
    assert [(s.input_ids, s.prompt_len, s.key) for s in seqs] == [([1, 2, 5, 6, 7], 2, ("e", 0))]  # empty turn 2 skipped
    assert [s.key for s in rejection_sequences([ep], ["correct", "incorrect"])] == [("e", 0), ("e", 1)]


def test_entry_first_answers_compile_pass_the_gate_and_parse(compile_cfg):
    """The entry moved up (sft.entry_first) on implementations of every c2cuda family: same
    compiled library interface, nothing the gate rejects, and the name comes before any kernel."""
    from pipeline.dataset.checks import sample_tasks
    from pipeline.tasks.generate import cached_tasks
    from pipeline.evaluation.build.compile import Compiler
    from pipeline.evaluation.gate import check_candidate
    from pipeline.core.records import Candidate
    from pipeline.sft import entry_first
    tasks = sample_tasks([t for t in cached_tasks() if t.kind == "c2cuda"], per_group=1)
    codes, entries = [], []
    for k, task in enumerate(tasks):
        impl = task.implementations[k % len(task.implementations)]
        moved = entry_first(task, impl.code)
        assert moved != impl.code and moved.index(task.function) < moved.index("__global__"), task.id
        lines = moved.splitlines()
        declaration = next(ln for ln in lines if ln.startswith("static void run(") and ln.endswith(");"))
        lines.remove(declaration)  # the only line added; every other line kept, only the order changed
        nonblank = lambda ls: sorted(ln for ln in ls if ln.strip())  # noqa: E731
        assert nonblank(lines) == nonblank(impl.code.splitlines()), task.id
        errors = [f.message for f in check_candidate(Candidate(task_id=task.id, code=moved, format="c2cuda"), task)
                  if f.severity == "error"]
        assert not errors, (task.id, errors)
        assert extract_code(answer_text(moved), entry_point(task)).code is not None
        codes.append(moved)
        entries.append(task.function)
    assert Compiler(compile_cfg).compile_cuda_batch(codes, entries) is not None  # every one builds
    odd = tasks[0].model_copy(update={"function": "not_there"})
    assert entry_first(odd, tasks[0].implementations[0].code) == tasks[0].implementations[0].code
