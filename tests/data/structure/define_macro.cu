// EXPECT access global load in coalesced
// EXPECT access global store out strided
// EXPECT stride out 1024
#define N 1024
#define IDX(r, c) ((r) * N + (c))
__global__ void macro_index(const float* in, float* out) {
    float v = in[IDX(blockIdx.x, threadIdx.x)];
    out[IDX(threadIdx.x, blockIdx.x)] = v;
}
