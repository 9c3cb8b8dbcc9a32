// EXPECT access global load in coalesced
// EXPECT access global store out strided
// EXPECT stride out rows
__global__ void flat_transpose(const float* in, float* out, int rows, int cols) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * cols) return;
    int r = idx / cols;
    int c = idx % cols;
    out[c * rows + r] = in[r * cols + c];
}
