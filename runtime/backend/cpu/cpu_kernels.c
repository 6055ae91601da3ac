/* gpufaas — the cpu kernel library (runtime/backend/cpu).
 *
 * Implements gpufaas/kernels.h on the host. gemm goes to OpenBLAS
 * (cblas_sgemm, loaded at run time: cpu_blas.h) when built with it
 * (GF_HAVE_BLAS) and it loads, else to plain loops; F16
 * and BF16 operands are first widened to FP32 into the context's scratch.
 * conv2d is im2col + gemm, attention is gemm + masked softmax + gemm per
 * (batch, head). Everything else is loops in memory order.
 *
 * The compute stream of the cpu backend is the calling thread: each kernel
 * has finished when it returns, errors are reported at once, and the stream
 * argument is not used. The context's scratch is not locked: one thread
 * drives a backend (see backend.h).
 */
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_blas.h"
#include "backend/cpu/cpu_dnnl.h"
#include "backend/cpu/cpu_internal.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/kernel_args.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "gf_config.h"


static const char *cpu_last_error(void *ctx)
{
    (void)ctx;
    return gf_kerr_last();
}

/* ---- scratch ---- */

void *gf_cpu_scratch(gf_cpu_kctx *c, const char *fn, size_t n)
{
    if (n <= c->scratch_cap)
        return c->scratch;
    size_t want;
    if (!gf_size_align_up(n, GF_CPU_ALIGN, &want)) {
        gf_kerr(GF_ERR_NOMEM, fn, "scratch of %zu bytes overflows", n);
        return NULL;
    }
    void *p = aligned_alloc(GF_CPU_ALIGN, want);
    if (p == NULL) {
        gf_kerr(GF_ERR_NOMEM, fn, "out of memory for %zu bytes of scratch", want);
        return NULL;
    }
    free(c->scratch);
    c->scratch = p;
    c->scratch_cap = want;
    return p;
}

bool gf_cpu_f32_region(int64_t count, size_t *bytes)
{
    size_t b;
    if (count < 0 || !gf_size_mul((size_t)count, sizeof(float), &b))
        return false;
    return gf_size_align_up(b, GF_CPU_ALIGN, bytes);
}

/* ---- dtype helpers ---- */

void gf_cpu_widen(float *dst, const void *src, gf_dtype dt, int64_t n)
{
    switch (dt) {
    case GF_DT_F16:
        gf_f16_to_f32_n(dst, (const uint16_t *)src, (size_t)n);
        break;
    case GF_DT_BF16:
        gf_bf16_to_f32_n(dst, (const uint16_t *)src, (size_t)n);
        break;
    default:
        memcpy(dst, src, (size_t)n * sizeof(float));
        break;
    }
}

const float *gf_cpu_w_f32(const void *w, gf_dtype dt, int64_t n, float *dst)
{
    if (w == NULL || dt == GF_DT_F32)
        return (const float *)w;
    gf_cpu_widen(dst, w, dt, n);
    return dst;
}

/* ---- activations ---- */

static inline float act_sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

/* Apply act to n floats in place; the switch is outside the loops so each
 * loop vectorises or at least stays branch-free. */
void gf_cpu_act(float *x, int64_t n, gf_act act)
{
    switch (act) {
    case GF_ACT_IDENTITY:
    case GF_ACT_COUNT_:
        break;
    case GF_ACT_RELU:
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case GF_ACT_GELU_ERF:
        for (int64_t i = 0; i < n; i++)
            x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float)M_SQRT1_2));
        break;
    case GF_ACT_GELU_TANH:
        for (int64_t i = 0; i < n; i++) {
            float v = x[i];
            x[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        }
        break;
    case GF_ACT_SILU:
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] * act_sigmoid(x[i]);
        break;
    case GF_ACT_TANH:
        for (int64_t i = 0; i < n; i++)
            x[i] = tanhf(x[i]);
        break;
    case GF_ACT_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            x[i] = act_sigmoid(x[i]);
        break;
    }
}

/* ---- gemm ---- */

void gf_cpu_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                      float *c, int64_t ldc)
{
    if (k == 0 || alpha == 0.0f) {
        /* C = beta C; with beta == 0, C is not read (it may hold NaN). */
        for (int64_t i = 0; i < m; i++) {
            float *cr = c + i * ldc;
            if (beta == 0.0f)
                memset(cr, 0, (size_t)n * sizeof(float));
            else if (beta != 1.0f)
                for (int64_t j = 0; j < n; j++)
                    cr[j] *= beta;
        }
        return;
    }
    const gf_cpu_blas *blas = gf_cpu_blas_get();
    if (blas != NULL) {
        blas->sgemm(101 /* CblasRowMajor */, ta ? 112 : 111 /* CblasTrans : CblasNoTrans */,
                    tb ? 112 : 111, (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta,
                    c, (int)ldc);
        return;
    }
    for (int64_t i = 0; i < m; i++) {
        float *cr = c + i * ldc;
        if (beta == 0.0f)
            memset(cr, 0, (size_t)n * sizeof(float));
        else if (beta != 1.0f)
            for (int64_t j = 0; j < n; j++)
                cr[j] *= beta;
        if (!tb) {
            /* i-p-j: the inner loop walks rows of B and C contiguously. */
            for (int64_t p = 0; p < k; p++) {
                float av = alpha * (ta ? a[p * lda + i] : a[i * lda + p]);
                const float *br = b + p * ldb;
                for (int64_t j = 0; j < n; j++)
                    cr[j] += av * br[j];
            }
        } else {
            /* B^T: a dot product of rows of A (or columns) and rows of B. */
            for (int64_t j = 0; j < n; j++) {
                const float *br = b + j * ldb;
                float acc = 0.0f;
                if (!ta)
                    for (int64_t p = 0; p < k; p++)
                        acc += a[i * lda + p] * br[p];
                else
                    for (int64_t p = 0; p < k; p++)
                        acc += a[p * lda + i] * br[p];
                cr[j] += alpha * acc;
            }
        }
    }
}

/* Widen a rows x cols matrix with leading dimension ld into dense dst
 * (leading dimension cols). */
static void widen_matrix(float *dst, const void *src, gf_dtype dt, int64_t rows, int64_t cols,
                         int64_t ld)
{
    size_t es = dt == GF_DT_F32 ? 4 : 2;
    for (int64_t r = 0; r < rows; r++)
        gf_cpu_widen(dst + r * cols, (const char *)src + (size_t)(r * ld) * es, dt, cols);
}

/* One gemm with any operand dtypes; `aw`/`bw` are scratch for the widened
 * operands (NULL when that operand is F32). */
static void gemm_one(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const void *a,
                     gf_dtype adt, int64_t lda, const void *b, gf_dtype bdt, int64_t ldb,
                     float beta, float *c, int64_t ldc, float *aw, float *bw)
{
    const float *af = (const float *)a, *bf = (const float *)b;
    if (adt != GF_DT_F32 && k > 0) {
        int64_t rows = ta ? k : m, cols = ta ? m : k;
        widen_matrix(aw, a, adt, rows, cols, lda);
        af = aw;
        lda = cols;
    }
    if (bdt != GF_DT_F32 && k > 0) {
        int64_t rows = tb ? n : k, cols = tb ? k : n;
        widen_matrix(bw, b, bdt, rows, cols, ldb);
        bf = bw;
        ldb = cols;
    }
    gf_cpu_sgemm(ta, tb, m, n, k, alpha, af, lda, bf, ldb, beta, c, ldc);
}

/* Scratch for widening the half operands of one m x n x k gemm. */
static int gemm_scratch(gf_cpu_kctx *ctx, const char *fn, int64_t m, int64_t n, int64_t k,
                        gf_dtype adt, gf_dtype bdt, float **aw, float **bw)
{
    int64_t an = 0, bn = 0;
    size_t abytes = 0, bbytes = 0, total;
    *aw = *bw = NULL;
    if ((adt != GF_DT_F32 && !gf_kmul64(m, k, &an)) || (bdt != GF_DT_F32 && !gf_kmul64(n, k, &bn)) ||
        !gf_cpu_f32_region(an, &abytes) || !gf_cpu_f32_region(bn, &bbytes) ||
        !gf_size_add(abytes, bbytes, &total))
        return gf_kerr(GF_ERR_OVERFLOW, fn, "operand sizes overflow");
    if (total == 0)
        return 0;
    char *s = gf_cpu_scratch(ctx, fn, total);
    if (s == NULL)
        return GF_ERR_NOMEM;
    if (abytes)
        *aw = (float *)s;
    if (bbytes)
        *bw = (float *)(s + abytes);
    return 0;
}

static int cpu_gemm(void *vctx, gf_stream *s, int trans_a, int trans_b, int64_t m, int64_t n,
                    int64_t k, float alpha, const void *a, gf_dtype a_dtype, int64_t lda,
                    const void *b, gf_dtype b_dtype, int64_t ldb, float beta, float *c,
                    int64_t ldc)
{
    static const char fn[] = "gemm";
    gf_cpu_kctx *ctx = vctx;
    (void)s;
    bool noop;
    int rc = gf_kargs_gemm(fn, trans_a, trans_b, m, n, k, a, a_dtype, lda, 0, b, b_dtype, ldb, 0,
                           c, ldc, 0, 1, &noop);
    if (rc != 0 || noop)
        return rc;
    float *aw, *bw;
    if ((rc = gemm_scratch(ctx, fn, m, n, k, a_dtype, b_dtype, &aw, &bw)) != 0)
        return rc;
    gemm_one(trans_a, trans_b, m, n, k, alpha, a, a_dtype, lda, b, b_dtype, ldb, beta, c, ldc,
             aw, bw);
    return 0;
}

static int cpu_gemm_batched(void *vctx, gf_stream *s, int trans_a, int trans_b, int64_t m,
                            int64_t n, int64_t k, float alpha, const void *a, gf_dtype a_dtype,
                            int64_t lda, int64_t stride_a, const void *b, gf_dtype b_dtype,
                            int64_t ldb, int64_t stride_b, float beta, float *c, int64_t ldc,
                            int64_t stride_c, int64_t batch)
{
    static const char fn[] = "gemm_batched";
    gf_cpu_kctx *ctx = vctx;
    (void)s;
    bool noop;
    int rc = gf_kargs_gemm(fn, trans_a, trans_b, m, n, k, a, a_dtype, lda, stride_a, b, b_dtype,
                           ldb, stride_b, c, ldc, stride_c, batch, &noop);
    if (rc != 0 || noop)
        return rc;
    float *aw, *bw;
    if ((rc = gemm_scratch(ctx, fn, m, n, k, a_dtype, b_dtype, &aw, &bw)) != 0)
        return rc;
    size_t aes = a_dtype == GF_DT_F32 ? 4 : 2, bes = b_dtype == GF_DT_F32 ? 4 : 2;
    for (int64_t i = 0; i < batch; i++) {
        const char *ai = (const char *)a + (size_t)(i * stride_a) * aes;
        const char *bi = (const char *)b + (size_t)(i * stride_b) * bes;
        /* A matrix shared by every batch (stride 0) is widened once. */
        gf_dtype adt = a_dtype, bdt = b_dtype;
        const void *ap = ai, *bp = bi;
        int64_t la = lda, lb = ldb;
        if (i > 0 && stride_a == 0 && a_dtype != GF_DT_F32) {
            adt = GF_DT_F32;
            ap = aw;
            la = trans_a ? m : k;
        }
        if (i > 0 && stride_b == 0 && b_dtype != GF_DT_F32) {
            bdt = GF_DT_F32;
            bp = bw;
            lb = trans_b ? k : n;
        }
        gemm_one(trans_a, trans_b, m, n, k, alpha, ap, adt, la, bp, bdt, lb, beta,
                 c + i * stride_c, ldc, aw, bw);
    }
    return 0;
}

/* ---- elementwise and row kernels ---- */

static int cpu_bias_act(void *vctx, gf_stream *s, float *x, int64_t rows, int64_t cols,
                        const void *bias, gf_dtype bias_dtype, gf_act act)
{
    static const char fn[] = "bias_act";
    gf_cpu_kctx *ctx = vctx;
    (void)s;
    bool noop;
    int rc = gf_kargs_bias_act(x, rows, cols, bias, bias_dtype, act, &noop);
    if (rc != 0 || noop)
        return rc;
    int64_t total = rows * cols;
    float *bw = NULL;
    if (bias != NULL && bias_dtype != GF_DT_F32 &&
        (bw = gf_cpu_scratch(ctx, fn, (size_t)cols * sizeof(float))) == NULL)
        return GF_ERR_NOMEM;
    const float *bf = gf_cpu_w_f32(bias, bias_dtype, cols, bw);
    if (bf == NULL) {
        gf_cpu_act(x, total, act);
        return 0;
    }
    for (int64_t r = 0; r < rows; r++) {
        float *xr = x + r * cols;
        for (int64_t j = 0; j < cols; j++)
            xr[j] += bf[j];
        gf_cpu_act(xr, cols, act);
    }
    return 0;
}

static int cpu_softmax(void *vctx, gf_stream *s, float *y, const float *x, int64_t rows,
                       int64_t cols, int log_)
{
    (void)vctx;
    (void)s;
    bool noop;
    int rc = gf_kargs_softmax(y, x, rows, cols, &noop);
    if (rc != 0 || noop)
        return rc;
    gf_cpu_softmax_rows(y, x, rows, cols, log_);
    return 0;
}

static int cpu_layernorm(void *vctx, gf_stream *s, float *y, const float *x, int64_t rows,
                         int64_t cols, const void *gamma, const void *beta, gf_dtype w_dtype,
                         float eps)
{
    static const char fn[] = "layernorm";
    gf_cpu_kctx *ctx = vctx;
    (void)s;
    bool noop;
    int rc = gf_kargs_layernorm(y, x, rows, cols, gamma, beta, w_dtype, eps, &noop);
    if (rc != 0 || noop)
        return rc;
    float *w = NULL;
    if (w_dtype != GF_DT_F32 && (gamma != NULL || beta != NULL) &&
        (w = gf_cpu_scratch(ctx, fn, 2 * (size_t)cols * sizeof(float))) == NULL)
        return GF_ERR_NOMEM;
    const float *g = gf_cpu_w_f32(gamma, w_dtype, cols, w);
    const float *bt = gf_cpu_w_f32(beta, w_dtype, cols, w ? w + cols : NULL);
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        /* Two passes (mean, then squared deviations): no cancellation. */
        float sum = 0.0f;
        for (int64_t j = 0; j < cols; j++)
            sum += xr[j];
        float mean = sum / (float)cols;
        float sq = 0.0f;
        for (int64_t j = 0; j < cols; j++) {
            float d = xr[j] - mean;
            sq += d * d;
        }
        float rstd = 1.0f / sqrtf(sq / (float)cols + eps);
        for (int64_t j = 0; j < cols; j++) {
            float v = (xr[j] - mean) * rstd;
            if (g != NULL)
                v *= g[j];
            if (bt != NULL)
                v += bt[j];
            yr[j] = v;
        }
    }
    return 0;
}

static int cpu_batchnorm(void *vctx, gf_stream *s, float *y, const float *x, int64_t n,
                         int64_t c, int64_t hw, const void *mean, const void *var,
                         const void *gamma, const void *beta, gf_dtype w_dtype, float eps,
                         gf_act act)
{
    static const char fn[] = "batchnorm";
    gf_cpu_kctx *ctx = vctx;
    (void)s;
    bool noop;
    int rc = gf_kargs_batchnorm(y, x, n, c, hw, mean, var, w_dtype, eps, act, &noop);
    if (rc != 0 || noop)
        return rc;
    /* Fold into one scale and shift per channel: y = x * sc + sh. */
    float *sc = gf_cpu_scratch(ctx, fn, 2 * (size_t)c * sizeof(float));
    if (sc == NULL)
        return GF_ERR_NOMEM;
    float *sh = sc + c;
    size_t es = gf_dtype_size(w_dtype);
    for (int64_t ch = 0; ch < c; ch++) {
        float mv, vv, gv = 1.0f, bv = 0.0f;
        gf_cpu_widen(&mv, (const char *)mean + (size_t)ch * es, w_dtype, 1);
        gf_cpu_widen(&vv, (const char *)var + (size_t)ch * es, w_dtype, 1);
        if (gamma != NULL)
            gf_cpu_widen(&gv, (const char *)gamma + (size_t)ch * es, w_dtype, 1);
        if (beta != NULL)
            gf_cpu_widen(&bv, (const char *)beta + (size_t)ch * es, w_dtype, 1);
        sc[ch] = gv / sqrtf(vv + eps);
        sh[ch] = bv - mv * sc[ch];
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < c; ch++) {
            const float *xr = x + (i * c + ch) * hw;
            float *yr = y + (i * c + ch) * hw;
            float a = sc[ch], b = sh[ch];
            for (int64_t j = 0; j < hw; j++)
                yr[j] = xr[j] * a + b;
            gf_cpu_act(yr, hw, act);
        }
    return 0;
}

static int cpu_add(void *vctx, gf_stream *s, float *y, const float *a, const float *b, int64_t n,
                   gf_act act)
{
    (void)vctx;
    (void)s;
    bool noop;
    int rc = gf_kargs_add(y, a, b, n, act, &noop);
    if (rc != 0 || noop)
        return rc;
    /* In blocks, so the activation pass finds the sums still in cache. */
    for (int64_t i0 = 0; i0 < n; i0 += 4096) {
        int64_t len = n - i0 < 4096 ? n - i0 : 4096;
        for (int64_t i = i0; i < i0 + len; i++)
            y[i] = a[i] + b[i];
        gf_cpu_act(y + i0, len, act);
    }
    return 0;
}

static int cpu_global_avgpool(void *vctx, gf_stream *s, float *y, const float *x, int64_t n,
                              int64_t c, int64_t hw)
{
    (void)vctx;
    (void)s;
    bool noop;
    int rc = gf_kargs_global_avgpool(y, x, n, c, hw, &noop);
    if (rc != 0 || noop)
        return rc;
    int64_t planes = n * c;
    for (int64_t i = 0; i < planes; i++) {
        const float *xr = x + i * hw;
        float sum = 0.0f;
        for (int64_t j = 0; j < hw; j++)
            sum += xr[j];
        y[i] = sum / (float)hw;
    }
    return 0;
}

/* ---- embedding ---- */

static int cpu_embedding(void *vctx, gf_stream *s, float *y, const void *table, gf_dtype w_dtype,
                         int64_t vocab, int64_t dim, const void *ids, gf_dtype id_dtype,
                         int64_t n)
{
    static const char fn[] = "embedding";
    (void)vctx;
    (void)s;
    bool noop;
    int rc = gf_kargs_embedding(y, table, w_dtype, vocab, dim, ids, id_dtype, n, &noop);
    if (rc != 0 || noop)
        return rc;
    /* Every index is checked before anything is read or written. */
    for (int64_t i = 0; i < n; i++) {
        int64_t id = id_dtype == GF_DT_I32 ? ((const int32_t *)ids)[i] : ((const int64_t *)ids)[i];
        if (id < 0 || id >= vocab)
            return gf_kerr(GF_ERR_INVALID, fn,
                        "index %lld (at position %lld) is outside the vocabulary [0, %lld)",
                        (long long)id, (long long)i, (long long)vocab);
    }
    size_t es = gf_dtype_size(w_dtype);
    for (int64_t i = 0; i < n; i++) {
        int64_t id = id_dtype == GF_DT_I32 ? ((const int32_t *)ids)[i] : ((const int64_t *)ids)[i];
        gf_cpu_widen(y + i * dim, (const char *)table + (size_t)(id * dim) * es, w_dtype, dim);
    }
    return 0;
}

/* ---- attention ---- */

/* mask[i] as an integer (I32 or I64). */
static inline int64_t mask_at(const void *mask, gf_dtype dt, int64_t i)
{
    return dt == GF_DT_I32 ? ((const int32_t *)mask)[i] : ((const int64_t *)mask)[i];
}

/* Softmax of one score row in place, where key j is masked (zero weight)
 * when mask[moff + j] == 0; a row with every key masked becomes uniform. */
static void masked_softmax_row(float *row, int64_t seq, const void *mask, gf_dtype mdt,
                               int64_t moff)
{
    float mx = -INFINITY;
    int64_t live = 0;
    for (int64_t j = 0; j < seq; j++)
        if (mask == NULL || mask_at(mask, mdt, moff + j) != 0) {
            live++;
            mx = row[j] > mx ? row[j] : mx;
        }
    if (live == 0) {
        for (int64_t j = 0; j < seq; j++)
            row[j] = 1.0f / (float)seq;
        return;
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < seq; j++) {
        float e = 0.0f;
        if (mask == NULL || mask_at(mask, mdt, moff + j) != 0)
            e = expf(row[j] - mx);
        row[j] = e;
        sum += e;
    }
    float inv = 1.0f / sum;
    for (int64_t j = 0; j < seq; j++)
        row[j] *= inv;
}

static int cpu_attention(void *vctx, gf_stream *s, float *out, const float *q, const float *k,
                         const float *v, int64_t b, int64_t h, int64_t seq, int64_t d,
                         float scale, const void *mask, gf_dtype mask_dtype)
{
    static const char fn[] = "attention";
    gf_cpu_kctx *ctx = vctx;
    (void)s;
    bool noop;
    int rc = gf_kargs_attention(out, q, k, v, b, h, seq, d, mask, mask_dtype, &noop);
    if (rc != 0 || noop)
        return rc;
    int64_t ss = seq * seq;
    size_t sbytes;
    if (!gf_cpu_f32_region(ss, &sbytes))
        return gf_kerr(GF_ERR_OVERFLOW, fn, "score matrix size overflows");
    float *sc = gf_cpu_scratch(ctx, fn, sbytes);
    if (sc == NULL)
        return GF_ERR_NOMEM;
    int64_t sd = seq * d;
    for (int64_t bi = 0; bi < b; bi++) {
        for (int64_t hi = 0; hi < h; hi++) {
            int64_t off = (bi * h + hi) * sd;
            /* scores = q k^T * scale */
            gf_cpu_sgemm(0, 1, seq, seq, d, scale, q + off, d, k + off, d, 0.0f, sc, seq);
            for (int64_t i = 0; i < seq; i++)
                masked_softmax_row(sc + i * seq, seq, mask, mask_dtype, bi * seq);
            /* out = P v */
            gf_cpu_sgemm(0, 0, seq, d, seq, 1.0f, sc, seq, v + off, d, 0.0f, out + off, d);
        }
    }
    return 0;
}

/* ---- layout and dtype ---- */

static int cpu_permute_0213(void *vctx, gf_stream *s, float *y, const float *x, int64_t d0,
                            int64_t d1, int64_t d2, int64_t d3)
{
    (void)vctx;
    (void)s;
    bool noop;
    int rc = gf_kargs_permute_0213(y, x, d0, d1, d2, d3, &noop);
    if (rc != 0 || noop)
        return rc;
    size_t row = (size_t)d3 * sizeof(float);
    for (int64_t a = 0; a < d0; a++)
        for (int64_t b = 0; b < d1; b++)
            for (int64_t c = 0; c < d2; c++)
                memmove(y + ((a * d2 + c) * d1 + b) * d3, x + ((a * d1 + b) * d2 + c) * d3, row);
    return 0;
}

static int cpu_copy2d(void *vctx, gf_stream *s, void *dst, int64_t dst_pitch, const void *src,
                      int64_t src_pitch, int64_t width, int64_t rows)
{
    (void)vctx;
    (void)s;
    bool noop;
    int rc = gf_kargs_copy2d(dst, dst_pitch, src, src_pitch, width, rows, &noop);
    if (rc != 0 || noop)
        return rc;
    for (int64_t r = 0; r < rows; r++)
        memmove((char *)dst + r * dst_pitch, (const char *)src + r * src_pitch, (size_t)width);
    return 0;
}

/* ---- the table ---- */

gf_status gf_cpu_kctx_new(int blas_threads, gf_cpu_kctx **out, gf_err *err)
{
    gf_cpu_kctx *c = calloc(1, sizeof *c);
    if (c == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "%s: out of memory", __func__);
    c->blas_threads = blas_threads > 0 ? blas_threads : 1;
    /* Process-wide; several cpu workers on few cores must not oversubscribe. */
    const gf_cpu_blas *blas = gf_cpu_blas_get();
    if (blas != NULL && blas->set_threads != NULL)
        blas->set_threads(c->blas_threads);
    gf_status st = gf_cpu_dnnl_new(c->blas_threads, &c->dnnl, err);
    if (st != GF_OK) {
        free(c);
        return st;
    }
    *out = c;
    return GF_OK;
}

void gf_cpu_kctx_free(gf_cpu_kctx *ctx)
{
    if (ctx == NULL)
        return;
    gf_cpu_dnnl_free(ctx->dnnl);
    free(ctx->scratch);
    free(ctx);
}

/* The table, one labelled line per member in the order of gpufaas/kernels.h;
 * a backend instance gets a copy with its own context. */
static const gf_kernels gf_cpu_kernel_table = {
    /* .version = */ GF_KERNELS_VERSION,
    /* .size = */ sizeof(gf_kernels),
    /* .ctx = */ NULL, /* set per backend instance by the fill below */
    /* .last_error = */ cpu_last_error,
    /* .sync = */ NULL,
    /* .gemm = */ cpu_gemm,
    /* .gemm_batched = */ cpu_gemm_batched,
    /* .bias_act = */ cpu_bias_act,
    /* .softmax = */ cpu_softmax,
    /* .layernorm = */ cpu_layernorm,
    /* .batchnorm = */ cpu_batchnorm,
    /* .add = */ cpu_add,
    /* .conv2d = */ gf_cpu_conv2d,
    /* .maxpool2d = */ gf_cpu_maxpool2d,
    /* .avgpool2d = */ gf_cpu_avgpool2d,
    /* .global_avgpool = */ cpu_global_avgpool,
    /* .embedding = */ cpu_embedding,
    /* .attention = */ cpu_attention,
    /* .cast = */ gf_cpu_cast,
    /* .permute_0213 = */ cpu_permute_0213,
    /* .copy2d = */ cpu_copy2d,
    /* members below are valid for version 2 */
    /* .unary = */ gf_cpu_unary,
    /* .binary = */ gf_cpu_binary,
    /* .where = */ gf_cpu_where,
    /* .strided_copy = */ gf_cpu_strided_copy,
    /* .gather = */ gf_cpu_gather,
    /* .reduce = */ gf_cpu_reduce,
    /* .softmax_axis = */ gf_cpu_softmax_axis,
    /* .conv2d_ex = */ gf_cpu_conv2d_ex,
    /* .pool2d_ex = */ gf_cpu_pool2d_ex,
    /* .cast_ex = */ gf_cpu_cast_ex,
    /* .fill = */ gf_cpu_fill,
    /* members below are valid for version 3 */
    /* .conv2d_pack_size = */ gf_cpu_conv2d_pack_size,
    /* .conv2d_pack = */ gf_cpu_conv2d_pack,
    /* .conv2d_packed = */ gf_cpu_conv2d_packed,
};

void gf_cpu_kernels_fill(gf_kernels *k, gf_cpu_kctx *ctx)
{
    *k = gf_cpu_kernel_table;
    k->ctx = ctx;
}
