"""`offered_node_types` reads the node types an autoscaler may start from Ray's stored cluster config (a private
call: `ray._private.state.state.get_cluster_config`). On Ray's fake multi-node provider, a node type with no node
started yet is offered, so a job pinned to it starts instead of failing placement. A Ray release that moves the
call fails this test, not a user's placement.

Ray's fake provider runs `ray stop --force` when it starts and stops: every Ray of this machine ends, as between
the integration tests, which run one after another."""
import os
import sys
import time
from pathlib import Path

import pytest
import ray

pytestmark = pytest.mark.integration

IDLE_TYPE = {"CPU": 2.0, "evaluator_node": 8.0}


def test_an_idle_node_type_of_the_autoscaler_is_offered(monkeypatch):
    from ray.cluster_utils import AutoscalingCluster
    from actors.placement import offered_node_types
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # this `ray`
    cluster = AutoscalingCluster(
        head_resources={"CPU": 1},
        worker_node_types={"evaluators": {"resources": dict(IDLE_TYPE), "node_config": {}, "min_workers": 0,
                                          "max_workers": 1}},
        autoscaler_v2=True)
    try:
        cluster.start()
        ray.init("auto", log_to_driver=False)
        deadline = time.monotonic() + 60
        while (types := offered_node_types()) and IDLE_TYPE not in types and time.monotonic() < deadline:
            time.sleep(1)  # the autoscaler stores its config a moment after the head starts
        assert IDLE_TYPE in types, types
        assert not any("evaluator_node" in n["Resources"] for n in ray.nodes() if n["Alive"])  # none started yet
    finally:
        ray.shutdown()
        cluster.shutdown()
