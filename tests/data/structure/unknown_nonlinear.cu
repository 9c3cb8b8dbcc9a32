// EXPECT access global load in unknown
// EXPECT access global store out coalesced
__global__ void squares(const float* in, float* out) {
    unsigned t = threadIdx.x;
    out[blockIdx.x * blockDim.x + t] = in[t * t];
}
