// EXPECT access global load At coalesced
// EXPECT access global load x broadcast
// EXPECT access global store y coalesced
__global__ void matvec_cols(const float* At, const float* x, float* y, int n) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col < n) {
        float s = 0.f;
        for (int k = 0; k < n; k++) s += At[k * n + col] * x[k];
        y[col] = s;
    }
}
