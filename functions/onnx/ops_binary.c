/* gpufaas — elementwise ONNX ops of two or more inputs, with numpy
 * broadcasting: arithmetic, comparisons, logic, Not, and the variadic Sum,
 * Mean, Max, Min (functions/onnx). Ops of one input are in
 * ops_elementwise.c. */
#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "functions/onnx/optable.h"

#define MASK_NUM ((1u << GF_DT_F32) | (1u << GF_DT_I32) | (1u << GF_DT_I64))

static const char *dt(gf_dtype d) { return gf_dtype_st_name(d); }

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

/* ---- the table ------------------------------------------------------------------ */

#define BINARY(T, CODE, NOTE, ...) \
    {"", T, {__VA_ARGS__}, 2, 2, 1, 1, "", 0, 0, binary_infer, binary_run, NOTE, CODE}

const gf_onnx_op gf_onnx_ops_binary[] = {
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
    {"", "Sum", {8, 13}, 1, -1, 1, 1, "", 0, 0, variadic_infer, variadic_run, "F32, I32, I64",
     GF_BINARY_ADD},
    {"", "Mean", {8, 13}, 1, -1, 1, 1, "", 0, 0, variadic_infer, variadic_run, "F32", -1},
    {"", "Max", {8, 12, 13}, 1, -1, 1, 1, "", 0, 0, variadic_infer, variadic_run,
     "F32, I32, I64", GF_BINARY_MAX},
    {"", "Min", {8, 12, 13}, 1, -1, 1, 1, "", 0, 0, variadic_infer, variadic_run,
     "F32, I32, I64", GF_BINARY_MIN},
    {.type = NULL},
};
