// The fused round check's device pass for float32 outputs (fused_check.py, `CudaPass`): trusted code, built once
// per evaluator. Each kernel reads its tensors once (grid-stride) and writes one row of float64 partials per block;
// torch reduces those few rows on the device, so the host waits once per round. The criterion per element is
// fused_check.h's, which the CPU pass (fused_check.c) shares.
#include <cuda_runtime.h>
#include <math.h>
#include "fused_check.h"

#define THREADS 256

// partial rows: [largest finite |r|, finite count, sum r^2 over finite r]
__global__ void ref_stats_kernel(const float* r, long long n, double* part) {
    __shared__ FcRef s[THREADS];
    FcRef mine = {0.0, 0.0, 0.0};
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        fc_ref_add(&mine, (double)r[i]);
    s[threadIdx.x] = mine;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) fc_ref_merge(&s[threadIdx.x], &s[threadIdx.x + k]);
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        part[blockIdx.x * 3 + 0] = s[0].max;
        part[blockIdx.x * 3 + 1] = s[0].count;
        part[blockIdx.x * 3 + 2] = s[0].sq;
    }
}

// stats (device): [scale, finite count, sum (r/scale)^2]; partial rows:
// [bad, nan, unlike, sum (o-r)^2 over finite r, worst, worst index, outside]
__global__ void output_stats_kernel(const float* o, const float* r, long long n, const double* stats, double rtol,
                                    double atol, double atol_abs, double* part) {
    __shared__ FcOut s[THREADS];
    double allowance = fc_allowance(stats, atol, atol_abs);
    FcOut mine = {0, 0, 0, 0, 0, 0.0, 0};
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        fc_out_add(&mine, (double)o[i], (double)r[i], i, rtol, allowance);
    s[threadIdx.x] = mine;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) fc_out_merge(&s[threadIdx.x], &s[threadIdx.x + k]);
        __syncthreads();
    }
    if (threadIdx.x == 0) fc_out_row(&s[0], part + blockIdx.x * 7);
}

// partial rows: [count of elements that differ]
__global__ void differ_kernel(const float* a, const float* b, long long n, double* part) {
    __shared__ double s[THREADS];
    double mine = 0.0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        mine += fc_differs(a[i], b[i]);
    s[threadIdx.x] = mine;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = s[0];
}

extern "C" int cudaperf_ref_stats(const float* r, long long n, double* part, int blocks, void* stream) {
    ref_stats_kernel<<<blocks, THREADS, 0, (cudaStream_t)stream>>>(r, n, part);
    return (int)cudaGetLastError();
}

extern "C" int cudaperf_output_stats(const float* o, const float* r, long long n, const double* stats, double rtol,
                                     double atol, double atol_abs, double* part, int blocks, void* stream) {
    output_stats_kernel<<<blocks, THREADS, 0, (cudaStream_t)stream>>>(o, r, n, stats, rtol, atol, atol_abs, part);
    return (int)cudaGetLastError();
}

extern "C" int cudaperf_differ(const float* a, const float* b, long long n, double* part, int blocks, void* stream) {
    differ_kernel<<<blocks, THREADS, 0, (cudaStream_t)stream>>>(a, b, n, part);
    return (int)cudaGetLastError();
}
