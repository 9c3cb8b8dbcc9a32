// EXPECT access global load in strided
// EXPECT access global store out coalesced
// EXPECT stride in 8
__global__ void lanes(const float* in, float* out) {
    int tid = threadIdx.x;
    int lane = tid & 31;
    int warp = tid >> 5;
    out[blockIdx.x * 1024 + warp * 32 + lane] = in[blockIdx.x * 1024 + (lane << 3)];
}
