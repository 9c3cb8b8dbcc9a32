"""Static checks of KernelBench-format answer files, on a machine without a GPU.

    python benchmarks/check_kernelbench_answers.py [--kernelbench-dir DIR] [--no-nvcc] [--jobs N]
                                                   [--out FILE] ANSWER.py|DIR ...

For each `level_<L>_problem_<N>_sample_<S>_kernel.py`: it parses (ast), our gate's verdict under
the `kernelbench` and `strict` profiles (needs the problem file, found in --kernelbench-dir), and,
unless --no-nvcc, the build of each load_inline call the way torch's extension builder lays it out:
the CUDA sources (behind load_inline's own includes) compiled by `nvcc -arch=sm_90 -c` against
torch's headers, and the C++ sources with their pybind11 bindings checked by `g++ -fsyntax-only`.
cuBLAS headers may be missing on a CPU machine, and a CPU build of torch lacks the generated
c10/cuda/impl/cuda_cmake_macros.h that c10/cuda headers include: each is then replaced by a small
stand-in (cuBLAS: the calls the answers use; the line says so). Nothing runs
on a GPU here; correctness is the GPU run's to judge. Prints one line per answer; --out writes JSON.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import sysconfig
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.evaluation.gate import check_candidate, extract_load_inline  # noqa: E402
from pipeline.core.records import Candidate  # noqa: E402
from pipeline.tasks import TaskError, kernelbench_task  # noqa: E402

NAME = re.compile(r"level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py")
CUDA_PRELUDE = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"  # what load_inline adds
CUBLAS_STUB = """#pragma once
// Stand-in for the calls the answers use, for compiling where cuBLAS is not installed.
#include <cuda_runtime.h>
typedef struct cublasContext* cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
cublasStatus_t cublasCreate(cublasHandle_t*);
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t);
cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float*,
                           const float*, int, const float*, int, const float*, float*, int);
"""
CUDA_MACROS_STUB = "#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n"  # what a CUDA build of torch generates


def answer_files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        files += sorted(p.glob("*_kernel.py")) if p.is_dir() else [p]
    return files


def problem_file(kb_dir: Path, answer: Path) -> Path | None:
    m = NAME.fullmatch(answer.name)
    if not m:
        return None
    found = sorted((kb_dir / f"level{m.group(1)}").glob(f"{m.group(2)}_*.py"))
    return found[0] if found else None


def gate(answer: Path, problem: Path, source: str) -> dict:
    task = kernelbench_task(problem, problem.parent.name)
    cand = Candidate(task_id=task.id, code=source, format="kernelbench")
    out = {}
    for profile in ("kernelbench", "strict"):
        errors = [f for f in check_candidate(cand, task, profile) if f.severity == "error"]
        out[profile] = "ok" if not errors else "; ".join(f"{f.rule} (line {f.line})" for f in errors[:3])
    return out


def torch_includes() -> list[str]:
    import torch.utils.cpp_extension as ext
    return ext.include_paths() + [sysconfig.get_paths()["include"]]


def build(call: dict, includes: list[str], have_cublas: bool) -> str:
    """'ok' or the first compiler errors of one load_inline call."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        flags = [f"-I{d}" for d in includes + call.get("extra_include_paths", [])]
        notes = ""
        if "-lcublas" in call.get("extra_ldflags", []) and not have_cublas:
            (tmp_path / "cublas_v2.h").write_text(CUBLAS_STUB)
            flags.append(f"-I{tmp_path}")
            notes = " (cuBLAS stand-in header)"
        if not any(Path(d, "c10/cuda/impl/cuda_cmake_macros.h").is_file() for d in includes):
            (tmp_path / "c10/cuda/impl").mkdir(parents=True)
            (tmp_path / "c10/cuda/impl/cuda_cmake_macros.h").write_text(CUDA_MACROS_STUB)
            flags.append(f"-I{tmp_path}")
        cu = tmp_path / "cuda.cu"
        cu.write_text(CUDA_PRELUDE + "\n".join(call["cuda_sources"]))
        cflags = [f for f in call.get("extra_cuda_cflags", []) if f.startswith(("-O", "--use_fast_math", "-D"))]
        r = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-c", str(cu), "-o", str(tmp_path / "cuda.o"),
                            "-DTORCH_EXTENSION_NAME=" + call["name"], *cflags, *flags],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return "nvcc: " + _errors(r.stderr)
        cpp = tmp_path / "main.cpp"
        binds = "\n".join(f'm.def("{f}", torch::wrap_pybind_function({f}), "{f}");' for f in call["functions"])
        cpp.write_text("#include <torch/extension.h>\n" + "\n".join(call["cpp_sources"])
                       + f"\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{binds}\n}}\n")
        r = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-DTORCH_EXTENSION_NAME=" + call["name"], str(cpp),
                            *flags], capture_output=True, text=True)
        if r.returncode != 0:
            return "g++: " + _errors(r.stderr)
        return "ok" + notes


def _errors(log: str) -> str:
    lines = [ln for ln in log.splitlines() if "error" in ln]
    return " | ".join(lines[:3])[:600] or log[-600:]


def check(answer: Path, kb_dir: Path, nvcc: bool, includes: list[str], have_cublas: bool) -> dict:
    row: dict = {"file": answer.name}
    source = answer.read_text()
    try:
        ast.parse(source)
        row["parse"] = "ok"
    except SyntaxError as e:
        row["parse"] = f"line {e.lineno}: {e.msg}"
        return row
    problem = problem_file(kb_dir, answer)
    row["problem"] = problem.name if problem else None
    if problem is not None:
        try:
            row["gate"] = gate(answer, problem, source)
        except TaskError as e:
            row["gate"] = {"error": str(e)}
    if nvcc:
        try:
            calls = extract_load_inline(source)
        except ValueError as e:
            row["build"] = f"load_inline arguments are not constants: {e}"
            return row
        row["build"] = "; ".join(build(c, includes, have_cublas) for c in calls) or "no load_inline call"
    return row


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="+", help="answer files or directories of them")
    p.add_argument("--kernelbench-dir", default="KernelBench", help="the KernelBench problems (with level1/ ...)")
    p.add_argument("--no-nvcc", action="store_true", help="parse and gate only")
    p.add_argument("--jobs", type=int, default=2, help="compilations at once")
    p.add_argument("--out", default=None, help="write the rows as JSON here")
    args = p.parse_args(argv)
    kb_dir = Path(args.kernelbench_dir)
    if (kb_dir / "KernelBench").is_dir():
        kb_dir = kb_dir / "KernelBench"
    files = answer_files(args.paths)
    if not files:
        print(f"no *_kernel.py answer files in {' '.join(args.paths)}; pass answer files or their directory",
              file=sys.stderr)
        return 2
    includes = torch_includes() if not args.no_nvcc else []
    have_cublas = any(Path(d, "cublas_v2.h").is_file() for d in ["/usr/local/cuda/include", *includes])
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        rows = list(pool.map(lambda f: check(f, kb_dir, not args.no_nvcc, includes, have_cublas), files))
    bad = 0
    for row in rows:
        gate_txt = " ".join(f"{k}={v}" for k, v in row.get("gate", {}).items())
        print(f"{row['file']}: parse {row['parse']}; problem {row.get('problem')}; gate {gate_txt}; "
              f"build {row.get('build', '-')}", flush=True)
        bad += row["parse"] != "ok" or not str(row.get("build", "ok")).startswith("ok")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2))
    print(f"{len(rows)} answers, {bad} with a parse or build failure")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
