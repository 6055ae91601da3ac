/* Tests for the kernel library (gpufaas/kernels.h) on one backend, named by
 * argv[1] ("cpu" by default, or "cuda:0", which exits 77 without a GPU).
 *
 * Everything goes through the public backend API, so the same checks run on
 * every device: buffers come from gf_dev_alloc, data moves with
 * gf_memcpy_async on the compute stream, kernels are called through
 * gf_backend_kernels(), and gf_stream_sync reports deferred errors. Each
 * result is compared with a reference written here as naive loops in double
 * precision, on shapes that include 1, odd sizes and batch > 1.
 *
 * Tolerances (u = 2^-24, the unit roundoff of FP32):
 *  - Weights given as F16 or BF16 are rounded to that type on the host
 *    before the reference sees them, so reference and kernel multiply the
 *    very same numbers and the tolerance is the same for F32, F16 and BF16:
 *    only the kernel's FP32 arithmetic differs from the reference. (A kernel
 *    that computed in half precision would be off by ~2^-11 relative and
 *    fail; one that misread the encoding would be off by O(1).)
 *  - Dot products of k terms (gemm, conv, attention scores): the classic
 *    bound |fl(sum) - sum| <= k u sum|terms|; we allow 4 (k + 2) u sum|terms|
 *    for blocked/FMA/tensor-core accumulation orders, computed per element.
 *  - libm-style functions (exp, erf, tanh; glibc and CUDA's are within
 *    2 ulp): relative 1e-5 plus absolute 1e-6, the absolute part covering
 *    the cancellation in 1 + erf(x) and 1 + tanh(x) for negative x
 *    (|x| <= 4 here: at most 4 * 2 ulp(1) ~ 5e-7).
 *  - Reductions over n terms in FP32 (softmax sums, norms, averages): n u
 *    relative with the same factor 4.
 *  - Copies, casts, embedding, max pooling and permutes are exact.
 */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kharness.h"

/* ---- references ---- */

/* C = alpha op(A) op(B) + beta C0 (C0 not read when beta == 0); also the
 * error bound 4 (k + 2) u sum|terms| per element. */
static void ref_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha,
                     const float *a, int64_t lda, const float *b, int64_t ldb, double beta,
                     const float *c0, int64_t ldc, double *ref, double *bound)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0, sa = 0;
            for (int64_t p = 0; p < k; p++) {
                double av = ta ? a[p * lda + i] : a[i * lda + p];
                double bv = tb ? b[j * ldb + p] : b[p * ldb + j];
                s += av * bv;
                sa += fabs(av * bv);
            }
            double r = alpha * s, ra = fabs(alpha) * sa;
            if (beta != 0) {
                r += beta * c0[i * ldc + j];
                ra += fabs(beta * c0[i * ldc + j]);
            }
            ref[i * n + j] = r;
            bound[i * n + j] = 4.0 * (double)(k + 2) * U32F * ra + 1e-30;
        }
}

/* ---- gemm ---- */

/* One gemm case: operands padded (leading dimension + pad, padding NaN so
 * a read of it shows), C padded too (the padding must survive). */
static void gemm_case(int ta, int tb, int64_t m, int64_t n, int64_t k, int64_t pad, gf_dtype adt,
                      gf_dtype bdt, float alpha, float beta)
{
    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    int64_t lda = (ac > 0 ? ac : 1) + pad, ldb = (bc > 0 ? bc : 1) + pad, ldc = n + pad;
    size_t na = (size_t)(ar * lda), nb = (size_t)(br * ldb), nc = (size_t)(m * ldc);
    float *a = fnew(na), *b = fnew(nb), *c = fnew(nc), *got = fnew(nc);
    frand(a, na, -1, 1);
    frand(b, nb, -1, 1);
    for (int64_t r = 0; r < ar; r++)
        for (int64_t j = ac; j < lda; j++)
            a[r * lda + j] = NAN;
    for (int64_t r = 0; r < br; r++)
        for (int64_t j = bc; j < ldb; j++)
            b[r * ldb + j] = NAN;
    for (size_t i = 0; i < nc; i++)
        c[i] = beta == 0.0f ? NAN : gf_test_rng_float(&g_rng, -1, 1);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = n; j < ldc; j++)
            c[i * ldc + j] = 42.0f;
    void *da = wput(a, na, adt), *db = wput(b, nb, bdt);
    float *dc = dput(c, nc * sizeof(float));
    KOK(K->gemm(K->ctx, S, ta, tb, m, n, k, alpha, da, adt, lda, db, bdt, ldb, beta, dc, ldc));
    dget(got, dc, nc * sizeof(float));
    double *ref = dnew((size_t)(m * n)), *bound = dnew((size_t)(m * n));
    ref_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ref, bound);
    char what[160];
    snprintf(what, sizeof what, "gemm ta=%d tb=%d m=%" PRId64 " n=%" PRId64 " k=%" PRId64
             " A=%s B=%s beta=%g", ta, tb, m, n, k, dtn(adt), dtn(bdt), (double)beta);
    for (int64_t i = 0; i < m; i++) {
        expect_close(what, got + i * ldc, ref + i * n, bound + i * n, (size_t)n, 0, 0);
        for (int64_t j = n; j < ldc; j++)
            ck_assert_msg(got[i * ldc + j] == 42.0f, "%s: C padding overwritten", what);
    }
    free(a), free(b), free(c), free(got), free(ref), free(bound);
}

START_TEST(test_gemm)
{
    static const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 65}, {1, 127, 300},
                                        {64, 1, 9}, {40, 48, 1}};
    static const gf_dtype pairs[][2] = {{GF_DT_F32, GF_DT_F32}, {GF_DT_F32, GF_DT_F16},
                                        {GF_DT_F32, GF_DT_BF16}, {GF_DT_F16, GF_DT_F16},
                                        {GF_DT_BF16, GF_DT_BF16}, {GF_DT_F16, GF_DT_F32},
                                        {GF_DT_BF16, GF_DT_F16}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (size_t pi = 0; pi < sizeof pairs / sizeof pairs[0]; pi++)
            for (int t = 0; t < 4; t++) {
                float beta = (si + pi + (size_t)t) % 2 ? 0.75f : 0.0f;
                gemm_case(t & 1, t >> 1, shapes[si][0], shapes[si][1], shapes[si][2],
                          (int64_t)((si + (size_t)t) % 3), pairs[pi][0], pairs[pi][1],
                          pi % 2 ? 1.0f : -0.5f, beta);
            }
}
END_TEST

START_TEST(test_gemm_degenerate)
{
    /* k == 0: C = beta C (with beta == 0, NaN in C becomes 0). */
    gemm_case(0, 0, 3, 4, 0, 1, GF_DT_F32, GF_DT_F32, 1.0f, 0.0f);
    gemm_case(1, 1, 3, 4, 0, 0, GF_DT_F16, GF_DT_F32, 1.0f, 0.5f);
    /* alpha == 0 with beta == 0: zeros, operands not needed to be finite. */
    gemm_case(0, 1, 5, 3, 4, 0, GF_DT_F32, GF_DT_BF16, 0.0f, 0.0f);
    /* m == 0 or n == 0: nothing happens, NULL pointers allowed. */
    KOK(K->gemm(K->ctx, S, 0, 0, 0, 5, 5, 1.0f, NULL, GF_DT_F32, 5, NULL, GF_DT_F32, 5, 0.0f, NULL,
                5));
    KOK(K->gemm(K->ctx, S, 0, 0, 5, 0, 5, 1.0f, NULL, GF_DT_F32, 5, NULL, GF_DT_F32, 1, 0.0f, NULL,
                1));
}
END_TEST

static void gemm_batched_case(int ta, int tb, int64_t m, int64_t n, int64_t k, int64_t batch,
                              int bcast_a, gf_dtype adt, gf_dtype bdt, float beta)
{
    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    int64_t lda = ac, ldb = bc + 1, ldc = n;
    int64_t sa = bcast_a ? 0 : ar * lda + 3, sb = br * ldb + 1, sc = m * ldc + 2;
    size_t na = (size_t)((batch - 1) * sa + ar * lda), nb = (size_t)((batch - 1) * sb + br * ldb),
           nc = (size_t)((batch - 1) * sc + m * ldc);
    float *a = fnew(na), *b = fnew(nb), *c = fnew(nc), *got = fnew(nc);
    frand(a, na, -1, 1);
    frand(b, nb, -1, 1);
    frand(c, nc, -1, 1);
    void *da = wput(a, na, adt), *db = wput(b, nb, bdt);
    float *dc = dput(c, nc * sizeof(float));
    KOK(K->gemm_batched(K->ctx, S, ta, tb, m, n, k, 0.5f, da, adt, lda, sa, db, bdt, ldb, sb, beta,
                        dc, ldc, sc, batch));
    dget(got, dc, nc * sizeof(float));
    double *ref = dnew((size_t)(m * n)), *bound = dnew((size_t)(m * n));
    for (int64_t i = 0; i < batch; i++) {
        ref_gemm(ta, tb, m, n, k, 0.5, a + i * sa, lda, b + i * sb, ldb, beta, c + i * sc, ldc,
                 ref, bound);
        char what[160];
        snprintf(what, sizeof what, "gemm_batched ta=%d tb=%d %" PRId64 "x%" PRId64 "x%" PRId64
                 " batch %" PRId64 "/%" PRId64 " A=%s B=%s", ta, tb, m, n, k, i, batch, dtn(adt),
                 dtn(bdt));
        for (int64_t r = 0; r < m; r++)
            expect_close(what, got + i * sc + r * ldc, ref + r * n, bound + r * n, (size_t)n, 0,
                         0);
        /* the gap between output matrices is untouched */
        if (i + 1 < batch)
            for (int64_t g = m * ldc; g < sc; g++)
                ck_assert_msg(got[i * sc + g] == c[i * sc + g], "%s: gap written", what);
    }
    free(a), free(b), free(c), free(got), free(ref), free(bound);
}

START_TEST(test_gemm_batched)
{
    for (int t = 0; t < 4; t++)
        for (int d = 0; d < 3; d++) {
            gemm_batched_case(t & 1, t >> 1, 5, 7, 9, 3, 0, GF_DT_F32, WDT[d], 0.0f);
            gemm_batched_case(t & 1, t >> 1, 1, 1, 1, 1, 0, WDT[d], WDT[d], 1.0f);
            gemm_batched_case(t & 1, t >> 1, 4, 3, 17, 4, 1, WDT[d], GF_DT_F32, 0.5f);
            gemm_batched_case(t & 1, t >> 1, 13, 2, 5, 2, 1, WDT[d], WDT[d], 0.0f);
        }
    KOK(K->gemm_batched(K->ctx, S, 0, 0, 2, 2, 2, 1.0f, NULL, GF_DT_F32, 2, 4, NULL, GF_DT_F32, 2,
                        4, 0.0f, NULL, 2, 4, 0));
}
END_TEST

/* ---- bias + activation, add ---- */

START_TEST(test_bias_act)
{
    static const int64_t shapes[][2] = {{1, 1}, {7, 13}, {4, 1000}, {3, 1}};
    for (size_t si = 0; si < 4; si++)
        for (int act = 0; act < GF_ACT_COUNT_; act++)
            for (int d = -1; d < 3; d++) { /* d == -1: no bias */
                int64_t rows = shapes[si][0], cols = shapes[si][1];
                size_t n = (size_t)(rows * cols);
                float *x = fnew(n), *bias = fnew((size_t)cols), *got = fnew(n);
                frand(x, n, -3, 3);
                frand(bias, (size_t)cols, -1, 1);
                gf_dtype bdt = d < 0 ? GF_DT_F32 : WDT[d];
                void *db = d < 0 ? NULL : wput(bias, (size_t)cols, bdt);
                float *dx = dput(x, n * sizeof(float));
                KOK(K->bias_act(K->ctx, S, dx, rows, cols, db, bdt, (gf_act)act));
                dget(got, dx, n * sizeof(float));
                double *ref = dnew(n);
                for (size_t i = 0; i < n; i++)
                    ref[i] = ref_act((double)x[i] + (d < 0 ? 0.0 : bias[i % (size_t)cols]),
                                     (gf_act)act);
                char what[96];
                snprintf(what, sizeof what, "bias_act %" PRId64 "x%" PRId64 " act %d bias %s",
                         rows, cols, act, d < 0 ? "none" : dtn(bdt));
                expect_close(what, got, ref, NULL, n, 1e-6, 1e-5);
                free(x), free(bias), free(got), free(ref);
            }
}
END_TEST

START_TEST(test_add)
{
    static const int64_t sizes[] = {1, 1001, 4096 + 17};
    for (int si = 0; si < 3; si++)
        for (int act = 0; act < GF_ACT_COUNT_; act++)
            for (int inplace = 0; inplace < 2; inplace++) {
                size_t n = (size_t)sizes[si];
                float *a = fnew(n), *b = fnew(n), *got = fnew(n);
                frand(a, n, -2, 2);
                frand(b, n, -2, 2);
                float *da = dput(a, n * 4), *db = dput(b, n * 4);
                float *dy = inplace ? da : dbuf(n * 4);
                KOK(K->add(K->ctx, S, dy, da, db, (int64_t)n, (gf_act)act));
                dget(got, dy, n * 4);
                double *ref = dnew(n);
                for (size_t i = 0; i < n; i++)
                    ref[i] = ref_act((double)a[i] + b[i], (gf_act)act);
                char what[64];
                snprintf(what, sizeof what, "add n=%zu act %d inplace %d", n, act, inplace);
                expect_close(what, got, ref, NULL, n, 1e-6, 1e-5);
                free(a), free(b), free(got), free(ref);
            }
}
END_TEST

/* ---- softmax, layernorm, batchnorm ---- */

START_TEST(test_softmax)
{
    static const int64_t shapes[][2] = {{1, 1}, {5, 7}, {3, 1000}, {2, 33}, {130, 5}};
    for (size_t si = 0; si < 5; si++)
        for (int lg = 0; lg < 2; lg++)
            for (int inplace = 0; inplace < 2; inplace++) {
                int64_t rows = shapes[si][0], cols = shapes[si][1];
                size_t n = (size_t)(rows * cols);
                float *x = fnew(n), *got = fnew(n);
                frand(x, n, -10, 10);
                /* Large offsets: a naive exp() would overflow. */
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t j = 0; j < cols; j++)
                        x[r * cols + j] += (r % 3 == 1) ? 1000.0f : (r % 3 == 2 ? -500.0f : 0.0f);
                float *dx = dput(x, n * 4), *dy = inplace ? dx : dbuf(n * 4);
                KOK(K->softmax(K->ctx, S, dy, dx, rows, cols, lg));
                dget(got, dy, n * 4);
                double *ref = dnew(n), *bound = dnew(n);
                for (int64_t r = 0; r < rows; r++) {
                    const float *xr = x + r * cols;
                    double mx = xr[0], sum = 0, amax = 0;
                    for (int64_t j = 0; j < cols; j++) {
                        mx = xr[j] > mx ? xr[j] : mx;
                        amax = fabs(xr[j]) > amax ? fabs(xr[j]) : amax;
                    }
                    for (int64_t j = 0; j < cols; j++)
                        sum += exp(xr[j] - mx);
                    for (int64_t j = 0; j < cols; j++) {
                        double e = xr[j] - mx - log(sum);
                        double v = lg ? e : exp(e);
                        ref[r * cols + j] = v;
                        /* sum of cols terms plus exp/log ulps; log-softmax
                         * also rounds max + log(sum) at the inputs' scale. */
                        bound[r * cols + j] =
                            lg ? 4.0 * U32F * (amax + log(sum) + 1.0) + 4.0 * (cols + 4) * U32F
                               : 4.0 * (cols + 4) * U32F * v + 1e-7;
                    }
                }
                char what[80];
                snprintf(what, sizeof what, "softmax %" PRId64 "x%" PRId64 " log %d inplace %d",
                         rows, cols, lg, inplace);
                expect_close(what, got, ref, bound, n, 0, 0);
                free(x), free(got), free(ref), free(bound);
            }
}
END_TEST

START_TEST(test_layernorm)
{
    static const int64_t shapes[][2] = {{1, 1}, {3, 7}, {5, 768}, {2, 2}};
    static const float epss[] = {1e-5f, 1e-12f, 0.1f};
    for (size_t si = 0; si < 4; si++)
        for (int d = -1; d < 3; d++) /* -1: gamma and beta NULL */
            for (int e = 0; e < 3; e++) {
                int64_t rows = shapes[si][0], cols = shapes[si][1];
                size_t n = (size_t)(rows * cols);
                float *x = fnew(n), *g = fnew((size_t)cols), *bt = fnew((size_t)cols),
                      *got = fnew(n);
                frand(x, n, -3, 5);
                if (rows > 1) /* a constant row: variance 0, eps decides */
                    for (int64_t j = 0; j < cols; j++)
                        x[cols + j] = 2.5f;
                frand(g, (size_t)cols, 0.5f, 1.5f);
                frand(bt, (size_t)cols, -1, 1);
                gf_dtype wdt = d < 0 ? GF_DT_F32 : WDT[d];
                void *dg = NULL, *db = NULL;
                if (d >= 0) {
                    dg = wput(g, (size_t)cols, wdt);
                    db = wput(bt, (size_t)cols, wdt);
                }
                float *dx = dput(x, n * 4), *dy = dbuf(n * 4);
                KOK(K->layernorm(K->ctx, S, dy, dx, rows, cols, dg, db, wdt, epss[e]));
                dget(got, dy, n * 4);
                double *ref = dnew(n), *bound = dnew(n);
                for (int64_t r = 0; r < rows; r++) {
                    const float *xr = x + r * cols;
                    double mean = 0, var = 0;
                    for (int64_t j = 0; j < cols; j++)
                        mean += xr[j];
                    mean /= (double)cols;
                    for (int64_t j = 0; j < cols; j++)
                        var += (xr[j] - mean) * (xr[j] - mean);
                    var /= (double)cols;
                    double rstd = 1.0 / sqrt(var + (double)epss[e]);
                    double amax = 0;
                    for (int64_t j = 0; j < cols; j++)
                        amax = fabs(xr[j]) > amax ? fabs(xr[j]) : amax;
                    for (int64_t j = 0; j < cols; j++) {
                        double gv = d < 0 ? 1.0 : g[j], bv = d < 0 ? 0.0 : bt[j];
                        double z = (xr[j] - mean) * rstd;
                        ref[r * cols + j] = z * gv + bv;
                        /* mean and variance are sums of cols terms: the
                         * mean is off by <= cols u max|x|, which z sees
                         * times rstd. A constant row is exact (x - mean
                         * is 0 in any summation order), so y = beta. */
                        bound[r * cols + j] =
                            var == 0 ? 1e-6
                                     : 4.0 * (cols + 8) * U32F *
                                               (fabs(z * gv) + rstd * fabs(gv) * amax + fabs(bv)) +
                                           1e-6;
                    }
                }
                char what[96];
                snprintf(what, sizeof what, "layernorm %" PRId64 "x%" PRId64 " w %s eps %g",
                         rows, cols, d < 0 ? "none" : dtn(wdt), (double)epss[e]);
                expect_close(what, got, ref, bound, n, 0, 0);
                free(x), free(g), free(bt), free(got), free(ref), free(bound);
            }
}
END_TEST

START_TEST(test_batchnorm)
{
    static const int64_t shapes[][3] = {{1, 1, 1}, {2, 3, 5}, {3, 17, 49}, {1, 4, 1}};
    static const gf_act acts[] = {GF_ACT_IDENTITY, GF_ACT_RELU, GF_ACT_SILU};
    for (size_t si = 0; si < 4; si++)
        for (int d = 0; d < 3; d++)
            for (int ai = 0; ai < 3; ai++)
                for (int affine = 0; affine < 2; affine++) {
                    int64_t nn = shapes[si][0], c = shapes[si][1], hw = shapes[si][2];
                    size_t n = (size_t)(nn * c * hw);
                    float *x = fnew(n), *got = fnew(n), *mean = fnew((size_t)c),
                          *var = fnew((size_t)c), *g = fnew((size_t)c), *bt = fnew((size_t)c);
                    frand(x, n, -3, 3);
                    frand(mean, (size_t)c, -1, 1);
                    frand(var, (size_t)c, 0.25f, 2);
                    frand(g, (size_t)c, -1.5f, 1.5f);
                    frand(bt, (size_t)c, -1, 1);
                    void *dm = wput(mean, (size_t)c, WDT[d]), *dv = wput(var, (size_t)c, WDT[d]);
                    void *dg = affine ? wput(g, (size_t)c, WDT[d]) : NULL;
                    void *db = affine ? wput(bt, (size_t)c, WDT[d]) : NULL;
                    float *dx = dput(x, n * 4);
                    KOK(K->batchnorm(K->ctx, S, dx, dx, nn, c, hw, dm, dv, dg, db, WDT[d], 1e-5f,
                                     acts[ai]));
                    dget(got, dx, n * 4);
                    double *ref = dnew(n), *bound = dnew(n);
                    for (size_t i = 0; i < n; i++) {
                        size_t ch = (i / (size_t)hw) % (size_t)c;
                        double gv = affine ? g[ch] : 1.0, bv = affine ? bt[ch] : 0.0;
                        double sc = gv / sqrt((double)var[ch] + 1e-5);
                        double z = (x[i] - (double)mean[ch]) * sc + bv;
                        ref[i] = ref_act(z, acts[ai]);
                        /* folded into x * scale + shift: a few roundings of
                         * terms of size |x sc|, |mean sc|, |beta| */
                        bound[i] = 8.0 * U32F * (fabs(x[i] * sc) + fabs(mean[ch] * sc) + fabs(bv)) *
                                       1.2 +
                                   1e-6 + 1e-5 * fabs(ref[i]);
                    }
                    char what[96];
                    snprintf(what, sizeof what,
                             "batchnorm %" PRId64 "x%" PRId64 "x%" PRId64 " %s act %d affine %d",
                             nn, c, hw, dtn(WDT[d]), (int)acts[ai], affine);
                    expect_close(what, got, ref, bound, n, 0, 0);
                    free(x), free(got), free(mean), free(var), free(g), free(bt), free(ref),
                        free(bound);
                }
}
END_TEST

/* ---- conv2d ---- */

static void conv_case(gf_conv2d_params p, gf_dtype wdt, int with_bias, gf_act act)
{
    int64_t oh = (p.h + 2 * p.pad_h - p.dil_h * (p.kh - 1) - 1) / p.stride_h + 1;
    int64_t ow = (p.w + 2 * p.pad_w - p.dil_w * (p.kw - 1) - 1) / p.stride_w + 1;
    int64_t cg = p.c / p.groups;
    size_t nx = (size_t)(p.n * p.c * p.h * p.w), nw = (size_t)(p.oc * cg * p.kh * p.kw),
           ny = (size_t)(p.n * p.oc * oh * ow);
    float *x = fnew(nx), *w = fnew(nw), *b = fnew((size_t)p.oc), *got = fnew(ny);
    frand(x, nx, -1, 1);
    frand(w, nw, -1, 1);
    frand(b, (size_t)p.oc, -1, 1);
    float *dx = dput(x, nx * 4), *dy = dbuf(ny * 4);
    void *dw = wput(w, nw, wdt), *db = with_bias ? wput(b, (size_t)p.oc, wdt) : NULL;
    KOK(K->conv2d(K->ctx, S, dy, dx, &p, dw, db, wdt, act));
    dget(got, dy, ny * 4);
    double *ref = dnew(ny), *bound = dnew(ny);
    /* the same geometry with both pads of each axis given */
    kh_conv_geom g = {p.n, p.c, p.h, p.w, p.oc, p.kh, p.kw, p.stride_h, p.stride_w, p.pad_h,
                      p.pad_w, p.dil_h, p.dil_w, p.groups, oh, ow};
    ref_conv(&g, x, w, with_bias ? b : NULL, NULL, act, ref, bound);
    char what[200];
    snprintf(what, sizeof what,
             "conv2d n%" PRId64 " c%" PRId64 " %" PRId64 "x%" PRId64 " oc%" PRId64 " k%" PRId64
             "x%" PRId64 " s%" PRId64 ",%" PRId64 " p%" PRId64 ",%" PRId64 " d%" PRId64 ",%" PRId64
             " g%" PRId64 " %s bias %d act %d",
             p.n, p.c, p.h, p.w, p.oc, p.kh, p.kw, p.stride_h, p.stride_w, p.pad_h, p.pad_w,
             p.dil_h, p.dil_w, p.groups, dtn(wdt), with_bias, (int)act);
    expect_close(what, got, ref, bound, ny, 0, 0);
    free(x), free(w), free(b), free(got), free(ref), free(bound);
}

START_TEST(test_conv2d)
{
    /* n c h w, oc kh kw, stride, pad, dilation, groups */
    static const gf_conv2d_params ps[] = {
        {2, 3, 7, 9, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1},     /* 3x3 same */
        {1, 4, 8, 8, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2},     /* stride 2, groups 2 */
        {3, 3, 5, 6, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3},     /* depthwise */
        {1, 2, 9, 7, 3, 3, 3, 1, 1, 2, 2, 2, 2, 1},     /* dilation 2 */
        {2, 5, 4, 3, 7, 1, 1, 1, 1, 0, 0, 1, 1, 1},     /* 1x1: the direct path */
        {2, 6, 7, 7, 4, 1, 1, 2, 2, 0, 0, 1, 1, 2},     /* 1x1 stride 2, groups */
        {1, 3, 15, 13, 5, 7, 7, 2, 2, 3, 3, 1, 1, 1},   /* a ResNet stem, small */
        {2, 2, 5, 8, 3, 1, 3, 1, 2, 0, 1, 1, 1, 1},     /* 1x3 kernel, mixed strides */
        {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1},     /* all ones */
        {1, 1, 3, 3, 2, 3, 3, 1, 1, 0, 0, 1, 1, 1},     /* output 1x1 */
    };
    static const gf_act acts[] = {GF_ACT_IDENTITY, GF_ACT_RELU, GF_ACT_GELU_ERF};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        for (int d = 0; d < 3; d++)
            conv_case(ps[i], WDT[d], (int)((i + (size_t)d) % 2 == 0), acts[(i + (size_t)d) % 3]);
    /* bias present, every activation once */
    for (int act = 0; act < GF_ACT_COUNT_; act++)
        conv_case(ps[0], GF_DT_F32, 1, (gf_act)act);
}
END_TEST

/* ---- pooling ---- */

static void pool_case(gf_pool2d_params p, int is_max)
{
    int64_t oh = (p.h + 2 * p.pad_h - p.kh) / p.stride_h + 1;
    int64_t ow = (p.w + 2 * p.pad_w - p.kw) / p.stride_w + 1;
    size_t nx = (size_t)(p.n * p.c * p.h * p.w), ny = (size_t)(p.n * p.c * oh * ow);
    float *x = fnew(nx), *got = fnew(ny);
    frand(x, nx, -4, 1); /* mostly negative: padding (0) must not win max */
    float *dx = dput(x, nx * 4), *dy = dbuf(ny * 4);
    if (is_max)
        KOK(K->maxpool2d(K->ctx, S, dy, dx, &p));
    else
        KOK(K->avgpool2d(K->ctx, S, dy, dx, &p));
    dget(got, dy, ny * 4);
    double *ref = dnew(ny);
    for (int64_t pl = 0; pl < p.n * p.c; pl++)
        for (int64_t oy = 0; oy < oh; oy++)
            for (int64_t ox = 0; ox < ow; ox++) {
                double mx = -INFINITY, s = 0;
                int64_t cnt = 0;
                for (int64_t ky = 0; ky < p.kh; ky++)
                    for (int64_t kx = 0; kx < p.kw; kx++) {
                        int64_t iy = oy * p.stride_h - p.pad_h + ky,
                                ix = ox * p.stride_w - p.pad_w + kx;
                        if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w)
                            continue;
                        double v = x[(pl * p.h + iy) * p.w + ix];
                        mx = v > mx ? v : mx;
                        s += v;
                        cnt++;
                    }
                ref[(pl * oh + oy) * ow + ox] =
                    is_max ? mx : s / (double)(p.count_include_pad ? p.kh * p.kw : cnt);
            }
    char what[160];
    snprintf(what, sizeof what,
             "%s n%" PRId64 " c%" PRId64 " %" PRId64 "x%" PRId64 " k%" PRId64 "x%" PRId64
             " s%" PRId64 " p%" PRId64 " incl %d",
             is_max ? "maxpool2d" : "avgpool2d", p.n, p.c, p.h, p.w, p.kh, p.kw, p.stride_h,
             p.pad_h, p.count_include_pad);
    /* max: exact; average of kh kw terms: (kh kw + 2) u relative, values <= 4 */
    expect_close(what, got, ref, NULL, ny, is_max ? 0.0 : 4.0 * (double)(p.kh * p.kw + 2) * U32F * 4.0,
                 0);
    free(x), free(got), free(ref);
}

START_TEST(test_pool)
{
    /* n c h w, kh kw, stride, pad, count_include_pad */
    static const gf_pool2d_params ps[] = {
        {2, 3, 9, 9, 3, 3, 2, 2, 1, 1, 1}, /* ResNet's maxpool (odd size) */
        {1, 2, 8, 6, 2, 2, 2, 2, 0, 0, 1},
        {2, 1, 7, 5, 3, 3, 2, 2, 1, 1, 0},
        {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1},
        {3, 2, 5, 7, 3, 2, 1, 2, 1, 1, 1},
        {1, 3, 6, 6, 5, 5, 3, 3, 2, 2, 0},
    };
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        pool_case(ps[i], 1);
        pool_case(ps[i], 0);
        gf_pool2d_params q = ps[i];
        q.count_include_pad = !q.count_include_pad;
        pool_case(q, 0);
    }
}
END_TEST

START_TEST(test_global_avgpool)
{
    static const int64_t shapes[][3] = {{1, 1, 1}, {2, 3, 49}, {3, 5, 3136}, {4, 512, 7}};
    for (int si = 0; si < 4; si++) {
        int64_t nn = shapes[si][0], c = shapes[si][1], hw = shapes[si][2];
        size_t nx = (size_t)(nn * c * hw), ny = (size_t)(nn * c);
        float *x = fnew(nx), *got = fnew(ny);
        frand(x, nx, -1, 2);
        float *dx = dput(x, nx * 4), *dy = dbuf(ny * 4);
        KOK(K->global_avgpool(K->ctx, S, dy, dx, nn, c, hw));
        dget(got, dy, ny * 4);
        double *ref = dnew(ny);
        for (size_t i = 0; i < ny; i++) {
            double s = 0;
            for (int64_t j = 0; j < hw; j++)
                s += x[i * (size_t)hw + (size_t)j];
            ref[i] = s / (double)hw;
        }
        char what[80];
        snprintf(what, sizeof what, "global_avgpool %" PRId64 "x%" PRId64 "x%" PRId64, nn, c, hw);
        /* a sum of hw terms of magnitude <= 2 divided by hw */
        expect_close(what, got, ref, NULL, ny, 4.0 * (double)(hw + 2) * U32F * 2.0, 0);
        free(x), free(got), free(ref);
    }
}
END_TEST

/* ---- embedding ---- */

START_TEST(test_embedding)
{
    static const int64_t shapes[][3] = {{1, 1, 1}, {10, 7, 5}, {301, 64, 33}}; /* vocab dim n */
    for (int si = 0; si < 3; si++)
        for (int d = 0; d < 3; d++)
            for (int i64 = 0; i64 < 2; i64++) {
                int64_t vocab = shapes[si][0], dim = shapes[si][1], n = shapes[si][2];
                size_t nt = (size_t)(vocab * dim), ny = (size_t)(n * dim);
                float *t = fnew(nt), *got = fnew(ny);
                frand(t, nt, -2, 2);
                void *dt = wput(t, nt, WDT[d]);
                int64_t *ids = calloc((size_t)n, 8);
                int32_t *ids32 = calloc((size_t)n, 4);
                for (int64_t i = 0; i < n; i++) {
                    ids[i] = (i == 1) ? vocab - 1 : (int64_t)gf_test_rng_below(&g_rng, (uint64_t)vocab);
                    ids32[i] = (int32_t)ids[i];
                }
                void *did = i64 ? dput(ids, (size_t)n * 8) : dput(ids32, (size_t)n * 4);
                float *dy = dbuf(ny * 4);
                KOK(K->embedding(K->ctx, S, dy, dt, WDT[d], vocab, dim, did,
                                 i64 ? GF_DT_I64 : GF_DT_I32, n));
                dget(got, dy, ny * 4);
                double *ref = dnew(ny);
                for (int64_t i = 0; i < n; i++)
                    for (int64_t j = 0; j < dim; j++)
                        ref[i * dim + j] = t[ids[i] * dim + j];
                char what[80];
                snprintf(what, sizeof what, "embedding vocab %" PRId64 " dim %" PRId64 " %s %s",
                         vocab, dim, dtn(WDT[d]), i64 ? "I64" : "I32");
                expect_close(what, got, ref, NULL, ny, 0, 0); /* exact: widening */
                free(t), free(got), free(ids), free(ids32), free(ref);
            }
}
END_TEST

/* An out-of-range index is an error (at once on cpu, at the next sync on
 * cuda) naming the index, and its row is never read: the table is exactly
 * vocab rows and the bad index is 2^40 (a read would fault, on cuda as a
 * sticky device error instead of GF_ERR_INVALID). */
static void embedding_bad(gf_dtype id_dtype, int64_t bad, const char *bad_text)
{
    const int64_t vocab = 5, dim = 3, n = 4;
    float t[15];
    for (int i = 0; i < 15; i++)
        t[i] = (float)i;
    float *dt = dput(t, sizeof t);
    int64_t ids[4] = {0, 4, bad, 2};
    int32_t ids32[4] = {0, 4, (int32_t)bad, 2};
    void *did = id_dtype == GF_DT_I64 ? dput(ids, sizeof ids) : dput(ids32, sizeof ids32);
    float sentinel[12];
    for (int i = 0; i < 12; i++)
        sentinel[i] = -7.0f;
    float *dy = dput(sentinel, sizeof sentinel);
    int rc = K->embedding(K->ctx, S, dy, dt, GF_DT_F32, vocab, dim, did, id_dtype, n);
    if (expect_data_error(rc, bad_text)) {
        /* reported at once (cpu): nothing written, the vocabulary named */
        ck_assert_msg(strstr(K->last_error(K->ctx), "5") != NULL, "message '%s' must name vocabulary 5",
                      K->last_error(K->ctx));
        float got[12];
        dget(got, dy, sizeof got);
        for (int i = 0; i < 12; i++)
            ck_assert_msg(got[i] == -7.0f, "output written before the error was found");
    }
    /* The stream goes on working. */
    int64_t ok_ids[4] = {4, 0, 1, 3};
    int32_t ok_ids32[4] = {4, 0, 1, 3};
    void *dok = id_dtype == GF_DT_I64 ? dput(ok_ids, sizeof ok_ids) : dput(ok_ids32, sizeof ok_ids32);
    KOK(K->embedding(K->ctx, S, dy, dt, GF_DT_F32, vocab, dim, dok, id_dtype, n));
    float got[12];
    dget(got, dy, sizeof got);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            ck_assert_float_eq(got[i * 3 + j], (float)(ok_ids[i] * 3 + j));
}

START_TEST(test_embedding_out_of_range)
{
    embedding_bad(GF_DT_I64, (int64_t)1 << 40, "1099511627776");
    embedding_bad(GF_DT_I64, 5, "5");
    embedding_bad(GF_DT_I64, -1, "-1");
    embedding_bad(GF_DT_I32, -2147483647 - 1, "-2147483648");
    embedding_bad(GF_DT_I32, 2147483647, "2147483647");
}
END_TEST

/* ---- attention ---- */

static void attention_case(int64_t b, int64_t h, int64_t s, int64_t d, int mask_kind,
                           gf_dtype mdt)
{
    size_t n = (size_t)(b * h * s * d);
    float *q = fnew(n), *k = fnew(n), *v = fnew(n), *got = fnew(n);
    frand(q, n, -1, 1);
    frand(k, n, -1, 1);
    frand(v, n, -1, 1);
    int64_t *mask = calloc((size_t)(b * s), 8);
    int32_t *mask32 = calloc((size_t)(b * s), 4);
    for (int64_t bi = 0; bi < b; bi++)
        for (int64_t j = 0; j < s; j++) {
            int64_t mv = 1;
            if (mask_kind == 1) /* padding: the last bi keys of batch bi masked */
                mv = j < s - (bi % (s > 1 ? s : 1)) ? 1 : 0;
            if (mask_kind == 2 && bi == b - 1) /* last batch: every key masked */
                mv = 0;
            if (mask_kind == 2 && bi != b - 1) /* others: arbitrary nonzero values */
                mv = (j % 3 == 1) ? 0 : (int64_t)7 + j;
            mask[bi * s + j] = mv;
            mask32[bi * s + j] = (int32_t)mv;
        }
    float *dq = dput(q, n * 4), *dk = dput(k, n * 4), *dv = dput(v, n * 4), *dout = dbuf(n * 4);
    void *dm = NULL;
    if (mask_kind)
        dm = mdt == GF_DT_I64 ? dput(mask, (size_t)(b * s) * 8) : dput(mask32, (size_t)(b * s) * 4);
    float scale = 1.0f / sqrtf((float)d);
    KOK(K->attention(K->ctx, S, dout, dq, dk, dv, b, h, s, d, scale, dm, mdt));
    dget(got, dout, n * 4);
    double *ref = dnew(n), *p = dnew((size_t)s);
    for (int64_t bi = 0; bi < b; bi++)
        for (int64_t hi = 0; hi < h; hi++) {
            size_t off = (size_t)((bi * h + hi) * s * d);
            for (int64_t i = 0; i < s; i++) {
                double mx = -INFINITY, sum = 0;
                int live = 0;
                for (int64_t j = 0; j < s; j++) {
                    double sc = 0;
                    for (int64_t t = 0; t < d; t++)
                        sc += (double)q[off + (size_t)(i * d + t)] * k[off + (size_t)(j * d + t)];
                    p[j] = sc * scale;
                    if (!mask_kind || mask[bi * s + j] != 0) {
                        mx = p[j] > mx ? p[j] : mx;
                        live = 1;
                    }
                }
                for (int64_t j = 0; j < s; j++) {
                    if (!live)
                        p[j] = 1.0;
                    else if (mask_kind && mask[bi * s + j] == 0)
                        p[j] = 0.0;
                    else
                        p[j] = exp(p[j] - mx);
                    sum += p[j];
                }
                for (int64_t t = 0; t < d; t++) {
                    double o = 0;
                    for (int64_t j = 0; j < s; j++)
                        o += p[j] / sum * v[off + (size_t)(j * d + t)];
                    ref[off + (size_t)(i * d + t)] = o;
                }
            }
        }
    char what[120];
    snprintf(what, sizeof what,
             "attention b%" PRId64 " h%" PRId64 " s%" PRId64 " d%" PRId64 " mask %d %s", b, h, s,
             d, mask_kind, dtn(mdt));
    /* scores: d-term dot products (|q|,|k| <= 1), softmax over s terms, a
     * weighted sum of s values <= 1: each stage at most (terms + 4) u
     * relative, so 4 (d + 2 s + 12) u on outputs of magnitude <= 1. */
    expect_close(what, got, ref, NULL, n, 4.0 * (double)(d + 2 * s + 12) * U32F * 4.0, 0);
    free(q), free(k), free(v), free(got), free(mask), free(mask32), free(ref), free(p);
}

START_TEST(test_attention)
{
    attention_case(1, 1, 1, 1, 0, GF_DT_I32);
    attention_case(2, 3, 5, 4, 0, GF_DT_I32);
    attention_case(2, 3, 5, 4, 1, GF_DT_I64);
    attention_case(3, 2, 17, 8, 1, GF_DT_I32);
    attention_case(3, 2, 7, 16, 2, GF_DT_I64);
    attention_case(2, 1, 33, 64, 2, GF_DT_I32);
    attention_case(1, 4, 128, 64, 1, GF_DT_I64);
}
END_TEST

START_TEST(test_workspace_growth)
{
    gf_conv2d_params small = {1, 2, 5, 5, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1};
    gf_conv2d_params big = {2, 16, 40, 40, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1};
    conv_case(small, GF_DT_F16, 1, GF_ACT_RELU);
    conv_case(big, GF_DT_BF16, 1, GF_ACT_IDENTITY);
    conv_case(small, GF_DT_F32, 0, GF_ACT_SIGMOID);
    gemm_case(0, 1, 70, 90, 110, 0, GF_DT_F16, GF_DT_BF16, 1.0f, 0.0f);
    attention_case(2, 2, 64, 32, 1, GF_DT_I32);
}
END_TEST

/* The casts, layout copies and argument checks are in test_kernels_layout.c. */
void kh_layout_tests(TCase *tc);

static void add_tests(TCase *tc)
{
    tcase_add_test(tc, test_gemm);
    tcase_add_test(tc, test_gemm_degenerate);
    tcase_add_test(tc, test_gemm_batched);
    tcase_add_test(tc, test_bias_act);
    tcase_add_test(tc, test_add);
    tcase_add_test(tc, test_softmax);
    tcase_add_test(tc, test_layernorm);
    tcase_add_test(tc, test_batchnorm);
    tcase_add_test(tc, test_conv2d);
    tcase_add_test(tc, test_pool);
    tcase_add_test(tc, test_global_avgpool);
    tcase_add_test(tc, test_embedding);
    tcase_add_test(tc, test_embedding_out_of_range);
    tcase_add_test(tc, test_attention);
    tcase_add_test(tc, test_workspace_growth);
    kh_layout_tests(tc);
}

int main(int argc, char **argv)
{
    return kh_main(argc, argv, "kernels", add_tests);
}
