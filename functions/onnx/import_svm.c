/* gpufaas — an SVMClassifier's coefficients turned into the matrices its run
 * multiplies by (functions/onnx).
 *
 * ONNX keeps libsvm's layout: support vectors grouped by class
 * (vectors_per_class), and coefficients[C - 1][V] of which the decision
 * between classes i < j (pair p, in the order (0,1), (0,2), ..., (1,2), ...)
 * reads row j - 1 over class i's vectors and row i over class j's:
 *   d_p = rho[p] + sum_{v in i} coef[j-1][v] K(x, sv_v) + sum_{v in j} coef[i][v] K(x, sv_v).
 * The importer writes that as one dense matrix pairs[V][P], so the run is
 * one gemm of the kernel values by it, and the votes (d_p > 0 votes for i,
 * else for j) as votes[P][C] (+1 for i, -1 for j) and vote_base[C] (the
 * pairs each class wins when every d_p <= 0): votes = (d > 0) votes +
 * vote_base, exact in floats. They become initializers like any weights.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "functions/onnx/import_pb.h"

#define MAX_SVM_FLOATS ((size_t)1 << 28)

#define attr gf_onnx_pb_attr

void gf_onnx_svm_free(gf_onnx_svm *t)
{
    free(t->pairs);
    free(t->votes);
    free(t->vote_base);
    memset(t, 0, sizeof *t);
}

gf_status gf_onnx_svm_build(const Onnx__NodeProto *np, const char *lb, gf_onnx_svm *t,
                            gf_err *err)
{
    memset(t, 0, sizeof *t);
    const Onnx__AttributeProto *coef = attr(np, "coefficients"), *vpc = attr(np, "vectors_per_class"),
                               *labels = attr(np, "classlabels_ints");
    if (vpc == NULL || vpc->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS ||
        vpc->n_ints == 0)
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "node %s: an SVMClassifier without support "
                          "vectors (liblinear's form) is not supported", lb);
    if (labels == NULL || labels->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS ||
        labels->n_ints != vpc->n_ints || labels->n_ints < 2 || labels->n_ints > 1024)
        return gf_err_set(err, GF_ERR_INVALID, "node %s: classlabels_ints must name the %zu "
                          "classes of vectors_per_class (2 to 1024)", lb, vpc->n_ints);
    size_t c = vpc->n_ints, v = 0;
    for (size_t i = 0; i < c; i++) {
        if (vpc->ints[i] < 0 || (size_t)vpc->ints[i] > MAX_SVM_FLOATS)
            return gf_err_set(err, GF_ERR_INVALID, "node %s: vectors_per_class[%zu] is %" PRId64,
                              lb, i, vpc->ints[i]);
        v += (size_t)vpc->ints[i];
    }
    size_t p = c * (c - 1) / 2;
    if (v == 0 || v > MAX_SVM_FLOATS / p)
        return gf_err_set(err, GF_ERR_TOO_LARGE, "node %s: %zu support vectors for %zu classes",
                          lb, v, c);
    if (coef == NULL || coef->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS ||
        coef->n_floats != (c - 1) * v)
        return gf_err_set(err, GF_ERR_INVALID, "node %s: coefficients must have (classes - 1) * "
                          "support vectors = %zu values", lb, (c - 1) * v);
    t->v = (int64_t)v;
    t->p = (int64_t)p;
    t->c = (int64_t)c;
    t->pairs = calloc(v * p, sizeof *t->pairs);
    t->votes = calloc(p * c, sizeof *t->votes);
    t->vote_base = calloc(c, sizeof *t->vote_base);
    size_t *start = malloc((c + 1) * sizeof *start);
    if (t->pairs == NULL || t->votes == NULL || t->vote_base == NULL || start == NULL) {
        free(start);
        gf_onnx_svm_free(t);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    start[0] = 0;
    for (size_t i = 0; i < c; i++)
        start[i + 1] = start[i] + (size_t)vpc->ints[i];
    const float *cf = coef->floats;
    size_t k = 0;
    for (size_t i = 0; i < c; i++)
        for (size_t j = i + 1; j < c; j++, k++) {
            for (size_t s = start[i]; s < start[i + 1]; s++)
                t->pairs[s * p + k] = cf[(j - 1) * v + s];
            for (size_t s = start[j]; s < start[j + 1]; s++)
                t->pairs[s * p + k] = cf[i * v + s];
            t->votes[k * c + i] = 1.0f;
            t->votes[k * c + j] = -1.0f;
            t->vote_base[j] += 1.0f;
        }
    free(start);
    return GF_OK;
}
