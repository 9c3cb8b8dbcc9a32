"""Check the structure analyses against a real GPU: run this LATER on the H200, not on CI.

    python -m pipeline.structure.validate_gpu --out $OUT/structure_validation.json [--arch sm_90]

(a) Occupancy: one executable (nvcc) holds 25 kernels of graded register pressure, static shared
    memory and named-barrier use; for 13 block sizes x 5 dynamic shared memory sizes it prints
    `cudaOccupancyMaxActiveBlocksPerMultiprocessor` (dynamic smem opt-in raised to the maximum)
    and `cudaFuncGetAttributes`; we compare with `occupancy.occupancy()` fed by our own parse of
    the ptxas report of the same build (registers are compared too). The C++ runtime API is
    called directly rather than through cupy, so the numbers are the runtime's own.
(b) Coalescing: 25 small kernels with one signature, each built into its own executable
    (`nvcc -lineinfo`), each run once under `ncu --clock-control none --metrics ...`; the static
    analysis predicts global load sectors per request from each load's class and stride
    (coalesced 4-byte loads: 4, float4: 16, broadcast: 1, strided or gathered: up to 32) and
    whether shared loads conflict; a kernel agrees when the measurement is within a factor 2.
Both agreement tables are printed; everything goes to the JSON file. Every step catches its own
failure, prints it and goes on. The static analysis needs tree-sitter (on a host without it,
install the `tree-sitter` and `tree-sitter-cuda` wheels); without it the hand labels in KERNELS
are used for the predictions.
`build_occupancy_exe` and `build_ncu_executables` only compile (the CPU test calls them).
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from pipeline.structure.occupancy import occupancy
from pipeline.structure.ptxas import parse_ptxas_report, ptxas_flags

OCC_SOURCE = r"""
#include <cstdio>
#include <cuda_runtime.h>
template <int NACC, int SMEM, int BAR>
__device__ __forceinline__ void body(const float* __restrict__ in, float* __restrict__ out, int n) {
    __shared__ float s[SMEM > 0 ? SMEM : 1];
    float acc[NACC];
    #pragma unroll
    for (int j = 0; j < NACC; ++j) acc[j] = in[threadIdx.x + j * n];
    #pragma unroll
    for (int r = 0; r < 3; ++r) {
        #pragma unroll
        for (int j = 0; j < NACC; ++j) acc[j] = acc[j] * acc[(j + 1) % NACC] + (float)r;
    }
    if (SMEM > 0) { s[threadIdx.x % SMEM] = acc[0]; __syncthreads(); acc[0] += s[(threadIdx.x + 1) % SMEM]; }
    if (BAR && n < 0) asm volatile("bar.sync 15;");
    float t = 0.f;
    #pragma unroll
    for (int j = 0; j < NACC; ++j) t += acc[j];
    out[blockIdx.x * blockDim.x + threadIdx.x] = t;
}
#define DEF(A, S, B) extern "C" __global__ void occ_##A##_##S##_##B(const float* in, float* out, int n) \
    { body<A, S, B>(in, out, n); }
#define ALL_SMEM(A) DEF(A, 0, 0) DEF(A, 1024, 0) DEF(A, 6144, 0) DEF(A, 12288, 0)
ALL_SMEM(1) ALL_SMEM(16) ALL_SMEM(40) ALL_SMEM(64) ALL_SMEM(100) ALL_SMEM(160) DEF(1, 0, 1)
#define E(A, S, B) {"occ_" #A "_" #S "_" #B, (const void*)occ_##A##_##S##_##B}
#define E_SMEM(A) E(A, 0, 0), E(A, 1024, 0), E(A, 6144, 0), E(A, 12288, 0)
struct Entry { const char* name; const void* fn; };
int main() {
    Entry entries[] = {E_SMEM(1), E_SMEM(16), E_SMEM(40), E_SMEM(64), E_SMEM(100), E_SMEM(160), E(1, 0, 1)};
    int blocks[] = {32, 64, 96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 1024};
    size_t dyns[] = {0, 1000, 16384, 49152, 100000};
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) { printf("{\"error\": \"no device\"}\n"); return 1; }
    printf("{\"device\": \"%s\", \"cc\": \"%d.%d\", \"smem_per_sm\": %zu, \"smem_optin\": %zu, \"reserved\": %zu, "
           "\"regs_per_sm\": %d, \"max_threads_per_sm\": %d, \"max_blocks_per_sm\": %d, \"sms\": %d}\n", p.name,
           p.major, p.minor, p.sharedMemPerMultiprocessor, p.sharedMemPerBlockOptin, p.reservedSharedMemPerBlock,
           p.regsPerMultiprocessor, p.maxThreadsPerMultiProcessor, p.maxBlocksPerMultiProcessor,
           p.multiProcessorCount);
    for (const Entry& e : entries) {
        cudaFuncAttributes a;
        cudaFuncGetAttributes(&a, e.fn);
        cudaFuncSetAttribute(e.fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)(p.sharedMemPerBlockOptin - a.sharedSizeBytes));
        for (int b : blocks) for (size_t d : dyns) {
            int nb = -1;
            cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, e.fn, b, d);
            printf("{\"kernel\": \"%s\", \"regs\": %d, \"static_smem\": %zu, \"max_threads\": %d, \"block\": %d, "
                   "\"dyn\": %zu, \"blocks\": %d, \"err\": \"%s\"}\n", e.name, a.numRegs, a.sharedSizeBytes,
                   a.maxThreadsPerBlock, b, d, nb, cudaGetErrorString(err));
            cudaGetLastError();
        }
    }
    return 0;
}
"""

NCU_MAIN = r"""
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
%(kernel)s
int main() {
    const int n = %(n)d;
    size_t na = (size_t)n * 64 + 4096;
    float *a = nullptr, *out = nullptr; int* idx = nullptr;
    if (cudaMalloc(&a, na * sizeof(float)) || cudaMalloc(&out, na * sizeof(float)) ||
        cudaMalloc(&idx, (size_t)n * sizeof(int))) { printf("alloc failed\n"); return 1; }
    int* h = (int*)malloc((size_t)n * sizeof(int));
    for (int i = 0; i < n; ++i) h[i] = (int)(((long long)i * 7919) %% n);
    cudaMemcpy(idx, h, (size_t)n * sizeof(int), cudaMemcpyHostToDevice);
    cudaMemset(a, 0, na * sizeof(float));
    dim3 block(%(bx)d, %(by)d), grid(%(gx)d, %(gy)d);
    K<<<grid, block>>>(a, idx, out, n);
    cudaError_t e = cudaDeviceSynchronize();
    printf("%%s\n", cudaGetErrorString(e));
    return e != cudaSuccess;
}
"""
N = 1 << 18
SIG = 'extern "C" __global__ void K(const float* a, const int* idx, float* out, int n)'
# name, kernel body, block (x, y), grid (x, y), hand labels: classes of the global loads, their mean sectors per
# request (None: not predicted), worst shared bank ways (None: no shared loads)
KERNELS = [
    ("coalesced", "{ int i = blockIdx.x * blockDim.x + threadIdx.x; out[i] = a[i]; }", (256, 1), (N // 256, 1),
     ["coalesced"], 4, None),
    ("coalesced_2d", "{ int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;"
     " out[r * 512 + c] = a[r * 512 + c]; }", (32, 8), (16, 64), ["coalesced"], 4, None),
    ("stride2", "{ int i = blockIdx.x * blockDim.x + threadIdx.x; out[i] = a[2 * i]; }", (256, 1), (N // 256, 1),
     ["strided"], 8, None),
    ("stride4", "{ int i = blockIdx.x * blockDim.x + threadIdx.x; out[i] = a[4 * i]; }", (256, 1), (N // 256, 1),
     ["strided"], 16, None),
    ("stride32", "{ int i = blockIdx.x * blockDim.x + threadIdx.x; out[i] = a[32 * i]; }", (256, 1), (N // 256, 1),
     ["strided"], 32, None),
    ("stride_runtime", "{ int i = blockIdx.x * blockDim.x + threadIdx.x; int s = n / 4096; out[i] = a[i * s]; }",
     (256, 1), (N // 256, 1), ["strided"], 32, None),
    ("stride_local_var", "{ int i = blockIdx.x * blockDim.x + threadIdx.x; int j = i * 17; out[i] = a[j]; }",
     (256, 1), (N // 256, 1), ["strided"], 32, None),
    ("broadcast_block", "{ int i = blockIdx.x * blockDim.x + threadIdx.x; out[i] = a[blockIdx.x]; }", (256, 1),
     (N // 256, 1), ["broadcast"], 1, None),
    ("broadcast_const", "{ int i = blockIdx.x * blockDim.x + threadIdx.x; out[i] = a[0] + a[1]; }", (256, 1),
     (N // 256, 1), ["broadcast", "broadcast"], 1, None),
    ("gather", "{ int i = blockIdx.x * blockDim.x + threadIdx.x; out[i] = a[idx[i]]; }", (256, 1), (N // 256, 1),
     ["coalesced", "indirect"], 18, None),
    ("grid_stride", "{ for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += blockDim.x * gridDim.x)"
     " out[k] = a[k]; }", (256, 1), (132, 1), ["coalesced"], 4, None),
    ("rows_loop", "{ int r = blockIdx.x * blockDim.x + threadIdx.x; float s = 0.f;"
     " for (int k = 0; k < 16; ++k) s += a[r * 16 + k]; out[r] = s; }", (256, 1), (N // 256, 1), ["strided"], 32, None),
    ("cols_loop", "{ int c = blockIdx.x * blockDim.x + threadIdx.x; float s = 0.f;"
     " for (int k = 0; k < 16; ++k) s += a[k * n + c]; out[c] = s; }", (256, 1), (N // 256, 1), ["coalesced"], 4, None),
    ("float4", "{ int i = blockIdx.x * blockDim.x + threadIdx.x; float4 v = reinterpret_cast<const float4*>(a)[i];"
     " out[i] = v.x + v.y + v.z + v.w; }", (256, 1), (N // 256, 1), ["coalesced"], 16, None),
    ("float2", "{ int i = blockIdx.x * blockDim.x + threadIdx.x; float2 v = reinterpret_cast<const float2*>(a)[i];"
     " out[i] = v.x + v.y; }", (256, 1), (N // 256, 1), ["coalesced"], 8, None),
    ("macro_rows", "#define IDX(r, c) ((r) * 64 + (c))\n"
     "{ int i = blockIdx.x * blockDim.x + threadIdx.x; out[i] = a[IDX(i, 0)]; }", (256, 1), (N // 256, 1),
     ["strided"], 32, None),
    ("lane_mask", "{ int i = blockIdx.x * blockDim.x + threadIdx.x; int lane = threadIdx.x & 31;"
     " int w = i >> 5; out[i] = a[w * 32 + lane]; }", (256, 1), (N // 256, 1), ["coalesced"], 4, None),
    ("half_rate", "{ int i = blockIdx.x * blockDim.x + threadIdx.x; out[i] = a[i / 2]; }", (256, 1), (N // 256, 1),
     ["coalesced"], 2, None),
    ("transpose_store", "{ int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;"
     " out[x * 512 + y] = a[y * 512 + x]; }", (32, 8), (16, 64), ["coalesced"], 4, None),
    ("smem_conflict", "{ __shared__ float t[32][32]; int x = blockIdx.x * 32 + threadIdx.x;"
     " t[threadIdx.y][threadIdx.x] = a[(blockIdx.y * 32 + threadIdx.y) * 1024 + x]; __syncthreads();"
     " out[(blockIdx.y * 32 + threadIdx.y) * 1024 + x] = t[threadIdx.x][threadIdx.y]; }", (32, 32), (32, 8),
     ["coalesced"], 4, 32),
    ("smem_padded", "{ __shared__ float t[32][33]; int x = blockIdx.x * 32 + threadIdx.x;"
     " t[threadIdx.y][threadIdx.x] = a[(blockIdx.y * 32 + threadIdx.y) * 1024 + x]; __syncthreads();"
     " out[(blockIdx.y * 32 + threadIdx.y) * 1024 + x] = t[threadIdx.x][threadIdx.y]; }", (32, 32), (32, 8),
     ["coalesced"], 4, 1),
    ("smem_stride2", "{ __shared__ float s[512]; int i = blockIdx.x * blockDim.x + threadIdx.x;"
     " s[threadIdx.x] = a[i]; __syncthreads(); out[i] = s[(2 * threadIdx.x) % 512]; }", (256, 1), (N // 256, 1),
     ["coalesced"], 4, 2),
    ("row_ptr_like", "{ int i = blockIdx.x * blockDim.x + threadIdx.x; int row = i / 32, lane = i % 32;"
     " out[i] = a[idx[row] % 1024 * 32 + lane]; }", (256, 1), (N // 256, 1), ["broadcast", "coalesced"], 2.5, None),
    ("half_warp_rows", "{ int i = blockIdx.x * blockDim.x + threadIdx.x; int r = i / 16, c = i % 16;"
     " out[i] = a[r * (n / 1024) + c]; }", (256, 1), (N // 256, 1), ["coalesced"], 4, None),
    ("tx_squared", "{ int t = threadIdx.x; out[blockIdx.x * blockDim.x + t] = a[t * t]; }", (256, 1), (N // 256, 1),
     ["unknown"], None, None),
]
METRICS = ["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio",
           "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
           "smsp__thread_inst_executed_per_inst_executed.ratio",
           "sm__warps_active.avg.pct_of_peak_sustained_active"]


def kernel_source(body: str) -> str:
    """A KERNELS body as a full kernel (a leading #define line stays in front)."""
    if body.startswith("#define"):
        define, rest = body.split("\n", 1)
        return f"{define}\n{SIG} {rest}"
    return f"{SIG} {body}"


def _nvcc(args: list[str], nvcc: str, timeout_s: float = 300) -> tuple[bool, str]:
    try:
        r = subprocess.run([nvcc, *args], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"nvcc could not run: {e}"
    return r.returncode == 0, r.stdout + r.stderr


def build_occupancy_exe(workdir: str, arch: str = "sm_90", nvcc: str = "nvcc") -> dict:
    """Compile the occupancy probe; {'exe', 'ok', 'log', 'resources'} (resources from its ptxas report)."""
    os.makedirs(workdir, exist_ok=True)
    src, exe = os.path.join(workdir, "occ_probe.cu"), os.path.join(workdir, "occ_probe")
    with open(src, "w") as fh:
        fh.write(OCC_SOURCE)
    ok, log = _nvcc([f"-arch={arch}", "-O3", *ptxas_flags(), "-o", exe, src], nvcc)
    return {"exe": exe, "ok": ok, "log": log, "resources": parse_ptxas_report(log, arch) if ok else {}}


def build_ncu_executables(workdir: str, arch: str = "sm_90", nvcc: str = "nvcc", jobs: int = 0) -> list[dict]:
    """Compile one executable per KERNELS entry (in parallel); each dict says ok/log/exe."""
    os.makedirs(workdir, exist_ok=True)

    def one(spec):
        name, body, (bx, by), (gx, gy), *_ = spec
        src, exe = os.path.join(workdir, f"k_{name}.cu"), os.path.join(workdir, f"k_{name}")
        with open(src, "w") as fh:
            fh.write(NCU_MAIN % {"kernel": kernel_source(body), "n": N, "bx": bx, "by": by, "gx": gx, "gy": gy})
        ok, log = _nvcc([f"-arch={arch}", "-O3", "-lineinfo", "-o", exe, src], nvcc)
        return {"name": name, "exe": exe, "ok": ok, "log": log[-2000:]}

    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 2) as pool:
        return list(pool.map(one, KERNELS))


# ---------------------------------------------------------------------------- predictions
def static_predictions() -> tuple[dict, str]:
    """{kernel: {'classes', 'sectors', 'bank_ways'}}: mean sectors per request over the global load
    sites from the static analysis (`lanes.lane_pattern`), or the hand labels without tree-sitter."""
    out: dict = {}
    try:
        from pipeline.structure.static import analyze_static
    except ImportError as e:
        for name, _, _, _, labels, sectors, ways in KERNELS:
            out[name] = {"classes": labels, "sectors": sectors, "bank_ways": ways, "hand_sectors": sectors}
        return out, f"hand labels (static analysis unavailable: {e})"
    for name, body, _, _, labels, sectors, ways in KERNELS:
        k = analyze_static(kernel_source(body)).kernel("K")
        loads = [a for a in k.accesses if a.space == "global" and a.kind == "load"]
        preds = [a.sectors for a in loads]
        shared = [a.bank_ways for a in k.accesses if a.space == "shared" and a.kind == "load" and a.bank_ways]
        out[name] = {"classes": [a.klass for a in loads], "hand_classes": labels, "hand_sectors": sectors,
                     "sectors": sum(preds) / len(preds) if preds and None not in preds else None,
                     "bank_ways": max(shared) if shared else None, "hand_bank_ways": ways}
    return out, "static analysis (tree-sitter)"


# ---------------------------------------------------------------------------------- runs
def run_occupancy(build: dict, arch: str) -> list[dict]:
    """Run the probe and compare every configuration with the calculator."""
    r = subprocess.run([build["exe"]], capture_output=True, text=True, timeout=300)
    rows, device = [], {}
    for ln in r.stdout.splitlines():
        try:
            rec = json.loads(ln)
        except ValueError:
            print(f"  unparsed probe output: {ln[:200]}")
            continue
        if "error" in rec:
            raise RuntimeError(f"occupancy probe: {rec['error']} (exit status {r.returncode})")
        if "device" in rec:
            device = rec
            continue
        res = build["resources"].get(rec["kernel"])
        regs = res.registers if res else rec["regs"]
        ours = occupancy(arch, rec["block"], regs, res.shared_bytes if res else rec["static_smem"], rec["dyn"],
                         res.barriers if res else 0, smem_opt_in=True)
        api_blocks = rec["blocks"] if rec["err"] == "no error" else 0
        rows.append({**rec, "ptxas_regs": res.registers if res else None, "ours": ours.active_blocks,
                     "limiter": ours.limiter, "match": ours.active_blocks == api_blocks,
                     "regs_match": res is not None and res.registers == rec["regs"]})
    if device:
        rows.insert(0, {"device": device})
    return rows


def parse_ncu_csv(text: str) -> dict[str, float]:
    """Metric name -> value from `ncu --csv` output (first kernel; thousands separators removed)."""
    start = text.find('"ID"')
    values: dict[str, float] = {}
    if start < 0:
        return values
    for row in csv.DictReader(io.StringIO(text[start:])):
        name, value = row.get("Metric Name"), row.get("Metric Value")
        if name and value and name not in values:
            try:
                values[name] = float(value.replace(",", ""))
            except ValueError:
                continue
    return values


def run_ncu(builds: list[dict], ncu: str, timeout_s: float) -> dict[str, dict]:
    out = {}
    for b in builds:
        if not b["ok"]:
            out[b["name"]] = {"error": "build failed: " + b["log"][-400:]}
            continue
        cmd = [ncu, "--clock-control", "none", "--csv", "--metrics", ",".join(METRICS), b["exe"]]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
            vals = parse_ncu_csv(r.stdout)
            out[b["name"]] = vals if vals else {"error": (r.stdout + r.stderr)[-600:]}
        except (OSError, subprocess.TimeoutExpired) as e:
            out[b["name"]] = {"error": str(e)}
        print(f"  ncu {b['name']}: {out[b['name']]}", flush=True)
    return out


def coalescing_table(preds: dict, measured: dict) -> list[dict]:
    rows = []
    for name, *_ in KERNELS:
        p, m = preds.get(name, {}), measured.get(name, {})
        hand = p.get("hand_sectors")
        got = m.get(METRICS[0])
        exp = p.get("sectors")
        agree = None if got is None or exp is None else abs(math.log2(max(got, 1e-9) / exp)) <= 1.0
        conflicts = m.get(METRICS[2])
        bank_agree = None
        if p.get("bank_ways") is not None and conflicts is not None:
            bank_agree = (p["bank_ways"] > 1) == (conflicts > 0)
        rows.append({"kernel": name, "classes": p.get("classes"), "predicted_sectors": exp, "hand_sectors": hand,
                     "measured_sectors": got,
                     "agree": agree, "bank_ways": p.get("bank_ways"), "bank_conflicts": conflicts,
                     "bank_agree": bank_agree, "error": m.get("error")})
    return rows


def _print_tables(occ_rows: list[dict], coal_rows: list[dict]) -> None:
    cmp = [r for r in occ_rows if "kernel" in r]
    if cmp:
        bad = [r for r in cmp if not r["match"]]
        print(f"\n(a) occupancy: {len(cmp) - len(bad)}/{len(cmp)} configurations agree with "
              f"cudaOccupancyMaxActiveBlocksPerMultiprocessor; registers agree for "
              f"{sum(r['regs_match'] for r in cmp)}/{len(cmp)}")
        print(f"{'kernel':18} {'regs':>4} {'smem':>6} {'block':>5} {'dyn':>6} {'api':>4} {'ours':>4} limiter")
        for r in (bad or cmp)[:40]:
            print(f"{r['kernel']:18} {r['regs']:>4} {r['static_smem']:>6} {r['block']:>5} {r['dyn']:>6} "
                  f"{r['blocks']:>4} {r['ours']:>4} {r['limiter']}")
    if coal_rows:
        n = [r for r in coal_rows if r["agree"] is not None]
        print(f"\n(b) coalescing: {sum(r['agree'] for r in n)}/{len(n)} kernels within 2x of the predicted sectors "
              "per request")
        print(f"{'kernel':18} {'static classes':28} {'pred':>6} {'hand':>6} {'ncu':>7} agree  bank(pred/ncu)")
        for r in coal_rows:
            ps, hs, ms = ("-" if x is None else f"{x:.1f}" for x in (r["predicted_sectors"], r["hand_sectors"],
                                                                    r["measured_sectors"]))
            bank = "" if r["bank_ways"] is None else f"{r['bank_ways']}-way/{r['bank_conflicts']}"
            print(f"{r['kernel']:18} {','.join(r['classes'] or []):28} {ps:>6} {hs:>6} {ms:>7} {str(r['agree']):5}  {bank}"
                  + (f"  ERROR {r['error'][:80]}" if r["error"] else ""))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="JSON file for all results")
    p.add_argument("--workdir", default="/tmp/cudaperf_validate_structure", help="build directory")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--nvcc", default="nvcc")
    p.add_argument("--ncu", default="ncu")
    p.add_argument("--ncu-timeout-s", type=float, default=120.0)
    p.add_argument("--skip-occupancy", action="store_true")
    p.add_argument("--skip-ncu", action="store_true")
    args = p.parse_args(argv)
    report: dict = {"arch": args.arch, "started": time.strftime("%Y-%m-%d %H:%M:%S"), "errors": []}
    occ_rows, coal_rows = [], []

    def step(name, fn):
        print(f"[{name}]", flush=True)
        try:
            return fn()
        except Exception as e:  # a diagnostic script: report the step's failure and go on
            msg = f"{name} failed: {type(e).__name__}: {e}"
            print("  " + msg, flush=True)
            report["errors"].append(msg)
            return None

    if not args.skip_occupancy:
        build = step("build occupancy probe", lambda: build_occupancy_exe(args.workdir, args.arch, args.nvcc))
        if build and not build["ok"]:
            report["errors"].append("occupancy probe build failed: " + build["log"][-1000:])
            print(build["log"][-1000:])
        elif build:
            occ_rows = step("run occupancy probe", lambda: run_occupancy(build, args.arch)) or []
    if not args.skip_ncu:
        preds = step("static predictions", static_predictions)
        builds = step("build ncu kernels", lambda: build_ncu_executables(args.workdir, args.arch, args.nvcc)) or []
        measured = step("run ncu", lambda: run_ncu(builds, args.ncu, args.ncu_timeout_s)) or {}
        if preds:
            report["prediction_source"] = preds[1]
            coal_rows = step("compare", lambda: coalescing_table(preds[0], measured)) or []
    report.update({"occupancy": occ_rows, "coalescing": coal_rows})
    step("print", lambda: _print_tables(occ_rows, coal_rows))
    with open(args.out, "w") as fh:
        json.dump(report, fh, indent=1, default=str)
    print(f"\nwrote {args.out}; {len(report['errors'])} step error(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
