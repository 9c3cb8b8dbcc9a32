"""Roles on their node types (actors/placement.py), decided from the node types a cluster offers, without Ray."""
import pytest

from actors.placement import AFFINITY, PlacementError, RolePlacement
from pipeline.core.config import load_config
from pipeline.core.node_roles import NODE_ROLES, config_value

NODE_TYPES = [{"CPU": 8.0},  # the head
              {"CPU": 2.0, "GPU": 8.0, "generator_node": 8.0}, {"CPU": 2.0, "GPU": 8.0, "evaluator_node": 8.0},
              {"CPU": 2.0, "GPU": 8.0, "learner_node": 8.0}, {"CPU": 32.0, "compiler_node": 32.0}]


def cfg(*overrides):
    return load_config(None, list(overrides))


def test_on_a_cluster_of_role_nodes_every_role_is_pinned_to_its_own():
    p = RolePlacement.of(cfg(), node_types=NODE_TYPES, gpus_per_actor={"evaluator": 1.0, "generator": 1.0})
    assert {r: p.options(r) for r in NODE_ROLES} == {
        "generator": {"resources": {"generator_node": AFFINITY}}, "evaluator": {"resources": {"evaluator_node": AFFINITY}},
        "learner": {"resources": {"learner_node": AFFINITY}}, "compiler": {"resources": {"compiler_node": AFFINITY}}}
    assert p.gpus_of("evaluator", NODE_TYPES) == 8.0 and p.gpus_of("compiler", NODE_TYPES) == 0.0


def test_on_a_plain_ray_roles_go_anywhere_unless_pinning_is_demanded():
    plain = [{"CPU": 2.0, "GPU": 1.0}]
    p = RolePlacement.of(cfg(), node_types=plain)
    assert all(p.options(r) == {} for r in NODE_ROLES)
    assert p.gpus_of("evaluator", plain) is None
    with pytest.raises(PlacementError, match="no node of this cluster offers the resource 'generator_node'"):
        RolePlacement.of(cfg("cluster.pin_roles=always"), node_types=plain)
    assert RolePlacement.of(cfg("cluster.pin_roles=never"), node_types=NODE_TYPES).options("evaluator") == {}


def test_a_role_no_node_can_host_fails_at_start_in_one_sentence_naming_the_fix():
    without_learners = [t for t in NODE_TYPES if "learner_node" not in t]
    with pytest.raises(PlacementError) as e:
        RolePlacement.of(cfg(), node_types=without_learners)
    message = str(e.value)
    assert "'learner_node'" in message and "cluster.learner_resource=''" in message and "\n" not in message
    # only the roles a job starts are asked for: verify starts no learner
    assert RolePlacement.of(cfg(), ("evaluator", "compiler"), node_types=without_learners).options("learner") == {}
    # a resource set to '' places that role anywhere, the others stay pinned
    p = RolePlacement.of(cfg("cluster.learner_resource="), node_types=without_learners)
    assert p.options("learner") == {} and p.options("evaluator") == {"resources": {"evaluator_node": AFFINITY}}


def test_a_role_whose_nodes_lack_the_gpus_it_asks_for_fails_at_start():
    with pytest.raises(PlacementError, match="each compiler asks for 1 GPU"):
        RolePlacement.of(cfg(), node_types=NODE_TYPES, gpus_per_actor={"compiler": 1.0})


def test_the_default_resources_are_the_ones_cluster_yaml_gives_its_node_types():
    import yaml
    from pathlib import Path
    types = yaml.safe_load((Path(__file__).resolve().parents[2] / "cluster.yaml").read_text())["available_node_types"]
    offered = {name for spec in types.values() for name in spec.get("resources", {})}
    assert {config_value(cfg(), role.resource_field) for role in NODE_ROLES.values()} == offered


def test_every_role_has_its_actor_class_and_an_actor_count_in_a_training_run():
    import ast
    import dataclasses
    from pathlib import Path
    from actors.cluster import RoleActors
    assert {f.name for f in dataclasses.fields(RoleActors)} == set(NODE_ROLES)
    source = (Path(__file__).resolve().parents[2] / "actors" / "cluster.py").read_text()
    sizes = next(n.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Assign)
                 and any(isinstance(t, ast.Attribute) and t.attr == "sizes" for t in n.targets))
    assert {k.value for k in sizes.keys} == set(NODE_ROLES), "Training.sizes: the actor count of every role"

