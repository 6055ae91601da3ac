/* gpufaas — element type conversion on the cpu (runtime/backend/cpu):
 * cast (F32, F16, BF16) and cast_ex (every pair of element types).
 *
 * cast_ex converts in blocks through one of two exact intermediates: the
 * value of an integer or BOOL source as an int64 (a U64 above INT64_MAX
 * keeps its bits and is read back as unsigned), or the value of a floating
 * source as a double (exact for F16, BF16, F32, F64). Each destination
 * rounds once: to F16 and BF16 from a double or a 64-bit integer the value
 * first becomes an F32 rounded to odd, which the round-to-nearest-even
 * narrowing then rounds correctly (24 >= 2 x 11 + 2 bits).
 */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/kernel_args.h"
#include "core/dtype.h"

/* ---- F32, F16, BF16 ---- */

/* The v1 conversions (arguments checked, dtypes F32/F16/BF16). */
static void cast_w(void *dst, gf_dtype ddt, const void *src, gf_dtype sdt, int64_t n)
{
    if (ddt == sdt) {
        memmove(dst, src, (size_t)n * gf_dtype_size(sdt));
        return;
    }
    if (sdt == GF_DT_F32) {
        if (ddt == GF_DT_F16)
            gf_f32_to_f16_n(dst, src, (size_t)n);
        else
            gf_f32_to_bf16_n(dst, src, (size_t)n);
        return;
    }
    if (ddt == GF_DT_F32) {
        gf_cpu_widen(dst, src, sdt, n);
        return;
    }
    /* F16 <-> BF16 through FP32 (exact), a block at a time. */
    float tmp[1024];
    for (int64_t i = 0; i < n; i += 1024) {
        int64_t len = n - i < 1024 ? n - i : 1024;
        gf_cpu_widen(tmp, (const uint16_t *)src + i, sdt, len);
        if (ddt == GF_DT_F16)
            gf_f32_to_f16_n((uint16_t *)dst + i, tmp, (size_t)len);
        else
            gf_f32_to_bf16_n((uint16_t *)dst + i, tmp, (size_t)len);
    }
}

int gf_cpu_cast(void *vctx, gf_stream *s, void *dst, gf_dtype dst_dtype, const void *src,
                gf_dtype src_dtype, int64_t n)
{
    (void)vctx;
    (void)s;
    bool noop;
    int rc = gf_kargs_cast(dst, dst_dtype, src, src_dtype, n, &noop);
    if (rc != 0 || noop)
        return rc;
    cast_w(dst, dst_dtype, src, src_dtype, n);
    return 0;
}

/* ---- cast_ex ---- */

static bool is_float(gf_dtype dt)
{
    return dt == GF_DT_F16 || dt == GF_DT_BF16 || dt == GF_DT_F32 || dt == GF_DT_F64;
}

/* d as an F32 rounded to odd: truncated toward zero, with the last bit set
 * when that lost anything. Infinities, NaN and overflow as (float)d. */
static float f64_to_f32_odd(double d)
{
    float f = (float)d;
    if (isnan(d) || isinf(f) || (double)f == d)
        return f;
    if (fabs((double)f) > fabs(d))
        f = nextafterf(f, 0.0f);
    return gf_bits_f32(gf_f32_bits(f) | 1u);
}

/* |v| given as a u64 magnitude, as an F32 rounded to odd. */
static float u64_to_f32_odd(uint64_t u)
{
    if (u < ((uint64_t)1 << 24))
        return (float)u;
    int drop = 40 - __builtin_clzll(u); /* low bits beyond 24 significant ones */
    uint64_t top = u >> drop;
    if (u & (((uint64_t)1 << drop) - 1))
        top |= 1;
    return ldexpf((float)top, drop); /* exact: top < 2^24 */
}

static float i64_to_f32_odd(int64_t v, bool uns)
{
    if (uns || v >= 0)
        return u64_to_f32_odd((uint64_t)v);
    return -u64_to_f32_odd(0 - (uint64_t)v);
}

/* Truncate toward zero and saturate to [lo, hi]; NaN gives 0. lo and hi
 * are exact doubles except INT64_MAX's and UINT64_MAX's bounds, which are
 * handled by comparing with 2^63 and 2^64. */
static int64_t sat_i64(double d, int64_t lo, int64_t hi)
{
    if (isnan(d))
        return 0;
    if (d <= (double)lo)
        return lo;
    if (hi == INT64_MAX ? d >= 9223372036854775808.0 : d >= (double)hi)
        return hi;
    return (int64_t)d;
}

static uint64_t sat_u64(double d)
{
    if (isnan(d) || d <= 0.0)
        return 0;
    if (d >= 18446744073709551616.0)
        return UINT64_MAX;
    return (uint64_t)d;
}

#define BLOCK 256

/* Read n <= BLOCK integer or BOOL elements of type dt as int64 values. */
static void read_int(int64_t *v, const void *src, gf_dtype dt, int64_t n)
{
#define RD(T)                                                                                     \
    for (int64_t i = 0; i < n; i++)                                                               \
        v[i] = (int64_t)((const T *)src)[i];                                                      \
    break
    switch (dt) {
    case GF_DT_BOOL:
        for (int64_t i = 0; i < n; i++)
            v[i] = ((const uint8_t *)src)[i] != 0;
        break;
    case GF_DT_U8: RD(uint8_t);
    case GF_DT_U16: RD(uint16_t);
    case GF_DT_U32: RD(uint32_t);
    case GF_DT_U64:
        for (int64_t i = 0; i < n; i++) {
            uint64_t u = ((const uint64_t *)src)[i];
            memcpy(&v[i], &u, 8); /* bits kept; read back as unsigned */
        }
        break;
    case GF_DT_I8: RD(int8_t);
    case GF_DT_I16: RD(int16_t);
    case GF_DT_I32: RD(int32_t);
    default: RD(int64_t);
    }
#undef RD
}

/* Read n <= BLOCK floating elements of type dt as doubles (exact). */
static void read_float(double *v, const void *src, gf_dtype dt, int64_t n)
{
    switch (dt) {
    case GF_DT_F16:
        for (int64_t i = 0; i < n; i++)
            v[i] = gf_f16_to_f32(((const uint16_t *)src)[i]);
        break;
    case GF_DT_BF16:
        for (int64_t i = 0; i < n; i++)
            v[i] = gf_bf16_to_f32(((const uint16_t *)src)[i]);
        break;
    case GF_DT_F32:
        for (int64_t i = 0; i < n; i++)
            v[i] = ((const float *)src)[i];
        break;
    default:
        memcpy(v, src, (size_t)n * 8);
        break;
    }
}

/* Write n integer values (uns: read them as unsigned) as type dt. */
static void write_from_int(void *dst, gf_dtype dt, const int64_t *v, bool uns, int64_t n)
{
#define WR(T)                                                                                     \
    for (int64_t i = 0; i < n; i++)                                                               \
        ((T *)dst)[i] = (T)(uint64_t)v[i];                                                        \
    break
    switch (dt) {
    case GF_DT_BOOL:
        for (int64_t i = 0; i < n; i++)
            ((uint8_t *)dst)[i] = v[i] != 0;
        break;
    case GF_DT_U8: WR(uint8_t);
    case GF_DT_U16: WR(uint16_t);
    case GF_DT_U32: WR(uint32_t);
    case GF_DT_U64: WR(uint64_t);
    case GF_DT_I8: WR(int8_t);
    case GF_DT_I16: WR(int16_t);
    case GF_DT_I32: WR(int32_t);
    case GF_DT_I64: WR(int64_t);
    case GF_DT_F32:
        for (int64_t i = 0; i < n; i++)
            ((float *)dst)[i] = uns ? (float)(uint64_t)v[i] : (float)v[i];
        break;
    case GF_DT_F64:
        for (int64_t i = 0; i < n; i++)
            ((double *)dst)[i] = uns ? (double)(uint64_t)v[i] : (double)v[i];
        break;
    case GF_DT_F16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = gf_f32_to_f16(i64_to_f32_odd(v[i], uns));
        break;
    default: /* BF16 */
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = gf_f32_to_bf16(i64_to_f32_odd(v[i], uns));
        break;
    }
#undef WR
}

/* Write n doubles as type dt (truncating and saturating to integers). */
static void write_from_float(void *dst, gf_dtype dt, const double *v, int64_t n)
{
#define WRS(T, LO, HI)                                                                            \
    for (int64_t i = 0; i < n; i++)                                                               \
        ((T *)dst)[i] = (T)sat_i64(v[i], LO, HI);                                                 \
    break
    switch (dt) {
    case GF_DT_BOOL:
        for (int64_t i = 0; i < n; i++)
            ((uint8_t *)dst)[i] = v[i] != 0.0; /* NaN is true */
        break;
    case GF_DT_U8: WRS(uint8_t, 0, UINT8_MAX);
    case GF_DT_U16: WRS(uint16_t, 0, UINT16_MAX);
    case GF_DT_U32: WRS(uint32_t, 0, UINT32_MAX);
    case GF_DT_U64:
        for (int64_t i = 0; i < n; i++)
            ((uint64_t *)dst)[i] = sat_u64(v[i]);
        break;
    case GF_DT_I8: WRS(int8_t, INT8_MIN, INT8_MAX);
    case GF_DT_I16: WRS(int16_t, INT16_MIN, INT16_MAX);
    case GF_DT_I32: WRS(int32_t, INT32_MIN, INT32_MAX);
    case GF_DT_I64: WRS(int64_t, INT64_MIN, INT64_MAX);
    case GF_DT_F32:
        for (int64_t i = 0; i < n; i++)
            ((float *)dst)[i] = (float)v[i];
        break;
    case GF_DT_F64:
        memcpy(dst, v, (size_t)n * 8);
        break;
    case GF_DT_F16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = gf_f32_to_f16(f64_to_f32_odd(v[i]));
        break;
    default: /* BF16 */
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = gf_f32_to_bf16(f64_to_f32_odd(v[i]));
        break;
    }
#undef WRS
}

int gf_cpu_cast_ex(void *vctx, gf_stream *s, void *dst, gf_dtype dst_dtype, const void *src,
                   gf_dtype src_dtype, int64_t n)
{
    (void)vctx;
    (void)s;
    bool noop;
    int rc = gf_kargs_cast_ex(dst, dst_dtype, src, src_dtype, n, &noop);
    if (rc != 0 || noop)
        return rc;
    if (gf_kw_size(dst_dtype) != 0 && gf_kw_size(src_dtype) != 0) {
        cast_w(dst, dst_dtype, src, src_dtype, n);
        return 0;
    }
    if (dst_dtype == src_dtype && src_dtype != GF_DT_BOOL) {
        memmove(dst, src, (size_t)n * gf_dtype_size(src_dtype));
        return 0;
    }
    size_t ss = gf_dtype_size(src_dtype), ds = gf_dtype_size(dst_dtype);
    bool from_float = is_float(src_dtype), uns = src_dtype == GF_DT_U64;
    union {
        int64_t i[BLOCK];
        double d[BLOCK];
    } buf;
    for (int64_t i = 0; i < n; i += BLOCK) {
        int64_t len = n - i < BLOCK ? n - i : BLOCK;
        const char *sp = (const char *)src + (size_t)i * ss;
        char *dp = (char *)dst + (size_t)i * ds;
        if (from_float) {
            read_float(buf.d, sp, src_dtype, len);
            write_from_float(dp, dst_dtype, buf.d, len);
        } else {
            read_int(buf.i, sp, src_dtype, len);
            write_from_int(dp, dst_dtype, buf.i, uns, len);
        }
    }
    return 0;
}
