"""Does the RL machinery learn what a CPU can verify? Three arms from the same start, with intervals.

    python benchmarks/learning_cpu.py [--steps 36] [--eval-steps 6] [--arms rl,no_update,shuffled] [--out FILE] \
        --set rollout.temperature=1.25 --rl-set rl.negative_advantage_weight=0   # the measured setting

A CPU verifies part of the reward: a candidate that passes the gate and compiles earns `compiled_value` and
the structural term (`not_executed`); format errors, compile errors and rejections earn less. Correctness and
speed are not on this machine: this measures the CPU-verifiable part only.

Arms (the only place they differ), each `cudaperf train` from the shipped tiny policy (configs/local.yaml:
tiny-sft, the built-in c2cuda tasks) with the same seed, tasks, samples and steps:
  rl         RL with the CPU-verifiable reward;
  no_update  the same sampling and scoring, learning rate 0: every update is computed, no weight changes;
  shuffled   RL with each group's advantages permuted among its samples (rl.shuffle_advantages).
Per step and arm (metrics.jsonl): the mean reward; the rates of format error, compile error, rejected and
not_executed (compiled); the share of groups whose returns all tie (advantage collapse); the policy ratio,
approximate KL and gradient norm; and whether the samples came from the weight version the learner had just
made (rollout/weight_version against the previous step's learner/weight_version).
Diagnosis (`preference_shift`): the change, from the start to the end policy, of the mean per-token
log-probability of the arm's own training samples, for those that compiled and those that did not.
Final figures: each arm's final policy, resumed with learning rate 0 for `--eval-steps` more steps, samples
fresh episodes of the same task stream (the same tasks in the same order for every arm, never trained on);
the compiled rate and the mean reward over those samples (at least 200), with 95 % percentile bootstrap
intervals over samples. Writes the JSON (`arms.<arm>.final.<measure>` = {mean, lo, hi}) and a plot beside it.
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ARMS = {"rl": [], "no_update": ["learner.lr=0"], "shuffled": ["rl.shuffle_advantages=true"]}
COMPILED = ("not_executed", "correct", "incorrect", "runtime_error", "timeout")  # got past the compiler
VERDICTS = ("format_error", "compile_error", "rejected", "not_executed")


def common(runs: Path, arm: str, steps: int, lr: float, model: str = "tiny-sft", samples: int = 8,
           tasks_per_step: int = 2, seed: int = 0) -> list[str]:
    return ["--config", str(ROOT / "configs" / "local.yaml"), f"run.output_dir={runs}", f"run.name={arm}",
            "tasks.kinds=[c2cuda]", f"train.tasks_per_step={tasks_per_step}", f"rollout.samples_per_task={samples}",
            "rollout.max_turns=1", f"model.path={model}", f"run.seed={seed}",
            f"learner.lr={lr}", f"train.steps={steps}", "train.progress_bar=false", "train.wandb_mode=disabled",
            "train.samples_per_step=1000", "compile.workers=2", "learner.log_entropy=true"]


def run(argv: list[str], log: Path) -> None:
    with log.open("a") as f:
        rc = subprocess.run([sys.executable, "-m", "pipeline.cli", *argv], cwd=ROOT, stdout=f, stderr=subprocess.STDOUT).returncode
    if rc:
        raise SystemExit(f"`cudaperf {' '.join(argv[:2])} ...` failed (status {rc}); see {log}")


def bootstrap(values: list[float], resamples: int = 4000, seed: int = 0) -> dict:
    """The mean of `values` with a 95 % percentile bootstrap interval; Nones for no values."""
    rng = random.Random(seed)
    n = len(values)
    if not n:
        return {"mean": None, "lo": None, "hi": None, "n": 0}
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return {"mean": sum(values) / n, "lo": means[int(0.025 * resamples)], "hi": means[int(0.975 * resamples) - 1],
            "n": n}


def arm_figures(run_dir: Path, steps: int) -> dict:
    from pipeline.rl.tracking import read_metrics
    metrics = read_metrics(run_dir)
    train_rows = [m for m in metrics if m["step"] <= steps]
    per_step = [{"step": m["step"], "reward": m.get("reward/turn_mean"),
                 **{v: m.get(f"verdict/{v}", 0.0) for v in VERDICTS},
                 "collapsed_groups": m.get("advantage/collapsed_group_fraction"),
                 "ratio": m.get("learner/ratio_mean_first"), "approx_kl": m.get("learner/approx_kl_first"),
                 "grad_norm": m.get("learner/grad_norm"), "sampled_by_version": m.get("rollout/weight_version"),
                 "learner_version": m.get("learner/weight_version"), "entropy": m.get("learner/entropy")}
                for m in train_rows]
    synced = all(a["sampled_by_version"] == b["learner_version"] for a, b in zip(per_step[1:], per_step))
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    fresh = [s for s in samples if s["step"] > steps and s["verdict"] is not None]
    final = {"reward": bootstrap([s["reward"] for s in fresh if s["reward"] is not None]),
             "compiled_rate": bootstrap([float(s["verdict"] in COMPILED) for s in fresh]),
             "format_error_rate": bootstrap([float(s["verdict"] == "format_error") for s in fresh])}
    return {"per_step": per_step, "samples_from_the_newest_weights": synced, "final": final}


def pooled(run_roots: list[Path], arms: list[str], steps: int) -> dict:
    """Each arm's final figures over the fresh samples of several runs (seeds) together, with 95 % bootstrap
    intervals, and per run: {arm: {"final": ..., "runs": [{"root", "final"}]}}."""
    out = {}
    for arm in arms:
        fresh, per_run = [], []
        for root in run_roots:
            path = root / arm / "samples.jsonl"
            if not path.is_file():
                continue
            rows = [json.loads(line) for line in path.read_text().splitlines()]
            rows = [r for r in rows if r["step"] > steps and r["verdict"] is not None]
            per_run.append({"root": str(root), "compiled_rate": bootstrap([float(r["verdict"] in COMPILED) for r in rows])})
            fresh += rows
        if fresh:
            out[arm] = {"final": {"reward": bootstrap([r["reward"] for r in fresh if r["reward"] is not None]),
                                  "compiled_rate": bootstrap([float(r["verdict"] in COMPILED) for r in fresh]),
                                  "format_error_rate": bootstrap([float(r["verdict"] == "format_error") for r in fresh])},
                        "runs": per_run}
    return out


def preference_shift(run_dir: Path, start: Path, end: Path, steps: int, limit: int = 160) -> dict:
    """Where the update moved the policy: the mean per-token log-probability of the arm's own training samples
    (steps 1..`steps`, turn 0) under the start and the end policy, for the samples that compiled and for those
    that did not. A policy learning the CPU-verifiable reward gains more on the first than on the second."""
    import torch
    from transformers import AutoModelForCausalLM
    from pipeline.rollout.conversation import ChatFormat
    from pipeline.rollout.prompts import opening_messages
    from pipeline.rollout.tiny_model import load_tokenizer
    from pipeline.tasks import load_tasks
    tasks = {task.id: task for task in load_tasks("builtin")}
    rows = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r["step"] <= steps and r["turn"] == 0 and r["verdict"] is not None][:limit]
    chat = ChatFormat(load_tokenizer(start))
    pairs = []
    for r in rows:
        prompt = chat.opening_ids(*opening_messages(tasks[r["task"]]))
        response = chat.tokenizer.encode(r["response"], add_special_tokens=False)
        if response:
            pairs.append((prompt, response, r["verdict"] in COMPILED))

    def mean_logprobs(path: Path) -> list[float]:
        model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32).eval()
        out = []
        with torch.no_grad():
            for prompt, response, _ in pairs:
                ids = torch.tensor([prompt + response])
                logp = torch.log_softmax(model(ids).logits[0, :-1].float(), -1)
                picked = logp[torch.arange(len(prompt) - 1, ids.shape[1] - 1), ids[0, len(prompt):]]
                out.append(float(picked.mean()))
        return out
    before, after = mean_logprobs(start), mean_logprobs(end)
    shift = {True: [], False: []}
    for (_, _, compiled), b, a in zip(pairs, before, after):
        shift[compiled].append(a - b)
    return {"samples": len(pairs), "compiled": bootstrap(shift[True]) if shift[True] else None,
            "not_compiled": bootstrap(shift[False]) if shift[False] else None,
            "what": "change of the mean per-token log-probability of the arm's own training samples, end policy "
                    "minus start policy, by whether the sample compiled"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=36, help="RL steps per arm")
    ap.add_argument("--eval-steps", type=int, default=6, help="steps of fresh samples (16 each) under the final policy")
    ap.add_argument("--lr", type=float, default=5e-5, help="learning rate of the rl and shuffled arms (2e-4 and more: "
                    "the update's noise undoes its gain, docs/training.md)")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--diagnose-lr", type=float, default=None, help="also run the rl arm at this learning rate "
                    "(arm rl_lr<LR>), to tell an update that follows the reward from one that is too large")
    ap.add_argument("--model", default="tiny-sft", help="the start policy of every arm (model.path)")
    ap.add_argument("--samples-per-task", type=int, default=16, help="group size (rollout.samples_per_task)")
    ap.add_argument("--tasks-per-step", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0, help="run.seed of every arm (sampling, task order)")
    ap.add_argument("--set", action="append", default=[], help="a key=value override of every arm (e.g. "
                    "rollout.temperature=1.25); may be given several times")
    ap.add_argument("--rl-set", action="append", default=[], help="a key=value override of the rl and shuffled "
                    "arms (e.g. rl.negative_advantage_weight=0); may be given several times")
    ap.add_argument("--runs", default=None, help="directory of the arms' runs (default: a new one under runs/)")
    ap.add_argument("--pool", default=None, help="comma-separated run directories of finished runs (one per seed): "
                    "only pool their arms' fresh samples into --out (figures per seed and together)")
    ap.add_argument("--out", default=None, help="JSON file (default: a new file under benchmarks/results/v<N>/)")
    args = ap.parse_args(argv)
    if args.pool:
        roots = [Path(r) for r in args.pool.split(",") if r]
        table = pooled(roots, args.arms.split(","), args.steps)
        Path(args.out).write_text(json.dumps({"what": "arms pooled over seeds (their runs' fresh samples together)",
                                              "runs": [str(r) for r in roots], "steps": args.steps,
                                              "arms": table}, indent=1))
        for arm, fig in table.items():
            f = fig["final"]["compiled_rate"]
            print(f"{arm:10s} compiled {f['mean']:.3f} [{f['lo']:.3f}, {f['hi']:.3f}]  n {f['n']}  per seed "
                  + ", ".join(f"{r['compiled_rate']['mean']:.3f}" for r in fig["runs"]))
        return 0
    from pipeline.rl.tracking import checkpoint_dir
    runs = Path(args.runs) if args.runs else ROOT / "runs" / f"learning_cpu_{int(time.time())}"
    runs.mkdir(parents=True, exist_ok=True)
    given = [a for a in (argv if argv is not None else sys.argv[1:])]
    shown = [a for i, a in enumerate(given) if a not in ("--runs", "--out") and (i == 0 or given[i - 1] not in
                                                                                ("--runs", "--out"))]
    out = {"command": "python benchmarks/learning_cpu.py " + " ".join(shown),
           "what": "the CPU-verifiable part of the reward (compiled_value, the structural term where the config "
                   "asks for it, format errors); not correctness or speed", "steps": args.steps,
           "eval_steps": args.eval_steps, "lr": args.lr, "model": args.model, "seed": args.seed,
           "samples_per_task": args.samples_per_task, "tasks_per_step": args.tasks_per_step, "rl_set": args.rl_set,
           "arms": {}}
    learning = {"rl": ARMS["rl"] + args.set + args.rl_set, "no_update": ARMS["no_update"] + args.set,
                "shuffled": ARMS["shuffled"] + args.set + args.rl_set}
    out["set"] = args.set
    arms = {arm: (learning[arm], args.lr) for arm in args.arms.split(",")}
    if args.diagnose_lr is not None:
        arms[f"rl_lr{args.diagnose_lr:g}"] = (learning["rl"], args.diagnose_lr)
    setting = dict(model=args.model, samples=args.samples_per_task, tasks_per_step=args.tasks_per_step, seed=args.seed)
    for arm, (overrides, lr) in arms.items():
        log = runs / f"{arm}.log"
        t0, ran = time.perf_counter(), False
        if not checkpoint_dir(runs / arm, args.steps).is_dir():
            ran = True
            run(["train", *common(runs, arm, args.steps, lr, **setting), f"train.checkpoint_every_steps={args.steps}",
                 *overrides], log)
        total = args.steps + args.eval_steps
        if not checkpoint_dir(runs / arm, total).is_dir():
            ran = True
            run(["train", "--resume", str(runs / arm), *common(runs, arm, total, 0.0, **setting),
                 f"train.checkpoint_every_steps={total}", *[a for a in overrides if not a.startswith("learner.lr")]],
                log)
        out["arms"][arm] = {"overrides": overrides, "lr": 0.0 if "learner.lr=0" in overrides else lr,
                            "wall_s": round(time.perf_counter() - t0, 1) if ran else None,  # None: run earlier
                            **arm_figures(runs / arm, args.steps)}
        from pipeline.rollout.tiny_model import SFT_TINY, SFT_TINY_DIR
        start = SFT_TINY_DIR if args.model == SFT_TINY else Path(args.model)
        out["arms"][arm]["preference_shift"] = preference_shift(runs / arm, start,
                                                                checkpoint_dir(runs / arm, args.steps) / "hf", args.steps)
        partial = Path(args.out).with_suffix(".partial.json") if args.out else runs / "learning_cpu.partial.json"
        partial.write_text(json.dumps(out, indent=1))  # each finished arm kept, should a later one not finish
        f = out["arms"][arm]["final"]
        print(f"{arm:10s} compiled {f['compiled_rate']['mean']:.3f} [{f['compiled_rate']['lo']:.3f}, "
              f"{f['compiled_rate']['hi']:.3f}]  reward {f['reward']['mean']:.3f} [{f['reward']['lo']:.3f}, "
              f"{f['reward']['hi']:.3f}]  n {f['reward']['n']}", flush=True)
    path = Path(args.out) if args.out else None
    if path is None:
        from benchmarks.results_path import fresh_result_path
        path = fresh_result_path("learning_cpu.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    plot(out, path.with_suffix(".png"))
    print(f"wrote {path}")
    return 0


def plot(out: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.4))
    for arm, fig_ in out["arms"].items():
        steps = [r["step"] for r in fig_["per_step"]]
        axes[0].plot(steps, [r["reward"] for r in fig_["per_step"]], label=arm)
        axes[1].plot(steps, [r["not_executed"] for r in fig_["per_step"]], label=arm)
        axes[2].plot(steps, [r["format_error"] for r in fig_["per_step"]], label=arm)
    for ax, title in zip(axes, ("mean reward per step", "compiled rate per step", "format-error rate per step")):
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("step")
        ax.legend(fontsize=7)
    arms = list(out["arms"])
    for i, measure in enumerate(("compiled_rate", "reward")):
        vals = [out["arms"][a]["final"][measure] for a in arms]
        x = [k + 0.4 * i for k in range(len(arms))]
        axes[3].bar(x, [v["mean"] for v in vals], width=0.38, label=measure,
                    yerr=[[v["mean"] - v["lo"] for v in vals], [v["hi"] - v["mean"] for v in vals]], capsize=3)
    axes[3].set_xticks([k + 0.2 for k in range(len(arms))], arms)
    axes[3].set_title("final policy, fresh samples (95 % bootstrap)", fontsize=9)
    axes[3].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
