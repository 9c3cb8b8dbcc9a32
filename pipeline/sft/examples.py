"""SFT's training data: (prompt, implementation) pairs of the tasks, the fastest first where measured,
renamed copies and name drills that teach the policy to take the entry point's name from the prompt,
and their encoding into training sequences through the chat template (the RL episode's opening)."""
from __future__ import annotations

import math
import random
import re
from collections import Counter

from pipeline.core.config import RunConfig, SFTSection
from pipeline.core.records import Implementation, Task
from pipeline.rl.batch import TrainSequence
from pipeline.rollout.parsing import answer_text, extract_code
from pipeline.rollout.prompts import candidate_format, entry_point, opening_messages

# Strategy labels from plain to most optimised: the order used when no measured times exist.
STRATEGY_RANK = {"naive": 0, "coalesced": 1, "grid_stride": 1, "thread_coarsening": 2, "vectorized": 2,
                 "shared_privatization": 3, "tiled_shared": 3, "warp_shuffle": 3, "register_tiling": 4}
UNKNOWN_STRATEGY_RANK = 2
NAME_WORDS = ("scale", "add", "sum", "vec", "mat", "row", "col", "reduce", "norm", "map", "apply", "fused", "op",
              "acc", "prod", "diff", "calc", "compute", "update", "transform", "blend", "mix", "step", "pass")


def measured_times(task_ids: set[str]) -> dict[tuple[str, str], float | None]:
    """(task id, implementation) -> geometric mean of median ms over the timed configurations, or None
    for an implementation measured incorrect. Empty when no measurement files exist."""
    from pipeline.tasks.measured import MeasurementsError, load_measurements
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
