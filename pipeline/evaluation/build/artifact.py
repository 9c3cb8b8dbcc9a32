"""The gate's second look: check what was built, not only what was written (after a successful compile).

    check_built(candidate, task, comp, cfg, profile) -> list[Finding]     # severity "error" means rejected

c2cuda and light candidates (one .cu file), three checks, each in a scratch directory with a timeout:
1. Preprocessed rules. The compile's own `nvcc -c` keeps both of nvcc's preprocessing passes (`--keep`):
   the device pass (`__CUDA_ARCH__` defined, what `nvcc -E` gives) and the host pass; where a result has
   no such expansion (a kernelbench source, a result made elsewhere), `nvcc -E` makes the device pass here.
   In each pass the lines that come from the candidate's own file (followed through the `# N "file" flags` line markers, header content
   dropped) go through gate/cuda.py's scan_cuda again, mapped back to the candidate's line numbers. nvcc
   spells `__global__` as `__attribute__((global))` after preprocessing; those annotations are put
   back so the rules that need device context (inline asm) still see it.
2. Symbols. The candidate's translation unit is compiled to an object (`nvcc -c`, the Compiler's
   flags) and `nm` lists what it calls (undefined symbols) and what it defines. The object, not the
   shared library, is checked: the library also holds the statically linked CUDA runtime, which
   itself needs dlopen, pthread_create and more libc, so at library level those names cannot tell
   a hack from cudart. The object holds only code compiled from the candidate's file (its own
   functions, the inline header code it instantiates and nvcc's registration stubs); the candidate
   has no say in the link line, so every symbol the final library gains beyond this object comes
   from the fixed toolchain. Each undefined symbol must pass `symbol_allowed`; a refused one is
   named with the gate rule its name belongs to (system -> process-or-file-or-network, ...) or
   `unlisted-symbol`. A defined global symbol with the name of a runtime or libc function
   (interposing on cudaLaunchKernel, malloc, ...) is `symbol-alias`.
3. Load-time code. Every entry of the object's .init_array/.fini_array/.ctors/.dtors/.preinit_array
   and any .init/.fini section is resolved to its function; only nvcc's own registration
   constructor is allowed (`__sti____cudaRegisterAll`, one entry in every known-good build), so
   `__attribute__((constructor))`, a constructor pointer placed in .init_array, and C++ globals
   with dynamic initialisers (g++'s `_GLOBAL__sub_I_*`) are `load-time-code`. So are code that runs without an
   entry there (`resolver_findings`): an ifunc the object defines (nm `i`: the loader calls its resolver while
   relocating), a thread-local initialiser (`_ZTH*`, `_ZTW*`, `__tls_init`) and thread-local data (.tdata, .tbss).
4. System calls. `objdump -d` of the object's host code: a syscall, sysenter or int 0x80 instruction
   (inline asm in a `__host__ __device__` function, bytes placed in code) enters the kernel without a
   symbol the checks above would see; it is `process-or-file-or-network`. Host-only branches
   (`#ifndef __CUDA_ARCH__`) are checked as written (the gate), as expanded (step 1's host pass) and
   as built (here).

kernelbench candidates (where the extension .so exists, i.e. on GPU hosts): the .so links libtorch,
libc10 and Python dynamically, so no allow-list was measured for it; its undefined dynamic symbols
are checked against DENIED_IN_EXTENSION, names a torch extension never needs (cuBLAS, which the
kernelbench gate profile lets it link, is not among them), and against THREADS_IN_EXTENSION (torch's thread
pools: at::launch, at::parallel_for), its code against system-call instructions (step 4, every executable section
of the .so) and its defined symbols against ifuncs (step 3). Step 1 reads each cpp_sources string as host code
(the host compiler builds all of it). The CUDA rules of step 1 are those of the
gate profile (gate.GateProfile), which is part of the cache key of the findings.

Every step reads `source_text.compiler_text` of the candidate, the text the gate read and the compile step built.

What this does not protect against: code reached through data (a function pointer to a libc symbol
obtained at run time without naming it needs dlsym or a raw syscall, both refused, or an
executable mapping, refused by name), and differences between this object build and the cached
artefact (same source, same flags, same toolchain: deterministic up to __TIME__/__DATE__ strings).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from pipeline.core.config import CompileSection
from pipeline.evaluation.build.compile import (CompileResult, ExpansionTooLarge, object_flags, pass_lines,
                                              toolchain_id)
from pipeline.evaluation.build.tool_run import CompileBudget, run_build, run_limited, tool_env
from pipeline.evaluation.gate import GateProfile, gate_profile, gated_sources, task_is_float32
from pipeline.evaluation.gate.source_text import compiler_text
from pipeline.evaluation.gate.cuda import classify_name, scan_cuda
from pipeline.evaluation.gate.rules import ARTEFACT, make_finding
from pipeline.core.records import Candidate, Finding, Task

CHECK_VERSION = "6"  # part of the cache key of a check's findings: bump when the rules change (2: gate profiles,
                     # 3: system-call instructions, torch's thread pools in extensions, 4: torch compute in strict
                     # extensions, 6: ifunc and thread-local initialisers, cpp_sources as host code)

# What a candidate's own object may call (symbol_allowed). The toolchain part was derived by compiling every c2cuda and light
# implementation of the built-in tasks with the Compiler's flags (`nvcc -c`) and listing `nm -u`
# (tests/evaluation/test_artifact.py re-derives it): nvcc's registration and launch stubs, the C++
# runtime's guards and unwinder, atexit/exit (nvcc's fatbinary registration calls both). To that
# are added, as a family, the CUDA runtime calls an honest kernel's host code makes (launch,
# memory, errors, device queries, occupancy, function attributes), libm, and the C/C++ basics
# (memcpy/memset, console output, malloc/new, assert, std:: exception throwers).
TOOLCHAIN_SYMBOLS = frozenset("""
__cudaRegisterFatBinary __cudaRegisterFatBinaryEnd __cudaUnregisterFatBinary __cudaRegisterFunction
__cudaRegisterVar __cudaRegisterManagedVar __cudaRegisterTexture __cudaRegisterSurface __cudaInitModule
__cudaPushCallConfiguration __cudaPopCallConfiguration __cudaLaunchKernel __cudaGetKernel
__cudaLaunchKernel_helper cudaLaunchKernel cudaLaunchKernelExC cudaLaunchCooperativeKernel
__cxa_guard_acquire __cxa_guard_release __cxa_guard_abort __cxa_atexit __cxa_pure_virtual
__gxx_personality_v0 _Unwind_Resume __cxa_begin_catch __cxa_end_catch __cxa_rethrow __cxa_allocate_exception
__cxa_free_exception __cxa_throw __cxa_call_terminate __clang_call_terminate _ZSt9terminatev __stack_chk_fail
__dso_handle _GLOBAL_OFFSET_TABLE_ atexit exit abort __assert_fail
memcpy memmove memset memcmp strlen strcmp strncmp
printf fprintf puts putchar fputs fputc fflush snprintf sprintf vprintf vfprintf vsnprintf __printf_chk
__fprintf_chk __snprintf_chk __sprintf_chk __vsnprintf_chk stdout stderr
malloc calloc realloc free aligned_alloc posix_memalign
_Znwm _Znam _ZdlPv _ZdaPv _ZdlPvm _ZdaPvm _ZnwmRKSt9nothrow_t _ZnamRKSt9nothrow_t _ZnwmSt11align_val_t
_ZdlPvSt11align_val_t _ZdlPvmSt11align_val_t
""".split())
_CUDA_RUNTIME_OK = re.compile(
    r"cuda(GetLastError|PeekAtLastError|GetErrorString|GetErrorName|DeviceSynchronize|StreamSynchronize"
    r"|Malloc|MallocAsync|MallocPitch|MallocHost|HostAlloc|MallocManaged|Free|FreeAsync|FreeHost"
    r"|Memcpy|MemcpyAsync|Memcpy2D|Memcpy2DAsync|Memset|MemsetAsync|Memset2D|Memset2DAsync"
    r"|MemcpyToSymbol|MemcpyFromSymbol|MemcpyToSymbolAsync|MemcpyFromSymbolAsync|GetSymbolAddress|GetSymbolSize"
    r"|FuncSetAttribute|FuncGetAttributes|FuncSetCacheConfig|FuncSetSharedMemConfig|FuncGetName"
    r"|Occupancy\w+|GetDevice|GetDeviceCount|GetDeviceProperties(_v2)?|DeviceGetAttribute|DeviceGetLimit"
    r"|DriverGetVersion|RuntimeGetVersion|PointerGetAttributes|MemGetInfo|ChooseDevice|DeviceCanAccessPeer"
    r"|CreateChannelDesc|GetChannelDesc|StreamGetCaptureInfo(_v\d)?)")
# libm (float and double forms; __*_finite aliases of older glibc)
_LIBM = re.compile(
    r"(__)?(a?(sin|cos|tan)h?|atan2|exp(2|10|m1)?|log(2|10|1p|b)?|pow|sqrt|cbrt|hypot|fabs|fmod|remainder|floor|ceil"
    r"|trunc|round|lround|llround|rint|lrint|llrint|nearbyint|fmin|fmax|fdim|fma|frexp|ldexp|modf|scalbl?n|ilogb"
    r"|erfc?|[lt]gamma|copysign|nextafter|nan|sincos)[fl]?(_finite)?")
# std:: throwers std::vector and friends instantiate (_ZSt20__throw_length_errorPKc ...)
_STD_THROW = re.compile(r"_ZSt\d+__throw_\w+")
# per-thread-default-stream builds of the runtime API (cudaLaunchKernel_ptsz, cudaMemcpy_ptds): side-stream
_PER_THREAD = re.compile(r"cuda\w+_pt(s|d)z?")

# The only load-time function allowed: nvcc's fatbinary registration (measured: one per object).
_TOOLCHAIN_INIT = re.compile(r"_ZL\d+__sti____cudaRegisterAllv|__sti____cudaRegisterAll")
_INIT_SECTIONS = re.compile(r"\.(init_array|fini_array|preinit_array|ctors|dtors)(\.\d+)?|\.(init|fini)")
# A defined global with one of these names interposes on the runtime or libc.
_RESERVED_DEFINED = re.compile(r"cuda[A-Z]\w*|__cuda\w*|cu[A-Z]\w*|(malloc|free|calloc|realloc|memcpy|memset|dlopen"
                               r"|dlsym|exit|atexit|abort|printf|puts|write|read|open|close|mmap|pthread_\w+)")
# kernelbench extension .so (libtorch, Python and cudart linked dynamically): names it never needs.
DENIED_IN_EXTENSION = re.compile(
    r"system|popen|exec(l|lp|le|v|vp|vpe|ve)|fexecve|posix_spawnp?|fork|vfork|clone3?|syscall|socket|connect|bind"
    r"|listen|accept4?|dlopen|dlmopen|dlsym|dlvsym|pthread_create|thrd_create|open(64|at|at64)?|creat(64)?|fopen(64)?"
    r"|freopen(64)?|remove|rename(at2?)?|unlink(at)?|opendir|fdopendir|mmap(64)?|mprotect|ptrace|kill|prctl"
    r"|PyRun_\w+|Py_CompileString\w*|PyEval_EvalCode\w*|PyImport_\w+|cudaStreamCreate\w*|cudaLaunchHostFunc"
    r"|cudaStreamAddCallback|cudaEventCreate\w*|cudaIpc\w+|cudaGraph\w+|cudaStreamBeginCapture\w*"
    r"|cudaGetDriverEntryPoint\w*|cuGetProcAddress\w*|cudaDeviceReset|cudaSetDevice"
    r"|cuCtx(Create|SetCurrent|PushCurrent|PopCurrent|Destroy)\w*|cuDevicePrimaryCtx\w*|cuStreamCreate\w*"
    r"|cuLaunchHostFunc\w*|cuStreamAddCallback\w*|cuMemHostRegister\w*|cuEventCreate\w*|cuGraph\w+|cuIpc\w+"
    r"|cuStreamBeginCapture\w*")


# torch's host threading reached by an extension (demangled names): at::launch runs a task on another thread,
# at::parallel_for (inlined) calls OpenMP's runtime (GOMP_parallel, in torch's OpenMP builds) or
# at::internal::invoke_parallel; std::thread starts through _M_start_thread.
THREADS_IN_EXTENSION = re.compile(
    r"GOMP_\w+|omp_\w+|__kmpc_\w+"
    r"|(at|c10)::(launch|intraop_launch\w*|launch_no_thread_state|get_thread_pool|set_num_threads|set_num_interop_threads"
    r"|init_num_threads|internal::(invoke_parallel|_parallel_run|lazy_init_num_threads)|(\w+::)*\w*ThreadPool\w*::\w+)"
    r"|std::(thread|jthread)::\w+")
# x86-64 instructions that enter the kernel directly, past every name the symbol checks read (inline asm in a
# __host__ __device__ function, a .byte sequence): refused in the host code of an object or extension.
_SYSCALL_INSN = re.compile(r"^\s*[0-9a-f]+:\s+(syscall|sysenter|int\s+\$0x80)\b", re.M)


def symbol_allowed(name: str) -> bool:
    """Whether a candidate's object may call `name` (TOOLCHAIN_SYMBOLS and the families below it)."""
    if _PER_THREAD.fullmatch(name):
        return False
    return bool(name in TOOLCHAIN_SYMBOLS or _CUDA_RUNTIME_OK.fullmatch(name) or _LIBM.fullmatch(name)
                or _STD_THROW.fullmatch(name))


def rule_finding(rule: str, line: int, what: str, advice: str | None = None) -> Finding:
    """An error finding of the artefact check: 'line N: what; advice [rule]', the advice from the gate's rules
    table unless `advice` names this finding's own fix."""
    return make_finding(rule, ARTEFACT, line, what, advice)


# --- running the tools --------------------------------------------------------------------------
class BudgetSpent(Exception):
    """The candidate's CPU budget over all its builds ran out here: a compile_error, never a finding."""


def _run(argv: list[str], cwd: str, timeout_s: float, cfg: CompileSection | None = None,
         budget: CompileBudget | None = None) -> subprocess.CompletedProcess | str:
    """The finished process, or a sentence saying why it could not run. With `cfg`, a compiler run of the compile
    step (tool_run.run_build: its sandbox and limits), charged to `budget` (BudgetSpent when that runs out);
    without, a plain tool (nm, readelf, objdump) on what was built."""
    try:
        ran = run_build(argv, cwd, timeout_s, cfg, budget) if cfg is not None else \
            run_limited(argv, cwd, tool_env(cwd), timeout_s)
    except FileNotFoundError:
        return f"{argv[0]} is not installed"
    if ran.over_budget:
        raise BudgetSpent(budget.message())
    if ran.timed_out:
        return f"{argv[0]} exceeded its {timeout_s:.0f} s limit"
    return subprocess.CompletedProcess(argv, ran.returncode, ran.stdout, ran.stderr)


def build_object(source: str, cfg: CompileSection, scratch: str, budget: CompileBudget | None = None) -> str:
    """Compile `source` to scratch/candidate.o; returns '' or a sentence saying why it failed."""
    Path(scratch, "candidate.cu").write_text(source)
    proc = _run([cfg.nvcc, *object_flags(cfg), "-o", "candidate.o", "candidate.cu"], scratch, cfg.timeout_s, cfg,
                budget)
    if isinstance(proc, str):
        return proc
    return "" if proc.returncode == 0 else f"nvcc -c failed: {(proc.stderr or proc.stdout)[-300:]}"


def nm_symbols(path: str, scratch: str, *args: str) -> list[tuple[str, str, str, bool]]:
    """(type letter, mangled name, demangled name, has an address) of each symbol `nm <args>` lists; a symbol
    without an address is undefined (needed from elsewhere)."""
    raw, dem = (_run(["nm", *args, *extra, path], scratch, 60) for extra in ([], ["-C"]))
    if isinstance(raw, str) or isinstance(dem, str) or raw.returncode or dem.returncode:
        raise RuntimeError(f"nm {' '.join(args)} {path} failed: {raw if isinstance(raw, str) else raw.stderr}")

    def rows(text: str) -> list[tuple[str, str, bool]]:
        out = []
        for line in text.splitlines():
            m = re.match(r"^\s*([0-9a-fA-F]+\s+)?([A-Za-z?])\s+(.+)$", line)
            if m:
                out.append((m.group(2), m.group(3).strip(), m.group(1) is not None))
        return out
    a, b = rows(raw.stdout), rows(dem.stdout)
    return [(t, n, d, h) for (t, n, h), (_, d, _) in zip(a, b)] if len(a) == len(b) else [(t, n, n, h) for t, n, h in a]


def init_functions(obj: str, scratch: str) -> list[str]:
    """The function each load-time entry of the object points at (.init_array ... .ctors), in order;
    the section's own name for code placed in .init/.fini."""
    proc = _run(["readelf", "-W", "-S", "-s", "-r", obj], scratch, 60)
    if isinstance(proc, str) or proc.returncode:
        raise RuntimeError(f"readelf {obj} failed: {proc if isinstance(proc, str) else proc.stderr}")
    text = proc.stdout
    sections = {int(m.group(1)): m.group(2) for m in re.finditer(r"^\s*\[\s*(\d+)\]\s+(\S+)", text, re.M)}
    funcs: dict[tuple[str, int], str] = {}
    for m in re.finditer(r"^\s*\d+:\s+([0-9a-f]+)\s+\d+\s+(FUNC|NOTYPE)\s+\w+\s+\w+\s+(\d+)\s+(\S+)", text, re.M):
        funcs.setdefault((sections.get(int(m.group(3)), ""), int(m.group(1), 16)), m.group(4))
    out = [name for name in sections.values() if re.fullmatch(r"\.(init|fini)", name)]
    for block in re.split(r"\n(?=Relocation section )", text):
        head = re.match(r"Relocation section '\.rela?(\S+)'", block)
        if not head or not _INIT_SECTIONS.fullmatch(head.group(1)):
            continue
        for m in re.finditer(r"^[0-9a-f]+\s+[0-9a-f]+\s+\S+\s+[0-9a-f]+\s+(\S+)\s*([+-])\s*([0-9a-f]+)", block, re.M):
            target, addend = m.group(1), int(m.group(3), 16) * (1 if m.group(2) == "+" else -1)
            out.append(funcs.get((target, addend), target if addend == 0 else f"{target}+{addend:#x}"))
    for idx, name in sections.items():  # an init section without relocations (absolute entries) still runs code
        if _INIT_SECTIONS.fullmatch(name) and not re.search(rf"Relocation section '\.rela?{re.escape(name)}'", text):
            if re.search(rf"^\s*\[\s*{idx}\]\s+\S+\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+0*[1-9a-f]", text, re.M):
                out.append(f"{name} (absolute entries)")
    return out


# --- 1. the candidate's own lines after preprocessing --------------------------------------------
def preprocessed_findings(source: str, cfg: CompileSection, scratch: str, fmt: str, float32: bool,
                          profile: GateProfile, drop_includes: bool = False, line_offset: int = 0,
                          budget: CompileBudget | None = None, host_only: bool = False) -> list[Finding]:
    """gate/cuda.py's rules on the macro-expanded candidate lines (`nvcc -E`: the device pass), at the candidate's
    line numbers; for a source the compile step did not expand (`CompileResult.expanded`).

    drop_includes (kernelbench sources): #include lines are blanked first, so torch's headers are not
    needed; the candidate's own macros still expand. host_only: a kernelbench cpp_sources string (all host code).
    """
    if drop_includes:
        source = re.sub(r"(?m)^[ \t]*#[ \t]*include\b.*$", "", source)
    Path(scratch, "pre.cu").write_text(source)
    argv = [cfg.nvcc, f"-arch={cfg.arch}", *cfg.extra_flags, "-E", "pre.cu", "-o", "pre.ii"]
    proc = _run(argv, scratch, cfg.timeout_s, cfg, budget)
    if isinstance(proc, str) or proc.returncode or not Path(scratch, "pre.ii").exists():
        why = proc if isinstance(proc, str) else (proc.stderr or proc.stdout)[-300:]
        return [rule_finding("artifact-check", line_offset + 1, f"the source does not preprocess on its own ({why})")]
    try:
        lines = pass_lines(Path(scratch, "pre.ii"), "pre.cu", cfg.preprocessed_bytes)
    except ExpansionTooLarge as e:
        return [rule_finding("artifact-check", line_offset + 1, str(e))]
    return expanded_findings(lines, fmt, float32, profile, line_offset, host_only)


def expanded_findings(lines: list[tuple[int, str]], fmt: str, float32: bool, profile: GateProfile,
                      line_offset: int = 0, host_only: bool = False) -> list[Finding]:
    """gate/cuda.py's rules on (candidate line, text) pairs of one preprocessing pass, at the candidate's lines."""
    if not lines:
        return []
    text = "\n".join(t for _, t in lines) + "\n"
    out = []
    for f in scan_cuda(text, 0, fmt=fmt, float32=float32, profile=profile, host_only=host_only).findings:
        if f.rule in ("forbidden-include", "token-paste", "digraph", "directive", "pragma", "line-directive"):
            continue  # no directives survive preprocessing; the gate checked them on the source
        line = line_offset + lines[min(max((f.line or 1) - 1, 0), len(lines) - 1)][0]
        message = re.sub(r"^line \d+:", f"line {line}:", f.message)
        message = message.replace("; ", " (after macro expansion); ", 1)
        out.append(f.model_copy(update={"line": line, "message": message}))
    return out


# --- 2 and 3: the object ------------------------------------------------------------------------
def _line_of(source: str, name: str) -> int:
    """The first candidate line naming `name` (as a word, strings included), else 1."""
    m = re.search(rf"(?<![\w$]){re.escape(name)}(?![\w$])", source)
    return source.count("\n", 0, m.start()) + 1 if m else 1


def _base_name(demangled: str) -> str:
    """`std::thread::thread<...>(...)` -> `std::thread::thread`; `system` -> `system`."""
    name = re.sub(r"\(.*$", "", demangled)
    while re.search(r"<[^<>]*>", name):
        name = re.sub(r"<[^<>]*>", "", name)
    return name.strip()


def object_findings(source: str, obj: str, scratch: str, fmt: str, float32: bool,
                    profile: GateProfile) -> list[Finding]:
    """Symbol and load-time rules on the candidate's object file."""
    out: list[Finding] = []
    symbols = nm_symbols(obj, scratch, "--no-sort")  # one listing (two nm runs: raw and demangled) read three ways
    defined = [(kind, name, dem) for kind, name, dem, has_address in symbols if has_address]
    for kind, name, demangled in [(k, n, d) for k, n, d, has_address in symbols if not has_address]:
        if symbol_allowed(name):
            continue
        base = _base_name(demangled)
        short = base.split("::")[-1]
        rule_what = classify_name(short, base, "call", fmt, float32, profile) if base else None
        if rule_what is None and _PER_THREAD.fullmatch(name):
            rule_what = ("side-stream", f"uses the per-thread default stream ({name})")
        rule, what = rule_what or ("unlisted-symbol", f"calls {base or name}, which is not on the allow-list")
        where = _line_of(source, short) if short else 1
        out.append(rule_finding(rule, where, f"the built object needs the symbol {demangled} ({what})"))
    for kind, name, demangled in defined:  # external code and weak symbols (nm: T, W, V, w, v; i, an ifunc, either)
        if kind in "TWVwvi" and _RESERVED_DEFINED.fullmatch(name):
            out.append(rule_finding("symbol-alias", _line_of(source, name), f"defines {name}, a CUDA runtime or C library name"))
    readable_names = {name: dem for _, name, dem in defined}
    allowed_left = 1  # nvcc's registration constructor, once
    for fn in init_functions(obj, scratch):
        if _TOOLCHAIN_INIT.fullmatch(fn) and allowed_left:
            allowed_left -= 1
            continue
        readable = readable_names.get(fn, fn)
        what = ("initialises a global with a constructor" if fn.startswith("_GLOBAL__sub_I")
                else f"registers {readable} to run when the library loads or unloads")
        needle = next((w for w in ("constructor", "destructor", "init_array", "section") if w in source),
                      re.sub(r"\(.*$", "", readable).split("::")[-1])
        out.append(rule_finding("load-time-code", _line_of(source, needle), f"the built object {what}"))
    return out + resolver_findings(source, symbols, obj, scratch) + syscall_findings(source, obj, scratch)


# Code that runs before the entry point without an init-array entry: an ifunc's resolver (nm `i`, STT_GNU_IFUNC; the
# dynamic loader calls it while relocating), a thread-local variable's initialiser (`_ZTH*`, reached through the
# `_ZTW*` wrapper, and `__tls_init`), and thread-local data itself (.tdata/.tbss: an honest kernel's host code keeps
# no per-thread state).
_TLS_INIT = re.compile(r"_ZTH\w+|_ZTW\w+|__tls_init|__tls_guard")


def resolver_findings(source: str, symbols: list[tuple[str, str, str, bool]], binary: str, scratch: str,
                      tls: bool = True) -> list[Finding]:
    """load-time-code for each ifunc `binary` defines (`symbols`: nm_symbols of it) and, with `tls` (the candidate's
    own object; a torch extension also holds the thread-local state of torch's and pybind11's inline header code,
    so there the gate's thread-local rule stands alone), each thread-local initialiser and thread-local section."""
    out = []
    for kind, name, demangled, has_address in symbols:
        if not has_address:
            continue
        if kind == "i":
            out.append(rule_finding("load-time-code", _line_of(source, _base_name(demangled).split("::")[-1]),
                                    f"the built code defines {demangled} as an ifunc, whose resolver runs when the "
                                    f"library loads"))
        elif tls and _TLS_INIT.fullmatch(name):
            out.append(rule_finding("load-time-code", _line_of(source, "thread_local"),
                                    f"the built code initialises thread-local storage ({demangled})"))
    if tls:
        proc = _run(["readelf", "-W", "-S", binary], scratch, 60)
        if isinstance(proc, str) or proc.returncode:
            raise RuntimeError(f"readelf -S {binary} failed: {proc if isinstance(proc, str) else proc.stderr}")
        for name in re.findall(r"^\s*\[\s*\d+\]\s+(\.tdata|\.tbss)\S*", proc.stdout, re.M):
            out.append(rule_finding("load-time-code", _line_of(source, "thread_local"),
                                    f"the built code holds thread-local data ({name})"))
    return out


# Under a profile where torch may not compute (strict), what an extension may not reach in torch's C++. Decided
# here, from outside the child, on the built library: the child's runtime check (torch_guard) is in the
# candidate's process and so only a teacher. Kernels below the dispatcher (at::native, at::cpu, at::cuda's BLAS),
# operators other than allocation, views and metadata (at::_ops::<op>), and operator registration and the
# dispatcher itself (TORCH_LIBRARY, TORCH_LIBRARY_IMPL: an override of an ATen operator computes inside the
# harness's own calls) are refused.
_TORCH_BELOW_DISPATCH = re.compile(r"at::(native|cpu|meta|mps|xpu|hip|mtia|composite\w*|sparse\w*|quantized\w*"
                                   r"|nestedtensor\w*|mkldnn\w*|cuda::(blas|cublas|cublaslt|jit|detail::cub|cub))::")
# at::cuda holds both torch's CUDA utilities and, generated per operator (ATen/ops/<op>_cuda_dispatch.h), the CUDA
# kernel of every operator called past the dispatcher (`at::cuda::relu(x)`): the operators are snake_case names
# directly in the namespace, the utilities an extension may use are these (camelCase ones are utilities but the
# library handles, which run cuBLAS, cuSOLVER and cuSPARSE kernels).
_AT_CUDA_FUNCTION = re.compile(r"\bat::cuda::(\w+)\(")
AT_CUDA_UTILITIES = frozenset({"warp_size", "device_count", "current_device", "set_device", "is_available",
                               "getCurrentDeviceProperties", "getDeviceProperties", "getCurrentCUDAStream",
                               "getDefaultCUDAStream", "getNumGPUs", "device_synchronize", "stream_synchronize",
                               "check_device", "getDeviceIndexWithPrimaryContext", "getPointerDevice"})
_TORCH_REGISTRATION = re.compile(r"torch::(Library|detail::TorchLibraryInit|RegisterOperators|CppFunction)\b"
                                 r"|c10::(Dispatcher|RegisterOperators|OperatorHandle|TypedOperatorHandle|KernelFunction"
                                 r"|impl::OperatorEntry|BoxedKernel|RegistrationHandleRAII)\b")
_TORCH_OP = re.compile(r"at::_ops::(\w+)::(call|redispatch)\b")
_OVERLOAD = re.compile(r"[A-Z]\w*|out|int|dim|names|sizes|memory_format|using_ints|using_names|self_int|dtype"
                       r"|source_\w+|SymInt|Tensor\w*|Scalar\w*")


def torch_compute_symbol(demangled: str) -> str:
    """Why a strict extension may not need `demangled` ('' when it may)."""
    if _TORCH_BELOW_DISPATCH.search(demangled):
        return "runs a torch kernel directly, below the dispatcher"
    m = _AT_CUDA_FUNCTION.search(demangled)
    if m and m.group(1) not in AT_CUDA_UTILITIES and (m.group(1)[0] == "_" or m.group(1).islower()
                                                       or "Handle" in m.group(1)):
        return "runs a torch kernel directly, below the dispatcher"
    if _TORCH_REGISTRATION.search(demangled):
        return "registers or calls torch operators through the dispatcher"
    m = _TORCH_OP.search(demangled)
    if m:
        from pipeline.evaluation.compute_ops import ALLOWED_OPS, VIEW_COMPOSITES
        name, allowed = m.group(1), ALLOWED_OPS | VIEW_COMPOSITES
        if not (name in allowed or any(name.startswith(op + "_") and _OVERLOAD.fullmatch(name[len(op) + 1:])
                                       for op in allowed)):
            return f"calls the torch operator {name}, which computes"
    return ""


def extension_findings(source: str, so_path: str, scratch: str, profile: GateProfile) -> list[Finding]:
    """A kernelbench extension .so: its undefined dynamic symbols against DENIED_IN_EXTENSION and
    THREADS_IN_EXTENSION, under a strict profile against `torch_compute_symbol`, and its code against
    system-call instructions (every executable section), and the ifuncs and thread-local initialisers it defines."""
    out = resolver_findings(source, nm_symbols(so_path, scratch), so_path, scratch, tls=False)
    for kind, name, demangled, _ in nm_symbols(so_path, scratch, "-D", "--undefined-only"):
        why = "" if profile.torch_compute else torch_compute_symbol(demangled.split("@")[0])
        if why:
            base = _base_name(demangled.split("@")[0])
            out.append(rule_finding("torch-compute-in-forward", _line_of(source, base.split("::")[-1]),
                                    f"the built extension {why} ({base})"))
            continue
        plain = name.split("@")[0]
        if DENIED_IN_EXTENSION.fullmatch(plain):
            hit = classify_name(plain, plain, "call", "kernelbench", False, profile)
            rule = hit[0] if hit else "unlisted-symbol"
            out.append(rule_finding(rule, _line_of(source, plain), f"the built extension needs the symbol {plain}"
                                    + (f" ({hit[1]})" if hit else "")))
        elif THREADS_IN_EXTENSION.fullmatch(_base_name(demangled.split("@")[0])):
            base = _base_name(demangled.split("@")[0])
            out.append(rule_finding("threads", _line_of(source, base.split("::")[-1]),
                                    f"the built extension needs {base}, which runs work on another host thread"))
    return out + syscall_findings(source, so_path, scratch)


def syscall_findings(source: str, binary: str, scratch: str) -> list[Finding]:
    """One finding per function of `binary`'s host code that holds a syscall, sysenter or int 0x80 instruction."""
    proc = _run(["objdump", "-d", "-C", "--no-show-raw-insn", binary], scratch, 120)
    if isinstance(proc, str) or proc.returncode:
        raise RuntimeError(f"objdump -d {binary} failed: {proc if isinstance(proc, str) else proc.stderr}")
    out, function = [], "?"
    for line in proc.stdout.splitlines():
        head = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if head:
            function = head.group(1)
            continue
        m = _SYSCALL_INSN.match(line)
        if m:
            short = _base_name(function).split("::")[-1]
            out.append(rule_finding("process-or-file-or-network", _line_of(source, short) if short else 1,
                                    f"the built code of {function} holds the instruction {m.group(1)}, a direct "
                                    f"system call",
                                    "make no system calls: keep inline assembly in __device__ functions"))
    return out


# --- entry ----------------------------------------------------------------------------------------
def check_built(candidate: Candidate, task: Task, comp: CompileResult, cfg: CompileSection,
                profile: str = "strict", budget: CompileBudget | None = None) -> list[Finding]:
    """Findings on what the compile step built under the gate profile `profile` (see the module
    docstring); empty when all is well. Its builds are charged to `budget` (the candidate's, which its
    compile was charged to), BudgetSpent when it runs out; cached findings charge nothing.

    Runs the tools itself in a scratch directory; findings are cached by content under
    compile.cache_dir/artifact-checks. A candidate that no longer builds as an object here
    is rejected under `artifact-check` (it built once, so this is not the candidate's compile error).
    """
    float32, rules = task_is_float32(task), gate_profile(profile)
    key = hashlib.sha256("\0".join([CHECK_VERSION, candidate.format, candidate.code, str(float32), comp.key,
                                     rules.name, " ".join(object_flags(cfg)),
                                     toolchain_id(cfg.nvcc)]).encode()).hexdigest()[:24]
    cached = Path(os.path.expanduser(cfg.cache_dir), "artifact-checks", f"{key}.json")
    if cached.is_file():
        return [Finding.model_validate(f) for f in json.loads(cached.read_text())]
    findings = _check_built(candidate.model_copy(update={"code": compiler_text(candidate.code)}), comp, cfg, float32,
                            rules, budget)
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps([f.model_dump() for f in findings]))
    os.replace(tmp, cached)
    return findings


def _check_built(candidate: Candidate, comp: CompileResult, cfg: CompileSection, float32: bool,
                 profile: GateProfile, budget: CompileBudget | None = None) -> list[Finding]:
    scratch = tempfile.mkdtemp(prefix="cudaperf-artifact-")
    try:
        if candidate.format == "kernelbench":
            out = []
            for text, offset, host_only in gated_sources(candidate):
                out += preprocessed_findings(text, cfg, scratch, "kernelbench", float32, profile,
                                             drop_includes=True, line_offset=offset, budget=budget,
                                             host_only=host_only)
            for so in comp.extensions.values():
                if so and Path(so).is_file():
                    out += extension_findings(candidate.code, so, scratch, profile)
            return _dedupe(out)
        if comp.expanded:  # the compile kept both of nvcc's passes: each is checked, nothing is preprocessed again
            out = [f for lines in comp.expanded.values()
                   for f in expanded_findings(lines, candidate.format, float32, profile)]
        else:
            out = preprocessed_findings(candidate.code, cfg, scratch, candidate.format, float32, profile, budget=budget)
        obj = comp.object if comp.object and Path(comp.object).is_file() else ""  # the object the library was linked from
        if not obj:
            why = build_object(candidate.code, cfg, scratch, budget)
            if why:
                return _dedupe(out + [rule_finding("artifact-check", 1, f"the source did not build as an object for checking: {why}")])
            obj = str(Path(scratch, "candidate.o"))
        return _dedupe(out + object_findings(candidate.code, obj, scratch, candidate.format, float32, profile))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in sorted(findings, key=lambda f: (f.line or 0, f.rule)):
        if (f.rule, f.line, f.message) not in seen:
            seen.add((f.rule, f.line, f.message))
            out.append(f)
    return out
