// EXPECT access global load in coalesced
// EXPECT access global store out coalesced
__global__ void add_one_2d(const float* in, float* out, int width, int height) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < height && col < width) out[row * width + col] = in[row * width + col] + 1.0f;
}
