/* gpufaas — reductions and softmax over an axis on the cpu
 * (runtime/backend/cpu): reduce, softmax_axis, and the row softmax that
 * softmax (v1) and softmax_axis with inner = 1 share.
 *
 * x is viewed as [outer, r, inner]. With inner = 1 each output reduces one
 * contiguous row (eight partial sums, so the loop vectorises); otherwise
 * the reduction walks r and updates a whole row of inner outputs at a time,
 * which is contiguous and vectorises too.
 */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/kernel_args.h"

void gf_cpu_softmax_rows(float *y, const float *x, int64_t rows, int64_t cols, int log_)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float mx = xr[0];
        for (int64_t j = 1; j < cols; j++)
            mx = xr[j] > mx ? xr[j] : mx;
        if (log_) {
            float sum = 0.0f;
            for (int64_t j = 0; j < cols; j++)
                sum += expf(xr[j] - mx);
            float lse = mx + logf(sum);
            for (int64_t j = 0; j < cols; j++)
                yr[j] = xr[j] - lse;
        } else {
            float sum = 0.0f;
            for (int64_t j = 0; j < cols; j++) {
                yr[j] = expf(xr[j] - mx);
                sum += yr[j];
            }
            float inv = 1.0f / sum;
            for (int64_t j = 0; j < cols; j++)
                yr[j] *= inv;
        }
    }
}

int gf_cpu_softmax_axis(void *vctx, gf_stream *s, float *y, const float *x, int64_t outer,
                        int64_t dim, int64_t inner, int log_)
{
    static const char fn[] = "softmax_axis";
    (void)s;
    bool noop;
    int rc = gf_kargs_softmax_axis(y, x, outer, dim, inner, &noop);
    if (rc != 0 || noop)
        return rc;
    if (inner == 1) {
        gf_cpu_softmax_rows(y, x, outer, dim, log_);
        return 0;
    }
    float *mx = gf_cpu_scratch(vctx, fn, 2 * (size_t)inner * sizeof(float));
    if (mx == NULL)
        return GF_ERR_NOMEM;
    float *sum = mx + inner;
    for (int64_t o = 0; o < outer; o++) {
        const float *xo = x + o * dim * inner;
        float *yo = y + o * dim * inner;
        memcpy(mx, xo, (size_t)inner * sizeof(float));
        for (int64_t r = 1; r < dim; r++) {
            const float *xr = xo + r * inner;
            for (int64_t i = 0; i < inner; i++)
                mx[i] = xr[i] > mx[i] ? xr[i] : mx[i];
        }
        memset(sum, 0, (size_t)inner * sizeof(float));
        /* y may equal x: each element is read before it is overwritten. */
        for (int64_t r = 0; r < dim; r++) {
            const float *xr = xo + r * inner;
            float *yr = yo + r * inner;
            if (log_) {
                for (int64_t i = 0; i < inner; i++)
                    sum[i] += expf(xr[i] - mx[i]);
            } else {
                for (int64_t i = 0; i < inner; i++) {
                    float e = expf(xr[i] - mx[i]);
                    yr[i] = e;
                    sum[i] += e;
                }
            }
        }
        for (int64_t i = 0; i < inner; i++)
            sum[i] = log_ ? mx[i] + logf(sum[i]) : 1.0f / sum[i];
        for (int64_t r = 0; r < dim; r++) {
            const float *xr = xo + r * inner;
            float *yr = yo + r * inner;
            if (log_)
                for (int64_t i = 0; i < inner; i++)
                    yr[i] = xr[i] - sum[i];
            else
                for (int64_t i = 0; i < inner; i++)
                    yr[i] *= sum[i];
        }
    }
    return 0;
}

/* ---- reduce ---- */

/* The value a reduction starts from (and gives over an empty axis). */
static float reduce_init(gf_reduce_op op)
{
    switch (op) {
    case GF_REDUCE_PROD: return 1.0f;
    case GF_REDUCE_MAX: return -INFINITY;
    case GF_REDUCE_MIN: return INFINITY;
    case GF_REDUCE_LOG_SUM_EXP: return -INFINITY;
    default: return 0.0f;
    }
}

static inline float nan_max(float a, float b)
{
    return isnan(a) || isnan(b) ? a + b : (a > b ? a : b);
}

static inline float nan_min(float a, float b)
{
    return isnan(a) || isnan(b) ? a + b : (a < b ? a : b);
}

/* Does v replace the best so far (arg ops)? A NaN is the extreme; the
 * first one is kept, or the last with the _LAST ops. */
static inline bool arg_better(gf_reduce_op op, float v, float best)
{
    bool last = op == GF_REDUCE_ARGMAX_LAST || op == GF_REDUCE_ARGMIN_LAST;
    bool mx = op == GF_REDUCE_ARGMAX || op == GF_REDUCE_ARGMAX_LAST;
    if (isnan(v))
        return last || !isnan(best);
    if (isnan(best))
        return false;
    if (last)
        return mx ? v >= best : v <= best;
    return mx ? v > best : v < best;
}

/* Eight-lane sums of f(x[j]) over a contiguous row, so the loop vectorises. */
#define LANES(EXPR)                                                                               \
    do {                                                                                          \
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                  \
        int64_t j = 0;                                                                            \
        for (; j + 8 <= n; j += 8)                                                                \
            for (int l = 0; l < 8; l++) {                                                         \
                float v = x[j + l];                                                               \
                acc[l] += (EXPR);                                                                 \
            }                                                                                     \
        float t = 0.0f;                                                                           \
        for (; j < n; j++) {                                                                      \
            float v = x[j];                                                                       \
            t += (EXPR);                                                                          \
        }                                                                                         \
        return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + \
               t;                                                                                 \
    } while (0)

static float row_sum(const float *x, int64_t n)
{
    LANES(v);
}

static float row_sumsq(const float *x, int64_t n)
{
    LANES(v * v);
}

static float row_l1(const float *x, int64_t n)
{
    LANES(fabsf(v));
}

static float row_sumexp(const float *x, int64_t n, float mx)
{
    LANES(expf(v - mx));
}

/* Reduce one contiguous row of n >= 0 elements (not the arg ops). */
static float reduce_row(gf_reduce_op op, const float *x, int64_t n)
{
    float r = reduce_init(op);
    switch (op) {
    case GF_REDUCE_SUM: return row_sum(x, n);
    case GF_REDUCE_MEAN: return row_sum(x, n) / (float)n;
    case GF_REDUCE_SUM_SQUARE: return row_sumsq(x, n);
    case GF_REDUCE_L1: return row_l1(x, n);
    case GF_REDUCE_L2: return sqrtf(row_sumsq(x, n));
    case GF_REDUCE_LOG_SUM: return logf(row_sum(x, n));
    case GF_REDUCE_MAX:
        for (int64_t j = 0; j < n; j++)
            r = nan_max(r, x[j]);
        return r;
    case GF_REDUCE_MIN:
        for (int64_t j = 0; j < n; j++)
            r = nan_min(r, x[j]);
        return r;
    case GF_REDUCE_PROD:
        for (int64_t j = 0; j < n; j++)
            r *= x[j];
        return r;
    case GF_REDUCE_LOG_SUM_EXP: {
        float mx = -INFINITY;
        for (int64_t j = 0; j < n; j++)
            mx = nan_max(mx, x[j]);
        if (isinf(mx) || isnan(mx))
            return mx; /* all -inf, some +inf, or NaN */
        return mx + logf(row_sumexp(x, n, mx));
    }
    default: return r;
    }
}

/* The arg ops over the middle axis of one [rdim, inner] block, rdim > 0. */
static void arg_block(gf_reduce_op op, int64_t *y, float *best, const float *x, int64_t rdim,
                      int64_t inner)
{
    memcpy(best, x, (size_t)inner * sizeof(float));
    memset(y, 0, (size_t)inner * sizeof(int64_t));
    for (int64_t r = 1; r < rdim; r++) {
        const float *xr = x + r * inner;
        for (int64_t i = 0; i < inner; i++)
            if (arg_better(op, xr[i], best[i])) {
                best[i] = xr[i];
                y[i] = r;
            }
    }
}

/* Reduce one [rdim, inner] block into y[inner], inner > 1 (not the arg
 * ops): rows at a time, contiguous. */
static void reduce_block(gf_reduce_op op, float *y, const float *x, int64_t rdim, int64_t inner)
{
    float init = reduce_init(op);
    for (int64_t i = 0; i < inner; i++)
        y[i] = init;
    if (op == GF_REDUCE_LOG_SUM_EXP) {
        /* y holds the maxima, then the log-sum-exp */
        for (int64_t r = 0; r < rdim; r++)
            for (int64_t i = 0; i < inner; i++)
                y[i] = nan_max(y[i], x[r * inner + i]);
        for (int64_t i = 0; i < inner; i++) {
            float mx = y[i];
            if (isinf(mx) || isnan(mx))
                continue;
            float s = 0.0f;
            for (int64_t r = 0; r < rdim; r++)
                s += expf(x[r * inner + i] - mx);
            y[i] = mx + logf(s);
        }
        return;
    }
    for (int64_t r = 0; r < rdim; r++) {
        const float *xr = x + r * inner;
        switch (op) {
        case GF_REDUCE_MAX:
            for (int64_t i = 0; i < inner; i++)
                y[i] = nan_max(y[i], xr[i]);
            break;
        case GF_REDUCE_MIN:
            for (int64_t i = 0; i < inner; i++)
                y[i] = nan_min(y[i], xr[i]);
            break;
        case GF_REDUCE_PROD:
            for (int64_t i = 0; i < inner; i++)
                y[i] *= xr[i];
            break;
        case GF_REDUCE_SUM_SQUARE:
        case GF_REDUCE_L2:
            for (int64_t i = 0; i < inner; i++)
                y[i] += xr[i] * xr[i];
            break;
        case GF_REDUCE_L1:
            for (int64_t i = 0; i < inner; i++)
                y[i] += fabsf(xr[i]);
            break;
        default: /* SUM, MEAN, LOG_SUM */
            for (int64_t i = 0; i < inner; i++)
                y[i] += xr[i];
            break;
        }
    }
    if (op == GF_REDUCE_MEAN)
        for (int64_t i = 0; i < inner; i++)
            y[i] /= (float)rdim;
    else if (op == GF_REDUCE_L2)
        for (int64_t i = 0; i < inner; i++)
            y[i] = sqrtf(y[i]);
    else if (op == GF_REDUCE_LOG_SUM)
        for (int64_t i = 0; i < inner; i++)
            y[i] = logf(y[i]);
}

int gf_cpu_reduce(void *vctx, gf_stream *s, gf_reduce_op op, void *y, const float *x,
                  int64_t outer, int64_t rdim, int64_t inner)
{
    static const char fn[] = "reduce";
    (void)s;
    bool noop;
    int rc = gf_kargs_reduce(op, y, x, outer, rdim, inner, &noop);
    if (rc != 0 || noop)
        return rc;
    if (op >= GF_REDUCE_ARGMAX) {
        float *best = gf_cpu_scratch(vctx, fn, (size_t)inner * sizeof(float));
        if (best == NULL)
            return GF_ERR_NOMEM;
        for (int64_t o = 0; o < outer; o++)
            arg_block(op, (int64_t *)y + o * inner, best, x + o * rdim * inner, rdim, inner);
        return 0;
    }
    float *yf = y;
    if (inner == 1) {
        for (int64_t o = 0; o < outer; o++)
            yf[o] = reduce_row(op, x + o * rdim, rdim);
        return 0;
    }
    for (int64_t o = 0; o < outer; o++)
        reduce_block(op, yf + o * inner, x + o * rdim * inner, rdim, inner);
    return 0;
}
