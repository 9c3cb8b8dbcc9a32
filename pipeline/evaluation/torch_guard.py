"""Runtime checks for KernelBench-format candidates, used only inside the child process.

- `load_candidate` executes the candidate module with `load_inline` replaced by an import of the
  extension the compile step already built (so candidate Python never runs a compiler).
- `NoTorchCompute` raises on every torch operator that computes while the candidate's forward
  runs (allocation, views and metadata are allowed), including operators called from C++.
- `snapshot` / `changes_since` detect patched timers and torch functions.
- `output_problems` requires a plain dense CUDA tensor of the expected shape and dtype.
- `poison_allocator` leaves NaN bytes in the caching allocator so unwritten outputs fail.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import time
import types

import torch
import torch._dynamo  # noqa: F401  (imported now: on import it rewraps torch functions such as
#                        torch.manual_seed, which would otherwise read as tampering later)
import torch.nn.functional as F
import torch.utils.cpp_extension  # noqa: F401  (imported before the candidate and before privileges drop)
from torch.utils._python_dispatch import TorchDispatchMode

ALLOWED_OPS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "zero_", "fill_", "view", "_unsafe_view", "reshape", "as_strided", "detach", "alias",
    "t", "transpose", "permute", "expand", "squeeze", "unsqueeze", "slice", "select", "split",
    "split_with_sizes", "unbind", "chunk", "lift_fresh", "_local_scalar_dense", "size", "stride",
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "numel", "dim", "is_contiguous",
    "is_non_overlapping_and_dense", "_reshape_alias", "view_as", "flatten", "unflatten", "set_",
    "record_stream", "resize_",
}


class NoTorchCompute(TorchDispatchMode):
    """Raise on any computing torch operator; record it in `flags`."""

    def __init__(self, flags: list[str]):
        super().__init__()
        self.flags = flags

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name not in ALLOWED_OPS:
            self.flags.append(f"torch-compute-in-forward: aten.{name} ran inside the candidate's forward")
            raise RuntimeError(f"torch operator aten.{name} is not allowed in ModelNew.forward; compute in your CUDA kernel")
        return func(*args, **(kwargs or {}))


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


def output_problems(result, outputs: list[torch.Tensor]) -> list[str]:
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    if len(results) != len(outputs):
        return [f"output-type: forward returned {len(results)} outputs, expected {len(outputs)}"]
    problems = []
    for i, (res, out) in enumerate(zip(results, outputs)):
        if type(res) is not torch.Tensor:
            problems.append(f"output-type: output {i} is a {type(res).__name__}, not a plain torch.Tensor")
        elif res.layout != torch.strided or not res.is_cuda or not res.is_contiguous():
            problems.append(f"output-type: output {i} is not a dense contiguous CUDA tensor")
        elif tuple(res.shape) != tuple(out.shape) or res.dtype != out.dtype:
            problems.append(f"output-shape: output {i} has shape {tuple(res.shape)} {res.dtype}, "
                            f"expected {tuple(out.shape)} {out.dtype}")
    return problems
