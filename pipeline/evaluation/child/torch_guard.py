"""Runtime checks for KernelBench-format candidates, used only inside the child process.

- `load_candidate` executes the candidate module with `load_inline` replaced by an import of the
  extension the compile step already built (so candidate Python never runs a compiler).
- `NoTorchCompute` raises on every torch operator that computes while the candidate's forward
  runs (allocation, views and metadata are allowed), including operators called from C++. A
  dispatch mode sees only operators that reach the Python dispatch key, which an extension can
  exclude (c10::impl::ExcludeDispatchKeyGuard, torch._C._DisableTorchDispatch); so the mode also
  checks from below the keys: on a random AUDIT_FRACTION of its uses (and whenever asked), the
  record-function profiler, which the dispatcher calls for every operator before it looks at any
  dispatch key, lists what ran, and an operator neither allowed nor a view-only composite is
  flagged; on every use, the thread-local dispatch-key sets and the mode stack must be the same
  when forward returns as when it began. The audit costs ~0.5 ms on the calls it covers; timing
  reports medians, so the minority of audited timing calls does not move them. Under a gate
  profile whose torch_compute is on (kernelbench), torch may compute: no mode is pushed (torch
  runs at full speed, as in KernelBench's own harness) and only the dispatch-state check remains.
- `snapshot` / `changes_since` detect patched timers and torch functions.
- `output_problems` requires a plain dense CUDA tensor of the expected shape and dtype, and `HarnessMemory`
  one that is not the harness's own memory (an input, a parameter, an output buffer of any slot).
- `forward_once` and `deliver` are a call of the candidate as the harness makes it: the forward alone
  between the marks of its time, then the checks and the copy into the output buffer after its end mark;
  the calibration batch of a trusted child runs the same two around its own stand-in work.
- `poison_allocator` leaves NaN bytes in the caching allocator so unwritten outputs fail.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import secrets
import time
import types

import torch
import torch._dynamo  # noqa: F401  (imported now: on import it rewraps torch functions such as
#                        torch.manual_seed, which would otherwise read as tampering later)
import torch.nn.functional as F
import torch.utils.cpp_extension  # noqa: F401  (imported before the candidate and before privileges drop)
from torch.utils._python_dispatch import TorchDispatchMode

from pipeline.evaluation.compute_ops import ALLOWED_OPS, VIEW_COMPOSITES

AUDIT_FRACTION = 0.25
RESULT_DEVICE = "cuda"  # where a result must lie (tests of the harness on CPU tensors set "cpu")
_PYTHON_KEY = torch._C.DispatchKey.Python


class NoTorchCompute(TorchDispatchMode):
    """Raise on any computing torch operator; record it in `flags`; flag operators hidden from the mode.

    audit: True profiles this use, False never, None a random AUDIT_FRACTION of uses (unpredictable
    to the candidate, so a candidate that hides operators on some calls is caught on some of them).
    allow_compute: torch may compute (the gate profile's torch_compute); then the mode is not pushed
    and only changes of the dispatch state (keys, the mode stack) are flagged.
    """

    def __init__(self, flags: list[str], audit: bool | None = None, allow_compute: bool = False):
        super().__init__()
        self.flags = flags
        self.allow_compute = allow_compute
        self.audit = not allow_compute and (audit if audit is not None else
                                            secrets.randbelow(1000) < AUDIT_FRACTION * 1000)
        self._profiler = None
        self._tls = None
        self._depth = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name not in ALLOWED_OPS:
            self.flags.append(f"torch-compute-in-forward: aten.{name} ran inside the candidate's forward")
            raise RuntimeError(f"torch operator aten.{name} is not allowed in ModelNew.forward; compute in your CUDA kernel")
        return func(*args, **(kwargs or {}))

    def __enter__(self):
        self._tls = _dispatch_tls()
        self._depth = torch._C._len_torch_dispatch_stack()
        if self.allow_compute:
            return self
        out = super().__enter__()
        if self.audit and not torch.autograd._profiler_enabled():
            from torch.autograd.profiler import profile
            self._profiler = profile(use_kineto=False)
            self._profiler.__enter__()
        return out

    def __exit__(self, exc_type, exc, tb):
        if self.allow_compute:
            self._check_dispatch_state(torch._C._len_torch_dispatch_stack() == self._depth,
                                       "the dispatch mode stack changed")
            return None
        try:
            on_top = _current_mode() is self
            if self._profiler is not None:
                self._profiler.__exit__(None, None, None)
                ran = [e.name.split("::", 1)[1] for e in self._profiler.function_events if e.name.startswith("aten::")]
                hidden = [op for op in ran if op not in ALLOWED_OPS and op not in VIEW_COMPOSITES]
                if hidden:
                    self.flags.append(f"torch-compute-in-forward: aten.{hidden[0]} ran inside the candidate's forward "
                                      f"hidden from the dispatch mode (dispatch keys excluded)")
        finally:
            result = super().__exit__(exc_type, exc, tb)
        self._check_dispatch_state(on_top, "the dispatch mode was no longer on top of the mode stack")
        return result

    def _check_dispatch_state(self, stack_intact: bool, stack_what: str) -> None:
        """Flag a forward that left the dispatch keys or the mode stack other than it found them."""
        changed = [what for what, before, after in zip(("exclude set", "include set", "Python key excluded"),
                                                        self._tls, _dispatch_tls()) if before != after]
        if changed or not stack_intact:
            what = ", ".join(changed) if changed else stack_what
            self.flags.append(f"torch-compute-in-forward: the candidate's forward changed torch's dispatch state ({what})")


def _dispatch_tls() -> tuple[str, str, bool]:
    """This thread's dispatch-key state: local exclude and include sets, whether the Python key is excluded."""
    return (str(torch._C._dispatch_tls_local_exclude_set()), str(torch._C._dispatch_tls_local_include_set()),
            torch._C._dispatch_tls_is_dispatch_key_excluded(_PYTHON_KEY))


def _current_mode():
    from torch.utils._python_dispatch import _get_current_dispatch_mode
    return _get_current_dispatch_mode()


def _watched() -> dict[str, object]:
    # Class attributes are read from the class __dict__: a classmethod read through the class is
    # a new bound object on every access, the raw entry is stable.
    watched = {"time.perf_counter": time.perf_counter, "time.time": time.time, "time.monotonic": time.monotonic,
               "torch.cuda.synchronize": torch.cuda.synchronize, "torch.cuda.Event": torch.cuda.Event,
               "torch.cuda.Event.elapsed_time": torch.cuda.Event.__dict__.get("elapsed_time"),
               "torch.Tensor.__torch_function__": torch.Tensor.__dict__.get("__torch_function__"),
               "torch.nn.Module.__call__": torch.nn.Module.__dict__.get("__call__")}
    for name in ("matmul", "mm", "bmm", "add", "mul", "relu", "softmax", "sum", "mean", "conv2d", "allclose",
                 "equal", "randn", "rand", "manual_seed", "empty", "empty_like", "zeros"):
        watched[f"torch.{name}"] = getattr(torch, name)
    for name in dir(F):
        if not name.startswith("_") and callable(getattr(F, name)):
            watched[f"F.{name}"] = getattr(F, name)
    return watched


def snapshot() -> dict[str, int]:
    return {k: id(v) for k, v in _watched().items()}


def changes_since(snap: dict[str, int]) -> list[str]:
    now = snapshot()
    return [f"timing-tamper: {k} was replaced" for k in snap if now.get(k) != snap[k]]


def load_candidate(source: str, extensions: dict[str, str]) -> dict:
    """Execute the candidate module with load_inline served from prebuilt extension files."""
    import torch.utils.cpp_extension as cpp

    def prebuilt(name, *args, **kwargs):
        if name not in extensions:
            raise RuntimeError(f"extension '{name}' was not built by the compile step")
        loader = importlib.machinery.ExtensionFileLoader(name, extensions[name])
        spec = importlib.util.spec_from_file_location(name, extensions[name], loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        return module

    original = cpp.load_inline
    cpp.load_inline = prebuilt
    try:
        module = types.ModuleType("candidate")
        exec(compile(source, "candidate.py", "exec"), module.__dict__)
    finally:
        cpp.load_inline = original
    if "ModelNew" not in module.__dict__:
        raise RuntimeError("the candidate defines no ModelNew")
    return module.__dict__


def copy_matching_state(model: torch.nn.Module, params: dict[str, torch.Tensor]) -> None:
    """Give ModelNew the reference's parameters where names and shapes match."""
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            src = params.get(name)
            if src is not None and tuple(src.shape) == tuple(tensor.shape) and src.dtype == tensor.dtype:
                tensor.copy_(src)


def poison_allocator(nbytes: int) -> None:
    """Leave freed NaN-filled blocks in the caching allocator, so torch.empty returns NaN bytes."""
    blocks = [torch.full((max(nbytes // 4, 1) + 1024,), float("nan"), device="cuda") for _ in range(2)]
    torch.cuda.synchronize()
    del blocks


class HarnessMemory:
    """The device spans of the buffers mapped into this process (sorted, disjoint), to tell whether a result's
    memory overlaps one of them. A forward that returns the harness's own output buffer (or an input) would have
    the harness copy a buffer onto itself and skip the copy an honest answer's result needs, or let the harness
    do its work; such a result is refused (`output-aliasing`). One bisection per result."""

    def __init__(self, spans: list[tuple[int, int]]):
        self.spans = sorted((p, p + n) for p, n in spans if p and n > 0)
        self.starts = [s for s, _ in self.spans]

    def overlaps(self, lo: int, hi: int) -> bool:
        import bisect
        i = bisect.bisect_left(self.starts, hi) - 1  # the last span starting before hi; spans are disjoint
        return hi > lo and i >= 0 and self.spans[i][1] > lo


def aliasing_problems(results: list, memory: HarnessMemory) -> list[str]:
    """A flag for each result (already a dense CUDA tensor) that lies in the harness's own buffers."""
    out = []
    for i, res in enumerate(results):
        lo = res.data_ptr()
        if memory.overlaps(lo, lo + res.numel() * res.element_size()):
            out.append(f"output-aliasing: output {i} lies in the harness's own buffers (an input or an output "
                       f"buffer); return a tensor your forward allocated")
    return out


def forward_once(call, flags: list[str], start, end) -> list:
    """One timed forward as KernelBench times it: `call()` alone between `start()` and `end()` (the marks of its
    CUDA events), taken apart by exact type inside them (a container whose iteration computes meets the time),
    under no_grad and the dispatch-state check (`NoTorchCompute` with compute allowed: no mode is pushed, as in
    KernelBench's own harness; a forward that changes the dispatch keys or the mode stack is flagged). Under the
    strict profile the untimed calls run the full mode and its audit; torch compute is refused before anything
    runs by the gate and the check of the built extension (docs/trust.md)."""
    with torch.no_grad(), NoTorchCompute(flags, audit=False, allow_compute=True):
        start()
        result = call()
        results = list(result) if type(result) in (tuple, list) else [result]
        end()
    return results


def deliver(results: list, outputs: list[torch.Tensor], memory: HarnessMemory, flags: list[str],
            copy: bool = True) -> None:
    """After a forward's end mark: its results checked (`output_problems`, `aliasing_problems`) and, when all
    is well, copied into the harness's output buffers (`copy`; a calibration batch runs the checks alone, the
    trusted side makes the copies of its window)."""
    flags += output_problems(results, outputs)
    if not flags:
        flags += aliasing_problems(results, memory)
    if not flags and copy:
        for out, res in zip(outputs, results):
            out.copy_(res)


def output_problems(results: list, outputs: list[torch.Tensor]) -> list[str]:
    """What is wrong with forward's outputs (already taken apart by exact type) against the output buffers."""
    if len(results) != len(outputs):
        return [f"output-type: forward returned {len(results)} outputs, expected {len(outputs)}"]
    problems = []
    for i, (res, out) in enumerate(zip(results, outputs)):
        if type(res) is not torch.Tensor:
            problems.append(f"output-type: output {i} is a {type(res).__name__}, not a plain torch.Tensor")
        elif res.layout != torch.strided or res.device.type != RESULT_DEVICE or not res.is_contiguous():
            problems.append(f"output-type: output {i} is not a dense contiguous CUDA tensor")
        elif tuple(res.shape) != tuple(out.shape) or res.dtype != out.dtype:
            problems.append(f"output-shape: output {i} has shape {tuple(res.shape)} {res.dtype}, "
                            f"expected {tuple(out.shape)} {out.dtype}")
    return problems
