"""A multi-node Ray cluster on this machine, with the node types of cluster.yaml and fake GPU counts.

`simulated_cluster(layout)` starts one raylet per node (`ray.cluster_utils.Cluster`): a head that hosts only
the driver, then per node type of cluster.yaml (generators, evaluators, learners, compilers) the nodes the
layout asks for, each offering its role resource (`generator_node`, ...) and its simulated GPUs. The driver
joins it with `ray.init(address=...)`, so `actors.cluster.Cluster` sees a multi-node cluster exactly as after
`ray up`, and `cluster.pin_roles=auto` pins every role to its node type.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import ray
import yaml

ROOT = Path(__file__).resolve().parents[2]
OBJECT_STORE_BYTES = 200 * 1024 * 1024  # per node; the smallest Ray allows is 75 MiB


def role_resources(cluster_yaml: Path = ROOT / "cluster.yaml") -> dict[str, str]:
    """Node type name -> its role resource, from cluster.yaml's available_node_types (the head has none)."""
    types = yaml.safe_load(cluster_yaml.read_text())["available_node_types"]
    return {name: next(iter(spec["resources"])) for name, spec in types.items() if spec.get("resources")}


@dataclass
class NodeSpec:
    node_type: str          # a node type of cluster.yaml: generators, evaluators, learners, compilers
    cpus: int
    gpus: int = 0
    extra: dict = field(default_factory=dict)


@contextmanager
def simulated_cluster(nodes: list[NodeSpec], head_cpus: int = 1):
    """Start the head and `nodes`, connect this process as the driver; yields the `ray.cluster_utils.Cluster`
    (whose `remove_node` takes a node away mid-run). Everything stops on exit."""
    from ray.cluster_utils import Cluster
    paths = [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))  # workers import benchmarks.sim.roles
    resources = role_resources()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": head_cpus, "num_gpus": 0,
                                                            "object_store_memory": OBJECT_STORE_BYTES})
    try:
        for spec in nodes:
            cluster.add_node(num_cpus=spec.cpus, num_gpus=spec.gpus, object_store_memory=OBJECT_STORE_BYTES,
                             resources={resources[spec.node_type]: max(1, spec.gpus or spec.cpus), **spec.extra})
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def node_of_each_actor() -> dict[str, set[str]]:
    """Actor class name -> the node ids its live actors run on (Ray's state API)."""
    from ray.util.state import list_actors
    out: dict[str, set[str]] = {}
    for a in list_actors(filters=[("state", "=", "ALIVE")], limit=10000):
        out.setdefault(a.class_name, set()).add(a.node_id)
    return out
