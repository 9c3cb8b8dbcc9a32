// EXPECT access global load A strided
// EXPECT access global store rowsum coalesced
// EXPECT stride A K
__global__ void row_sums(const float* A, float* rowsum, int M, int K) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    float s = 0.f;
    for (int k = 0; k < K; ++k) s += A[row * K + k];
    rowsum[row] = s;
}
