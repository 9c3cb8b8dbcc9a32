"""A build tool run as a bounded process tree: the compile step's limits, its sandbox and one CPU budget per candidate.

    run_build(argv, scratch, timeout_s, cfg, budget) -> Ran     # a compiler in its sandbox, with its limits
    run_limited(argv, cwd, env, timeout_s, preexec, budget, output_bytes) -> Ran
    CompileBudget.of(fmt, cfg)                                  # CPU seconds of all builds of one candidate

A run starts in a new session; its group is killed past its wall time or past what the budget has left (the tree's
CPU read every 20 ms); each process gets RLIMIT_AS, RLIMIT_CPU, RLIMIT_FSIZE and no core files; under bwrap
(`sandboxed`) it has no network, read-only system trees and only its scratch directory writable. Of each output
stream the first `compile.output_bytes` are kept and the rest counted. Used by the compile step (compile.py) and
the artefact check's own tools (artifact.py).
"""
from __future__ import annotations

import ctypes
import os
import resource
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from pipeline.core.config import CompileSection

CLONE_NEWNET = 0x40000000
FILE_BYTES = 1 << 30  # largest file a compiler (or the artefact check's tools) may write (RLIMIT_FSIZE)


class CompileBudget:
    """CPU seconds one candidate's builds may use together (its compile, the artefact check's nvcc -E and
    nvcc -c): each build is charged what its process tree used, and one that would pass what is left is
    stopped. `field` names the config key in the message a stopped candidate gets."""

    def __init__(self, cpu_s: float, field: str = "compile.cpu_budget_s"):
        self.total, self.left, self.field = float(cpu_s), float(cpu_s), field

    @classmethod
    def of(cls, fmt: str, cfg: CompileSection) -> "CompileBudget":
        """The budget of a candidate of format `fmt`."""
        return cls(cfg.kernelbench_cpu_budget_s, "compile.kernelbench_cpu_budget_s") if fmt == "kernelbench" \
            else cls(cfg.cpu_budget_s)

    def charge(self, cpu_s: float) -> None:
        self.left -= cpu_s

    @property
    def spent(self) -> bool:
        return self.left <= 0

    def message(self) -> str:
        return (f"the builds of this candidate used up its CPU budget of {self.total:.0f} s ({self.field}); "
                f"simplify the source: deep macro, template or constexpr expansion costs the compiler more than "
                f"any kernel is worth")


@dataclass
class Ran:
    """A finished build process: exit code, output, CPU seconds of its whole tree, and why it was stopped."""
    returncode: int
    stdout: str
    stderr: str
    cpu_s: float
    timed_out: bool = False
    over_budget: bool = False
    dropped_bytes: int = 0  # output past the read cap (`output_bytes` of run_limited), counted and not kept


def _tree_cpu_s(pid: int) -> float:
    """CPU seconds of `pid` and its live descendants, each with the children it has reaped."""
    total, todo, tick = 0.0, [pid], os.sysconf("SC_CLK_TCK")
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(v) for v in fields[11:15]) / tick  # utime stime cutime cstime
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError, IndexError):
            pass
    return total


def _read_capped(stream, cap: int | None, chunks: dict, key: str, dropped: dict) -> None:
    """Read `stream` to its end, keeping its first `cap` bytes (all with None) and counting the rest."""
    kept, lost = bytearray(), 0
    while True:
        block = stream.read1(1 << 16)
        if not block:
            break
        room = len(block) if cap is None else max(0, cap - len(kept))
        kept += block[:room]
        lost += len(block) - min(room, len(block))
    chunks[key], dropped[key] = bytes(kept), lost


def run_limited(argv: list[str], cwd: str, env: dict, timeout_s: float, preexec=None,
                budget: CompileBudget | None = None, output_bytes: int | None = None) -> Ran:
    """Run a build in a new session; kill its group past `timeout_s` or past what `budget` has left (its tree's
    CPU, read every 20 ms); charge the budget what the tree used (from wait4, exact once it has ended). Of stdout
    and stderr each, the first `output_bytes` are kept (all with None) and the rest counted in `dropped_bytes`."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, preexec_fn=preexec)
    chunks: dict[str, bytes] = {}
    dropped: dict[str, int] = {}
    readers = [threading.Thread(target=_read_capped, args=(f, output_bytes, chunks, k, dropped), daemon=True)
               for k, f in (("out", proc.stdout), ("err", proc.stderr))]
    for r in readers:
        r.start()
    deadline, timed_out, over, seen_s = time.monotonic() + timeout_s, False, False, 0.0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if budget is not None:
            seen_s = max(seen_s, _tree_cpu_s(proc.pid))  # a killed tree's processes are never reaped into wait4's
        if time.monotonic() > deadline:
            timed_out = True
        elif budget is not None and seen_s > budget.left:
            over = True
        if timed_out or over:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    proc.returncode = os.waitstatus_to_exitcode(status)
    for r in readers:
        r.join(timeout=10)
    cpu_s = max(usage.ru_utime + usage.ru_stime, seen_s)
    if budget is not None:
        budget.charge(cpu_s)
        over = over or budget.spent
    return Ran(proc.returncode, chunks.get("out", b"").decode(errors="replace"),
               chunks.get("err", b"").decode(errors="replace"), cpu_s, timed_out, over, sum(dropped.values()))


def _sandbox_preexec(memory_limit_bytes: int, isolate_network: bool, cpu_s: float | None = None):
    """Limits for the compiler (inherited through bwrap): memory, no core files, files of FILE_BYTES at most,
    CPU seconds per process where a budget is left; a network namespace only without bwrap."""
    import math

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_BYTES, FILE_BYTES))
        if cpu_s is not None:
            limit = max(1, math.ceil(cpu_s))
            resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 1))
        if isolate_network:
            ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWNET)  # best effort: fails without privilege
    return apply


def tool_env(scratch: str) -> dict[str, str]:
    """The trimmed environment of a compile-step tool: PATH, its scratch as home, CUDA's variables."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": scratch, "TMPDIR": scratch}
    for key in ("CUDA_HOME", "LD_LIBRARY_PATH"):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def run_build(argv: list[str], scratch: str, timeout_s: float, cfg: CompileSection,
              budget: CompileBudget | None = None) -> Ran:
    """A compiler run of the compile step: in its sandbox (`sandboxed`), with its limits (`_sandbox_preexec`),
    charged to `budget`; not started at all (over_budget) when the budget is already spent."""
    if budget is not None and budget.spent:
        return Ran(-1, "", "", 0.0, over_budget=True)
    argv, env = sandboxed(argv, scratch, tool_env(scratch), cfg)
    preexec = _sandbox_preexec(cfg.memory_limit_bytes, cfg.sandbox == "none", budget.left if budget else None)
    return run_limited(argv, scratch, env, timeout_s, preexec, budget, cfg.output_bytes)


def _install_root(program: str) -> str:
    """The directory a compiler is installed under: /usr/local/cuda-13.0 for .../cuda-13.0/bin/nvcc."""
    path = os.path.realpath(shutil.which(program) or program)
    return os.path.dirname(os.path.dirname(path))


def sandboxed(argv: list[str], scratch: str, env: dict[str, str], cfg: CompileSection) -> tuple[list[str], dict]:
    """(argv, environment) that run a compiler under bwrap: no network, system and toolchain read-only,
    only `scratch` writable, the home directory and the compile cache invisible. Unchanged for sandbox 'none'."""
    if cfg.sandbox == "none":
        return argv, env
    from pipeline.evaluation.child.sandbox import bwrap_command, bwrap_environment, python_trees, require_bwrap
    bwrap, bwrap_env = require_bwrap(field="compile.sandbox")
    trees = [_install_root(argv[0]), _install_root(cfg.nvcc), *python_trees(),
             *[d for d in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d], env.get("CUDA_HOME", "")]
    env = dict(env, TMPDIR="/tmp")  # temporary files in the sandbox's tmpfs of cfg.tmp_bytes, not on the host
    prefix = bwrap_command(bwrap, scratch, [t for t in trees if t], env, [str(Path.home()), cfg.cache_dir],
                           devices=False, tmp_bytes=cfg.tmp_bytes)
    return prefix + argv, bwrap_environment(bwrap_env)
