"""Peak GPU memory of KernelBench's own evaluation procedure, and of ours, on the largest problems.

    python benchmarks/kernelbench_memory.py --kernelbench-dir DIR [--levels 1,2,3] [--top 8]
        [--answers DIR] [--ours] [--config configs/h200.yaml] [--problems 19,23] [--budget-s 900]
        [--out FILE]

Ranking: problems by input + output bytes, the model run on the meta device (no memory is
allocated; a problem whose forward does not run there is ranked by its inputs alone), the --top N
largest of each --levels level.

KernelBench's procedure (kernelbench/eval.py eval_kernel_against_ref, re-implemented step by step):
seed 42 and get_init_inputs(); the reference Model and the new model built under the same seed and
moved to the GPU; 5 correctness trials (each: its own seed, fresh get_inputs() on the GPU, the
reference's output, the new model's output, torch.allclose at 1e-2); then 100 timing trials of the new
model and 100 of the reference (CUDA events, the 256 MB L2 flush before each). The new model is the
answer `level_<L>_problem_<N>_sample_0_kernel.py` in --answers when there is one, else the reference
itself. Measured: torch.cuda.max_memory_allocated / max_memory_reserved of this process, and the
device-wide used memory (torch.cuda.mem_get_info, sampled every 5 ms in a thread) above what was
used before the problem started.

--ours: also our evaluator on the same problem with the same answer
(pipeline.evaluation.evaluator.Evaluator(cfg.eval, cfg.compile, use_gpu=True).evaluate(task,
[candidate]), gate profile kernelbench), its EvalResult.peak_memory_bytes where it reports one, and
the device-wide used memory sampled during it (its sandboxed children included). Problems without
an answer have no row of ours.

Out: --out (default kernelbench_memory.json), rewritten after every problem, and a table printed at
the end. A problem that fails (out of memory included) is recorded with its error and the run goes
on; no problem is started after --budget-s. Needs a CUDA GPU; --help works anywhere.
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GiB = 1 << 30


# ---- pure helpers (tested on CPU) ---------------------------------------------------------------------

def tensor_bytes(values) -> int:
    """Bytes of the tensors in a value, a list or tuple of values (nested)."""
    import torch
    if isinstance(values, torch.Tensor):
        return values.numel() * values.element_size()
    if isinstance(values, (list, tuple)):
        return sum(tensor_bytes(v) for v in values)
    return 0


def problem_size(source: str) -> dict:
    """Input and output bytes of one problem at its own sizes, computed on the meta device; `outputs`
    is None where the forward cannot run there."""
    import torch
    context: dict = {}
    exec(compile(source, "<kernelbench problem>", "exec"), context)
    with torch.device("meta"):
        inputs = context["get_inputs"]()
        init_inputs = context["get_init_inputs"]()
        size = {"inputs": tensor_bytes(inputs), "outputs": None, "meta_error": ""}
        try:
            with torch.no_grad():
                size["outputs"] = tensor_bytes(context["Model"](*init_inputs)(*inputs))
        except Exception as e:  # noqa: BLE001 - some ops have no meta kernel: rank by inputs alone
            size["meta_error"] = f"{type(e).__name__}: {str(e)[:200]}"
    size["total"] = size["inputs"] + (size["outputs"] or 0)
    return size


def largest_problems(level_dir: Path, top: int, selection: str = "") -> list[tuple[Path, dict]]:
    """The `top` largest problems of a level directory by input + output bytes, largest first."""
    from benchmarks.kernelbench_baseline import problem_files
    sized = []
    for f in problem_files(level_dir, selection):
        try:
            sized.append((f, problem_size(f.read_text())))
        except Exception as e:  # noqa: BLE001 - a problem that does not even build its inputs ranks last
            sized.append((f, {"inputs": 0, "outputs": None, "total": 0, "meta_error": f"{type(e).__name__}: {e}"}))
    sized.sort(key=lambda fs: -fs[1]["total"])
    return sized[:top] if top > 0 else sized


class DeviceMemorySampler:
    """Device-wide used memory (total - free, bytes) sampled in a thread; `peak` after the block."""

    def __init__(self, read, interval_s: float = 0.005):
        self.read, self.interval_s = read, interval_s
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.read())
            self._stop.wait(self.interval_s)

    def __enter__(self):
        self.peak = self.read()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.read())


def format_table(rows: list[dict]) -> str:
    """One line per problem: sizes and the peaks in GiB."""
    def g(v):
        return f"{v / GiB:7.2f}" if isinstance(v, (int, float)) else f"{'-':>7}"
    head = f"{'problem':48} {'in+out':>7} {'kb_alloc':>8} {'kb_resv':>8} {'kb_dev':>7} {'our_pk':>7} {'our_dev':>7}"
    lines = [head]
    for r in rows:
        kb, ours = r.get("kernelbench") or {}, r.get("ours") or {}
        lines.append(f"{r['problem'][:48]:48} {g(r['size']['total'])} {g(kb.get('max_allocated'))} "
                     f"{g(kb.get('max_reserved'))} {g(kb.get('device_used_peak'))} {g(ours.get('peak_memory_bytes'))} "
                     f"{g(ours.get('device_used_peak'))}")
    return "\n".join(lines)


# ---- measuring (GPU) ------------------------------------------------------------------------------------

def _timing(torch, fn, inputs, device, trials: int) -> None:
    """kernelbench.timing.time_execution_with_cuda_event (3 warm-ups, 1 discarded, L2 flush each)."""
    for _ in range(3):
        fn(*inputs)
        torch.cuda.synchronize(device=device)
    torch.cuda.empty_cache()
    for _ in range(trials + 1):
        torch.cuda.synchronize(device=device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        dummy = torch.empty((32, 1024, 1024), dtype=torch.int64, device=device)
        dummy.fill_(42)
        del dummy
        start.record()
        fn(*inputs)
        end.record()
        torch.cuda.synchronize(device=device)


def _inputs_on(torch, ctx: dict, device) -> list:
    """get_inputs() made on the GPU itself (kernelbench_baseline.make_inputs: KernelBench makes them on the CPU
    and copies them over, which leaves the same tensors on the GPU, so its peak is unchanged, but takes
    minutes at today's 6 GiB sizes), as float32 as KernelBench's evaluation casts them."""
    from benchmarks.kernelbench_baseline import make_inputs
    return [x.to(dtype=torch.float32) if isinstance(x, torch.Tensor) else x
            for x in make_inputs(torch, ctx, device, on_gpu=True)]


def kernelbench_procedure(torch, ref_src: str, new_src: str | None, device, correct_trials: int,
                          perf_trials: int, extensions: dict | None = None) -> dict:
    """eval_kernel_against_ref's steps (module docstring); returns correctness and nothing else. `extensions`:
    the answer's extensions as our compile step built them (load_inline then loads them instead of building)."""
    from benchmarks.kernelbench_baseline import set_seed
    ctx: dict = {}
    exec(compile(ref_src, "<reference>", "exec"), ctx)
    set_seed(torch, 42)
    init_inputs = [x.to(device=device, dtype=torch.float32) if isinstance(x, torch.Tensor) else x
                   for x in ctx["get_init_inputs"]()]
    with torch.no_grad():
        set_seed(torch, 42)
        original = ctx["Model"](*init_inputs)
    new_cls = ctx["Model"]
    if new_src is not None and extensions:
        from pipeline.evaluation.child.torch_guard import load_candidate
        new_cls = load_candidate(new_src, extensions)["ModelNew"]
    elif new_src is not None:
        new_ctx: dict = {}
        exec(compile(new_src, "<answer>", "exec"), new_ctx)
        new_cls = new_ctx["ModelNew"]
    torch.cuda.synchronize(device=device)
    with torch.no_grad():
        set_seed(torch, 42)
        custom = new_cls(*init_inputs)
        original = original.to(device=device, dtype=torch.float32)
        custom = custom.to(device=device, dtype=torch.float32)
        torch.cuda.synchronize(device=device)
        torch.manual_seed(42)
        seeds = [torch.randint(0, 2 ** 32 - 1, (1,)).item() for _ in range(correct_trials)]
        passed = 0
        for seed in seeds:
            set_seed(torch, seed)
            inputs = _inputs_on(torch, ctx, device)
            out = original(*inputs)
            torch.cuda.synchronize(device=device)
            out_new = custom(*inputs)
            torch.cuda.synchronize(device=device)
            passed += out.shape == out_new.shape and torch.allclose(out, out_new, atol=1e-2, rtol=1e-2)
            del inputs, out, out_new
        set_seed(torch, 42)
        inputs = _inputs_on(torch, ctx, device)
        if passed == correct_trials:
            _timing(torch, custom, inputs, device, perf_trials)
            _timing(torch, original, inputs, device, perf_trials)  # its excessive-speedup check
    return {"correct": passed == correct_trials, "correctness_trials": f"({passed} / {correct_trials})"}


def measure_kernelbench(torch, ref_src, new_src, device, args, extensions: dict | None = None) -> dict:
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    free, total = torch.cuda.mem_get_info(device)
    row = {"device_used_before": total - free, "new_model": "answer" if new_src else "reference"}
    with DeviceMemorySampler(lambda: (lambda f, t: t - f)(*torch.cuda.mem_get_info(device))) as sampler:
        try:
            row.update(kernelbench_procedure(torch, ref_src, new_src, device, args.correct_trials, args.perf_trials,
                                             extensions))
        except Exception as e:  # noqa: BLE001 - out of memory or a broken answer: recorded, the run goes on
            row["error"] = f"{type(e).__name__}: {str(e)[:500]}"
        torch.cuda.synchronize(device)
    row.update(max_allocated=torch.cuda.max_memory_allocated(device), max_reserved=torch.cuda.max_memory_reserved(device),
               device_used_peak=sampler.peak - row["device_used_before"])
    gc.collect()
    torch.cuda.empty_cache()
    return row


def answer_path(answers: Path, level: int, problem: Path) -> Path | None:
    """The answer to `problem` in a directory laid out as KernelBench names samples, or None."""
    path = answers / f"level_{level}_problem_{problem.name.split('_')[0]}_sample_0_kernel.py"
    return path if path.is_file() else None


def precompile_tasks(evaluator, work: list[tuple], workers: int = 8, timeout_s: float | None = None) -> dict:
    """Gate and compile each (task, candidate) of `work` at once (load_inline takes 30-90 s each on the GPU host),
    so what follows finds them in the compile cache: {task id: CompileResult} of those that built. A failure here
    shows again where the candidate is evaluated. After `timeout_s` the caller goes on (builds still running
    finish in the background)."""
    from concurrent.futures import ThreadPoolExecutor, wait
    built: dict = {}

    def one(item: tuple) -> None:
        task, cand = item
        try:
            prepared = evaluator.gate_and_compile(task, cand, None)
        except Exception as e:  # noqa: BLE001 - the evaluation measures it again and records the error
            print(f"compile {task.id}: {type(e).__name__}: {e}", flush=True)
            return
        comp = getattr(prepared, "comp", None)
        if comp is not None and comp.ok:
            built[task.id] = comp
        else:
            print(f"compile {task.id}: {getattr(prepared, 'verdict', '?')}: {getattr(prepared, 'reason', '')[:300]}",
                  flush=True)
    pool = ThreadPoolExecutor(workers)
    try:
        wait([pool.submit(one, item) for item in work], timeout=timeout_s)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return built


def precompile(evaluator, problems: list[tuple[int, Path]], answers: Path, workers: int = 8,
               timeout_s: float | None = None) -> dict:
    """precompile_tasks for the answers to `problems` found in `answers`."""
    from pipeline.core.records import Candidate
    from pipeline.tasks import kernelbench_task
    work = []
    for level, problem in problems:
        answer = answer_path(answers, level, problem)
        if answer is not None:
            task = kernelbench_task(problem, problem.parent.name)
            work.append((task, Candidate(task_id=task.id, code=answer.read_text(), format="kernelbench")))
    return precompile_tasks(evaluator, work, workers, timeout_s)


def _extensions(built: dict, level: int, problem: Path) -> dict | None:
    comp = built.get(f"kernelbench/level{level}/{problem.stem}")
    return dict(comp.extensions) if comp is not None else None


def measure_ours(torch, evaluator, problem: Path, answer: Path, device) -> dict:
    from pipeline.core.records import Candidate
    from pipeline.tasks import kernelbench_task
    task = kernelbench_task(problem, problem.parent.name)
    cand = Candidate(task_id=task.id, code=answer.read_text(), format="kernelbench")
    free, total = torch.cuda.mem_get_info(device)
    row = {"device_used_before": total - free}
    with DeviceMemorySampler(lambda: (lambda f, t: t - f)(*torch.cuda.mem_get_info(device))) as sampler:
        try:
            result = evaluator.evaluate(task, [cand])[0]
            row.update(verdict=result.verdict, reason=result.reason[:300], speedup=result.speedup,
                       peak_memory_bytes=getattr(result, "peak_memory_bytes", None))
        except Exception as e:  # noqa: BLE001 - recorded, the run goes on
            row["error"] = f"{type(e).__name__}: {str(e)[:500]}"
    row["device_used_peak"] = sampler.peak - row["device_used_before"]
    return row


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kernelbench-dir", required=True, help="KernelBench checkout (with KernelBench/level1/...)")
    p.add_argument("--levels", default="1,2,3", help="levels to rank, comma-separated")
    p.add_argument("--top", type=int, default=8, help="largest problems per level (0: all)")
    p.add_argument("--problems", default="", help="rank only these problems: ids or names, comma-separated")
    p.add_argument("--answers", default=None, help="directory of KernelBench-named answers (the new model)")
    p.add_argument("--ours", action="store_true", help="also measure our evaluator with the answer")
    p.add_argument("--config", default="configs/h200.yaml", help="run configuration for --ours")
    p.add_argument("--correct-trials", type=int, default=5)
    p.add_argument("--perf-trials", type=int, default=100,
                   help="timing trials of each model (KernelBench: 100); the peak is reached in the first, as the "
                        "caching allocator reuses its blocks after, so fewer measure the same peak sooner")
    p.add_argument("--budget-s", type=float, default=0.0, help="start no problem after this many seconds (0: none)")
    p.add_argument("--out", default="kernelbench_memory.json")
    args = p.parse_args(argv)

    import torch
    if not torch.cuda.is_available():
        print("kernelbench_memory: no CUDA GPU is visible; run it on a GPU host.", file=sys.stderr)
        return 2
    root = Path(args.kernelbench_dir).expanduser()
    problems_root = root / "KernelBench" if (root / "KernelBench").is_dir() else root
    answers = Path(args.answers) if args.answers else None
    device = torch.device("cuda:0")
    torch.cuda.init()  # torch's own CUDA state before its memory statistics are reset or read
    evaluator = None
    if args.ours:
        from pipeline.core.config import load_config
        from pipeline.evaluation.evaluator import Evaluator
        cfg = load_config(args.config, ["eval.gate_profile=kernelbench"])
        evaluator = Evaluator(cfg.eval, cfg.compile, use_gpu=True)
    ranked = []
    for level in [int(x) for x in args.levels.split(",") if x.strip()]:
        ranked += [(level, f, size) for f, size in largest_problems(problems_root / f"level{level}", args.top,
                                                                    args.problems)]
    print(f"{len(ranked)} problems, largest first per level: "
          + ", ".join(f"L{lv}/{f.stem} {s['total'] / GiB:.2f} GiB" for lv, f, s in ranked), flush=True)
    rows, started, built = [], time.monotonic(), {}
    if evaluator is not None and answers is not None:
        built = precompile(evaluator, [(level, problem) for level, problem, _ in ranked], answers,
                           timeout_s=args.budget_s / 2 if args.budget_s else None)
        print(f"answers compiled in {time.monotonic() - started:.0f} s", flush=True)
    for level, problem, size in ranked:
        if args.budget_s and time.monotonic() - started > args.budget_s:
            print(f"budget of {args.budget_s:g} s spent: {len(ranked) - len(rows)} problems not started", flush=True)
            break
        answer = answer_path(answers, level, problem) if answers else None
        row = {"problem": f"level{level}/{problem.name}", "size": size, "answer": str(answer) if answer else None,
               "kernelbench": measure_kernelbench(torch, problem.read_text(), answer.read_text() if answer else None,
                                                  device, args, _extensions(built, level, problem))}
        if evaluator is not None and answer is not None:
            row["ours"] = measure_ours(torch, evaluator, problem, answer, device)
        rows.append(row)
        kb = row["kernelbench"]
        print(f"{row['problem']}: in+out {size['total'] / GiB:.2f} GiB; KernelBench max allocated "
              f"{kb['max_allocated'] / GiB:.2f} GiB, device peak {kb['device_used_peak'] / GiB:.2f} GiB"
              f"{'; ' + kb['error'] if 'error' in kb else ''}"
              + (f"; ours device peak {row['ours']['device_used_peak'] / GiB:.2f} GiB ({row['ours'].get('verdict')})"
                 if "ours" in row else ""), flush=True)
        Path(args.out).write_text(json.dumps({"gpu": torch.cuda.get_device_name(device), "rows": rows}, indent=2))
    print(format_table(rows))
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
