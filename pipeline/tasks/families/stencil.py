"""Stencils and convolutions over batches of 1-D rows, 2-D planes and 3-D volumes ('same' size
output, zero or clamped boundary).

A stencil is one or two weighted sums over neighbour offsets (constant taps, or a K^d filter
array given as an input) and a post expression over the sums a0, a1 and the centre value xc.
The accumulation text uses a macro V(offsets); each implementation defines V its own way (global
loads with the boundary rule, or a shared-memory tile), so every strategy sums in the same order.
2-D: naive, y_threads (threads along y: uncoalesced), shared_tiled (32 x 8 outputs plus halo),
shared_coarse (32 x 32 outputs, 4 rows per thread), reg_coarse (4 rows per thread, no shared).
1-D: naive, strided_lanes, shared_tiled, coarse4, shared_1024. 3-D: naive, z_threads, coarse_z4,
shared_box (a halo box of 2R+1 planes), z_loop (one thread per column marching along z).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product

from pipeline.tasks.families._kit import (FLOAT, DType, Impl, arg, arg_names, c2cuda_task, configs,
                                         dedent, signature, tfill)
from pipeline.core.records import Tolerance


@dataclass
class Stencil:
    dims: int                                   # 1, 2 or 3
    dt: DType
    taps: list[list[tuple[tuple, float]]] = field(default_factory=list)  # per sum: ((dz,)dy,dx offsets, weight)
    k: int = 0                                  # filter array size per dim (taps from an input array) when > 0
    boundary: str = "zero"                      # zero | clamp
    post: str = "a0"                            # over a0, a1, xc (C, with ${F} ${C})

    @property
    def radius(self) -> int:
        if self.k:
            return self.k // 2
        return max(abs(o) for taps in self.taps for off, _ in taps for o in off)

    def sizes(self) -> list[str]:
        return ["planes", "n"] if self.dims == 1 else ["planes", "h", "w"] if self.dims == 2 else ["planes", "d", "h", "w"]

    def args(self):
        sz = self.sizes()
        total = "*".join(sz)
        a = [arg(s, "int", "scalar") for s in sz] + [arg("input", f"const {self.dt.name}*", "in", total)]
        if self.k:
            a.append(arg("filt", f"const {self.dt.name}*", "in", str(self.k ** self.dims), "uniform(-0.5, 0.5)"))
        return a + [arg("output", f"{self.dt.name}*", "out", total)]

    def body(self, indent: str) -> str:
        """Statements computing r from V(...): the same text in the reference and every kernel."""
        T = self.dt.name
        lines = [f"{T} a0 = 0, a1 = 0;"]
        if self.k:
            R, K = self.radius, self.k
            idx = {1: ("kx", "V(kx - R)"), 2: ("ky * K + kx", "V(ky - R, kx - R)"),
                   3: ("(kz * K + ky) * K + kx", "V(kz - R, ky - R, kx - R)")}[self.dims]
            loops = ["kz", "ky", "kx"][3 - self.dims:]
            lines.append(f"const int R = {R}, K = {K};")
            for depth, v in enumerate(loops):
                lines.append("    " * depth + f"for (int {v} = 0; {v} < K; ++{v})")
            lines.append("    " * len(loops) + f"a0 += filt[{idx[0]}] * {idx[1]};")
        else:
            for s, taps in enumerate(self.taps):
                for off, w in taps:
                    lines.append(f"a{s} += {self.dt.lit(w)} * V({', '.join(str(o) for o in off)});")
        lines.append(f"{T} xc = V({', '.join(['0'] * self.dims)});")
        lines.append(f"{T} r = {tfill(self.post, self.dt)};")
        lines.append("(void)a1; (void)xc;")
        return ("\n" + indent).join(lines)

    def load_fn(self) -> str:
        T = self.dt.name
        if self.dims == 1:
            sig, idx, conds = "int n, int x", "x", [("x", "n")]
        elif self.dims == 2:
            sig, idx, conds = "int h, int w, int y, int x", "(size_t)y * w + x", [("y", "h"), ("x", "w")]
        else:
            sig, idx, conds = "int d, int h, int w, int z, int y, int x", "((size_t)z * h + y) * w + x", \
                [("z", "d"), ("y", "h"), ("x", "w")]
        if self.boundary == "zero":
            test = " && ".join(f"{v} >= 0 && {v} < {e}" for v, e in conds)
            body = f"return ({test}) ? p[{idx}] : ({T})0;"
        else:
            clamps = " ".join(f"{v} = {v} < 0 ? 0 : ({v} >= {e} ? {e} - 1 : {v});" for v, e in conds)
            body = f"{clamps} return p[{idx}];"
        return f"load(const {T}* p, {sig}) {{ {body} }}"


def reference(s: Stencil, fn: str) -> str:
    T = s.dt.name
    loops = {1: ["x < n"], 2: ["y < h", "x < w"], 3: ["z < d", "y < h", "x < w"]}[s.dims]
    plane = {1: "(size_t)p * n", 2: "(size_t)p * h * w", 3: "(size_t)p * d * h * w"}[s.dims]
    vdef = {1: "#define V(dx) load(in, n, x + (dx))", 2: "#define V(dy, dx) load(in, h, w, y + (dy), x + (dx))",
            3: "#define V(dz, dy, dx) load(in, d, h, w, z + (dz), y + (dy), x + (dx))"}[s.dims]
    out_idx = {1: "x", 2: "(size_t)y * w + x", 3: "((size_t)z * h + y) * w + x"}[s.dims]
    lines = [f"#include <math.h>\n#include <stddef.h>\n\nstatic {T} {s.load_fn()}\n", vdef,
             f"void {fn}({signature(s.args())}) {{", "    for (int p = 0; p < planes; ++p) {",
             f"        const {T}* in = input + {plane};", f"        {T}* out = output + {plane};"]
    ind = "        "
    for cond in loops:
        v = cond.split()[0]
        lines.append(f"{ind}for (int {v} = 0; {cond}; ++{v}) {{")
        ind += "    "
    lines.append(ind + s.body(ind))
    lines.append(f"{ind}out[{out_idx}] = r;")
    for _ in loops:
        ind = ind[:-4]
        lines.append(ind + "}")
    lines += ["    }", "}", "#undef V"]
    return "\n".join(lines) + "\n"


# --- 2-D kernels ------------------------------------------------------------------------------------------
_2D_NAIVE = """
// One thread per output, threadIdx.x along x; neighbours re-read from global memory (L1/L2).
__global__ void st_naive(${SIG}) {
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 8 + threadIdx.y, p = blockIdx.z;
    if (x >= w || y >= h) return;
    const ${T}* in = input + (size_t)p * h * w;
#define V(dy, dx) load(in, h, w, y + (dy), x + (dx))
    ${BODY}
#undef V
    output[((size_t)p * h + y) * w + x] = r;
}
static void run(${SIG}, cudaStream_t stream) {
    st_naive<<<dim3((w + 31) / 32, (h + 7) / 8, planes), dim3(32, 8), 0, stream>>>(${NAMES});
}
"""
_2D_YTHREADS = """
// One thread per output with threadIdx.x along y: each warp load touches 32 rows (uncoalesced).
__global__ void st_ythreads(${SIG}) {
    int y = blockIdx.x * 32 + threadIdx.x, x = blockIdx.y * 8 + threadIdx.y, p = blockIdx.z;
    if (x >= w || y >= h) return;
    const ${T}* in = input + (size_t)p * h * w;
#define V(dy, dx) load(in, h, w, y + (dy), x + (dx))
    ${BODY}
#undef V
    output[((size_t)p * h + y) * w + x] = r;
}
static void run(${SIG}, cudaStream_t stream) {
    st_ythreads<<<dim3((h + 31) / 32, (w + 7) / 8, planes), dim3(32, 8), 0, stream>>>(${NAMES});
}
"""
_2D_SHARED = """
// 32 x ${TH} outputs per block of 32 x 8 threads: the tile and its halo of ${R} staged in shared
// memory once, each thread computing ${TH} / 8 rows from it.
#define RAD ${R}
#define TH ${TH}
__global__ void __launch_bounds__(256) st_shared(${SIG}) {
    __shared__ ${T} tile[TH + 2 * RAD][32 + 2 * RAD];
    int x0 = blockIdx.x * 32, y0 = blockIdx.y * TH, p = blockIdx.z;
    const ${T}* in = input + (size_t)p * h * w;
    for (int i = threadIdx.y * 32 + threadIdx.x; i < (TH + 2 * RAD) * (32 + 2 * RAD); i += 256) {
        int ty = i / (32 + 2 * RAD), tx = i % (32 + 2 * RAD);
        tile[ty][tx] = load(in, h, w, y0 + ty - RAD, x0 + tx - RAD);
    }
    __syncthreads();
    int x = x0 + threadIdx.x;
    for (int ly = threadIdx.y; ly < TH; ly += 8) {
        int y = y0 + ly;
        if (x >= w || y >= h) continue;
#define V(dy, dx) tile[ly + RAD + (dy)][threadIdx.x + RAD + (dx)]
        ${BODY}
#undef V
        output[((size_t)p * h + y) * w + x] = r;
    }
}
static void run(${SIG}, cudaStream_t stream) {
    st_shared<<<dim3((w + 31) / 32, (h + TH - 1) / TH, planes), dim3(32, 8), 0, stream>>>(${NAMES});
}
"""
_2D_REG = """
// Thread coarsening without shared memory: each thread computes 4 rows of one column.
__global__ void __launch_bounds__(256) st_reg(${SIG}) {
    int x = blockIdx.x * 32 + threadIdx.x, p = blockIdx.z;
    int yb = (blockIdx.y * 8 + threadIdx.y) * 4;
    if (x >= w) return;
    const ${T}* in = input + (size_t)p * h * w;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        int y = yb + q;
        if (y >= h) break;
#define V(dy, dx) load(in, h, w, y + (dy), x + (dx))
        ${BODY}
#undef V
        output[((size_t)p * h + y) * w + x] = r;
    }
}
static void run(${SIG}, cudaStream_t stream) {
    st_reg<<<dim3((w + 31) / 32, (h + 31) / 32, planes), dim3(32, 8), 0, stream>>>(${NAMES});
}
"""

# --- 1-D kernels ------------------------------------------------------------------------------------------
_1D_NAIVE = """
// One thread per output; neighbours re-read from global memory.
__global__ void st_naive(${SIG}) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, p = blockIdx.y;
    if (x >= n) return;
    const ${T}* in = input + (size_t)p * n;
#define V(dx) load(in, n, x + (dx))
    ${BODY}
#undef V
    output[(size_t)p * n + x] = r;
}
static void run(${SIG}, cudaStream_t stream) {
    st_naive<<<dim3((n + 255) / 256, planes), 256, 0, stream>>>(${NAMES});
}
"""
_1D_STRIDED = """
// Uncoalesced: lane l of a warp takes the l-th of 32 contiguous chunks of the row.
__global__ void st_strided(${SIG}) {
    int chunk = (n + 31) / 32;
    int t = blockIdx.x * blockDim.x + threadIdx.x, p = blockIdx.y;
    int x = (t % 32) * chunk + t / 32;
    if (t >= 32 * chunk || x >= n) return;
    const ${T}* in = input + (size_t)p * n;
#define V(dx) load(in, n, x + (dx))
    ${BODY}
#undef V
    output[(size_t)p * n + x] = r;
}
static void run(${SIG}, cudaStream_t stream) {
    int threads = 32 * ((n + 31) / 32);
    st_strided<<<dim3((threads + 255) / 256, planes), 256, 0, stream>>>(${NAMES});
}
"""
_1D_SHARED = """
// ${NT} outputs per block: the segment and its halo of ${R} staged in shared memory.
#define RAD ${R}
__global__ void __launch_bounds__(${NT}) st_shared(${SIG}) {
    __shared__ ${T} tile[${NT} + 2 * RAD];
    int x0 = blockIdx.x * ${NT}, p = blockIdx.y;
    const ${T}* in = input + (size_t)p * n;
    for (int i = threadIdx.x; i < ${NT} + 2 * RAD; i += ${NT}) tile[i] = load(in, n, x0 + i - RAD);
    __syncthreads();
    int x = x0 + threadIdx.x;
    if (x >= n) return;
#define V(dx) tile[threadIdx.x + RAD + (dx)]
    ${BODY}
#undef V
    output[(size_t)p * n + x] = r;
}
static void run(${SIG}, cudaStream_t stream) {
    st_shared<<<dim3((n + ${NT} - 1) / ${NT}, planes), ${NT}, 0, stream>>>(${NAMES});
}
"""
_1D_COARSE = """
// Four outputs per thread, 256 apart (coalesced), neighbours from global memory.
__global__ void __launch_bounds__(256) st_coarse(${SIG}) {
    int p = blockIdx.y;
    const ${T}* in = input + (size_t)p * n;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        int x = blockIdx.x * 1024 + q * 256 + threadIdx.x;
        if (x >= n) break;
#define V(dx) load(in, n, x + (dx))
        ${BODY}
#undef V
        output[(size_t)p * n + x] = r;
    }
}
static void run(${SIG}, cudaStream_t stream) {
    st_coarse<<<dim3((n + 1023) / 1024, planes), 256, 0, stream>>>(${NAMES});
}
"""

# --- 3-D kernels ------------------------------------------------------------------------------------------
_3D_NAIVE = """
// One thread per output, x fastest; grid z enumerates (volume, z).
__global__ void st_naive(${SIG}) {
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 8 + threadIdx.y;
    int p = blockIdx.z / d, z = blockIdx.z % d;
    if (x >= w || y >= h) return;
    const ${T}* in = input + (size_t)p * d * h * w;
#define V(dz, dy, dx) load(in, d, h, w, z + (dz), y + (dy), x + (dx))
    ${BODY}
#undef V
    output[(((size_t)p * d + z) * h + y) * w + x] = r;
}
static void run(${SIG}, cudaStream_t stream) {
    st_naive<<<dim3((w + 31) / 32, (h + 7) / 8, planes * d), dim3(32, 8), 0, stream>>>(${NAMES});
}
"""
_3D_ZTHREADS = """
// threadIdx.x along z: every warp access touches 32 planes (uncoalesced).
__global__ void st_zthreads(${SIG}) {
    int z = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 8 + threadIdx.y;
    int p = blockIdx.z / w, x = blockIdx.z % w;
    if (z >= d || y >= h) return;
    const ${T}* in = input + (size_t)p * d * h * w;
#define V(dz, dy, dx) load(in, d, h, w, z + (dz), y + (dy), x + (dx))
    ${BODY}
#undef V
    output[(((size_t)p * d + z) * h + y) * w + x] = r;
}
static void run(${SIG}, cudaStream_t stream) {
    st_zthreads<<<dim3((d + 31) / 32, (h + 7) / 8, planes * w), dim3(32, 8), 0, stream>>>(${NAMES});
}
"""
_3D_COARSE = """
// Four z planes per thread (${ZSTEP}), neighbours from global memory.
__global__ void __launch_bounds__(256) st_coarse(${SIG}) {
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 8 + threadIdx.y;
    int zb = ${ZB};
    int p = blockIdx.z / ${ZBLOCKS};
    if (x >= w || y >= h) return;
    const ${T}* in = input + (size_t)p * d * h * w;
    for (int q = 0; q < ${ZCOUNT}; ++q) {
        int z = zb + q;
        if (z >= d) break;
#define V(dz, dy, dx) load(in, d, h, w, z + (dz), y + (dy), x + (dx))
        ${BODY}
#undef V
        output[(((size_t)p * d + z) * h + y) * w + x] = r;
    }
}
static void run(${SIG}, cudaStream_t stream) {
    int zblocks = ${ZBLOCKS_HOST};
    st_coarse<<<dim3((w + 31) / 32, (h + 7) / 8, planes * zblocks), dim3(32, 8), 0, stream>>>(${NAMES});
}
"""
_3D_SHARED = """
// A 32 x 8 x 1 output tile per block with its halo box (2R+1 planes) staged in shared memory.
#define RAD ${R}
__global__ void __launch_bounds__(256) st_shared(${SIG}) {
    __shared__ ${T} box[2 * RAD + 1][8 + 2 * RAD][32 + 2 * RAD];
    int x0 = blockIdx.x * 32, y0 = blockIdx.y * 8;
    int p = blockIdx.z / d, z = blockIdx.z % d;
    const ${T}* in = input + (size_t)p * d * h * w;
    const int plane = (8 + 2 * RAD) * (32 + 2 * RAD);
    for (int i = threadIdx.y * 32 + threadIdx.x; i < (2 * RAD + 1) * plane; i += 256) {
        int bz = i / plane, rem = i % plane, by = rem / (32 + 2 * RAD), bx = rem % (32 + 2 * RAD);
        box[bz][by][bx] = load(in, d, h, w, z + bz - RAD, y0 + by - RAD, x0 + bx - RAD);
    }
    __syncthreads();
    int x = x0 + threadIdx.x, y = y0 + threadIdx.y;
    if (x >= w || y >= h) return;
#define V(dz, dy, dx) box[RAD + (dz)][threadIdx.y + RAD + (dy)][threadIdx.x + RAD + (dx)]
    ${BODY}
#undef V
    output[(((size_t)p * d + z) * h + y) * w + x] = r;
}
static void run(${SIG}, cudaStream_t stream) {
    st_shared<<<dim3((w + 31) / 32, (h + 7) / 8, planes * d), dim3(32, 8), 0, stream>>>(${NAMES});
}
"""


def implementations(s: Stencil) -> list[Impl]:
    args = s.args()
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), R=s.radius)
    head = f"__device__ __forceinline__ {s.dt.name} {s.load_fn()}\n"

    def code(t, indent="    ", **kw):
        return head + tfill(dedent(t), s.dt, BODY=s.body(indent), **{**ctx, **kw})
    if s.dims == 2:
        return [Impl("naive", "naive", code(_2D_NAIVE)), Impl("y_threads", "uncoalesced", code(_2D_YTHREADS)),
                Impl("shared_tiled", "tiled_shared", code(_2D_SHARED, "        ", TH=8)),
                Impl("shared_coarse", "tiled_shared_coarse", code(_2D_SHARED, "        ", TH=32)),
                Impl("reg_coarse", "thread_coarsening", code(_2D_REG, "        "))]
    if s.dims == 1:
        return [Impl("naive", "naive", code(_1D_NAIVE)), Impl("strided_lanes", "uncoalesced", code(_1D_STRIDED)),
                Impl("shared_tiled", "tiled_shared", code(_1D_SHARED, NT=256)),
                Impl("coarse4", "thread_coarsening", code(_1D_COARSE, "        ")),
                Impl("shared_1024", "block_size_1024", code(_1D_SHARED, NT=1024))]
    z4 = dict(ZSTEP="consecutive", ZB="(blockIdx.z % ZBLK) * 4".replace("ZBLK", "((d + 3) / 4)"),
              ZBLOCKS="((d + 3) / 4)", ZCOUNT=4, ZBLOCKS_HOST="(d + 3) / 4")
    zall = dict(ZSTEP="all of them: a z loop", ZB="0", ZBLOCKS="1", ZCOUNT="d", ZBLOCKS_HOST="1")
    return [Impl("naive", "naive", code(_3D_NAIVE)), Impl("z_threads", "uncoalesced", code(_3D_ZTHREADS)),
            Impl("coarse_z4", "thread_coarsening", code(_3D_COARSE, "        ", **z4)),
            Impl("shared_box", "tiled_shared", code(_3D_SHARED)),
            Impl("z_loop", "z_marching", code(_3D_COARSE, "        ", **zall))]


# --- configs ----------------------------------------------------------------------------------------------
def stencil_configs(dims: int, dt: DType):
    big = dt.size == 4  # double tasks time half as many elements in 1-D and 2-D
    if dims == 1:
        return configs([{"planes": 1, "n": 1000}, {"planes": 3, "n": 4099}, {"planes": 7, "n": 33}],
                       [{"planes": 16, "n": (1 << 20) if big else (1 << 19)}, {"planes": 7, "n": 1000003}])
    if dims == 2:
        return configs([{"planes": 1, "h": 33, "w": 65}, {"planes": 2, "h": 100, "w": 37}, {"planes": 3, "h": 7, "w": 300}],
                       [{"planes": 4, "h": 2048, "w": 2048} if big else {"planes": 2, "h": 2048, "w": 2048},
                        {"planes": 3, "h": 1999, "w": 1001}])
    return configs([{"planes": 1, "d": 9, "h": 17, "w": 33}, {"planes": 2, "d": 5, "h": 30, "w": 7},
                    {"planes": 1, "d": 20, "h": 3, "w": 40}],
                   [{"planes": 1, "d": 128, "h": 256, "w": 256},
                    {"planes": 2, "d": 100, "h": 129, "w": 250}])


def stencil_task(family: str, variant: str, s: Stencil, description: str, flops_per_point: int):
    fn = f"{family}_{variant}"
    total = "*".join(s.sizes())
    tol = Tolerance(rtol=1e-4, atol=1e-5) if s.dt is FLOAT else Tolerance(rtol=1e-10, atol=1e-11)
    extra = f" + {s.dt.size * s.k ** s.dims}" if s.k else ""
    return c2cuda_task(family, variant, fn, reference(s, fn), s.args(), stencil_configs(s.dims, s.dt),
                       f"{flops_per_point}*{total}", f"{2 * s.dt.size}*{total}{extra}", implementations(s), tol, description)


def offsets(dims: int, shape: str, radius: int) -> list[tuple]:
    """Neighbour offsets of a pattern: star (axes only), box (all), cross (diagonals + centre)."""
    rng = range(-radius, radius + 1)
    out = []
    for off in product(rng, repeat=dims):
        nz = sum(o != 0 for o in off)
        if shape == "star" and nz > 1:
            continue
        if shape == "cross" and len({abs(o) for o in off}) > 1:
            continue
        out.append(off)
    return out
