// EXPECT access global load perm coalesced
// EXPECT access global load in coalesced
// EXPECT access global store out indirect
__global__ void scatter(const float* in, const int* perm, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int dst = perm[i];
        out[dst] = in[i];
    }
}
