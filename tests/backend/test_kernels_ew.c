/* Tests for the elementwise and layout kernels of version 2 (unary, binary,
 * where, strided_copy, gather, fill, cast_ex) on one backend, argv[1] as in
 * kharness.h. Each result is compared with a reference written here:
 * double-precision libm for the F32 functions, plain int64 / __int128
 * arithmetic for integers, and for conversions the exact source value as a
 * long double rounded by a table search over every value of the target
 * type. Index arithmetic in the references divides a linear index into
 * coordinates, independently of the kernels' iteration.
 *
 * Tolerances (u = 2^-24): +, -, *, / are correctly rounded in FP32, so
 * within u |ref| (2 u allowed); libm-style functions within 1e-5 relative
 * plus 1e-6 absolute, as in test_kernels.c; pow within 8 u relative
 * (CUDA's powf is documented at 4 ulp); everything else is exact.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kharness.h"

/* ---- index helpers of the references ---- */

static int64_t numel(int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= shape[d];
    return n;
}

/* The offset of row-major linear index lin of shape under strides. */
static int64_t offset_of(int64_t lin, int rank, const int64_t *shape, const int64_t *strides)
{
    int64_t off = 0;
    for (int d = rank - 1; d >= 0; d--) {
        off += (lin % shape[d]) * strides[d];
        lin /= shape[d];
    }
    return off;
}

/* Elements an operand with these strides spans, and the offset of its
 * first element (so negative strides stay inside the buffer). */
static int64_t span_of(int rank, const int64_t *shape, const int64_t *st, int64_t *base)
{
    int64_t lo = 0, hi = 0;
    for (int d = 0; d < rank; d++) {
        int64_t t = (shape[d] - 1) * st[d];
        if (t < 0)
            lo += t;
        else
            hi += t;
    }
    *base = -lo;
    return hi - lo + 1;
}

/* ---- unary ---- */

typedef struct {
    gf_unary_op op;
    float lo, hi;        /* input range */
    float alpha, beta;
} unary_spec;

static double ref_unary(gf_unary_op op, double v, double a, double b)
{
    switch (op) {
    case GF_UNARY_RELU: return v > 0 ? v : 0;
    case GF_UNARY_SIGMOID: return 1.0 / (1.0 + exp(-v));
    case GF_UNARY_TANH: return tanh(v);
    case GF_UNARY_ERF: return erf(v);
    case GF_UNARY_EXP: return exp(v);
    case GF_UNARY_LOG: return log(v);
    case GF_UNARY_SQRT: return sqrt(v);
    case GF_UNARY_RECIPROCAL: return 1.0 / v;
    case GF_UNARY_NEG: return -v;
    case GF_UNARY_ABS: return fabs(v);
    case GF_UNARY_FLOOR: return floor(v);
    case GF_UNARY_CEIL: return ceil(v);
    case GF_UNARY_ROUND: {
        double f = floor(v), d = v - f;
        return d > 0.5 ? f + 1 : d < 0.5 ? f : (fmod(f, 2.0) == 0 ? f : f + 1);
    }
    case GF_UNARY_SIGN: return v > 0 ? 1 : v < 0 ? -1 : 0;
    case GF_UNARY_SIN: return sin(v);
    case GF_UNARY_COS: return cos(v);
    case GF_UNARY_SOFTPLUS: return v > 30 ? v : log(1.0 + exp(v));
    case GF_UNARY_SOFTSIGN: return v / (1.0 + fabs(v));
    case GF_UNARY_HARDSIGMOID: return fmax(0.0, fmin(1.0, a * v + b));
    case GF_UNARY_HARDSWISH: return v * fmax(0.0, fmin(1.0, v / 6.0 + 0.5));
    case GF_UNARY_LEAKYRELU: return v < 0 ? a * v : v;
    case GF_UNARY_ELU: return v < 0 ? a * (exp(v) - 1) : v;
    case GF_UNARY_SELU: return b * (v <= 0 ? a * (exp(v) - 1) : v);
    case GF_UNARY_CLIP: return v < a ? a : v > b ? b : v;
    case GF_UNARY_GELU_ERF: return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    case GF_UNARY_GELU_TANH:
        return 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    case GF_UNARY_POW_SCALAR: return pow(v, a);
    case GF_UNARY_MISH: return v * tanh(v > 30 ? v : log(1.0 + exp(v)));
    case GF_UNARY_TAN: return tan(v);
    case GF_UNARY_ASIN: return asin(v);
    case GF_UNARY_ACOS: return acos(v);
    case GF_UNARY_ATAN: return atan(v);
    case GF_UNARY_SINH: return sinh(v);
    case GF_UNARY_COSH: return cosh(v);
    case GF_UNARY_ASINH: return asinh(v);
    case GF_UNARY_ACOSH: return acosh(v);
    case GF_UNARY_ATANH: return atanh(v);
    case GF_UNARY_CELU: return fmax(0.0, v) + fmin(0.0, a * (exp(v / a) - 1));
    case GF_UNARY_THRESHOLDED_RELU: return v > a ? v : 0;
    case GF_UNARY_SHRINK: return v < -a ? v + b : v > a ? v - b : 0;
    case GF_UNARY_IDENTITY: return v;
    case GF_UNARY_SILU: return v / (1.0 + exp(-v));
    default: return NAN;
    }
}

static void unary_case(const unary_spec *sp, size_t n, int inplace)
{
    float *x = fnew(n), *got = fnew(n);
    frand(x, n, sp->lo, sp->hi);
    /* exact halves and integers for the rounding ops, zeros for sign */
    static const float special[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 0.0f, -3.0f, 3.0f};
    for (size_t i = 0; i < n && i < 9; i++)
        if (special[i] >= sp->lo && special[i] <= sp->hi)
            x[i] = special[i];
    float *dx = dput(x, n * 4), *dy = inplace ? dx : dbuf(n * 4);
    KOK(K->unary(K->ctx, S, sp->op, dy, dx, (int64_t)n, sp->alpha, sp->beta));
    dget(got, dy, n * 4);
    double *ref = dnew(n);
    for (size_t i = 0; i < n; i++)
        ref[i] = ref_unary(sp->op, x[i], sp->alpha, sp->beta);
    char what[80];
    snprintf(what, sizeof what, "unary op %d n=%zu inplace %d", (int)sp->op, n, inplace);
    expect_close(what, got, ref, NULL, n, 1e-6, 1e-5);
    free(x), free(got), free(ref);
    dfree_all();
}

START_TEST(test_unary)
{
    static const unary_spec specs[] = {
        {GF_UNARY_RELU, -3, 3, 0, 0},        {GF_UNARY_SIGMOID, -12, 12, 0, 0},
        {GF_UNARY_TANH, -5, 5, 0, 0},        {GF_UNARY_ERF, -4, 4, 0, 0},
        {GF_UNARY_EXP, -20, 20, 0, 0},       {GF_UNARY_LOG, 1e-3f, 1e3f, 0, 0},
        {GF_UNARY_SQRT, 0, 100, 0, 0},       {GF_UNARY_RECIPROCAL, 0.1f, 10, 0, 0},
        {GF_UNARY_NEG, -3, 3, 0, 0},         {GF_UNARY_ABS, -3, 3, 0, 0},
        {GF_UNARY_FLOOR, -5, 5, 0, 0},       {GF_UNARY_CEIL, -5, 5, 0, 0},
        {GF_UNARY_ROUND, -5, 5, 0, 0},       {GF_UNARY_SIGN, -3, 3, 0, 0},
        {GF_UNARY_SIN, -6, 6, 0, 0},         {GF_UNARY_COS, -6, 6, 0, 0},
        {GF_UNARY_SOFTPLUS, -40, 40, 0, 0},  {GF_UNARY_SOFTSIGN, -9, 9, 0, 0},
        {GF_UNARY_HARDSIGMOID, -6, 6, 0.2f, 0.5f},
        {GF_UNARY_HARDSWISH, -5, 5, 0, 0},   {GF_UNARY_LEAKYRELU, -3, 3, 0.01f, 0},
        {GF_UNARY_ELU, -5, 3, 1.5f, 0},
        {GF_UNARY_SELU, -5, 3, 1.67326319217681884765625f, 1.05070102214813232421875f},
        {GF_UNARY_CLIP, -8, 8, -1.0f, 6.0f}, {GF_UNARY_GELU_ERF, -4, 4, 0, 0},
        {GF_UNARY_GELU_TANH, -4, 4, 0, 0},   {GF_UNARY_POW_SCALAR, 0.1f, 4, 2.0f, 0},
        {GF_UNARY_POW_SCALAR, 0.1f, 4, 0.5f, 0}, {GF_UNARY_POW_SCALAR, -3, 3, 3.0f, 0},
        {GF_UNARY_POW_SCALAR, 0.5f, 3, -1.5f, 0}, {GF_UNARY_MISH, -8, 8, 0, 0},
        {GF_UNARY_TAN, -1.4f, 1.4f, 0, 0},   {GF_UNARY_ASIN, -0.99f, 0.99f, 0, 0},
        {GF_UNARY_ACOS, -0.99f, 0.99f, 0, 0},{GF_UNARY_ATAN, -9, 9, 0, 0},
        {GF_UNARY_SINH, -5, 5, 0, 0},        {GF_UNARY_COSH, -5, 5, 0, 0},
        {GF_UNARY_ASINH, -9, 9, 0, 0},       {GF_UNARY_ACOSH, 1.01f, 9, 0, 0},
        {GF_UNARY_ATANH, -0.95f, 0.95f, 0, 0}, {GF_UNARY_CELU, -5, 3, 2.0f, 0},
        {GF_UNARY_THRESHOLDED_RELU, -3, 3, 1.0f, 0}, {GF_UNARY_SHRINK, -3, 3, 0.5f, 0.25f},
        {GF_UNARY_IDENTITY, -3, 3, 0, 0},    {GF_UNARY_SILU, -10, 10, 0, 0},
    };
    size_t ns = sizeof specs / sizeof specs[0];
    bool seen[GF_UNARY_COUNT_] = {false};
    for (size_t i = 0; i < ns; i++) {
        seen[specs[i].op] = true;
        unary_case(&specs[i], 1, 0);
        unary_case(&specs[i], 1003, (int)(i % 2));
    }
    for (int op = 0; op < GF_UNARY_COUNT_; op++)
        ck_assert_msg(seen[op], "unary op %d is not tested", op);
}
END_TEST

START_TEST(test_unary_specials)
{
    /* NaN stays NaN through clip and sign; softplus does not overflow. */
    float x[4] = {NAN, 100.0f, -100.0f, 0.0f}, got[4];
    float *dx = dput(x, sizeof x), *dy = dbuf(sizeof x);
    KOK(K->unary(K->ctx, S, GF_UNARY_CLIP, dy, dx, 4, -1.0f, 1.0f));
    dget(got, dy, sizeof got);
    ck_assert(isnan(got[0]) && got[1] == 1.0f && got[2] == -1.0f && got[3] == 0.0f);
    KOK(K->unary(K->ctx, S, GF_UNARY_SIGN, dy, dx, 4, 0, 0));
    dget(got, dy, sizeof got);
    ck_assert(isnan(got[0]) && got[1] == 1.0f && got[2] == -1.0f && got[3] == 0.0f);
    KOK(K->unary(K->ctx, S, GF_UNARY_SOFTPLUS, dy, dx, 4, 0, 0));
    dget(got, dy, sizeof got);
    ck_assert(got[1] == 100.0f && got[2] >= 0.0f && got[2] < 1e-40f);
}
END_TEST

/* ---- binary ---- */

static bool is_cmp(gf_binary_op op)
{
    return op >= GF_BINARY_EQUAL && op <= GF_BINARY_GREATER_EQUAL;
}

static bool divides(gf_binary_op op)
{
    return op == GF_BINARY_DIV || op == GF_BINARY_MOD || op == GF_BINARY_FMOD;
}

/* The reference for integers, on int64 values of a w-bit type (32 or 64):
 * arithmetic modulo 2^w. */
static int64_t wrap(__int128 v, int w)
{
    if (w == 32)
        return (int32_t)(uint32_t)(unsigned __int128)v;
    return (int64_t)(uint64_t)(unsigned __int128)v;
}

static int64_t ref_int(gf_binary_op op, int64_t a, int64_t b, int w)
{
    __int128 A = a, B = b;
    switch (op) {
    case GF_BINARY_ADD: return wrap(A + B, w);
    case GF_BINARY_SUB: return wrap(A - B, w);
    case GF_BINARY_MUL: return wrap(A * B, w);
    case GF_BINARY_DIV: return wrap(A / B, w); /* C truncates */
    case GF_BINARY_FMOD: return wrap(A % B, w);
    case GF_BINARY_MOD: {
        __int128 r = A - B * (__int128)floorl((long double)A / (long double)B);
        return wrap(r, w);
    }
    case GF_BINARY_POW: {
        if (b < 0)
            return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
        int64_t r = 1;
        for (int64_t i = 0; i < b; i++)
            r = wrap((__int128)r * A, w);
        return r;
    }
    case GF_BINARY_MAX: return a > b ? a : b;
    case GF_BINARY_MIN: return a < b ? a : b;
    case GF_BINARY_PRELU: return a < 0 ? wrap(A * B, w) : a;
    case GF_BINARY_EQUAL: return a == b;
    case GF_BINARY_LESS: return a < b;
    case GF_BINARY_LESS_EQUAL: return a <= b;
    case GF_BINARY_GREATER: return a > b;
    case GF_BINARY_GREATER_EQUAL: return a >= b;
    default: return 0;
    }
}

/* F32 reference and its tolerance. */
static double ref_f32(gf_binary_op op, double a, double b, double *tol)
{
    *tol = 0;
    switch (op) {
    case GF_BINARY_ADD: *tol = 2 * U32F * fabs(a + b); return a + b;
    case GF_BINARY_SUB: *tol = 2 * U32F * fabs(a - b); return a - b;
    case GF_BINARY_MUL: *tol = 2 * U32F * fabs(a * b); return a * b;
    case GF_BINARY_DIV: *tol = 2 * U32F * fabs(a / b); return a / b;
    case GF_BINARY_POW: *tol = 8 * U32F * fabs(pow(a, b)) + 1e-30; return pow(a, b);
    case GF_BINARY_MAX: return a > b ? a : b;
    case GF_BINARY_MIN: return a < b ? a : b;
    case GF_BINARY_FMOD: return fmod(a, b);
    case GF_BINARY_MOD: {
        double r = a - b * floor(a / b);
        *tol = 2 * U32F * fabs(b);
        return r;
    }
    case GF_BINARY_PRELU: *tol = 2 * U32F * fabs(a * b); return a < 0 ? a * b : a;
    case GF_BINARY_EQUAL: return a == b;
    case GF_BINARY_LESS: return a < b;
    case GF_BINARY_LESS_EQUAL: return a <= b;
    case GF_BINARY_GREATER: return a > b;
    case GF_BINARY_GREATER_EQUAL: return a >= b;
    default: return NAN;
    }
}

/* Random input values suited to op: divisors away from zero, small
 * exponents. which = 0 for a, 1 for b. */
static void fill_values(void *buf, int64_t n, gf_dtype dt, gf_binary_op op, int which)
{
    for (int64_t i = 0; i < n; i++) {
        if (dt == GF_DT_F32) {
            float v = gf_test_rng_float(&g_rng, -4, 4);
            if (which && divides(op) && fabsf(v) < 0.25f)
                v = v < 0 ? -0.25f - v : 0.25f + v;
            if (op == GF_BINARY_POW && which)
                v = (i % 3 == 0) ? (float)(int)v : gf_test_rng_float(&g_rng, -2, 3);
            if (op == GF_BINARY_POW && !which && i % 3 != 0)
                v = fabsf(v) + 0.1f;
            if (is_cmp(op) && i % 4 == 0)
                v = 1.0f; /* ties, so EQUAL and the _EQUAL forms see both */
            ((float *)buf)[i] = v;
        } else if (dt == GF_DT_BOOL) {
            static const uint8_t vals[4] = {0, 1, 2, 255};
            ((uint8_t *)buf)[i] = vals[gf_test_rng_below(&g_rng, 4)];
        } else {
            int64_t v = (int64_t)gf_test_rng_below(&g_rng, 101) - 50;
            if (which) {
                v = (int64_t)gf_test_rng_below(&g_rng, 19) - 9;
                if (divides(op) && v == 0)
                    v = 7;
                if (op == GF_BINARY_POW)
                    v = (int64_t)gf_test_rng_below(&g_rng, 9) - 2;
            } else if (op == GF_BINARY_POW) {
                v = (int64_t)gf_test_rng_below(&g_rng, 11) - 5;
            }
            if (is_cmp(op) && i % 4 == 0)
                v = 3;
            if (dt == GF_DT_I32)
                ((int32_t *)buf)[i] = (int32_t)v;
            else
                ((int64_t *)buf)[i] = v;
        }
    }
}

static int64_t get_int(const void *buf, gf_dtype dt, int64_t i)
{
    switch (dt) {
    case GF_DT_I32: return ((const int32_t *)buf)[i];
    case GF_DT_I64: return ((const int64_t *)buf)[i];
    default: return ((const uint8_t *)buf)[i];
    }
}

/* One binary case: y[shape] = a op b with the given input strides. */
static void binary_case(gf_binary_op op, gf_dtype dt, int rank, const int64_t *shape,
                        const int64_t *as, const int64_t *bs, int inplace)
{
    bool logic = op >= GF_BINARY_AND;
    gf_dtype ydt = (is_cmp(op) || logic) ? GF_DT_BOOL : dt;
    size_t es = gf_dtype_size(dt), ys = gf_dtype_size(ydt);
    int64_t n = numel(rank, shape), abase, bbase;
    int64_t alen = span_of(rank, shape, as, &abase), blen = span_of(rank, shape, bs, &bbase);
    void *a = calloc((size_t)alen, es), *b = calloc((size_t)blen, es);
    void *got = calloc((size_t)(n ? n : 1), ys);
    fill_values(a, alen, dt, op, 0);
    fill_values(b, blen, dt, op, 1);
    char *da = dput(a, (size_t)alen * es), *db = dput(b, (size_t)blen * es);
    void *dy = inplace ? (void *)da : dbuf((size_t)n * ys);
    KOK(K->binary(K->ctx, S, op, rank, shape, dy, da + abase * (int64_t)es, as,
                  db + bbase * (int64_t)es, bs, dt));
    dget(got, dy, (size_t)n * ys);
    char what[120];
    snprintf(what, sizeof what, "binary op %d %s rank %d n %" PRId64 " inplace %d", (int)op,
             dtn(dt), rank, n, inplace);
    for (int64_t i = 0; i < n; i++) {
        int64_t ia = abase + offset_of(i, rank, shape, as), ib = bbase + offset_of(i, rank, shape, bs);
        if (dt == GF_DT_F32) {
            double tol, r = ref_f32(op, ((float *)a)[ia], ((float *)b)[ib], &tol);
            double g = ydt == GF_DT_BOOL ? ((uint8_t *)got)[i] : ((float *)got)[i];
            if (isnan(r))
                ck_assert_msg(isnan(g), "%s [%" PRId64 "]: expected NaN, got %g", what, i, g);
            else
                ck_assert_msg(fabs(g - r) <= tol, "%s [%" PRId64 "]: %.9g op %.9g = %.9g, expected %.9g",
                              what, i, (double)((float *)a)[ia], (double)((float *)b)[ib], g, r);
        } else if (dt == GF_DT_BOOL) {
            int av = get_int(a, dt, ia) != 0, bv = get_int(b, dt, ib) != 0;
            int r = op == GF_BINARY_AND ? av & bv : op == GF_BINARY_OR ? av | bv
                  : op == GF_BINARY_XOR ? av ^ bv : av == bv;
            ck_assert_msg(((uint8_t *)got)[i] == r, "%s [%" PRId64 "]: got %d, expected %d", what,
                          i, ((uint8_t *)got)[i], r);
        } else {
            int64_t r = ref_int(op, get_int(a, dt, ia), get_int(b, dt, ib), dt == GF_DT_I32 ? 32 : 64);
            int64_t g = get_int(got, ydt, i);
            ck_assert_msg(g == r, "%s [%" PRId64 "]: %" PRId64 " op %" PRId64 " = %" PRId64
                          ", expected %" PRId64, what, i, get_int(a, dt, ia), get_int(b, dt, ib), g, r);
        }
    }
    free(a), free(b), free(got);
    dfree_all();
}

/* The stride layouts every op runs on. */
static void binary_layouts(gf_binary_op op, gf_dtype dt)
{
    /* dense, same shape (also in place) */
    int64_t s3[3] = {3, 5, 7}, d3[3] = {35, 7, 1};
    binary_case(op, dt, 3, s3, d3, d3, 0);
    if (!is_cmp(op) && op < GF_BINARY_AND)
        binary_case(op, dt, 3, s3, d3, d3, 1);
    /* numpy broadcasting: a [3, 1, 7], b [1, 5, 1] */
    int64_t ba[3] = {7, 0, 1}, bb[3] = {0, 1, 0};
    binary_case(op, dt, 3, s3, ba, bb, 0);
    /* a scalar on either side, over a long row (vectorised paths) */
    int64_t s1[1] = {4096 + 3}, one[1] = {1}, zero[1] = {0};
    binary_case(op, dt, 1, s1, one, zero, 0);
    binary_case(op, dt, 1, s1, zero, one, 0);
    /* rank 0 */
    binary_case(op, dt, 0, NULL, NULL, NULL, 0);
    /* a transposed and reversed along rows; b a row vector over channels
     * of NCHW ([2, 3, 4, 5] * [1, 3, 1, 1]) */
    int64_t s2[2] = {5, 3}, tr[2] = {-1, 5}, row[2] = {0, 1};
    binary_case(op, dt, 2, s2, tr, row, 0);
    int64_t s4[4] = {2, 3, 4, 5}, d4[4] = {60, 20, 5, 1}, ch[4] = {0, 1, 0, 0};
    binary_case(op, dt, 4, s4, d4, ch, 0);
    /* an empty dimension: nothing happens */
    int64_t se[2] = {3, 0}, de[2] = {0, 1};
    binary_case(op, dt, 2, se, de, de, 0);
}

START_TEST(test_binary)
{
    for (int op = 0; op < GF_BINARY_COUNT_; op++) {
        if (op >= GF_BINARY_AND) {
            binary_layouts((gf_binary_op)op, GF_DT_BOOL);
            continue;
        }
        binary_layouts((gf_binary_op)op, GF_DT_F32);
        binary_layouts((gf_binary_op)op, GF_DT_I32);
        binary_layouts((gf_binary_op)op, GF_DT_I64);
    }
    binary_layouts(GF_BINARY_EQUAL, GF_DT_BOOL);
}
END_TEST

/* Integer edge cases: wrapping, INT_MIN / -1, signs of MOD and FMOD. */
START_TEST(test_binary_int_edges)
{
    static const gf_binary_op ops[] = {GF_BINARY_ADD, GF_BINARY_SUB, GF_BINARY_MUL, GF_BINARY_DIV,
                                       GF_BINARY_MOD, GF_BINARY_FMOD, GF_BINARY_POW};
    const int64_t a64[8] = {INT64_MAX, INT64_MIN, INT64_MIN, -7, 7, -7, 3, INT64_MIN + 1};
    const int64_t b64[8] = {1, -1, 2, 3, -3, -3, 40, -1};
    int32_t a32[8], b32[8];
    for (int i = 0; i < 8; i++) {
        a32[i] = i < 3 ? (i == 0 ? INT32_MAX : INT32_MIN) : (int32_t)a64[i];
        b32[i] = (int32_t)b64[i];
    }
    int64_t shape[1] = {8}, st[1] = {1};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
        for (int w = 0; w < 2; w++) {
            gf_dtype dt = w ? GF_DT_I64 : GF_DT_I32;
            size_t es = w ? 8 : 4;
            const void *ha = w ? (const void *)a64 : a32, *hb = w ? (const void *)b64 : b32;
            void *da = dput(ha, 8 * es), *db = dput(hb, 8 * es), *dy = dbuf(8 * es);
            KOK(K->binary(K->ctx, S, ops[k], 1, shape, dy, da, st, db, st, dt));
            int64_t got[8];
            dget(got, dy, 8 * es);
            for (int i = 0; i < 8; i++) {
                int64_t g = get_int(got, dt, i);
                int64_t r = ref_int(ops[k], get_int(ha, dt, i), get_int(hb, dt, i), w ? 64 : 32);
                ck_assert_msg(g == r, "op %d %s [%d]: got %" PRId64 ", expected %" PRId64,
                              (int)ops[k], dtn(dt), i, g, r);
            }
        }
}
END_TEST

START_TEST(test_binary_div_by_zero)
{
    int32_t a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 1, 1};
    int64_t shape[1] = {4}, st[1] = {1};
    void *da = dput(a, sizeof a), *db = dput(b, sizeof b), *dy = dbuf(sizeof a);
    static const gf_binary_op ops[3] = {GF_BINARY_DIV, GF_BINARY_MOD, GF_BINARY_FMOD};
    for (int k = 0; k < 3; k++) {
        int rc = K->binary(K->ctx, S, ops[k], 1, shape, dy, da, st, db, st, GF_DT_I32);
        expect_data_error(rc, "by zero");
    }
    /* F32 division by zero is IEEE: infinity, not an error */
    float fa[2] = {1, -1}, fb[2] = {0, 0}, fg[2];
    void *fda = dput(fa, 8), *fdb = dput(fb, 8), *fdy = dbuf(8);
    int64_t s2[1] = {2};
    KOK(K->binary(K->ctx, S, GF_BINARY_DIV, 1, s2, fdy, fda, st, fdb, st, GF_DT_F32));
    dget(fg, fdy, 8);
    ck_assert(isinf(fg[0]) && fg[0] > 0 && isinf(fg[1]) && fg[1] < 0);
}
END_TEST

/* ---- where ---- */

START_TEST(test_where)
{
    /* cond [3, 1, 5], a [1, 4, 5], b [3, 4, 1] -> [3, 4, 5]; a second time
     * with a in place of y (same strides as y) */
    int64_t shape[3] = {3, 4, 5}, cs[3] = {5, 0, 1}, as[3] = {0, 5, 1}, bs[3] = {4, 1, 0};
    int64_t ys[3] = {20, 5, 1};
    uint8_t cond[15];
    for (int i = 0; i < 15; i++)
        cond[i] = (uint8_t)(gf_test_rng_below(&g_rng, 3) * 100); /* 0, 100, 200 */
    static const int64_t sizes[4] = {1, 2, 4, 8};
    for (int si = 0; si < 4; si++) {
        int64_t es = sizes[si];
        unsigned char a[60 * 8], b[12 * 8], got[60 * 8];
        for (size_t i = 0; i < sizeof a; i++)
            a[i] = (unsigned char)gf_test_rng_below(&g_rng, 256);
        for (size_t i = 0; i < sizeof b; i++)
            b[i] = (unsigned char)gf_test_rng_below(&g_rng, 256);
        void *dc = dput(cond, 15), *da = dput(a, (size_t)(20 * es)), *db = dput(b, (size_t)(12 * es));
        void *dy = dbuf((size_t)(60 * es));
        KOK(K->where(K->ctx, S, 3, shape, dy, dc, cs, da, as, db, bs, es));
        dget(got, dy, (size_t)(60 * es));
        for (int64_t i = 0; i < 60; i++) {
            int64_t c = offset_of(i, 3, shape, cs), ia = offset_of(i, 3, shape, as),
                    ib = offset_of(i, 3, shape, bs);
            const unsigned char *want = cond[c] ? a + ia * es : b + ib * es;
            ck_assert_msg(memcmp(got + i * es, want, (size_t)es) == 0, "where es %" PRId64 " [%" PRId64 "]", es, i);
        }
        /* in place: y is a dense [3, 4, 5] buffer that is also a */
        unsigned char full[60 * 8];
        for (int64_t i = 0; i < 60 * es; i++)
            full[i] = (unsigned char)(i * 7);
        void *dfull = dput(full, (size_t)(60 * es));
        KOK(K->where(K->ctx, S, 3, shape, dfull, dc, cs, dfull, ys, db, bs, es));
        dget(got, dfull, (size_t)(60 * es));
        for (int64_t i = 0; i < 60; i++) {
            int64_t c = offset_of(i, 3, shape, cs), ib = offset_of(i, 3, shape, bs);
            const unsigned char *want = cond[c] ? full + i * es : b + ib * es;
            ck_assert_msg(memcmp(got + i * es, want, (size_t)es) == 0, "where in place [%" PRId64 "]", i);
        }
    }
}
END_TEST

/* ---- strided_copy ---- */

/* Copy shape out of an x of xlen elements (bytes random) with x strides and
 * offset into y (dense, or ys inside a ylen buffer whose other elements
 * must survive); compare with the reference. */
static void copy_case(int rank, const int64_t *shape, const int64_t *xs, int64_t xoff,
                      int64_t xlen, const int64_t *ys, int64_t ylen, int64_t es)
{
    int64_t n = numel(rank, shape);
    if (ys == NULL)
        ylen = n;
    unsigned char *x = malloc((size_t)(xlen * es)), *y0 = malloc((size_t)((ylen ? ylen : 1) * es));
    unsigned char *got = malloc((size_t)((ylen ? ylen : 1) * es));
    for (int64_t i = 0; i < xlen * es; i++)
        x[i] = (unsigned char)gf_test_rng_below(&g_rng, 256);
    for (int64_t i = 0; i < ylen * es; i++)
        y0[i] = 0xA5;
    void *dx = dput(x, (size_t)(xlen * es)), *dy = dput(y0, (size_t)(ylen * es));
    KOK(K->strided_copy(K->ctx, S, rank, shape, dy, ys, dx, xs, xoff, es));
    dget(got, dy, (size_t)(ylen * es));
    int64_t dense[GF_MAX_RANK], acc = 1;
    for (int d = rank - 1; d >= 0; d--) {
        dense[d] = acc;
        acc *= shape[d];
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t yo = offset_of(i, rank, shape, ys ? ys : dense);
        int64_t xo = xoff + offset_of(i, rank, shape, xs);
        ck_assert_msg(memcmp(got + yo * es, x + xo * es, (size_t)es) == 0,
                      "strided_copy rank %d es %" PRId64 " element %" PRId64, rank, es, i);
        memcpy(y0 + yo * es, x + xo * es, (size_t)es); /* the expected whole y */
    }
    ck_assert_msg(memcmp(got, y0, (size_t)(ylen * es)) == 0,
                  "strided_copy wrote outside the copied elements");
    free(x), free(y0), free(got);
    dfree_all();
}

START_TEST(test_strided_copy)
{
    static const int64_t sizes[4] = {1, 2, 4, 8};
    for (int si = 0; si < 4; si++) {
        int64_t es = sizes[si];
        /* Transpose [2, 3, 4, 5] by (2, 0, 3, 1): out [4, 2, 5, 3] */
        int64_t tshape[4] = {4, 2, 5, 3}, txs[4] = {5, 60, 1, 20};
        copy_case(4, tshape, txs, 0, 120, NULL, 0, es);
        /* (0, 2, 1, 3): rows of 5 stay contiguous */
        int64_t pshape[4] = {2, 4, 3, 5}, pxs[4] = {60, 5, 20, 1};
        copy_case(4, pshape, pxs, 0, 120, NULL, 0, es);
        /* Slice x[7, 9] as [1:6:2, 8:0:-3] -> [3, 3] */
        int64_t sshape[2] = {3, 3}, sxs[2] = {18, -3};
        copy_case(2, sshape, sxs, 1 * 9 + 8, 63, NULL, 0, es);
        /* Expand [3, 1] to [2, 3, 4] */
        int64_t eshape[3] = {2, 3, 4}, exs[3] = {0, 1, 0};
        copy_case(3, eshape, exs, 0, 3, NULL, 0, es);
        /* Tile [2, 3] by (2, 3) as [2, 2, 3, 3] with stride 0 on the copies */
        int64_t tlshape[4] = {2, 2, 3, 3}, tlxs[4] = {0, 3, 0, 1};
        copy_case(4, tlshape, tlxs, 0, 6, NULL, 0, es);
        /* Concat / Pad: a [4, 3] piece into a [6, 8] buffer at (1, 2) */
        int64_t cshape[2] = {4, 3}, cxs[2] = {3, 1}, cys[2] = {8, 1};
        copy_case(2, cshape, cxs, 0, 12, cys, 48 - 8 - 2, es); /* y points at (1, 2) */
        /* a long contiguous row, and rank 0 */
        int64_t lshape[1] = {10007}, lxs[1] = {1};
        copy_case(1, lshape, lxs, 3, 10010, NULL, 0, es);
        copy_case(0, NULL, NULL, 2, 3, NULL, 0, es);
        /* a zero-size dimension: nothing */
        int64_t zshape[2] = {0, 5}, zxs[2] = {5, 1};
        copy_case(2, zshape, zxs, 0, 1, NULL, 0, es);
    }
}
END_TEST

/* ---- gather ---- */

static void gather_case(int64_t outer, int64_t axis, int64_t inner, int64_t nids,
                        gf_dtype idt, int64_t es)
{
    int64_t nx = outer * axis * inner, ny = outer * nids * inner;
    unsigned char *x = malloc((size_t)((nx ? nx : 1) * es)), *got = malloc((size_t)((ny ? ny : 1) * es));
    for (int64_t i = 0; i < nx * es; i++)
        x[i] = (unsigned char)gf_test_rng_below(&g_rng, 256);
    int64_t *ids = calloc((size_t)(nids ? nids : 1), 8);
    int32_t *ids32 = calloc((size_t)(nids ? nids : 1), 4);
    for (int64_t j = 0; j < nids; j++) {
        ids[j] = (int64_t)gf_test_rng_below(&g_rng, (uint64_t)(2 * axis)) - axis; /* [-axis, axis) */
        ids32[j] = (int32_t)ids[j];
    }
    void *dx = dput(x, (size_t)(nx * es)), *dy = dbuf((size_t)(ny * es));
    void *did = idt == GF_DT_I64 ? dput(ids, (size_t)nids * 8) : dput(ids32, (size_t)nids * 4);
    KOK(K->gather(K->ctx, S, dy, dx, outer, axis, inner, did, idt, nids, es));
    dget(got, dy, (size_t)(ny * es));
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < nids; j++) {
            int64_t id = ids[j] < 0 ? ids[j] + axis : ids[j];
            ck_assert_msg(memcmp(got + ((o * nids + j) * inner) * es, x + ((o * axis + id) * inner) * es,
                                 (size_t)(inner * es)) == 0,
                          "gather %" PRId64 "x%" PRId64 "x%" PRId64 " row (%" PRId64 ", %" PRId64 ")",
                          outer, axis, inner, o, j);
        }
    free(x), free(got), free(ids), free(ids32);
    dfree_all();
}

START_TEST(test_gather)
{
    static const int64_t sizes[4] = {1, 2, 4, 8};
    for (int si = 0; si < 4; si++)
        for (int d = 0; d < 2; d++) {
            gf_dtype idt = d ? GF_DT_I64 : GF_DT_I32;
            gather_case(1, 10, 1, 7, idt, sizes[si]);
            gather_case(3, 5, 4, 9, idt, sizes[si]);
            gather_case(2, 30522 / 100, 64, 33, idt, sizes[si]);
            gather_case(4, 3, 1, 1, idt, sizes[si]);
        }
}
END_TEST

START_TEST(test_gather_out_of_range)
{
    float x[6] = {0, 1, 2, 3, 4, 5}, sentinel[4] = {-7, -7, -7, -7}, got[4];
    static const int64_t bad[3] = {3, -4, (int64_t)1 << 40};
    static const char *text[3] = {"3", "-4", "1099511627776"};
    for (int k = 0; k < 3; k++) {
        int64_t ids[2] = {0, bad[k]};
        void *dx = dput(x, sizeof x), *did = dput(ids, sizeof ids), *dy = dput(sentinel, sizeof sentinel);
        int rc = K->gather(K->ctx, S, dy, dx, 2, 3, 1, did, GF_DT_I64, 2, 4);
        bool at_once = expect_data_error(rc, text[k]);
        dget(got, dy, sizeof got);
        /* the bad row is never written; on cpu nothing is */
        ck_assert(got[1] == -7.0f && got[3] == -7.0f);
        if (at_once)
            ck_assert(got[0] == -7.0f && got[2] == -7.0f);
    }
}
END_TEST

/* ---- fill ---- */

START_TEST(test_fill)
{
    static const int64_t sizes[4] = {1, 2, 4, 8};
    const unsigned char value[8] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0};
    for (int si = 0; si < 4; si++) {
        int64_t es = sizes[si], n = 1001;
        unsigned char *got = malloc((size_t)((n + 1) * es));
        memset(got, 0xEE, (size_t)((n + 1) * es));
        void *dy = dput(got, (size_t)((n + 1) * es));
        KOK(K->fill(K->ctx, S, dy, n, value, es));
        dget(got, dy, (size_t)((n + 1) * es));
        for (int64_t i = 0; i < n; i++)
            ck_assert_msg(memcmp(got + i * es, value, (size_t)es) == 0, "fill es %" PRId64 " [%" PRId64 "]", es, i);
        for (int64_t i = 0; i < es; i++)
            ck_assert_uint_eq(got[n * es + i], 0xEE);
        free(got);
    }
}
END_TEST

/* ---- argument errors and empty calls ---- */

START_TEST(test_bad_arguments_ew)
{
    float *x = dbuf(4096), *y = dbuf(4096);
    int64_t shape[2] = {2, 3}, st[2] = {3, 1}, neg[2] = {-1, 3};
    KERR(GF_ERR_INVALID, "unary", K->unary(K->ctx, S, GF_UNARY_COUNT_, y, x, 4, 0, 0));
    KERR(GF_ERR_INVALID, "unary", K->unary(K->ctx, S, GF_UNARY_RELU, y, NULL, 4, 0, 0));
    KERR(GF_ERR_INVALID, "binary",
         K->binary(K->ctx, S, GF_BINARY_COUNT_, 2, shape, y, x, st, x, st, GF_DT_F32));
    KERR(GF_ERR_INVALID, "binary",
         K->binary(K->ctx, S, GF_BINARY_ADD, 9, shape, y, x, st, x, st, GF_DT_F32));
    KERR(GF_ERR_INVALID, "binary",
         K->binary(K->ctx, S, GF_BINARY_ADD, 2, neg, y, x, st, x, st, GF_DT_F32));
    KERR(GF_ERR_UNSUPPORTED, "binary",
         K->binary(K->ctx, S, GF_BINARY_ADD, 2, shape, y, x, st, x, st, GF_DT_F16));
    KERR(GF_ERR_UNSUPPORTED, "binary",
         K->binary(K->ctx, S, GF_BINARY_AND, 2, shape, y, x, st, x, st, GF_DT_F32));
    KERR(GF_ERR_INVALID, "binary",
         K->binary(K->ctx, S, GF_BINARY_ADD, 2, shape, y, x, NULL, x, st, GF_DT_F32));
    int64_t huge[2] = {INT64_MAX / 2, 4};
    KERR(GF_ERR_OVERFLOW, "binary",
         K->binary(K->ctx, S, GF_BINARY_ADD, 2, huge, y, x, st, x, st, GF_DT_F32));
    KERR(GF_ERR_INVALID, "where", K->where(K->ctx, S, 2, shape, y, x, st, x, st, x, st, 3));
    KERR(GF_ERR_INVALID, "strided_copy",
         K->strided_copy(K->ctx, S, 2, shape, y, NULL, x, st, 0, 16));
    int64_t rev[2] = {-3, 1};
    KERR(GF_ERR_INVALID, "strided_copy", /* reaches before x */
         K->strided_copy(K->ctx, S, 2, shape, y, NULL, x, rev, 2, 4));
    int64_t zero_y[2] = {0, 1};
    KERR(GF_ERR_INVALID, "strided_copy", /* y elements overlap */
         K->strided_copy(K->ctx, S, 2, shape, y, zero_y, x, st, 0, 4));
    KERR(GF_ERR_UNSUPPORTED, "gather",
         K->gather(K->ctx, S, y, x, 1, 4, 1, x, GF_DT_F32, 2, 4));
    KERR(GF_ERR_INVALID, "gather", K->gather(K->ctx, S, y, x, 1, 4, -1, x, GF_DT_I64, 2, 4));
    KERR(GF_ERR_INVALID, "fill", K->fill(K->ctx, S, y, 4, NULL, 4));
    KERR(GF_ERR_INVALID, "fill", K->fill(K->ctx, S, y, 4, x, 5));
    KERR(GF_ERR_UNSUPPORTED, "cast_ex",
         K->cast_ex(K->ctx, S, y, GF_DT_INVALID, x, GF_DT_F32, 4));
    KERR(GF_ERR_UNSUPPORTED, "cast_ex",
         K->cast_ex(K->ctx, S, y, GF_DT_F32, x, GF_DT_COUNT_, 4));
    KERR(GF_ERR_INVALID, "cast_ex", K->cast_ex(K->ctx, S, y, GF_DT_F32, x, GF_DT_I8, -4));
    /* a good call afterwards works */
    KOK(K->unary(K->ctx, S, GF_UNARY_RELU, y, x, 16, 0, 0));
}
END_TEST

START_TEST(test_zero_sizes_ew)
{
    int64_t shape[2] = {4, 0}, st[2] = {0, 1};
    KOK(K->unary(K->ctx, S, GF_UNARY_EXP, NULL, NULL, 0, 0, 0));
    KOK(K->binary(K->ctx, S, GF_BINARY_ADD, 2, shape, NULL, NULL, st, NULL, st, GF_DT_F32));
    KOK(K->where(K->ctx, S, 2, shape, NULL, NULL, st, NULL, st, NULL, st, 4));
    KOK(K->strided_copy(K->ctx, S, 2, shape, NULL, NULL, NULL, st, 0, 4));
    KOK(K->gather(K->ctx, S, NULL, NULL, 3, 5, 2, NULL, GF_DT_I64, 0, 4));
    KOK(K->fill(K->ctx, S, NULL, 0, NULL, 8));
    KOK(K->cast_ex(K->ctx, S, NULL, GF_DT_I64, NULL, GF_DT_BOOL, 0));
}
END_TEST

/* The cast_ex tests live in test_kernels_cast.c (kh_cast_tests). */
void kh_cast_tests(TCase *tc);

static void add_tests(TCase *tc)
{
    tcase_add_test(tc, test_unary);
    tcase_add_test(tc, test_unary_specials);
    tcase_add_test(tc, test_binary);
    tcase_add_test(tc, test_binary_int_edges);
    tcase_add_test(tc, test_binary_div_by_zero);
    tcase_add_test(tc, test_where);
    tcase_add_test(tc, test_strided_copy);
    tcase_add_test(tc, test_gather);
    tcase_add_test(tc, test_gather_out_of_range);
    tcase_add_test(tc, test_fill);
    tcase_add_test(tc, test_bad_arguments_ew);
    tcase_add_test(tc, test_zero_sizes_ew);
    kh_cast_tests(tc);
}

int main(int argc, char **argv)
{
    return kh_main(argc, argv, "kernels_ew", add_tests);
}
