"""The learning experiment's driver (benchmarks/learning.py): the arms differ only in what they declare,
and a 2-step version of the whole experiment runs on the tiny CPU policy: the ranker on a synthetic
measured table, two RL arms with a live evaluation, the benchmark of two arms, the report."""
import json
import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "pipeline" / "assets" / "builtin_tasks" / "c2cuda"


@pytest.fixture(scope="module")
def learning(benchmark_script):
    return benchmark_script("learning")


def settings(overrides: list[str] | None) -> dict[str, str]:
    return dict(o.split("=", 1) for o in overrides or [])


def test_the_arms_differ_only_in_the_reward_weights_they_declare(learning):
    arms = learning.ARMS
    assert set(arms) == {"sft", "exec", "full", "full_one_turn"} and arms["sft"] is None  # SFT only: no RL
    execution, full = settings(arms["exec"]), settings(arms["full"])
    assert set(execution) == set(full) and all(k.startswith("reward.") for k in full)
    assert float(execution["reward.w_struct"]) == float(execution["reward.w_ranker"]) == 0  # execution terms alone
    assert float(full["reward.w_struct"]) > 0 and float(full["reward.w_ranker"]) > 0
    one_turn = settings(arms["full_one_turn"])  # the full reward, multi-turn refinement off
    assert one_turn == {**full, "rollout.max_turns": "1"}


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_two_step_experiment_runs_end_to_end_on_the_tiny_cpu_policy(learning, tmp_path, builtin_tasks):
    sys.path.insert(0, str(ROOT / "tests" / "ranker"))
    from _synthetic import builtin_rows

    from pipeline.tasks.measured import SCHEMA
    from pipeline.rollout.tiny_model import SFT_TINY_DIR
    runs = tmp_path / "runs"
    shutil.copytree(SFT_TINY_DIR, learning.sft_policy(runs))  # the SFT stage's product: the shipped tiny policy
    train_dir, live_dir, table = tmp_path / "train", tmp_path / "live", tmp_path / "measured"
    for d, name in ((train_dir, "saxpy.yaml"), (live_dir, "dot.yaml")):
        d.mkdir()
        shutil.copy(TASKS / name, d / name)
    table.mkdir()
    rows = builtin_rows(list(builtin_tasks.values()), {"blas3_gemm", "softmax_rows", "transpose"})
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), table / "shard-0.parquet")
    common = ["--runs", str(runs), "--config", str(ROOT / "configs" / "local.yaml")]
    small = [f"tasks.source={train_dir}", f"train.live_eval_source={live_dir}", "train.live_eval_tasks=1",
             "train.steps=2", "train.tasks_per_step=1", "train.checkpoint_every_steps=1", "train.progress_bar=false",
             "train.wandb_mode=disabled", "rollout.backend=transformers", "rollout.device=cpu",
             "rollout.samples_per_task=2", "rollout.max_new_tokens=64", "compile.workers=1",
             f"compile.cache_dir={tmp_path / 'compile'}", f"eval.result_cache_dir={tmp_path / 'results'}",
             f"ranker.feature_cache_dir={tmp_path / 'features'}", "ranker.task_sources=[builtin]",
             "ranker.neural_epochs=4", "ranker.gbt_trees=20"]

    assert "sft" not in " ".join(" ".join(c[3:5]) for c in learning.plan(runs, common[3], "x.yaml", None, 0, small))
    assert learning.main(["ranker", *common, "--ranker-data", str(table), *small]) == 0
    from pipeline.ranker.checkpoint import resolve
    assert resolve(learning.ranker_checkpoint(runs)).name == "v0001"  # what the full arms' ranker.checkpoint names
    for arm in ("exec", "full"):
        assert learning.main(["rl", arm, *common, *small]) == 0
        from pipeline.rl.tracking import read_metrics
        steps = read_metrics(runs / arm)
        assert [r["step"] for r in steps] == [1, 2]
        assert all(r["rollout/episodes"] == 2 and r["live/rollout/episodes"] == 2 for r in steps)  # apart
        assert learning.arm_policy(runs, arm) is not None and (learning.arm_policy(runs, arm) / "config.json").is_file()
    assert learning.rl_command(runs, "exec", common[3], small) is None  # finished: a second call does nothing
    bench = ["--splits", "heldout", "--kinds", "c2cuda", "--limit", "2"]  # 2 shards of ~11, 1 sample, 1 turn
    small += ["rollout.max_turns=1", "rollout.samples_per_task=1"]
    for arm in ("sft", "full"):
        assert learning.main(["bench", arm, *common, *bench, *small]) == 0
    shards = sorted(learning.bench_dir(runs, "full", "heldout", "c2cuda").glob("shard_*/report.json"))
    assert len(shards) == 2 and learning.bench_commands(runs, "full", common[3], 2, small, ["heldout"], ["c2cuda"]) == []
    with pytest.raises(SystemExit):  # an unknown arm is a usage error, an override in its place is not an arm
        learning.main(["bench", "nope", *common])
    assert learning.main(["report", *common]) == 0
    result = json.loads((runs / "learning.json").read_text())
    per_shard = -(-sum(1 for _ in learning.load_tasks_of("heldout", "c2cuda")) // learning.shard_count("heldout", "c2cuda"))
    for arm in ("sft", "full"):
        m = result["arms"][arm]["heldout"]["c2cuda"]
        assert m["shards"] == 2 and 2 * per_shard - 2 <= m["tasks"] == m["samples"] <= 2 * per_shard
        assert set(m["correct_rate"]) == {"value", "low", "high"}
    diff = result["differences"]["full-sft"]["heldout"]["c2cuda"]["correct_rate"]
    assert diff["tasks"] == result["arms"]["full"]["heldout"]["c2cuda"]["tasks"] and diff["value"] is not None
    assert {"exec", "full"} <= set(result["curves"]) and len(result["curves"]["full"]) == 2
    starts = result["start_policy"]["weights_sha256"]  # every RL arm noted the SFT weights it started from
    assert starts["exec"] == starts["full"] == starts["sft"] and len(starts["sft"]) == 64
    assert result["start_policy"]["same_for_every_arm"] and starts["full_one_turn"] is None
    assert (runs / "learning.png").stat().st_size > 1000


def test_the_sft_arms_start_is_read_from_its_summary_where_the_weights_were_not_carried(learning, tmp_path):
    policy = learning.sft_policy(tmp_path)
    policy.mkdir(parents=True)
    assert learning.start_fingerprints(tmp_path)["sft"] is None
    (policy.parent / "sft_summary.json").write_text(json.dumps({"weights_sha256": "ab" * 32}))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / learning.START_FILE).write_text(json.dumps({"weights_sha256": "cd" * 32}))
    starts = learning.start_fingerprints(tmp_path)
    assert starts["sft"] == "ab" * 32 and starts["full"] == "cd" * 32  # different: the report says so
