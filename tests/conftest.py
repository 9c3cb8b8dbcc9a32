"""Shared fixtures and markers (tests/README.md). GPU tests carry the `gpu` marker: `pytest -m gpu` on a GPU
host, and the README's CPU test command deselects them. Integration tests (whole jobs, every built-in through
nvcc, Ray clusters) carry the `integration` marker and run only with `--integration`; `.ci/run` runs them."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "data"))


def pytest_addoption(parser):
    parser.addoption("--integration", action="store_true",
                     help="also run the integration tests (whole jobs, heavy pipelines); .ci/run passes it")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU (run with -m gpu on the GPU test machine)")
    config.addinivalue_line("markers", "slow: takes more than a few seconds")
    config.addinivalue_line("markers", "integration: a whole job or a heavy pipeline; runs with --integration")


def pytest_collection_modifyitems(config, items):
    """Without --integration, the integration tests are deselected: plain `pytest -m "not gpu"` is the fast loop."""
    if config.getoption("--integration"):
        return
    def heavy(item) -> bool:  # GPU tests are never deselected here: `-m gpu` runs them all
        return item.get_closest_marker("integration") is not None and item.get_closest_marker("gpu") is None
    dropped = [item for item in items if heavy(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not heavy(item)]


@pytest.fixture(scope="session")
def compile_cfg(tmp_path_factory):
    """A fresh compile cache per session, or a shared one named by CUDAPERF_TEST_COMPILE_CACHE
    (the GPU script shares it with the verify run, so load_inline builds happen once)."""
    import os
    from pipeline.core.config import CompileSection
    shared = os.environ.get("CUDAPERF_TEST_COMPILE_CACHE")
    return CompileSection(cache_dir=shared or str(tmp_path_factory.mktemp("compile-cache")))


@pytest.fixture(scope="session")
def eval_cfg():
    from pipeline.core.config import EvalSection
    return EvalSection(result_cache_dir="", run_timeout_s=20.0)


@pytest.fixture(scope="session")
def builtin_tasks():
    from pipeline.tasks import load_tasks
    return {t.id: t for t in load_tasks("builtin")}


@pytest.fixture(scope="session")
def one_rank_group():
    """Join a world of one (gloo, DeepSpeed's CPU accelerator) for in-process learners; the environment
    is restored after."""
    import os
    saved = dict(os.environ)
    from pipeline.rl.distributed import free_port, init_process_group
    init_process_group(0, 1, free_port())
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(autouse=True, scope="module")
def no_ray_left_behind():
    """A test module that started Ray (directly or through a command such as `cudaperf bench`) leaves
    none behind: the next module's ray.init starts from a clean state."""
    yield
    import sys
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def pytest_runtest_logreport(report):
    """With CUDAPERF_TEST_FAILURES=FILE, append each failure the moment it happens, so a run
    stopped at a time limit on the GPU machine still says what failed and why."""
    import os
    path = os.environ.get("CUDAPERF_TEST_FAILURES")
    if path and report.failed:
        with open(path, "a") as f:
            f.write(f"=== {report.nodeid} ({report.when})\n{str(report.longrepr)[-3000:]}\n")
