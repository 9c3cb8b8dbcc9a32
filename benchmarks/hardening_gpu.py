"""The wall on a GPU: what only a GPU can confirm of docs/trust.md, in one run that prints a table at the end.

    python benchmarks/hardening_gpu.py [--out FILE]

1. Honest implementations of the built-in tasks (every format) are correct under the child's full sandbox
   (namespaces, Landlock, seccomp, the exec lock after load) with CUDA and IPC working.
2. Output aliasing: a KernelBench answer that writes into the harness's own output buffer (found by walking
   the harness's frames) and returns it is refused (`output-aliasing`: a result in the harness's buffers
   would have the harness copy a buffer onto itself); the same answer returning a new tensor is correct.
3. The strict profile's compute rule decided outside the child: an extension that calls torch's relu through
   at::_ops or ATen's CUDA kernel itself (at::cuda::relu, past the dispatcher), or registers an override with TORCH_LIBRARY_IMPL, is refused by the artefact check; a forward
   that returns a tuple subclass or a container computing on iteration is caught by the (teacher) runtime check.
Steps 2 and 3 switch the static gate off for their candidates (monkeypatched), since the wall must hold
where the teacher was fooled. Without a GPU every verdict is not_executed and the script says so.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KNOWN_GOOD = ["c2cuda/saxpy", "c2cuda/dot", "c2cuda/gemv", "torch2cuda/relu", "torch2cuda/softmax",
              "torch2cuda/layernorm"]

_EXT = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu_into(torch::Tensor x, torch::Tensor y) {
    int64_t n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
EXTRA
"""
cpp_source = "torch::Tensor relu_into(torch::Tensor x, torch::Tensor y);"
ext = load_inline(name="NAME", cpp_sources=cpp_source, cuda_sources=cuda_source, functions=["relu_into"])
'''

NEW_TENSOR = _EXT.replace("EXTRA", "").replace("NAME", "relu_new") + '''
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_into(x, torch.empty_like(x))
'''

ALIASING = _EXT.replace("EXTRA", "").replace("NAME", "relu_alias") + '''
import sys
class ModelNew(nn.Module):
    def forward(self, x):
        frame = sys._getframe(1)
        while frame is not None and "outputs" not in frame.f_locals:
            frame = frame.f_back
        out = frame.f_locals["outputs"][0] if frame is not None else torch.empty_like(x)
        return ext.relu_into(x, out)  # written straight into the harness's buffer: its copy_ is a no-op
'''

TORCH_OPS = _EXT.replace("EXTRA", '''
torch::Tensor relu_ops(torch::Tensor x) { return at::_ops::relu::call(x); }
''').replace("NAME", "relu_ops").replace('functions=["relu_into"]', 'functions=["relu_into", "relu_ops"]') + '''
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_ops(x)
'''

ATEN_CUDA = _EXT.replace("EXTRA", '''
#include <ATen/ops/relu_cuda_dispatch.h>
torch::Tensor relu_ops(torch::Tensor x) { return at::cuda::relu(x); }
''').replace("NAME", "relu_atcuda").replace('functions=["relu_into"]', 'functions=["relu_into", "relu_ops"]') + '''
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_ops(x)
'''

LIBRARY_IMPL = _EXT.replace("EXTRA", '''
#include <torch/library.h>
at::Tensor my_alias(const at::Tensor& self) { return self; }
TORCH_LIBRARY_IMPL(aten, CUDA, m) { m.impl("alias", my_alias); }
''').replace("NAME", "relu_lib") + '''
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_into(x, torch.empty_like(x))
'''

TUPLE_SUBCLASS = _EXT.replace("EXTRA", "").replace("NAME", "relu_tuple") + '''
class Lazy(tuple):
    def __iter__(self):
        return iter([torch.relu(self[0])])
class ModelNew(nn.Module):
    def forward(self, x):
        return Lazy((x,))
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="JSON file to write (default: a new file under benchmarks/results/v<evaluator version>/)")
    ap.add_argument("--tasks", default=",".join(KNOWN_GOOD), help="comma-separated built-in tasks of step 1")
    ap.add_argument("--honest-only", action="store_true", help="step 1 alone (honest code under the whole wall)")
    ap.add_argument("--probes-only", action="store_true", help="steps 2 and 3 alone (aliasing and the strict rule)")
    args = ap.parse_args()
    known_good = args.tasks.split(",")
    from pipeline.core.config import CompileSection, EvalSection
    from pipeline.evaluation import evaluator as evaluator_module
    from pipeline.evaluation.evaluator import Evaluator
    from pipeline.core.records import Candidate
    from pipeline.tasks import load_tasks
    tasks = {t.id: t for t in load_tasks("builtin")}
    try:
        import torch
        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    compile_cfg = CompileSection(cache_dir=str(Path.home() / ".cache" / "cudaperf" / "hardening-compile"))
    rows: list[dict] = []

    def evaluate(profile: str, task_id: str, name: str, code: str, fmt: str, gate: bool = True) -> dict:
        ev = Evaluator(EvalSection(gate_profile=profile, result_cache_dir=""), compile_cfg, use_gpu=gpu)
        original = evaluator_module.bounded.gate
        if not gate:
            evaluator_module.bounded.gate = lambda *a, **k: []
        t0 = time.perf_counter()
        try:
            r = ev.evaluate(tasks[task_id], [Candidate(task_id=task_id, code=code, format=fmt)])[0]
        finally:
            evaluator_module.bounded.gate = original
        row = {"probe": name, "task": task_id, "profile": profile, "gate": gate, "verdict": r.verdict,
               "speedup": r.speedup, "flags": r.flags, "reason": r.reason[:200], "s": round(time.perf_counter() - t0, 1)}
        rows.append(row)
        return row

    if gpu:  # every KernelBench-format build at once, up front (30-90 s each): the evaluations then hit the cache
        from concurrent.futures import ThreadPoolExecutor

        from pipeline.evaluation.build.compile import Compiler
        sources = ([] if args.honest_only else [NEW_TENSOR, ALIASING, TORCH_OPS, ATEN_CUDA, LIBRARY_IMPL, TUPLE_SUBCLASS]) + [
            i.code for t in ([] if args.probes_only else known_good) for i in tasks[t].implementations
            if i.format == "kernelbench"]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(Compiler(compile_cfg).compile_kernelbench, sources))
    for task_id in ([] if args.probes_only else known_good):  # 1. honest code works under the whole wall
        for impl in tasks[task_id].implementations:
            evaluate("kernelbench" if impl.format == "kernelbench" else "strict", task_id, f"honest {impl.name}",
                     impl.code, impl.format)
    if args.honest_only:
        _report(rows, gpu, None, args.out, torch.cuda.get_device_name(0) if gpu else "")
        return
    new = evaluate("kernelbench", "torch2cuda/relu", "copy: new tensor", NEW_TENSOR, "kernelbench", gate=False)
    alias = evaluate("kernelbench", "torch2cuda/relu", "copy: aliases the harness buffer", ALIASING, "kernelbench",
                     gate=False)
    for name, code in (("strict: at::_ops::relu", TORCH_OPS), ("strict: at::cuda::relu", ATEN_CUDA),
                       ("strict: TORCH_LIBRARY_IMPL", LIBRARY_IMPL),
                       ("strict: tuple subclass", TUPLE_SUBCLASS)):
        evaluate("strict", "torch2cuda/relu", name, code, "kernelbench", gate=False)

    _report(rows, gpu, (new, alias), args.out, torch.cuda.get_device_name(0) if gpu else "")


def _report(rows: list[dict], gpu: bool, copies: tuple | None, out: str | None, device: str) -> None:
    """Each row's expectation, the JSON and the table."""
    expect = {"honest": "correct", "strict": "rejected|incorrect|runtime_error", "copy: new tensor": "correct",
              "copy: aliases": "rejected|incorrect"}  # incorrect: the child's output-aliasing check (its reason)
    for row in rows:
        want = next((v for k, v in expect.items() if row["probe"].startswith(k)), "")
        row["as_expected"] = (row["verdict"] in want.split("|")) if want and gpu else None
        if row["probe"].startswith("copy: aliases") and row["verdict"] == "incorrect":
            row["as_expected"] = row["as_expected"] and "output-aliasing" in row.get("reason", "")
    new, alias = copies or ({"speedup": None}, {"speedup": None})
    alias_gain = (alias["speedup"] / new["speedup"]) if alias["speedup"] and new["speedup"] else None
    summary = {"gpu": gpu, "device": device, "alias_over_new": alias_gain,
               "alias_within_one_copy": (alias_gain is not None and alias_gain < 2.0) if gpu else None,
               "rows": rows}
    if out is None:
        from benchmarks.results_path import fresh_result_path
        out = str(fresh_result_path("hardening_gpu.json"))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(summary, indent=1))
    print(f"\n{'probe':44} {'task':22} {'profile':11} {'verdict':15} {'speedup':>8}  ok")
    for row in rows:
        sp = f"{row['speedup']:.2f}" if row["speedup"] else "-"
        print(f"{row['probe'][:44]:44} {row['task']:22} {row['profile']:11} {row['verdict']:15} {sp:>8}  "
              f"{row['as_expected']}")
    print(f"aliasing over new tensor: {alias_gain}  (within one copy: {summary['alias_within_one_copy']})"
          + ("" if gpu else "   [no GPU: every verdict is not_executed]"))


if __name__ == "__main__":
    main()
