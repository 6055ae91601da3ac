/* gpufaas — CumSum (functions/onnx): Hugging Face's RoBERTa computes its
 * position ids with it from the input ids, so it runs on the device.
 *
 * The kernel table has no scan; a Hillis-Steele prefix sum needs only
 * binary ADD and strided copies: with x viewed as [outer, L, inner], step d
 * (1, 2, 4, ... < L) adds y[:, l - d] to y[:, l] for every l >= d, through
 * a temporary, in ceil(log2 L) steps of two calls. Exact for integers; for
 * floats the sums are grouped differently from a sequential loop (within
 * rounding). reverse reads and writes the axis backwards (a negative-stride
 * copy); exclusive subtracts x at the end.
 */
#include <inttypes.h>
#include <string.h>

#include "core/dtype.h"
#include "functions/onnx/optable.h"

#define MASK ((1u << GF_DT_F32) | (1u << GF_DT_I32) | (1u << GF_DT_I64))

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
    int64_t outer = 1, len = x->shape[axis], inner = 1;
    for (int32_t k = 0; k < x->rank; k++) {
        if (k < axis)
            outer *= x->shape[k];
        else if (k > axis)
            inner *= x->shape[k];
    }
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

const gf_onnx_op gf_onnx_ops_scan[] = {
    {"", "CumSum", {11, 14}, 2, 2, 1, 1, "exclusive:i,reverse:i", 0x2, 0, cumsum_infer,
     cumsum_run, "F32, I32, I64; axis known when the plan is made", 0},
    {.type = NULL},
};
