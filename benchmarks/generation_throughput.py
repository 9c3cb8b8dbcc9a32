"""Generation throughput: tokens per second of the vLLM and transformers backends, side by side.

    .venv/bin/python benchmarks/generation_throughput.py --out benchmarks/results/v1/generation_cpu.json
    python benchmarks/generation_throughput.py --out benchmarks/results/v1/generation_h200.json   # GPU host

Both backends get the same prompts (the opening prompt of every built-in task, through the chat
template, about 450-750 tokens each) and the same sampling (temperature 1, top-p 1, a fixed
number of new tokens; the random tiny model almost never ends a turn early), on the same
machine, in one run:
- `single`: one prompt, one sample: the latency-bound case;
- `batch`: every prompt with `--samples` samples in one generation call: the rollout case.
Each setting runs `--repeats` times after a warm-up call; tokens per second = generated tokens /
the generator's own wall time of the call. Engine start-up time is reported separately. Where
vLLM cannot be imported (the GPU host, where it cannot be installed) its entry says why and the
transformers backend runs alone, on cuda when torch sees one. Figures go to JSON with the machine,
versions and date.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.core.config import ModelSection, RolloutSection  # noqa: E402
from pipeline.rollout.conversation import ChatFormat  # noqa: E402
from pipeline.rollout.backends import BACKENDS, make_generator  # noqa: E402
from pipeline.rollout.generation import GenerationRequest, SamplingSpec  # noqa: E402
from pipeline.rollout.prompts import opening_messages  # noqa: E402
from pipeline.rollout.tiny_model import load_tokenizer, resolve_model_path  # noqa: E402
from pipeline.tasks import load_tasks  # noqa: E402


def machine() -> dict:
    """Host, CPU, memory, GPU (if any) and package versions."""
    import torch
    import transformers

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    mem = next((int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal")), 0) if Path("/proc/meminfo").exists() else 0
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        gpu = ""
    try:
        import vllm
        vllm_version = vllm.__version__
    except Exception as e:  # noqa: BLE001 - an absent or broken vLLM is reported, not fatal
        vllm_version = f"not importable ({type(e).__name__}: {e})"
    return {"host": platform.node(), "cpu": cpu, "cpus": os.cpu_count(), "memory_bytes": mem, "gpu": gpu,
            "python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "transformers": transformers.__version__, "vllm": vllm_version,
            "torch_threads": torch.get_num_threads(),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def settings(prompts: list[list[int]], samples: int) -> dict[str, list[GenerationRequest]]:
    return {"single": [GenerationRequest(prompts[0], 1)],
            "batch": [GenerationRequest(p, samples) for p in prompts]}


def run_backend(backend: str, model_cfg: ModelSection, rollout_cfg: RolloutSection, prompts: list[list[int]],
                args: argparse.Namespace) -> dict:
    t0 = time.perf_counter()
    try:
        gen = make_generator(model_cfg, rollout_cfg, seed=0, backend=backend)
    except Exception as e:  # noqa: BLE001 - a backend that cannot start is a figure of the report
        return {"backend": backend, "available": False, "reason": f"{type(e).__name__}: {e}"}
    startup_s = time.perf_counter() - t0
    sampling = SamplingSpec(max_new_tokens=args.max_new_tokens)
    gen.generate([GenerationRequest(prompts[0], 1)], SamplingSpec(max_new_tokens=8))  # warm-up
    out = {"backend": backend, "available": True, "device": gen.device, "startup_s": round(startup_s, 2),
           "load_average_before": os.getloadavg()[0], "settings": {}}
    for name, requests in settings(prompts, args.samples).items():
        runs = []
        for _ in range(args.repeats):
            result = gen.generate(requests, sampling)
            runs.append({"sequences": sum(r.n for r in requests), "tokens": result.tokens_generated,
                         "elapsed_s": round(result.elapsed_s, 3),
                         "tokens_per_s": round(result.tokens_generated / result.elapsed_s, 1)})
        best = max(runs, key=lambda r: r["tokens_per_s"])
        out["settings"][name] = {"runs": runs, "best_tokens_per_s": best["tokens_per_s"],
                                 "prompt_tokens_per_sequence": round(sum(len(r.prompt_ids) * r.n for r in requests)
                                                                     / best["sequences"], 1)}
        print(f"{backend:12s} {name:6s} {best['sequences']:4d} sequences: {best['tokens_per_s']:9.1f} tokens/s",
              flush=True)
    out["load_average_after"] = os.getloadavg()[0]  # other work on the host competes for its cores
    gen.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--model", default="tiny", help="'tiny' or a local Hugging Face model directory")
    ap.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"],
                    help="auto: bfloat16 on a GPU, float32 on CPU")
    ap.add_argument("--samples", type=int, default=4, help="samples per prompt in the batch setting")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated names from the backend table")
    args = ap.parse_args()
    import torch

    dtype = args.dtype if args.dtype != "auto" else ("bfloat16" if torch.cuda.is_available() else "float32")
    model_cfg = ModelSection(path=args.model, dtype=dtype, max_model_len_tokens=2048)
    tasks = load_tasks("builtin")
    chat = ChatFormat(load_tokenizer(resolve_model_path(model_cfg)))
    prompts = [chat.opening_ids(*opening_messages(t)) for t in tasks]
    rollout_cfg = RolloutSection(device="auto", max_sequences_per_batch=len(prompts) * args.samples,
                                 max_new_tokens=args.max_new_tokens)
    report = {"benchmark": "generation_throughput", "machine": machine(), "model": args.model, "dtype": dtype,
              "prompts": len(prompts), "samples_per_prompt": args.samples, "max_new_tokens": args.max_new_tokens,
              "sampling": {"temperature": 1.0, "top_p": 1.0}, "backends": []}
    for backend in args.backends.split(","):
        report["backends"].append(run_backend(backend, model_cfg, rollout_cfg, prompts, args))
    ran = {b["backend"]: b for b in report["backends"] if b.get("available")}
    if {"vllm", "transformers"} <= ran.keys():
        report["vllm_over_transformers"] = {
            name: round(ran["vllm"]["settings"][name]["best_tokens_per_s"]
                        / ran["transformers"]["settings"][name]["best_tokens_per_s"], 2)
            for name in ran["vllm"]["settings"]}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
