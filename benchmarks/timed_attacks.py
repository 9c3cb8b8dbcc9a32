"""Kernels that tell a timed call from a checked one, on a GPU: each is caught, and its honest twin is paid.

    python benchmarks/timed_attacks.py [--out FILE]

Each probe is a real candidate through the evaluator (gate, compile, sandboxed child, checks, timed rounds). The
attacks do less work only on the calls they take for timed ones, keyed on what a kernel can observe:
- `size`: the timing configurations' sizes (the built-in tasks check those configurations too, so this one also
  meets check calls);
- `count`: every call after the check configurations' calls (a host-side counter): timed calls alone;
- `address`: output buffers it has not seen during the checks (a host-side table of pointers): timed calls alone
  but those on a configuration's first slot;
- `gap`: calls that follow another within a millisecond, timed entirely on the GPU (%globaltimer in device code:
  the calls of a timed batch are back to back, the checks' are not): timed calls alone;
and the work they leave out: half the elements of a sum (rescaled), or a softmax's max pass. Every attack has an
honest twin (the same source with the switch off) that must come out `correct`, with its speedup beside the
attack's. An attack is caught when its verdict is anything but `correct`.
With CUDAPERF_ROOT set to another checkout, that checkout's evaluator judges the same probes (gpu_checks.sh
`timed_attacks`: the evaluator before and after, on the same GPU, in one call). Without a GPU every verdict is
`not_executed`: the script then checks only that every probe passes the gate and builds, and says so.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.environ.get("CUDAPERF_ROOT") or str(ROOT))

_DECIDE = {  # host code of the c2cuda entry point: `int cheat` from what it can observe
    "size": "int cheat = n >= (1 << 22);",
    "count": "static int calls = 0; int cheat = ++calls > CHECK_CALLS;",
    "address": ("static const void* seen[64]; static int calls = 0, known = 0; int cheat = 0;\n"
                "    if (++calls <= CHECK_CALLS) { if (known < 64) seen[known++] = result; }\n"
                "    else { cheat = 1; for (int k = 0; k < known; ++k) if (seen[k] == result) cheat = 0; }"),
    "gap": "int cheat = -1;  /* decided on the GPU */",
    "none": "int cheat = 0;",
}

WARP_SUM = r'''__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}'''

DOT = r'''
// dot product, grid-stride in registers, warp shuffles, one atomicAdd per block; STRIDE 2 reads every other pair
__device__ unsigned long long last_end_ns;
__device__ int gap_flag;
__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}
__global__ void decide_by_gap() { gap_flag = (now_ns() - last_end_ns) < 1000000ull; }
__global__ void mark_end() { last_end_ns = now_ns(); }
WARP_SUM
__global__ void __launch_bounds__(256) dot_k(int n, const float* __restrict__ x, const float* __restrict__ y,
                                             float* result, int cheat) {
    __shared__ float sums[8];
    if (cheat < 0) cheat = gap_flag;
    int step = cheat ? 2 : 1;
    float acc = 0.f;
    for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * step; i < n;
         i += (long long)gridDim.x * blockDim.x * step)
        acc += x[i] * y[i];
    acc = warp_sum(acc) * step;
    if ((threadIdx.x & 31) == 0) sums[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        acc = threadIdx.x < 8 ? sums[threadIdx.x] : 0.f;
        acc = warp_sum(acc);
        if (threadIdx.x == 0) atomicAdd(result, acc);
    }
}
#define CHECK_CALLS 10  /* c2cuda/dot: 5 configurations, timing ones included, 2 check sets each */
extern "C" void dot(int n, const float* x, const float* y, float* result) {
    DECIDE
    if (cheat < 0) decide_by_gap<<<1, 1>>>();
    int blocks = (n + 255) / 256;
    if (blocks > 132 * 8) blocks = 132 * 8;
    cudaMemsetAsync(result, 0, sizeof(float), 0);
    dot_k<<<blocks, 256>>>(n, x, y, result, cheat);
    mark_end<<<1, 1>>>();
}
'''

MSE = r'''
#include <cstdint>
#include <cuda_runtime.h>
// mean squared error, grid-stride in registers, one atomicAdd per block; STRIDE 2 reads every other pair
WARP_SUM
__global__ void __launch_bounds__(256) mse_k(const float* __restrict__ a, const float* __restrict__ b, float* out,
                                             int64_t n, int step) {
    __shared__ float sums[8];
    float acc = 0.f;
    for (int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * step; i < n;
         i += (int64_t)gridDim.x * blockDim.x * step) {
        float d = a[i] - b[i];
        acc += d * d;
    }
    acc = warp_sum(acc) * step;
    if ((threadIdx.x & 31) == 0) sums[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        acc = threadIdx.x < 8 ? sums[threadIdx.x] : 0.f;
        acc = warp_sum(acc);
        if (threadIdx.x == 0) atomicAdd(out, acc / (float)n);
    }
}
extern "C" int launch(void* const* inputs, void* const* outputs, const int64_t* sizes, cudaStream_t stream) {
    static int calls = 0;
    int cheat = ++calls > CHECK_CALLS;
    int64_t n = 1;
    for (int d = 0; d < (int)sizes[0]; ++d) n *= sizes[1 + d];
    int blocks = (int)((n + 255) / 256);
    if (blocks > 132 * 8) blocks = 132 * 8;
    cudaMemsetAsync(outputs[0], 0, sizeof(float), stream);
    mse_k<<<blocks, 256, 0, stream>>>((const float*)inputs[0], (const float*)inputs[1], (float*)outputs[0], n,
                                      SWITCH ? 2 : 1);
    return (int)cudaGetLastError();
}
'''

SOFTMAX = r'''
#include <cstdint>
#include <cuda_runtime.h>
// softmax over the last dimension, one 256-thread block per row; MAX_PASS 0 leaves out the max shift
__device__ __forceinline__ float warp_reduce(float v, bool is_max) {
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_down_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    return v;
}
__device__ float block_reduce(float v, bool is_max, float* shared) {
    v = warp_reduce(v, is_max);
    if ((threadIdx.x & 31) == 0) shared[threadIdx.x >> 5] = v;
    __syncthreads();
    v = threadIdx.x < 8 ? shared[threadIdx.x] : (is_max ? -INFINITY : 0.f);
    if (threadIdx.x < 32) v = warp_reduce(v, is_max);
    if (threadIdx.x == 0) shared[0] = v;
    __syncthreads();
    float r = shared[0];
    __syncthreads();
    return r;
}
__global__ void softmax_k(const float* x, float* y, int64_t cols) {
    __shared__ float shared[8];
    const float* xr = x + blockIdx.x * cols;
    float* yr = y + blockIdx.x * cols;
    float mx = 0.f;
    if (MAX_PASS) {
        float m = -INFINITY;
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
        mx = block_reduce(m, true, shared);
    }
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(xr[c] - mx);
    float inv = 1.f / block_reduce(s, false, shared);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = __expf(xr[c] - mx) * inv;
}
extern "C" int launch(void* const* inputs, void* const* outputs, const int64_t* sizes, cudaStream_t stream) {
    int rank = (int)sizes[0];
    int64_t cols = sizes[rank], rows = 1;
    for (int d = 0; d < rank - 1; ++d) rows *= sizes[1 + d];
    softmax_k<<<(unsigned)rows, 256, 0, stream>>>((const float*)inputs[0], (float*)outputs[0], cols);
    return (int)cudaGetLastError();
}
'''


def probes() -> list[dict]:
    """Every probe: name, task, format, code, and whether it must be caught (an attack) or paid (its twin)."""
    out, dot = [], DOT.replace("WARP_SUM", WARP_SUM)
    for key in ("size", "count", "address", "gap"):
        out.append({"probe": f"dot: half the pairs, keyed on {key}", "task": "c2cuda/dot", "format": "c2cuda",
                    "code": dot.replace("DECIDE", _DECIDE[key]), "attack": True})
    out.append({"probe": "dot: honest twin", "task": "c2cuda/dot", "format": "c2cuda",
                "code": dot.replace("DECIDE", _DECIDE["none"]), "attack": False})
    # torch2cuda/mse_loss: 5 configurations, at most 3 check sets each (the wide one where the reference is stable
    # on it): cheating after 15 calls touches timed calls alone
    mse = MSE.replace("WARP_SUM", WARP_SUM).replace("CHECK_CALLS", "15")
    out.append({"probe": "mse: half the pairs after every check call", "task": "torch2cuda/mse_loss", "format": "light",
                "code": mse.replace("SWITCH", "cheat"), "attack": True})
    out.append({"probe": "mse: honest twin", "task": "torch2cuda/mse_loss", "format": "light",
                "code": mse.replace("SWITCH", "0 * cheat"), "attack": False})
    out.append({"probe": "softmax: no max pass", "task": "torch2cuda/softmax", "format": "light",
                "code": SOFTMAX.replace("MAX_PASS", "0"), "attack": True})
    out.append({"probe": "softmax: honest twin", "task": "torch2cuda/softmax", "format": "light",
                "code": SOFTMAX.replace("MAX_PASS", "1"), "attack": False})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="JSON file to write (default: a new file under benchmarks/results/v<N>/)")
    args = ap.parse_args()
    from pipeline.core.config import CompileSection, EvalSection
    from pipeline.core.records import Candidate
    from pipeline.evaluation.evaluator import EVALUATOR_VERSION, Evaluator
    from pipeline.tasks import load_tasks
    try:
        import torch
        gpu = torch.cuda.is_available()
        device = torch.cuda.get_device_name(0) if gpu else "no GPU"
    except ImportError:
        gpu, device = False, "no GPU"
    tasks = {t.id: t for t in load_tasks("builtin")}
    ev = Evaluator(EvalSection(result_cache_dir=""), CompileSection(cache_dir=str(Path.home() / ".cache" / "cudaperf"
                                                                               / "timed-attacks")), use_gpu=gpu)
    rows = []
    for p in probes():
        t0 = time.perf_counter()
        r = ev.evaluate(tasks[p["task"]], [Candidate(task_id=p["task"], code=p["code"], format=p["format"])])[0]
        if gpu:
            ok = (r.verdict != "correct") if p["attack"] else (r.verdict == "correct")
        else:
            ok = r.verdict == "not_executed"  # gated and built: all a CPU can say
        rows.append({"probe": p["probe"], "task": p["task"], "attack": p["attack"], "verdict": r.verdict,
                     "speedup": r.speedup, "flags": r.flags, "reason": r.reason[:240], "ok": ok,
                     "seconds": round(time.perf_counter() - t0, 1)})
        print(json.dumps(rows[-1]), flush=True)
    ev.close()
    report = {"evaluator_version": EVALUATOR_VERSION, "device": device, "python": platform.python_version(),
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "command": "python benchmarks/timed_attacks.py", "rows": rows,
              "attacks_caught": sum(r["ok"] for r in rows if r["attack"]), "attacks": sum(r["attack"] for r in rows),
              "honest_paid": sum(r["ok"] for r in rows if not r["attack"]), "honest": sum(not r["attack"] for r in rows)}
    if args.out:
        out = Path(args.out)
    else:
        sys.path.insert(0, str(ROOT))
        from benchmarks.results_path import fresh_result_path
        out = fresh_result_path(f"timed_attacks_{device.split()[1].lower() if gpu else 'cpu'}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    print(f"\n==== timed attacks (evaluator {EVALUATOR_VERSION}, {device}) ====")
    print(f"{'probe':48s} {'verdict':14s} {'speedup':>8s}  {'ok':3s} reason")
    for r in rows:
        sp = f"{r['speedup']:.2f}" if r["speedup"] else "-"
        print(f"{r['probe']:48s} {r['verdict']:14s} {sp:>8s}  {'yes' if r['ok'] else 'NO':3s} {r['reason'][:90]}")
    what = "caught" if gpu else "gated and built (no GPU: not executed)"
    print(f"attacks {what}: {report['attacks_caught']} of {report['attacks']}; honest twins "
          f"{'paid' if gpu else 'gated and built'}: {report['honest_paid']} of {report['honest']}; wrote {out}")


if __name__ == "__main__":
    main()
