"""Compile step: candidate or trusted source in, a cached artefact (shared library) out.

Separate from execution and sandboxed: the compiler runs in a new session with a wall-clock
limit, an address-space limit, a scratch directory of its own and a trimmed environment, inside
bubblewrap (`sandboxed`: no network, system and toolchain read-only, only the scratch directory
writable, the home directory and the caches invisible; compile.sandbox=none opts out).
Artefacts are cached by a hash of the source, the flags, the architecture and the toolchain
version, so identical candidates compile once.
- c2cuda and light candidates: `nvcc -shared` (works on CPU-only machines).
- Several trusted c2cuda/light sources at once (`compile_cuda_batch`, dataset measurement): one
  translation unit, each source in a namespace of its own with its entry renamed, built by one
  nvcc call into one library; nvcc's fixed cost per call (host headers, stages) is paid once.
- C references (trusted): `gcc -shared`.
- kernelbench candidates: the sources of their `load_inline` calls, extracted by the gate, are
  built with torch's extension builder in a subprocess, with the linker flags and include paths the
  call names (the gate profile decides which are allowed); this needs a CUDA build of torch (GPU
  hosts); elsewhere the result says the build is unavailable here.
Compiler output is trimmed to the errors a reader needs, with scratch paths replaced.

Nothing of the candidate runs here: a kernelbench build stops when the extension is linked (torch's
builder is told not to import it, so no constructor of it runs outside the child's sandbox), and every
string that becomes source (`functions` included) was gated. Each candidate has one CPU budget over
all its builds (`CompileBudget`: compile.cpu_budget_s, kernelbench_cpu_budget_s), which tool_run.py
enforces on the whole process tree of a build, besides its wall-clock limit, its memory limit and a
file-size limit; under bwrap a compiler's temporary files land in a private tmpfs of compile.tmp_bytes.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, Field

from pipeline.core.config import CompileSection
from pipeline.core.records import Candidate, Finding, Task
from pipeline.evaluation.build.tool_run import CompileBudget, run_build, tool_env
from pipeline.structure.ptxas import function_of_line
from pipeline.structure.resources import trusted_report

# part of every compile cache key: bump when what a cached result holds changes (2: the resource report comes from
# the trusted side's own ptxas run, structure/resources.py, not from the compile's output)
RESULT_FORMAT = "2"


class CompileResult(BaseModel):
    """Outcome of one compilation; `artifact` is a path in the cache when ok."""
    ok: bool
    unavailable: bool = Field(False, description="this host cannot build this format (not a candidate error)")
    artifact: str = ""
    extensions: dict[str, str] = Field(default_factory=dict, description="kernelbench: extension name -> .so path")
    object: str = Field("", description="c2cuda and light: the object the library was linked from (the artefact "
                                        "check reads it instead of building its own)")
    built_findings: list[Finding] | None = Field(None, description="the artefact check's findings, where the compile "
                                                               "worker ran it (bounded.checked_build)")
    gate_findings: list[Finding] | None = Field(None, description="the static gate's findings, where the compile "
                                                              "worker ran it (bounded.checked_build)")
    built_profile: str = Field("", description="the gate profile gate_findings and built_findings were made under")
    built_for: str = Field("", description="the task and candidate the compile worker's findings belong to "
                                           "(bounded.built_for); the evaluator reads them only for that one")
    built_structure: tuple[dict, list[Finding]] | None = Field(
        None, description="the structural analysis' (features, findings), where the compile worker ran it "
                          "(bounded.checked_build): the evaluator reads them instead of analysing again")
    expanded: dict[str, list[tuple[int, str]]] = Field(
        default_factory=dict, description="c2cuda and light: the candidate's own lines as nvcc's device and host "
                                          "preprocessing passes expanded them in this compile (the artefact check "
                                          "scans them instead of preprocessing again)")
    log: str = Field("", description="trimmed compiler errors (empty when ok)")
    ptxas_log: str = Field("", description="ptxas resource report (-Xptxas -v)")
    key: str = ""
    cached: bool = False
    seconds: float = 0.0
    payload: dict[str, bytes] = Field(default_factory=dict, description="artefact files by name, for another host")
    cpu_s: float = Field(0.0, description="CPU seconds the build used (charged to the candidate's budget, also "
                                          "when the result comes from the cache)")
    worker_s: float = Field(0.0, description="wall seconds a compile worker spent on the candidate (gate, build, "
                                             "artefact check, structural analysis, packing); 0 where the evaluator "
                                             "built it itself")

    def packed(self) -> "CompileResult":
        """A copy carrying its artefact files, so an evaluator on another node can use it."""
        files = [self.artifact, self.object, *self.extensions.values()] if self.ok else []
        return self.model_copy(update={"payload": {Path(p).name: Path(p).read_bytes() for p in files if p}})


@lru_cache(maxsize=8)
def toolchain_id(nvcc: str) -> str:
    """Version text of nvcc (part of every cache key); 'missing' when nvcc is not installed."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "missing"
    return out.strip().splitlines()[-1] if out.strip() else "unknown"


def object_flags(cfg: CompileSection) -> list[str]:
    """nvcc flags of a candidate's object: the compile builds it, the artefact check reads that same object."""
    return [f"-arch={cfg.arch}", "-c", "-Xcompiler", "-fPIC", "-lineinfo", *cfg.extra_flags]


def link_flags(cfg: CompileSection) -> list[str]:
    """Extra flags of the link of a candidate's library from its object: no device link (`-nodlink`; an object
    compiled whole-program, nvcc's default, needs none) unless the configured flags ask for relocatable device code."""
    relocatable = any(f in ("-rdc=true", "--relocatable-device-code=true", "-dc", "--device-c") or
                      f.startswith(("-rdc=t", "--relocatable-device-code=t")) for f in cfg.extra_flags)
    return [] if relocatable else ["-nodlink"]


def trim_log(text: str, scratch: str, limit: int) -> str:
    """Keep error lines (and the source/caret lines after them); name files by their base name."""
    text = text.replace(scratch + "/", "").replace(scratch, ".")
    lines = text.splitlines()
    kept: list[str] = []
    errors = 0
    for i, line in enumerate(lines):
        if re.search(r"\berror\b|fatal|undefined reference|Error", line):
            errors += 1
            kept.append(line)
            kept += [ln for ln in lines[i + 1:i + 3] if ln.strip() and not re.search(r"\berror\b", ln)]
    if not kept:
        kept = [ln for ln in lines if ln.strip() and not ln.startswith("ptxas info")][-20:]
    out = "\n".join(kept)
    if len(out) > limit:
        out = out[:limit] + f"\n... ({errors} errors in all; output trimmed)"
    return out


@dataclass
class BatchMember:
    """One source of a batched build."""
    result: CompileResult  # artifact: the library shared by the batch; ptxas_log: this source's functions only
    symbol: str            # the name its entry is exported under in that library


_INCLUDE = re.compile(r"^\s*#\s*include\b")
_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)", re.M)


def batch_tag(i: int) -> str:
    """Namespace of source i; the closing 'z' keeps 'cpbatch1z' from being part of 'cpbatch11z'."""
    return f"cpbatch{i}z"


def batch_symbol(i: int, entry: str) -> str:
    """The exported name of source i's entry in a batched library."""
    return f"{batch_tag(i)}_{entry}"


def batch_source(sources: list[str], entries: list[str]) -> str:
    """One translation unit holding every source.

    Every #include line is hoisted to the top (once each, in order of first appearance), since a
    header cannot be included inside a namespace. Then each source, without its includes, inside
    `namespace cpbatch{i}z { ... }`, with its entry renamed by a macro to `cpbatch{i}z_<entry>`:
    an extern "C" function keeps C linkage inside a namespace, so the entries would collide
    without the rename. After each source its macros are #undef'd, so none reaches the next one.
    """
    includes: dict[str, None] = {}
    for src in sources:
        includes.update((ln.strip(), None) for ln in src.splitlines() if _INCLUDE.match(ln))
    parts = list(includes)
    for i, (src, entry) in enumerate(zip(sources, entries)):
        body = "\n".join(ln for ln in src.splitlines() if not _INCLUDE.match(ln))
        macros = dict.fromkeys(_DEFINE.findall(body))
        parts += ["", f"#define {entry} {batch_symbol(i, entry)}", f"namespace {batch_tag(i)} {{", body,
                  f"}}  // namespace {batch_tag(i)}", f"#undef {entry}", *(f"#undef {m}" for m in macros)]
    return "\n".join(parts) + "\n"


def split_ptxas_report(text: str, tags: list[str]) -> list[str] | None:
    """The ptxas report of a batched build cut into one report per source.

    A function's lines (from the line naming it to the next such line) go to the source whose
    tag its mangled name contains; the lines before the first function (e.g. 'bytes gmem') go to
    every source. A device function without a tag (a libdevice helper such as
    `__internal_trig_reduction_slowpathd`, or an extern "C" one) goes with the function before it:
    ptxas reports such a callee right after each entry function that calls it, as it does in a
    build of that source alone. None when an entry function holds no tag, a name holds several,
    or an untagged device function comes first: its source is unknown.
    """
    logs: list[list[str]] = [[] for _ in tags]
    owner: int | None = None  # None: before the first function, a line for every source
    for line in text.splitlines():
        named = function_of_line(line)
        if named is not None:
            name, entry = named
            owners = [i for i, tag in enumerate(tags) if tag in name]
            if len(owners) > 1 or (not owners and (entry or owner is None)):
                return None
            owner = owners[0] if owners else owner
        for i in (range(len(tags)) if owner is None else [owner]):
            logs[i].append(line)
    return ["\n".join(lines) for lines in logs]


# --- the candidate's own lines after preprocessing (the artefact check scans them) ---------------
_MARKER = re.compile(r'^#\s*(\d+)\s+"((?:\\.|[^"\\])*)"((?:\s+\d)*)\s*$')
_NVCC_ANNOTATION = re.compile(r"__attribute__\(\((global|device|host|shared|constant|managed|grid_constant)\)\)")


class ExpansionTooLarge(ValueError):
    """The candidate's own lines of one preprocessing pass passed OWN_EXPANSION_BYTES."""


# The candidate's own lines of one preprocessing pass, after macro expansion: 16 times the largest candidate the gate
# reads. Past it the pass is not read further (own_lines raises) and the build is a compile_error naming it, so
# reading a kept pass costs the compile process about a second at most, whatever the macros expand to.
OWN_EXPANSION_BYTES = 4 << 20


def own_lines(preprocessed: str, filename: str, max_bytes: int | None = None) -> list[tuple[int, str]]:
    """(candidate line, text) of each preprocessed line that comes from `filename` itself.

    Line markers `# N "file" flags` say where the next line comes from: flag 1 enters an included
    file, flag 2 returns from one; a marker without either renames or renumbers the current file.
    Only lines at include depth 0 under the candidate's own name are kept. Past `max_bytes` of kept text,
    ExpansionTooLarge.
    """
    out: list[tuple[int, str]] = []
    depth, current, line, kept = 0, "", 0, 0
    for text in preprocessed.splitlines():
        m = _MARKER.match(text)
        if m:
            flags = m.group(3).split()
            depth += ("1" in flags) - ("2" in flags)
            depth = max(depth, 0)
            current, line = m.group(2), int(m.group(1))
            continue
        if depth == 0 and current == filename and text.strip():
            out.append((line, _restore(text)))
            kept += len(text)
            if max_bytes is not None and kept > max_bytes:
                raise ExpansionTooLarge(f"the candidate's own lines expand to more than {max_bytes >> 20} MiB in one "
                                        f"preprocessing pass; simplify the macros: an expansion this large costs the "
                                        f"evaluator more than any kernel is worth")
        line += 1
    return out


def _restore(text: str) -> str:
    """nvcc's annotations spelled as the source spells them (__global__, __launch_bounds__(n), ...)."""
    text = _NVCC_ANNOTATION.sub(r"__\1__", text)
    return re.sub(r"__attribute__\(\(launch_bounds\(([^()]*)\)\)\)", r"__launch_bounds__(\1)", text)


# the passes nvcc preprocesses a .cu file in, and the intermediate each leaves under --keep
PREPROCESSED_PASSES = {"device": "cpp1.ii", "host": "cpp4.ii"}


def pass_lines(path: str | Path, filename: str, max_pass_bytes: int, name: str = "") -> list[tuple[int, str]]:
    """The own lines (`own_lines`) of one preprocessing pass kept at `path`, read only within its caps: a file over
    `max_pass_bytes` (compile.preprocessed_bytes) is never read, and reading stops past OWN_EXPANSION_BYTES of own
    text; either raises ExpansionTooLarge with the sentence a compile error or a finding gives."""
    size = Path(path).stat().st_size
    if size > max_pass_bytes:
        raise ExpansionTooLarge(f"the {name + ' ' if name else ''}preprocessing pass of the source is {size >> 20} MiB, "
                                f"past its cap of {max_pass_bytes >> 20} MiB (compile.preprocessed_bytes); simplify "
                                f"the source: macro expansion this large costs the evaluator more than any kernel is "
                                f"worth")
    return own_lines(Path(path).read_text(errors="replace"), filename, OWN_EXPANSION_BYTES)


def kept_expansions(keep_dir: str, stem: str, max_pass_bytes: int) -> dict[str, list[tuple[int, str]]]:
    """The candidate's own lines as each of nvcc's preprocessing passes expanded them (device: __CUDA_ARCH__
    defined, as `nvcc -E` gives; host: undefined), read from a compile's --keep intermediates within their caps
    (`pass_lines`: ExpansionTooLarge past one); a pass whose file is missing is left out."""
    out = {}
    for name, suffix in PREPROCESSED_PASSES.items():
        path = Path(keep_dir, f"{stem}.{suffix}")
        if path.is_file():
            out[name] = pass_lines(path, f"{stem}.cu", max_pass_bytes, name)
    return out


class Compiler:
    """Compiles candidates and trusted sources into cached shared libraries."""

    def __init__(self, cfg: CompileSection):
        self.cfg = cfg
        self.cache_dir = Path(os.path.expanduser(cfg.cache_dir))
        self.cache_dir.mkdir(parents=True, exist_ok=True)

    # --- public ---------------------------------------------------------------------------
    def compile(self, candidate: Candidate, task: Task, budget: CompileBudget | None = None) -> CompileResult:
        """Build a candidate within `budget` (a fresh one of its format when None), which is charged."""
        from pipeline.evaluation.gate.source_text import compiler_text
        budget = budget or CompileBudget.of(candidate.format, self.cfg)
        if candidate.format == "kernelbench":
            return self.compile_kernelbench(candidate.code, budget)
        return self.compile_cuda(compiler_text(candidate.code), budget)  # the text the gate read

    def nvcc_flags(self) -> list[str]:
        return [f"-arch={self.cfg.arch}", "-shared", "-Xcompiler", "-fPIC", "-lineinfo", "-Xptxas", "-v",
                *self.cfg.extra_flags]

    def compile_cuda(self, source: str, budget: CompileBudget | None = None) -> CompileResult:
        """The object (`nvcc -c`, with the ptxas report), then the shared library linked from it: one compile,
        whose object the artefact check reads, instead of a second build of the same source."""
        flags = object_flags(self.cfg)
        link = [self.cfg.nvcc, f"-arch={self.cfg.arch}", "-shared", *link_flags(self.cfg), "-o", "artifact.so",
                "candidate.o"]
        key = self._key("cuda", source, [*flags, "-Xptxas", "-v", "--keep", *link], toolchain_id(self.cfg.nvcc))

        def build(scratch: str) -> CompileResult:
            os.mkdir(os.path.join(scratch, "kept"))
            obj = self._run_compiler([self.cfg.nvcc, *flags, "-Xptxas", "-v", "--keep", "--keep-dir", "kept",
                                      "-o", "candidate.o", "candidate.cu"],
                                     scratch, source, "candidate.cu", product="candidate.o", budget=budget)
            if not obj.ok:
                return obj
            try:
                expanded = kept_expansions(os.path.join(scratch, "kept"), "candidate", self.cfg.preprocessed_bytes)
            except ExpansionTooLarge as e:
                return CompileResult(ok=False, log=str(e), cpu_s=obj.cpu_s)
            report = trusted_report(self.cfg.arch, sorted(Path(scratch, "kept").glob("*.ptx")), [obj.object], flags,
                                    self.cfg.nvcc, self.cfg.timeout_s)  # never the compile's stderr: see resources.py
            shutil.rmtree(os.path.join(scratch, "kept"), ignore_errors=True)
            linked = self._run_compiler(link, scratch, None, "candidate.o", budget=budget)
            return linked.model_copy(update={"object": os.path.join(scratch, "candidate.o"), "ptxas_log": report,
                                             "expanded": expanded, "cpu_s": obj.cpu_s + linked.cpu_s}) if linked.ok \
                else linked.model_copy(update={"cpu_s": obj.cpu_s + linked.cpu_s})
        return self._cached(key, build, budget)

    def compile_cuda_batch(self, sources: list[str], entries: list[str]) -> list[BatchMember] | None:
        """Build trusted sources into one shared library with one nvcc call (see `batch_source`).

        `entries[i]` is the extern "C" function source i exports; in the library it is
        `batch_symbol(i, entries[i])`. Returns one member per source, in order, each with the shared
        library and only its own part of the ptxas report; None when the batch does not build or a
        function in the report cannot be told apart, and the caller then compiles each source with
        `compile_cuda`, whose errors name the broken source.
        """
        if len(sources) != len(entries):
            raise ValueError(f"compile_cuda_batch: {len(sources)} sources but {len(entries)} entries")
        if not sources:
            return []
        combined = batch_source(sources, entries)
        flags = self.nvcc_flags()
        key = self._key("cuda_batch", combined, flags, toolchain_id(self.cfg.nvcc))
        built = self._cached(key, lambda scratch: self._run_compiler(
            [self.cfg.nvcc, *flags, "-o", "artifact.so", "batch.cu"], scratch, combined, "batch.cu"))
        if not built.ok:
            return None
        logs = split_ptxas_report(built.ptxas_log, [batch_tag(i) for i in range(len(sources))])
        if logs is None:
            return None
        share = built.seconds / len(sources)
        return [BatchMember(CompileResult(ok=True, artifact=built.artifact, ptxas_log=log, key=built.key,
                                          cached=built.cached, seconds=share), batch_symbol(i, entry))
                for i, (log, entry) in enumerate(zip(logs, entries))]

    def compile_c_reference(self, source: str, optimize: str = "-O2") -> CompileResult:
        """The task's C reference as a shared library (gcc, C11); `optimize` as ParEval builds its serial
        baseline (-O3) where its time is compared."""
        flags = [optimize, "-shared", "-fPIC", "-std=c11"]
        key = self._key("c", source, flags, "gcc")
        return self._cached(key, lambda scratch: self._run_compiler(
            ["gcc", *flags, "-o", "artifact.so", "reference.c", "-lm"], scratch, source, "reference.c"))

    def compile_kernelbench(self, source: str, budget: CompileBudget | None = None) -> CompileResult:
        from pipeline.evaluation.gate import extract_load_inline
        try:
            builds = extract_load_inline(source)
        except (SyntaxError, ValueError) as e:
            return CompileResult(ok=False, log=f"could not read the load_inline calls: {e}")
        if not builds:
            return CompileResult(ok=False, log="the candidate calls load_inline nowhere; build its kernels with "
                                               "torch.utils.cpp_extension.load_inline")
        if not _torch_can_build_cuda():
            return CompileResult(ok=False, unavailable=True,
                                 log="kernelbench-format candidates build only on a GPU host with a CUDA build of torch")
        spec = json.dumps(builds, sort_keys=True)
        key = self._key("kernelbench", spec, [self.cfg.arch], _torch_id())
        return self._cached(key, lambda scratch: self._build_extensions(builds, scratch, budget), budget)

    def unpack(self, result: CompileResult) -> CompileResult:
        """A result from a compile worker, with its artefacts at paths that exist on this host."""
        paths = [result.artifact, result.object, *result.extensions.values()] if result.ok else []
        if all(Path(p).exists() for p in paths if p) or not result.payload:
            return result.model_copy(update={"payload": {}})
        entry = self.cache_dir / result.key
        entry.mkdir(parents=True, exist_ok=True)
        for name, data in result.payload.items():
            tmp = entry / f".{name}.{os.getpid()}"
            tmp.write_bytes(data)
            os.replace(tmp, entry / name)
        local = {"artifact": str(entry / Path(result.artifact).name) if result.artifact else "",
                 "object": str(entry / Path(result.object).name) if result.object else "",
                 "extensions": {n: str(entry / Path(p).name) for n, p in result.extensions.items()}, "payload": {}}
        return result.model_copy(update=local)

    # --- internals --------------------------------------------------------------------------
    def _key(self, kind: str, source: str, flags: list[str], toolchain: str) -> str:
        body = "\0".join([RESULT_FORMAT, kind, source, " ".join(flags), self.cfg.arch, toolchain])
        return hashlib.sha256(body.encode()).hexdigest()[:24]

    def _cached(self, key: str, build, budget: CompileBudget | None = None) -> CompileResult:
        """The cached result of `key`, else `build(scratch)` published atomically. A cached result is charged
        to `budget` as the build was, so a candidate's verdict does not depend on the cache."""
        entry = self.cache_dir / key
        meta = entry / "result.json"
        if meta.is_file():
            result = CompileResult.model_validate_json(meta.read_text())
            if not result.ok or all(Path(p).exists() for p in [result.artifact, result.object,
                                                                *result.extensions.values()] if p):
                if budget is not None:
                    budget.charge(result.cpu_s)
                return result.model_copy(update={"cached": True, "seconds": 0.0})
        t0 = time.perf_counter()
        scratch = tempfile.mkdtemp(prefix="cudaperf-compile-")
        try:
            result = build(scratch)
            staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=self.cache_dir))
            if result.ok:
                for field in ("artifact", "object"):
                    if getattr(result, field):
                        shutil.copy2(os.path.join(scratch, Path(getattr(result, field)).name), staging)
                        setattr(result, field, str(entry / Path(getattr(result, field)).name))
                for name, path in list(result.extensions.items()):
                    shutil.copy2(path, staging / Path(path).name)
                    result.extensions[name] = str(entry / Path(path).name)
            result.key, result.seconds = key, time.perf_counter() - t0
            (staging / "result.json").write_text(result.model_dump_json())
            shutil.rmtree(entry, ignore_errors=True)
            os.replace(staging, entry)  # atomic publish: readers never see half an entry
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return result

    def _run_compiler(self, argv: list[str], scratch: str, source: str | None, filename: str,
                      timeout_s: float | None = None, product: str = "artifact.so",
                      budget: CompileBudget | None = None) -> CompileResult:
        if source is not None:  # None: the input is already in the scratch directory (an object to link)
            Path(scratch, filename).write_text(source)
        timeout_s = timeout_s or self.cfg.timeout_s
        if shutil.which(argv[0], path=tool_env(scratch)["PATH"]) is None:
            return CompileResult(ok=False, unavailable=True,
                                 log=f"compiler '{argv[0]}' not found; install it or set compile.nvcc")
        try:
            proc = run_build(argv, scratch, timeout_s, self.cfg, budget)
        except FileNotFoundError:
            return CompileResult(ok=False, unavailable=True,
                                 log=f"compiler '{argv[0]}' not found; install it or set compile.nvcc")
        if proc.over_budget:
            return CompileResult(ok=False, log=budget.message(), cpu_s=proc.cpu_s)
        if proc.timed_out:
            return CompileResult(ok=False, log=f"compilation exceeded its {timeout_s:.0f} s limit", cpu_s=proc.cpu_s)
        text = (proc.stdout or "") + (proc.stderr or "")
        if proc.dropped_bytes and proc.returncode == 0:  # a report this long is not read (thousands of kernels)
            return CompileResult(ok=False, cpu_s=proc.cpu_s, log=(
                f"the compiler's output passed its cap of {self.cfg.output_bytes >> 10} KiB (compile.output_bytes); "
                f"simplify the source: thousands of kernels or instantiations cost the evaluator more than any "
                f"kernel is worth"))
        ptxas = "\n".join(ln for ln in text.splitlines() if ln.startswith("ptxas") or "bytes stack frame" in ln)
        if proc.returncode != 0 or not Path(scratch, product).exists():
            if proc.returncode < 0 or "Killed" in text or "out of memory" in text.lower():
                return CompileResult(ok=False, log=f"the compiler was stopped ({proc.returncode}): it exceeded "
                                                   f"its memory or time limit\n" + trim_log(text, scratch, self.cfg.log_chars),
                                     cpu_s=proc.cpu_s)
            return CompileResult(ok=False, log=trim_log(text, scratch, self.cfg.log_chars), ptxas_log=ptxas,
                                 cpu_s=proc.cpu_s)
        return CompileResult(ok=True, artifact=os.path.join(scratch, product) if product.endswith(".so") else "",
                             object=os.path.join(scratch, product) if product.endswith(".o") else "",
                             ptxas_log=ptxas, cpu_s=proc.cpu_s)

    def _build_extensions(self, builds: list[dict], scratch: str, budget: CompileBudget | None = None) -> CompileResult:
        """Build each load_inline call with torch's builder in a sandboxed subprocess, without loading what it
        built (BUILD_SCRIPT): the extension's code first runs in the child's sandbox."""
        Path(scratch, "builds.json").write_text(json.dumps(builds))
        arch = self.cfg.arch.replace("sm_", "")
        argv = ["env", f"TORCH_CUDA_ARCH_LIST={arch[:-1]}.{arch[-1]}", f"TORCH_EXTENSIONS_DIR={scratch}/ext",
                sys.executable, "build.py"]
        result = self._run_compiler(argv, scratch, BUILD_SCRIPT, "build.py", self.cfg.kernelbench_timeout_s,
                                    product="built.json", budget=budget)
        if not result.ok:
            return result
        extensions = json.loads(Path(scratch, "built.json").read_text())
        return CompileResult(ok=True, extensions=extensions, cpu_s=result.cpu_s, ptxas_log=trusted_report(
            self.cfg.arch, binaries=list(extensions.values()), nvcc=self.cfg.nvcc, timeout_s=self.cfg.timeout_s))


# torch's load_inline builds and then imports the extension, which runs its static constructors; here the import
# is replaced by nothing, and function names are checked again, since torch pastes them into C++ it generates.
BUILD_SCRIPT = r'''
import json, os, re, sys
import torch.utils.cpp_extension as cpp_extension
from torch.utils.cpp_extension import load_inline
cpp_extension._import_module_from_library = lambda *args, **kwargs: None  # build, never load
builds = json.load(open("builds.json"))
out = {}
for b in builds:
    if not all(re.fullmatch(r"[A-Za-z_]\w*", f) for f in [b["name"], *(b.get("functions") or [])]):
        sys.exit("error: a load_inline name or function name is not a plain identifier")
    d = os.path.join(os.getcwd(), "ext", b["name"])
    os.makedirs(d, exist_ok=True)
    load_inline(name=b["name"], cpp_sources=b["cpp_sources"], cuda_sources=b["cuda_sources"],
                functions=b.get("functions"), extra_cflags=b.get("extra_cflags") or None,
                extra_cuda_cflags=(b.get("extra_cuda_cflags") or []) + ["-Xptxas", "-v", "-lineinfo"],
                extra_ldflags=b.get("extra_ldflags") or None, extra_include_paths=b.get("extra_include_paths") or None,
                build_directory=d, verbose=True)
    so = [f for f in os.listdir(d) if f.endswith(".so")]
    out[b["name"]] = os.path.join(d, so[0])
json.dump(out, open("built.json", "w"))
'''


@lru_cache(maxsize=1)
def _torch_can_build_cuda() -> bool:
    try:
        import torch
        from torch.utils.cpp_extension import CUDA_HOME
    except ImportError:
        return False
    return torch.version.cuda is not None and CUDA_HOME is not None


@lru_cache(maxsize=1)
def _torch_id() -> str:
    import torch
    return f"torch {torch.__version__} cuda {torch.version.cuda}"
