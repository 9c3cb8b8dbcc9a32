// The fused round check's CPU pass for float32 outputs (fused_check.py, `CpuPass`): trusted code, built once per
// process with the host C compiler. The same criterion as the GPU pass (fused_check.h), in one serial loop: each
// tensor read once, one row of float64 statistics out. Same entry points and rows as fused_check.cu, with one
// "block" and no stream.
#include <math.h>
#include "fused_check.h"

int cudaperf_ref_stats(const float* r, long long n, double* part, int blocks, void* stream) {
    (void)blocks; (void)stream;
    FcRef s = {0.0, 0.0, 0.0};
    for (long long i = 0; i < n; i++) fc_ref_add(&s, (double)r[i]);
    part[0] = s.max; part[1] = s.count; part[2] = s.sq;
    return 0;
}

int cudaperf_output_stats(const float* o, const float* r, long long n, const double* stats, double rtol,
                          double atol, double atol_abs, double* part, int blocks, void* stream) {
    (void)blocks; (void)stream;
    double allowance = fc_allowance(stats, atol, atol_abs);
    FcOut s = {0, 0, 0, 0, 0, 0.0, 0};
    for (long long i = 0; i < n; i++) fc_out_add(&s, (double)o[i], (double)r[i], i, rtol, allowance);
    fc_out_row(&s, part);
    return 0;
}

int cudaperf_differ(const float* a, const float* b, long long n, double* part, int blocks, void* stream) {
    (void)blocks; (void)stream;
    double count = 0.0;
    for (long long i = 0; i < n; i++) count += fc_differs(a[i], b[i]);
    part[0] = count;
    return 0;
}
