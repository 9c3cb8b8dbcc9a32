"""What a training run leaves in its directory: run state, metrics JSONL, plots, wandb, a progress bar.

In: a run directory (`run.output_dir/run.name`), one flat metrics dict per step, the driver's state.
Out, under the run directory:
- `metrics.jsonl`: one JSON object per step (`step` plus every metric); a resumed run first drops
  the lines of steps after the checkpoint it resumes from, so every step appears once;
- `samples.jsonl`: the turns of the first `train.samples_per_step` episodes of each step (task,
  verdict, reason, the response text), to read what the policy writes; resumed like metrics.jsonl;
- `training_curves.png`: reward, correctness, speedup, turns used and busy fractions per step;
- `wandb/`: the Weights & Biases run (offline unless `train.wandb_mode` says otherwise);
- checkpoints `checkpoints/step_<k>/` (written by the learner; `RunState` is their run_state.json part).
No Ray; the step loop (pipeline/rl/loop.py) calls these.
"""
from __future__ import annotations

import base64
import json
import math
import random
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from pipeline.core.node_roles import timed_roles

METRICS_FILE = "metrics.jsonl"
SAMPLES_FILE = "samples.jsonl"
PLOT_FILE = "training_curves.png"
CHECKPOINT_DIR = "checkpoints"
PLOTTED = (("reward/turn_mean", "reward per turn"), ("correct/turn_fraction", "correct turns"),
           ("speedup/correct_geomean", "speedup of correct turns (geomean)"),
           ("rollout/turns_used_mean", "turns used per episode"))
EXECUTED = ("correct", "incorrect", "runtime_error", "timeout")  # verdicts only a GPU gives
CPU_VERDICTS = ("format_error", "compile_error", "rejected", "not_executed", "unbuilt")  # what a CPU can tell apart


def checkpoint_dir(run_dir: str | Path, step: int) -> Path:
    """Where the checkpoint after `step` steps lives."""
    return Path(run_dir) / CHECKPOINT_DIR / f"step_{step:06d}"


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The run's newest complete checkpoint (one holding run_state.json), or None."""
    root = Path(run_dir) / CHECKPOINT_DIR
    done = sorted(p for p in root.glob("step_*") if (p / "run_state.json").is_file()) if root.is_dir() else []
    return done[-1] if done else None


def weights_fingerprint(hf_dir: str | Path) -> str:
    """sha256 over a Hugging Face checkpoint's weight files (*.safetensors, in name order): two policies with
    the same fingerprint are the same policy, bit for bit."""
    import hashlib
    files = sorted(Path(hf_dir).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"'{hf_dir}' holds no *.safetensors weights; pass a Hugging Face checkpoint directory")
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
    return h.hexdigest()


def _pack(obj) -> str:
    return base64.b64encode(torch.serialization.pickle.dumps(obj)).decode()


def _unpack(text: str):
    return torch.serialization.pickle.loads(base64.b64decode(text))


@dataclass
class RunState:
    """The driver's state after `step` steps: what a resumed run needs besides weights and optimizer."""
    step: int = 0
    reader: dict = field(default_factory=dict)  # the task stream's position (TaskReader.state())
    weight_version: int = 0
    rng: dict[str, str] = field(default_factory=dict)  # driver RNG states (python, numpy, torch), pickled

    def capture_rng(self) -> None:
        self.rng = {"python": _pack(random.getstate()), "numpy": _pack(np.random.get_state()),
                    "torch": _pack(torch.get_rng_state())}

    def restore_rng(self) -> None:
        if self.rng:
            random.setstate(_unpack(self.rng["python"]))
            np.random.set_state(_unpack(self.rng["numpy"]))
            torch.set_rng_state(_unpack(self.rng["torch"]))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict) -> RunState:
        keys = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in raw.items() if k in keys})


class MetricsLog:
    """Appends one JSON line per step to `run_dir/metrics.jsonl`."""

    def __init__(self, run_dir: str | Path, resume_after_step: int | None = None, name: str = METRICS_FILE):
        self.path = Path(run_dir) / name
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume_after_step is not None and self.path.is_file():
            kept = [line for line in self.path.read_text().splitlines()
                    if line.strip() and json.loads(line)["step"] <= resume_after_step]
            self.path.write_text("".join(line + "\n" for line in kept))
        elif resume_after_step is None:
            self.path.write_text("")

    def write(self, step: int, metrics: dict[str, float]) -> None:
        row = {"step": step, **{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in metrics.items()}}
        with self.path.open("a") as f:
            f.write(json.dumps(row, sort_keys=True) + "\n")

    def rows(self) -> list[dict]:
        return read_metrics(self.path.parent, self.path.name)


class SampleLog(MetricsLog):
    """Appends the turns of the first `per_step` episodes of each step to `run_dir/samples.jsonl`."""

    def __init__(self, run_dir: str | Path, per_step: int, resume_after_step: int | None = None):
        super().__init__(run_dir, resume_after_step, SAMPLES_FILE)
        self.per_step = per_step

    def write_episodes(self, step: int, outcomes, scored=()) -> None:
        """The turns of the first `per_step` outcomes; with `scored` (the step's ScoredEpisodes), each turn's
        reward too."""
        from pipeline.rollout.episodes import turn_rows
        rewards = {(e.trajectory.episode_id, k): t.reward for e in scored for k, t in enumerate(e.turns)}
        rows = [{**row, "reward": rewards.get((ep.trajectory.episode_id, row["turn"]))}
                for ep in outcomes[:self.per_step] for row in turn_rows(ep)]
        with self.path.open("a") as f:
            f.writelines(json.dumps({"step": step, **row}) + "\n" for row in rows)


def read_metrics(run_dir: str | Path, name: str = METRICS_FILE) -> list[dict]:
    """Every step's metrics of a run (or the rows of another of its JSONL files, e.g. samples.jsonl), in order."""
    path = Path(run_dir) / name
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def curve_panels(rows: list[dict]) -> tuple[tuple[str, str], ...]:
    """(metric, title) of each panel of training_curves.png: PLOTTED when some candidate ran on a GPU; on a CPU
    reward, the compiled rate ('compiled') and the verdict mix ('verdicts') instead of correctness and speed."""
    if any(r.get(f"verdict/{v}", 0) for r in rows for v in EXECUTED):
        return PLOTTED
    return (("reward/turn_mean", "reward per turn"), ("compiled", "compiled (gated and built) turns"),
            ("verdicts", "verdict mix"), ("rollout/turns_used_mean", "turns used per episode"))


def proportion_interval(fraction: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a fraction of `n` turns (scipy's binomtest); (nan, nan) without turns."""
    from scipy.stats import binomtest
    if not n or fraction != fraction:
        return float("nan"), float("nan")
    ci = binomtest(int(round(fraction * n)), int(n)).proportion_ci(confidence_level=level, method="wilson")
    return float(ci.low), float(ci.high)


def mean_interval(mean: float, std: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """Student-t interval of a mean of `n` values with standard deviation `std` (population form, as
    rollout_metrics gives it); (mean, mean) with fewer than two values or no std."""
    from scipy.stats import t
    if n < 2 or std != std or mean != mean:
        return mean, mean
    half = t.ppf(0.5 + level / 2, n - 1) * std * math.sqrt(n / (n - 1)) / math.sqrt(n)
    return mean - half, mean + half


def step_tasks_text(rows: list[dict], width: int = 150) -> str:
    """'tasks: step 1 saxpy, dot; step 2 ...' for the steps whose tasks differ from the step before ('' when the
    rows name no tasks)."""
    import textwrap
    parts, before = [], None
    for r in rows:
        tasks = r.get("tasks")
        if tasks and tasks != before:
            parts.append(f"step {r['step']} " + ", ".join(str(t).split("/")[-1] for t in tasks))
        before = tasks or before
    return textwrap.fill("tasks: " + "; ".join(parts), width) if parts else ""


def plot_metrics(run_dir: str | Path) -> Path:
    """Draw the run's curves per step into training_curves.png: reward, correctness, speedup and turns used
    when candidates ran on a GPU; on a CPU, where nothing runs, what a CPU can see instead: reward, the
    compiled rate and the verdict mix. Busy fractions in both. Each mean and rate has its 95 % interval
    (from the step's number of turns, written in the title); rates span 0 to 1, every axis holds 0, steps are
    whole numbers, and the tasks of each step are written below when they change."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    rows = read_metrics(run_dir)
    panels = curve_panels(rows)
    tasks_text = step_tasks_text(rows)
    fig, axes = plt.subplots(1, len(panels) + 1, figsize=(4 * (len(panels) + 1), 3.4 + 0.25 * tasks_text.count("\n")
                                                          + (0.4 if tasks_text else 0)))
    steps = [r["step"] for r in rows]
    turns = [int(r.get("rollout/turns", 0)) for r in rows]
    nan = float("nan")

    def rate(ax, values, **kw):
        lo_hi = [proportion_interval(v, n) for v, n in zip(values, turns)]
        line, = ax.plot(steps, values, marker=".", **kw)
        ax.fill_between(steps, [a for a, _ in lo_hi], [b for _, b in lo_hi], alpha=0.2, color=line.get_color())
        ax.set_ylim(0, 1.02)

    for ax, (key, title) in zip(axes, panels):
        if key == "compiled":
            rate(ax, [r.get("verdict/not_executed", 0.0) for r in rows])
        elif key == "verdicts":
            for v in CPU_VERDICTS:
                if any(r.get(f"verdict/{v}", 0.0) for r in rows):
                    rate(ax, [r.get(f"verdict/{v}", 0.0) for r in rows], label=v)
            ax.legend(fontsize=7)
        elif key == "correct/turn_fraction":
            rate(ax, [r.get(key, nan) for r in rows])
        else:
            values = [r.get(key) if r.get(key) is not None else nan for r in rows]
            ax.plot(steps, values, marker=".")
            if key == "reward/turn_mean":
                ci = [mean_interval(v, r.get("reward/turn_std", nan), n) for v, r, n in zip(values, rows, turns)]
                ax.fill_between(steps, [a for a, _ in ci], [b for _, b in ci], alpha=0.2)
                ax.axhline(0, color="grey", lw=0.6)
            if key.startswith("speedup/"):
                ax.axhline(1, color="grey", lw=0.6, ls="--")
            low, high = ax.get_ylim()
            ax.set_ylim(min(0, low), max(0, high))
        n_text = f"n = {min(turns)}-{max(turns)} turns/step" if turns and min(turns) != max(turns) else \
            f"n = {turns[0] if turns else 0} turns/step"
        ax.set_title(f"{title}\n({n_text}, 95 % interval)" if key != "rollout/turns_used_mean" else title, fontsize=9)
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for role in timed_roles():
        axes[-1].plot(steps, [r.get(f"busy/{role.name}", nan) for r in rows], marker=".", label=role.name)
    axes[-1].set_title("busy fraction", fontsize=9)
    axes[-1].set_ylim(0, 1.05)
    axes[-1].legend(fontsize=7)
    axes[-1].set_xlabel("step")
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    if tasks_text:
        fig.text(0.01, 0.01, tasks_text, fontsize=7, va="bottom", ha="left")
    fig.tight_layout(rect=(0, 0.06 + 0.03 * tasks_text.count("\n") if tasks_text else 0, 1, 1))
    out = Path(run_dir) / PLOT_FILE
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


class WandbLog:
    """A Weights & Biases run under `run_dir/wandb` (mode offline, online or disabled); one id per run
    directory, so a resumed run continues the same wandb run."""

    def __init__(self, mode: str, project: str, run_dir: str | Path, name: str, config: dict):
        self.run = None
        if mode == "disabled":
            return
        try:
            import wandb
        except ImportError as e:
            raise RuntimeError(f"train.wandb_mode = '{mode}' but wandb cannot be imported ({e}); pip install wandb "
                               "or set train.wandb_mode=disabled") from e
        run_dir = Path(run_dir)
        id_file = run_dir / "wandb_id"
        run_id = id_file.read_text().strip() if id_file.is_file() else uuid.uuid4().hex[:8]
        id_file.write_text(run_id)
        self.run = wandb.init(project=project, name=name, id=run_id, resume="allow", mode=mode, dir=str(run_dir),
                              config=config, settings=wandb.Settings(silent=True, console="off"))

    def log(self, step: int, metrics: dict) -> None:
        """The step's numbers (a row's other entries, such as its task ids, stay in metrics.jsonl)."""
        if self.run is not None:
            self.run.log({k: v for k, v in metrics.items() if isinstance(v, (int, float))}, step=step)

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None


def progress_bar(enabled: bool, total: int, initial: int):
    """A tqdm bar over the steps (a no-op object when disabled)."""
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, desc="RL steps", unit="step", disable=not enabled, dynamic_ncols=True)


def headline(metrics: dict[str, float]) -> dict[str, str]:
    """The few numbers the progress bar shows."""
    keys = {"reward": "reward/turn_mean", "correct": "correct/turn_fraction", "loss": "learner/loss",
            **{role.short: f"busy/{role.name}" for role in timed_roles()}}
    return {short: f"{metrics[k]:.3g}" for short, k in keys.items() if k in metrics and metrics[k] == metrics[k]}


class StatusLine:
    """What a run is waiting for, and for how long so far, while nothing else is printed (engines and
    actors starting): a line every `every_s` seconds on `stream` (stderr), rewritten in place on a
    terminal; `done()` (or leaving the block) ends it with the time it took.

        with StatusLine("starting 1 generator (vllm), 1 learner rank, 2 compilers") as status:
            ...start and wait...
            status.done("ready")
    """

    def __init__(self, what: str, every_s: float = 10.0, stream=None):
        self.what, self.every_s = what, every_s
        self.stream = stream if stream is not None else sys.stderr
        self._clock = time.monotonic
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._t0 = 0.0
        self._ended = False

    def _tty(self) -> bool:
        return bool(getattr(self.stream, "isatty", lambda: False)())

    def _write(self, text: str, final: bool = False) -> None:
        if self._tty():
            self.stream.write(f"\r\x1b[K{text}" + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self._write(f"{self.what}: {self._clock() - self._t0:.0f} s so far")

    def __enter__(self) -> "StatusLine":
        self._t0 = self._clock()
        self._write(f"{self.what} ...")
        self._thread.start()
        return self

    def done(self, outcome: str = "ready") -> float:
        """Stop the line; say `outcome` and the seconds it took (once); returns those seconds."""
        if not self._ended:
            self._ended = True
            self._took = self._clock() - self._t0
            self._stop.set()
            self._thread.join()
            self._write(f"{self.what}: {outcome} after {self._took:.0f} s", final=True)
        return self._took

    def __exit__(self, exc_type, *rest) -> None:
        self.done("ready" if exc_type is None else f"stopped ({exc_type.__name__})")


def run_summary(rows: list[dict], run_dir: Path, next_commands: list[str], details: list[str] = (),
                samples_per_step: int | None = None) -> str:
    """What a finished run did, for the user who just ran it: the verdict mix of each step, whether
    rewards varied within groups (and so whether anything was learned), then `details` (a line per step),
    where the files are and what each holds, and what to try next (last, to paste)."""
    lines = [f"summary of {len(rows)} step(s):"]
    varied = False
    for row in rows:
        turns = int(round(row.get("rollout/turns", 0)))
        mix = sorted(((v, k.split("/", 1)[1]) for k, v in row.items() if k.startswith("verdict/") and v > 0),
                     reverse=True)
        counts = ", ".join(f"{name} {round(v * turns)}" for v, name in mix) or "no evaluated turns"
        adv = row.get("reward/advantage_abs_mean", 0.0)
        step_varied = adv == adv and adv > 0
        varied |= step_varied
        loss = row.get("learner/loss", float("nan"))
        lines.append(f"  step {row['step']}: {turns} candidates: {counts}; rewards "
                     f"{'varied within groups' if step_varied else 'all equal within every group'}; "
                     f"loss {loss:.4g}")
    if rows and not varied:
        lines.append("  every group's rewards were equal, so every advantage was 0 and the update changed nothing: "
                     "the policy needs a warm start that writes answers of the task's shape (cudaperf sft)")
    if details:
        lines += ["details per step:"] + [f"  {d}" for d in details]
    written = (f"what the policy wrote, the first {samples_per_step} episodes of each step "
               "(train.samples_per_step)" if samples_per_step is not None else "what the policy wrote")
    files = [(run_dir / METRICS_FILE, "metrics per step (every figure)"), (run_dir / SAMPLES_FILE, written),
             (run_dir / PLOT_FILE, "training curves"), (run_dir / "checkpoints", "checkpoints (--resume)")]
    lines += [f"files in {Path(run_dir).resolve()}:"] + [f"  {desc}: {path}" for path, desc in files if path.exists()]
    lines += [f"  next: {c}" for c in next_commands]
    return "\n".join(lines)
