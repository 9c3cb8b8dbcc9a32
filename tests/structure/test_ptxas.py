"""The ptxas resource report: a fixed sample, real nvcc output on sm_80/89/90, compile failures."""
from concurrent.futures import ThreadPoolExecutor

import pytest

from pipeline.structure.ptxas import (CompileFailed, base_name, compile_resources, parse_ptxas_report,
                                      ptxas_flags)
from pipeline.structure.static import analyze_static

from _kernels import kernel_files

SAMPLE = """\
ptxas info    : 0 bytes gmem, 64 bytes cmem[3]
ptxas info    : Compiling entry function '_ZN2ns2tkILi4EEEvPf' for 'sm_80'
ptxas info    : Function properties for _ZN2ns2tkILi4EEEvPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers, 360 bytes cmem[0]
ptxas info    : Compile time = 19.723 ms
ptxas info    : Compiling entry function '_Z5callsPf' for 'sm_80'
ptxas info    : Function properties for _Z5callsPf
    256 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 4224 bytes smem, 256 bytes cumulative stack size, 360 bytes cmem[0]
ptxas info    : Function properties for _Z3devf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'cfun' for 'sm_90'
ptxas info    : Function properties for cfun
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers
"""

SPILL = """
__global__ void __launch_bounds__(1024, 2) heavy(const float* __restrict__ in, float* out, int n) {
    float acc[96];
    #pragma unroll
    for (int i = 0; i < 96; ++i) acc[i] = in[i * n + threadIdx.x];
    #pragma unroll
    for (int r = 0; r < 8; ++r)
        #pragma unroll
        for (int i = 0; i < 96; ++i) acc[i] = acc[i] * acc[(i + r + 1) % 96] + 1.0f;
    float s = 0;
    #pragma unroll
    for (int i = 0; i < 96; ++i) s += acc[i] * (i + 1);
    out[threadIdx.x] = s;
}
__global__ void tile_user(float* out) {
    __shared__ float tile[32][33];
    tile[threadIdx.x][0] = out[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = tile[0][threadIdx.x];
}
__global__ void local_array(float* out, const int* idx) {
    float t[256];
    for (int i = 0; i < 256; ++i) t[i] = out[i * 32 + threadIdx.x];
    out[threadIdx.x] = t[idx[threadIdx.x] & 255];
}
namespace ns { template <int B> __global__ void scaled(float* a) { a[threadIdx.x] *= B; } }
template __global__ void ns::scaled<4>(float*);
extern "C" __global__ void plain(float* a) { a[threadIdx.x] = 1.0f; }
"""


def test_flags():
    assert ptxas_flags() == ["-Xptxas", "-v"]


def test_parse_sample_selects_arch_and_skips_device_functions():
    r80 = parse_ptxas_report(SAMPLE, "sm_80")
    assert set(r80) == {"_ZN2ns2tkILi4EEEvPf", "_Z5callsPf"}
    calls = r80["_Z5callsPf"]
    assert (calls.registers, calls.shared_bytes, calls.barriers) == (32, 4224, 1)
    assert (calls.stack_frame_bytes, calls.spill_store_bytes, calls.spill_load_bytes) == (256, 8, 12)
    assert calls.spill_bytes == 20 and calls.cumulative_stack_bytes == 256 and calls.constant_bytes == {0: 360}
    assert calls.base_name == "calls" and r80["_ZN2ns2tkILi4EEEvPf"].base_name == "tk"
    assert set(parse_ptxas_report(SAMPLE)) == {"cfun"}  # the last architecture reported
    assert parse_ptxas_report(SAMPLE)["cfun"].registers == 10


def test_parse_cuobjdump_resource_usage():
    text = ("Resource usage:\n Common:\n  GLOBAL:0\n Function _Z4smemPf:\n"
            "  REG:10 STACK:0 SHARED:4224 LOCAL:0 CONSTANT[0]:360 TEXTURE:0 SURFACE:0 SAMPLER:0\n")
    text = text.replace(":\n  REG", ": REG")
    r = parse_ptxas_report(text)
    assert r["_Z4smemPf"].registers == 10 and r["_Z4smemPf"].shared_bytes == 4224
    assert r["_Z4smemPf"].constant_bytes == {0: 360}


@pytest.mark.parametrize("name,expected", [
    ("void ns::tk<4>(float*)", "tk"), ("heavy(float const*, float*, int)", "heavy"), ("cfun", "cfun"),
    ("_Z5saxpyifPKfPf", "saxpy"), ("_ZN2ns2tkILi4EEEvPf", "tk"), ("void f<(anonymous namespace)::T>(int)", "f"),
])
def test_base_name(name, expected):
    assert base_name(name) == expected


@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90"])
def test_real_report(arch, nvcc):
    res = compile_resources(SPILL, arch)
    by_base = {r.base_name: r for r in res.values()}
    assert set(by_base) == {"heavy", "tile_user", "local_array", "scaled", "plain"}
    assert all(r.arch == arch for r in res.values())
    heavy = by_base["heavy"]
    assert heavy.spill_store_bytes > 0 and heavy.spill_load_bytes > 0 and heavy.registers <= 64
    tile = by_base["tile_user"]
    assert tile.shared_bytes == 32 * 33 * 4 and tile.barriers == 1 and tile.spill_bytes == 0
    assert by_base["local_array"].stack_frame_bytes >= 1024
    assert by_base["scaled"].name == "void ns::scaled<4>(float*)"
    assert by_base["plain"].name == "plain" and 0 < by_base["plain"].registers <= 16
    if arch != "sm_90":
        assert tile.constant_bytes.get(0, 0) > 0  # sm_90 reports no cmem line with CUDA 13


def test_compile_failure_carries_the_log(nvcc):
    with pytest.raises(CompileFailed) as e:
        compile_resources("__global__ void k(float* a) { a[threadIdx.x] = undefined_name; }", "sm_90")
    assert "undefined_name" in e.value.log and "kernel.cu" in e.value.log


@pytest.mark.integration
def test_every_data_kernel_compiles_and_is_reported(nvcc):
    files = kernel_files()
    with ThreadPoolExecutor(max_workers=4) as pool:
        reports = list(pool.map(lambda p: compile_resources(p.read_text(), "sm_90"), files))
    for path, res in zip(files, reports):
        static_names = {k.name for k in analyze_static(path.read_text()).kernels}
        assert static_names <= {r.base_name for r in res.values()}, path.name
