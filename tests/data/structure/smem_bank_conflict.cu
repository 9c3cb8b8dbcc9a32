// EXPECT access global load in coalesced
// EXPECT access shared store tile coalesced
// EXPECT access shared load tile strided
// EXPECT access global store out coalesced
// EXPECT bank tile 32
__global__ void col_sums(const float* in, float* out) {
    __shared__ float tile[32][32];
    for (int r = 0; r < 32; ++r) tile[r][threadIdx.x] = in[(blockIdx.x * 32 + r) * 32 + threadIdx.x];
    __syncthreads();
    float s = 0.f;
    for (int k = 0; k < 32; ++k) s += tile[threadIdx.x][k];
    out[blockIdx.x * 32 + threadIdx.x] = s;
}
