"""The cluster, simulated on one machine: a real multi-node Ray (one raylet per simulated node, with the node
types of cluster.yaml and fake GPU counts) running the real driver, episode scheduler, task stream, pools and
weight-sync protocol, with stand-in actors whose work is a service time (`roles.py`). Used by
benchmarks/scale_sim.py and tests/test_scale_sim.py; a run's config cannot select any of it."""
