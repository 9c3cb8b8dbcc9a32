// The fused round check's criterion per element, written once for both of its passes: fused_check.cu (the GPU,
// grid-stride per thread) and fused_check.c (the CPU, one serial loop). Every statistic accumulates in double.
// fused_check.py splices this file into each source before it is built.
#ifdef __CUDACC__
#define FC_FN __host__ __device__ static inline
#else
#define FC_FN static inline
#endif

// the reference's statistics: largest finite |r|, finite count, sum r^2 over finite r
typedef struct {
    double max, count, sq;
} FcRef;

FC_FN void fc_ref_add(FcRef* s, double v) {
    if (isfinite(v)) {
        s->max = fmax(s->max, fabs(v));
        s->count += 1.0;
        s->sq += v * v;
    }
}

FC_FN void fc_ref_merge(FcRef* a, const FcRef* b) {
    a->max = fmax(a->max, b->max);
    a->count += b->count;
    a->sq += b->sq;
}

// an output's statistics against its reference: counts of non-finite outputs where the reference is finite, of
// NaN among them, of elements unlike a non-finite reference; sum (o-r)^2 over finite r; the largest normalised
// error and its first index; the count outside the allowance
typedef struct {
    double bad, nan, unlike, dsq, outside, worst;
    long long at;
} FcOut;

FC_FN void fc_out_add(FcOut* s, double ov, double rv, long long i, double rtol, double allowance) {
    int fin = isfinite(rv), onan = isnan(ov);
    if (fin) {
        if (!isfinite(ov)) s->bad += 1;
        if (onan) s->nan += 1;
        double d = ov - rv;
        s->dsq += d * d;
        double err = fabs(d) / (rtol * fabs(rv) + allowance);
        if (err > 1) s->outside += 1;
        if (err > s->worst || (err == s->worst && i < s->at)) {  // the larger error; on a tie the first index
            s->worst = err;
            s->at = i;
        }
    } else if (!(ov == rv || (onan && isnan(rv)))) {
        s->unlike += 1;
    }
}

FC_FN void fc_out_merge(FcOut* a, const FcOut* b) {
    a->bad += b->bad; a->nan += b->nan; a->unlike += b->unlike; a->dsq += b->dsq; a->outside += b->outside;
    if (b->worst > a->worst || (b->worst == a->worst && b->at < a->at)) {
        a->worst = b->worst;
        a->at = b->at;
    }
}

// the elementwise allowance's constant part from the reference statistics [scale, finite count, sum (r/scale)^2]
FC_FN double fc_allowance(const double* stats, double atol, double atol_abs) {
    double scale = stats[0], finite_n = stats[1], sq = stats[2];
    double rms = finite_n > 0 ? scale * sqrt(sq / finite_n) : 0.0;
    return atol * rms + atol_abs + 1e-300;
}

FC_FN void fc_out_row(const FcOut* s, double* p) {
    p[0] = s->bad; p[1] = s->nan; p[2] = s->unlike; p[3] = s->dsq; p[4] = s->worst; p[5] = (double)s->at;
    p[6] = s->outside;
}

// a float32 buffer against its staged copy: the count of elements that differ (a NaN never equals itself)
FC_FN double fc_differs(float a, float b) {
    return a != b ? 1.0 : 0.0;
}
