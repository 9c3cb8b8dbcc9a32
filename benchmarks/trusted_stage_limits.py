"""What adversarial sources cost each trusted stage, next to the stage's caps, on this CPU (no GPU needed).

Stages and how each is run here, as the evaluator runs it:
- gate: gate.check_candidate through bounded.run_stage (eval.limits.gate_*);
- compile: Compiler.compile_cuda (nvcc under compile.timeout_s, compile.cpu_budget_s, compile.memory_limit_bytes,
  its output read within compile.output_bytes, kept preprocessed passes within compile.preprocessed_bytes);
- check: artifact.check_built through bounded.artifact_check (eval.limits.check_*), on honest builds and on the
  expansions a macro bomb leaves in the kept device pass;
- structure: structure.analyze_source through bounded.run_stage (eval.limits.structure_*);
- feedback: format_feedback on a result carrying a huge compiler log and reason.
Inputs: the honest answers (built-in task implementations, benchmarks/fixtures/kernelbench_answers) and, per stage,
deep nesting, long lines, constant-expression blow-ups, macro and template expansion, huge compiler outputs, many
kernels. Each row: wall, CPU seconds and peak RSS of the worker (None where the worker was stopped by a cap), the
size of what came back, the verdict. Also the runner's own cost per job (a fork from the fork server).

    python benchmarks/trusted_stage_limits.py [--out PATH]

writes benchmarks/results/v<EVALUATOR_VERSION>/trusted_stages.json and prints a table (about 5 minutes on 2 loaded cores).
"""
from __future__ import annotations

import argparse
import json
import pickle
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.core.config import CompileSection, EvalSection  # noqa: E402
from pipeline.core.records import Candidate, EvalResult  # noqa: E402
from pipeline.evaluation import bounded  # noqa: E402
from pipeline.evaluation.bounded import StageLimit, caps_of, measured, run_stage  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "kernelbench_answers"


# --- adversarial sources ---------------------------------------------------------------------------------
def kernelbench(cuda_expr: str, prelude: str = "") -> str:
    return (f"import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n{prelude}\n"
            f"mod = load_inline(name=\"m\", cpp_sources=\"\", cuda_sources={cuda_expr}, functions=[\"k\"])\n"
            "class ModelNew(nn.Module):\n    def forward(self, x):\n        return mod.k(x)\n")


KERNEL = "__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n"
GATE_ATTACKS = {
    "load_inline: one 10 KB string named 2000 times": ("kernelbench", kernelbench(
        "[" + ", ".join(["s"] * 2000) + "]", f's = """{KERNEL * 180}"""')),
    "load_inline: 'x' * 10**10": ("kernelbench", kernelbench('["x" * 10**10]')),
    "nested comprehensions": ("kernelbench", kernelbench(
        "[" + "".join(f"[" for _ in range(50)) + "'a'" + "".join(f" for a{i} in range(10**9)]" for i in range(50))
        + "]")),
    "Python nesting 5000 deep": ("kernelbench", kernelbench("(" * 5000 + '"x"' + ")" * 5000)),
    "CUDA nesting 20000 deep": ("c2cuda", "__global__ void k(float* x) { x[0] = " + "(" * 20000 + "1" + ")" * 20000
                                + "; }\n"),
    "one 1 MB line": ("c2cuda", "__global__ void k(float* x) { int i = threadIdx.x; x[i] = " + "+".join(
        ["x[i]"] * 200_000) + "; }\n"),
    "250 KB of kernels": ("c2cuda", "".join(
        f"__global__ void k{i}(float* x, int n) {{ int i = blockIdx.x * blockDim.x + threadIdx.x; "
        f"if (i < n) x[i] = x[i] * 2.0f + {i}; }}\n" for i in range(2200))),
    "regex: 100000 unterminated comments": ("c2cuda", KERNEL + "/*" * 100_000),
    "regex: 200 KB of one quote and backslashes": ("c2cuda", KERNEL + 'const char* s = "' + "\\\\ " * 70_000 + '";\n'),
}


def macro_bomb(depth: int) -> str:
    """2^depth copies of 'ab' in one string literal: a small source, a large preprocessed pass."""
    defines = "".join(f"#define A{i + 1} A{i} A{i}\n" for i in range(depth))
    return ("#define S(x) #x\n#define STR(x) S(x)\n#define A0 ab\n" + defines + f"const char* s = STR(A{depth});\n"
            "int f() { return s[0]; }\n" + KERNEL)


COMPILE_ATTACKS = {
    "macro bomb 2^25 (2.6 KB source)": macro_bomb(25),
    "template: 1500 kernel instantiations": "template <int N> __global__ void k(float* x) { x[threadIdx.x] += N; }\n"
        + "".join(f"template __global__ void k<{i}>(float*);\n" for i in range(1500)),
    "20000 compiler errors": KERNEL + "".join(f"int f{i}() {{ return undefined_{i}; }}\n" for i in range(20000)),
}


def expansion(statements: int) -> dict:
    """What a macro bomb of `statements` statements leaves in both kept passes (CompileResult.expanded)."""
    lines = [(1, "__global__ void k(float* x) {"), (2, "x[threadIdx.x] += 1.0f; " * statements), (3, "}")]
    return {"device": lines, "host": lines}


STRUCTURE_ATTACKS = {
    "3000 accesses in one kernel": "__global__ void k(float* x, int a) { int i = threadIdx.x; " + "".join(
        f"x[i*{j}+a] = x[i+{j}];" for j in range(3000)) + " }\n",
    "30000 accesses in one kernel": "__global__ void k(float* x, int a) { int i = threadIdx.x; " + "".join(
        f"x[i*{j}+a] = x[i+{j}];" for j in range(30000)) + " }\n",
    "2000 kernels": GATE_ATTACKS["250 KB of kernels"][1],
    "if nesting 3000 deep": "__global__ void k(float* x) { " + "if (x[0] > 0) { " * 3000 + "x[1] = 2;" + " }" * 3000
                            + " }\n",
    "product of 14 index sums": "__global__ void k(float* x, int a, int b) { int i = threadIdx.x; x[" + "*".join(
        f"(i+a+b+{j})" for j in range(14)) + "] = 1; }\n",
}


# --- running ---------------------------------------------------------------------------------------------
def row(stage: str, name: str, kind: str, caps, got, wall_s: float, verdict) -> dict:
    """One table row from what run_stage(caps, measured, ...) gave."""
    cap_row = {"wall_s": caps.wall_s, "cpu_s": caps.cpu_s, "memory_bytes": caps.memory_bytes,
               "output_bytes": caps.result_bytes}
    if isinstance(got, StageLimit):
        return {"stage": stage, "input": name, "kind": kind, "wall_s": round(wall_s, 2), "cpu_s": None,
                "peak_rss_bytes": None, "output_bytes": None, "stopped_by": got.cap, "caps": cap_row,
                "verdict": f"rejected: {got.sentence()}"}
    value, w, cpu, rss = got
    return {"stage": stage, "input": name, "kind": kind, "wall_s": round(wall_s, 2), "cpu_s": round(cpu, 2),
            "peak_rss_bytes": rss, "output_bytes": len(pickle.dumps(value)), "stopped_by": None, "caps": cap_row,
            "verdict": verdict(value)}


def errors_verdict(findings) -> str:
    errors = [f for f in findings if f.severity == "error"]
    return f"rejected: {errors[0].message[:120]}" if errors else "passes"


def gate_rows(limits, tasks) -> list[dict]:
    from pipeline.evaluation.gate import check_candidate
    torch_task = next(t for t in tasks.values() if t.kind == "torch2cuda")
    c_task = tasks["c2cuda/saxpy"]
    jobs = [(f"{t.id} {i.format}", "honest", Candidate(task_id=t.id, code=i.code, format=i.format), t)
            for t in tasks.values() for i in t.implementations]
    jobs += [(p.name, "honest", Candidate(task_id=torch_task.id, code=p.read_text(), format="kernelbench"), torch_task)
             for p in sorted(FIXTURES.glob("*_kernel.py"))]
    jobs += [(name, "attack", Candidate(task_id="-", code=code, format=fmt), torch_task if fmt == "kernelbench" else c_task)
             for name, (fmt, code) in GATE_ATTACKS.items()]
    caps, out = caps_of("gate", limits), []
    for name, kind, cand, task in jobs:
        profile = "kernelbench" if cand.format == "kernelbench" else "strict"
        t0 = time.perf_counter()
        got = run_stage(caps, measured, check_candidate, cand.model_copy(update={"task_id": task.id}), task, profile)
        out.append(row("gate", name, kind, caps, got, time.perf_counter() - t0, errors_verdict) | {
            "source_bytes": len(cand.code)})
    return out


def compile_rows(cfg: CompileSection, tasks) -> tuple[list[dict], list]:
    from pipeline.evaluation.build.compile import Compiler
    from pipeline.evaluation.build.tool_run import CompileBudget
    compiler = Compiler(cfg)
    honest = [(f"{t.id} {i.format}", "honest", i.code) for t in list(tasks.values())[:12] for i in t.implementations
              if i.format in ("c2cuda", "light")][:8]
    out, built = [], []
    for name, kind, code in honest + [(n, "attack", c) for n, c in COMPILE_ATTACKS.items()]:
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        budget = CompileBudget.of("c2cuda", cfg)
        t0 = time.perf_counter()
        comp = compiler.compile_cuda(code, budget)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        if comp.ok and kind == "honest":
            built.append((name, code, comp))
        out.append({"stage": "compile", "input": name, "kind": kind, "wall_s": round(wall, 2),
                    "cpu_s": round(comp.cpu_s, 2), "peak_rss_bytes": after * 1024 if after > before else None,
                    "output_bytes": len(comp.log) + len(comp.ptxas_log), "source_bytes": len(code),
                    "stopped_by": None, "caps": {"wall_s": cfg.timeout_s, "cpu_s": cfg.cpu_budget_s,
                                                 "memory_bytes": cfg.memory_limit_bytes, "output_bytes": cfg.output_bytes,
                                                 "preprocessed_bytes": cfg.preprocessed_bytes},
                    "verdict": "compiles" if comp.ok else f"compile_error: {comp.log.splitlines()[0][:160]}"})
    return out, built


def check_rows(limits, cfg: CompileSection, tasks, built) -> list[dict]:
    from pipeline.evaluation.build.artifact import check_built
    from pipeline.evaluation.build.compile import CompileResult
    from pipeline.evaluation.build.tool_run import CompileBudget
    task = tasks["c2cuda/saxpy"]
    honest_code = next(i.code for i in task.implementations if i.format == "c2cuda")
    jobs = [(name, "honest", code, comp) for name, code, comp in built]
    jobs += [(f"kept pass of {n} macro statements", "attack", honest_code + f"\n// {n}\n",
              CompileResult(ok=True, key=f"bomb{n}", expanded=expansion(n))) for n in (60_000, 250_000)]
    caps, out = caps_of("check", limits), []
    for name, kind, code, comp in jobs:
        cand = Candidate(task_id=task.id, code=code, format="c2cuda")
        t0 = time.perf_counter()
        got = run_stage(caps, measured, check_built, cand, task, comp, cfg, "strict", CompileBudget.of("c2cuda", cfg))
        out.append(row("check", name, kind, caps, got, time.perf_counter() - t0, errors_verdict))
    return out


def structure_rows(limits, tasks) -> list[dict]:
    from pipeline.evaluation.bounded import _structure_job
    jobs = [(f"{t.id} {i.format}", "honest", Candidate(task_id=t.id, code=i.code, format=i.format))
            for t in tasks.values() for i in t.implementations]
    jobs += [(name, "attack", Candidate(task_id="-", code=code, format="c2cuda"))
             for name, code in STRUCTURE_ATTACKS.items()]
    caps, out = caps_of("structure", limits), []
    for name, kind, cand in jobs:
        t0 = time.perf_counter()
        got = run_stage(caps, measured, _structure_job, cand, "sm_90", None)
        out.append(row("structure", name, kind, caps, got, time.perf_counter() - t0,
                       lambda v: "features" if not any(f.severity == "error" for f in v[1]) else "rejected"))
    return out


def feedback_rows() -> list[dict]:
    from pipeline.evaluation.feedback import format_feedback
    r = EvalResult(task_id="t", candidate_hash="h", format="c2cuda", verdict="compile_error", gpu="cpu",
                   evaluator_version="-", reason="r" * 10 ** 6, compile_log="error: " + "e" * 184_000_000)
    t0 = time.perf_counter()
    text = format_feedback(r)
    return [{"stage": "feedback", "input": "184-million-character compile_log", "kind": "attack",
             "wall_s": round(time.perf_counter() - t0, 2), "cpu_s": None, "peak_rss_bytes": None,
             "output_bytes": len(text), "stopped_by": None, "caps": {"output_chars": 3000},
             "verdict": text.splitlines()[-1]}]


def overhead() -> dict:
    """Seconds per job of the runner: a trivial job, and the gate on an honest source bounded and in-process."""
    from pipeline.core.config import TrustedLimits
    from pipeline.evaluation.gate import check_candidate
    from pipeline.tasks import load_tasks
    caps = caps_of("gate", TrustedLimits())
    run_stage(caps, len, "warm")  # the fork server starts once
    trivial = []
    for _ in range(50):
        t0 = time.perf_counter()
        run_stage(caps, len, "x")
        trivial.append(time.perf_counter() - t0)
    task = next(t for t in load_tasks("builtin") if t.id == "c2cuda/saxpy")
    cand = Candidate(task_id=task.id, code=next(i.code for i in task.implementations if i.format == "c2cuda"),
                     format="c2cuda")
    inline, forked = [], []
    for _ in range(20):
        t0 = time.perf_counter()
        check_candidate(cand, task, "strict")
        inline.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        bounded.gate(TrustedLimits(), cand, task, "strict")
        forked.append(time.perf_counter() - t0)
    return {"trivial_job_median_s": statistics.median(trivial), "trivial_job_p90_s": sorted(trivial)[44],
            "gate_in_process_median_s": statistics.median(inline), "gate_bounded_median_s": statistics.median(forked)}


def worst(rows: list[dict]) -> list[dict]:
    """Per stage and kind: the largest wall, CPU, RSS and output seen, and what stopped any."""
    out = []
    for stage in dict.fromkeys(r["stage"] for r in rows):
        for kind in ("honest", "attack"):
            rs = [r for r in rows if r["stage"] == stage and r["kind"] == kind]
            if not rs:
                continue

            def top(key):
                vals = [r[key] for r in rs if r[key] is not None]
                return max(vals) if vals else None
            out.append({"stage": stage, "kind": kind, "n": len(rs), "wall_s": top("wall_s"), "cpu_s": top("cpu_s"),
                        "peak_rss_bytes": top("peak_rss_bytes"), "output_bytes": top("output_bytes"),
                        "stopped": sorted({f"{r['input']}: {r['stopped_by']}" for r in rs if r["stopped_by"]}),
                        "caps": rs[0]["caps"]})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="JSON file (default: results/v<version>/trusted_stages.json)")
    args = ap.parse_args()
    from pipeline.tasks import load_tasks
    from benchmarks.results_path import version_dir
    tasks = {t.id: t for t in load_tasks("builtin")}
    limits = EvalSection().limits
    cfg = CompileSection(cache_dir=tempfile.mkdtemp(prefix="trusted-stages-"))
    t_start = time.perf_counter()
    rows = gate_rows(limits, tasks)
    compiled, built = compile_rows(cfg, tasks)
    rows += compiled + check_rows(limits, cfg, tasks, built) + structure_rows(limits, tasks) + feedback_rows()
    result = {"overhead": overhead(), "worst": worst(rows), "rows": rows,
              "seconds": round(time.perf_counter() - t_start, 1)}
    out = Path(args.out) if args.out else version_dir() / "trusted_stages.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"{'stage':10} {'kind':7} {'n':>4} {'wall s':>7} {'CPU s':>6} {'RSS MiB':>8} {'output B':>10}  caps; stopped")
    for w in result["worst"]:
        rss = f"{w['peak_rss_bytes'] / 2**20:.0f}" if w["peak_rss_bytes"] else "-"
        print(f"{w['stage']:10} {w['kind']:7} {w['n']:>4} {w['wall_s']:>7} {w['cpu_s'] if w['cpu_s'] is not None else '-':>6}"
              f" {rss:>8} {w['output_bytes'] if w['output_bytes'] is not None else '-':>10}  {w['caps']}; {w['stopped']}")
    for r in rows:
        if r["kind"] == "attack":
            print(f"  {r['stage']:9} {r['input'][:48]:48} {r['wall_s']:>7} s  {r['verdict'][:110]}")
    print(f"runner overhead per job: {result['overhead']}")
    print(f"wrote {out} ({result['seconds']} s)")


if __name__ == "__main__":
    main()
