"""The ptxas resource report: per kernel registers, shared memory, spills, stack, barriers.

In: the text nvcc prints on stderr with `-Xptxas -v` (flags from `ptxas_flags()`), or a CUDA
source that `compile_resources` compiles itself (`nvcc -arch=sm_XX -cubin -Xptxas -v` in a temp
directory; used by the CLI and tests, the evaluator passes its own compile log instead).
Out: `{mangled name: KernelResources}` for every entry function (kernel) in the report.

The report looks like this (CUDA 12/13; older releases omit barriers, sm_90 omits cmem):
    ptxas info    : Compiling entry function '_Z5spillPfPKii' for 'sm_80'
    ptxas info    : Function properties for _Z5spillPfPKii
        1024 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
    ptxas info    : Used 32 registers, used 1 barriers, 4224 bytes smem, 372 bytes cmem[0]
`cuobjdump --dump-resource-usage` lines (`Function X: REG:10 STACK:0 SHARED:4224 ...`) parse too;
they count no spills, nor does a report that starts with '# spills unknown' (resources.py), so
`spills_known` is False there.
Names are demangled with `c++filt` when it is installed; `base_name` is the bare function name
(no namespace, template arguments or parameters) that matches `__global__ void NAME(...)`.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"ptxas info\s*:\s*Used (\d+) registers(.*)")
_RES_USAGE = re.compile(r"Function ([^:\s]+):\s*REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)(.*)")


@dataclass
class KernelResources:
    """What ptxas allocated for one kernel on one architecture (bytes unless named otherwise)."""
    mangled: str
    name: str  # demangled when possible, else the mangled name
    base_name: str  # bare function name, e.g. 'tk' for 'ns::tk<4>(float*)'
    arch: str = ""
    registers: int = 0
    shared_bytes: int = 0  # static shared memory
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    stack_frame_bytes: int = 0
    cumulative_stack_bytes: int = 0
    barriers: int = 0
    constant_bytes: dict = field(default_factory=dict)  # bank -> bytes, e.g. {0: 360}
    local_bytes: int = 0  # cuobjdump LOCAL (older ptxas 'bytes lmem')
    spills_known: bool = True  # False for a report from cuobjdump -res-usage, which counts no spills

    @property
    def spill_bytes(self) -> int:
        return self.spill_store_bytes + self.spill_load_bytes

    def to_dict(self) -> dict:
        d = asdict(self)
        d["constant_bytes"] = {str(k): v for k, v in self.constant_bytes.items()}
        return d


def ptxas_flags() -> list[str]:
    """Flags to add to an nvcc command so its stderr carries the resource report."""
    return ["-Xptxas", "-v"]


def parse_ptxas_report(text: str, arch: str | None = None) -> dict[str, KernelResources]:
    """Kernels found in a ptxas verbose report, keyed by mangled name.

    With several architectures in one log, `arch` picks one; without it the last one reported
    wins. Non-entry (device) functions are not returned.
    """
    found: list[KernelResources] = []
    frames: dict[tuple[str, str], tuple[int, int, int]] = {}
    current: KernelResources | None = None
    props_for: str | None = None
    arch_seen = ""
    for raw in text.splitlines():
        ln = raw.strip()
        m = _ENTRY.search(ln)
        if m:
            arch_seen = m.group(2)
            current = KernelResources(m.group(1), m.group(1), m.group(1), arch_seen)
            found.append(current)
            props_for = None
            continue
        m = _PROPS.search(ln)
        if m:
            props_for = m.group(1)
            continue
        m = _FRAME.search(ln)
        if m and props_for is not None:
            frames[(props_for, arch_seen)] = tuple(int(x) for x in m.groups())
            continue
        m = _USED.search(ln)
        if m and current is not None:
            current.registers = int(m.group(1))
            _parse_used_tail(current, m.group(2))
            continue
        m = _RES_USAGE.search(ln)
        if m:
            k = KernelResources(m.group(1), m.group(1), m.group(1), arch or "", registers=int(m.group(2)),
                                stack_frame_bytes=int(m.group(3)), shared_bytes=int(m.group(4)),
                                local_bytes=int(m.group(5)))
            for bank, nbytes in re.findall(r"CONSTANT\[(\d+)\]:(\d+)", m.group(6)):
                k.constant_bytes[int(bank)] = int(nbytes)
            found.append(k)
    spills_known = not text.startswith("# spills unknown") and \
        not any(_RES_USAGE.search(ln) for ln in text.splitlines())
    for k in found:
        k.spills_known = spills_known
        if (k.mangled, k.arch) in frames:
            k.stack_frame_bytes, k.spill_store_bytes, k.spill_load_bytes = frames[(k.mangled, k.arch)]
    archs = [k.arch for k in found]
    want = arch if arch is not None and arch in archs else (archs[-1] if archs else "")
    result = {k.mangled: k for k in found if k.arch == want}
    names = demangle(list(result))
    for k in result.values():
        k.name = names.get(k.mangled, k.mangled)
        k.base_name = base_name(k.name if k.name != k.mangled else k.mangled)
    return result


def function_of_line(line: str) -> tuple[str, bool] | None:
    """(mangled name, is an entry function) when this report line opens a function's lines
    ('Compiling entry function', 'Function properties for', a cuobjdump 'Function X: REG:' line);
    None for the lines that continue one (registers, stack frame, compile time) or precede all."""
    ln = line.strip()
    for pattern, entry in ((_ENTRY, True), (_PROPS, False), (_RES_USAGE, True)):
        m = pattern.search(ln)
        if m:
            return m.group(1), entry
    return None


def _parse_used_tail(k: KernelResources, tail: str) -> None:
    for item in tail.split(","):
        item = item.strip()
        if m := re.fullmatch(r"used (\d+) barriers?", item):
            k.barriers = int(m.group(1))
        elif m := re.fullmatch(r"(\d+) bytes smem", item):
            k.shared_bytes = int(m.group(1))
        elif m := re.fullmatch(r"(\d+) bytes cmem\[(\d+)\]", item):
            k.constant_bytes[int(m.group(2))] = int(m.group(1))
        elif m := re.fullmatch(r"(\d+) bytes cumulative stack size", item):
            k.cumulative_stack_bytes = int(m.group(1))
        elif m := re.fullmatch(r"(\d+) bytes lmem", item):
            k.local_bytes = int(m.group(1))


def demangle(names: list[str]) -> dict[str, str]:
    """Demangled C++ names via c++filt (one call); names it cannot demangle map to themselves."""
    mangled = [n for n in names if n.startswith("_Z")]
    out = {n: n for n in names}
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if not mangled or tool is None:
        return out
    try:
        res = subprocess.run([tool], input="\n".join(mangled) + "\n", capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return out
    lines = res.stdout.splitlines()
    if res.returncode == 0 and len(lines) == len(mangled):
        out.update(dict(zip(mangled, lines)))
    return out


def _strip_trailing_group(s: str, open_: str, close: str) -> str:
    """'f(int, g(x))' -> 'f': drop the balanced group that ends the text."""
    depth = 0
    for i in range(len(s) - 1, -1, -1):
        depth += {close: 1, open_: -1}.get(s[i], 0)
        if depth == 0:
            return s[:i]
    return s


def base_name(name: str) -> str:
    """'void ns::tk<4>(float*)' -> 'tk'; '_Z5saxpyifPKfPf' -> 'saxpy' (without c++filt)."""
    if name.startswith("_Z"):
        return _mangled_base(name)
    s = name
    if s.endswith(")"):  # drop the parameter list
        s = _strip_trailing_group(s, "(", ")")
    while s.endswith(">"):  # drop trailing template arguments
        shorter = _strip_trailing_group(s, "<", ">")
        if shorter == s:  # unbalanced: leave it
            break
        s = shorter
    s = s.split("::")[-1]
    return s.split()[-1] if s.split() else name


def _mangled_base(m: str) -> str:
    """The last name component of an Itanium-mangled function name (best effort)."""
    i = 2
    if i < len(m) and m[i] == "N":
        i += 1
        while i < len(m) and m[i] in "rVKL":
            i += 1
    last = m
    while i < len(m) and m[i].isdigit():
        j = i
        while j < len(m) and m[j].isdigit():
            j += 1
        n = int(m[i:j])
        last = m[j:j + n]
        i = j + n
        if i >= len(m) or m[i] in "EI" or not m[i].isdigit():
            break
    return last


class CompileFailed(RuntimeError):
    """nvcc failed: `log` holds its output."""

    def __init__(self, message: str, log: str):
        super().__init__(message)
        self.log = log


def compile_resources(cuda_source: str, arch: str = "sm_90", nvcc: str = "nvcc",
                      extra_flags: tuple[str, ...] = ("-O3",), timeout_s: float = 120.0) -> dict[str, KernelResources]:
    """Compile `cuda_source` to a cubin for `arch` in a temp dir and parse the ptxas report.

    Raises CompileFailed (with the compiler log) when nvcc is missing or the source does not
    compile: callers turn that into a finding.
    """
    exe = shutil.which(nvcc)
    if exe is None:
        raise CompileFailed(f"nvcc not found ('{nvcc}'): install the CUDA toolkit or put nvcc on PATH", "")
    with tempfile.TemporaryDirectory(prefix="cudaperf_ptxas_") as tmp:
        src = os.path.join(tmp, "kernel.cu")
        with open(src, "w") as fh:
            fh.write(cuda_source)
        cmd = [exe, f"-arch={arch}", "-cubin", *ptxas_flags(), *extra_flags, "-o", os.path.join(tmp, "k.cubin"), src]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=tmp)
        except subprocess.TimeoutExpired:
            raise CompileFailed(f"nvcc timed out after {timeout_s:.0f} s", "") from None
        log = res.stdout + res.stderr
        if res.returncode != 0:
            raise CompileFailed(f"nvcc failed with exit status {res.returncode}", log.replace(tmp + "/", ""))
    return parse_ptxas_report(log, arch)
