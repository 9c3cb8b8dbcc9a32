"""The RL training loop on Ray (`cudaperf train`, entry point pipeline/rl/train.py).

One step, in timed phases:
  tasks    the task stream (Ray Data) gives `train.tasks_per_step` tasks;
  rollout  the episode scheduler runs `rollout.samples_per_task` episodes per task against the
           generator pool and the compile-then-evaluate queue (CPU compile pool, then evaluator
           pool; all SupervisedPools: a dead actor is replaced and its call retried, so no episode
           is lost to it);
  reward   the unified reward per turn, discounted returns, group advantages (pipeline/rl/step.py);
  learn    the learner ranks update on the step's turns (actors/learner.py);
  sync     rank 0's gathered weights go to every generator, version + 1: through the object store, or
           with `train.weight_sync=collective` broadcast by rank 0 over NCCL (gloo on CPU);
  log      metrics JSONL, wandb, progress bar, plots; a checkpoint every `train.checkpoint_every_steps`.
With `rl.staleness_steps >= 1` the learner trains on step s while the generators and evaluators
already run step s + 1 on the weights before that update (a lag of one version, within the
bound); with 0 every rollout uses the newest weights.

Placement comes from the config: `rollout.generator_actors` x `train.generator_gpus_per_actor`,
`eval.gpus` x `eval.workers_per_gpu` evaluators taking `train.evaluator_gpu_fraction` of each GPU,
`learner.ranks` x `train.learner_gpus_per_rank`. Locally the driver starts its own Ray; under
`ray job submit` it joins the cluster.
"""
from __future__ import annotations

import logging
import random
import time
from pathlib import Path

import numpy as np
import ray
import torch

from actors.data import task_dataset
from actors.evaluation import CompileThenEvaluate, make_compiler_pool, make_evaluator_pool
from actors.generation import CollectiveWeightSync, PoolQueue, WeightState, make_generator_pool
from actors.learner import LearnerGroup
from actors.ranker import make_ranker_actor
from actors.verify import evaluator_gpus, start_ray
from pipeline.config import ConfigError, RunConfig
from pipeline.data.reader import TaskReader, task_of_row
from pipeline.records import Task
from pipeline.rl.batch import sequences_from_trajectories, split_across_ranks
from pipeline.rl.step import busy_fractions, prepare_step, ranker_preferences, rollout_metrics
from pipeline.rl.tracking import (MetricsLog, RunState, SampleLog, WandbLog, checkpoint_dir, headline, plot_metrics,
                                  progress_bar)
from pipeline.rollout.conversation import ChatFormat
from pipeline.rollout.scheduler import EpisodeScheduler
from pipeline.rollout.tiny_model import load_tokenizer, resolve_model_path


class TaskStream:
    """The run's tasks, streamed through Ray Data (actors/data.py) from a `TaskReader`, which keeps the
    seeded order and the position a checkpoint saves (`reader.state()`)."""

    def __init__(self, reader: TaskReader):
        if not len(reader):
            raise ConfigError("the task stream is empty; check tasks.source and tasks.kinds")
        self.reader = reader
        self._rows = None
        ctx = ray.data.DataContext.get_current()  # one small dataset per epoch: no progress output for it
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        logging.getLogger("ray.data").setLevel(logging.WARNING)

    def take(self, n: int) -> list[Task]:
        out = []
        while len(out) < n:
            if self._rows is None:
                self._rows = iter(task_dataset(self.reader).iter_rows())
            row = next(self._rows, None)
            if row is None:  # the epoch ended; the reader already points at the next one
                self._rows = None
                continue
            out.append(task_of_row(row))
            self.reader.consumed(row)
        return out


def task_reader(cfg: RunConfig) -> TaskReader:
    """The run's task selection (tasks.source, tasks.kinds) in the order seeded by run.seed."""
    return TaskReader.from_sources(cfg.tasks.source, cfg.tasks.kernelbench_levels, kinds=cfg.tasks.kinds,
                                   seed=cfg.run.seed, split_seed=cfg.data.split_seed)


def check_placement(cfg: RunConfig, gpus: float | None = None) -> None:
    """Every GPU share asked for must exist, and the settings must fit together: one clear error per
    problem, all at once. `gpus`: the GPUs of the cluster (default: what Ray sees)."""
    if gpus is None:
        gpus = float(ray.cluster_resources().get("GPU", 0))
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
    if cfg.reward.w_ranker > 0 and not cfg.ranker.checkpoint:
        problems.append(f"reward.w_ranker = {cfg.reward.w_ranker} needs a ranker: train one with `cudaperf rank "
                        "train --out DIR` and set ranker.checkpoint=DIR, or set reward.w_ranker=0")
    if problems:
        raise ConfigError("; ".join(problems))


def evaluator_busy_s(outcomes) -> float:
    """Seconds the evaluators spent on this step's candidates (stage times of freshly evaluated results)."""
    return sum(sum(r.stage_s.values()) for o in outcomes for r in o.results if r.evaluator_version and not r.cached)


def run_training(cfg: RunConfig, run_dir: Path, resume_from: Path | None = None) -> list[dict]:
    """Train for `train.steps` steps (from the checkpoint `resume_from`, if given); returns each step's metrics."""
    reader = task_reader(cfg)
    model_path = resolve_model_path(cfg.model)  # built here once, so actors find the tiny model ready
    start_ray(cfg.compile.workers + cfg.rollout.generator_actors + cfg.learner.ranks + 1)
    check_placement(cfg)
    learners = LearnerGroup(cfg.learner, cfg.rl, model_path, cfg.rollout.temperature,
                            cfg.train.learner_gpus_per_rank, cfg.run.seed)
    weights = WeightState()
    if cfg.train.weight_sync == "collective":  # NCCL between GPUs; gloo when the learner runs on CPU
        weights = CollectiveWeightSync(learners, "nccl" if cfg.train.learner_gpus_per_rank > 0 else "gloo")
    generators = make_generator_pool(cfg.model, cfg.rollout, cfg.run.seed,
                                     num_gpus_per_actor=cfg.train.generator_gpus_per_actor,
                                     max_retries=cfg.eval.max_retries,
                                     weights=weights if isinstance(weights, WeightState) else None)
    evaluators = make_evaluator_pool(cfg.eval, cfg.compile, evaluator_gpus(cfg), cfg.train.evaluator_gpu_fraction)
    compilers = make_compiler_pool(cfg.compile, cfg.eval.max_retries)  # nvcc on CPU workers, not on the GPU actors
    ranker = make_ranker_actor(cfg.ranker, cfg.compile) if cfg.reward.w_ranker > 0 else None
    state = RunState()
    if resume_from is not None:
        state = RunState.from_dict(learners.load(resume_from))
        state.restore_rng()
        sync_weights(weights, learners, generators, state.weight_version)
    else:
        random.seed(cfg.run.seed)
        np.random.seed(cfg.run.seed)
        torch.manual_seed(cfg.run.seed)
    if state.reader:
        reader.restore(state.reader)
    stream = TaskStream(reader)
    scheduler = EpisodeScheduler(cfg.rollout, ChatFormat(load_tokenizer(model_path)), cfg.model.max_model_len_tokens,
                                 PoolQueue(generators, "generate"), CompileThenEvaluate(compilers, evaluators),
                                 generation_slots=generators.size,
                                 seed=cfg.run.seed if cfg.train.reproducible else None,
                                 lockstep=cfg.train.reproducible)
    log = MetricsLog(run_dir, resume_after_step=state.step if resume_from is not None else None)
    samples = SampleLog(run_dir, cfg.train.samples_per_step, state.step if resume_from is not None else None)
    wandb = WandbLog(cfg.train.wandb_mode, cfg.train.wandb_project, run_dir, cfg.run.name, cfg.model_dump())
    bar = progress_bar(cfg.train.progress_bar, cfg.train.steps, state.step)
    actors = {"generator": generators.size, "evaluator": evaluators.size, "learner": learners.size}
    rows: list[dict] = []
    pending = None  # (step, rollout metrics, learner refs, tasks position after the step)
    try:
        for step in range(state.step, cfg.train.steps):
            t0 = time.perf_counter()
            step_tasks = stream.take(cfg.train.tasks_per_step)
            outcomes, stats = scheduler.run(step_tasks, step)
            samples.write_episodes(step + 1, outcomes)
            prefs = None
            if ranker is not None:  # the ranker term: its preference for each correct candidate over the baseline
                prefs = ranker_preferences(outcomes, {t.id: t for t in step_tasks}, lambda task, cands, results: ray.get(
                    ranker.preferences_for_results.remote(task, cands, results)))
            trajectories = prepare_step(outcomes, cfg.reward, cfg.rl, prefs)
            metrics = rollout_metrics(outcomes, trajectories)
            metrics.update({"time/rollout_s": stats.wall_s, "rollout/weight_version": float(weights.version),
                            "rollout/tokens_generated": float(stats.tokens_generated),
                            "rollout/sequences_per_call": stats.mean_sequences_per_call,
                            "pool/restarts": float(generators.restarts + evaluators.restarts + compilers.restarts)})
            busy = {"generator": stats.generation_s, "evaluator": evaluator_busy_s(outcomes)}
            finished = []
            if pending is not None:  # staleness >= 1: the previous step trained while this one rolled out
                finished.append(finish(pending, learners, generators, weights, state))
                pending = None
            sequences = sequences_from_trajectories(trajectories)
            refs = learners.submit_train(split_across_ranks(sequences, learners.size)) if sequences else None
            pending = (step, metrics, refs, reader.state())
            if cfg.rl.staleness_steps == 0 or step == cfg.train.steps - 1:
                finished.append(finish(pending, learners, generators, weights, state))
                pending = None
            window_s = time.perf_counter() - t0
            busy["learner"] = learners.busy_s(t0, t0 + window_s)
            for done_step, row in finished:  # busy fractions: of the iteration in which the update finished
                row.update(busy_fractions(busy, actors, window_s))
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
        for pool in (generators, evaluators, compilers):
            pool.shutdown()
        learners.shutdown()
        if ranker is not None:
            ray.kill(ranker)
    return rows


def sync_weights(weights: WeightState | CollectiveWeightSync, learners: LearnerGroup, generators,
                 version: int) -> dict:
    """Send the learner's weights to every generator as `version` (train.weight_sync picks the path);
    the collective path returns its figures (bytes, buckets, seconds), the object store {}."""
    if isinstance(weights, CollectiveWeightSync):
        return weights.broadcast(generators, version)
    weights.broadcast(generators, learners.export_ref(), version)
    return {}


def finish(pending, learners: LearnerGroup, generators, weights: WeightState | CollectiveWeightSync,
           state: RunState) -> tuple[int, dict]:
    """Wait for a step's update, send the new weights to the generators, advance the run state."""
    step, metrics, refs, position = pending
    row = dict(metrics)
    if refs is None:  # every episode of the step was lost: nothing to train on, weights unchanged
        row["learner/skipped"] = 1.0
    else:
        row.update(learners.finish_train(refs))
        t0 = time.perf_counter()
        sent = sync_weights(weights, learners, generators, weights.version + 1)
        row["time/sync_s"] = time.perf_counter() - t0
        if sent:  # the collective path reports rank 0's own figures
            row["sync/bytes"] = float(sent["bytes"])
            row["sync/broadcast_s"] = sent["seconds"]
            row["sync/gb_per_s"] = sent["bytes"] / max(sent["seconds"], 1e-9) / 1e9
    row["learner/weight_version"] = float(weights.version)  # the version this step's update produced
    state.step, state.reader, state.weight_version = step + 1, position, weights.version
    return step, row
