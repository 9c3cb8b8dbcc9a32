"""Multi-process pieces on a real local Ray (CPU), started the way the project starts it (start_ray): every
actor sees COLLECTIVE_ENV (NVLink multicast off); and two RL steps of the driver with
train.weight_sync=collective, the learner in ZeRO-3 over two gloo ranks broadcasting into two transformers
generators: step 2 is sampled by version 1, and its first PPO ratio is 1 (the generators' logprobs are the
learner's), which fails if the broadcast weights were wrong or missing."""
import os

import pytest
import ray
from test_rl_train import saxpy_only, train_cfg  # noqa: F401 (saxpy_only is a fixture)

from pipeline.rl.distributed import COLLECTIVE_ENV

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def project_ray():
    from actors.cluster import start_ray
    saved = {k: os.environ.get(k) for k in COLLECTIVE_ENV}
    for k in COLLECTIVE_ENV:  # the driver process does not have them before start_ray
        os.environ.pop(k, None)
    start_ray(8)
    yield
    ray.shutdown()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def test_actors_and_tasks_started_by_ray_see_the_collective_env(project_ray):
    class EnvReader:  # defined here so that Ray ships it by value (workers cannot import test modules)
        def read(self) -> dict:
            return {k: os.environ.get(k) for k in COLLECTIVE_ENV}

    actor = ray.remote(EnvReader).options(num_cpus=0).remote()
    task = ray.remote(num_cpus=0)(lambda: {k: os.environ.get(k) for k in COLLECTIVE_ENV})
    assert ray.get(actor.read.remote()) == COLLECTIVE_ENV == ray.get(task.remote())
    assert COLLECTIVE_ENV == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                              "NVSHMEM_DISABLE_NVLS": "1"}
    assert {k: os.environ[k] for k in COLLECTIVE_ENV} == COLLECTIVE_ENV  # and the driver process itself


def test_two_steps_with_collective_sync_from_two_zero3_ranks(project_ray, tmp_path, saxpy_only):
    from actors.cluster import Cluster
    from pipeline.rl.loop import cpus_needed, run_training
    cfg = train_cfg(tmp_path, saxpy_only, **{"train.weight_sync": "collective", "learner.ranks": 2,
                                              "learner.zero_stage": 3, "rollout.generator_actors": 2,
                                              "train.checkpoint_every_steps": 0, "train.wandb_mode": "disabled"})
    rows = run_training(cfg, tmp_path / "run", Cluster(cfg, cpus_needed(cfg)))
    first, second = rows
    assert first["rollout/weight_version"] == 0 and second["rollout/weight_version"] == 1
    assert first["learner/weight_version"] == 1 and second["learner/weight_version"] == 2
    for row in rows:
        assert row["learner/ratio_mean_first"] == pytest.approx(1.0, abs=2e-3)
        assert row["sync/bytes"] > 1e6 and row["sync/gb_per_s"] > 0
