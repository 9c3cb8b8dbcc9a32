"""The node roles of a training run, as one table: every list of roles in the project derives from it.

In: nothing (plain data). Out: `NODE_ROLES` (role name -> `NodeRole`), `config_value` (a dotted field of
the run configuration) and `table_problems` (what the table names that the config or cluster.yaml lacks).
No Ray, no import of the config module: a row names its config fields as dotted paths, so the table sits
in the lowest layer and both `pipeline/` and `actors/` read it.

Who reads it:
- `actors/placement.py`: the roles a job may pin, and each role's resource field (`resource_field`);
- `actors/cluster.py`: the roles a training run places (`RoleActors` has one actor class per row);
- `pipeline/rl/step.py` and `pipeline/rl/tracking.py`: the busy fraction `busy/<name>` of every timed role,
  its plot and its label on the progress bar and the step line (`short`);
- `benchmarks/scale_sim.py`: the busy fractions it reports;
- the tests: every row's config fields resolve on the default config and its node type is in cluster.yaml
  (tests/test_node_roles.py, tests/test_cluster_yaml.py), so a row without its field fails a test, not a run.
Adding a role: docs/extending.md, "A node role".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NodeRole:
    """One kind of actor of a training run, and where the config and cluster.yaml speak of it."""
    name: str            # placement key, metric `busy/<name>`, field of actors.cluster.RoleActors
    count_field: str     # dotted config field of how many actors it runs (or GPUs, for the evaluators)
    gpus_field: str      # dotted config field of its GPU share; '' for a CPU-only role
    resource_field: str  # dotted config field naming the custom resource that labels its nodes
    node_type: str       # its node type in cluster.yaml's available_node_types (offering that resource)
    timed: bool          # its busy seconds are measured every step and logged as `busy/<name>`
    short: str           # its label on the progress bar and the step line
    description: str     # what its actors do, in one line


NODE_ROLES: dict[str, NodeRole] = {r.name: r for r in (  # placement checks and metrics follow this order
    NodeRole("generator", "rollout.generator_actors", "train.generator_gpus_per_actor", "cluster.generator_resource",
             "generators", True, "gen", "sample the policy's answers, one vLLM or transformers engine per actor"),
    NodeRole("evaluator", "eval.gpus", "train.evaluator_gpu_fraction", "cluster.evaluator_resource",
             "evaluators", True, "eval", "run, check and time candidates on a GPU (eval.workers_per_gpu per GPU)"),
    NodeRole("learner", "learner.ranks", "train.learner_gpus_per_rank", "cluster.learner_resource",
             "learners", True, "learn", "update the policy (DeepSpeed ranks) and export its weights"),
    NodeRole("compiler", "compile.workers", "", "cluster.compiler_resource",
             "compilers", True, "comp", "gate, build (nvcc) and check candidates on CPUs"),
)}


def timed_roles() -> list[NodeRole]:
    """The roles whose busy fraction every training step logs, in table order."""
    return [r for r in NODE_ROLES.values() if r.timed]


class MissingConfigField(LookupError):
    """A dotted field the table names that the configuration does not have (a bug of the table or the schema)."""


def config_value(cfg: Any, dotted: str) -> Any:
    """The value of `dotted` (`section.field`) in the run configuration `cfg`; MissingConfigField naming the
    path when a part of it is missing."""
    node = cfg
    for part in dotted.split("."):
        if part not in getattr(type(node), "model_fields", {}):  # a config section: its declared fields only
            raise MissingConfigField(f"the configuration has no field '{dotted}' ('{part}' is not a field of "
                                     f"{type(node).__name__}); add it to pipeline/core/config.py or fix the row "
                                     "in pipeline/core/node_roles.py")
        node = getattr(node, part)
    return node


def table_problems(cfg: Any, node_types: dict[str, dict]) -> list[str]:
    """Every mismatch between the table and the default config `cfg` or cluster.yaml's `node_types`
    (available_node_types), one sentence each: a field that does not resolve, a node type that is missing or
    that does not offer the role's default resource. [] when they agree."""
    problems = []
    for role in NODE_ROLES.values():
        for kind, dotted in (("count", role.count_field), ("GPU share", role.gpus_field),
                             ("resource", role.resource_field)):
            if not dotted:
                continue
            try:
                config_value(cfg, dotted)
            except MissingConfigField as e:
                problems.append(f"role '{role.name}': its {kind} field: {e}")
        if role.node_type not in node_types:
            problems.append(f"role '{role.name}': cluster.yaml has no node type '{role.node_type}'; add one "
                            f"offering its resource under available_node_types")
            continue
        try:
            resource = config_value(cfg, role.resource_field)
        except MissingConfigField:
            continue  # reported above
        if resource not in (node_types[role.node_type].get("resources") or {}):
            problems.append(f"role '{role.name}': cluster.yaml's node type '{role.node_type}' does not offer "
                            f"'{resource}' ({role.resource_field}'s default); add it to that node type's resources")
    return problems
