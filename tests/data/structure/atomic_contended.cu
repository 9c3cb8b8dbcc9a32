// EXPECT access global load x coalesced
// EXPECT access global atomic total broadcast
// EXPECT feature atomics_global 1
// EXPECT feature contended_atomic_fraction 0.5
__global__ void naive_sum(const float* x, float* total, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        atomicAdd(&total[0], v);
    }
}
