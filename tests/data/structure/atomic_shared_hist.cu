// EXPECT access global load data coalesced
// EXPECT access shared store hist coalesced
// EXPECT access shared atomic hist indirect
// EXPECT access shared load hist coalesced
// EXPECT access global atomic bins coalesced
// EXPECT feature atomics_shared 1
// EXPECT feature atomics_global 1
// EXPECT feature divergent_barriers 0
__global__ void histogram(const unsigned char* data, unsigned int* bins, int n) {
    __shared__ unsigned int hist[256];
    hist[threadIdx.x] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&hist[data[i]], 1u);
    __syncthreads();
    atomicAdd(&bins[threadIdx.x], hist[threadIdx.x]);
}
