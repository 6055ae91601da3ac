/* Tests of the kernel library: the shared harness (see kharness.h). */
#include "kharness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *g_device = "cpu";

/* Per-test state (opened in the forked child, so CUDA is never initialised
 * in the parent). */
gf_backend *g_be;
const gf_kernels *K;
gf_stream *S;
static void *g_bufs[512];
static int g_nbufs;
gf_test_rng g_rng;

static void setup(void)
{
    gf_err err;
    gf_err_clear(&err);
    gf_backend_config cfg = {.device = g_device};
    ck_assert_msg(gf_backend_open(&cfg, &g_be, &err) == GF_OK, "open %s: %s", g_device,
                  err.msg);
    K = gf_backend_kernels(g_be);
    ck_assert_ptr_nonnull(K);
    ck_assert_uint_ge(K->size, sizeof(gf_kernels));
    S = gf_backend_stream(g_be, GF_STREAM_COMPUTE);
    g_nbufs = 0;
    gf_test_rng_seed(&g_rng, 0x6b65726e656c73);
}

void dfree_all(void)
{
    dsync();
    for (int i = 0; i < g_nbufs; i++)
        gf_dev_free(g_be, g_bufs[i]);
    g_nbufs = 0;
}

static void teardown(void)
{
    for (int i = 0; i < g_nbufs; i++)
        gf_dev_free(g_be, g_bufs[i]);
    g_nbufs = 0;
    gf_backend_free(g_be);
    g_be = NULL;
}

/* ---- device helpers ---- */

void dsync(void)
{
    gf_err err;
    gf_err_clear(&err);
    ck_assert_msg(gf_stream_sync(g_be, S, &err) == GF_OK, "sync: %s", err.msg);
}

/* A device buffer of n bytes (at least 1), freed at teardown. */
void *dbuf(size_t n)
{
    void *p = NULL;
    gf_err err;
    gf_err_clear(&err);
    ck_assert_int_lt(g_nbufs, (int)(sizeof g_bufs / sizeof g_bufs[0]));
    ck_assert_msg(gf_dev_alloc(g_be, n ? n : 1, &p, &err) == GF_OK, "dev_alloc(%zu): %s", n,
                  err.msg);
    g_bufs[g_nbufs++] = p;
    return p;
}

/* A device copy of n host bytes. */
void *dput(const void *host, size_t n)
{
    void *p = dbuf(n);
    if (n > 0) {
        gf_err err;
        gf_err_clear(&err);
        ck_assert_msg(gf_memcpy_async(g_be, S, p, host, n, GF_COPY_H2D, &err) == GF_OK, "%s",
                      err.msg);
        dsync();
    }
    return p;
}

void dget(void *host, const void *dev, size_t n)
{
    gf_err err;
    gf_err_clear(&err);
    ck_assert_msg(gf_memcpy_async(g_be, S, host, dev, n, GF_COPY_D2H, &err) == GF_OK, "%s",
                  err.msg);
    dsync();
}

/* ---- host helpers ---- */

float *fnew(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof(float));
    ck_assert_ptr_nonnull(p);
    return p;
}

double *dnew(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof(double));
    ck_assert_ptr_nonnull(p);
    return p;
}

void frand(float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = gf_test_rng_float(&g_rng, lo, hi);
}

/* Round v[0..n) to dt in place and return a malloc'd copy in dt's encoding,
 * so the reference uses exactly the values the kernel reads. */
void *wenc(float *v, size_t n, gf_dtype dt)
{
    if (dt == GF_DT_F32) {
        float *o = fnew(n);
        memcpy(o, v, n * sizeof(float));
        return o;
    }
    uint16_t *o = calloc(n ? n : 1, 2);
    ck_assert_ptr_nonnull(o);
    for (size_t i = 0; i < n; i++) {
        if (dt == GF_DT_F16) {
            o[i] = gf_f32_to_f16(v[i]);
            v[i] = gf_f16_to_f32(o[i]);
        } else {
            o[i] = gf_f32_to_bf16(v[i]);
            v[i] = gf_bf16_to_f32(o[i]);
        }
    }
    return o;
}

/* Weights: round v to dt and upload in dt's encoding. */
void *wput(float *v, size_t n, gf_dtype dt)
{
    void *enc = wenc(v, n, dt);
    void *d = dput(enc, n * gf_dtype_size(dt));
    free(enc);
    return d;
}

/* Compare got with ref: |got - ref| <= bound[i] when bound is given, else
 * atol + rtol |ref|. A NaN reference requires a NaN result. */
void expect_close(const char *what, const float *got, const double *ref,
                         const double *bound, size_t n, double atol, double rtol)
{
    for (size_t i = 0; i < n; i++) {
        double tol = bound ? bound[i] : atol + rtol * fabs(ref[i]);
        if (isnan(ref[i])) {
            ck_assert_msg(isnan(got[i]), "%s [%zu]: got %.9g, expected NaN", what, i,
                          (double)got[i]);
            continue;
        }
        double d = fabs((double)got[i] - ref[i]);
        ck_assert_msg(d <= tol, "%s [%zu]: got %.9g, expected %.9g (|diff| %.3g > tol %.3g)",
                      what, i, (double)got[i], ref[i], d, tol);
    }
}

const char *dtn(gf_dtype dt)
{
    return gf_dtype_st_name(dt);
}

const gf_dtype WDT[3] = {GF_DT_F32, GF_DT_F16, GF_DT_BF16};

bool expect_data_error(int rc, const char *needle)
{
    gf_err err;
    gf_err_clear(&err);
    gf_status st = gf_stream_sync(g_be, S, &err);
    if (rc != 0) {
        ck_assert_int_eq(rc, GF_ERR_INVALID);
        ck_assert_int_eq(st, GF_OK);
        const char *msg = K->last_error(K->ctx);
        ck_assert_msg(strstr(msg, needle) != NULL, "message '%s' must contain '%s'", msg,
                      needle);
    } else {
        ck_assert_msg(st == GF_ERR_INVALID, "sync returned %d (%s), expected GF_ERR_INVALID",
                      (int)st, err.msg);
        ck_assert_msg(strstr(err.msg, needle) != NULL, "message '%s' must contain '%s'",
                      err.msg, needle);
    }
    dsync(); /* reported once; the stream goes on working */
    return rc != 0;
}

double ref_act(double x, gf_act act)
{
    switch (act) {
    case GF_ACT_RELU:
        return x > 0 ? x : 0;
    case GF_ACT_GELU_ERF:
        return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case GF_ACT_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case GF_ACT_SILU:
        return x / (1.0 + exp(-x));
    case GF_ACT_TANH:
        return tanh(x);
    case GF_ACT_SIGMOID:
        return 1.0 / (1.0 + exp(-x));
    default:
        return x;
    }
}

void ref_conv(const kh_conv_geom *g, const float *x, const float *w, const float *bias,
              const float *res, gf_act act, double *ref, double *bound)
{
    int64_t cg = g->c / g->groups, ocg = g->oc / g->groups;
    for (int64_t i = 0; i < g->n; i++)
        for (int64_t o = 0; o < g->oc; o++)
            for (int64_t oy = 0; oy < g->oh; oy++)
                for (int64_t ox = 0; ox < g->ow; ox++) {
                    size_t at = (size_t)(((i * g->oc + o) * g->oh + oy) * g->ow + ox);
                    double s = (bias ? bias[o] : 0.0) + (res ? res[at] : 0.0);
                    double sa = fabs(bias ? bias[o] : 0.0) + fabs(res ? res[at] : 0.0);
                    int64_t gi = o / ocg;
                    for (int64_t ci = 0; ci < cg; ci++)
                        for (int64_t ky = 0; ky < g->kh; ky++)
                            for (int64_t kx = 0; kx < g->kw; kx++) {
                                int64_t iy = oy * g->sh - g->pt + ky * g->dh;
                                int64_t ix = ox * g->sw - g->pl + kx * g->dw;
                                if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w)
                                    continue;
                                double t =
                                    (double)x[((i * g->c + gi * cg + ci) * g->h + iy) * g->w + ix] *
                                    w[((o * cg + ci) * g->kh + ky) * g->kw + kx];
                                s += t;
                                sa += fabs(t);
                            }
                    ref[at] = ref_act(s, act);
                    bound[at] = 1.2 * 4.0 * (double)(cg * g->kh * g->kw + 3) * U32F * sa + 1e-6 +
                                1e-5 * fabs(ref[at]);
                }
}

int kh_main(int argc, char **argv, const char *name, void (*add)(TCase *tc))
{
    if (argc > 1)
        g_device = argv[1];
    /* "--no-dnnl": the cpu backend's convolutions without oneDNN (the
     * im2col + OpenBLAS path it falls back to), so both stay tested */
    if (argc > 2 && strcmp(argv[2], "--no-dnnl") == 0)
        setenv("GF_CPU_DNNL", "0", 1);
    bool cpu = strcmp(g_device, "cpu") == 0;
    if (!cpu && gf_test_ask_in_child(gf_backend_cuda_device_count) == 0) {
        printf("SKIP: %s: no CUDA GPU on this machine (or the CUDA module is not built)\n",
               g_device);
        return GF_TEST_SKIP;
    }
    char sname[64];
    snprintf(sname, sizeof sname, "%s_%s", name, cpu ? "cpu" : "cuda");
    Suite *s = suite_create(sname);
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    add(tc);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
