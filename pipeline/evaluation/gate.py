"""The static gate: reject reward hacks before anything compiles or runs (DESIGN.md, evaluation step 1).

    check_candidate(candidate, task) -> list[Finding]     # severity "error" means rejected
    extract_load_inline(py_source) -> list[dict]          # what the compile step builds
    cuda_sources_of(candidate) -> list[(text, line_offset)]

A candidate over MAX_CANDIDATE_BYTES is refused before any rule reads it. Every format's CUDA/C++
text goes through the tree-sitter rules of gate_cuda.py. A kernelbench candidate is Python, read by
the allow-list rules of gate_python.py; its `load_inline` sources must be constants, which are then
extracted and checked as CUDA with their lines mapped back into the Python file. What was built
is checked after compiling, by artifact.py. Each finding names the rule (`Finding.rule`) and the
1-based line of the candidate file.
"""
from __future__ import annotations

import ast
import re

from pipeline.evaluation import light_abi
from pipeline.evaluation.gate_cuda import finding, scan_cuda
from pipeline.evaluation.gate_python import (ADVICE, LOAD_INLINE, _aliases, _check_python, _Dynamic, _evaluate_call,
                                             _f, _load_inline_calls, _module_assigns)
from pipeline.records import Candidate, Finding, Task

__all__ = ["ADVICE", "LOAD_INLINE", "MAX_CANDIDATE_BYTES", "check_candidate", "cuda_sources_of", "extract_load_inline",
           "task_is_float32"]
MAX_CANDIDATE_BYTES = 256 * 1024  # larger candidates are refused unread (a policy answer is a few KB)


# --- public API -----------------------------------------------------------------------------------
def task_is_float32(task: Task) -> bool:
    """Every floating input/output is float32 (c2cuda: arg ctypes; torch2cuda: unless the reference says otherwise)."""
    if task.kind == "c2cuda":
        floating = [a.ctype for a in task.args if re.search(r"float|double|half", a.ctype)]
        return bool(floating) and all(re.search(r"\bfloat\b", c) for c in floating)
    return not re.search(r"float16|bfloat16|float64|float8|\.half\(|\.double\(|torch\.(half|double)\b", task.reference)


def check_candidate(candidate: Candidate, task: Task) -> list[Finding]:
    """All gate findings for one candidate; any finding with severity "error" rejects it."""
    size = len(candidate.code.encode("utf-8", errors="replace"))
    if size > MAX_CANDIDATE_BYTES:
        return [finding("too-large", 1, f"the candidate is {size:,} bytes, over the limit of {MAX_CANDIDATE_BYTES:,} "
                                        f"bytes ({MAX_CANDIDATE_BYTES // 1024} KB)", "send a shorter candidate")]
    float32 = task_is_float32(task)
    if candidate.format != "kernelbench":
        scan = scan_cuda(candidate.code, 0, fmt=candidate.format, float32=float32)
        return _dedupe(scan.findings + _entry_findings(scan, candidate.format, task))
    try:
        findings, calls = _check_python(candidate.code, float32)
    except (RecursionError, MemoryError):
        return [_f("syntax", 1, "the Python is nested too deeply to check")]
    kernels: list[str] = []
    for call in calls:
        for kind in ("cpp_sources", "cuda_sources"):
            for text, offset in call[kind]:
                if re.search(r"\\[ \t]*$", text):
                    findings.append(_f("dynamic-build", call["line"], "a load_inline source ends with a line continuation"))
                scan = scan_cuda(text, offset, fmt="kernelbench", float32=float32)
                findings += scan.findings
                kernels += scan.kernels if kind == "cuda_sources" else []
    if not kernels and not any(f.rule in ("syntax", "dynamic-build") for f in findings):
        line = calls[0]["line"] if calls else 1
        findings.append(_f("no-device-code", line, "no load_inline call defines a __global__ kernel in its cuda_sources"))
    return _dedupe(findings)


def extract_load_inline(py_source: str) -> list[dict]:
    """Each load_inline call of a kernelbench candidate with its constant arguments evaluated.

    Raises SyntaxError if the source does not parse and ValueError if an argument is not a constant
    (check_candidate reports both as findings first).
    """
    tree = ast.parse(py_source)
    out, assigns = [], _module_assigns(tree)
    for call in _load_inline_calls(tree, _aliases(tree)):
        try:
            info = _evaluate_call(call, assigns)
        except _Dynamic as e:
            raise ValueError(f"line {e.line}: {e.what}") from None
        out.append({**info, "cpp_sources": [t for t, _ in info["cpp_sources"]],
                    "cuda_sources": [t for t, _ in info["cuda_sources"]]})
    return out


def cuda_sources_of(candidate: Candidate) -> list[tuple[str, int]]:
    """The CUDA/C++ texts of a candidate, each with the number of file lines before its first line."""
    if candidate.format != "kernelbench":
        return [(candidate.code, 0)]
    try:
        tree = ast.parse(candidate.code)
    except (SyntaxError, ValueError):
        return []
    out, assigns = [], _module_assigns(tree)
    for call in _load_inline_calls(tree, _aliases(tree)):
        try:
            info = _evaluate_call(call, assigns)
        except _Dynamic:
            continue
        out += info["cpp_sources"] + info["cuda_sources"]
    return out


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in sorted(findings, key=lambda f: (f.line or 0, f.rule)):
        if (f.rule, f.line) not in seen:
            seen.add((f.rule, f.line))
            out.append(f)
    return out


def _entry_findings(scan, fmt: str, task: Task) -> list[Finding]:
    out = [] if scan.kernels else [_f("no-device-code", 1, "no __global__ kernel is defined")]
    name, nparams = (task.function, len(task.args)) if fmt == "c2cuda" else (light_abi.ENTRY_POINT, 4)
    sig = f"extern \"C\" {name}({', '.join(f'{a.ctype} {a.name}' for a in task.args)})" if fmt == "c2cuda" \
        else light_abi.SIGNATURE
    defs = [f for f in scan.functions if f.name == name]
    good = [f for f in defs if (f.c_linkage or name in scan.c_declared) and not f.kernel]
    if not good:
        line = defs[0].line if defs else 1
        what = (f"{name} is defined without C linkage or as a kernel" if defs
                else f"no host function named {name} is defined")
        out.append(finding("missing-entry-point", line, what, f"define the host entry point {sig}"))
    elif good[0].nparams is not None and good[0].nparams != nparams:
        out.append(finding("missing-entry-point", good[0].line, f"{name} takes {good[0].nparams} parameters, not {nparams}",
                           f"use the signature {sig}"))
    return out

