// EXPECT access global load in strided
// EXPECT access global store out strided
// EXPECT stride in stride
__global__ void gather_strided(const float* in, float* out, int n, int stride) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = i * stride;
    if (j < n) out[j] = in[j] * 0.5f;
}
