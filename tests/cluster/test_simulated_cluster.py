"""The real driver on a simulated multi-node cluster (benchmarks/sim/): roles on their node types, and the
faults of a long run, each while a step runs: the step completes and no episode is lost."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

pytestmark = pytest.mark.integration

EPISODES = 16.0  # train.tasks_per_step 4 x rollout.samples_per_task 4 (benchmarks/sim/faults.py)


@pytest.fixture(scope="module")
def sim():
    from benchmarks.sim.cluster import NodeSpec, simulated_cluster
    nodes = [NodeSpec("generators", 2, 1), NodeSpec("evaluators", 3, 2), NodeSpec("evaluators", 3, 2),
             NodeSpec("learners", 2, 1), NodeSpec("compilers", 3)]
    with simulated_cluster(nodes) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def baseline(sim, tmp_path_factory):
    from benchmarks.sim import faults
    return faults.baseline(tmp_path_factory.mktemp("runs"))


def node_type_of() -> dict[str, str]:
    import ray
    from benchmarks.sim.cluster import role_resources
    by_resource = {r: t for t, r in role_resources().items()}
    return {n["NodeID"]: next((by_resource[r] for r in n["Resources"] if r in by_resource), "head")
            for n in ray.nodes() if n["Alive"]}


def test_each_role_runs_on_its_node_type(sim, tmp_path):
    import ray
    from actors.cluster import Cluster
    from benchmarks.sim import faults
    from benchmarks.sim.roles import stand_in_roles
    from pipeline.rollout.tiny_model import resolve_model_path
    cfg = faults.config(tmp_path, "placement")
    types = node_type_of()
    with Cluster(cfg, roles=stand_in_roles(faults.TIMES)).training(resolve_model_path(cfg.model)) as t:
        on = {role: {types[ray.get(a.node.remote())] for a in actors} for role, actors in
              (("generators", t.generators.actors), ("evaluators", t.evaluators.actors),
               ("compilers", t.compilers.actors), ("learners", t.learners.actors))}
    assert on == {"generators": {"generators"}, "evaluators": {"evaluators"}, "compilers": {"compilers"},
                  "learners": {"learners"}}


def test_a_run_asking_for_a_role_no_node_hosts_fails_at_start(sim, tmp_path):
    from actors.placement import PlacementError
    from benchmarks.sim import faults
    cfg = faults.config(tmp_path, "no_node", "cluster.learner_resource=tpu_node", "train.steps=1")
    with pytest.raises(PlacementError, match="no node of this cluster offers the resource 'tpu_node'"):
        faults.train(cfg)


def test_the_baseline_step_judges_every_episode(baseline):
    assert baseline["episodes"] == [EPISODES] and baseline["lost_episodes"] == 0
    assert baseline["correct_fraction"] == [1.0] and baseline["restarts"] == 0


def test_an_evaluator_node_lost_mid_step_loses_no_episode(sim, baseline, tmp_path):
    from benchmarks.sim import faults
    got = faults.node_lost(sim, tmp_path)
    assert got["fault_happened"] and got["restarts"] >= 1
    assert got["steps"] == [1] and got["episodes"] == [EPISODES] and got["lost_episodes"] == 0
    assert got["reward"] == baseline["reward"]  # the stand-ins' results are deterministic: the same step


def test_a_compiler_and_an_evaluator_killed_mid_step_lose_no_episode(sim, baseline, tmp_path):
    from benchmarks.sim import faults
    got = faults.actors_killed(tmp_path)
    assert got["fault_happened"] and got["restarts"] >= 1  # a killed actor is replaced when its call fails
    assert got["steps"] == [1] and got["episodes"] == [EPISODES] and got["lost_episodes"] == 0
    assert got["reward"] == baseline["reward"]


def test_a_learner_killed_in_step_two_stops_the_run_and_resume_repeats_the_step(sim, tmp_path):
    from benchmarks.sim import faults
    got = faults.learner_killed(tmp_path)
    assert got["first_run_failed_with"]  # the run stops instead of training on without its optimizer state
    assert got["steps"] == [2] and got["episodes"] == [EPISODES] and got["lost_episodes"] == 0


def test_a_driver_killed_in_step_two_is_resumed_from_its_checkpoint(sim, tmp_path):
    from benchmarks.sim import faults
    got = faults.driver_killed(sim, tmp_path)
    assert got["fault_happened"]
    assert got["steps"] == [2] and got["episodes"] == [EPISODES] and got["lost_episodes"] == 0
    assert got["logged_steps"] == [1, 2]  # metrics.jsonl: step 1 of the killed driver, step 2 of the resumed one
