// gpufaas — elementwise and layout kernels of version 2 on cuda
// (runtime/backend/cuda): unary, binary, where, strided_copy, gather, fill,
// cast_ex.
//
// The strided kernels take the collapsed iteration space kernel_args_v2.c
// builds (gf_kiter) by value in their parameters (no device allocation per
// call) and run one thread per output element in a grid-stride loop. A
// thread turns its linear index into operand offsets by dividing through
// the inner dimensions only (a collapsed dense or broadcast-scalar
// operation is rank 1: no division at all); where every offset fits, the
// arithmetic is 32-bit. Integer division by zero is recorded in the
// stream's error word (the element gets 0), as a bad gather index is.
#include <string.h>

#include "backend/cuda/cuda_kernels_impl.cuh"
#include "core/dtype.h"

// ---- iteration ----

/* Offsets of linear index i in each of NOPS operands. */
template <typename I, int NOPS>
static __device__ __forceinline__ void offsets(const gf_kiter &it, I i, I off[NOPS])
{
    for (int o = 0; o < NOPS; o++)
        off[o] = 0;
    for (int d = it.rank - 1; d > 0; d--) {
        I ext = (I)it.shape[d], c = i % ext;
        i /= ext;
        for (int o = 0; o < NOPS; o++)
            off[o] += c * (I)it.st[o][d];
    }
    for (int o = 0; o < NOPS; o++)
        off[o] += i * (I)it.st[o][0];
}

/* Whether every index and offset of it fits 32-bit arithmetic (with room
 * for the grid stride). */
static bool fits32(const gf_kiter &it)
{
    const int64_t lim = (int64_t)1 << 30;
    if (it.n > lim)
        return false;
    for (int o = 0; o < it.nops; o++) {
        int64_t reach = 0;
        for (int d = 0; d < it.rank; d++)
            reach += (it.shape[d] - 1) * (it.st[o][d] < 0 ? -it.st[o][d] : it.st[o][d]);
        if (reach > lim)
            return false;
    }
    return true;
}

#define GRID_LOOP(I, i, n)                                                                        \
    for (I i = (I)(blockIdx.x * (int64_t)blockDim.x + threadIdx.x); i < (I)(n);                   \
         i += (I)((int64_t)gridDim.x * blockDim.x))

// ---- unary ----

static __device__ __forceinline__ float softplus(float v)
{
    return fmaxf(v, 0.0f) + log1pf(expf(-fabsf(v)));
}

static __device__ float unary_apply(int op, float v, float a, float b)
{
    switch (op) {
    case GF_UNARY_RELU: return v > 0.0f ? v : 0.0f;
    case GF_UNARY_SIGMOID: return 1.0f / (1.0f + expf(-v));
    case GF_UNARY_TANH: return tanhf(v);
    case GF_UNARY_ERF: return erff(v);
    case GF_UNARY_EXP: return expf(v);
    case GF_UNARY_LOG: return logf(v);
    case GF_UNARY_SQRT: return sqrtf(v);
    case GF_UNARY_RECIPROCAL: return 1.0f / v;
    case GF_UNARY_NEG: return -v;
    case GF_UNARY_ABS: return fabsf(v);
    case GF_UNARY_FLOOR: return floorf(v);
    case GF_UNARY_CEIL: return ceilf(v);
    case GF_UNARY_ROUND: return rintf(v);
    case GF_UNARY_SIGN: return v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : v;
    case GF_UNARY_SIN: return sinf(v);
    case GF_UNARY_COS: return cosf(v);
    case GF_UNARY_SOFTPLUS: return softplus(v);
    case GF_UNARY_SOFTSIGN: return v / (1.0f + fabsf(v));
    case GF_UNARY_HARDSIGMOID: return fmaxf(0.0f, fminf(1.0f, a * v + b));
    case GF_UNARY_HARDSWISH: return v * fmaxf(0.0f, fminf(1.0f, v * (1.0f / 6.0f) + 0.5f));
    case GF_UNARY_LEAKYRELU: return v < 0.0f ? a * v : v;
    case GF_UNARY_ELU: return v < 0.0f ? a * expm1f(v) : v;
    case GF_UNARY_SELU: return b * (v <= 0.0f ? a * expm1f(v) : v);
    case GF_UNARY_CLIP: return v < a ? a : (v > b ? b : v);
    case GF_UNARY_GELU_ERF: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case GF_UNARY_GELU_TANH:
        return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    case GF_UNARY_POW_SCALAR: return a == 2.0f ? v * v : a == 1.0f ? v : powf(v, a);
    case GF_UNARY_MISH: return v * tanhf(softplus(v));
    case GF_UNARY_TAN: return tanf(v);
    case GF_UNARY_ASIN: return asinf(v);
    case GF_UNARY_ACOS: return acosf(v);
    case GF_UNARY_ATAN: return atanf(v);
    case GF_UNARY_SINH: return sinhf(v);
    case GF_UNARY_COSH: return coshf(v);
    case GF_UNARY_ASINH: return asinhf(v);
    case GF_UNARY_ACOSH: return acoshf(v);
    case GF_UNARY_ATANH: return atanhf(v);
    case GF_UNARY_CELU: return fmaxf(v, 0.0f) + fminf(0.0f, a * expm1f(v / a));
    case GF_UNARY_THRESHOLDED_RELU: return v > a ? v : 0.0f;
    case GF_UNARY_SHRINK: return v < -a ? v + b : (v > a ? v - b : 0.0f);
    case GF_UNARY_SILU: return v / (1.0f + expf(-v));
    default: return v; /* IDENTITY */
    }
}

static __global__ void k_unary(float *y, const float *x, int64_t n, int op, float a, float b)
{
    GRID_LOOP(int64_t, i, n)
    y[i] = unary_apply(op, x[i], a, b);
}

int gf_cu_unary(void *vctx, gf_stream *s, gf_unary_op op, float *y, const float *x, int64_t n,
                float alpha, float beta)
{
    static const char fn[] = "unary";
    bool noop;
    int rc = gf_kargs_unary(y, x, n, op, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter((gf_cuda_kctx *)vctx, fn, s)) != 0)
        return rc;
    k_unary<<<grid_for(n, GF_THREADS), GF_THREADS, 0, s->stream>>>(y, x, n, (int)op, alpha, beta);
    return gf_cu_launched(fn, "k_unary");
}

// ---- binary ----

static __device__ __forceinline__ float f32_arith(int op, float a, float b)
{
    switch (op) {
    case GF_BINARY_ADD: return a + b;
    case GF_BINARY_SUB: return a - b;
    case GF_BINARY_MUL: return a * b;
    case GF_BINARY_DIV: return a / b;
    case GF_BINARY_POW: return b == 2.0f ? a * a : powf(a, b);
    case GF_BINARY_MAX: return isnan(a) || isnan(b) ? a + b : (a > b ? a : b);
    case GF_BINARY_MIN: return isnan(a) || isnan(b) ? a + b : (a < b ? a : b);
    case GF_BINARY_MOD: {
        float r = fmodf(a, b);
        return r != 0.0f && ((r < 0.0f) != (b < 0.0f)) ? r + b : r;
    }
    case GF_BINARY_FMOD: return fmodf(a, b);
    default: return a < 0.0f ? a * b : a; /* PRELU */
    }
}

/* Integer arithmetic for signed T with unsigned twin U, wrapping. */
template <typename T, typename U>
static __device__ __forceinline__ T int_arith(int op, T a, T b, long long *err)
{
    if ((op == GF_BINARY_DIV || op == GF_BINARY_MOD || op == GF_BINARY_FMOD) && b == 0) {
        dev_error(err, GF_DEVERR_DIV_ZERO, 0, 0);
        return 0;
    }
    switch (op) {
    case GF_BINARY_ADD: return (T)((U)a + (U)b);
    case GF_BINARY_SUB: return (T)((U)a - (U)b);
    case GF_BINARY_MUL: return (T)((U)a * (U)b);
    case GF_BINARY_DIV: return b == -1 ? (T)((U)0 - (U)a) : (T)(a / b);
    case GF_BINARY_POW: {
        if (b < 0)
            return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
        U r = 1, base = (U)a;
        for (U e = (U)b; e != 0; e >>= 1) {
            if (e & 1)
                r *= base;
            base *= base;
        }
        return (T)r;
    }
    case GF_BINARY_MAX: return a > b ? a : b;
    case GF_BINARY_MIN: return a < b ? a : b;
    case GF_BINARY_MOD: {
        T r = b == -1 ? 0 : (T)(a % b);
        return r != 0 && ((r < 0) != (b < 0)) ? (T)((U)r + (U)b) : r;
    }
    case GF_BINARY_FMOD: return b == -1 ? 0 : (T)(a % b);
    default: return a < 0 ? (T)((U)a * (U)b) : a; /* PRELU */
    }
}

static __device__ __forceinline__ float arith(int op, float a, float b, long long *)
{
    return f32_arith(op, a, b);
}
static __device__ __forceinline__ int32_t arith(int op, int32_t a, int32_t b, long long *err)
{
    return int_arith<int32_t, uint32_t>(op, a, b, err);
}
static __device__ __forceinline__ int64_t arith(int op, int64_t a, int64_t b, long long *err)
{
    return int_arith<int64_t, uint64_t>(op, a, b, err);
}

template <typename T>
static __device__ __forceinline__ uint8_t compare(int op, T a, T b)
{
    switch (op) {
    case GF_BINARY_EQUAL: return a == b;
    case GF_BINARY_LESS: return a < b;
    case GF_BINARY_LESS_EQUAL: return a <= b;
    case GF_BINARY_GREATER: return a > b;
    default: return a >= b;
    }
}

template <typename T, typename I>
static __global__ void k_arith(gf_kiter it, T *y, const T *a, const T *b, int op, long long *err)
{
    GRID_LOOP(I, i, it.n) {
        I off[3];
        offsets<I, 3>(it, i, off);
        y[i] = arith(op, a[off[1]], b[off[2]], err);
    }
}

template <typename T, typename I>
static __global__ void k_compare(gf_kiter it, uint8_t *y, const T *a, const T *b, int op)
{
    GRID_LOOP(I, i, it.n) {
        I off[3];
        offsets<I, 3>(it, i, off);
        y[i] = compare(op, a[off[1]], b[off[2]]);
    }
}

template <typename I>
static __global__ void k_logic(gf_kiter it, uint8_t *y, const uint8_t *a, const uint8_t *b, int op)
{
    GRID_LOOP(I, i, it.n) {
        I off[3];
        offsets<I, 3>(it, i, off);
        int av = a[off[1]] != 0, bv = b[off[2]] != 0;
        y[i] = (uint8_t)(op == GF_BINARY_AND ? av & bv
                         : op == GF_BINARY_OR ? av | bv
                         : op == GF_BINARY_XOR ? av ^ bv
                                               : av == bv);
    }
}

template <typename I>
static void binary_launch(const gf_kiter &it, gf_binary_op op, void *y, const void *a,
                          const void *b, gf_dtype dt, gf_stream *s)
{
    unsigned g = grid_for(it.n, GF_THREADS);
    cudaStream_t st = s->stream;
    int o = (int)op;
    bool cmp = op >= GF_BINARY_EQUAL && op <= GF_BINARY_GREATER_EQUAL;
    long long *err = cmp || dt == GF_DT_BOOL ? s->dev_error : gf_cuda_stream_error_words(s);
    if (dt == GF_DT_BOOL) {
        k_logic<I><<<g, GF_THREADS, 0, st>>>(it, (uint8_t *)y, (const uint8_t *)a,
                                             (const uint8_t *)b, o);
    } else if (dt == GF_DT_F32) {
        if (cmp)
            k_compare<float, I><<<g, GF_THREADS, 0, st>>>(it, (uint8_t *)y, (const float *)a,
                                                          (const float *)b, o);
        else
            k_arith<float, I><<<g, GF_THREADS, 0, st>>>(it, (float *)y, (const float *)a,
                                                        (const float *)b, o, err);
    } else if (dt == GF_DT_I32) {
        if (cmp)
            k_compare<int32_t, I><<<g, GF_THREADS, 0, st>>>(it, (uint8_t *)y, (const int32_t *)a,
                                                            (const int32_t *)b, o);
        else
            k_arith<int32_t, I><<<g, GF_THREADS, 0, st>>>(it, (int32_t *)y, (const int32_t *)a,
                                                          (const int32_t *)b, o, err);
    } else {
        if (cmp)
            k_compare<int64_t, I><<<g, GF_THREADS, 0, st>>>(it, (uint8_t *)y, (const int64_t *)a,
                                                            (const int64_t *)b, o);
        else
            k_arith<int64_t, I><<<g, GF_THREADS, 0, st>>>(it, (int64_t *)y, (const int64_t *)a,
                                                          (const int64_t *)b, o, err);
    }
}

int gf_cu_binary(void *vctx, gf_stream *s, gf_binary_op op, int rank, const int64_t *out_shape,
                 void *y, const void *a, const int64_t *a_strides, const void *b,
                 const int64_t *b_strides, gf_dtype dtype)
{
    static const char fn[] = "binary";
    gf_kiter it;
    gf_dtype ydt;
    bool noop;
    int rc = gf_kargs_binary(op, rank, out_shape, y, a, a_strides, b, b_strides, dtype, &ydt,
                             &it, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter((gf_cuda_kctx *)vctx, fn, s)) != 0)
        return rc;
    if (s->dev_error == NULL)
        return gf_kerr(GF_ERR_INTERNAL, fn, "the stream has no device error word");
    if (fits32(it))
        binary_launch<int32_t>(it, op, y, a, b, dtype, s);
    else
        binary_launch<int64_t>(it, op, y, a, b, dtype, s);
    return gf_cu_launched(fn, "k_arith / k_compare / k_logic");
}

// ---- where, strided_copy ----

template <typename E, typename I>
static __global__ void k_where(gf_kiter it, E *y, const uint8_t *c, const E *a, const E *b)
{
    GRID_LOOP(I, i, it.n) {
        I off[4];
        offsets<I, 4>(it, i, off);
        y[i] = c[off[1]] ? a[off[2]] : b[off[3]];
    }
}

template <typename E, typename I>
static __global__ void k_copy(gf_kiter it, E *y, const E *x)
{
    GRID_LOOP(I, i, it.n) {
        I off[2];
        offsets<I, 2>(it, i, off);
        y[off[0]] = x[off[1]];
    }
}

/* Run the statements with E the unsigned type of es bytes (1, 2, 4, 8). */
#define GF_EDISPATCH(es, E, ...)                                                                  \
    do {                                                                                          \
        if ((es) == 1) {                                                                          \
            typedef uint8_t E;                                                                    \
            __VA_ARGS__;                                                                          \
        } else if ((es) == 2) {                                                                   \
            typedef uint16_t E;                                                                   \
            __VA_ARGS__;                                                                          \
        } else if ((es) == 4) {                                                                   \
            typedef uint32_t E;                                                                   \
            __VA_ARGS__;                                                                          \
        } else {                                                                                  \
            typedef uint64_t E;                                                                   \
            __VA_ARGS__;                                                                          \
        }                                                                                         \
    } while (0)

int gf_cu_where(void *vctx, gf_stream *s, int rank, const int64_t *out_shape, void *y,
                const void *cond, const int64_t *c_strides, const void *a,
                const int64_t *a_strides, const void *b, const int64_t *b_strides,
                int64_t elem_size)
{
    static const char fn[] = "where";
    gf_kiter it;
    bool noop;
    int rc = gf_kargs_where(rank, out_shape, y, cond, c_strides, a, a_strides, b, b_strides,
                            elem_size, &it, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter((gf_cuda_kctx *)vctx, fn, s)) != 0)
        return rc;
    unsigned g = grid_for(it.n, GF_THREADS);
    bool small = fits32(it);
    const uint8_t *c = (const uint8_t *)cond;
    GF_EDISPATCH(elem_size, E,
                 if (small) k_where<E, int32_t><<<g, GF_THREADS, 0, s->stream>>>(
                     it, (E *)y, c, (const E *)a, (const E *)b);
                 else k_where<E, int64_t><<<g, GF_THREADS, 0, s->stream>>>(
                     it, (E *)y, c, (const E *)a, (const E *)b));
    return gf_cu_launched(fn, "k_where");
}

int gf_cu_strided_copy(void *vctx, gf_stream *s, int rank, const int64_t *shape, void *y,
                       const int64_t *y_strides, const void *x, const int64_t *x_strides,
                       int64_t x_offset, int64_t elem_size)
{
    static const char fn[] = "strided_copy";
    gf_kiter it;
    bool noop;
    int rc = gf_kargs_strided_copy(rank, shape, y, y_strides, x, x_strides, x_offset, elem_size,
                                   &it, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter((gf_cuda_kctx *)vctx, fn, s)) != 0)
        return rc;
    const char *xb = (const char *)x + x_offset * elem_size;
    if (it.rank == 1 && it.st[0][0] == 1 && it.st[1][0] == 1) {
        cudaError_t e = cudaMemcpyAsync(y, xb, (size_t)(it.n * elem_size),
                                        cudaMemcpyDeviceToDevice, s->stream);
        if (e != cudaSuccess) {
            cudaGetLastError();
            return gf_kerr(GF_ERR_DEVICE, fn, "cudaMemcpyAsync failed: %s", cudaGetErrorString(e));
        }
        return 0;
    }
    unsigned g = grid_for(it.n, GF_THREADS);
    bool small = fits32(it);
    GF_EDISPATCH(elem_size, E,
                 if (small) k_copy<E, int32_t><<<g, GF_THREADS, 0, s->stream>>>(it, (E *)y,
                                                                                (const E *)xb);
                 else k_copy<E, int64_t><<<g, GF_THREADS, 0, s->stream>>>(it, (E *)y,
                                                                          (const E *)xb));
    return gf_cu_launched(fn, "k_copy");
}

// ---- gather, fill ----

/* One thread per output element; an element whose id is out of range is
 * neither read nor written, and the first bad id is recorded. */
template <typename E, typename D>
static __global__ void k_gather(E *y, const E *x, int64_t outer, int64_t axis, int64_t inner,
                                const D *ids, int64_t n_ids, long long *err)
{
    int64_t total = outer * n_ids * inner;
    GRID_LOOP(int64_t, i, total) {
        int64_t k = i % inner, t = i / inner;
        int64_t j = t % n_ids, o = t / n_ids;
        int64_t id = (int64_t)ids[j];
        if (id < -axis || id >= axis) {
            if (k == 0 && o == 0)
                dev_error(err, GF_DEVERR_INDEX_NEG, id, axis);
            continue;
        }
        if (id < 0)
            id += axis;
        y[i] = x[(o * axis + id) * inner + k];
    }
}

int gf_cu_gather(void *vctx, gf_stream *s, void *y, const void *x, int64_t outer,
                 int64_t axis_dim, int64_t inner, const void *ids, gf_dtype id_dtype,
                 int64_t n_ids, int64_t elem_size)
{
    static const char fn[] = "gather";
    bool noop;
    int rc = gf_kargs_gather(y, x, outer, axis_dim, inner, ids, id_dtype, n_ids, elem_size,
                             &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter((gf_cuda_kctx *)vctx, fn, s)) != 0)
        return rc;
    if (s->dev_error == NULL)
        return gf_kerr(GF_ERR_INTERNAL, fn, "the stream has no device error word");
    unsigned g = grid_for(outer * n_ids * inner, GF_THREADS);
    if (id_dtype == GF_DT_I32)
        GF_EDISPATCH(elem_size, E,
                     k_gather<E, int32_t><<<g, GF_THREADS, 0, s->stream>>>(
                         (E *)y, (const E *)x, outer, axis_dim, inner, (const int32_t *)ids,
                         n_ids, gf_cuda_stream_error_words(s)));
    else
        GF_EDISPATCH(elem_size, E,
                     k_gather<E, int64_t><<<g, GF_THREADS, 0, s->stream>>>(
                         (E *)y, (const E *)x, outer, axis_dim, inner, (const int64_t *)ids,
                         n_ids, gf_cuda_stream_error_words(s)));
    return gf_cu_launched(fn, "k_gather");
}

template <typename E> static __global__ void k_fill(E *y, int64_t n, E v)
{
    GRID_LOOP(int64_t, i, n)
    y[i] = v;
}

int gf_cu_fill(void *vctx, gf_stream *s, void *y, int64_t n, const void *value,
               int64_t elem_size)
{
    static const char fn[] = "fill";
    bool noop;
    int rc = gf_kargs_fill(y, n, value, elem_size, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter((gf_cuda_kctx *)vctx, fn, s)) != 0)
        return rc;
    unsigned g = grid_for(n, GF_THREADS);
    GF_EDISPATCH(elem_size, E, E v; memcpy(&v, value, sizeof v);
                 k_fill<E><<<g, GF_THREADS, 0, s->stream>>>((E *)y, n, v));
    return gf_cu_launched(fn, "k_fill");
}

// ---- cast_ex ----

/* The value of element i of a buffer of dtype dt: integers (and BOOL) as
 * an int64 (a U64 keeps its bits), floating types as a double (exact). */
static __device__ __forceinline__ bool read_elem(const void *p, int dt, int64_t i, long long *iv,
                                                 double *fv)
{
    switch (dt) {
    case GF_DT_BOOL: *iv = ((const uint8_t *)p)[i] != 0; return false;
    case GF_DT_U8: *iv = ((const uint8_t *)p)[i]; return false;
    case GF_DT_U16: *iv = ((const uint16_t *)p)[i]; return false;
    case GF_DT_U32: *iv = ((const uint32_t *)p)[i]; return false;
    case GF_DT_U64: *iv = (long long)((const unsigned long long *)p)[i]; return false;
    case GF_DT_I8: *iv = ((const int8_t *)p)[i]; return false;
    case GF_DT_I16: *iv = ((const int16_t *)p)[i]; return false;
    case GF_DT_I32: *iv = ((const int32_t *)p)[i]; return false;
    case GF_DT_I64: *iv = ((const long long *)p)[i]; return false;
    case GF_DT_F16: *fv = (double)__half2float(((const __half *)p)[i]); return true;
    case GF_DT_BF16: *fv = (double)__bfloat162float(((const __nv_bfloat16 *)p)[i]); return true;
    case GF_DT_F32: *fv = (double)((const float *)p)[i]; return true;
    default: *fv = ((const double *)p)[i]; return true;
    }
}

/* d as an F32 rounded to odd (truncated, last bit set when inexact), so
 * the narrowing to F16/BF16 that follows rounds once. */
static __device__ __forceinline__ float f64_to_f32_odd(double d)
{
    if (isnan(d) || isinf(d))
        return (float)d;
    float f = __double2float_rz(d);
    if ((double)f == d)
        return f;
    return __int_as_float(__float_as_int(f) | 1);
}

/* |u| as an F32 rounded to odd. */
static __device__ __forceinline__ float u64_to_f32_odd(unsigned long long u)
{
    if (u < (1ull << 24))
        return (float)u;
    int drop = 40 - __clzll((long long)u);
    unsigned long long top = u >> drop;
    if (u & ((1ull << drop) - 1))
        top |= 1;
    return ldexpf((float)top, drop);
}

/* Truncate toward zero and saturate to [lo, hi] (hi == INT64_MAX compares
 * with 2^63); NaN gives 0. */
static __device__ __forceinline__ long long sat_i64(double d, long long lo, long long hi)
{
    if (isnan(d))
        return 0;
    if (d <= (double)lo)
        return lo;
    if (hi == INT64_MAX ? d >= 9223372036854775808.0 : d >= (double)hi)
        return hi;
    return (long long)d;
}

static __device__ void write_elem(void *p, int dt, int64_t i, bool is_f, bool uns, long long iv,
                                  double fv)
{
#define WI(T, LO, HI)                                                                             \
    ((T *)p)[i] = is_f ? (T)sat_i64(fv, LO, HI) : (T)(unsigned long long)iv;                     \
    return
    switch (dt) {
    case GF_DT_BOOL: ((uint8_t *)p)[i] = is_f ? fv != 0.0 : iv != 0; return;
    case GF_DT_U8: WI(uint8_t, 0, 255);
    case GF_DT_U16: WI(uint16_t, 0, 65535);
    case GF_DT_U32: WI(uint32_t, 0, 4294967295ll);
    case GF_DT_U64:
        if (is_f)
            ((unsigned long long *)p)[i] = isnan(fv) || fv <= 0.0 ? 0ull
                                           : fv >= 18446744073709551616.0
                                               ? ~0ull
                                               : (unsigned long long)fv;
        else
            ((unsigned long long *)p)[i] = (unsigned long long)iv;
        return;
    case GF_DT_I8: WI(int8_t, -128, 127);
    case GF_DT_I16: WI(int16_t, -32768, 32767);
    case GF_DT_I32: WI(int32_t, -2147483648ll, 2147483647ll);
    case GF_DT_I64: WI(long long, INT64_MIN, INT64_MAX);
    default: break;
    }
#undef WI
    if (dt == GF_DT_F32 || dt == GF_DT_F64) {
        double dv;
        float f;
        if (is_f) {
            dv = fv;
            f = (float)fv;
        } else if (uns) {
            dv = __ull2double_rn((unsigned long long)iv);
            f = __ull2float_rn((unsigned long long)iv);
        } else {
            dv = __ll2double_rn(iv);
            f = __ll2float_rn(iv);
        }
        if (dt == GF_DT_F32)
            ((float *)p)[i] = f;
        else
            ((double *)p)[i] = dv;
        return;
    }
    float odd = is_f ? f64_to_f32_odd(fv)
                : (uns || iv >= 0) ? u64_to_f32_odd((unsigned long long)iv)
                                   : -u64_to_f32_odd(0ull - (unsigned long long)iv);
    if (dt == GF_DT_F16)
        ((__half *)p)[i] = __float2half_rn(odd);
    else
        ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(odd);
}

static __global__ void k_cast_ex(void *dst, int ddt, const void *src, int sdt, int64_t n)
{
    GRID_LOOP(int64_t, i, n) {
        long long iv = 0;
        double fv = 0.0;
        bool is_f = read_elem(src, sdt, i, &iv, &fv);
        write_elem(dst, ddt, i, is_f, sdt == GF_DT_U64, iv, fv);
    }
}

int gf_cu_cast_ex(void *vctx, gf_stream *s, void *dst, gf_dtype dst_dtype, const void *src,
                  gf_dtype src_dtype, int64_t n)
{
    static const char fn[] = "cast_ex";
    bool noop;
    int rc = gf_kargs_cast_ex(dst, dst_dtype, src, src_dtype, n, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter((gf_cuda_kctx *)vctx, fn, s)) != 0)
        return rc;
    if (dst_dtype == src_dtype && src_dtype != GF_DT_BOOL) {
        if (dst == src)
            return 0;
        cudaError_t e = cudaMemcpyAsync(dst, src, (size_t)n * gf_dtype_size(src_dtype),
                                        cudaMemcpyDeviceToDevice, s->stream);
        if (e != cudaSuccess) {
            cudaGetLastError();
            return gf_kerr(GF_ERR_DEVICE, fn, "cudaMemcpyAsync failed: %s", cudaGetErrorString(e));
        }
        return 0;
    }
    k_cast_ex<<<grid_for(n, GF_THREADS), GF_THREADS, 0, s->stream>>>(dst, (int)dst_dtype, src,
                                                                     (int)src_dtype, n);
    return gf_cu_launched(fn, "k_cast_ex");
}
