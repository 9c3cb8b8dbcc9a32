"""cluster.yaml passes Ray's own cluster-config validation (what `ray up` runs), and the validator does
reject a broken copy, so the check can fail."""
import copy
from pathlib import Path

import pytest
import yaml

CLUSTER_YAML = Path(__file__).parents[1] / "cluster.yaml"


def validate(cfg: dict) -> None:
    from ray.autoscaler._private.util import prepare_config, validate_config
    validate_config(prepare_config(copy.deepcopy(cfg)))


def test_cluster_yaml_is_valid_and_has_every_role():
    """Every role of the table of node roles (pipeline/core/node_roles.py) has its node type, offering the
    resource its config field names by default."""
    from pipeline.core.config import RunConfig
    from pipeline.core.node_roles import NODE_ROLES, config_value
    cfg = yaml.safe_load(CLUSTER_YAML.read_text())
    validate(cfg)
    types = cfg["available_node_types"]
    assert {role.node_type for role in NODE_ROLES.values()} <= set(types)
    assert cfg["head_node_type"] in types
    for role in NODE_ROLES.values():
        assert config_value(RunConfig(), role.resource_field) in types[role.node_type]["resources"], role.name


def test_validator_rejects_broken_configs():
    cfg = yaml.safe_load(CLUSTER_YAML.read_text())
    bad_head = {**cfg, "head_node_type": "nope"}
    with pytest.raises(ValueError, match="head_node_type"):
        validate(bad_head)
    misspelt = copy.deepcopy(cfg)
    misspelt["available_node_types"]["compilers"]["min_worker"] = 1
    with pytest.raises(Exception, match="min_worker"):
        validate(misspelt)
