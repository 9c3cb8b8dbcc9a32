// EXPECT access global load in coalesced
// EXPECT access global store out coalesced
// EXPECT feature barriers 1
// EXPECT feature divergent_barriers 1
__global__ void loop_sync(const float* in, float* out, int n) {
    for (int k = threadIdx.x; k < n; k += blockDim.x) {
        out[k] = in[k];
        __syncthreads();
    }
}
