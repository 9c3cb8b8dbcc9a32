"""`cudaperf sft --config FILE [section.key=value ...]`: the supervised warm start of the policy.

In: the tasks of `tasks.source` (the dataset's train split, `generated:train`, for real runs;
`builtin` in tests), the policy `model.path` ('tiny' starts from a random model), the `sft`,
`learner` and `rollout` sections. Out: a Hugging Face checkpoint (model + tokenizer) in
`<sft.output_dir>/hf` that `model.path` can point at (`cudaperf train` starts from it), the
DeepSpeed state beside it, `sft_log.jsonl` (one line per optimizer step) and, with
`sft.heldout_source`, a benchmark of the result on held-out tasks (bench.py).

Two modes, one training loop (the RL learner, pipeline/rl/learner.py, with the cross-entropy loss
of pipeline/rl/loss.py: the loss is on response tokens only):
- supervised: (prompt, implementation) pairs. The prompt is the episode's opening, built by
  pipeline/rollout/prompts.py through the chat template exactly as in RL; the response is the
  implementation in the answer format parsing.py reads back, ended by the end-of-turn token. Only
  implementations in the policy's format (c2cuda, light) are used. `keep_fastest_per_task` keeps
  the fastest ones: measured times (pipeline/data/measured/) where every kept implementation of a
  task was measured correct, strategy order otherwise; the log says which. `rename_copies_per_pair`
  adds copies of c2cuda pairs with the function renamed throughout, so the policy learns to take
  the name from the prompt, and `entry_name_weight` weights the loss on the tokens of that name.
  `name_drills_per_pair` adds short sequences that teach only the copying: the prompt of a c2cuda
  task renamed to a made-up name, and as response the answer's opening up to the end of its
  extern "C" entry (no end of turn), so each costs a fraction of a pair and its loss is mostly the
  name and parameters taken from the prompt.
  Pairs longer than model.max_model_len_tokens are dropped (counted).
- rejection: per round, sample every task (rollout settings, multi-turn as in RL), evaluate with
  the evaluator pools, and train on the turns whose verdict is in `sft.rejection_keep`, as the
  policy sampled them (its own tokens, its own context).
One learner rank (this process; bf16 on a GPU, fp32 on CPU).
"""
from __future__ import annotations

import argparse
import json
import math
import random
import re
import time
from collections import Counter
from pathlib import Path

from pipeline.config import RunConfig, SFTSection, load_config, parse_command_line
from pipeline.errors import UserError
from pipeline.records import Implementation, Task
from pipeline.rl.batch import TrainSequence, make_microbatches
from pipeline.rollout.parsing import answer_text, extract_code
from pipeline.rollout.prompts import candidate_format, entry_point, opening_messages
from pipeline.tasks import select_tasks

# Strategy labels from plain to most optimised: the order used when no measured times exist.
STRATEGY_RANK = {"naive": 0, "coalesced": 1, "grid_stride": 1, "thread_coarsening": 2, "vectorized": 2,
                 "shared_privatization": 3, "tiled_shared": 3, "warp_shuffle": 3, "register_tiling": 4}
UNKNOWN_STRATEGY_RANK = 2
NAME_WORDS = ("scale", "add", "sum", "vec", "mat", "row", "col", "reduce", "norm", "map", "apply", "fused", "op",
              "acc", "prod", "diff", "calc", "compute", "update", "transform", "blend", "mix", "step", "pass")


class SFTError(UserError, ValueError):
    """An SFT run that cannot start; the message names the problem and the fix."""


# ---- pairs -------------------------------------------------------------------------------------------

def measured_times(task_ids: set[str]) -> dict[tuple[str, str], float | None]:
    """(task id, implementation) -> geometric mean of median ms over the timed configurations, or None
    for an implementation measured incorrect. Empty when no measurement files exist."""
    from pipeline.data.measured import MeasurementsError, load_measurements
    try:
        table = load_measurements()
    except MeasurementsError:
        return {}
    logs: dict[tuple[str, str], list[float]] = {}
    wrong: set[tuple[str, str]] = set()
    for row in table.select(["task_id", "impl_name", "correct", "median_ms"]).to_pylist():
        key = (row["task_id"], row["impl_name"])
        if row["task_id"] not in task_ids:
            continue
        if not row["correct"]:
            wrong.add(key)
        elif row["median_ms"]:
            logs.setdefault(key, []).append(math.log(row["median_ms"]))
    out: dict[tuple[str, str], float | None] = {k: math.exp(sum(v) / len(v)) for k, v in logs.items()}
    out.update(dict.fromkeys(wrong))
    return out


def fastest_first(task: Task, impls: list[Implementation],
                  measured: dict[tuple[str, str], float | None]) -> tuple[list[Implementation], str]:
    """`impls` fastest first, and 'measured' or 'strategy' for how; measured-incorrect ones are dropped."""
    keys = [(task.id, i.name) for i in impls]
    if impls and all(k in measured for k in keys):
        ok = [i for i, k in zip(impls, keys) if measured[k] is not None]
        return sorted(ok, key=lambda i: measured[(task.id, i.name)]), "measured"
    order = sorted(range(len(impls)), key=lambda j: (-STRATEGY_RANK.get(impls[j].strategy, UNKNOWN_STRATEGY_RANK), -j))
    return [impls[j] for j in order], "strategy"


def whole_word(name: str) -> re.Pattern:
    """`name` as a whole word (not part of a longer identifier)."""
    return re.compile(rf"\b{re.escape(name)}\b")


def rename_word(text: str, old: str, new: str) -> str:
    """`text` with every whole-word `old` replaced by `new`."""
    return whole_word(old).sub(lambda _: new, text)


def renamed(task: Task, name: str) -> Task:
    """A c2cuda task with the function renamed to `name` everywhere it is a whole word (no implementations)."""
    sub = lambda text: rename_word(text, task.function, name)
    return task.model_copy(update={"id": f"{task.id}~{name}", "function": name, "reference": sub(task.reference),
                                   "description": sub(task.description), "implementations": []})


_ENTRY = r'extern "C" \w+ {name}\([^)]*\) \{{\n.*?\n\}}'  # a c2cuda entry's whole definition
_RUN_DEFINITION = re.compile(r"^static void run\(([^)]*)\) \{", re.M)
_INCLUDES = re.compile(r"\A(?:[ \t]*#[ \t]*include[^\n]*\n)*")


def entry_first(task: Task, code: str) -> str:
    """The implementation with its extern "C" entry moved up to just after the includes, and the
    static `run` it calls declared ahead of it; the code unchanged when it has another shape."""
    tail = re.search(_ENTRY.format(name=re.escape(task.function)) + r"\s*$", code, re.S)
    run = _RUN_DEFINITION.search(code)
    if tail is None or run is None or run.start() > tail.start():
        return code
    body = code[:tail.start()].rstrip() + "\n"
    head = _INCLUDES.match(body).group(0)
    return f"{head}static void run({run.group(1)});\n{tail.group(0).strip()}\n{body[len(head):]}"


def random_name(rng: random.Random) -> str:
    """A made-up function name shaped like the dataset's (words, then sizes, radii or dtypes), so that
    the only way to get it right is to copy it from the prompt."""
    parts = rng.sample(NAME_WORDS, rng.randint(1, 3))
    extras = (lambda: f"{rng.randint(1, 64)}x{rng.randint(1, 64)}", lambda: f"r{rng.randint(1, 4)}",
              lambda: rng.choice(("float", "double", "half", "int")), lambda: str(rng.randint(0, 999)))
    parts += [rng.choice(extras)() for _ in range(rng.randint(0, 3))]
    return "_".join(parts)


def supervised_pairs(tasks: list[Task], cfg: SFTSection, seed: int,
                     measured: dict[tuple[str, str], float | None]) -> tuple[list[tuple[Task, str]], dict]:
    """(task as prompted, answer text) pairs per the module docstring, and counts of what was chosen."""
    rng = random.Random(seed)
    pairs, stats = [], Counter()
    for task in tasks:
        impls = [i for i in task.implementations if i.format == candidate_format(task)]
        if not impls:
            stats["tasks_without_usable_implementation"] += 1
            continue
        if cfg.keep_fastest_per_task:
            impls, how = fastest_first(task, impls, measured)
            impls = impls[:cfg.keep_fastest_per_task]
            stats[f"order_{how}"] += 1
        for impl in impls:
            variants = [(task, impl)]
            if task.kind == "c2cuda" and cfg.rename_copies_per_pair:
                names = [random_name(rng) for _ in range(cfg.rename_copies_per_pair)]
                variants = variants[:1] * cfg.rename_keep_original + [
                    (renamed(task, n), impl.model_copy(update={"code": rename_word(impl.code, task.function, n)}))
                    for n in names]
            for t, i in variants:
                text = answer_text(entry_first(t, i.code) if cfg.entry_first and t.kind == "c2cuda" else i.code)
                if extract_code(text, entry_point(t)).code is None:  # the policy's format must parse back
                    stats["unparseable_implementations"] += 1
                    continue
                pairs.append((t, text))
    stats["pairs"] = len(pairs)
    return pairs, dict(stats)


def answer_head(task: Task, text: str) -> str | None:
    """The opening of an answer up to the closing brace of its extern "C" entry (an answer written
    entry first), or None when the entry does not come first."""
    entry = re.search(_ENTRY.format(name=re.escape(task.function)) + r"\n", text, re.S)
    if entry is None or "__global__" in text[:entry.start()]:
        return None
    return text[:entry.end()]


def name_drills(pairs: list[tuple[Task, str]], per_pair: int, seed: int) -> list[tuple[Task, str]]:
    """`per_pair` (renamed task, answer head) drills per c2cuda pair, each under a fresh made-up name."""
    rng = random.Random(seed + 1)
    drills = []
    for task, text in pairs:
        head = answer_head(task, text) if task.kind == "c2cuda" else None
        if head is None:
            continue
        for _ in range(per_pair):
            new_task = renamed(task, random_name(rng))
            drills.append((new_task, rename_word(head, task.function, new_task.function)))
    return drills


def name_weights(text: str, offsets: list[tuple[int, int]], name: str, weight: float) -> list[float]:
    """Per token of `text` (its character `offsets`): `weight` on tokens that overlap a whole-word
    occurrence of `name`, 1 elsewhere."""
    spans = [m.span() for m in whole_word(name).finditer(text)] if name else []
    return [weight if any(a < e and s < b for s, e in spans) else 1.0 for a, b in offsets]


def encode_pairs(pairs: list[tuple[Task, str]], chat, max_len: int, entry_name_weight: float = 1.0,
                 end_turn: bool = True) -> tuple[list[TrainSequence], int]:
    """Token sequences (opening prompt ids + answer ids + end of turn unless `end_turn` is false) and
    how many were too long; with `entry_name_weight` > 1 the c2cuda entry's name tokens in the answer
    carry that loss weight."""
    seqs, too_long = [], 0
    openings = {task.id: chat.opening_text(*opening_messages(task)) for task, _ in pairs}  # one per task
    prompt_ids = dict(zip(openings, chat.encode_many(list(openings.values()))))
    texts = [text for _, text in pairs]
    answers, offsets = chat.encode_many_with_offsets(texts) if entry_name_weight != 1.0 else (
        chat.encode_many(texts), None)
    for k, ((task, text), answer) in enumerate(zip(pairs, answers)):
        prompt = prompt_ids[task.id]
        response = answer + [chat.eos_id] * end_turn
        if len(prompt) + len(response) > max_len:
            too_long += 1
            continue
        weights = None
        if offsets is not None and task.kind == "c2cuda":
            weights = name_weights(text, offsets[k], entry_point(task), entry_name_weight) + [1.0] * end_turn
        seqs.append(TrainSequence(prompt + response, len(prompt), [0.0] * len(response), 0.0, (task.id, k), weights))
    return seqs, too_long


def supervised_sequences(pairs: list[tuple[Task, str]], chat, cfg: RunConfig) -> tuple[list[TrainSequence], int, int]:
    """The pairs' training sequences followed by their name drills' (`sft.name_drills_per_pair`, no end
    of turn); how many pairs were too long, and how many drill sequences there are."""
    seqs, too_long = encode_pairs(pairs, chat, cfg.model.max_model_len_tokens, cfg.sft.entry_name_weight)
    drills = name_drills(pairs, cfg.sft.name_drills_per_pair, cfg.run.seed)
    drill_seqs, _ = encode_pairs(drills, chat, cfg.model.max_model_len_tokens, cfg.sft.entry_name_weight,
                                 end_turn=False)
    return seqs + drill_seqs, too_long, len(drill_seqs)


def rejection_sequences(episodes, keep: list[str]) -> list[TrainSequence]:
    """The turns whose verdict is in `keep`, as the policy sampled them (its context, its tokens)."""
    seqs = []
    for ep in episodes:
        for t, (turn, result) in enumerate(zip(ep.trajectory.turns, ep.results)):
            if result.verdict in keep and turn.response_ids:
                seqs.append(TrainSequence(list(turn.prompt_ids) + list(turn.response_ids), len(turn.prompt_ids),
                                          [0.0] * len(turn.response_ids), 0.0, (ep.trajectory.episode_id, t)))
    return seqs


# ---- training ---------------------------------------------------------------------------------------

def train(learner, seqs: list[TrainSequence], cfg: RunConfig, log_file, deadline: float | None,
          pad_id: int, seed: int) -> list[dict]:
    """`sft.epochs` shuffled passes of `sft.sequences_per_step` sequences per optimizer step, until the
    deadline; one JSON line per step into `log_file`. Returns the step metrics."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    rng = random.Random(seed)
    per_step = cfg.sft.sequences_per_step
    steps_per_epoch = math.ceil(len(seqs) / per_step)
    history = []
    with Progress(TextColumn("sft"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[status]}")) as bar:
        progress = bar.add_task("sft", total=steps_per_epoch * cfg.sft.epochs, status="")
        for epoch in range(cfg.sft.epochs):
            order = list(seqs)
            rng.shuffle(order)
            for start in range(0, len(order), per_step):
                if deadline is not None and time.monotonic() > deadline:
                    return history
                mbs = make_microbatches(order[start:start + per_step], cfg.learner.max_tokens_per_microbatch, pad_id)
                metrics = learner.train_step(mbs, loss="sft")
                metrics["epoch"] = epoch
                history.append(metrics)
                log_file.write(json.dumps(metrics) + "\n")
                log_file.flush()
                bar.update(progress, advance=1, status=f"loss {metrics['loss']:.3f}")
                if len(history) % cfg.sft.log_every_steps == 0:
                    bar.console.log(f"step {len(history)} epoch {epoch} loss {metrics['loss']:.4f} "
                                    f"{metrics['tokens_per_s']:.0f} tok/s")
    return history


def make_learner(cfg: RunConfig, model_path: Path, tokenizer):
    """One learner rank in this process (a world of one: nccl on a GPU, gloo on CPU), built as the RL
    learner builds its policy (`build_policy`, in the learner's precision; full weights, since the SFT
    checkpoint is a plain model that `model.path` names)."""
    import torch

    from pipeline.rl.distributed import free_port, init_process_group
    from pipeline.rl.learner import Learner
    from pipeline.rl.update import build_policy

    if cfg.learner.ranks != 1:
        raise SFTError(f"learner.ranks = {cfg.learner.ranks}: cudaperf sft runs one learner rank; set learner.ranks=1")
    init_process_group(0, 1, free_port(), backend="nccl" if torch.cuda.is_available() else "gloo")
    return Learner(cfg.learner, cfg.rl, build_policy(model_path, cfg.learner, lora=False), tokenizer=tokenizer, temperature=1.0,
                   seed=cfg.run.seed)


def training_deadline(cfg: RunConfig) -> float | None:
    """When training stops (`sft.max_train_s` from now), or None to run every epoch."""
    return time.monotonic() + cfg.sft.max_train_s if cfg.sft.max_train_s else None


def run_sft(cfg: RunConfig, open_cluster=None) -> dict:
    """The whole run (module docstring); returns a summary that is also written to sft_summary.json.
    `open_cluster(cfg)` gives the Ray pools that rejection rounds and the held-out check evaluate on
    (pipeline/cli.py passes it; supervised SFT without the check needs none)."""
    from pipeline.rollout.conversation import ChatFormat
    from pipeline.rollout.tiny_model import load_tokenizer, padding_id, resolve_model_path

    out = Path(cfg.sft.output_dir) if cfg.sft.output_dir else Path(cfg.run.output_dir) / cfg.run.name / "sft"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    tasks = select_tasks(cfg.tasks, cfg.data.split_seed)
    if not tasks:
        raise SFTError(f"tasks.source '{cfg.tasks.source}' holds no tasks of kinds {cfg.tasks.kinds}; point it at "
                       "the training tasks")
    heldout = []
    if cfg.sft.heldout_source:  # checked before training, so a bad source fails now rather than after it
        heldout = select_tasks(cfg.tasks, cfg.data.split_seed, source=cfg.sft.heldout_source)
        if not heldout:
            raise SFTError(f"sft.heldout_source '{cfg.sft.heldout_source}' holds no tasks of kinds {cfg.tasks.kinds}; "
                           "point it at held-out tasks or set sft.heldout_source='' to skip the check")
    model_path = resolve_model_path(cfg.model)
    tokenizer = load_tokenizer(model_path)
    chat = ChatFormat(tokenizer)
    pad_id = padding_id(tokenizer)
    summary: dict = {"mode": cfg.sft.mode, "tasks": len(tasks), "task_source": cfg.tasks.source,
                     "start_model": str(model_path)}
    learner = make_learner(cfg, model_path, tokenizer)
    summary["parameters"] = learner.info["parameters"]
    summary["precision"] = learner.info["precision"]
    history: list[dict] = []
    with open(out / "sft_log.jsonl", "w") as log_file:
        if cfg.sft.mode == "supervised":
            measured = measured_times({t.id for t in tasks}) if cfg.sft.keep_fastest_per_task else {}
            pairs, stats = supervised_pairs(tasks, cfg.sft, cfg.run.seed, measured)
            seqs, too_long, drill_count = supervised_sequences(pairs, chat, cfg)
            if cfg.sft.name_drills_per_pair:
                stats["name_drills"] = drill_count
            summary.update(stats, too_long=too_long, sequences=len(seqs), tokens_per_epoch=sum(map(len, seqs)))
            print(f"sft: {len(seqs)} sequences ({summary['tokens_per_epoch']} tokens) from {len(tasks)} tasks; "
                  f"{too_long} longer than {cfg.model.max_model_len_tokens} tokens dropped; {stats}")
            if not seqs:
                raise SFTError("no training pairs: the tasks have no implementations in the policy's format, or every "
                               "pair is longer than model.max_model_len_tokens; raise it or use other tasks")
            summary["prepare_s"] = round(time.monotonic() - t0, 1)
            t0, deadline = time.monotonic(), training_deadline(cfg)  # the budget counts training only
            history += train(learner, seqs, cfg, log_file, deadline, pad_id, cfg.run.seed)
        else:
            summary["prepare_s"] = round(time.monotonic() - t0, 1)
            t0, deadline = time.monotonic(), training_deadline(cfg)
            history += rejection_rounds(cfg, learner, tasks, model_path, out, log_file, deadline, pad_id, summary,
                                        open_cluster(cfg))
    summary.update(steps=len(history), train_s=round(time.monotonic() - t0, 1),
                   first_loss=history[0]["loss"] if history else None,
                   last_loss=history[-1]["loss"] if history else None,
                   tokens_trained=sum(m["policy_tokens"] for m in history))
    learner.save_checkpoint(out, run_state={"sft": summary})
    summary["checkpoint"] = str(out / "hf")
    print(f"sft: {summary['steps']} steps in {summary['train_s']} s, loss {summary['first_loss']} -> "
          f"{summary['last_loss']}; checkpoint (model.path) {summary['checkpoint']}")
    if heldout:
        summary["heldout"] = heldout_check(cfg, heldout, Path(summary["checkpoint"]), out, open_cluster)
    (out / "sft_summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def rejection_rounds(cfg: RunConfig, learner, tasks: list[Task], model_path: Path, out: Path, log_file,
                     deadline: float | None, pad_id: int, summary: dict, cluster) -> list[dict]:
    """Sample, evaluate (on `cluster`'s pools), keep, train; the generator gets the learner's weights
    after every round."""
    from pipeline.bench import outcomes_from_episodes
    from pipeline.bench_metrics import summarize
    from pipeline.rollout.conversation import ChatFormat
    from pipeline.rollout.generation import make_generator
    from pipeline.rl.update import export_for_generators
    from pipeline.rollout.scheduler import EpisodeScheduler, ThreadQueue

    model_cfg = cfg.model.model_copy(update={"path": str(model_path)})
    generator = make_generator(model_cfg, cfg.rollout, cfg.run.seed)
    history, rounds = [], []
    try:
        with cluster.evaluation() as (queue, _), ThreadQueue(generator.generate, 1) as generation:
            scheduler = EpisodeScheduler(cfg.rollout, ChatFormat(generator.tokenizer),
                                         generator.max_model_len_tokens, generation, queue)
            for r in range(cfg.sft.rejection_rounds):
                episodes, _ = scheduler.run(tasks, step=r)
                kept = rejection_sequences(episodes, cfg.sft.rejection_keep)
                verdicts = summarize(outcomes_from_episodes(episodes))["verdicts"]
                rounds.append({"round": r, "verdicts": verdicts, "kept_turns": len(kept)})
                print(f"sft rejection round {r}: verdicts {verdicts}; training on {len(kept)} turns")
                if kept:
                    history += train(learner, kept, cfg, log_file, deadline, pad_id, cfg.run.seed + r)
                    generator.update_weights(export_for_generators(learner), version=r + 1)
                if deadline is not None and time.monotonic() > deadline:
                    break
    finally:
        generator.close()
    summary["rounds"] = rounds
    return history


def heldout_check(cfg: RunConfig, tasks: list[Task], checkpoint: Path, out: Path, open_cluster) -> dict:
    """Sample the new checkpoint on the held-out tasks (single turn) and report its rates (bench.py)."""
    from pipeline.bench import print_summary, run_bench

    bench_cfg = cfg.model_copy(update={
        "model": cfg.model.model_copy(update={"path": str(checkpoint)}),
        "rollout": cfg.rollout.model_copy(update={"samples_per_task": cfg.sft.heldout_samples_per_task,
                                                  "max_turns": 1})})
    report = run_bench(bench_cfg, tasks, out / "heldout_bench", suite=f"heldout:{cfg.sft.heldout_source}",
                       cluster=open_cluster(bench_cfg))
    print(f"held-out check on {cfg.sft.heldout_source}:")
    print_summary(report)
    s = report["summary"]
    return {k: s[k] for k in ("tasks", "samples", "verdicts", "compile_rate", "execute_rate", "correct_rate")}


def main(argv: list[str], open_cluster=None) -> int:
    p = argparse.ArgumentParser(prog="cudaperf sft", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=None, help="YAML run configuration (sections sft, learner, model, tasks, ...)")
    args, overrides = parse_command_line(p, argv)
    run_sft(load_config(args.config, overrides), open_cluster)  # a UserError ends in pipeline/cli.py, as one line
    return 0
