"""The learner core: a Hugging Face causal LM in a DeepSpeed ZeRO engine (plain Python, no Ray).

In: the `learner` and `rl` config sections, a function that builds the model (from_pretrained or
from_config; called after the ZeRO-3 construction context is in place), micro-batches from
pipeline/rl/batch.py. Out: metrics per optimizer step, per-token logprobs, the weights in
Hugging Face names (for weight sync and export), checkpoints. Touches: the checkpoint
directories it is given.

Every rank of the process group (pipeline/rl/distributed.py) builds one `Learner` and makes the
same calls in the same order: forward passes, exports and checkpoints are collective under
ZeRO-3. Ranks may hold different numbers of micro-batches; `train_step` and `logprobs` pad the
short ones with empty passes. Gradients are accumulated over a step's micro-batches and applied
in one optimizer step; losses are normalised by the step's token (or sequence) count over all
ranks, so splitting the same data differently gives the same update.

Precision: `learner.precision` "auto" resolves once, here, to bf16 with a GPU and fp32 on CPU
(`Learner.info` reports it). The optimizer is torch's AdamW (`torch_adam`), so nothing is
compiled at start-up. LoRA (peft) is set up by the model builder, pipeline/rl/update.py.
Under ZeRO-3, partitioned model construction needs `accelerate` (see `Learner.__init__`).
"""
from __future__ import annotations

import importlib.util
import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Literal

import torch

from pipeline.core.config import LearnerSection, RLSection
from pipeline.rl.batch import MicroBatch
from pipeline.rl.distributed import all_reduce, barrier, rank_and_world
from pipeline.rl.loss import aggregation_denominator, ppo_loss, sft_loss, token_entropy, token_logprobs

HF_DIR, DS_DIR, DS_TAG, RUN_STATE = "hf", "deepspeed", "state", "run_state.json"


def resolve_bf16(precision: str) -> bool:
    """Whether to train in bf16: 'auto' means bf16 exactly when a GPU is present."""
    if precision == "auto":
        return torch.cuda.is_available()
    return precision == "bf16"


def deepspeed_config(cfg: LearnerSection, bf16: bool, trainable: bool = True) -> dict:
    """The DeepSpeed config dict for `cfg`. One micro-batch per engine call and no engine-side
    accumulation: train_step marks the accumulation boundary itself. Without training (a frozen
    reference), stage 3 still shards the weights and stage 2 becomes whole replicas."""
    ds: dict = {
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": cfg.max_grad_norm,
        "bf16": {"enabled": bf16},
        "zero_optimization": {"stage": cfg.zero_stage, "overlap_comm": False, "contiguous_gradients": True,
                              "reduce_bucket_size": cfg.sync_bucket_bytes // 4,
                              "stage3_gather_16bit_weights_on_model_save": False},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }
    if not trainable and cfg.zero_stage == 2:
        # A frozen model has no gradients or optimizer state to shard: stage 2 means plain replicas.
        ds["zero_optimization"]["stage"] = 0
    if trainable:
        ds["optimizer"] = {"type": "AdamW", "params": {"lr": cfg.lr, "betas": list(cfg.adam_betas), "eps": 1e-8,
                                                        "weight_decay": cfg.weight_decay, "torch_adam": True}}
    return ds


def warmup_lr(step: int, lr: float, warmup_steps: int) -> float:
    """Learning rate of optimizer step `step` (1-based): lr * step / warmup_steps, then lr.
    (DeepSpeed's WarmupLR gives its first two steps a rate of 0.)"""
    if warmup_steps <= 0:
        return lr
    return lr * min(1.0, step / warmup_steps)


def plan_buckets(sizes_bytes: Sequence[int], bucket_bytes: int) -> list[list[int]]:
    """Consecutive index groups of at most `bucket_bytes` (a larger item is a bucket of its own)."""
    buckets: list[list[int]] = []
    current: list[int] = []
    total = 0
    for i, size in enumerate(sizes_bytes):
        if current and total + size > bucket_bytes:
            buckets.append(current)
            current, total = [], 0
        current.append(i)
        total += size
    if current:
        buckets.append(current)
    return buckets


def _param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Weight decay on matrices only, never on biases and norm scales."""
    decay, plain = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.dim() >= 2 else plain).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": plain, "weight_decay": 0.0}]


class Learner:
    """One rank of the policy (or, with `trainable=False`, of the frozen reference model)."""

    def __init__(self, cfg: LearnerSection, rl: RLSection, build_model: Callable[[], torch.nn.Module], *,
                 tokenizer=None, temperature: float = 1.0, trainable: bool = True, seed: int = 0,
                 top_p: float = 1.0):
        """`build_model` returns a transformers causal LM (e.g. `lambda: AutoModelForCausalLM.
        from_pretrained(path, dtype=torch.bfloat16)`). Under ZeRO-3 with `accelerate` installed it
        runs inside transformers' partitioned construction (zero.Init), so a large model never
        exists whole on one rank; without accelerate (as in this environment) every rank builds the
        whole model in host memory and DeepSpeed partitions it (`info["partitioned_construction"]`
        says which). `temperature` and `top_p` are the generators' sampling settings: logprobs are
        those of the distribution sampled from (loss.token_logprobs), as the generators report them."""
        import deepspeed

        self.cfg, self.rl, self.tokenizer = cfg, rl, tokenizer
        self.temperature, self.top_p, self.trainable = temperature, top_p, trainable
        self.rank, self.world_size = rank_and_world()
        self.bf16 = resolve_bf16(cfg.precision)
        ds_config = deepspeed_config(cfg, self.bf16, trainable)
        torch.manual_seed(seed)
        self._hf_ds_config = None
        if cfg.zero_stage == 3 and importlib.util.find_spec("accelerate") is not None:
            from transformers.integrations import HfDeepSpeedConfig
            # Kept alive for the learner's lifetime: transformers reads it through a weak reference.
            self._hf_ds_config = HfDeepSpeedConfig(ds_config)
        model = build_model()
        model.config.use_cache = False
        if cfg.gradient_checkpointing and trainable:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if trainable:
            self.engine, *_ = deepspeed.initialize(model=model, config=ds_config,
                                                   model_parameters=_param_groups(model, cfg.weight_decay))
        else:
            model.requires_grad_(False)
            self.engine, *_ = deepspeed.initialize(model=model, config=ds_config)
        self.device = self.engine.device
        self.info = {"precision": "bf16" if self.bf16 else "fp32", "zero_stage": cfg.zero_stage,
                     "world_size": self.world_size, "trainable": trainable,
                     "partitioned_construction": self._hf_ds_config is not None,
                     "parameters": sum(getattr(p, "ds_numel", p.numel()) for p in self.engine.module.parameters())}

    @property
    def step(self) -> int:
        """Optimizer steps taken (restored by load_checkpoint)."""
        return int(self.engine.global_steps)

    # ---- forward passes -------------------------------------------------------------------

    def _dummy_batch(self) -> MicroBatch:
        """An empty pass (two pad tokens, nothing masked) for ranks with fewer micro-batches."""
        z = torch.zeros((1, 2))
        return MicroBatch(torch.zeros((1, 2), dtype=torch.int64), torch.ones((1, 2), dtype=torch.int64),
                          z, z, z, keys=[])

    def _forward(self, mb: MicroBatch, entropy: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """[B, L] logprobs (differentiable when training) and, if asked, [B, L] entropies."""
        ids = mb.input_ids.to(self.device)
        logits = self.engine(input_ids=ids, attention_mask=mb.attention_mask.to(self.device), use_cache=False).logits
        lp = token_logprobs(logits, ids, self.temperature, top_p=self.top_p)
        ent = token_entropy(logits, self.temperature) if entropy else None
        return lp, ent

    def _padded(self, microbatches: Sequence[MicroBatch]) -> list[tuple[MicroBatch, bool]]:
        """The rank's micro-batches plus empty passes up to the most any rank holds: (batch, real)."""
        most = int(all_reduce([len(microbatches)], "max")[0])
        return [(microbatches[i], True) if i < len(microbatches) else (self._dummy_batch(), False)
                for i in range(most)]

    @torch.no_grad()
    def logprobs(self, microbatches: Sequence[MicroBatch]) -> list[torch.Tensor]:
        """[B, L] float32 CPU logprobs of each micro-batch's tokens (column j: token j given < j).

        Collective: every rank calls it (with its own micro-batches, possibly none)."""
        self.engine.eval()
        out = []
        for mb, real in self._padded(microbatches):
            lp, _ = self._forward(mb, entropy=False)
            if real:
                out.append(lp.float().cpu())
        return out

    # ---- training ---------------------------------------------------------------------------

    def train_step(self, microbatches: Sequence[MicroBatch], loss: Literal["ppo", "sft"] = "ppo") -> dict[str, float]:
        """Accumulate gradients over this rank's micro-batches and take one optimizer step.

        Collective. Returns metrics over all ranks: loss (the step's objective), token means
        pg_loss, kl, clip_frac, approx_kl, ratio_mean (ppo) or nll (sft), entropy (if
        learner.log_entropy), grad_norm (before clipping), lr, policy_tokens, sequences,
        microbatches (passes per rank), padded_tokens, step_s, tokens_per_s, step.
        """
        if not self.trainable:
            raise ValueError("train_step called on a learner built with trainable=False (a reference model)")
        if loss not in ("ppo", "sft"):
            raise ValueError(f"loss {loss!r} is not one of 'ppo', 'sft'")
        use_kl = loss == "ppo" and self.rl.kl_coef > 0
        if use_kl and any(mb.ref_logprobs is None for mb in microbatches):
            raise ValueError("rl.kl_coef > 0 but a micro-batch has no ref_logprobs; fill them from the reference "
                             "learner's logprobs() first, or set rl.kl_coef=0")
        start = time.perf_counter()
        mode = self.rl.token_aggregation
        local = [aggregation_denominator(mode, [mb.response_mask for mb in microbatches]),
                 sum(mb.padded_tokens for mb in microbatches)]
        total_denominator, padded_total = all_reduce(local)
        # DeepSpeed averages gradients over ranks; dividing by (global count / ranks) on each rank
        # makes the average equal the loss normalised over the whole step.
        denominator = max(total_denominator, 1.0) / self.world_size
        self.engine.train()
        padded = self._padded(microbatches)
        stat_keys = ("pg_loss", "kl", "clip_frac", "approx_kl", "ratio_mean") if loss == "ppo" else ("nll",)
        sums = dict.fromkeys(("loss", *stat_keys, "entropy", "policy_tokens", "sequences"), 0.0)
        for i, (mb, real) in enumerate(padded):
            self.engine.set_gradient_accumulation_boundary(i == len(padded) - 1)
            lp, ent = self._forward(mb, entropy=self.cfg.log_entropy and real)
            mask = mb.response_mask.to(self.device)
            on = (mask > 0).float()  # the response tokens (the mask may hold SFT loss weights)
            if loss == "ppo":
                ref = mb.ref_logprobs.to(self.device) if use_kl else None
                value, stats = ppo_loss(lp, mb.old_logprobs.to(self.device), mb.advantages.to(self.device), mask,
                                        mode, self.rl.clip_eps, self.rl.clip_eps_high, ref, self.rl.kl_coef,
                                        denominator)
            else:
                value = sft_loss(lp, mask, mode, denominator)  # a weighted mean where the mask holds weights
                n = float(on.sum())
                stats = {"nll": float(-(lp.detach() * on).sum()) / max(n, 1.0), "tokens": n}
            self.engine.backward(value)
            sums["loss"] += float(value.detach())
            if real:  # statistics are token means: weight each micro-batch's by its tokens
                for k in stat_keys:
                    sums[k] += stats[k] * stats["tokens"]
                if ent is not None:
                    sums["entropy"] += float((ent * on).sum())
                sums["policy_tokens"] += stats["tokens"]
                sums["sequences"] += float((mask.sum(-1) > 0).sum())
        lr = warmup_lr(self.step + 1, self.cfg.lr, self.cfg.lr_warmup_steps)
        for group in self.engine.optimizer.param_groups:
            group["lr"] = lr
        self.engine.step()
        totals = dict(zip(sums, all_reduce(list(sums.values()))))
        tokens = max(totals["policy_tokens"], 1.0)
        metrics = {k: totals[k] / tokens for k in stat_keys}
        if self.cfg.log_entropy:
            metrics["entropy"] = totals["entropy"] / tokens
        grad_norm = self.engine.get_global_grad_norm()
        elapsed = time.perf_counter() - start
        metrics.update({
            "loss": totals["loss"] / self.world_size,
            "grad_norm": float(grad_norm) if grad_norm is not None else float("nan"),
            "lr": lr,
            "policy_tokens": totals["policy_tokens"], "sequences": totals["sequences"],
            "microbatches": float(len(padded)), "padded_tokens": padded_total,
            "step_s": elapsed, "tokens_per_s": totals["policy_tokens"] / max(elapsed, 1e-9), "step": float(self.step),
        })
        return metrics

    # ---- weights out ------------------------------------------------------------------------

    def export_buckets(self, all_ranks: bool = False) -> Iterator[list[tuple[str, torch.Tensor]]]:
        """The weights as lists of (Hugging Face name, full tensor), about learner.sync_bucket_bytes each.

        Collective under ZeRO-3 (each bucket is gathered with GatheredParameters): every rank must
        run the iterator to the end. Only rank 0 receives buckets unless `all_ranks`. A tensor is
        valid only until the next bucket is requested (its gathered storage is then released):
        copy what you keep. Tied weights appear once, under the name that owns them.
        """
        import deepspeed

        named = list(self.engine.module.named_parameters())
        sizes = [getattr(p, "ds_numel", p.numel()) * p.element_size() for _, p in named]
        for bucket in plan_buckets(sizes, self.cfg.sync_bucket_bytes):
            params = [named[i][1] for i in bucket]
            gather = deepspeed.zero.GatheredParameters(params) if self.cfg.zero_stage == 3 else nullcontext()
            with gather:
                if self.rank == 0 or all_ranks:
                    yield [(named[i][0], named[i][1].data) for i in bucket]

    def state_dict_for_export(self) -> dict[str, torch.Tensor]:
        """Every weight, gathered and copied to CPU, on rank 0 ({} elsewhere). Collective."""
        return {name: t.detach().to("cpu", copy=True) for bucket in self.export_buckets() for name, t in bucket}

    # ---- checkpoints ------------------------------------------------------------------------

    def save_checkpoint(self, directory: str | Path, run_state: dict | None = None) -> Path:
        """Write `directory`/hf (Hugging Face model + tokenizer), `directory`/deepspeed (weights
        and optimizer state of every rank) and `directory`/run_state.json (the
        driver's `run_state` plus `learner_step`). Collective; returns the directory."""
        directory = Path(directory)
        weights = self.state_dict_for_export()
        if self.rank == 0:
            hf = directory / HF_DIR
            hf.mkdir(parents=True, exist_ok=True)
            self.engine.module.save_pretrained(hf, state_dict=weights)
            if self.tokenizer is not None:
                self.tokenizer.save_pretrained(hf)
        barrier()
        self.engine.save_checkpoint(str(directory / DS_DIR), tag=DS_TAG)
        if self.rank == 0:
            state = {**(run_state or {}), "learner_step": self.step}
            (directory / RUN_STATE).write_text(json.dumps(state, indent=2, sort_keys=True))
        barrier()
        return directory

    def load_checkpoint(self, directory: str | Path) -> dict:
        """Restore weights, optimizer state and the step count (hence the learning rate) from a directory
        written by `save_checkpoint`; returns its run state. Collective."""
        directory = Path(directory)
        if not (directory / DS_DIR / DS_TAG).is_dir() or not (directory / RUN_STATE).is_file():
            raise FileNotFoundError(f"'{directory}' is not a learner checkpoint (it needs {DS_DIR}/{DS_TAG}/ and "
                                    f"{RUN_STATE}); pass a directory written by save_checkpoint")
        path, _ = self.engine.load_checkpoint(str(directory / DS_DIR), tag=DS_TAG, load_optimizer_states=True,
                                              load_lr_scheduler_states=False)
        if path is None:
            raise FileNotFoundError(f"DeepSpeed found no checkpoint under '{directory / DS_DIR}'")
        return json.loads((directory / RUN_STATE).read_text())
