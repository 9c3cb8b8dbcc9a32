"""One call that runs every structural analysis on a CUDA source, and the `cudaperf analyze` CLI.

In: CUDA source, the target arch, optionally the block size and dynamic shared memory of the
launch (else taken from the source's `<<<...>>>`, or `__launch_bounds__`), optionally the
evaluator's compile log carrying the ptxas report (else nvcc is run here, in a temp dir), and
optionally the launch configurations recorded at run time and a measured roofline fraction.
Out: an `Analysis`: per kernel its ptxas resources, launch, theoretical occupancy, static
features, score components and score; the file's score; hints as `Finding`s; `features()`
gives the flat dict for `EvalResult.features`. Problems (nvcc missing, compile errors, a
report without kernels) are listed in `errors`, never raised.

CLI: `cudaperf analyze FILE.cu [--block N|XxY] [--arch sm_90] [--dynamic-smem BYTES] [--json]`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.core.records import Finding
from pipeline.structure import hints as H
from pipeline.structure.occupancy import (LaunchConfig, OccupancyResult, arch_limits, launch_configs_from_source,
                                          occupancy)
from pipeline.structure.ptxas import CompileFailed, KernelResources, compile_resources, parse_ptxas_report
from pipeline.structure.reach import DEFINITE
from pipeline.structure.score import ScoreWeights, conservative_combine, score_components, structural_score
from pipeline.structure.static import StaticFeatures, StaticReport, access_dicts, analyze_static


@dataclass
class KernelAnalysis:
    name: str
    static: StaticFeatures | None
    resources: KernelResources | None
    threads: int | None  # threads per block used for occupancy
    block_source: str  # where the block size came from: argument | runtime | source | launch_bounds | unknown
    dynamic_smem: int
    occupancy: OccupancyResult | None
    components: dict
    score: float
    instantiations: int = 1  # ptxas entries (template instantiations) with this name

    @property
    def traffic(self) -> float:
        if self.static is None:
            return 0.0
        return sum(a.weight for a in self.static.accesses if a.space == "global")


@dataclass
class Analysis:
    arch: str
    kernels: list[KernelAnalysis]
    static: StaticReport
    launches: list[LaunchConfig]
    score: float
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    compile_log: str = ""

    def features(self) -> dict:
        """Flat features for EvalResult.features: struct.*, ptxas.*, occ.*, static.*."""
        d: dict = {"struct.score": round(self.score, 6), "struct.kernels": len(self.kernels),
                   "struct.arch": self.arch, "struct.errors": len(self.errors),
                   "struct.unlaunched": len(self.static.reach.unlaunched)}
        res = [k.resources for k in self.kernels if k.resources is not None]
        d["ptxas.available"] = bool(res)
        if res:
            d["ptxas.registers_max"] = max(r.registers for r in res)
            d["ptxas.shared_bytes_max"] = max(r.shared_bytes for r in res)
            d["ptxas.spill_bytes"] = sum(r.spill_bytes for r in res)
            d["ptxas.spills_known"] = all(r.spills_known for r in res)
            d["ptxas.stack_frame_bytes_max"] = max(r.stack_frame_bytes for r in res)
            d["ptxas.barriers_max"] = max(r.barriers for r in res)
        occ = [(k.occupancy, 1.0 + k.traffic) for k in self.kernels if k.occupancy is not None]
        d["occ.available"] = bool(occ)
        if occ:
            d["occ.occupancy"] = round(sum(o.occupancy * w for o, w in occ) / sum(w for _, w in occ), 6)
            d["occ.min_occupancy"] = min(o.occupancy for o, _ in occ)
            main = max(occ, key=lambda ow: ow[1])[0]
            d["occ.limiter"] = main.limiter
            d["occ.threads_per_block"] = main.threads_per_block
            d["occ.launch_fails"] = any(o.error for o, _ in occ)
        comps: dict[str, list] = {}
        for k in self.kernels:
            for c, v in k.components.items():
                comps.setdefault(c, []).append(v)
        d.update({f"struct.{c}": round(sum(v) / len(v), 6) for c, v in comps.items()})
        d.update(self.static.to_dict("static."))
        return d

    def to_dict(self) -> dict:
        """Everything, JSON-serialisable (for --json and debugging)."""
        return {
            "arch": self.arch, "score": self.score, "errors": self.errors, "features": self.features(),
            "findings": [f.model_dump() for f in self.findings],
            "launches": [vars(lc) for lc in self.launches],
            "kernels": [{
                "name": k.name, "score": k.score, "components": k.components, "threads": k.threads,
                "block_source": k.block_source, "dynamic_smem": k.dynamic_smem, "instantiations": k.instantiations,
                "resources": k.resources.to_dict() if k.resources else None,
                "occupancy": k.occupancy.to_dict("") if k.occupancy else None,
                "static": k.static.to_dict("") if k.static else None,
                "accesses": access_dicts(k.static) if k.static else [],
            } for k in self.kernels],
        }


def _resources(cuda_source: str, arch: str, ptxas_log: str | None, run_nvcc: bool, nvcc: str,
               errors: list[str]) -> tuple[dict, str]:
    if ptxas_log is not None:
        found = parse_ptxas_report(ptxas_log, arch)
        if not found:
            errors.append("the compile log has no ptxas report: add ptxas_flags() (-Xptxas -v) to the nvcc command")
        return found, ptxas_log
    if not run_nvcc:
        return {}, ""
    try:
        return compile_resources(cuda_source, arch, nvcc), ""
    except CompileFailed as e:
        errors.append(f"{e}: {e.log.strip()[:1500]}" if e.log else str(e))
        return {}, e.log


def _launch_for(name: str, block, launches: dict | None, configs: list[LaunchConfig],
                static: StaticFeatures | None) -> tuple[int | None, str, int | None]:
    """(threads per block, where it came from, dynamic smem from the source when evaluable)."""
    src = next((c for c in configs if c.kernel == name and c.block_threads is not None), None)
    src_smem = src.smem_bytes if src is not None else None
    if block is not None:
        threads = block if isinstance(block, int) else block[0] * (block[1] if len(block) > 1 else 1) * (
            block[2] if len(block) > 2 else 1)
        return threads, "argument", src_smem
    if launches and name in launches:
        threads, smem = launches[name]
        return threads, "runtime", smem
    if src is not None:
        return src.block_threads, f"source line {src.line}", src_smem
    if static is not None and static.launch_bounds_max_threads:
        return static.launch_bounds_max_threads, "launch_bounds", None
    return None, "unknown", None


def analyze_source(cuda_source: str, arch: str = "sm_90", block=None, dynamic_smem: int = 0,
                   ptxas_log: str | None = None, *, launches: dict | None = None, run_nvcc: bool = True,
                   nvcc: str = "nvcc", roofline_fraction: float | None = None,
                   weights: ScoreWeights = ScoreWeights(), max_hints: int = 8,
                   entries: list[str] | None = None) -> Analysis:
    """Run ptxas (or read `ptxas_log`), occupancy, static analysis, score and hints on a source.

    `block`: threads per block (int) or (x, y, z) for every kernel; `launches`: {kernel: (threads,
    dynamic smem bytes)} recorded at run time; `dynamic_smem`: bytes per block when nonzero, else
    the source's `<<<..., smem>>>` when it evaluates, else 0. `entries`: the host entry points
    (`reach.py`; None: the source alone). Only kernels the entry points launch are scored: a kernel
    never launched adds nothing, one that may be launched counts only where it lowers the score.
    """
    arch_limits(arch)  # an unknown architecture is a usage error: raise before any work
    errors: list[str] = []
    static_all = analyze_static(cuda_source, entries)
    reach = static_all.reach
    if static_all.parse_errors:
        errors.append("tree-sitter could not parse part of the source; static features may be incomplete")
    errors += [f"static analysis of {k.name} stopped early (nesting too deep); its features are partial"
               for k in static_all.kernels if k.incomplete]
    resources, log = _resources(cuda_source, arch, ptxas_log, run_nvcc, nvcc, errors)
    configs = launch_configs_from_source(cuda_source)
    opt_in = "cudaFuncAttributeMaxDynamicSharedMemorySize" in cuda_source
    by_base: dict[str, list[KernelResources]] = {}
    for r in resources.values():
        by_base.setdefault(r.base_name, []).append(r)
    names = [k.name for k in static_all.kernels] + [n for n in by_base if static_all.kernel(n) is None]
    names = list(dict.fromkeys(n for n in names if reach.mode(n)))
    kernels, findings = [], []
    for name in names:
        st = static_all.kernel(name)
        insts = by_base.get(name, [])
        res = max(insts, key=lambda r: (r.registers, r.spill_bytes)) if insts else None
        threads, where, src_smem = _launch_for(name, block, launches, configs, st)
        dyn = dynamic_smem or (src_smem or 0)
        occ = None
        if threads is not None:
            smem_static = res.shared_bytes if res is not None else (st.shared_bytes_used if st is not None else 0)
            occ = occupancy(arch, threads, res.registers if res is not None else None, smem_static, dyn,
                            res.barriers if res is not None else 0, smem_opt_in=opt_in)
        # A block size guessed from __launch_bounds__ is shown but not scored: the bound is a
        # declaration, and scoring it would let a decoration add an occupancy term.
        scored_occ = occ if where not in ("launch_bounds", "unknown") else None
        comps = score_components(st, scored_occ, res, roofline_fraction, weights)
        kernels.append(KernelAnalysis(name, st, res, threads, where, dyn, occ, comps,
                                      structural_score(comps, weights), max(1, len(insts))))
    definite = [k for k in kernels if reach.mode(k.name) == DEFINITE]
    possible = [k for k in kernels if reach.mode(k.name) != DEFINITE]
    total, chosen = conservative_combine([(k.score, k.traffic) for k in definite],
                                         [(k.score, k.traffic) for k in possible])
    kernels = definite + [possible[i] for i in sorted(chosen)]
    for k in kernels:
        findings += H.kernel_hints(k.name, k.static, k.occupancy, k.resources, k.threads)
    findings += H.unlaunched_hints(reach.unlaunched, static_all)
    static = static_all.only({k.name for k in kernels})
    return Analysis(arch, kernels, static, configs, total, H.rank_hints(findings, max_hints), errors, log)


def _pct(x: float) -> str:
    return f"{x:.0%}"


def format_analysis(a: Analysis, show_accesses: bool = True) -> str:
    """Human-readable report of an Analysis (what `cudaperf analyze` prints)."""
    out = [f"arch {a.arch} | {len(a.kernels)} kernel(s) | structural score {a.score:.3f}"]
    for e in a.errors:
        out.append(f"error: {e}")
    for k in a.kernels:
        out.append("")
        out.append(f"kernel {k.name}" + (f" (line {k.static.line})" if k.static else "") + f"  score {k.score:.3f}")
        r = k.resources
        if r is not None:
            out.append(f"  ptxas: {r.registers} registers, {r.shared_bytes} B static smem, {r.spill_store_bytes}+"
                       f"{r.spill_load_bytes} B spill st+ld, {r.stack_frame_bytes} B stack, {r.barriers} barriers"
                       + (f" ({k.instantiations} instantiations, worst shown)" if k.instantiations > 1 else ""))
        else:
            out.append("  ptxas: no report")
        if k.threads is not None:
            out.append(f"  launch: {k.threads} threads per block ({k.block_source}), dynamic smem {k.dynamic_smem} B")
        else:
            out.append("  launch: block size unknown (pass --block N)")
        o = k.occupancy
        if o is not None:
            out.append(f"  occupancy: {_pct(o.occupancy)} ({o.active_blocks} blocks, {o.active_warps}/{o.max_warps} "
                       f"warps per SM), limited by {o.limiter}" + (f": {o.error}" if o.error else ""))
        s = k.static
        if s is not None:
            fr = s.fractions
            out.append(f"  global: {s.global_loads} loads, {s.global_stores} stores; " + ", ".join(
                f"{c} {_pct(fr[c])}" for c in ("coalesced", "strided", "broadcast", "indirect", "unknown"))
                + f"; vector {_pct(fr['vector'])}")
            if s.shared_arrays:
                arrs = ", ".join(f"{x.name}{''.join(f'[{d}]' if d is not None else '[]' for d in x.dims)} {x.elem_type}"
                                 + (" padded" if x.padded else "") + ("" if x.used else " unused")
                                 for x in s.shared_arrays)
                out.append(f"  shared: {arrs}; {s.shared_loads} loads, {s.shared_stores} stores, worst "
                           f"{s.max_bank_ways}-way bank conflict")
            w = s.warp_ops
            out.append(f"  sync: {s.barriers} barriers ({s.divergent_barriers} divergent); warp: {w['shuffle']} shuffles, "
                       f"{w['vote']} votes, {w['reduce']} reduces, {w['coop_groups']} cg calls; atomics: "
                       f"{s.atomics_global} global, {s.atomics_shared} shared; loops {s.loops}, unroll pragmas "
                       f"{s.pragma_unroll}, launch bounds {s.launch_bounds_max_threads or '-'}")
            if show_accesses:
                for x in s.accesses:
                    extra = f" {x.bank_ways}-way" if x.bank_ways and x.bank_ways > 1 else ""
                    out.append(f"    line {x.line:>3} {x.space:8} {x.kind:6} {x.klass:10}{extra} {x.text}")
        out.append("  components: " + ", ".join(f"{c} {v:.2f}" for c, v in k.components.items()))
    if a.findings:
        out.append("")
        out.append("hints:")
        out += [f"  {f.severity}: {f.message}" for f in a.findings]
    return "\n".join(out)
