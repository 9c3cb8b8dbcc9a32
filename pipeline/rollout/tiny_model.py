"""The policy model on disk: a tiny random model for CPU runs and tests, or any local Hugging Face causal LM.

In: the `model` config section. Out: a directory in Hugging Face format (config, weights,
tokenizer with a chat template) that both generator backends and the learner load by path.
Touches: `model.tiny_dir` (the tiny model is built once per corpus and size, then reused).

The tiny model is a randomly initialised Qwen2 (`tiny_hidden_size`, `tiny_layers`, `tiny_heads`;
head size at least 64, which vLLM's CPU attention needs) with a byte-level BPE tokenizer trained
on this project's own code (pipeline/**/*.py and the built-in task YAMLs, so CUDA, C and Python
all tokenize sensibly) and a ChatML chat template. It writes garbage, but every shape, token id
and logprob is real, which is what tests of the rollout and learner machinery need. No weights
are downloaded. 'tiny-sft' names the same model after a short supervised warm start on the
built-in tasks (`tiny_sft/README.md` says how it was made and how to rebuild it): it writes answers
of the tasks' shape, so the main job's candidates are gated and compiled from its first step.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from pipeline.core.assets import BUILTIN_DIR, PIPELINE_DIR, TINY_SFT_DIR
from pipeline.core.config import ModelSection
from pipeline.core.errors import UserError

SFT_TINY = "tiny-sft"  # the tiny model after `cudaperf sft --config configs/sft_local.yaml`, shipped here:
SFT_TINY_DIR = TINY_SFT_DIR  # the main job's policy (configs/local.yaml)
TINY_FORMAT_VERSION = "1"  # bump when the recipe below changes, so cached models are rebuilt
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# ChatML, as Qwen models use it: every message is <|im_start|>role\ncontent<|im_end|>\n, and the
# generation prompt opens an assistant message. The policy ends its turn with <|im_end|>.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


class ModelPathError(UserError, ValueError):
    """`model.path` does not name a usable model directory."""


def corpus_files() -> list[Path]:
    """The project's own code the tiny tokenizer is trained on, in a fixed order."""
    files = sorted(PIPELINE_DIR.rglob("*.py")) + sorted(BUILTIN_DIR.rglob("*.yaml"))
    return [f for f in files if "__pycache__" not in f.parts]


def tiny_model_key(cfg: ModelSection) -> str:
    """Hash of everything a tiny model is built from: recipe version, sizes, seed and the corpus."""
    h = hashlib.sha256()
    h.update(json.dumps([TINY_FORMAT_VERSION, cfg.tiny_hidden_size, cfg.tiny_layers, cfg.tiny_heads,
                         cfg.tiny_vocab_size, cfg.tiny_init_seed, cfg.max_model_len_tokens]).encode())
    for f in corpus_files():
        h.update(f.relative_to(PIPELINE_DIR).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def train_tokenizer(files: list[Path], vocab_size: int):
    """A byte-level BPE tokenizer (any text encodes) trained on `files`, with ChatML special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train([str(f) for f in files], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   chat_template=CHAT_TEMPLATE, model_max_length=1 << 20)


def build_tiny_model(cfg: ModelSection) -> Path:
    """Build (or reuse) the tiny model for `cfg` and return its directory."""
    root = Path(cfg.tiny_dir).expanduser()
    target = root / f"qwen2-h{cfg.tiny_hidden_size}-l{cfg.tiny_layers}-{tiny_model_key(cfg)}"
    if (target / "config.json").is_file():
        return target
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    root.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(corpus_files(), cfg.tiny_vocab_size)
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=cfg.tiny_hidden_size, intermediate_size=4 * cfg.tiny_hidden_size,
        num_hidden_layers=cfg.tiny_layers, num_attention_heads=cfg.tiny_heads, num_key_value_heads=cfg.tiny_heads,
        head_dim=cfg.tiny_hidden_size // cfg.tiny_heads, max_position_embeddings=cfg.max_model_len_tokens,
        tie_word_embeddings=False, bos_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, dtype="float32")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.tiny_init_seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    # Built beside the target and renamed into place, so concurrent builders (actors, test
    # processes) never see a half-written model: the first rename wins, the others discard theirs.
    scratch = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
    try:
        model.save_pretrained(scratch)
        tokenizer.save_pretrained(scratch)
        try:
            os.rename(scratch, target)
        except OSError:
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def resolve_model_path(cfg: ModelSection) -> Path:
    """The model directory `cfg.path` stands for: the built tiny model, the shipped warm-started one,
    or a checked local directory."""
    if cfg.path == "tiny":
        return build_tiny_model(cfg)
    if cfg.path == SFT_TINY:
        if not (SFT_TINY_DIR / "config.json").is_file():
            raise ModelPathError(f"model.path '{SFT_TINY}' needs the checkpoint shipped in {SFT_TINY_DIR}, which is "
                                 "missing; restore it from the repository or rebuild it as its README.md says")
        return SFT_TINY_DIR
    path = Path(cfg.path).expanduser()
    if not path.is_dir():
        raise ModelPathError(f"model.path '{cfg.path}' is not a directory; pass a local Hugging Face model "
                             "directory (downloaded beforehand) or 'tiny'")
    if not (path / "config.json").is_file():
        raise ModelPathError(f"model.path '{cfg.path}' has no config.json; pass the directory that "
                             "save_pretrained wrote (config.json, weights, tokenizer files)")
    return path


def load_tokenizer(path: str | Path):
    """The tokenizer saved with a model; it must carry a chat template, since every prompt uses one."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    if not tokenizer.chat_template:
        raise ModelPathError(f"the tokenizer in '{path}' has no chat template; use an instruction-tuned model "
                             "or add a chat_template to its tokenizer_config.json")
    if tokenizer.eos_token_id is None:
        raise ModelPathError(f"the tokenizer in '{path}' has no eos token; set eos_token in its "
                             "tokenizer_config.json to the token that ends an assistant turn")
    return tokenizer


def padding_id(tokenizer) -> int:
    """The id that pads a batch: the tokenizer's pad token, or its eos token when it has none."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
