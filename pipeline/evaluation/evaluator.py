"""The evaluator: a group of candidates for one task in, one EvalResult per candidate out.

Order of work (the evaluation protocol of the design notes):
 0. intake (intake.py): a candidate the evaluator cannot read (text UTF-8 cannot encode, a NUL
    character, past the size limit, a field of the wrong type) -> `format_error` naming its rule;
 1. static gate (gate/) -> `rejected` naming rule and line;
 2. compile (compile.py, cached) -> `compile_error` with the trimmed log; no compiler for the
    format on this host (only with eval.allow_unbuilt; otherwise the commands stop at start) ->
    `unbuilt`, which earns nothing and is never cached;
 3. without a GPU: `not_executed` (built, never counted as correct); where the trusted side fails (the
    task's reference or baseline, the evaluator's memory, a GPU that stays busy, an exception of our own
    code in one candidate's path): `evaluator_error`, which blames and rewards no candidate and is never
    cached; the other candidates of the list go on;
 4. on a GPU, once per group: fresh secret seeds, inputs and reference outputs (checks/reference_c.py,
    checks/reference_torch.py), device buffers the trusted side owns; then each candidate in its own
    child process (child/sandbox.py, child/main.py): correctness on every check configuration, twice with different
    inputs in the same buffers, outputs NaN-poisoned before each call, inputs verified
    unchanged; then timing on the timing configurations (timed_rounds.py): rounds of a baseline
    batch and a candidate batch on fresh inputs, one call per slot, timed by the trusted side's
    own clock under an exclusive GPU lock, every timed call's outputs checked, times below the
    roofline floor rejected.
Identical candidates are evaluated once (by content hash), and results are cached on disk by
candidate, task, evaluator version, GPU and every verdict-relevant setting and tool
(result_cache.settings_digest). No number in a result is NaN or infinite (intake.finite_result).
"""
from __future__ import annotations

import os
import secrets
import time
from concurrent.futures import ThreadPoolExecutor

from dataclasses import dataclass
from typing import get_args

from pipeline.core.config import CompileSection, EvalSection
from pipeline.evaluation.gpu import device_views
from pipeline.evaluation.build.compile import CompileResult, Compiler
from pipeline.evaluation.build.tool_run import CompileBudget
from pipeline.evaluation.gpu.driver import CudaError, allocated_bytes
from pipeline.evaluation.gpu.lock import CodeLock, GpuLock
from pipeline.evaluation.gpu.memory_budget import MemoryBudget, MemoryTooLarge, MemoryWaitTimeout, gib
from pipeline.evaluation import bounded
from pipeline.evaluation.bounded import StageLimit, limit_finding
from pipeline.evaluation.gate import FORM_RULES, gate_profile
from pipeline.evaluation.checks.buffer_layout import add_anchor_slot, add_timing_slots, arena_layout
from pipeline.evaluation.checks.comparison import check_outputs
from pipeline.evaluation.checks.footprint import ConfigBytes, config_bytes, group_footprint
from pipeline.evaluation.checks.group_data import GroupData, TaskBroken, poison_byte, to_device
from pipeline.evaluation.checks.reference_c import (adopt_baseline_outputs, build_c2cuda, can_anchor_c,
                                                    run_c_reference, run_c_reference64)
from pipeline.evaluation.checks.reference_torch import build_torch2cuda
from pipeline.evaluation.checks.fidelity import C_FLOAT64_PRELUDE
from pipeline.evaluation.checks.timed_anchor import attach_timed_anchors
from pipeline.evaluation.intake import finite_result, unusable
from pipeline.evaluation.result_cache import ResultCache, settings_digest
from pipeline.evaluation.child.sandbox import ChildFailed, ChildProcess, SandboxUnavailable
from pipeline.evaluation.child.warm import WarmChildren, warm_start
from pipeline.evaluation.timing.timed_rounds import CALIBRATION_FILL_MAX
from pipeline.evaluation.timing.statistics import TrustedClock, time_calls
from pipeline.core.records import Candidate, CandidateFormat, EvalResult, Finding, Task

EVALUATOR_VERSION = "24"  # in every result's cache key and report; what each version changed: docs/changelog.md


@dataclass
class Prepared:
    """A candidate that passed the gate and compiled (or cannot be built on this host)."""
    comp: CompileResult
    findings: list[Finding]
    stage_s: dict[str, float]
    features: dict


def group_memory_need(task: Task, eval_cfg: EvalSection) -> tuple[int, ConfigBytes]:
    """(bytes, its largest configuration): the device memory an evaluator reserves before it builds a group of
    `task` under `eval_cfg` (checks/footprint.py, from the argument sizes or the reference run on torch's meta
    device: nothing is allocated). Raises where the reference does not run on the meta device."""
    sizes = config_bytes(task)
    need = group_footprint(sizes, eval_cfg.timing_memory_bytes, eval_cfg.l2_flush_bytes,
                           calibration_max=CALIBRATION_FILL_MAX,
                           round_sets_bytes=eval_cfg.timing_memory_bytes if eval_cfg.group_rounds else 0)
    return need, max(sizes, key=lambda c: c.inputs + c.outputs + c.params + c.intermediates)


class Evaluator:
    """One per GPU (or one CPU-only). `evaluate(task, candidates)` judges candidates; the group API
    beneath it, for trusted code outside the evaluator, is named in harness.py."""

    def __init__(self, eval_cfg: EvalSection, compile_cfg: CompileSection, use_gpu: bool):
        self.cfg = eval_cfg
        self.compiler = Compiler(compile_cfg)
        self.use_gpu = use_gpu
        self.gpu_name = "cpu"
        self.cache = ResultCache(eval_cfg.result_cache_dir, eval_cfg.cache_confirmations)
        self.settings = settings_digest(eval_cfg, compile_cfg)  # in every cache key
        self.child_user = eval_cfg.unprivileged_user if eval_cfg.sandbox == "none" else ""
        self.sandbox_note = ("children ran without the OS sandbox (eval.sandbox=none): no namespaces, no read-only "
                             "mounts" if eval_cfg.sandbox == "none" else "")
        self.visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        self.gpu_lock = GpuLock(self.visible, trace_path=eval_cfg.lock_trace_path)  # shared: checks; exclusive: timing
        # held while a candidate's code loads and while one is checked: the next candidate, loaded ahead,
        # cannot run its __init__ kernels on the group's buffers while another's outputs are read
        self.candidate_code = CodeLock()
        if use_gpu:
            from pipeline.evaluation.gpu.driver import Driver
            self.driver = Driver(0)
            self.gpu_lock.idle = self._gpu_idle  # a shared hold ends with this process's GPU work done
            self.gpu_name = self.driver.info().name
            self.flush_ptr = self.driver.alloc(eval_cfg.l2_flush_bytes)
            self.clock = TrustedClock(self.driver, self.flush_ptr, eval_cfg.l2_flush_bytes)
            self.memory = MemoryBudget(self.visible, int(self.driver.total_memory() * eval_cfg.gpu_memory_fraction))
            self._null_children: dict[bool, ChildProcess] = {}
            self._probe_child_user()
            from pipeline.evaluation.checks.fused_check import CudaPass
            self.check_pass = CudaPass.load(self.compiler)  # the timed batches' checks as kernels (None: torch's)

    # --- public ---------------------------------------------------------------------------
    def evaluate(self, task: Task, candidates: list[Candidate],
                 compiled: list[CompileResult | None] | None = None) -> list[EvalResult]:
        """Results in candidate order; duplicates and cached candidates are not re-run. One candidate's
        problem is its own result, never the list's exception: a candidate the evaluator cannot read is a
        `format_error` (intake.py), an exception of our own code in its path its `evaluator_error`."""
        compiled = list(compiled) if compiled else [None] * len(candidates)
        if len(compiled) != len(candidates):
            raise ValueError(f"evaluate: {len(compiled)} compile results for {len(candidates)} candidates")
        unique: dict[str, int] = {}
        keys: dict[int, str] = {}
        results: list[EvalResult | None] = [None] * len(candidates)
        pending = []
        for i, cand in enumerate(candidates):
            problem = unusable(cand)
            if problem is not None:  # never hashed, cached or gated
                results[i] = self.result_of(task, cand, "format_error", problem.reason, flags=[problem.rule],
                                            findings=[Finding(source="gate", severity="error", rule=problem.rule,
                                                              message=problem.reason)])
                continue
            keys[i] = key = self._cache_key(task, cand)
            if key in unique:
                continue
            unique[key] = i
            hit = self.cache.get(key)
            if hit is not None:
                results[i] = hit.model_copy(update={"cached": True, "turn": cand.turn})
            else:
                pending.append(i)
        prepared = {i: self._guarded(task, candidates[i], "gate and compile", self.gate_and_compile, task,
                                     candidates[i], compiled[i]) for i in pending}
        runnable = []
        for i in pending:
            if not isinstance(prepared[i], Prepared):
                results[i] = prepared[i]
            elif prepared[i].comp.unavailable:  # no compiler for its format here: nothing is known
                results[i] = self._unbuilt(task, candidates[i], prepared[i])
            else:
                runnable.append(i)
        if runnable and not self.use_gpu:
            for i in runnable:
                results[i] = self._guarded(task, candidates[i], "reporting", self._not_executed, task, candidates[i],
                                           prepared[i])
        elif runnable:
            self._run_on_gpu(task, candidates, prepared, runnable, results)
        for i in pending:
            results[i] = finite_result(results[i])
            results[i].findings.sort(key=lambda f: ("error", "warning", "info").index(f.severity))
            if results[i].verdict not in ("evaluator_error", "unbuilt"):  # what the host lacked: never kept
                self.cache.put(keys[i], results[i])
        for i, cand in enumerate(candidates):
            if results[i] is None:
                first = results[unique[keys[i]]]
                results[i] = first.model_copy(update={"cached": True, "turn": cand.turn})
        return results

    # --- stages ---------------------------------------------------------------------------
    def _cache_key(self, task: Task, cand: Candidate) -> str:
        """Candidate, task, evaluator version, GPU, and the digest of every verdict-relevant setting and tool
        (result_cache.settings_digest: gate profile, compile flags, tolerances of timing, the toolchain...)."""
        return (f"{cand.content_hash()}-{task.content_hash()}-{EVALUATOR_VERSION}-{self.gpu_name.replace(' ', '_')}"
                f"-{self.settings}")

    def result_of(self, task: Task, cand: Candidate, verdict: str, reason: str = "", **kw) -> EvalResult:
        """A result for `cand`; fields a malformed one lacks (intake.py) take defaults: no hash, the task's format."""
        fmt, turn = getattr(cand, "format", None), getattr(cand, "turn", 0)
        named = isinstance(cand, Candidate) and type(getattr(cand, "code", None)) is str and type(fmt) is str
        return EvalResult(task_id=task.id, candidate_hash=cand.content_hash() if named else "",
                          format=fmt if type(fmt) is str and fmt in get_args(CandidateFormat) else
                          ("c2cuda" if task.kind == "c2cuda" else "light"),
                          turn=turn if type(turn) is int else 0,
                          verdict=verdict, reason=reason, gpu=self.gpu_name, evaluator_version=EVALUATOR_VERSION, **kw)

    def _guarded(self, task: Task, cand: Candidate, stage: str, work, *args):
        """`work(*args)`, or, where our own code raises in this candidate's path, its `evaluator_error`
        naming the stage and the exception: the other candidates of the list go on."""
        try:
            return work(*args)
        except Exception as e:  # noqa: BLE001 - any failure of ours in one candidate's path is that candidate's
            return self._own_failure(task, cand, stage, e)

    def _own_failure(self, task: Task, cand: Candidate, stage: str, e: BaseException) -> EvalResult:
        return self.result_of(task, cand, "evaluator_error", f"not judged: the evaluator failed in {stage}: "
                              f"{type(e).__name__}: {str(e)[:300]}")

    def gate_and_compile(self, task: Task, cand: Candidate, comp: CompileResult | None):
        """A Prepared candidate to run, or the final EvalResult of a candidate that stops here."""
        t0 = time.perf_counter()
        if (task.kind == "c2cuda") != (cand.format == "c2cuda"):
            return self.result_of(task, cand, "format_error", f"a {task.kind} task does not take {cand.format} candidates")
        worker = comp is not None and comp.built_profile == self.cfg.gate_profile and \
            comp.built_for == bounded.built_for(cand, task)  # the compile worker's findings are this candidate's
        if worker and comp.gate_findings is not None:
            findings = comp.gate_findings  # the compile worker gated it (bounded.checked_build)
        else:
            findings = bounded.gate(self.cfg.limits, cand, task, self.cfg.gate_profile)  # in a worker with OS limits
            if isinstance(findings, StageLimit):
                findings = [limit_finding(findings)]
        gate_s = time.perf_counter() - t0
        errors = [f for f in findings if f.severity == "error"]
        if errors:
            slip = all(f.rule in FORM_RULES for f in errors)  # a misnamed entry point is no hack
            return self.result_of(task, cand, "format_error" if slip else "rejected", errors[0].message,
                                  findings=findings, flags=sorted({f.rule for f in errors}), stage_s={"gate": gate_s})
        t1 = time.perf_counter()
        budget = CompileBudget.of(cand.format, self.compiler.cfg)  # one CPU budget over all its builds
        if comp is not None:  # built by a compile worker, which charged its own copy of the budget
            comp = self.compiler.unpack(comp)
            budget.charge(comp.cpu_s)
        else:
            comp = self.compiler.compile(cand, task, budget)
        stage = {"gate": gate_s, "compile": time.perf_counter() - t1}
        if not comp.ok and not comp.unavailable:
            return self._compile_error(task, cand, comp.log, findings, stage)
        if comp.ok:  # the gate's second look, at what was built (artifact.py); the compile worker's where it ran it
            t_built = time.perf_counter()
            checked = comp.built_findings if worker and comp.built_findings is not None else \
                bounded.artifact_check(self.cfg.limits, cand, task, comp, self.compiler.cfg, self.cfg.gate_profile,
                                       budget)  # in a worker with OS limits
            if isinstance(checked, str):  # the CPU budget of the candidate's builds ran out in the check
                return self._compile_error(task, cand, checked, findings, stage)
            if isinstance(checked, StageLimit):
                checked = [limit_finding(checked)]
            built = [f for f in checked if f.severity == "error"]
            stage["gate"] += time.perf_counter() - t_built
            if built:
                return self.result_of(task, cand, "rejected", built[0].message, findings=findings + built,
                                  flags=sorted({f.rule for f in built}), stage_s=stage, compile_log=comp.ptxas_log)
        t2 = time.perf_counter()
        if worker and comp.built_structure is not None:
            features, hints = comp.built_structure  # the compile worker analysed it (bounded.checked_build)
        else:
            features, hints = self.structure_features(cand, comp, bounded.c_entry_of(task))
        stage["structure"] = time.perf_counter() - t2
        stopped = [f for f in hints if f.rule == "stage-limit"]
        if stopped:
            return self.result_of(task, cand, "rejected", stopped[0].message, findings=findings + stopped,
                                  flags=["stage-limit"], stage_s=stage, compile_log=comp.ptxas_log)
        return Prepared(comp, findings + hints, stage, features)

    def _compile_error(self, task: Task, cand: Candidate, log: str, findings: list[Finding], stage: dict) -> EvalResult:
        return self.result_of(task, cand, "compile_error", "the candidate does not compile", compile_log=log,
                          findings=findings + [Finding(source="compile", severity="error", message=log)], stage_s=stage)

    def structure_features(self, cand: Candidate, comp: CompileResult, c_entry: str = "") -> tuple[dict, list[Finding]]:
        """Compile-time structural features and hints (ptxas report, occupancy, static analysis), computed in a
        worker with OS limits (eval.limits.structure_*); past one, no features and one error finding of rule
        `stage-limit` naming the cap. `c_entry`: a c2cuda task's entry function (only kernels it launches count)."""
        return bounded.structure_findings(self.cfg.limits, cand, self.compiler.cfg.arch, comp.ptxas_log or None,
                                          c_entry)

    def _not_executed(self, task: Task, cand: Candidate, prep: Prepared, why: str = "") -> EvalResult:
        """Built, never run: `why` (default: no GPU here)."""
        why = why or "no GPU is available to this evaluator"
        return self.result_of(task, cand, "not_executed", f"compiled but not run: {why}", findings=prep.findings,
                          stage_s=prep.stage_s, compile_log=prep.comp.ptxas_log, features=prep.features)

    def _unbuilt(self, task: Task, cand: Candidate, prep: Prepared) -> EvalResult:
        """Gated, never built: this host has no compiler for its format (eval.allow_unbuilt); its log says why."""
        return self.result_of(task, cand, "unbuilt", f"not built here: {prep.comp.log}", findings=prep.findings,
                              stage_s=prep.stage_s)

    def _evaluator_error(self, task: Task, cand: Candidate, prep: Prepared, why: str) -> EvalResult:
        return self.result_of(task, cand, "evaluator_error", f"not judged: {why}", findings=prep.findings,
                          stage_s=prep.stage_s, compile_log=prep.comp.ptxas_log, features=prep.features)

    # --- GPU group ---------------------------------------------------------------------------
    def _run_on_gpu(self, task: Task, candidates: list[Candidate], prepared: dict, runnable: list[int],
                    results: list) -> None:
        """The group on this GPU, within the device memory it reserves first (gpu/memory_budget.py)."""
        import torch
        what = f"task {task.id}"
        try:
            need, top = group_memory_need(task, self.cfg)
            what += (f" (its largest configuration '{top.name}': inputs {gib(top.inputs)}, outputs {gib(top.outputs)}, "
                     f"parameters {gib(top.params)})")
        except Exception:  # the reference does not run on the meta device: a fair share of the GPU
            need = self.memory.total // max(self.cfg.workers_per_gpu, 1)
        try:
            with self.memory.reserve(need, what, self.cfg.memory_wait_s):
                torch.cuda.reset_peak_memory_stats()
                group = self.prepare_group(task)
                try:
                    self._run_all(group, [candidates[i] for i in runnable], [prepared[i] for i in runnable],
                                  runnable, results)
                finally:
                    peak = torch.cuda.max_memory_reserved() + group.arena_bytes
                    self.release_group(group)
                for i in runnable:
                    if results[i] is not None:
                        results[i].peak_memory_bytes = peak
        except Exception as e:  # noqa: BLE001 - the trusted side failed on the group: nobody is blamed
            why = str(e) if isinstance(e, (TaskBroken, MemoryTooLarge, MemoryWaitTimeout)) else \
                f"the evaluator failed on the group: {type(e).__name__}: {str(e)[:300]}"
            for i in runnable:
                if results[i] is None:
                    results[i] = self._evaluator_error(task, candidates[i], prepared[i], why)

    # --- GPU group ----------------------------------------------------------------------------
    def _probe_child_user(self) -> None:
        """A sandboxed child must reach the GPU here; with sandbox 'none', an unprivileged user is dropped if it cannot."""
        if self.cfg.sandbox == "none" and (not self.child_user or os.geteuid() != 0):
            return
        try:
            with self.start_child(False) as child:
                reply = child.request({"op": "probe"}, 60)
            problem = "" if reply.get("ok") else reply.get("error", "no answer")
        except ChildFailed as e:
            problem = f"{e}; {e.log.strip()[-300:]}"
        if not problem:
            return
        if self.cfg.sandbox == "bwrap":
            raise SandboxUnavailable(f"a child in the bwrap sandbox cannot use the GPU here ({problem}); fix the "
                                     f"sandbox or set eval.sandbox=none")
        self.sandbox_note += f"; children run as uid {os.geteuid()}: user '{self.child_user}' cannot use the GPU ({problem})"
        self.child_user = ""

    def start_child(self, torch_format: bool, hello_now: bool = True) -> ChildProcess:
        c = self.cfg
        return ChildProcess(self.visible, self.child_user, c.child_memory_limit_bytes, preload_torch=torch_format,
                            sandbox=c.sandbox, bwrap_path=c.bwrap_path, libseccomp_path=c.libseccomp_path,
                            hidden=tuple(d for d in (self.compiler.cfg.cache_dir, c.result_cache_dir) if d),
                            hello_now=hello_now)

    def prepare_group(self, task: Task) -> GroupData:
        seed = secrets.randbits(31)
        try:
            if task.kind == "c2cuda":
                group = build_c2cuda(task, seed)
                self.run_c_reference(group)
            else:
                with self.gpu_lock.shared("group: the reference"):  # never beside another's timing
                    group = build_torch2cuda(task, seed, init_seed=secrets.randbits(31),
                                             compiled=self.cfg.compile_baseline)
            add_timing_slots(group, self.cfg.timing_memory_bytes, self.cfg.timing_slots_max)
            if task.kind == "c2cuda" and can_anchor_c(task):
                add_anchor_slot(group)
            with self.gpu_lock.shared("group: its buffers"):
                to_device(group)
        except TaskBroken:
            raise
        except Exception as e:  # the task's reference itself failed: report it, never blame a candidate
            raise TaskBroken(f"task {task.id}: building inputs or running the reference failed: "
                             f"{type(e).__name__}: {e}") from e
        try:
            with self.gpu_lock.shared("group: expected outputs"):
                self._fill_group(group)
        except BaseException as e:
            self.release_group(group)
            if isinstance(e, ChildFailed):
                raise TaskBroken(f"task {task.id}: the naive baseline's process failed: {e}") from e
            if isinstance(e, CudaError) or type(e).__name__ == "OutOfMemoryError":
                raise TaskBroken(f"task {task.id}: the evaluator could not place the group's data on the GPU: "
                                 f"{str(e)[:300]}") from e
            raise
        return group

    def _fill_group(self, group: GroupData) -> None:
        """Device buffers, exported for the children, and the reference outputs at timing sizes."""
        task = group.task
        sizes = arena_layout(group)
        group.arena_bytes = sum(allocated_bytes(n) for n in sizes if n)
        for n in sizes:  # one at a time, so a failed second one leaves the first to be freed
            group.arenas.append(self.driver.alloc(n) if n else 0)
        group.arena_handles = [self.driver.ipc_export(p) if p else "" for p in group.arenas]
        for buf in group.buffers:
            buf.ptr = group.arenas[buf.arena] + buf.offset
            buf.view = device_views.view(buf.ptr, buf.shape, buf.dtype)
        self.driver.make_current()
        for cd in group.configs:  # parameters in place before any child loads (a kernelbench ModelNew copies them)
            for b, value in cd.param_values.items():
                group.buffers[b].view.copy_(value)
        self.driver.synchronize()
        if task.kind == "c2cuda":
            self._c2cuda_references(group)

    def run_c_reference(self, group: GroupData) -> None:
        task = group.task
        ref = self.compiler.compile_c_reference(task.reference)
        if not ref.ok:
            raise TaskBroken(f"task {task.id}: its C reference does not compile: {ref.log}")
        run_c_reference(group, ref.artifact)
        if can_anchor_c(task):
            ref64 = self.compiler.compile_c_reference(C_FLOAT64_PRELUDE + task.reference)
            group.anchor_note = (run_c_reference64(group, ref64.artifact) if ref64.ok
                                 else "the C reference does not build in float64")

    def _c2cuda_references(self, group: GroupData) -> None:
        task = group.task
        base_impl = task.baseline()
        if base_impl is None:
            raise TaskBroken(f"task {task.id} has no implementation with strategy 'naive' (its GPU baseline)")
        base = self.compiler.compile_cuda(base_impl.code)
        if not base.ok:
            raise TaskBroken(f"task {task.id}: its naive CUDA baseline does not compile: {base.log}")
        child = self.start_child(False)
        group.baseline_child = child
        self.load_into_child(child, group, "c2cuda", base, task.function, trusted=True)

        def call(ci: int, cd) -> None:
            reply = child.request({"op": "call", "config": ci}, self.cfg.run_timeout_s)
            if not reply["ok"]:
                raise TaskBroken(f"task {task.id}: the naive baseline failed on {cd.name}: {reply['error']}")
        adopt_baseline_outputs(group, self.stage_inputs, call)
        attach_timed_anchors(self, group, base_impl.code)

    def release_group(self, group: GroupData) -> None:
        for child in (group.baseline_child, group.anchor_child):
            if child is not None:
                child.close()
        for ptr in group.arenas:
            if ptr:
                self.driver.free(ptr)
        group.arenas = []
        self._free_calibration_scratch()
        for buf in group.buffers:
            buf.ptr, buf.view = 0, None
        for cd in group.configs:  # the trusted side's tensors and models of this group, before the cache is emptied
            cd.input_sets, cd.expected, cd.param_values = [], [], {}
            cd._made.clear()
            cd.fresh = cd.run_reference = cd.run_compiled = cd.run_reference64 = cd.module = cd.module64 = None
            cd.timed_anchor = None
            cd.anchors = []
        group.reference_calls, group.compiled_calls = [], []
        import gc
        import torch
        gc.collect()
        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()  # what this group held goes back to the other evaluators of the GPU

    def load_into_child(self, child: ChildProcess, group: GroupData, fmt: str, comp: CompileResult, entry: str,
                        source: str = "", trusted: bool = False, calls: str = "") -> dict:
        """Load a candidate (or, `trusted`, the naive baseline, which alone maps its own slots) in a child; a
        warm child (warm.py) has mapped the buffers already. `calls`: whose call specs (default `fmt`'s; the
        float64 baseline's are group_data.ANCHOR_CALLS)."""
        msg = {"op": "load", "format": fmt, "entry": entry, "source": source,
               "torch_compute": gate_profile(self.cfg.gate_profile).torch_compute,
               "artifact": child.place(comp.artifact) if comp.artifact else "",
               "extensions": {n: child.place(p) for n, p in comp.extensions.items()},
               "calls": [cd.slot_calls(calls or fmt, baseline=trusted) for cd in group.configs]}
        if "map" not in getattr(child, "ops", []):  # a child that has not mapped them (not warm)
            msg.update(self._buffer_map(group, trusted))
        return child.request(msg, self.cfg.run_timeout_s + (60 if fmt == "kernelbench" else 0))

    def _buffer_map(self, group: GroupData, trusted: bool = False) -> dict:
        """Which arenas a child maps (a candidate's: the first only) and where its buffers lie in them."""
        return {"arenas": [h if trusted or a == 0 else "" for a, h in enumerate(group.arena_handles)],
                "buffers": [{"arena": b.arena, "offset": b.offset, "nbytes": b.nbytes} for b in group.buffers]}

    def warm_child(self, group: GroupData, torch_format: bool) -> ChildProcess:
        """A candidate's child through its trusted start, the GPU's part under the shared lock (warm.warm_start)."""
        return warm_start(self.start_child, self.gpu_lock, self._buffer_map(group), self.cfg.run_timeout_s, torch_format)

    def stage_inputs(self, group: GroupData, cd, set_index: int) -> None:
        """Write one input set into the shared buffers and poison every output buffer."""
        inputs, _ = cd.check_set(set_index)
        for b in cd.buffers:
            buf = group.buffers[b]
            if b in inputs:
                buf.view.copy_(inputs[b].reshape(buf.view.shape))
            elif buf.role == "out":
                self.driver.memset_async(buf.ptr, poison_byte(buf.dtype), buf.nbytes)
        self.driver.synchronize()

    def check_config(self, group: GroupData, cd, set_index: int) -> tuple[bool, float, str, bool]:
        """(passed, max error, reason, inputs_modified) for the outputs now in the buffers (check_outputs)."""
        views = {b: group.buffers[b].view for b in cd.buffers}
        return check_outputs(group, cd, set_index, views)

    def _run_all(self, group: GroupData, cands: list[Candidate], preps: list[Prepared], slots: list[int],
                 results: list) -> None:
        """Run candidates one after another, starting each one's child while the previous runs."""
        from pipeline.evaluation.runner import run_candidate, start_candidate
        warm: dict[bool, WarmChildren] = {}  # per kind of child, children through their trusted start

        def take(torch_format: bool) -> ChildProcess:
            if torch_format not in warm:
                warm[torch_format] = WarmChildren(lambda: self.warm_child(group, torch_format), self.cfg.warm_children)
            return warm[torch_format].take()

        def start(k: int):
            return start_candidate(self, group, cands[k], preps[k], take)  # frozen until its turn
        def started_of(future, k: int):
            """The candidate's Started, or, where our code failed to start it, its evaluator_error."""
            try:
                return future.result()
            except Exception as e:  # noqa: BLE001 - one candidate's start failed: its result, the rest go on
                return self._own_failure(group.task, cands[k], "starting its process", e)

        def close(started) -> None:
            if isinstance(started, EvalResult) or started.child is None:
                return
            started.child.close()
        with ThreadPoolExecutor(max_workers=1) as ahead:
            upcoming = ahead.submit(start, 0)
            try:
                for k in range(len(cands)):
                    started, upcoming = started_of(upcoming, k), None
                    if k + 1 < len(cands):
                        upcoming = ahead.submit(start, k + 1)
                    if isinstance(started, EvalResult):
                        results[slots[k]] = started
                        continue
                    try:
                        self.driver.make_current()
                        if started.child is not None:
                            started.child.thaw()
                        results[slots[k]] = run_candidate(self, group, cands[k], preps[k], started)
                    except Exception as e:  # noqa: BLE001 - our code failed on this candidate: the rest go on
                        close(started)
                        results[slots[k]] = self._evaluator_error(group.task, cands[k], preps[k], f"the evaluator "
                                                                  f"failed running it: {type(e).__name__}: {str(e)[:300]}")
                    if self._restore_params(group) and upcoming is not None:  # the next one may have copied
                        close(started_of(upcoming, k + 1))                     # the damaged weights: load again
                        upcoming = ahead.submit(start, k + 1)
            finally:
                if upcoming is not None:
                    close(started_of(upcoming, len(cands) - 1))
                for pool in warm.values():
                    pool.close()

    def _gpu_idle(self) -> None:
        """Wait until this process's GPU work is done, from any of its threads (the context made current first)."""
        self.driver.make_current()
        self.driver.synchronize()

    def _restore_params(self, group: GroupData) -> bool:
        """Put back any shared parameter a candidate changed (out of bounds of its own buffers, in another
        configuration's); True if one had changed. Its own configurations' parameters it must leave
        as they are (`check_config`); these are the ones a sibling loaded next would copy."""
        import torch
        changed = False
        for cd in group.configs:
            for b, value in cd.param_values.items():
                view = group.buffers[b].view
                if view is not None and not torch.equal(view, value):
                    view.copy_(value)
                    changed = True
        return changed

    def _free_calibration_scratch(self) -> None:
        """The trusted null children give back their calibration scratch (it belongs to the group that
        ended); one that does not answer cleanly is ended, and started afresh when next needed."""
        for key, child in list(getattr(self, "_null_children", {}).items()):
            if child.proc.poll() is not None:
                continue
            try:
                ok = child.request({"op": "free_scratch"}, 60).get("ok")
            except Exception:  # noqa: BLE001 - whatever went wrong, a fresh child replaces this one
                ok = False
            if not ok:
                child.close()
                del self._null_children[key]

    def null_child(self, fmt: str) -> ChildProcess:
        """A trusted child that never loads candidate code, of the same kind as a `fmt` candidate's (with or
        without torch): its calibration batches give what a batch costs besides its calls (timed_rounds.py)."""
        torch_format = fmt == "kernelbench"
        child = self._null_children.get(torch_format)
        if child is None or child.proc.poll() is not None:
            child = self.start_child(torch_format)
            child.request({"op": "probe"}, 60)
            self._null_children[torch_format] = child
        return child

    def close(self) -> None:
        """End the trusted null children (they also end with this process)."""
        for child in getattr(self, "_null_children", {}).values():
            child.close()
        self._null_children = {}

    def timer(self, trials: int):
        """Dataset measurement's timing of trusted implementations in a trusted process (CUDA events)."""
        return lambda call: time_calls(self.driver, call, self.flush_ptr, self.cfg.l2_flush_bytes,
                                       self.cfg.warmup_trials, trials, self.cfg.timing_budget_s)
