/* Tests for runtime/core dtype: names, sizes, and FP16/BF16 conversions
 * checked on every bit pattern against a reference computed differently:
 * values are built from the fields with ldexp() in double precision, and
 * rounding picks the nearest representable value by binary search over the
 * table of all finite values (ties to the even bit pattern). The code under
 * test uses integer bit manipulation instead. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "testutil.h"

/* ---- reference decoders: from the fields, in double ---- */

static double ref_f16_value(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)m, -24);
    else
        v = ldexp((double)(m + 1024), e - 25);
    return s ? -v : v;
}

static double ref_bf16_value(uint16_t h)
{
    int s = h >> 15, e = (h >> 7) & 255, m = h & 127;
    double v;
    if (e == 255)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)m, -133);
    else
        v = ldexp((double)(m + 128), e - 134);
    return s ? -v : v;
}

/* ---- reference encoders: nearest by search over all finite values ---- */

typedef struct {
    double *vals;      /* non-negative finite values, ascending, index == bit pattern */
    size_t n;          /* number of finite non-negative patterns */
    double overflow;   /* |x| >= this rounds to infinity */
    uint16_t inf_bits; /* +infinity */
} ref_table;

static ref_table f16_tab, bf16_tab;

static void build_tables(void)
{
    f16_tab.n = 0x7c00;
    f16_tab.vals = malloc(f16_tab.n * sizeof(double));
    for (size_t i = 0; i < f16_tab.n; i++)
        f16_tab.vals[i] = ref_f16_value((uint16_t)i);
    /* halfway between the largest finite (65504) and the next power, 2^16 */
    f16_tab.overflow = (65504.0 + 65536.0) / 2;
    f16_tab.inf_bits = 0x7c00;

    bf16_tab.n = 0x7f80;
    bf16_tab.vals = malloc(bf16_tab.n * sizeof(double));
    for (size_t i = 0; i < bf16_tab.n; i++)
        bf16_tab.vals[i] = ref_bf16_value((uint16_t)i);
    double maxf = bf16_tab.vals[bf16_tab.n - 1];
    bf16_tab.overflow = (maxf + ldexp(1.0, 128)) / 2;
    bf16_tab.inf_bits = 0x7f80;
}

static void free_tables(void)
{
    free(f16_tab.vals);
    free(bf16_tab.vals);
}

/* Expected bit pattern for x; NaN is handled by the caller. */
static uint16_t ref_encode(const ref_table *t, float x)
{
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs((double)x);
    if (a >= t->overflow)
        return sign | t->inf_bits;
    /* largest i with vals[i] <= a */
    size_t lo = 0, hi = t->n; /* invariant: vals[lo] <= a, answer in [lo, hi) */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (t->vals[mid] <= a)
            lo = mid;
        else
            hi = mid;
    }
    size_t i = lo;
    if (t->vals[i] == a || i + 1 >= t->n) {
        /* exact, or between the largest finite value and the overflow point */
        return sign | (uint16_t)i;
    }
    double d0 = a - t->vals[i], d1 = t->vals[i + 1] - a;
    size_t pick = d0 < d1 ? i : d1 < d0 ? i + 1 : (i % 2 == 0 ? i : i + 1);
    return sign | (uint16_t)pick;
}

static void check_f16_encode(float x)
{
    uint16_t got = gf_f32_to_f16(x);
    if (isnan(x)) {
        ck_assert_msg((got & 0x7c00) == 0x7c00 && (got & 0x3ff) != 0,
                      "NaN %08x -> %04x is not NaN", gf_f32_bits(x), got);
        ck_assert_msg((got & 0x8000) == ((gf_f32_bits(x) >> 16) & 0x8000), "NaN sign lost");
        return;
    }
    uint16_t want = ref_encode(&f16_tab, x);
    ck_assert_msg(got == want, "f32->f16 of %a (bits %08x): got %04x want %04x", (double)x,
                  gf_f32_bits(x), got, want);
}

static void check_bf16_encode(float x)
{
    uint16_t got = gf_f32_to_bf16(x);
    if (isnan(x)) {
        ck_assert_msg((got & 0x7f80) == 0x7f80 && (got & 0x7f) != 0,
                      "NaN %08x -> %04x is not NaN", gf_f32_bits(x), got);
        ck_assert_msg((got & 0x8000) == ((gf_f32_bits(x) >> 16) & 0x8000), "NaN sign lost");
        return;
    }
    uint16_t want = ref_encode(&bf16_tab, x);
    ck_assert_msg(got == want, "f32->bf16 of %a (bits %08x): got %04x want %04x", (double)x,
                  gf_f32_bits(x), got, want);
}

START_TEST(test_names_and_sizes)
{
    static const struct {
        gf_dtype dt;
        size_t size;
        const char *st, *ks;
    } cases[] = {
        {GF_DT_BOOL, 1, "BOOL", "BOOL"}, {GF_DT_U8, 1, "U8", "UINT8"},
        {GF_DT_U16, 2, "U16", "UINT16"}, {GF_DT_U32, 4, "U32", "UINT32"},
        {GF_DT_U64, 8, "U64", "UINT64"}, {GF_DT_I8, 1, "I8", "INT8"},
        {GF_DT_I16, 2, "I16", "INT16"},  {GF_DT_I32, 4, "I32", "INT32"},
        {GF_DT_I64, 8, "I64", "INT64"},  {GF_DT_F16, 2, "F16", "FP16"},
        {GF_DT_BF16, 2, "BF16", "BF16"}, {GF_DT_F32, 4, "F32", "FP32"},
        {GF_DT_F64, 8, "F64", "FP64"},
    };
    ck_assert_int_eq(sizeof cases / sizeof cases[0], GF_DT_COUNT_ - 2); /* all but BYTES */
    /* BYTES: a KServe type without an element size and never in safetensors */
    ck_assert(!gf_dtype_valid(GF_DT_BYTES));
    ck_assert(gf_dtype_known(GF_DT_BYTES));
    ck_assert(!gf_dtype_known(GF_DT_INVALID) && !gf_dtype_known(GF_DT_COUNT_));
    ck_assert_uint_eq(gf_dtype_size(GF_DT_BYTES), 0);
    ck_assert_str_eq(gf_dtype_kserve_name(GF_DT_BYTES), "BYTES");
    ck_assert_str_eq(gf_dtype_st_name(GF_DT_BYTES), "INVALID");
    ck_assert_int_eq(gf_dtype_from_kserve_name("BYTES", 5), GF_DT_BYTES);
    ck_assert_int_eq(gf_dtype_from_st_name("BYTES", 5), GF_DT_INVALID);
    ck_assert_int_eq(gf_dtype_from_st_name("INVALID", 7), GF_DT_INVALID);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_uint_eq(gf_dtype_size(cases[i].dt), cases[i].size);
        ck_assert_str_eq(gf_dtype_st_name(cases[i].dt), cases[i].st);
        ck_assert_str_eq(gf_dtype_kserve_name(cases[i].dt), cases[i].ks);
        ck_assert_int_eq(gf_dtype_from_st_name(cases[i].st, strlen(cases[i].st)), cases[i].dt);
        ck_assert_int_eq(gf_dtype_from_kserve_name(cases[i].ks, strlen(cases[i].ks)),
                         cases[i].dt);
    }
    ck_assert_int_eq(gf_dtype_from_st_name("FP32", 4), GF_DT_INVALID);
    ck_assert_int_eq(gf_dtype_from_kserve_name("F32", 3), GF_DT_INVALID);
    ck_assert_int_eq(gf_dtype_from_st_name("F3", 2), GF_DT_INVALID);
    ck_assert_int_eq(gf_dtype_from_st_name("F32", 2), GF_DT_INVALID); /* "F3" prefix */
    ck_assert_uint_eq(gf_dtype_size(GF_DT_INVALID), 0);
    ck_assert_uint_eq(gf_dtype_size((gf_dtype)99), 0);
    ck_assert_str_eq(gf_dtype_st_name((gf_dtype)99), "INVALID");
    ck_assert(gf_dtype_is_float(GF_DT_BF16));
    ck_assert(!gf_dtype_is_float(GF_DT_I32));
}
END_TEST

START_TEST(test_f16_decode_all)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float got = gf_f16_to_f32((uint16_t)h);
        double want = ref_f16_value((uint16_t)h);
        if (isnan(want)) {
            ck_assert_msg(isnan(got), "f16 %04x should decode to NaN", h);
        } else {
            ck_assert_msg((double)got == want, "f16 %04x: got %a want %a", h, (double)got, want);
        }
        ck_assert_msg(!!signbit(got) == !!(h & 0x8000), "f16 %04x: sign", h);
    }
}
END_TEST

START_TEST(test_bf16_decode_all)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float got = gf_bf16_to_f32((uint16_t)h);
        double want = ref_bf16_value((uint16_t)h);
        if (isnan(want))
            ck_assert_msg(isnan(got), "bf16 %04x should decode to NaN", h);
        else
            ck_assert_msg((double)got == want, "bf16 %04x: got %a want %a", h, (double)got,
                          want);
        ck_assert_msg(!!signbit(got) == !!(h & 0x8000), "bf16 %04x: sign", h);
    }
}
END_TEST

START_TEST(test_f16_encode_all_patterns_and_midpoints)
{
    /* every f16 value (both signs, NaNs included) must round-trip, and every
     * midpoint between neighbours and the floats next to it must round right */
    for (uint32_t h = 0; h < 65536; h++) {
        float v = (float)ref_f16_value((uint16_t)h);
        check_f16_encode(v);
        if (!isnan(v))
            ck_assert_uint_eq(gf_f32_to_f16(v), h);
        check_f16_encode(nextafterf(v, INFINITY));
        check_f16_encode(nextafterf(v, -INFINITY));
    }
    for (uint32_t h = 0; h + 1 < 0x7c00; h++) {
        double a = ref_f16_value((uint16_t)h), b = ref_f16_value((uint16_t)(h + 1));
        float mid = (float)((a + b) / 2); /* exact: needs 12 significant bits */
        ck_assert((double)mid == (a + b) / 2);
        for (int s = 0; s < 2; s++) {
            float x = s ? -mid : mid;
            check_f16_encode(x);
            check_f16_encode(nextafterf(x, INFINITY));
            check_f16_encode(nextafterf(x, -INFINITY));
        }
    }
    static const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, FLT_MAX, -FLT_MAX,
                                     FLT_MIN, FLT_TRUE_MIN, 65504.0f, 65519.996f, 65520.0f,
                                     -65520.0f, 1e-8f, 2.9802322e-8f /* 2^-25 */, 5.96e-8f,
                                     6.1035156e-05f /* 2^-14 */, 1.0f, 3.14159265f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        check_f16_encode(specials[i]);
    check_f16_encode(gf_bits_f32(0x7fc00000u));
    check_f16_encode(gf_bits_f32(0xffc00001u));
    check_f16_encode(gf_bits_f32(0x7f800001u)); /* signalling NaN must not become inf */
    gf_test_rng r;
    gf_test_rng_seed(&r, 1234);
    for (int i = 0; i < 300000; i++)
        check_f16_encode(gf_bits_f32((uint32_t)gf_test_rng_u64(&r)));
    /* concentrate on the f16 range */
    for (int i = 0; i < 300000; i++) {
        uint32_t x = (uint32_t)gf_test_rng_u64(&r);
        x = (x & 0x807fffffu) | ((uint32_t)(100 + gf_test_rng_below(&r, 45)) << 23);
        check_f16_encode(gf_bits_f32(x));
    }
}
END_TEST

START_TEST(test_bf16_encode_all_patterns)
{
    static const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
    gf_test_rng r;
    gf_test_rng_seed(&r, 99);
    for (uint32_t h = 0; h < 65536; h++) {
        for (size_t k = 0; k < sizeof lows / sizeof lows[0]; k++)
            check_bf16_encode(gf_bits_f32((h << 16) | lows[k]));
        check_bf16_encode(gf_bits_f32((h << 16) | (uint32_t)gf_test_rng_below(&r, 0x10000)));
        float v = gf_bf16_to_f32((uint16_t)h);
        if (!isnan(v))
            ck_assert_uint_eq(gf_f32_to_bf16(v), h);
    }
    check_bf16_encode(FLT_MAX);
    check_bf16_encode(-FLT_MAX);
    check_bf16_encode(gf_bits_f32(0x7f800001u));
}
END_TEST

START_TEST(test_array_forms)
{
    float src[5] = {1.0f, -2.5f, 0.1f, 65504.0f, -0.0f};
    uint16_t h[5], b[5];
    float back[5];
    gf_f32_to_f16_n(h, src, 5);
    gf_f16_to_f32_n(back, h, 5);
    for (int i = 0; i < 5; i++) {
        ck_assert_uint_eq(h[i], gf_f32_to_f16(src[i]));
        ck_assert(back[i] == gf_f16_to_f32(h[i]));
    }
    gf_f32_to_bf16_n(b, src, 5);
    gf_bf16_to_f32_n(back, b, 5);
    for (int i = 0; i < 5; i++) {
        ck_assert_uint_eq(b[i], gf_f32_to_bf16(src[i]));
        ck_assert(back[i] == gf_bf16_to_f32(b[i]));
    }
}
END_TEST

int main(void)
{
    build_tables();
    Suite *s = suite_create("core_dtype");
    TCase *tc = tcase_create("dtype");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_names_and_sizes);
    tcase_add_test(tc, test_f16_decode_all);
    tcase_add_test(tc, test_bf16_decode_all);
    tcase_add_test(tc, test_f16_encode_all_patterns_and_midpoints);
    tcase_add_test(tc, test_bf16_encode_all_patterns);
    tcase_add_test(tc, test_array_forms);
    suite_add_tcase(s, tc);
    int rc = gf_test_run_suite(s);
    free_tables();
    return rc;
}
