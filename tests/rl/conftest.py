"""Fixtures of the RL tests: `one_rank_group` (a one-rank gloo process group for in-process DeepSpeed
learners) lives in tests/conftest.py, since the weight-sync test of tests/rollout uses it too."""
