// EXPECT access global load in coalesced
// EXPECT access global store out coalesced
__global__ void clamp_copy(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = min(i, n - 1);
    int k = (i < n) ? i : n - 1;
    out[k] = in[j];
}
