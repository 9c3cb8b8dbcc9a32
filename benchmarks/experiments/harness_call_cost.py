"""Host time of the child's harness per timed call, part by part, on this machine's CPU (no GPU needed).

    python benchmarks/experiments/harness_call_cost.py [--calls 20000] [--out FILE]

On a small problem a call's time is the host's: the GPU waits for the next launch. So what the harness does
in Python around a forward is what a small answer's time carries besides KernelBench's own. Each shape is
timed over --calls calls (best of 5 repeats, microseconds per call) on a CPU tensor, with a forward that does
what a typical answer's does on the host (one allocation through the dispatcher, one call into an extension:
here `torch.empty_like` and a no-op):
- `forward`: the forward alone, as KernelBench's own harness times it;
- `forward_strict_mode`: under the strict profile's dispatch mode (`NoTorchCompute`, no audit): every operator
  of the forward goes through the mode's Python `__torch_dispatch__`;
- `timed_call_v19`: a timed call as evaluator version 19 made it, all inside the events' window: no_grad, the
  mode (strict) or the dispatch-state check (kernelbench), the forward, the result's checks and its copy;
- `timed_call_v20`: what lies between the marks of a call's events now (inside `torch_guard.forward_once`):
  the forward and the result taken apart;
- `between_calls_v20`: the rest of a call now (no_grad and the dispatch-state check around the marks, then
  `torch_guard.deliver`: checks, the aliasing check, the copy), in no side's time.
Out: --out (default benchmarks/results/v<N>/harness_call_cpu.json) and a table.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def per_call_us(fn, calls: int, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, time.perf_counter() - t0)
    return 1e6 * best / calls


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    import torch

    from pipeline.evaluation.child import torch_guard
    torch_guard.RESULT_DEVICE = "cpu"  # the checks read a CPU tensor here
    x, out = torch.randn(16, 64), torch.empty(16, 64)
    memory = torch_guard.HarnessMemory([(x.data_ptr(), x.numel() * 4), (out.data_ptr(), out.numel() * 4)] +
                                       [(1 << 40 + i, 4096) for i in range(64)])  # a group's other buffers

    class ModelNew(torch.nn.Module):
        def forward(self, t):
            y = torch.empty_like(t)  # the answer's allocation (torch::empty_like in its extension)
            return y  # its kernel launch would follow: a call into the extension, not torch

    model = ModelNew()
    flags: list[str] = []

    def forward():
        return model(x)

    def strict_mode():
        with torch_guard.NoTorchCompute([], audit=False, allow_compute=False):
            return model(x)

    def v19(allow):
        def call():
            with torch.no_grad(), torch_guard.NoTorchCompute(flags, audit=False, allow_compute=allow):
                result = model(x)
                results = list(result) if type(result) in (tuple, list) else [result]
            flags.extend(torch_guard.output_problems(results, [out]))
            if not flags:
                out.copy_(results[0])
        return call

    span = [0.0, 0.0]  # seconds between the marks, summed; the last start

    def start():
        span[1] = time.perf_counter()

    def end():
        span[0] += time.perf_counter() - span[1]

    def v20_call():
        results = torch_guard.forward_once(forward, flags, start, end)
        torch_guard.deliver(results, [out], memory, flags)

    shapes = {"forward": forward, "forward_strict_mode": strict_mode, "timed_call_v19_strict": v19(False),
              "timed_call_v19_kernelbench": v19(True)}
    table = {name: round(per_call_us(fn, args.calls), 2) for name, fn in shapes.items()}
    whole = per_call_us(v20_call, args.calls, repeats=1)
    marked = 1e6 * span[0] / args.calls
    table["timed_call_v20"] = round(marked, 2)  # between the marks (less the marks' own perf_counter reads)
    table["between_calls_v20"] = round(whole - marked, 2)
    assert not flags, flags
    import platform
    report = {"machine": platform.processor() or platform.machine(), "torch": torch.__version__,
              "command": "python benchmarks/experiments/harness_call_cost.py " + " ".join(argv),
              "us_per_call": table}
    if args.out is None:
        from benchmarks.results_path import fresh_result_path
        args.out = str(fresh_result_path("harness_call_cpu.json"))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    for name, us in table.items():
        print(f"{name:28} {us:8.2f} us")
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
