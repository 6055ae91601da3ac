/* gpufaas tests — the one MLP model the tests use (tests/common): the
 * worker, gateway, HTTP and function runtime tests and the benchmarks deploy
 * it and check their outputs against gf_test_mlp_ref, a naive double loop
 * computed independently of the kernels. */
#ifndef GF_TEST_MLP_H
#define GF_TEST_MLP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpufaas/types.h>

#include "core/error.h"

#define GF_TEST_MLP_MAX_LAYERS 6

typedef struct gf_test_mlp {
    int layers;
    int64_t dims[GF_TEST_MLP_MAX_LAYERS + 1]; /* dims[0] = inputs, dims[i+1] = outputs of layer i */
    float *w[GF_TEST_MLP_MAX_LAYERS];         /* [dims[i+1], dims[i]] */
    float *b[GF_TEST_MLP_MAX_LAYERS];         /* [dims[i+1]] */
    bool softmax;                             /* a softmax over the last layer */
    int max_batch;                            /* the manifest's max_batch_size */
} gf_test_mlp;

/* Random weights (uniform in +-1/sqrt(fan_in), from seed). relu after every
 * layer but the last (identity). Aborts when out of memory. */
void gf_test_mlp_make(gf_test_mlp *m, uint64_t seed, int layers, const int64_t *dims,
                      bool softmax, int max_batch);
void gf_test_mlp_free(gf_test_mlp *m);

/* Write the weights in dtype (F32, F16 or BF16) with PyTorch nn.Sequential
 * names ("0.weight", "2.bias" ...). */
gf_status gf_test_mlp_write(const gf_test_mlp *m, const char *path, gf_dtype dtype, gf_err *err);

/* The manifest JSON for it (malloc'd): input "x" [-1, in], output "y" [-1, out]. */
char *gf_test_mlp_manifest(const gf_test_mlp *m, const char *name);

/* y[batch, out] = the model at x[batch, in], in double, with the weights
 * rounded to dtype as they are stored. */
void gf_test_mlp_ref(const gf_test_mlp *m, gf_dtype dtype, const float *x, int64_t batch,
                     double *y);
/* The same for F32 weights, into floats. */
void gf_test_mlp_ref_f32(const gf_test_mlp *m, const float *x, int64_t batch, float *y);

/* Largest |a-b| / (1 + |b|) over n values (NaN when either has a NaN). */
double gf_test_max_rel_err(const float *a, const float *b, size_t n);

#endif /* GF_TEST_MLP_H */
