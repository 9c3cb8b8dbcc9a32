"""The README's main job as a new user runs it (configs/local.yaml: the warm-started tiny policy, vLLM on
CPU, Ray pools, a DeepSpeed learner), two steps: the loop has something in it. Candidates are gated
and compiled in every step, rewards differ within a group, so advantages and the loss are non-zero,
and the run ends with its summary."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.core.config import load_config
from pipeline.rollout.tiny_model import SFT_TINY, SFT_TINY_DIR, resolve_model_path

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
REPO = Path(__file__).parents[1]


def test_the_main_job_uses_the_shipped_warm_start():
    cfg = load_config(REPO / "configs/local.yaml", [])
    assert cfg.model.path == SFT_TINY and resolve_model_path(cfg.model) == SFT_TINY_DIR
    weights = sum(f.stat().st_size for f in SFT_TINY_DIR.iterdir())
    assert weights < 16 << 20  # small enough to ship in the repository


@pytest.mark.integration
def test_two_steps_of_the_main_job_from_the_warm_start(tmp_path):
    run = subprocess.run([sys.executable, "-m", "pipeline.cli", "train", "--config", "configs/local.yaml",
                          f"run.output_dir={tmp_path}", "train.steps=2", "train.wandb_mode=disabled",
                          "train.progress_bar=false"], cwd=REPO, capture_output=True, text=True, timeout=800)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    rows = [json.loads(line) for line in (tmp_path / "local" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:  # on CPU a candidate that compiled (and passed the gate) is `not_executed`
        assert r.get("verdict/not_executed", 0) * r["rollout/turns"] >= 1, r
    assert any(r["reward/advantage_abs_mean"] > 0 for r in rows)  # some group's rewards differed
    assert any(abs(r["learner/loss"]) > 0 for r in rows)
    assert "rewards varied within groups" in run.stdout and "starting 1 generator" in run.stderr
