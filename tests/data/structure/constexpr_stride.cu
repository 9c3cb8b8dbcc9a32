// EXPECT access global load in coalesced
// EXPECT access global store out strided
// EXPECT stride out 4
constexpr int S = 4;
const int ONE = 1;
__global__ void const_strides(const float* in, float* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    out[t * S] = in[t * ONE];
}
