// EXPECT access global load in coalesced
// EXPECT access shared store buf coalesced
// EXPECT access shared load buf coalesced
// EXPECT access global store out coalesced
// EXPECT feature barriers 1
// EXPECT feature divergent_barriers 1
__global__ void bad_sync(const float* in, float* out) {
    __shared__ float buf[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x < 128) {
        buf[threadIdx.x] = in[i];
        __syncthreads();
        out[i] = buf[threadIdx.x + 1];
    }
}
