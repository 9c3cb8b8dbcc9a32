"""Occupancy computed by hand (cuda_occupancy.h rules) and launch configurations read from sources."""
import pytest

from pipeline.structure.occupancy import arch_limits, launch_configs_from_source, occupancy


# (arch, threads, registers, static smem, dynamic smem, barriers) -> (blocks, occupancy, limiter)
CASES = [
    # sm_90: 64 warps, 32 blocks, 65536 regs (4 x 16384), 233472 B smem, 1 KiB reserved per block
    (("sm_90", 256, 32, 0, 0, 0), (8, 1.0, "warps")),  # 8 warps/block; regs 4*16384/1024 = 64 warps: tie -> warps
    (("sm_90", 256, 128, 0, 0, 0), (2, 0.25, "registers")),  # 4096 regs/warp: 4 warps per sub-partition
    (("sm_90", 1024, 32, 49152, 0, 0), (2, 1.0, "warps")),  # smem: 233472 // 50176 = 4 blocks
    (("sm_90", 1024, 64, 49152, 0, 0), (1, 0.5, "registers")),  # 2048 regs/warp: 8 per sub-partition
    (("sm_90", 256, 32, 49152, 0, 0), (4, 0.5, "shared_memory")),
    (("sm_90", 32, 16, 0, 0, 0), (32, 0.5, "blocks")),
    (("sm_90", 64, 40, 0, 0, 0), (24, 0.75, "registers")),  # 1280 regs/warp: 12 per sub-partition, not 51
    (("sm_90", 256, 40, 0, 0, 0), (6, 0.75, "registers")),
    (("sm_90", 256, 255, 0, 0, 0), (1, 0.125, "registers")),  # ceil256(8160) = 8192 regs/warp
    (("sm_90", 128, 16, 0, 0, 16), (4, 0.25, "barriers")),  # 2 * 32 barrier slots / 16 barriers
    (("sm_90", 256, 32, 0, 100000, 0), (2, 0.25, "shared_memory")),  # ceil128(101024) = 101120
    (("sm_90", 1000, 32, 0, 0, 0), (2, 1.0, "warps")),  # 32 warps per block (last one partial)
    # sm_80: 64 warps, 32 blocks, 167936 B smem
    (("sm_80", 256, 32, 0, 0, 0), (8, 1.0, "warps")),
    (("sm_80", 256, 32, 0, 65536, 0), (2, 0.25, "shared_memory")),  # 167936 // 66560
    (("sm_80", 128, 16, 0, 0, 16), (16, 1.0, "warps")),  # the barrier limit applies from sm_90 on
    # sm_89: 48 warps, 24 blocks, 102400 B smem
    (("sm_89", 256, 32, 0, 0, 0), (6, 1.0, "warps")),
    (("sm_89", 1024, 32, 0, 0, 0), (1, 32 / 48, "warps")),
    (("sm_89", 256, 32, 49152, 0, 0), (2, 16 / 48, "shared_memory")),  # 102400 // 50176
    (("sm_89", 32, 16, 0, 0, 0), (24, 0.5, "blocks")),
]


@pytest.mark.parametrize("args,expected", CASES, ids=[f"{a[0]}-{a[1]}t-{a[2]}r-{a[3] + a[4]}B" for a, _ in CASES])
def test_hand_computed(args, expected):
    arch, threads, regs, static, dyn, bars = args
    r = occupancy(arch, threads, regs, static, dyn, bars)
    assert (r.active_blocks, r.occupancy, r.limiter) == (expected[0], pytest.approx(expected[1]), expected[2])
    assert r.active_warps == r.active_blocks * -(-threads // 32) and not r.error


@pytest.mark.parametrize("args,reason", [
    (("sm_90", 1024, 65), "registers of a block"),  # 2304 regs/warp x 32 warps > 65536
    (("sm_90", 256, 256), "exceeds 255"),
    (("sm_90", 2048, 16), "outside 1..1024"),
    (("sm_90", 256, 32, 0, 232449), "exceed the 232448"),
])
def test_launch_fails(args, reason):
    r = occupancy(*args)
    assert r.active_blocks == 0 and r.occupancy == 0 and r.limiter == "launch_fails" and reason in r.error


def test_dynamic_smem_above_48k_needs_the_opt_in():
    assert occupancy("sm_90", 256, 32, 0, 65536, smem_opt_in=False).limiter == "launch_fails"
    assert occupancy("sm_90", 256, 32, 0, 65536, smem_opt_in=True).active_blocks == 3


def test_unknown_registers_leave_the_register_limit_out():
    r = occupancy("sm_90", 256, None)
    assert r.limits["registers"] is None and r.occupancy == 1.0


def test_arch_names():
    assert arch_limits("sm_90a").arch == arch_limits("compute_90").arch == arch_limits("9.0").arch == "sm_90"
    with pytest.raises(ValueError, match="unknown architecture 'sm_42'"):
        arch_limits("sm_42")
    assert arch_limits("sm_90").smem_per_sm == 233472 and arch_limits("sm_80").smem_per_sm == 167936
    assert arch_limits("sm_89").max_warps_per_sm == 48 and arch_limits("sm_89").max_blocks_per_sm == 24


LAUNCHES = """
#define BS 128
constexpr int THREADS = 256;
__global__ void k(float* a) {}
template <int B> __global__ void kt(float* a) {}
void host(float* a, int n, cudaStream_t stream) {
    const int T = 64;
    int threads = 512;
    int varying = 32; varying *= 2;
    dim3 block2d(16, 8, 2);
    dim3 b3 = dim3(8, 8);
    dim3 braced{4, 4};
    k<<<n, 32>>>(a);
    k<<<n, BS>>>(a);
    k<<<n, THREADS, THREADS * sizeof(float)>>>(a);
    k<<<n, T>>>(a);
    k<<<n, threads>>>(a);
    k<<<n, varying>>>(a);
    k<<<n, block2d>>>(a);
    k<<<n, b3, 0, stream>>>(a);
    kt<256><<<dim3(n), dim3(32, 4, 1)>>>(a);
    k<<<(n + BS - 1) / BS, 2 * BS, n * 4>>>(a);
    k<<<n, braced>>>(a);
}
"""


def test_launch_configs_from_source():
    got = [tuple(c) for c in launch_configs_from_source(LAUNCHES)]
    assert got == [
        ("k", 32, "n", 0), ("k", 128, "n", 0), ("k", 256, "n", 1024), ("k", 64, "n", 0), ("k", 512, "n", 0),
        ("k", "varying", "n", 0), ("k", 256, "n", 0), ("k", 64, "n", 0), ("kt", 128, "dim3(n)", 0),
        ("k", 256, "(n + BS - 1) / BS", "n * 4"), ("k", 16, "n", 0)]
    cfgs = launch_configs_from_source(LAUNCHES)
    assert cfgs[6].block_dims == (16, 8, 2) and cfgs[0].line == 13
