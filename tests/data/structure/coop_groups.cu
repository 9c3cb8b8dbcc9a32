// EXPECT access global load x coalesced
// EXPECT access global atomic out broadcast
// EXPECT feature barriers 1
// EXPECT feature warp_shuffle 1
// EXPECT feature divergent_barriers 0
// EXPECT feature contended_atomic_fraction 0
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void cg_sum(const float* x, float* out, int n) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.f;
    block.sync();
    for (int o = 16; o > 0; o /= 2) v += warp.shfl_down(v, o);
    if (warp.thread_rank() == 0) atomicAdd(out, v);
}
