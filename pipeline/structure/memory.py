"""Records of the access analysis: addresses, access sites, per-kernel facts, the translation unit.

In: tree-sitter nodes of a translation unit (for `collect_unit`). Out: `Ptr` (an array or pointer
with a symbolic byte offset), `Access` (one memory access site as a warp sees it), `KernelFacts`
(what one kernel does), `Unit` (macros, constants, `__device__` functions and file-scope arrays),
and the name tables of CUDA intrinsics the walkers recognise.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from pipeline.structure import symbolic as S
from pipeline.structure.cuda_ast import VECTOR_TYPES, FunctionInfo, Macros, base_type_name, declarator_name, text, type_bytes

WARP_SHUFFLES = {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync"}
WARP_VOTES = {"__ballot_sync", "__any_sync", "__all_sync", "__activemask", "__match_any_sync", "__match_all_sync"}
BARRIERS = {"__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or", "__barrier_sync"}
LOAD_INTRINSICS = {"__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv"}
STORE_INTRINSICS = {"__stcg", "__stcs", "__stwb", "__stwt"}
BLOCK_BUILTINS = {"blockIdx", "blockDim", "gridDim"}
MAX_INLINE_DEPTH = 4
UNKNOWN_TRIPS = 16  # weight of a loop whose trip count is not a constant; known counts are capped here


@dataclass
class Ptr:
    """An address: `base` array in a memory `space`, a byte offset, and remaining row extents."""
    base: str
    space: str  # global | shared | local | constant
    elem_type: str
    elem_bytes: int
    offset: S.Val = field(default_factory=lambda: S.const(0))
    dims: tuple = ()  # extents of the array object pointed to: () for an element, (33,) for a row of 33
    scalar: bool = False  # a `__shared__` scalar: naming it reads or writes memory

    def retyped(self, type_text: str) -> "Ptr":
        name = base_type_name(type_text)
        return replace(self, elem_type=name, elem_bytes=type_bytes(name) or 4, dims=())


@dataclass
class Access:
    """One memory access site, as seen by a warp."""
    space: str
    kind: str  # load | store | atomic
    array: str
    text: str
    line: int
    klass: str  # coalesced | strided | broadcast | indirect | unknown
    stride_bytes: object  # Fraction, symbolic Poly, or None
    elem_type: str
    elem_bytes: int
    loop_depth: int
    weight: float  # product of the enclosing loops' estimated trip counts (each capped at 16)
    selective: bool  # under a thread-dependent equality test (`if (lane == 0)`): few threads run it
    sectors: float | None = None  # 32-byte sectors one warp request touches (global), None if unknown
    bank_ways: int | None = None  # shared: worst distinct words per bank, None if unknown

    @property
    def vector(self) -> bool:
        return self.elem_type in VECTOR_TYPES


@dataclass
class KernelFacts:
    accesses: list[Access] = field(default_factory=list)
    barriers: list[tuple[int, bool, bool]] = field(default_factory=list)  # (line, divergent, after divergent return)
    warp_ops: dict[str, int] = field(default_factory=lambda: {"shuffle": 0, "vote": 0, "reduce": 0, "syncwarp": 0,
                                                              "coop_groups": 0})
    loops: int = 0
    grid_stride_loops: int = 0
    max_loop_depth: int = 0
    shared_used: set = field(default_factory=set)


@dataclass
class Unit:
    """What a kernel's analysis needs from its translation unit."""
    macros: Macros
    consts: dict
    device_functions: dict  # name -> [FunctionInfo]
    globals: dict  # name -> Ptr (__device__ and __constant__ arrays)


def collect_unit(root, macros: Macros, consts: dict, funcs: list[FunctionInfo]) -> Unit:
    """Device functions by name and file-scope `__device__` / `__constant__` arrays."""
    device: dict = {}
    for f in funcs:
        if f.is_device:
            device.setdefault(f.name, []).append(f)
    globals_: dict = {}
    for n in root.children:
        if n.type != "declaration":
            continue
        quals = {text(c) for c in n.children}
        space = "constant" if "__constant__" in quals else "global" if "__device__" in quals else None
        if space is None:
            continue
        ty = text(n.child_by_field_name("type"))
        for d in n.children_by_field_name("declarator"):
            globals_[declarator_name(d)] = Ptr(declarator_name(d), space, base_type_name(ty), type_bytes(ty) or 4)
    return Unit(macros, consts, device, globals_)
