"""Theoretical occupancy of a kernel launch, and the launch configurations written in a source.

In: an architecture ('sm_80', 'sm_89', 'sm_90', ...), threads per block, registers per thread
(ptxas), static and dynamic shared memory per block, barriers used (ptxas). Out: an
`OccupancyResult`: resident blocks and warps per SM, occupancy = active warps / max warps, the
limiter ('warps', 'registers', 'shared_memory', 'blocks', 'barriers') and every limit.

The rules follow NVIDIA's occupancy calculator (`cuda_occupancy.h`, CUDA 13.0):
- warps per block W = ceil(T / 32); warp limit = floor(max_warps / W); block limit per arch;
- registers are allocated per warp in units of 256 (ceil256(R * 32)) and per sub-partition
  (4 per SM, 16384 registers each): warps per SM = 4 * floor(16384 / regs_per_warp), register
  limit = floor(that / W). A block whose ceil4(W) warps do not fit 65536 registers (the hardware
  check), or R > 255, cannot launch. This is what `cudaOccupancyMaxActiveBlocksPerMultiprocessor`
  computes; it can be lower than floor(65536 / (W * regs_per_warp)) (e.g. R = 40, W = 2: 24 not 25);
- shared memory per block = ceil128(static + dynamic + 1 KiB reserved) on sm_80+ (256-byte units
  and nothing reserved before); limit = floor(smem_per_SM / that); more than the per-block
  maximum (48 KiB without the opt-in attribute, 227 KiB with it on sm_90) cannot launch. The
  default carveout is assumed (the full shared memory per SM is available);
- sm_90+: barriers limit blocks to floor(2 * 32 / barriers used).
Ties between limiters resolve in the order warps, registers, shared_memory, blocks, barriers.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

LIMITERS = ("warps", "registers", "shared_memory", "blocks", "barriers")


@dataclass(frozen=True)
class ArchLimits:
    """Per-SM and per-block limits of one compute capability (bytes unless named otherwise)."""
    arch: str
    max_warps_per_sm: int
    max_blocks_per_sm: int
    smem_per_sm: int
    max_smem_per_block_optin: int
    smem_reserved_per_block: int
    smem_alloc_unit: int
    barrier_slots_per_block: int  # barriers available per SM = this * max_blocks_per_sm (sm_90+ rule)
    max_smem_per_block_default: int = 48 * 1024
    regs_per_sm: int = 65536
    max_regs_per_block: int = 65536
    max_regs_per_thread: int = 255
    reg_alloc_unit: int = 256
    sub_partitions: int = 4
    max_threads_per_block: int = 1024
    warp_size: int = 32
    num_sms: int = 0  # typical part (0 when it varies); informational


ARCH_LIMITS: dict[str, ArchLimits] = {
    "sm_70": ArchLimits("sm_70", 64, 32, 98304, 98304, 0, 256, 2, num_sms=80),
    "sm_75": ArchLimits("sm_75", 32, 16, 65536, 65536, 0, 256, 2, num_sms=40),
    "sm_80": ArchLimits("sm_80", 64, 32, 167936, 166912, 1024, 128, 2, num_sms=108),
    "sm_86": ArchLimits("sm_86", 48, 16, 102400, 101376, 1024, 128, 1),
    "sm_89": ArchLimits("sm_89", 48, 24, 102400, 101376, 1024, 128, 1),
    "sm_90": ArchLimits("sm_90", 64, 32, 233472, 232448, 1024, 128, 2, num_sms=132),
    "sm_100": ArchLimits("sm_100", 64, 32, 233472, 232448, 1024, 128, 2),
    "sm_120": ArchLimits("sm_120", 48, 24, 102400, 101376, 1024, 128, 1),
}


def arch_limits(arch: str) -> ArchLimits:
    """Limits for 'sm_90', 'sm_90a', 'compute_90', '90' or '9.0'; ValueError names the known ones."""
    a = arch.strip().lower().replace("compute_", "sm_").replace(".", "")
    if not a.startswith("sm_"):
        a = "sm_" + a
    a = a.rstrip("af") if a[-1] in "af" and a[:-1] in ARCH_LIMITS else a
    if a not in ARCH_LIMITS:
        raise ValueError(f"unknown architecture '{arch}': known are {', '.join(ARCH_LIMITS)}")
    return ARCH_LIMITS[a]


def _ceil_to(x: int, unit: int) -> int:
    return -(-x // unit) * unit


@dataclass
class OccupancyResult:
    arch: str
    threads_per_block: int
    registers_per_thread: int | None
    shared_bytes_per_block: int  # static + dynamic, as requested
    warps_per_block: int
    active_blocks: int
    active_warps: int
    max_warps: int
    occupancy: float  # active warps / max warps per SM, in [0, 1]
    limiter: str  # one of LIMITERS, or 'launch_fails'
    limits: dict = field(default_factory=dict)  # limiter -> blocks per SM it allows (None: not applied)
    allocated_shared_bytes_per_block: int = 0
    error: str = ""  # why the launch cannot run, when it cannot

    def to_dict(self, prefix: str = "occ.") -> dict:
        d = {k: v for k, v in asdict(self).items() if k != "limits"}
        d.update({f"limit_{k}": (-1 if v is None else v) for k, v in self.limits.items()})
        d["registers_per_thread"] = -1 if self.registers_per_thread is None else self.registers_per_thread
        return {prefix + k: v for k, v in d.items()}


def occupancy(arch: str, threads_per_block: int, registers_per_thread: int | None, static_smem: int = 0,
              dynamic_smem: int = 0, barriers: int = 0, smem_opt_in: bool = True) -> OccupancyResult:
    """Theoretical occupancy of one launch (see the module notes for the rules).

    `registers_per_thread=None` (no ptxas report) leaves the register limit out. `smem_opt_in`:
    the kernel raised cudaFuncAttributeMaxDynamicSharedMemorySize, so blocks may use more than
    48 KiB of shared memory.
    """
    lim = arch_limits(arch)
    T, R = int(threads_per_block), registers_per_thread
    W = -(-T // lim.warp_size) if T > 0 else 0
    smem = int(static_smem) + int(dynamic_smem)
    errors = []
    limits: dict[str, int | None] = {k: None for k in LIMITERS}
    if T <= 0 or T > lim.max_threads_per_block:
        errors.append(f"{T} threads per block is outside 1..{lim.max_threads_per_block}")
        limits["warps"] = 0
    else:
        limits["warps"] = lim.max_warps_per_sm // W
    limits["blocks"] = lim.max_blocks_per_sm
    if R is not None and W > 0:
        per_warp = _ceil_to(max(int(R), 0) * lim.warp_size, lim.reg_alloc_unit)
        if R > lim.max_regs_per_thread:
            errors.append(f"{R} registers per thread exceeds {lim.max_regs_per_thread}")
            limits["registers"] = 0
        elif per_warp * _ceil_to(W, lim.sub_partitions) > lim.max_regs_per_block:
            errors.append(f"{T} threads x {R} registers exceed the {lim.max_regs_per_block} registers of a block")
            limits["registers"] = 0
        elif per_warp == 0:
            limits["registers"] = None
        else:
            warps_per_sm = (lim.regs_per_sm // lim.sub_partitions // per_warp) * lim.sub_partitions
            limits["registers"] = warps_per_sm // W
    unit = lim.smem_alloc_unit
    allocated = _ceil_to(smem + lim.smem_reserved_per_block, unit)
    per_block_max = lim.max_smem_per_block_optin if smem_opt_in else lim.max_smem_per_block_default
    if smem > per_block_max:
        errors.append(f"{smem} bytes of shared memory per block exceed the {per_block_max} allowed"
                      + ("" if smem_opt_in else " without cudaFuncAttributeMaxDynamicSharedMemorySize"))
        limits["shared_memory"] = 0
    elif allocated > 0:
        limits["shared_memory"] = lim.smem_per_sm // allocated
    if barriers > 0 and int(lim.arch[3:]) // 10 >= 9:  # the barrier limit applies from sm_90 on
        limits["barriers"] = lim.barrier_slots_per_block * lim.max_blocks_per_sm // barriers
    applied = {k: v for k, v in limits.items() if v is not None}
    blocks = min(applied.values())
    limiter = next(k for k in LIMITERS if applied.get(k) == blocks)
    if errors:
        blocks, limiter = 0, "launch_fails"
    warps = blocks * W
    return OccupancyResult(lim.arch, T, R, smem, W, blocks, warps, lim.max_warps_per_sm,
                           warps / lim.max_warps_per_sm, limiter, limits, allocated, "; ".join(errors))


# ------------------------------------------------------------------ launch configurations
@dataclass
class LaunchConfig:
    """One `kernel<<<grid, block, smem, stream>>>(...)` in a source.

    Iterating gives (kernel, block, grid_expr, smem): block and smem are ints where they could
    be evaluated (literals, constexpr/const ints, #defines, dim3(a, b, c)), else the source text.
    """
    kernel: str
    block_expr: str
    grid_expr: str
    smem_expr: str
    line: int
    block_dims: tuple | None = None  # (x, y, z) when evaluable
    smem_bytes: int | None = None

    @property
    def block_threads(self) -> int | None:
        if self.block_dims is None:
            return None
        return self.block_dims[0] * self.block_dims[1] * self.block_dims[2]

    def __iter__(self):
        yield self.kernel
        yield self.block_threads if self.block_threads is not None else self.block_expr
        yield self.grid_expr
        yield self.smem_bytes if self.smem_bytes is not None else self.smem_expr


def launch_configs_from_source(src: str) -> list[LaunchConfig]:
    """Every triple-chevron launch in the source, with block size and shared memory evaluated when evident."""
    from pipeline.structure import cuda_ast as A

    tree = A.parse(A.blank_pragmas(src))
    macros = A.Macros.collect(tree.root_node)
    consts = A.collect_constants(tree.root_node, macros)
    out = []
    locals_of: dict = {}  # function node id -> its _LocalValues, advanced launch by launch (source order)
    for n in A.walk(tree.root_node):
        if n.type != "kernel_call_syntax" or n.parent is None:
            continue
        call = n.parent
        fn = call.child_by_field_name("function")
        name = A.text(fn.child_by_field_name("name") if fn is not None and fn.type == "template_function" else fn)
        args = [c for c in n.named_children if c.type != "comment"]
        texts = [A.text(a) for a in args] + ["0", "0"]
        scope = _enclosing_function(call)
        if scope is not None and scope.id not in locals_of:
            locals_of[scope.id] = _LocalValues(scope, consts, macros)
        local_ints, local_dims = locals_of[scope.id].before(call) if scope is not None else ({}, {})
        env = {**consts, **local_ints}
        block = _dims(args[1], env, local_dims, macros) if len(args) > 1 else None
        smem = A.eval_const(args[2], env, macros) if len(args) > 2 else 0
        out.append(LaunchConfig(name.split("::")[-1], texts[1], texts[0], texts[2] if len(args) > 2 else "0",
                                A.line(call), block, smem))
    return out


def _enclosing_function(node):
    while node is not None and node.type != "function_definition":
        node = node.parent
    return node


def _dims(node, ints: dict, dims: dict, macros) -> tuple | None:
    from pipeline.structure import cuda_ast as A

    if node.type == "identifier" and A.text(node) in dims:
        return dims[A.text(node)]
    if node.type in ("call_expression", "initializer_list", "compound_literal_expression"):
        fn = node.child_by_field_name("function") if node.type == "call_expression" else None
        if node.type == "call_expression" and A.text(fn) != "dim3":
            v = A.eval_const(node, ints, macros)
            return (v, 1, 1) if v else None
        argl = node.child_by_field_name("arguments") if node.type == "call_expression" else node
        if node.type == "compound_literal_expression":
            argl = node.child_by_field_name("value")
        return _dim3_args(argl.named_children if argl is not None else [], ints, macros)
    v = A.eval_const(node, ints, macros)
    return (v, 1, 1) if v is not None and v > 0 else None


def _dim3_args(items, ints: dict, macros) -> tuple | None:
    from pipeline.structure import cuda_ast as A

    vals = [A.eval_const(a, ints, macros) for a in items]
    if not vals or None in vals or len(vals) > 3:
        return None
    return tuple(vals + [1] * (3 - len(vals)))


class _LocalValues:
    """Integer and dim3 locals of a function assigned exactly once (single definitions), read in
    source order: `before(node)` gives those declared before `node`. Each declaration is evaluated
    once however many launches the function holds (a launch at a time would be quadratic)."""

    def __init__(self, func, consts: dict, macros):
        from pipeline.structure import cuda_ast as A

        self.consts, self.macros = consts, macros
        self.ints: dict = {}
        self.dims: dict = {}
        self.assigned: dict[str, int] = {}
        self.decls = []
        for n in A.walk(func):
            if n.type in ("assignment_expression", "update_expression"):
                target = n.child_by_field_name("left") or n.child_by_field_name("argument")
                self.assigned[A.text(target)] = self.assigned.get(A.text(target), 0) + 1
            elif n.type == "declaration":
                self.decls.append(n)
        self.decls.sort(key=lambda d: d.start_byte)
        self.done = 0

    def before(self, node) -> tuple[dict, dict]:
        """(ints, dims) of the declarations that start before `node` (calls come in increasing order)."""
        while self.done < len(self.decls) and self.decls[self.done].start_byte < node.start_byte:
            self._declare(self.decls[self.done])
            self.done += 1
        return dict(self.ints), {k: v for k, v in self.dims.items() if v is not None}

    def _declare(self, n) -> None:
        from pipeline.structure import cuda_ast as A

        consts, macros, ints, dims, assigned = self.consts, self.macros, self.ints, self.dims, self.assigned
        ty = A.text(n.child_by_field_name("type"))
        for d in n.children_by_field_name("declarator"):
            if d.type == "function_declarator" and "dim3" in ty:
                # `dim3 block(TILE, TILE);` parses as a function declaration: re-read the "parameters"
                params = d.child_by_field_name("parameters")
                items = [macros.expression(A.text(x)) for x in params.named_children] if params else []
                if None not in items and not assigned.get(A.text(d.child_by_field_name("declarator"))):
                    dims[A.text(d.child_by_field_name("declarator"))] = _dim3_args(items, {**consts, **ints}, macros)
                continue
            if d.type != "init_declarator":
                continue
            name = A.text(d.child_by_field_name("declarator"))
            if assigned.get(name):
                continue
            value = d.child_by_field_name("value")
            if "dim3" in ty:
                items = value.named_children if value.type in ("argument_list", "initializer_list") else None
                dims[name] = _dim3_args(items, {**consts, **ints}, macros) if items is not None else \
                    _dims(value, {**consts, **ints}, {k: v for k, v in dims.items() if v is not None}, macros)
            else:
                v = A.eval_const(value, {**consts, **ints}, macros)
                if v is not None:
                    ints[name] = v
