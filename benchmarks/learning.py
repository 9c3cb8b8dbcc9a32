"""Does RL help? The learning experiment: one SFT start, four arms, the same benchmark for each.

    python benchmarks/learning.py STAGE [ARM] [--runs DIR] [--config FILE] [--sft-config FILE]
                                  [--ranker-data DIR] [--limit N] [section.key=value ...]

Arms (ARMS; the only place they differ):
  sft            the SFT policy itself, no RL;
  exec           RL with the execution reward alone (correctness and speedup terms);
  full           RL with the full CudaPerf reward (adds the structural and ranker terms);
  full_one_turn  `full` with multi-turn refinement off (one turn).
Every RL arm starts from the same SFT checkpoint with the same seed, tasks per step and steps
(--config, default configs/learning_h200.yaml: the train split, a live evaluation on held-out tasks
of the training families, logged as live/<metric> and never trained on).

Stages, each resumable: a stage stopped by a time limit is continued by running it again, and a
stage that finished is skipped.
  sft           `cudaperf sft` (--sft-config, default configs/sft_h200.yaml) -> RUNS/sft/sft/hf
  ranker        `cudaperf rank train` (RANKER_KIND) on the measured dataset (or --ranker-data) -> RUNS/ranker
  rl ARM        `cudaperf train` for ARM from the SFT policy, resumed from its newest checkpoint
  bench ARM     `cudaperf bench` of ARM's final policy (an RL arm must have run all its steps) on
                generated:heldout and generated:test, each kind apart, BENCH_SAMPLES samples per task,
                the same turns for every arm (--config's), in shards of about SHARD_TASKS tasks (every
                N-th task, so each shard spreads over the families); a shard whose report names this
                policy is kept, so a stopped bench continues where it stopped. --limit N benches only
                the first N shards of each split and kind (a sample across families, not the first ids)
  report        RUNS/learning.json and RUNS/learning.png from every arm's shard reports and
                metrics.jsonl (CPU work: run it anywhere, without a time limit)
`plan` prints every command in order. Commands run as `python -m pipeline.cli ...` from the repository.

The report, per arm, split and kind: compile, execute and correct rates, fast_1, fast_1.5, the
geometric-mean speedup of the correct samples, the turn-2-over-turn-1 gain in correct rate and the mean
structural score of the correct samples, each with a 95 % bootstrap interval over tasks; and the paired
differences of `full` against each other arm on the same tasks (pipeline/scoring/metrics.py: paired_difference): an
arm is better when that interval lies above 0.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.scoring.metrics import (Outcome, fast_p, final_outcomes, paired_difference,  # noqa: E402
                                    speedup_stats, task_intervals)
from pipeline.core.config import parse_command_line  # noqa: E402

FULL_REWARD = ["reward.w_struct=0.2", "reward.w_ranker=0.3"]
ARMS: dict[str, list[str] | None] = {
    "sft": None,  # no RL
    "exec": ["reward.w_struct=0", "reward.w_ranker=0"],
    "full": FULL_REWARD,
    "full_one_turn": FULL_REWARD + ["rollout.max_turns=1"],
}
SPLITS = ("heldout", "test")
SHARD_TASKS = 40
RANKER_KIND = "gbt"
KINDS = ("c2cuda", "torch2cuda")
BENCH_SAMPLES = 4
RESAMPLES = 1000
COMPARED = "full"  # the arm every other is compared with
CURVES = ("step", "reward/episode_mean", "correct/episode_fraction", "live/correct/episode_fraction",
          "live/reward/episode_mean")  # training-log columns kept per RL arm


# ---- where things are ------------------------------------------------------------------------------

def sft_policy(runs: Path) -> Path:
    return runs / "sft" / "sft" / "hf"


def arm_policy(runs: Path, arm: str) -> Path | None:
    """The policy an arm ends with: the SFT policy, or the arm's newest checkpoint (None before one)."""
    if ARMS[arm] is None:
        return sft_policy(runs)
    from pipeline.rl.tracking import latest_checkpoint
    ckpt = latest_checkpoint(runs / arm)
    return ckpt / "hf" if ckpt is not None else None


def bench_dir(runs: Path, arm: str, split: str, kind: str) -> Path:
    return runs / arm / f"bench_{split}_{kind}"


def ranker_checkpoint(runs: Path) -> Path:
    return runs / "ranker" / RANKER_KIND


def load_tasks_of(split: str, kind: str) -> list:
    from pipeline.tasks import load_tasks
    return [t for t in load_tasks(f"generated:{split}") if t.kind == kind]


def shard_count(split: str, kind: str) -> int:
    """Shards of about SHARD_TASKS tasks each for one split and kind."""
    return max(1, -(-len(load_tasks_of(split, kind)) // SHARD_TASKS))


def uses_ranker(overrides: list[str]) -> bool:
    return any(o.startswith("reward.w_ranker=") and float(o.split("=", 1)[1]) > 0 for o in overrides)


# ---- commands ------------------------------------------------------------------------------------------

def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli", *args]


def sft_command(runs: Path, sft_config: str, extra: list[str]) -> list[str] | None:
    if (sft_policy(runs) / "config.json").is_file():
        return None
    return cli("sft", "--config", sft_config, f"run.output_dir={runs}", "run.name=sft", "sft.heldout_source=", *extra)


def ranker_command(runs: Path, config: str, data: str | None, extra: list[str]) -> list[str] | None:
    if any(ranker_checkpoint(runs).glob("v*/manifest.json")):
        return None
    return cli("rank", "train", "--config", config, "--out", str(runs / "ranker"), "--rankers", RANKER_KIND,
               *(["--data", data] if data else []), *extra)


def rl_command(runs: Path, arm: str, config: str, extra: list[str]) -> list[str] | None:
    """`cudaperf train` for an RL arm: from the SFT policy, or resumed from the arm's newest checkpoint;
    None when the arm has no RL or has run all its steps."""
    overrides = ARMS[arm]
    if overrides is None:
        return None
    from pipeline.core.config import load_config
    from pipeline.rl.tracking import latest_checkpoint
    run_dir = runs / arm
    settings = [f"run.output_dir={runs}", f"run.name={arm}", f"model.path={sft_policy(runs)}", *overrides,
                *([f"ranker.checkpoint={ranker_checkpoint(runs)}"] if uses_ranker(overrides) else []), *extra]
    steps = load_config(config, settings).train.steps
    ckpt = latest_checkpoint(run_dir)
    if ckpt is not None:
        done = json.loads((ckpt / "run_state.json").read_text()).get("step", 0)
        if done >= steps:
            return None
        return cli("train", "--config", config, "--resume", str(run_dir), *settings)
    return cli("train", "--config", config, *settings)


START_FILE = "start_policy.json"


def record_start(runs: Path, arm: str) -> None:
    """Note the fingerprint of the SFT policy an RL arm starts from (RUNS/ARM/start_policy.json): the report
    shows whether every arm started from the same policy, bit for bit, also when the SFT policy was carried
    between sessions (benchmarks/tools/learning_state.py) or trained again."""
    from pipeline.rl.tracking import weights_fingerprint
    policy = sft_policy(runs)
    if not (policy / "config.json").is_file():
        raise LearningError(f"arm {arm} starts from the SFT policy, which is not at {policy}; run the stage `sft` "
                            f"first (or unpack a carried one with benchmarks/tools/learning_state.py)")
    (runs / arm).mkdir(parents=True, exist_ok=True)
    (runs / arm / START_FILE).write_text(json.dumps({"policy": str(policy),
                                                     "weights_sha256": weights_fingerprint(policy)}, indent=1))


def start_fingerprints(runs: Path) -> dict[str, str | None]:
    """The fingerprint of the policy each arm started from. The SFT arm: the one its sft_summary.json names
    (kept where results are carried without weights, as learning_h200.sh's archive does), else the weights
    present now."""
    from pipeline.rl.tracking import weights_fingerprint
    out: dict[str, str | None] = {}
    summary = sft_policy(runs).parent / "sft_summary.json"
    for arm, overrides in ARMS.items():
        if overrides is None:
            named = json.loads(summary.read_text()).get("weights_sha256") if summary.is_file() else None
            out[arm] = named or (weights_fingerprint(sft_policy(runs)) if any(sft_policy(runs).glob("*.safetensors"))
                                 else None)
        else:
            f = runs / arm / START_FILE
            out[arm] = json.loads(f.read_text())["weights_sha256"] if f.is_file() else None
    return out


class LearningError(Exception):
    """A stage that cannot run yet; the message says what to run first."""


def drop_cut_off_checkpoints(run_dir: Path) -> None:
    """An arm stopped while writing its first checkpoint has nothing to resume from: its unusable
    checkpoints go, so that the stage starts the arm again (cudaperf train refuses to overwrite them)."""
    from pipeline.rl.tracking import latest_checkpoint
    if latest_checkpoint(run_dir) is None and (run_dir / "checkpoints").is_dir():
        import shutil
        print(f"learning: {run_dir / 'checkpoints'} holds only checkpoints cut off while written; "
              f"starting {run_dir.name} again")
        shutil.rmtree(run_dir / "checkpoints")


def bench_commands(runs: Path, arm: str, config: str, limit: int, extra: list[str],
                   splits=SPLITS, kinds=KINDS) -> list[list[str]]:
    """The bench shards of an arm still to run; LearningError while its policy is not final."""
    if ARMS[arm] is not None and rl_command(runs, arm, config, extra) is not None:
        raise LearningError(f"arm {arm} has not run all its RL steps; run the stage `rl {arm}` until it says "
                            "nothing is left, then bench it")
    policy = arm_policy(runs, arm)
    if policy is None or not (policy / "config.json").is_file():
        raise LearningError(f"arm {arm} has no policy at {policy}; run the stage `sft` first")
    out = []
    for split in splits:
        for kind in kinds:
            n = shard_count(split, kind)
            for k in range(min(n, limit) if limit > 0 else n):
                d = bench_dir(runs, arm, split, kind) / f"shard_{k:03d}_of_{n:03d}"
                done = d / "report.json"
                if done.is_file() and json.loads(done.read_text())["meta"].get("model") == str(policy):
                    continue
                out.append(cli("bench", "--model", str(policy), "--suite", kind, "--tasks", f"generated:{split}",
                               "--samples", str(BENCH_SAMPLES), "--shard", f"{k}/{n}", "--config", config,
                               "--out", str(d), *extra))
    return out


def plan(runs: Path, config: str, sft_config: str, data: str | None, limit: int, extra: list[str]) -> list[list[str]]:
    """Every command still to run, in order (finished stages left out)."""
    steps = [sft_command(runs, sft_config, extra), ranker_command(runs, config, data, extra)]
    steps += [rl_command(runs, arm, config, extra) for arm in ARMS]
    for arm in ARMS:
        try:
            steps += bench_commands(runs, arm, config, limit, extra)
        except LearningError:  # not yet: the plan lists the bench once its arm is done
            steps.append(cli("bench", f"<{arm} once its policy is final>"))
    return [s for s in steps if s is not None]


# ---- the report ------------------------------------------------------------------------------------

def _rate(attr: str):
    return lambda outs: sum(getattr(o, attr) for o in outs) / len(outs) if outs else None


def _fast(p: float):
    return lambda outs: fast_p(outs, p)[0] if outs else None


def _turn_gain(all_turns: list[Outcome]) -> float | None:
    one, two = final_outcomes(all_turns, 0), final_outcomes(all_turns, 1)
    return _rate("correct")(two) - _rate("correct")(one) if one and two else None


def merged(reports: list[dict]) -> dict:
    """The shards of one arm, split and kind as one report's outcomes and rows."""
    return {"outcomes": [o for r in reports for o in r["outcomes"]], "rows": [w for r in reports for w in r["rows"]]}


def measures(report: dict) -> tuple[dict, list[Outcome], dict]:
    """One (merged) bench report's measures with intervals (module docstring), its judged outcomes and the
    statistics by name (for the paired differences)."""
    outcomes = [Outcome(**o) for o in report["outcomes"]]
    outcomes = [o for o in outcomes if not o.evaluator_failure]
    struct = {(r["task"], r["sample"], r["turn"]): r.get("struct_score") for r in report["rows"]}

    last: list = [None, None]  # (a sample, its final outcomes): every statistic of one resample shares them

    def final(outs: list[Outcome]) -> list[Outcome]:
        if last[0] is not outs:
            last[:] = [outs, final_outcomes(outs)]
        return last[1]

    def struct_mean(outs: list[Outcome]) -> float | None:
        vals = [struct.get((o.task_id.split("#")[0], o.sample, o.turn)) for o in final(outs) if o.correct]
        vals = [v for v in vals if v is not None]
        return sum(vals) / len(vals) if vals else None
    stats = {"compile_rate": lambda o: _rate("compiled")(final(o)),
             "execute_rate": lambda o: _rate("executed")(final(o)),
             "correct_rate": lambda o: _rate("correct")(final(o)), "fast_1": lambda o: _fast(1.0)(final(o)),
             "fast_1.5": lambda o: _fast(1.5)(final(o)), "geomean_speedup_correct": lambda o: speedup_stats(final(o))["geomean"],
             "turn2_over_turn1_correct": _turn_gain, "struct_score_correct": struct_mean}
    out = task_intervals(outcomes, stats, resamples=RESAMPLES)
    out["tasks"] = len({o.task_id for o in outcomes})
    out["samples"] = len(final(outcomes))
    return out, outcomes, stats


def build_report(runs: Path) -> dict:
    """learning.json's content from whatever bench reports and training logs exist under `runs`."""
    from pipeline.rl.tracking import read_metrics
    result: dict = {"arms": {}, "compared_with": COMPARED, "differences": {}, "curves": {}}
    starts = start_fingerprints(runs)
    known = {v for v in starts.values() if v}
    result["start_policy"] = {"weights_sha256": starts, "same_for_every_arm": len(known) <= 1}
    if len(known) > 1:
        print(f"learning: the arms started from different SFT policies ({starts}); their differences mix the "
              f"start with the reward", file=sys.stderr)
    kept: dict[tuple[str, str, str], tuple] = {}
    for arm in ARMS:
        for split in SPLITS:
            for kind in KINDS:
                shards = sorted(bench_dir(runs, arm, split, kind).glob("shard_*/report.json"))
                if shards:
                    m, outcomes, stats = measures(merged([json.loads(p.read_text()) for p in shards]))
                    m["shards"] = len(shards)
                    result["arms"].setdefault(arm, {}).setdefault(split, {})[kind] = m
                    kept[(arm, split, kind)] = (outcomes, stats)
        if ARMS[arm] is not None and (runs / arm / "metrics.jsonl").is_file():
            rows = read_metrics(runs / arm)
            result["curves"][arm] = [{k: r.get(k) for k in CURVES} for r in rows]
    for (arm, split, kind), (outcomes, stats) in kept.items():
        base = kept.get((COMPARED, split, kind))
        if arm == COMPARED or base is None:
            continue
        result["differences"].setdefault(f"{COMPARED}-{arm}", {}).setdefault(split, {})[kind] = {
            name: paired_difference(base[0], outcomes, stats[name], resamples=RESAMPLES)
            for name in ("correct_rate", "fast_1", "geomean_speedup_correct")}
    return result


def plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(16, 4))
    for arm, rows in result["curves"].items():
        steps = [r["step"] for r in rows]
        a.plot(steps, [r["reward/episode_mean"] for r in rows], label=arm)
        live = [(r["step"], r["live/correct/episode_fraction"]) for r in rows
                if r.get("live/correct/episode_fraction") is not None]
        if live:
            b.plot(*zip(*live), label=arm)
    a.set(title="reward per episode (train tasks)", xlabel="step")
    b.set(title="live evaluation: correct episodes (held-out tasks)", xlabel="step")
    arms = [arm for arm in ARMS if "heldout" in result["arms"].get(arm, {})]
    for k, kind in enumerate(KINDS):
        vals = [result["arms"][arm]["heldout"].get(kind, {}).get("correct_rate") for arm in arms]
        xs = [i + 0.4 * k for i in range(len(arms))]
        heights = [v["value"] if v and v["value"] is not None else 0 for v in vals]
        errs = [[h - v["low"] if v and v["low"] is not None else 0 for h, v in zip(heights, vals)],
                [v["high"] - h if v and v["high"] is not None else 0 for h, v in zip(heights, vals)]]
        c.bar(xs, heights, 0.4, yerr=errs, label=kind, capsize=3)
    c.set_xticks([i + 0.2 for i in range(len(arms))], arms)
    c.set(title="correct rate on held-out tasks (95 % CI)")
    for ax in (a, b, c):
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---- command line -----------------------------------------------------------------------------------

def run(argv: list[str]) -> int:
    if subprocess.run(argv, cwd=ROOT).returncode:
        print(f"learning: this command failed; run the stage again once it is fixed: {' '.join(argv)}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("stage", choices=["plan", "sft", "ranker", "rl", "bench", "report"])
    p.add_argument("arm", nargs="?", help=f"for rl and bench: one of {', '.join(ARMS)}")
    p.add_argument("--runs", default="runs/learning")
    p.add_argument("--config", default="configs/learning_h200.yaml")
    p.add_argument("--sft-config", default="configs/sft_h200.yaml")
    p.add_argument("--ranker-data", default=None, help="measured Parquet for the ranker (default the dataset's)")
    p.add_argument("--limit", type=int, default=0, help="bench only the first N shards of each split and kind")
    p.add_argument("--splits", default=",".join(SPLITS), help="splits to bench (default all)")
    p.add_argument("--kinds", default=",".join(KINDS), help="kinds to bench (default both)")
    args, extra = parse_command_line(p, argv)
    if args.arm and "=" in args.arm:  # an override in the arm's place
        extra, args.arm = [args.arm, *extra], None
    if args.arm and args.arm not in ARMS:
        p.error(f"arm {args.arm!r} is not one of {', '.join(ARMS)}")
    runs = Path(args.runs)
    if args.stage in ("rl", "bench") and not args.arm:
        p.error(f"stage {args.stage} needs an arm: one of {', '.join(ARMS)}")
    if args.stage == "plan":
        for cmd in plan(runs, args.config, args.sft_config, args.ranker_data, args.limit, extra):
            print(" ".join(cmd))
        return 0
    if args.stage == "report":
        result = build_report(runs)
        (runs / "learning.json").write_text(json.dumps(result, indent=1))
        plot(result, runs / "learning.png")
        print(f"wrote {runs / 'learning.json'} and {runs / 'learning.png'}")
        return 0
    try:
        commands = stage_commands(args, runs, extra)
    except LearningError as e:
        print(f"learning: {e}", file=sys.stderr)
        return 1
    todo = [c for c in commands if c is not None]
    if not todo:
        print(f"learning: stage {args.stage} {args.arm or ''} has nothing left to do")
    for cmd in todo:
        if run(cmd):
            return 1
    return 0


def stage_commands(args, runs: Path, extra: list[str]) -> list:
    """The commands of one stage still to run (None where a stage has nothing left)."""
    if args.stage == "sft":
        return [sft_command(runs, args.sft_config, extra)]
    if args.stage == "ranker":
        return [ranker_command(runs, args.config, args.ranker_data, extra)]
    if args.stage == "rl":
        drop_cut_off_checkpoints(runs / args.arm)
        cmd = rl_command(runs, args.arm, args.config, extra)
        if cmd is not None and "--resume" not in cmd:
            record_start(runs, args.arm)
        return [cmd]
    return bench_commands(runs, args.arm, args.config, args.limit, extra, args.splits.split(","),
                          args.kinds.split(","))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
