/* gpufaas — elementwise ONNX ops of one input: activations, Clip, IsNaN,
 * IsInf; and Where, Cast, Identity (functions/onnx). Arithmetic with
 * broadcasting, comparisons and logic are in ops_binary.c. */
#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "functions/onnx/optable.h"

static const char *dt(gf_dtype d) { return gf_dtype_st_name(d); }

/* ---- unary (F32 through the unary kernel) -------------------------------------- */

/* alpha, beta for the kernel from the node's attributes */
static void unary_params(const gf_onnx_node *n, int code, float *alpha, float *beta)
{
    *alpha = 0;
    *beta = 0;
    switch (code) {
    case GF_UNARY_HARDSIGMOID:
        *alpha = gf_onnx_attr_float(n, "alpha", 0.2f);
        *beta = gf_onnx_attr_float(n, "beta", 0.5f);
        break;
    case GF_UNARY_LEAKYRELU:
        *alpha = gf_onnx_attr_float(n, "alpha", 0.01f);
        break;
    case GF_UNARY_ELU:
    case GF_UNARY_CELU:
    case GF_UNARY_THRESHOLDED_RELU:
        *alpha = gf_onnx_attr_float(n, "alpha", 1.0f);
        break;
    case GF_UNARY_SELU:
        *alpha = gf_onnx_attr_float(n, "alpha", 1.67326319217681884765625f);
        *beta = gf_onnx_attr_float(n, "gamma", 1.05070102214813232421875f);
        break;
    case GF_UNARY_SHRINK:
        *alpha = gf_onnx_attr_float(n, "lambd", 0.5f);
        *beta = gf_onnx_attr_float(n, "bias", 0.0f);
        break;
    default:
        break;
    }
}

/* Neg, Abs, Sign and Relu also take integers: on the host when the input is
 * known there, else (I32, I64; not Sign) through binary: 0 - x, max(x, 0),
 * max(x, 0 - x) with the constant 0 as the step constant. aux[1] marks it. */
static bool int_unary(int code)
{
    return code == GF_UNARY_NEG || code == GF_UNARY_ABS || code == GF_UNARY_SIGN ||
           code == GF_UNARY_RELU;
}

static gf_status unary_int_infer(gf_onnx_infer_ctx *c, int code)
{
    const gf_onnx_tinfo *x = c->in[0];
    int64_t n = gf_onnx_numel(x);
    if (c->may_fold && n <= GF_ONNX_FOLD_MAX) {
        gf_onnx_const *y;
        gf_status st = gf_onnx_fold_new(c, 0, x->dtype, x->rank, x->shape, &y);
        for (int64_t i = 0; st == GF_OK && i < n; i++) {
            int64_t v = gf_onnx_const_i64(x->host, i);
            int64_t r = code == GF_UNARY_NEG ? (int64_t)(0 - (uint64_t)v)
                        : code == GF_UNARY_ABS ? (v < 0 ? (int64_t)(0 - (uint64_t)v) : v)
                        : code == GF_UNARY_SIGN ? (v > 0) - (v < 0)
                                                : (v > 0 ? v : 0);
            gf_onnx_const_set_i64(y, i, r);
        }
        return st;
    }
    if ((x->dtype != GF_DT_I32 && x->dtype != GF_DT_I64) || code == GF_UNARY_SIGN)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "input is %s; gpufaas computes this op on "
                            "F32 (and Neg, Abs, Relu on I32 and I64)", dt(x->dtype));
    int64_t one = 1;
    gf_status st = gf_onnx_const_new(x->dtype, 1, &one, &c->step_const, c->err);
    if (st != GF_OK)
        return st;
    c->aux[0] = code;
    c->aux[1] = 1;
    if (code == GF_UNARY_ABS)
        c->scratch = (size_t)n * gf_dtype_size(x->dtype);
    gf_onnx_set_out(c, 0, x->dtype, x->rank, x->shape);
    return GF_OK;
}

static int unary_int_run(const gf_onnx_run_ctx *c)
{
    int64_t n = gf_onnx_numel(c->in[0].t), r1[1] = {n}, s1[1] = {1}, s0[1] = {0};
    gf_dtype d = c->in[0].t->dtype;
    const void *x = c->in[0].data, *zero = c->step_const;
    void *y = c->out[0].data;
    switch ((int)c->aux[0]) {
    case GF_UNARY_NEG:
        return c->k->binary(c->k->ctx, c->s, GF_BINARY_SUB, 1, r1, y, zero, s0, x, s1, d);
    case GF_UNARY_RELU:
        return c->k->binary(c->k->ctx, c->s, GF_BINARY_MAX, 1, r1, y, x, s1, zero, s0, d);
    default: { /* ABS */
        int rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_SUB, 1, r1, c->scratch, zero, s0, x,
                              s1, d);
        return rc ? rc : c->k->binary(c->k->ctx, c->s, GF_BINARY_MAX, 1, r1, y, x, s1,
                                      c->scratch, s1, d);
    }
    }
}

static gf_status unary_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    int code = c->n->op->code;
    if (int_unary(code) && !gf_dtype_is_float(x->dtype) && x->dtype != GF_DT_BOOL)
        return unary_int_infer(c, code);
    if (x->dtype != GF_DT_F32)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "input is %s; gpufaas computes this op in "
                            "F32 only", dt(x->dtype));
    if (strcmp(c->n->op_type, "Gelu") == 0) {
        const char *ap = gf_onnx_attr_str(c->n, "approximate", "none");
        if (strcmp(ap, "tanh") == 0)
            code = GF_UNARY_GELU_TANH;
        else if (strcmp(ap, "none") != 0)
            return gf_onnx_fail(c, GF_ERR_INVALID, "approximate must be 'none' or 'tanh', not "
                                "'%.32s'", ap);
    }
    c->aux[0] = code;
    gf_onnx_set_out(c, 0, x->dtype, x->rank, x->shape);
    return GF_OK;
}

static gf_status unary_run(const gf_onnx_run_ctx *c)
{
    if (c->aux[1]) {
        int rc = unary_int_run(c);
        return rc ? gf_onnx_kfail(c, rc) : GF_OK;
    }
    float alpha, beta;
    unary_params(c->n, (int)c->aux[0], &alpha, &beta);
    int rc = c->k->unary(c->k->ctx, c->s, (gf_unary_op)c->aux[0], c->out[0].data,
                         c->in[0].data, gf_onnx_numel(c->in[0].t), alpha, beta);
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* Clip: min and max from attributes (before 11) or host inputs. */
static gf_status clip_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    if (x->dtype != GF_DT_F32)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "input is %s; Clip runs in F32 only",
                            dt(x->dtype));
    float lo = -INFINITY, hi = INFINITY;
    if (c->n->opset < 11) {
        lo = gf_onnx_attr_float(c->n, "min", -INFINITY);
        hi = gf_onnx_attr_float(c->n, "max", INFINITY);
    } else {
        for (int k = 1; k <= 2 && k < c->n->n_in; k++) {
            const gf_onnx_tinfo *b = c->in[k];
            if (b == NULL)
                continue;
            if (gf_onnx_numel(b) != 1 || b->host == NULL)
                return gf_onnx_fail(c, GF_ERR_INVALID, "%s must be a scalar", k == 1 ? "min"
                                                                                   : "max");
            float v = (float)gf_onnx_const_f64(b->host, 0);
            if (k == 1)
                lo = v;
            else
                hi = v;
        }
    }
    memcpy(&c->aux[0], &lo, sizeof lo);
    memcpy(&c->aux[1], &hi, sizeof hi);
    gf_onnx_set_out(c, 0, x->dtype, x->rank, x->shape);
    return GF_OK;
}

static gf_status clip_run(const gf_onnx_run_ctx *c)
{
    float lo, hi;
    memcpy(&lo, &c->aux[0], sizeof lo);
    memcpy(&hi, &c->aux[1], sizeof hi);
    int rc = c->k->unary(c->k->ctx, c->s, GF_UNARY_CLIP, c->out[0].data, c->in[0].data,
                         gf_onnx_numel(c->in[0].t), lo, hi);
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* ---- Where --------------------------------------------------------------------- */

static gf_status where_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *cond = c->in[0], *a = c->in[1], *b = c->in[2];
    if (cond->dtype != GF_DT_BOOL)
        return gf_onnx_fail(c, GF_ERR_INVALID, "condition is %s, not BOOL", dt(cond->dtype));
    if (a->dtype != b->dtype)
        return gf_onnx_fail(c, GF_ERR_INVALID, "X and Y are %s and %s", dt(a->dtype),
                            dt(b->dtype));
    int32_t rank;
    int64_t shape[GF_MAX_RANK];
    if (!gf_onnx_broadcast(cond->rank, cond->shape, a->rank, a->shape, &rank, shape) ||
        !gf_onnx_broadcast(rank, shape, b->rank, b->shape, &rank, shape))
        return gf_onnx_fail(c, GF_ERR_INVALID, "input shapes do not broadcast");
    size_t es = gf_dtype_size(a->dtype);
    if (es != 1 && es != 2 && es != 4 && es != 8)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "type %s", dt(a->dtype));
    gf_onnx_set_out(c, 0, a->dtype, rank, shape);
    int64_t n = gf_onnx_numel(&c->out[0]);
    if (c->may_fold && n <= GF_ONNX_FOLD_MAX) {
        gf_onnx_const *y;
        gf_status st = gf_onnx_fold_new(c, 0, a->dtype, rank, shape, &y);
        int64_t sc[GF_MAX_RANK], sa[GF_MAX_RANK], sb[GF_MAX_RANK];
        gf_onnx_bcast_strides(cond->rank, cond->shape, rank, shape, sc);
        gf_onnx_bcast_strides(a->rank, a->shape, rank, shape, sa);
        gf_onnx_bcast_strides(b->rank, b->shape, rank, shape, sb);
        for (int64_t i = 0; st == GF_OK && i < n; i++) {
            bool t = ((const unsigned char *)cond->host->data)[gf_onnx_offset(i, rank, shape, sc)];
            const gf_onnx_tinfo *src = t ? a : b;
            int64_t off = gf_onnx_offset(i, rank, shape, t ? sa : sb);
            memcpy((char *)y->data + i * (int64_t)es, (const char *)src->host->data +
                   off * (int64_t)es, es);
        }
        return st;
    }
    return GF_OK;
}

static gf_status where_run(const gf_onnx_run_ctx *c)
{
    const gf_onnx_tinfo *y = c->out[0].t;
    int64_t sc[GF_MAX_RANK], sa[GF_MAX_RANK], sb[GF_MAX_RANK];
    gf_onnx_bcast_strides(c->in[0].t->rank, c->in[0].t->shape, y->rank, y->shape, sc);
    gf_onnx_bcast_strides(c->in[1].t->rank, c->in[1].t->shape, y->rank, y->shape, sa);
    gf_onnx_bcast_strides(c->in[2].t->rank, c->in[2].t->shape, y->rank, y->shape, sb);
    int rc = c->k->where(c->k->ctx, c->s, y->rank, y->shape, c->out[0].data, c->in[0].data, sc,
                         c->in[1].data, sa, c->in[2].data, sb,
                         (int64_t)gf_dtype_size(y->dtype));
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* ---- Cast, CastLike ------------------------------------------------------------- */

static gf_status cast_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    gf_dtype to;
    if (strcmp(c->n->op_type, "CastLike") == 0) {
        to = c->in[1]->dtype;
    } else {
        const gf_onnx_attr *a = gf_onnx_attr_find(c->n, "to");
        if (a == NULL)
            return gf_onnx_fail(c, GF_ERR_INVALID, "attribute 'to' is required");
        to = gf_onnx_dtype(a->i);
        if (to == GF_DT_INVALID)
            return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "cast to ONNX type %lld is not "
                                "supported (strings, complex and 8-bit or 4-bit floats are "
                                "not)", (long long)a->i);
    }
    if (!gf_dtype_valid(x->dtype))
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "input type");
    int64_t n = gf_onnx_numel(x);
    if (c->may_fold && n <= GF_ONNX_FOLD_MAX) {
        gf_onnx_const *y;
        gf_status st = gf_onnx_fold_new(c, 0, to, x->rank, x->shape, &y);
        bool fl = gf_dtype_is_float(x->dtype);
        for (int64_t i = 0; st == GF_OK && i < n; i++) {
            if (fl)
                gf_onnx_const_set_f64(y, i, gf_onnx_const_f64(x->host, i));
            else
                gf_onnx_const_set_i64(y, i, gf_onnx_const_i64(x->host, i));
        }
        return st;
    }
    gf_onnx_set_out(c, 0, to, x->rank, x->shape);
    return GF_OK;
}

static gf_status cast_run(const gf_onnx_run_ctx *c)
{
    int rc = c->k->cast_ex(c->k->ctx, c->s, c->out[0].data, c->out[0].t->dtype, c->in[0].data,
                           c->in[0].t->dtype, gf_onnx_numel(c->in[0].t));
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* ---- Identity, Dropout (inference) ---------------------------------------------- */

static gf_status identity_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    if (strcmp(c->n->op_type, "Dropout") == 0 && c->n->n_in > 2 && c->in[2] != NULL) {
        if (c->in[2]->host == NULL || gf_onnx_const_i64(c->in[2]->host, 0) != 0)
            return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "training_mode must be a constant "
                                "false: gpufaas runs inference only");
    }
    if (c->may_fold && x->host != NULL) {
        gf_onnx_const *y;
        gf_status st = gf_onnx_fold_new(c, 0, x->dtype, x->rank, x->shape, &y);
        if (st == GF_OK && x->host->nbytes)
            memcpy(y->data, x->host->data, x->host->nbytes);
        if (st == GF_OK && c->n->n_out > 1) {
            gf_onnx_const *mask;
            st = gf_onnx_fold_new(c, 1, GF_DT_BOOL, x->rank, x->shape, &mask);
            if (st == GF_OK)
                memset(mask->data, 1, mask->nbytes);
        }
        return st;
    }
    gf_onnx_set_out(c, 0, x->dtype, x->rank, x->shape);
    if (c->n->n_out > 1)
        gf_onnx_set_out(c, 1, GF_DT_BOOL, x->rank, x->shape);
    return GF_OK;
}

static gf_status identity_run(const gf_onnx_run_ctx *c)
{
    /* output 0 is an alias; a Dropout mask is all true in inference */
    if (c->n->n_out > 1 && c->out[1].data != NULL) {
        unsigned char one = 1;
        int rc = c->k->fill(c->k->ctx, c->s, c->out[1].data, gf_onnx_numel(c->out[1].t), &one, 1);
        if (rc)
            return gf_onnx_kfail(c, rc);
    }
    return GF_OK;
}

/* ---- IsNaN, IsInf ----------------------------------------------------------------- */

/* IsNaN: x != x. IsInf: x == +inf (detect_positive) or x == -inf
 * (detect_negative). F32 on the device; the constants are a step constant:
 * [true] for IsNaN, [+inf, -inf] for IsInf. */
static gf_status isnan_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    bool nan = strcmp(c->n->op_type, "IsNaN") == 0;
    bool pos = gf_onnx_attr_int(c->n, "detect_positive", 1) != 0;
    bool neg = gf_onnx_attr_int(c->n, "detect_negative", 1) != 0;
    if (!gf_dtype_is_float(x->dtype))
        return gf_onnx_fail(c, GF_ERR_INVALID, "input is %s, not a float type", dt(x->dtype));
    int64_t n = gf_onnx_numel(x);
    if (c->may_fold && n <= GF_ONNX_FOLD_MAX) {
        gf_onnx_const *y;
        gf_status st = gf_onnx_fold_new(c, 0, GF_DT_BOOL, x->rank, x->shape, &y);
        for (int64_t i = 0; st == GF_OK && i < n; i++) {
            double v = gf_onnx_const_f64(x->host, i);
            ((unsigned char *)y->data)[i] = nan ? isnan(v) : (isinf(v) && (v > 0 ? pos : neg));
        }
        return st;
    }
    if (x->dtype != GF_DT_F32)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "input is %s; gpufaas computes this op on "
                            "F32", dt(x->dtype));
    int64_t one = 1, two = 2;
    gf_status st = nan ? gf_onnx_const_new(GF_DT_BOOL, 1, &one, &c->step_const, c->err)
                       : gf_onnx_const_new(GF_DT_F32, 1, &two, &c->step_const, c->err);
    if (st != GF_OK)
        return st;
    if (nan) {
        ((unsigned char *)c->step_const->data)[0] = 1;
    } else {
        gf_onnx_const_set_f64(c->step_const, 0, INFINITY);
        gf_onnx_const_set_f64(c->step_const, 1, -INFINITY);
        c->scratch = (size_t)n;
    }
    c->aux[0] = nan ? 0 : (pos ? 1 : 0) | (neg ? 2 : 0);
    gf_onnx_set_out(c, 0, GF_DT_BOOL, x->rank, x->shape);
    return GF_OK;
}

static gf_status isnan_run(const gf_onnx_run_ctx *c)
{
    int64_t n = gf_onnx_numel(c->in[0].t), r1[1] = {n}, s1[1] = {1}, s0[1] = {0};
    void *y = c->out[0].data;
    const void *x = c->in[0].data;
    const char *k = c->step_const;
    int rc = 0;
    if (c->aux[0] == 0) {
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_EQUAL, 1, r1, y, x, s1, x, s1, GF_DT_F32);
        if (rc == 0)
            rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_XOR, 1, r1, y, y, s1, k, s0,
                              GF_DT_BOOL);
    } else if (c->aux[0] == 3) {
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_EQUAL, 1, r1, y, x, s1, k, s0, GF_DT_F32);
        if (rc == 0)
            rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_EQUAL, 1, r1, c->scratch, x, s1, k + 4,
                              s0, GF_DT_F32);
        if (rc == 0)
            rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_OR, 1, r1, y, y, s1, c->scratch, s1,
                              GF_DT_BOOL);
    } else {
        rc = c->k->binary(c->k->ctx, c->s, GF_BINARY_EQUAL, 1, r1, y, x, s1,
                          k + (c->aux[0] == 1 ? 0 : 4), s0, GF_DT_F32);
    }
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* ---- the table ------------------------------------------------------------------ */

#define UNARY(T, A, CODE, ...) \
    {"", T, {__VA_ARGS__}, 1, 1, 1, 1, A, 0, 0, unary_infer, unary_run, "F32", CODE}

const gf_onnx_op gf_onnx_ops_elementwise[] = {
    {"", "Relu", {6, 13, 14}, 1, 1, 1, 1, "", 0, 0, unary_infer, unary_run, "F32, I32, I64",
     GF_UNARY_RELU},
    UNARY("Sigmoid", "", GF_UNARY_SIGMOID, 6, 13),
    UNARY("Tanh", "", GF_UNARY_TANH, 6, 13),
    UNARY("Erf", "", GF_UNARY_ERF, 9, 13),
    UNARY("Exp", "", GF_UNARY_EXP, 6, 13),
    UNARY("Log", "", GF_UNARY_LOG, 6, 13),
    UNARY("Sqrt", "", GF_UNARY_SQRT, 6, 13),
    UNARY("Reciprocal", "", GF_UNARY_RECIPROCAL, 6, 13),
    {"", "Neg", {6, 13}, 1, 1, 1, 1, "", 0, 0, unary_infer, unary_run, "F32, I32, I64",
     GF_UNARY_NEG},
    {"", "Abs", {6, 13}, 1, 1, 1, 1, "", 0, 0, unary_infer, unary_run, "F32, I32, I64",
     GF_UNARY_ABS},
    UNARY("Floor", "", GF_UNARY_FLOOR, 6, 13),
    UNARY("Ceil", "", GF_UNARY_CEIL, 6, 13),
    UNARY("Round", "", GF_UNARY_ROUND, 11, 22),
    {"", "Sign", {9, 13}, 1, 1, 1, 1, "", 0, 0, unary_infer, unary_run,
     "F32; integers when known when the plan is made", GF_UNARY_SIGN},
    UNARY("Sin", "", GF_UNARY_SIN, 7, 22),
    UNARY("Cos", "", GF_UNARY_COS, 7, 22),
    UNARY("Tan", "", GF_UNARY_TAN, 7, 22),
    UNARY("Asin", "", GF_UNARY_ASIN, 7, 22),
    UNARY("Acos", "", GF_UNARY_ACOS, 7, 22),
    UNARY("Atan", "", GF_UNARY_ATAN, 7, 22),
    UNARY("Sinh", "", GF_UNARY_SINH, 9, 22),
    UNARY("Cosh", "", GF_UNARY_COSH, 9, 22),
    UNARY("Asinh", "", GF_UNARY_ASINH, 9, 22),
    UNARY("Acosh", "", GF_UNARY_ACOSH, 9, 22),
    UNARY("Atanh", "", GF_UNARY_ATANH, 9, 22),
    UNARY("Softplus", "", GF_UNARY_SOFTPLUS, 1, 22),
    UNARY("Softsign", "", GF_UNARY_SOFTSIGN, 1, 22),
    UNARY("HardSigmoid", "alpha:f,beta:f", GF_UNARY_HARDSIGMOID, 6, 22),
    UNARY("HardSwish", "", GF_UNARY_HARDSWISH, 14, 22),
    UNARY("LeakyRelu", "alpha:f", GF_UNARY_LEAKYRELU, 6, 16),
    UNARY("Elu", "alpha:f", GF_UNARY_ELU, 6, 22),
    UNARY("Selu", "alpha:f,gamma:f", GF_UNARY_SELU, 6, 22),
    UNARY("Celu", "alpha:f", GF_UNARY_CELU, 12, -28),
    UNARY("ThresholdedRelu", "alpha:f", GF_UNARY_THRESHOLDED_RELU, 10, 22),
    UNARY("Shrink", "lambd:f,bias:f", GF_UNARY_SHRINK, 9),
    UNARY("Mish", "", GF_UNARY_MISH, 18, 22),
    UNARY("Gelu", "approximate:s", GF_UNARY_GELU_ERF, 20),
    {"", "Clip", {6, 11, 12, 13}, 1, 3, 1, 1, "min:f,max:f", 0x6, 0, clip_infer, clip_run,
     "F32; min and max known when the plan is made", 0},
    {"", "IsNaN", {9, 13, 20}, 1, 1, 1, 1, "", 0, 0, isnan_infer, isnan_run, "F32", 0},
    {"", "IsInf", {10, 20}, 1, 1, 1, 1, "detect_negative:i,detect_positive:i", 0, 0,
     isnan_infer, isnan_run, "F32", 0},
    {"", "Where", {9, 16}, 3, 3, 1, 1, "", 0, 0, where_infer, where_run, "any type", 0},
    {"", "Cast", {6, 9, 13, 19, 21}, 1, 1, 1, 1, "to:i,saturate:i", 0, 0, cast_infer, cast_run,
     "between BOOL, U8, I8, I16, I32, I64, F16, BF16, F32, F64", 0},
    {"", "CastLike", {15, 19, 21}, 2, 2, 1, 1, "saturate:i", 0, 0, cast_infer, cast_run,
     "as Cast", 0},
    {"", "Identity", {1, 13, 14, 16, 19, 21}, 1, 1, 1, 1, "", 0, GF_ONNX_OP_ALIAS,
     identity_infer, identity_run, "tensors (no sequences or optionals); no copy", 0},
    {"", "Dropout", {7, 10, 12, 13, 22}, 1, 3, 1, 2, "ratio:f,seed:i", 0x6, GF_ONNX_OP_ALIAS,
     identity_infer, identity_run, "inference: the identity; the mask is all true", 0},
    {.type = NULL},
};
