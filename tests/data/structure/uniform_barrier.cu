// EXPECT access global load in coalesced
// EXPECT access shared store tile coalesced
// EXPECT access shared load tile coalesced
// EXPECT access global store out coalesced
// EXPECT feature barriers 3
// EXPECT feature divergent_barriers 0
__global__ void tile_sums(const float* in, float* out, int n) {
    __shared__ float tile[256];
    float acc = 0.f;
    if (blockIdx.x > 0) __syncthreads();
    for (int t = 0; t < n; t += 256) {
        tile[threadIdx.x] = in[t + threadIdx.x];
        __syncthreads();
        acc += tile[255 - threadIdx.x];
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
