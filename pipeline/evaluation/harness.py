"""The evaluation harness's group API: the one way code outside the evaluator works with its GPU state.

`Evaluator.evaluate(task, candidates)` is the whole interface for judging candidates. Dataset
measurement (`pipeline/dataset/measure_worker.py`, trusted implementations timed in a trusted process),
the structural-reward fit and the timing benchmarks need the steps beneath it, on the same buffers and
under the same rules, and use exactly the members named here (`tests/test_layers.py` checks that no
module outside the evaluator reaches for anything else of it). The sandboxed candidate path
(`runner.py`) stages, checks, starts and loads children through the same members; it and
`timed_rounds.py` are parts of the evaluator and also use its internals.

A *group* (`group_data.GroupData`) is one task's device state while it is held: its configurations,
the check sets made on the device from secret seeds, the reference outputs, and the buffers the
trusted side owns (exported over CUDA IPC to the children that run code on them).

    group = harness.prepare_group(task)        # inputs, reference outputs, device buffers
    try:
        for cd in group.configs:
            harness.stage_inputs(group, cd, 0)  # check set 0 in the buffers, every output poisoned
            ...run something on the buffers...
            ok, err, reason, mutated = harness.check_config(group, cd, 0)
    finally:
        harness.release_group(group)           # the buffers go back

`Evaluator` is the implementation (one per GPU).
"""
from __future__ import annotations

from typing import Callable, Protocol

from pipeline.core.records import Candidate, EvalResult, Finding, Task
from pipeline.evaluation.checks.group_data import ConfigData, GroupData
from pipeline.evaluation.gpu.lock import CodeLock

__all__ = ["ConfigData", "EvaluatorParts", "GroupData", "GroupHarness"]


class GroupHarness(Protocol):
    """What `Evaluator` offers beside `evaluate` (see the module docstring)."""

    cfg: object  # the eval section (config.EvalSection) it runs under
    driver: object  # gpu/driver.Driver bound to its GPU (buffers, events, synchronisation)
    gpu_lock: object  # gpu/lock.GpuLock: checks share the GPU, timing holds it alone
    gpu_name: str
    compiler: object  # compile.Compiler (its cache shared with `evaluate`)
    clock: object  # timing.TrustedClock: the trusted side's clock and L2 flush
    flush_ptr: int  # the device buffer the L2 flush writes

    def gate_and_compile(self, task: Task, cand: Candidate, comp):
        """The static gate, then the compiler (cached): a Prepared, or the EvalResult that ends it."""

    def structure_features(self, cand: Candidate, comp, c_entry: str = "") -> tuple[dict, list[Finding]]:
        """The structural features of a compiled candidate (ptxas, SASS, source) and their hints."""

    def prepare_group(self, task: Task) -> GroupData:
        """A task's group, on the device; raises group_data.TaskBroken when the task itself fails."""

    def release_group(self, group: GroupData) -> None:
        """Free a group's device buffers (every prepared group is released, also on failure)."""

    def run_c_reference(self, group: GroupData) -> None:
        """c2cuda: the serial C reference's outputs of every check set (on the CPU)."""

    def stage_inputs(self, group: GroupData, cd: ConfigData, set_index: int) -> None:
        """One check set's inputs into the configuration's buffers, every output poisoned."""

    def check_config(self, group: GroupData, cd: ConfigData, set_index: int) -> tuple[bool, float, str, bool]:
        """(passed, worst error, reason, inputs modified) of the outputs now in the buffers."""

    def start_child(self, torch_format: bool, hello_now: bool = True):
        """A fresh sandboxed child process (sandbox.ChildProcess), one per candidate or trusted baseline; without
        `hello_now` only started (Python, torch where asked), its trusted start on the GPU left to `child.hello()`."""

    def load_into_child(self, child, group: GroupData, fmt: str, comp, entry: str, source: str = "",
                        trusted: bool = False, calls: str = "") -> dict:
        """Map the group's buffers in the child and load a compiled artefact there; the child's reply. `calls`:
        whose call specs the child gets (default `fmt`'s; the float64 baseline's: group_data.ANCHOR_CALLS)."""

    def timer(self, trials: int) -> Callable[[Callable[[], None]], list[float]]:
        """Per-trial milliseconds of a trusted call in this process (dataset measurement's timing)."""


class EvaluatorParts(GroupHarness, Protocol):
    """What the evaluator's own parts (runner.py, timing/timed_rounds.py) read of it beyond the group API."""

    candidate_code: CodeLock  # held from a candidate's timed window through its check: no load ahead then
    sandbox_note: str  # said in every result when children run without the OS sandbox ('' with it)

    def null_child(self, fmt: str):
        """The group's trusted child that loads nothing, for the empty-batch and calibration timings."""

    def result_of(self, task: Task, cand: Candidate, verdict: str, reason: str = "", **fields) -> EvalResult:
        """An EvalResult of this evaluator (its GPU, its version) for one candidate."""
