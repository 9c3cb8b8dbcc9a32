"""`ray job submit` of the tiny training job to a local Ray head started with `ray start --head` on free
ports (token authentication on, as Ray 2.60 sets it up by default). The head runs under `--block`
in a child process, so stopping it ends exactly the Ray processes this test started."""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from pipeline.rl.distributed import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
REPO = Path(__file__).parents[1]
RAY = str(Path(sys.executable).parent / "ray")


def wait_for_dashboard(port: int, head: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if head.poll() is not None:
            raise RuntimeError(f"ray start --head exited with status {head.returncode}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/version", timeout=2)
            return
        except urllib.error.HTTPError:  # it answered (with token authentication on, possibly 401)
            return
        except OSError:
            time.sleep(1)
    raise TimeoutError(f"the Ray dashboard did not answer on port {port} within {timeout_s} s")


def submit_when_ready(dashboard: int, command: str, env: dict, timeout_s: float = 300) -> subprocess.CompletedProcess:
    """`ray job submit`, again while the head's job agent is not up yet ("No available agent to submit job":
    the dashboard answers before the agent has registered; nothing was started)."""
    deadline = time.monotonic() + timeout_s
    while True:
        job = subprocess.run([RAY, "job", "submit", "--address", f"http://127.0.0.1:{dashboard}", "--",
                              "bash", "-c", command], env=env, capture_output=True, text=True, timeout=600)
        if "No available agent" not in job.stdout + job.stderr or time.monotonic() > deadline:
            return job
        time.sleep(2)


@pytest.mark.integration
def test_ray_job_submit_runs_the_tiny_training(tmp_path):
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    port, dashboard = free_port(), free_port()
    temp_dir = tempfile.mkdtemp(prefix="rj", dir="/tmp")  # short: Ray's socket paths must stay under 108 bytes
    head = subprocess.Popen([RAY, "start", "--head", "--block", f"--port={port}", f"--dashboard-port={dashboard}",
                             "--include-dashboard=true", "--num-cpus=6", f"--temp-dir={temp_dir}",
                             f"--ray-client-server-port={free_port()}"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for_dashboard(dashboard, head)
        train = (f"cd {REPO} && {sys.executable} -m pipeline.cli train --config configs/local.yaml "
                 f"run.output_dir={tmp_path} run.name=job rollout.backend=transformers rollout.device=cpu "
                 "rollout.samples_per_task=2 rollout.max_turns=1 rollout.max_new_tokens=32 train.steps=1 "
                 "train.tasks_per_step=1 train.wandb_mode=disabled train.progress_bar=false compile.workers=1")
        job = submit_when_ready(dashboard, train, env)
        out = job.stdout + job.stderr
        assert job.returncode == 0 and "succeeded" in out, out[-4000:]
        rows = [json.loads(line) for line in (tmp_path / "job" / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows] == [1] and rows[0]["rollout/episodes"] == 2
        assert (tmp_path / "job" / "checkpoints" / "step_000001" / "hf" / "config.json").is_file()
        # a job whose actors do not fit the head's 6 CPUs (8 compilers) stops within a minute and says why
        t0 = time.monotonic()
        job = submit_when_ready(dashboard, train.replace("compile.workers=1", "compile.workers=8 run.name=big "
                                                         "cluster.start_timeout_s=15"), env)
        out = job.stdout + job.stderr
        assert job.returncode != 0 and "the cluster cannot start" in out and "--num-cpus" in out, out[-4000:]
        assert "Traceback" not in out.split("the cluster cannot start")[0][-2000:]
        assert time.monotonic() - t0 < 150
    finally:
        head.terminate()
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
