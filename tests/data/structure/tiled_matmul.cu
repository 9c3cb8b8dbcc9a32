// EXPECT access global load A coalesced
// EXPECT access global load B coalesced
// EXPECT access shared store As coalesced
// EXPECT access shared store Bs coalesced
// EXPECT access shared load As broadcast
// EXPECT access shared load Bs coalesced
// EXPECT access global store C coalesced
// EXPECT bank Bs 1
// EXPECT feature barriers 2
// EXPECT feature divergent_barriers 0
#define TILE 16
__global__ void matmul_tiled(const float* A, const float* B, float* C, int N) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float acc = 0.f;
    for (int t = 0; t < N / TILE; ++t) {
        As[ty][tx] = A[row * N + t * TILE + tx];
        Bs[ty][tx] = B[(t * TILE + ty) * N + col];
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    C[row * N + col] = acc;
}
void matmul(const float* A, const float* B, float* C, int N) {
    dim3 block(TILE, TILE);
    dim3 grid(N / TILE, N / TILE);
    matmul_tiled<<<grid, block>>>(A, B, C, N);
}
