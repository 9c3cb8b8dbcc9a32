"""sort_segments: sort f(x) within each segment of S consecutive keys (S a power of two, 32..1024),
ascending or descending; exact results (sorting only moves values).

Implementations: naive (a thread per segment, insertion sort in global memory), odd_even (S/2
threads, transposition sort in shared memory), bitonic_shared (S/2 threads, the bitonic network in
shared memory), bitonic_shuffle (S threads, one key each: register shuffles for partners less than
32 apart, shared memory beyond) and bitonic_global (one kernel launch per network stage over the
whole array in global memory).
"""
from __future__ import annotations

from pipeline.tasks.families._kit import (DOUBLE, FLOAT, UNARY, Impl, TorchModule, arg, arg_names, c2cuda_task, configs,
                                         dedent, signature, tfill, torch_task)
from pipeline.tasks.families.layout import INT
from pipeline.core.records import Tolerance

_HEAD = """
#define S ${S}
// before(a, b): a belongs before b in the requested order
__device__ __forceinline__ bool before(${T} a, ${T} b) { return a ${CMP} b; }
__device__ __forceinline__ ${T} key(${T} x) { return ${MAP}; }
"""
_NAIVE = """
// One thread per segment: insertion sort in place in the output (global memory).
__global__ void sort_naive(${SIG}) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= segs) return;
    const ${T}* src = input + (size_t)g * S;
    ${T}* dst = output + (size_t)g * S;
    for (int i = 0; i < S; ++i) {
        ${T} v = key(src[i]);
        int j = i - 1;
        while (j >= 0 && before(v, dst[j])) { dst[j + 1] = dst[j]; --j; }
        dst[j + 1] = v;
    }
}
static void run(${SIG}, cudaStream_t stream) {
    sort_naive<<<(segs + 63) / 64, 64, 0, stream>>>(${NAMES});
}
"""
_ODD_EVEN = """
// One block of S/2 threads per segment: S rounds of odd-even transposition in shared memory.
__global__ void __launch_bounds__(S / 2) sort_odd_even(${SIG}) {
    __shared__ ${T} s[S];
    const ${T}* src = input + (size_t)blockIdx.x * S;
    for (int i = threadIdx.x; i < S; i += S / 2) s[i] = key(src[i]);
    __syncthreads();
    for (int round = 0; round < S; ++round) {
        int i = 2 * threadIdx.x + (round & 1);
        if (i + 1 < S && before(s[i + 1], s[i])) { ${T} t = s[i]; s[i] = s[i + 1]; s[i + 1] = t; }
        __syncthreads();
    }
    for (int i = threadIdx.x; i < S; i += S / 2) output[(size_t)blockIdx.x * S + i] = s[i];
}
static void run(${SIG}, cudaStream_t stream) {
    sort_odd_even<<<segs, S / 2, 0, stream>>>(${NAMES});
}
"""
_BITONIC_SHARED = """
// One block of S/2 threads per segment: the bitonic network in shared memory, one compare-exchange
// per thread and stage.
__global__ void __launch_bounds__(S / 2) sort_bitonic(${SIG}) {
    __shared__ ${T} s[S];
    const ${T}* src = input + (size_t)blockIdx.x * S;
    for (int i = threadIdx.x; i < S; i += S / 2) s[i] = key(src[i]);
    __syncthreads();
    for (int k = 2; k <= S; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            int t = threadIdx.x;
            int i = 2 * j * (t / j) + (t % j);  // lower index of this thread's pair
            int p = i + j;
            bool up = (i & k) == 0;
            if (before(s[p], s[i]) == up) { ${T} tmp = s[i]; s[i] = s[p]; s[p] = tmp; }
            __syncthreads();
        }
    for (int i = threadIdx.x; i < S; i += S / 2) output[(size_t)blockIdx.x * S + i] = s[i];
}
static void run(${SIG}, cudaStream_t stream) {
    sort_bitonic<<<segs, S / 2, 0, stream>>>(${NAMES});
}
"""
_BITONIC_SHFL = """
// One block of S threads per segment, one key per thread: partners under 32 apart exchanged with
// __shfl_xor_sync, farther ones through shared memory.
__global__ void __launch_bounds__(S) sort_shfl(${SIG}) {
    __shared__ ${T} s[S];
    int t = threadIdx.x;
    ${T} v = key(input[(size_t)blockIdx.x * S + t]);
    for (int k = 2; k <= S; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            ${T} other;
            if (j >= 32) {
                s[t] = v;
                __syncthreads();
                other = s[t ^ j];
                __syncthreads();
            } else {
                other = __shfl_xor_sync(0xffffffffu, v, j);
            }
            bool up = (t & k) == 0, lower = (t & j) == 0;
            // the lower slot of an 'up' pair keeps the element that comes first
            bool keep_first = (lower == up);
            bool other_first = before(other, v);
            if (keep_first == other_first) v = other;
        }
    output[(size_t)blockIdx.x * S + t] = v;
}
static void run(${SIG}, cudaStream_t stream) {
    sort_shfl<<<segs, S, 0, stream>>>(${NAMES});
}
"""
_BITONIC_GLOBAL = """
// The bitonic network with one kernel launch per stage, in place in global memory.
__global__ void sort_copy(${SIG}) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (long long)segs * S) output[i] = key(input[i]);
}
__global__ void sort_stage(${T}* data, long long total, int k, int j) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total / 2) return;
    long long i = 2 * (long long)j * (t / j) + (t % j);
    long long p = i + j;
    bool up = ((i % S) & k) == 0;
    if (before(data[p], data[i]) == up) { ${T} tmp = data[i]; data[i] = data[p]; data[p] = tmp; }
}
static void run(${SIG}, cudaStream_t stream) {
    long long total = (long long)segs * S;
    sort_copy<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(${NAMES});
    for (int k = 2; k <= S; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1)
            sort_stage<<<(unsigned)((total / 2 + 255) / 256), 256, 0, stream>>>(output, total, k, j);
}
"""


def _impls(dt, S, desc, mp, args):
    ctx = dict(SIG=signature(args), NAMES=arg_names(args), S=S, CMP=">" if desc else "<", MAP=tfill(mp, dt, x="x"))
    head = tfill(dedent(_HEAD), dt, **ctx)

    def code(t):
        return head + tfill(dedent(t), dt, **ctx)
    return [Impl("naive", "naive", code(_NAIVE)), Impl("odd_even", "odd_even_shared", code(_ODD_EVEN)),
            Impl("bitonic_shared", "bitonic_shared", code(_BITONIC_SHARED)),
            Impl("bitonic_shuffle", "warp_shuffle", code(_BITONIC_SHFL)),
            Impl("bitonic_global", "global_multipass", code(_BITONIC_GLOBAL))]


_INT_MAPS = {"identity": "${x}", "abs": "(${x} < 0 ? -${x} : ${x})", "mod97": "(${x} % 97)", "neg": "(-${x})"}
_FLOAT_MAPS = ["identity", "abs", "square", "sin", "tanh", "neg_exp_sq"]


def _tolerance(map_name: str) -> Tolerance:
    """Exact for maps IEEE arithmetic rounds the same everywhere; a few ulps for sin, tanh and exp,
    whose CUDA and C library results may differ in the last bit (the sorted keys then do too)."""
    return Tolerance(rtol=1e-5, atol=1e-6) if map_name in ("sin", "tanh", "neg_exp_sq") else Tolerance(rtol=0, atol=0)


def sort_tasks(rng) -> list:
    out = []
    for S in (32, 64, 128, 256, 512, 1024):
        for desc in (False, True):
            for dt, maps in ((FLOAT, {m: UNARY[m].c for m in _FLOAT_MAPS}), (DOUBLE, {m: UNARY[m].c for m in _FLOAT_MAPS[:3]}),
                             (INT, _INT_MAPS)):
                for k, (mname, mp) in enumerate(maps.items()):
                    if (S.bit_length() + desc + k) % 2 and dt is FLOAT:
                        continue
                    order = "descending" if desc else "ascending"
                    variant = f"s{S}_{order}_{mname}_{dt.name}"
                    fn = f"sort_segments_{variant}"
                    args = [arg("segs", "int", "scalar"),
                            arg("input", f"const {dt.name}*", "in", f"segs*{S}", "randint(-100000, 100000)" if dt is INT else ""),
                            arg("output", f"{dt.name}*", "out", f"segs*{S}")]
                    cmp = "(a > b) - (a < b)" if not desc else "(a < b) - (a > b)"
                    ref = (f"#include <math.h>\n#include <stdlib.h>\n#include <stddef.h>\n\n"
                           f"static int cmp(const void* pa, const void* pb) {{\n"
                           f"    {dt.name} a = *(const {dt.name}*)pa, b = *(const {dt.name}*)pb;\n    return {cmp};\n}}\n\n"
                           f"void {fn}({signature(args)}) {{\n"
                           f"    for (size_t i = 0; i < (size_t)segs * {S}; ++i) {{ {dt.name} x = input[i]; output[i] = {tfill(mp, dt, x='x')}; }}\n"
                           f"    for (int g = 0; g < segs; ++g) qsort(output + (size_t)g * {S}, {S}, sizeof({dt.name}), cmp);\n}}\n")
                    total = (1 << 21) if dt is not DOUBLE else (1 << 20)
                    cfgs = configs([{"segs": 1}, {"segs": 3}, {"segs": 17}],
                                   [{"segs": total // S}, {"segs": (total // S) * 5 // 8 + 1}])
                    out.append(c2cuda_task("sort_segments", variant, fn, ref, args, cfgs, f"segs*{S * S.bit_length()}",
                                           f"{2 * dt.size}*segs*{S}", _impls(dt, S, desc, mp, args), _tolerance(mname),
                                           f"sort {mname}(x) {order} within each segment of {S} {dt.name} keys"))
                    if dt is FLOAT and k % 2 == 0:
                        module = TorchModule([("x", f"torch.randn(segs, {S})")],
                                             [f"return torch.sort({UNARY[mname].texpr('x')}, dim=-1, descending={desc}).values"],
                                             {"segs": 1024})
                        targs = [arg("segs", "int", "scalar"), arg("input", "const float*", "in", "1"),
                                 arg("output", "float*", "out", "1")]
                        launch = "    run((int)dim_of(sizes, 0, 0), (const float*)inputs[0], (float*)outputs[0], stream);"
                        out.append(torch_task("sort_segments", f"s{S}_{order}_{mname}", module.source(), cfgs,
                                              f"segs*{S * S.bit_length()}", f"8*segs*{S}", _impls(FLOAT, S, desc, mp, targs),
                                              launch, Tolerance(rtol=0, atol=0), f"torch.sort of {mname}(x) rows of {S}"))
    return out
