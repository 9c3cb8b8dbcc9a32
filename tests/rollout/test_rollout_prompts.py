"""Prompts for both task kinds, the tiny model on disk, the chat template pieces and the trimming rule."""
import json

import pytest

from pipeline.core.config import ModelSection
from pipeline.evaluation import light_abi
from pipeline.rollout.conversation import ChatFormat, ChatTemplateError, Context
from pipeline.rollout.prompts import SYSTEM_PROMPT, c_signature, candidate_format, opening_messages
from pipeline.rollout.tiny_model import ModelPathError, load_tokenizer, resolve_model_path


def test_every_builtin_task_has_a_prompt_stating_the_answer_format(builtin_tasks):
    for task in builtin_tasks.values():
        system, user = opening_messages(task)
        assert system == SYSTEM_PROMPT and "```cuda" in system
        assert task.reference.strip().splitlines()[0] in user and "```cuda block" in user
        if task.kind == "c2cuda":
            assert candidate_format(task) == "c2cuda" and c_signature(task) in user
            assert all(f"- {a.name} ({a.ctype})" in user for a in task.args)
        else:
            assert candidate_format(task) == "light" and light_abi.SIGNATURE in user
            assert "inputs[0]: shape" in user and "outputs[0]: shape" in user and "read every extent" in user


def test_prompt_details(builtin_tasks):
    signature = 'extern "C" void saxpy(int n, float a, const float* x, float* y)'
    assert c_signature(builtin_tasks["c2cuda/saxpy"]) == signature
    _, user = opening_messages(builtin_tasks["torch2cuda/linear"])
    small = "batch_size=7, in_features=65, out_features=33"  # the first check configuration
    assert small in user
    assert "inputs[1]: shape (33, 65)" in user and "fc.weight" in user and "outputs[0]: shape (7, 33)" in user


def test_tiny_model_on_disk(model_cfg, model_path):
    config = json.loads((model_path / "config.json").read_text())
    assert config["hidden_size"] // config["num_attention_heads"] >= 64  # vLLM's CPU attention needs it
    tok = load_tokenizer(model_path)
    assert config["vocab_size"] == len(tok) and tok.eos_token == "<|im_end|>"
    assert resolve_model_path(model_cfg) == model_path  # built once, then reused
    text = '__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }'
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text  # byte-level: every text round-trips
    assert len(tok.encode(text, add_special_tokens=False)) < len(text) / 2  # merges learned on the project's code


def test_model_path_errors(tmp_path):
    with pytest.raises(ModelPathError, match="is not a directory"):
        resolve_model_path(ModelSection(path=str(tmp_path / "missing")))
    with pytest.raises(ModelPathError, match="has no config.json"):
        resolve_model_path(ModelSection(path=str(tmp_path)))


def test_chat_format_glue_follows_the_template(model_path):
    tok = load_tokenizer(model_path)
    chat = ChatFormat(tok)
    opening = chat.opening_ids("sys", "task")
    assert tok.decode(opening) == ("<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\ntask<|im_end|>\n"
                                   "<|im_start|>assistant\n")
    eos = tok.eos_token_id
    stopped = chat.glue_ids("fix it", [5, eos])  # the policy closed its message itself
    cut = chat.glue_ids("fix it", [5, 6])        # cut at the token limit: the glue closes it
    assert cut == [eos] + stopped
    assert tok.decode(stopped) == "\n<|im_start|>user\nfix it<|im_end|>\n<|im_start|>assistant\n"
    # the pieces reproduce what the template renders for the whole conversation
    whole = tok.apply_chat_template([{"role": "system", "content": "sys"}, {"role": "user", "content": "task"},
                                     {"role": "assistant", "content": "ANSWER"}, {"role": "user", "content": "fix it"}],
                                    tokenize=False, add_generation_prompt=True)
    assert tok.decode(opening) + "ANSWER" + tok.decode(cut) == whole


def test_chat_template_that_rewrites_history_is_refused(model_path):
    tok = load_tokenizer(model_path)
    tok.chat_template = ("{% for m in messages %}{% if m['role'] != 'assistant' or loop.last %}"
                         "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endif %}{% endfor %}"
                         "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    with pytest.raises(ChatTemplateError, match="appended one after another"):
        ChatFormat(tok)


def test_context_trimming_rule():
    ctx = Context([1] * 10)
    assert ctx.prompt(100, 20, None) == ([1] * 10, [])
    assert ctx.prompt(25, 20, None) is None  # not even the opening fits
    for k in range(3):
        ctx.add([100 + k] * 10, [200 + k] * 5)  # each earlier turn: 15 tokens
    ids, kept = ctx.prompt(100, 20, None)   # room for 70: all three (45)
    assert kept == [0, 1, 2] and len(ids) == 55
    ids, kept = ctx.prompt(60, 20, None)    # room for 30: the two newest, whole
    assert kept == [1, 2] and ids == [1] * 10 + [101] * 10 + [201] * 5 + [102] * 10 + [202] * 5
    assert ctx.prompt(100, 20, 1)[1] == [2]  # history_turns_kept
    assert ctx.prompt(40, 20, None) is None  # the newest turn does not fit: the episode must stop


def test_batched_encoding_equals_one_at_a_time(model_path, builtin_tasks):
    """SFT encodes its pairs in batches (encode_many, one prompt per task); the ids are the same."""
    from pipeline.rollout.conversation import ChatFormat
    from pipeline.sft import encode_pairs
    chat = ChatFormat(load_tokenizer(model_path))
    pairs = [(t, f"```cuda\n{i.code}\n```") for t in list(builtin_tasks.values())[:6] for i in t.implementations[:2]]
    seqs, too_long = encode_pairs(pairs, chat, 100_000)
    assert too_long == 0 and len(seqs) == len(pairs)
    for seq, (task, text) in zip(seqs, pairs):
        prompt = chat.opening_ids(*opening_messages(task))
        assert seq.prompt_len == len(prompt) and seq.input_ids == prompt + chat.encode(text) + [chat.eos_id]
    assert chat.encode_many([]) == [] and chat.encode_many(["a b", ""]) == [chat.encode("a b"), []]
