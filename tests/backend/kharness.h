/* Tests of the kernel library: the harness test_kernels.c and
 * test_kernels_v2.c share (tests/backend).
 *
 * Each suite runs on one backend named by argv[1] ("cpu" by default, or
 * "cuda:0", which exits 77 without a GPU). Everything goes through the
 * public backend API, so the same checks run on every device: buffers come
 * from gf_dev_alloc, data moves with gf_memcpy_async on the compute stream,
 * kernels are called through gf_backend_kernels(), and gf_stream_sync
 * reports deferred errors. State is per test (opened in the forked child,
 * so CUDA is never initialised in the parent).
 */
#ifndef GF_TESTS_KHARNESS_H
#define GF_TESTS_KHARNESS_H

#include <check.h>
#include <stddef.h>
#include <string.h>

#include "backend/backend.h"
#include "core/dtype.h"
#include "testutil.h"

#define U32F (1.0 / 16777216.0) /* 2^-24, the unit roundoff of FP32 */

extern gf_backend *g_be;    /* the backend under test */
extern const gf_kernels *K; /* its kernel table */
extern gf_stream *S;        /* its compute stream */
extern gf_test_rng g_rng;   /* seeded per test */

/* Wait for the compute stream; fails the test on a (deferred) error. */
void dsync(void);

/* A device buffer of n bytes (at least 1), freed at teardown. */
void *dbuf(size_t n);

/* Free every buffer dbuf and dput gave so far (between cases of a test). */
void dfree_all(void);

/* A device copy of n host bytes. */
void *dput(const void *host, size_t n);

/* Copy n bytes from the device to host. */
void dget(void *host, const void *dev, size_t n);

/* Run a kernel call that must succeed, then wait for it. */
#define KOK(call)                                                                                 \
    do {                                                                                          \
        int rc_ = (call);                                                                         \
        ck_assert_msg(rc_ == 0, "%s returned %d: %s", #call, rc_, K->last_error(K->ctx));        \
        dsync();                                                                                  \
    } while (0)

/* A kernel call that must fail at once with code, naming the kernel. */
#define KERR(code, name, call)                                                                    \
    do {                                                                                          \
        int rc_ = (call);                                                                         \
        ck_assert_msg(rc_ == (code), "%s returned %d, expected %d", #call, rc_, (int)(code));    \
        const char *m_ = K->last_error(K->ctx);                                                   \
        ck_assert_msg(strstr(m_, name) != NULL, "message '%s' does not name %s", m_, name);      \
        dsync();                                                                                  \
    } while (0)

/* rc is the result of a kernel call whose input data is bad (an index out
 * of range, an integer division by zero): it must fail with GF_ERR_INVALID,
 * at once (cpu; rc) or at the next sync (cuda; rc 0), with a message
 * containing needle. Returns true when it failed at once. The stream works
 * afterwards. */
bool expect_data_error(int rc, const char *needle);

/* Zeroed host arrays (at least one element); abort the test when out of
 * memory. The caller frees them. */
float *fnew(size_t n);
double *dnew(size_t n);

/* Uniform random floats in [lo, hi). */
void frand(float *x, size_t n, float lo, float hi);

/* Round v[0..n) to dt in place and return a malloc'd copy in dt's encoding,
 * so the reference uses exactly the values the kernel reads. */
void *wenc(float *v, size_t n, gf_dtype dt);

/* Weights: round v to dt and upload in dt's encoding. */
void *wput(float *v, size_t n, gf_dtype dt);

/* Compare got with ref: |got - ref| <= bound[i] when bound is given, else
 * atol + rtol |ref|. A NaN reference requires a NaN result. */
void expect_close(const char *what, const float *got, const double *ref, const double *bound,
                  size_t n, double atol, double rtol);

/* The safetensors name of dt ("F32"). */
const char *dtn(gf_dtype dt);

/* The weight dtypes. */
extern const gf_dtype WDT[3];

/* The activations in double precision. */
double ref_act(double x, gf_act act);

/* Convolution geometry for the reference: the leading pads place the
 * windows, the output size is given. */
typedef struct kh_conv_geom {
    int64_t n, c, h, w, oc, kh, kw, sh, sw, pt, pl, dh, dw, groups;
    int64_t oh, ow;
} kh_conv_geom;

/* ref = act(conv(x, w) + bias + res) in double (bias and res may be NULL),
 * NCHW / OIHW, with the per-element bound 1.2 x 4 (k + 3) u sum|terms| +
 * 1e-6 + 1e-5 |ref| (k the terms of one dot product). g->oh, g->ow must be
 * set. */
void ref_conv(const kh_conv_geom *g, const float *x, const float *w, const float *bias,
              const float *res, gf_act act, double *ref, double *bound);

/* main() of a kernel suite: picks the device from argv[1] (argv[2]
 * "--no-dnnl" turns oneDNN off in the cpu backend), skips (77) without a
 * GPU for a cuda device, runs the tests `add` puts in the case
 * (named name_cpu or name_cuda), with the per-test fixture. */
int kh_main(int argc, char **argv, const char *name, void (*add)(TCase *tc));

#endif /* GF_TESTS_KHARNESS_H */
