// EXPECT access global load in coalesced
// EXPECT access shared store d coalesced
// EXPECT access shared load d coalesced
// EXPECT access global store out coalesced
// EXPECT bank d 1
__global__ void via_smem_double(const double* in, double* out) {
    __shared__ double d[32];
    d[threadIdx.x] = in[blockIdx.x * 32 + threadIdx.x];
    __syncthreads();
    out[blockIdx.x * 32 + threadIdx.x] = d[31 - threadIdx.x];
}
