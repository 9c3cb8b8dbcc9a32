"""Build time of the KernelBench-format answers (benchmarks/fixtures/kernelbench_answers/), per object, with and without
a precompiled torch/extension.h for the generated C++ file (torch's `use_pch`), side by side in one run.

    python benchmarks/kernelbench_build.py [--limit N] [--workers W] [--out FILE]

Each answer's load_inline calls are built as the compile step builds them (torch's builder, ninja; the import
that would run the extension replaced by nothing), in a fresh build directory per variant, W answers at a time.
For each build: its wall and CPU seconds (children included) and, from ninja's log, the seconds of each object
(main.o: the generated C++ file with torch/extension.h and the bindings; cuda.cuda.o: the answer's CUDA source
through nvcc; the link). Needs a CUDA build of torch and nvcc: it says so and stops where either is missing.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _cpu() -> float:
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def ninja_objects(build_dir: Path) -> dict[str, float]:
    """Seconds per target from ninja's log (start and end in ms, tab-separated)."""
    out: dict[str, float] = {}
    log = build_dir / ".ninja_log"
    if log.is_file():
        for line in log.read_text().splitlines()[1:]:
            parts = line.split("\t")
            if len(parts) >= 4:
                out[parts[3]] = (int(parts[1]) - int(parts[0])) / 1e3
    return out


def build_answer(item: tuple[str, bool]) -> dict:
    path, pch = item
    import torch.utils.cpp_extension as cpp_extension

    from pipeline.evaluation.gate import extract_load_inline
    cpp_extension._import_module_from_library = lambda *a, **k: None  # build, never load
    row = {"answer": Path(path).name, "pch": pch, "builds": []}
    try:
        builds = extract_load_inline(Path(path).read_text())
    except (SyntaxError, ValueError) as e:
        return row | {"error": f"load_inline calls not readable: {e}"}
    with tempfile.TemporaryDirectory(prefix="kb-build-") as scratch:
        for b in builds:
            d = Path(scratch, b["name"])
            d.mkdir(parents=True, exist_ok=True)
            c0, w0 = _cpu(), time.perf_counter()
            try:
                cpp_extension.load_inline(
                    name=b["name"], cpp_sources=b["cpp_sources"], cuda_sources=b["cuda_sources"],
                    functions=b.get("functions"), extra_cflags=b.get("extra_cflags") or None,
                    extra_cuda_cflags=(b.get("extra_cuda_cflags") or []) + ["-Xptxas", "-v", "-lineinfo"],
                    extra_ldflags=b.get("extra_ldflags") or None,
                    extra_include_paths=b.get("extra_include_paths") or None, build_directory=str(d),
                    verbose=False, use_pch=pch)
                error = ""
            except Exception as e:  # noqa: BLE001 - an answer that does not build is a row, not a stop
                error = f"{type(e).__name__}: {str(e)[-300:]}"
            row["builds"].append({"name": b["name"], "wall_s": time.perf_counter() - w0, "cpu_s": _cpu() - c0,
                                  "objects_s": ninja_objects(d), "error": error})
    return row


def summary(rows: list[dict]) -> dict:
    builds = [b for r in rows for b in r.get("builds", []) if not b["error"]]
    if not builds:
        return {"builds": 0}

    def mean(xs):
        return sum(xs) / len(xs) if xs else None
    objects: dict[str, list[float]] = {}
    for b in builds:
        for target, s in b["objects_s"].items():
            kind = "main.o" if target.endswith("main.o") else "cuda.cuda.o" if target.endswith(".cuda.o") else \
                "link" if target.endswith(".so") else target
            objects.setdefault(kind, []).append(s)
    return {"builds": len(builds), "failed": sum(1 for r in rows for b in r.get("builds", []) if b["error"]),
            "wall_s_mean": mean([b["wall_s"] for b in builds]), "cpu_s_mean": mean([b["cpu_s"] for b in builds]),
            "objects_s_mean": {k: mean(v) for k, v in sorted(objects.items())}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", default=str(ROOT / "benchmarks" / "fixtures" / "kernelbench_answers"))
    ap.add_argument("--limit", type=int, default=0, help="the first N answers (0: all)")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    ap.add_argument("--out", default=None, help="JSON file to write (default: a new file under benchmarks/results/v<evaluator version>/)")
    args = ap.parse_args()
    try:
        import torch
        from torch.utils.cpp_extension import CUDA_HOME
    except ImportError:
        sys.exit("error: torch is not installed; install the project (bash install.sh) and run this again")
    if torch.version.cuda is None or CUDA_HOME is None:
        sys.exit("error: KernelBench answers build only with a CUDA build of torch and nvcc; run this on a GPU host "
                 "(benchmarks/gpu_checks.sh kernelbench_build)")
    answers = sorted(str(p) for p in Path(args.answers).glob("*.py"))[: args.limit or None]
    result = {"command": " ".join(["python", "benchmarks/kernelbench_build.py", *sys.argv[1:]]),
              "torch": torch.__version__, "cuda": torch.version.cuda, "cpus": os.cpu_count(), "workers": args.workers,
              "answers": len(answers)}
    for name, pch in (("plain", False), ("pch", True)):
        if pch:  # the precompiled header itself is built once, before the timed builds
            build_answer((answers[0], True))
        t0 = time.perf_counter()
        with ProcessPoolExecutor(args.workers) as pool:
            rows = list(pool.map(build_answer, [(a, pch) for a in answers]))
        result[name] = {"wall_s": time.perf_counter() - t0, **summary(rows), "rows": rows}
        s = result[name]
        print(f"{name:6} {s.get('builds', 0)} builds in {s['wall_s']:.0f} s: per build wall "
              f"{s.get('wall_s_mean') or 0:.1f} s, CPU {s.get('cpu_s_mean') or 0:.1f} s, objects "
              f"{ {k: round(v, 1) for k, v in (s.get('objects_s_mean') or {}).items()} }", flush=True)
    if args.out is None:
        from benchmarks.results_path import fresh_result_path
        args.out = str(fresh_result_path("kernelbench_build.json"))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
