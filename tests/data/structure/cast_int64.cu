// EXPECT access global load x coalesced
// EXPECT access global store y coalesced
#include <cstdint>
__global__ void to_half_scale(const float* x, float* y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = static_cast<float>(x[i]) * 0.5f;
}
