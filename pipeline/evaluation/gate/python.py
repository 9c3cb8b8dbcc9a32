"""The static gate, Python half: the rules of kernelbench-format candidates, read with `ast`.

    check_python(source, float32, profile) -> (findings, load_inline calls)
    load_inline_calls(source) -> the constant arguments of each load_inline call (raises DynamicCode)

Names are checked by allow-list (ALLOWED_NAMES): every attribute chain that starts at an imported
module (`torch.cuda.Stream`, `F.relu`, `getattr(torch, "sys")`) is resolved on the installed modules
and must reach only modules of the list and names that are not denied; imports, introspection,
try statements, patching and tensor subclasses are refused everywhere in the file (module level,
__init__, forward). A module may only be named, never passed on as a value (`[torch][0]`, `(lambda: torch)()`),
so every chain read from it stays resolvable; on receivers the gate cannot resolve, private attributes, module
names (`.sys`), frame, generator and code attributes (`.gi_frame`, `.f_back`, `co_*`), stream and event
constructors and shared-memory methods are refused by name; attributes are assigned only on self. Torch compute
(torch calls, tensor methods, operators on tensors) is refused only where forward can reach it, and only under a
gate profile (gate.GateProfile) without torch_compute; a profile may add modules. The load_inline sources
must be constants; they are extracted here with their lines mapped into the Python file (their flags,
linker flags and include paths are checked in the package's __init__).
Each finding names the rule (`Finding.rule`) and the 1-based line of the candidate file.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
import types
import typing
from functools import lru_cache

from pipeline.core.records import Finding
from pipeline.evaluation.gate.compute import check_compute
from pipeline.evaluation.gate.cuda import finding
from pipeline.evaluation.gate.profile import GateProfile
from pipeline.evaluation.gate.python_names import (ADVICE, LOAD_INLINE, qualified_name, reference_nodes,
                                                   rule_finding, short_text)

_MODULE_RULES = [  # forbidden imports that get a more specific rule than forbidden-import
    ("threads", {"threading", "_thread", "concurrent", "multiprocessing", "asyncio"}),
    ("process-or-file-or-network", {"os", "subprocess", "socket", "shutil", "pathlib", "io", "ctypes", "signal", "pty",
                                    "urllib", "http", "requests", "tempfile", "mmap", "pickle", "resource", "cffi"}),
    ("introspection", {"gc", "sys", "inspect", "builtins", "importlib", "types", "dis", "traceback", "weakref"}),
    ("timing-tamper", {"time", "timeit", "datetime"}),
]
_INTROSPECTION_NAMES = {"gc", "sys", "inspect", "builtins", "globals", "locals", "vars", "eval", "exec", "compile",
                        "__import__", "open", "breakpoint", "type", "object", "dir", "exit", "quit", "input", "help",
                        "memoryview"}
_TORCH_INTERNALS = {"_C", "ops", "classes", "library", "overrides", "jit", "fx", "hub", "package", "backends", "compiler",
                    "compile", "distributed", "_dynamo", "_inductor", "func", "export"}
_LOW_DTYPES = re.compile(r"torch\.(float16|half|bfloat16|float8\w*|complex32|autocast|amp|cuda\.amp|set_default_dtype"
                         r"|(cuda\.)?(HalfTensor|BFloat16Tensor))|numpy\.(float16|half)")
# private torch.nn.init helpers that only read a tensor's shape (KernelBench answers copy nn.Linear's init)
_INIT_HELPERS = {"torch.nn.init._calculate_fan_in_and_fan_out", "torch.nn.init._calculate_correct_fan"}
# builtins that reach any attribute by a computed name when called later (g = getattr; g(x, name))
_ATTRIBUTE_BUILTINS = {"getattr", "setattr", "delattr", "hasattr"}
_KEYWORDS = {"name", "cpp_sources", "cuda_sources", "functions", "extra_cflags", "extra_cuda_cflags", "extra_ldflags",
             "extra_include_paths", "verbose", "with_cuda", "with_pytorch_error_handling"}
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
# frames and globals without naming sys or inspect). Every co_* attribute is refused as well (_FRAME_ATTRIBUTE).
FRAME_ATTRIBUTES = {"f_back", "f_builtins", "f_code", "f_globals", "f_lasti", "f_lineno", "f_locals", "f_trace",
                    "f_trace_lines", "f_trace_opcodes", "f_generator", "tb_frame", "tb_lasti", "tb_lineno", "tb_next",
                    "gi_code", "gi_frame", "gi_running", "gi_suspended", "gi_yieldfrom", "cr_await", "cr_code",
                    "cr_frame", "cr_origin", "cr_running", "cr_suspended", "ag_await", "ag_code", "ag_frame",
                    "ag_running", "cell_contents", "func_globals", "func_code", "_getframe", "_getframemodulename",
                    "_current_frames", "_current_exceptions", "currentframe", "settrace", "setprofile", "gettrace",
                    "getprofile", "exc_info", "last_traceback", "last_exc"}
_FRAME_ATTRIBUTE = re.compile(r"co_\w+|_co_\w+")
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
_IMPORTABLE = {"torch", "torch.nn", "torch.nn.functional", "torch.utils.cpp_extension", "math", "typing", "__future__",
               "itertools", "collections", "collections.abc", "functools"}
_NO_MODULES: frozenset[str] = frozenset()


@lru_cache(maxsize=4)
def _denied_objects(extra: frozenset[str] = _NO_MODULES) -> dict[int, tuple[str, str]]:
    """id of each denied object -> (rule, its name); the objects are kept alive by their modules."""
    out = {}
    for rule, names in DENIED_NAMES.items():
        for name in names:
            obj = _lookup(name, extra)
            if obj is not _MISSING:
                out[id(obj)] = (rule, name)
    return out


_MISSING = object()


def _lookup(qual: str, extra: frozenset[str] = _NO_MODULES):
    parts = qual.split(".")
    obj = _module(parts[0], extra)
    for p in parts[1:]:
        obj = _static(obj, p)
    return obj


@lru_cache(maxsize=None)
def _module(name: str, extra: frozenset[str] = _NO_MODULES):
    """The module `name` when it is allowed (ALLOWED_MODULES, or `extra`, a profile's modules), else _MISSING."""
    if name not in ALLOWED_MODULES and name not in extra:
        return _MISSING
    for mod in sorted(m for m in _IMPORTABLE | set(ALLOWED_MODULES) | extra if m.split(".")[0] == name):
        try:
            importlib.import_module(mod)  # so that static lookups see the submodules
        except ImportError:  # a profile's optional module that is not installed: nothing to reach
            return _MISSING
    return importlib.import_module(name)


def _static(obj, attr: str):
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
    obj, path = _module(parts[0], extra), parts[0]
    if obj is _MISSING:
        return None
    for p in parts[1:]:
        if re.fullmatch(r"__\w+__", p):
            return None  # dunders have their own rule
        if p.startswith("_") and f"{path}.{p}" not in _INIT_HELPERS:
            return "introspection", f"reaches into {path}'s internals ({qual})"
        if path == "typing" and p not in typing.__all__:
            return "forbidden-import", f"uses {path}.{p}, which is not one of typing's own names"
        nxt = _static(obj, p)
        path = f"{path}.{p}"
        if nxt is _MISSING:
            if isinstance(obj, types.ModuleType) and _submodule_exists(f"{obj.__name__}.{p}"):  # loaded lazily
                root = obj.__name__.split(".")[0]
                rule = next((r for r, names in _MODULE_RULES if root in names), "introspection")
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
            rule = next((r for r, names in _MODULE_RULES if root in names), "introspection")
            return rule, f"reaches the module {nxt.__name__} through {path}"
        obj = nxt
    return None


def _submodule_exists(name: str) -> bool:
    """Whether `name` is a submodule that its package would import on first access (numpy.testing)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False






class DynamicCode(Exception):
    def __init__(self, line: int, what: str):
        super().__init__(what)
        self.line, self.what = line, what

# --- Python (kernelbench) -------------------------------------------------------------------------
def import_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted path it stands for, from imports and plain `x = a.b` assignments."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    for _ in range(2):
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                q = qualified_name(node.value, out)
                if q:
                    out[node.targets[0].id] = q
    return out




def check_python(source: str, float32: bool, profile: GateProfile) -> tuple[list[Finding], list[dict]]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as e:
        return [rule_finding("syntax", getattr(e, "lineno", None) or 1, f"the Python does not parse ({getattr(e, 'msg', e)})")], []
    aliases = import_aliases(tree)
    out: list[Finding] = []
    _check_imports(tree, out, profile)
    _check_modelnew(tree, aliases, out)
    _check_nodes(tree, aliases, float32, out, profile.modules)
    _check_module_values(tree, aliases, out, profile.modules)
    _check_alias_meanings(tree, aliases, out)
    if not profile.torch_compute:
        check_compute(tree, aliases, out)
    calls = []
    for call in evaluated_load_inline_calls(tree, aliases):
        if isinstance(call, DynamicCode):
            out.append(rule_finding("dynamic-build", call.line, call.what))
        else:
            calls.append(call)
    for line in _load_inline_refs(tree, aliases):
        out.append(rule_finding("dynamic-build", line, "refers to load_inline other than by calling it"))
    return out, calls


def _check_imports(tree: ast.AST, out: list[Finding], profile: GateProfile) -> None:
    importable = _IMPORTABLE | profile.modules
    advice = f"import only {', '.join(sorted(m for m in importable if m != '__future__'))}"
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or any(a.name == "*" for a in node.names)):
            out.append(rule_finding("forbidden-import", node.lineno, "uses a relative or star import"))
            continue
        if isinstance(node, ast.Import):
            bad = [(a.name, None) for a in node.names if a.name not in importable]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            bad = []
            for a in node.names:
                full = f"{mod}.{a.name}"
                if full in ALLOWED_NAMES:  # from torch.autograd import Function
                    continue
                if mod not in importable:
                    bad.append((full, None))
                elif mod == "torch.utils.cpp_extension" and a.name != "load_inline":
                    bad.append((full, None))
                elif mod != "__future__":  # from M import x: x is checked exactly as the name M.x
                    verdict = name_verdict(full, profile.modules)
                    bad += [(full, verdict)] if verdict else []
        else:
            continue
        for name, verdict in bad:
            if name.startswith("torch.utils.cpp_extension."):
                out.append(rule_finding("dynamic-build", node.lineno, f"imports {name}; only load_inline with literal sources is allowed"))
            elif verdict:
                out.append(rule_finding(verdict[0], node.lineno, f"imports {name}: {verdict[1]}"))
            else:
                rule = next((r for r, names in _MODULE_RULES if name.split(".")[0] in names), "forbidden-import")
                out.append(finding(rule, node.lineno, f"imports {name}",
                                   advice if rule == "forbidden-import" else ADVICE.get(rule)))


def _check_modelnew(tree: ast.Module, aliases: dict[str, str], out: list[Finding]) -> None:
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)
    if cls is None:
        out.append(rule_finding("no-modelnew", 1, "no top-level class ModelNew is defined"))
        return
    bases = [qualified_name(b, aliases) or ast.unparse(b) for b in cls.bases]
    if bases != ["torch.nn.Module"] or cls.keywords or cls.decorator_list:
        what = f"ModelNew derives from {', '.join(bases) or 'nothing'}" if bases != ["torch.nn.Module"] \
            else "ModelNew has a decorator or metaclass"
        out.append(rule_finding("subclass-reference", cls.lineno, what))




def _check_nodes(tree: ast.Module, aliases: dict[str, str], float32: bool, out: list[Finding],
                 modules: frozenset[str]) -> None:
    skip = reference_nodes(tree)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    own = _own_objects(tree, aliases)
    shadowed = _local_names(tree)
    on_the_way = _on_the_way_to_allowed_names(tree, aliases)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 1)
        if isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            out.append(rule_finding("try-fallback", line, "has a try statement (a fallback path)"))
        elif isinstance(node, ast.Name):
            if node.id in ("Model", "get_inputs", "get_init_inputs") and id(node) not in skip:
                out.append(rule_finding("reference-use", line, f"uses the reference's {node.id}"))
            elif (node.id in _INTROSPECTION_NAMES and id(node) not in shadowed) or (
                    re.fullmatch(r"__\w+__", node.id) and node.id != "__name__"):
                out.append(rule_finding("introspection", line, f"uses {node.id}"))
            elif node.id in _ATTRIBUTE_BUILTINS and id(node) not in called:
                out.append(rule_finding("introspection", line, f"passes on {node.id} (it is allowed only called directly, "
                                                     f"with a constant name)"))
        elif isinstance(node, ast.Attribute):
            if id(node) not in on_the_way:
                _check_attribute(node, aliases, float32, out, modules)
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                _check_attribute_store(node, aliases, out, own)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("getattr", "setattr", "delattr", "hasattr"):
            key = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)) or re.fullmatch(r"__\w+__", key.value):
                out.append(rule_finding("introspection", line, f"calls {node.func.id} with a computed or dunder attribute name"))
            elif key.value in ("Model", "get_inputs", "get_init_inputs"):
                out.append(rule_finding("reference-use", line, f"reaches the reference's {key.value}"))
            elif float32 and key.value in ("half", "bfloat16"):
                out.append(rule_finding("precision-downgrade", line, f"reaches .{key.value} with {node.func.id}, lower "
                                                           f"precision than float32"))
            else:  # a constant name is checked exactly as the attribute it names
                base = qualified_name(node.args[0], aliases)
                _check_name(line, key.value, f"{base}.{key.value}" if base else "", node.args[0], aliases, float32, out,
                            modules)
            if node.func.id in ("setattr", "delattr") and node.args and qualified_name(node.args[0], aliases):
                out.append(rule_finding("timing-tamper", line, f"patches {qualified_name(node.args[0], aliases)} with {node.func.id}"))
            elif node.func.id in ("setattr", "delattr") and node.args and not (
                    isinstance(node.args[0], ast.Name) and node.args[0].id == "self" or _self_rooted(node.args[0])):
                out.append(finding("timing-tamper", line, f"changes an attribute of {short_text(node.args[0])} with "
                                                          f"{node.func.id}, an object other than self",
                                   "keep state on self; do not patch modules, classes or objects you did not make"))

        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)) and qualified_name(node.value, aliases):
            out.append(rule_finding("timing-tamper", line, f"patches {short_text(node)}, an item of {qualified_name(node.value, aliases)}"))
        elif isinstance(node, ast.MatchClass) and (node.patterns or node.kwd_attrs):
            out.append(finding("introspection", line, f"reads attributes with the class pattern {short_text(node)} in a "
                                                      f"match statement, which the gate cannot follow",
                               "read attributes as x.name"))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in (
                "__torch_function__", "__torch_dispatch__"):
            out.append(rule_finding("tensor-subclass", line, f"defines {node.name}"))
        elif isinstance(node, ast.ClassDef) and any(qualified_name(b, aliases) == "torch.Tensor" for b in node.bases):
            out.append(rule_finding("tensor-subclass", line, f"class {node.name} subclasses torch.Tensor"))
        if float32 and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("half", "bfloat16"):
            out.append(rule_finding("precision-downgrade", line, f"converts with .{node.func.attr}(), lower precision than float32"))


def _check_attribute_store(node: ast.Attribute, aliases: dict[str, str], out: list[Finding], own: set[int]) -> None:
    """An attribute assigned or deleted (any target: =, +=, for, with ... as, del): only on the candidate's own
    objects (self, or a name _own_objects vouches for).

    `torch.x = ...`, `type(t).add = f`, `x.data = y` on forward's input: anything else may be a module, a class, the
    harness's tensors or its state.
    """
    line, base = node.lineno, node.value
    root = _root(base)
    if qualified_name(base, aliases):
        out.append(rule_finding("timing-tamper", line, f"patches {short_text(node)}, an attribute of {qualified_name(base, aliases)}"))
    elif not (isinstance(root, ast.Name) and (root.id == "self" or id(root) in own)):
        out.append(finding("timing-tamper", line, f"assigns to {short_text(node)}, an attribute of an object other than "
                                                  f"self or one this code made with torch (what the gate cannot name "
                                                  f"may be torch, the harness or its inputs)",
                           "keep state on self; do not patch modules, classes or objects you did not make"))


def _own_objects(tree: ast.Module, aliases: dict[str, str]) -> set[int]:
    """ids of Name nodes that stand for an object the candidate made: in one scope (a function, or the module),
    a name every binding of which is a new object: a torch class constructed (`conv = nn.Conv2d(...)`) or a tensor
    created (`w = torch.empty(n)`, _CREATION); a torch call that may return its argument (`torch.Tensor.contiguous(x)`)
    does not count. A loop variable over what self holds (`for m in self.modules():`) counts as self does; nor
    does the first argument of a torch.autograd.Function's staticmethod that the file never
    names other than by defining it (autograd's `ctx`). A name also
    bound any other way there (a parameter, `m = type(x)`, a loop, global) is not vouched for, and neither is a
    name read in a nested function (it may be that function's parameter or the enclosing scope's)."""
    own: set[int] = set()
    # autograd's context: the first argument of a torch.autograd.Function's staticmethod, while the file never
    # names that method (`Fn.forward(torch.Tensor, ...)` would pass any object as ctx; Fn.apply passes autograd's)
    named = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} | {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    autograd_methods = {id(f) for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
                        and any(qualified_name(b, aliases) == "torch.autograd.Function" for b in c.bases)
                        for f in c.body if isinstance(f, ast.FunctionDef) and f.name not in named
                        and [ast.unparse(d) for d in f.decorator_list] == ["staticmethod"]}
    scopes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    for scope in scopes:
        nodes = list(_scope_nodes(scope))
        made = {id(t) for n in nodes if isinstance(n, (ast.Assign, ast.AnnAssign)) and isinstance(n.value, ast.Call)
                and _makes_new(qualified_name(n.value.func, aliases) or "")
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])}
        # `for m in self.modules():` / `for layer in self.layers:` walks what self holds, as self.x.y = ... may
        made |= {id(n.target) for n in nodes if isinstance(n, ast.For) and isinstance(n.target, ast.Name)
                 and _reached_from_self(n.iter)}
        good: dict[str, bool] = {}

        def bind(name: str, ok: bool) -> None:
            good[name] = good.get(name, True) and ok
        if not isinstance(scope, ast.Module):
            for k, a in enumerate(_parameters(scope)):
                bind(a.arg, k == 0 and id(scope) in autograd_methods)
        for n in nodes:
            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                bind(n.id, id(n) in made)
            elif isinstance(n, (ast.Global, ast.Nonlocal)):
                for name in n.names:
                    bind(name, False)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not scope:
                bind(n.name, False)
            elif isinstance(n, ast.alias):
                bind((n.asname or n.name).split(".")[0], False)
        own |= {id(n) for n in nodes if isinstance(n, ast.Name) and good.get(n.id)}
    return own


def _on_the_way_to_allowed_names(tree: ast.Module, aliases: dict[str, str]) -> set[int]:
    """ids of the inner attributes of a chain that names one of ALLOWED_NAMES (`torch.autograd` of
    `torch.autograd.Function`): on its own the module would be refused, on the way to the name it is not."""
    out: set[int] = set()
    for node in ast.walk(tree):
        q = qualified_name(node, aliases) if isinstance(node, ast.Attribute) else None
        allowed = next((n for n in ALLOWED_NAMES if q and (q == n or q.startswith(n + "."))), None)
        inner = node.value if allowed else None
        while isinstance(inner, ast.Attribute) and allowed.startswith((qualified_name(inner, aliases) or "\0") + "."):
            out.add(id(inner))
            inner = inner.value
    return out


def _local_names(tree: ast.Module) -> set[int]:
    """ids of Name nodes that are a function's local variable (`def forward(self, input)`, `type = x.dtype`): a
    name bound anywhere in a function (a parameter, an assignment, a loop target) is local throughout it, so it
    never reaches the builtin of that spelling. Targets inside comprehensions (their own scope) do not make a
    name local; names declared global or nonlocal and module-level names (`del` there would uncover the
    builtin) are never counted."""
    out: set[int] = set()
    for scope in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))):
        nodes = list(_scope_nodes(scope))
        comprehension = {id(x) for n in nodes if isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp))
                         for x in ast.walk(n)}
        local = {a.arg for a in _parameters(scope)}
        local |= {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                  and id(n) not in comprehension}
        local -= {name for n in nodes if isinstance(n, (ast.Global, ast.Nonlocal)) for name in n.names}
        out |= {id(n) for n in nodes if isinstance(n, ast.Name) and n.id in local}
    return out


# torch functions that return a new tensor, never one of their arguments
_CREATION = {f"torch.{f}" for f in "empty zeros ones full rand randn randint tensor arange linspace eye empty_strided "
             "empty_like zeros_like ones_like full_like rand_like randn_like".split()}


def _makes_new(qual: str) -> bool:
    """Whether calling the torch name `qual` makes a new object: a class of torch (nn.Conv2d, nn.Parameter) or
    a creation function (_CREATION)."""
    if qual in _CREATION:
        return True
    parts = qual.split(".")
    if parts[0] != "torch" or name_verdict(qual):
        return False
    obj = _module("torch")
    for p in parts[1:]:
        obj = _static(obj, p)
    return isinstance(obj, type)


def _reached_from_self(node: ast.AST) -> bool:
    """Whether `node` is self followed by attributes, items and calls of them (`self.modules()`, `self.blocks[0]`)."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return isinstance(node, ast.Name) and node.id == "self"


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> list[ast.arg]:
    """Every parameter a def or lambda binds: positional-only, ordinary, keyword-only, *args and **kwargs."""
    args = function.args
    return args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]


def _scope_nodes(scope: ast.AST):
    """Every node of `scope`'s own code: its body without the bodies of functions, lambdas and classes defined
    in it (their def nodes are included, as bindings of their names)."""
    todo = list(scope.body) if isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else [scope.body]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            todo.extend(node.decorator_list)  # decorators and defaults run in this scope
            todo.extend(d for d in node.args.defaults + node.args.kw_defaults if d is not None)
        elif isinstance(node, ast.ClassDef):  # its body is a scope of its own; bases and decorators run here
            todo.extend(node.decorator_list + node.bases + [k.value for k in node.keywords])
        elif isinstance(node, ast.Lambda):
            todo.extend(d for d in node.args.defaults + node.args.kw_defaults if d is not None)
        else:
            todo.extend(ast.iter_child_nodes(node))


def _check_alias_meanings(tree: ast.Module, aliases: dict[str, str], out: list[Finding]) -> None:
    """A name that stands for a module or a torch name (`T = torch`, `import torch.nn as nn`) has that one meaning
    in the whole file: the alias table is the file's, not a scope's, so `T = torch` at module level beside
    `T = torch.autograd.Function` in a function would let `T.save` in a third place be read as the wrong one."""
    meanings: dict[str, dict[str | None, int]] = {}

    def bind(name: str, q: str | None, line: int) -> None:
        meanings.setdefault(name, {}).setdefault(q, line)
    assigned: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                bind(a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0], n.lineno)
        elif isinstance(n, ast.ImportFrom):
            for a in n.names:
                bind(a.asname or a.name, f"{n.module}.{a.name}" if n.module and not n.level else None, n.lineno)
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                if isinstance(t, ast.Name):
                    assigned.add(id(t))
                    bind(t.id, qualified_name(n.value, aliases) if n.value is not None else None, n.lineno)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)) and id(n) not in assigned:
            bind(n.id, None, n.lineno)
        elif isinstance(n, ast.arg):
            bind(n.arg, None, n.lineno)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(n.name, None, n.lineno)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            bind(n.name, None, n.lineno)
        elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            bind(n.name, None, n.lineno)
    for name, seen in meanings.items():
        if len(seen) > 1 and any(q is not None for q in seen):
            shown = " and ".join(q or "something else" for q in seen)
            out.append(finding("introspection", max(seen.values()), f"binds {name} to {shown}: a name that stands for a "
                                                                    f"module or a torch name has one meaning in the file",
                               "give each its own name"))


def _check_module_values(tree: ast.Module, aliases: dict[str, str], out: list[Finding], modules: frozenset[str]) -> None:
    """A module may only be named: read through an attribute (`torch.x`), given to getattr/hasattr, or bound to a
    plain name (`T = torch`, followed as an alias). Anywhere else (`[torch][0]`, `(lambda: torch)()`, `f(torch)`,
    `self.t = torch`, a class attribute, `match torch:`) the value leaves what qualified_name resolves, and every chain read
    from it (`[torch][0]._C`, `.cuda.Stream()`, `.nn.modules.module.sys`) would go unchecked."""
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    for node in ast.walk(tree):
        if not (isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load)
                or isinstance(node, ast.Call)):  # getattr(torch, "cuda") is a module too
            continue
        q = qualified_name(node, aliases)
        if not q or not isinstance(_lookup(q, modules), types.ModuleType):
            continue
        up = parents.get(id(node))
        if isinstance(up, ast.Attribute) or isinstance(up, ast.Expr) or (
                isinstance(up, ast.Call) and isinstance(up.func, ast.Name) and up.func.id in _ATTRIBUTE_BUILTINS
                and up.args and up.args[0] is node) or (
                isinstance(up, ast.Assign) and up.value is node and len(up.targets) == 1
                and isinstance(up.targets[0], ast.Name) and not isinstance(parents.get(id(up)), ast.ClassDef)):
            continue
        out.append(finding("introspection", node.lineno, f"uses the module {q} as a value ({short_text(up or node)}), "
                                                         f"where the gate cannot follow what is read from it",
                           f"name the module directly ({q}.name) or bind it to a plain name (M = {q})"))


def _check_attribute(node: ast.Attribute, aliases: dict[str, str], float32: bool, out: list[Finding],
                     modules: frozenset[str]) -> None:
    _check_name(node.lineno, node.attr, qualified_name(node, aliases) or "", node.value, aliases, float32, out, modules)


def _check_name(line: int, attr: str, q: str, value: ast.AST, aliases: dict[str, str], float32: bool,
                out: list[Finding], modules: frozenset[str]) -> None:
    """The rules on one attribute `attr` of `value` (written x.attr or getattr(x, "attr")); q: its dotted name;
    modules: the gate profile's extra modules."""
    parts = q.split(".")
    if re.fullmatch(r"__\w+__", attr) and not (attr == "__init__" and (
            (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super")
            or qualified_name(value, aliases) == "torch.nn.Module")):
        out.append(rule_finding("introspection", line, f"accesses the dunder attribute {attr}"))
    elif attr in ("as_subclass", "_make_subclass", "_make_wrapper_subclass"):
        out.append(rule_finding("tensor-subclass", line, f"uses {attr}"))
    elif attr in FILE_METHODS:
        out.append(rule_finding("process-or-file-or-network", line, f"calls .{attr}, which reads or writes files or shared "
                                                         f"memory"))
    elif attr in ("ctypes", "_ctypes", "ctypeslib"):  # numpy arrays carry the ctypes module (a.ctypes._ctypes)
        out.append(rule_finding("process-or-file-or-network", line, f"uses .{attr}, a way to native code"))
    elif attr in FRAME_ATTRIBUTES or _FRAME_ATTRIBUTE.fullmatch(attr):
        out.append(rule_finding("introspection", line, f"reads .{attr}, which reaches frames, generators, coroutines or code "
                                             f"objects (the harness's own state)"))
    elif attr in STREAM_ATTRIBUTES or (q.startswith("torch.cuda.") and len(parts) == 3
                                       and re.search(r"(?i)stream", attr) and attr != "current_stream"):
        out.append(rule_finding("side-stream", line, f"uses .{attr}, which makes, wraps or switches to another stream"))
    elif attr in EVENT_ATTRIBUTES:
        out.append(rule_finding("timing-tamper", line, f"uses .{attr}, a CUDA event or graph"))
    elif not q and not _self_rooted(value) and (attr in MODULE_ATTRIBUTES or attr.startswith("_")):
        what = "a module" if attr in MODULE_ATTRIBUTES else "a private attribute"
        out.append(finding("introspection", line, f"reaches .{attr}, {what}, through {short_text(value)}, which the gate "
                                                  f"cannot resolve to a name",
                           "name modules directly (torch.x, F.x) and keep private state on self"))
    elif parts[0] == "torch" and len(parts) > 1:
        if q.startswith("torch.cuda.") and parts[2] in ("Stream", "stream", "set_stream", "ExternalStream", "StreamContext"):
            out.append(rule_finding("side-stream", line, f"uses {q}"))
        elif q == "torch.Stream":
            out.append(rule_finding("side-stream", line, f"uses {q}"))
        elif q == "torch.Event" or (q.startswith("torch.cuda.") and parts[2] in (
                "Event", "graph", "graphs", "CUDAGraph", "make_graphed_callables", "set_device", "set_sync_debug_mode")):
            out.append(rule_finding("timing-tamper", line, f"uses {q}"))
        elif parts[1] == "multiprocessing":
            out.append(rule_finding("threads", line, f"uses {q}"))
        elif parts[1] in _TORCH_INTERNALS or (q not in _INIT_HELPERS and any(
                p.startswith("_") and not p.startswith("__") for p in parts[1:])) or (
                parts[1] == "utils" and len(parts) > 2 and parts[2] != "cpp_extension"):
            out.append(rule_finding("introspection", line, f"reaches into torch internals ({q})"))
        elif q.startswith("torch.utils.cpp_extension.") and q != LOAD_INLINE:
            out.append(rule_finding("dynamic-build", line, f"uses {q}; only load_inline with literal sources is allowed"))
        elif float32 and _LOW_DTYPES.fullmatch(q):
            out.append(rule_finding("precision-downgrade", line, f"uses {q}, lower precision than the task's float32"))
        elif name_verdict(q, modules):
            out.append(rule_finding(*_rule_line_what(name_verdict(q, modules), line)))
    elif float32 and _LOW_DTYPES.fullmatch(q):  # numpy.float16
        out.append(rule_finding("precision-downgrade", line, f"uses {q}, lower precision than the task's float32"))
    elif q and name_verdict(q, modules):  # math.x, typing.x, a profile's modules
        out.append(rule_finding(*_rule_line_what(name_verdict(q, modules), line)))


def _root(node: ast.AST) -> ast.AST:
    """The expression an attribute chain starts from: `a` of `a.b.c`, `f(x)` of `f(x).b`."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


def _self_rooted(node: ast.AST) -> bool:
    """Whether `node` is self, super() or an attribute chain on them (the candidate's own objects)."""
    root = _root(node)
    return (isinstance(root, ast.Name) and root.id == "self") or (
        isinstance(root, ast.Call) and isinstance(root.func, ast.Name) and root.func.id == "super")




def _rule_line_what(verdict: tuple[str, str], line: int) -> tuple[str, int, str]:
    return verdict[0], line, verdict[1]


# --- load_inline ----------------------------------------------------------------------------------
def _load_inline_calls(tree: ast.AST, aliases: dict[str, str]) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and qualified_name(n.func, aliases) == LOAD_INLINE]


def _load_inline_refs(tree: ast.AST, aliases: dict[str, str]) -> list[int]:
    """Lines where load_inline is referred to other than by calling it (aliased, stored, passed on)."""
    called = {id(n.func) for n in _load_inline_calls(tree, aliases)}
    return [n.lineno for n in ast.walk(tree) if isinstance(n, (ast.Name, ast.Attribute)) and id(n) not in called
            and qualified_name(n, aliases) == LOAD_INLINE]


def evaluated_load_inline_calls(tree: ast.Module, aliases: dict[str, str]) -> list[dict | DynamicCode]:
    """Every load_inline call of the file with its constant arguments evaluated (_evaluate_call), or the DynamicCode
    saying why they are not constant. The gate checks and the compile step builds exactly these values.

    A name is looked up as Python does: in the function the call sits in when that function binds it anywhere
    (a parameter, an assignment, nonlocal), else at module level; a name of an enclosing function is not
    followed (it is not constant for this rule)."""
    module = _module_assigns(tree)
    enclosing = _enclosing_functions(tree)
    out: list[dict | DynamicCode] = []
    for call in _load_inline_calls(tree, aliases):
        function = enclosing.get(id(call))
        scope = module
        if function is not None:  # a name an enclosing function binds is that function's: never a constant here
            closure = _enclosing_bound(enclosing, function, tree)
            scope = {**{k: v for k, v in module.items() if k not in closure},
                     **{k: [None] for k in closure}, **_scope_assigns(tree, function)}
        try:
            out.append(_evaluate_call(call, scope))
        except DynamicCode as e:
            out.append(e)
    return out


def _enclosing_bound(enclosing: dict[int, ast.AST], function: ast.AST, tree: ast.Module) -> set[str]:
    """Names bound by the functions around `function` (closures): for `function` they are not module-level."""
    names: set[str] = set()
    outer = enclosing.get(id(function))
    while outer is not None:
        names |= set(_scope_assigns(tree, outer))
        outer = enclosing.get(id(outer))
    return names


def _module_assigns(tree: ast.Module) -> dict[str, list]:
    """Module-level name -> the values bound to it; None for a binding or mutation that is not `name = value`."""
    return _scope_assigns(tree, tree)


def _enclosing_functions(tree: ast.Module) -> dict[int, ast.AST]:
    """id of every node -> the innermost function (def or lambda) whose body it sits in (a default argument or a
    decorator sits in the scope around the def); module-level nodes are absent."""
    out: dict[int, ast.AST] = {}

    def visit(node: ast.AST, function: ast.AST | None) -> None:
        for child in ast.iter_child_nodes(node):
            if function is not None:
                out[id(child)] = function
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                # its body runs in it; its decorators, defaults and annotations run where it is defined
                for name, value in ast.iter_fields(child):
                    for part in value if isinstance(value, list) else [value]:
                        if isinstance(part, ast.AST):
                            inner = child if name == "body" else function
                            if inner is not None:
                                out[id(part)] = inner
                            visit(part, inner)
            else:
                visit(child, function)
    visit(tree, None)
    return out


def _scope_assigns(tree: ast.Module, scope: ast.AST) -> dict[str, list]:
    """Name -> the values bound to it in `scope` (the module, or a function: its parameters are bindings that
    are not `name = value`); None for a binding or mutation that is not `name = value`. Mutations are looked
    for in the whole file (x.append(...), x[i] = ..., x.attr = ..., global x), so a name of the same spelling
    changed anywhere is never taken for a constant."""
    binds: dict[str, list] = {}
    if isinstance(scope, ast.Lambda):
        return {a.arg: [None] for a in _parameters(scope)}
    if not isinstance(scope, ast.Module):
        for a in _parameters(scope):
            binds.setdefault(a.arg, []).append(None)
    for n in ast.walk(tree):  # mutations anywhere: x.append(...), x[i] = ..., x.attr = ..., global x
        target = n.func.value if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) else \
            n.value if isinstance(n, (ast.Attribute, ast.Subscript)) and isinstance(n.ctx, (ast.Store, ast.Del)) else None
        names = n.names if isinstance(n, (ast.Global, ast.Nonlocal)) else [target.id] if isinstance(target, ast.Name) \
            else [n.name] if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name else \
            [n.rest] if isinstance(n, ast.MatchMapping) and n.rest else []
        for name in names:
            binds.setdefault(name, []).append(None)
    stack = list(scope.body)
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Assign) and all(isinstance(t, ast.Name) for t in n.targets):
            for t in n.targets:
                binds.setdefault(t.id, []).append(n.value)
            continue
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            binds.setdefault(n.target.id, []).append(n.value)
            continue
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            binds.setdefault(n.name, []).append(None)
            continue
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                binds.setdefault(a.asname or a.name.split(".")[0], []).append(None)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            binds.setdefault(n.id, []).append(None)
        stack += list(ast.iter_child_nodes(n))
    return binds


def _evaluate_call(call: ast.Call, assigns: dict[str, list]) -> dict:
    """The constant arguments of one load_inline call, sources as (text, line offset) pieces; raises DynamicCode."""
    line = call.lineno
    if len(call.args) > 3 or any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        raise DynamicCode(line, "calls load_inline with *args, **kwargs or arguments after cuda_sources by position")
    args = dict(zip(("name", "cpp_sources", "cuda_sources"), call.args)) | {k.arg: k.value for k in call.keywords}
    bad = sorted(set(args) - _KEYWORDS)
    if bad:
        raise DynamicCode(line, f"passes load_inline the argument {bad[0]}")
    for key in ("verbose", "with_cuda", "with_pytorch_error_handling"):
        if key in args and not (isinstance(args[key], ast.Constant) and args[key].value in (True, False, None)):
            raise DynamicCode(line, f"passes load_inline a {key} that is not True, False or None")

    def value(key: str) -> tuple[list[tuple[str, int]], bool]:
        node = args.get(key)
        if node is None or (isinstance(node, ast.Constant) and node.value is None):
            return [], True
        return _const(node, assigns, line)
    name, is_list = value("name")
    if is_list or not re.fullmatch(r"[A-Za-z_]\w{0,63}", name[0][0]):
        raise DynamicCode(line, "gives load_inline a name that is not a plain identifier string")
    has_functions = args.get("functions") is not None and not (
        isinstance(args["functions"], ast.Constant) and args["functions"].value is None)
    if has_functions and not all(re.fullmatch(r"[A-Za-z_]\w{0,127}", t) for t, _ in value("functions")[0]):
        # torch pastes each name into the C++ it generates (m.def("<name>", <name>, "<name>")), which no gate reads
        raise DynamicCode(line, "gives load_inline a function name that is not a plain identifier string")
    return {"name": name[0][0], "cpp_sources": value("cpp_sources")[0], "cuda_sources": value("cuda_sources")[0],
            "functions": [t for t, _ in value("functions")[0]] if has_functions else None,
            "extra_cflags": [t.strip() for t, _ in value("extra_cflags")[0] if t.strip()],
            "extra_cuda_cflags": [t.strip() for t, _ in value("extra_cuda_cflags")[0] if t.strip()],
            # KernelBench's own example passes extra_ldflags=[""]: blank entries are dropped
            "extra_ldflags": [t.strip() for t, _ in value("extra_ldflags")[0] if t.strip()],
            "extra_include_paths": [t.strip() for t, _ in value("extra_include_paths")[0] if t.strip()], "line": line}


def _const(node: ast.AST, assigns: dict[str, list], line: int, depth: int = 0) -> tuple[list[tuple[str, int]], bool]:
    """A constant string (one piece) or list of strings (a piece each): ([(text, line offset)], is_list).

    The offset is the file line of the literal's opening quote minus 1, so text line k sits at file line
    offset + k. That is exact for a literal written out in the file (a triple-quoted source starting with
    a newline included) and approximate when a string is concatenated from several literals (the later
    parts are numbered on from the first literal's line) or contains escaped newlines.
    """
    where = getattr(node, "lineno", line)
    if depth > 20:
        raise DynamicCode(line, "passes load_inline an argument that is too deeply indirect")
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [(node.value, node.lineno - 1)], False
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return [("".join(v.value for v in node.values), node.lineno - 1)], False
    if isinstance(node, (ast.List, ast.Tuple)):
        pieces = [_const(e, assigns, line, depth + 1) for e in node.elts]
        if any(is_list for _, is_list in pieces):
            raise DynamicCode(where, "passes load_inline a nested list")
        return [p[0][0] for p in pieces], True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        (left, left_list), (right, right_list) = (_const(x, assigns, line, depth + 1) for x in (node.left, node.right))
        if left_list != right_list:
            raise DynamicCode(where, "adds a string and a list in a load_inline argument")
        return (left + right, True) if left_list else ([(left[0][0] + right[0][0], left[0][1])], False)
    if isinstance(node, ast.Name):
        values = assigns.get(node.id, [])
        if len(values) != 1 or values[0] is None:
            raise DynamicCode(where, f"passes load_inline {node.id}, which is not a variable of the module or of the "
                                  f"enclosing function assigned once")
        return _const(values[0], assigns, line, depth + 1)
    src = ast.unparse(node)
    raise DynamicCode(where, f"builds a load_inline argument at run time ({src if len(src) < 60 else src[:56] + ' ...'})")
