/* gpufaas — elementwise and layout kernels of version 2 on the cpu
 * (runtime/backend/cpu): unary, binary, where, strided_copy, gather, fill.
 *
 * The strided kernels walk the collapsed iteration space kernel_args_v2.c
 * builds (gf_kiter): an odometer over the outer dimensions (no division
 * per element) and one contiguous inner loop, specialised for the stride
 * patterns that vectorise (both inputs dense, one of them broadcast).
 * Integer arithmetic is done in the unsigned type, so it wraps instead of
 * being undefined.
 */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/kernel_args.h"
#include "core/dtype.h"
#include "core/tensor.h"

/* ---- the odometer over a gf_kiter's outer dimensions ---- */

typedef struct walk {
    const gf_kiter *it;
    int64_t idx[GF_MAX_RANK];        /* index of the outer dims */
    int64_t off[GF_KITER_MAX_OPS];   /* element offset of each operand */
} walk;

static void walk_init(walk *w, const gf_kiter *it)
{
    memset(w, 0, sizeof *w);
    w->it = it;
}

/* Advance to the next inner row; false after the last. */
static bool walk_next(walk *w)
{
    const gf_kiter *it = w->it;
    for (int d = it->rank - 2; d >= 0; d--) {
        if (++w->idx[d] < it->shape[d]) {
            for (int o = 0; o < it->nops; o++)
                w->off[o] += it->st[o][d];
            return true;
        }
        w->idx[d] = 0;
        for (int o = 0; o < it->nops; o++)
            w->off[o] -= it->st[o][d] * (it->shape[d] - 1);
    }
    return false;
}

/* ---- unary ---- */

static inline float softplus(float v)
{
    return (v > 0.0f ? v : 0.0f) + log1pf(expf(-fabsf(v)));
}

int gf_cpu_unary(void *vctx, gf_stream *s, gf_unary_op op, float *y, const float *x, int64_t n,
                 float alpha, float beta)
{
    (void)vctx;
    (void)s;
    bool noop;
    int rc = gf_kargs_unary(y, x, n, op, &noop);
    if (rc != 0 || noop)
        return rc;
#define MAP(expr)                                                                                 \
    for (int64_t i = 0; i < n; i++) {                                                             \
        float v = x[i];                                                                           \
        y[i] = (expr);                                                                            \
    }                                                                                             \
    break
    switch (op) {
    case GF_UNARY_RELU: MAP(v > 0.0f ? v : 0.0f);
    case GF_UNARY_SIGMOID: MAP(1.0f / (1.0f + expf(-v)));
    case GF_UNARY_TANH: MAP(tanhf(v));
    case GF_UNARY_ERF: MAP(erff(v));
    case GF_UNARY_EXP: MAP(expf(v));
    case GF_UNARY_LOG: MAP(logf(v));
    case GF_UNARY_SQRT: MAP(sqrtf(v));
    case GF_UNARY_RECIPROCAL: MAP(1.0f / v);
    case GF_UNARY_NEG: MAP(-v);
    case GF_UNARY_ABS: MAP(fabsf(v));
    case GF_UNARY_FLOOR: MAP(floorf(v));
    case GF_UNARY_CEIL: MAP(ceilf(v));
    case GF_UNARY_ROUND: MAP(rintf(v)); /* the default rounding mode: halves to even */
    case GF_UNARY_SIGN: MAP(v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : v);
    case GF_UNARY_SIN: MAP(sinf(v));
    case GF_UNARY_COS: MAP(cosf(v));
    case GF_UNARY_SOFTPLUS: MAP(softplus(v));
    case GF_UNARY_SOFTSIGN: MAP(v / (1.0f + fabsf(v)));
    case GF_UNARY_HARDSIGMOID: MAP(fmaxf(0.0f, fminf(1.0f, alpha * v + beta)));
    case GF_UNARY_HARDSWISH: MAP(v * fmaxf(0.0f, fminf(1.0f, v * (1.0f / 6.0f) + 0.5f)));
    case GF_UNARY_LEAKYRELU: MAP(v < 0.0f ? alpha * v : v);
    case GF_UNARY_ELU: MAP(v < 0.0f ? alpha * expm1f(v) : v);
    case GF_UNARY_SELU: MAP(beta * (v <= 0.0f ? alpha * expm1f(v) : v));
    case GF_UNARY_CLIP: MAP(v < alpha ? alpha : (v > beta ? beta : v));
    case GF_UNARY_GELU_ERF: MAP(0.5f * v * (1.0f + erff(v * (float)M_SQRT1_2)));
    case GF_UNARY_GELU_TANH:
        MAP(0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v))));
    case GF_UNARY_POW_SCALAR:
        if (alpha == 2.0f) {
            MAP(v * v);
        } else if (alpha == 1.0f) {
            MAP(v);
        } else {
            MAP(powf(v, alpha));
        }
    case GF_UNARY_MISH: MAP(v * tanhf(softplus(v)));
    case GF_UNARY_TAN: MAP(tanf(v));
    case GF_UNARY_ASIN: MAP(asinf(v));
    case GF_UNARY_ACOS: MAP(acosf(v));
    case GF_UNARY_ATAN: MAP(atanf(v));
    case GF_UNARY_SINH: MAP(sinhf(v));
    case GF_UNARY_COSH: MAP(coshf(v));
    case GF_UNARY_ASINH: MAP(asinhf(v));
    case GF_UNARY_ACOSH: MAP(acoshf(v));
    case GF_UNARY_ATANH: MAP(atanhf(v));
    case GF_UNARY_CELU:
        MAP((v > 0.0f ? v : 0.0f) + fminf(0.0f, alpha * expm1f(v / alpha)));
    case GF_UNARY_THRESHOLDED_RELU: MAP(v > alpha ? v : 0.0f);
    case GF_UNARY_SHRINK: MAP(v < -alpha ? v + beta : (v > alpha ? v - beta : 0.0f));
    case GF_UNARY_IDENTITY:
        if (y != x)
            memmove(y, x, (size_t)n * sizeof(float));
        break;
    case GF_UNARY_SILU: MAP(v / (1.0f + expf(-v)));
    case GF_UNARY_COUNT_:
        break;
    }
#undef MAP
    return 0;
}

/* ---- binary ---- */

/* One inner row of len elements: y[j] = EXPR(av, bv) with av = a[j sa],
 * bv = b[j sb]; the dense and broadcast patterns get their own loops so
 * they vectorise. */
#define ROW(TY, TA, EXPR)                                                                         \
    do {                                                                                          \
        TY *y_ = (TY *)yv;                                                                        \
        const TA *a_ = (const TA *)av_, *b_ = (const TA *)bv_;                                    \
        if (sa == 1 && sb == 1) {                                                                 \
            for (int64_t j = 0; j < len; j++) {                                                   \
                TA av = a_[j], bv = b_[j];                                                        \
                y_[j] = (EXPR);                                                                   \
            }                                                                                     \
        } else if (sa == 1 && sb == 0) {                                                          \
            TA bv = b_[0];                                                                        \
            for (int64_t j = 0; j < len; j++) {                                                   \
                TA av = a_[j];                                                                    \
                y_[j] = (EXPR);                                                                   \
            }                                                                                     \
        } else if (sa == 0 && sb == 1) {                                                          \
            TA av = a_[0];                                                                        \
            for (int64_t j = 0; j < len; j++) {                                                   \
                TA bv = b_[j];                                                                    \
                y_[j] = (EXPR);                                                                   \
            }                                                                                     \
        } else {                                                                                  \
            for (int64_t j = 0; j < len; j++) {                                                   \
                TA av = a_[j * sa], bv = b_[j * sb];                                              \
                y_[j] = (EXPR);                                                                   \
            }                                                                                     \
        }                                                                                         \
    } while (0)

static inline float f32_mod(float a, float b)
{
    float r = fmodf(a, b);
    if (r != 0.0f && ((r < 0.0f) != (b < 0.0f)))
        r += b;
    return r;
}

static inline float f32_max(float a, float b)
{
    return isnan(a) || isnan(b) ? a + b : (a > b ? a : b);
}

static inline float f32_min(float a, float b)
{
    return isnan(a) || isnan(b) ? a + b : (a < b ? a : b);
}

static inline float f32_pow(float a, float b)
{
    return b == 2.0f ? a * a : powf(a, b);
}

/* F32 rows. */
static void row_f32(gf_binary_op op, void *yv, const void *av_, int64_t sa, const void *bv_,
                    int64_t sb, int64_t len)
{
    switch (op) {
    case GF_BINARY_ADD: ROW(float, float, av + bv); break;
    case GF_BINARY_SUB: ROW(float, float, av - bv); break;
    case GF_BINARY_MUL: ROW(float, float, av * bv); break;
    case GF_BINARY_DIV: ROW(float, float, av / bv); break;
    case GF_BINARY_POW: ROW(float, float, f32_pow(av, bv)); break;
    case GF_BINARY_MAX: ROW(float, float, f32_max(av, bv)); break;
    case GF_BINARY_MIN: ROW(float, float, f32_min(av, bv)); break;
    case GF_BINARY_MOD: ROW(float, float, f32_mod(av, bv)); break;
    case GF_BINARY_FMOD: ROW(float, float, fmodf(av, bv)); break;
    case GF_BINARY_PRELU: ROW(float, float, av < 0.0f ? av * bv : av); break;
    case GF_BINARY_EQUAL: ROW(uint8_t, float, av == bv); break;
    case GF_BINARY_LESS: ROW(uint8_t, float, av < bv); break;
    case GF_BINARY_LESS_EQUAL: ROW(uint8_t, float, av <= bv); break;
    case GF_BINARY_GREATER: ROW(uint8_t, float, av > bv); break;
    case GF_BINARY_GREATER_EQUAL: ROW(uint8_t, float, av >= bv); break;
    default: break;
    }
}

/* Integer rows for a signed type T with unsigned twin U; division and
 * modulo by zero set *zero and give 0. */
#define INT_ROWS(NAME, T, U)                                                                \
    static inline T NAME##_div(T a, T b, bool *zero)                                              \
    {                                                                                             \
        if (b == 0) {                                                                             \
            *zero = true;                                                                         \
            return 0;                                                                             \
        }                                                                                         \
        return b == -1 ? (T)(0 - (U)a) : (T)(a / b); /* TMIN / -1 wraps to TMIN */                \
    }                                                                                             \
    static inline T NAME##_fmod(T a, T b, bool *zero)                                             \
    {                                                                                             \
        if (b == 0) {                                                                             \
            *zero = true;                                                                         \
            return 0;                                                                             \
        }                                                                                         \
        return b == -1 ? 0 : (T)(a % b);                                                          \
    }                                                                                             \
    static inline T NAME##_mod(T a, T b, bool *zero)                                              \
    {                                                                                             \
        T r = NAME##_fmod(a, b, zero);                                                            \
        return r != 0 && ((r < 0) != (b < 0)) ? (T)((U)r + (U)b) : r;                             \
    }                                                                                             \
    static inline T NAME##_pow(T a, T b)                                                          \
    {                                                                                             \
        if (b < 0)                                                                                \
            return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;                                 \
        U r = 1, base = (U)a;                                                                     \
        for (U e = (U)b; e != 0; e >>= 1) {                                                       \
            if (e & 1)                                                                            \
                r *= base;                                                                        \
            base *= base;                                                                         \
        }                                                                                         \
        return (T)r;                                                                              \
    }                                                                                             \
    static void NAME##_row(gf_binary_op op, void *yv, const void *av_, int64_t sa,                \
                           const void *bv_, int64_t sb, int64_t len, bool *zero)                  \
    {                                                                                             \
        switch (op) {                                                                             \
        case GF_BINARY_ADD: ROW(T, T, (T)((U)av + (U)bv)); break;                                 \
        case GF_BINARY_SUB: ROW(T, T, (T)((U)av - (U)bv)); break;                                 \
        case GF_BINARY_MUL: ROW(T, T, (T)((U)av * (U)bv)); break;                                 \
        case GF_BINARY_DIV: ROW(T, T, NAME##_div(av, bv, zero)); break;                           \
        case GF_BINARY_POW: ROW(T, T, NAME##_pow(av, bv)); break;                                 \
        case GF_BINARY_MAX: ROW(T, T, av > bv ? av : bv); break;                                  \
        case GF_BINARY_MIN: ROW(T, T, av < bv ? av : bv); break;                                  \
        case GF_BINARY_MOD: ROW(T, T, NAME##_mod(av, bv, zero)); break;                           \
        case GF_BINARY_FMOD: ROW(T, T, NAME##_fmod(av, bv, zero)); break;                         \
        case GF_BINARY_PRELU: ROW(T, T, av < 0 ? (T)((U)av * (U)bv) : av); break;                 \
        case GF_BINARY_EQUAL: ROW(uint8_t, T, av == bv); break;                                   \
        case GF_BINARY_LESS: ROW(uint8_t, T, av < bv); break;                                     \
        case GF_BINARY_LESS_EQUAL: ROW(uint8_t, T, av <= bv); break;                              \
        case GF_BINARY_GREATER: ROW(uint8_t, T, av > bv); break;                                  \
        case GF_BINARY_GREATER_EQUAL: ROW(uint8_t, T, av >= bv); break;                           \
        default: break;                                                                           \
        }                                                                                         \
    }

INT_ROWS(i32, int32_t, uint32_t)
INT_ROWS(i64, int64_t, uint64_t)

static void row_bool(gf_binary_op op, void *yv, const void *av_, int64_t sa, const void *bv_,
                     int64_t sb, int64_t len)
{
    switch (op) {
    case GF_BINARY_EQUAL: ROW(uint8_t, uint8_t, (av != 0) == (bv != 0)); break;
    case GF_BINARY_AND: ROW(uint8_t, uint8_t, (av != 0) & (bv != 0)); break;
    case GF_BINARY_OR: ROW(uint8_t, uint8_t, (av != 0) | (bv != 0)); break;
    case GF_BINARY_XOR: ROW(uint8_t, uint8_t, (av != 0) ^ (bv != 0)); break;
    default: break;
    }
}

int gf_cpu_binary(void *vctx, gf_stream *s, gf_binary_op op, int rank, const int64_t *out_shape,
                  void *y, const void *a, const int64_t *a_strides, const void *b,
                  const int64_t *b_strides, gf_dtype dtype)
{
    (void)vctx;
    (void)s;
    gf_kiter it;
    gf_dtype ydt;
    bool noop;
    int rc = gf_kargs_binary(op, rank, out_shape, y, a, a_strides, b, b_strides, dtype, &ydt,
                             &it, &noop);
    if (rc != 0 || noop)
        return rc;
    size_t es = gf_dtype_size(dtype), ys = gf_dtype_size(ydt);
    int64_t len = it.shape[it.rank - 1], sa = it.st[1][it.rank - 1], sb = it.st[2][it.rank - 1];
    bool zero = false;
    walk w;
    walk_init(&w, &it);
    do {
        char *yr = (char *)y + (size_t)w.off[0] * ys;
        const char *ar = (const char *)a + w.off[1] * (int64_t)es;
        const char *br = (const char *)b + w.off[2] * (int64_t)es;
        switch (dtype) {
        case GF_DT_F32: row_f32(op, yr, ar, sa, br, sb, len); break;
        case GF_DT_I32: i32_row(op, yr, ar, sa, br, sb, len, &zero); break;
        case GF_DT_I64: i64_row(op, yr, ar, sa, br, sb, len, &zero); break;
        default: row_bool(op, yr, ar, sa, br, sb, len); break;
        }
    } while (walk_next(&w));
    if (zero)
        return gf_kerr(GF_ERR_INVALID, "binary", "integer %s by zero",
                       op == GF_BINARY_DIV ? "division" : "modulo");
    return 0;
}

/* ---- where ---- */

int gf_cpu_where(void *vctx, gf_stream *s, int rank, const int64_t *out_shape, void *y,
                 const void *cond, const int64_t *c_strides, const void *a,
                 const int64_t *a_strides, const void *b, const int64_t *b_strides,
                 int64_t elem_size)
{
    (void)vctx;
    (void)s;
    gf_kiter it;
    bool noop;
    int rc = gf_kargs_where(rank, out_shape, y, cond, c_strides, a, a_strides, b, b_strides,
                            elem_size, &it, &noop);
    if (rc != 0 || noop)
        return rc;
    int in = it.rank - 1;
    int64_t len = it.shape[in], sc = it.st[1][in], sa = it.st[2][in], sb = it.st[3][in];
    walk w;
    walk_init(&w, &it);
#define WHERE_ROW(T)                                                                              \
    do {                                                                                          \
        T *y_ = (T *)y + w.off[0];                                                                \
        const uint8_t *c_ = (const uint8_t *)cond + w.off[1];                                     \
        const T *a_ = (const T *)a + w.off[2], *b_ = (const T *)b + w.off[3];                     \
        for (int64_t j = 0; j < len; j++)                                                         \
            y_[j] = c_[j * sc] ? a_[j * sa] : b_[j * sb];                                         \
    } while (0)
    do {
        switch (elem_size) {
        case 1: WHERE_ROW(uint8_t); break;
        case 2: WHERE_ROW(uint16_t); break;
        case 4: WHERE_ROW(uint32_t); break;
        default: WHERE_ROW(uint64_t); break;
        }
    } while (walk_next(&w));
#undef WHERE_ROW
    return 0;
}

/* ---- strided_copy, gather, fill ---- */

int gf_cpu_strided_copy(void *vctx, gf_stream *s, int rank, const int64_t *shape, void *y,
                        const int64_t *y_strides, const void *x, const int64_t *x_strides,
                        int64_t x_offset, int64_t elem_size)
{
    (void)vctx;
    (void)s;
    gf_kiter it;
    bool noop;
    int rc = gf_kargs_strided_copy(rank, shape, y, y_strides, x, x_strides, x_offset, elem_size,
                                   &it, &noop);
    if (rc != 0 || noop)
        return rc;
    int in = it.rank - 1;
    int64_t len = it.shape[in], sy = it.st[0][in], sx = it.st[1][in];
    const char *xb = (const char *)x + x_offset * elem_size;
    walk w;
    walk_init(&w, &it);
#define COPY_ROW(T)                                                                               \
    do {                                                                                          \
        T *y_ = (T *)y + w.off[0];                                                                \
        const T *x_ = (const T *)xb + w.off[1];                                                   \
        if (sx == 0) {                                                                            \
            T v = x_[0];                                                                          \
            for (int64_t j = 0; j < len; j++)                                                     \
                y_[j * sy] = v;                                                                   \
        } else {                                                                                  \
            for (int64_t j = 0; j < len; j++)                                                     \
                y_[j * sy] = x_[j * sx];                                                          \
        }                                                                                         \
    } while (0)
    do {
        if (sy == 1 && sx == 1) {
            memcpy((char *)y + w.off[0] * elem_size, xb + w.off[1] * elem_size,
                   (size_t)(len * elem_size));
            continue;
        }
        switch (elem_size) {
        case 1: COPY_ROW(uint8_t); break;
        case 2: COPY_ROW(uint16_t); break;
        case 4: COPY_ROW(uint32_t); break;
        default: COPY_ROW(uint64_t); break;
        }
    } while (walk_next(&w));
#undef COPY_ROW
    return 0;
}

int gf_cpu_gather(void *vctx, gf_stream *s, void *y, const void *x, int64_t outer,
                  int64_t axis_dim, int64_t inner, const void *ids, gf_dtype id_dtype,
                  int64_t n_ids, int64_t elem_size)
{
    static const char fn[] = "gather";
    (void)vctx;
    (void)s;
    bool noop;
    int rc = gf_kargs_gather(y, x, outer, axis_dim, inner, ids, id_dtype, n_ids, elem_size,
                             &noop);
    if (rc != 0 || noop)
        return rc;
    /* Every id is checked before anything is read or written. */
    for (int64_t j = 0; j < n_ids; j++) {
        int64_t id = id_dtype == GF_DT_I32 ? ((const int32_t *)ids)[j] : ((const int64_t *)ids)[j];
        if (id < -axis_dim || id >= axis_dim)
            return gf_kerr(GF_ERR_INVALID, fn,
                           "index %lld (at position %lld) is outside [-%lld, %lld)",
                           (long long)id, (long long)j, (long long)axis_dim,
                           (long long)axis_dim);
    }
    size_t row = (size_t)(inner * elem_size);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < n_ids; j++) {
            int64_t id =
                id_dtype == GF_DT_I32 ? ((const int32_t *)ids)[j] : ((const int64_t *)ids)[j];
            if (id < 0)
                id += axis_dim;
            memcpy((char *)y + (size_t)(o * n_ids + j) * row,
                   (const char *)x + (size_t)(o * axis_dim + id) * row, row);
        }
    return 0;
}

int gf_cpu_fill(void *vctx, gf_stream *s, void *y, int64_t n, const void *value,
                int64_t elem_size)
{
    (void)vctx;
    (void)s;
    bool noop;
    int rc = gf_kargs_fill(y, n, value, elem_size, &noop);
    if (rc != 0 || noop)
        return rc;
#define FILL(T)                                                                                   \
    do {                                                                                          \
        T v;                                                                                      \
        memcpy(&v, value, sizeof v);                                                              \
        for (int64_t i = 0; i < n; i++)                                                           \
            ((T *)y)[i] = v;                                                                      \
    } while (0)
    switch (elem_size) {
    case 1: memset(y, *(const uint8_t *)value, (size_t)n); break;
    case 2: FILL(uint16_t); break;
    case 4: FILL(uint32_t); break;
    default: FILL(uint64_t); break;
    }
#undef FILL
    return 0;
}
