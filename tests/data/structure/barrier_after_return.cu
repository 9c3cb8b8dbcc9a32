// EXPECT access global load in coalesced
// EXPECT access shared store s coalesced
// EXPECT access shared load s coalesced
// EXPECT access global store out coalesced
// EXPECT feature divergent_barriers 0
// EXPECT feature barriers_after_divergent_return 1
__global__ void early_exit(const float* in, float* out, int n) {
    __shared__ float s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    s[threadIdx.x] = in[i];
    __syncthreads();
    out[i] = s[(threadIdx.x + 1) % 256];
}
