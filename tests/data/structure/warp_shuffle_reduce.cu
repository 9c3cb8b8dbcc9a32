// EXPECT access global load x coalesced
// EXPECT access global atomic out broadcast
// EXPECT feature warp_shuffle 1
// EXPECT feature contended_atomic_fraction 0
__global__ void sum_shfl(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, v);
}
