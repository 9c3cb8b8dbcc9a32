"""Static features of the hand-written kernels in tests/data/structure/ (answers in their // EXPECT lines),
and of small inline kernels for the harder cases: local variables, macros, loops, device functions."""
import json

import pytest

from pipeline.structure.hints import stride_text
from pipeline.structure.static import analyze_static

from _kernels import expectations, kernel_files


def test_there_are_at_least_thirty_data_kernels():
    assert len(kernel_files()) >= 30


@pytest.mark.parametrize("path", kernel_files(), ids=lambda p: p.stem)
def test_data_kernel(path):
    exp = expectations(path)
    report = analyze_static(path.read_text())
    assert not report.parse_errors
    k = report.kernels[-1]
    got = {(a.space, a.kind, a.array, a.klass) for a in k.accesses if a.space in ("global", "shared")}
    assert got == exp["access"], f"missing {exp['access'] - got}, unexpected {got - exp['access']}"
    flat = k.to_dict("")
    for name, value in exp["feature"].items():
        assert flat[name] == pytest.approx(value), name
    for array, ways in exp["bank"].items():
        assert max(a.bank_ways or 0 for a in k.accesses if a.array == array) == ways
    for array, stride in exp["stride"].items():
        strides = {stride_text(a).split()[0] for a in k.accesses if a.array == array and a.klass == "strided"}
        assert stride in strides


def kernel(src: str):
    return analyze_static(src).kernels[-1]


def classes(src: str) -> dict:
    return {(a.kind, a.array): a.klass for a in kernel(src).accesses}


def test_follows_chains_of_local_variables_and_casts():
    src = """
    __global__ void k(const float* a, float* b, int stride) {
        int t = threadIdx.x;
        int base = blockIdx.x * blockDim.x;
        long i = (long)(base + t);
        int j = static_cast<int>(i) * stride;
        int r = (int)i * 2 - 1;
        b[i] = a[j] + a[r];
    }"""
    k = kernel(src)
    by_text = {a.text: a for a in k.accesses}
    assert by_text["a[j]"].klass == "strided" and stride_text(by_text["a[j]"]) == "stride"
    assert by_text["a[r]"].klass == "strided" and by_text["a[r]"].sectors == 8
    assert by_text["b[i]"].klass == "coalesced"


def test_loop_variable_keeps_its_thread_term():
    src = """
    __global__ void k(const float* a, float* b, int n, int K) {
        int row = blockIdx.x * blockDim.x + threadIdx.x;
        float s = 0.f;
        for (int k = threadIdx.x; k < n; k += blockDim.x) s += a[blockIdx.y * n + k];
        for (int k = 0; k < K; k++) s += a[row * K + k];
        int c = 0;
        while (c < n) { b[c * 64 + threadIdx.x] = s; c += 1; }
    }"""
    acc = kernel(src).accesses
    assert [a.klass for a in acc] == ["coalesced", "strided", "coalesced"]
    assert stride_text(acc[1]) == "K"


def test_trip_counts_weigh_accesses():
    src = """
    __global__ void k(const float* a, float* b, int n) {
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            #pragma unroll
            for (int j = 0; j < 2; ++j) b[threadIdx.x + 32 * (i * 2 + j)] = 0.f;
        for (int i = 0; i < n; ++i) b[threadIdx.x] += a[i];
        for (int o = 16; o > 0; o >>= 1) b[threadIdx.x] = 1.f;
    }"""
    report = analyze_static(src)
    assert not report.parse_errors  # the pragma between the loop headers is blanked before parsing
    k = report.kernels[0]
    weights = [(a.text, a.weight) for a in k.accesses]
    assert weights[0] == ("b[threadIdx.x + 32 * (i * 2 + j)]", 8.0)
    assert ("a[i]", 16.0) in weights  # unknown trip count
    assert weights[-1] == ("b[threadIdx.x]", 5.0)
    assert k.pragma_unroll == 2 and k.loops == 4


def test_macros_constants_and_masks():
    src = """
    #define W 33
    #define AT(r, c) ((r) * W + (c))
    static const int LANES = 32;
    __global__ void k(const float* a, float* b) {
        int lane = threadIdx.x % LANES, warp = threadIdx.x / LANES;
        b[AT(warp, lane)] = a[AT(lane, warp)];
    }"""
    assert classes(src) == {("load", "a"): "strided", ("store", "b"): "coalesced"}


def test_half_warp_rows_and_bank_ways():
    src = """
    __global__ void k(const float* a, float* b, int ld) {
        __shared__ float s[16][64];
        int r = threadIdx.x / 16, c = threadIdx.x % 16;
        s[r][c * 4] = a[(blockIdx.x * 2 + r) * ld + c];
        __syncthreads();
        b[blockIdx.x * blockDim.x + threadIdx.x] = s[r][c];
    }"""
    acc = {(a.kind, a.array): a for a in kernel(src).accesses}
    assert acc[("load", "a")].klass == "coalesced" and acc[("load", "a")].sectors == 4  # two rows of 64 bytes
    assert acc[("store", "s")].bank_ways == 4  # words 4c and 64 + 4c: banks 0, 4, .., 28 hold 4 words each
    assert acc[("load", "s")].bank_ways == 2  # words c and 64 + c share banks 0..15


def test_device_functions_are_inlined_with_their_pointer_arguments():
    src = """
    __device__ float load_row(const float* p, int row, int n) { return p[row * n + threadIdx.x]; }
    __device__ void put(float* q, int i, float v) { q[i] = v; }
    __global__ void k(const float* a, float* b, int n) {
        float v = load_row(a, blockIdx.x, n);
        put(b, threadIdx.x * n, v);
    }"""
    acc = kernel(src).accesses
    assert [(a.kind, a.array, a.klass, a.line) for a in acc] == [
        ("load", "a", "coalesced", 2), ("store", "b", "strided", 3)]


def test_local_array_of_loaded_indices_is_indirect():
    src = """
    __global__ void k(const float* x, const int* idx, float* out, int n) {
        int j[4];
        for (int t = 0; t < 4; ++t) j[t] = __ldg(idx + threadIdx.x + 32 * t);
        for (int t = 0; t < 4; ++t) out[threadIdx.x + 32 * t] = __ldg(x + j[t]);
    }"""
    assert classes(src)[("load", "x")] == "indirect"
    assert classes(src)[("load", "idx")] == "coalesced"


def test_shared_arrays_used_unused_and_dynamic():
    src = """
    __global__ void k(const float* a, float* b) {
        __shared__ float used[256];
        __shared__ float pad[1024];
        extern __shared__ float dyn[];
        used[threadIdx.x] = a[threadIdx.x];
        dyn[threadIdx.x] = 1.f;
        __syncthreads();
        b[threadIdx.x] = used[255 - threadIdx.x] + dyn[0];
    }"""
    k = kernel(src)
    arrays = {s.name: s for s in k.shared_arrays}
    assert arrays["used"].used and not arrays["pad"].used and arrays["dyn"].dynamic
    assert k.shared_bytes_used == 1024 and k.shared_bytes_declared == 1024 + 4096
    assert k.to_dict("")["shared_arrays_unused"] == 1


def test_report_to_dict_is_flat_and_json():
    report = analyze_static((kernel_files()[0]).read_text() + "\n" + (kernel_files()[1]).read_text())
    d = report.to_dict()
    assert d["static.kernels"] == 2 and all(k.startswith("static.") for k in d)
    assert all(isinstance(v, (int, float, str, bool)) for v in d.values())
    json.dumps(d)
    assert d["static.global_loads"] == sum(k.global_loads for k in report.kernels)


def test_shared_scalar_and_atomics_on_it():
    src = """
    __global__ void k(const int* flags, int* out) {
        __shared__ int count;
        if (threadIdx.x == 0) count = 0;
        __syncthreads();
        if (flags[blockIdx.x * blockDim.x + threadIdx.x]) atomicAdd(&count, 1);
        __syncthreads();
        if (threadIdx.x == 0) out[blockIdx.x] = count;
    }"""
    k = kernel(src)
    assert k.atomics_shared == 1 and k.atomics_global == 0
    assert {(a.space, a.kind) for a in k.accesses} >= {("shared", "store"), ("shared", "load"), ("shared", "atomic")}
    assert k.divergent_barriers == 0 and k.barriers == 2
