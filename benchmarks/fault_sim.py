"""Faults of a long run on the simulated multi-node cluster, with the time each takes to recover.

    python benchmarks/fault_sim.py [--out FILE]

Runs the scenarios of benchmarks/sim/faults.py (an evaluator node removed mid-step; a compiler and an evaluator
killed mid-step; the learner killed in step 2, then resumed; the driver killed in step 2, then resumed) on one
simulated cluster (a generator node, two evaluator nodes, a learner node, a compile node) and writes, per
scenario, whether the step completed with every episode, and `recovery_s`: seconds from the fault until the
step it hit completed (for the learner and the driver: until the resumed run finished that step, actor
start-up included). tests/cluster/test_simulated_cluster.py asserts the same scenarios in CI.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="JSON file (default: a new file under benchmarks/results/v<N>/)")
    args = ap.parse_args(argv)
    from benchmarks.sim import faults
    from benchmarks.sim.cluster import NodeSpec, simulated_cluster
    nodes = [NodeSpec("generators", 2, 1), NodeSpec("evaluators", 3, 2), NodeSpec("evaluators", 3, 2),
             NodeSpec("learners", 2, 1), NodeSpec("compilers", 3)]
    work = Path(tempfile.mkdtemp(prefix="cudaperf-faults-"))
    with simulated_cluster(nodes) as sim:
        results = {"baseline": faults.baseline(work / "b"), "node_lost": faults.node_lost(sim, work / "n"),
                   "actors_killed": faults.actors_killed(work / "a"), "learner_killed": faults.learner_killed(work / "l"),
                   "driver_killed": faults.driver_killed(sim, work / "d")}
    out = Path(args.out) if args.out else None
    if out is None:
        from benchmarks.results_path import fresh_result_path
        out = fresh_result_path("fault_sim.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": "python benchmarks/fault_sim.py", "machine": "2-core CPU host, every node "
                               "a raylet on it", "service_times": faults.TIMES.__dict__, "scenarios": results},
                              indent=1))
    for name, r in results.items():
        print(f"{name:15s} steps {r['steps']} episodes {r['episodes']} lost {r['lost_episodes']:g} "
              f"restarts {r['restarts']:g} recovery {r['recovery_s']} s")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
