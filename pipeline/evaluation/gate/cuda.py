"""Static gate, CUDA/C++ half: the rules on one source text, read off a tree-sitter-cuda parse.

`scan_cuda(text, line_offset, fmt, float32, profile)` walks the syntax tree (names of calls, types,
qualified identifiers, includes, macro bodies, attributes, inline asm) so that comments and
string contents never trigger a rule. A supplementary pass runs regular expressions over the
text with comments and strings blanked and line continuations spliced, to catch what a
misparse (digraphs, ERROR nodes, `cudaStream\\<newline>Create`) could hide from the tree.
The package's __init__ combines the scans of a candidate's sources and adds the whole-candidate rules
(device code present, entry point) and the Python rules of the kernelbench format. The gate profile
(gate.GateProfile) adds headers and, for the kernelbench format, lets torch calls in the C++ compute.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from functools import lru_cache

from tree_sitter import Node

from pipeline.core.records import Finding
import pipeline.evaluation.gate.source_text as source_text
from pipeline.evaluation.gate.load_time import global_init_findings
from pipeline.evaluation.gate.profile import GateProfile
from pipeline.evaluation.gate.rules import CUDA, make_finding
from pipeline.evaluation.gate.text_rules import asm_text_findings, include_allowed, text_findings
from pipeline.structure import cuda_ast


def finding(rule: str, line: int, what: str, advice: str | None = None) -> Finding:
    """An error finding of the CUDA/C++ rules: 'line N: what; advice [rule]', the advice from the rules table."""
    return make_finding(rule, CUDA, line, what, advice)


# --- names -> rules -------------------------------------------------------------------------------
# Kinds of name occurrence: call (called), ref (used as a value), type, decl (the name being
# declared), field (member access), method (member called), attr (inside an attribute), macro
# (a token of a #define body), text (a token of the supplementary regex pass).
ANY = frozenset({"call", "ref", "type", "decl", "field", "method", "attr", "macro", "text"})
USE = frozenset({"call", "ref", "macro"})      # generic words (open, kill, ...): only when used
TYPE = frozenset({"type", "macro"})
_PREC = "computes in lower precision than the task's float32"
# (rule, kinds, pattern matched in full against the name, or the qualified name if it has ::, what)
_NAME_RULES = [
    ("side-stream", ANY, r"cudaStreamCreate\w*|cuStreamCreate\w*", "creates a CUDA stream"),
    ("side-stream", ANY, r"cudaStreamPerThread|CUDA_API_PER_THREAD_DEFAULT_STREAM", "uses the per-thread default stream"),
    ("side-stream", ANY, r"getStreamFromPool|getStreamFromExternal|setCurrentCUDAStream|\w*CUDAStreamGuard",
     "switches to another stream"),
    ("threads", ANY, r"(::)?std::(thread|jthread|async)\b.*", "starts a host thread"),
    ("threads", TYPE, r"thread|jthread", "starts a host thread"),
    ("threads", USE, r"async|fork|vfork", "starts a host thread or process"),
    ("threads", ANY, r"pthread_\w+|thrd_create|omp_\w+|__kmpc_\w+|cudaLaunchHostFunc|cudaStreamAddCallback",
     "runs host threads or callbacks"),
    # torch's thread pools (at::launch runs its task on another thread, at::parallel_for on several)
    ("threads", ANY, r"(::)?(at|c10|torch)::(internal::\w+|(\w+::)*(launch|intraop_launch\w*|launch_no_thread_state"
     r"|parallel_for|parallel_reduce|invoke_parallel|\w*[Tt]hread[Pp]ool\w*|set_num_(interop_)?threads"
     r"|init_num_threads|lazy_init_num_threads))\b.*", "runs work on torch's host threads"),
    ("threads", ANY, r"intraop_launch\w*|launch_no_thread_state|parallel_for|parallel_reduce|invoke_parallel"
     r"|\w*ThreadPool\w*|get_thread_pool|set_num_interop_threads", "runs work on torch's host threads"),
    ("process-or-file-or-network", USE,
     r"system|popen|exec(l|lp|le|v|vp|vpe|ve)|fexecve|posix_spawnp?|fopen(64)?|freopen|fdopen|open(64|at)?|creat"
     r"|tmpfile|unlink|dlopen|dlmopen|dlsym|dlvsym|mmap(64)?|mprotect|shm_open|socket|connect|bind|listen|accept"
     r"|getenv|secure_getenv|setenv|putenv|unsetenv|syscall|ptrace|kill|prctl|ioctl|chdir",
     "accesses processes, files, the environment or the network"),
    ("process-or-file-or-network", ANY, r"__libc_\w+|__sys_\w+", "accesses processes, files, the environment or the network"),
    ("process-or-file-or-network", ANY, r"(::)?std::(system|getenv|fopen|freopen|tmpfile|[io]?fstream|filesystem)\b.*",
     "accesses processes, files, the environment or the network"),
    ("timing-tamper", ANY,
     r"cudaEvent\w*|cudaGraph\w*|cudaStream(Begin|End)Capture\w*|cudaStreamIsCapturing|cudaThreadExchangeStreamCaptureMode"
     r"|cudaDeviceReset|cudaThreadExit|cudaSetDevice(Flags)?|cudaSetValidDevices|cudaInitDevice|cudaProfilerSt(art|op)"
     r"|cudaDeviceSetLimit|cudaCtxResetPersistingL2Cache|cudaStreamSetAttribute|CUDAEvent|CUDAGraph",
     "interferes with timing or device state"),
    ("timing-tamper", USE, r"clock_gettime|clock_settime|gettimeofday|settimeofday", "reads or sets the host clock"),
    ("timing-tamper", ANY, r"(::)?(cuda::)?std::chrono\b.*", "reads the host clock"),
    ("ipc", ANY, r"cudaIpc\w*|cuIpc\w*", "shares GPU memory between processes"),
    ("driver-api", ANY, r"cu(Init|Ctx|Device|Mem|Module|Launch|Stream|Event|Func|Graph|Link|Get|Driver|Pointer|Tex|Surf"
     r"|Array|Occupancy|Library|Kernel|Tensor|Profiler|GreenCtx|Multicast|Signal|Wait|Import|External|Thread|Flush)\w*"
     r"|cudaGetDriverEntryPoint\w*", "calls the CUDA driver API"),
    ("dispatch-tamper", ANY,
     r"\w*DispatchKey\w*|AutoDispatch\w*|AutoNonVariableTypeMode|\w*tls_\w*dispatch\w*|\w*_dispatch_key_\w*"
     r"|\w*TorchDispatchMode\w*|\w*PythonDispatcher\w*|\w*PythonTLSSnapshot\w*|\w*DisableTorchDispatch\w*"
     r"|\w*FunctionalizationReapplyViews\w*|\w*RecordFunction\w*|enableRecordFunction|hasCallbacks|\w*GlobalCallback"
     r"|\w*ThreadLocalCallback\w*|ThreadLocalStateGuard|\w*LocalDispatchKeySet\w*",
     "changes torch's dispatcher state (hides operators from the runtime check)"),
    ("introspection", ANY, r"Py[A-Z][A-Za-z]*_\w+|(::)?(py|pybind11)::(module_?::import|eval|exec|eval_file|globals)\b.*",
     "calls into the Python interpreter"),
    ("load-time-code", ANY, r"(__)?(constructor|destructor|init_priority)(__)?", "runs code when the library loads"),
    ("load-time-code", frozenset({"attr"}), r"(__)?section(__)?", "runs code when the library loads"),
    ("symbol-alias", ANY, r"(__)?(ifunc|symver)(__)?", "renames a symbol with an attribute"),
    ("symbol-alias", frozenset({"attr"}), r"(__)?(alias|weakref)(__)?", "renames a symbol with an attribute"),
    ("precision-downgrade", ANY,
     r"__\w*(half|bfloat|bf16|fp8|fp6|fp4|tf32|e4m3|e5m2)\w*|nv_bfloat162?|half2|tf32|k(Half|BFloat16|Float16|Float8\w*)"
     r"|BFloat16|Float8_\w+|__h(add|sub|mul|div|fma|max|min|neg|abs|eq|ne|lt|le|gt|ge|equ|neu|ltu|leu|gtu|geu|isnan|isinf)\w*",
     _PREC),
    ("precision-downgrade", TYPE, r"half|Half", _PREC),
    ("precision-downgrade", frozenset({"method"}), r"half|bfloat16", _PREC),  # x.half() on a tensor
    ("precision-downgrade", ANY, r"(::)?(at|c10|torch)::ScalarType::(Half|BFloat16|ComplexHalf|Float8\w*)", _PREC),
    ("precision-downgrade", ANY, r"CUBLAS_\w*(TF32|FAST_16F|FAST_16BF|TENSOR_OP_MATH|COMPUTE_16F)\w*"
     r"|CUDA_[RC]_(16F|16BF|8\w*)|cublasHgemm\w*", _PREC + " (a cuBLAS half, TF32 or reduced-precision mode)"),
    ("torch-state", ANY, r"globalContext|setAllowTF32\w*|setFloat32MatmulPrecision|setAllow\w*Reduction\w*"
     r"|setBenchmarkCuDNN|setDeterministic\w*|setUserEnabled\w*|CUDACachingAllocator|emptyCache",
     "changes torch's global settings"),
    ("process-or-file-or-network", ANY,
     r"(::)?(torch|at|c10)::(\w+::)*(save|load|pickle_save|pickle_load|from_file)\b.*",
     "reads or writes files through torch"),
    ("introspection", ANY, r"(::)?(torch|at|c10)::jit\b.*", "runs TorchScript"),
    ("precision-downgrade", USE, r"h2?(exp|exp2|exp10|log|log2|log10|sqrt|rsqrt|rcp|sin|cos|floor|ceil|trunc|rint)", _PREC),
]
_COMPILED = [(rule, kinds, re.compile(pat), "::" in pat, what) for rule, kinds, pat, what in _NAME_RULES]
# torch/ATen calls a kernelbench extension may make: allocation, streams, options; everything else computes.
_TORCH_CPP_OK = {"empty", "empty_like", "zeros", "zeros_like", "empty_strided", "getCurrentCUDAStream",
                 "getDefaultCUDAStream", "current_device", "device", "dtype", "TensorOptions", "Scalar", "IntArrayRef",
                 "ArrayRef", "CUDAGuard", "OptionalCUDAGuard", "DeviceGuard", "device_of", "Device", "check"}
# tensor methods that compute (shared with the Python rules in compute.py)
COMPUTE_METHODS = frozenset("""matmul mm bmm addmm baddbmm addmv einsum dot mv outer sum mean softmax log_softmax relu relu_
exp exp_ log log_ log1p expm1 add add_ mul mul_ sub sub_ div div_ pow pow_ sqrt rsqrt tanh tanh_ sigmoid sigmoid_ gelu silu
max min amax amin argmax argmin clamp clamp_ clip clip_ abs abs_ neg norm var std cumsum cumprod prod sort topk conv1d
conv2d conv3d conv_transpose2d layer_norm batch_norm group_norm linear where masked_fill masked_fill_ index_select gather
scatter scatter_ scatter_add scatter_add_ copy_ clone fill_ maximum minimum logsumexp lerp addcmul addcdiv tril triu flip
roll repeat repeat_interleave erf erf_ sin cos reciprocal square t_ cpu numpy tolist item double half bfloat16 type
any all count_nonzero nonzero unique sign floor ceil round trunc frac fmod remainder max_pool2d avg_pool2d dropout
hardtanh leaky_relu elu selu softplus mish logsigmoid cross_entropy mse_loss nll_loss clamp_min clamp_min_ clamp_max
clamp_max_ threshold threshold_ hardswish hardsigmoid relu6 softmin logaddexp heaviside xlogy true_divide floor_divide
negative neg_ square_ exp2 sqrt_ rsqrt_ log2 log10 sinh cosh tan atan asin acos atan2 logit erfinv nan_to_num hypot
bitwise_and bitwise_or bitwise_xor bitwise_not logical_and logical_or logical_xor logical_not eq ne lt le gt ge
greater less greater_equal less_equal isnan isinf isfinite masked_select masked_scatter index_add index_add_
index_fill index_copy index_put index_put_ take_along_dim argsort msort kthvalue median nansum nanmean std_mean
var_mean cummax cummin logcumsumexp renorm cdist addr addbmm kron tensordot matrix_power inverse""".split())
_DECL_PARENTS = {"function_declarator", "init_declarator", "pointer_declarator", "reference_declarator",
                 "array_declarator", "parameter_declaration", "optional_parameter_declaration", "declaration",
                 "field_declaration", "preproc_def", "preproc_function_def", "preproc_params"}
_ATTR_NODES = {"attribute_specifier", "attribute_declaration", "attribute", "ms_declspec_modifier"}


@lru_cache(maxsize=65536)
def classify_name(name: str, qual: str, kind: str, fmt: str, float32: bool, profile: GateProfile) -> tuple[str, str] | None:
    """(rule, what) for a name occurrence that breaks a rule under the gate profile `profile`, else None."""
    for rule, kinds, pat, on_qual, what in _COMPILED:
        if kind in kinds and (rule != "precision-downgrade" or float32) and pat.fullmatch(qual if on_qual else name):
            return rule, f"{what} ({qual if '::' in qual else name})"
    if fmt == "kernelbench" and kind == "method" and name == "attr":
        return "introspection", "reaches Python attributes from C++ (.attr)"
    if fmt == "kernelbench" and not profile.torch_compute:
        root = qual.lstrip(":").split("::")[0]
        if kind == "call" and "::" in qual and root in ("torch", "at", "c10") and name not in _TORCH_CPP_OK:
            return "torch-compute-in-forward", f"calls the torch operation {qual} in the extension"
        if kind == "method" and name in COMPUTE_METHODS and name != "type":  # x.type() only reads in C++
            return "torch-compute-in-forward", f"calls the tensor method .{name}() in the extension"
    return None


# --- the scan -------------------------------------------------------------------------------------
@dataclass
class FunctionInfo:
    name: str
    line: int
    c_linkage: bool
    nparams: int | None           # None: variadic or unreadable
    kernel: bool                  # __global__ (or __device__ only): not callable from the host


@dataclass
class CudaScan:
    findings: list[Finding] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)             # __global__ functions defined
    functions: list[FunctionInfo] = field(default_factory=list)  # function definitions
    c_declared: set[str] = field(default_factory=set)            # names declared with C linkage
    declared: list[tuple[str, int]] = field(default_factory=list)  # function prototypes (name, file line)
    called: set[str] = field(default_factory=set)                # names called as functions


# One tree-sitter setup for the project: the structural analysis's (parse, walk, text).
_walk = cuda_ast.walk
_text = cuda_ast.text


def _qualified(node: Node) -> tuple[str, Node]:
    """Qualified name of a leaf (`at::cuda::getStreamFromPool`) and the outermost node naming it."""
    top, scopes = node, []
    if top.parent is not None and top.parent.type in ("template_type", "template_function", "template_method"):
        top = top.parent
    while top.parent is not None and top.parent.type == "qualified_identifier":
        top = top.parent
        scope = top.child_by_field_name("scope")
        scopes.append(_text(scope).split("<")[0] if scope is not None else "")
    return "::".join([*reversed(scopes), _text(node)]), top


def _kind(node: Node, top: Node) -> str:
    if any(a.type in _ATTR_NODES for a in _ancestors(node, 4)):
        return "attr"
    if node.type == "type_identifier":
        return "type"
    parent = top.parent
    if node.type == "field_identifier":
        fe = next((a for a in _ancestors(node, 3) if a.type == "field_expression"), None)
        call = fe.parent if fe is not None else None
        return "method" if call is not None and call.type == "call_expression" else "field"
    if parent is None:
        return "ref"
    if parent.type == "template_function" and parent.parent is not None:
        top, parent = parent, parent.parent
    if parent.type == "call_expression" and parent.child_by_field_name("function") == top:
        return "call"
    if parent.type in _DECL_PARENTS and (parent.child_by_field_name("declarator") == top
                                         or parent.child_by_field_name("name") == top
                                         or parent.type == "preproc_params"):
        return "decl"
    return "ref"


def _ancestors(node: Node, depth: int):
    n = node.parent
    while n is not None and depth > 0:
        yield n
        n, depth = n.parent, depth - 1


_TOKEN = re.compile(r"(?:[A-Za-z_]\w*\s*::\s*)*[A-Za-z_]\w*")


def _tokens(text: str):
    """(name, qualified name, offset) of each identifier token of a piece of C++ text."""
    for m in _TOKEN.finditer(text):
        qual = re.sub(r"\s+", "", m.group())
        yield qual.split("::")[-1], qual, m.start()


def _function_name(fn: Node) -> str | None:
    d = fn.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    if d is None:
        return None
    name = d.child_by_field_name("declarator")
    return _text(name) if name is not None else None


def _nparams(fn: Node) -> int | None:
    d = fn
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    params = d.child_by_field_name("parameters") if d is not None else None
    if params is None or any(c.type in ("...", "variadic_parameter_declaration") for c in params.children):
        return None
    decls = [c for c in params.children if c.type.endswith("parameter_declaration")]
    return 0 if len(decls) == 1 and _text(decls[0]).strip() == "void" else len(decls)


def _c_linkage(node: Node) -> bool:
    return any(a.type == "linkage_specification" and _text(a.child_by_field_name("value") or a) == '"C"'
               for a in _ancestors(node, 4))


def _device_context(node: Node, host_only: bool = False) -> bool:
    """Whether `node` is compiled for the GPU only: inside a __device__ or __global__ function (or lambda) that is
    not also __host__, and in no preprocessor branch taken only without __CUDA_ARCH__ (the host pass). A
    __host__ __device__ function is host code: its host copy runs whatever it holds (a syscall asm under
    `#ifndef __CUDA_ARCH__`), and a candidate could define __CUDA_ARCH__ itself. With `host_only` (a source the
    host compiler builds, a kernelbench cpp_sources string, where `__device__` means nothing) nothing is."""
    if host_only:
        return False
    child = node
    for a in _ancestors(node, 10_000):
        if a.type in ("preproc_ifdef", "preproc_if", "preproc_elif") and _host_branch(a, child):
            return False
        if a.type == "function_definition":
            specs = {c.type for c in a.children}
            return bool(specs & {"__device__", "__global__"}) and "__host__" not in specs
        if a.type == "lambda_expression":
            head = _text(a).split("{")[0]
            return "__device__" in head and "__host__" not in head
        child = a
    return False


def _host_branch(branch: Node, child: Node) -> bool:
    """Whether `child` of the #if/#ifdef/#elif `branch` is in a part the host pass compiles and the device
    pass does not: the body of `#ifndef __CUDA_ARCH__` / `#if !defined(__CUDA_ARCH__)`, or what follows
    `#else`/`#elif` of `#ifdef __CUDA_ARCH__` / `#if __CUDA_ARCH__ >= 800`."""
    if branch.type == "preproc_ifdef":
        name = branch.child_by_field_name("name")
        if name is None or _text(name) != "__CUDA_ARCH__":
            return False
        negated = _text(branch.children[0]).replace(" ", "") == "#ifndef"
    else:
        cond = branch.child_by_field_name("condition")
        text = _text(cond) if cond is not None else ""
        if "__CUDA_ARCH__" not in text:
            return False
        negated = bool(re.search(r"!\s*(defined\b|\(?\s*__CUDA_ARCH__)", text))
    alternative = branch.child_by_field_name("alternative")
    in_alternative = alternative is not None and alternative.id == child.id
    return negated != in_alternative


_AT_IN_SCOPE = re.compile(r"\busing\s+namespace\s+(::\s*)?(at|torch|c10)\b|\busing\s+(::\s*)?(at|torch|c10)\s*::\s*launch\b")
_OWN_LAUNCH = re.compile(r"\blaunch\s*=[^=]|[\w>&*]\s+launch\s*[;,)=]")  # auto launch = [&](...) {...}; F launch
_PTX_LOW = re.compile(r"\.(f16|bf16|e4m3|e5m2|e2m1|e3m2|e2m3|tf32|f8\w*|f6\w*|f4\w*)(x2|x4)?\b")


def _string_macros(root: Node) -> dict[str, str]:
    """Object-like macros whose bodies are string literals (and such macros): `#define TY "f16"` -> {TY: f16}."""
    bodies = {}
    for node in _walk(root):
        if node.type == "preproc_def":
            name, value = node.child_by_field_name("name"), node.child_by_field_name("value")
            if name is not None and value is not None:
                bodies[_text(name)] = _text(value)
    out: dict[str, str] = {}

    def expand(body: str, depth: int) -> str:
        parts = re.findall(r'"(?:\\.|[^"\\])*"|[A-Za-z_]\w*', _strip(body, keep_strings=True))
        return "".join(_unescape(p[1:-1]) if p.startswith('"') else
                       (expand(bodies[p], depth + 1) if p in bodies and depth < 8 else "") for p in parts)
    for name, body in bodies.items():
        out[name] = expand(body, 0)
    return out


def _unescape(literal: str) -> str:
    """The characters a C string literal's body stands for (\\x31 -> 1, \\061 -> 1, \\n -> newline)."""
    simple = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}

    def one(m: re.Match) -> str:
        e = m.group(1)
        if e[0] in "xX":
            return chr(int(e[1:], 16) % 0x110000)
        if e[0] in "01234567":
            return chr(int(e, 8))
        return simple.get(e, e)
    return re.sub(r"\\([xX][0-9a-fA-F]+|[0-7]{1,3}|.)", one, literal)


def _asm_text(asm: Node | None, macros: dict[str, str]) -> str:
    """The assembly of an asm statement as the compiler reads it: adjacent string literals concatenated,
    escapes decoded and string macros of the same source expanded (`"cvt.rn.f" "16"`, `"cvt.rn." TY`)."""
    if asm is None:
        return ""
    # every literal and name in it, in order (a macro name between literals may sit in an ERROR node)
    pieces = [n for n in _walk(asm) if n.type in ("string_literal", "raw_string_literal", "identifier")]
    out = []
    for p in pieces:
        text = _text(p)
        if p.type == "identifier":
            out.append(macros.get(text, ""))
        elif p.type == "raw_string_literal":
            m = re.match(r'(?:u8|u|U|L)?R"([^(]*)\((.*)\)\1"$', text, re.S)
            out.append(m.group(2) if m else text)
        elif p.type == "string_literal":
            out.append(_unescape(re.sub(r'^(?:u8|u|U|L)?"|"$', "", text)))
    return "".join(out)


def scan_cuda(text: str, line_offset: int = 0, *, fmt: str, float32: bool, profile: GateProfile,
              host_only: bool = False) -> CudaScan:
    """Apply the per-source CUDA/C++ rules of `profile` to `text`, whose line 1 is file line `line_offset + 1`.

    The rules read `source_text.compiler_text(text)`, the text the compile step builds; what in `text` has no
    single meaning is refused (`source-text`). `host_only`: the host compiler builds all of `text` (kernelbench
    cpp_sources), so no function in it is device code, whatever its annotations."""
    scan = CudaScan(findings=source_text.unreadable_findings(text, line_offset))
    if source_text.unreadable(text):  # the gate would read something else than the compiler: nothing more is read
        return scan
    text = source_text.compiler_text(text)
    seen: set[tuple[str, int]] = set()

    def add(rule: str, text_line: int, what: str) -> None:
        line = line_offset + text_line
        if (rule, line) not in seen:
            seen.add((rule, line))
            scan.findings.append(finding(rule, line, what))

    def name_rule(name: str, qual: str, kind: str, text_line: int) -> None:
        hit = classify_name(name, qual, kind, fmt, float32, profile)
        if hit:
            add(hit[0], text_line, hit[1])

    tree = cuda_ast.parse(text)
    macros = _string_macros(tree.root_node)
    unqualified_launch: list[int] = []
    readable_asm: dict[int, int] = {}  # per line: asm statements read whole (text_rules.text_findings)
    for node in _walk(tree.root_node):
        t, line = node.type, node.start_point.row + 1
        if t in ("identifier", "type_identifier", "field_identifier"):
            qual, top = _qualified(node)
            kind = _kind(node, top)
            name_rule(_text(node), qual.lstrip(":"), kind, line)
            if kind == "call" or (top.parent is not None and top.parent.type == "pointer_expression"
                                  and _text(top.parent).lstrip().startswith("&")):  # called, or its address taken
                scan.called.add(_text(node))
                if _text(node) == "launch" and "::" not in qual:
                    unqualified_launch.append(line)
        elif t == "preproc_include":
            path = node.child_by_field_name("path")
            raw = _text(path) if path is not None else ""
            if path is None or path.type not in ("system_lib_string", "string_literal"):
                add("forbidden-include", line, f"includes a header named by a macro ({raw})")
            elif not include_allowed(raw[1:-1], fmt, profile):
                add("forbidden-include", line, f"includes {raw}, which is not on the allow-list")
        elif t in ("preproc_def", "preproc_function_def"):
            body = node.child_by_field_name("value")
            if body is not None:
                body_text = _strip(_text(body))
                if "##" in body_text:
                    add("token-paste", line, "pastes tokens together with ## in a macro")
                for name, qual, _ in _tokens(body_text):
                    name_rule(name, qual, "macro", line)
        elif t == "gnu_asm_expression":
            if not _device_context(node, host_only):
                add("inline-asm-host", line, "has an asm statement in host code (outside a __device__ or __global__ "
                                             "function, in a __host__ __device__ one, or under #ifndef __CUDA_ARCH__)")
            assembly = node.child_by_field_name("assembly_code")
            inside = {n.id for n in _walk(assembly)} if assembly is not None else set()
            if assembly is not None and not any(  # a string macro between literals sits in an ERROR node
                    (n.type == "ERROR" and (n.id not in inside or any(c.type != "identifier" for c in n.children)))
                    or (n.type == "identifier" and n.id in inside and _text(n) not in macros) for n in _walk(node)):
                readable_asm[line] = readable_asm.get(line, 0) + 1
            asm_text_findings(_asm_text(assembly, macros), line, add)
            m = _PTX_LOW.search(_asm_text(assembly, macros))
            if float32 and m:
                add("precision-downgrade", line, f"{_PREC} (PTX .{m.group(1)}{m.group(2) or ''})")
        elif t == "function_definition":
            name = _function_name(node)
            specs = {c.type for c in node.children}
            if "__global__" in specs and name:
                scan.kernels.append(name)
            if name:
                scan.functions.append(FunctionInfo(name, line_offset + line, _c_linkage(node), _nparams(node),
                                                   kernel=bool(specs & {"__global__", "__device__"}) and "__host__" not in specs))
        elif t == "declaration":
            name = _function_name(node)
            if name and re.fullmatch(r"[A-Za-z_~][\w:<>, ~]*", name):  # not a function pointer's (*fp)
                scan.declared.append((name, line_offset + line))
                if _c_linkage(node):
                    scan.c_declared.add(name)
    # with `using namespace at;` (or torch, whose namespace uses at's) an unqualified launch(...) is at::launch, a
    # task on another thread; a function, lambda or variable of the source's own named launch is that instead
    if fmt == "kernelbench" and _AT_IN_SCOPE.search(text) and not _OWN_LAUNCH.search(text) \
            and not any(f.name.split("::")[-1] == "launch" for f in scan.functions):
        for line in unqualified_launch:
            add("threads", line, "calls launch, which the source does not define (at::launch runs it on another thread)")
    global_init_findings(tree.root_node, add)
    _supplement(text, add, fmt, float32, profile, readable_asm)
    return scan


# --- supplementary regex pass over comment- and string-free text ----------------------------------
_LEXEME = re.compile(source_text.LITERALS, re.S)  # comments, numbers, strings: as the compiler lexes
# A cast to a stream handle: C-style, named (static_cast, reinterpret_cast, bit_cast), functional (cudaStream_t(v)),
# __builtin_bit_cast, to the handle's pointer or reference type or to decltype of a stream variable. Only a null
# handle or torch's current (or default) stream may be cast: any other value names a stream the harness did not
# pass (2 is the per-thread stream; an integer from Python can be any stream).
_STREAM_TYPE = (r"(?:const\s+)?(?:struct\s+)?(?:cudaStream_t|CUstream|CUstream_st|cudaStream_st)\b\s*(?:const\s*)?[*&]*"
                r"\s*(?:const\s*)?|decltype\s*\([^()]*\)\s*[*&]*\s*")
_STREAM_CAST = re.compile(rf"\(\s*(?:{_STREAM_TYPE})\)|\b\w*_cast\s*<\s*(?:{_STREAM_TYPE})>\s*(?=\()"
                          rf"|\b(?:cudaStream_t|CUstream)\s*(?=[({{])|__builtin_bit_cast\s*\(\s*(?:{_STREAM_TYPE}),")
_STREAM_ALIAS = re.compile(r"\btypedef\b[^;{}]*\b(cudaStream_t|CUstream|CUstream_st|cudaStream_st)\b"
                           r"|\busing\s+\w+\s*=[^;{}]*\b(cudaStream_t|CUstream|CUstream_st|cudaStream_st)\b"
                           r"|\bunion\b[^;{}]*\{[^}]*\b(cudaStream_t|CUstream|CUstream_st|cudaStream_st)\b")
_NULL_OR_CURRENT = re.compile(r"\(*\s*(0+[uUlL]*|0[xX]0+[uUlL]*|nullptr|NULL)\s*\)*|\{\s*\}"
                              r"|.*\b(getCurrentCUDAStream|getDefaultCUDAStream)\s*\(.*", re.S)


def _cast_operand(code: str, pos: int) -> str:
    """The expression a cast ending at `pos` applies to: a bracketed group, or a name, number or call chain."""
    i = pos
    while i < len(code) and code[i] in " \t\n":
        i += 1
    while i < len(code) and code[i] in "&*!~+- \t\n":  # unary operators: *(long*)&v
        i += 1
    start, depth = i, 0
    while i < len(code):
        c = code[i]
        if depth == 0 and code.startswith("->", i):
            i += 2
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                break
            depth -= 1
            if depth == 0 and code[start] in "({" and i > start:
                return code[start:i + 1]
        elif depth == 0 and not (c.isalnum() or c in "_:."):
            break
        i += 1
    return code[start:i]


def _blank(m: re.Match, keep_strings: bool) -> str:
    s = m.group()
    if s.startswith(("//", "/*")) or (not keep_strings and not s[0].isdigit()):  # a number is code
        return re.sub(r"[^\n]", " ", s)
    return s


def _strip(text: str, keep_strings: bool = False) -> str:
    """`text` with comments (and, unless keep_strings, string and char literals) blanked; newlines kept."""
    return _LEXEME.sub(lambda m: _blank(m, keep_strings), text)


def _supplement(text: str, add, fmt: str, float32: bool, profile: GateProfile,
                readable_asm: dict[int, int]) -> None:
    # splice backslash-newlines as the preprocessor does, remembering the original line of each position
    splices: list[int] = []
    parts, pos = [], 0
    for m in re.finditer(r"\\[ \t]*\r?\n", text):
        parts.append(text[pos:m.start()])
        pos = m.end()
        splices.append(sum(map(len, parts)))
    spliced = "".join(parts) + text[pos:]

    def line_of(offset: int) -> int:
        return spliced.count("\n", 0, offset) + bisect.bisect_right(splices, offset) + 1

    code = _strip(spliced)
    for name, qual, off in _tokens(code):
        hit = classify_name(name, qual, "text", fmt, float32, profile)
        if hit:
            add(hit[0], line_of(off), hit[1])
    text_findings(code, _strip(spliced, keep_strings=True), line_of, add, fmt, profile, readable_asm)
    if "##" in code:
        add("token-paste", line_of(code.index("##")), "pastes tokens together with ##")
    for m in _STREAM_CAST.finditer(code):
        operand = "" if m.group().startswith("__builtin") else _cast_operand(code, m.end())
        if m.group().startswith("__builtin") or not _NULL_OR_CURRENT.fullmatch(operand.strip()):
            shown = re.sub(r"\s+", " ", operand.strip())[:40] or "a value"
            cast = re.sub(r"[(\s]+$", "", re.sub(r"\s+", " ", m.group()))
            add("side-stream", line_of(m.start()), f"casts {shown} with {cast}, to a stream handle that may name a "
                                                   f"stream other than the current one")
    for m in _STREAM_ALIAS.finditer(code):
        add("side-stream", line_of(m.start()), "gives the stream handle type another name (typedef, using or a union)")
