// EXPECT access global load A coalesced
// EXPECT access global store out coalesced
// EXPECT access global store colflag strided
__global__ void ptr_rows(const float* A, float* out, float* colflag, int n) {
    const float* row = A + blockIdx.x * n;
    out[blockIdx.x * n + threadIdx.x] = row[threadIdx.x];
    float* p = colflag + threadIdx.x * n;
    *p = 1.0f;
}
