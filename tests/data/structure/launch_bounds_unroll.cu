// EXPECT access global load x coalesced
// EXPECT access global store y coalesced
// EXPECT feature launch_bounds_max_threads 256
// EXPECT feature launch_bounds_min_blocks 2
// EXPECT feature pragma_unroll 2
__global__ void __launch_bounds__(256, 2) scale4(const float* x, float* y, int n) {
    int base = blockIdx.x * blockDim.x * 4 + threadIdx.x;
    #pragma unroll
    for (int k = 0; k < 4; ++k) {
        int i = base + k * blockDim.x;
        if (i < n) y[i] = 3.0f * x[i];
    }
    #pragma unroll 2
    for (int k = 0; k < 2; ++k) { }
}
