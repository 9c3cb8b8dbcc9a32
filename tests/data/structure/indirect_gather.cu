// EXPECT access global load idx coalesced
// EXPECT access global load x indirect
// EXPECT access global store out coalesced
__global__ void gather(const float* x, const int* idx, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[idx[i]];
}
