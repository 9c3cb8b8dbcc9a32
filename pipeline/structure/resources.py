"""The resource report of built device code, made by the trusted side's own tool runs.

In: the PTX nvcc wrote for a build (c2cuda and light: the compile's kept `*.ptx`), or the built
object or libraries (kernelbench extensions), and the target architecture. Out: report text in
the `-Xptxas -v` format that `ptxas.parse_ptxas_report` reads (one block per function), or ''
when no trusted tool could make one. Touches only a temp directory of its own.

Why not the compile's stderr: it mixes ptxas's lines with text the candidate prints at compile
time (`#pragma message`, `#warning`, `static_assert`, deprecation messages), so a candidate could
print a report of its own. Here ptxas runs again, alone, on the PTX of the build:
- the PTX is first stripped of what could carry candidate text into ptxas's messages: every string
  literal (`.pragma "..."`, `.file "..."`) holding anything besides plain printable characters
  loses its content (ptxas echoes a pragma it does not know, newlines included);
- only lines that match ptxas's own formats whole are kept, in the order ptxas writes them
  (entry, properties, frame, usage), and only for functions the PTX defines (`.entry`/`.func`),
  so names come from the build, never from printed text.
The numbers equal those of `-Xptxas -v` in the compile (same PTX, same ptxas, same options:
`ptxas_options` carries -lineinfo, -maxrregcount and -Xptxas flags over).
Without PTX (torch builds SASS only), `cuobjdump -res-usage` on the binaries gives registers,
stack and shared memory (on sm_90 its SHARED includes 1 KiB of reserved shared memory wherever a
kernel uses shared memory or barriers, which is subtracted) but neither spills nor barriers: such
a report says so (`spills_known` false in the parse). A build without either tool yields ''.
"""
from __future__ import annotations

import glob
import os
import re
import resource
import shutil
import subprocess
import tempfile

_NAME = r"[A-Za-z_$%][\w$]*"
_LINES = (  # every line format of ptxas -v this module keeps, matched whole
    ("entry", re.compile(rf"ptxas info\s+: Compiling entry function '({_NAME})' for '(sm_\d+[af]?)'")),
    ("props", re.compile(rf"ptxas info\s+: Function properties for ({_NAME})")),
    ("frame", re.compile(r"\s+\d+ bytes stack frame, \d+ bytes spill stores, \d+ bytes spill loads")),
    ("used", re.compile(r"ptxas info\s+: Used \d+ registers(, [\w\[\] ]+)*")),
)
_DEFINED = re.compile(rf"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(entry|func)\s+(?:\([^)]*\)\s*)?({_NAME})", re.M)
_TARGET = re.compile(r"^\s*\.target\s+(sm_\d+[af]?)", re.M)
_PLAIN = re.compile(r"[ !#-\[\]-~]*")  # printable ASCII without quote and backslash
_RES_USAGE = re.compile(rf" Function ({_NAME}):\s*\n?\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")
MAX_PTX_BYTES = 256 << 20


def ptxas_options(nvcc_flags: list[str]) -> list[str]:
    """The ptxas options an nvcc command implies: -lineinfo, -maxrregcount, -G and -Xptxas values."""
    out: list[str] = []
    for i, f in enumerate(nvcc_flags):
        nxt = nvcc_flags[i + 1] if i + 1 < len(nvcc_flags) else ""
        if f in ("-lineinfo", "--generate-line-info"):
            out.append("--generate-line-info")
        elif f in ("-G", "--device-debug"):
            out.append("--device-debug")
        elif f.startswith(("-maxrregcount=", "--maxrregcount=")):
            out.append("--maxrregcount=" + f.split("=", 1)[1])
        elif f in ("-maxrregcount", "--maxrregcount") and nxt:
            out.append("--maxrregcount=" + nxt)
        elif f in ("-Xptxas", "--ptxas-options") and nxt:
            out += [x for x in nxt.split(",") if x and x not in ("-v", "--verbose")]
        elif f.startswith("--ptxas-options="):
            out += [x for x in f.split("=", 1)[1].split(",") if x and x not in ("-v", "--verbose")]
    return out


def neutralise_strings(ptx: str) -> str:
    """The PTX with the content of every string literal that holds anything but plain printable
    characters replaced by 'x' (comments are skipped, so a quote inside one pairs with nothing)."""
    out: list[str] = []
    i, n = 0, len(ptx)
    while i < n:
        c = ptx[i]
        if ptx.startswith("//", i):
            j = ptx.find("\n", i)
            j = n if j < 0 else j
        elif ptx.startswith("/*", i):
            j = ptx.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c == '"':
            j = i + 1
            while j < n and ptx[j] != '"':
                j += 2 if ptx[j] == "\\" else 1
            body = ptx[i + 1:j]
            out.append('"' + (body if _PLAIN.fullmatch(body) else "x") + '"')
            i = j + 1
            continue
        else:
            j = i + 1
            while j < n and ptx[j] not in '"/':
                j += 1
        out.append(ptx[i:j])
        i = j
    return "".join(out)


def filter_report(text: str, defined: set[str]) -> str:
    """The lines of a ptxas -v run that are ptxas's own report on functions in `defined`, in the order
    ptxas writes them; anything else (warnings, echoed text, a line out of order) is dropped."""
    kept: list[str] = []
    expect: set[str] = {"entry", "props"}
    current = ""
    for line in text.split("\n"):
        kind = next((k for k, rx in _LINES if rx.fullmatch(line)), None)
        if kind is None:
            continue
        if kind in ("entry", "props"):
            name = (_LINES[0][1] if kind == "entry" else _LINES[1][1]).fullmatch(line).group(1)
            if name not in defined or kind not in expect:
                expect, current = {"entry", "props"}, ""
                continue
            current = name
            kept.append(line)
            expect = {"props"} if kind == "entry" else {"frame"}
        elif kind in expect and current:
            kept.append(line)
            expect = {"used", "entry", "props"} if kind == "frame" else {"entry", "props"}
        else:
            expect, current = {"entry", "props"}, ""
    return "\n".join(kept) + ("\n" if kept else "")


def _limits(cpu_s: float):
    def apply():
        limit = max(1, int(cpu_s))
        resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 1))
    return apply


def ptx_report(ptx_files: list[str], arch: str, options: list[str] = (), ptxas: str = "ptxas",
               timeout_s: float = 300.0) -> str:
    """ptxas -v run by the trusted side on each PTX file whose `.target` is `arch` (all when none
    is); '' when ptxas is missing, fails or runs out of time."""
    exe = shutil.which(ptxas)
    if exe is None:
        return ""
    want = arch.rstrip("af")
    report: list[str] = []
    with tempfile.TemporaryDirectory(prefix="cudaperf_resources_") as tmp:
        for k, path in enumerate(ptx_files):
            if os.path.getsize(path) > MAX_PTX_BYTES:
                return ""
            with open(path, errors="replace") as fh:
                ptx = fh.read()
            target = _TARGET.search(ptx)
            if target is None or target.group(1).rstrip("af") != want:
                continue
            clean = os.path.join(tmp, f"{k}.ptx")
            with open(clean, "w") as fh:
                fh.write(neutralise_strings(ptx))
            cmd = [exe, f"-arch={target.group(1)}", "-m64", "-v", *options, clean, "-o", os.devnull]
            try:
                res = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout_s,
                                     cwd=tmp, preexec_fn=_limits(timeout_s))
            except (OSError, subprocess.TimeoutExpired):
                return ""
            if res.returncode != 0:
                return ""
            defined = {m.group(2) for m in _DEFINED.finditer(ptx)}
            report.append(filter_report(res.stdout + res.stderr, defined))
    return "".join(report)


def binary_report(binaries: list[str], arch: str, cuobjdump: str = "cuobjdump", ptxas: str = "ptxas",
                  options: list[str] = (), timeout_s: float = 300.0) -> str:
    """The report of built objects or libraries: ptxas on the PTX cuobjdump extracts from them, else
    cuobjdump -res-usage (no spills, no barriers); '' without cuobjdump."""
    exe = shutil.which(cuobjdump)
    if exe is None or not binaries:
        return ""
    with tempfile.TemporaryDirectory(prefix="cudaperf_cuobjdump_") as tmp:
        ptx: list[str] = []
        for k, path in enumerate(binaries):
            sub = os.path.join(tmp, str(k))
            os.mkdir(sub)
            try:
                subprocess.run([exe, "-xptx", "all", os.path.abspath(path)], capture_output=True, timeout=timeout_s,
                               cwd=sub)
            except (OSError, subprocess.TimeoutExpired):
                return ""
            ptx += sorted(glob.glob(os.path.join(sub, "*.ptx")))
        if ptx:
            text = ptx_report(ptx, arch, options, ptxas, timeout_s)
            if text:
                return text
    return res_usage_report(binaries, arch, exe, timeout_s)


def res_usage_report(binaries: list[str], arch: str, cuobjdump: str, timeout_s: float = 300.0) -> str:
    """`cuobjdump -res-usage` of the binaries as report lines in the ptxas format, marked as carrying
    no spill or barrier counts (the line '# spills unknown')."""
    from pipeline.structure.occupancy import arch_limits
    reserved = arch_limits(arch).smem_reserved_per_block if int(arch_limits(arch).arch[3:]) >= 90 else 0
    lines: list[str] = []
    for path in binaries:
        try:
            res = subprocess.run([cuobjdump, "-res-usage", "-arch", arch, os.path.abspath(path)], capture_output=True,
                                 text=True, errors="replace", timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        for m in _RES_USAGE.finditer(res.stdout):
            name, reg, stack, shared, local = m.group(1), *map(int, m.groups()[1:])
            shared = shared - reserved if shared >= reserved else shared
            lines += [f"ptxas info    : Compiling entry function '{name}' for '{arch}'",
                      f"ptxas info    : Function properties for {name}",
                      f"    {stack} bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
                      f"ptxas info    : Used {reg} registers" + (f", {shared} bytes smem" if shared else "")
                      + (f", {local} bytes lmem" if local else "")]
    return ("# spills unknown\n" + "\n".join(lines) + "\n") if lines else ""


def toolkit_tool(nvcc: str, name: str) -> str:
    """The toolkit program `name` beside `nvcc` when nvcc is given as a path, else `name` on PATH."""
    return os.path.join(os.path.dirname(nvcc), name) if os.sep in nvcc else name


def trusted_report(arch: str, ptx_files: list[str] = (), binaries: list[str] = (), nvcc_flags: list[str] = (),
                   nvcc: str = "nvcc", timeout_s: float = 300.0) -> str:
    """The resource report of a build, from the PTX it kept when given, else from its binaries; ptxas and
    cuobjdump are those of `nvcc`'s toolkit."""
    options = ptxas_options(list(nvcc_flags))
    ptxas = toolkit_tool(nvcc, "ptxas")
    if ptx_files:
        text = ptx_report(list(ptx_files), arch, options, ptxas, timeout_s)
        if text:
            return text
    return binary_report(list(binaries), arch, toolkit_tool(nvcc, "cuobjdump"), ptxas, options, timeout_s)
