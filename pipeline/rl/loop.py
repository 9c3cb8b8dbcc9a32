"""The RL training loop (`cudaperf train`): steps against the interfaces of a cluster, no Ray here.

One step, in timed phases:
  tasks    the task stream (Ray Data behind `cluster.task_stream`) gives `train.tasks_per_step` tasks;
  rollout  the episode scheduler runs `rollout.samples_per_task` episodes per task against the
           generation queue and the compile-then-evaluate queue (supervised pools: a dead actor is
           replaced and its call retried, so no episode is lost to it);
  reward   the unified reward per turn, discounted returns, group advantages (pipeline/rl/step.py);
           the ranker term's preferences asked for all of a step's outcomes at once;
  learn    the learner ranks update on the step's turns;
  sync     rank 0's gathered weights go to every generator, version + 1: through the object store, or
           with `train.weight_sync=collective` broadcast by rank 0 over NCCL (gloo on CPU);
  log      metrics JSONL, wandb, progress bar, plots; a checkpoint every `train.checkpoint_every_steps`.
With `train.live_eval_tasks` > 0, each step also rolls out that many tasks of `train.live_eval_source`
(held-out tasks) beside its own, with the same weights and reward, and logs their metrics as
`live/<metric>`: they are scored but never trained on, a live evaluation curve. Which tasks a step gets
is a function of the step alone (`live_tasks`), so a resumed run draws the same ones.
With `rl.staleness_steps >= 1` the learner trains on step s while the generators and evaluators
already run step s + 1 on the weights before that update (a lag of one version, within the
bound); with 0 every rollout uses the newest weights.

`cluster` is what `pipeline/cli.py` hands over (actors/cluster.py: `Cluster`); placement comes
from the config: `rollout.generator_actors` x `train.generator_gpus_per_actor`, `eval.gpus` x
`eval.workers_per_gpu` evaluators taking `train.evaluator_gpu_fraction` of each GPU,
`learner.ranks` x `train.learner_gpus_per_rank`.
"""
from __future__ import annotations

import importlib.util
import json
import random
import time
from pathlib import Path

import numpy as np
import torch

from pipeline.core.config import ConfigError, RunConfig
from pipeline.tasks.reader import TaskReader
from pipeline.rl.batch import sequences_from_episodes, split_across_ranks
from pipeline.rl.step import busy_fractions, prepare_step, ranker_preferences, rollout_metrics
from pipeline.rl.tracking import (MetricsLog, RunState, SampleLog, StatusLine, WandbLog, checkpoint_dir, headline,
                                  plot_metrics, progress_bar)
from pipeline.rollout.conversation import ChatFormat
from pipeline.rollout.scheduler import EpisodeScheduler
from pipeline.rollout.tiny_model import load_tokenizer, resolve_model_path


def cpus_needed(cfg: RunConfig) -> int:
    """CPUs a local Ray must offer for the run's actors (compilers, generators, learner ranks, one more)."""
    return cfg.compile.workers + cfg.rollout.generator_actors + cfg.learner.ranks + 1


def task_reader(cfg: RunConfig) -> TaskReader:
    """The run's task selection (tasks.source, tasks.kinds) in the order seeded by run.seed; a task the degeneracy
    registry does not vouch for stops the run (DataError) unless data.allow_unchecked_tasks."""
    return TaskReader.from_sources(cfg.tasks.source, cfg.tasks.kernelbench_levels, kinds=cfg.tasks.kinds,
                                   seed=cfg.run.seed, split_seed=cfg.data.split_seed,
                                   allow_unchecked=cfg.data.allow_unchecked_tasks)


def live_eval_reader(cfg: RunConfig, training: TaskReader) -> TaskReader | None:
    """The live evaluation's tasks (train.live_eval_source, tasks.kinds) in an order of their own, or None
    when it is off; ConfigError if it is empty or shares a task with the training selection."""
    if not cfg.train.live_eval_tasks:
        return None
    live = TaskReader.from_sources(cfg.train.live_eval_source, cfg.tasks.kernelbench_levels, kinds=cfg.tasks.kinds,
                                   seed=cfg.run.seed + 1, split_seed=cfg.data.split_seed,
                                   allow_unchecked=cfg.data.allow_unchecked_tasks)
    if not len(live):
        raise ConfigError(f"train.live_eval_source '{cfg.train.live_eval_source}' holds no tasks of kinds "
                          f"{cfg.tasks.kinds}; point it at held-out tasks or set train.live_eval_tasks=0")
    shared = {t.id for t in live.tasks} & {t.id for t in training.tasks}
    if shared:
        raise ConfigError(f"train.live_eval_source '{cfg.train.live_eval_source}' shares {len(shared)} tasks with "
                          f"tasks.source '{cfg.tasks.source}' (e.g. {sorted(shared)[0]}); a live evaluation must "
                          "never be trained on: use generated:heldout beside generated:train")
    return live


def live_tasks(reader: TaskReader, step: int, n: int) -> list:
    """Step `step`'s `n` live evaluation tasks: from position step * n of the reader's seeded order, epoch
    after epoch (a function of the step alone)."""
    orders: dict[int, list] = {}
    out = []
    for i in range(step * n, step * n + n):
        epoch, pos = divmod(i, len(reader))
        out.append(orders.setdefault(epoch, reader.order(epoch))[pos])
    return out


def score(outcomes, cfg: RunConfig, actors, tasks: list) -> list:
    """Episodes scored by the run's reward (`prepare_step`), with the ranker's preferences over each task's
    baseline asked for all of them at once when the ranker term is on."""
    prefs = None
    if actors.ranker_preferences is not None:
        prefs = ranker_preferences(outcomes, {t.id: t for t in tasks}, actors.ranker_preferences)
    return prepare_step(outcomes, cfg.reward, cfg.rl, prefs)


def check_placement(cfg: RunConfig, gpus: float) -> None:
    """Every GPU share asked for must exist among the cluster's `gpus`, and the settings must fit
    together: one clear error per problem, all at once."""
    wanted = {"train.generator_gpus_per_actor": cfg.train.generator_gpus_per_actor * cfg.rollout.generator_actors,
              "train.learner_gpus_per_rank": cfg.train.learner_gpus_per_rank * cfg.learner.ranks}
    problems = [f"{key} asks for {need:g} GPU(s) but Ray sees {gpus:g}; set {key}=0 on CPU hosts or add GPUs"
                for key, need in wanted.items() if need > gpus]
    if cfg.train.weight_sync == "collective":
        if cfg.learner.lora_rank > 0:
            problems.append("train.weight_sync=collective sends the learner's parameters as they are; with "
                            "learner.lora_rank > 0 set train.weight_sync=object_store (it merges the adapters)")
        shared = [k for k in ("generator_gpus_per_actor", "learner_gpus_per_rank") if 0 < getattr(cfg.train, k) < 1]
        if shared:
            problems.append(f"train.weight_sync=collective needs whole GPUs (NCCL cannot join two processes on one "
                            f"GPU) but train.{shared[0]} = {getattr(cfg.train, shared[0])}; give each generator "
                            "and learner rank a GPU of its own or set train.weight_sync=object_store")
    if cfg.learner.lora_rank > 0 and importlib.util.find_spec("peft") is None:
        problems.append(f"learner.lora_rank = {cfg.learner.lora_rank} needs peft, which is not installed here; "
                        "pip install -e '.[lora]' (on every node) or set learner.lora_rank=0")
    if cfg.reward.w_ranker > 0 and not cfg.ranker.checkpoint:
        problems.append(f"reward.w_ranker = {cfg.reward.w_ranker} needs a ranker: train one with `cudaperf rank "
                        "train --out DIR` and set ranker.checkpoint=DIR, or set reward.w_ranker=0")
    if problems:
        raise ConfigError("; ".join(problems))


def evaluator_busy_s(outcomes) -> float:
    """Seconds the evaluators spent on this step's candidates (stage times of freshly evaluated results)."""
    return sum(sum(r.stage_s.values()) for o in outcomes for r in o.results() if r.evaluator_version and not r.cached)


def run_training(cfg: RunConfig, run_dir: Path, cluster, resume_from: Path | None = None) -> list[dict]:
    """Train for `train.steps` steps (from the checkpoint `resume_from`, if given) on `cluster`; returns
    each step's metrics."""
    reader = task_reader(cfg)
    live = live_eval_reader(cfg, reader)  # a bad live source is reported before anything starts
    for task_id, why in reader.degenerate:
        print(f"not training on {task_id}: degenerate ({why}); see docs/fidelity.md", flush=True)
    model_path = resolve_model_path(cfg.model)  # built here once, so actors find the tiny model ready
    check_placement(cfg, cluster.gpus)
    with StatusLine(f"starting {starting(cfg, cluster.evaluator_gpus())}") as status, \
            cluster.training(model_path) as actors:
        actors.wait_ready()
        status.done()
        placement = actors.placement_record()
        if placement:  # where Ray's state API answers (a cluster with its dashboard)
            run_dir.mkdir(parents=True, exist_ok=True)
            (run_dir / "placement.json").write_text(json.dumps(placement, indent=1))
        return _steps(cfg, run_dir, cluster, actors, reader, live, model_path, resume_from)


def starting(cfg: RunConfig, evaluator_gpus: int) -> str:
    """What a run starts before its first step, in words (`evaluator_gpus`: the GPUs its evaluators get)."""
    def n(count: int, what: str) -> str:
        return f"{count} {what}{'' if count == 1 else 's'}"
    evaluators = (n(evaluator_gpus * cfg.eval.workers_per_gpu, "GPU evaluator") if evaluator_gpus
                  else "a CPU evaluator")
    return (f"{n(cfg.rollout.generator_actors, 'generator')} ({cfg.rollout.backend} engine, model {cfg.model.path}), "
            f"{n(cfg.learner.ranks, 'learner rank')}, {evaluators}, {n(cfg.compile.workers, 'compiler')}")


def _steps(cfg: RunConfig, run_dir: Path, cluster, actors, reader: TaskReader, live: TaskReader | None, model_path,
           resume_from: Path | None) -> list[dict]:
    learners = actors.learners
    state = RunState()
    if resume_from is not None:
        state = RunState.from_dict(learners.load(resume_from))
        state.restore_rng()
        actors.sync_weights(state.weight_version)
    else:
        random.seed(cfg.run.seed)
        np.random.seed(cfg.run.seed)
        torch.manual_seed(cfg.run.seed)
    if state.reader:
        reader.restore(state.reader)
    stream = cluster.task_stream(reader, model_path)  # tokenizes each task's opening prompt off the driver
    scheduler = EpisodeScheduler(cfg.rollout, ChatFormat(load_tokenizer(model_path)), cfg.model.max_model_len_tokens,
                                 actors.generation, actors.evaluation, generation_slots=actors.generation_slots,
                                 seed=cfg.run.seed if cfg.train.reproducible else None,
                                 lockstep=cfg.train.reproducible, waiter=actors.waiter)
    log = MetricsLog(run_dir, resume_after_step=state.step if resume_from is not None else None)
    samples = SampleLog(run_dir, cfg.train.samples_per_step, state.step if resume_from is not None else None)
    wandb = WandbLog(cfg.train.wandb_mode, cfg.train.wandb_project, run_dir, cfg.run.name, cfg.model_dump())
    bar = progress_bar(cfg.train.progress_bar, cfg.train.steps, state.step)
    rows: list[dict] = []
    pending = None  # (step, rollout metrics, learner refs, tasks position after the step)
    try:
        for step in range(state.step, cfg.train.steps):
            t0, compile_s0 = time.perf_counter(), actors.compile_s()
            step_tasks = stream.take(cfg.train.tasks_per_step)
            held = live_tasks(live, step, cfg.train.live_eval_tasks) if live is not None else []
            everything, stats = scheduler.run(step_tasks + held, step, stream.openings)  # one rollout
            held_ids = {t.id for t in held}
            outcomes = [o for o in everything if o.trajectory.task_id not in held_ids]
            episodes = score(outcomes, cfg, actors, step_tasks)
            samples.write_episodes(step + 1, outcomes, episodes)
            metrics = {**rollout_metrics(outcomes, episodes), "tasks": [t.id for t in step_tasks]}
            if held:  # the live evaluation: scored like the step's own episodes, never trained on
                live_outcomes = [o for o in everything if o.trajectory.task_id in held_ids]
                metrics.update({f"live/{k}": v for k, v in
                                rollout_metrics(live_outcomes, score(live_outcomes, cfg, actors, held)).items()})
            metrics.update({"time/rollout_s": stats.wall_s, "rollout/weight_version": float(actors.weight_version),
                            "rollout/tokens_generated": float(stats.tokens_generated),
                            "rollout/sequences_per_call": stats.mean_sequences_per_call,
                            "pool/restarts": float(actors.restarts())})
            busy = {"generator": stats.generation_s, "evaluator": evaluator_busy_s(everything),
                    "compiler": actors.compile_s() - compile_s0}
            finished = []
            if pending is not None:  # staleness >= 1: the previous step trained while this one rolled out
                finished.append(finish(pending, actors, state))
                pending = None
            sequences = sequences_from_episodes(episodes)
            refs = learners.submit_train(split_across_ranks(sequences, learners.size)) if sequences else None
            pending = (step, metrics, refs, reader.state())
            if cfg.rl.staleness_steps == 0 or step == cfg.train.steps - 1:
                finished.append(finish(pending, actors, state))
                pending = None
            window_s = time.perf_counter() - t0
            busy["learner"] = learners.busy_s(t0, t0 + window_s)
            for done_step, row in finished:  # busy fractions: of the iteration in which the update finished
                row.update(busy_fractions(busy, actors.sizes, window_s))
                row["time/step_s"] = window_s
                rows.append({"step": done_step + 1, **row})
                log.write(done_step + 1, row)
                wandb.log(done_step + 1, row)
                bar.update(1)
                bar.set_postfix(headline(row))
                every = cfg.train.checkpoint_every_steps
                if (every and (done_step + 1) % every == 0) or done_step + 1 == cfg.train.steps:
                    state.capture_rng()
                    learners.save(checkpoint_dir(run_dir, done_step + 1), state.to_dict())
                    plot_metrics(run_dir)
    finally:
        bar.close()
        wandb.close()
        stream.close()  # while Ray is up: a stream left open is finalised at exit, after Ray, with a traceback
    return rows


def finish(pending, actors, state: RunState) -> tuple[int, dict]:
    """Wait for a step's update, send the new weights to the generators, advance the run state."""
    step, metrics, refs, position = pending
    row = dict(metrics)
    if refs is None:  # every episode of the step was lost: nothing to train on, weights unchanged
        row["learner/skipped"] = 1.0
    else:
        row.update(actors.learners.finish_train(refs))
        t0 = time.perf_counter()
        sent = actors.sync_weights(actors.weight_version + 1)
        row["time/sync_s"] = time.perf_counter() - t0
        if sent:  # the collective path reports rank 0's own figures
            row["sync/bytes"] = float(sent["bytes"])
            row["sync/broadcast_s"] = sent["seconds"]
            row["sync/gb_per_s"] = sent["bytes"] / max(sent["seconds"], 1e-9) / 1e9
    row["learner/weight_version"] = float(actors.weight_version)  # the version this step's update produced
    state.step, state.reader, state.weight_version = step + 1, position, actors.weight_version
    return step, row
