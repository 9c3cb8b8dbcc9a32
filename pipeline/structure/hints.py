"""Short, concrete hints for the feedback message, from a kernel's structural analysis.

In: per kernel its `StaticFeatures`, `OccupancyResult` and ptxas `KernelResources` (each may be
None). Out: `Finding(source="structure", severity=..., message=..., line=..., rule=...)` records,
warnings first, at most `max_hints` of them. Rules:
  uncoalesced_access, indirect_access, divergent_barrier, barrier_after_return, bank_conflict,
  low_occupancy, launch_fails, register_spill, local_memory, contended_atomic, unused_shared,
  partial_warp, unlaunched_kernel.
Each message names the line and the expression, says what is wrong in numbers, and what to try.
"""
from __future__ import annotations

from fractions import Fraction

from pipeline.core.records import Finding
from pipeline.structure.symbolic import Poly

_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def stride_text(access) -> str:
    """The tx stride of an access in elements: '1024 elements' or a symbolic 'N'."""
    s = access.stride_bytes
    if isinstance(s, Fraction):
        n = abs(s) / access.elem_bytes
        return f"{n.numerator if n.denominator == 1 else float(n):g} elements"
    if isinstance(s, Poly):
        return str(s.scale(Fraction(1, access.elem_bytes)))
    return "an unknown amount"


def _f(severity: str, message: str, rule: str, line: int | None = None) -> Finding:
    return Finding(source="structure", severity=severity, message=message, line=line, rule=rule)


def _strided_hints(static) -> list[Finding]:
    """One warning per (array, load/store, stride): its lines and expressions listed together."""
    groups: dict[tuple, list] = {}
    for a in static.accesses:
        if a.space == "global" and a.kind in ("load", "store") and a.klass == "strided":
            groups.setdefault((a.array, a.kind, stride_text(a)), []).append(a)
    out = []
    for (_, kind, stride), sites in groups.items():
        lines = sorted({a.line for a in sites})
        texts = list(dict.fromkeys(a.text for a in sites))
        where = f"line {lines[0]}" if len(lines) == 1 else "lines " + ", ".join(map(str, lines))
        what = ", ".join(texts[:3]) + (", ..." if len(texts) > 3 else "")
        verb = "stores to" if kind == "store" else "loads of"
        out.append(_f("warning", f"{where}: {verb} {what} are strided by {stride} across a warp; make threadIdx.x "
                      "index the contiguous dimension or stage through shared memory", "uncoalesced_access", lines[0]))
    return out


def _access_hints(static) -> list[Finding]:
    out, seen = _strided_hints(static), set()
    for a in static.accesses:
        key = (a.line, a.array, a.kind, a.klass)
        if key in seen:
            continue
        seen.add(key)
        what = "stores to" if a.kind == "store" else "loads of"
        if a.space == "global" and a.kind != "atomic" and a.klass == "indirect" and a.loop_depth > 0:
            out.append(_f("info", f"line {a.line}: {what} {a.text} use an index loaded from memory (a gather inside "
                          "a loop); each lane may touch a different 32-byte sector", "indirect_access", a.line))
        elif a.space == "shared" and a.bank_ways and a.bank_ways > 1 and (a.line, a.array, "bank") not in seen:
            seen.add((a.line, a.array, "bank"))
            sev = "warning" if a.bank_ways >= 4 else "info"
            arr = next((s for s in static.shared_arrays if s.name == a.array), None)
            row_bytes = arr.dims[-1] * a.elem_bytes if arr is not None and len(arr.dims) >= 2 and \
                isinstance(arr.dims[-1], int) else None
            if row_bytes is not None and isinstance(a.stride_bytes, Fraction) and abs(a.stride_bytes) % row_bytes == 0:
                fix = f"pad the row to {arr.dims[-1] + 1}"
            else:
                fix = "make the stride between lanes an odd number of 4-byte words (pad or swizzle the index)"
            out.append(_f(sev, f"line {a.line}: {a.text} has a {a.bank_ways}-way bank conflict; {fix}",
                          "bank_conflict", a.line))
        elif a.space == "global" and a.kind == "atomic" and a.klass == "broadcast" and not a.selective:
            out.append(_f("warning", f"line {a.line}: every thread does {a.text.split('(')[0]} on one address of "
                          f"{a.array}; reduce within the block first (warp shuffles or shared memory) and issue one "
                          "atomic per block", "contended_atomic", a.line))
    return out


def _barrier_hints(static) -> list[Finding]:
    out = []
    for ln, divergent, after_return in static.barrier_sites:
        if divergent:
            out.append(_f("warning", f"line {ln}: __syncthreads() inside a branch that depends on threadIdx.x can "
                          "deadlock; move the barrier out of the branch so every thread of the block reaches it",
                          "divergent_barrier", ln))
        elif after_return:
            out.append(_f("info", f"line {ln}: __syncthreads() after a thread-dependent return; threads that "
                          "returned never arrive, keep them alive and guard only their memory accesses",
                          "barrier_after_return", ln))
    return out


def _resource_hints(name: str, occ, res, threads: int | None) -> list[Finding]:
    out = []
    if res is not None and res.spill_bytes > 0:
        out.append(_f("warning", f"{name}: ptxas spills {res.spill_store_bytes} bytes stored and "
                      f"{res.spill_load_bytes} bytes loaded per thread to local memory at {res.registers} registers; "
                      "keep fewer values live or relax __launch_bounds__", "register_spill"))
    elif res is not None and res.stack_frame_bytes >= 256:
        out.append(_f("info", f"{name}: {res.stack_frame_bytes}-byte stack frame per thread (local arrays indexed "
                      "at run time live in slow local memory); use registers with constant indices or shared memory",
                      "local_memory"))
    if threads is not None and threads > 32 and threads % 32:
        out.append(_f("info", f"{name}: blocks of {threads} threads are not a multiple of 32; the last warp of each "
                      "block runs partly empty", "partial_warp"))
    if occ is None:
        return out
    if occ.error:
        out.append(_f("warning", f"{name}: a block of {occ.threads_per_block} threads cannot launch on {occ.arch}: "
                      f"{occ.error}", "launch_fails"))
        return out
    if occ.occupancy >= 0.5:
        return out
    pct = f"occupancy {occ.occupancy:.0%}"
    sev = "warning" if occ.occupancy <= 0.25 else "info"
    if occ.limiter == "registers":
        msg = (f"{pct}, limited by {occ.registers_per_thread} registers per thread; try __launch_bounds__ "
               "or fewer live values")
    elif occ.limiter == "shared_memory":
        msg = (f"{pct}, limited by {occ.shared_bytes_per_block} bytes of shared memory per block "
               f"({occ.active_blocks} blocks fit per SM); use smaller tiles or fewer buffers")
    elif occ.limiter == "blocks":
        msg = (f"{pct}, limited by the {occ.limits['blocks']} resident blocks per SM with {occ.threads_per_block}-thread "
               "blocks; use at least 128 threads per block")
    elif occ.limiter == "barriers":
        msg = f"{pct}, limited by the named barriers each block uses"
    else:
        msg = f"{pct} with {occ.threads_per_block}-thread blocks ({occ.active_blocks} blocks per SM)"
    out.append(_f(sev, f"{name}: {msg}", "low_occupancy"))
    return out


def kernel_hints(name: str, static=None, occ=None, res=None, threads: int | None = None) -> list[Finding]:
    """All hints for one kernel (unsorted, unlimited)."""
    out = []
    if static is not None:
        out += _barrier_hints(static)
        out += _access_hints(static)
        for arr in static.shared_arrays:
            if not arr.used:
                out.append(_f("info", f"line {arr.line}: __shared__ {arr.name} is declared but never used in "
                              f"{name}", "unused_shared", arr.line))
    out += _resource_hints(name, occ, res, threads)
    return out


def rank_hints(findings: list[Finding], max_hints: int = 8) -> list[Finding]:
    """Warnings before infos, then by line; duplicates dropped; at most `max_hints`."""
    seen, out = set(), []
    for f in sorted(findings, key=lambda f: (_SEVERITY_ORDER[f.severity], f.line or 0)):
        if f.message not in seen:
            seen.add(f.message)
            out.append(f)
    return out[:max_hints]


def unlaunched_hints(names: list[str], static) -> list[Finding]:
    """One note per kernel no entry point launches: it is left out of the structural score."""
    out = []
    for name in names:
        k = static.kernel(name)
        out.append(_f("info", f"kernel {name} is never launched from the entry point; it is not scored (remove it "
                      "or launch it)", "unlaunched_kernel", k.line if k is not None else None))
    return out
