"""SFT's rejection mode: sample the policy, evaluate on the cluster's pools, train on the turns whose
verdict is kept, as the policy sampled them."""
from __future__ import annotations

import time
from pathlib import Path

from pipeline.core.config import RunConfig
from pipeline.core.records import Task
from pipeline.rl.batch import TrainSequence
from pipeline.sft.training import train


def rejection_sequences(episodes, keep: list[str]) -> list[TrainSequence]:
    """The turns whose verdict is in `keep`, as the policy sampled them (its context, its tokens)."""
    seqs = []
    for ep in episodes:
        for t, judged in enumerate(ep.turns):
            turn, result = judged.turn, judged.result
            if result is not None and result.verdict in keep and turn.response_ids:
                seqs.append(TrainSequence(list(turn.prompt_ids) + list(turn.response_ids), len(turn.prompt_ids),
                                          [0.0] * len(turn.response_ids), 0.0, (ep.trajectory.episode_id, t)))
    return seqs


def rejection_rounds(cfg: RunConfig, learner, tasks: list[Task], model_path: Path, out: Path, log_file,
                     deadline: float | None, pad_id: int, summary: dict, cluster) -> list[dict]:
    """Sample, evaluate (on `cluster`'s pools), keep, train; the generator gets the learner's weights
    after every round."""
    from pipeline.scoring.bench import outcomes_from_episodes
    from pipeline.scoring.metrics import summarize
    from pipeline.rollout.conversation import ChatFormat
    from pipeline.rollout.backends import make_generator
    from pipeline.rl.update import export_for_generators
    from pipeline.rollout.scheduler import EpisodeScheduler, ThreadQueue

    model_cfg = cfg.model.model_copy(update={"path": str(model_path)})
    generator = make_generator(model_cfg, cfg.rollout, cfg.run.seed)
    history, rounds = [], []
    try:
        with cluster.evaluation() as (queue, _), ThreadQueue(generator.generate, 1) as generation:
            scheduler = EpisodeScheduler(cfg.rollout, ChatFormat(generator.tokenizer),
                                         generator.max_model_len_tokens, generation, queue)
            for r in range(cfg.sft.rejection_rounds):
                episodes, _ = scheduler.run(tasks, step=r)
                kept = rejection_sequences(episodes, cfg.sft.rejection_keep)
                verdicts = summarize(outcomes_from_episodes(episodes))["verdicts"]
                rounds.append({"round": r, "verdicts": verdicts, "kept_turns": len(kept)})
                print(f"sft rejection round {r}: verdicts {verdicts}; training on {len(kept)} turns")
                if kept:
                    history += train(learner, kept, cfg, log_file, deadline, pad_id, cfg.run.seed + r)
                    generator.update_weights(export_for_generators(learner), version=r + 1)
                if deadline is not None and time.monotonic() > deadline:
                    break
    finally:
        generator.close()
    summary["rounds"] = rounds
    return history
