/* gpufaas — argument checks shared by the kernel libraries (runtime/backend). */
#include "backend/kernel_args.h"
#include "backend/kernel_check.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>

#include "core/dtype.h"
#include "core/error.h"

/* The message of the last failed kernel call on this thread. */
static _Thread_local char gf_kerr_buf[GF_ERR_MSG_MAX];

int gf_kerr(int code, const char *fn, const char *fmt, ...)
{
    int off = snprintf(gf_kerr_buf, sizeof gf_kerr_buf, "%s: ", fn);
    if (off < 0 || (size_t)off >= sizeof gf_kerr_buf)
        off = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(gf_kerr_buf + off, sizeof gf_kerr_buf - (size_t)off, fmt, ap);
    va_end(ap);
    return code;
}

const char *gf_kerr_last(void)
{
    return gf_kerr_buf;
}

int gf_kcheck_wdtype(const char *fn, const char *what, gf_dtype dt)
{
    if (gf_kw_size(dt) != 0)
        return 0;
    return gf_kerr(GF_ERR_UNSUPPORTED, fn, "%s dtype %s (%d) is not supported (FP32, FP16 or BF16)",
                   what, gf_dtype_kserve_name(dt), (int)dt);
}

int gf_kcheck_idtype(const char *fn, const char *what, gf_dtype dt)
{
    if (dt == GF_DT_I32 || dt == GF_DT_I64)
        return 0;
    return gf_kerr(GF_ERR_UNSUPPORTED, fn, "%s dtype %s (%d) is not supported (INT32 or INT64)",
                   what, gf_dtype_kserve_name(dt), (int)dt);
}

int gf_kcheck_act(const char *fn, gf_act act)
{
    if ((int)act < 0 || (int)act >= (int)GF_ACT_COUNT_)
        return gf_kerr(GF_ERR_INVALID, fn, "activation %d is not a gf_act", (int)act);
    return 0;
}

static int check_eps(const char *fn, float eps)
{
    if (!(eps >= 0.0f))
        return gf_kerr(GF_ERR_INVALID, fn, "eps = %g is negative or NaN", (double)eps);
    return 0;
}

int gf_kcheck_count3(const char *fn, int64_t a, int64_t b, int64_t c, int64_t *total)
{
    if (!gf_kmul64(a, b, total) || !gf_kmul64(*total, c, total))
        return gf_kerr(GF_ERR_OVERFLOW, fn, "the element count %lld x %lld x %lld overflows",
                       (long long)a, (long long)b, (long long)c);
    return 0;
}

int gf_kargs_gemm(const char *fn, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *a,
                  gf_dtype adt, int64_t lda, int64_t stride_a, const void *b, gf_dtype bdt,
                  int64_t ldb, int64_t stride_b, const float *c, int64_t ldc, int64_t stride_c,
                  int64_t batch, bool *noop)
{
    NONNEG(fn, m);
    NONNEG(fn, n);
    NONNEG(fn, k);
    NONNEG(fn, batch);
    NONNEG(fn, stride_a);
    NONNEG(fn, stride_b);
    NONNEG(fn, stride_c);
    TRY(gf_kcheck_wdtype(fn, "A", adt));
    TRY(gf_kcheck_wdtype(fn, "B", bdt));
    int64_t acols = ta ? m : k, bcols = tb ? k : n;
    int64_t amin = acols > 1 ? acols : 1, bmin = bcols > 1 ? bcols : 1, cmin = n > 1 ? n : 1;
    if (lda < amin)
        return gf_kerr(GF_ERR_INVALID, fn, "lda = %lld is less than %lld (%s)", (long long)lda,
                       (long long)amin, ta ? "m: A is transposed" : "k");
    if (ldb < bmin)
        return gf_kerr(GF_ERR_INVALID, fn, "ldb = %lld is less than %lld (%s)", (long long)ldb,
                       (long long)bmin, tb ? "k: B is transposed" : "n");
    if (ldc < cmin)
        return gf_kerr(GF_ERR_INVALID, fn, "ldc = %lld is less than n = %lld", (long long)ldc,
                       (long long)n);
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX ||
        ldc > INT_MAX || batch > INT_MAX)
        return gf_kerr(GF_ERR_UNSUPPORTED, fn,
                       "a size or leading dimension exceeds %d (the BLAS int)", INT_MAX);
    int64_t t;
    TRY(gf_kcheck_count3(fn, m, n, batch, &t));
    if (batch > 0 && (!gf_kmul64(batch - 1, stride_a, &t) || !gf_kmul64(batch - 1, stride_b, &t) ||
                      !gf_kmul64(batch - 1, stride_c, &t) || !gf_kmul64(m, ldc, &t) ||
                      !gf_kmul64(ta ? k : m, lda, &t) || !gf_kmul64(tb ? n : k, ldb, &t)))
        return gf_kerr(GF_ERR_OVERFLOW, fn, "matrix extents overflow");
    *noop = m == 0 || n == 0 || batch == 0;
    if (*noop)
        return 0;
    /* Output matrices must not overlap: the batch may run in parallel. */
    if (batch > 1 && stride_c < (m - 1) * ldc + n)
        return gf_kerr(GF_ERR_INVALID, fn,
                       "stride_c = %lld is less than one output matrix (%lld elements)",
                       (long long)stride_c, (long long)((m - 1) * ldc + n));
    NONNULL(fn, c);
    if (k > 0) {
        NONNULL(fn, a);
        NONNULL(fn, b);
    }
    return 0;
}

int gf_kargs_bias_act(const float *x, int64_t rows, int64_t cols, const void *bias,
                      gf_dtype bias_dtype, gf_act act, bool *noop)
{
    static const char fn[] = "bias_act";
    NONNEG(fn, rows);
    NONNEG(fn, cols);
    TRY(gf_kcheck_act(fn, act));
    if (bias != NULL)
        TRY(gf_kcheck_wdtype(fn, "bias", bias_dtype));
    int64_t total;
    TRY(gf_kcheck_count3(fn, rows, cols, 1, &total));
    *noop = total == 0;
    if (!*noop)
        NONNULL(fn, x);
    return 0;
}

int gf_kargs_softmax(const float *y, const float *x, int64_t rows, int64_t cols, bool *noop)
{
    static const char fn[] = "softmax";
    NONNEG(fn, rows);
    NONNEG(fn, cols);
    int64_t total;
    TRY(gf_kcheck_count3(fn, rows, cols, 1, &total));
    *noop = total == 0;
    if (!*noop) {
        NONNULL(fn, y);
        NONNULL(fn, x);
    }
    return 0;
}

int gf_kargs_layernorm(const float *y, const float *x, int64_t rows, int64_t cols,
                       const void *gamma, const void *beta, gf_dtype w_dtype, float eps,
                       bool *noop)
{
    static const char fn[] = "layernorm";
    NONNEG(fn, rows);
    NONNEG(fn, cols);
    if (gamma != NULL || beta != NULL)
        TRY(gf_kcheck_wdtype(fn, "gamma/beta", w_dtype));
    TRY(check_eps(fn, eps));
    int64_t total;
    TRY(gf_kcheck_count3(fn, rows, cols, 1, &total));
    *noop = total == 0;
    if (!*noop) {
        NONNULL(fn, y);
        NONNULL(fn, x);
    }
    return 0;
}

int gf_kargs_batchnorm(const float *y, const float *x, int64_t n, int64_t c, int64_t hw,
                       const void *mean, const void *var, gf_dtype w_dtype, float eps, gf_act act,
                       bool *noop)
{
    static const char fn[] = "batchnorm";
    NONNEG(fn, n);
    NONNEG(fn, c);
    NONNEG(fn, hw);
    TRY(gf_kcheck_wdtype(fn, "mean/var/gamma/beta", w_dtype));
    TRY(gf_kcheck_act(fn, act));
    TRY(check_eps(fn, eps));
    int64_t total;
    TRY(gf_kcheck_count3(fn, n, c, hw, &total));
    *noop = total == 0;
    if (!*noop) {
        NONNULL(fn, y);
        NONNULL(fn, x);
        NONNULL(fn, mean);
        NONNULL(fn, var);
    }
    return 0;
}

int gf_kargs_add(const float *y, const float *a, const float *b, int64_t n, gf_act act,
                 bool *noop)
{
    static const char fn[] = "add";
    NONNEG(fn, n);
    TRY(gf_kcheck_act(fn, act));
    *noop = n == 0;
    if (!*noop) {
        NONNULL(fn, y);
        NONNULL(fn, a);
        NONNULL(fn, b);
    }
    return 0;
}

int gf_kcheck_window(const char *fn, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh,
                     int64_t kw, int64_t sh, int64_t sw, const int64_t pads[4], int64_t dh,
                     int64_t dw, int ceil_mode, int64_t *oh, int64_t *ow)
{
    NONNEG(fn, n);
    NONNEG(fn, c);
    NONNEG(fn, h);
    NONNEG(fn, w);
    for (int i = 0; i < 4; i++)
        if (pads[i] < 0)
            return gf_kerr(GF_ERR_INVALID, fn, "padding %lld is negative", (long long)pads[i]);
    if (kh < 1 || kw < 1)
        return gf_kerr(GF_ERR_INVALID, fn, "window %lldx%lld is empty", (long long)kh,
                       (long long)kw);
    if (sh < 1 || sw < 1)
        return gf_kerr(GF_ERR_INVALID, fn, "stride %lldx%lld must be >= 1", (long long)sh,
                       (long long)sw);
    if (dh < 1 || dw < 1)
        return gf_kerr(GF_ERR_INVALID, fn, "dilation %lldx%lld must be >= 1", (long long)dh,
                       (long long)dw);
    const int64_t lim = (int64_t)1 << 30;
    if (h > lim || w > lim || kh > lim || kw > lim || sh > lim || sw > lim || pads[0] > lim ||
        pads[1] > lim || pads[2] > lim || pads[3] > lim || dh > lim || dw > lim ||
        (dh * (kh - 1)) > lim || (dw * (kw - 1)) > lim)
        return gf_kerr(GF_ERR_INVALID, fn, "a spatial size exceeds 2^30");
    *oh = gf_window_out(h, kh, sh, pads[0], pads[2], dh, ceil_mode);
    *ow = gf_window_out(w, kw, sw, pads[1], pads[3], dw, ceil_mode);
    if (*oh < 0 || *ow < 0)
        return gf_kerr(GF_ERR_INVALID, fn, "window %lldx%lld does not fit the padded input %lldx%lld",
                       (long long)(dh * (kh - 1) + 1), (long long)(dw * (kw - 1) + 1),
                       (long long)(h + pads[0] + pads[2]), (long long)(w + pads[1] + pads[3]));
    int64_t t;
    TRY(gf_kcheck_count3(fn, n, c, h * w, &t));
    TRY(gf_kcheck_count3(fn, n, c, *oh * *ow, &t));
    return 0;
}

void gf_conv2d_params_to_ex(const gf_conv2d_params *p, gf_conv2d_ex_params *ex)
{
    *ex = (gf_conv2d_ex_params){
        .n = p->n, .c = p->c, .h = p->h, .w = p->w, .oc = p->oc, .kh = p->kh, .kw = p->kw,
        .stride_h = p->stride_h, .stride_w = p->stride_w, .pad_t = p->pad_h, .pad_l = p->pad_w,
        .pad_b = p->pad_h, .pad_r = p->pad_w, .dil_h = p->dil_h, .dil_w = p->dil_w,
        .groups = p->groups};
}

void gf_pool2d_params_to_ex(const gf_pool2d_params *p, gf_pool2d_ex_params *ex)
{
    *ex = (gf_pool2d_ex_params){
        .n = p->n, .c = p->c, .h = p->h, .w = p->w, .kh = p->kh, .kw = p->kw,
        .stride_h = p->stride_h, .stride_w = p->stride_w, .pad_t = p->pad_h, .pad_l = p->pad_w,
        .pad_b = p->pad_h, .pad_r = p->pad_w, .dil_h = 1, .dil_w = 1, .ceil_mode = 0,
        .count_include_pad = p->count_include_pad};
}

/* conv2d and conv2d_ex (fn names which). */
static int check_conv(const char *fn, const float *y, const float *x,
                      const gf_conv2d_ex_params *p, const void *w, gf_dtype w_dtype, gf_act act,
                      int64_t *oh, int64_t *ow, bool *noop)
{
    const int64_t pads[4] = {p->pad_t, p->pad_l, p->pad_b, p->pad_r};
    TRY(gf_kcheck_window(fn, p->n, p->c, p->h, p->w, p->kh, p->kw, p->stride_h, p->stride_w,
                         pads, p->dil_h, p->dil_w, 0, oh, ow));
    NONNEG(fn, p->oc);
    if (p->groups < 1 || p->c % p->groups != 0 || p->oc % p->groups != 0)
        return gf_kerr(GF_ERR_INVALID, fn,
                       "groups = %lld must be >= 1 and divide c = %lld and oc = %lld",
                       (long long)p->groups, (long long)p->c, (long long)p->oc);
    TRY(gf_kcheck_wdtype(fn, "weight", w_dtype));
    TRY(gf_kcheck_act(fn, act));
    int64_t ohw = *oh * *ow, t, kk;
    TRY(gf_kcheck_count3(fn, p->n, p->oc, ohw, &t));
    TRY(gf_kcheck_count3(fn, p->c, p->kh * p->kw, ohw, &t)); /* one image's im2col */
    TRY(gf_kcheck_count3(fn, p->oc, p->c / p->groups, p->kh * p->kw, &t));
    kk = p->c / p->groups * p->kh * p->kw;
    if (kk > INT_MAX || ohw > INT_MAX || p->oc > INT_MAX)
        return gf_kerr(GF_ERR_UNSUPPORTED, fn, "a derived gemm size exceeds %d (the BLAS int)",
                       INT_MAX);
    *noop = p->n == 0 || p->oc == 0 || ohw == 0;
    if (!*noop) {
        NONNULL(fn, y);
        if (kk > 0) {
            NONNULL(fn, x);
            NONNULL(fn, w);
        }
    }
    return 0;
}

int gf_kargs_conv2d(const float *y, const float *x, const gf_conv2d_params *p, const void *w,
                    gf_dtype w_dtype, gf_act act, int64_t *oh, int64_t *ow, bool *noop)
{
    static const char fn[] = "conv2d";
    NONNULL(fn, p);
    gf_conv2d_ex_params ex;
    gf_conv2d_params_to_ex(p, &ex);
    return check_conv(fn, y, x, &ex, w, w_dtype, act, oh, ow, noop);
}

int gf_kargs_conv2d_ex(const float *y, const float *x, const gf_conv2d_ex_params *p,
                       const void *w, gf_dtype w_dtype, gf_act act, int64_t *oh, int64_t *ow,
                       bool *noop)
{
    static const char fn[] = "conv2d_ex";
    NONNULL(fn, p);
    return check_conv(fn, y, x, p, w, w_dtype, act, oh, ow, noop);
}

int gf_kargs_pool2d(const char *fn, const float *y, const float *x, const gf_pool2d_params *p,
                    int64_t *oh, int64_t *ow, bool *noop)
{
    NONNULL(fn, p);
    const int64_t pads[4] = {p->pad_h, p->pad_w, p->pad_h, p->pad_w};
    TRY(gf_kcheck_window(fn, p->n, p->c, p->h, p->w, p->kh, p->kw, p->stride_h, p->stride_w,
                         pads, 1, 1, 0, oh, ow));
    if (p->pad_h > p->kh / 2 || p->pad_w > p->kw / 2)
        return gf_kerr(GF_ERR_INVALID, fn, "padding %lldx%lld exceeds half the window %lldx%lld",
                       (long long)p->pad_h, (long long)p->pad_w, (long long)p->kh,
                       (long long)p->kw);
    *noop = p->n == 0 || p->c == 0 || *oh * *ow == 0;
    if (!*noop) {
        NONNULL(fn, y);
        NONNULL(fn, x);
    }
    return 0;
}

int gf_kargs_pool2d_ex(gf_pool_kind kind, const float *y, const float *x,
                       const gf_pool2d_ex_params *p, int64_t *oh, int64_t *ow, bool *noop)
{
    static const char fn[] = "pool2d_ex";
    if ((int)kind < 0 || (int)kind >= (int)GF_POOL_COUNT_)
        return gf_kerr(GF_ERR_INVALID, fn, "kind %d is not a gf_pool_kind", (int)kind);
    NONNULL(fn, p);
    if ((p->ceil_mode != 0 && p->ceil_mode != 1) ||
        (p->count_include_pad != 0 && p->count_include_pad != 1))
        return gf_kerr(GF_ERR_INVALID, fn, "ceil_mode = %d and count_include_pad = %d must be 0 or 1",
                       (int)p->ceil_mode, (int)p->count_include_pad);
    const int64_t pads[4] = {p->pad_t, p->pad_l, p->pad_b, p->pad_r};
    TRY(gf_kcheck_window(fn, p->n, p->c, p->h, p->w, p->kh, p->kw, p->stride_h, p->stride_w,
                         pads, p->dil_h, p->dil_w, p->ceil_mode, oh, ow));
    int64_t span_h = p->dil_h * (p->kh - 1) + 1, span_w = p->dil_w * (p->kw - 1) + 1;
    if (p->pad_t >= span_h || p->pad_b >= span_h || p->pad_l >= span_w || p->pad_r >= span_w)
        return gf_kerr(GF_ERR_INVALID, fn,
                       "pads (%lld, %lld, %lld, %lld) must be below the window %lldx%lld",
                       (long long)p->pad_t, (long long)p->pad_l, (long long)p->pad_b,
                       (long long)p->pad_r, (long long)span_h, (long long)span_w);
    *noop = p->n == 0 || p->c == 0 || *oh * *ow == 0;
    if (!*noop) {
        NONNULL(fn, y);
        NONNULL(fn, x);
    }
    return 0;
}

int gf_kargs_global_avgpool(const float *y, const float *x, int64_t n, int64_t c, int64_t hw,
                            bool *noop)
{
    static const char fn[] = "global_avgpool";
    NONNEG(fn, n);
    NONNEG(fn, c);
    NONNEG(fn, hw);
    int64_t total;
    TRY(gf_kcheck_count3(fn, n, c, hw, &total));
    *noop = total == 0;
    if (!*noop) {
        NONNULL(fn, y);
        NONNULL(fn, x);
    }
    return 0;
}

int gf_kargs_embedding(const float *y, const void *table, gf_dtype w_dtype, int64_t vocab,
                       int64_t dim, const void *ids, gf_dtype id_dtype, int64_t n, bool *noop)
{
    static const char fn[] = "embedding";
    NONNEG(fn, vocab);
    NONNEG(fn, dim);
    NONNEG(fn, n);
    TRY(gf_kcheck_wdtype(fn, "table", w_dtype));
    TRY(gf_kcheck_idtype(fn, "index", id_dtype));
    int64_t t;
    TRY(gf_kcheck_count3(fn, vocab, dim, 1, &t));
    TRY(gf_kcheck_count3(fn, n, dim, 1, &t));
    *noop = n == 0 || dim == 0;
    if (!*noop) {
        NONNULL(fn, y);
        NONNULL(fn, ids);
        NONNULL(fn, table);
    }
    return 0;
}

int gf_kargs_attention(const float *out, const float *q, const float *k, const float *v,
                       int64_t b, int64_t h, int64_t seq, int64_t d, const void *mask,
                       gf_dtype mask_dtype, bool *noop)
{
    static const char fn[] = "attention";
    NONNEG(fn, b);
    NONNEG(fn, h);
    NONNEG(fn, seq);
    NONNEG(fn, d);
    if (mask != NULL)
        TRY(gf_kcheck_idtype(fn, "mask", mask_dtype));
    int64_t t;
    TRY(gf_kcheck_count3(fn, b, h, seq, &t));
    TRY(gf_kcheck_count3(fn, t, d, 1, &t));
    TRY(gf_kcheck_count3(fn, b, h, seq, &t));
    TRY(gf_kcheck_count3(fn, t, seq, 1, &t)); /* the scores */
    if (seq > INT_MAX || d > INT_MAX || b * h > INT_MAX)
        return gf_kerr(GF_ERR_UNSUPPORTED, fn, "seq, d or b*h exceeds %d (the BLAS int)", INT_MAX);
    *noop = b == 0 || h == 0 || seq == 0 || d == 0;
    if (!*noop) {
        NONNULL(fn, out);
        NONNULL(fn, q);
        NONNULL(fn, k);
        NONNULL(fn, v);
    }
    return 0;
}

int gf_kargs_cast(const void *dst, gf_dtype dst_dtype, const void *src, gf_dtype src_dtype,
                  int64_t n, bool *noop)
{
    static const char fn[] = "cast";
    NONNEG(fn, n);
    TRY(gf_kcheck_wdtype(fn, "destination", dst_dtype));
    TRY(gf_kcheck_wdtype(fn, "source", src_dtype));
    int64_t t;
    TRY(gf_kcheck_count3(fn, n, 4, 1, &t));
    *noop = n == 0;
    if (!*noop) {
        NONNULL(fn, dst);
        NONNULL(fn, src);
    }
    return 0;
}

int gf_kargs_permute_0213(const float *y, const float *x, int64_t d0, int64_t d1, int64_t d2,
                          int64_t d3, bool *noop)
{
    static const char fn[] = "permute_0213";
    NONNEG(fn, d0);
    NONNEG(fn, d1);
    NONNEG(fn, d2);
    NONNEG(fn, d3);
    int64_t t;
    TRY(gf_kcheck_count3(fn, d0, d1, d2, &t));
    TRY(gf_kcheck_count3(fn, t, d3, 4, &t));
    *noop = t == 0;
    if (!*noop) {
        NONNULL(fn, y);
        NONNULL(fn, x);
        if (y == x && d1 > 1 && d2 > 1)
            return gf_kerr(GF_ERR_INVALID, fn, "y and x must be different buffers");
    }
    return 0;
}

int gf_kargs_copy2d(const void *dst, int64_t dst_pitch, const void *src, int64_t src_pitch,
                    int64_t width, int64_t rows, bool *noop)
{
    static const char fn[] = "copy2d";
    NONNEG(fn, width);
    NONNEG(fn, rows);
    NONNEG(fn, dst_pitch);
    NONNEG(fn, src_pitch);
    *noop = width == 0 || rows == 0;
    if (*noop)
        return 0;
    if (rows > 1 && (dst_pitch < width || src_pitch < width))
        return gf_kerr(GF_ERR_INVALID, fn,
                       "pitches (dst %lld, src %lld) must be at least the width %lld",
                       (long long)dst_pitch, (long long)src_pitch, (long long)width);
    int64_t t;
    if (!gf_kmul64(rows - 1, dst_pitch > src_pitch ? dst_pitch : src_pitch, &t) ||
        __builtin_add_overflow(t, width, &t))
        return gf_kerr(GF_ERR_OVERFLOW, fn, "the extent overflows");
    NONNULL(fn, dst);
    NONNULL(fn, src);
    return 0;
}
