/* gpufaas — elementwise ONNX ops: activations, arithmetic with
 * broadcasting, comparisons, logic, Where, Cast, Identity (functions/onnx). */
#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "functions/onnx/optable.h"

#define MASK_NUM ((1u << GF_DT_F32) | (1u << GF_DT_I32) | (1u << GF_DT_I64))

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

/* ---- binary, with broadcasting --------------------------------------------------- */

static bool is_compare(int op) { return op >= GF_BINARY_EQUAL && op <= GF_BINARY_GREATER_EQUAL; }
static bool is_logic(int op) { return op >= GF_BINARY_AND && op <= GF_BINARY_XOR; }

static double host_bin_f(int op, double a, double b)
{
    switch (op) {
    case GF_BINARY_ADD: return a + b;
    case GF_BINARY_SUB: return a - b;
    case GF_BINARY_MUL: return a * b;
    case GF_BINARY_DIV: return a / b;
    case GF_BINARY_POW: return pow(a, b);
    case GF_BINARY_MAX: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    case GF_BINARY_MIN: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    case GF_BINARY_FMOD: return fmod(a, b);
    case GF_BINARY_MOD: { double r = fmod(a, b); return r != 0 && ((r < 0) != (b < 0)) ? r + b : r; }
    case GF_BINARY_PRELU: return a < 0 ? a * b : a;
    case GF_BINARY_EQUAL: return a == b;
    case GF_BINARY_LESS: return a < b;
    case GF_BINARY_LESS_EQUAL: return a <= b;
    case GF_BINARY_GREATER: return a > b;
    case GF_BINARY_GREATER_EQUAL: return a >= b;
    case GF_BINARY_AND: return (a != 0) && (b != 0);
    case GF_BINARY_OR: return (a != 0) || (b != 0);
    case GF_BINARY_XOR: return (a != 0) != (b != 0);
    default: return 0;
    }
}

static bool host_bin_i(int op, int64_t a, int64_t b, int64_t *r)
{
    switch (op) {
    case GF_BINARY_ADD: *r = (int64_t)((uint64_t)a + (uint64_t)b); return true;
    case GF_BINARY_SUB: *r = (int64_t)((uint64_t)a - (uint64_t)b); return true;
    case GF_BINARY_MUL: *r = (int64_t)((uint64_t)a * (uint64_t)b); return true;
    case GF_BINARY_DIV:
        if (b == 0 || (a == INT64_MIN && b == -1))
            return false;
        *r = a / b;
        return true;
    case GF_BINARY_MOD:
    case GF_BINARY_FMOD:
        if (b == 0 || (a == INT64_MIN && b == -1))
            return false;
        *r = a % b;
        if (op == GF_BINARY_MOD && *r != 0 && ((*r < 0) != (b < 0)))
            *r += b;
        return true;
    case GF_BINARY_MAX: *r = a > b ? a : b; return true;
    case GF_BINARY_MIN: *r = a < b ? a : b; return true;
    case GF_BINARY_POW: {
        int64_t acc = 1;
        if (b < 0) {
            *r = a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
            return true;
        }
        for (int64_t e = 0; e < b && e < 64; e++)
            acc = (int64_t)((uint64_t)acc * (uint64_t)a);
        *r = acc;
        return true;
    }
    case GF_BINARY_PRELU: *r = a < 0 ? a * b : a; return true;
    default: *r = (int64_t)host_bin_f(op, (double)a, (double)b); return true;
    }
}

/* Fold y = a op b on the host. */
static gf_status bin_fold(gf_onnx_infer_ctx *c, int op, const gf_onnx_tinfo *a,
                          const gf_onnx_tinfo *b, gf_dtype ydt, int32_t rank,
                          const int64_t *shape)
{
    gf_onnx_const *y;
    gf_status st = gf_onnx_fold_new(c, 0, ydt, rank, shape, &y);
    if (st != GF_OK)
        return st;
    int64_t sa[GF_MAX_RANK], sb[GF_MAX_RANK], n = gf_onnx_numel(&c->out[0]);
    gf_onnx_bcast_strides(a->rank, a->shape, rank, shape, sa);
    gf_onnx_bcast_strides(b->rank, b->shape, rank, shape, sb);
    bool isf = gf_dtype_is_float(a->dtype) || (op == GF_BINARY_POW && gf_dtype_is_float(b->dtype));
    for (int64_t i = 0; i < n; i++) {
        int64_t ia = gf_onnx_offset(i, rank, shape, sa), ib = gf_onnx_offset(i, rank, shape, sb);
        if (isf) {
            gf_onnx_const_set_f64(y, i, host_bin_f(op, gf_onnx_const_f64(a->host, ia),
                                                   gf_onnx_const_f64(b->host, ib)));
        } else {
            int64_t r;
            if (!host_bin_i(op, gf_onnx_const_i64(a->host, ia), gf_onnx_const_i64(b->host, ib),
                            &r))
                return gf_onnx_fail(c, GF_ERR_INVALID, "integer division by zero");
            gf_onnx_const_set_i64(y, i, r);
        }
    }
    return GF_OK;
}

/* The type an op is computed in when its inputs' type has no kernel: F16
 * and BF16 in F32 (rounded back once), U8, I8, U16, I16, U32 in I64 (exact;
 * the result cast back wraps as the narrow type's arithmetic does), U64 in
 * I64 for what two's complement computes alike (+, -, *, ==). GF_DT_INVALID
 * when none (F64: gpufaas does not compute in double). */
static gf_dtype wide_type(gf_dtype d, int op)
{
    switch (d) {
    case GF_DT_F16:
    case GF_DT_BF16: return GF_DT_F32;
    case GF_DT_U8:
    case GF_DT_I8:
    case GF_DT_U16:
    case GF_DT_I16:
    case GF_DT_U32: return op == GF_BINARY_PRELU || is_logic(op) ? GF_DT_INVALID : GF_DT_I64;
    case GF_DT_U64:
        return op == GF_BINARY_ADD || op == GF_BINARY_SUB || op == GF_BINARY_MUL ||
                       op == GF_BINARY_EQUAL
                   ? GF_DT_I64
                   : GF_DT_INVALID;
    default: return GF_DT_INVALID;
    }
}

static size_t align256(size_t n) { return (n + 255) / 256 * 256; }

static gf_status binary_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *a = c->in[0], *b = c->in[1];
    int op = c->n->op->code;
    if (op == GF_BINARY_MOD && gf_onnx_attr_int(c->n, "fmod", 0) != 0)
        op = GF_BINARY_FMOD;
    c->aux[0] = op;
    int32_t rank;
    int64_t shape[GF_MAX_RANK];
    if (!gf_onnx_broadcast(a->rank, a->shape, b->rank, b->shape, &rank, shape))
        return gf_onnx_fail(c, GF_ERR_INVALID, "input shapes do not broadcast");
    if (op == GF_BINARY_POW && a->dtype == GF_DT_F32 && b->host != NULL &&
        gf_onnx_numel(b) == 1 && (b->dtype == GF_DT_F32 || b->dtype == GF_DT_I64 ||
                                  b->dtype == GF_DT_I32) && rank == a->rank) {
        /* x ^ constant: one unary kernel */
        float e = (float)gf_onnx_const_f64(b->host, 0);
        c->aux[1] = 1;
        memcpy(&c->aux[2], &e, sizeof e);
        if (c->may_fold && gf_onnx_numel(a) <= GF_ONNX_FOLD_MAX)
            return bin_fold(c, GF_BINARY_POW, a, b, a->dtype, rank, shape);
        gf_onnx_set_out(c, 0, a->dtype, rank, shape);
        return GF_OK;
    }
    if (op == GF_BINARY_POW && a->dtype != b->dtype) {
        /* base and exponent of two types: both widened to F32, the result
         * cast to the base's type */
        if (!((1u << a->dtype) & MASK_NUM) || !gf_dtype_valid(b->dtype) ||
            b->dtype == GF_DT_BOOL)
            return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "Pow of %s by %s", dt(a->dtype),
                                dt(b->dtype));
        int64_t n = 1;
        for (int32_t k = 0; k < rank; k++)
            n *= shape[k];
        if (c->may_fold && n <= GF_ONNX_FOLD_MAX)
            return bin_fold(c, op, a, b, a->dtype, rank, shape);
        c->aux[1] = 2;
        c->scratch = (size_t)(gf_onnx_numel(a) + gf_onnx_numel(b) + n) * 4 + 512;
        gf_onnx_set_out(c, 0, a->dtype, rank, shape);
        return GF_OK;
    }
    if (a->dtype != b->dtype)
        return gf_onnx_fail(c, GF_ERR_INVALID, "inputs are %s and %s; they must have one type",
                            dt(a->dtype), dt(b->dtype));
    bool logic = is_logic(op);
    gf_dtype ydt = is_compare(op) || logic ? GF_DT_BOOL : a->dtype;
    for (int32_t k = 0; k < rank; k++)
        c->out[0].shape[k] = shape[k];
    c->out[0].rank = rank;
    int64_t n = 1;
    for (int32_t k = 0; k < rank; k++)
        n *= shape[k];
    bool host_ok = gf_dtype_valid(a->dtype) && a->dtype != GF_DT_BOOL ? true : logic ||
                   op == GF_BINARY_EQUAL;
    if (c->may_fold && n <= GF_ONNX_FOLD_MAX && host_ok)
        return bin_fold(c, op, a, b, ydt, rank, shape);
    gf_dtype w = logic || ((1u << a->dtype) & MASK_NUM) ? GF_DT_INVALID : wide_type(a->dtype, op);
    if (w != GF_DT_INVALID) {
        /* computed in w: copies of both inputs and (but for comparisons) the result */
        size_t ws = gf_dtype_size(w);
        c->aux[1] = 3;
        c->aux[3] = w;
        c->scratch = align256((size_t)gf_onnx_numel(a) * ws) +
                     align256((size_t)gf_onnx_numel(b) * ws) + align256((size_t)n * ws);
        gf_onnx_set_out(c, 0, ydt, rank, shape);
        return GF_OK;
    }
    if (logic ? a->dtype != GF_DT_BOOL : !((1u << a->dtype) & MASK_NUM))
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "inputs are %s; gpufaas computes this op on "
                            "%s", dt(a->dtype), logic ? "BOOL" : "F32, I32 and I64 (and U8 to "
                            "U32, I8, I16, F16 and BF16 through them)");
    if (op == GF_BINARY_PRELU && a->dtype != GF_DT_F32)
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "PRelu runs on F32 only");
    gf_onnx_set_out(c, 0, ydt, rank, shape);
    return GF_OK;
}

/* y = a op b on the device (a, b: tinfos and pointers). */
static int bin_kernel(const gf_onnx_run_ctx *c, int op, const gf_onnx_tinfo *y, void *yd,
                      const gf_onnx_tinfo *a, const void *ad, const gf_onnx_tinfo *b,
                      const void *bd)
{
    int64_t sa[GF_MAX_RANK], sb[GF_MAX_RANK];
    gf_onnx_bcast_strides(a->rank, a->shape, y->rank, y->shape, sa);
    gf_onnx_bcast_strides(b->rank, b->shape, y->rank, y->shape, sb);
    return c->k->binary(c->k->ctx, c->s, (gf_binary_op)op, y->rank, y->shape, yd, ad, sa, bd,
                        sb, a->dtype);
}

/* Pow with two types: F32 copies of both, the power, then the base's type. */
static int pow_mixed(const gf_onnx_run_ctx *c)
{
    const gf_onnx_tinfo *a = c->in[0].t, *b = c->in[1].t, *y = c->out[0].t;
    int64_t na = gf_onnx_numel(a), nb = gf_onnx_numel(b), ny = gf_onnx_numel(y);
    char *base = c->scratch;
    float *fa = (float *)base, *fb = (float *)(base + ((na * 4 + 255) / 256) * 256);
    float *fy = (float *)((char *)fb + ((nb * 4 + 255) / 256) * 256);
    gf_onnx_tinfo ta = *a, tb = *b, ty = *y;
    ta.dtype = tb.dtype = ty.dtype = GF_DT_F32;
    int rc = c->k->cast_ex(c->k->ctx, c->s, fa, GF_DT_F32, c->in[0].data, a->dtype, na);
    if (rc == 0)
        rc = c->k->cast_ex(c->k->ctx, c->s, fb, GF_DT_F32, c->in[1].data, b->dtype, nb);
    if (rc == 0)
        rc = bin_kernel(c, GF_BINARY_POW, &ty, fy, &ta, fa, &tb, fb);
    if (rc == 0)
        rc = c->k->cast_ex(c->k->ctx, c->s, c->out[0].data, y->dtype, fy, GF_DT_F32, ny);
    return rc;
}

/* y = a op b computed in type w: the inputs widened into scratch, the
 * result narrowed back (comparisons write y, BOOL, directly). */
static int bin_widened(const gf_onnx_run_ctx *c, int op, gf_dtype w)
{
    const gf_onnx_tinfo *a = c->in[0].t, *b = c->in[1].t, *y = c->out[0].t;
    size_t ws = gf_dtype_size(w);
    int64_t na = gf_onnx_numel(a), nb = gf_onnx_numel(b), ny = gf_onnx_numel(y);
    char *wa = c->scratch, *wb = wa + align256((size_t)na * ws);
    char *wy = wb + align256((size_t)nb * ws);
    gf_onnx_tinfo ta = *a, tb = *b, ty = *y;
    ta.dtype = tb.dtype = w;
    bool narrow = y->dtype != GF_DT_BOOL;
    if (narrow)
        ty.dtype = w;
    int rc = c->k->cast_ex(c->k->ctx, c->s, wa, w, c->in[0].data, a->dtype, na);
    if (rc == 0)
        rc = c->k->cast_ex(c->k->ctx, c->s, wb, w, c->in[1].data, b->dtype, nb);
    if (rc == 0)
        rc = bin_kernel(c, op, &ty, narrow ? (void *)wy : c->out[0].data, &ta, wa, &tb, wb);
    if (rc == 0 && narrow)
        rc = c->k->cast_ex(c->k->ctx, c->s, c->out[0].data, y->dtype, wy, w, ny);
    return rc;
}

static gf_status binary_run(const gf_onnx_run_ctx *c)
{
    int rc;
    if (c->aux[1] == 3) {
        rc = bin_widened(c, (int)c->aux[0], (gf_dtype)c->aux[3]);
    } else if (c->aux[1] == 2) {
        rc = pow_mixed(c);
    } else if (c->aux[1] == 1) {
        float e;
        memcpy(&e, &c->aux[2], sizeof e);
        rc = c->k->unary(c->k->ctx, c->s, GF_UNARY_POW_SCALAR, c->out[0].data, c->in[0].data,
                         gf_onnx_numel(c->in[0].t), e, 0);
    } else {
        rc = bin_kernel(c, (int)c->aux[0], c->out[0].t, c->out[0].data, c->in[0].t,
                        c->in[0].data, c->in[1].t, c->in[1].data);
    }
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* Sum, Mean, Max, Min: variadic, folded left to right. */
static gf_status variadic_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_node *n = c->n;
    int32_t rank = c->in[0]->rank;
    int64_t shape[GF_MAX_RANK];
    memcpy(shape, c->in[0]->shape, sizeof shape);
    for (int32_t k = 1; k < n->n_in; k++) {
        if (c->in[k] == NULL || c->in[k]->dtype != c->in[0]->dtype)
            return gf_onnx_fail(c, GF_ERR_INVALID, "inputs must all be present with one type");
        if (!gf_onnx_broadcast(rank, shape, c->in[k]->rank, c->in[k]->shape, &rank, shape))
            return gf_onnx_fail(c, GF_ERR_INVALID, "input shapes do not broadcast");
    }
    gf_dtype d = c->in[0]->dtype;
    int op = c->n->op->code == -1 ? GF_BINARY_ADD : c->n->op->code;
    gf_dtype w = (1u << d) & MASK_NUM ? d : wide_type(d, op);
    if (w == GF_DT_INVALID || (c->n->op->code == -1 && w != GF_DT_F32))
        return gf_onnx_fail(c, GF_ERR_UNSUPPORTED, "inputs are %s; gpufaas computes this op on "
                            "%s", dt(d), c->n->op->code == -1 ? "F32 (F16, BF16 through it)"
                                                              : "F32, I32 and I64 (and U8 to "
                                                                "U32, I8, I16, F16 and BF16 "
                                                                "through them)");
    gf_onnx_set_out(c, 0, d, rank, shape);
    c->aux[0] = w;
    int64_t ny = gf_onnx_numel(&c->out[0]), nmax = 1;
    for (int32_t k = 0; k < n->n_in; k++)
        nmax = gf_onnx_numel(c->in[k]) > nmax ? gf_onnx_numel(c->in[k]) : nmax;
    /* the Mean's constant; when widened, the accumulator and two widened inputs */
    c->scratch = 256;
    if (w != d)
        c->scratch += align256((size_t)ny * gf_dtype_size(w)) +
                      2 * align256((size_t)nmax * gf_dtype_size(w));
    return GF_OK;
}

/* Input k of a variadic op as type w: the input itself, or widened into buf. */
static int variadic_in(const gf_onnx_run_ctx *c, int32_t k, gf_dtype w, char *buf,
                       const void **out)
{
    const gf_onnx_tinfo *t = c->in[k].t;
    if (t->dtype == w) {
        *out = c->in[k].data;
        return 0;
    }
    *out = buf;
    return c->k->cast_ex(c->k->ctx, c->s, buf, w, c->in[k].data, t->dtype, gf_onnx_numel(t));
}

static gf_status variadic_run(const gf_onnx_run_ctx *c)
{
    const gf_onnx_tinfo *y = c->out[0].t;
    int op = c->n->op->code == -1 ? GF_BINARY_ADD : c->n->op->code;
    int32_t nin = c->n->n_in;
    int rc;
    size_t es = gf_dtype_size(y->dtype);
    if (nin == 1) {
        int64_t sx[GF_MAX_RANK];
        gf_onnx_bcast_strides(c->in[0].t->rank, c->in[0].t->shape, y->rank, y->shape, sx);
        rc = c->k->strided_copy(c->k->ctx, c->s, y->rank, y->shape, c->out[0].data, NULL,
                                c->in[0].data, sx, 0, (int64_t)es);
    } else {
        /* folded left to right into acc: y itself, or a widened accumulator */
        gf_dtype w = (gf_dtype)c->aux[0];
        size_t ws = gf_dtype_size(w);
        int64_t ny = gf_onnx_numel(y), nmax = 1;
        for (int32_t k = 0; k < nin; k++)
            nmax = gf_onnx_numel(c->in[k].t) > nmax ? gf_onnx_numel(c->in[k].t) : nmax;
        char *acc = w == y->dtype ? c->out[0].data : (char *)c->scratch + 256;
        char *b0 = (char *)c->scratch + 256 + align256((size_t)ny * ws);
        char *b1 = b0 + align256((size_t)nmax * ws);
        gf_onnx_tinfo ty = *y, ta = *c->in[0].t, tb = *c->in[1].t;
        ty.dtype = ta.dtype = tb.dtype = w;
        const void *pa, *pb;
        rc = variadic_in(c, 0, w, b0, &pa);
        if (rc == 0)
            rc = variadic_in(c, 1, w, b1, &pb);
        if (rc == 0)
            rc = bin_kernel(c, op, &ty, acc, &ta, pa, &tb, pb);
        for (int32_t k = 2; k < nin && rc == 0; k++) {
            tb = *c->in[k].t;
            tb.dtype = w;
            rc = variadic_in(c, k, w, b1, &pb);
            if (rc == 0)
                rc = bin_kernel(c, op, &ty, acc, &ty, acc, &tb, pb);
        }
        if (rc == 0 && c->n->op->code == -1) { /* Mean */
            float inv = 1.0f / (float)nin;
            gf_onnx_tinfo one = {.dtype = GF_DT_F32, .rank = 0};
            rc = c->k->fill(c->k->ctx, c->s, c->scratch, 1, &inv, 4);
            if (rc == 0)
                rc = bin_kernel(c, GF_BINARY_MUL, &ty, acc, &ty, acc, &one, c->scratch);
        }
        if (rc == 0 && acc != (char *)c->out[0].data)
            rc = c->k->cast_ex(c->k->ctx, c->s, c->out[0].data, y->dtype, acc, w, ny);
    }
    return rc ? gf_onnx_kfail(c, rc) : GF_OK;
}

/* Not: x XOR true. */
static gf_status not_infer(gf_onnx_infer_ctx *c)
{
    const gf_onnx_tinfo *x = c->in[0];
    if (x->dtype != GF_DT_BOOL)
        return gf_onnx_fail(c, GF_ERR_INVALID, "input is %s, not BOOL", dt(x->dtype));
    if (c->may_fold && gf_onnx_numel(x) <= GF_ONNX_FOLD_MAX) {
        gf_onnx_const *y;
        gf_status st = gf_onnx_fold_new(c, 0, GF_DT_BOOL, x->rank, x->shape, &y);
        for (int64_t i = 0; st == GF_OK && i < gf_onnx_numel(x); i++)
            ((unsigned char *)y->data)[i] = ((const unsigned char *)x->host->data)[i] == 0;
        return st;
    }
    gf_onnx_set_out(c, 0, GF_DT_BOOL, x->rank, x->shape);
    c->scratch = 16;
    return GF_OK;
}

static gf_status not_run(const gf_onnx_run_ctx *c)
{
    unsigned char one = 1;
    gf_onnx_tinfo t = {.dtype = GF_DT_BOOL, .rank = 0};
    int rc = c->k->fill(c->k->ctx, c->s, c->scratch, 1, &one, 1);
    if (rc == 0)
        rc = bin_kernel(c, GF_BINARY_XOR, c->out[0].t, c->out[0].data, c->in[0].t,
                        c->in[0].data, &t, c->scratch);
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
#define BINARY(T, CODE, NOTE, ...) \
    {"", T, {__VA_ARGS__}, 2, 2, 1, 1, "", 0, 0, binary_infer, binary_run, NOTE, CODE}

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
    BINARY("Add", GF_BINARY_ADD, "F32, I32, I64", 7, 13, 14),
    BINARY("Sub", GF_BINARY_SUB, "F32, I32, I64", 7, 13, 14),
    BINARY("Mul", GF_BINARY_MUL, "F32, I32, I64", 7, 13, 14),
    BINARY("Div", GF_BINARY_DIV, "F32, I32, I64", 7, 13, 14),
    BINARY("Pow", GF_BINARY_POW, "F32, I32, I64; a constant scalar exponent "
           "may have another type", 7, 12, 13, 15),
    {"", "Mod", {10, 13}, 2, 2, 1, 1, "fmod:i", 0, 0, binary_infer, binary_run,
     "F32 (fmod=1), I32, I64", GF_BINARY_MOD},
    BINARY("PRelu", GF_BINARY_PRELU, "F32", 7, 9, 16),
    BINARY("Equal", GF_BINARY_EQUAL, "F32, I32, I64", 7, 11, 13, 19),
    BINARY("Less", GF_BINARY_LESS, "F32, I32, I64", 7, 9, 13),
    BINARY("LessOrEqual", GF_BINARY_LESS_EQUAL, "F32, I32, I64", 12, 16),
    BINARY("Greater", GF_BINARY_GREATER, "F32, I32, I64", 7, 9, 13),
    BINARY("GreaterOrEqual", GF_BINARY_GREATER_EQUAL, "F32, I32, I64", 12, 16),
    BINARY("And", GF_BINARY_AND, "BOOL", 7),
    BINARY("Or", GF_BINARY_OR, "BOOL", 7),
    BINARY("Xor", GF_BINARY_XOR, "BOOL", 7),
    {"", "Not", {1}, 1, 1, 1, 1, "", 0, 0, not_infer, not_run, "BOOL", 0},
    {"", "IsNaN", {9, 13, 20}, 1, 1, 1, 1, "", 0, 0, isnan_infer, isnan_run, "F32", 0},
    {"", "IsInf", {10, 20}, 1, 1, 1, 1, "detect_negative:i,detect_positive:i", 0, 0,
     isnan_infer, isnan_run, "F32", 0},
    {"", "Sum", {8, 13}, 1, -1, 1, 1, "", 0, 0, variadic_infer, variadic_run, "F32, I32, I64",
     GF_BINARY_ADD},
    {"", "Mean", {8, 13}, 1, -1, 1, 1, "", 0, 0, variadic_infer, variadic_run, "F32", -1},
    {"", "Max", {8, 12, 13}, 1, -1, 1, 1, "", 0, 0, variadic_infer, variadic_run,
     "F32, I32, I64", GF_BINARY_MAX},
    {"", "Min", {8, 12, 13}, 1, -1, 1, 1, "", 0, 0, variadic_infer, variadic_run,
     "F32, I32, I64", GF_BINARY_MIN},
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
