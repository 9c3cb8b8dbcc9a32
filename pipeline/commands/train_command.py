"""`cudaperf train`: multi-turn RL of the policy on Ray (the loop itself is pipeline/rl/loop.py).

Usage:
  cudaperf train --config configs/local.yaml [section.key=value ...]
  cudaperf train --config configs/local.yaml --resume runs/local [section.key=value ...]

The run directory is `run.output_dir/run.name`. It receives metrics.jsonl, training_curves.png,
wandb/ and checkpoints/step_<k>/ (hf/: the policy in Hugging Face format with its tokenizer;
deepspeed/: weights and optimizer state of every learner rank; run_state.json: step, task stream
position, weight version, RNG states). `--resume RUN_DIR` continues from RUN_DIR's newest
checkpoint (or from a checkpoint directory given directly) up to `train.steps`; give the same
config. With `train.reproducible=true`, `rl.staleness_steps=0` and cached evaluation results, the
resumed steps repeat the original run's metrics exactly.
"""
from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from pipeline.commands.program import program_name
from pipeline.core.config import ConfigError, add_config_option, load_config
from pipeline.core.errors import UserError
from pipeline.core.node_roles import timed_roles


HELP = "multi-turn RL training on Ray"


def add_parser(commands) -> argparse.ArgumentParser:
    p = add_config_option(commands.add_parser("train", help=HELP, description=HELP),
                          "run configuration YAML (e.g. configs/local.yaml)")
    p.add_argument("--resume", default=None, metavar="RUN_DIR",
                   help="continue from the newest checkpoint of this run directory (or this checkpoint directory)")
    return p


def resolve_resume(path: str) -> Path:
    """The checkpoint directory `--resume` means: the path itself, or its run's newest checkpoint."""
    from pipeline.rl.tracking import latest_checkpoint
    given = Path(path)
    if (given / "run_state.json").is_file():
        return given
    found = latest_checkpoint(given)
    if found is None:
        raise ConfigError(f"--resume {path}: no checkpoint there (checkpoints/step_*/run_state.json); pass a run "
                          "directory written by cudaperf train, or start without --resume")
    return found


def step_line(row: dict) -> str:
    """One line per step: reward, correctness, turns, verdicts, learner loss, busy fractions, time."""
    get = lambda k: row.get(k, float("nan"))
    verdicts = " ".join(f"{k.split('/')[1]}={v:.2f}" for k, v in sorted(row.items()) if k.startswith("verdict/"))
    busy = " ".join(f"{role.short} {get('busy/' + role.name):.2f}" for role in timed_roles())
    return (f"step {row['step']}: reward {get('reward/turn_mean'):.3f} correct {get('correct/turn_fraction'):.2f} "
            f"turns {get('rollout/turns_used_mean'):.2f} [{verdicts}] loss {get('learner/loss'):.4f} "
            f"ratio {get('learner/ratio_mean_first'):.4f} busy {busy} step {get('time/step_s'):.1f}s "
            f"(rollout {get('time/rollout_s'):.1f}s, update {get('learner/update_s'):.1f}s)")


def run(args, open_cluster) -> int:
    """`open_cluster(cfg, cpus_needed)`: the CLI's way to reach Ray (pipeline/cli.py)."""
    from pipeline.rl.tracking import latest_checkpoint, run_summary
    overrides = args.overrides
    cfg = load_config(args.config, overrides)  # user errors end in pipeline/cli.py, as one line
    from pipeline.commands.preflight import require_compiler
    require_compiler(cfg)  # no verdict without its compiler (or eval.allow_unbuilt), said before anything starts
    resume = resolve_resume(args.resume) if args.resume else None
    run_dir = Path(cfg.run.output_dir) / cfg.run.name
    if resume is None and (run_dir / "checkpoints").is_dir():
        if latest_checkpoint(run_dir) is None:
            raise UserError(f"run directory {run_dir} holds only incomplete checkpoints (a run stopped while writing "
                            f"one); delete {run_dir / 'checkpoints'} to start it again, or choose another run.name")
        raise UserError(f"run directory {run_dir} already holds checkpoints; pass --resume {run_dir} to continue "
                        "it, or choose another run.name")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(cfg.model_dump_json(indent=2))
    from pipeline.rl.loop import cpus_needed, run_training
    from pipeline.rollout.tiny_model import resolve_model_path
    resolve_model_path(cfg.model)  # a bad model.path is the user's to fix, said before Ray starts
    rows = run_training(cfg, run_dir, open_cluster(cfg, cpus_needed(cfg)), resume)
    print(run_summary(rows, run_dir, next_commands(cfg, run_dir, args.config, overrides, program_name()),
                      details=[step_line(row) for row in rows], samples_per_step=cfg.train.samples_per_step))
    return 0


def next_commands(cfg, run_dir: Path, config_path: str | None, overrides: list[str] = (),
                  program: str = "cudaperf") -> list[str]:
    """What to run after this training run, each line pasteable as printed (`program`: how to call cudaperf
    from here, commands/program.py); a resume repeats the run's config and overrides. Comments follow '#'."""
    from pipeline.rl.tracking import latest_checkpoint
    out = []
    if latest_checkpoint(run_dir) is not None:
        config = f" --config {shlex.quote(config_path)}" if config_path else ""
        kept = "".join(f" {shlex.quote(o)}" for o in overrides if not o.startswith("train.steps="))
        out.append(f"{program} train{config} --resume {shlex.quote(str(run_dir))}{kept} "
                   f"train.steps={cfg.train.steps + 5}   # five more steps")
    if cfg.eval.gpus == 0:
        out.append(f"{program} train --config configs/h200.yaml   # on a GPU host: real verdicts and speedups")
    out.append(f"{program} bench --help   # score a policy or a directory of answers on KernelBench or the test split")
    return out
