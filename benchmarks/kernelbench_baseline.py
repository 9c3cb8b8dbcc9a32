"""Eager PyTorch baseline times of KernelBench problems on this GPU, the way KernelBench measures them,
compared with a published baseline file.

    python benchmarks/kernelbench_baseline.py --kernelbench-dir DIR [--level 1] [--published FILE]
        [--out FILE] [--problems 19,23_Softmax] [--budget-s 900] [--timing published|current]

Per problem (KernelBench's scripts/generate_baseline_time.py and timing.py): the problem module is
executed; torch.manual_seed(42) (and the CUDA seed) before get_inputs() and again before
get_init_inputs(); tensors moved to the GPU; Model(*init_inputs) built and moved to the GPU; under
torch.no_grad(), timed with CUDA events around each call. The inputs are made on the GPU itself (`--inputs-on gpu`, the
default): KernelBench makes them on the CPU and copies them over, which gives other values from the same
seed but the same shapes and dtypes, and takes minutes per problem at today's multi-GiB sizes; the
problems' forwards do not branch on their inputs' values, so the times are the same (`--inputs-on cpu`
is KernelBench's way exactly). `--timing published` (default) is the
procedure the published files were made with (3 warm-up calls, 100 trials, no cache flush);
`--timing current` is the current harness (kernelbench.timing: 5 warm-ups, one discarded trial,
100 trials, a 256 MB L2 flush before each). Statistics as KernelBench's get_timing_stats (mean,
std, min, max to 3 significant digits, ms).

Out: --out (default kernelbench_baseline_<gpu>.json) in KernelBench's baseline layout
{"level1": {"19_ReLU.py": {...} or null}}, and beside it <out>_vs_published.json: per problem our
mean / the published mean, the errors of problems that failed (out of memory, an exception: the
run goes on), and a summary (quantiles of the ratios, their geometric mean, the problems outside
0.5-1.5). Both files are rewritten after every problem, so a stopped run keeps what it measured.
--budget-s: no problem is started after that many seconds. Needs a CUDA GPU; --help works anywhere.
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import re
import sys
import time
from pathlib import Path

QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


# ---- pure helpers (tested on CPU) ---------------------------------------------------------------------

def problem_files(level_dir: Path, selection: str = "") -> list[Path]:
    """The problem files of a level directory in problem-id order, optionally only those whose id or
    name stem is in the comma-separated `selection` ('19,23_Softmax')."""
    files = [f for f in level_dir.glob("*.py") if re.match(r"^\d+_", f.name)]
    files.sort(key=lambda f: int(f.name.split("_")[0]))
    wanted = {s.strip() for s in selection.split(",") if s.strip()}
    if not wanted:
        return files
    return [f for f in files if f.name.split("_")[0] in wanted or f.stem in wanted or f.name in wanted]


def timing_stats(times_ms: list[float], hardware: str = "", device: str = "") -> dict:
    """KernelBench's get_timing_stats: mean, std (population), min, max to 3 significant digits."""
    n = len(times_ms)
    mean = sum(times_ms) / n
    std = math.sqrt(sum((t - mean) ** 2 for t in times_ms) / n)
    stats = {"mean": float(f"{mean:.3g}"), "std": float(f"{std:.3g}"), "min": float(f"{min(times_ms):.3g}"),
             "max": float(f"{max(times_ms):.3g}"), "num_trials": n}
    if hardware:
        stats.update(hardware=hardware, device=device)
    return stats


def quantile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolation quantile of sorted values (numpy's default)."""
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def ratio_summary(ours: dict[str, dict | None], published: dict[str, dict | None], low: float = 0.5,
                  high: float = 1.5) -> dict:
    """Per problem our mean / the published mean, and the distribution of those ratios."""
    ratios = {name: stats["mean"] / published[name]["mean"] for name, stats in ours.items()
              if stats and (published.get(name) or {}).get("mean")}
    values = sorted(ratios.values())
    return {"ratios": ratios, "n": len(values),
            "not_compared": sorted(n for n in ours if n not in ratios),
            "quantiles": {f"{q:g}": quantile(values, q) for q in QUANTILES} if values else {},
            "geomean": math.exp(sum(math.log(v) for v in values) / len(values)) if values else None,
            f"outside_{low:g}_{high:g}": {n: r for n, r in sorted(ratios.items()) if not low <= r <= high}}


def load_published(path: Path, level: int) -> dict:
    """One level of a KernelBench baseline JSON ({} where the file lacks it)."""
    if not path.is_file():
        raise SystemExit(f"--published {path} does not exist; pass a KernelBench results/timing/<hardware>/"
                         f"baseline_time_torch.json file.")
    return json.loads(path.read_text()).get(f"level{level}", {})


# ---- measuring (GPU) ------------------------------------------------------------------------------------

def set_seed(torch, seed: int) -> None:
    torch.manual_seed(seed)
    torch.cuda.manual_seed(seed)


def time_cuda_events(torch, fn, args, device, warmup: int, trials: int, discard_first: int, flush: bool,
                     idle_launch: bool = False) -> list[float]:
    """KernelBench's time_execution_with_cuda_event: warm-up calls, then per trial a synchronize,
    (optionally) an L2 flush, and CUDA events around one call; ms. idle_launch: the device synchronised again
    after the flush, so the start mark runs on an idle device and the host's launch of the call lies inside the
    window (the shape of the evaluator's trial: cold inputs, each call launched on an idle device); without it,
    the flush still runs on the GPU while the host launches the call, and hides that launch."""
    for _ in range(warmup):
        fn(*args)
        torch.cuda.synchronize(device=device)
    if flush:  # the current harness also empties the caching allocator after its warm-up
        torch.cuda.empty_cache()
    times = []
    for trial in range(trials + discard_first):
        torch.cuda.synchronize(device=device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if flush:
            dummy = torch.empty((32, 1024, 1024), dtype=torch.int64, device=device)
            dummy.fill_(42)
            del dummy
            if idle_launch:
                torch.cuda.synchronize(device=device)
        start.record()
        fn(*args)
        end.record()
        torch.cuda.synchronize(device=device)
        if trial >= discard_first:
            times.append(start.elapsed_time(end))
    return times


def make_inputs(torch, context: dict, device, on_gpu: bool) -> list:
    """A problem's get_inputs(), on the GPU: made there directly (`on_gpu`) or, as KernelBench does,
    on the CPU and copied over (module docstring)."""
    if not on_gpu:
        return [x.cuda(device=device) if isinstance(x, torch.Tensor) else x for x in context["get_inputs"]()]
    with torch.device(device):
        inputs = context["get_inputs"]()
    return [x.to(device=device) if isinstance(x, torch.Tensor) else x for x in inputs]


def measure(torch, source: str, device, mode: str, trials: int, inputs_on_gpu: bool = True) -> dict:
    """One problem's eager baseline statistics (module docstring)."""
    context: dict = {}
    exec(compile(source, "<kernelbench problem>", "exec"), context)
    with torch.no_grad():
        torch.cuda.synchronize(device=device)
        set_seed(torch, 42)
        inputs = make_inputs(torch, context, device, inputs_on_gpu)
        set_seed(torch, 42)
        init_inputs = context["get_init_inputs"]()
        init_inputs = [x.cuda(device=device) if isinstance(x, torch.Tensor) else x for x in init_inputs]
        model = context["Model"](*init_inputs).cuda(device=device)
        torch.cuda.synchronize(device=device)
        current = mode == "current"
        times = time_cuda_events(torch, model, inputs, device, warmup=5 if current else 3, trials=trials,
                                 discard_first=1 if current else 0, flush=current)
    return timing_stats(times, torch.cuda.get_device_name(device), str(device))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kernelbench-dir", required=True, help="KernelBench checkout (with KernelBench/level1/...)")
    p.add_argument("--level", type=int, default=1)
    p.add_argument("--published", default=None, help="published baseline JSON (default: the checkout's "
                   "results/timing/H100_Modal/baseline_time_torch.json)")
    p.add_argument("--out", default=None, help="baseline JSON to write (default kernelbench_baseline_<gpu>.json)")
    p.add_argument("--problems", default="", help="only these problems: ids or names, comma-separated")
    p.add_argument("--budget-s", type=float, default=0.0, help="start no problem after this many seconds (0: none)")
    p.add_argument("--timing", choices=["published", "current"], default="published")
    p.add_argument("--trials", type=int, default=100)
    p.add_argument("--inputs-on", choices=["gpu", "cpu"], default="gpu",
                   help="where get_inputs() makes its tensors (module docstring)")
    args = p.parse_args(argv)

    import torch
    if not torch.cuda.is_available():
        print("kernelbench_baseline: no CUDA GPU is visible; run it on a GPU host.", file=sys.stderr)
        return 2
    root = Path(args.kernelbench_dir).expanduser()
    problems_root = root / "KernelBench" if (root / "KernelBench").is_dir() else root
    level_dir = problems_root / f"level{args.level}"
    files = problem_files(level_dir, args.problems)
    if not files:
        print(f"kernelbench_baseline: no problems in {level_dir} match '{args.problems}'; check --kernelbench-dir, "
              f"--level and --problems.", file=sys.stderr)
        return 2
    published_path = Path(args.published) if args.published else \
        root / "results" / "timing" / "H100_Modal" / "baseline_time_torch.json"
    published = load_published(published_path, args.level)
    device = torch.device("cuda:0")
    gpu = torch.cuda.get_device_name(device)
    out = Path(args.out) if args.out else Path(f"kernelbench_baseline_{re.sub(r'[^A-Za-z0-9]+', '_', gpu)}.json")
    compare_path = out.with_name(out.stem + "_vs_published.json")
    ours: dict[str, dict | None] = {}
    errors: dict[str, str] = {}
    started = time.monotonic()
    for f in files:
        if args.budget_s and time.monotonic() - started > args.budget_s:
            print(f"budget of {args.budget_s:g} s spent: {len(files) - len(ours)} problems not started", flush=True)
            break
        try:
            ours[f.name] = measure(torch, f.read_text(), device, args.timing, args.trials,
                                  args.inputs_on == "gpu")
        except Exception as e:  # noqa: BLE001 - a problem that fails (OOM included) is recorded, the run goes on
            ours[f.name] = None
            errors[f.name] = f"{type(e).__name__}: {str(e)[:500]}"
        gc.collect()
        torch.cuda.empty_cache()
        pub = (published.get(f.name) or {}).get("mean")
        mine = (ours[f.name] or {}).get("mean")
        ratio = f"{mine / pub:.2f}x published" if mine and pub else errors.get(f.name, "no published time")
        print(f"{f.name}: {mine} ms ({ratio})", flush=True)
        out.write_text(json.dumps({f"level{args.level}": ours}, indent=2))
        compare_path.write_text(json.dumps({"gpu": gpu, "timing": args.timing, "inputs_on": args.inputs_on,
                                            "published": str(published_path),
                                            "errors": errors, **ratio_summary(ours, published)}, indent=2))
    summary = ratio_summary(ours, published)
    print(f"{summary['n']} problems compared with {published_path}; geomean ratio {summary['geomean']}; "
          f"quantiles {summary['quantiles']}")
    print(f"outside 0.5-1.5: {summary['outside_0.5_1.5']}")
    print(f"errors: {errors}")
    print(f"written: {out}, {compare_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
