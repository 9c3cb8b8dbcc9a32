"""Ray shell for generation (GeneratorActor), its supervised pool, and the pools as the scheduler's queues.

The actor builds one `Generator` (pipeline/rollout/generation.py: the backend `rollout.backend` names in the
table of pipeline/core/generator_backends.py) and forwards calls to it; sampling, logprobs and weight loading live there and run
without Ray. Resources come from the driver: `num_gpus_per_actor` (a whole GPU for a vLLM engine
of its own, a fraction when it shares the GPU with the learner); one CPU each.

Weights: `WeightState.broadcast` puts the tensors in the object store once and loads them into
every actor; `CollectiveWeightSync.broadcast` (train.weight_sync=collective) has learner rank 0
broadcast them over NCCL (gloo on CPU) straight into the generators. A generator that died is rebuilt by the pool with the model's initial weights, so the
pool's factory first loads the latest broadcast into the replacement (Ray runs one caller's
calls on an actor in order, so that load precedes any generation on it).

Usage (driver):
    weights = WeightState()
    pool = make_generator_pool(cfg.model, cfg.rollout, seed=cfg.run.seed, num_gpus_per_actor=1, weights=weights)
    scheduler = EpisodeScheduler(cfg.rollout, chat, cfg.model.max_model_len_tokens,
                                 PoolQueue(pool, "generate"), PoolQueue(evaluators, "evaluate"),
                                 generation_slots=pool.size)
    outcomes, stats = scheduler.run(tasks, step)
    weights.broadcast(pool, learner_named_tensors, version=step + 1)
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterable

import ray
from ray.actor import ActorHandle

from actors.pool import NO_RAY_RESTARTS, SupervisedPool

if TYPE_CHECKING:  # the core modules are imported lazily in the actor (see its constructor)
    from pipeline.core.config import ModelSection, RolloutSection
    from pipeline.rollout.generation import GenerationRequest, GenerationResult, SamplingSpec


class GeneratorActor:
    """Owns one `Generator` (one engine, one copy of the policy)."""

    def __init__(self, model_cfg: ModelSection, rollout_cfg: RolloutSection, seed: int):
        from pipeline.rollout.backends import make_generator

        self._generator = make_generator(model_cfg, rollout_cfg, seed)
        self._sync_group = None  # learner rank 0's broadcast group (train.weight_sync=collective)

    def generate(self, requests: list[GenerationRequest], sampling: SamplingSpec) -> GenerationResult:
        """Samples per request, with logprobs and the weight version that made them."""
        return self._generator.generate(requests, sampling)

    def update_weights(self, named_tensors: list[tuple[str, Any]], version: int) -> int:
        """Load `(hf_name, tensor)` pairs and move to weight `version`; returns the version now held."""
        self._generator.update_weights(named_tensors, version)
        return self._generator.weight_version

    def join_weight_sync(self, master_addr: str, master_port: int, rank: int, world_size: int, backend: str) -> None:
        """Join learner rank 0's broadcast group as `rank` (1..G); see pipeline/rl/weight_sync.py."""
        from pipeline.rl.weight_sync import SyncGroup
        self._sync_group = SyncGroup(master_addr, master_port, rank, world_size, backend)

    def receive_weights(self, version: int) -> int:
        """Receive one collective sync from learner rank 0 and load it as `version`; returns the version held."""
        from pipeline.rl.weight_sync import receive_weights
        if self._sync_group is None:
            raise RuntimeError("receive_weights: this generator has not joined the sync group; the driver joins it "
                               "(CollectiveWeightSync.connect) before the first sync")
        self._generator.update_weights(receive_weights(self._sync_group, version), version)
        return self._generator.weight_version

    def weight_version(self) -> int:
        """The version of the weights generating now."""
        return self._generator.weight_version

    def ping(self) -> str:
        """Liveness check: answers once the constructor (engine start) has finished."""
        return "ok"

    def pid(self) -> int:
        """The actor's process id."""
        return os.getpid()


class WeightState:
    """The latest broadcast weights (an object-store ref and its version), for replacement actors."""

    def __init__(self):
        self.ref: ray.ObjectRef | None = None
        self.version = 0

    def broadcast(self, pool: SupervisedPool, named_tensors: Iterable[tuple[str, Any]] | ray.ObjectRef,
                  version: int) -> None:
        """Load the weights into every generator of `pool` (stored once) and wait until all hold them.
        `named_tensors` may already be in the object store (an ObjectRef of the list, e.g. the value a
        learner actor returned), so the weights need not pass through the caller."""
        if isinstance(named_tensors, ray.ObjectRef):
            self.ref = named_tensors
        else:
            self.ref = ray.put([(name, tensor.detach().cpu()) for name, tensor in named_tensors])
        self.version = version
        versions = ray.get([actor.update_weights.remote(self.ref, version) for actor in pool.actors])
        if set(versions) != {version}:
            raise RuntimeError(f"WeightState.broadcast: generators report versions {versions}, expected {version}")


class CollectiveWeightSync:
    """Weight sync over a collective (train.weight_sync=collective): learner rank 0 broadcasts the gathered
    buckets to every generator of the pool over a group of its own (NCCL on GPUs, gloo on CPU).

    The group is formed on the first sync, and formed again whenever the pool replaced a generator
    (the members are the pool's live actors). A replacement generator starts from the model's initial
    weights (version 0, which its samples report) and receives the learner's weights at the next sync.
    """

    def __init__(self, learners: Any, backend: str):
        self._learners = learners  # an actors.learners.LearnerGroup
        self._backend = backend
        self._members: tuple[ActorHandle, ...] = ()
        self.version = 0
        self.last: dict = {}  # the last sync's figures: bytes, buckets, seconds (rank 0's clock)

    def connect(self, pool: SupervisedPool) -> None:
        """Form the group: learner rank 0 is its rank 0, generator slot i its rank i + 1."""
        members = pool.actors
        addr, port = ray.get(self._learners.actors[0].address.remote())
        world = 1 + len(members)
        refs = [self._learners.actors[0].join_weight_sync.remote(addr, port, world, self._backend)]
        refs += [a.join_weight_sync.remote(addr, port, 1 + i, world, self._backend) for i, a in enumerate(members)]
        ray.get(refs)
        self._members = members

    def broadcast(self, pool: SupervisedPool, version: int) -> dict:
        """Send the learner's current weights to every generator as `version`, wait until all hold it;
        returns the figures of the sync (bytes, buckets, seconds)."""
        if pool.actors != self._members:
            self.connect(pool)
        sends = self._learners.broadcast_refs(version)
        receives = [a.receive_weights.remote(version) for a in self._members]
        self.last = self._learners.finish_broadcast(sends)
        versions = ray.get(receives)
        if set(versions) != {version}:
            raise RuntimeError(f"CollectiveWeightSync: generators report versions {versions}, expected {version}")
        self.version = version
        return self.last


class PoolQueue:
    """A SupervisedPool seen as the scheduler's WorkQueue for one of its actors' methods."""

    def __init__(self, pool: SupervisedPool, method: str):
        self._pool = pool
        self._method = method

    def submit(self, *args: Any) -> int:
        return self._pool.submit(self._method, *args)

    def next_completed(self, timeout_s: float | None = None) -> tuple[int, Any]:
        return self._pool.next_completed(timeout_s)

    def poll(self) -> tuple[int, Any] | None:
        return self._pool.poll()


def make_generator_pool(model_cfg: ModelSection, rollout_cfg: RolloutSection, seed: int,
                        num_gpus_per_actor: float = 0.0, max_retries: int = 2,
                        weights: WeightState | None = None, placement: dict | None = None,
                        actor_cls: type = GeneratorActor) -> SupervisedPool:
    """`rollout_cfg.generator_actors` generator actors under one SupervisedPool.

    `num_gpus_per_actor` is what the driver gives each (0 on CPU hosts). Actor `slot` samples with
    seed `seed + slot`. With `weights`, a replacement actor first loads the latest broadcast.
    `placement`: Ray options that put each actor on a generator node (actors/placement.py); `actor_cls`: the
    actor (a simulation passes a stand-in with the same methods).
    """
    if num_gpus_per_actor < 0:
        raise ValueError(f"make_generator_pool: num_gpus_per_actor = {num_gpus_per_actor}; pass 0 on CPU hosts "
                         "or the GPU share of each generator")
    remote_cls = ray.remote(actor_cls)
    options = {"num_cpus": 1, "num_gpus": num_gpus_per_actor, **NO_RAY_RESTARTS, **(placement or {})}

    def make_actor(slot: int) -> ActorHandle:
        actor = remote_cls.options(**options).remote(model_cfg, rollout_cfg, seed + slot)
        if weights is not None and weights.ref is not None:
            actor.update_weights.remote(weights.ref, weights.version)
        return actor

    return SupervisedPool(make_actor, size=rollout_cfg.generator_actors, max_retries=max_retries)
