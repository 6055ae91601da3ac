/* gpufaas — convolution and pooling on the cpu (runtime/backend/cpu).
 *
 * conv2d_ex is im2col + gemm per image and group (OpenBLAS), except where
 * a direct loop is cheaper: a 1x1 unpadded stride-1 convolution reads x as
 * its own im2col, and a depthwise convolution (one input channel per group)
 * runs as shifted multiply-adds over contiguous rows. Bias, residual and
 * activation are applied in one pass per output row while it is in cache.
 * The v1 conv2d, maxpool2d and avgpool2d check their arguments as before
 * and run the same code with the v2 geometry.
 */
#include <math.h>
#include <string.h>

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

/* col[(ci kh + ki) kw + kj][oy ow + ox] = x[ci][iy][ix] (0 outside), for
 * one image of c channels. Only the leading pads place the windows; the
 * trailing ones only decide oh, ow. */
static void im2col(float *col, const float *x, const gf_conv2d_ex_params *p, int64_t oh,
                   int64_t ow)
{
    int64_t ohw = oh * ow;
    for (int64_t ci = 0; ci < p->c; ci++) {
        const float *xc = x + ci * p->h * p->w;
        for (int64_t ki = 0; ki < p->kh; ki++)
            for (int64_t kj = 0; kj < p->kw; kj++) {
                float *cr = col + ((ci * p->kh + ki) * p->kw + kj) * ohw;
                int64_t ix0, lo, hi;
                col_range(p, kj, ow, &ix0, &lo, &hi);
                for (int64_t oy = 0; oy < oh; oy++) {
                    int64_t iy = oy * p->stride_h - p->pad_t + ki * p->dil_h;
                    float *co = cr + oy * ow;
                    if (iy < 0 || iy >= p->h) {
                        memset(co, 0, (size_t)ow * sizeof(float));
                        continue;
                    }
                    const float *xr = xc + iy * p->w;
                    memset(co, 0, (size_t)lo * sizeof(float));
                    if (p->stride_w == 1) {
                        memcpy(co + lo, xr + ix0 + lo, (size_t)(hi - lo) * sizeof(float));
                    } else {
                        int64_t sw = p->stride_w;
                        for (int64_t ox = lo; ox < hi; ox++)
                            co[ox] = xr[ox * sw + ix0];
                    }
                    memset(co + hi, 0, (size_t)(ow - hi) * sizeof(float));
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

/* y = act(y + bias + residual) over one output row of len elements. */
static void epilogue(float *y, int64_t len, const float *bias, const float *res, gf_act act)
{
    if (bias != NULL) {
        float bv = *bias;
        if (res != NULL)
            for (int64_t j = 0; j < len; j++)
                y[j] += bv + res[j];
        else
            for (int64_t j = 0; j < len; j++)
                y[j] += bv;
    } else if (res != NULL) {
        for (int64_t j = 0; j < len; j++)
            y[j] += res[j];
    }
    gf_cpu_act(y, len, act);
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
    size_t wbytes = 0, bbytes = 0, cbytes = 0, total;
    if ((w_dtype != GF_DT_F32 && !gf_cpu_f32_region(p->oc * kk, &wbytes)) ||
        (w_dtype != GF_DT_F32 && bias != NULL && !gf_cpu_f32_region(p->oc, &bbytes)) ||
        (!direct && !depthwise && !gf_cpu_f32_region(p->c * p->kh * p->kw * ohw, &cbytes)) ||
        !gf_size_add(wbytes, bbytes, &total) || !gf_size_add(total, cbytes, &total))
        return gf_kerr(GF_ERR_OVERFLOW, fn, "workspace size overflows");
    char *scr = NULL;
    if (total > 0 && (scr = gf_cpu_scratch(ctx, fn, total)) == NULL)
        return GF_ERR_NOMEM;
    const float *wf = kk > 0 ? gf_cpu_w_f32(w, w_dtype, p->oc * kk, (float *)scr) : NULL;
    const float *bf = gf_cpu_w_f32(bias, w_dtype, p->oc, scr ? (float *)(scr + wbytes) : NULL);
    float *col = scr ? (float *)(scr + wbytes + bbytes) : NULL;
    int64_t xin = p->c * p->h * p->w;
    for (int64_t img = 0; img < p->n; img++) {
        const float *xi = x + img * xin;
        float *yi = y + img * p->oc * ohw;
        const float *ri = res != NULL ? res + img * p->oc * ohw : NULL;
        if (kk == 0) {
            memset(yi, 0, (size_t)(p->oc * ohw) * sizeof(float));
        } else if (depthwise) {
            for (int64_t o = 0; o < p->oc; o++)
                depthwise_plane(yi + o * ohw, xi + (o / ocg) * p->h * p->w, wf + o * kk, p, oh,
                                ow);
        } else {
            const float *cm = xi;
            if (!direct) {
                im2col(col, xi, p, oh, ow);
                cm = col;
            }
            for (int64_t g = 0; g < p->groups; g++)
                gf_cpu_sgemm(0, 0, ocg, ohw, kk, 1.0f, wf + g * ocg * kk, kk,
                             cm + g * kk * ohw, ohw, 0.0f, yi + g * ocg * ohw, ohw);
        }
        for (int64_t o = 0; o < p->oc; o++)
            epilogue(yi + o * ohw, ohw, bf ? bf + o : NULL, ri ? ri + o * ohw : NULL, act);
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

/* ---- pooling ---- */

/* Taps i < k of a window starting at y0 (>= -pad_b) with dilation d that
 * land in [lo, hi): the first and one past the last. */
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

/* Max or average pooling of one plane. */
static void pool_plane(float *y, const float *x, const gf_pool2d_ex_params *p, int64_t oh,
                       int64_t ow, bool is_max)
{
    for (int64_t oy = 0; oy < oh; oy++) {
        int64_t y0 = oy * p->stride_h - p->pad_t, i0, i1, ic0, ic1;
        taps_in(y0, p->kh, p->dil_h, 0, p->h, &i0, &i1);
        taps_in(y0, p->kh, p->dil_h, -p->pad_t, p->h + p->pad_b, &ic0, &ic1);
        for (int64_t ox = 0; ox < ow; ox++) {
            int64_t x0 = ox * p->stride_w - p->pad_l, j0, j1, jc0, jc1;
            taps_in(x0, p->kw, p->dil_w, 0, p->w, &j0, &j1);
            float r;
            if (is_max) {
                r = -INFINITY;
                for (int64_t i = i0; i < i1; i++) {
                    const float *xr = x + (y0 + i * p->dil_h) * p->w;
                    for (int64_t j = j0; j < j1; j++) {
                        float v = xr[x0 + j * p->dil_w];
                        if (v > r || isnan(v)) /* NaN propagates, as in PyTorch */
                            r = v;
                    }
                }
            } else {
                float sum = 0.0f;
                for (int64_t i = i0; i < i1; i++) {
                    const float *xr = x + (y0 + i * p->dil_h) * p->w;
                    for (int64_t j = j0; j < j1; j++)
                        sum += xr[x0 + j * p->dil_w];
                }
                int64_t cnt;
                if (p->count_include_pad) {
                    taps_in(x0, p->kw, p->dil_w, -p->pad_l, p->w + p->pad_r, &jc0, &jc1);
                    cnt = (ic1 - ic0) * (jc1 - jc0);
                } else {
                    cnt = (i1 - i0) * (j1 - j0);
                }
                r = cnt > 0 ? sum / (float)cnt : NAN;
            }
            y[oy * ow + ox] = r;
        }
    }
}

static void pool_run(float *y, const float *x, const gf_pool2d_ex_params *p, int64_t oh,
                     int64_t ow, bool is_max)
{
    int64_t planes = p->n * p->c;
    for (int64_t i = 0; i < planes; i++)
        pool_plane(y + i * oh * ow, x + i * p->h * p->w, p, oh, ow, is_max);
}

int gf_cpu_pool2d_ex(void *vctx, gf_stream *s, gf_pool_kind kind, float *y, const float *x,
                     const gf_pool2d_ex_params *p)
{
    (void)vctx;
    (void)s;
    int64_t oh = 0, ow = 0;
    bool noop;
    int rc = gf_kargs_pool2d_ex(kind, y, x, p, &oh, &ow, &noop);
    if (rc != 0 || noop)
        return rc;
    pool_run(y, x, p, oh, ow, kind == GF_POOL_MAX);
    return 0;
}

static int pool_v1(const char *fn, float *y, const float *x, const gf_pool2d_params *p,
                   bool is_max)
{
    int64_t oh = 0, ow = 0;
    bool noop;
    int rc = gf_kargs_pool2d(fn, y, x, p, &oh, &ow, &noop);
    if (rc != 0 || noop)
        return rc;
    gf_pool2d_ex_params ex;
    gf_pool2d_params_to_ex(p, &ex);
    pool_run(y, x, &ex, oh, ow, is_max);
    return 0;
}

int gf_cpu_maxpool2d(void *vctx, gf_stream *s, float *y, const float *x,
                     const gf_pool2d_params *p)
{
    (void)vctx;
    (void)s;
    return pool_v1("maxpool2d", y, x, p, true);
}

int gf_cpu_avgpool2d(void *vctx, gf_stream *s, float *y, const float *x,
                     const gf_pool2d_params *p)
{
    (void)vctx;
    (void)s;
    return pool_v1("avgpool2d", y, x, p, false);
}
