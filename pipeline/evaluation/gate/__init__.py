"""The static gate: reject reward hacks before anything compiles or runs (docs/protocol.md, step 1).

    check_candidate(candidate, task, profile) -> list[Finding]   # severity "error" means rejected
    extract_load_inline(py_source) -> list[dict]                 # what the compile step builds
    cuda_sources_of(candidate) -> list[(text, line_offset)]
    gated_sources(candidate) -> list[(text, line_offset, host_only)]
    gate_profile(name) -> GateProfile                            # what eval.gate_profile accepts (PROFILES)

A candidate over MAX_CANDIDATE_BYTES is refused before any rule reads it. Every rule reads, and the compile step
builds, the text of source_text.compiler_text (CRLF made LF); characters with no single meaning are refused
(`source-text`), in the candidate file and in each extracted source. Every format's CUDA/C++
text goes through the tree-sitter rules of cuda.py. A kernelbench candidate is Python, read by
the allow-list rules of python.py; its `load_inline` sources must be constants, which are then
extracted and checked as CUDA with their lines mapped back into the Python file, and their compiler
flags, linker flags and include paths are checked here (_build_option_findings). What was built
is checked after compiling, by artifact.py. Each finding names the rule (`Finding.rule`: a row of rules.RULES, the
one table of rule names, stages, profiles and advice) and the 1-based line of the candidate file. The few rules
that differ between `eval.gate_profile` values are read from one GateProfile (PROFILES below) by the Python, CUDA,
artefact and runtime checks.
"""
from __future__ import annotations

import ast
import re

from pipeline.core.records import Candidate, Finding, Task
from pipeline.evaluation import light_abi
from pipeline.evaluation.gate.cuda import scan_cuda
from pipeline.evaluation.gate.source_text import compiler_text, unreadable, unreadable_findings
from pipeline.evaluation.gate.profile import PROFILES, GateProfile, gate_profile
from pipeline.evaluation.gate.python import check_python, import_aliases
from pipeline.evaluation.gate.python_inline import DynamicCode, evaluated_load_inline_calls
from pipeline.evaluation.gate.python_names import LOAD_INLINE, rule_finding
from pipeline.evaluation.gate.rules import CANDIDATE, RULES, make_finding

__all__ = ["LOAD_INLINE", "MAX_CANDIDATE_BYTES", "PROFILES", "RULES", "GateProfile", "check_candidate",
           "cuda_sources_of", "entry_points", "extract_load_inline", "gated_sources", "gate_profile", "task_is_float32"]
MAX_CANDIDATE_BYTES = 256 * 1024  # larger candidates are refused unread (a policy answer is a few KB)
# Rules an answer breaks by a slip in its form, not by an attempt on the reward: the entry point misnamed or with the
# wrong parameters, Python that does not parse. Where every error of a candidate is one of these its verdict is
# `format_error` (the reward of a form slip), not `rejected` (a caught hack's, the lowest).
FORM_RULES = frozenset({"missing-entry-point", "syntax"})


# --- load_inline build options (flags, linker flags, include paths) under a profile ----------------
_SAFE_FLAG = re.compile(r"-O[0-3s]|-?-use_fast_math|--?std=c\+\+\d\d|-lineinfo|--extended-lambda|--expt-relaxed-constexpr"
                        r"|--expt-extended-lambda|-w|-Wall|-Wno-[\w-]+|-D(?!_[_A-Z])[A-Za-z_]\w*(=[0-9.]+)?|-U(?!_[_A-Z])\w+|-?-maxrregcount=\d+"
                        r"|-Xptxas=?-v|--ptxas-options=-v|-v|-?-restrict")
# absolute extra_include_paths a profile with include_paths accepts: the CUDA toolkit's and torch's own
_INCLUDE_DIRS = re.compile(r"/usr/local/cuda[\w.-]*/(targets/[\w-]+/)?include(/[\w.+-]+)*"
                           r"|/[\w.+/-]*/(site|dist)-packages/torch/include(/[\w.+-]+)*")


def _build_option_findings(call: dict, profile: GateProfile) -> list[Finding]:
    """The rules on one load_inline call's flags, linker flags and include paths under `profile`."""
    out, line = [], call["line"]
    for flag in call["extra_cflags"] + call["extra_cuda_cflags"]:
        if re.search(r"PER_THREAD_DEFAULT_STREAM|default-stream", flag):
            out.append(rule_finding("side-stream", line, f"compiles with {flag}"))
        elif not (_SAFE_FLAG.fullmatch(flag) or flag in profile.ldflags):
            out.append(rule_finding("compile-flags", line, f"passes the compiler flag {flag!r}"))
    if call["extra_ldflags"] and not profile.ldflags:
        out.append(rule_finding("dynamic-build", line, "passes load_inline linker flags (extra_ldflags)",
                                f"link no libraries (the {profile.name} gate profile takes no linker flags)"))
    for flag in call["extra_ldflags"] if profile.ldflags else []:
        if flag not in profile.ldflags:
            out.append(rule_finding("compile-flags", line, f"passes the linker flag {flag!r}",
                                    f"link only {', '.join(sorted(profile.ldflags))}"))
    if call["extra_include_paths"] and not profile.include_paths:
        out.append(rule_finding("dynamic-build", line, "passes load_inline the argument extra_include_paths",
                                f"include only headers of the allow-list, which need no include paths (the "
                                f"{profile.name} gate profile takes none)"))
    for path in call["extra_include_paths"] if profile.include_paths else []:
        if not include_path_allowed(path):
            out.append(rule_finding("forbidden-include", line, f"passes the include path {path!r}"))
    return out


def include_path_allowed(path: str) -> bool:
    """An extra_include_paths entry that reaches no other files: relative without '..' (inside the build
    directory), or the CUDA toolkit's or torch's include directory (or one below it)."""
    parts = path.rstrip("/").split("/")
    if not path.strip() or ".." in parts or "" in parts[1:] or "\\" in path or path.startswith("~"):
        return False
    return not path.startswith("/") or bool(_INCLUDE_DIRS.fullmatch(path.rstrip("/")))


# --- public API -----------------------------------------------------------------------------------
def task_is_float32(task: Task) -> bool:
    """Every floating input/output is float32 (c2cuda: arg ctypes; torch2cuda: unless the reference says otherwise)."""
    if task.kind == "c2cuda":
        floating = [a.ctype for a in task.args if re.search(r"float|double|half", a.ctype)]
        return bool(floating) and all(re.search(r"\bfloat\b", c) for c in floating)
    return not re.search(r"float16|bfloat16|float64|float8|\.half\(|\.double\(|torch\.(half|double)\b", task.reference)


def check_candidate(candidate: Candidate, task: Task, profile: str = "strict") -> list[Finding]:
    """All gate findings for one candidate under the gate profile `profile`; any "error" finding rejects it."""
    rules = gate_profile(profile)
    size = len(candidate.code.encode("utf-8", errors="replace"))
    if size > MAX_CANDIDATE_BYTES:
        return [make_finding("too-large", CANDIDATE, 1, f"the candidate is {size:,} bytes, over the limit of "
                                                        f"{MAX_CANDIDATE_BYTES:,} bytes "
                                                        f"({MAX_CANDIDATE_BYTES // 1024} KB)")]
    float32 = task_is_float32(task)
    if unreadable(candidate.code):  # the gate would read something else than the compiler (or Python): nothing more
        return unreadable_findings(candidate.code, 0, cpp=candidate.format != "kernelbench")
    if candidate.format != "kernelbench":
        scan = scan_cuda(candidate.code, 0, fmt=candidate.format, float32=float32, profile=rules)
        return _dedupe(scan.findings + _entry_findings(scan, candidate.format, task))
    try:
        findings, calls = check_python(candidate.code, float32, rules)
    except (RecursionError, MemoryError):
        return [rule_finding("syntax", 1, "the Python is nested too deeply to check")]
    kernels: list[str] = []
    declared, defined, called = [], set(), set()
    for call in calls:
        for kind in ("cpp_sources", "cuda_sources"):
            for text, offset in call[kind]:
                if re.search(r"\\[ \t]*$", text):
                    findings.append(rule_finding("dynamic-build", call["line"], "a load_inline source ends with a line continuation"))
                scan = scan_cuda(text, offset, fmt="kernelbench", float32=float32, profile=rules,
                                 host_only=kind == "cpp_sources")  # the host compiler builds all of it
                findings += scan.findings
                kernels += scan.kernels if kind == "cuda_sources" else []
                declared += scan.declared
                defined |= {_last_name(f.name) for f in scan.functions}
                called |= scan.called
        findings += _build_option_findings(call, rules)
    if not rules.torch_compute:  # a prototype of a called function no source defines: code the gate cannot see
        findings += [make_finding("undefined-function", CANDIDATE, line, f"declares {name} and calls it, but no "
                                                                         f"source of the answer defines it")
                     for name, line in declared if _last_name(name) not in defined and _last_name(name) in called]
    if not kernels and (rules.kernel_required or not calls) and \
            not any(f.rule in ("syntax", "dynamic-build", "source-text") for f in findings):
        line = calls[0]["line"] if calls else 1
        findings.append(make_finding("no-device-code", CANDIDATE, line, "no load_inline call defines a __global__ "
                                                                        "kernel in its cuda_sources"))
    return _dedupe(findings)


def _last_name(qualified: str) -> str:
    """'at::cuda::blas::gemm<float>' -> 'gemm'."""
    return re.sub(r"<.*", "", qualified).split("::")[-1].strip()


def extract_load_inline(py_source: str) -> list[dict]:
    """Each load_inline call of a kernelbench candidate with its constant arguments evaluated.

    Raises SyntaxError if the source does not parse and ValueError if an argument is not a constant
    (check_candidate reports both as findings first).
    """
    tree = ast.parse(py_source)
    out = []
    for info in evaluated_load_inline_calls(tree, import_aliases(tree)):
        if isinstance(info, DynamicCode):
            raise ValueError(f"line {info.line}: {info.what}")
        out.append({**info, "cpp_sources": [compiler_text(t) for t, _ in info["cpp_sources"]],
                    "cuda_sources": [compiler_text(t) for t, _ in info["cuda_sources"]]})
    return out


def entry_points(candidate: Candidate, c_entry: str = "") -> list[str]:
    """The host entry points of a candidate (the roots of structure/reach.py): c2cuda the task's entry function
    `c_entry` (without it, reach.C_ENTRY: its C-linkage functions, the task's entry among them), light the ABI's
    entry, kernelbench the `functions` of its load_inline calls (reach adds whatever its PYBIND11_MODULE binds)."""
    from pipeline.structure.reach import C_ENTRY
    if candidate.format == "light":
        return [light_abi.ENTRY_POINT]
    if candidate.format != "kernelbench":
        return [c_entry] if c_entry else [C_ENTRY]
    try:
        return [f for b in extract_load_inline(candidate.code) for f in (b.get("functions") or [])]
    except (SyntaxError, ValueError):
        return []


def cuda_sources_of(candidate: Candidate) -> list[tuple[str, int]]:
    """The CUDA/C++ texts of a candidate as the compiler reads them, each with the number of file lines before its
    first line."""
    return [(text, offset) for text, offset, _ in gated_sources(candidate)]


def gated_sources(candidate: Candidate) -> list[tuple[str, int, bool]]:
    """(compiler text, file lines before its first line, host_only) of each CUDA/C++ source of a candidate;
    host_only marks a kernelbench cpp_sources string, which the host compiler builds whole."""
    if candidate.format != "kernelbench":
        return [(compiler_text(candidate.code), 0, False)]
    try:
        tree = ast.parse(candidate.code)
    except (SyntaxError, ValueError):
        return []
    out = []
    for info in evaluated_load_inline_calls(tree, import_aliases(tree)):
        if not isinstance(info, DynamicCode):
            out += [(compiler_text(t), o, True) for t, o in info["cpp_sources"]]
            out += [(compiler_text(t), o, False) for t, o in info["cuda_sources"]]
    return out


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in sorted(findings, key=lambda f: (f.line or 0, f.rule)):
        if (f.rule, f.line) not in seen:
            seen.add((f.rule, f.line))
            out.append(f)
    return out


def _entry_findings(scan, fmt: str, task: Task) -> list[Finding]:
    out = [] if scan.kernels else [make_finding("no-device-code", CANDIDATE, 1, "no __global__ kernel is defined")]
    name, nparams = (task.function, len(task.args)) if fmt == "c2cuda" else (light_abi.ENTRY_POINT, 4)
    sig = f"extern \"C\" {name}({', '.join(f'{a.ctype} {a.name}' for a in task.args)})" if fmt == "c2cuda" \
        else light_abi.SIGNATURE
    defs = [f for f in scan.functions if f.name == name]
    good = [f for f in defs if (f.c_linkage or name in scan.c_declared) and not f.kernel]
    if not good:
        line = defs[0].line if defs else 1
        what = (f"{name} is defined without C linkage or as a kernel" if defs
                else f"no host function named {name} is defined")
        out.append(make_finding("missing-entry-point", CANDIDATE, line, what, f"define the host entry point {sig}"))
    elif good[0].nparams is not None and good[0].nparams != nparams:
        out.append(make_finding("missing-entry-point", CANDIDATE, good[0].line,
                                f"{name} takes {good[0].nparams} parameters, not {nparams}",
                                f"use the signature {sig}"))
    return out

