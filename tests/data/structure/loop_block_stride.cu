// EXPECT access global load in coalesced
// EXPECT access global store out coalesced
__global__ void row_copy(const float* in, float* out, int n) {
    const float* src = in + blockIdx.x * n;
    for (int k = threadIdx.x; k < n; k += blockDim.x)
        out[blockIdx.x * n + k] = src[k];
}
