// EXPECT access global load in coalesced
// EXPECT access shared store s strided
// EXPECT access shared load s coalesced
// EXPECT access global store out coalesced
// EXPECT bank s 2
__global__ void even_slots(const float* in, float* out) {
    __shared__ float s[64];
    s[2 * threadIdx.x] = in[blockIdx.x * 32 + threadIdx.x];
    __syncthreads();
    out[blockIdx.x * 32 + threadIdx.x] = s[threadIdx.x];
}
