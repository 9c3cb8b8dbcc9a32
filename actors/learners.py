"""Ray shell for the learner: one LearnerActor per data-parallel rank, and LearnerGroup driving them together.

Each actor owns one `pipeline.rl.learner.Learner` (DeepSpeed ZeRO-2/3; gloo on CPU, nccl on GPUs),
plus a frozen reference `Learner` when `rl.kl_coef > 0`. Domain logic (batching, losses, export,
checkpoints) lives in pipeline/rl/; this file only places ranks, joins them into one process group
and forwards calls. Every call below is collective: the group calls it on every rank at once.

Weights out: rank 0 returns the whole model as `(Hugging Face name, CPU tensor)` pairs, gathered
bucket by bucket (ZeRO-3 shards are gathered one bucket at a time, `learner.sync_bucket_bytes`);
the return value lands in Ray's object store, and the driver hands that ObjectRef to the
generators, so weights never pass through the driver process. With `train.weight_sync=collective`,
rank 0 instead broadcasts each gathered bucket straight to the generators over a group of its own
(`join_weight_sync`, `broadcast_weights`; pipeline/rl/weight_sync.py): GPU to GPU over NCCL.

A dead learner is not replaced here: its optimizer state lives only in it. The run ends with an
error naming the last checkpoint, and `cudaperf train --resume RUN_DIR` continues from there.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray

from actors.startup import wait_started
from ray.actor import ActorHandle

from actors.pool import NO_RAY_RESTARTS

if TYPE_CHECKING:
    from pipeline.core.config import LearnerSection, RLSection
    from pipeline.rl.batch import TrainSequence


class LearnerActor:
    """One rank. `setup` joins the process group and builds the model (collective)."""

    def __init__(self, rank: int, world_size: int):
        self.rank, self.world_size = rank, world_size
        self.learner = None
        self.reference = None
        self.sync_group = None  # rank 0's broadcast group to the generators (train.weight_sync=collective)

    def address(self) -> tuple[str, int]:
        """This node's IP and a port free on it: rank 0's answer is the group's rendezvous."""
        from pipeline.rl.distributed import free_port
        return ray.util.get_node_ip_address(), free_port()

    def setup(self, learner_cfg: LearnerSection, rl_cfg: RLSection, model_path: str, temperature: float,
              master_addr: str, master_port: int, use_gpu: bool, seed: int, top_p: float = 1.0) -> dict:
        """Join the group, load the policy (and the reference when rl.kl_coef > 0); returns the learner's info."""
        from pipeline.rl.distributed import init_process_group
        # Ray gives a GPU rank exactly one visible device, so its local GPU index is 0.
        init_process_group(self.rank, self.world_size, master_port, master_addr, local_rank=0 if use_gpu else None,
                           backend="nccl" if use_gpu else "gloo")
        from pipeline.rl.learner import Learner
        from pipeline.rl.update import build_policy
        from pipeline.rollout.tiny_model import load_tokenizer, padding_id

        tokenizer = load_tokenizer(model_path)
        self.pad_id = padding_id(tokenizer)
        self.learner = Learner(learner_cfg, rl_cfg, build_policy(model_path, learner_cfg), tokenizer=tokenizer,
                               temperature=temperature, top_p=top_p, seed=seed)
        if rl_cfg.kl_coef > 0:
            self.reference = Learner(learner_cfg, rl_cfg, build_policy(model_path, learner_cfg, lora=False),
                                     temperature=temperature, top_p=top_p, trainable=False, seed=seed)
        return self.learner.info

    def train(self, sequences: list[TrainSequence]) -> dict[str, float]:
        """One step's update on this rank's share of the turns: `rl.ppo_epochs` passes of
        `rl.minibatches_per_epoch` optimizer steps. Returns the metrics of pipeline.rl.learner.train_epochs."""
        from pipeline.rl.update import train_epochs
        return train_epochs(self.learner, sequences, self.pad_id, self.reference)

    def export_weights(self) -> list[tuple[str, Any]]:
        """Every weight as (Hugging Face name, CPU tensor) on rank 0; [] on other ranks."""
        from pipeline.rl.update import export_for_generators
        return export_for_generators(self.learner)

    def join_weight_sync(self, master_addr: str, master_port: int, world_size: int, backend: str) -> None:
        """Rank 0 only: open the broadcast group to the generators as its rank 0 (see pipeline/rl/weight_sync.py)."""
        from pipeline.rl.weight_sync import SyncGroup
        self.sync_group = SyncGroup(master_addr, master_port, 0, world_size, backend)

    def broadcast_weights(self, version: int) -> dict:
        """Collective over the learner ranks: gather bucket by bucket; rank 0 broadcasts each bucket to the
        generators. Returns rank 0's figures (bytes, buckets, seconds), {} on other ranks."""
        from pipeline.rl.weight_sync import send_from_learner
        return send_from_learner(self.learner, self.sync_group, version)

    def save(self, directory: str, run_state: dict) -> str:
        return str(self.learner.save_checkpoint(directory, run_state))

    def load(self, directory: str) -> dict:
        return self.learner.load_checkpoint(directory)

    def pid(self) -> int:
        return os.getpid()


class LearnerGroup:
    """`learner.ranks` LearnerActors as one data-parallel learner (resources from the driver)."""

    def __init__(self, learner_cfg: LearnerSection, rl_cfg: RLSection, model_path: str | Path, temperature: float,
                 gpus_per_rank: float, seed: int, placement: dict | None = None, actor_cls: type = LearnerActor,
                 top_p: float = 1.0, start_timeout_s: float = 60.0):
        """`temperature`, `top_p`: the generators' sampling settings; `placement`: Ray options that put each rank
        on a learner node (actors/placement.py); `actor_cls`: the rank's actor (a simulation passes a stand-in
        with the same methods); `start_timeout_s`: how long ranks may wait for resources (actors/startup.py)."""
        remote_cls = ray.remote(actor_cls)
        options = {"num_cpus": 1, "num_gpus": gpus_per_rank, **NO_RAY_RESTARTS,  # not restarted: see the top
                   **(placement or {})}
        self.actors: list[ActorHandle] = [remote_cls.options(**options).remote(r, learner_cfg.ranks)
                                          for r in range(learner_cfg.ranks)]
        first = [a.address.remote() for a in self.actors]
        wait_started(first, start_timeout_s)  # a rank the cluster has no room for is said, not waited for
        addr, port = ray.get(first[0])
        self.info = ray.get([a.setup.remote(learner_cfg, rl_cfg, str(model_path), temperature, addr, port,
                                            gpus_per_rank > 0, seed, top_p) for a in self.actors])[0]
        self.busy: list[tuple[float, float]] = []  # (start, end) perf_counter times of updates and exports

    @property
    def size(self) -> int:
        return len(self.actors)

    def submit_train(self, per_rank: list[list[TrainSequence]]) -> list[ray.ObjectRef]:
        """Start one update; each rank gets its share. Collect with `finish_train`."""
        if len(per_rank) != len(self.actors):
            raise ValueError(f"LearnerGroup: {len(per_rank)} shares for {len(self.actors)} ranks")
        return [a.train.remote(share) for a, share in zip(self.actors, per_rank)]

    def finish_train(self, refs: list[ray.ObjectRef]) -> dict[str, float]:
        """Wait for an update started by `submit_train`; rank 0's metrics (they are reduced over ranks)."""
        metrics = ray.get(refs)[0]
        end = time.perf_counter()  # the update ended at the latest now, and ran for update_s
        self.busy.append((end - metrics["learner/update_s"], end))
        return metrics

    def export_ref(self) -> ray.ObjectRef:
        """Gather the weights (collective); the ObjectRef of rank 0's `(name, tensor)` list."""
        t0 = time.perf_counter()
        refs = [a.export_weights.remote() for a in self.actors]
        ray.wait(refs, num_returns=len(refs), fetch_local=False)
        self.busy.append((t0, time.perf_counter()))
        return refs[0]

    def broadcast_refs(self, version: int) -> list[ray.ObjectRef]:
        """Start a collective weight sync on every rank (the generators must receive at the same time);
        collect with `finish_broadcast`."""
        self._broadcast_t0 = time.perf_counter()
        return [a.broadcast_weights.remote(version) for a in self.actors]

    def finish_broadcast(self, refs: list[ray.ObjectRef]) -> dict:
        """Wait for the sync started by `broadcast_refs`; rank 0's figures (bytes, buckets, seconds)."""
        stats = ray.get(refs)[0]
        self.busy.append((self._broadcast_t0, time.perf_counter()))
        return stats

    def busy_s(self, start: float, end: float) -> float:
        """Seconds of [start, end] (perf_counter times) in which the ranks were updating or exporting."""
        return sum(max(0.0, min(e, end) - max(s, start)) for s, e in self.busy)

    def save(self, directory: str | Path, run_state: dict) -> None:
        ray.get([a.save.remote(str(directory), run_state) for a in self.actors])

    def load(self, directory: str | Path) -> dict:
        return ray.get([a.load.remote(str(directory)) for a in self.actors])[0]

    def shutdown(self) -> None:
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
