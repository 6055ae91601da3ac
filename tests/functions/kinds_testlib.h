/* Helpers shared by the tests of the built-in kinds (test_kinds.c,
 * test_digits.c): a function deployed on the cpu backend the way a worker
 * does it. Every helper fails the running test on error. */
#ifndef GF_TESTS_KINDS_TESTLIB_H
#define GF_TESTS_KINDS_TESTLIB_H

#include <stddef.h>

#include "functions/runtime.h"

typedef struct fn_rig {
    gf_manifest *mf;  /* parsed from the manifest file */
    gf_fn_plan *plan; /* gf_fn_prepare's result */
    gf_backend *be;   /* cpu, 1 GiB device budget */
    gf_cache *cache;
    gf_cache_model *model;
} fn_rig;

/* Parse the manifest at manifest_path, validate it against weights (as at
 * deploy time), prepare the plan (derived parameters go to derived, which
 * may be NULL when the kind derives none), open a backend and a cache and
 * register the plan's parameters. The backend is cpu, or the device named by
 * the environment variable GF_TEST_DEVICE ("cuda:0": tests/gpu/run.sh runs
 * the kinds' numerics there). */
void fn_rig_open(fn_rig *r, const char *manifest_path, const char *weights, const char *derived);

/* Acquire, run one batch (inputs in manifest order, host memory) and
 * release. Returns gf_fn_infer's status; *out is filled on GF_OK. */
gf_status fn_rig_infer(fn_rig *r, const gf_tensor *in, size_t n_in, gf_fn_outputs *out,
                       gf_err *err);

void fn_rig_close(fn_rig *r);

/* Max |ours - expected| and max |expected| over every output. */
typedef struct fn_result {
    double err, scale;
} fn_result;

/* Open a rig for the manifest at manifest_path and weights, run the inputs
 * of the safetensors file inputs_path (named as the manifest's inputs), and
 * compare with the outputs in expected_path (named as the manifest's
 * outputs; F32 or F64). derived as for fn_rig_open. */
fn_result fn_compare(const char *manifest_path, const char *weights, const char *derived,
                     const char *inputs_path, const char *expected_path);

/* Validation and prepare of a manifest (the file manifest_path, or the text
 * mtext when manifest_path is NULL) against weights must both fail; the
 * message must contain each of expect (NULL-terminated). scratch: a
 * directory for prepare's derived file. */
void fn_expect_invalid(const char *manifest_path, const char *mtext, const char *weights,
                       const char *scratch, const char *const *expect);

/* Copy the safetensors file src to dst without tensor `drop` (NULL: none),
 * with tensor `reshape` given shape [a/2, 2b, ...] (NULL: none), and with
 * extra tensor `add` (an F32 [2] of zeros; NULL: none). */
void fn_st_copy_edited(const char *src, const char *dst, const char *drop, const char *reshape,
                       const char *add);

/* Copy src to dst with every tensor name prefixed (a DataParallel file). */
void fn_st_copy_prefixed(const char *src, const char *dst, const char *prefix);

/* Copy src to dst with the first two elements of tensor `name` swapped. */
void fn_st_copy_shuffled(const char *src, const char *dst, const char *name);

#endif /* GF_TESTS_KINDS_TESTLIB_H */
