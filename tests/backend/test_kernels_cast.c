/* Tests for cast_ex (every pair of element types), part of the
 * test_kernels_ew suite.
 *
 * The reference decodes each source element into its exact value (a long
 * double holds every int64, uint64 and double exactly, an __int128 every
 * integer) and encodes the destination independently of the kernels: to
 * F16 and BF16 by a binary search over a table of every finite value of the
 * type (ties to the even encoding, and past the largest finite value to
 * infinity as if it were the next power of two), to F32 and F64 by the C
 * conversion from long double (one correct rounding), to integers by
 * truncation and saturation (from floats; NaN gives 0) or reduction modulo
 * 2^w (from integers), to BOOL by != 0. Results must match bit for bit
 * (any NaN for a NaN).
 */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kharness.h"

#if LDBL_MANT_DIG < 64
#error "the cast reference needs a long double that holds every int64 exactly"
#endif

static bool is_float(gf_dtype dt)
{
    return dt == GF_DT_F16 || dt == GF_DT_BF16 || dt == GF_DT_F32 || dt == GF_DT_F64;
}

static bool is_signed_int(gf_dtype dt)
{
    return dt == GF_DT_I8 || dt == GF_DT_I16 || dt == GF_DT_I32 || dt == GF_DT_I64;
}

/* Decode a binary16 (ebits 5, mbits 10) or bfloat16 (8, 7) pattern. */
static long double half_value(uint16_t h, int ebits, int mbits)
{
    int bias = (1 << (ebits - 1)) - 1, e = (h >> mbits) & ((1 << ebits) - 1);
    int m = h & ((1 << mbits) - 1);
    long double s = (h >> 15) ? -1.0L : 1.0L;
    if (e == (1 << ebits) - 1)
        return m ? NAN : s * INFINITY;
    if (e == 0)
        return s * ldexpl((long double)m, 1 - bias - mbits);
    return s * ldexpl((long double)(m | (1 << mbits)), e - bias - mbits);
}

/* Every finite non-negative value of a 16-bit type, ascending (patterns
 * 0 .. max finite), plus the next power of two standing for infinity. */
typedef struct {
    long double v[0x8000];
    int n; /* entries, the last being "infinity" */
} half_table;

static half_table g_f16, g_bf16;

static void table_init(half_table *t, int ebits, int mbits)
{
    int maxp = ((1 << ebits) - 1) << mbits; /* the infinity pattern */
    for (int p = 0; p < maxp; p++)
        t->v[p] = half_value((uint16_t)p, ebits, mbits);
    t->v[maxp] = ldexpl(1.0L, (1 << (ebits - 1))); /* 2^(emax + 1) */
    t->n = maxp + 1;
}

/* Round v to the 16-bit type of t (pattern), ties to the even pattern. */
static uint16_t half_round(const half_table *t, long double v, uint16_t nan_pattern)
{
    if (isnan(v))
        return nan_pattern;
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    long double a = fabsl(v);
    if (a >= t->v[t->n - 1])
        return (uint16_t)(sign | (t->n - 1));
    int lo = 0, hi = t->n - 1; /* t->v[lo] <= a < t->v[hi] */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (t->v[mid] <= a)
            lo = mid;
        else
            hi = mid;
    }
    long double dl = a - t->v[lo], dh = t->v[hi] - a;
    int p = dl < dh ? lo : dh < dl ? hi : ((lo & 1) ? hi : lo);
    return (uint16_t)(sign | p);
}

/* The exact value of element i of a buffer of type dt: integers into *iv
 * (returns false), floats into *fv (returns true). */
static bool decode(const void *buf, gf_dtype dt, int i, __int128 *iv, long double *fv)
{
    switch (dt) {
    case GF_DT_BOOL: *iv = ((const uint8_t *)buf)[i] != 0; return false;
    case GF_DT_U8: *iv = ((const uint8_t *)buf)[i]; return false;
    case GF_DT_U16: *iv = ((const uint16_t *)buf)[i]; return false;
    case GF_DT_U32: *iv = ((const uint32_t *)buf)[i]; return false;
    case GF_DT_U64: *iv = ((const uint64_t *)buf)[i]; return false;
    case GF_DT_I8: *iv = ((const int8_t *)buf)[i]; return false;
    case GF_DT_I16: *iv = ((const int16_t *)buf)[i]; return false;
    case GF_DT_I32: *iv = ((const int32_t *)buf)[i]; return false;
    case GF_DT_I64: *iv = ((const int64_t *)buf)[i]; return false;
    case GF_DT_F16: *fv = half_value(((const uint16_t *)buf)[i], 5, 10); return true;
    case GF_DT_BF16: *fv = half_value(((const uint16_t *)buf)[i], 8, 7); return true;
    case GF_DT_F32: *fv = ((const float *)buf)[i]; return true;
    default: *fv = ((const double *)buf)[i]; return true;
    }
}

/* Store integer v into element i of type dt modulo 2^w. */
static void store_int(void *buf, gf_dtype dt, int i, __int128 v)
{
    unsigned __int128 u = (unsigned __int128)v;
    switch (dt) {
    case GF_DT_BOOL: ((uint8_t *)buf)[i] = v != 0; break;
    case GF_DT_U8: case GF_DT_I8: ((uint8_t *)buf)[i] = (uint8_t)u; break;
    case GF_DT_U16: case GF_DT_I16: ((uint16_t *)buf)[i] = (uint16_t)u; break;
    case GF_DT_U32: case GF_DT_I32: ((uint32_t *)buf)[i] = (uint32_t)u; break;
    default: ((uint64_t *)buf)[i] = (uint64_t)u; break;
    }
}

/* The range of an integer type. */
static void int_range(gf_dtype dt, __int128 *lo, __int128 *hi)
{
    int bits = (int)gf_dtype_size(dt) * 8;
    if (is_signed_int(dt)) {
        *lo = -((__int128)1 << (bits - 1));
        *hi = ((__int128)1 << (bits - 1)) - 1;
    } else {
        *lo = 0;
        *hi = ((__int128)1 << bits) - 1;
    }
}

/* Encode the exact value (integer or float) as type dt into element i. */
static void encode(void *buf, gf_dtype dt, int i, bool is_f, __int128 iv, long double fv)
{
    long double v = is_f ? fv : (long double)iv; /* exact: |iv| < 2^64 */
    switch (dt) {
    case GF_DT_F16: ((uint16_t *)buf)[i] = half_round(&g_f16, v, 0x7e00); return;
    case GF_DT_BF16: ((uint16_t *)buf)[i] = half_round(&g_bf16, v, 0x7fc0); return;
    case GF_DT_F32: ((float *)buf)[i] = (float)v; return;
    case GF_DT_F64: ((double *)buf)[i] = (double)v; return;
    case GF_DT_BOOL: ((uint8_t *)buf)[i] = is_f ? (fv != 0 || isnan(fv)) : iv != 0; return;
    default: break;
    }
    if (!is_f) {
        store_int(buf, dt, i, iv);
        return;
    }
    __int128 lo, hi, t;
    int_range(dt, &lo, &hi);
    if (isnan(fv))
        t = 0;
    else if (fv <= (long double)lo)
        t = lo;
    else if (fv >= (long double)hi)
        t = hi;
    else
        t = (__int128)truncl(fv);
    store_int(buf, dt, i, t);
}

/* Source values: integers (wrapped into integer sources) and floats
 * (rounded into float sources), with the double-rounding traps. */
static const long double k_ints[] = {
    0, 1, -1, 2, 127, 128, -128, -129, 255, 256, 32767, 32768, -32769, 65504, 65519, 65520,
    65535, 65536, 16777217.0L, 1073741824.0L + 4194304.0L + 1.0L, /* 2^30 + 2^22 + 1 */
    2147483647.0L, -2147483648.0L, 4294967295.0L, 9007199254740993.0L, /* 2^53 + 1 */
    4611686018427387904.0L + 274877906944.0L + 1.0L,                   /* 2^62 + 2^38 + 1 */
    9223372036854775807.0L, -9223372036854775808.0L, 18446744073709551615.0L,
};
static const long double k_floats[] = {
    0.0L, -0.0L, 0.3L, -0.3L, 0.5L, -0.5L, 0.7L, -0.7L, 1, -1, 1.5L, 2.5L, -2.5L, 127.9L, 128,
    -128.5L, -129, 255.5L, 256, 300.7L, -300.7L, 32767.5L, 65504, 65519.9L, 65520, 2147483647.0L,
    3e9L, -3e9L, 1e19L, 9223372036854775808.0L, -9223372036854775808.0L, 18446744073709551616.0L,
    1e30L, -1e30L, 1e-8L, 6e-8L, 3e-45L, 3.4e38L, 1.0L + 1.0L / 2048 + 1.0L / 1099511627776.0L,
    1.0L + 1.0L / 256 + 1.0L / 1099511627776.0L, 1.00048828125L, INFINITY, -INFINITY, NAN,
};

START_TEST(test_cast_ex)
{
    table_init(&g_f16, 5, 10);
    table_init(&g_bf16, 8, 7);
    int ni = (int)(sizeof k_ints / sizeof k_ints[0]), nf = (int)(sizeof k_floats / sizeof k_floats[0]);
    for (int s = GF_DT_BOOL; s < GF_DT_BYTES; s++) { /* the numeric types */
        gf_dtype sdt = (gf_dtype)s;
        /* the source buffer: every test value encoded in the source type */
        int n = is_float(sdt) ? nf + ni : ni;
        size_t ss = gf_dtype_size(sdt);
        unsigned char *src = calloc((size_t)n, ss);
        for (int i = 0; i < n; i++) {
            if (is_float(sdt))
                encode(src, sdt, i, true, 0, i < nf ? k_floats[i] : k_ints[i - nf]);
            else
                store_int(src, sdt, i, (__int128)k_ints[i]);
        }
        void *dsrc = dput(src, (size_t)n * ss);
        for (int d = GF_DT_BOOL; d < GF_DT_BYTES; d++) {
            gf_dtype ddt = (gf_dtype)d;
            size_t ds = gf_dtype_size(ddt);
            unsigned char *got = calloc((size_t)n, ds), *want = calloc((size_t)n, ds);
            void *ddst = dbuf((size_t)n * ds);
            KOK(K->cast_ex(K->ctx, S, ddst, ddt, dsrc, sdt, n));
            dget(got, ddst, (size_t)n * ds);
            for (int i = 0; i < n; i++) {
                __int128 iv = 0;
                long double fv = 0;
                bool f = decode(src, sdt, i, &iv, &fv);
                encode(want, ddt, i, f, iv, fv);
                __int128 gi;
                long double gv, wv;
                if (is_float(ddt) && decode(got, ddt, i, &gi, &gv) && decode(want, ddt, i, &gi, &wv) &&
                    isnan(wv)) {
                    ck_assert_msg(isnan(gv), "cast %s -> %s [%d]: expected NaN", dtn(sdt), dtn(ddt), i);
                    continue;
                }
                if (memcmp(got + (size_t)i * ds, want + (size_t)i * ds, ds) != 0) {
                    uint64_t g = 0, w = 0;
                    memcpy(&g, got + (size_t)i * ds, ds);
                    memcpy(&w, want + (size_t)i * ds, ds);
                    ck_abort_msg("cast %s -> %s [%d] (source %.21Lg): got 0x%" PRIx64
                                 ", expected 0x%" PRIx64,
                                 dtn(sdt), dtn(ddt), i, f ? fv : (long double)iv, g, w);
                }
            }
            free(got), free(want);
        }
        free(src);
        dfree_all();
    }
}
END_TEST

/* A long array through the F32 <-> F16/BF16 fast paths and an integer
 * path, against the same reference. */
START_TEST(test_cast_ex_long)
{
    table_init(&g_f16, 5, 10);
    table_init(&g_bf16, 8, 7);
    const int n = 5003;
    float *x = fnew((size_t)n);
    frand(x, (size_t)n, -70000, 70000);
    void *dx = dput(x, (size_t)n * 4);
    static const gf_dtype dsts[4] = {GF_DT_F16, GF_DT_BF16, GF_DT_I32, GF_DT_U8};
    for (int k = 0; k < 4; k++) {
        size_t ds = gf_dtype_size(dsts[k]);
        unsigned char *got = calloc((size_t)n, ds), *want = calloc((size_t)n, ds);
        void *dy = dbuf((size_t)n * ds);
        KOK(K->cast_ex(K->ctx, S, dy, dsts[k], dx, GF_DT_F32, n));
        dget(got, dy, (size_t)n * ds);
        for (int i = 0; i < n; i++)
            encode(want, dsts[k], i, true, 0, x[i]);
        ck_assert_msg(memcmp(got, want, (size_t)n * ds) == 0, "cast F32 -> %s", dtn(dsts[k]));
        free(got), free(want);
    }
    free(x);
}
END_TEST

void kh_cast_tests(TCase *tc);

void kh_cast_tests(TCase *tc)
{
    tcase_add_test(tc, test_cast_ex);
    tcase_add_test(tc, test_cast_ex_long);
}
