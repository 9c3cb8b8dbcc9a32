// EXPECT access global store out broadcast
// EXPECT feature barriers 1
// EXPECT feature divergent_barriers 1
__global__ void leader_sync(float* out) {
    int tid = threadIdx.x;
    bool leader = (tid % 32) == 0;
    if (leader) {
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = 1.0f;
}
