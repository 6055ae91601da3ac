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

#endif /* GF_TESTS_KINDS_TESTLIB_H */
