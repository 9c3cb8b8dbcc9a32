"""A job whose actors the cluster cannot start stops with one sentence naming what is missing (actors/startup.py),
instead of waiting for ever; an actor that is only slow to start is waited for."""
import time

import pytest

from actors.startup import ClusterTooSmall, shortfall_sentence, wait_started


def test_the_sentence_names_the_actors_what_is_short_and_the_fixes():
    text = shortfall_sentence(["GeneratorActor", "CompilerActor", "CompilerActor"], {"CPU": 3.0},
                              {"CPU": 1.0, "memory": 1e9}, {"CPU": 2.0, "node:1.2.3.4": 1.0})
    assert text.startswith("the cluster cannot start 3 of this job's actors (2 CompilerActor, 1 GeneratorActor)")
    assert "need {'CPU': 3.0}" in text and "{'CPU': 1.0} free of {'CPU': 2.0}" in text
    assert "{'CPU': 2.0} short" in text and "--num-cpus" in text and "cluster.start_timeout_s" in text
    assert "\n" not in text and "memory" not in text


@pytest.fixture(scope="module")
def one_cpu_ray():
    import ray
    from pipeline.rl.distributed import free_port
    # the state API lives in the dashboard: a port of its own, so that another Ray on this host cannot hold it
    ray.init(num_cpus=1, include_dashboard=True, dashboard_port=free_port(), log_to_driver=False)
    from actors.startup import pending_demand
    deadline = time.monotonic() + 60
    while pending_demand() is None and time.monotonic() < deadline:
        time.sleep(1)  # the dashboard answers a few seconds after ray.init on a loaded host
    assert pending_demand() is not None, "Ray's state API did not answer within 60 s"
    yield ray
    ray.shutdown()


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_an_actor_the_cluster_cannot_place_ends_the_wait(one_cpu_ray):
    ray = one_cpu_ray

    @ray.remote(num_cpus=2)
    class TooBig:
        def ready(self):
            return 1
    actor = TooBig.remote()
    t0 = time.monotonic()
    with pytest.raises(ClusterTooSmall) as caught:
        wait_started([actor.ready.remote()], timeout_s=3, poll_s=0.5)
    assert time.monotonic() - t0 < 60
    assert "1 TooBig" in str(caught.value) and "'CPU': 2.0" in str(caught.value)
    ray.kill(actor)


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_a_slow_actor_is_waited_for(one_cpu_ray):
    ray = one_cpu_ray

    @ray.remote(num_cpus=1)
    class Slow:
        def __init__(self):
            time.sleep(4)

        def ready(self):
            return 1
    actor = Slow.remote()
    ref = actor.ready.remote()
    wait_started([ref], timeout_s=1, poll_s=0.5)  # past the timeout, but placed: no error
    assert ray.get(ref) == 1
