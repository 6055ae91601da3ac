/* gpufaas — the ONNX gather ops: Gather, GatherElements, GatherND
 * (functions/onnx).
 *
 * Gather runs the gather kernel directly. GatherElements and GatherND are
 * one gather over the data viewed as rows, at the flat row of each output
 * element: computed when the plan is made from indices known then (torch
 * exports them over positions and shapes), else (GatherElements) on the
 * device from the indices and the offsets the plan computed.
 */
#include <inttypes.h>
#include <string.h>

#include "core/dtype.h"
#include "functions/onnx/optable.h"

/* ---- Gather -------------------------------------------------------------------- */

static gf_status gather_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0], *ids = c->in[1];
    int64_t axis;
    if (!gf_onnx_axis(gf_onnx_attr_int(c->n, "axis", 0), x->rank, false, &axis))
        return gf_onnx_fail(c, GF_ERR_INVALID, "axis out of range");
    if (ids->dtype != GF_DT_I64 && ids->dtype != GF_DT_I32)
        return gf_onnx_fail(c, GF_ERR_INVALID, "indices are %s, not I64 or I32",
                            gf_dtype_st_name(ids->dtype));
    int32_t rank = x->rank - 1 + ids->rank;
    if (rank > GF_MAX_RANK)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "output rank %d", rank);
    int64_t shape[GF_MAX_RANK];
    int32_t r = 0;
    for (int32_t k = 0; k < axis; k++)
        shape[r++] = x->shape[k];
    for (int32_t k = 0; k < ids->rank; k++)
        shape[r++] = ids->shape[k];
    for (int32_t k = (int32_t)axis + 1; k < x->rank; k++)
        shape[r++] = x->shape[k];
    int64_t outer = 1, inner = 1, dim = x->shape[axis];
    for (int32_t k = 0; k < axis; k++)
        outer *= x->shape[k];
    for (int32_t k = (int32_t)axis + 1; k < x->rank; k++)
        inner *= x->shape[k];
    c->aux[0] = outer;
    c->aux[1] = dim;
    c->aux[2] = inner;
    gf_onnx_set_out(c, 0, x->dtype, rank, shape);
    if (ids->host != NULL) {
        for (int64_t i = 0; i < gf_onnx_numel(ids); i++) {
            int64_t v = gf_onnx_const_i64(ids->host, i);
            if (v < -dim || v >= dim)
                return gf_onnx_fail(c, GF_ERR_INVALID, "index %" PRId64 " is outside [-%" PRId64
                                    ", %" PRId64 ")", v, dim, dim);
        }
    }
    if (c->may_fold && gf_onnx_numel(&c->out[0]) <= GF_ONNX_FOLD_MAX) {
        gf_onnx_const *y;
        gf_status st = gf_onnx_fold_new(c, 0, x->dtype, rank, shape, &y);
        if (st != GF_OK)
            return st;
        size_t es = gf_dtype_size(x->dtype);
        int64_t nid = gf_onnx_numel(ids);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < nid; j++) {
                int64_t v = gf_onnx_const_i64(ids->host, j);
                v = v < 0 ? v + dim : v;
                memcpy((char *)y->data + ((o * nid + j) * inner) * (int64_t)es,
                       (const char *)x->host->data + ((o * dim + v) * inner) * (int64_t)es,
                       (size_t)inner * es);
            }
    }
    return GF_OK;
}

static gf_status gather_run(const gf_onnx_run_ctx *c)
{
    const gf_onnx_tinfo *ids = c->in[1].t;
    int rc = c->k->gather(c->k->ctx, c->s, c->out[0].data, c->in[0].data, c->aux[0], c->aux[1],
                          c->aux[2], c->in[1].data, ids->dtype, gf_onnx_numel(ids),
                          (int64_t)gf_dtype_size(c->in[0].t->dtype));
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* ---- GatherElements, GatherND: flat rows from host indices ---------------------- */

/* Output k's rows: y viewed as [n, inner] takes x viewed as [rows, inner]
 * at rows ids[j]. Folds when x is known; else the ids go to the device. */
static gf_status rows_finish(gf_onnx_infer_ctx *c, const gf_onnx_tinfo *x, gf_onnx_const *ids,
                             int64_t rows, int64_t inner, int32_t rank, const int64_t *shape)
{
    size_t es = gf_dtype_size(x->dtype);
    int64_t n = (int64_t)(ids->nbytes / sizeof(int64_t));
    gf_onnx_set_out(c, 0, x->dtype, rank, shape);
    c->aux[0] = rows;
    c->aux[1] = inner;
    c->aux[2] = n;
    if (x->host != NULL && n * inner <= GF_ONNX_FOLD_MAX) {
        gf_onnx_const *y;
        gf_status st = gf_onnx_fold_new(c, 0, x->dtype, rank, shape, &y);
        for (int64_t j = 0; st == GF_OK && j < n; j++) {
            int64_t r = gf_onnx_const_i64(ids, j);
            memcpy((char *)y->data + j * inner * (int64_t)es,
                   (const char *)x->host->data + r * inner * (int64_t)es, (size_t)(inner * es));
        }
        gf_onnx_const_free(ids);
        return st;
    }
    if (es != 1 && es != 2 && es != 4 && es != 8) {
        gf_onnx_const_free(ids);
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "type %s", gf_dtype_st_name(x->dtype));
    }
    c->step_const = ids;
    return GF_OK;
}

static int elements_offsets(const gf_onnx_run_ctx *c, int64_t *f);

static gf_status rows_run(const gf_onnx_run_ctx *c)
{
    const void *ids = c->step_const;
    int rc = 0;
    if (c->aux[3]) {
        size_t w = ((size_t)c->aux[2] * 8 + 255) / 256 * 256;
        int64_t *f = (int64_t *)((char *)c->scratch + 2 * w);
        rc = elements_offsets(c, f);
        ids = f;
    }
    if (rc == 0)
        rc = c->k->gather(c->k->ctx, c->s, c->out[0].data, c->in[0].data, 1, c->aux[0],
                          c->aux[1], ids, GF_DT_I64, c->aux[2],
                          (int64_t)gf_dtype_size(c->in[0].t->dtype));
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

static gf_status index_dtype(gf_onnx_infer_ctx *c, const gf_onnx_tinfo *ids)
{
    if (ids->dtype != GF_DT_I64 && ids->dtype != GF_DT_I32)
        return gf_onnx_fail(c, GF_ERR_INVALID, "indices are %s, not I64 or I32",
                            gf_dtype_st_name(ids->dtype));
    return GF_OK;
}

/* GatherElements: output element i reads x at i's coordinates with the
 * axis coordinate replaced by indices[i]. Its flat offset is base[i] +
 * indices[i] * stride[axis], base[i] the offset of i's coordinates with the
 * axis one at 0. Indices known when the plan is made fold into flat rows;
 * others (RoBERTa's position ids) are turned into flat offsets on the
 * device: step constant [base..., 0, dim, stride, numel]. */
static gf_status gather_elements_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0], *idx = c->in[1];
    gf_status st = index_dtype(c, idx);
    if (st != GF_OK)
        return st;
    int64_t axis;
    if (x->rank < 1 || idx->rank != x->rank ||
        !gf_onnx_axis(gf_onnx_attr_int(c->n, "axis", 0), x->rank, false, &axis))
        return gf_onnx_fail(c, GF_ERR_INVALID, "data and indices must have one rank and axis "
                            "must be one of its dims");
    for (int32_t k = 0; k < x->rank; k++)
        if (k != axis && idx->shape[k] > x->shape[k])
            return gf_onnx_fail(c, GF_ERR_INVALID, "indices dim %d (%" PRId64 ") exceeds the "
                                "data's (%" PRId64 ")", k, idx->shape[k], x->shape[k]);
    int64_t n = gf_onnx_numel(idx), xs[GF_MAX_RANK], dim = x->shape[axis];
    gf_onnx_strides(x->rank, x->shape, xs);
    bool host = idx->host != NULL;
    int64_t len = host ? n : n + 4;
    gf_onnx_const *ids;
    if ((st = gf_onnx_const_new(GF_DT_I64, 1, &len, &ids, c->err)) != GF_OK)
        return st;
    for (int64_t i = 0; i < n; i++) {
        int64_t v = host ? gf_onnx_const_i64(idx->host, i) : 0, rem = i, off = 0;
        if (v < -dim || v >= dim) {
            gf_onnx_const_free(ids);
            return gf_onnx_fail(c, GF_ERR_INVALID, "index %" PRId64 " is outside [-%" PRId64
                                ", %" PRId64 ")", v, dim, dim);
        }
        for (int32_t k = x->rank - 1; k >= 0; k--) {
            int64_t coord = idx->shape[k] ? rem % idx->shape[k] : 0;
            rem = idx->shape[k] ? rem / idx->shape[k] : 0;
            off += (k == axis ? (v < 0 ? v + dim : v) : coord) * xs[k];
        }
        gf_onnx_const_set_i64(ids, i, off);
    }
    if (host)
        return rows_finish(c, x, ids, gf_onnx_numel(x), 1, idx->rank, idx->shape);
    int64_t tail[4] = {0, dim, xs[axis], gf_onnx_numel(x)};
    for (int k = 0; k < 4; k++)
        gf_onnx_const_set_i64(ids, n + k, tail[k]);
    size_t es = gf_dtype_size(x->dtype);
    if (es != 1 && es != 2 && es != 4 && es != 8) {
        gf_onnx_const_free(ids);
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "type %s", gf_dtype_st_name(x->dtype));
    }
    c->step_const = ids;
    c->aux[0] = gf_onnx_numel(x);
    c->aux[1] = 1;
    c->aux[2] = n;
    c->aux[3] = 1; /* flat offsets computed on the device */
    /* scratch: t, u, f (I64), two BOOL masks */
    size_t w = ((size_t)n * 8 + 255) / 256 * 256, b = ((size_t)n + 255) / 256 * 256;
    c->scratch = 3 * w + 2 * b;
    gf_onnx_set_out(c, 0, x->dtype, idx->rank, idx->shape);
    return GF_OK;
}

/* The flat offsets of GatherElements' device path (see above), into f. */
static int elements_offsets(const gf_onnx_run_ctx *c, int64_t *f)
{
    int64_t n = c->aux[2], r1[1] = {n}, s1[1] = {1}, s0[1] = {0};
    size_t w = ((size_t)n * 8 + 255) / 256 * 256, b = ((size_t)n + 255) / 256 * 256;
    char *sc = c->scratch;
    int64_t *t = (int64_t *)sc, *u = (int64_t *)(sc + w);
    unsigned char *m1 = (unsigned char *)(sc + 3 * w), *m2 = m1 + b;
    const int64_t *base = c->step_const, *zero = base + n, *dim = zero + 1, *stride = zero + 2,
                  *numel = zero + 3;
    int rc = c->k->cast_ex(c->k->ctx, c->s, t, GF_DT_I64, c->in[1].data, c->in[1].t->dtype, n);
    /* t = t < 0 ? t + dim : t */
    if (rc == 0)
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_LESS, 1, r1, m1, t, s1, zero, s0, GF_DT_I64);
    if (rc == 0)
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_ADD, 1, r1, u, t, s1, dim, s0, GF_DT_I64);
    if (rc == 0)
        rc = c->k->where(c->k->ctx, c->s, 1, r1, t, m1, s1, u, s1, t, s1, 8);
    /* in range: 0 <= t < dim */
    if (rc == 0)
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_GREATER_EQUAL, 1, r1, m1, t, s1, zero, s0,
                          GF_DT_I64);
    if (rc == 0)
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_LESS, 1, r1, m2, t, s1, dim, s0, GF_DT_I64);
    if (rc == 0)
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_AND, 1, r1, m1, m1, s1, m2, s1, GF_DT_BOOL);
    /* f = base + t * stride, or numel (which the gather refuses) out of range */
    if (rc == 0)
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_MUL, 1, r1, u, t, s1, stride, s0, GF_DT_I64);
    if (rc == 0)
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_ADD, 1, r1, u, u, s1, base, s1, GF_DT_I64);
    if (rc == 0)
        rc = c->k->where(c->k->ctx, c->s, 1, r1, f, m1, s1, u, s1, numel, s0, 8);
    return rc;
}

static gf_status gather_nd_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0], *idx = c->in[1];
    gf_status st = index_dtype(c, idx);
    if (st != GF_OK)
        return st;
    int64_t b = gf_onnx_attr_int(c->n, "batch_dims", 0);
    int64_t q = idx->rank, r = x->rank, k = q >= 1 ? idx->shape[q - 1] : -1;
    if (q < 1 || r < 1 || b < 0 || b >= q || b >= r || k < 1 || b + k > r)
        return gf_onnx_fail(c, GF_ERR_INVALID, "indices [..., %" PRId64 "] and batch_dims %"
                            PRId64 " do not fit data of rank %" PRId64, k, b, r);
    for (int64_t i = 0; i < b; i++)
        if (idx->shape[i] != x->shape[i])
            return gf_onnx_fail(c, GF_ERR_INVALID, "the batch dims of data and indices differ");
    int64_t shape[GF_MAX_RANK * 2];
    int32_t rank = 0;
    for (int64_t i = 0; i < q - 1; i++)
        shape[rank++] = idx->shape[i];
    for (int64_t i = b + k; i < r; i++)
        shape[rank++] = x->shape[i];
    if (rank > GF_MAX_RANK)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "output rank %d", rank);
    int64_t inner = 1, per_batch = 1, rows = 1, batches = 1;
    for (int64_t i = b + k; i < r; i++)
        inner *= x->shape[i];
    for (int64_t i = b; i < b + k; i++)
        per_batch *= x->shape[i];
    for (int64_t i = 0; i < b; i++)
        batches *= x->shape[i];
    rows = batches * per_batch;
    int64_t n = gf_onnx_numel(idx) / k, tuples_per_batch = batches ? n / batches : 0;
    gf_onnx_const *ids;
    if ((st = gf_onnx_const_new(GF_DT_I64, 1, &n, &ids, c->err)) != GF_OK)
        return st;
    for (int64_t j = 0; j < n; j++) {
        int64_t row = 0;
        for (int64_t d = 0; d < k; d++) {
            int64_t dim = x->shape[b + d], v = gf_onnx_const_i64(idx->host, j * k + d);
            if (v < -dim || v >= dim) {
                gf_onnx_const_free(ids);
                return gf_onnx_fail(c, GF_ERR_INVALID, "index %" PRId64 " is outside [-%"
                                    PRId64 ", %" PRId64 ")", v, dim, dim);
            }
            row = row * dim + (v < 0 ? v + dim : v);
        }
        int64_t batch = tuples_per_batch ? j / tuples_per_batch : 0;
        gf_onnx_const_set_i64(ids, j, batch * per_batch + row);
    }
    return rows_finish(c, x, ids, rows, inner, rank, shape);
}

/* ---- the table ------------------------------------------------------------------ */

const gf_onnx_op gf_onnx_ops_gather[] = {
    {"", "Gather", {1, 11, 13}, 2, 2, 1, 1, "axis:i", 0, 0, gather_infer, gather_run,
     "I32 or I64 indices, checked", 0},
    {"", "GatherElements", {11, 13}, 2, 2, 1, 1, "axis:i", 0, 0, gather_elements_infer,
     rows_run, "I32 or I64 indices, checked", 0},
    {"", "GatherND", {11, 12, 13}, 2, 2, 1, 1, "batch_dims:i", 0x2, 0, gather_nd_infer,
     rows_run, "indices known when the plan is made, checked", 0},
    {.type = NULL},
};
