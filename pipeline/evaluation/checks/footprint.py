"""How much device memory a group may hold at its peak, estimated before anything is allocated.

In: a Task (its argument sizes for c2cuda; its reference run on torch's meta device for torch2cuda), the bytes
the timing slots may take, the L2 flush buffer's size and the calibration children's scratch bound.
Out: each configuration's `ConfigBytes` (`config_bytes`) and the group's peak in bytes (`group_footprint`),
which the evaluator reserves from the GPU's memory budget before it builds the group.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.evaluation.checks.reference_torch import load_reference_module
from pipeline.core.records import Task
from pipeline.tasks import arg_dtype, config_params, eval_expr, is_pointer


@dataclass
class ConfigBytes:
    """Device bytes of one configuration's data: inputs, outputs, parameters (torch2cuda)."""
    name: str
    inputs: int
    outputs: int
    params: int = 0
    time: bool = False
    stored: bool = False  # c2cuda: its input sets and expected outputs stay on the device
    # torch2cuda: the most the reference's forward holds at once besides its inputs, parameters and outputs (the
    # intermediate tensors of a chain such as conv -> GELU -> GroupNorm), in its own dtypes and with its floating
    # tensors in float64, as its float64 twin holds them (`ForwardPeak.peak_without`)
    intermediates: int = 0
    intermediates_float64: int = 0


def config_bytes(task: Task) -> list[ConfigBytes]:
    """The sizes of every configuration's data, without allocating it on a GPU: from the argument sizes (c2cuda),
    or from the reference run on torch's meta device (torch2cuda; a reference with a recurrent layer runs on the
    CPU instead, `_without_meta_kernel`; where an operator has no meta version, the outputs are taken as large
    as the inputs)."""
    out = []
    sized: dict = {}  # torch2cuda configurations with the same parameters (KernelBench's three) are sized once
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
            key = tuple(sorted(params.items()))
            if key not in sized:
                sized[key] = _torch_config_bytes(task, cfg, params)
            one = sized[key]
            out.append(ConfigBytes(cfg.name, one.inputs, one.outputs, one.params, cfg.time,
                                   intermediates=one.intermediates, intermediates_float64=one.intermediates_float64))
    return out


CPU_RUN_BYTES = 1 << 30  # a recurrent reference runs on the CPU for its output sizes up to this much data


def _without_meta_kernel(model) -> bool:
    """Whether the model holds a recurrent layer (torch.nn.RNNBase: LSTM, GRU, RNN), whose operator has no meta
    kernel: on the meta device it decomposes into thousands of Python-level steps (an LSTM of 512 steps: about
    38 s a configuration), on the CPU it is one call."""
    import torch
    return any(isinstance(m, torch.nn.RNNBase) for m in model.modules())


def _torch_config_bytes(task: Task, cfg, params: dict) -> ConfigBytes:
    import torch

    def nbytes(values) -> int:
        return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))

    def forward(device: str, model=None, inputs=None) -> tuple[int, int, int]:
        """(outputs, intermediates, intermediates in float64) in bytes of the reference's forward on `device`
        (its state and inputs made there unless given)."""
        with torch.device(device), torch.no_grad():
            model = ns["Model"](*list(ns["get_init_inputs"]())) if model is None else model
            inputs = inputs if inputs is not None else list(ns["get_inputs"]())
            with ForwardPeak() as held:
                result = model(*inputs)
        return (nbytes(result if isinstance(result, (tuple, list)) else [result]), held.peak_without(result),
                held.peak_without(result, float64=True))  # the intermediates with the outputs apart
    ns = load_reference_module(task, params)
    with torch.device("meta"):
        model = ns["Model"](*list(ns["get_init_inputs"]()))
        inputs = list(ns["get_inputs"]())
    param_bytes, in_bytes = nbytes(model.state_dict().values()), nbytes(inputs)
    sized = None
    if _without_meta_kernel(model) and in_bytes + param_bytes <= CPU_RUN_BYTES:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # one thread: a recurrent layer's steps are small, and a busy host's cores
        try:  # contended by several threads made its run 20x slower
            with torch.random.fork_rng(devices=[]):  # the caller's random state stays as it was
                sized = forward("cpu")
        except Exception:  # noqa: BLE001 - an operator without a CPU kernel: the meta device below
            sized = None
        finally:
            torch.set_num_threads(threads)
    if sized is None:
        try:
            sized = forward("meta", model, inputs)
        except Exception:  # no meta version of some operator: assume outputs as large as the inputs
            sized = (in_bytes, 0, 0)
    outs, intermediates, intermediates_float64 = sized
    return ConfigBytes(cfg.name, in_bytes, outs, param_bytes, cfg.time, intermediates=intermediates,
                       intermediates_float64=intermediates_float64)


def group_footprint(sizes: list[ConfigBytes], timing_memory_bytes: int, flush_bytes: int, max_slots: int = 32,
                    calibration_max: int = 0, round_sets_bytes: int = 0) -> int:
    """Device bytes an evaluation of a group may hold at its peak, the candidate's process included.
    Every configuration's parameters stay (the reference model's, its float64 twin's and the shared copy; the
    candidate's model once), and the float64 anchor of the check set in use; c2cuda configurations keep their two input sets and expected outputs. Beyond that,
    configurations are worked through one at a time in one shared allocation (buffer_layout.arena_layout), so it is
    the largest that counts: its shared buffers and timing slots (as many as `buffer_layout.add_timing_slots` makes),
    a timed round's fresh inputs with the reference's copy, its expected and torch.compile'd outputs, or
    a check set made on demand; the candidate's own outputs and their poisoned twin; the comparison's
    chunks; the forward's intermediate tensors (`ConfigBytes.intermediates`) in float64 for the twin and once
    more, in the reference's dtypes, for the candidate's process. Then the L2 flush buffer, 1 GiB for CUDA contexts, and the scratch of the
    trusted calibration children (timed_rounds._calibration; one per child kind, each as large as the largest timed
    configuration's outputs, at most `calibration_max`, freed when the group is released). With eval.group_rounds,
    each timing configuration's kept round sets, at most `round_sets_bytes` (group_timing.keep_round)."""
    held = sum(2 * c.params + (2 * (c.inputs + c.outputs) if c.stored else 0) for c in sizes)
    held += max((c.params for c in sizes), default=0)
    held += sum(2 * c.params for c in sizes if not c.stored)  # the float64 twin of each reference module
    held += 2 * max((c.outputs for c in sizes if not c.stored), default=0)  # the float64 anchor of the set in use
    held += sum(4 * c.outputs for c in sizes if c.stored and not c.time)  # c2cuda: both sets' float64 anchors
    held += sum(2 * (c.inputs + c.outputs) for c in sizes if c.stored and c.time)  # c2cuda: the float64 baseline's slot
    held += (512 << 20) if any(c.stored and c.time for c in sizes) else 0  # ... and its child's CUDA context
    held += round_sets_bytes * sum(1 for c in sizes if c.time)  # eval.group_rounds: the rounds kept for the group
    # torch2cuda: the float64 twin of an anchored timed call, its inputs and outputs in float64
    held += 2 * max((c.inputs + c.outputs for c in sizes if c.time and not c.stored), default=0)
    largest = 0
    for c in sizes:
        one = c.inputs + c.outputs + c.params
        slots = max(1, min(max_slots, timing_memory_bytes // max(2 * one, 1))) if c.time else 1
        rounds = slots * (2 * c.inputs + 2 * c.outputs + c.params)  # fresh + reference copy, expected + compiled
        # the forward's intermediate tensors, which the caching allocators keep: the float64 twin's in the
        # evaluator (the reference's own fit in the same blocks) and the candidate's in its child
        forwards = c.intermediates_float64 + c.intermediates
        largest = max(largest, slots * one + rounds + 2 * c.outputs + (2 << 30) + forwards)
    timed_outputs = max((c.outputs for c in sizes if c.time), default=0)
    calibration = 2 * min(timed_outputs, calibration_max)
    return int(held + largest + flush_bytes + (1 << 30) + calibration)


class ForwardPeak:
    """Context manager: the most bytes that storages made inside it held at once, on any device (meta included:
    sizes without memory); `peak_without(outputs)` leaves the given tensors' storages out (the intermediates' own
    peak). Counted per call of torch's Python API (torch.*, F.*, tensor methods: a TorchFunctionMode), not per
    operator below it: the meta device decomposes some calls (instance_norm, linear) into steps with temporaries
    that the one CUDA kernel of the call does not make. So a Python-level function that torch dispatches as one call
    (F.multi_head_attention_forward, inside nn.MultiheadAttention) counts its results, not what it makes inside.
    Each storage counts once, when a call first returns it or a view of it (einsum returns a view of what it made),
    never where it is an argument's (in place, `out=`, views, detach); it stops counting when its tensor is freed."""

    def __init__(self):
        self.live = self.peak = 0
        self._events: list[tuple[int, int, int]] = []  # (serial of a storage, bytes made or freed (negative),
        # the same in float64 where the storage's tensor is floating: what the float64 twin holds)
        self._serials: dict[int, int] = {}  # storage address -> serial, while counted and alive

    def peak_without(self, outputs, float64: bool = False) -> int:
        """The peak with the storages of `outputs` (tensors or nests of them, still alive) left out; with
        `float64`, every floating tensor counted at 8 bytes an element (the float64 twin's forward)."""
        import torch
        from torch.utils._pytree import tree_leaves
        skip = {self._serials.get(_storage_key(t)) for t in tree_leaves(outputs) if isinstance(t, torch.Tensor)}
        live = peak = 0
        for serial, n, n64 in self._events:
            if serial not in skip:
                live += n64 if float64 else n
                peak = max(peak, live)
        return peak

    def __enter__(self):
        import weakref

        import torch
        from torch.overrides import TorchFunctionMode
        from torch.utils._pytree import tree_leaves
        outer = self

        def freed(key: int, serial: int, n: int, n64: int) -> None:
            outer.live -= n
            outer._events.append((serial, -n, -n64))
            if outer._serials.get(key) == serial:
                del outer._serials[key]

        class Count(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                result = func(*args, **(kwargs or {}))
                given = {_storage_key(a) for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)}
                for t in tree_leaves(result):
                    if not isinstance(t, torch.Tensor):
                        continue
                    root = t._base if t._is_view() and t._base is not None else t
                    key = _storage_key(root)
                    if key in given or key in outer._serials:
                        continue
                    n = root.untyped_storage().nbytes()
                    n64 = n // root.element_size() * 8 if root.is_floating_point() else n
                    serial = len(outer._events)
                    outer._serials[key] = serial
                    outer._events.append((serial, n, n64))
                    outer.live += n
                    outer.peak = max(outer.peak, outer.live)
                    weakref.finalize(root, freed, key, serial, n, n64)
                return result
        self._mode = Count()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        return self._mode.__exit__(*exc)


def _storage_key(t) -> int:
    return t.untyped_storage()._cdata
