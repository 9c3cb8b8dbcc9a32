"""The conventional way to evaluate a KernelBench answer, for comparison: one fresh process per
candidate, `load_inline` builds the extension inside it, reference and candidate share it.

    python benchmarks/conventional_eval.py REFERENCE.py CANDIDATE.py OUT.json

Correctness as KernelBench does it (5 trials of fresh inputs, allclose atol = rtol = 1e-2);
timing with CUDA events (3 warm-ups, 100 trials, a 256 MiB write before each trial to clear the
L2), reference and candidate alike. Writes build time, verdict, times and total seconds.
"""
import json
import sys
import time

T0 = time.perf_counter()
import torch  # noqa: E402


def load(path: str) -> dict:
    ns: dict = {"__name__": path}
    exec(compile(open(path).read(), path, "exec"), ns)
    return ns


def timed(fn, inputs, flush) -> float:
    for _ in range(3):
        fn(*inputs)
    torch.cuda.synchronize()
    times = []
    for _ in range(100):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*inputs)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main() -> None:
    ref_path, cand_path, out_path = sys.argv[1:4]
    report: dict = {"candidate": cand_path}
    try:
        ref = load(ref_path)
        init = ref["get_init_inputs"]()
        torch.manual_seed(42)
        model = ref["Model"](*init).cuda().eval()
        t = time.perf_counter()
        cand = load(cand_path)  # load_inline compiles here
        report["build_s"] = time.perf_counter() - t
        torch.manual_seed(42)
        new = cand["ModelNew"](*init).cuda().eval()
        new.load_state_dict(model.state_dict(), strict=False)
        correct = True
        with torch.no_grad():
            for trial in range(5):
                torch.manual_seed(1000 + trial)
                inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref["get_inputs"]()]
                if not torch.allclose(new(*inputs), model(*inputs), atol=1e-2, rtol=1e-2):
                    correct = False
            report["correct"] = correct
            if correct:
                flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
                report["reference_ms"] = timed(model, inputs, flush)
                report["candidate_ms"] = timed(new, inputs, flush)
                report["speedup"] = report["reference_ms"] / report["candidate_ms"]
    except Exception as e:  # a failing candidate is a result of the benchmark, not a crash of it
        report["correct"] = False
        report["error"] = f"{type(e).__name__}: {e}"[:500]
    report["total_s"] = time.perf_counter() - T0
    json.dump(report, open(out_path, "w"))


if __name__ == "__main__":
    main()
