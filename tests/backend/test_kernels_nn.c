/* Tests for the version 2 reductions, softmax over an axis, convolution
 * and pooling (reduce, softmax_axis, conv2d_ex, pool2d_ex) and the version 3
 * packed convolution weights (conv2d_pack, conv2d_packed) on one backend,
 * argv[1] as in kharness.h, against naive double-precision references
 * written here, plus a few of ONNX's own backend-test examples with their
 * published outputs.
 *
 * Tolerances (u = 2^-24) as in test_kernels.c: sums of n terms within
 * 4 (n + 2) u sum|terms|; libm-style functions 1e-5 relative + 1e-6
 * absolute; max, min, argmax and max pooling exact.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kharness.h"

/* ---- reduce ---- */

/* Reference reduction of the n values v[0], v[st], ...: the result and
 * its error bound. */
static double ref_reduce(gf_reduce_op op, const float *v, int64_t n, int64_t st, double *bound)
{
    double s = 0, sa = 0, sq = 0, p = 1, mx = -INFINITY, mn = INFINITY;
    int64_t amax = -1, amin = -1;
    bool nan = false;
    for (int64_t r = 0; r < n; r++) {
        double x = v[r * st];
        s += x;
        sa += fabs(x);
        sq += x * x;
        p *= x;
        if (isnan(x))
            nan = true;
        bool last = op == GF_REDUCE_ARGMAX_LAST || op == GF_REDUCE_ARGMIN_LAST;
        if (amax < 0 || (last ? x >= mx : x > mx)) {
            mx = x;
            amax = r;
        }
        if (amin < 0 || (last ? x <= mn : x < mn)) {
            mn = x;
            amin = r;
        }
    }
    double g = 4.0 * (double)(n + 2) * U32F;
    *bound = 0;
    switch (op) {
    case GF_REDUCE_SUM: *bound = g * sa + 1e-30; return s;
    case GF_REDUCE_MEAN: *bound = g * sa / (double)(n ? n : 1) + 1e-30; return s / (double)n;
    case GF_REDUCE_MAX: return nan ? NAN : mx;
    case GF_REDUCE_MIN: return nan ? NAN : mn;
    case GF_REDUCE_PROD: *bound = g * fabs(p) + 1e-30; return p;
    case GF_REDUCE_SUM_SQUARE: *bound = g * sq + 1e-30; return sq;
    case GF_REDUCE_L1: *bound = g * sa + 1e-30; return sa;
    case GF_REDUCE_L2: *bound = g * sqrt(sq) + 1e-30; return sqrt(sq);
    case GF_REDUCE_LOG_SUM: *bound = g * sa / fabs(s) + 1e-6; return log(s);
    case GF_REDUCE_LOG_SUM_EXP: {
        double e = 0;
        for (int64_t r = 0; r < n; r++)
            e += exp(v[r * st] - mx);
        *bound = g + 4 * U32F * fabs(mx) + 1e-6;
        return n ? mx + log(e) : -INFINITY;
    }
    case GF_REDUCE_ARGMAX: case GF_REDUCE_ARGMAX_LAST: return (double)amax;
    default: return (double)amin;
    }
}

static void reduce_case(gf_reduce_op op, int64_t outer, int64_t rdim, int64_t inner)
{
    bool arg = op >= GF_REDUCE_ARGMAX;
    size_t nx = (size_t)(outer * rdim * inner), ny = (size_t)(outer * inner);
    float *x = fnew(nx);
    frand(x, nx, -2, 2);
    for (size_t i = 0; i < nx; i++) {
        if (arg) /* coarse values, so there are ties */
            x[i] = roundf(x[i] * 2.0f) / 2.0f;
        if (op == GF_REDUCE_PROD || op == GF_REDUCE_LOG_SUM)
            x[i] = 0.75f + fabsf(x[i]) / 4.0f; /* positive, near 1 */
    }
    float *dx = dput(x, nx * 4);
    void *dy = dbuf(ny * 8);
    KOK(K->reduce(K->ctx, S, op, dy, dx, outer, rdim, inner));
    void *got = calloc(ny ? ny : 1, 8);
    dget(got, dy, ny * 8);
    char what[100];
    snprintf(what, sizeof what, "reduce op %d [%" PRId64 ", %" PRId64 ", %" PRId64 "]", (int)op,
             outer, rdim, inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double bound, r = ref_reduce(op, x + o * rdim * inner + i, rdim, inner, &bound);
            size_t at = (size_t)(o * inner + i);
            if (arg) {
                int64_t g = ((int64_t *)got)[at];
                ck_assert_msg(g == (int64_t)r, "%s [%zu]: index %" PRId64 ", expected %g", what, at, g, r);
                continue;
            }
            double g = ((float *)got)[at];
            if (isnan(r) || isinf(r)) {
                ck_assert_msg((isnan(r) && isnan(g)) || g == r, "%s [%zu]: got %g, expected %g",
                              what, at, g, r);
                continue;
            }
            ck_assert_msg(fabs(g - r) <= bound, "%s [%zu]: got %.9g, expected %.9g (bound %.3g)",
                          what, at, g, r, bound);
        }
    free(x), free(got);
    dfree_all();
}

START_TEST(test_reduce)
{
    static const int64_t shapes[][3] = {{1, 1, 1}, {3, 7, 1}, {2, 1000, 1}, {4, 5, 3},
                                        {2, 17, 33}, {1, 3, 1000}, {5, 1, 4}};
    for (int op = 0; op < GF_REDUCE_COUNT_; op++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            reduce_case((gf_reduce_op)op, shapes[si][0], shapes[si][1], shapes[si][2]);
}
END_TEST

START_TEST(test_reduce_empty_and_nan)
{
    /* rdim = 0: the identities of the header */
    static const float want[GF_REDUCE_ARGMAX] = {0, NAN, -INFINITY, INFINITY, 1, 0, 0, 0,
                                                 -INFINITY, -INFINITY};
    float got[6];
    float *dy = dbuf(sizeof got);
    for (int op = 0; op < GF_REDUCE_ARGMAX; op++)
        for (int64_t inner = 1; inner <= 3; inner += 2) {
            KOK(K->reduce(K->ctx, S, (gf_reduce_op)op, dy, NULL, 2, 0, inner));
            dget(got, dy, (size_t)(2 * inner) * 4);
            for (int64_t i = 0; i < 2 * inner; i++)
                ck_assert_msg(isnan(want[op]) ? isnan(got[i]) : got[i] == want[op],
                              "empty reduce op %d inner %" PRId64 ": got %g", op, inner, (double)got[i]);
        }
    KERR(GF_ERR_INVALID, "reduce", K->reduce(K->ctx, S, GF_REDUCE_ARGMAX, dy, NULL, 2, 0, 1));
    /* NaN propagates through max and min and is the extreme for arg ops */
    float x[5] = {1, NAN, 3, NAN, -1};
    float *dx = dput(x, sizeof x);
    int64_t idx[1];
    int64_t *di = dbuf(8);
    KOK(K->reduce(K->ctx, S, GF_REDUCE_MAX, dy, dx, 1, 5, 1));
    dget(got, dy, 4);
    ck_assert(isnan(got[0]));
    KOK(K->reduce(K->ctx, S, GF_REDUCE_MIN, dy, dx, 1, 5, 1));
    dget(got, dy, 4);
    ck_assert(isnan(got[0]));
    static const gf_reduce_op aops[4] = {GF_REDUCE_ARGMAX, GF_REDUCE_ARGMIN, GF_REDUCE_ARGMAX_LAST,
                                         GF_REDUCE_ARGMIN_LAST};
    static const int64_t awant[4] = {1, 1, 3, 3};
    for (int k = 0; k < 4; k++) {
        KOK(K->reduce(K->ctx, S, aops[k], di, dx, 1, 5, 1));
        dget(idx, di, 8);
        ck_assert_msg(idx[0] == awant[k], "arg op %d with NaN: %" PRId64, (int)aops[k], idx[0]);
    }
}
END_TEST

/* ---- softmax_axis ---- */

START_TEST(test_softmax_axis)
{
    static const int64_t shapes[][3] = {{2, 5, 3}, {3, 1000, 1}, {1, 7, 64}, {4, 1, 5}, {2, 33, 2}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int lg = 0; lg < 2; lg++)
            for (int inplace = 0; inplace < 2; inplace++) {
                int64_t outer = shapes[si][0], dim = shapes[si][1], inner = shapes[si][2];
                size_t n = (size_t)(outer * dim * inner);
                float *x = fnew(n), *got = fnew(n);
                frand(x, n, -10, 10);
                for (size_t i = 0; i < n; i++) /* large offsets: a naive exp overflows */
                    x[i] += (i / (size_t)inner) % 3 == 1 ? 0.0f : (i % 2 ? 500.0f : -300.0f);
                float *dx = dput(x, n * 4), *dy = inplace ? dx : dbuf(n * 4);
                KOK(K->softmax_axis(K->ctx, S, dy, dx, outer, dim, inner, lg));
                dget(got, dy, n * 4);
                double *ref = dnew(n), *bound = dnew(n);
                for (int64_t o = 0; o < outer; o++)
                    for (int64_t i = 0; i < inner; i++) {
                        const float *xr = x + o * dim * inner + i;
                        double mx = -INFINITY, sum = 0, amax = 0;
                        for (int64_t r = 0; r < dim; r++) {
                            mx = fmax(mx, xr[r * inner]);
                            amax = fmax(amax, fabs(xr[r * inner]));
                        }
                        for (int64_t r = 0; r < dim; r++)
                            sum += exp(xr[r * inner] - mx);
                        for (int64_t r = 0; r < dim; r++) {
                            size_t at = (size_t)((o * dim + r) * inner + i);
                            double e = xr[r * inner] - mx - log(sum);
                            ref[at] = lg ? e : exp(e);
                            bound[at] = lg ? 4.0 * U32F * (amax + log(sum) + 1.0) + 4.0 * (dim + 4) * U32F
                                           : 4.0 * (dim + 4) * U32F * exp(e) + 1e-7;
                        }
                    }
                char what[100];
                snprintf(what, sizeof what, "softmax_axis [%" PRId64 ", %" PRId64 ", %" PRId64 "] log %d inplace %d",
                         outer, dim, inner, lg, inplace);
                expect_close(what, got, ref, bound, n, 0, 0);
                free(x), free(got), free(ref), free(bound);
                dfree_all();
            }
}
END_TEST

/* ---- conv2d_ex ---- */

/* Random x, w, b, res and room for y of convolution p (output oh x ow), with
 * their element counts. */
static void conv_data(const gf_conv2d_ex_params *p, int64_t oh, int64_t ow, size_t *nx,
                      size_t *nw, size_t *ny, float **x, float **w, float **b, float **res,
                      float **got)
{
    *nx = (size_t)(p->n * p->c * p->h * p->w);
    *nw = (size_t)(p->oc * (p->c / p->groups) * p->kh * p->kw);
    *ny = (size_t)(p->n * p->oc * oh * ow);
    *x = fnew(*nx), *w = fnew(*nw), *b = fnew((size_t)p->oc), *res = fnew(*ny);
    *got = fnew(*ny);
    frand(*x, *nx, -1, 1);
    frand(*w, *nw, -1, 1);
    frand(*b, (size_t)p->oc, -1, 1);
    frand(*res, *ny, -1, 1);
}

static void conv_ex_case(gf_conv2d_ex_params p, gf_dtype wdt, int with_bias, int with_res,
                         gf_act act)
{
    int64_t oh = (p.h + p.pad_t + p.pad_b - p.dil_h * (p.kh - 1) - 1) / p.stride_h + 1;
    int64_t ow = (p.w + p.pad_l + p.pad_r - p.dil_w * (p.kw - 1) - 1) / p.stride_w + 1;
    ck_assert_int_eq(oh, gf_window_out(p.h, p.kh, p.stride_h, p.pad_t, p.pad_b, p.dil_h, 0));
    size_t nx, nw, ny;
    float *x, *w, *b, *res, *got;
    conv_data(&p, oh, ow, &nx, &nw, &ny, &x, &w, &b, &res, &got);
    float *dx = dput(x, nx * 4), *dy = dbuf(ny * 4), *dres = with_res ? dput(res, ny * 4) : NULL;
    void *dw = wput(w, nw, wdt), *db = with_bias ? wput(b, (size_t)p.oc, wdt) : NULL;
    KOK(K->conv2d_ex(K->ctx, S, dy, dx, &p, dw, db, wdt, dres, act));
    dget(got, dy, ny * 4);
    double *ref = dnew(ny), *bound = dnew(ny);
    kh_conv_geom g = {p.n, p.c, p.h, p.w, p.oc, p.kh, p.kw, p.stride_h, p.stride_w, p.pad_t,
                      p.pad_l, p.dil_h, p.dil_w, p.groups, oh, ow};
    ref_conv(&g, x, w, with_bias ? b : NULL, with_res ? res : NULL, act, ref, bound);
    char what[220];
    snprintf(what, sizeof what,
             "conv2d_ex n%" PRId64 " c%" PRId64 " %" PRId64 "x%" PRId64 " oc%" PRId64 " k%" PRId64
             "x%" PRId64 " s%" PRId64 ",%" PRId64 " pads %" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
             " d%" PRId64 ",%" PRId64 " g%" PRId64 " %s bias %d res %d act %d",
             p.n, p.c, p.h, p.w, p.oc, p.kh, p.kw, p.stride_h, p.stride_w, p.pad_t, p.pad_l,
             p.pad_b, p.pad_r, p.dil_h, p.dil_w, p.groups, dtn(wdt), with_bias, with_res, (int)act);
    expect_close(what, got, ref, bound, ny, 0, 0);
    free(x), free(w), free(b), free(res), free(got), free(ref), free(bound);
    dfree_all();
}

START_TEST(test_conv2d_ex)
{
    /* n c h w, oc kh kw, stride, pads t l b r, dilation, groups */
    static const gf_conv2d_ex_params cases[] = {
        {1, 3, 8, 9, 4, 3, 3, 1, 1, 0, 1, 2, 1, 1, 1, 1},    /* asymmetric pads */
        {2, 4, 9, 8, 6, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 1},    /* SAME_UPPER-style stride 2 */
        {2, 3, 1, 20, 5, 1, 5, 1, 1, 0, 2, 0, 1, 1, 2, 1},   /* 1-d, dilated */
        {1, 8, 7, 7, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 8},    /* depthwise */
        {2, 8, 9, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 8},    /* depthwise stride 2 */
        {1, 6, 7, 6, 6, 5, 5, 2, 1, 2, 2, 2, 2, 1, 1, 6},    /* depthwise 5x5 mixed strides */
        {1, 4, 6, 6, 8, 3, 3, 1, 1, 1, 0, 1, 2, 2, 1, 4},    /* channel multiplier 2, dilated */
        {3, 6, 5, 7, 4, 3, 2, 1, 2, 1, 0, 0, 1, 1, 1, 2},    /* grouped */
        {2, 16, 5, 5, 8, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},   /* 1x1: direct */
        {2, 8, 9, 9, 16, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1},   /* 1x1 stride 2 */
        /* one image, or images of >= 1024 outputs: 1x1 gemms with the epilogue fused */
        {1, 16, 5, 5, 8, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},
        {2, 24, 6, 7, 12, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 3},  /* grouped 1x1 */
        {1, 12, 6, 7, 9, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 3},
        {1, 8, 9, 9, 16, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1},
        {2, 8, 33, 32, 20, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},
        {1, 3, 23, 23, 8, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1},  /* resnet's stem, small */
        /* more output channels than 4x the positions: im2col + gemm, fused */
        {1, 16, 3, 3, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
        {1, 8, 6, 6, 48, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},
        {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int d = 0; d < 3; d++)
            conv_ex_case(cases[ci], WDT[d], (int)(ci + (size_t)d) % 2, (int)(ci / 2 + (size_t)d) % 2,
                         (gf_act)((ci + (size_t)d) % 3 == 0 ? GF_ACT_RELU
                                                             : (ci + (size_t)d) % 3 == 1 ? GF_ACT_IDENTITY
                                                                                         : GF_ACT_SILU));
}
END_TEST

/* ---- conv2d_pack / conv2d_packed (version 3) ---- */

/* Weights packed for p0, run for p (same channels, kernel and groups),
 * against the reference; false when the backend has no packed form. */
/* [n, c, hw] as [n, hw, c] (channels last), into a new buffer. */
static float *to_nhwc(const float *x, int64_t n, int64_t c, int64_t hw)
{
    float *y = fnew((size_t)(n * c * hw));
    for (int64_t i = 0; i < n; i++)
        for (int64_t ci = 0; ci < c; ci++)
            for (int64_t j = 0; j < hw; j++)
                y[(i * hw + j) * c + ci] = x[(i * c + ci) * hw + j];
    return y;
}

static bool conv_packed_case(gf_conv2d_ex_params p0, gf_conv2d_ex_params p, int with_bias,
                             int with_res, gf_act act, uint32_t layout)
{
    int64_t bytes = K->conv2d_pack_size(K->ctx, &p0);
    if (bytes == 0)
        return false;
    int64_t oh = gf_window_out(p.h, p.kh, p.stride_h, p.pad_t, p.pad_b, p.dil_h, 0);
    int64_t ow = gf_window_out(p.w, p.kw, p.stride_w, p.pad_l, p.pad_r, p.dil_w, 0);
    size_t nx, nw, ny;
    float *x, *w, *b, *res, *got;
    conv_data(&p, oh, ow, &nx, &nw, &ny, &x, &w, &b, &res, &got);
    void *packed = malloc((size_t)bytes);
    ck_assert_ptr_nonnull(packed);
    KOK(K->conv2d_pack(K->ctx, packed, &p0, w));
    float *xl = (layout & GF_CONV_X_NHWC) ? to_nhwc(x, p.n, p.c, p.h * p.w) : NULL;
    float *rl = (layout & GF_CONV_R_NHWC) ? to_nhwc(res, p.n, p.oc, oh * ow) : NULL;
    float *dx = dput(xl ? xl : x, nx * 4), *dy = dbuf(ny * 4);
    float *dres = with_res ? dput(rl ? rl : res, ny * 4) : NULL;
    float *db = with_bias ? dput(b, (size_t)p.oc * 4) : NULL;
    void *dp = dput(packed, (size_t)bytes);
    KOK(K->conv2d_packed(K->ctx, S, dy, dx, &p, dp, db, dres, act, layout));
    dget(got, dy, ny * 4);
    if (layout & GF_CONV_Y_NHWC) { /* back to NCHW */
        float *t = fnew(ny);
        for (int64_t i = 0; i < p.n; i++)
            for (int64_t o = 0; o < p.oc; o++)
                for (int64_t j = 0; j < oh * ow; j++)
                    t[(i * p.oc + o) * oh * ow + j] = got[(i * oh * ow + j) * p.oc + o];
        memcpy(got, t, ny * 4);
        free(t);
    }
    double *ref = dnew(ny), *bound = dnew(ny);
    kh_conv_geom g = {p.n, p.c, p.h, p.w, p.oc, p.kh, p.kw, p.stride_h, p.stride_w, p.pad_t,
                      p.pad_l, p.dil_h, p.dil_w, p.groups, oh, ow};
    ref_conv(&g, x, w, with_bias ? b : NULL, with_res ? res : NULL, act, ref, bound);
    char what[200];
    snprintf(what, sizeof what, "conv2d_packed n%" PRId64 " c%" PRId64 " %" PRId64 "x%" PRId64
             " oc%" PRId64 " k%" PRId64 " s%" PRId64 " g%" PRId64 " (packed for n%" PRId64 " %"
             PRId64 "x%" PRId64 ") bias %d res %d act %d layout %u", p.n, p.c, p.h, p.w, p.oc,
             p.kh, p.stride_h, p.groups, p0.n, p0.h, p0.w, with_bias, with_res, (int)act,
             (unsigned)layout);
    expect_close(what, got, ref, bound, ny, 0, 0);
    /* weights packed for other channels are refused */
    gf_conv2d_ex_params q = p;
    q.c = p.c * 2;
    q.groups = p.groups;
    float *dq = dbuf((size_t)(q.n * q.c * q.h * q.w) * 4);
    KERR(GF_ERR_INVALID, "conv2d_packed",
         K->conv2d_packed(K->ctx, S, dy, dq, &q, dp, db, NULL, GF_ACT_IDENTITY, 0));
    KERR(GF_ERR_INVALID, "conv2d_packed",
         K->conv2d_packed(K->ctx, S, dy, dx, &p, dp, db, NULL, GF_ACT_IDENTITY, 1u << 5));
    free(x), free(w), free(b), free(res), free(got), free(ref), free(bound), free(packed);
    free(xl), free(rl);
    dfree_all();
    return true;
}

START_TEST(test_conv2d_packed)
{
    if (!GF_KERNELS_HAS(K, conv2d_pack_size) || !GF_KERNELS_HAS(K, conv2d_pack) ||
        !GF_KERNELS_HAS(K, conv2d_packed)) {
        printf("conv2d_packed: this backend has no packed weights\n");
        return;
    }
    /* n c h w, oc kh kw, stride, pads t l b r, dilation, groups */
    static const gf_conv2d_ex_params cases[][2] = {
        /* packed for the geometry it runs */
        {{1, 16, 9, 9, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 16, 9, 9, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
        {{2, 3, 23, 23, 8, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1}, {2, 3, 23, 23, 8, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1}},
        {{1, 64, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 64, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
        {{1, 8, 8, 8, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2}, {1, 8, 8, 8, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2}},
        /* packed at batch 1, run at batch 3, another size, stride and pads */
        {{1, 16, 9, 9, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {3, 16, 12, 10, 32, 3, 3, 2, 2, 0, 1, 1, 0, 1, 1, 1}},
        {{1, 32, 14, 14, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {4, 32, 5, 6, 48, 3, 3, 1, 1, 1, 1, 1, 1, 2, 2, 1}},
        /* 1x1, and 1x1 stride 2 */
        {{1, 64, 7, 7, 32, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1}, {2, 64, 7, 7, 32, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1}},
        {{1, 32, 8, 8, 64, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1}, {1, 32, 8, 8, 64, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1}},
    };
    bool any = false;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int v = 0; v < 3; v++)
            for (uint32_t layout = 0; layout < 8; layout += (ci % 2) ? 3 : 1)
                any = conv_packed_case(cases[ci][0], cases[ci][1], v != 1, v == 2,
                                       v == 0   ? GF_ACT_RELU
                                       : v == 1 ? GF_ACT_IDENTITY
                                                : GF_ACT_SILU,
                                       layout) ||
                      any;
    if (!any)
        printf("conv2d_packed: no packed form on this backend (oneDNN off)\n");
    gf_conv2d_ex_params bad = {1, 3, 4, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2};
    ck_assert_int_eq(K->conv2d_pack_size(K->ctx, &bad), 0);
}
END_TEST

/* ---- pool2d_ex ---- */

static void pool_ex_case(gf_pool_kind kind, gf_pool2d_ex_params p)
{
    int64_t oh = gf_window_out(p.h, p.kh, p.stride_h, p.pad_t, p.pad_b, p.dil_h, p.ceil_mode);
    int64_t ow = gf_window_out(p.w, p.kw, p.stride_w, p.pad_l, p.pad_r, p.dil_w, p.ceil_mode);
    size_t nx = (size_t)(p.n * p.c * p.h * p.w), ny = (size_t)(p.n * p.c * oh * ow);
    float *x = fnew(nx), *got = fnew(ny);
    frand(x, nx, -3, 3);
    float *dx = dput(x, nx * 4), *dy = dbuf(ny * 4);
    KOK(K->pool2d_ex(K->ctx, S, kind, dy, dx, &p));
    dget(got, dy, ny * 4);
    double *ref = dnew(ny);
    for (int64_t pl = 0; pl < p.n * p.c; pl++)
        for (int64_t oy = 0; oy < oh; oy++)
            for (int64_t ox = 0; ox < ow; ox++) {
                double mx = -INFINITY, sum = 0;
                int64_t in = 0, padded = 0;
                for (int64_t i = 0; i < p.kh; i++)
                    for (int64_t j = 0; j < p.kw; j++) {
                        int64_t py = oy * p.stride_h - p.pad_t + i * p.dil_h;
                        int64_t px = ox * p.stride_w - p.pad_l + j * p.dil_w;
                        if (py >= -p.pad_t && py < p.h + p.pad_b && px >= -p.pad_l && px < p.w + p.pad_r)
                            padded++;
                        if (py < 0 || py >= p.h || px < 0 || px >= p.w)
                            continue;
                        double v = x[(pl * p.h + py) * p.w + px];
                        in++;
                        sum += v;
                        mx = v > mx ? v : mx;
                    }
                size_t at = (size_t)((pl * oh + oy) * ow + ox);
                if (kind == GF_POOL_MAX)
                    ref[at] = mx;
                else
                    ref[at] = sum / (double)(p.count_include_pad ? padded : in);
            }
    char what[200];
    snprintf(what, sizeof what,
             "pool2d_ex kind %d %" PRId64 "x%" PRId64 " k%" PRId64 "x%" PRId64 " s%" PRId64 ",%" PRId64
             " pads %" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 " d%" PRId64 ",%" PRId64
             " ceil %d incl %d",
             (int)kind, p.h, p.w, p.kh, p.kw, p.stride_h, p.stride_w, p.pad_t, p.pad_l, p.pad_b,
             p.pad_r, p.dil_h, p.dil_w, p.ceil_mode, p.count_include_pad);
    /* max is exact; average is a sum of at most kh kw terms of size <= 3 */
    expect_close(what, got, ref, NULL, ny, kind == GF_POOL_MAX ? 0 : 4.0 * (double)(p.kh * p.kw + 2) * U32F * 3,
                 kind == GF_POOL_MAX ? 0 : 4 * U32F);
    free(x), free(got), free(ref);
    dfree_all();
}

START_TEST(test_pool2d_ex)
{
    /* n c h w, kh kw, stride, pads t l b r, dilation, ceil, count_include_pad */
    static const gf_pool2d_ex_params cases[] = {
        {2, 3, 9, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0},  /* resnet's maxpool */
        {1, 2, 8, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0},  /* ceil mode */
        {1, 2, 8, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1},  /* ceil + counting the padding */
        {1, 2, 7, 9, 2, 3, 2, 3, 0, 1, 1, 0, 1, 1, 0, 1},  /* asymmetric pads */
        {1, 1, 9, 9, 2, 2, 1, 1, 0, 0, 0, 0, 2, 2, 0, 0},  /* dilated */
        {1, 2, 10, 10, 3, 2, 3, 2, 2, 1, 0, 1, 2, 3, 1, 1}, /* dilated, ceil, padded */
        {2, 3, 5, 6, 5, 6, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0},  /* global */
        {1, 2, 1, 17, 1, 4, 1, 3, 0, 2, 0, 1, 1, 1, 1, 0}, /* 1-d */
        {1, 1, 4, 4, 3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 0, 1},  /* windows mostly padding */
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int k = 0; k < GF_POOL_COUNT_; k++)
            pool_ex_case((gf_pool_kind)k, cases[ci]);
}
END_TEST

/* ONNX's own examples (onnx/backend/test/case/node/{averagepool,maxpool}.py). */
START_TEST(test_pool2d_ex_onnx_examples)
{
    float x[16], got[4];
    for (int i = 0; i < 16; i++)
        x[i] = (float)(i + 1);
    float *dx = dput(x, sizeof x), *dy = dbuf(sizeof got);
    gf_pool2d_ex_params p = {1, 1, 4, 4, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, 0};
    KOK(K->pool2d_ex(K->ctx, S, GF_POOL_AVG, dy, dx, &p)); /* averagepool_2d_ceil */
    dget(got, dy, sizeof got);
    ck_assert(got[0] == 6.0f && got[1] == 7.5f && got[2] == 12.0f && got[3] == 13.5f);
    KOK(K->pool2d_ex(K->ctx, S, GF_POOL_MAX, dy, dx, &p)); /* maxpool_2d_ceil */
    dget(got, dy, sizeof got);
    ck_assert(got[0] == 11.0f && got[1] == 12.0f && got[2] == 15.0f && got[3] == 16.0f);
    /* averagepool_2d_ceil_last_window_starts_on_pad: one output per plane */
    float x3[12] = {0.8580f, 0.0786f, 0.2692f, 0.1537f, 0.8816f, 0.4353f,
                    0.5772f, 0.6623f, 0.9067f, 0.9483f, 0.5970f, 0.7630f};
    float *dx3 = dput(x3, sizeof x3), *dy3 = dbuf(12);
    gf_pool2d_ex_params q = {1, 3, 2, 2, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
    ck_assert_int_eq(gf_window_out(2, 3, 3, 1, 1, 1, 1), 1);
    KOK(K->pool2d_ex(K->ctx, S, GF_POOL_AVG, dy3, dx3, &q));
    float g3[3];
    dget(g3, dy3, sizeof g3);
    ck_assert(fabsf(g3[0] - 0.1511f) < 1e-4f && fabsf(g3[1] - 0.2841f) < 1e-4f &&
              fabsf(g3[2] - 0.3572f) < 1e-4f);
    /* maxpool_2d_ceil_output_size_reduce_by_one */
    ck_assert_int_eq(gf_window_out(2, 1, 2, 0, 0, 1, 1), 1);
    /* maxpool_2d_dilations: 4x4, k2, dilation 2 -> [[11, 12], [15, 16]] */
    gf_pool2d_ex_params r = {1, 1, 4, 4, 2, 2, 1, 1, 0, 0, 0, 0, 2, 2, 0, 0};
    KOK(K->pool2d_ex(K->ctx, S, GF_POOL_MAX, dy, dx, &r));
    dget(got, dy, sizeof got);
    ck_assert(got[0] == 11.0f && got[1] == 12.0f && got[2] == 15.0f && got[3] == 16.0f);
}
END_TEST

/* ---- argument errors and empty calls ---- */

START_TEST(test_bad_arguments_nn)
{
    float *x = dbuf(4096), *y = dbuf(4096);
    KERR(GF_ERR_INVALID, "reduce", K->reduce(K->ctx, S, GF_REDUCE_COUNT_, y, x, 1, 2, 1));
    KERR(GF_ERR_INVALID, "reduce", K->reduce(K->ctx, S, GF_REDUCE_SUM, y, x, 1, -2, 1));
    KERR(GF_ERR_OVERFLOW, "reduce", K->reduce(K->ctx, S, GF_REDUCE_SUM, y, x, INT64_MAX / 2, 4, 1));
    KERR(GF_ERR_INVALID, "softmax_axis", K->softmax_axis(K->ctx, S, y, NULL, 1, 2, 3, 0));
    gf_conv2d_ex_params c = {1, 3, 4, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2}; /* groups 2 vs c 3 */
    KERR(GF_ERR_INVALID, "conv2d_ex", K->conv2d_ex(K->ctx, S, y, x, &c, x, NULL, GF_DT_F32, NULL, 0));
    c.groups = 1;
    c.pad_b = -1;
    KERR(GF_ERR_INVALID, "conv2d_ex", K->conv2d_ex(K->ctx, S, y, x, &c, x, NULL, GF_DT_F32, NULL, 0));
    c.pad_b = 1;
    KERR(GF_ERR_UNSUPPORTED, "conv2d_ex", K->conv2d_ex(K->ctx, S, y, x, &c, x, NULL, GF_DT_I8, NULL, 0));
    KERR(GF_ERR_INVALID, "conv2d_ex", K->conv2d_ex(K->ctx, S, y, x, NULL, x, NULL, GF_DT_F32, NULL, 0));
    gf_pool2d_ex_params p = {1, 1, 4, 4, 3, 3, 1, 1, 3, 0, 0, 0, 1, 1, 0, 0}; /* pad 3 >= window */
    KERR(GF_ERR_INVALID, "pool2d_ex", K->pool2d_ex(K->ctx, S, GF_POOL_MAX, y, x, &p));
    p.pad_t = 0;
    p.ceil_mode = 2;
    KERR(GF_ERR_INVALID, "pool2d_ex", K->pool2d_ex(K->ctx, S, GF_POOL_MAX, y, x, &p));
    p.ceil_mode = 0;
    KERR(GF_ERR_INVALID, "pool2d_ex", K->pool2d_ex(K->ctx, S, GF_POOL_COUNT_, y, x, &p));
    p.kh = 9; /* larger than the padded input */
    KERR(GF_ERR_INVALID, "pool2d_ex", K->pool2d_ex(K->ctx, S, GF_POOL_AVG, y, x, &p));
    KOK(K->reduce(K->ctx, S, GF_REDUCE_SUM, y, x, 2, 2, 2));
}
END_TEST

START_TEST(test_zero_sizes_nn)
{
    gf_conv2d_ex_params c = {0, 3, 4, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    gf_pool2d_ex_params p = {2, 0, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0};
    KOK(K->reduce(K->ctx, S, GF_REDUCE_MAX, NULL, NULL, 0, 5, 3));
    KOK(K->softmax_axis(K->ctx, S, NULL, NULL, 3, 0, 2, 1));
    KOK(K->conv2d_ex(K->ctx, S, NULL, NULL, &c, NULL, NULL, GF_DT_F32, NULL, GF_ACT_RELU));
    KOK(K->pool2d_ex(K->ctx, S, GF_POOL_AVG, NULL, NULL, &p));
}
END_TEST

static void add_tests(TCase *tc)
{
    tcase_add_test(tc, test_reduce);
    tcase_add_test(tc, test_reduce_empty_and_nan);
    tcase_add_test(tc, test_softmax_axis);
    tcase_add_test(tc, test_conv2d_ex);
    tcase_add_test(tc, test_conv2d_packed);
    tcase_add_test(tc, test_pool2d_ex);
    tcase_add_test(tc, test_pool2d_ex_onnx_examples);
    tcase_add_test(tc, test_bad_arguments_nn);
    tcase_add_test(tc, test_zero_sizes_nn);
}

int main(int argc, char **argv)
{
    return kh_main(argc, argv, "kernels_nn", add_tests);
}
