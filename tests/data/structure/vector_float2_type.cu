// EXPECT access global load in coalesced
// EXPECT access global store out coalesced
// EXPECT feature vector_loads 1
// EXPECT feature vector_stores 0
__global__ void norm2(const float2* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float2 v = in[i];
        out[i] = v.x * v.x + v.y * v.y;
    }
}
