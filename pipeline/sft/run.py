"""One SFT run from its config: tasks, pairs or rejection rounds, training, checkpoint, held-out check,
sft_summary.json (the package docstring, pipeline/sft/__init__.py, describes it)."""
from __future__ import annotations

import json
import time
from pathlib import Path

from pipeline.core.config import RunConfig
from pipeline.sft.heldout import heldout_check
from pipeline.sft.examples import measured_times, supervised_pairs, supervised_sequences
from pipeline.sft.rejection import rejection_rounds
from pipeline.sft.training import SFTError, make_learner, train, training_deadline
from pipeline.tasks import select_tasks
from pipeline.rl.tracking import weights_fingerprint


def run_sft(cfg: RunConfig, open_cluster=None) -> dict:
    """The whole run (module docstring); returns a summary that is also written to sft_summary.json.
    `open_cluster(cfg)` gives the Ray pools that rejection rounds and the held-out check evaluate on
    (pipeline/cli.py passes it; supervised SFT without the check needs none)."""
    from pipeline.rollout.conversation import ChatFormat
    from pipeline.rollout.tiny_model import load_tokenizer, padding_id, resolve_model_path

    out = Path(cfg.sft.output_dir) if cfg.sft.output_dir else Path(cfg.run.output_dir) / cfg.run.name / "sft"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    tasks = select_tasks(cfg.tasks, cfg.data.split_seed)
    if not tasks:
        raise SFTError(f"tasks.source '{cfg.tasks.source}' holds no tasks of kinds {cfg.tasks.kinds}; point it at "
                       "the training tasks")
    heldout = []
    if cfg.sft.heldout_source:  # checked before training, so a bad source fails now rather than after it
        heldout = select_tasks(cfg.tasks, cfg.data.split_seed, source=cfg.sft.heldout_source)
        if not heldout:
            raise SFTError(f"sft.heldout_source '{cfg.sft.heldout_source}' holds no tasks of kinds {cfg.tasks.kinds}; "
                           "point it at held-out tasks or set sft.heldout_source='' to skip the check")
    model_path = resolve_model_path(cfg.model)
    tokenizer = load_tokenizer(model_path)
    chat = ChatFormat(tokenizer)
    pad_id = padding_id(tokenizer)
    summary: dict = {"mode": cfg.sft.mode, "tasks": len(tasks), "task_source": cfg.tasks.source,
                     "start_model": str(model_path)}
    learner = make_learner(cfg, model_path, tokenizer)
    summary["parameters"] = learner.info["parameters"]
    summary["precision"] = learner.info["precision"]
    history: list[dict] = []
    with open(out / "sft_log.jsonl", "w") as log_file:
        if cfg.sft.mode == "supervised":
            measured = measured_times({t.id for t in tasks}) if cfg.sft.keep_fastest_per_task else {}
            pairs, stats = supervised_pairs(tasks, cfg.sft, cfg.run.seed, measured)
            seqs, too_long, drill_count = supervised_sequences(pairs, chat, cfg)
            if cfg.sft.name_drills_per_pair:
                stats["name_drills"] = drill_count
            summary.update(stats, too_long=too_long, sequences=len(seqs), tokens_per_epoch=sum(map(len, seqs)))
            print(f"sft: {len(seqs)} sequences ({summary['tokens_per_epoch']} tokens) from {len(tasks)} tasks; "
                  f"{too_long} longer than {cfg.model.max_model_len_tokens} tokens dropped; {stats}")
            if not seqs:
                raise SFTError("no training pairs: the tasks have no implementations in the policy's format, or every "
                               "pair is longer than model.max_model_len_tokens; raise it or use other tasks")
            summary["prepare_s"] = round(time.monotonic() - t0, 1)
            t0, deadline = time.monotonic(), training_deadline(cfg)  # the budget counts training only
            history += train(learner, seqs, cfg, log_file, deadline, pad_id, cfg.run.seed)
        else:
            summary["prepare_s"] = round(time.monotonic() - t0, 1)
            t0, deadline = time.monotonic(), training_deadline(cfg)
            history += rejection_rounds(cfg, learner, tasks, model_path, out, log_file, deadline, pad_id, summary,
                                        open_cluster(cfg))
    summary.update(steps=len(history), train_s=round(time.monotonic() - t0, 1),
                   first_loss=history[0]["loss"] if history else None,
                   last_loss=history[-1]["loss"] if history else None,
                   tokens_trained=sum(m["policy_tokens"] for m in history))
    learner.save_checkpoint(out, run_state={"sft": summary})
    summary["checkpoint"] = str(out / "hf")
    summary["weights_sha256"] = weights_fingerprint(out / "hf")
    print(f"sft: {summary['steps']} steps in {summary['train_s']} s, loss {summary['first_loss']} -> "
          f"{summary['last_loss']}; checkpoint (model.path) {summary['checkpoint']}")
    if heldout:
        summary["heldout"] = heldout_check(cfg, heldout, Path(summary["checkpoint"]), out, open_cluster)
    (out / "sft_summary.json").write_text(json.dumps(summary, indent=2))
    return summary
