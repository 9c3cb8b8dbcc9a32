"""Roles on their node types: each role's actors go to the nodes that offer its custom resource.

`cluster.yaml` gives each node type a custom resource (generator_node, evaluator_node, learner_node,
compiler_node); the `cluster` config section names them. The roles and the config field of each role's
resource come from the table of node roles (pipeline/core/node_roles.py). `RolePlacement.of(cfg)` reads what the running
cluster offers (its live nodes, and the node types its autoscaler may start) and decides per role:
- pinned: the role's actors ask for a sliver of its resource (`AFFINITY`): a label, not a count; GPUs
  and CPUs still do the counting, so the resource's amount on a node need not match anything;
- anywhere: no resource asked (a plain local Ray, `cluster.pin_roles=never`, or a role resource '').
A role that must be pinned (`pin_roles=always`, or `auto` on a cluster that offers role resources) but that
no node type offers, or whose nodes have too few GPUs for one of its actors, fails at start with a
`PlacementError` naming the role, the resource and the fix; Ray would otherwise wait for it for ever.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import ray

from pipeline.core.config import RunConfig
from pipeline.core.errors import UserError
from pipeline.core.node_roles import NODE_ROLES, config_value

AFFINITY = 0.001  # what an actor asks of its role's resource: any node offering it has room for 1000 actors


class PlacementError(UserError, RuntimeError):
    """A role that must be pinned to a node type the cluster does not offer (or whose nodes lack GPUs)."""


def offered_node_types() -> list[dict[str, float]]:
    """The resources of every live node, and of every node type the autoscaler may start (from its
    cluster config, where the cluster has an autoscaler: `ray up` or the fake multi-node provider)."""
    types = [dict(n["Resources"]) for n in ray.nodes() if n.get("Alive")]
    try:
        from ray._private.state import state
        config = state.get_cluster_config()
    except Exception:  # no autoscaler config stored, or a Ray without this call: the live nodes alone
        config = None
    if config is not None:
        for node_type in config.node_group_configs:
            if node_type.max_count != 0:
                types.append(dict(node_type.resources))
    return types


@dataclass(frozen=True)
class RolePlacement:
    """Per role of NODE_ROLES, the custom resource its actors ask for (None: anywhere)."""
    resources: dict[str, str | None] = field(default_factory=lambda: dict.fromkeys(NODE_ROLES))

    @classmethod
    def of(cls, cfg: RunConfig, roles: tuple[str, ...] | None = None, gpus_per_actor: dict[str, float] | None = None,
           node_types: list[dict[str, float]] | None = None) -> RolePlacement:
        """The placement of `cfg.cluster` for the `roles` a job starts (None: every role of NODE_ROLES), on the
        running cluster (or on `node_types`, for tests). `gpus_per_actor`: what one actor of each role asks
        for, checked against the GPUs of its nodes."""
        cc = cfg.cluster
        roles = tuple(NODE_ROLES) if roles is None else roles
        resource_fields = {role: NODE_ROLES[role].resource_field for role in roles}
        names = {role: config_value(cfg, path) or None for role, path in resource_fields.items()}
        if cc.pin_roles == "never":
            return cls()
        types = offered_node_types() if node_types is None else node_types
        offered = {name for t in types for name in t}
        if cc.pin_roles == "auto" and not offered & {n for n in names.values() if n}:
            return cls()
        for role, name in names.items():
            if name is None:
                continue
            hosts = [t for t in types if t.get(name, 0) > 0]
            if not hosts:
                raise PlacementError(f"no node of this cluster offers the resource '{name}' that "
                                     f"{resource_fields[role]} names for the {role}s; add a node type with "
                                     f"resources: {{{name}: N}} to cluster.yaml, or set {resource_fields[role]}='' "
                                     "to place them anywhere")
            need = (gpus_per_actor or {}).get(role, 0.0)
            if need > max(t.get("GPU", 0.0) for t in hosts):
                raise PlacementError(f"each {role} asks for {need:g} GPU(s) but the nodes offering '{name}' have "
                                     f"at most {max(t.get('GPU', 0.0) for t in hosts):g}; give that node type "
                                     f"GPUs, or lower the {role}s' GPU share")
        return cls({**dict.fromkeys(NODE_ROLES), **names})

    def gpus_of(self, role: str, node_types: list[dict[str, float]] | None = None) -> float | None:
        """GPUs of the live nodes that host `role` when it is pinned (None when it goes anywhere)."""
        name = self.resources.get(role)
        if name is None:
            return None
        types = [dict(n["Resources"]) for n in ray.nodes() if n.get("Alive")] if node_types is None else node_types
        return sum(t.get("GPU", 0.0) for t in types if t.get(name, 0) > 0)

    def options(self, role: str) -> dict:
        """Ray actor options that put one actor of `role` on its nodes ({} when it goes anywhere)."""
        name = self.resources.get(role)
        return {"resources": {name: AFFINITY}} if name else {}
