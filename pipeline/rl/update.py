"""One RL step's update on one learner rank, the policy's construction (full or LoRA), and its export.

In: this rank's `TrainSequence`s (pipeline/rl/batch.py; the driver splits a step's turns across
ranks with `split_across_ranks`), a `Learner` (pipeline/rl/learner.py), optionally the frozen
reference `Learner`. Out: step metrics prefixed `learner/`, and the weights under Hugging Face
names for the generators. No Ray; actors/learners.py calls these on every rank.

An update is `rl.ppo_epochs` passes, each split into `rl.minibatches_per_epoch` optimizer steps;
every rank takes the same number of optimizer steps (a rank with no turns in a minibatch runs
empty passes), as the collective calls require.

LoRA (`learner.lora_rank > 0`, needs `peft`): adapters on every linear layer of the decoder, the
base weights frozen. Generators hold plain models, so the export merges each adapter into its
layer (W + alpha / r * B A) under the base model's names; the optimizer and DeepSpeed checkpoint
hold only the adapters.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from pipeline.core.config import LearnerSection
from pipeline.rl.batch import TrainSequence, make_microbatches, split_minibatches

AVERAGED = ("loss", "pg_loss", "kl", "clip_frac", "approx_kl", "ratio_mean", "grad_norm", "entropy", "lr")
PEFT_PREFIX = "base_model.model."
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def build_policy(model_path: str | Path, cfg: LearnerSection, lora: bool = True) -> Callable[[], torch.nn.Module]:
    """A function building the policy from `model_path` in the learner's precision, with LoRA adapters
    when `cfg.lora_rank > 0` and `lora` (the frozen reference never has them)."""
    from pipeline.rl.learner import resolve_bf16

    def build() -> torch.nn.Module:
        from transformers import AutoModelForCausalLM

        dtype = torch.bfloat16 if resolve_bf16(cfg.precision) else torch.float32
        model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=dtype)
        if lora and cfg.lora_rank > 0:
            try:
                from peft import LoraConfig, get_peft_model
            except ImportError as e:
                raise RuntimeError(f"learner.lora_rank = {cfg.lora_rank} needs peft ({e}); pip install peft or set "
                                   "learner.lora_rank=0") from e
            model = get_peft_model(model, LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha, lora_dropout=0.0,
                                                     target_modules=LORA_TARGETS, bias="none"))
        return model
    return build


def train_epochs(learner, sequences: Sequence[TrainSequence], pad_id: int, reference=None) -> dict[str, float]:
    """This rank's part of one step's update (collective). Metrics are reduced over ranks by the learner:
    token-weighted means over the optimizer steps, `ratio_mean_first` and `approx_kl_first` from the
    first step (before any update: how far the generator's logprobs are from the learner's)."""
    rl, cfg = learner.rl, learner.cfg
    t0 = time.perf_counter()
    history = []
    for _ in range(rl.ppo_epochs):
        parts = split_minibatches(list(sequences), rl.minibatches_per_epoch) if sequences else []
        parts += [[] for _ in range(rl.minibatches_per_epoch - len(parts))]
        for part in parts:
            microbatches = make_microbatches(part, cfg.max_tokens_per_microbatch, pad_id)
            if reference is not None:
                for mb, lp in zip(microbatches, reference.logprobs(microbatches)):
                    mb.ref_logprobs = lp
            history.append(learner.train_step(microbatches))
    weights = [max(m["policy_tokens"], 1.0) for m in history]
    out = {f"learner/{k}": sum(m[k] * w for m, w in zip(history, weights)) / sum(weights)
           for k in AVERAGED if k in history[0]}
    out.update({"learner/ratio_mean_first": history[0]["ratio_mean"],
                "learner/approx_kl_first": history[0]["approx_kl"],
                "learner/policy_tokens": history[0]["policy_tokens"], "learner/sequences": history[0]["sequences"],
                "learner/optimizer_steps": float(len(history)), "learner/step": float(learner.step),
                "learner/tokens_per_s": sum(m["policy_tokens"] for m in history) / max(time.perf_counter() - t0, 1e-9),
                "learner/update_s": time.perf_counter() - t0})
    return out


def merge_lora(named: dict[str, torch.Tensor], scale: float) -> list[tuple[str, torch.Tensor]]:
    """peft parameter names and tensors -> base-model names with each adapter merged into its weight."""
    out = []
    for name, tensor in named.items():
        if ".lora_A." in name or ".lora_B." in name:
            continue
        base = name.removeprefix(PEFT_PREFIX)
        if base.endswith(".base_layer.weight"):
            stem = name[:-len(".base_layer.weight")]
            a, b = named[f"{stem}.lora_A.default.weight"], named[f"{stem}.lora_B.default.weight"]
            tensor = (tensor.float() + scale * (b.float() @ a.float())).to(tensor.dtype)
            base = base.replace(".base_layer.weight", ".weight")
        elif ".base_layer." in base:
            base = base.replace(".base_layer.", ".")
        out.append((base, tensor))
    return out


def export_for_generators(learner) -> list[tuple[str, torch.Tensor]]:
    """Every weight as (Hugging Face name, CPU tensor) on rank 0, [] elsewhere (collective: gathered bucket
    by bucket under ZeRO-3); LoRA adapters merged."""
    named = learner.state_dict_for_export()
    if learner.cfg.lora_rank > 0:
        return merge_lora(named, learner.cfg.lora_alpha / learner.cfg.lora_rank)
    return list(named.items())
