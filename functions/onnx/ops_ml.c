/* gpufaas — ops of the ai.onnx.ml domain that scikit-learn exports
 * (skl2onnx) use for linear models, scalers and MLP pipelines
 * (functions/onnx).
 *
 * Their weights are attributes (LinearClassifier's coefficients, Scaler's
 * scale, ...). The attributes an entry's spec marks W (floats) or J (ints)
 * are lifted by the importer into initializers appended as inputs 1, 2, ...
 * in spec order (an absent one is an omitted input), so they live in the
 * weights file and the parameter cache like every other model's weights and
 * a kernel reads them on the device. Semantics
 * follow onnxruntime's cpu kernels where the spec is loose (the binary
 * LinearClassifier, a Normalizer row of zeros).
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "functions/onnx/ops_ml.h"

#define MASK_IN GF_ONNX_ML_MASK_IN

size_t gf_onnx_ml_align(size_t n) { return (n + 255) / 256 * 256; }
#define align256 gf_onnx_ml_align

gf_status gf_onnx_ml_matrix_in(gf_onnx_infer_ctx *c, const gf_onnx_tinfo *x, int64_t *rows,
                           int64_t *cols)
{
    if (!((1u << x->dtype) & MASK_IN))
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "X is %s; this op takes F32, F64, I64 or "
                            "I32 (computed in F32)", gf_dtype_st_name(x->dtype));
    if (x->rank != 1 && x->rank != 2)
        return gf_onnx_fail(c, GF_ERR_INVALID, "X must have rank 1 or 2, not %d", x->rank);
    *rows = x->rank == 2 ? x->shape[0] : 1;
    *cols = x->shape[x->rank - 1];
    return GF_OK;
}

gf_status gf_onnx_ml_weight_in(gf_onnx_infer_ctx *c, int k, gf_dtype dt, const char *what,
                           int64_t *n)
{
    const gf_onnx_tinfo *t = c->n->n_in > k ? c->in[k] : NULL;
    *n = 0;
    if (t == NULL)
        return GF_OK;
    if (t->dtype != dt)
        return gf_onnx_fail(c, GF_ERR_INVALID, "%s must be %s", what, gf_dtype_st_name(dt));
    *n = gf_onnx_numel(t);
    return GF_OK;
}

int gf_onnx_ml_x_f32(const gf_onnx_run_ctx *c, const float **x, void *at)
{
    const gf_onnx_tinfo *t = c->in[0].t;
    if (t->dtype == GF_DT_F32) {
        *x = c->in[0].data;
        return 0;
    }
    *x = at;
    return c->k->cast_ex(c->k->ctx, c->s, at, GF_DT_F32, c->in[0].data, t->dtype,
                         gf_onnx_numel(t));
}

/* ---- Scaler: y = (x - offset) * scale, per feature (last dim) or one value ------ */

static gf_status scaler_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    if (!((1u << x->dtype) & MASK_IN))
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "X is %s; Scaler takes F32, F64, I64 or I32",
                            gf_dtype_st_name(x->dtype));
    if (x->rank < 1)
        return gf_onnx_fail(c, GF_ERR_INVALID, "X must have rank 1 or more");
    int64_t cols = x->shape[x->rank - 1], n_off, n_scale;
    gf_status st;
    if ((st = gf_onnx_ml_weight_in(c, 1, GF_DT_F32, "offset", &n_off)) != GF_OK ||
        (st = gf_onnx_ml_weight_in(c, 2, GF_DT_F32, "scale", &n_scale)) != GF_OK)
        return st;
    if ((n_off > 1 && n_off != cols) || (n_scale > 1 && n_scale != cols))
        return gf_onnx_fail(c, GF_ERR_INVALID, "offset has %" PRId64 " values and scale %"
                            PRId64 "; X has %" PRId64 " features (1 or %" PRId64 " each)",
                            n_off, n_scale, cols, cols);
    c->aux[0] = n_off;
    c->aux[1] = n_scale;
    gf_onnx_set_out(c, 0, GF_DT_F32, x->rank, x->shape);
    return GF_OK;
}

static gf_status scaler_run(const gf_onnx_run_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0].t;
    int64_t n = gf_onnx_numel(x), cols = x->shape[x->rank - 1];
    float *y = c->out[0].data;
    int rc = c->k->cast_ex(c->k->ctx, c->s, y, GF_DT_F32, c->in[0].data, x->dtype, n);
    int64_t shape[2] = {cols ? n / cols : 0, cols}, dense[2] = {cols, 1};
    for (int w = 0; w < 2 && rc == 0; w++) {
        int64_t nw = c->aux[w];
        if (nw == 0)
            continue;
        int64_t ws[2] = {0, nw > 1 ? 1 : 0};
        rc = c->k->binary(c->k->ctx, c->s, w == 0 ? GF_BINARY_SUB : GF_BINARY_MUL, 2, shape, y,
                          y, dense, c->in[1 + w].data, ws, GF_DT_F32);
    }
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* ---- Normalizer: each row divided by its max, L1 or L2 norm (left as it is
 * when that is 0, as onnxruntime does) ------------------------------------- */

static gf_status normalizer_infer(gf_onnx_infer_ctx *c)
{
    int64_t rows = 0, cols = 0;
    gf_status st = gf_onnx_ml_matrix_in(c, c->in[0], &rows, &cols);
    if (st != GF_OK)
        return st;
    const char *norm = gf_onnx_attr_str(c->n, "norm", "MAX");
    if (strcmp(norm, "MAX") == 0)
        c->aux[0] = GF_REDUCE_MAX;
    else if (strcmp(norm, "L1") == 0)
        c->aux[0] = GF_REDUCE_L1;
    else if (strcmp(norm, "L2") == 0)
        c->aux[0] = GF_REDUCE_L2;
    else
        return gf_onnx_fail(c, GF_ERR_INVALID, "norm '%.16s' (MAX, L1 or L2)", norm);
    c->aux[1] = rows;
    c->aux[2] = cols;
    /* the norms, a BOOL per row, and the constants 0 and 1 */
    c->scratch = align256((size_t)rows * 4) + align256((size_t)rows) + 256;
    gf_onnx_set_out(c, 0, GF_DT_F32, c->in[0]->rank, c->in[0]->shape);
    return GF_OK;
}

static gf_status normalizer_run(const gf_onnx_run_ctx *c)
{
    int64_t rows = c->aux[1], cols = c->aux[2];
    const gf_onnx_tinfo *x = c->in[0].t;
    float *y = c->out[0].data;
    char *sc = c->scratch;
    float *norm = (float *)sc;
    unsigned char *zero_row = (unsigned char *)(sc + align256((size_t)rows * 4));
    float *consts = (float *)(sc + align256((size_t)rows * 4) + align256((size_t)rows));
    float zero = 0.0f, one = 1.0f;
    int64_t r1[1] = {rows}, s1[1] = {1}, s0[1] = {0};
    int64_t r2[2] = {rows, cols}, dense[2] = {cols, 1}, per_row[2] = {1, 0};
    int rc = c->k->cast_ex(c->k->ctx, c->s, y, GF_DT_F32, c->in[0].data, x->dtype, rows * cols);
    if (rc == 0)
        rc = c->k->reduce(c->k->ctx, c->s, (gf_reduce_op)c->aux[0], norm, y, rows, cols, 1);
    if (rc == 0)
        rc = c->k->fill(c->k->ctx, c->s, &consts[0], 1, &zero, 4);
    if (rc == 0)
        rc = c->k->fill(c->k->ctx, c->s, &consts[1], 1, &one, 4);
    if (rc == 0)
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_EQUAL, 1, r1, zero_row, norm, s1,
                          &consts[0], s0, GF_DT_F32);
    if (rc == 0)
        rc = c->k->where(c->k->ctx, c->s, 1, r1, norm, zero_row, s1, &consts[1], s0, norm, s1, 4);
    if (rc == 0)
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_DIV, 2, r2, y, y, dense, norm, per_row,
                          GF_DT_F32);
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* ---- LinearClassifier, LinearRegressor ----------------------------------------- */

enum { PT_NONE, PT_LOGISTIC, PT_SOFTMAX };

static gf_status post_transform(gf_onnx_infer_ctx *c, bool binary, int64_t *pt)
{
    const char *s = gf_onnx_attr_str(c->n, "post_transform", "NONE");
    if (strcmp(s, "NONE") == 0)
        *pt = PT_NONE;
    else if (strcmp(s, "LOGISTIC") == 0)
        *pt = PT_LOGISTIC;
    else if (strcmp(s, "SOFTMAX") == 0 || (binary && strcmp(s, "SOFTMAX_ZERO") == 0))
        *pt = PT_SOFTMAX;
    else
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "post_transform '%.16s' is not supported "
                            "here (NONE, LOGISTIC and SOFTMAX are)", s);
    return GF_OK;
}

/* aux: [0] rows, [1] features, [2] score columns C (coefficient rows),
 * [3] post transform, [4] binary (one coefficient row, two classes),
 * [5] scratch offset of X as F32, [6] of the scores, [7] of the rest */
static gf_status linclass_infer(gf_onnx_infer_ctx *c)
{
    int64_t rows = 0, cols = 0, n_coef, n_icpt, n_labels;
    gf_status st = gf_onnx_ml_matrix_in(c, c->in[0], &rows, &cols);
    if (st != GF_OK)
        return st;
    if (gf_onnx_attr_find(c->n, "classlabels_strings") != NULL) /* the importer's job */
        return gf_onnx_fail(c, GF_ERR_INVALID, "classlabels_strings left in the graph (the "
                            "importer turns them into class indices)");
    if ((st = gf_onnx_ml_weight_in(c, 1, GF_DT_F32, "coefficients", &n_coef)) != GF_OK ||
        (st = gf_onnx_ml_weight_in(c, 2, GF_DT_F32, "intercepts", &n_icpt)) != GF_OK ||
        (st = gf_onnx_ml_weight_in(c, 3, GF_DT_I64, "classlabels_ints", &n_labels)) != GF_OK)
        return st;
    if (cols == 0 || n_coef == 0 || n_coef % cols != 0)
        return gf_onnx_fail(c, GF_ERR_INVALID, "%" PRId64 " coefficients do not make rows of %"
                            PRId64 " features", n_coef, cols);
    int64_t nc = n_coef / cols;
    bool binary = nc == 1 && n_labels == 2;
    if (n_labels != nc && !binary)
        return gf_onnx_fail(c, GF_ERR_INVALID, "%" PRId64 " class labels for %" PRId64
                            " coefficient rows (class labels are required, one per row, or "
                            "two for one row)", n_labels, nc);
    if (n_icpt != 0 && n_icpt != nc)
        return gf_onnx_fail(c, GF_ERR_INVALID, "%" PRId64 " intercepts for %" PRId64
                            " coefficient rows", n_icpt, nc);
    int64_t pt = PT_NONE;
    if ((st = post_transform(c, binary, &pt)) != GF_OK)
        return st;
    c->aux[0] = rows;
    c->aux[1] = cols;
    c->aux[2] = nc;
    c->aux[3] = pt;
    c->aux[4] = binary;
    size_t off = 0;
    c->aux[5] = (int64_t)off;
    off += c->in[0]->dtype == GF_DT_F32 ? 0 : align256((size_t)(rows * cols) * 4);
    c->aux[6] = (int64_t)off;
    off += align256((size_t)(rows * (binary ? 2 : nc)) * 4);
    c->aux[7] = (int64_t)off;
    /* binary: s, 1 - s, the BOOL decision, the constants; else the argmax */
    off += binary ? 2 * align256((size_t)rows * 4) + align256((size_t)rows) + 256
                  : align256((size_t)rows * 8);
    c->scratch = off;
    int64_t ls[1] = {rows}, ps[2] = {rows, binary ? 2 : nc};
    gf_onnx_set_out(c, 0, GF_DT_I64, 1, ls);
    if (c->n->n_out > 1)
        gf_onnx_set_out(c, 1, GF_DT_F32, 2, ps);
    return GF_OK;
}

static gf_status linclass_run(const gf_onnx_run_ctx *c)
{
    int64_t rows = c->aux[0], cols = c->aux[1], nc = c->aux[2], pt = c->aux[3];
    char *sc = c->scratch;
    const float *x;
    int rc = gf_onnx_ml_x_f32(c, &x, sc + c->aux[5]);
    const void *coef = c->in[1].data;
    const void *icpt = c->n->n_in > 2 ? c->in[2].data : NULL;
    const int64_t *labels = c->in[3].data;
    float *scores = c->n->n_out > 1 && c->out[1].data != NULL ? c->out[1].data
                                                              : (float *)(sc + c->aux[6]);
    char *rest = sc + c->aux[7];
    gf_act act = pt == PT_LOGISTIC ? GF_ACT_SIGMOID : GF_ACT_IDENTITY;
    if (!c->aux[4]) {
        if (rc == 0)
            rc = c->k->gemm(c->k->ctx, c->s, 0, 1, rows, nc, cols, 1.0f, x, GF_DT_F32, cols,
                            coef, GF_DT_F32, cols, 0.0f, scores, nc);
        if (rc == 0 && (icpt != NULL || act != GF_ACT_IDENTITY))
            rc = c->k->bias_act(c->k->ctx, c->s, scores, rows, nc, icpt, GF_DT_F32, act);
        if (rc == 0 && pt == PT_SOFTMAX)
            rc = c->k->softmax(c->k->ctx, c->s, scores, scores, rows, nc, 0);
        int64_t *best = (int64_t *)rest;
        if (rc == 0)
            rc = c->k->reduce(c->k->ctx, c->s, GF_REDUCE_ARGMAX, best, scores, rows, nc, 1);
        if (rc == 0)
            rc = c->k->gather(c->k->ctx, c->s, c->out[0].data, labels, 1, nc, 1, best,
                              GF_DT_I64, rows, 8);
        return rc ? gf_onnx_kfail(c, rc) : GF_OK;
    }
    /* one score s per row: the scores are [1 - s, s] (s through the logistic
     * function first when asked), the label labels[1] when s exceeds the
     * threshold (0.5 after the logistic function, else 0), else labels[0] */
    float *s = (float *)rest;
    float *t = (float *)(rest + align256((size_t)rows * 4));
    unsigned char *pos = (unsigned char *)(rest + 2 * align256((size_t)rows * 4));
    float *consts = (float *)(rest + 2 * align256((size_t)rows * 4) + align256((size_t)rows));
    float one = 1.0f, thr = pt == PT_LOGISTIC ? 0.5f : 0.0f;
    int64_t r1[1] = {rows}, s1[1] = {1}, s0[1] = {0}, s2[1] = {2};
    if (rc == 0)
        rc = c->k->gemm(c->k->ctx, c->s, 0, 1, rows, 1, cols, 1.0f, x, GF_DT_F32, cols, coef,
                        GF_DT_F32, cols, 0.0f, s, 1);
    if (rc == 0 && (icpt != NULL || act != GF_ACT_IDENTITY))
        rc = c->k->bias_act(c->k->ctx, c->s, s, rows, 1, icpt, GF_DT_F32, act);
    if (rc == 0)
        rc = c->k->fill(c->k->ctx, c->s, &consts[0], 1, &one, 4);
    if (rc == 0)
        rc = c->k->fill(c->k->ctx, c->s, &consts[1], 1, &thr, 4);
    if (rc == 0)
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_SUB, 1, r1, t, &consts[0], s0, s, s1,
                          GF_DT_F32);
    if (rc == 0)
        rc = c->k->strided_copy(c->k->ctx, c->s, 1, r1, scores, s2, t, s1, 0, 4);
    if (rc == 0)
        rc = c->k->strided_copy(c->k->ctx, c->s, 1, r1, scores + 1, s2, s, s1, 0, 4);
    if (rc == 0)
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_GREATER, 1, r1, pos, s, s1, &consts[1], s0,
                          GF_DT_F32);
    if (rc == 0)
        rc = c->k->where(c->k->ctx, c->s, 1, r1, c->out[0].data, pos, s1, &labels[1], s0,
                         &labels[0], s0, 8);
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* aux: [0] rows, [1] features, [2] targets, [3] scratch bytes for X as F32 */
static gf_status linreg_infer(gf_onnx_infer_ctx *c)
{
    int64_t rows = 0, cols = 0, n_coef, n_icpt;
    gf_status st = gf_onnx_ml_matrix_in(c, c->in[0], &rows, &cols);
    if (st != GF_OK)
        return st;
    if ((st = gf_onnx_ml_weight_in(c, 1, GF_DT_F32, "coefficients", &n_coef)) != GF_OK ||
        (st = gf_onnx_ml_weight_in(c, 2, GF_DT_F32, "intercepts", &n_icpt)) != GF_OK)
        return st;
    int64_t targets = gf_onnx_attr_int(c->n, "targets", 1);
    if (targets < 1 || cols == 0 || n_coef != targets * cols)
        return gf_onnx_fail(c, GF_ERR_INVALID, "%" PRId64 " coefficients for %" PRId64
                            " targets of %" PRId64 " features", n_coef, targets, cols);
    if (n_icpt != 0 && n_icpt != targets)
        return gf_onnx_fail(c, GF_ERR_INVALID, "%" PRId64 " intercepts for %" PRId64 " targets",
                            n_icpt, targets);
    const char *pt = gf_onnx_attr_str(c->n, "post_transform", "NONE");
    if (strcmp(pt, "NONE") != 0)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "post_transform '%.16s' (only NONE is "
                            "supported)", pt);
    c->aux[0] = rows;
    c->aux[1] = cols;
    c->aux[2] = targets;
    if (c->in[0]->dtype != GF_DT_F32)
        c->scratch = (size_t)(rows * cols) * 4;
    int64_t shape[2] = {rows, targets};
    gf_onnx_set_out(c, 0, GF_DT_F32, 2, shape);
    return GF_OK;
}

static gf_status linreg_run(const gf_onnx_run_ctx *c)
{
    int64_t rows = c->aux[0], cols = c->aux[1], targets = c->aux[2];
    const float *x;
    int rc = gf_onnx_ml_x_f32(c, &x, c->scratch);
    if (rc == 0)
        rc = c->k->gemm(c->k->ctx, c->s, 0, 1, rows, targets, cols, 1.0f, x, GF_DT_F32, cols,
                        c->in[1].data, GF_DT_F32, cols, 0.0f, c->out[0].data, targets);
    if (rc == 0 && c->n->n_in > 2 && c->in[2].data != NULL)
        rc = c->k->bias_act(c->k->ctx, c->s, c->out[0].data, rows, targets, c->in[2].data,
                            GF_DT_F32, GF_ACT_IDENTITY);
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* ---- ArrayFeatureExtractor: Y = X[..., indices] --------------------------------- */

static gf_status afe_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0], *ids = c->in[1];
    if (ids->dtype != GF_DT_I64)
        return gf_onnx_fail(c, GF_ERR_INVALID, "indices must be I64");
    size_t es = gf_dtype_size(x->dtype);
    if (x->rank < 1 || (es != 1 && es != 2 && es != 4 && es != 8))
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "X must be a tensor of rank 1 or more of "
                            "numbers");
    int64_t dim = x->shape[x->rank - 1], nid = gf_onnx_numel(ids);
    if (ids->host != NULL)
        for (int64_t i = 0; i < nid; i++) {
            int64_t v = gf_onnx_const_i64(ids->host, i);
            if (v < 0 || v >= dim)
                return gf_onnx_fail(c, GF_ERR_INVALID, "index %" PRId64 " is outside [0, %"
                                    PRId64 ")", v, dim);
        }
    int64_t shape[GF_MAX_RANK];
    int32_t r = x->rank == 1 ? 2 : x->rank;
    for (int32_t k = 0; k < r - 1; k++)
        shape[k] = x->rank == 1 ? 1 : x->shape[k];
    shape[r - 1] = nid;
    c->aux[0] = dim ? gf_onnx_numel(x) / dim : 0;
    c->aux[1] = dim;
    gf_onnx_set_out(c, 0, x->dtype, r, shape);
    return GF_OK;
}

static gf_status afe_run(const gf_onnx_run_ctx *c)
{
    const gf_onnx_tinfo *ids = c->in[1].t;
    int rc = c->k->gather(c->k->ctx, c->s, c->out[0].data, c->in[0].data, c->aux[0], c->aux[1],
                          1, c->in[1].data, ids->dtype, gf_onnx_numel(ids),
                          (int64_t)gf_dtype_size(c->in[0].t->dtype));
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* ---- Binarizer: y = x > threshold (1 or 0, F32) --------------------------------- */

static gf_status binarizer_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    if (x->dtype != GF_DT_F32)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "X is %s; Binarizer runs on F32",
                            gf_dtype_st_name(x->dtype));
    c->scratch = align256((size_t)gf_onnx_numel(x)) + 256;
    gf_onnx_set_out(c, 0, GF_DT_F32, x->rank, x->shape);
    return GF_OK;
}

static gf_status binarizer_run(const gf_onnx_run_ctx *c)
{
    int64_t n = gf_onnx_numel(c->in[0].t), r1[1] = {n}, s1[1] = {1}, s0[1] = {0};
    unsigned char *pos = c->scratch;
    float *thr = (float *)((char *)c->scratch + align256((size_t)n));
    float t = gf_onnx_attr_float(c->n, "threshold", 0.0f);
    int rc = c->k->fill(c->k->ctx, c->s, thr, 1, &t, 4);
    if (rc == 0)
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_GREATER, 1, r1, pos, c->in[0].data, s1,
                          thr, s0, GF_DT_F32);
    if (rc == 0)
        rc = c->k->cast_ex(c->k->ctx, c->s, c->out[0].data, GF_DT_F32, pos, GF_DT_BOOL, n);
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* ---- Imputer: replace a value (or NaN) per feature --------------------------------- */

/* inputs: 1 imputed_value_floats (F32), 2 imputed_value_int64s (I64) */
static gf_status imputer_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    int64_t nf, ni;
    gf_status st;
    if ((st = gf_onnx_ml_weight_in(c, 1, GF_DT_F32, "imputed_value_floats", &nf)) != GF_OK ||
        (st = gf_onnx_ml_weight_in(c, 2, GF_DT_I64, "imputed_value_int64s", &ni)) != GF_OK)
        return st;
    bool fl = x->dtype == GF_DT_F32;
    if (!fl && x->dtype != GF_DT_I64)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "X is %s; Imputer runs on F32 or I64",
                            gf_dtype_st_name(x->dtype));
    int64_t nv = fl ? nf : ni;
    int64_t cols = x->rank >= 1 ? x->shape[x->rank - 1] : 1;
    if (x->rank != 2 || (nv != 1 && nv != cols))
        return gf_onnx_fail(c, GF_ERR_INVALID, "X must be [N, C] and imputed_value_%s give 1 or "
                            "C values", fl ? "floats" : "int64s");
    c->aux[0] = nv;
    c->aux[1] = fl && isnan(gf_onnx_attr_float(c->n, "replaced_value_float", 0.0f));
    c->scratch = align256((size_t)gf_onnx_numel(x)) + 256;
    gf_onnx_set_out(c, 0, x->dtype, x->rank, x->shape);
    return GF_OK;
}

static gf_status imputer_run(const gf_onnx_run_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0].t;
    bool fl = x->dtype == GF_DT_F32;
    int64_t shape[2] = {x->shape[0], x->shape[1]}, dense[2] = {x->shape[1], 1};
    int64_t per_col[2] = {0, c->aux[0] > 1 ? 1 : 0}, zero[2] = {0, 0};
    unsigned char *hit = c->scratch;
    void *rv = (char *)c->scratch + align256((size_t)gf_onnx_numel(x));
    const void *imputed = c->in[fl ? 1 : 2].data;
    int rc;
    if (c->aux[1]) {
        /* NaN: y = x == x ? x : imputed */
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_EQUAL, 2, shape, hit, c->in[0].data, dense,
                          c->in[0].data, dense, GF_DT_F32);
        if (rc == 0)
            rc = c->k->where(c->k->ctx, c->s, 2, shape, c->out[0].data, hit, dense,
                             c->in[0].data, dense, imputed, per_col, 4);
        return rc ? gf_onnx_kfail(c, rc) : GF_OK;
    }
    float f = gf_onnx_attr_float(c->n, "replaced_value_float", 0.0f);
    int64_t i = gf_onnx_attr_int(c->n, "replaced_value_int64", 0);
    rc = c->k->fill(c->k->ctx, c->s, rv, 1, fl ? (const void *)&f : (const void *)&i,
                    fl ? 4 : 8);
    if (rc == 0)
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_EQUAL, 2, shape, hit, c->in[0].data, dense,
                          rv, zero, x->dtype);
    if (rc == 0)
        rc = c->k->where(c->k->ctx, c->s, 2, shape, c->out[0].data, hit, dense, imputed,
                         per_col, c->in[0].data, dense, fl ? 4 : 8);
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* ---- the table ------------------------------------------------------------------ */

/* ---- LabelEncoder: numbers mapped through a table ------------------------------ *
 * Y[i] = values[k] for the first k with keys[k] == X[i], else the default
 * (IsolationForest's path lengths from its trees' leaf ids). Per block of
 * elements: X compared with every key ([m, K] BOOL), the first match by
 * ArgMax over the 0/1 matches, whether there is one by Max, then a gather of
 * the values and a where with the default. Numeric keys and values only. */
#define LE_BLOCK ((size_t)4 << 20)

/* inputs: 1 keys_floats, 2 keys_int64s, 3 values_floats, 4 values_int64s.
 * aux: [0] n, [1] K, [2] block, [3] keys input, [4] values input, [5] value
 * dtype, [6] default (F32 bits or I64), scratch offsets [7] matches F32,
 * [8] first match, [9] found F32, [10] found BOOL, [11] values, [12] default */
static gf_status labelenc_infer(gf_onnx_infer_ctx *c)
{
    if (gf_onnx_attr_find(c->n, "keys_strings") != NULL ||
        gf_onnx_attr_find(c->n, "values_strings") != NULL)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "string keys or values are not supported "
                            "(numbers to numbers only)");
    int64_t kf, ki, vf, vi;
    gf_status st;
    if ((st = gf_onnx_ml_weight_in(c, 1, GF_DT_F32, "keys_floats", &kf)) != GF_OK ||
        (st = gf_onnx_ml_weight_in(c, 2, GF_DT_I64, "keys_int64s", &ki)) != GF_OK ||
        (st = gf_onnx_ml_weight_in(c, 3, GF_DT_F32, "values_floats", &vf)) != GF_OK ||
        (st = gf_onnx_ml_weight_in(c, 4, GF_DT_I64, "values_int64s", &vi)) != GF_OK)
        return st;
    if ((kf > 0) == (ki > 0) || (vf > 0) == (vi > 0))
        return gf_onnx_fail(c, GF_ERR_INVALID, "give one of keys_floats and keys_int64s and one "
                            "of values_floats and values_int64s, not empty");
    int64_t nk = kf ? kf : ki;
    if ((vf ? vf : vi) != nk)
        return gf_onnx_fail(c, GF_ERR_INVALID, "%" PRId64 " keys and %" PRId64 " values",
                            nk, vf ? vf : vi);
    const gf_onnx_tinfo *x = c->in[0];
    gf_dtype kdt = kf ? GF_DT_F32 : GF_DT_I64, vdt = vf ? GF_DT_F32 : GF_DT_I64;
    if (x->dtype != kdt)
        return gf_onnx_fail(c, GF_ERR_INVALID, "X is %s; the keys are %s",
                            gf_dtype_st_name(x->dtype), gf_dtype_st_name(kdt));
    int64_t n = gf_onnx_numel(x);
    int64_t block = (int64_t)(LE_BLOCK / ((size_t)nk * 5));
    block = block < 1 ? 1 : block > n ? (n > 0 ? n : 1) : block;
    size_t m = (size_t)block, at = align256(m * (size_t)nk);
    c->aux[0] = n;
    c->aux[1] = nk;
    c->aux[2] = block;
    c->aux[3] = kf ? 1 : 2;
    c->aux[4] = vf ? 3 : 4;
    c->aux[5] = vdt;
    if (vf) {
        float d = gf_onnx_attr_float(c->n, "default_float", -0.0f);
        uint32_t bits;
        memcpy(&bits, &d, 4);
        c->aux[6] = bits;
    } else {
        c->aux[6] = gf_onnx_attr_int(c->n, "default_int64", -1);
    }
    c->aux[7] = (int64_t)at, at += align256(m * (size_t)nk * 4);
    c->aux[8] = (int64_t)at, at += align256(m * 8);
    c->aux[9] = (int64_t)at, at += align256(m * 4);
    c->aux[10] = (int64_t)at, at += align256(m);
    c->aux[11] = (int64_t)at, at += align256(m * 8);
    c->aux[12] = (int64_t)at, at += 256;
    c->scratch = at;
    gf_onnx_set_out(c, 0, vdt, x->rank, x->shape);
    return GF_OK;
}

static gf_status labelenc_run(const gf_onnx_run_ctx *c)
{
    int64_t n = c->aux[0], nk = c->aux[1], block = c->aux[2];
    gf_dtype kdt = c->in[c->aux[3]].t->dtype, vdt = (gf_dtype)c->aux[5];
    int64_t ke = (int64_t)gf_dtype_size(kdt), ve = (int64_t)gf_dtype_size(vdt);
    char *sc = c->scratch;
    unsigned char *eq = (unsigned char *)sc, *foundb = (unsigned char *)(sc + c->aux[10]);
    float *eqf = (float *)(sc + c->aux[7]), *found = (float *)(sc + c->aux[9]);
    int64_t *first = (int64_t *)(sc + c->aux[8]);
    void *vals = sc + c->aux[11], *dflt = sc + c->aux[12];
    const gf_kernels *k = c->k;
    int64_t dv = c->aux[6];
    uint32_t fbits = (uint32_t)dv;
    int rc = k->fill(k->ctx, c->s, dflt, 1, vdt == GF_DT_F32 ? (const void *)&fbits : &dv, ve);
    for (int64_t b0 = 0; rc == 0 && b0 < n; b0 += block) {
        int64_t m = n - b0 < block ? n - b0 : block;
        int64_t shape[2] = {m, nk}, sx[2] = {1, 0}, sk[2] = {0, 1}, one[1] = {1}, zero[1] = {0};
        rc = k->binary(k->ctx, c->s, GF_BINARY_EQUAL, 2, shape, eq,
                       (const char *)c->in[0].data + b0 * ke, sx, c->in[c->aux[3]].data, sk, kdt);
        if (rc == 0)
            rc = k->cast_ex(k->ctx, c->s, eqf, GF_DT_F32, eq, GF_DT_BOOL, m * nk);
        if (rc == 0)
            rc = k->reduce(k->ctx, c->s, GF_REDUCE_ARGMAX, first, eqf, m, nk, 1);
        if (rc == 0)
            rc = k->reduce(k->ctx, c->s, GF_REDUCE_MAX, found, eqf, m, nk, 1);
        if (rc == 0)
            rc = k->cast_ex(k->ctx, c->s, foundb, GF_DT_BOOL, found, GF_DT_F32, m);
        if (rc == 0)
            rc = k->gather(k->ctx, c->s, vals, c->in[c->aux[4]].data, 1, nk, 1, first,
                           GF_DT_I64, m, ve);
        if (rc == 0)
            rc = k->where(k->ctx, c->s, 1, &m, (char *)c->out[0].data + b0 * ve, foundb, one,
                          vals, one, dflt, zero, ve);
    }
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* ---- OneHotEncoder: Y[..., j] = (X == cats[j]), F32 ------------------------------ *
 * X (I64, I32 or F32, which is truncated to an integer as onnxruntime does)
 * compared with every category into Y's [n, C] layout. zeros = 0 (what
 * skl2onnx writes for handle_unknown='error') makes a value outside the
 * categories an error: its row's Max is 0, and a checked gather of index C
 * (out of range) fails the step. */

/* inputs: 1 cats_int64s. aux: [0] n, [1] C, [2] zeros, scratch offsets: [3]
 * X as I64, [4] matches, [5] row max, [6] found, [7] check ids, [8] gathered,
 * [9] the constants 0 and C */
static gf_status onehot_infer(gf_onnx_infer_ctx *c)
{
    if (gf_onnx_attr_find(c->n, "cats_strings") != NULL)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "string categories are not supported "
                            "(gpufaas takes no string inputs)");
    int64_t nc;
    gf_status st = gf_onnx_ml_weight_in(c, 1, GF_DT_I64, "cats_int64s", &nc);
    if (st != GF_OK)
        return st;
    if (nc == 0)
        return gf_onnx_fail(c, GF_ERR_INVALID, "cats_int64s is missing or empty");
    const gf_onnx_tinfo *x = c->in[0];
    if (x->dtype != GF_DT_I64 && x->dtype != GF_DT_I32 && x->dtype != GF_DT_F32)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "X is %s; OneHotEncoder takes I64, I32 or "
                            "F32", gf_dtype_st_name(x->dtype));
    if (x->rank >= GF_MAX_RANK)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "X has rank %d; Y would exceed %d",
                            x->rank, GF_MAX_RANK);
    size_t n = (size_t)gf_onnx_numel(x), at = 0;
    c->aux[0] = (int64_t)n;
    c->aux[1] = nc;
    c->aux[2] = gf_onnx_attr_int(c->n, "zeros", 1) != 0;
    c->aux[3] = (int64_t)at, at += align256(n * 8);
    c->aux[4] = (int64_t)at, at += align256(n * (size_t)nc);
    c->aux[5] = (int64_t)at, at += align256(n * 4);
    c->aux[6] = (int64_t)at, at += align256(n);
    c->aux[7] = (int64_t)at, at += align256(n * 8);
    c->aux[8] = (int64_t)at, at += align256(n * 8);
    c->aux[9] = (int64_t)at, at += 256;
    c->scratch = at;
    int64_t shape[GF_MAX_RANK];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->rank] = nc;
    gf_onnx_set_out(c, 0, GF_DT_F32, x->rank + 1, shape);
    return GF_OK;
}

static gf_status onehot_run(const gf_onnx_run_ctx *c)
{
    int64_t n = c->aux[0], nc = c->aux[1];
    if (n == 0)
        return GF_OK;
    char *sc = c->scratch;
    const gf_kernels *k = c->k;
    const void *x = c->in[0].data;
    int rc = 0;
    if (c->in[0].t->dtype != GF_DT_I64) {
        rc = k->cast_ex(k->ctx, c->s, sc + c->aux[3], GF_DT_I64, x, c->in[0].t->dtype, n);
        x = sc + c->aux[3];
    }
    unsigned char *eq = (unsigned char *)(sc + c->aux[4]);
    int64_t shape[2] = {n, nc}, sx[2] = {1, 0}, sk[2] = {0, 1};
    if (rc == 0)
        rc = k->binary(k->ctx, c->s, GF_BINARY_EQUAL, 2, shape, eq, x, sx, c->in[1].data, sk,
                       GF_DT_I64);
    if (rc == 0)
        rc = k->cast_ex(k->ctx, c->s, c->out[0].data, GF_DT_F32, eq, GF_DT_BOOL, n * nc);
    if (rc != 0 || c->aux[2])
        return rc ? gf_onnx_kfail(c, rc) : GF_OK;
    /* zeros = 0: every value must be a category */
    float *rmax = (float *)(sc + c->aux[5]);
    unsigned char *found = (unsigned char *)(sc + c->aux[6]);
    int64_t *ids = (int64_t *)(sc + c->aux[7]), *cst = (int64_t *)(sc + c->aux[9]);
    int64_t zero = 0, one[1] = {1}, none[1] = {0};
    rc = k->reduce(k->ctx, c->s, GF_REDUCE_MAX, rmax, c->out[0].data, n, nc, 1);
    if (rc == 0)
        rc = k->cast_ex(k->ctx, c->s, found, GF_DT_BOOL, rmax, GF_DT_F32, n);
    if (rc == 0)
        rc = k->fill(k->ctx, c->s, cst, 1, &zero, 8);
    if (rc == 0)
        rc = k->fill(k->ctx, c->s, cst + 1, 1, &nc, 8);
    if (rc == 0)
        rc = k->where(k->ctx, c->s, 1, &n, ids, found, one, cst, none, cst + 1, none, 8);
    if (rc == 0 &&
        k->gather(k->ctx, c->s, sc + c->aux[8], c->in[1].data, 1, nc, 1, ids, GF_DT_I64, n, 8))
        return gf_onnx_rfail(c, GF_ERR_INVALID, "a value of X is not one of the %" PRId64
                             " categories (zeros = 0, scikit-learn's handle_unknown='error')",
                             nc);
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

#define ML "ai.onnx.ml"

const gf_onnx_op gf_onnx_ops_ml[] = {
    {ML, "Scaler", {1}, 1, 3, 1, 1, "offset:W,scale:W", 0, 0, scaler_infer, scaler_run,
     "X F32, F64, I64 or I32; offset and scale per feature or one value", 0},
    {ML, "Normalizer", {1}, 1, 1, 1, 1, "norm:s", 0, 0, normalizer_infer, normalizer_run,
     "X [N, C] or [C]; a row whose norm is 0 is left as it is", 0},
    {ML, "LinearClassifier", {1}, 1, 4, 1, 2, "coefficients:W,intercepts:W,classlabels_ints:J,"
     "classlabels_strings:S,multi_class:i,post_transform:s", 0, 0, linclass_infer,
     linclass_run, "integer or string class labels; post_transform NONE, LOGISTIC or SOFTMAX", 0},
    {ML, "LinearRegressor", {1}, 1, 3, 1, 1, "coefficients:W,intercepts:W,post_transform:s,"
     "targets:i", 0, 0, linreg_infer, linreg_run, "post_transform NONE", 0},
    {ML, "ArrayFeatureExtractor", {1}, 2, 2, 1, 1, "", 0, 0, afe_infer, afe_run,
     "numbers and BOOL; indices checked", 0},
    {ML, "Binarizer", {1}, 1, 1, 1, 1, "threshold:f", 0, 0, binarizer_infer, binarizer_run,
     "F32", 0},
    {ML, "LabelEncoder", {2, 4}, 1, 5, 1, 1, "keys_floats:W,keys_int64s:J,values_floats:W,"
     "values_int64s:J,default_float:f,default_int64:i,default_string:s,keys_strings:S,"
     "values_strings:S", 0, 0, labelenc_infer, labelenc_run, "numeric keys (F32 or I64, X of "
     "their type) and values (F32 or I64); no strings, no *_tensor attributes", 0},
    {ML, "OneHotEncoder", {1}, 1, 2, 1, 1, "cats_int64s:J,cats_strings:S,zeros:i", 0, 0,
     onehot_infer, onehot_run, "X I64, I32 or F32 (truncated); integer categories (no "
     "strings); zeros = 0: a value outside them fails the request (on cuda at the next sync)",
     0},
    {ML, "Imputer", {1}, 1, 3, 1, 1, "imputed_value_floats:W,imputed_value_int64s:J,"
     "replaced_value_float:f,replaced_value_int64:i", 0, 0, imputer_infer, imputer_run,
     "X [N, C], F32 or I64", 0},
    {.type = NULL},
};
