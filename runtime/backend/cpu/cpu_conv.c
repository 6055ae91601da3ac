/* gpufaas — convolution and pooling on the cpu (runtime/backend/cpu).
 *
 * conv2d_ex runs windows larger than 1x1 on oneDNN's direct convolution
 * where it is built in (cpu_dnnl.h), and otherwise as im2col + gemm per
 * image and group, the gemm through oneDNN's matmul with bias, residual and
 * activation fused where it has one, else OpenBLAS and an epilogue pass per
 * output row while it is in cache. A 1x1 unpadded stride-1 convolution
 * reads x as its own im2col (all images in one batched matmul), and a
 * depthwise convolution (one input channel per group) runs as shifted
 * multiply-adds over contiguous rows. The v1 conv2d, maxpool2d and
 * avgpool2d check their arguments as before and run the same code with the
 * v2 geometry.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_dnnl.h"
#include "backend/cpu/cpu_internal.h"
#include "backend/kernel_args.h"
#include "core/dtype.h"
#include "core/tensor.h"

/* ---- convolution ---- */

/* For kernel column kj: ix0, the input column of output column 0, and the
 * output columns [*lo, *hi) whose input column ox sw + ix0 lies in [0, w). */
static void col_range(const gf_conv2d_ex_params *p, int64_t kj, int64_t ow, int64_t *ix0,
                      int64_t *lo, int64_t *hi)
{
    int64_t i0 = kj * p->dil_w - p->pad_l;
    int64_t l = i0 < 0 ? (-i0 + p->stride_w - 1) / p->stride_w : 0;
    int64_t h = p->w - i0 <= 0 ? 0 : (p->w - i0 + p->stride_w - 1) / p->stride_w;
    l = l > ow ? ow : l;
    *hi = h > ow ? ow : (h < l ? l : h);
    *lo = l;
    *ix0 = i0;
}

/* Columns [n0, n0 + nn) of one image's im2col: col[((ci kh + ki) kw +
 * kj) ldcol + n - n0] = x[ci][iy][ix] (0 outside) for output position n =
 * oy ow + ox, c channels. Only the leading pads place the windows; the trailing
 * ones only decide oh, ow. */
static void im2col(float *col, int64_t ldcol, const float *x, const gf_conv2d_ex_params *p,
                   int64_t ow, int64_t n0, int64_t nn)
{
    int64_t sw = p->stride_w;
    for (int64_t ci = 0; ci < p->c; ci++) {
        const float *xc = x + ci * p->h * p->w;
        for (int64_t ki = 0; ki < p->kh; ki++)
            for (int64_t kj = 0; kj < p->kw; kj++) {
                float *cr = col + ((ci * p->kh + ki) * p->kw + kj) * ldcol;
                int64_t ix0, lo, hi;
                col_range(p, kj, ow, &ix0, &lo, &hi);
                for (int64_t j = 0; j < nn;) {
                    /* the part [ox, ox + len) of output row oy in the range */
                    int64_t oy = (n0 + j) / ow, ox = (n0 + j) % ow;
                    int64_t len = ow - ox < nn - j ? ow - ox : nn - j;
                    int64_t iy = oy * p->stride_h - p->pad_t + ki * p->dil_h;
                    float *co = cr + j - ox; /* co[ox'] for ox' in [ox, ox + len) */
                    j += len;
                    if (iy < 0 || iy >= p->h) {
                        memset(co + ox, 0, (size_t)len * sizeof(float));
                        continue;
                    }
                    const float *xr = xc + iy * p->w;
                    int64_t a = lo > ox ? lo : ox, e = hi < ox + len ? hi : ox + len;
                    if (e < a)
                        e = a;
                    memset(co + ox, 0, (size_t)(a - ox) * sizeof(float));
                    if (sw == 1)
                        memcpy(co + a, xr + ix0 + a, (size_t)(e - a) * sizeof(float));
                    else
                        for (int64_t o = a; o < e; o++)
                            co[o] = xr[o * sw + ix0];
                    memset(co + e, 0, (size_t)(ox + len - e) * sizeof(float));
                }
            }
    }
}

/* Depthwise: y[o] (one plane of oh x ow) = sum over taps of w[o, ki, kj] x
 * the input plane shifted, for an input plane xc. */
static void depthwise_plane(float *yo, const float *xc, const float *wo,
                            const gf_conv2d_ex_params *p, int64_t oh, int64_t ow)
{
    memset(yo, 0, (size_t)(oh * ow) * sizeof(float));
    for (int64_t ki = 0; ki < p->kh; ki++)
        for (int64_t kj = 0; kj < p->kw; kj++) {
            float wv = wo[ki * p->kw + kj];
            int64_t ix0, lo, hi;
            col_range(p, kj, ow, &ix0, &lo, &hi);
            for (int64_t oy = 0; oy < oh; oy++) {
                int64_t iy = oy * p->stride_h - p->pad_t + ki * p->dil_h;
                if (iy < 0 || iy >= p->h)
                    continue;
                float *yr = yo + oy * ow;
                if (p->stride_w == 1) {
                    const float *xr = xc + iy * p->w + ix0 + lo; /* ix0 + lo >= 0 */
                    float *yl = yr + lo;
                    for (int64_t j = 0; j < hi - lo; j++)
                        yl[j] += wv * xr[j];
                } else {
                    const float *xr = xc + iy * p->w;
                    int64_t sw = p->stride_w;
                    for (int64_t ox = lo; ox < hi; ox++)
                        yr[ox] += wv * xr[ox * sw + ix0];
                }
            }
        }
}

/* y = act(s + bias + residual) over one output row of len elements (s is
 * the gemm's output: y itself, or a batched gemm's scratch), in one pass
 * for ReLU (the common case) and identity. */
static void epilogue(float *y, const float *s, int64_t len, const float *bias, const float *res,
                     gf_act act)
{
    float bv = bias != NULL ? *bias : 0.0f;
    if (act == GF_ACT_RELU || act == GF_ACT_IDENTITY) {
        bool relu = act == GF_ACT_RELU;
        if (res != NULL) {
            if (relu)
                for (int64_t j = 0; j < len; j++) {
                    float v = s[j] + bv + res[j];
                    y[j] = v > 0.0f ? v : 0.0f;
                }
            else
                for (int64_t j = 0; j < len; j++)
                    y[j] = s[j] + bv + res[j];
        } else if (relu) {
            for (int64_t j = 0; j < len; j++) {
                float v = s[j] + bv;
                y[j] = v > 0.0f ? v : 0.0f;
            }
        } else if (bias != NULL || y != s) {
            for (int64_t j = 0; j < len; j++)
                y[j] = s[j] + bv;
        }
        return;
    }
    for (int64_t j = 0; j < len; j++)
        y[j] = s[j] + bv + (res != NULL ? res[j] : 0.0f);
    gf_cpu_act(y, len, act);
}

/* C[m, n] = act(A[m, k] B[k, n] + bias[m] + R[m, n]), row-major with
 * leading dimensions lda, ldb, ldc (R has C's; bias, R NULL when absent),
 * for a convolution: through oneDNN's matmul with the epilogue fused where
 * it has one, else OpenBLAS and the epilogue row by row. Returns 0 or a
 * gf_status. */
static int conv_gemm(gf_cpu_kctx *ctx, const char *fn, int64_t m, int64_t n, int64_t k,
                     const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                     int64_t ldc, const float *bias, const float *res, gf_act act)
{
    gf_cpu_gemm_shape sh = {1, m, n, k, lda, ldb, ldc, k * ldb, m * ldc};
    gf_cpu_dnnl_conv *g =
        gf_cpu_dnnl_gemm_get(ctx->dnnl, &sh, bias != NULL, res != NULL, act);
    if (g != NULL)
        return gf_cpu_dnnl_gemm_run(ctx->dnnl, g, fn, a, b, c, bias, res);
    gf_cpu_sgemm(0, 0, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
    for (int64_t i = 0; i < m; i++)
        epilogue(c + i * ldc, c + i * ldc, n, bias ? bias + i : NULL, res ? res + i * ldc : NULL,
                 act);
    return 0;
}

/* A 1x1 unpadded stride-1 convolution of all images at once, epilogue
 * fused, through oneDNN's batched matmul (the weights shared); false when
 * it has none for this geometry (nothing done then). */
static bool conv_direct_batched(gf_cpu_kctx *ctx, const char *fn, float *y, const float *x,
                                const gf_conv2d_ex_params *p, int64_t ohw, const float *wf,
                                const float *bf, const float *res, gf_act act, int *rc)
{
    int64_t ocg = p->oc / p->groups, cg = p->c / p->groups;
    gf_cpu_gemm_shape sh = {p->n, ocg, ohw, cg, cg, ohw, ohw, p->c * ohw, p->oc * ohw};
    gf_cpu_dnnl_conv *g =
        gf_cpu_dnnl_gemm_get(ctx->dnnl, &sh, bf != NULL, res != NULL, act);
    if (g == NULL)
        return false;
    *rc = 0;
    for (int64_t gi = 0; gi < p->groups && *rc == 0; gi++)
        *rc = gf_cpu_dnnl_gemm_run(ctx->dnnl, g, fn, wf + gi * ocg * cg, x + gi * cg * ohw,
                                   y + gi * ocg * ohw, bf ? bf + gi * ocg : NULL,
                                   res ? res + gi * ocg * ohw : NULL);
    return true;
}

/* The convolution itself, arguments checked (oh, ow from the check). */
static int conv_run(gf_cpu_kctx *ctx, const char *fn, float *y, const float *x,
                    const gf_conv2d_ex_params *p, int64_t oh, int64_t ow, const void *w,
                    const void *bias, gf_dtype w_dtype, const float *res, gf_act act)
{
    int64_t ohw = oh * ow;
    int64_t cg = p->c / p->groups, ocg = p->oc / p->groups;
    int64_t kk = cg * p->kh * p->kw; /* gemm depth per group */
    bool direct = p->kh == 1 && p->kw == 1 && p->stride_h == 1 && p->stride_w == 1 &&
                  p->pad_t == 0 && p->pad_l == 0 && p->pad_b == 0 &&
                  p->pad_r == 0; /* x is its own im2col */
    bool depthwise = cg == 1 && p->groups > 1;
    /* oneDNN's direct convolution where it is built in (cpu_dnnl.h) and pays
     * for its reorders (activations to NHWC and back, the weights to its
     * layout, every call): measured on resnet's layers, for windows larger
     * than 1x1 (2-3x faster than im2col + gemm, reorders included, down to
     * 7x7 images); a 1x1 convolution is a plain gemm (conv_gemm). Except
     * where the weights outweigh the im2col matrix several times over
     * (weights oc cg kh kw, im2col c kh kw n ohw: at least 4 output channels
     * per group and output position, as resnet50's 7x7 stage at batch 1,
     * where reordering 9 MiB of weights every call is most of the layer):
     * there im2col + oneDNN's matmul, which reads the weights where they
     * are, was 10-30% faster. (Depthwise weights never outweigh.) */
    size_t dbytes = 0;
    bool use_dnnl = kk > 0 && p->kh * p->kw > 1 && p->oc < 4 * p->groups * p->n * ohw;
    gf_cpu_dnnl_conv *dc =
        use_dnnl ? gf_cpu_dnnl_conv_get(ctx->dnnl, p, bias != NULL, res != NULL, act, &dbytes)
                 : NULL;
    if (dc != NULL) {
        size_t wb = 0, bb = 0, tot;
        if ((w_dtype != GF_DT_F32 && !gf_cpu_f32_region(p->oc * kk, &wb)) ||
            (w_dtype != GF_DT_F32 && bias != NULL && !gf_cpu_f32_region(p->oc, &bb)) ||
            !gf_size_add(wb, bb, &tot) || !gf_size_add(tot, dbytes, &tot))
            return gf_kerr(GF_ERR_OVERFLOW, fn, "workspace size overflows");
        char *scr = gf_cpu_scratch(ctx, fn, tot);
        if (scr == NULL)
            return GF_ERR_NOMEM;
        const float *wf = gf_cpu_w_f32(w, w_dtype, p->oc * kk, (float *)scr);
        const float *bf = gf_cpu_w_f32(bias, w_dtype, p->oc, (float *)(scr + wb));
        return gf_cpu_dnnl_conv_run(ctx->dnnl, dc, fn, y, x, wf, bf, res, scr + wb + bb);
    }
    if (direct && p->n > 1 && kk > 0 && ctx->dnnl != NULL) {
        size_t wb = 0, bb = 0, tot;
        if ((w_dtype != GF_DT_F32 && !gf_cpu_f32_region(p->oc * kk, &wb)) ||
            (w_dtype != GF_DT_F32 && bias != NULL && !gf_cpu_f32_region(p->oc, &bb)) ||
            !gf_size_add(wb, bb, &tot))
            return gf_kerr(GF_ERR_OVERFLOW, fn, "workspace size overflows");
        char *scr = tot > 0 ? gf_cpu_scratch(ctx, fn, tot) : NULL;
        if (tot > 0 && scr == NULL)
            return GF_ERR_NOMEM;
        const float *wf = gf_cpu_w_f32(w, w_dtype, p->oc * kk, (float *)scr);
        const float *bf = gf_cpu_w_f32(bias, w_dtype, p->oc, scr ? (float *)(scr + wb) : NULL);
        int rc = 0;
        if (conv_direct_batched(ctx, fn, y, x, p, ohw, wf, bf, res, act, &rc))
            return rc;
    }
    int64_t krows = p->c * p->kh * p->kw;
    /* Small images of a batch go through one gemm of nb images side by
     * side (B is [krows, nb ohw], C [oc, nb ohw] in scratch, scattered by
     * the epilogue), so the weights are packed once and the gemm is wide
     * enough. Otherwise per image, im2col in chunks of columns of about
     * 1 MiB, which stay in L2 until the gemm reads them. */
    int64_t nb = 1, nn = ohw;
    bool batched = p->n > 1 && ohw < 1024 && !depthwise && kk > 0;
    if (batched) {
        nb = 4096 / ohw;
        nb = nb < 2 ? 2 : (nb > p->n ? p->n : nb);
    } else if (!direct && !depthwise && krows > 0) {
        nn = ((int64_t)1 << 18) / krows;
        nn = nn < 512 ? 512 : (nn + 15) / 16 * 16; /* narrower gemms lose more */
        nn = nn > ohw ? ohw : nn;
    }
    size_t wbytes = 0, bbytes = 0, cbytes = 0, obytes = 0, total;
    if ((w_dtype != GF_DT_F32 && !gf_cpu_f32_region(p->oc * kk, &wbytes)) ||
        (w_dtype != GF_DT_F32 && bias != NULL && !gf_cpu_f32_region(p->oc, &bbytes)) ||
        ((batched || !direct) && !depthwise && !gf_cpu_f32_region(krows * nb * nn, &cbytes)) ||
        (batched && !gf_cpu_f32_region(p->oc * nb * ohw, &obytes)) ||
        !gf_size_add(wbytes, bbytes, &total) || !gf_size_add(total, cbytes, &total) ||
        !gf_size_add(total, obytes, &total))
        return gf_kerr(GF_ERR_OVERFLOW, fn, "workspace size overflows");
    char *scr = NULL;
    if (total > 0 && (scr = gf_cpu_scratch(ctx, fn, total)) == NULL)
        return GF_ERR_NOMEM;
    const float *wf = kk > 0 ? gf_cpu_w_f32(w, w_dtype, p->oc * kk, (float *)scr) : NULL;
    const float *bf = gf_cpu_w_f32(bias, w_dtype, p->oc, scr ? (float *)(scr + wbytes) : NULL);
    float *col = scr ? (float *)(scr + wbytes + bbytes) : NULL;
    float *out = scr ? (float *)(scr + wbytes + bbytes + cbytes) : NULL;
    int64_t xin = p->c * p->h * p->w, yout = p->oc * ohw;
    int rc;
    if (batched) {
        for (int64_t i0 = 0; i0 < p->n; i0 += nb) {
            int64_t cnt = p->n - i0 < nb ? p->n - i0 : nb, ncol = cnt * ohw;
            for (int64_t i = 0; i < cnt; i++) {
                const float *xi = x + (i0 + i) * xin;
                if (direct)
                    for (int64_t ci = 0; ci < p->c; ci++)
                        memcpy(col + ci * ncol + i * ohw, xi + ci * ohw,
                               (size_t)ohw * sizeof(float));
                else
                    im2col(col + i * ohw, ncol, xi, p, ow, 0, ohw);
            }
            for (int64_t g = 0; g < p->groups; g++)
                if ((rc = conv_gemm(ctx, fn, ocg, ncol, kk, wf + g * ocg * kk, kk,
                                    col + g * kk * ncol, ncol, out + g * ocg * ncol, ncol, NULL,
                                    NULL, GF_ACT_IDENTITY)) != 0)
                    return rc;
            for (int64_t i = 0; i < cnt; i++)
                for (int64_t o = 0; o < p->oc; o++) {
                    int64_t at = (i0 + i) * yout + o * ohw;
                    epilogue(y + at, out + o * ncol + i * ohw, ohw, bf ? bf + o : NULL,
                             res ? res + at : NULL, act);
                }
        }
        return 0;
    }
    for (int64_t img = 0; img < p->n; img++) {
        const float *xi = x + img * xin;
        float *yi = y + img * yout;
        const float *ri = res != NULL ? res + img * yout : NULL;
        if (kk == 0 || depthwise) {
            for (int64_t o = 0; o < p->oc; o++) {
                if (kk == 0)
                    memset(yi + o * ohw, 0, (size_t)ohw * sizeof(float));
                else
                    depthwise_plane(yi + o * ohw, xi + (o / ocg) * p->h * p->w, wf + o * kk, p,
                                    oh, ow);
                epilogue(yi + o * ohw, yi + o * ohw, ohw, bf ? bf + o : NULL,
                         ri ? ri + o * ohw : NULL, act);
            }
            continue;
        }
        /* the gemms apply bias, residual and act (conv_gemm) */
        for (int64_t n0 = 0; n0 < ohw; n0 += nn) {
            int64_t cnt = ohw - n0 < nn ? ohw - n0 : nn;
            const float *b = xi + n0; /* direct: x is its own im2col */
            int64_t ldb = ohw;
            if (!direct) {
                im2col(col, cnt, xi, p, ow, n0, cnt);
                b = col;
                ldb = cnt;
            }
            for (int64_t g = 0; g < p->groups; g++) {
                int64_t at = g * ocg * ohw + n0;
                if ((rc = conv_gemm(ctx, fn, ocg, cnt, kk, wf + g * ocg * kk, kk, b + g * kk * ldb,
                                    ldb, yi + at, ohw, bf ? bf + g * ocg : NULL,
                                    ri ? ri + at : NULL, act)) != 0)
                    return rc;
            }
        }
    }
    return 0;
}

int gf_cpu_conv2d_ex(void *vctx, gf_stream *s, float *y, const float *x,
                     const gf_conv2d_ex_params *p, const void *w, const void *bias,
                     gf_dtype w_dtype, const float *residual, gf_act act)
{
    (void)s;
    int64_t oh = 0, ow = 0;
    bool noop;
    int rc = gf_kargs_conv2d_ex(y, x, p, w, w_dtype, act, &oh, &ow, &noop);
    if (rc != 0 || noop)
        return rc;
    return conv_run(vctx, "conv2d_ex", y, x, p, oh, ow, w, bias, w_dtype, residual, act);
}

int gf_cpu_conv2d(void *vctx, gf_stream *s, float *y, const float *x, const gf_conv2d_params *p,
                  const void *w, const void *bias, gf_dtype w_dtype, gf_act act)
{
    (void)s;
    int64_t oh = 0, ow = 0;
    bool noop;
    int rc = gf_kargs_conv2d(y, x, p, w, w_dtype, act, &oh, &ow, &noop);
    if (rc != 0 || noop)
        return rc;
    gf_conv2d_ex_params ex;
    gf_conv2d_params_to_ex(p, &ex);
    return conv_run(vctx, "conv2d", y, x, &ex, oh, ow, w, bias, w_dtype, NULL, act);
}

/* ---- pooling ----
 *
 * Row by row: for each output row, each window row inside the input and
 * each window column, one pass over the output columns whose tap lies
 * inside the row (col_range's rule), so the inner loop is branch-free and
 * vectorises; the divisors of average pooling are a row count times a
 * per-column count. */

/* Taps i < k of a window starting at y0 with dilation d that land in
 * [lo, hi): the first and one past the last. */
static void taps_in(int64_t y0, int64_t k, int64_t d, int64_t lo, int64_t hi, int64_t *first,
                    int64_t *end)
{
    int64_t f = y0 >= lo ? 0 : (lo - y0 + d - 1) / d;
    int64_t e = y0 >= hi ? 0 : (hi - y0 + d - 1) / d;
    if (e > k)
        e = k;
    if (f > e)
        f = e;
    *first = f;
    *end = e;
}

/* Output columns [*lo, *hi) whose window column j lands inside the input
 * row, and the input column ix0 of output column 0 for that tap. */
static void pool_cols(const gf_pool2d_ex_params *p, int64_t j, int64_t ow, int64_t *ix0,
                      int64_t *lo, int64_t *hi)
{
    gf_conv2d_ex_params g = {.w = p->w, .stride_w = p->stride_w, .pad_l = p->pad_l,
                             .dil_w = p->dil_w};
    col_range(&g, j, ow, ix0, lo, hi);
}

/* One plane; acc is ow floats of scratch, colcnt the per-column window
 * counts of average pooling. */
static void pool_plane(float *y, const float *x, const gf_pool2d_ex_params *p, int64_t oh,
                       int64_t ow, float *acc, const float *colcnt, bool is_max)
{
    int64_t sw = p->stride_w;
    for (int64_t oy = 0; oy < oh; oy++) {
        int64_t y0 = oy * p->stride_h - p->pad_t, i0, i1;
        taps_in(y0, p->kh, p->dil_h, 0, p->h, &i0, &i1);
        for (int64_t ox = 0; ox < ow; ox++)
            acc[ox] = is_max ? -INFINITY : 0.0f;
        for (int64_t i = i0; i < i1; i++) {
            const float *xr = x + (y0 + i * p->dil_h) * p->w;
            for (int64_t j = 0; j < p->kw; j++) {
                int64_t ix0, lo, hi;
                pool_cols(p, j, ow, &ix0, &lo, &hi);
                if (is_max) {
                    for (int64_t ox = lo; ox < hi; ox++) {
                        float v = xr[ox * sw + ix0];
                        /* NaN propagates, as in PyTorch */
                        acc[ox] = (v > acc[ox] || v != v) ? v : acc[ox];
                    }
                } else {
                    for (int64_t ox = lo; ox < hi; ox++)
                        acc[ox] += xr[ox * sw + ix0];
                }
            }
        }
        float *yr = y + oy * ow;
        if (is_max) {
            memcpy(yr, acc, (size_t)ow * sizeof(float));
            continue;
        }
        int64_t r0, r1;
        if (p->count_include_pad)
            taps_in(y0, p->kh, p->dil_h, -p->pad_t, p->h + p->pad_b, &r0, &r1);
        else
            r0 = i0, r1 = i1;
        float rows = (float)(r1 - r0);
        for (int64_t ox = 0; ox < ow; ox++) {
            float cnt = rows * colcnt[ox];
            yr[ox] = cnt > 0.0f ? acc[ox] / cnt : NAN;
        }
    }
}

static int pool_run(gf_cpu_kctx *ctx, const char *fn, float *y, const float *x,
                    const gf_pool2d_ex_params *p, int64_t oh, int64_t ow, bool is_max)
{
    float *acc = gf_cpu_scratch(ctx, fn, 2 * (size_t)ow * sizeof(float));
    if (acc == NULL)
        return GF_ERR_NOMEM;
    float *colcnt = acc + ow;
    for (int64_t ox = 0; ox < ow; ox++) {
        int64_t x0 = ox * p->stride_w - p->pad_l, j0, j1;
        if (p->count_include_pad)
            taps_in(x0, p->kw, p->dil_w, -p->pad_l, p->w + p->pad_r, &j0, &j1);
        else
            taps_in(x0, p->kw, p->dil_w, 0, p->w, &j0, &j1);
        colcnt[ox] = (float)(j1 - j0);
    }
    int64_t planes = p->n * p->c;
    for (int64_t i = 0; i < planes; i++)
        pool_plane(y + i * oh * ow, x + i * p->h * p->w, p, oh, ow, acc, colcnt, is_max);
    return 0;
}

int gf_cpu_pool2d_ex(void *vctx, gf_stream *s, gf_pool_kind kind, float *y, const float *x,
                     const gf_pool2d_ex_params *p)
{
    (void)s;
    int64_t oh = 0, ow = 0;
    bool noop;
    int rc = gf_kargs_pool2d_ex(kind, y, x, p, &oh, &ow, &noop);
    if (rc != 0 || noop)
        return rc;
    return pool_run(vctx, "pool2d_ex", y, x, p, oh, ow, kind == GF_POOL_MAX);
}

static int pool_v1(gf_cpu_kctx *ctx, const char *fn, float *y, const float *x,
                   const gf_pool2d_params *p, bool is_max)
{
    int64_t oh = 0, ow = 0;
    bool noop;
    int rc = gf_kargs_pool2d(fn, y, x, p, &oh, &ow, &noop);
    if (rc != 0 || noop)
        return rc;
    gf_pool2d_ex_params ex;
    gf_pool2d_params_to_ex(p, &ex);
    return pool_run(ctx, fn, y, x, &ex, oh, ow, is_max);
}

int gf_cpu_maxpool2d(void *vctx, gf_stream *s, float *y, const float *x,
                     const gf_pool2d_params *p)
{
    (void)s;
    return pool_v1(vctx, "maxpool2d", y, x, p, true);
}

int gf_cpu_avgpool2d(void *vctx, gf_stream *s, float *y, const float *x,
                     const gf_pool2d_params *p)
{
    (void)s;
    return pool_v1(vctx, "avgpool2d", y, x, p, false);
}

/* ---- packed weights (version 3) ---- */

int64_t gf_cpu_conv2d_pack_size(void *vctx, const gf_conv2d_ex_params *p)
{
    gf_cpu_kctx *ctx = vctx;
    int64_t oh = 0, ow = 0;
    bool noop;
    /* GF_CPU_PACK=0: no packed forms (how a benchmark compares) */
    const char *env = getenv("GF_CPU_PACK");
    if (env != NULL && strcmp(env, "0") == 0)
        return 0;
    /* a geometry conv2d_ex refuses has no packed form */
    if (p == NULL || gf_kargs_conv2d_ex((float *)1, (const float *)1, p, (const void *)1,
                                        GF_DT_F32, GF_ACT_IDENTITY, &oh, &ow, &noop) != 0 ||
        noop)
        return 0;
    return gf_cpu_dnnl_pack_size(ctx->dnnl, p);
}

int gf_cpu_conv2d_pack(void *vctx, void *packed, const gf_conv2d_ex_params *p, const float *w)
{
    gf_cpu_kctx *ctx = vctx;
    if (packed == NULL || w == NULL || gf_cpu_conv2d_pack_size(vctx, p) == 0)
        return gf_kerr(GF_ERR_INVALID, "conv2d_pack", "NULL buffer, or no packed form for this "
                       "convolution (conv2d_pack_size is 0)");
    return gf_cpu_dnnl_pack(ctx->dnnl, "conv2d_pack", packed, p, w);
}

/* [n, c, hw] <-> [n, hw, c]: to_nhwc, or back. */
static void nhwc_swap(float *dst, const float *src, int64_t n, int64_t c, int64_t hw, bool to_nhwc)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t ci = 0; ci < c; ci++)
            for (int64_t j = 0; j < hw; j++) {
                int64_t a = (i * c + ci) * hw + j, b = (i * hw + j) * c + ci;
                if (to_nhwc)
                    dst[b] = src[a];
                else
                    dst[a] = src[b];
            }
}

/* What oneDNN cannot run with packed weights (an activation it does not
 * fuse): unpacked, NCHW, through conv_run. */
static int packed_fallback(gf_cpu_kctx *ctx, const char *fn, float *y, const float *x,
                           const gf_conv2d_ex_params *p, int64_t oh, int64_t ow,
                           const void *packed, const float *bias, const float *res, gf_act act,
                           uint32_t layout)
{
    int64_t nw = p->oc * (p->c / p->groups) * p->kh * p->kw, nx = p->n * p->c * p->h * p->w,
            ny = p->n * p->oc * oh * ow;
    float *w = malloc((size_t)(nw ? nw : 1) * sizeof *w);
    float *xt = (layout & GF_CONV_X_NHWC) ? malloc((size_t)(nx ? nx : 1) * sizeof *xt) : NULL;
    float *yt = (layout & GF_CONV_Y_NHWC) ? malloc((size_t)(ny ? ny : 1) * sizeof *yt) : NULL;
    float *rt = res != NULL && (layout & GF_CONV_R_NHWC)
                    ? malloc((size_t)(ny ? ny : 1) * sizeof *rt)
                    : NULL;
    int rc;
    if (w == NULL || ((layout & GF_CONV_X_NHWC) && xt == NULL) ||
        ((layout & GF_CONV_Y_NHWC) && yt == NULL) ||
        (res != NULL && (layout & GF_CONV_R_NHWC) && rt == NULL)) {
        rc = gf_kerr(GF_ERR_NOMEM, fn, "out of memory unpacking weights");
    } else if ((rc = gf_cpu_dnnl_unpack(ctx->dnnl, fn, w, packed, p)) == 0) {
        if (xt != NULL)
            nhwc_swap(xt, x, p->n, p->c, p->h * p->w, false);
        if (rt != NULL)
            nhwc_swap(rt, res, p->n, p->oc, oh * ow, false);
        rc = conv_run(ctx, fn, yt ? yt : y, xt ? xt : x, p, oh, ow, w, bias, GF_DT_F32,
                      rt ? rt : res, act);
        if (rc == 0 && yt != NULL)
            nhwc_swap(y, yt, p->n, p->oc, oh * ow, true);
    }
    free(w), free(xt), free(yt), free(rt);
    return rc;
}

int gf_cpu_conv2d_packed(void *vctx, gf_stream *s, float *y, const float *x,
                         const gf_conv2d_ex_params *p, const void *packed, const float *bias,
                         const float *residual, gf_act act, uint32_t layout)
{
    (void)s;
    gf_cpu_kctx *ctx = vctx;
    const char *fn = "conv2d_packed";
    int64_t oh = 0, ow = 0;
    bool noop;
    int rc = gf_kargs_conv2d_ex(y, x, p, packed, GF_DT_F32, act, &oh, &ow, &noop);
    if (rc != 0 || noop)
        return rc;
    if (layout & ~(uint32_t)(GF_CONV_X_NHWC | GF_CONV_Y_NHWC | GF_CONV_R_NHWC))
        return gf_kerr(GF_ERR_INVALID, fn, "unknown layout bits 0x%x", (unsigned)layout);
    if (!gf_cpu_dnnl_packed_fits(packed, p))
        return gf_kerr(GF_ERR_INVALID, fn, "the weights were not packed (conv2d_pack) for a "
                       "convolution of these channels, kernel and groups");
    size_t dbytes = 0;
    gf_cpu_dnnl_conv *dc =
        gf_cpu_dnnl_conv_get(ctx->dnnl, p, bias != NULL, residual != NULL, act, &dbytes);
    if (dc == NULL)
        return packed_fallback(ctx, fn, y, x, p, oh, ow, packed, bias, residual, act, layout);
    char *scr = gf_cpu_scratch(ctx, fn, dbytes);
    if (scr == NULL)
        return GF_ERR_NOMEM;
    return gf_cpu_dnnl_conv_run_packed(ctx->dnnl, dc, fn, y, x, packed, bias, residual, scr,
                                       layout);
}
