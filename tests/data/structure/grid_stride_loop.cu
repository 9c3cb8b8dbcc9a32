// EXPECT access global load x coalesced
// EXPECT access global store y coalesced
// EXPECT feature grid_stride_loops 1
// EXPECT feature loops 1
__global__ void copy_gs(const float* x, float* y, int n) {
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += blockDim.x * gridDim.x)
        y[k] = x[k];
}
