"""Does the SFT policy write the entry point's name it is asked for? Variants of the renamed copies,
the name drills and `sft.entry_name_weight`, side by side in one run, each judged two ways.

    python benchmarks/experiments/sft_name_copy.py --variants 0:1,0:20,3:1,3:20,0:1:8 --steps 240 \
        --out benchmarks/results/v1/sft_name_copy_cpu.json

A variant C:W[:D] trains with sft.rename_copies_per_pair=C (the originals kept),
sft.entry_name_weight=W and sft.name_drills_per_pair=D (default 0), its own model from the same
random start (a subprocess each: one learner per process), for about `--steps` optimizer steps on
c2cuda tasks of the train split (fastest implementation per task, entry first). Then it answers
greedily, and the first `extern "C"` line of each answer is compared with the name asked for
(another name there is a format_error):
- recall: the training tasks under their own names (what RL on the train split needs);
- copy: the same tasks under fresh made-up names (what unseen tasks need).
Writes one JSON: per variant both rates, steps, tokens and the final loss. The model, tasks and
steps are options; the defaults fit a 2-core CPU in about 7 minutes per variant.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

ENTRY_LINE = re.compile(r'extern\s+"C"\s+\w+\s+(\w+)\s*\(')


def first_entry_name(text: str) -> str | None:
    match = ENTRY_LINE.search(text)
    return match.group(1) if match else None


def names_written(model, chat, tokenizer, pad_id: int, tasks, max_new_tokens: int) -> list[tuple[str, str | None]]:
    """(name asked for, name written on the first extern "C" line) per task, greedy."""
    import torch

    from pipeline.rollout.prompts import opening_messages
    out = []
    for task in tasks:
        prompt = chat.opening_ids(*opening_messages(task))
        with torch.no_grad():
            ids = model.generate(torch.tensor([prompt]), max_new_tokens=max_new_tokens, do_sample=False,
                                 pad_token_id=pad_id)
        answer = tokenizer.decode(ids[0, len(prompt):], skip_special_tokens=True)
        out.append((task.function, first_entry_name(answer)))
    return out


def one_variant(args) -> dict:
    """Train one variant and measure both rates (runs in its own process)."""
    import torch

    from pipeline.core.config import load_config
    from pipeline.rollout.conversation import ChatFormat
    from pipeline.rollout.tiny_model import load_tokenizer, padding_id, resolve_model_path
    from pipeline.sft import make_learner, random_name, renamed, supervised_pairs, supervised_sequences, train
    from pipeline.tasks import load_tasks

    torch.manual_seed(0)
    spec = args.one.split(":") + ["0"]
    copies, weight, drills = int(spec[0]), float(spec[1]), int(spec[2])
    cfg = load_config(ROOT / "configs/sft_h200.yaml", [
        f"model.tiny_hidden_size={args.hidden}", f"model.tiny_layers={args.layers}",
        f"model.tiny_heads={args.hidden // 64}", "model.dtype=float32", "learner.precision=fp32",
        f"learner.lr={args.lr}", "learner.lr_warmup_steps=10", f"sft.sequences_per_step={args.sequences_per_step}",
        "sft.keep_fastest_per_task=1", f"sft.rename_copies_per_pair={copies}", f"sft.entry_name_weight={weight}",
        f"sft.name_drills_per_pair={drills}", "rollout.device=cpu", "model.max_model_len_tokens=2048",
        "learner.max_tokens_per_microbatch=16384"])
    tasks = [t for t in load_tasks("generated:train", split_seed=cfg.data.split_seed) if t.kind == "c2cuda"]
    tasks = random.Random(0).sample(tasks, args.tasks)
    model_path = resolve_model_path(cfg.model)
    tokenizer = load_tokenizer(model_path)
    chat = ChatFormat(tokenizer)
    pad_id = padding_id(tokenizer)
    learner = make_learner(cfg, model_path, tokenizer)
    pairs, _ = supervised_pairs(tasks, cfg.sft, cfg.run.seed, {})
    seqs, too_long, _ = supervised_sequences(pairs, chat, cfg)
    steps_per_epoch = -(-len(seqs) // cfg.sft.sequences_per_step)
    epochs = max(1, round(args.steps / steps_per_epoch))  # about `steps` for every variant
    cfg = cfg.model_copy(update={"sft": cfg.sft.model_copy(update={"epochs": epochs})})
    with tempfile.TemporaryFile("w") as log:
        history = train(learner, seqs, cfg, log, None, pad_id, cfg.run.seed)
    model = learner.engine.module.eval()
    rng = random.Random(1)  # names the training never used
    fresh = [renamed(t, random_name(rng)) for t in tasks]
    recall = names_written(model, chat, tokenizer, pad_id, tasks, args.answer_tokens)
    copy = names_written(model, chat, tokenizer, pad_id, fresh, args.answer_tokens)
    rate = lambda rows: sum(asked == wrote for asked, wrote in rows) / len(rows)
    return {"rename_copies_per_pair": copies, "entry_name_weight": weight, "name_drills_per_pair": drills,
            "tasks": len(tasks),
            "sequences": len(seqs), "too_long": too_long, "steps": len(history),
            "tokens_trained": sum(m["policy_tokens"] for m in history),
            "last_loss": history[-1]["loss"] if history else None, "recall_rate": rate(recall), "copy_rate": rate(copy),
            "recall_examples": recall[:6], "copy_examples": copy[:6]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", default="0:1,0:20,3:1,3:20",
                   help="comma-separated C:W[:D], rename copies per pair, entry_name_weight and name drills per pair")
    p.add_argument("--steps", type=int, default=240, help="optimizer steps (about the same for every variant)")
    p.add_argument("--tasks", type=int, default=16, help="c2cuda train tasks used")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--sequences-per-step", type=int, default=8)
    p.add_argument("--answer-tokens", type=int, default=96, help="greedy tokens per answer (the entry comes first)")
    p.add_argument("--out", default="benchmarks/results/v1/sft_name_copy_cpu.json")
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one is not None:
        print("RESULT " + json.dumps(one_variant(args)), flush=True)
        return 0
    rows = []
    for variant in args.variants.split(","):
        cmd = [sys.executable, __file__, "--one", variant] + [
            f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items() if k not in ("one", "variants")]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            print(done.stdout[-2000:], done.stderr[-4000:], sep="\n")
            return f"sft_name_copy: variant {variant} failed (its output is above)"
        rows.append(json.loads(line[len("RESULT "):]))
        r = rows[-1]
        print(f"rename copies {r['rename_copies_per_pair']}, name weight {r['entry_name_weight']:g}, name drills "
              f"{r['name_drills_per_pair']}: recall "
              f"{r['recall_rate']:.0%}, copy {r['copy_rate']:.0%} of {r['tasks']} tasks; {r['steps']} steps, "
              f"loss {r['last_loss']:.3f}", flush=True)
    import platform
    meta = {"machine": platform.processor() or platform.machine(), "argv": sys.argv[1:],
            "date": time.strftime("%Y-%m-%d")}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"meta": meta, "runs": rows}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
