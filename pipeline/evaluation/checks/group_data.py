"""The trusted side's data of a group: the records every stage of a check reads, made once per task.

In: nothing here runs a reference; `reference_c.build_c2cuda` and `reference_torch.build_torch2cuda` fill these
records from a Task and a seed the candidates cannot know.
Out: a `GroupData` with, for each input configuration (`ConfigData`), two fresh input sets (the candidate runs
on both, in the same buffers), the reference outputs for each, the device buffers (`Buffer`) the child maps
over IPC, the call layout per candidate format; for timing configurations, slots (sets of buffers, one per
timed call of a batch; buffer_layout.py) and a maker of fresh inputs on the GPU (`ConfigData.fresh`).
Also here: `TaskBroken` (the task's own reference or baseline is wrong), the poison byte of unwritten outputs,
a call spec remapped onto a slot, the work model of a configuration, and the move of a group's sets to the GPU.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pipeline.evaluation.checks.fidelity import anchor_allowance, run_measuring_sums, serial_tolerance
from pipeline.core.records import Task, Tolerance
from pipeline.tasks import eval_expr

FLOAT_KINDS = "f"


class TaskBroken(RuntimeError):
    """The task's own reference or baseline is wrong: a bug in the data, not in a candidate."""


def poison_byte(dtype: np.dtype) -> int:
    """0xFF makes every float NaN; 0x7F makes ints a large improbable value."""
    return 0xFF if np.dtype(dtype).kind in FLOAT_KINDS else 0x7F


@dataclass
class Buffer:
    """A device allocation the trusted side owns and the child maps."""
    name: str
    dtype: str
    shape: tuple[int, ...]
    role: str  # in | out | inout | param
    baseline_only: bool = False  # a slot of the trusted baseline's: never mapped into a candidate's process
    arena: int = 0  # which of the group's device allocations holds it (arena_layout), and where
    offset: int = 0
    ptr: int = 0
    view: object = None  # torch tensor over ptr (trusted side)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


@dataclass
class ConfigData:
    name: str
    check: bool
    time: bool
    params: dict
    buffers: list[int]                       # indices into GroupData.buffers
    input_sets: list[dict]  # per set: buffer index -> values before the call (numpy, then torch on the GPU)
    expected: list[dict] = field(default_factory=list)  # per set: buffer index -> reference outputs, likewise
    calls: dict[str, dict] = field(default_factory=dict)  # candidate format -> child call spec
    flops: float = 0.0
    min_bytes: float = 0.0
    # Timing configurations only (see add_timing_slots and timed_rounds.py):
    slots: list[list[int]] = field(default_factory=list)  # per slot: buffer indices in the order of `buffers`
    baseline_slots: list[list[int]] = field(default_factory=list)  # c2cuda: the baseline child's own slots
    fresh: object = None  # callable(seed) -> {position in `buffers`: GPU tensor} for every in/inout/param buffer
    run_reference: object = None  # torch2cuda: callable(fresh set) -> list of output tensors (no sync)
    run_compiled: object = None  # torch2cuda: the same under torch.compile, or None
    run_reference64: object = None  # torch2cuda: callable(fresh set) -> outputs of the float64 twin, or None
    anchors: list[dict] = field(default_factory=list)  # c2cuda: per check set, buffer index -> (float64 output,
    # allowance) for the float64 anchor (fidelity.anchored); torch2cuda: made with the set
    draws: list[str] = field(default_factory=list)  # per check set: "task" | "adversarial" | "mild" | "task (...)"
    anchor_note: str = ""  # why a check set has no float64 anchor ("" when every one has)
    adversarial: bool = True  # torch2cuda: check set 1 is an adversarial draw
    module: object = None  # torch2cuda: the reference module (its state redrawn) and its float64 twin
    module64: object = None
    # torch2cuda check sets made on demand (build_torch2cuda): their seeds, the parameters' values
    seeds: list[int] = field(default_factory=list)
    n_inputs: int = 0  # positions 0.. of a fresh set are inputs, the parameters come after them
    param_values: dict = field(default_factory=dict)  # buffer index -> the reference's parameter tensor
    keep_sets: bool = True  # False: only the set in use is held (large problems)
    _made: dict = field(default_factory=dict)
    # Timing configurations: what the timed rounds draw and how one secret call of each round is anchored
    timed_draw: str = "task"  # the draw of `fresh` the timed rounds use: "adversarial" | "mild" | "task" (timed_inputs)
    timed_anchor: object = None  # callable(fresh set, {position: expected output}) -> {position: (float64 output,
    # allowance)}: the float64 anchor of a timed call (the float64 twin, or the c2cuda baseline built in float64)
    timed_anchor_note: str = ""  # why the timed calls have no float64 anchor ("" when they have one)
    anchor_slot: list[int] = field(default_factory=list)  # c2cuda: the float64 baseline's own buffers (never mapped
    # into a candidate's process), in the order of `buffers`
    summed: int = 0  # torch2cuda with a float64 twin: the longest sum one output element takes (run_measuring_sums)
    anchor_works: bool = False  # the float64 twin ran on this configuration's inputs and gave every output
    wide: bool = False  # torch2cuda: a third check set on the wide draw (fidelity.wide_like), where the reference is
    # stable there (`stable_on_wide`)
    # eval.group_rounds: the inputs and expected outputs of rounds whose baseline is not timed, made for the group's
    # first candidate and given to the next in their own secret order (group_timing.shared_round); and their bytes
    round_sets: dict = field(default_factory=dict)
    round_sets_bytes: int = 0
    # eval.timing_baseline "chained": the baseline's end bracket of the group's last candidate whose drift check
    # passed, the next candidate's start bracket (group_timing.ChainedBaseline); None until one exists
    chained_baseline: object = None

    @property
    def n_sets(self) -> int:
        """How many check sets a candidate runs on: the task's draw and the adversarial one, and (torch2cuda, where
        the reference is stable on it) the wide one."""
        return len(self.input_sets) if self.input_sets else (3 if self.wide else 2)

    def tolerance(self, task_tol: Tolerance) -> Tolerance:
        """The elementwise criterion of this configuration's outputs: the task's, widened where the reference sums
        many terms and the float64 anchor holds the output as a whole (fidelity.serial_tolerance, capped), so an
        honest serial float32 sum passes while work left out still fails; never where the anchor does not run."""
        return serial_tolerance(task_tol, self.summed) if self.summed > 1 and self.anchor_works else task_tol

    def timed_inputs(self, seed: int) -> dict:
        """A timed call's fresh inputs under `seed`: the draw the configuration's check set 1 uses where the
        reference stays finite on it (`timed_draw`), so a timed call is judged on inputs where every element
        matters, as a checked call is."""
        return self.fresh(seed) if self.timed_draw == "task" else self.fresh(seed, self.timed_draw)

    def check_set(self, si: int) -> tuple[dict, dict]:
        """(inputs, expected outputs) of check set `si`, each {buffer index: tensor}: the stored ones, or
        (torch2cuda) inputs under the set's seed and the reference's outputs on them, made now: set 0 from the
        task's get_inputs(), set 1 its adversarial twin (fidelity.adversarial_like; "mild", or the task's own
        draw where the reference is not finite on it). Unless the group is small, only the set last asked for
        is held. The float64 anchor of the set is `anchor_set(si)`."""
        if self.input_sets:  # c2cuda: stored (a timing configuration's expected outputs come from its baseline)
            return self.input_sets[si], (self.expected[si] if si < len(self.expected) else {})
        return self._made_set(si)[0]

    def anchor_set(self, si: int) -> dict:
        """{buffer index: (float64 reference output, allowance)} of check set `si` (fidelity.anchored); empty
        where the reference has no float64 twin or (c2cuda) the configuration is a timing one."""
        if self.input_sets:
            return self.anchors[si] if si < len(self.anchors) else {}
        return self._made_set(si)[1]

    def _made_set(self, si: int) -> tuple[tuple[dict, dict], dict]:
        """((inputs, expected outputs), anchors) of check set `si`, made on first use."""
        if si not in self._made:
            if not self.keep_sets:
                self._made.clear()
            try:
                fresh, outs, draw = self._draw(si)
                inputs = {self.buffers[j]: t for j, t in fresh.items()}
                outputs = [b for b in self.buffers if b not in inputs]  # after inputs and params come the outputs
                expected = {b: o.detach().clone().contiguous() for b, o in zip(outputs, outs)}
                anchors = self._anchors(fresh, outputs, expected)
                while len(self.draws) <= si:
                    self.draws.append("")
                self.draws[si] = draw
                self._made[si] = ((inputs, expected), anchors)
            except Exception as e:  # the trusted reference failed (or its memory ran out): never the candidate's fault
                raise TaskBroken(f"config {self.name}: making check set {si + 1} (the task's get_inputs and "
                                 f"reference) failed: {type(e).__name__}: {str(e)[:300]}") from e
        return self._made[si]

    def _anchors(self, fresh: dict, outputs: list[int], expected: dict) -> dict:
        """{output buffer: (float64 output, allowance)} from the float64 twin; empty where the twin cannot run
        (a module that makes float32 tensors of its own inside forward) or gives other shapes or types."""
        import torch
        if self.run_reference64 is None:
            return {}
        try:
            outs64, summed = run_measuring_sums(self.run_reference64, fresh)
        except Exception as e:  # noqa: BLE001 - the reference runs only in float32: the check keeps its tolerance
            self.anchor_note = f"no float64 anchor: the float64 twin failed ({type(e).__name__}: {str(e)[:120]})"
            return {}
        anchors = {}
        for b, o64 in zip(outputs, outs64):
            if o64.dtype == torch.float64 and expected[b].is_floating_point() and o64.numel() == expected[b].numel():
                anchors[b] = (o64.detach(), anchor_allowance(expected[b], o64, summed=summed))
        return anchors if len(anchors) == len(outputs) else {}

    def _draw(self, si: int) -> tuple[dict, list, str]:
        """(fresh set, reference outputs, which draw): set 1 adversarial where the reference runs and stays
        finite on it, else milder, else the task's own draw."""
        if si == 2:  # the wide draw: only where `stable_on_wide` found the reference stable on it
            fresh = self.fresh(self.seeds[si], "wide")
            return fresh, self.run_reference(self.reference_copy(fresh)), "wide"
        tried = si == 1 and self.adversarial
        found = self.finite_draw(self.seeds[si]) if tried else None
        if found is not None:
            return found
        fresh = self.fresh(self.seeds[si])
        return fresh, self.run_reference(self.reference_copy(fresh)), "task" if not tried else "task (the reference "\
            "fails or is not finite on adversarial draws)"

    def finite_draw(self, seed: int) -> tuple[dict, list, str] | None:
        """(fresh set, reference outputs, "adversarial" or "mild") under `seed`: the first of the two draws the
        reference runs on and stays finite on, or None (check set 1 and the timed rounds then take the task's own)."""
        import torch
        for kind in ("adversarial", "mild"):
            fresh = self.fresh(seed, kind)
            try:
                outs = self.run_reference(self.reference_copy(fresh))
            except Exception:  # noqa: BLE001 - values the reference refuses (an index, a domain): a milder draw
                continue
            if all(bool(torch.isfinite(o).all()) for o in outs if o.is_floating_point()):
                return fresh, outs, kind
        return None

    def reference_copy(self, fresh_set: dict) -> dict:
        """A fresh set whose inputs are copies, for the reference (or its compiled twin) to run on: a
        reference may write its inputs, and the originals are what the candidate gets and is checked
        against. Parameters are the reference's own and stay shared."""
        return {j: t.clone() if j < self.n_inputs else t for j, t in fresh_set.items()}

    def drop_sets(self) -> None:
        """Let go of check sets made on demand (kept ones stay)."""
        if not self.keep_sets:
            self._made.clear()

    def slot_calls(self, fmt: str, baseline: bool = False) -> list[dict]:
        """The child's call spec of every slot (one entry, slot 0, for configurations that are not timed);
        the trusted baseline's child gets its own slots after slot 0."""
        if fmt == ANCHOR_CALLS:  # the float64 baseline's child: its one slot, or slot 0 where it has none (never called)
            return [self.calls.get(ANCHOR_CALLS) or self.calls["c2cuda"]]
        slots = (self.slots[:1] + self.baseline_slots if baseline and self.baseline_slots else self.slots) \
            or [self.buffers]
        return [remap_call(self.calls[fmt], fmt, dict(zip(self.buffers, slot))) for slot in slots]


@dataclass
class GroupData:
    task: Task
    buffers: list[Buffer]
    configs: list[ConfigData]
    reference_label: str = ""
    baseline_child: object = None  # c2cuda: the child running the naive baseline for this group
    anchor_child: object = None  # c2cuda: the child running the naive baseline built in float64 (timed anchors)
    reference_calls: list = field(default_factory=list)  # torch2cuda: per config, runs the reference once
    compiled_calls: list = field(default_factory=list)  # torch2cuda: per config, the torch.compile'd reference or None
    anchor_note: str = ""  # c2cuda: why the check has no float64 anchor ("" when it has one or none was tried)
    arenas: list = field(default_factory=list)  # device pointers of the allocations (arena_layout), while held
    arena_handles: list = field(default_factory=list)  # their IPC handles
    arena_bytes: int = 0  # their sizes together


ANCHOR_CALLS = "c2cuda64"  # ConfigData.calls key of the float64 baseline's call (buffer_layout.add_anchor_slot)


def torch_dtype(name: str):
    """The torch dtype of a numpy-style dtype name (or 'bfloat16')."""
    import torch
    return torch.bfloat16 if name == "bfloat16" else getattr(torch, str(np.dtype(name)))


def remap_call(spec: dict, fmt: str, mapping: dict[int, int]) -> dict:
    """A child call spec with its buffer indices replaced (slot k of a timing configuration)."""
    if fmt == "c2cuda":
        return {"args": [["ptr", mapping[a[1]]] if a[0] == "ptr" else a for a in spec["args"]]}
    if fmt == "light":
        return dict(spec, inputs=[mapping[b] for b in spec["inputs"]], outputs=[mapping[b] for b in spec["outputs"]])
    return dict(spec, **{key: [dict(t, buf=mapping[t["buf"]]) if "buf" in t else t for t in spec[key]]
                         for key in ("inputs", "params", "outputs")})


def work_of(task: Task, params: dict) -> tuple[float, float]:
    """(flops, minimum bytes moved) of one configuration, from the task's work model at `params`."""
    return float(eval_expr(task.work.flops, params)), float(eval_expr(task.work.bytes, params))


def to_device(group: GroupData) -> None:
    """Move every input set and reference output to the GPU as torch tensors (done once per group)."""
    import torch
    for cd in group.configs:
        for table in cd.input_sets + cd.expected:
            for b, v in table.items():
                if isinstance(v, np.ndarray):
                    table[b] = torch.from_numpy(np.ascontiguousarray(v)).reshape(group.buffers[b].shape).cuda()
        for table in cd.anchors:
            for b, (v, allowance) in table.items():
                if isinstance(v, np.ndarray):
                    table[b] = (torch.from_numpy(np.ascontiguousarray(v)).reshape(group.buffers[b].shape).cuda(), allowance)


def reference_inputs_of(cd: ConfigData, inputs: dict) -> dict:
    """A check set's inputs ({buffer index: tensor}) in the form `ConfigData.fresh` gives (position: tensor)."""
    return {j: inputs[b] for j, b in enumerate(cd.buffers) if b in inputs}
