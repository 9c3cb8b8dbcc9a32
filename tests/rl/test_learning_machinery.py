"""The learning machinery on the CPU, two steps of the learning experiment's arms (benchmarks/learning_cpu.py):
under RL the weights change and the next step samples from the new version; with learning rate 0 (the
no-update arm) every update is computed and no weight changes. No timing, no threshold on learning."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.rl.tracking import checkpoint_dir, weights_fingerprint

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
REPO = Path(__file__).resolve().parents[2]


def two_steps(tmp_path: Path, name: str, *extra: str) -> tuple[list[dict], Path]:
    run = subprocess.run([sys.executable, "-m", "pipeline.cli", "train", "--config", "configs/local.yaml",
                          f"run.output_dir={tmp_path}", f"run.name={name}", "train.steps=2", "tasks.kinds=[c2cuda]",
                          "rollout.max_turns=1", "train.checkpoint_every_steps=1", "train.wandb_mode=disabled",
                          "train.progress_bar=false", "learner.lr=2e-4", *extra],
                         cwd=REPO, capture_output=True, text=True, timeout=800)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    rows = [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
    return rows, tmp_path / name / "checkpoints"


def test_rl_changes_the_weights_and_the_generator_samples_from_them_while_lr_0_changes_nothing(tmp_path):
    rows, ckpts = two_steps(tmp_path, "rl")
    after = [weights_fingerprint(checkpoint_dir(ckpts.parent, k) / "hf") for k in (1, 2)]
    assert after[0] != after[1]  # step 2's update moved the policy
    assert [r["learner/weight_version"] for r in rows] == [1.0, 2.0]
    assert [r["rollout/weight_version"] for r in rows] == [0.0, 1.0]  # step 2 sampled from step 1's weights
    assert all(r["learner/grad_norm"] > 0 for r in rows)

    rows, ckpts = two_steps(tmp_path, "no_update", "learner.lr=0")
    kept = [weights_fingerprint(checkpoint_dir(ckpts.parent, k) / "hf") for k in (1, 2)]
    assert kept[0] == kept[1]  # step 2's update, computed, changed no weight
    assert [r["rollout/weight_version"] for r in rows] == [0.0, 1.0]  # synced all the same, to equal weights
    assert all(r["learner/grad_norm"] > 0 for r in rows)  # the update was computed, and changed nothing
