"""`offered_node_types` reads the node types an autoscaler may start from Ray's stored cluster config, through a
private call (`ray._private.state.state.get_cluster_config`; no public API gives an autoscaler's idle node types).
These tests pin the call to the installed Ray (a release that moves it fails here, not in a user's placement) and
check what the function makes of its answer: live nodes, plus every node type the autoscaler may still start."""
from types import SimpleNamespace

import pytest
import ray

from actors import placement


def test_the_private_call_exists_in_the_installed_ray():
    from ray._private.state import state
    assert callable(state.get_cluster_config)


def test_live_nodes_and_the_node_types_the_autoscaler_may_start(monkeypatch):
    from ray._private.state import state
    live = [{"Alive": True, "Resources": {"CPU": 1.0}}, {"Alive": False, "Resources": {"CPU": 64.0}}]
    groups = [SimpleNamespace(max_count=2, resources={"CPU": 2.0, "evaluator_node": 8.0}),
              SimpleNamespace(max_count=0, resources={"CPU": 4.0, "learner_node": 8.0})]  # may never start
    monkeypatch.setattr(ray, "nodes", lambda: live)
    monkeypatch.setattr(state, "get_cluster_config", lambda: SimpleNamespace(node_group_configs=groups))
    assert placement.offered_node_types() == [{"CPU": 1.0}, {"CPU": 2.0, "evaluator_node": 8.0}]


@pytest.mark.parametrize("answer", ["none", "raises"])
def test_without_an_autoscaler_the_live_nodes_alone(monkeypatch, answer):
    from ray._private.state import state

    def no_config():
        if answer == "raises":
            raise RuntimeError("the GCS holds no cluster config")
        return None
    monkeypatch.setattr(ray, "nodes", lambda: [{"Alive": True, "Resources": {"CPU": 8.0}}])
    monkeypatch.setattr(state, "get_cluster_config", no_config)
    assert placement.offered_node_types() == [{"CPU": 8.0}]
