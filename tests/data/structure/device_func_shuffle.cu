// EXPECT access global load x coalesced
// EXPECT access global store out broadcast
// EXPECT feature warp_shuffle 1
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ float load_scaled(const float* p, int i) { return 2.0f * p[i]; }
__global__ void block_of_warps(const float* x, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float s = warp_sum(load_scaled(x, i));
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}
