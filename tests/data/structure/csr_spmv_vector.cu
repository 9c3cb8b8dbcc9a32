// EXPECT access global load row_ptr broadcast
// EXPECT access global load val coalesced
// EXPECT access global load col coalesced
// EXPECT access global load x indirect
// EXPECT access global store y broadcast
__global__ void spmv_csr_vector(const int* row_ptr, const int* col, const float* val, const float* x,
                                float* y, int rows) {
    int gid = blockIdx.x * blockDim.x + threadIdx.x;
    int row = gid / 32;
    int lane = gid % 32;
    if (row >= rows) return;
    float sum = 0.f;
    for (int j = row_ptr[row] + lane; j < row_ptr[row + 1]; j += 32) sum += val[j] * x[col[j]];
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, o);
    if (lane == 0) y[row] = sum;
}
