"""Ray behind one facade: start-up, placement and the pools every job runs on.

    cluster = Cluster(cfg)                      # joins the cluster a job was submitted to, or starts Ray
    with cluster.evaluation() as (queue, n):    # compile pool, then evaluator pool: a WorkQueue
        ...
    stream = cluster.task_stream(reader)        # the run's tasks through Ray Data
    with cluster.training(model_path) as t:     # generators, evaluators, learner ranks, weight sync, ranker
        ...

`pipeline/` never imports Ray or this package: `pipeline/cli.py` (the composition root) makes a
`Cluster` and hands it to the job, which sees only the interfaces named here (`WorkQueue`s with
`submit`/`next_completed`, a learner group, a weight sync, a batched ranker). Each pool is a
`SupervisedPool` (actors/pool.py): a dead actor is replaced and its work retried.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import ray

from actors.evaluators import (CompileThenEvaluate, CompilerActor, EvaluatorActor, evaluate_groups, make_compiler_pool,
                               make_evaluator_pool)
from actors.generators import CollectiveWeightSync, GeneratorActor, PoolQueue, WeightState, make_generator_pool
from actors.learners import LearnerActor, LearnerGroup
from actors.placement import RolePlacement
from actors.pool import PoolWaiter
from actors.rankers import make_ranker_actor
from actors.startup import wait_started
from actors.task_stream import task_dataset
from pipeline.core.config import RunConfig
from pipeline.core.errors import UserError
from pipeline.core.lost_work import ItemFailed
from pipeline.core.node_roles import NODE_ROLES, config_value
from pipeline.rl.distributed import COLLECTIVE_ENV


def ray_runtime_env() -> dict:
    """The runtime_env every ray.init of the project passes: COLLECTIVE_ENV in every worker Ray starts."""
    return {"env_vars": dict(COLLECTIVE_ENV)}


def start_ray(cpus_needed: int, num_gpus: int | None = None) -> None:
    """Join the cluster this job was submitted to, or start a local Ray sized for the pools (with
    `num_gpus`, Ray offers only that many of the host's GPUs). This process and every process Ray
    starts get COLLECTIVE_ENV (NVLink multicast off)."""
    os.environ.update(COLLECTIVE_ENV)
    if ray.is_initialized():
        return
    if os.environ.get("RAY_ADDRESS"):
        ray.init(log_to_driver=False, runtime_env=ray_runtime_env())
    else:
        ray.init(num_cpus=max(os.cpu_count() or 1, cpus_needed), num_gpus=num_gpus, include_dashboard=False,
                 log_to_driver=False, runtime_env=ray_runtime_env())


@dataclass(frozen=True)
class RoleActors:
    """The actor class of each role of NODE_ROLES (pipeline/core/node_roles.py; a test keeps the two alike). A
    run gets the real ones; a simulation of the cluster passes stand-ins with the same methods
    (benchmarks/sim/roles.py). No config key selects them: only code that makes a `Cluster` itself can, and the
    CLI passes none."""
    generator: type = GeneratorActor
    evaluator: type = EvaluatorActor
    compiler: type = CompilerActor
    learner: type = LearnerActor


class ClusterStartError(UserError, RuntimeError):
    """An actor could not be started even after the pool replaced it (a model that does not load, too little memory)."""


class TaskStream:
    """The run's tasks, streamed through Ray Data (actors/task_stream.py) from a `TaskReader`, which keeps the
    seeded order and the position a checkpoint saves (`reader.state()`)."""

    def __init__(self, reader, model_path: str | Path | None = None):
        """`model_path`: the policy whose tokenizer the stream's workers use for each task's opening prompt ids
        (`openings`); None: the rows carry no ids."""
        from pipeline.core.config import ConfigError
        if not len(reader):
            raise ConfigError("the task stream is empty; check tasks.source and tasks.kinds")
        self.reader = reader
        self.model_path = model_path
        self.openings: dict[str, list[int]] = {}
        """task id -> opening prompt ids, of the tasks the last `take` returned"""
        self._rows = None
        ctx = ray.data.DataContext.get_current()  # one small dataset per epoch: no progress output for it
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        logging.getLogger("ray.data").setLevel(logging.WARNING)

    def take(self, n: int) -> list:
        from pipeline.rollout.openings import OPENING_COLUMN, unpack_ids
        out = []
        self.openings = {}
        while len(out) < n:
            if self._rows is None:
                self._rows = iter(task_dataset(self.reader, model_path=self.model_path).iter_rows())
            row = next(self._rows, None)
            if row is None:  # the epoch ended; the reader already points at the next one
                self._rows = None
                continue
            out.append(self.reader.task(row))  # the reader's own Task: no JSON parsed on the driver
            if OPENING_COLUMN in row:
                self.openings[out[-1].id] = unpack_ids(row[OPENING_COLUMN])
            self.reader.consumed(row)
        return out

    def close(self) -> None:
        """End the epoch's Ray Data iterator now (it reports to Ray as it ends); the reader keeps its position."""
        close = getattr(self._rows, "close", None)  # a generator over the dataset's rows
        if close is not None:
            close()
        self._rows = None


class Training:
    """The actors of one RL run, as the step loop (pipeline/rl/loop.py) sees them:
    `generation` and `evaluation` WorkQueues, `waiter` (one wait over both), `generation_slots`, `learners` (a LearnerGroup:
    submit_train/finish_train/busy_s/save/load/size), `sync_weights(version)`, `weight_version`,
    `ranker_preferences(items)` (None without the ranker term), `restarts()`, `sizes` (actors per role of NODE_ROLES),
    `compile_s()` (the compile workers' busy seconds so far)."""

    def __init__(self, cfg: RunConfig, model_path: str | Path, evaluator_gpus: int, placement: RolePlacement,
                 roles: RoleActors):
        self.learners = LearnerGroup(cfg.learner, cfg.rl, model_path, cfg.rollout.temperature,
                                     cfg.train.learner_gpus_per_rank, cfg.run.seed, placement.options("learner"),
                                     roles.learner, top_p=cfg.rollout.top_p,
                                     start_timeout_s=cfg.cluster.start_timeout_s)
        self._start_timeout_s = cfg.cluster.start_timeout_s
        self._roles = roles
        self._role_resources = {config_value(cfg, r.resource_field) for r in NODE_ROLES.values()}
        self._pools = []
        self._ranker = None
        try:
            self._weights: WeightState | CollectiveWeightSync = WeightState()
            if cfg.train.weight_sync == "collective":  # NCCL between GPUs; gloo when the learner runs on CPU
                self._weights = CollectiveWeightSync(self.learners,
                                                     "nccl" if cfg.train.learner_gpus_per_rank > 0 else "gloo")
            self.generators = make_generator_pool(
                cfg.model, cfg.rollout, cfg.run.seed, num_gpus_per_actor=cfg.train.generator_gpus_per_actor,
                max_retries=cfg.eval.max_retries,
                weights=self._weights if isinstance(self._weights, WeightState) else None,
                placement=placement.options("generator"), actor_cls=roles.generator)
            self._pools.append(self.generators)
            self.evaluators = make_evaluator_pool(cfg.eval, cfg.compile, evaluator_gpus, cfg.train.evaluator_gpu_fraction,
                                                  placement.options("evaluator"), roles.evaluator)
            self._pools.append(self.evaluators)
            self.compilers = make_compiler_pool(cfg.compile, cfg.eval.max_retries, cfg.eval.gate_profile,  # nvcc, CPUs
                                                placement.options("compiler"), roles.compiler, cfg.eval.limits)
            self._pools.append(self.compilers)
            self._ranker = make_ranker_actor(cfg.ranker, cfg.compile) if cfg.reward.w_ranker > 0 else None
        except BaseException:
            self.close()
            raise
        self.generation = PoolQueue(self.generators, "generate")
        self.waiter = PoolWaiter((self.generators, self.compilers, self.evaluators))  # one wait over all of a step's work
        self.evaluation = CompileThenEvaluate(self.compilers, self.evaluators, self.waiter,
                                              cfg.compile.candidates_per_call)
        self.generation_slots = self.generators.size
        self.sizes = {"generator": self.generators.size, "evaluator": self.evaluators.capacity,
                      "learner": self.learners.size, "compiler": self.compilers.capacity}
        self.ranker_preferences = self._preferences if self._ranker is not None else None

    def wait_ready(self) -> None:
        """Block until every generator, evaluator and compiler actor has started (a generator's engine
        loaded), through the supervised pools, so an actor that dies while starting is replaced as it
        would be in a step; the learner ranks are set up when this object is made. Actors the cluster has no
        room for end the wait with ClusterTooSmall (actors/startup.py)."""
        wait_started([a.__ray_ready__.remote() for pool in self._pools for a in pool.actors], self._start_timeout_s)
        for pool in self._pools:
            lost = [r for r in pool.map("pid", [()] * pool.size) if isinstance(r, ItemFailed)]
            if lost:
                raise ClusterStartError(f"an actor died on every start ({lost[0]}); see the Ray logs of that "
                                        f"actor (`ray logs`) for why, fix it and start again")

    def placement_record(self) -> dict[str, list[dict]]:
        """Where the run's actors are, per role of NODE_ROLES: for each live actor its node's id and the custom
        resources that label that node (its node type's role resource), from Ray's state API; {} where that API
        does not answer (no dashboard, as in a local run). Written to the run directory as `placement.json`."""
        from ray.util.state import list_actors
        try:
            live = list_actors(filters=[("state", "=", "ALIVE")], limit=10000, raise_on_missing_output=False)
        except Exception:  # the state API lives in the dashboard, which a local run starts without
            return {}
        labels = {n["NodeID"]: {k: v for k, v in n["Resources"].items() if k in self._role_resources}
                  for n in ray.nodes() if n.get("Alive")}
        role_of = {getattr(self._roles, name).__name__: name for name in NODE_ROLES}
        record: dict[str, list[dict]] = {name: [] for name in NODE_ROLES}
        for actor in live:
            if actor.class_name in role_of:
                record[role_of[actor.class_name]].append({"node_id": actor.node_id,
                                                           "node_resources": labels.get(actor.node_id, {})})
        return record

    @property
    def weight_version(self) -> int:
        return self._weights.version

    def sync_weights(self, version: int) -> dict:
        """Send the learner's weights to every generator as `version` (train.weight_sync picks the path);
        the collective path returns its figures (bytes, buckets, seconds), the object store {}."""
        if isinstance(self._weights, CollectiveWeightSync):
            return self._weights.broadcast(self.generators, version)
        self._weights.broadcast(self.generators, self.learners.export_ref(), version)
        return {}

    def _preferences(self, items: list[tuple]) -> list:
        """The ranker's preferences for many (task, candidates, results) at once: every call is sent
        before any answer is awaited."""
        return ray.get([self._ranker.preferences_for_results.remote(*item) for item in items])

    def restarts(self) -> int:
        return sum(p.restarts for p in self._pools)

    def compile_s(self) -> float:
        """Seconds the compile workers spent on the candidates this run sent them, so far (their busy time)."""
        return self.evaluation.compile_s

    def close(self) -> None:
        for pool in self._pools:
            pool.shutdown()
        self._pools = []
        self.learners.shutdown()
        if self._ranker is not None:
            ray.kill(self._ranker)
            self._ranker = None


class Cluster:
    """One job's view of Ray (the module docstring): made by the CLI, handed to the job."""

    def __init__(self, cfg: RunConfig, cpus_needed: int | None = None, num_gpus: int | None = None,
                 roles: RoleActors = RoleActors()):
        self.cfg = cfg
        self.roles = roles
        start_ray(cpus_needed if cpus_needed is not None else cfg.compile.workers + 1, num_gpus)

    def placement(self, roles: tuple[str, ...]) -> RolePlacement:
        """Where the `roles` of a job go on this cluster (actors/placement.py); a PlacementError when a role
        must be pinned to nodes the cluster does not offer."""
        cfg = self.cfg
        per_gpu = cfg.eval.workers_per_gpu
        return RolePlacement.of(cfg, roles, {"generator": cfg.train.generator_gpus_per_actor,
                                             "learner": cfg.train.learner_gpus_per_rank,
                                             "evaluator": (cfg.train.evaluator_gpu_fraction / per_gpu
                                                           if cfg.eval.gpus != 0 else 0.0)})

    @property
    def gpus(self) -> float:
        """GPUs in the cluster, as Ray sees them."""
        return float(ray.cluster_resources().get("GPU", 0))

    def evaluator_gpus(self, placement: RolePlacement | None = None) -> int:
        """GPUs given to evaluation: eval.gpus, or every GPU Ray sees when it is -1 (every GPU of the
        evaluator nodes when evaluators are pinned to them)."""
        placement = placement if placement is not None else self.placement(("evaluator",))
        pinned = placement.gpus_of("evaluator")
        seen = int(self.gpus if pinned is None else pinned)
        if self.cfg.eval.gpus > seen:
            raise UserError(f"eval.gpus = {self.cfg.eval.gpus} but Ray sees {seen} GPU(s); lower eval.gpus or "
                            "add GPU nodes")
        return seen if self.cfg.eval.gpus < 0 else self.cfg.eval.gpus

    @contextmanager
    def _evaluation_pools(self):
        """(compile pool, evaluator pool, GPUs given to evaluation); the pools shut down on exit."""
        cfg = self.cfg
        placement = self.placement(("evaluator", "compiler"))
        n_gpus = self.evaluator_gpus(placement)
        with make_compiler_pool(cfg.compile, cfg.eval.max_retries, cfg.eval.gate_profile, placement.options("compiler"),
                                self.roles.compiler, cfg.eval.limits) as compilers, \
                make_evaluator_pool(cfg.eval, cfg.compile, n_gpus, placement=placement.options("evaluator"),
                                    actor_cls=self.roles.evaluator) as evaluators:
            yield compilers, evaluators, n_gpus

    @contextmanager
    def evaluation(self) -> Iterator[tuple[CompileThenEvaluate, int]]:
        """(the compile-then-evaluate WorkQueue, GPUs given to evaluation); the pools shut down on exit."""
        with self._evaluation_pools() as (compilers, evaluators, n_gpus):
            yield CompileThenEvaluate(compilers, evaluators,
                                      candidates_per_call=self.cfg.compile.candidates_per_call), n_gpus

    def evaluate_groups(self, groups: list[tuple], on_group=None) -> tuple[list, int, int]:
        """Every (task, candidates) group through fresh pools: (results per group, GPUs used, actor restarts);
        `on_group(index, results)` as each group finishes."""
        with self._evaluation_pools() as (compilers, evaluators, n_gpus):
            results = evaluate_groups(compilers, evaluators, groups, on_group, self.cfg.compile.candidates_per_call)
            return results, n_gpus, compilers.restarts + evaluators.restarts

    def task_stream(self, reader, model_path: str | Path | None = None) -> TaskStream:
        """The run's tasks through Ray Data; with `model_path`, with their opening prompt ids (`TaskStream.openings`)."""
        return TaskStream(reader, model_path)

    @contextmanager
    def training(self, model_path: str | Path) -> Iterator[Training]:
        """The actors of one RL run (`Training`); every one ends on exit."""
        placement = self.placement(tuple(NODE_ROLES))
        training = Training(self.cfg, model_path, self.evaluator_gpus(placement), placement, self.roles)
        try:
            yield training
        finally:
            training.close()
