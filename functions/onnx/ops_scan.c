/* gpufaas — CumSum, Scan and TopK (functions/onnx).
 *
 * CumSum: Hugging Face's RoBERTa computes its position ids with it from the
 * input ids, so it runs on the device.
 * The kernel table has no scan; a Hillis-Steele prefix sum needs only
 * binary ADD and strided copies: with x viewed as [outer, L, inner], step d
 * (1, 2, 4, ... < L) adds y[:, l - d] to y[:, l] for every l >= d, through
 * a temporary, in ceil(log2 L) steps of two calls. Exact for integers; for
 * floats the sums are grouped differently from a sequential loop (within
 * rounding). reverse reads and writes the axis backwards (a negative-stride
 * copy); exclusive subtracts x at the end.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "functions/onnx/optable.h"

#define MASK ((1u << GF_DT_F32) | (1u << GF_DT_I32) | (1u << GF_DT_I64))

/* x viewed as [outer, len, inner] around axis */
static void split_at(const gf_onnx_tinfo *x, int64_t axis, int64_t *outer, int64_t *len,
                     int64_t *inner)
{
    *outer = *inner = 1;
    *len = x->shape[axis];
    for (int32_t i = 0; i < x->rank; i++) {
        if (i < axis)
            *outer *= x->shape[i];
        else if (i > axis)
            *inner *= x->shape[i];
    }
}

/* aux: [0] outer, [1] L, [2] inner, [3] exclusive, [4] reverse,
 * [5] scratch offset of the reversed copy */
static gf_status cumsum_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0], *ax = c->in[1];
    if (!((1u << x->dtype) & MASK))
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "input is %s; gpufaas computes CumSum on "
                            "F32, I32 and I64", gf_dtype_st_name(x->dtype));
    if (gf_onnx_numel(ax) != 1 || (ax->dtype != GF_DT_I64 && ax->dtype != GF_DT_I32))
        return gf_onnx_fail(c, GF_ERR_INVALID, "axis must be one I64 or I32 value");
    int64_t axis;
    if (x->rank < 1 || !gf_onnx_axis(gf_onnx_const_i64(ax->host, 0), x->rank, false, &axis))
        return gf_onnx_fail(c, GF_ERR_INVALID, "axis out of range");
    int64_t outer, len, inner;
    split_at(x, axis, &outer, &len, &inner);
    bool excl = gf_onnx_attr_int(c->n, "exclusive", 0) != 0;
    bool rev = gf_onnx_attr_int(c->n, "reverse", 0) != 0;
    size_t es = gf_dtype_size(x->dtype), n = (size_t)gf_onnx_numel(x) * es;
    size_t tmp = ((size_t)(outer * (len > 1 ? len - 1 : 0) * inner) * es + 255) / 256 * 256;
    c->aux[0] = outer;
    c->aux[1] = len;
    c->aux[2] = inner;
    c->aux[3] = excl;
    c->aux[4] = rev;
    c->aux[5] = (int64_t)tmp;
    c->scratch = tmp + (rev ? n : 0);
    gf_onnx_set_out(c, 0, x->dtype, x->rank, x->shape);
    return GF_OK;
}

static gf_status cumsum_run(const gf_onnx_run_ctx *c)
{
    int64_t outer = c->aux[0], len = c->aux[1], inner = c->aux[2];
    gf_dtype dt = c->in[0].t->dtype;
    int64_t es = (int64_t)gf_dtype_size(dt);
    char *y = c->out[0].data, *tmp = c->scratch;
    const char *x = c->in[0].data;
    int64_t shape[3] = {outer, len, inner}, dense[3] = {len * inner, inner, 1};
    int64_t back[3] = {len * inner, -inner, 1};
    int rc;
    /* y = x (reversed along the axis when asked) */
    if (c->aux[4])
        rc = c->k->strided_copy(c->k->ctx, c->s, 3, shape, y, NULL, x, back, (len - 1) * inner,
                                es);
    else
        rc = c->k->copy2d(c->k->ctx, c->s, y, outer * len * inner * es, x,
                          outer * len * inner * es, outer * len * inner * es, 1);
    for (int64_t d = 1; rc == 0 && d < len; d *= 2) {
        /* tmp = y[:, d:] + y[:, :L-d]; y[:, d:] = tmp */
        int64_t part[3] = {outer, len - d, inner};
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_ADD, 3, part, tmp, y + d * inner * es,
                          dense, y, dense, dt);
        if (rc == 0)
            rc = c->k->strided_copy(c->k->ctx, c->s, 3, part, y + d * inner * es, dense, tmp,
                                    (int64_t[3]){(len - d) * inner, inner, 1}, 0, es);
    }
    if (rc == 0 && c->aux[3]) {
        /* exclusive: the sum before each element; x read the way y was filled */
        if (c->aux[4]) {
            char *xr = tmp + c->aux[5];
            rc = c->k->strided_copy(c->k->ctx, c->s, 3, shape, xr, NULL, x, back,
                                    (len - 1) * inner, es);
            x = xr;
        }
        if (rc == 0)
            rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_SUB, 3, shape, y, y, dense, x, dense,
                              dt);
    }
    if (rc == 0 && c->aux[4]) {
        /* back in the input's order, through the temporary */
        char *t = c->aux[3] ? tmp : tmp + c->aux[5];
        int64_t bytes = outer * len * inner * es;
        if (c->aux[3]) /* the reversed copy of x is spent; reuse it */
            t = tmp + c->aux[5];
        rc = c->k->copy2d(c->k->ctx, c->s, t, bytes, y, bytes, bytes, 1);
        if (rc == 0)
            rc = c->k->strided_copy(c->k->ctx, c->s, 3, shape, y, NULL, t, back,
                                    (len - 1) * inner, es);
    }
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

static size_t align256(size_t n)
{
    return (n + 255) / 256 * 256;
}

/* ---- Scan: the pairwise squared distances skl2onnx's KNeighbors* write ----------- *
 * (import_scan.c checks the body). outputs: 0 the state S [N, D] unchanged, 1
 * [M, N] with y[m, n] = sum_d (S[n, d] - R[m, d])^2 for the reference rows R
 * [M, D]: a broadcast Sub into scratch and a row reduction, per block of
 * reference rows (the scratch stays under SCAN_BLOCK bytes). */
#define SCAN_BLOCK ((size_t)1 << 20)

/* aux: [0] N, [1] D, [2] M, [3] reference rows per block */
static gf_status scan_infer(gf_onnx_infer_ctx *c)
{
    const char *body = gf_onnx_attr_str(c->n, "body", "");
    if (strcmp(body, GF_ONNX_SCAN_SQEUCLIDEAN) != 0)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "gpufaas runs Scan only with the body "
                            "skl2onnx writes for pairwise squared distances");
    const gf_onnx_tinfo *st = c->in[0], *ref = c->in[1];
    if (st->dtype != GF_DT_F32 || ref->dtype != GF_DT_F32 || st->rank != 2 || ref->rank != 2 ||
        st->shape[1] != ref->shape[1])
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "the state and the scan input must be F32 "
                            "matrices of one width (rows of features); they are %s rank %d "
                            "and %s rank %d", gf_dtype_st_name(st->dtype), st->rank,
                            gf_dtype_st_name(ref->dtype), ref->rank);
    int64_t n = st->shape[0], d = st->shape[1], m = ref->shape[0];
    size_t row = (size_t)(n * d) * 4;
    int64_t block = row == 0 ? m : (int64_t)(SCAN_BLOCK / row);
    if (block < 1)
        block = 1;
    if (block > m)
        block = m;
    c->aux[0] = n;
    c->aux[1] = d;
    c->aux[2] = m;
    c->aux[3] = block;
    c->scratch = align256((size_t)block * row);
    gf_onnx_set_out(c, 0, GF_DT_F32, 2, st->shape);
    gf_onnx_set_out(c, 1, GF_DT_F32, 2, (int64_t[2]){m, n});
    return GF_OK;
}

static gf_status scan_run(const gf_onnx_run_ctx *c)
{
    int64_t n = c->aux[0], d = c->aux[1], m = c->aux[2], block = c->aux[3];
    const float *s = c->in[0].data, *ref = c->in[1].data;
    int64_t bytes = n * d * 4;
    int rc = 0;
    if (c->out[0].data != NULL && bytes > 0)
        rc = c->k->copy2d(c->k->ctx, c->s, c->out[0].data, bytes, s, bytes, bytes, 1);
    float *y = c->out[1].data;
    for (int64_t m0 = 0; rc == 0 && y != NULL && m0 < m && n > 0; m0 += block) {
        int64_t b = m - m0 < block ? m - m0 : block;
        int64_t shape[3] = {b, n, d}, sa[3] = {0, d, 1}, sb[3] = {d, 0, 1};
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_SUB, 3, shape, c->scratch, s, sa,
                          ref + m0 * d, sb, GF_DT_F32);
        if (rc == 0)
            rc = c->k->reduce(c->k->ctx, c->s, GF_REDUCE_SUM_SQUARE, y + m0 * n, c->scratch,
                              b * n, d, 1);
    }
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* ---- TopK ----------------------------------------------------------------------- *
 * The kernel table has no sort; K rounds of reductions select the elements
 * one by one, exactly (ties: the lower index first, as ONNX says). With x
 * viewed as [outer, L, inner] and avail the elements not taken yet, a round
 * takes v = max (min) of avail's values, then the first avail element equal
 * to v (ArgMax over the 0/1 candidates), and clears it in avail. Values are
 * the v's, always sorted. Cost: K passes over x (K is small in KNN); for
 * integers each pass takes log2 L halving steps (int_extreme). */

/* aux: [0] outer, [1] L, [2] inner, [3] K, [4] largest, scratch offsets:
 * [5] cand, [6] candf, [7] avail, [8] vals, [9] idx, [10] fill value */
static gf_status topk_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    int64_t k;
    if (c->n->opset < 10) {
        k = gf_onnx_attr_int(c->n, "k", -1);
    } else {
        const gf_onnx_tinfo *kt = c->n->n_in > 1 ? c->in[1] : NULL;
        if (kt == NULL || kt->host == NULL || gf_onnx_numel(kt) != 1 || kt->dtype != GF_DT_I64)
            return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "K must be one I64 value known when "
                                "the plan is made (a constant)");
        k = gf_onnx_const_i64(kt->host, 0);
    }
    if (!((1u << x->dtype) & MASK))
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "X is %s; gpufaas computes TopK on F32, I32 "
                            "and I64", gf_dtype_st_name(x->dtype));
    size_t es = gf_dtype_size(x->dtype);
    int64_t axis;
    if (x->rank < 1 || !gf_onnx_axis(gf_onnx_attr_int(c->n, "axis", -1), x->rank, false, &axis))
        return gf_onnx_fail(c, GF_ERR_INVALID, "axis out of range");
    int64_t outer, len, inner;
    split_at(x, axis, &outer, &len, &inner);
    if (k < 0 || k > len)
        return gf_onnx_fail(c, GF_ERR_INVALID, "K = %" PRId64 " is outside [0, %" PRId64 "] "
                            "(the axis' length)", k, len);
    size_t n = (size_t)(outer * len * inner), q = (size_t)(outer * inner);
    c->aux[0] = outer;
    c->aux[1] = len;
    c->aux[2] = inner;
    c->aux[3] = k;
    c->aux[4] = gf_onnx_attr_int(c->n, "largest", 1) != 0;
    size_t half = (size_t)(outer * ((len + 1) / 2) * inner) * es;
    size_t at = align256(n * es);                    /* masked values */
    c->aux[5] = (int64_t)at, at += align256(n);      /* candidates (BOOL) */
    c->aux[6] = (int64_t)at, at += align256(n * 4);  /* candidates (F32) */
    c->aux[7] = (int64_t)at, at += align256(n);      /* avail (BOOL) */
    c->aux[8] = (int64_t)at, at += align256((size_t)k * q * es); /* values by round */
    c->aux[9] = (int64_t)at, at += align256((size_t)k * q * 8);  /* indices by round */
    c->aux[10] = (int64_t)at, at += 256;
    bool ints = x->dtype != GF_DT_F32;
    c->aux[11] = (int64_t)at, at += ints ? align256(half) : 0; /* pairwise max, two halves */
    c->aux[12] = (int64_t)at, at += ints ? align256(half) : 0;
    c->scratch = at;
    /* 0 .. L-1, to clear the element a round took */
    gf_status st = gf_onnx_const_new(GF_DT_I64, 1, &len, &c->step_const, c->err);
    if (st != GF_OK)
        return st;
    for (int64_t i = 0; i < len; i++)
        ((int64_t *)c->step_const->data)[i] = i;
    int64_t shape[GF_MAX_RANK];
    memcpy(shape, x->shape, sizeof shape);
    shape[axis] = k;
    gf_onnx_set_out(c, 0, x->dtype, x->rank, shape);
    gf_onnx_set_out(c, 1, GF_DT_I64, x->rank, shape);
    return GF_OK;
}

/* v [outer, inner] = max (min) of w [outer, len, inner] along len, for the
 * integer types reduce does not take: halving steps of binary MAX (MIN),
 * exact; element i pairs with i + len - h (h = ceil(len / 2), so an odd
 * middle element pairs with itself), through the two scratch halves a, b. */
static int int_extreme(const gf_onnx_run_ctx *c, bool largest, gf_dtype dt, void *v,
                       const void *w, int64_t outer, int64_t len, int64_t inner, char *a,
                       char *b)
{
    const gf_kernels *kt = c->k;
    int64_t es = (int64_t)gf_dtype_size(dt);
    gf_binary_op op = largest ? GF_BINARY_MAX : GF_BINARY_MIN;
    if (len == 1)
        return kt->copy2d(kt->ctx, c->s, v, outer * inner * es, w, outer * inner * es,
                          outer * inner * es, 1);
    const char *src = w;
    int rc = 0;
    for (int64_t cur = len; rc == 0 && cur > 1;) {
        int64_t h = (cur + 1) / 2;
        int64_t shape[3] = {outer, h, inner}, st[3] = {cur * inner, inner, 1};
        char *dst = h == 1 ? v : src == a ? b : a;
        rc = kt->binary(kt->ctx, c->s, op, 3, shape, dst, src, st, src + (cur - h) * inner * es,
                        st, dt);
        src = dst;
        cur = h;
    }
    return rc;
}

static gf_status topk_run(const gf_onnx_run_ctx *c)
{
    int64_t outer = c->aux[0], len = c->aux[1], inner = c->aux[2], k = c->aux[3];
    bool largest = c->aux[4] != 0;
    int64_t n = outer * len * inner, q = outer * inner;
    if (k == 0 || q == 0)
        return GF_OK;
    char *sc = c->scratch;
    gf_dtype dt = c->in[0].t->dtype;
    int64_t es = (int64_t)gf_dtype_size(dt);
    char *w = sc, *fillv = sc + c->aux[10], *vals = sc + c->aux[8];
    float *candf = (float *)(sc + c->aux[6]);
    unsigned char *cand = (unsigned char *)(sc + c->aux[5]), *avail = (unsigned char *)(sc + c->aux[7]);
    int64_t *idx = (int64_t *)(sc + c->aux[9]);
    const void *x = c->in[0].data;
    const gf_kernels *kt = c->k;
    int64_t shape[3] = {outer, len, inner}, dense[3] = {len * inner, inner, 1};
    int64_t row[3] = {inner, 0, 1}, zero[3] = {0, 0, 0}, iota[3] = {0, 1, 0};
    /* what a taken element becomes: never above (below) what is left */
    float ff = largest ? -INFINITY : INFINITY;
    int32_t f32 = largest ? INT32_MIN : INT32_MAX;
    int64_t f64 = largest ? INT64_MIN : INT64_MAX;
    const void *fv = dt == GF_DT_F32 ? (const void *)&ff : dt == GF_DT_I32 ? (const void *)&f32
                                                                          : (const void *)&f64;
    unsigned char one = 1;
    int rc = kt->fill(kt->ctx, c->s, fillv, 1, fv, es);
    if (rc == 0)
        rc = kt->fill(kt->ctx, c->s, avail, n, &one, 1);
    for (int64_t r = 0; rc == 0 && r < k; r++) {
        char *v = vals + r * q * es;
        int64_t *id = idx + r * q;
        rc = kt->where(kt->ctx, c->s, 3, shape, w, avail, dense, x, dense, fillv, zero, es);
        if (rc == 0 && dt == GF_DT_F32)
            rc = kt->reduce(kt->ctx, c->s, largest ? GF_REDUCE_MAX : GF_REDUCE_MIN, (float *)v,
                            (const float *)w, outer, len, inner);
        else if (rc == 0)
            rc = int_extreme(c, largest, dt, v, w, outer, len, inner, sc + c->aux[11],
                             sc + c->aux[12]);
        if (rc == 0)
            rc = kt->binary(kt->ctx, c->s, GF_BINARY_EQUAL, 3, shape, cand, x, dense, v, row,
                            dt);
        if (rc == 0)
            rc = kt->binary(kt->ctx, c->s, GF_BINARY_AND, 3, shape, cand, cand, dense, avail,
                            dense, GF_DT_BOOL);
        if (rc == 0)
            rc = kt->cast_ex(kt->ctx, c->s, candf, GF_DT_F32, cand, GF_DT_BOOL, n);
        if (rc == 0)
            rc = kt->reduce(kt->ctx, c->s, GF_REDUCE_ARGMAX, id, candf, outer, len, inner);
        if (rc == 0 && r + 1 < k)
            rc = kt->binary(kt->ctx, c->s, GF_BINARY_EQUAL, 3, shape, cand, c->step_const, iota,
                            id, row, GF_DT_I64);
        if (rc == 0 && r + 1 < k)
            rc = kt->binary(kt->ctx, c->s, GF_BINARY_XOR, 3, shape, avail, avail, dense, cand,
                            dense, GF_DT_BOOL);
    }
    /* [K, outer, inner] by round -> [outer, K, inner] */
    int64_t oshape[3] = {outer, k, inner}, byround[3] = {inner, q, 1};
    if (rc == 0 && c->out[0].data != NULL)
        rc = kt->strided_copy(kt->ctx, c->s, 3, oshape, c->out[0].data, NULL, vals, byround, 0,
                              es);
    if (rc == 0 && c->out[1].data != NULL)
        rc = kt->strided_copy(kt->ctx, c->s, 3, oshape, c->out[1].data, NULL, idx, byround, 0,
                              8);
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

const gf_onnx_op gf_onnx_ops_scan[] = {
    {"", "CumSum", {11, 14}, 2, 2, 1, 1, "exclusive:i,reverse:i", 0x2, 0, cumsum_infer,
     cumsum_run, "F32, I32, I64; axis known when the plan is made", 0},
    {"", "Scan", {9, 11, 16, 19, 21, 23, 24, 25}, 2, 2, 2, 2, "body:s,num_scan_inputs:i,"
     "scan_input_axes:I,scan_input_directions:I,scan_output_axes:I,scan_output_directions:I",
     0, 0, scan_infer, scan_run, "only the body skl2onnx writes for pairwise squared Euclidean "
     "distances (KNeighbors models), F32; other bodies are refused at deploy", 0},
    {"", "TopK", {1, 10, 11, 24}, 1, 2, 2, 2, "axis:i,k:i,largest:i,sorted:i", 0x2, 0,
     topk_infer, topk_run, "X F32 (without NaN), I32 or I64; K known when the plan is made; "
     "always sorted, ties lower index first", 0},
    {.type = NULL},
};
