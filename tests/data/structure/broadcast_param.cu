// EXPECT access global load bias broadcast
// EXPECT access global load w broadcast
// EXPECT access global load in coalesced
// EXPECT access global store out coalesced
__global__ void add_bias(const float* in, const float* bias, const float* w, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * w[0] + bias[blockIdx.x];
}
