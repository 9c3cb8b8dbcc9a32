"""Hint texts: concrete, with the line, the expression and what to try."""
from pipeline.core.records import Finding
from pipeline.structure.hints import kernel_hints, rank_hints
from pipeline.structure.occupancy import occupancy
from pipeline.structure.ptxas import KernelResources
from pipeline.structure.static import analyze_static

from _kernels import DATA


def hints_for(src: str, **kw) -> list[Finding]:
    k = analyze_static(src).kernels[-1]
    return kernel_hints(k.name, k, **kw)


def messages(findings) -> list[str]:
    return [f.message for f in findings]


def test_strided_load_names_line_expression_and_stride():
    src = """__global__ void mm(const float* A, const float* B, float* C, int N) {
        int col = blockIdx.x * blockDim.x + threadIdx.x;
        float s = 0.f;
        for (int k = 0; k < N; ++k)
            s += A[k] * B[col * N + k];
        C[col] = s;
    }"""
    (f,) = hints_for(src)
    assert f.source == "structure" and f.severity == "warning" and f.rule == "uncoalesced_access" and f.line == 5
    assert f.message == ("line 5: loads of B[col * N + k] are strided by N across a warp; make threadIdx.x index "
                         "the contiguous dimension or stage through shared memory")


def test_divergent_barrier():
    f = [h for h in hints_for((DATA / "divergent_barrier.cu").read_text()) if h.rule == "divergent_barrier"]
    assert len(f) == 1 and f[0].line == 12 and f[0].message.startswith(
        "line 12: __syncthreads() inside a branch that depends on threadIdx.x can deadlock")


def test_bank_conflict_suggests_padding():
    f = [h for h in hints_for((DATA / "smem_bank_conflict.cu").read_text()) if h.rule == "bank_conflict"]
    assert messages(f) == ["line 11: tile[threadIdx.x][k] has a 32-way bank conflict; pad the row to 33"]
    assert not [h for h in hints_for((DATA / "smem_padded.cu").read_text()) if h.rule == "bank_conflict"]


def test_occupancy_limited_by_registers():
    f = kernel_hints("k", occ=occupancy("sm_90", 256, 128))
    assert messages(f) == ["k: occupancy 25%, limited by 128 registers per thread; try __launch_bounds__ or "
                           "fewer live values"]
    assert f[0].severity == "warning" and f[0].rule == "low_occupancy"
    assert not kernel_hints("k", occ=occupancy("sm_90", 256, 32))
    smem = kernel_hints("k", occ=occupancy("sm_90", 256, 32, 0, 100000))
    assert "limited by 100000 bytes of shared memory per block (2 blocks fit per SM)" in smem[0].message
    tiny = kernel_hints("k", occ=occupancy("sm_86", 32, 16))  # 16 blocks x 1 warp of 48
    assert "occupancy 33%, limited by the 16 resident blocks per SM with 32-thread blocks" in tiny[0].message


def test_launch_that_cannot_run():
    (f,) = kernel_hints("k", occ=occupancy("sm_90", 1024, 96))
    assert f.rule == "launch_fails" and "cannot launch on sm_90" in f.message


def test_spills_and_local_memory():
    res = KernelResources("k", "k", "k", registers=32, spill_store_bytes=40, spill_load_bytes=48)
    (f,) = kernel_hints("k", res=res)
    assert f.rule == "register_spill" and "spills 40 bytes stored and 48 bytes loaded" in f.message
    (g,) = kernel_hints("k", res=KernelResources("k", "k", "k", registers=32, stack_frame_bytes=1024))
    assert g.rule == "local_memory" and g.severity == "info"


def test_contended_atomic_and_unused_shared_and_partial_warp():
    f = hints_for((DATA / "atomic_contended.cu").read_text(), threads=100)
    rules = {h.rule: h for h in f}
    assert "every thread does atomicAdd on one address of total" in rules["contended_atomic"].message
    assert rules["partial_warp"].message.startswith("naive_sum: blocks of 100 threads are not a multiple of 32")
    assert not [h for h in hints_for((DATA / "warp_shuffle_reduce.cu").read_text()) if h.rule == "contended_atomic"]
    src = "__global__ void k(float* a) { __shared__ float pad[64]; a[threadIdx.x] = 0.f; }"
    assert messages(hints_for(src)) == ["line 1: __shared__ pad is declared but never used in k"]


def test_strided_sites_of_one_array_are_grouped_and_ranked():
    src = """__global__ void k(const int* in, int* out) {
        int i0 = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
        int a = in[i0], b = in[i0 + 1], c = in[i0 + 2], d = in[i0 + 3];
        out[i0] = a + b + c + d;
        __shared__ float s[32][32];
        s[threadIdx.x][0] = 1.f;
    }"""
    f = rank_hints(hints_for(src), max_hints=2)
    assert len(f) == 2 and all(h.severity == "warning" for h in f)
    assert f[0].message.startswith("line 3: loads of in[i0], in[i0 + 1], in[i0 + 2], ... are strided by 4 elements")
