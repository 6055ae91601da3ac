/* Tests for the kernel library (gpufaas/kernels.h), version 1's casts,
 * permutes and 2-D copies (exact), and the argument checks every member
 * shares (backend/kernel_args.c): part of the backend_kernels suites, with
 * test_kernels.c, whose head says how the tests run on each device. */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "kharness.h"

/* ---- cast, permute, copy2d ---- */

START_TEST(test_cast)
{
    const size_t n = 1001;
    float *src = fnew(n);
    frand(src, n, -70000, 70000);
    /* specials: zeros, infinities, NaN, subnormals of both halves, ties,
     * values beyond F16's range */
    const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, -1.0f,
                             65504.0f, 65520.0f, 1e-8f, 6e-8f, 5.96e-8f, 3e-5f,
                             gf_bits_f32(0x3f808000u), gf_bits_f32(0x3f818000u), gf_bits_f32(0x00000001u),
                             gf_bits_f32(0x7f7fffffu), 1.00048828125f, 1.000732421875f};
    memcpy(src, special, sizeof special);
    for (size_t i = sizeof special / sizeof special[0]; i < 200; i++)
        src[i] = ldexpf(gf_test_rng_float(&g_rng, 1, 2), (int)gf_test_rng_below(&g_rng, 60) - 40);
    for (int di = 0; di < 3; di++)
        for (int si = 0; si < 3; si++) {
            gf_dtype sdt = WDT[si], ddt = WDT[di];
            size_t ss = gf_dtype_size(sdt), ds = gf_dtype_size(ddt);
            /* the source values in the source type, as bytes */
            float *sv = fnew(n);
            memcpy(sv, src, n * 4);
            void *senc = wenc(sv, n, sdt); /* sv now holds the source values exactly */
            /* expected: one rounding from the exact source value */
            float *ev = fnew(n);
            memcpy(ev, sv, n * 4);
            void *eenc = wenc(ev, n, ddt);
            void *dsrc = dput(senc, n * ss), *ddst = dbuf(n * ds);
            for (size_t len = 1; len <= n; len += n - 1) {
                KOK(K->cast(K->ctx, S, ddst, ddt, dsrc, sdt, (int64_t)len));
                unsigned char *got = calloc(n, ds);
                ck_assert_ptr_nonnull(got);
                dget(got, ddst, len * ds);
                for (size_t i = 0; i < len; i++) {
                    float g, e;
                    if (ddt == GF_DT_F32) {
                        memcpy(&g, got + i * 4, 4);
                        memcpy(&e, (char *)eenc + i * 4, 4);
                    } else {
                        uint16_t gh, eh;
                        memcpy(&gh, got + i * 2, 2);
                        memcpy(&eh, (char *)eenc + i * 2, 2);
                        g = ddt == GF_DT_F16 ? gf_f16_to_f32(gh) : gf_bf16_to_f32(gh);
                        e = ddt == GF_DT_F16 ? gf_f16_to_f32(eh) : gf_bf16_to_f32(eh);
                    }
                    if (isnan(e)) {
                        ck_assert_msg(isnan(g), "cast %s->%s [%zu]: expected NaN", dtn(sdt),
                                      dtn(ddt), i);
                        continue;
                    }
                    uint32_t gb, eb;
                    memcpy(&gb, &g, 4);
                    memcpy(&eb, &e, 4);
                    ck_assert_msg(gb == eb,
                                  "cast %s->%s [%zu]: source %.9g gave %.9g (0x%08x), expected "
                                  "%.9g (0x%08x)",
                                  dtn(sdt), dtn(ddt), i, (double)sv[i], (double)g, gb, (double)e,
                                  eb);
                }
                free(got);
            }
            free(sv), free(ev), free(senc), free(eenc);
        }
    free(src);
}
END_TEST

START_TEST(test_permute_0213)
{
    static const int64_t shapes[][4] = {{2, 3, 4, 5}, {1, 1, 1, 1}, {1, 7, 1, 3}, {3, 5, 12, 64}};
    for (int si = 0; si < 4; si++) {
        const int64_t *d = shapes[si];
        size_t n = (size_t)(d[0] * d[1] * d[2] * d[3]);
        float *x = fnew(n), *got = fnew(n);
        for (size_t i = 0; i < n; i++)
            x[i] = (float)i;
        float *dx = dput(x, n * 4), *dy = dbuf(n * 4);
        KOK(K->permute_0213(K->ctx, S, dy, dx, d[0], d[1], d[2], d[3]));
        dget(got, dy, n * 4);
        for (int64_t a = 0; a < d[0]; a++)
            for (int64_t b = 0; b < d[1]; b++)
                for (int64_t c = 0; c < d[2]; c++)
                    for (int64_t e = 0; e < d[3]; e++)
                        ck_assert_float_eq(got[((a * d[2] + c) * d[1] + b) * d[3] + e],
                                           x[((a * d[1] + b) * d[2] + c) * d[3] + e]);
        free(x), free(got);
    }
}
END_TEST

START_TEST(test_copy2d)
{
    /* 5 rows of 7 bytes from pitch 11 to pitch 9, then a single row */
    unsigned char src[5 * 11], dst[5 * 9], got[5 * 9];
    for (int i = 0; i < 55; i++)
        src[i] = (unsigned char)(i * 7 + 1);
    memset(dst, 0xEE, sizeof dst);
    void *ds = dput(src, sizeof src), *dd = dput(dst, sizeof dst);
    KOK(K->copy2d(K->ctx, S, dd, 9, ds, 11, 7, 5));
    dget(got, dd, sizeof got);
    for (int r = 0; r < 5; r++)
        for (int c = 0; c < 9; c++)
            ck_assert_uint_eq(got[r * 9 + c], c < 7 ? src[r * 11 + c] : 0xEE);
    KOK(K->copy2d(K->ctx, S, dd, 0, ds, 0, 3, 1));
    dget(got, dd, sizeof got);
    ck_assert_uint_eq(got[0], src[0]);
    ck_assert_uint_eq(got[2], src[2]);
    KOK(K->copy2d(K->ctx, S, NULL, 9, NULL, 11, 0, 5)); /* width 0: nothing */
}
END_TEST

/* ---- argument errors ---- */

START_TEST(test_bad_arguments)
{
    float *x = dbuf(4096), *y = dbuf(4096);
    /* negative sizes */
    KERR(GF_ERR_INVALID, "gemm",
         K->gemm(K->ctx, S, 0, 0, -1, 2, 2, 1, x, GF_DT_F32, 2, x, GF_DT_F32, 2, 0, y, 2));
    KERR(GF_ERR_INVALID, "softmax", K->softmax(K->ctx, S, y, x, 2, -3, 0));
    KERR(GF_ERR_INVALID, "add", K->add(K->ctx, S, y, x, x, -1, GF_ACT_RELU));
    KERR(GF_ERR_INVALID, "embedding",
         K->embedding(K->ctx, S, y, x, GF_DT_F32, -5, 2, x, GF_DT_I32, 1));
    KERR(GF_ERR_INVALID, "permute_0213", K->permute_0213(K->ctx, S, y, x, 1, -1, 1, 1));
    KERR(GF_ERR_INVALID, "gemm_batched",
         K->gemm_batched(K->ctx, S, 0, 0, 2, 2, 2, 1, x, GF_DT_F32, 2, 4, x, GF_DT_F32, 2, 4, 0,
                         y, 2, 4, -2));
    /* batched outputs that overlap */
    KERR(GF_ERR_INVALID, "gemm_batched",
         K->gemm_batched(K->ctx, S, 0, 0, 2, 2, 2, 1, x, GF_DT_F32, 2, 4, x, GF_DT_F32, 2, 4, 0,
                         y, 2, 3, 2));
    /* leading dimensions too small */
    KERR(GF_ERR_INVALID, "gemm",
         K->gemm(K->ctx, S, 0, 0, 4, 4, 8, 1, x, GF_DT_F32, 7, x, GF_DT_F32, 4, 0, y, 4));
    KERR(GF_ERR_INVALID, "gemm",
         K->gemm(K->ctx, S, 0, 1, 4, 4, 8, 1, x, GF_DT_F32, 8, x, GF_DT_F32, 4, 0, y, 4));
    KERR(GF_ERR_INVALID, "gemm",
         K->gemm(K->ctx, S, 0, 0, 4, 4, 8, 1, x, GF_DT_F32, 8, x, GF_DT_F32, 4, 0, y, 3));
    /* unsupported dtypes */
    KERR(GF_ERR_UNSUPPORTED, "gemm",
         K->gemm(K->ctx, S, 0, 0, 2, 2, 2, 1, x, GF_DT_I8, 2, x, GF_DT_F32, 2, 0, y, 2));
    KERR(GF_ERR_UNSUPPORTED, "bias_act", K->bias_act(K->ctx, S, y, 2, 2, x, GF_DT_F64, 0));
    KERR(GF_ERR_UNSUPPORTED, "layernorm",
         K->layernorm(K->ctx, S, y, x, 2, 2, x, x, GF_DT_I32, 1e-5f));
    KERR(GF_ERR_UNSUPPORTED, "embedding",
         K->embedding(K->ctx, S, y, x, GF_DT_F32, 4, 2, x, GF_DT_F32, 1));
    KERR(GF_ERR_UNSUPPORTED, "embedding",
         K->embedding(K->ctx, S, y, x, GF_DT_U8, 4, 2, x, GF_DT_I32, 1));
    KERR(GF_ERR_UNSUPPORTED, "cast", K->cast(K->ctx, S, y, GF_DT_I32, x, GF_DT_F32, 4));
    KERR(GF_ERR_UNSUPPORTED, "attention",
         K->attention(K->ctx, S, y, x, x, x, 1, 1, 2, 2, 1, x, GF_DT_F32));
    /* NULL where data is needed */
    KERR(GF_ERR_INVALID, "add", K->add(K->ctx, S, y, NULL, x, 4, GF_ACT_IDENTITY));
    KERR(GF_ERR_INVALID, "gemm",
         K->gemm(K->ctx, S, 0, 0, 2, 2, 2, 1, NULL, GF_DT_F32, 2, x, GF_DT_F32, 2, 0, y, 2));
    KERR(GF_ERR_INVALID, "batchnorm",
         K->batchnorm(K->ctx, S, y, x, 1, 2, 2, NULL, x, x, x, GF_DT_F32, 1e-5f, 0));
    KERR(GF_ERR_INVALID, "conv2d",
         K->conv2d(K->ctx, S, y, x, NULL, x, NULL, GF_DT_F32, GF_ACT_IDENTITY));
    /* bad activation */
    KERR(GF_ERR_INVALID, "bias_act", K->bias_act(K->ctx, S, y, 2, 2, NULL, GF_DT_F32, GF_ACT_COUNT_));
    KERR(GF_ERR_INVALID, "add", K->add(K->ctx, S, y, x, x, 2, (gf_act)-1));
    /* convolution geometry */
    gf_conv2d_params p = {1, 3, 4, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2}; /* groups 2 vs c 3 */
    KERR(GF_ERR_INVALID, "conv2d", K->conv2d(K->ctx, S, y, x, &p, x, NULL, GF_DT_F32, 0));
    p.groups = 1;
    p.stride_h = 0;
    KERR(GF_ERR_INVALID, "conv2d", K->conv2d(K->ctx, S, y, x, &p, x, NULL, GF_DT_F32, 0));
    p.stride_h = 1;
    p.kh = 9; /* larger than the padded input */
    KERR(GF_ERR_INVALID, "conv2d", K->conv2d(K->ctx, S, y, x, &p, x, NULL, GF_DT_F32, 0));
    p.kh = 3;
    p.dil_w = 0;
    KERR(GF_ERR_INVALID, "conv2d", K->conv2d(K->ctx, S, y, x, &p, x, NULL, GF_DT_F32, 0));
    p.dil_w = 1;
    KERR(GF_ERR_UNSUPPORTED, "conv2d", K->conv2d(K->ctx, S, y, x, &p, x, NULL, GF_DT_I8, 0));
    /* pooling geometry */
    gf_pool2d_params pp = {1, 1, 4, 4, 2, 2, 2, 2, 2, 0, 1}; /* pad 2 > k/2 */
    KERR(GF_ERR_INVALID, "maxpool2d", K->maxpool2d(K->ctx, S, y, x, &pp));
    pp.pad_h = 0;
    pp.stride_w = 0;
    KERR(GF_ERR_INVALID, "avgpool2d", K->avgpool2d(K->ctx, S, y, x, &pp));
    /* overflowing sizes */
    KERR(GF_ERR_OVERFLOW, "softmax", K->softmax(K->ctx, S, y, x, INT64_MAX / 2, 3, 0));
    /* copy2d pitch below width */
    KERR(GF_ERR_INVALID, "copy2d", K->copy2d(K->ctx, S, y, 4, x, 8, 8, 2));
    /* a later good call still works, and its error message is not stale in
     * a way that matters: the call succeeds */
    KOK(K->add(K->ctx, S, y, x, x, 16, GF_ACT_IDENTITY));
}
END_TEST

START_TEST(test_zero_sizes)
{
    gf_conv2d_params p = {0, 3, 4, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1};
    gf_pool2d_params pp = {0, 1, 4, 4, 2, 2, 2, 2, 0, 0, 1};
    KOK(K->bias_act(K->ctx, S, NULL, 0, 5, NULL, GF_DT_F32, GF_ACT_RELU));
    KOK(K->softmax(K->ctx, S, NULL, NULL, 3, 0, 1));
    KOK(K->layernorm(K->ctx, S, NULL, NULL, 0, 8, NULL, NULL, GF_DT_F32, 1e-5f));
    KOK(K->batchnorm(K->ctx, S, NULL, NULL, 0, 2, 2, NULL, NULL, NULL, NULL, GF_DT_F32, 1e-5f, 0));
    KOK(K->add(K->ctx, S, NULL, NULL, NULL, 0, GF_ACT_IDENTITY));
    KOK(K->conv2d(K->ctx, S, NULL, NULL, &p, NULL, NULL, GF_DT_F32, GF_ACT_IDENTITY));
    KOK(K->maxpool2d(K->ctx, S, NULL, NULL, &pp));
    KOK(K->avgpool2d(K->ctx, S, NULL, NULL, &pp));
    KOK(K->global_avgpool(K->ctx, S, NULL, NULL, 2, 0, 4));
    KOK(K->embedding(K->ctx, S, NULL, NULL, GF_DT_F32, 4, 2, NULL, GF_DT_I64, 0));
    KOK(K->attention(K->ctx, S, NULL, NULL, NULL, NULL, 2, 0, 4, 4, 1, NULL, GF_DT_I32));
    KOK(K->cast(K->ctx, S, NULL, GF_DT_F16, NULL, GF_DT_F32, 0));
    KOK(K->permute_0213(K->ctx, S, NULL, NULL, 2, 0, 3, 4));
    ck_assert_int_eq(K->sync(K->ctx, S), 0);
}
END_TEST

/* Workspace grows on demand and shrinking requests reuse it: a small conv,
 * a large one, a small one again, all correct. */

void kh_layout_tests(TCase *tc);

void kh_layout_tests(TCase *tc)
{
    tcase_add_test(tc, test_cast);
    tcase_add_test(tc, test_permute_0213);
    tcase_add_test(tc, test_copy2d);
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_test(tc, test_zero_sizes);
}
