"""The table of node roles (pipeline/core/node_roles.py) against what it names: every row's config fields
resolve on the default config and its node type is in cluster.yaml, every resource field of the `cluster`
section belongs to a row, and a row added without its config field or node type fails here, not in a run."""
from pathlib import Path

import pytest
import yaml

from pipeline.core import node_roles
from pipeline.core.config import ClusterSection, RunConfig
from pipeline.core.node_roles import NODE_ROLES, MissingConfigField, NodeRole, config_value, table_problems

NODE_TYPES = yaml.safe_load((Path(__file__).parents[1] / "cluster.yaml").read_text())["available_node_types"]


def test_every_role_has_its_config_fields_and_its_node_type():
    assert {"generator", "evaluator", "learner", "compiler"} <= set(NODE_ROLES)
    assert table_problems(RunConfig(), NODE_TYPES) == []
    cfg = RunConfig()
    for role in NODE_ROLES.values():
        assert isinstance(config_value(cfg, role.count_field), int), role.name
        assert not role.gpus_field or isinstance(config_value(cfg, role.gpus_field), float), role.name
        assert isinstance(config_value(cfg, role.resource_field), str), role.name
        assert role.name == role.name.lower() and role.short and role.description, role.name


def test_every_resource_field_of_the_cluster_section_belongs_to_a_role():
    fields = {f"cluster.{name}" for name in ClusterSection.model_fields if name.endswith("_resource")}
    assert fields == {role.resource_field for role in NODE_ROLES.values()}


def test_a_row_without_its_config_field_or_node_type_is_caught(monkeypatch):
    monkeypatch.setitem(NODE_ROLES, "ranker", NodeRole("ranker", "ranker.actors", "", "cluster.ranker_resource",
                                                       "rankers", True, "rank", "serves the ranker's preferences"))
    problems = table_problems(RunConfig(), NODE_TYPES)
    assert len(problems) == 3, problems
    assert "role 'ranker': its count field" in problems[0] and "'ranker.actors'" in problems[0]
    assert "role 'ranker': its resource field" in problems[1] and "'cluster.ranker_resource'" in problems[1]
    assert "cluster.yaml has no node type 'rankers'" in problems[2]
    with pytest.raises(MissingConfigField, match="no field 'cluster.ranker_resource'.*pipeline/core/node_roles.py"):
        config_value(RunConfig(), "cluster.ranker_resource")  # what placement would have met in a run


def test_a_node_type_that_does_not_offer_the_role_s_resource_is_caught():
    types = {**NODE_TYPES, "compilers": {**NODE_TYPES["compilers"], "resources": {"cpu_node": 32}}}
    assert table_problems(RunConfig(), types) == [
        "role 'compiler': cluster.yaml's node type 'compilers' does not offer 'compiler_node' "
        "(cluster.compiler_resource's default); add it to that node type's resources"]


def test_placement_reads_the_table_not_a_list_of_its_own(monkeypatch):
    """A row the table gains is placed, with the resource its config field names."""
    from actors.placement import AFFINITY, RolePlacement
    monkeypatch.setitem(NODE_ROLES, "second_compiler", NodeRole(
        "second_compiler", "compile.workers", "", "cluster.compiler_resource", "compilers", False, "c2", "test"))
    node_types = [{"CPU": 4.0, "compiler_node": 4.0},
                  {"GPU": 8.0, "generator_node": 1.0, "evaluator_node": 1.0, "learner_node": 1.0}]
    p = RolePlacement.of(RunConfig(), node_types=node_types)
    assert p.options("second_compiler") == {"resources": {"compiler_node": AFFINITY}}
    assert node_roles.timed_roles() == [r for r in NODE_ROLES.values() if r.name != "second_compiler"]
