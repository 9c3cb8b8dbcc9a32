"""Fixtures of the RL tests: a one-rank gloo process group for in-process DeepSpeed learners."""
import os

import pytest


@pytest.fixture(scope="session")
def one_rank_group():
    """Join a world of one (gloo, DeepSpeed's CPU accelerator); the environment is restored after."""
    saved = dict(os.environ)
    from pipeline.rl.distributed import free_port, init_process_group
    init_process_group(0, 1, free_port())
    yield
    os.environ.clear()
    os.environ.update(saved)
