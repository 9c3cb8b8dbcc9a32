// EXPECT access global load A strided
// EXPECT access global load x broadcast
// EXPECT access global store y coalesced
__global__ void matvec_rows(const float* A, const float* x, float* y, int n) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n) {
        float s = 0.f;
        for (int k = 0; k < n; k++) s += A[row * n + k] * x[k];
        y[row] = s;
    }
}
