// EXPECT access global load in strided
// EXPECT access global store out coalesced
// EXPECT stride in 32
__global__ void every_32nd(const float* in, float* out) {
    out[blockIdx.x * blockDim.x + threadIdx.x] = in[(blockIdx.x * blockDim.x + threadIdx.x) * 32];
}
