/* gpufaas — ONNX ops that move data or compute shapes: Shape, Reshape,
 * Transpose, Slice, Concat, Split, Expand, ... (functions/onnx).
 *
 * Most of them are one strided view of their input; infer computes the view
 * (output shape, input strides and offset), folds it on the host when the
 * input is known there, and otherwise leaves it in aux for one strided_copy.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "functions/onnx/optable.h"

/* aux layout of a view: [0] rank, [1..8] input strides, [9] input offset */
#define AUX_RANK 0
#define AUX_STRIDES 1
#define AUX_OFFSET 9

static void host_view(gf_onnx_const *y, const gf_onnx_const *x, int32_t rank,
                      const int64_t *shape, const int64_t *strides, int64_t offset)
{
    size_t es = gf_dtype_size(x->dtype);
    int64_t n = 1;
    for (int32_t k = 0; k < rank; k++)
        n *= shape[k];
    for (int64_t i = 0; i < n; i++) {
        int64_t off = offset + gf_onnx_offset(i, rank, shape, strides);
        memcpy((char *)y->data + i * (int64_t)es, (const char *)x->data + off * (int64_t)es, es);
    }
}

/* Output 0 is x read through (strides, offset) with shape[rank]. */
static gf_status view_finish(gf_onnx_infer_ctx *c, const gf_onnx_tinfo *x, int32_t rank,
                             const int64_t *shape, const int64_t *strides, int64_t offset)
{
    gf_onnx_set_out(c, 0, x->dtype, rank, shape);
    c->aux[AUX_RANK] = rank;
    for (int32_t k = 0; k < rank; k++)
        c->aux[AUX_STRIDES + k] = strides[k];
    c->aux[AUX_OFFSET] = offset;
    if (x->host != NULL && gf_onnx_numel(&c->out[0]) <= GF_ONNX_FOLD_MAX) {
        gf_onnx_const *y;
        gf_status st = gf_onnx_fold_new(c, 0, x->dtype, rank, shape, &y);
        if (st == GF_OK)
            host_view(y, x->host, rank, shape, strides, offset);
        return st;
    }
    size_t es = gf_dtype_size(x->dtype);
    if (es != 1 && es != 2 && es != 4 && es != 8)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "type %s", gf_dtype_st_name(x->dtype));
    return GF_OK;
}

static gf_status view_run(const gf_onnx_run_ctx *c)
{
    const gf_onnx_tinfo *y = c->out[0].t;
    int rc = c->k->strided_copy(c->k->ctx, c->s, (int)c->aux[AUX_RANK], y->shape,
                                c->out[0].data, NULL, c->in[0].data, &c->aux[AUX_STRIDES],
                                c->aux[AUX_OFFSET], (int64_t)gf_dtype_size(y->dtype));
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* The output is the input's bytes with a new shape (no device work). */
static gf_status alias_finish(gf_onnx_infer_ctx *c, const gf_onnx_tinfo *x, int32_t rank,
                              const int64_t *shape)
{
    int64_t n = 1;
    for (int32_t k = 0; k < rank; k++)
        n *= shape[k];
    if (n != gf_onnx_numel(x))
        return gf_onnx_fail(c, GF_ERR_INVALID, "%" PRId64 " elements cannot take a shape of %"
                            PRId64, gf_onnx_numel(x), n);
    if (x->host != NULL) {
        gf_onnx_const *y;
        gf_status st = gf_onnx_fold_new(c, 0, x->dtype, rank, shape, &y);
        if (st == GF_OK && y->nbytes)
            memcpy(y->data, x->host->data, y->nbytes);
        return st;
    }
    gf_onnx_set_out(c, 0, x->dtype, rank, shape);
    return GF_OK;
}

static gf_status alias_run(const gf_onnx_run_ctx *c)
{
    (void)c;
    return GF_OK;
}

/* Integer list from a host input (or NULL, 0). */
static gf_status host_ints(gf_onnx_infer_ctx *c, int k, int64_t *vals, int32_t *n, int32_t cap)
{
    *n = 0;
    if (k >= c->n->n_in || c->in[k] == NULL)
        return GF_OK;
    const gf_onnx_tinfo *t = c->in[k];
    if (t->host == NULL)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "input %d must be known when the plan is "
                            "made", k);
    if (t->dtype != GF_DT_I64 && t->dtype != GF_DT_I32)
        return gf_onnx_fail(c, GF_ERR_INVALID, "input %d must be I64 or I32", k);
    int64_t m = gf_onnx_numel(t);
    if (t->rank > 1 || m > cap)
        return gf_onnx_fail(c, GF_ERR_INVALID, "input %d must be a list of at most %d", k, cap);
    for (int64_t i = 0; i < m; i++)
        vals[i] = gf_onnx_const_i64(t->host, i);
    *n = (int32_t)m;
    return GF_OK;
}

/* ---- Shape, Size --------------------------------------------------------------- */

static gf_status shape_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    int64_t r = x->rank, start = gf_onnx_attr_int(c->n, "start", 0);
    int64_t end = gf_onnx_attr_int(c->n, "end", r);
    start = start < 0 ? start + r : start;
    end = end < 0 ? end + r : end;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    int64_t len = end > start ? end - start : 0;
    gf_onnx_const *y;
    gf_status st = gf_onnx_fold_new(c, 0, GF_DT_I64, 1, &len, &y);
    for (int64_t i = 0; st == GF_OK && i < len; i++)
        gf_onnx_const_set_i64(y, i, x->shape[start + i]);
    return st;
}

static gf_status size_infer(gf_onnx_infer_ctx *c)
{
    gf_onnx_const *y;
    gf_status st = gf_onnx_fold_new(c, 0, GF_DT_I64, 0, NULL, &y);
    if (st == GF_OK)
        gf_onnx_const_set_i64(y, 0, gf_onnx_numel(c->in[0]));
    return st;
}

/* ---- Reshape, Flatten, Squeeze, Unsqueeze (aliases) ----------------------------- */

static gf_status reshape_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    int64_t want[GF_MAX_RANK], shape[GF_MAX_RANK];
    int32_t r;
    gf_status st = host_ints(c, 1, want, &r, GF_MAX_RANK);
    if (st != GF_OK)
        return st;
    bool allowzero = gf_onnx_attr_int(c->n, "allowzero", 0) != 0;
    int infer_at = -1;
    int64_t known = 1;
    for (int32_t k = 0; k < r; k++) {
        int64_t d = want[k];
        if (d == 0 && !allowzero) {
            if (k >= x->rank)
                return gf_onnx_fail(c, GF_ERR_INVALID, "shape[%d] = 0 copies a dim the input "
                                    "lacks", k);
            d = x->shape[k];
        }
        if (d == -1) {
            if (infer_at >= 0)
                return gf_onnx_fail(c, GF_ERR_INVALID, "more than one -1 in the shape");
            infer_at = k;
            continue;
        }
        if (d < 0)
            return gf_onnx_fail(c, GF_ERR_INVALID, "shape[%d] = %" PRId64, k, d);
        shape[k] = d;
        known *= d;
    }
    if (infer_at >= 0) {
        if (known == 0 || gf_onnx_numel(x) % known != 0)
            return gf_onnx_fail(c, GF_ERR_INVALID, "%" PRId64 " elements do not divide into "
                                "the shape", gf_onnx_numel(x));
        shape[infer_at] = gf_onnx_numel(x) / known;
    }
    return alias_finish(c, x, r, shape);
}

static gf_status flatten_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    int64_t axis;
    if (!gf_onnx_axis(gf_onnx_attr_int(c->n, "axis", 1), x->rank, true, &axis))
        return gf_onnx_fail(c, GF_ERR_INVALID, "axis out of range");
    int64_t shape[2] = {1, 1};
    for (int32_t k = 0; k < x->rank; k++)
        shape[k < axis ? 0 : 1] *= x->shape[k];
    return alias_finish(c, x, 2, shape);
}

static gf_status squeeze_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    bool unsq = strcmp(c->n->op_type, "Unsqueeze") == 0;
    int64_t axes[GF_MAX_RANK * 2];
    int32_t na = 0;
    if (c->n->opset < 13) {
        size_t n;
        const int64_t *a = gf_onnx_attr_ints(c->n, "axes", &n);
        if (n > GF_MAX_RANK)
            return gf_onnx_fail(c, GF_ERR_INVALID, "too many axes");
        for (size_t k = 0; k < n; k++)
            axes[na++] = a[k];
    } else {
        gf_status st = host_ints(c, 1, axes, &na, GF_MAX_RANK);
        if (st != GF_OK)
            return st;
    }
    bool mark[GF_MAX_RANK * 2] = {false};
    int32_t out_rank = unsq ? x->rank + na : x->rank;
    if (out_rank > GF_MAX_RANK)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "rank %d is more than %d", out_rank,
                            GF_MAX_RANK);
    for (int32_t k = 0; k < na; k++) {
        int64_t a;
        if (!gf_onnx_axis(axes[k], out_rank, false, &a) || mark[a])
            return gf_onnx_fail(c, GF_ERR_INVALID, "axis %" PRId64 " out of range or repeated",
                                axes[k]);
        mark[a] = true;
    }
    int64_t shape[GF_MAX_RANK];
    int32_t r = 0;
    if (unsq) {
        for (int32_t k = 0, j = 0; k < out_rank; k++)
            shape[r++] = mark[k] ? 1 : x->shape[j++];
    } else {
        for (int32_t k = 0; k < x->rank; k++) {
            bool drop = na == 0 ? x->shape[k] == 1 : mark[k];
            if (drop && x->shape[k] != 1)
                return gf_onnx_fail(c, GF_ERR_INVALID, "axis %d has size %" PRId64 ", not 1", k,
                                    x->shape[k]);
            if (!drop)
                shape[r++] = x->shape[k];
        }
    }
    return alias_finish(c, x, r, shape);
}

/* ---- Transpose ----------------------------------------------------------------- */

static gf_status transpose_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    size_t np;
    const int64_t *perm = gf_onnx_attr_ints(c->n, "perm", &np);
    int64_t p[GF_MAX_RANK], dense[GF_MAX_RANK], shape[GF_MAX_RANK], strides[GF_MAX_RANK];
    bool seen[GF_MAX_RANK] = {false};
    if (perm != NULL && np != (size_t)x->rank)
        return gf_onnx_fail(c, GF_ERR_INVALID, "perm has %zu entries for rank %d", np, x->rank);
    for (int32_t k = 0; k < x->rank; k++) {
        p[k] = perm != NULL ? perm[k] : x->rank - 1 - k;
        if (p[k] < 0 || p[k] >= x->rank || seen[p[k]])
            return gf_onnx_fail(c, GF_ERR_INVALID, "perm is not a permutation");
        seen[p[k]] = true;
    }
    gf_onnx_strides(x->rank, x->shape, dense);
    for (int32_t k = 0; k < x->rank; k++) {
        shape[k] = x->shape[p[k]];
        strides[k] = dense[p[k]];
    }
    return view_finish(c, x, x->rank, shape, strides, 0);
}

/* ---- Slice --------------------------------------------------------------------- */

static gf_status slice_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    int64_t starts[GF_MAX_RANK], ends[GF_MAX_RANK], axes[GF_MAX_RANK], steps[GF_MAX_RANK];
    int32_t ns = 0, ne = 0, na = 0, nst = 0;
    gf_status st = GF_OK;
    if (c->n->opset < 10) {
        size_t a, b, d;
        const int64_t *s = gf_onnx_attr_ints(c->n, "starts", &a);
        const int64_t *e = gf_onnx_attr_ints(c->n, "ends", &b);
        const int64_t *ax = gf_onnx_attr_ints(c->n, "axes", &d);
        if (a > GF_MAX_RANK || b > GF_MAX_RANK || d > GF_MAX_RANK)
            return gf_onnx_fail(c, GF_ERR_INVALID, "too many axes");
        for (size_t k = 0; k < a; k++)
            starts[ns++] = s[k];
        for (size_t k = 0; k < b; k++)
            ends[ne++] = e[k];
        for (size_t k = 0; k < d; k++)
            axes[na++] = ax[k];
    } else if ((st = host_ints(c, 1, starts, &ns, GF_MAX_RANK)) != GF_OK ||
               (st = host_ints(c, 2, ends, &ne, GF_MAX_RANK)) != GF_OK ||
               (st = host_ints(c, 3, axes, &na, GF_MAX_RANK)) != GF_OK ||
               (st = host_ints(c, 4, steps, &nst, GF_MAX_RANK)) != GF_OK) {
        return st;
    }
    if (ns != ne || (na && na != ns) || (nst && nst != ns))
        return gf_onnx_fail(c, GF_ERR_INVALID, "starts, ends, axes and steps differ in length");
    int64_t shape[GF_MAX_RANK], strides[GF_MAX_RANK], dense[GF_MAX_RANK], offset = 0;
    gf_onnx_strides(x->rank, x->shape, dense);
    for (int32_t k = 0; k < x->rank; k++) {
        shape[k] = x->shape[k];
        strides[k] = dense[k];
    }
    bool seen[GF_MAX_RANK] = {false};
    for (int32_t i = 0; i < ns; i++) {
        int64_t a = na ? axes[i] : i, step = nst ? steps[i] : 1;
        if (!gf_onnx_axis(a, x->rank, false, &a) || seen[a])
            return gf_onnx_fail(c, GF_ERR_INVALID, "axis out of range or repeated");
        seen[a] = true;
        if (step == 0)
            return gf_onnx_fail(c, GF_ERR_INVALID, "a step is 0");
        int64_t d = x->shape[a], s = starts[i], e = ends[i];
        s = s < 0 ? s + d : s;
        e = e < 0 ? e + d : e;
        if (step > 0) {
            s = s < 0 ? 0 : s > d ? d : s;
            e = e < 0 ? 0 : e > d ? d : e;
        } else {
            s = s < 0 ? 0 : s > d - 1 ? d - 1 : s;
            e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
        }
        int64_t len = step > 0 ? (e > s ? (e - s + step - 1) / step : 0)
                               : (s > e ? (s - e + (-step) - 1) / (-step) : 0);
        shape[a] = len;
        strides[a] = dense[a] * step;
        if (len > 0)
            offset += s * dense[a];
    }
    return view_finish(c, x, x->rank, shape, strides, offset);
}

/* ---- Expand, Tile -------------------------------------------------------------- */

static gf_status expand_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    int64_t want[GF_MAX_RANK], shape[GF_MAX_RANK], strides[GF_MAX_RANK];
    int32_t r, rank;
    gf_status st = host_ints(c, 1, want, &r, GF_MAX_RANK);
    if (st != GF_OK)
        return st;
    if (!gf_onnx_broadcast(x->rank, x->shape, r, want, &rank, shape))
        return gf_onnx_fail(c, GF_ERR_INVALID, "the shape does not broadcast with the input");
    gf_onnx_bcast_strides(x->rank, x->shape, rank, shape, strides);
    return view_finish(c, x, rank, shape, strides, 0);
}

static gf_status tile_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    int64_t rep[GF_MAX_RANK], shape[GF_MAX_RANK], strides[GF_MAX_RANK], dense[GF_MAX_RANK];
    int32_t r;
    gf_status st = host_ints(c, 1, rep, &r, GF_MAX_RANK);
    if (st != GF_OK)
        return st;
    if (r != x->rank)
        return gf_onnx_fail(c, GF_ERR_INVALID, "repeats has %d entries for rank %d", r, x->rank);
    if (2 * r > GF_MAX_RANK)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "Tile of rank %d (gpufaas tiles up to rank "
                            "%d)", r, GF_MAX_RANK / 2);
    gf_onnx_strides(x->rank, x->shape, dense);
    for (int32_t k = 0; k < r; k++) {
        if (rep[k] < 0)
            return gf_onnx_fail(c, GF_ERR_INVALID, "a repeat is negative");
        shape[2 * k] = rep[k];
        shape[2 * k + 1] = x->shape[k];
        strides[2 * k] = 0;
        strides[2 * k + 1] = dense[k];
    }
    st = view_finish(c, x, 2 * r, shape, strides, 0);
    /* the output's shape merges each pair */
    gf_onnx_tinfo *y = &c->out[0];
    int64_t merged[GF_MAX_RANK];
    for (int32_t k = 0; k < r; k++)
        merged[k] = rep[k] * x->shape[k];
    y->rank = r;
    memcpy(y->shape, merged, (size_t)r * sizeof *merged);
    if (c->fold[0] != NULL) {
        c->fold[0]->rank = r;
        memcpy(c->fold[0]->shape, merged, (size_t)r * sizeof *merged);
    }
    return st;
}

static gf_status tile_run(const gf_onnx_run_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0].t;
    int64_t shape[GF_MAX_RANK];
    for (int32_t k = 0; k < x->rank; k++) {
        shape[2 * k] = c->out[0].t->shape[k] / (x->shape[k] ? x->shape[k] : 1);
        shape[2 * k + 1] = x->shape[k];
    }
    int rc = c->k->strided_copy(c->k->ctx, c->s, 2 * x->rank, shape, c->out[0].data, NULL,
                                c->in[0].data, &c->aux[AUX_STRIDES], 0,
                                (int64_t)gf_dtype_size(x->dtype));
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* ---- Concat, Split ------------------------------------------------------------- */

static gf_status concat_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x0 = c->in[0];
    int64_t axis;
    if (!gf_onnx_axis(gf_onnx_attr_int(c->n, "axis", 0), x0->rank, false, &axis))
        return gf_onnx_fail(c, GF_ERR_INVALID, "axis out of range");
    int64_t shape[GF_MAX_RANK];
    memcpy(shape, x0->shape, sizeof shape);
    shape[axis] = 0;
    for (int32_t k = 0; k < c->n->n_in; k++) {
        const gf_onnx_tinfo *x = c->in[k];
        if (x == NULL || x->dtype != x0->dtype || x->rank != x0->rank)
            return gf_onnx_fail(c, GF_ERR_INVALID, "inputs differ in type or rank");
        for (int32_t d = 0; d < x->rank; d++)
            if (d != axis && x->shape[d] != x0->shape[d])
                return gf_onnx_fail(c, GF_ERR_INVALID, "input %d differs in dim %d", k, d);
        shape[axis] += x->shape[axis];
    }
    c->aux[0] = axis;
    gf_onnx_set_out(c, 0, x0->dtype, x0->rank, shape);
    if (c->may_fold && gf_onnx_numel(&c->out[0]) <= GF_ONNX_FOLD_MAX) {
        gf_onnx_const *y;
        gf_status st = gf_onnx_fold_new(c, 0, x0->dtype, x0->rank, shape, &y);
        if (st != GF_OK)
            return st;
        int64_t ys[GF_MAX_RANK], at = 0;
        size_t es = gf_dtype_size(x0->dtype);
        gf_onnx_strides(x0->rank, shape, ys);
        for (int32_t k = 0; k < c->n->n_in; k++) {
            const gf_onnx_tinfo *x = c->in[k];
            int64_t n = gf_onnx_numel(x);
            for (int64_t i = 0; i < n; i++) {
                /* index of element i of x in y */
                int64_t rem = i, off = 0;
                for (int32_t d = x->rank - 1; d >= 0; d--) {
                    int64_t idx = rem % x->shape[d];
                    rem /= x->shape[d];
                    off += (d == axis ? idx + at : idx) * ys[d];
                }
                memcpy((char *)y->data + off * (int64_t)es,
                       (const char *)x->host->data + i * (int64_t)es, es);
            }
            at += x->shape[axis];
        }
    }
    return GF_OK;
}

static gf_status concat_run(const gf_onnx_run_ctx *c)
{
    const gf_onnx_tinfo *y = c->out[0].t;
    int64_t axis = c->aux[0], ys[GF_MAX_RANK], xs[GF_MAX_RANK], at = 0;
    int64_t es = (int64_t)gf_dtype_size(y->dtype);
    gf_onnx_strides(y->rank, y->shape, ys);
    for (int32_t k = 0; k < c->n->n_in; k++) {
        const gf_onnx_tinfo *x = c->in[k].t;
        gf_onnx_strides(x->rank, x->shape, xs);
        int rc = c->k->strided_copy(c->k->ctx, c->s, x->rank, x->shape,
                                    (char *)c->out[0].data + at * ys[axis] * es, ys,
                                    c->in[k].data, xs, 0, es);
        if (rc)
            return gf_onnx_kfail(c, rc);
        at += x->shape[axis];
    }
    return GF_OK;
}

static gf_status split_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    int64_t axis, sizes[GF_ONNX_MAX_NODE_IO];
    if (!gf_onnx_axis(gf_onnx_attr_int(c->n, "axis", 0), x->rank, false, &axis))
        return gf_onnx_fail(c, GF_ERR_INVALID, "axis out of range");
    int32_t nout = c->n->n_out, ns = 0;
    if (c->n->opset < 13) {
        size_t n;
        const int64_t *s = gf_onnx_attr_ints(c->n, "split", &n);
        if (n > GF_ONNX_MAX_NODE_IO)
            return gf_onnx_fail(c, GF_ERR_INVALID, "split too long");
        for (size_t k = 0; k < n; k++)
            sizes[ns++] = s[k];
    } else if (c->n->n_in > 1 && c->in[1] != NULL) {
        gf_status st = host_ints(c, 1, sizes, &ns, GF_ONNX_MAX_NODE_IO);
        if (st != GF_OK)
            return st;
    }
    int64_t d = x->shape[axis];
    if (ns == 0) {
        int64_t parts = nout, each = (d + parts - 1) / parts;
        if (gf_onnx_attr_find(c->n, "num_outputs") == NULL && d % parts != 0)
            return gf_onnx_fail(c, GF_ERR_INVALID, "dim %" PRId64 " does not split into %d "
                                "equal parts", d, nout);
        for (int32_t k = 0; k < nout; k++) {
            int64_t left = d - each * k;
            sizes[k] = left < each ? (left > 0 ? left : 0) : each;
        }
        ns = nout;
    }
    if (ns != nout)
        return gf_onnx_fail(c, GF_ERR_INVALID, "split has %d sizes for %d outputs", ns, nout);
    int64_t total = 0;
    for (int32_t k = 0; k < ns; k++) {
        if (sizes[k] < 0)
            return gf_onnx_fail(c, GF_ERR_INVALID, "a split size is negative");
        total += sizes[k];
    }
    if (total != d)
        return gf_onnx_fail(c, GF_ERR_INVALID, "split sizes sum to %" PRId64 ", dim is %" PRId64,
                            total, d);
    c->aux[0] = axis;
    int64_t dense[GF_MAX_RANK], at = 0;
    gf_onnx_strides(x->rank, x->shape, dense);
    bool fold = x->host != NULL && gf_onnx_numel(x) <= GF_ONNX_FOLD_MAX;
    for (int32_t k = 0; k < nout; k++) {
        int64_t shape[GF_MAX_RANK];
        memcpy(shape, x->shape, sizeof shape);
        shape[axis] = sizes[k];
        gf_onnx_set_out(c, k, x->dtype, x->rank, shape);
        if (fold) {
            gf_onnx_const *y;
            gf_status st = gf_onnx_fold_new(c, k, x->dtype, x->rank, shape, &y);
            if (st != GF_OK)
                return st;
            host_view(y, x->host, x->rank, shape, dense, at * dense[axis]);
        }
        at += sizes[k];
    }
    return GF_OK;
}

static gf_status split_run(const gf_onnx_run_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0].t;
    int64_t axis = c->aux[0], dense[GF_MAX_RANK], at = 0;
    gf_onnx_strides(x->rank, x->shape, dense);
    for (int32_t k = 0; k < c->n->n_out; k++) {
        const gf_onnx_tinfo *y = c->out[k].t;
        if (y == NULL) { /* an omitted output: skip its part */
            continue;
        }
        int rc = c->k->strided_copy(c->k->ctx, c->s, y->rank, y->shape, c->out[k].data, NULL,
                                    c->in[0].data, dense, at * dense[axis],
                                    (int64_t)gf_dtype_size(y->dtype));
        if (rc)
            return gf_onnx_kfail(c, rc);
        at += y->shape[axis];
    }
    return GF_OK;
}

/* ---- ConstantOfShape, Range ------------------------------------------------------ */

static gf_status cos_infer(gf_onnx_infer_ctx *c)
{
    int64_t shape[GF_MAX_RANK];
    int32_t r;
    gf_status st = host_ints(c, 0, shape, &r, GF_MAX_RANK);
    if (st != GF_OK)
        return st;
    for (int32_t k = 0; k < r; k++)
        if (shape[k] < 0)
            return gf_onnx_fail(c, GF_ERR_INVALID, "a dim is negative");
    const gf_onnx_attr *a = gf_onnx_attr_find(c->n, "value");
    gf_dtype d = GF_DT_F32;
    if (a != NULL) {
        if (a->t->nbytes != gf_dtype_size(a->t->dtype))
            return gf_onnx_fail(c, GF_ERR_INVALID, "value must hold one element");
        d = a->t->dtype;
    }
    gf_onnx_set_out(c, 0, d, r, shape);
    int64_t n = gf_onnx_numel(&c->out[0]);
    memset(c->aux, 0, 8);
    if (a != NULL)
        memcpy(c->aux, a->t->data, a->t->nbytes);
    if (n <= GF_ONNX_FOLD_MAX) {
        gf_onnx_const *y;
        size_t es = gf_dtype_size(d);
        if ((st = gf_onnx_fold_new(c, 0, d, r, shape, &y)) != GF_OK)
            return st;
        for (int64_t i = 0; i < n; i++)
            memcpy((char *)y->data + i * (int64_t)es, c->aux, es);
    }
    return GF_OK;
}

static gf_status cos_run(const gf_onnx_run_ctx *c)
{
    const gf_onnx_tinfo *y = c->out[0].t;
    int rc = c->k->fill(c->k->ctx, c->s, c->out[0].data, gf_onnx_numel(y), c->aux,
                        (int64_t)gf_dtype_size(y->dtype));
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

static gf_status range_infer(gf_onnx_infer_ctx *c)
{
    for (int k = 0; k < 3; k++)
        if (gf_onnx_numel(c->in[k]) != 1 || c->in[k]->dtype != c->in[0]->dtype)
            return gf_onnx_fail(c, GF_ERR_INVALID, "start, limit and delta must be scalars of "
                                "one type");
    if (!c->may_fold)
        return GF_OK; /* the planner reports it */
    gf_dtype d = c->in[0]->dtype;
    double s = gf_onnx_const_f64(c->in[0]->host, 0), l = gf_onnx_const_f64(c->in[1]->host, 0);
    double dl = gf_onnx_const_f64(c->in[2]->host, 0);
    if (dl == 0)
        return gf_onnx_fail(c, GF_ERR_INVALID, "delta is 0");
    double len = ceil((l - s) / dl);
    if (!(len >= 0))
        len = 0;
    if (len > GF_ONNX_FOLD_MAX)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "a range of %.0f elements (gpufaas makes "
                            "ranges of up to %d)", len, GF_ONNX_FOLD_MAX);
    int64_t n = (int64_t)len;
    gf_onnx_const *y;
    gf_status st = gf_onnx_fold_new(c, 0, d, 1, &n, &y);
    bool fl = gf_dtype_is_float(d);
    int64_t si = gf_onnx_const_i64(c->in[0]->host, 0), di = gf_onnx_const_i64(c->in[2]->host, 0);
    for (int64_t i = 0; st == GF_OK && i < n; i++) {
        if (fl)
            gf_onnx_const_set_f64(y, i, s + (double)i * dl);
        else
            gf_onnx_const_set_i64(y, i, si + i * di);
    }
    return st;
}

static gf_status import_only_infer(gf_onnx_infer_ctx *c)
{
    return gf_onnx_fail(c, GF_ERR_INTERNAL, "should have been rewritten at import");
}

/* ---- the table ------------------------------------------------------------------ */

const gf_onnx_op gf_onnx_ops_shape[] = {
    {"", "Shape", {1, 13, 15, 19, 21}, 1, 1, 1, 1, "start:i,end:i", 0, GF_ONNX_OP_HOST_ONLY,
     shape_infer, NULL, "folded when the plan is made", 0},
    {"", "Size", {1, 13, 19, 21}, 1, 1, 1, 1, "", 0, GF_ONNX_OP_HOST_ONLY, size_infer, NULL,
     "folded when the plan is made", 0},
    {"", "Constant", {1, 9, 11, 12, 13, 19, 21}, 0, 0, 1, 1,
     "value:T,value_float:f,value_floats:F,value_int:i,value_ints:I", 0, GF_ONNX_OP_IMPORT,
     import_only_infer, NULL, "becomes an initializer at deploy; no sparse or string values", 0},
    {"", "ConstantOfShape", {9, 20, 21}, 1, 1, 1, 1, "value:T", 0x1, 0, cos_infer, cos_run,
     "shape known when the plan is made", 0},
    {"", "Range", {11, -27}, 3, 3, 1, 1, "", 0x7, GF_ONNX_OP_HOST_ONLY, range_infer, NULL,
     "inputs known when the plan is made", 0},
    {"", "Reshape", {5, 13, 14, 19, 21}, 2, 2, 1, 1, "allowzero:i", 0x2, GF_ONNX_OP_ALIAS,
     reshape_infer, alias_run, "shape known when the plan is made; no copy", 0},
    {"", "Flatten", {1, 9, 11, 13, 21}, 1, 1, 1, 1, "axis:i", 0, GF_ONNX_OP_ALIAS, flatten_infer,
     alias_run, "no copy", 0},
    {"", "Squeeze", {1, 11, 13, 21}, 1, 2, 1, 1, "axes:I", 0x2, GF_ONNX_OP_ALIAS, squeeze_infer,
     alias_run, "axes known when the plan is made; no copy", 0},
    {"", "Unsqueeze", {1, 11, 13, 21}, 1, 2, 1, 1, "axes:I", 0x2, GF_ONNX_OP_ALIAS,
     squeeze_infer, alias_run, "axes known when the plan is made; no copy", 0},
    {"", "Transpose", {1, 13, 21}, 1, 1, 1, 1, "perm:I", 0, 0, transpose_infer, view_run,
     "any type of 1, 2, 4 or 8 bytes", 0},
    {"", "Slice", {1, 10, 11, 13}, 1, 5, 1, 1, "starts:I,ends:I,axes:I", 0x1e, 0, slice_infer,
     view_run, "starts, ends, axes, steps known when the plan is made; negative steps", 0},
    {"", "Expand", {8, 13}, 2, 2, 1, 1, "", 0x2, 0, expand_infer, view_run,
     "shape known when the plan is made", 0},
    {"", "Tile", {6, 13}, 2, 2, 1, 1, "", 0x2, 0, tile_infer, tile_run,
     "repeats known when the plan is made; rank <= 4", 0},
    {"", "Concat", {4, 11, 13}, 1, -1, 1, 1, "axis:i", 0, 0, concat_infer, concat_run, "", 0},
    {"", "Split", {2, 11, 13, 18}, 1, 2, 1, GF_ONNX_MAX_NODE_IO > 127 ? 127 : 1,
     "axis:i,split:I,num_outputs:i", 0x2, 0, split_infer, split_run,
     "split sizes known when the plan is made", 0},
    {.type = NULL},
};
