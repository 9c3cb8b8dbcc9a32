"""The trusted side of a group: inputs, reference outputs and device buffers, made once per task.

In: a Task, a seed the candidates cannot know, the Driver of this GPU, the Compiler.
Out: a `GroupData` with, for each input configuration, two fresh input sets (the candidate runs
on both, in the same buffers), the reference outputs for each, the device buffers the child maps
over IPC, the call layout per candidate format; for timing configurations, slots (sets of buffers,
one per timed call of a batch) and a maker of fresh inputs on the GPU (`ConfigData.fresh`).
- c2cuda: the C reference (gcc) gives outputs of the check configurations; the task's naive CUDA
  implementation, run in a child like any candidate and first verified against the C reference,
  gives outputs at timing sizes and the baseline times.
- torch2cuda: the PyTorch reference runs here, in the trusted process, with TF32 off.
"""
from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pipeline.evaluation import light_abi
from pipeline.evaluation.checks.fused_check import RoundCheck  # the one implementation of the criterion
from pipeline.evaluation.checks.fidelity import (adversarial_like, adversarial_uniform, adversarial_uniform_torch,
                                                 anchor_allowance, as_float64, float64_twin, redraw_constant_state,
                                                 run_measuring_sums, serial_tolerance, wide_like, WIDE_MARGIN)
from pipeline.evaluation.checks.numerics import set_full_float32
from pipeline.core.records import Task, Tolerance
from pipeline.tasks import arg_dtype, config_params, eval_expr, is_pointer, parse_init

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


_FLOAT_OF_WIDTH = {4: "float32", 8: "float64"}  # records(...): a uniform field in a 4- or 8-byte element
_DRAWS = "use uniform(lo,hi), randint(lo,hi), records(...) or graph(n, p)"


def _fill(rng: np.random.Generator, dtype: str, n: int, init: tuple) -> np.ndarray:
    """`n` elements of `dtype` drawn as `init` (parse_init's, evaluated) says, on the host."""
    kind = init[0]
    if kind == "records":
        return _records(rng, dtype, n, init[1], init[2])
    if kind == "graph":
        upper = np.triu(rng.random((init[1], init[1])) < init[2], 1)
        return (upper | upper.T).astype(dtype).reshape(-1)
    _, lo, hi = init
    if kind == "randint":
        return rng.integers(lo, hi, size=n).astype(dtype)
    if kind == "uniform":
        return rng.uniform(lo, hi, size=n).astype(dtype)
    raise ValueError(f"pointer argument initialised with {kind!r}: {_DRAWS}")


def _records(rng: np.random.Generator, dtype: str, n: int, fields: tuple, sort_keys: int) -> np.ndarray:
    """n // len(fields) records of one element per field, interleaved as an array of structs lays them out;
    a uniform field's floats are stored bit for bit in the element; sorted by the first `sort_keys` fields."""
    dt = np.dtype(dtype)
    rows = n // len(fields)
    cols = [rng.integers(lo, hi, size=rows).astype(dt) if kind == "randint"
            else rng.uniform(lo, hi, size=rows).astype(_FLOAT_OF_WIDTH[dt.itemsize]).view(dt)
            for kind, lo, hi in fields]
    if sort_keys:  # np.lexsort's last key is the most significant
        order = np.lexsort(tuple(cols[j] for j in reversed(range(sort_keys))))
        cols = [c[order] for c in cols]
    return np.stack(cols, axis=1).reshape(-1)


def draw_on_device(gen, dtype: str, n: int, init: tuple, device: str = "cuda"):
    """As `_fill`, but a torch tensor made on `device` with the torch generator `gen`."""
    import torch
    kind = init[0]
    if kind == "uniform":
        return torch.empty(n, dtype=torch_dtype(dtype), device=device).uniform_(init[1], init[2], generator=gen)
    if kind == "randint":
        return torch.randint(int(init[1]), int(init[2]), (n,), generator=gen, device=device).to(torch_dtype(dtype))
    if kind == "graph":
        upper = torch.triu(torch.rand((init[1], init[1]), generator=gen, device=device) < init[2], 1)
        return (upper | upper.T).to(torch_dtype(dtype)).reshape(-1)
    if kind != "records":
        raise ValueError(f"pointer argument initialised with {kind!r}: {_DRAWS}")
    fields, sort_keys = init[1], init[2]
    width = np.dtype(dtype).itemsize
    ints, floats = {4: (torch.int32, torch.float32), 8: (torch.int64, torch.float64)}[width]
    rows = n // len(fields)
    cols = [torch.randint(int(lo), int(hi), (rows,), generator=gen, device=device).to(ints) if kind == "randint"
            else torch.empty(rows, dtype=floats, device=device).uniform_(lo, hi, generator=gen).view(ints)
            for kind, lo, hi in fields]
    if sort_keys:  # stable sorts from the least significant key to the most
        order = torch.arange(rows, device=device)
        for j in reversed(range(sort_keys)):
            order = order[torch.sort(cols[j][order], stable=True).indices]
        cols = [c[order] for c in cols]
    return torch.stack(cols, dim=1).reshape(-1).view(torch_dtype(dtype))


def _work(task: Task, params: dict) -> tuple[float, float]:
    return float(eval_expr(task.work.flops, params)), float(eval_expr(task.work.bytes, params))


# --- c2cuda ------------------------------------------------------------------------------------
def build_c2cuda(task: Task, seed: int, fidelity: bool = True) -> GroupData:
    """Buffers and inputs for a c2cuda task; outputs of check configs from the C reference are
    filled by `run_c_reference`, those of timing configs by the baseline (see evaluator). With `fidelity`,
    the second input set of every check configuration is adversarial where an input is declared uniform(lo, hi)
    (fidelity.adversarial_uniform; other draws, indices and records, stay the task's own), and timing
    configurations draw their timed calls the same way (`timed_draw`)."""
    rng = np.random.default_rng(seed)
    buffers: list[Buffer] = []
    configs: list[ConfigData] = []
    for cfg in task.configs:
        params = config_params(task, cfg)
        idx, sets, call_args = [], [{}, {}], []
        adversarial = fidelity and cfg.check
        for arg in task.args:
            if not is_pointer(arg):
                _, value = parse_init(arg.init, params)
                call_args.append(["scalar", _scalar_ctype(arg.ctype), value])
                continue
            n = int(eval_expr(arg.size, params))
            buffers.append(Buffer(f"{cfg.name}.{arg.name}", arg_dtype(arg), (n,), arg.role))
            b = len(buffers) - 1
            idx.append(b)
            call_args.append(["ptr", b])
            if arg.role in ("in", "inout"):
                init = parse_init(arg.init, params)
                for s in sets:
                    s[b] = _fill(rng, arg_dtype(arg), n, init)
                if adversarial and init[0] == "uniform" and np.dtype(arg_dtype(arg)).kind == "f":
                    sets[1][b] = adversarial_uniform(rng, n, init[1], init[2]).astype(arg_dtype(arg))
        flops, nbytes = _work(task, params)
        cd = ConfigData(cfg.name, cfg.check, cfg.time, params, idx, sets,
                        calls={"c2cuda": {"args": call_args}}, flops=flops, min_bytes=nbytes, adversarial=adversarial)
        if cfg.time:
            cd.fresh = _c2cuda_fresh(task, params, [buffers[b] for b in idx])
            cd.timed_draw = "adversarial" if fidelity and _has_uniform_float(task, params) else "task"
        configs.append(cd)
    return GroupData(task, buffers, configs, reference_label="naive CUDA baseline")


def _has_uniform_float(task: Task, params: dict) -> bool:
    """Whether an input of the task is a float buffer declared uniform(lo, hi): what the adversarial draw changes."""
    return any(is_pointer(a) and a.role in ("in", "inout") and np.dtype(arg_dtype(a)).kind == "f"
               and parse_init(a.init, params)[0] == "uniform" for a in task.args)


def _c2cuda_fresh(task: Task, params: dict, bufs: list[Buffer], device: str = "cuda"):
    """fresh(seed, draw="task"): inputs made on `device` from the task's own initialisers (uniform, randint,
    records), seeded; with draw "adversarial", float inputs declared uniform(lo, hi) get the adversarial draw
    within [lo, hi) (fidelity.adversarial_uniform_torch), as check set 1 does; the other inputs stay as drawn."""
    inits = {}
    pointer_args = [a for a in task.args if is_pointer(a)]
    for j, (arg, buf) in enumerate(zip(pointer_args, bufs)):
        if arg.role in ("in", "inout"):
            inits[j] = (buf, parse_init(arg.init, params))

    def fresh(seed: int, draw: str = "task") -> dict:
        import torch
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
        host = np.random.default_rng([seed, 0xADE])  # the adversarial draw's secret scalars, with no device sync
        out = {}
        for j, (buf, init) in inits.items():
            n = int(np.prod(buf.shape))
            if draw != "task" and init[0] == "uniform" and np.dtype(buf.dtype).kind == "f":
                out[j] = adversarial_uniform_torch(gen, n, float(init[1]), float(init[2]), torch_dtype(buf.dtype),
                                                   device, host).reshape(buf.shape)
            else:
                out[j] = draw_on_device(gen, buf.dtype, n, init, device).reshape(buf.shape)
        return out
    return fresh


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


def add_timing_slots(group: GroupData, memory_bytes: int, max_slots: int) -> None:
    """Give every timing configuration up to `max_slots` sets of its buffers (slot 0 is the checked set).
    Each timed call of a batch gets a slot of its own, so the trusted side can check every one of them.
    A slot costs about twice its bytes (the slot and the trusted copy of its inputs and expected outputs),
    so `memory_bytes` bounds the slots of one configuration; there is always at least one. c2cuda
    baselines run in a child of their own: they get slots of their own (slot 1.. of the baseline's
    list), never mapped into a candidate's process, so no candidate can read the expected outputs."""
    for cd in group.configs:
        if not cd.time or cd.slots:
            continue
        own = group.task.kind == "c2cuda"
        set_bytes = sum(group.buffers[b].nbytes for b in cd.buffers) * (2 if own else 1)
        n = max(1, min(max_slots, memory_bytes // max(2 * set_bytes, 1)))
        cd.slots = [list(cd.buffers)] + [_new_slot(group, cd, f"#{k}", False) for k in range(1, n)]
        if own:
            cd.baseline_slots = [_new_slot(group, cd, f"#b{k}", True) for k in range(n)]


ANCHOR_CALLS = "c2cuda64"  # ConfigData.calls key of the float64 baseline's call (add_anchor_slot)


def add_anchor_slot(group: GroupData) -> None:
    """c2cuda: give every timing configuration a set of buffers of its own for the naive baseline built in float64
    (fidelity.C_FLOAT64_PRELUDE): float32 buffers become float64 ones, never mapped into a candidate's process, and
    the call passes float scalars as double. One call on it, on a timed call's inputs cast to float64, gives that
    call's float64 anchor (the evaluator's `timed_anchor`)."""
    for cd in group.configs:
        if not cd.time or cd.anchor_slot:
            continue
        for b in cd.buffers:
            src = group.buffers[b]
            dtype = "float64" if src.dtype == "float32" else src.dtype
            group.buffers.append(Buffer(f"{src.name}#f64", dtype, src.shape, src.role, baseline_only=True))
            cd.anchor_slot.append(len(group.buffers) - 1)
        mapping = dict(zip(cd.buffers, cd.anchor_slot))
        cd.calls[ANCHOR_CALLS] = {"args": [["ptr", mapping[a[1]]] if a[0] == "ptr" else
                                           ["scalar", "double" if a[1] == "float" else a[1], a[2]]
                                           for a in cd.calls["c2cuda"]["args"]]}


def _new_slot(group: GroupData, cd: ConfigData, tag: str, baseline_only: bool) -> list[int]:
    slot = []
    for b in cd.buffers:
        src = group.buffers[b]
        group.buffers.append(Buffer(f"{src.name}{tag}", src.dtype, src.shape, src.role, baseline_only))
        slot.append(len(group.buffers) - 1)
    return slot


ARENA_ALIGN = 512  # bytes: every buffer starts at a multiple (vector loads of any width stay aligned)


def arena_layout(group: GroupData) -> list[int]:
    """Place every buffer in one of two device allocations and return their sizes: arena 0, which the
    candidate's process maps, and arena 1, the c2cuda baseline's own slots, which it never maps.
    Parameters come first and keep their place for the group's life; the buffers of each configuration
    (its slots included) start at the same offset after them, because configurations are worked through
    one at a time (stage, call, check; then the next), so a group needs the device memory of its
    largest configuration, not of all of them."""
    owner = {}
    for ci, cd in enumerate(group.configs):
        for b in list(cd.buffers) + [b for s in cd.slots + cd.baseline_slots + [cd.anchor_slot] for b in s]:
            owner.setdefault(b, ci)

    def aligned(n: int) -> int:
        return -(-n // ARENA_ALIGN) * ARENA_ALIGN
    persistent = {b for cd in group.configs for b in cd.buffers if group.buffers[b].role == "param"}
    sizes = [0, 0]
    for b in sorted(persistent):  # the persistent region: parameters of the checked set of each configuration
        buf = group.buffers[b]
        buf.arena, buf.offset = 0, sizes[0]
        sizes[0] += aligned(buf.nbytes)
    start, ends = list(sizes), list(sizes)
    for ci in range(len(group.configs)):
        at = list(start)
        for b, buf in enumerate(group.buffers):
            if b in persistent or owner.get(b, 0) != ci:
                continue
            buf.arena = 1 if buf.baseline_only else 0
            buf.offset = at[buf.arena]
            at[buf.arena] += aligned(buf.nbytes)
        ends = [max(e, a) for e, a in zip(ends, at)]
    return ends


def adopt_baseline_outputs(group: GroupData, stage_inputs: Callable,
                           call: Callable[[int, ConfigData], None]) -> None:
    """c2cuda: run the naive CUDA baseline on every configuration, twice with the two input sets
    (`stage_inputs(group, cd, set_index)` writes them, `call(ci, cd)` runs the baseline and raises
    TaskBroken when it fails). On timing configurations, too large for the C reference, its outputs
    become the expected outputs; elsewhere they must match the C reference's, or the task is broken."""
    task = group.task
    for ci, cd in enumerate(group.configs):
        got = []
        for si in range(2):
            stage_inputs(group, cd, si)
            call(ci, cd)
            got.append({b: group.buffers[b].view.clone() for b in cd.buffers
                        if group.buffers[b].role in ("out", "inout")})
        if cd.time:
            cd.expected = got
            continue
        for si in range(2):
            for b, ref_out in cd.expected[si].items():
                ok, _, why = compare(got[si][b], ref_out, task.tolerance)
                if not ok:
                    raise TaskBroken(f"task {task.id}: the naive baseline disagrees with the C reference "
                                     f"on {cd.name}: {why}")


def _scalar_ctype(ctype: str) -> str:
    return " ".join(w for w in ctype.split() if w != "const")


_NP_CTYPES = {"float32": ctypes.c_float, "float64": ctypes.c_double, "int32": ctypes.c_int32,
              "uint32": ctypes.c_uint32, "int64": ctypes.c_int64, "uint64": ctypes.c_uint64,
              "uint8": ctypes.c_uint8}


def _c_function(task: Task, library_path: str):
    fn = getattr(ctypes.CDLL(library_path), task.function)
    fn.restype = None
    return fn


def _c_call(group: GroupData, cd: ConfigData, inputs: dict, float_as: str | None = None) -> tuple[dict, list]:
    """Host copies of one input set (outputs zeroed) and the ctypes arguments of one C call on them; float32
    buffers and scalars passed as `float_as` ("float64" for the float64 anchor, "float16" for a mutant)."""
    host, args = {}, []
    for (kind, *rest), arg in zip(cd.calls["c2cuda"]["args"], group.task.args):
        dt = arg_dtype(arg)
        dt = float_as if float_as and dt == "float32" else dt
        if kind == "scalar":
            args.append(ctypes.c_uint16(np.float16(rest[1]).view(np.uint16)) if dt == "float16"
                        else _NP_CTYPES[dt](rest[1]))
            continue
        b = rest[0]
        host[b] = inputs[b].astype(dt) if b in inputs else np.zeros(group.buffers[b].shape, dt)
        args.append(ctypes.c_void_p(host[b].ctypes.data))
    return host, args


def run_c(group: GroupData, cd: ConfigData, fn, inputs: dict, float_as: str | None = None) -> dict:
    """{output buffer: numpy array} of one call of the C function `fn` on `inputs` (buffer -> numpy), as
    `_c_call` lays it out."""
    host, args = _c_call(group, cd, inputs, float_as)
    fn(*args)
    return {b: host[b] for b in cd.buffers if group.buffers[b].role in ("out", "inout")}


def run_c_reference(group: GroupData, library_path: str) -> None:
    """Outputs of every check configuration that is not a timing one, from the C reference."""
    fn = _c_function(group.task, library_path)
    for cd in group.configs:
        if cd.time:
            continue
        cd.expected = []
        for inputs in cd.input_sets:
            host, args = _c_call(group, cd, inputs)
            fn(*args)
            cd.expected.append({b: host[b] for b in cd.buffers if group.buffers[b].role in ("out", "inout")})


def can_anchor_c(task: Task) -> bool:
    """A C reference can run in float64 (fidelity.C_FLOAT64_PRELUDE) when its floating data are float32 buffers
    and scalars drawn or given as numbers (no records holding floats bit for bit)."""
    for arg in task.args:
        if arg_dtype(arg) == "float64" or (is_pointer(arg) and arg.init.strip().startswith(("records", "graph"))):
            return False
    return any(arg_dtype(a) == "float32" for a in task.args if is_pointer(a) and a.role in ("out", "inout"))


def run_c_reference64(group: GroupData, library_path: str) -> str:
    """Float64 anchors of every check configuration that is not a timing one (ConfigData.anchors), from the C
    reference built with fidelity.C_FLOAT64_PRELUDE; the float32 reference (`run_c_reference`) must have run.
    Returns why there is no anchor ("" when there is): a float64 result that disagrees with the float32 one
    beyond the task's tolerance means the reference relies on float32 itself (bit tricks), so it gets none."""
    fn = _c_function(group.task, library_path)
    for cd in group.configs:
        if cd.time:
            continue
        cd.anchors = []
        for si, inputs in enumerate(cd.input_sets):
            host = run_c(group, cd, fn, inputs, "float64")
            anchors = {}
            for b, r32 in cd.expected[si].items():
                if r32.dtype != np.float32:
                    continue
                import torch
                t32, t64 = torch.from_numpy(r32), torch.from_numpy(host[b])
                ok, _, why = compare(t32, t64, group.task.tolerance)
                if not ok:
                    for c in group.configs:
                        c.anchors = []
                    return f"the C reference in float64 disagrees with itself in float32 on {cd.name} ({why})"
                anchors[b] = (host[b], anchor_allowance(t32, t64, [torch.from_numpy(v) for v in inputs.values()]))
            cd.anchors.append(anchors)
    return ""


def time_c_reference(group: GroupData, library_path: str, config: str, trials: int = 5) -> float:
    """Seconds of one call of the C reference on configuration `config` (the mean of `trials`, each on a
    fresh copy of the first input set, as ParEval's driver times its serial baseline): the serial time
    ParEval's speedups are against."""
    import statistics
    import time
    fn = _c_function(group.task, library_path)
    cd = next(c for c in group.configs if c.name == config)
    times = []
    for _ in range(trials):
        _, args = _c_call(group, cd, cd.input_sets[0])
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.mean(times)


# --- torch2cuda ----------------------------------------------------------------------------------
TORCH_DTYPES = {"torch.float32": "float32", "torch.float64": "float64", "torch.float16": "float16",
                "torch.int32": "int32", "torch.int64": "int64", "torch.uint8": "uint8", "torch.bool": "bool",
                "torch.int8": "int8", "torch.int16": "int16", "torch.bfloat16": "bfloat16"}


def load_reference_module(task: Task, params: dict) -> dict:
    """Execute the (trusted) reference module with the config's globals set."""
    namespace: dict = {"__name__": f"reference_{task.id.replace('/', '_')}"}
    exec(compile(task.reference, task.source_path or "reference.py", "exec"), namespace)
    namespace.update({k: v for k, v in params.items() if k in namespace})
    return namespace


DEVICE = "cuda"  # where the trusted side's torch2cuda data live (tests of the layout run it on "cpu")
KEEP_SETS_BYTES = 2 << 30  # torch2cuda check sets kept for the group's life up to this size; larger ones are
# made again from their seeds whenever they are needed, one at a time (ConfigData.check_set)


def build_torch2cuda(task: Task, seed: int, init_seed: int, compiled: bool = False,
                     keep_sets_bytes: int = KEEP_SETS_BYTES, fidelity: bool = True) -> GroupData:
    """The group of a torch2cuda task. The reference runs once per configuration to learn the output
    layout; the two check sets of each configuration (inputs from the task's get_inputs() under a
    secret seed, made on the device, and the reference's outputs) are made on demand by
    `ConfigData.check_set`, and kept only while the whole group's sets stay under `keep_sets_bytes`.
    With `compiled`, each configuration's reference is also built under torch.compile (None where it
    does not build). The module's constant state (weights of ones, biases of zeros) is redrawn from the
    secret `init_seed` (fidelity.redraw_constant_state), check set 1 is adversarial, and a float64 twin of the
    module gives every check set's float64 anchor (ConfigData.anchor_set); `fidelity=False` leaves all three out
    (version 13's check, which the mutation campaign measures against)."""
    import torch
    set_full_float32(torch)
    buffers: list[Buffer] = []
    configs: list[ConfigData] = []
    calls_of, compiled_of = [], []
    for ci, cfg in enumerate(task.configs):
        params = config_params(task, cfg)
        ns = load_reference_module(task, params)
        init_inputs = list(ns["get_init_inputs"]())
        torch.manual_seed(init_seed)
        model = ns["Model"](*init_inputs).to(DEVICE).eval()
        if fidelity:
            redraw_constant_state(model, torch.Generator().manual_seed(init_seed), tuple(task.fixed_state))
        twin = float64_twin(model) if fidelity else None
        state = [(name, p.detach().contiguous()) for name, p in model.state_dict().items()]
        seeds = [seed * 1000 + ci * 10 + si for si in range(3)]
        torch.manual_seed(seeds[0])
        with torch.device(DEVICE):
            raw = list(ns["get_inputs"]())
        args = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in raw]
        with torch.no_grad():
            out, summed = run_measuring_sums(model, *args) if fidelity else (model(*args), 0)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        in_specs, idx = [], []
        for k, x in enumerate(raw):
            if isinstance(x, torch.Tensor):
                buffers.append(Buffer(f"{cfg.name}.input{k}", TORCH_DTYPES[str(x.dtype)], tuple(x.shape), "in"))
                idx.append(len(buffers) - 1)
                in_specs.append({"buf": len(buffers) - 1})
            else:
                in_specs.append({"value": x})
        n_inputs = len(idx)
        param_idx = []
        for name, p in state:
            buffers.append(Buffer(f"{cfg.name}.{name}", TORCH_DTYPES[str(p.dtype)], tuple(p.shape), "param"))
            param_idx.append(len(buffers) - 1)
        out_idx = []
        for k, o in enumerate(outs):
            buffers.append(Buffer(f"{cfg.name}.output{k}", TORCH_DTYPES[str(o.dtype)], tuple(o.shape), "out"))
            out_idx.append(len(buffers) - 1)
        idx += param_idx + out_idx
        del raw, out, outs
        comp = _compiled_module(model, args) if compiled else None
        del args
        flops, nbytes = _work(task, params)
        if not (flops or nbytes):  # no work model (KernelBench problems): the floor is moving inputs and outputs once
            nbytes = float(sum(buffers[b].nbytes for b in idx if buffers[b].role in ("in", "out")))
        calls = {"kernelbench": {
            "inputs": [dict(s, **_meta(buffers[s["buf"]])) if "buf" in s else s for s in in_specs],
            "params": [dict(name=n, buf=b, **_meta(buffers[b])) for (n, _), b in zip(state, param_idx)],
            "outputs": [dict(buf=b, **_meta(buffers[b])) for b in out_idx],
            "init_inputs": init_inputs, "init_seed": init_seed}}
        if all("buf" in s for s in in_specs):
            tensors = [s["buf"] for s in in_specs] + param_idx
            calls["light"] = {"inputs": tensors, "outputs": out_idx,
                              "sizes": light_abi.pack_sizes([buffers[b].shape for b in tensors + out_idx])}
        cd = ConfigData(cfg.name, cfg.check, cfg.time, params, idx, [], [], calls, flops, nbytes)
        cd.fresh, cd.run_reference = _torch_fresh(ns, model, in_specs, n_inputs, [p for _, p in state])
        if twin is not None:
            cd.run_reference64 = _torch_fresh(None, twin, in_specs, n_inputs, [], float64=True)[1]
        cd.seeds, cd.n_inputs, cd.param_values = seeds, n_inputs, dict(zip(param_idx, (p for _, p in state)))
        cd.adversarial, cd.module, cd.module64, cd.summed = fidelity, model, twin, summed
        if comp is not None:
            cd.run_compiled = _torch_fresh(None, comp, cd.calls["kernelbench"]["inputs"], 0, [])[1]
        cd.anchor_works = twin is not None and twin_runs(cd, seeds[0], [buffers[b] for b in out_idx])
        if cfg.check and cd.anchor_works:
            cd.wide = stable_on_wide(cd, task.tolerance, seeds[2] ^ 0x1D3)
        if cfg.time and fidelity:
            found = cd.finite_draw(seeds[0] ^ 0x71ED)
            cd.timed_draw = found[2] if found else "task"
            del found
            cd.timed_anchor = twin_anchor(cd) if cd.anchor_works else None
            cd.timed_anchor_note = "" if cd.anchor_works else "the float64 twin of the reference module does not run"
        configs.append(cd)
        calls_of.append((cd.fresh, cd.run_reference, seeds[0]))
        compiled_of.append(comp)
    set_bytes = sum(2 * buffers[b].nbytes for cd in configs for b in cd.buffers if buffers[b].role != "param")
    for cd in configs:
        cd.keep_sets = set_bytes <= keep_sets_bytes
    if DEVICE == "cuda":
        torch.cuda.empty_cache()  # the layout runs' memory goes back before the buffers are allocated
    return GroupData(task, buffers, configs, reference_label="PyTorch eager",
                     reference_calls=[_reference_call(*c) for c in calls_of],
                     compiled_calls=compiled_of if compiled else [])


def stable_on_wide(cd: ConfigData, tol: Tolerance, seed: int) -> bool:
    """Whether the reference is stable on the wide draw (fidelity.wide_like): its float32 outputs finite and within
    a WIDE_MARGIN-th of the task's tolerance of its float64 twin's (room for honest kernels that round otherwise).
    Then the task asks for stability over that range (a softmax, a log-sum-exp), and a kernel that loses it (an
    exponential without its max shift) must fail."""
    import torch
    margin = tol.model_copy(update={k: getattr(tol, k) / WIDE_MARGIN for k in ("rtol", "atol", "atol_abs", "rel_l2")})
    try:
        fresh = cd.fresh(seed, "wide")
        outs = cd.run_reference(cd.reference_copy(fresh))
        outs64 = cd.run_reference64(cd.reference_copy(fresh))
    except Exception:  # noqa: BLE001 - the reference refuses such values: no wide set
        return False
    for o, o64 in zip(outs, outs64):
        if not o.is_floating_point() or o.numel() != o64.numel():
            return False
        if not bool(torch.isfinite(o).all()) or not bool(torch.isfinite(o64).all()):
            return False
        if not compare(o.reshape(-1), o64.reshape(-1).to(o.dtype), margin)[0]:
            return False
    return True


def twin_runs(cd: ConfigData, seed: int, outputs: list[Buffer]) -> bool:
    """Whether the float64 twin runs on the configuration's own draw and gives a float64 output of the size of each
    floating output of the reference (`outputs`, the buffers its layout run made; a module that makes float32
    tensors of its own in forward does not)."""
    import torch
    try:
        outs64 = cd.run_reference64(cd.reference_copy(cd.fresh(seed)))
    except Exception:  # noqa: BLE001 - no anchor: the task's tolerance alone judges this configuration
        return False
    floating = [(b, o64) for b, o64 in zip(outputs, outs64) if torch_dtype(b.dtype).is_floating_point]
    return len(outs64) == len(outputs) and all(o64.dtype == torch.float64 and o64.numel() == int(np.prod(b.shape))
                                               for b, o64 in floating)


def twin_anchor(cd: ConfigData):
    """`ConfigData.timed_anchor` from the float64 twin: (fresh set, {position: expected output}) -> {position:
    (float64 output, allowance)}, empty where the twin fails or gives other shapes or types."""
    def anchor(fresh_set: dict, expected: dict) -> dict:
        import torch
        try:
            outs64, summed = run_measuring_sums(cd.run_reference64, cd.reference_copy(fresh_set))
        except Exception as e:  # noqa: BLE001 - the twin cannot run on these inputs: the task's tolerance alone
            cd.anchor_works = False  # judges from here on, unwidened
            cd.timed_anchor_note = f"the float64 twin failed on a timed call ({type(e).__name__})"
            return {}
        anchors = {}
        for j, o64 in zip(sorted(expected), outs64):
            want = expected[j]
            if o64.dtype == torch.float64 and want.is_floating_point() and o64.numel() == want.numel():
                anchors[j] = (o64.detach(), anchor_allowance(want.reshape(o64.shape), o64, summed=summed))
        return anchors
    return anchor


def _reference_call(fresh, run, seed: int):
    """A call of the reference on one fixed input set, made on its first call (dataset measurement)."""
    held: list = []

    def call():
        if not held:
            held.append(fresh(seed))
        run(held[0])
    return call


def _torch_fresh(ns: dict | None, model, in_specs: list[dict], n_inputs: int, params: list, float64: bool = False):
    """(fresh, run): `fresh(seed, draw="task")` runs the task's get_inputs() on the device under that seed and
    returns {position: tensor} for the input buffers (positions 0..n_inputs-1) and the parameters (after them);
    with draw "adversarial" or "mild", each input is replaced by its adversarial twin (fidelity.adversarial_like,
    seeded from `seed`). `run(fresh_set)` calls the reference on such a set and returns its outputs (`float64`:
    the float64 twin's, on the inputs cast to float64)."""
    import torch

    def fresh(seed: int, draw: str = "task") -> dict:
        torch.manual_seed(seed)
        with torch.device(DEVICE):
            raw = list(ns["get_inputs"]())
        tensors = [x.contiguous().to(DEVICE) for x in raw if isinstance(x, torch.Tensor)]
        if draw != "task":
            gen = torch.Generator(device=DEVICE)
            gen.manual_seed(seed ^ 0x5AD5EED)
            tensors = [wide_like(x, gen) if draw == "wide" else adversarial_like(x, gen, mild=draw == "mild")
                       for x in tensors]
        out = dict(enumerate(tensors))
        out.update({n_inputs + k: p for k, p in enumerate(params)})
        return out

    def run(fresh_set: dict) -> list:
        args, j = [], 0
        for spec in in_specs:
            if "buf" in spec:
                args.append(fresh_set[j])
                j += 1
            else:
                args.append(spec["value"])
        if float64:
            args = as_float64(args)
        with torch.no_grad():
            out = model(*args)
        return list(out) if isinstance(out, (tuple, list)) else [out]
    return fresh, run


def _compiled_module(model, args):
    """`model` under torch.compile, built by one run on `args`; None where it does not build."""
    import torch
    try:
        compiled = torch.compile(model)
        with torch.no_grad():
            compiled(*args)
        if DEVICE == "cuda":
            torch.cuda.synchronize()
    except Exception:  # any failure of torch.compile on this reference: it then has no compiled baseline
        return None
    return compiled


def _meta(buf: Buffer) -> dict:
    return {"shape": list(buf.shape), "dtype": buf.dtype}


# --- checking --------------------------------------------------------------------------------------
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


def rounding_floor(tol: Tolerance, inputs) -> float:
    """For `compare`: the rms below which a float32 reference is rounding noise of a computation on `inputs`
    (ROUNDING_FLOOR times the largest rms of a floating input): a mean of a normalised output is about 1e-10,
    and two correct answers round it differently. 0 when `tol` has no rel_l2 (nothing to compute)."""
    check = RoundCheck(tol)
    check.floor_of(inputs)
    check.read()
    return check.floor


def compare(out, ref, tol: Tolerance, floor: float = 0.0) -> tuple[bool, float, str]:
    """(passed, max normalised error, reason) for torch tensors on one device, at the task's tolerance:
    error per element is |out-ref| / (rtol*|ref| + atol*rms(ref) + atol_abs), rms over the reference's finite
    elements; where the reference itself is Inf or NaN the output must be the same (Inf of the same sign, or
    NaN), and elsewhere NaN or Inf never pass. With `tol.rel_l2` the output as a whole must also be within
    that fraction of the reference's norm, so that an absolute allowance cannot pass tiny outputs (a long
    softmax row) as zeros; not where the reference's rms is at most `floor` (`rounding_floor`): there it is
    rounding noise, and only the elementwise allowance applies, as in KernelBench's harness. Works through the tensors in chunks of COMPARE_CHUNK elements, so its
    temporaries stay small beside tensors of many GiB."""
    check = RoundCheck(tol, floor)
    check.output(0, out, ref)
    check.read()
    return check.verdict(0)


def reference_inputs_of(cd: ConfigData, inputs: dict) -> dict:
    """A check set's inputs ({buffer index: tensor}) in the form `ConfigData.fresh` gives (position: tensor)."""
    return {j: inputs[b] for j, b in enumerate(cd.buffers) if b in inputs}


def check_outputs(group: GroupData, cd: ConfigData, si: int, now: dict) -> tuple[bool, float, str, bool]:
    """(passed, max error, reason, inputs_modified) of check set `si` of configuration `cd`, where `now` maps each
    of the configuration's buffer indices to its tensor after the call: inputs and parameters unchanged, each
    output within the task's tolerance of the reference (`compare`), and, where the set has a float64 anchor,
    within what honest float32 arithmetic gets of the float64 reference (fidelity.anchored). The evaluator checks
    a candidate's buffers with it; the mutation campaign (benchmarks/mutation.py) checks mutants' outputs."""
    import torch
    from pipeline.evaluation.checks.fidelity import anchored
    inputs, expected = cd.check_set(si)
    tol = cd.tolerance(group.task.tolerance) if cd.anchor_set(si) else group.task.tolerance  # widened under the anchor
    for b, before in inputs.items():
        if group.buffers[b].role in ("in", "param"):
            if not torch.equal(now[b], before.reshape(now[b].shape)):
                return False, math.inf, f"modified its input '{group.buffers[b].name}'", True
    worst = 0.0
    floor = rounding_floor(tol, inputs.values())
    for b, ref_out in expected.items():
        out = now[b]
        ok, err, why = compare(out, ref_out.reshape(out.shape), tol, floor)
        worst = max(worst, err)
        if not ok:
            return False, err, f"output '{group.buffers[b].name.split('.', 1)[1]}': {why}", False
    for b, (ref64, allowance) in cd.anchor_set(si).items():
        ok, why = anchored(now[b], ref64.reshape(now[b].shape), allowance, floor)
        if not ok:
            return False, math.inf, f"output '{group.buffers[b].name.split('.', 1)[1]}': {why}", False
    return True, worst, "", False


# --- device memory ---------------------------------------------------------------------------------
@dataclass
class ConfigBytes:
    """Device bytes of one configuration's data: inputs, outputs, parameters (torch2cuda)."""
    name: str
    inputs: int
    outputs: int
    params: int = 0
    time: bool = False
    stored: bool = False  # c2cuda: its input sets and expected outputs stay on the device


def config_bytes(task: Task) -> list[ConfigBytes]:
    """The sizes of every configuration's data, without allocating it: from the argument sizes (c2cuda),
    or from the reference run on torch's meta device (torch2cuda; where an operator has no meta version,
    the outputs are taken as large as the inputs)."""
    out = []
    for cfg in task.configs:
        params = config_params(task, cfg)
        if task.kind == "c2cuda":
            ins = outs = 0
            for arg in task.args:
                if is_pointer(arg):
                    n = int(eval_expr(arg.size, params)) * np.dtype(arg_dtype(arg)).itemsize
                    ins += n if arg.role in ("in", "inout") else 0
                    outs += n if arg.role in ("out", "inout") else 0
            out.append(ConfigBytes(cfg.name, ins, outs, 0, cfg.time, stored=True))
        else:
            out.append(_torch_config_bytes(task, cfg, params))
    return out


def _torch_config_bytes(task: Task, cfg, params: dict) -> ConfigBytes:
    import torch

    def nbytes(values) -> int:
        return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))
    ns = load_reference_module(task, params)
    with torch.device("meta"):
        model = ns["Model"](*list(ns["get_init_inputs"]()))
        inputs = list(ns["get_inputs"]())
        param_bytes = nbytes(model.state_dict().values())
        try:
            with torch.no_grad():
                result = model(*inputs)
            outs = nbytes(result if isinstance(result, (tuple, list)) else [result])
        except Exception:  # no meta version of some operator: assume outputs as large as the inputs
            outs = nbytes(inputs)
    return ConfigBytes(cfg.name, nbytes(inputs), outs, param_bytes, cfg.time)


def group_footprint(sizes: list[ConfigBytes], timing_memory_bytes: int, flush_bytes: int, max_slots: int = 32,
                    calibration_max: int = 0) -> int:
    """Device bytes an evaluation of a group may hold at its peak, the candidate's process included.
    Every configuration's parameters stay (the reference model's, its float64 twin's and the shared copy; the
    candidate's model once), and the float64 anchor of the check set in use; c2cuda configurations keep their two input sets and expected outputs. Beyond that,
    configurations are worked through one at a time in one shared allocation (arena_layout), so it is
    the largest that counts: its shared buffers and timing slots (as many as `add_timing_slots` makes),
    a timed round's fresh inputs with the reference's copy, its expected and torch.compile'd outputs, or
    a check set made on demand; the candidate's own outputs and their poisoned twin; the comparison's
    chunks. Then the L2 flush buffer, 1 GiB for CUDA contexts, and the scratch of the trusted calibration
    children (timed_rounds._calibration; one per child kind, each as large as the largest timed
    configuration's outputs, at most `calibration_max`, freed when the group is released)."""
    held = sum(2 * c.params + (2 * (c.inputs + c.outputs) if c.stored else 0) for c in sizes)
    held += max((c.params for c in sizes), default=0)
    held += sum(2 * c.params for c in sizes if not c.stored)  # the float64 twin of each reference module
    held += 2 * max((c.outputs for c in sizes if not c.stored), default=0)  # the float64 anchor of the set in use
    held += sum(4 * c.outputs for c in sizes if c.stored and not c.time)  # c2cuda: both sets' float64 anchors
    held += sum(2 * (c.inputs + c.outputs) for c in sizes if c.stored and c.time)  # c2cuda: the float64 baseline's slot
    held += (512 << 20) if any(c.stored and c.time for c in sizes) else 0  # ... and its child's CUDA context
    # torch2cuda: the float64 twin of an anchored timed call, its inputs and outputs in float64
    held += 2 * max((c.inputs + c.outputs for c in sizes if c.time and not c.stored), default=0)
    largest = 0
    for c in sizes:
        one = c.inputs + c.outputs + c.params
        slots = max(1, min(max_slots, timing_memory_bytes // max(2 * one, 1))) if c.time else 1
        rounds = slots * (2 * c.inputs + 2 * c.outputs + c.params)  # fresh + reference copy, expected + compiled
        largest = max(largest, slots * one + rounds + 2 * c.outputs + (2 << 30))
    timed_outputs = max((c.outputs for c in sizes if c.time), default=0)
    calibration = 2 * min(timed_outputs, calibration_max)
    return int(held + largest + flush_bytes + (1 << 30) + calibration)
