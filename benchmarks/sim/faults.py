"""Faults on the simulated cluster, each while a step runs: the step must complete with every episode present.

Each scenario runs the real driver (`run_training`) with stand-in roles on a cluster from `cluster.py`, injects
one fault from a thread beside it, and returns what happened: the steps' metrics, the episodes lost, and the
seconds from the fault until the step it hit completed (`recovery_s`). tests/cluster/test_simulated_cluster.py
asserts on them; benchmarks/fault_sim.py writes them to JSON.
- `node_lost`: a node hosting evaluators is removed mid-step (its raylet stops); the pool replaces the actors
  on the nodes left.
- `actors_killed`: a compiler and an evaluator process get SIGKILL mid-step.
- `learner_killed`: the learner is killed during the second step; the run stops with an error, and a run
  resumed from the last checkpoint repeats the step.
- `driver_killed`: the driver process gets SIGKILL during the second step; `cudaperf train --resume`'s path
  (`run_training` from the last checkpoint) repeats the step.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import ray

from benchmarks.sim.cluster import ROOT
from benchmarks.sim.roles import ServiceTimes, stand_in_roles

TIMES = ServiceTimes(generate_per_sequence_s=0.005, generate_per_call_s=0.01, compile_s=0.1,
                     evaluate_per_candidate_s=0.5, update_s=0.5, export_s=0.01)
AFTER_START_S = 2.0  # a fault this long after every role's actors are up lands in the step's evaluations
BASE = ["eval.gpus=2", "eval.workers_per_gpu=1", "train.generator_gpus_per_actor=1", "train.learner_gpus_per_rank=1",
        "compile.workers=2", "tasks.source=builtin", "tasks.kinds=[c2cuda]", "train.tasks_per_step=4",
        "rollout.samples_per_task=4", "rollout.max_turns=1", "rollout.max_new_tokens=256", "train.progress_bar=false",
        "train.wandb_mode=disabled", "train.checkpoint_every_steps=1", "train.samples_per_step=0"]


def config(run_dir: Path, name: str, *extra: str):
    from pipeline.core.config import load_config
    return load_config(ROOT / "configs" / "local.yaml", [*BASE, f"run.output_dir={run_dir}", f"run.name={name}", *extra])


def train(cfg, times: ServiceTimes = TIMES, resume: Path | None = None) -> list[dict]:
    from actors.cluster import Cluster
    from pipeline.rl.loop import run_training
    run_dir = Path(cfg.run.output_dir) / cfg.run.name
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_training(cfg, run_dir, Cluster(cfg, roles=stand_in_roles(times)), resume)


def alive(class_prefix: str) -> list:
    from ray.util.state import list_actors
    return [a for a in list_actors(filters=[("state", "=", "ALIVE")], limit=10000)
            if a.class_name.startswith(class_prefix)]


def _when(condition, then, timeout_s: float = 120.0) -> threading.Thread:
    """Run `then()` in a thread as soon as `condition()` holds (`then` records when the fault happened)."""
    def body():
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)
        then()
    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


def _summary(rows: list[dict], fault_at: float | None, ended: float) -> dict:
    return {"steps": [r["step"] for r in rows], "episodes": [r.get("rollout/episodes") for r in rows],
            "lost_episodes": sum(r.get("rollout/lost_episodes", 0.0) for r in rows),
            "correct_fraction": [r.get("correct/turn_fraction") for r in rows],
            "reward": [r.get("reward/turn_mean") for r in rows],
            "restarts": max((r.get("pool/restarts", 0.0) for r in rows), default=0.0),
            "recovery_s": None if fault_at is None else round(ended - fault_at, 2)}


def baseline(run_dir: Path) -> dict:
    t0 = time.perf_counter()
    rows = train(config(run_dir, "baseline", "train.steps=1"))
    return _summary(rows, None, time.perf_counter()) | {"wall_s": round(time.perf_counter() - t0, 1)}


def _all_roles_up() -> bool:
    return all(len(alive(p)) >= n for p, n in (("StandInGenerator", 1), ("StandInLearner", 1),
                                                ("StandInCompiler", 2), ("StandInEvaluator", 2)))


def _mid_step(then) -> threading.Thread:
    """`then()` AFTER_START_S after every role's actors are up: inside the first step's evaluations."""
    return _when(_all_roles_up, lambda: (time.sleep(AFTER_START_S), then()))


def node_lost(sim, run_dir: Path) -> dict:
    """Remove a node that hosts an evaluator mid-step; the cluster gets a fresh evaluator node afterwards."""
    victim = {}

    def remove():
        node_id = alive("StandInEvaluator")[0].node_id
        victim["gpus"] = next(int(n["Resources"].get("GPU", 0)) for n in ray.nodes() if n["NodeID"] == node_id)
        victim["at"] = time.perf_counter()
        sim.remove_node(next(n for n in sim.list_all_nodes() if n.node_id == node_id))
    thread = _mid_step(remove)
    rows = train(config(run_dir, "node_lost", "train.steps=1"))
    ended = time.perf_counter()
    thread.join(timeout=5)
    if "gpus" in victim:
        from benchmarks.sim.cluster import OBJECT_STORE_BYTES, role_resources
        sim.add_node(num_cpus=victim["gpus"] + 1, num_gpus=victim["gpus"], object_store_memory=OBJECT_STORE_BYTES,
                     resources={role_resources()["evaluators"]: victim["gpus"]})
        sim.wait_for_nodes()
    return _summary(rows, victim.get("at"), ended) | {"fault": "an evaluator node removed mid-step",
                                                      "fault_happened": "gpus" in victim}


def actors_killed(run_dir: Path) -> dict:
    """SIGKILL one compiler and one evaluator process mid-step."""
    killed = {}

    def kill():
        killed["at"] = time.perf_counter()
        for prefix in ("StandInCompiler", "StandInEvaluator"):
            os.kill(alive(prefix)[0].pid, signal.SIGKILL)
            killed[prefix] = True
    thread = _mid_step(kill)
    rows = train(config(run_dir, "actors_killed", "train.steps=1"))
    ended = time.perf_counter()
    thread.join(timeout=5)
    return _summary(rows, killed.get("at"), ended) | {"fault": "SIGKILL of a compiler and an evaluator mid-step",
                                                      "fault_happened": len(killed) == 3}


def learner_killed(run_dir: Path) -> dict:
    """Kill the learner during step 2 (after step 1's checkpoint); resume from that checkpoint: step 2 again."""
    from pipeline.rl.tracking import checkpoint_dir, latest_checkpoint
    name = "learner_killed"
    cfg = config(run_dir, name, "train.steps=2")
    slow = ServiceTimes(**{**TIMES.__dict__, "update_s": 4.0})
    ckpt = checkpoint_dir(run_dir / name, 1) / "run_state.json"
    killed = {}

    def kill():
        time.sleep(AFTER_START_S + 1.5)  # step 2's rollout, then its update (4 s)
        killed["at"] = time.perf_counter()
        for a in alive("StandInLearner"):
            os.kill(a.pid, signal.SIGKILL)
    thread = _when(lambda: ckpt.exists(), kill)
    failed = ""
    try:
        train(cfg, slow)
    except Exception as e:  # the learner died: the run stops, naming it
        failed = f"{type(e).__name__}"
    thread.join(timeout=5)
    rows = train(cfg, slow, resume=latest_checkpoint(run_dir / name))
    ended = time.perf_counter()
    return _summary(rows, killed.get("at"), ended) | {"fault": "the learner killed in step 2, then --resume",
                                                    "first_run_failed_with": failed}


DRIVER = """
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from benchmarks.sim import faults
rows = faults.train(faults.config(Path({run_dir!r}), "driver_killed", "train.steps=2"), faults.TIMES)
"""


def driver_killed(sim, run_dir: Path) -> dict:
    """A driver process on the cluster gets SIGKILL during step 2; a new driver resumes from step 1's checkpoint."""
    from pipeline.rl.tracking import checkpoint_dir, latest_checkpoint
    env = {**os.environ, "RAY_ADDRESS": sim.address, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get(
        "PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", DRIVER.format(root=str(ROOT), run_dir=str(run_dir))], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpt = checkpoint_dir(run_dir / "driver_killed", 1) / "run_state.json"
    deadline = time.monotonic() + 240
    while not ckpt.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # inside step 2
    fault_at = time.perf_counter()
    killed = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    rows = train(config(run_dir, "driver_killed", "train.steps=2"), resume=latest_checkpoint(run_dir / "driver_killed"))
    ended = time.perf_counter()
    metrics = [json.loads(line) for line in (run_dir / "driver_killed" / "metrics.jsonl").read_text().splitlines()]
    return _summary(rows, fault_at, ended) | {"fault": "SIGKILL of the driver during step 2, then --resume",
                                              "fault_happened": killed,
                                              "logged_steps": [m["step"] for m in metrics]}
