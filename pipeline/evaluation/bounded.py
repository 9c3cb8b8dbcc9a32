"""Trusted stages run on candidate text with OS limits: a named function in, its value or a `StageLimit` out.

The gate, the artefact check and the structural analysis are our own Python, but they read what a
candidate wrote, and a 2 KB source can make them run for minutes or take gigabytes (macro expansion
read back from the preprocessor, deep nesting, huge constant expressions, thousands of kernels).
`run_stage(caps, fn, *args)` runs `fn(*args)` in a worker process forked from a fork server that has
the gate, the structure analysis and the artefact check already imported (a job costs a fork, not an
import). The worker sets its own limits before it runs: RLIMIT_AS (memory_bytes beyond its address space at
the fork, `mapped_bytes`), RLIMIT_CPU (cpu_s:
the kernel sends SIGXCPU), RLIMIT_FSIZE and no core files; the parent waits `wall_s` and then kills
the worker and every process under it (the tools it started in their own sessions too). The value
comes back pickled through a pipe, read with a byte cap (`result_bytes`).

Only the soft limits are set: the worker runs trusted code, which never raises them, and a compiler
it starts (tool_run.run_build) sets its own, larger memory limit, which a lowered hard limit would
forbid. A MemoryError or RecursionError in the worker is the input's doing and becomes a StageLimit;
any other exception is a bug of ours and is raised here as RuntimeError with the worker's traceback, and
so is a worker that ends without an answer in a way no limit ends it (_CAP_OF_SIGNAL): never a verdict a
cache would keep for the candidate.

What this does not do: isolate the stages from the host (they are trusted code; the compilers they
start run in their own sandbox, compile.py), or bound a stage run in-process by other callers.
"""
from __future__ import annotations

import io
import math
import multiprocessing
import os
import pickle
import resource
import signal
import time
import traceback
from dataclasses import dataclass
from multiprocessing import context, forkserver, popen_forkserver, reduction, spawn, util

from pipeline.evaluation.build.compile import CompileResult
from pipeline.evaluation.build.tool_run import FILE_BYTES, CompileBudget
from pipeline.evaluation.gate.rules import LIMITS, advice_for

PRELOAD = ["pipeline.evaluation.bounded", "pipeline.evaluation.gate", "pipeline.evaluation.build.artifact",
           "pipeline.structure.analyze", "tree_sitter", "tree_sitter_cuda"]
# where torch is installed: the gate of a kernelbench candidate looks names up in these (1.4 s to import, per job
# unless the fork server has them)
TORCH_PRELOAD = ["torch", "torch.nn", "torch.nn.functional", "torch.utils.cpp_extension"]


@dataclass(frozen=True)
class StageCaps:
    """The caps of one stage and the config fields that set them (named in the verdict)."""
    stage: str          # "the gate", "the artefact check", "the structural analysis"
    wall_s: float
    cpu_s: float
    memory_bytes: int
    result_bytes: int
    fields: tuple[str, str, str, str]  # config fields of wall, cpu, memory, output


@dataclass(frozen=True)
class StageLimit:
    """A stage stopped by one of its caps: `cap` is wall, cpu, memory, output or depth."""
    stage: str
    cap: str
    limit: str   # the cap's value, readable ("30 s", "4096 MiB")
    field: str   # the config field that sets it ('' for depth, Python's own recursion limit)

    def sentence(self) -> str:
        """The verdict's reason: one sentence naming the stage, the cap and the fix."""
        what = {"wall": f"stopped after its wall time of {self.limit}",
                "cpu": f"stopped after its CPU time of {self.limit}",
                "memory": f"stopped at its memory limit of {self.limit}",
                "output": f"stopped: its result passed the output cap of {self.limit}",
                "depth": "stopped: the source nests deeper than it can follow"}[self.cap]
        where = f" ({self.field})" if self.field else ""
        return f"{self.stage} {what}{where}; {advice_for('stage-limit', LIMITS)}"


def caps_of(stage: str, limits, prefix: str = "eval.limits") -> StageCaps:
    """The caps of `stage` ('gate', 'check' or 'structure') from a TrustedLimits config section."""
    names = {"gate": "the gate", "check": "the artefact check", "structure": "the structural analysis"}
    return StageCaps(names[stage], getattr(limits, f"{stage}_wall_s"), getattr(limits, f"{stage}_cpu_s"),
                     limits.memory_bytes, limits.result_bytes,
                     (f"{prefix}.{stage}_wall_s", f"{prefix}.{stage}_cpu_s", f"{prefix}.memory_bytes",
                      f"{prefix}.result_bytes"))


def _context():
    """The fork-server context, with the stages' modules preloaded (set before the server first starts)."""
    import importlib.util
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD + (TORCH_PRELOAD if importlib.util.find_spec("torch") else []))
    return ctx


class _Popen(popen_forkserver.Popen):
    """The fork server's Popen, less one thing: the job does not import the parent's __main__ again (under Ray that
    is Ray's worker script, a second of imports per job; under a script, its top level). The rest of `_launch` is
    the standard library's (3.11)."""

    def _launch(self, process_obj):
        prep_data = spawn.get_preparation_data(process_obj._name)
        prep_data.pop("init_main_from_path", None)
        prep_data.pop("init_main_from_name", None)
        buf = io.BytesIO()
        context.set_spawning_popen(self)
        try:
            reduction.dump(prep_data, buf)
            reduction.dump(process_obj, buf)
        finally:
            context.set_spawning_popen(None)
        self.sentinel, w = forkserver.connect_to_new_process(self._fds)
        _parent_w = os.dup(w)
        self.finalizer = util.Finalize(self, util.close_fds, (_parent_w, self.sentinel))
        with open(w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        self.pid = forkserver.read_signed(self.sentinel)


class _Process(context.ForkServerProcess):
    """A stage's worker: forked by the fork server, started by `_Popen`."""

    @staticmethod
    def _Popen(process_obj):
        return _Popen(process_obj)


def mapped_bytes() -> int:
    """This process's address space now (VmSize), 0 where /proc cannot tell."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def _job(conn, caps: StageCaps, fn, args: tuple) -> None:
    """The worker: limits first, then `fn(*args)`; sends ('ok', value), ('limit', cap) or ('error', traceback).
    The memory cap is what the job may map beyond what the fork server had preloaded: a CUDA build of torch
    alone reserves more address space than the cap, so an absolute limit stopped every job's first mmap (a
    library's load) on a GPU host, and would differ from host to host by torch's build."""
    for limit, value in ((resource.RLIMIT_AS, mapped_bytes() + caps.memory_bytes),
                         (resource.RLIMIT_CPU, math.ceil(caps.cpu_s)),
                         (resource.RLIMIT_FSIZE, FILE_BYTES)):
        hard = resource.getrlimit(limit)[1]
        resource.setrlimit(limit, (value if hard == resource.RLIM_INFINITY else min(value, hard), hard))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGXCPU would otherwise dump the worker's memory
    try:
        try:
            payload = pickle.dumps(("ok", fn(*args)), protocol=pickle.HIGHEST_PROTOCOL)
        except MemoryError:
            payload = pickle.dumps(("limit", "memory"))
        except RecursionError:
            payload = pickle.dumps(("limit", "depth"))
        except Exception:  # noqa: BLE001 - a bug of ours: its traceback goes to the parent, which raises it
            payload = pickle.dumps(("error", traceback.format_exc()[-4000:]))
        if len(payload) > caps.result_bytes:
            payload = pickle.dumps(("limit", "output"))
    except MemoryError:  # pickling the value itself ran out
        payload = pickle.dumps(("limit", "memory"))
    conn.send_bytes(payload)
    conn.close()


# How a worker's limits end it when Python cannot answer: RLIMIT_CPU sends SIGXCPU (SIGKILL at the hard limit); a
# C stack overflow (deep recursion in a parser) is SIGSEGV; memory refused to C++ code aborts (std::bad_alloc), and the
# kernel's out-of-memory killer sends SIGKILL. Any other end is not a limit's.
_CAP_OF_SIGNAL = {-signal.SIGXCPU: "cpu", -signal.SIGSEGV: "depth", -signal.SIGABRT: "memory", -signal.SIGKILL: "memory"}


def _exit_text(code: int | None) -> str:
    if code is None:
        return "no exit status"
    return f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"


def _descendants(pid: int) -> list[int]:
    """`pid`'s live descendants (from /proc), parents before children."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                kids = [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            kids = []
        out += kids
        todo += kids
    return out


def kill_tree(pid: int) -> None:
    """Stop `pid` (so it starts nothing more), then kill its descendants' process groups and it."""
    try:
        os.kill(pid, signal.SIGSTOP)
    except ProcessLookupError:
        return
    for p in _descendants(pid):
        for kill in (lambda: os.killpg(os.getpgid(p), signal.SIGKILL), lambda: os.kill(p, signal.SIGKILL)):
            try:
                kill()
            except (ProcessLookupError, PermissionError):
                pass
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _readable(cap: str, caps: StageCaps) -> tuple[str, str]:
    """(value, field) of one cap, for the verdict."""
    wall, cpu, memory, output = caps.fields
    return {"wall": (f"{caps.wall_s:g} s", wall), "cpu": (f"{caps.cpu_s:g} s", cpu),
            "memory": (f"{caps.memory_bytes >> 20} MiB", memory),
            "output": (f"{caps.result_bytes >> 20} MiB", output), "depth": ("", "")}[cap]


def run_stage(caps: StageCaps, fn, *args):
    """`fn(*args)` in a limited worker: its value, or a StageLimit naming the cap it passed. `fn` and `args` must
    pickle (`fn` a module-level function); a bug in `fn` raises RuntimeError with the worker's traceback."""
    ctx = _context()
    receive, send = ctx.Pipe(duplex=False)
    proc = _Process(target=_job, args=(send, caps, fn, args), daemon=True)
    proc.start()
    send.close()
    cap, value = None, None
    try:
        if not receive.poll(caps.wall_s):
            cap = "wall"
        else:
            try:
                kind, value = pickle.loads(receive.recv_bytes(caps.result_bytes + 4096))
                if kind == "error":
                    raise RuntimeError(f"{caps.stage} failed in its worker (a bug, not the candidate's):\n{value}")
                cap = value if kind == "limit" else None
            except EOFError:  # the worker died without an answer: killed by one of its limits, or a bug of ours
                proc.join(5)
                code = proc.exitcode
                cap = _CAP_OF_SIGNAL.get(code)
                if cap is None:  # an exit status no limit gives (an import that failed, a crash): never the input's
                    raise RuntimeError(f"{caps.stage} failed in its worker (a bug, not the candidate's): the worker "
                                       f"ended with {_exit_text(code)} and no answer")
            except OSError:  # recv_bytes: a message longer than the cap
                cap = "output"
    finally:
        receive.close()
        if proc.exitcode is None:
            proc.join(0.5 if cap is None else 0)
        if proc.exitcode is None:
            kill_tree(proc.pid)
            proc.join()
    if cap is None:
        return value
    limit, field = _readable(cap, caps)
    return StageLimit(caps.stage, cap, limit, field)


def limit_finding(limit: StageLimit, source: str = "gate"):
    """The StageLimit as the error Finding a verdict carries (rule `stage-limit`)."""
    from pipeline.core.records import Finding
    return Finding(source=source, severity="error", message=limit.sentence(), rule="stage-limit")


# --- the stages -------------------------------------------------------------------------------------
def gate(limits, candidate, task, profile: str):
    """gate.check_candidate under `limits.gate_*`: its findings, or a StageLimit."""
    from pipeline.evaluation.gate import check_candidate
    return run_stage(caps_of("gate", limits), check_candidate, candidate, task, profile)


def _check_job(candidate, task, comp, cfg, profile: str, budget: CompileBudget) -> tuple:
    """(findings or None, BudgetSpent's sentence or '', CPU seconds of the budget left) of artifact.check_built."""
    from pipeline.evaluation.build.artifact import BudgetSpent, check_built
    try:
        return check_built(candidate, task, comp, cfg, profile, budget), "", budget.left
    except BudgetSpent as e:
        return None, str(e), budget.left


def artifact_check(limits, candidate, task, comp: CompileResult, cfg, profile: str, budget: CompileBudget):
    """artifact.check_built under `limits.check_*`, its builds charged to `budget`: its findings, the sentence of
    a spent budget (a str: the candidate's compile_error), or a StageLimit."""
    got = run_stage(caps_of("check", limits), _check_job, candidate, task, comp, cfg, profile, budget)
    if isinstance(got, StageLimit):
        return got
    findings, spent, left = got
    budget.charge(budget.left - left)
    return spent or findings


def _structure_job(candidate, arch: str, ptxas_log: str | None, c_entry: str) -> tuple:
    from pipeline.evaluation.gate import cuda_sources_of, entry_points
    from pipeline.structure.analyze import analyze_source
    texts = [text for text, _ in cuda_sources_of(candidate)]
    if not texts:
        return {}, []
    analysis = analyze_source("\n".join(texts), arch=arch, ptxas_log=ptxas_log, run_nvcc=False,
                              entries=entry_points(candidate, c_entry))
    return analysis.features(), analysis.findings


def structure(limits, candidate, arch: str, ptxas_log: str | None, c_entry: str = ""):
    """(features, findings) of structure.analyze_source on the candidate's CUDA sources (none: ({}, [])) under
    `limits.structure_*`, or a StageLimit; only kernels launched from the entry points count (`c_entry`: a c2cuda
    task's entry function; without it, every C-linkage function)."""
    return run_stage(caps_of("structure", limits), _structure_job, candidate, arch, ptxas_log, c_entry)


def structure_findings(limits, candidate, arch: str, ptxas_log: str | None, c_entry: str = "") -> tuple:
    """`structure` as a verdict reads it: (features, findings), past a cap no features and one error finding of
    rule `stage-limit` naming it."""
    got = structure(limits, candidate, arch, ptxas_log, c_entry)
    return ({}, [limit_finding(got, "structure")]) if isinstance(got, StageLimit) else got


def c_entry_of(task) -> str:
    """The entry function whose launches the structural analysis counts: a c2cuda task's; '' (every C-linkage
    function) otherwise."""
    return task.function if task.kind == "c2cuda" else ""


def checked_build(compiler, candidate, task, profile: str, limits) -> CompileResult:
    """What a compile worker does for one candidate (each trusted stage bounded): the
    gate (a refused or stopped candidate is not built), the build and the artefact check, charged to one CPU
    budget, then the structural analysis of what passed; the gate's and the check's findings and the analysis'
    features travel in the result, so the evaluator reads them instead of running any of them again (its own
    serial CPU work per candidate is then only the run). A check stopped by a cap is
    an error finding naming it, a budget spent in the check a compile error naming that."""
    from pipeline.evaluation.intake import unusable
    if unusable(candidate) is not None:  # the evaluator's intake names why; nothing of it is built
        return CompileResult(ok=False, log="not built: the evaluator cannot read this candidate")
    found = gate(limits, candidate, task, profile)
    gated = {"gate_findings": [limit_finding(found)] if isinstance(found, StageLimit) else found,
             "built_profile": profile, "built_for": built_for(candidate, task)}  # the evaluator reads them instead
    if any(f.severity == "error" for f in gated["gate_findings"]):
        return CompileResult(ok=False, log="not built: the static gate refused it (the evaluator names the rule)",
                             **gated)
    budget = CompileBudget.of(candidate.format, compiler.cfg)
    comp = compiler.compile(candidate, task, budget)
    if not comp.ok:
        return comp.model_copy(update=gated)
    checked = artifact_check(limits, candidate, task, comp, compiler.cfg, profile, budget)
    if isinstance(checked, str):
        return CompileResult(ok=False, log=checked, key=comp.key, cpu_s=comp.cpu_s, **gated)
    findings = [limit_finding(checked)] if isinstance(checked, StageLimit) else checked
    built = {**gated, "built_findings": findings, "cpu_s": budget.total - budget.left}
    if not any(f.severity == "error" for f in findings):  # the evaluator rejects the others before any analysis
        try:
            built["built_structure"] = structure_findings(limits, candidate, compiler.cfg.arch,
                                                          comp.ptxas_log or None, c_entry_of(task))
        except RuntimeError:  # the analysis' worker failed (ours, not the candidate's): the build carries none,
            built["built_structure"] = None  # and the evaluator analyses it, where a failure is that candidate's
            # evaluator_error (tests/evaluation/test_bounded.py)
    return comp.model_copy(update=built)


def built_for(candidate, task) -> str:
    """What a compile worker's findings belong to (CompileResult.built_for): the task and the candidate's code, so
    the evaluator reads them only for that candidate of that task."""
    return f"{task.id}:{candidate.content_hash()}"


def measured(fn, *args) -> tuple:
    """(value, wall s, CPU s, peak RSS bytes) of `fn(*args)` run here: what a stage's worker costs
    (benchmarks/trusted_stage_limits.py runs it as the stage, through `run_stage`)."""
    t0, c0 = time.perf_counter(), time.process_time()
    value = fn(*args)
    return value, time.perf_counter() - t0, time.process_time() - c0, \
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
