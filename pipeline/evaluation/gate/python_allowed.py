"""What kernelbench-format Python may name, in one place: the modules a file may import (ALLOWED_MODULES), the
names allowed and denied beyond them, the attributes refused by name on receivers the gate cannot resolve, and
`name_verdict`, which resolves a dotted name on the installed modules step by step (gate/python.py walks the file
and asks it).
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import types
import typing
from functools import lru_cache

MODULE_RULES = [  # forbidden imports that get a more specific rule than forbidden-import
    ("threads", {"threading", "_thread", "concurrent", "multiprocessing", "asyncio"}),
    ("process-or-file-or-network", {"os", "subprocess", "socket", "shutil", "pathlib", "io", "ctypes", "signal", "pty",
                                    "urllib", "http", "requests", "tempfile", "mmap", "pickle", "resource", "cffi"}),
    ("introspection", {"gc", "sys", "inspect", "builtins", "importlib", "types", "dis", "traceback", "weakref"}),
    ("timing-tamper", {"time", "timeit", "datetime"}),
]
INTROSPECTION_NAMES = {"gc", "sys", "inspect", "builtins", "globals", "locals", "vars", "eval", "exec", "compile",
                        "__import__", "open", "breakpoint", "type", "object", "dir", "exit", "quit", "input", "help",
                        "memoryview"}
TORCH_INTERNALS = {"_C", "ops", "classes", "library", "overrides", "jit", "fx", "hub", "package", "backends", "compiler",
                    "compile", "distributed", "_dynamo", "_inductor", "func", "export"}
LOW_DTYPES = re.compile(r"torch\.(float16|half|bfloat16|float8\w*|complex32|autocast|amp|cuda\.amp|set_default_dtype"
                         r"|(cuda\.)?(HalfTensor|BFloat16Tensor))|numpy\.(float16|half)")
# private torch.nn.init helpers that only read a tensor's shape (KernelBench answers copy nn.Linear's init)
INIT_HELPERS = {"torch.nn.init._calculate_fan_in_and_fan_out", "torch.nn.init._calculate_correct_fan"}
# builtins that reach any attribute by a computed name when called later (g = getattr; g(x, name))
ATTRIBUTE_BUILTINS = {"getattr", "setattr", "delattr", "hasattr"}
# The allow-list of what kernelbench Python may name, in one place. An attribute chain that starts
# at an imported module (torch.cuda.Stream, F.relu, getattr(torch, "sys"), from torch import X) is
# resolved step by step on the installed modules: every module object it passes through must be
# one of ALLOWED_MODULES (so torch.sys, torch.os, torch.ctypes, typing.sys, torch.cuda.streams,
# torch.cuda.jiterator, torch.ops, torch.library, torch.utils.data ... are refused), no step may be
# private (_x), and no object on the way may be one of DENIED_NAMES (found by identity, so an alias
# such as torch.cuda.streams.Stream is the same denied object). From typing only typing's own names
# (typing.__all__: Optional, List, Tuple, ...) are allowed. Torch compute that these names allow is
# still refused in code forward can reach (compute.check_compute); at module level and in __init__ it is fine.
# A gate profile may add modules (GateProfile.modules: numpy for kernelbench); they are then
# resolved the same way, and DENIED_NAMES applies to them too.
ALLOWED_MODULES = {
    "torch": "tensors, dtypes, creation and math functions (weights in __init__), torch.empty in forward",
    "torch.nn": "nn.Module, nn.Parameter, layers whose weights __init__ builds",
    "torch.nn.functional": "functional ops (outside forward)",
    "torch.nn.init": "parameter initialisers",
    "torch.linalg": "compute (outside forward)", "torch.fft": "compute (outside forward)",
    "torch.special": "compute (outside forward)",
    "torch.cuda": "device queries, current_stream, synchronize (streams, events, graphs are denied below)",
    "torch.version": "version strings", "torch.utils": "the way to cpp_extension", "torch.utils.cpp_extension": "load_inline",
    "math": "everything", "typing": "typing's own names", "__future__": "annotations",
    "itertools": "everything", "collections": "containers", "collections.abc": "abstract containers",
    "functools": "reduce, partial",
}
# Names allowed inside a module that is not: the chain may continue past them (Function.apply), the rest of
# the module stays refused (torch.autograd.graph hooks, torch.autograd.profiler).
ALLOWED_NAMES = {"torch.autograd.Function": "a custom autograd function around a kernel (forward and backward of its own)"}
DENIED_NAMES = {
    "side-stream": ["torch.Stream", "torch.cuda.Stream", "torch.cuda.ExternalStream", "torch.cuda.StreamContext",
                    "torch.cuda.stream", "torch.cuda.set_stream", "torch.cuda.default_stream", "torch.cuda.streams"],
    "timing-tamper": ["torch.Event", "torch.cuda.Event", "torch.cuda.graph", "torch.cuda.CUDAGraph",
                      "torch.cuda.make_graphed_callables", "torch.cuda.graphs", "torch.cuda.set_device", "torch.cuda.set_sync_debug_mode",
                      "torch.cuda.device"],
    "process-or-file-or-network": ["torch.load", "torch.save", "torch.from_file", "torch.UntypedStorage.from_file",
                                   "numpy.load", "numpy.save", "numpy.savez", "numpy.savez_compressed",
                                   "numpy.savetxt", "numpy.loadtxt", "numpy.genfromtxt", "numpy.fromfile",
                                   "numpy.fromregex", "numpy.memmap", "numpy.ndarray.tofile", "numpy.ndarray.dump"],
    "torch-state": ["torch.set_float32_matmul_precision", "torch.set_flush_denormal", "torch.cuda.empty_cache"],
    "introspection": ["torch.cuda.cudart", "torch.compile", "torch.set_default_device", "torch.get_file_path",
                      "torch.typename", "torch.cuda.check_error", "torch.cuda.init",
                      # evaluate annotation strings as code (an annotation "__import__('os')" is never checked)
                      "typing.get_type_hints", "typing.ForwardRef", "functools.singledispatch",
                      "functools.singledispatchmethod",
                      # copy attributes by name between any two objects (torch.Tensor's methods, a function's __globals__)
                      "functools.update_wrapper", "functools.wraps"],
}
# Methods that read or write files or shared memory by name, refused on any receiver (a tensor, an array,
# a storage): the names above are found on modules, these on objects the gate cannot follow.
FILE_METHODS = {"tofile", "dump", "fromfile", "from_file", "_share_filename_cpu_", "_new_shared_filename_cpu",
                "_new_using_filename_cpu", "_share_fd_cpu_", "_new_shared_fd_cpu", "_release_ipc_counter_cuda",
                "_share_cuda_", "_new_shared_cuda", "_write_file", "_set_from_file", "_new_with_file",
                "share_memory_", "share_memory", "_new_shared", "_shared_incref", "_shared_decref",
                "_new_shared_filename", "_new_using_fd_cpu", "_get_shared_fd", "_release_ipc_counter", "_get_filename"}
# Attributes of frames, tracebacks, generators, coroutines, async generators and code objects, and the
# calls that return frames: refused on any receiver (a generator's gi_frame.f_back reaches the harness's
# frames and globals without naming sys or inspect). Every co_* attribute is refused as well (FRAME_ATTRIBUTE).
FRAME_ATTRIBUTES = {"f_back", "f_builtins", "f_code", "f_globals", "f_lasti", "f_lineno", "f_locals", "f_trace",
                    "f_trace_lines", "f_trace_opcodes", "f_generator", "tb_frame", "tb_lasti", "tb_lineno", "tb_next",
                    "gi_code", "gi_frame", "gi_running", "gi_suspended", "gi_yieldfrom", "cr_await", "cr_code",
                    "cr_frame", "cr_origin", "cr_running", "cr_suspended", "ag_await", "ag_code", "ag_frame",
                    "ag_running", "cell_contents", "func_globals", "func_code", "_getframe", "_getframemodulename",
                    "_current_frames", "_current_exceptions", "currentframe", "settrace", "setprofile", "gettrace",
                    "getprofile", "exc_info", "last_traceback", "last_exc"}
FRAME_ATTRIBUTE = re.compile(r"co_\w+|_co_\w+")
# Stream, event and graph constructors by the attribute name, refused on any receiver (a module the gate
# cannot follow, `[torch][0].cuda.Stream`, or an object); torch.cuda.current_stream stays allowed.
STREAM_ATTRIBUTES = {"Stream", "ExternalStream", "StreamContext", "get_stream_from_external", "set_stream",
                     "default_stream", "wait_stream", "record_stream", "StreamObjType", "_set_stream_by_id"}
EVENT_ATTRIBUTES = {"Event", "CUDAGraph", "make_graphed_callables", "graph_pool_handle", "wait_event", "record_event"}
# Module names that are never an honest attribute: refused on receivers the gate cannot resolve
# (`[torch][0].nn.modules.module.sys`); on resolvable chains name_verdict finds the module itself.
MODULE_ATTRIBUTES = {"sys", "os", "builtins", "importlib", "ctypes", "_ctypes", "subprocess", "threading", "_thread",
                     "multiprocessing", "gc", "inspect", "traceback", "socket", "shutil", "pathlib", "pty", "mmap",
                     "pickle", "cffi", "weakref", "asyncio", "concurrent", "signal", "resource", "tempfile", "posix"}
IMPORTABLE = {"torch", "torch.nn", "torch.nn.functional", "torch.utils.cpp_extension", "math", "typing", "__future__",
               "itertools", "collections", "collections.abc", "functools"}
_NO_MODULES: frozenset[str] = frozenset()


@lru_cache(maxsize=4)
def _denied_objects(extra: frozenset[str] = _NO_MODULES) -> dict[int, tuple[str, str]]:
    """id of each denied object -> (rule, its name); the objects are kept alive by their modules."""
    out = {}
    for rule, names in DENIED_NAMES.items():
        for name in names:
            obj = resolve_name(name, extra)
            if obj is not _MISSING:
                out[id(obj)] = (rule, name)
    return out


_MISSING = object()


def resolve_name(qual: str, extra: frozenset[str] = _NO_MODULES):
    parts = qual.split(".")
    obj = resolve_module(parts[0], extra)
    for p in parts[1:]:
        obj = static_attribute(obj, p)
    return obj


@lru_cache(maxsize=None)
def resolve_module(name: str, extra: frozenset[str] = _NO_MODULES):
    """The module `name` when it is allowed (ALLOWED_MODULES, or `extra`, a profile's modules), else _MISSING."""
    if name not in ALLOWED_MODULES and name not in extra:
        return _MISSING
    for mod in sorted(m for m in IMPORTABLE | set(ALLOWED_MODULES) | extra if m.split(".")[0] == name):
        try:
            importlib.import_module(mod)  # so that static lookups see the submodules
        except ImportError:  # a profile's optional module that is not installed: nothing to reach
            return _MISSING
    return importlib.import_module(name)


def static_attribute(obj, attr: str):
    if obj is _MISSING:
        return _MISSING
    try:
        return inspect.getattr_static(obj, attr)
    except AttributeError:
        return _MISSING


@lru_cache(maxsize=8192)
def name_verdict(qual: str, extra: frozenset[str] = _NO_MODULES) -> tuple[str, str] | None:
    """(rule, what) when the dotted name `qual` reaches something outside the allow-list (plus the
    modules `extra` of the gate profile), else None."""
    parts = qual.split(".")
    obj, path = resolve_module(parts[0], extra), parts[0]
    if obj is _MISSING:
        return None
    for p in parts[1:]:
        if re.fullmatch(r"__\w+__", p):
            return None  # dunders have their own rule
        if p.startswith("_") and f"{path}.{p}" not in INIT_HELPERS:
            return "introspection", f"reaches into {path}'s internals ({qual})"
        if path == "typing" and p not in typing.__all__:
            return "forbidden-import", f"uses {path}.{p}, which is not one of typing's own names"
        nxt = static_attribute(obj, p)
        path = f"{path}.{p}"
        if nxt is _MISSING:
            if isinstance(obj, types.ModuleType) and _submodule_exists(f"{obj.__name__}.{p}"):  # loaded lazily
                root = obj.__name__.split(".")[0]
                rule = next((r for r, names in MODULE_RULES if root in names), "introspection")
                return rule, f"reaches the module {obj.__name__}.{p} through {path}"
            if isinstance(obj, types.ModuleType):
                return "forbidden-name", f"uses {path}, which {obj.__name__} does not define"
            return None  # an attribute of a class or object: left to run time
        hit = _denied_objects(extra).get(id(nxt))
        if hit:
            return hit[0], f"uses {path}" + (f" (that is {hit[1]})" if hit[1] != path else "")
        if isinstance(nxt, types.ModuleType) and nxt.__name__ not in ALLOWED_MODULES and nxt.__name__ not in extra \
                and not any(qual == n or qual.startswith(n + ".") for n in ALLOWED_NAMES if n.startswith(path + ".")):
            root = nxt.__name__.split(".")[0]
            rule = next((r for r, names in MODULE_RULES if root in names), "introspection")
            return rule, f"reaches the module {nxt.__name__} through {path}"
        obj = nxt
    return None


def _submodule_exists(name: str) -> bool:
    """Whether `name` is a submodule that its package would import on first access (numpy.testing)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
