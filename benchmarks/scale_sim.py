"""How far one driver scales: the real driver on a simulated multi-node cluster, 1 to 256 evaluator GPUs.

    python benchmarks/scale_sim.py [--gpus 1,16,64,256] [--steps 4] [--out FILE]

The cluster is real Ray on this machine (benchmarks/sim/cluster.py): a head that hosts only the driver, a
generator node, four evaluator nodes, a learner node and a compile node, each offering its role resource of
cluster.yaml and fake GPUs, so `cluster.pin_roles=auto` pins every role to its node type. The driver is the
real one: `pipeline/rl/loop.py:run_training` through `actors.cluster.Cluster`, with the real episode
scheduler, task stream (Ray Data), supervised pools, compile-then-evaluate queue, one wait over all pools,
reward step and weight sync. Only the work inside the roles is replaced (benchmarks/sim/roles.py), by service
times:
- evaluation: 0.2 s per candidate per GPU, the throughput target (300 candidates a minute);
- compilation: 0.93 CPU s per candidate measured (benchmarks/results/v17/evaluator_cpu_path.json), that is
  4.65 compile CPUs per GPU at the target; simulated by one compiler actor per four GPUs, each 18.6 times
  faster than measured, so compile capacity matches (compile.candidates_per_call candidates per call);
- generation: 1 ms per sampled answer plus 20 ms per call (a batched engine), batches of at most 32, one
  generator per 16 GPUs: the first candidates reach the compilers within a few tens of milliseconds;
- the learner: 0.5 s per update.
One stand-in process serves up to 8 evaluators (or compilers), one thread each (`calls_per_actor`): the pools
hold that many times fewer actors, each taking that many calls at once, so 256 simulated GPUs take about 60
processes, not 340. The driver's code is the same either way (it fills the pools' capacity).
Per size it records the rollout's candidates per second against the ideal (GPUs / 0.2 s), the driver
process's CPU seconds per candidate, the busy fraction of each role (the loop's own metrics), and for the
largest size a profile of the driver. `driver_limit_gpus`: the most GPUs at 300 candidates a minute each that
one driver core keeps at least 90 % busy, from the driver's CPU per candidate at the largest size (the driver
is one Python thread; its CPU per candidate sets the limit), with the stage that takes most of that CPU.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import math
import os
import pickle
import pstats
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EVAL_S = 0.2                   # seconds per candidate per GPU: the target
COMPILE_CPU_S = 0.93           # measured CPU seconds per candidate in the compile pool (v17)
TARGET_BUSY = 0.9
FAULT_FRACTION = 0.10         # of the evaluators, killed during a step of the fault run
PER_PROCESS = 8                # simulated evaluators (or compilers) per stand-in process, at most


def nodes_for(max_gpus: int):
    from benchmarks.sim.cluster import NodeSpec
    per_node = max(1, math.ceil(max_gpus / 4))
    return ([NodeSpec("generators", max(1, max_gpus // 16) + 1, max(1, max_gpus // 16))]
            + [NodeSpec("evaluators", per_node + 1, per_node) for _ in range(4)]
            + [NodeSpec("learners", 2, 1), NodeSpec("compilers", max(1, max_gpus // 4) + 1)])


def config_for(gpus: int, steps: int, run_dir: Path, samples: int = 4):
    """The run at `gpus` simulated GPUs: 16 candidates per GPU per step, `samples` to a task (a GRPO group)."""
    from pipeline.core.config import load_config
    compilers, generators = max(1, gpus // 4), max(1, gpus // 16)
    per_step = max(16, gpus * 16)  # 16 candidates per GPU per step: 3.2 s of evaluation ideally
    return load_config(ROOT / "configs" / "local.yaml", [
        f"eval.gpus={gpus}", "eval.workers_per_gpu=1", "train.generator_gpus_per_actor=1",
        "train.learner_gpus_per_rank=1", f"compile.workers={compilers}", f"rollout.generator_actors={generators}",
        "tasks.source=generated:train", "tasks.kinds=[c2cuda]", f"train.steps={steps}",
        f"train.tasks_per_step={math.ceil(per_step / samples)}", f"rollout.samples_per_task={samples}",
        "rollout.max_turns=1", "rollout.max_new_tokens=256", f"rollout.max_episodes_in_flight={per_step}",
        "rollout.max_sequences_per_batch=32", "train.progress_bar=false",
        "train.wandb_mode=disabled", "train.checkpoint_every_steps=0", f"run.output_dir={run_dir}",
        f"run.name=g{gpus}", "train.samples_per_step=0"])


def calls_per_process(workers: int) -> int:
    """Evaluators (or compilers) one stand-in process serves, each call in its own thread: up to
    PER_PROCESS, so that hundreds of simulated GPUs fit this machine's memory (one Ray worker process each
    would not)."""
    return math.gcd(workers, PER_PROCESS)


def service_times(gpus: int):
    from benchmarks.sim.roles import ServiceTimes
    # the compilers together handle the GPUs' 5 candidates a second, as 4.65 measured CPUs per GPU would
    compile_s = max(1, gpus // 4) * EVAL_S / gpus
    return ServiceTimes(generate_per_sequence_s=0.001, generate_per_call_s=0.02, compile_s=compile_s,
                        evaluate_per_candidate_s=EVAL_S, update_s=0.5, export_s=0.02)


class RolloutMeter:
    """Wall and driver CPU of every rollout (EpisodeScheduler.run) and of taking its tasks from the stream
    (TaskStream.take: rows, tasks, their opening ids), and a profile of both when asked."""

    def __init__(self, profile_rollout: int | None):
        """`profile_rollout`: the index of the rollout to profile (the others are timed, unprofiled)."""
        from actors import cluster
        from pipeline.rollout import scheduler
        self.rows: list[dict] = []
        self.profile_rollout = profile_rollout
        self.profiler = cProfile.Profile(time.thread_time) if profile_rollout is not None else None  # driver thread CPU
        self._orig = scheduler.EpisodeScheduler.run
        self._orig_take = cluster.TaskStream.take
        self._take = {"cpu_s": 0.0, "thread_cpu_s": 0.0}  # of the take before the next rollout
        meter = self

        def profiling() -> bool:
            return meter.profiler is not None and len(meter.rows) == meter.profile_rollout

        def take(stream, n):
            c0, t0 = time.process_time(), time.thread_time()
            if profiling():
                meter.profiler.enable()
            try:
                return meter._orig_take(stream, n)
            finally:
                if profiling():
                    meter.profiler.disable()
                meter._take = {"cpu_s": time.process_time() - c0, "thread_cpu_s": time.thread_time() - t0}

        def run(sched, tasks, step=0, openings=None):
            w0, c0, t0 = time.perf_counter(), time.process_time(), time.thread_time()
            profiled = profiling()
            if profiled:
                meter.profiler.enable()
            try:
                outcomes, stats = meter._orig(sched, tasks, step, openings)
            finally:
                if profiled:
                    meter.profiler.disable()
            candidates = sum(len(o.results()) for o in outcomes)
            took, meter._take = meter._take, {"cpu_s": 0.0, "thread_cpu_s": 0.0}
            meter.rows.append({"wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0 + took["cpu_s"],
                               "thread_cpu_s": time.thread_time() - t0 + took["thread_cpu_s"],
                               "candidates": candidates, "profiled": profiled})
            return outcomes, stats
        scheduler.EpisodeScheduler.run = run
        cluster.TaskStream.take = take
        self._module, self._cluster = scheduler, cluster

    def close(self):
        self._module.EpisodeScheduler.run = self._orig
        self._cluster.TaskStream.take = self._orig_take


STAGES = [  # what the driver does during a rollout, as functions whose inclusive CPU does not overlap
    ("taking the step's tasks from the stream (rows, tasks, opening ids)", "cluster.py", "take"),
    ("tokenizing each task's opening prompt", "scheduler.py", "_opening"),
    ("forming generation batches and sending them", "scheduler.py", "_batch"),
    ("reading answers: parsing, episodes", "episodes.py", "take_sample"),
    ("sending candidates to the compilers", "evaluators.py", "submit"),
    ("waiting for and settling results (ray.wait, ray.get)", "pool.py", "wait_any"),
    ("handing compiled candidates to the evaluators", "evaluators.py", "poll"),
    ("reading results: feedback, episodes", "episodes.py", "take_result"),
]


def profile_table(profiler) -> dict:
    """The driver thread's CPU during one rollout, by stage (inclusive CPU of the stage's function), and the
    12 functions of most CPU of their own."""
    stats = pstats.Stats(profiler)
    total = sum(v[2] for v in stats.stats.values())
    by_stage = {label: round(sum(v[3] for (f, _, name), v in stats.stats.items() if f.endswith(file) and name == fn), 3)
                for label, file, fn in STAGES}
    by_stage["everything else"] = round(max(0.0, total - sum(by_stage.values())), 3)
    rows = sorted(((f"{f}:{line}({name})", v[2], v[3]) for (f, line, name), v in stats.stats.items()),
                  key=lambda r: -r[1])
    return {"profiled_cpu_s": round(total, 3), "by_stage_s": by_stage,
            "top": [{"function": n.replace(str(ROOT) + "/", ""), "tottime_s": round(t, 3), "cumtime_s": round(c, 3)}
                    for n, t, c in rows[:12]]}


def bytes_per_candidate() -> dict:
    """Bytes that cross between the driver and the actors for one candidate (pickled sizes of the records)."""
    from pipeline.core.records import Candidate, EvalResult
    from pipeline.evaluation.build.compile import CompileResult
    code = 'extern "C" void saxpy(const float* x, float* y, int n) {\n' + "    y[0] = x[0];\n" * 40 + "}\n"
    cand = Candidate(task_id="c2cuda/family/task", code=code, format="c2cuda", turn=0)
    comp = CompileResult(ok=True, log="", key="k" * 16)
    result = EvalResult(task_id=cand.task_id, candidate_hash="h" * 16, format="c2cuda", verdict="correct",
                        speedup=1.5, stage_s={"compile": 1.0, "check": 0.1, "time": 0.1})
    sizes = {"candidate (to a compiler and to an evaluator)": 2 * len(pickle.dumps(cand)),
             "compile result (back, then to the evaluator)": 2 * len(pickle.dumps(comp)),
             "eval result": len(pickle.dumps(result))}
    return {"parts": sizes, "total": sum(sizes.values()),
            "note": "pickled sizes of the records each candidate moves; a real compile result also carries its "
                    "built library (tens of KB), which goes from the compile node to the evaluator's"}


def measure(gpus: int, steps: int, work: Path, profile: bool, fault_fraction: float = 0.0, samples: int = 4) -> dict:
    """One training run of `steps` steps at `gpus` simulated GPUs: its rollouts' rate against the ideal, the
    driver's CPU per candidate, every role's busy fraction (and with `profile`, a profile of the last rollout).
    `fault_fraction` > 0: that share of the evaluator processes (at least one) is killed (SIGKILL) one second into
    the second step's rollout; the run then also reports the episodes lost and the processes killed."""
    from actors.cluster import Cluster
    from benchmarks.sim.roles import stand_in_roles
    from pipeline.core.node_roles import timed_roles
    from pipeline.rl.loop import run_training
    cfg = config_for(gpus, steps, work, samples)
    meter = RolloutMeter(profile_rollout=steps - 1 if profile else None)
    killed: dict = {}
    if fault_fraction > 0:
        threading.Thread(target=kill_evaluators, args=(meter, fault_fraction, killed), daemon=True).start()
    t0 = time.perf_counter()
    try:
        roles = stand_in_roles(service_times(gpus), evaluator_calls=calls_per_process(gpus),
                               compiler_calls=calls_per_process(cfg.compile.workers))
        rows = run_training(cfg, work / f"g{gpus}s{samples}{'_fault' if fault_fraction else ''}", Cluster(cfg, roles=roles))
    finally:
        meter.close()
    counted = [r for r in meter.rows[1:] if not r["profiled"]] or meter.rows  # the first warms up
    cands = sum(r["candidates"] for r in counted)
    wall = sum(r["wall_s"] for r in counted)
    rate = cands / wall
    ideal = gpus / EVAL_S
    busy = {role.name: round(sum(r.get(f"busy/{role.name}", 0.0) for r in rows[1:] or rows)
                             / len(rows[1:] or rows), 3) for role in timed_roles()}
    run = {"gpus": gpus, "samples_per_task": samples, "evaluator_nodes": 4, "evaluators_per_process": calls_per_process(gpus),
           "compilers": cfg.compile.workers, "generators": cfg.rollout.generator_actors,
           "candidates_per_step": cands / len(counted),
           "candidates_per_s": round(rate, 2), "ideal_per_s": ideal, "efficiency": round(rate / ideal, 3),
           "driver_cpu_s_per_candidate": round(sum(r["cpu_s"] for r in counted) / cands, 5),
           "driver_cpu_fraction": round(sum(r["cpu_s"] for r in counted) / wall, 3),
           "driver_python_thread_cpu_s_per_candidate": round(sum(r["thread_cpu_s"] for r in counted) / cands, 5),
           "busy": busy, "wall_s": round(time.perf_counter() - t0, 1)}
    if fault_fraction > 0:
        run["fault"] = {"evaluator_processes": killed.get("processes"), "killed_processes": killed.get("killed", 0),
                        "killed_gpus": killed.get("killed", 0) * calls_per_process(gpus),
                        "killed_in_step": 2, "lost_episodes": sum(r.get("rollout/lost_episodes", 0.0) for r in rows),
                        "pool_restarts": max((r.get("pool/restarts", 0.0) for r in rows), default=0.0)}
    if meter.profiler is not None:
        run["profile"] = profile_table(meter.profiler)
    return run


def kill_evaluators(meter: RolloutMeter, fraction: float, record: dict) -> None:
    """Once the first rollout has ended (the second step runs), wait a second, then SIGKILL `fraction` of the
    live stand-in evaluator processes (at least one); what was killed goes to `record`."""
    from benchmarks.sim.faults import alive
    while not meter.rows:
        time.sleep(0.1)
    time.sleep(1.0)
    procs = alive("StandInEvaluator")
    victims = procs[:max(1, math.ceil(fraction * len(procs)))]
    record.update(processes=len(procs), at=time.perf_counter())
    for actor in victims:
        os.kill(actor.pid, signal.SIGKILL)
    record["killed"] = len(victims)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", default="1,16,64,256", help="simulated evaluator GPU counts, comma-separated (each "
                    f"stand-in process serves up to {PER_PROCESS} evaluators or compilers)")
    ap.add_argument("--steps", type=int, default=4, help="RL steps per size (the first warms up; at the largest "
                    "size the last is profiled and not counted)")
    ap.add_argument("--fault-gpus", type=int, default=64, help="the size of the fault run: 10 %% of its evaluators "
                    "killed during a step, against the run of that size without faults (0: no fault run)")
    ap.add_argument("--samples-per-task", type=int, default=4, help="candidates of one task per step (a GRPO group); "
                    "the driver's calls are per group, so its CPU per candidate falls as groups grow")
    ap.add_argument("--out", default=None, help="JSON file (default: a new file under benchmarks/results/v<N>/)")
    args = ap.parse_args(argv)
    sizes = [int(g) for g in args.gpus.split(",")]
    from benchmarks.sim.cluster import simulated_cluster
    import ray
    work = Path(tempfile.mkdtemp(prefix="cudaperf-scale-"))
    runs = []
    fault = None
    nodes = nodes_for(max(sizes + [args.fault_gpus]))
    with simulated_cluster(nodes):
        print(f"cluster: {len(nodes) + 1} nodes, {ray.cluster_resources().get('GPU', 0):g} simulated GPUs", flush=True)
        for gpus in sizes:
            runs.append(measure(gpus, args.steps, work, profile=gpus == max(sizes), samples=args.samples_per_task))
            print(json.dumps({k: v for k, v in runs[-1].items() if k != "profile"}), flush=True)
        if args.fault_gpus:
            fault = measure(args.fault_gpus, args.steps, work, profile=False, fault_fraction=FAULT_FRACTION,
                            samples=args.samples_per_task)
            clean = next((r for r in runs if r["gpus"] == args.fault_gpus), None)
            if clean is not None:
                fault["fault"]["throughput_vs_no_fault"] = round(fault["candidates_per_s"] / clean["candidates_per_s"], 3)
            print(json.dumps(fault), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    largest = runs[-1]
    per_cand = largest["driver_cpu_s_per_candidate"]
    limit = int(TARGET_BUSY / (per_cand / EVAL_S)) if per_cand > 0 else None
    stages = largest.get("profile", {}).get("by_stage_s", {})
    cpu_stages = {k: v for k, v in stages.items() if k != "everything else"}
    result = {
        "driver_limit_gpus": limit,
        "driver_limit_stage": max(cpu_stages, key=cpu_stages.get) if cpu_stages else None,
        "driver_limit_how": (f"one driver core at {TARGET_BUSY:.0%}: {TARGET_BUSY} / (driver CPU s per candidate "
                             f"{per_cand} x {1 / EVAL_S:g} candidates per GPU-second), measured at "
                             f"{largest['gpus']} simulated GPUs"),
        "command": (f"python benchmarks/scale_sim.py --gpus {args.gpus} --steps {args.steps} --fault-gpus "
                    f"{args.fault_gpus} --samples-per-task {args.samples_per_task}"),
        "machine": "2-core CPU host, every node a raylet on it (the roles' actors share the two cores with the driver)",
        "simulated": "the work inside each role (service times, see the script's docstring)",
        "real": "Ray (one raylet per node, custom resources of cluster.yaml, fake GPUs), the driver, episode "
                "scheduler, task stream, supervised pools, compile-then-evaluate queue, one wait, reward step, "
                "weight sync protocol",
        "service_times": {"evaluate_per_candidate_s": EVAL_S, "compile_cpu_s_measured": COMPILE_CPU_S},
        "bytes_per_candidate": bytes_per_candidate(),
        "runs": runs,
        "fault_run": fault,
    }
    out = Path(args.out) if args.out else None
    if out is None:
        from benchmarks.results_path import fresh_result_path
        out = fresh_result_path("scale_sim.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    plot(result, out.with_suffix(".png"))
    print(f"driver limit: {limit} GPUs ({result['driver_limit_stage']}); wrote {out}")
    return 0


def plot(result: dict, path: Path) -> None:
    import matplotlib
    from pipeline.core.node_roles import timed_roles
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = result["runs"]
    g = [r["gpus"] for r in runs]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    a.plot(g, [r["efficiency"] for r in runs], marker="o", label="measured (this 2-core host)")
    a.axhline(TARGET_BUSY, color="grey", ls="--", lw=0.8, label=f"{TARGET_BUSY:.0%}")
    if result["driver_limit_gpus"]:
        a.axvline(result["driver_limit_gpus"], color="tab:red", ls=":", label=f"driver limit {result['driver_limit_gpus']}")
    a.set_xscale("log", base=2)
    a.set_xlabel("simulated evaluator GPUs")
    a.set_ylabel("achieved / ideal candidates per s")
    a.set_ylim(0, 1.05)
    a.legend(fontsize=7)
    for role in timed_roles():
        b.plot(g, [r["busy"][role.name] for r in runs], marker=".", label=role.name)
    b.set_xscale("log", base=2)
    b.set_xlabel("simulated evaluator GPUs")
    b.set_ylabel("busy fraction")
    b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
