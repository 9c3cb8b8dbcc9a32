"""`ray job submit ... cudaperf train cluster.pin_roles=always` to a cluster of cluster.yaml's node types, all on
this machine: a head that runs the job's driver and the job API, and one worker node per node type offering its
role resource. The job's own record of where its actors ran (`placement.json` in the run directory) shows each role
on its node type."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

pytestmark = pytest.mark.integration

OBJECT_STORE_BYTES = 200 * 1024 * 1024
CPUS = {"generators": 2, "evaluators": 2, "learners": 2, "compilers": 3}  # configs/local.yaml's actors, and room


def test_a_submitted_job_runs_each_role_on_its_node_type(tmp_path, monkeypatch):
    from ray.cluster_utils import Cluster
    from benchmarks.sim.cluster import role_resources
    from pipeline.rl.distributed import free_port
    bin_dir = Path(sys.executable).parent
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # as this process already runs Ray: both sides alike
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "")
                                                                    .split(os.pathsep) if p]))
    dashboard = free_port()
    types = role_resources()
    assert set(types) == set(CPUS), "a node type of cluster.yaml without CPUs in this test"
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "num_gpus": 0, "include_dashboard": True, "dashboard_port": dashboard,
        "dashboard_agent_listen_port": free_port(),  # not the default port, which another Ray may hold
        "object_store_memory": OBJECT_STORE_BYTES})
    try:
        for node_type, resource in types.items():
            cluster.add_node(num_cpus=CPUS[node_type], num_gpus=0, object_store_memory=OBJECT_STORE_BYTES,
                             resources={resource: 8})
        cluster.wait_for_nodes()
        # No --working-dir: every raylet of this one-machine cluster shares the session directory, and each
        # node's agent unpacks the job's package into the same folder, under the driver's feet (the driver then
        # finds task files missing). On a real cluster each node has its own. Here the job runs in the checkout
        # itself, and its actors import it through PYTHONPATH.
        train = ("cudaperf train --config configs/local.yaml cluster.pin_roles=always train.steps=1 "
                 "train.wandb_mode=disabled train.progress_bar=false run.name=job "
                 f"run.output_dir={tmp_path}")
        command = [str(bin_dir / "ray"), "job", "submit", "--address", f"http://127.0.0.1:{dashboard}", "--",
                   "bash", "-c", f"cd {ROOT} && {train}"]
        deadline = time.monotonic() + 120
        while True:  # the head's job agent starts a little after the head itself
            job = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
            if "No available agent" not in job.stderr or time.monotonic() > deadline:
                break
            time.sleep(3)
    finally:
        cluster.shutdown()
    log = job.stdout[-4000:] + job.stderr[-2000:]
    assert job.returncode == 0 and "succeeded" in job.stdout, log
    placement = json.loads((tmp_path / "job" / "placement.json").read_text())
    from pipeline.core.config import load_config
    from pipeline.core.node_roles import NODE_ROLES, config_value
    cfg = load_config(ROOT / "configs" / "local.yaml")
    wanted = {name: config_value(cfg, role.resource_field) for name, role in NODE_ROLES.items()}
    assert set(placement) == set(NODE_ROLES)
    for role, actors in placement.items():
        assert actors, f"no {role} actor found in the job's placement record: {placement}"
        assert all(set(a["node_resources"]) == {wanted[role]} for a in actors), (role, actors)
