"""Static structural features of CUDA source, per `__global__` kernel and for the whole file.

In: CUDA source text. Out: a `StaticReport` holding one `StaticFeatures` per kernel and an
aggregate; `to_dict()` gives flat JSON values under the `static.` prefix for `EvalResult.features`.

What is measured (on tree-sitter-cuda parses, see `access.py` for how values are followed):
- global memory accesses (subscripts and dereferences of pointer parameters, pointers derived
  from them, `__device__` arrays), each classed against threadIdx.x as coalesced, strided,
  broadcast, indirect or unknown (see `lanes.py`); loads and stores counted apart, and
  fractions weighted by the estimated trip counts of the enclosing loops (`Access.weight`), so
  they describe where the traffic is rather than how many lines mention memory;
- `__shared__` arrays (dimensions, padding, bytes, used or not) and bank-conflict degree of each
  shared access; `__syncthreads()` barriers, and those under a branch or loop whose condition
  depends on the thread (divergent: can deadlock) or after a thread-dependent `return`;
- warp primitives (shuffles, votes, `__reduce_*_sync`, `__syncwarp`, cooperative groups),
  vector accesses (float2/float4/int4 ...), atomics on global and shared memory (and global
  atomics every lane sends to one address: contended), `#pragma unroll`, `__launch_bounds__`.
Counts of pragmas and launch bounds are reported but are decorations: `score.py` ignores them.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from pipeline.structure import cuda_ast as A
from pipeline.structure.access import KernelWalker
from pipeline.structure.memory import Access, KernelFacts, collect_unit
from pipeline.structure.reach import Reach, reachable_kernels

CLASSES = ("coalesced", "strided", "broadcast", "indirect", "unknown")


@dataclass
class SharedArray:
    name: str
    dims: tuple
    elem_type: str
    bytes: int | None  # None when a dimension is unknown or the array is dynamic (extern)
    dynamic: bool
    used: bool
    line: int

    @property
    def padded(self) -> bool:
        """A 2-D+ array whose row width is odd (e.g. [32][33]): column walks avoid bank conflicts."""
        return len(self.dims) >= 2 and isinstance(self.dims[-1], int) and self.dims[-1] % 2 == 1


@dataclass
class StaticFeatures:
    """Structural features of one kernel (or of a whole file, for the aggregate)."""
    name: str
    line: int = 0
    global_loads: int = 0
    global_stores: int = 0
    counts: dict = field(default_factory=dict)  # e.g. {"coalesced_loads": 2, "strided_stores": 1}
    fractions: dict = field(default_factory=dict)  # weighted fractions of global accesses, per class
    vector_loads: int = 0
    vector_stores: int = 0
    shared_arrays: list[SharedArray] = field(default_factory=list)
    shared_loads: int = 0
    shared_stores: int = 0
    bank_conflicted_accesses: int = 0
    max_bank_ways: int = 1
    bank_conflict_cost: float = 0.0  # weighted mean of (ways-1)/31 over shared accesses with known ways
    barriers: int = 0
    divergent_barriers: int = 0
    barriers_after_divergent_return: int = 0
    warp_ops: dict = field(default_factory=dict)
    atomics_global: int = 0
    atomics_shared: int = 0
    contended_atomic_fraction: float = 0.0  # weighted share of global traffic that is lane-uniform atomics
    pragma_unroll: int = 0
    launch_bounds_max_threads: int = 0
    launch_bounds_min_blocks: int = 0
    loops: int = 0
    grid_stride_loops: int = 0
    max_loop_depth: int = 0
    pointer_params: int = 0
    restrict_params: int = 0
    has_global_accesses: bool = False
    incomplete: bool = False  # the walk stopped early (pathologically deep nesting)
    accesses: list[Access] = field(default_factory=list, repr=False)
    barrier_sites: list = field(default_factory=list, repr=False)

    @property
    def shared_bytes_used(self) -> int:
        return sum(a.bytes or 0 for a in self.shared_arrays if a.used and not a.dynamic)

    @property
    def shared_bytes_declared(self) -> int:
        return sum(a.bytes or 0 for a in self.shared_arrays if not a.dynamic)

    def to_dict(self, prefix: str = "static.") -> dict:
        """Flat numeric/bool/str values for EvalResult.features."""
        d: dict = {"kernel": self.name, "global_loads": self.global_loads, "global_stores": self.global_stores,
                   "vector_loads": self.vector_loads, "vector_stores": self.vector_stores,
                   "shared_arrays": len(self.shared_arrays),
                   "shared_arrays_unused": sum(not a.used for a in self.shared_arrays),
                   "shared_arrays_padded": sum(a.padded for a in self.shared_arrays),
                   "shared_bytes_used": self.shared_bytes_used, "shared_bytes_declared": self.shared_bytes_declared,
                   "dynamic_shared": any(a.dynamic for a in self.shared_arrays)}
        for k in ("shared_loads", "shared_stores", "bank_conflicted_accesses", "max_bank_ways", "bank_conflict_cost",
                  "barriers", "divergent_barriers", "barriers_after_divergent_return", "atomics_global",
                  "atomics_shared", "contended_atomic_fraction", "pragma_unroll", "launch_bounds_max_threads",
                  "launch_bounds_min_blocks", "loops", "grid_stride_loops", "max_loop_depth", "pointer_params",
                  "restrict_params", "has_global_accesses", "incomplete"):
            d[k] = getattr(self, k)
        d.update(self.counts)
        d.update({f"frac_{k}": round(v, 6) for k, v in self.fractions.items()})
        d.update({f"warp_{k}": v for k, v in self.warp_ops.items()})
        return {prefix + k: v for k, v in d.items()}


def summarize(name: str, facts: KernelFacts, shared: list[SharedArray]) -> StaticFeatures:
    """Counts and trip-count-weighted fractions from the raw facts of one kernel (or several, merged)."""
    f = StaticFeatures(name=name, shared_arrays=shared, accesses=facts.accesses, barrier_sites=facts.barriers)
    glob = [a for a in facts.accesses if a.space == "global" and a.kind in ("load", "store")]
    f.global_loads = sum(a.kind == "load" for a in glob)
    f.global_stores = sum(a.kind == "store" for a in glob)
    f.has_global_accesses = bool(glob)
    for c in CLASSES:
        f.counts[f"{c}_loads"] = sum(a.klass == c and a.kind == "load" for a in glob)
        f.counts[f"{c}_stores"] = sum(a.klass == c and a.kind == "store" for a in glob)
    total = sum(a.weight for a in glob)
    loads_total = sum(a.weight for a in glob if a.kind == "load")
    for c in CLASSES:
        w = sum(a.weight for a in glob if a.klass == c)
        f.fractions[c] = w / total if total else 0.0
    f.fractions["load_coalesced"] = (sum(a.weight for a in glob if a.kind == "load" and a.klass == "coalesced")
                                     / loads_total) if loads_total else 0.0
    f.fractions["vector"] = sum(a.weight for a in glob if a.vector) / total if total else 0.0
    f.vector_loads = sum(a.vector and a.kind == "load" for a in glob)
    f.vector_stores = sum(a.vector and a.kind == "store" for a in glob)
    sh = [a for a in facts.accesses if a.space == "shared" and a.kind in ("load", "store")]
    f.shared_loads = sum(a.kind == "load" for a in sh)
    f.shared_stores = sum(a.kind == "store" for a in sh)
    known = [a for a in sh if a.bank_ways is not None]
    f.bank_conflicted_accesses = sum(a.bank_ways > 1 for a in known)
    f.max_bank_ways = max((a.bank_ways for a in known), default=1)
    wk = sum(a.weight for a in known)
    f.bank_conflict_cost = sum(a.weight * (a.bank_ways - 1) / 31 for a in known) / wk if wk else 0.0
    f.barriers = len(facts.barriers)
    f.divergent_barriers = sum(div for _, div, _ in facts.barriers)
    f.barriers_after_divergent_return = sum(ret and not div for _, div, ret in facts.barriers)
    f.warp_ops = dict(facts.warp_ops)
    atom = [a for a in facts.accesses if a.kind == "atomic"]
    f.atomics_global = sum(a.space == "global" for a in atom)
    f.atomics_shared = sum(a.space == "shared" for a in atom)
    contended = sum(a.weight for a in atom
                    if a.space == "global" and a.klass == "broadcast" and not a.selective)
    traffic = total + sum(a.weight for a in atom if a.space == "global")
    f.contended_atomic_fraction = contended / traffic if traffic else 0.0
    f.loops, f.grid_stride_loops, f.max_loop_depth = facts.loops, facts.grid_stride_loops, facts.max_loop_depth
    return f


def _shared_declarations(body, consts: dict, macros: A.Macros, used: set) -> list[SharedArray]:
    out = []
    for n in A.walk(body):
        if n.type != "declaration" or "__shared__" not in A.text(n).split("=")[0]:
            continue
        quals = {A.text(c) for c in n.children if c.type in ("type_qualifier", "storage_class_specifier")}
        if "__shared__" not in quals:
            continue
        ty = A.base_type_name(A.text(n.child_by_field_name("type")))
        for d in n.children_by_field_name("declarator"):
            target = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
            dims = []
            while target is not None and target.type == "array_declarator":
                size = target.child_by_field_name("size")
                dims.append(A.eval_const(size, consts, macros) if size is not None else None)
                target = target.child_by_field_name("declarator")
            dims.reverse()
            name = A.declarator_name(d)
            dynamic = "extern" in quals or (bool(dims) and dims[0] is None)
            nbytes = None
            if not dynamic and None not in dims:
                nbytes = (A.type_bytes(ty) or 4)
                for x in dims:
                    nbytes *= x
            out.append(SharedArray(name, tuple(dims), ty, nbytes, dynamic, name in used, A.line(n)))
    return out


def _kernel_features(unit, k: A.FunctionInfo, pragmas: list) -> StaticFeatures:
    walker = KernelWalker(unit, k)
    incomplete = False
    try:
        facts = walker.run()
    except RecursionError:  # pathological nesting: report what was gathered
        facts, incomplete = walker.facts, True
    shared = _shared_declarations(k.body, unit.consts, unit.macros, facts.shared_used)
    f = summarize(k.name, facts, shared)
    f.incomplete = incomplete
    f.line = A.line(k.node)
    bounds = [A.eval_const(b, unit.consts, unit.macros) for b in k.launch_bounds]
    f.launch_bounds_max_threads = bounds[0] or 0 if bounds else 0
    f.launch_bounds_min_blocks = bounds[1] or 0 if len(bounds) > 1 else 0
    f.pragma_unroll = sum(1 for n in pragmas if k.body.start_byte <= n.start_byte < k.body.end_byte
                          and A.text(n.child_by_field_name("argument")).strip().startswith("unroll"))
    for p in k.params:
        decl = p.child_by_field_name("declarator")
        if decl is not None and decl.type in ("pointer_declarator", "array_declarator"):
            f.pointer_params += 1
            f.restrict_params += "restrict" in A.text(p)
    return f


@dataclass
class StaticReport:
    kernels: list[StaticFeatures]
    aggregate: StaticFeatures
    parse_errors: bool = False
    reach: Reach = field(default_factory=Reach)  # which kernels the entry points launch

    def only(self, names: set[str]) -> "StaticReport":
        """The report of the named kernels alone (those that can run), aggregate recomputed."""
        kept = [k for k in self.kernels if k.name in names]
        return StaticReport(kept, aggregate(kept), self.parse_errors, self.reach)

    def __post_init__(self):
        self._index: dict[str, StaticFeatures] = {}
        for k in reversed(self.kernels):
            self._index[k.name] = k

    def kernel(self, name: str) -> StaticFeatures | None:
        """The first kernel of that name."""
        return self._index.get(name)

    def to_dict(self, prefix: str = "static.") -> dict:
        d = self.aggregate.to_dict(prefix)
        d[prefix + "kernel"] = ",".join(k.name for k in self.kernels)
        d[prefix + "kernels"] = len(self.kernels)
        d[prefix + "parse_errors"] = self.parse_errors
        return d


def analyze_static(source: str, entries: list[str] | None = None) -> StaticReport:
    """Parse CUDA source and compute the static features of every `__global__` kernel in it, and
    which kernels its entry points launch (`reach.reachable_kernels`; `entries` as there)."""
    pragmas = [n for n in A.walk(A.parse(source).root_node) if n.type == "preproc_call"
               and A.text(n.child_by_field_name("directive")) == "#pragma"] if "#pragma" in source else []
    tree = A.parse(A.blank_pragmas(source))
    macros = A.Macros.collect(tree.root_node)
    consts = A.collect_constants(tree.root_node, macros)
    funcs = A.functions(tree.root_node)
    unit = collect_unit(tree.root_node, macros, consts, funcs)
    kernels = [_kernel_features(unit, k, pragmas) for k in funcs if k.is_kernel]
    launched = reachable_kernels(tree.root_node, macros, consts, funcs, entries)
    return StaticReport(kernels, aggregate(kernels), tree.root_node.has_error, launched)


def aggregate(kernels: list[StaticFeatures]) -> StaticFeatures:
    """The file-level features ('*') of some kernels: their facts merged."""
    merged = KernelFacts()
    for k in kernels:
        merged.accesses += k.accesses
        merged.barriers += k.barrier_sites
        merged.loops += k.loops
        merged.grid_stride_loops += k.grid_stride_loops
        merged.max_loop_depth = max(merged.max_loop_depth, k.max_loop_depth)
        for op, n in k.warp_ops.items():
            merged.warp_ops[op] += n
    agg = summarize("*", merged, [a for k in kernels for a in k.shared_arrays])
    for attr in ("pragma_unroll", "pointer_params", "restrict_params"):
        setattr(agg, attr, sum(getattr(k, attr) for k in kernels))
    agg.launch_bounds_max_threads = max((k.launch_bounds_max_threads for k in kernels), default=0)
    agg.launch_bounds_min_blocks = max((k.launch_bounds_min_blocks for k in kernels), default=0)
    agg.incomplete = any(k.incomplete for k in kernels)
    return agg


def access_dicts(features: StaticFeatures) -> list[dict]:
    """The access sites of a kernel as plain dicts (for JSON dumps and the CLI)."""
    out = []
    for a in features.accesses:
        d = asdict(a)
        d["stride_bytes"] = None if a.stride_bytes is None else str(a.stride_bytes)
        out.append(d)
    return out
