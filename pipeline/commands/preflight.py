"""Checks a command makes at start, before any work: a job that evaluates needs the compiler its verdicts need.

In: the run configuration (and, for `cudaperf eval`, the candidate's format). Out: nothing, or a
`UserError` whose one sentence names the problem and the fix. Runs `nvcc --version` (through
`compile.toolchain_id`, the same probe the result cache's key reads); touches nothing else.

Without a compiler every candidate that passes the gate would be judged on nothing: no verdict is
given without its tool. `eval.allow_unbuilt: true` is the explicit way to go on anyway: such
candidates are `unbuilt`, earn no reward and their feedback says they were not built.
"""
from __future__ import annotations

from pipeline.core.config import RunConfig
from pipeline.core.errors import UserError


class NoCompiler(UserError):
    """The compiler a job needs is not on this host, and eval.allow_unbuilt is off."""


def compiler_problem(cfg: RunConfig, formats: tuple[str, ...] = ()) -> str:
    """One sentence naming the missing compiler and the fix, or '' when the job can build what it evaluates
    (or `eval.allow_unbuilt` is on). `formats`: candidate formats known to be evaluated (KernelBench answers
    also need a CUDA build of torch)."""
    from pipeline.evaluation.build.compile import _torch_can_build_cuda, toolchain_id
    if cfg.eval.allow_unbuilt:
        return ""
    if toolchain_id(cfg.compile.nvcc) == "missing":
        return (f"compile.nvcc = '{cfg.compile.nvcc}' is not an nvcc this host can run, so no candidate could be "
                f"built; install the CUDA toolkit (nvcc on PATH) or set compile.nvcc=/path/to/nvcc, or set "
                f"eval.allow_unbuilt=true to evaluate without building (unbuilt candidates earn no reward)")
    if "kernelbench" in formats and not _torch_can_build_cuda():
        return ("KernelBench answers are built by torch's load_inline, which needs a CUDA build of torch and a CUDA "
                "toolkit (CUDA_HOME), and this host has neither; run on a GPU host, or set eval.allow_unbuilt=true "
                "to evaluate without building (unbuilt candidates earn no reward)")
    return ""


def require_compiler(cfg: RunConfig, formats: tuple[str, ...] = ()) -> None:
    """Raise `NoCompiler` with `compiler_problem`'s sentence when there is one."""
    problem = compiler_problem(cfg, formats)
    if problem:
        raise NoCompiler(problem)
