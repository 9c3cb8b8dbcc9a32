"""SFT's training loop: one learner rank built as the RL learner builds its policy, shuffled epochs of
cross-entropy steps on the response tokens, until `sft.epochs`, `sft.max_steps` or `sft.max_train_s`."""
from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

from pipeline.core.config import RunConfig
from pipeline.core.errors import UserError
from pipeline.rl.batch import TrainSequence, make_microbatches


class SFTError(UserError, ValueError):
    """An SFT run that cannot start; the message names the problem and the fix."""


def train(learner, seqs: list[TrainSequence], cfg: RunConfig, log_file, deadline: float | None,
          pad_id: int, seed: int) -> list[dict]:
    """`sft.epochs` shuffled passes of `sft.sequences_per_step` sequences per optimizer step, until
    `sft.max_steps` steps or the deadline; one JSON line per step into `log_file`. Returns the step metrics."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    rng = random.Random(seed)
    per_step = cfg.sft.sequences_per_step
    steps_per_epoch = math.ceil(len(seqs) / per_step)
    history = []
    with Progress(TextColumn("sft"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[status]}")) as bar:
        total = steps_per_epoch * cfg.sft.epochs
        progress = bar.add_task("sft", total=min(total, cfg.sft.max_steps or total), status="")
        for epoch in range(cfg.sft.epochs):
            order = list(seqs)
            rng.shuffle(order)
            for start in range(0, len(order), per_step):
                if (deadline is not None and time.monotonic() > deadline
                        or cfg.sft.max_steps is not None and len(history) >= cfg.sft.max_steps):
                    return history
                mbs = make_microbatches(order[start:start + per_step], cfg.learner.max_tokens_per_microbatch, pad_id)
                metrics = learner.train_step(mbs, loss="sft")
                metrics["epoch"] = epoch
                history.append(metrics)
                log_file.write(json.dumps(metrics) + "\n")
                log_file.flush()
                bar.update(progress, advance=1, status=f"loss {metrics['loss']:.3f}")
                if len(history) % cfg.sft.log_every_steps == 0:
                    bar.console.log(f"step {len(history)} epoch {epoch} loss {metrics['loss']:.4f} "
                                    f"{metrics['tokens_per_s']:.0f} tok/s")
    return history


def make_learner(cfg: RunConfig, model_path: Path, tokenizer):
    """One learner rank in this process (a world of one: nccl on a GPU, gloo on CPU), built as the RL
    learner builds its policy (`build_policy`, in the learner's precision; full weights, since the SFT
    checkpoint is a plain model that `model.path` names)."""
    import torch

    from pipeline.rl.distributed import free_port, init_process_group
    from pipeline.rl.learner import Learner
    from pipeline.rl.update import build_policy

    if cfg.learner.ranks != 1:
        raise SFTError(f"learner.ranks = {cfg.learner.ranks}: cudaperf sft runs one learner rank; set learner.ranks=1")
    init_process_group(0, 1, free_port(), backend="nccl" if torch.cuda.is_available() else "gloo")
    return Learner(cfg.learner, cfg.rl, build_policy(model_path, cfg.learner, lora=False), tokenizer=tokenizer, temperature=1.0,
                   seed=cfg.run.seed)


def training_deadline(cfg: RunConfig) -> float | None:
    """When training stops (`sft.max_train_s` from now), or None to run every epoch."""
    return time.monotonic() + cfg.sft.max_train_s if cfg.sft.max_train_s else None
