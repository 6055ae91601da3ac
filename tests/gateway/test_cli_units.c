/* Tests for the command line's parsers, without a server: .npy files
 * (gateway/cli/npy.c) and the Prometheus text format with its histogram
 * quantile (gateway/cli/prom.c). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "gateway/cli/npy.h"
#include "gateway/cli/prom.h"
#include "testutil.h"

/* ---- .npy ---------------------------------------------------------------------------- */

/* An .npy file: magic, version, header length, the dict padded with spaces
 * and '\n' to a multiple of 64, then data. Returns a malloc'd buffer. */
static unsigned char *npy_make(int major, const char *dict, const void *data, size_t n, size_t *len)
{
    size_t lenbytes = major == 1 ? 2 : 4, pre = 6 + 2 + lenbytes;
    size_t hl = strlen(dict) + 1;
    while ((pre + hl) % 64 != 0)
        hl++;
    *len = pre + hl + n;
    unsigned char *b = malloc(*len);
    ck_assert_ptr_nonnull(b);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    for (size_t k = 0; k < lenbytes; k++)
        b[8 + k] = (unsigned char)(hl >> (8 * k));
    memset(b + pre, ' ', hl);
    memcpy(b + pre, dict, strlen(dict));
    b[pre + hl - 1] = '\n';
    if (n > 0)
        memcpy(b + pre + hl, data, n);
    return b;
}

/* The file parse_dict made last: a->data points into it until the next call
 * (or parse_done). */
static unsigned char *last_file;

static void parse_done(void)
{
    free(last_file);
    last_file = NULL;
}

/* Parse a version 1 file made of dict and n bytes of data. */
static gf_status parse_dict(const char *dict, const void *data, size_t n, gf_npy *a, gf_err *e)
{
    size_t len;
    parse_done();
    last_file = npy_make(1, dict, data, n, &len);
    return gf_npy_parse(last_file, len, a, e);
}

START_TEST(test_npy_versions_and_shapes)
{
    float f[6] = {1, 2, 3, 4, 5, 6.5f};
    const char *d = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    for (int major = 1; major <= 3; major++) {
        size_t len;
        unsigned char *b = npy_make(major, d, f, sizeof f, &len);
        gf_npy a;
        gf_err e;
        ck_assert_int_eq(gf_npy_parse(b, len, &a, &e), GF_OK);
        ck_assert_int_eq(a.major, major);
        ck_assert_int_eq(a.dtype, GF_DT_F32);
        ck_assert(!a.swap);
        ck_assert_int_eq(a.rank, 2);
        ck_assert_int_eq(a.shape[0], 2);
        ck_assert_int_eq(a.shape[1], 3);
        ck_assert_uint_eq(a.numel, 6);
        ck_assert_uint_eq(a.nbytes, sizeof f);
        ck_assert(a.data == b + len - sizeof f);
        float out[6];
        ck_assert_int_eq(gf_npy_convert(&a, GF_DT_F32, out, &e), GF_OK);
        ck_assert(memcmp(out, f, sizeof f) == 0);
        free(b);
    }
    gf_npy a;
    gf_err e;
    /* a scalar, a 1-d shape with its trailing comma, double quotes, no trailing comma */
    double s = 2.5;
    ck_assert_int_eq(
        parse_dict("{'descr': '<f8', 'fortran_order': False, 'shape': ()}", &s, 8, &a, &e), GF_OK);
    ck_assert_int_eq(a.rank, 0);
    ck_assert_uint_eq(a.numel, 1);
    int32_t v[3] = {7, -8, 9};
    ck_assert_int_eq(parse_dict("{\"shape\": (3,), \"fortran_order\": False, \"descr\": \"<i4\"}",
                                v, sizeof v, &a, &e),
                     GF_OK);
    ck_assert_int_eq(a.rank, 1);
    ck_assert_int_eq(a.shape[0], 3);
    ck_assert_int_eq(a.dtype, GF_DT_I32);
    /* an empty array */
    ck_assert_int_eq(
        parse_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }", NULL, 0, &a, &e),
        GF_OK);
    ck_assert_uint_eq(a.numel, 0);
    /* Fortran order is harmless when at most one dimension exceeds 1 */
    ck_assert_int_eq(
        parse_dict("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 3), }", f, 12, &a, &e),
        GF_OK);
    parse_done();
}
END_TEST

START_TEST(test_npy_dtypes_and_conversion)
{
    gf_npy a;
    gf_err e;
    /* big-endian int32: swapped on the way */
    unsigned char be[8] = {0, 0, 1, 2, 0xff, 0xff, 0xff, 0xfe};
    ck_assert_int_eq(
        parse_dict("{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", be, 8, &a, &e),
        GF_OK);
    ck_assert(a.swap);
    int32_t i32[2];
    ck_assert_int_eq(gf_npy_convert(&a, GF_DT_I32, i32, &e), GF_OK);
    ck_assert_int_eq(i32[0], 258);
    ck_assert_int_eq(i32[1], -2);
    float f32[3];
    ck_assert_int_eq(gf_npy_convert(&a, GF_DT_F32, f32, &e), GF_OK);
    ck_assert(f32[0] == 258.0f && f32[1] == -2.0f);
    /* float64 to float32, float16 and int64 (integral values only) */
    double d[3] = {1.5, -3.0, 65504.0};
    ck_assert_int_eq(parse_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", d,
                                sizeof d, &a, &e),
                     GF_OK);
    ck_assert_int_eq(gf_npy_convert(&a, GF_DT_F32, f32, &e), GF_OK);
    uint16_t h[3];
    ck_assert_int_eq(gf_npy_convert(&a, GF_DT_F16, h, &e), GF_OK);
    ck_assert(gf_f16_to_f32(h[0]) == 1.5f && gf_f16_to_f32(h[2]) == 65504.0f);
    int64_t i64[3];
    ck_assert_int_eq(gf_npy_convert(&a, GF_DT_I64, i64, &e), GF_ERR_INVALID);
    ck_assert_msg(strstr(e.msg, "element 0 (1.5) is not an integer") != NULL, "%s", e.msg);
    d[0] = 1;
    ck_assert_int_eq(parse_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", d,
                                sizeof d, &a, &e),
                     GF_OK);
    ck_assert_int_eq(gf_npy_convert(&a, GF_DT_I64, i64, &e), GF_OK);
    ck_assert(i64[0] == 1 && i64[1] == -3 && i64[2] == 65504);
    /* ranges: -3 is no UINT8, 65504 no INT8 */
    uint8_t u8[3];
    ck_assert_int_eq(gf_npy_convert(&a, GF_DT_U8, u8, &e), GF_ERR_INVALID);
    ck_assert_msg(strstr(e.msg, "element 1 (-3) is out of range for UINT8") != NULL, "%s", e.msg);
    int64_t big[2] = {INT64_MIN, 200};
    ck_assert_int_eq(parse_dict("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", big,
                                sizeof big, &a, &e),
                     GF_OK);
    int8_t i8[2];
    ck_assert_int_eq(gf_npy_convert(&a, GF_DT_I8, i8, &e), GF_ERR_INVALID);
    ck_assert_msg(strstr(e.msg, "element 0 (-9223372036854775808)") != NULL, "%s", e.msg);
    ck_assert_int_eq(gf_npy_convert(&a, GF_DT_I64, i64, &e), GF_OK);
    ck_assert(i64[0] == INT64_MIN && i64[1] == 200);
    /* bool: from 0 and 1 only; b1 reads as 0/1 */
    uint8_t bits[3] = {0, 1, 2};
    ck_assert_int_eq(
        parse_dict("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }", bits, 3, &a, &e),
        GF_OK);
    uint8_t b[3];
    ck_assert_int_eq(gf_npy_convert(&a, GF_DT_BOOL, b, &e), GF_ERR_INVALID);
    ck_assert_msg(strstr(e.msg, "element 2 (2) is out of range for BOOL") != NULL, "%s", e.msg);
    ck_assert_int_eq(
        parse_dict("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", bits, 3, &a, &e),
        GF_OK);
    ck_assert_int_eq(a.dtype, GF_DT_BOOL);
    ck_assert_int_eq(gf_npy_convert(&a, GF_DT_U8, b, &e), GF_OK);
    ck_assert(b[0] == 0 && b[1] == 1 && b[2] == 1);
    parse_done();
}
END_TEST

START_TEST(test_npy_malformed)
{
    static const struct {
        const char *dict;
        size_t data;
        gf_status st;
        const char *msg;
    } cases[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 4, GF_ERR_FORMAT,
         "truncated: the data has 4 bytes but shape needs 8"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 12, GF_ERR_FORMAT,
         "4 bytes after the data"},
        {"{'descr': '<f4', 'fortran_order': False}", 0, GF_ERR_FORMAT, "lacks 'shape'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4, GF_ERR_FORMAT,
         "unexpected or repeated key 'x'"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", 4,
         GF_ERR_FORMAT, "repeated key 'descr'"},
        {"{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", 8, GF_ERR_UNSUPPORTED,
         "dtype '<c8' is not supported"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", 4,
         GF_ERR_UNSUPPORTED, "structured dtypes"},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16, GF_ERR_UNSUPPORTED,
         "Fortran-order arrays are not supported"},
        {"{'descr': '<f4', 'fortran_order': maybe, 'shape': (1,), }", 4, GF_ERR_FORMAT,
         "'fortran_order' is not True or False"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, -2), }", 4, GF_ERR_FORMAT,
         "non-negative integers"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }", 0,
         GF_ERR_OVERFLOW, "overflows"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 0,
         GF_ERR_FORMAT, "too large"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 4,
         GF_ERR_UNSUPPORTED, "more than 8 dimensions"},
        {"['descr', '<f4']", 0, GF_ERR_FORMAT, "not a dict"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } extra", 4, GF_ERR_FORMAT,
         "text after its dict"},
        {"{'descr': '<f4' 'fortran_order': False, 'shape': (1,), }", 4, GF_ERR_FORMAT, "malformed"},
    };
    unsigned char zeros[64] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gf_npy a;
        gf_err e;
        gf_err_clear(&e);
        ck_assert_int_eq(parse_dict(cases[i].dict, zeros, cases[i].data, &a, &e), cases[i].st);
        ck_assert_msg(strstr(e.msg, cases[i].msg) != NULL, "case %zu: '%s' lacks '%s'", i, e.msg,
                      cases[i].msg);
    }
    parse_done();
    /* the frame around the header */
    gf_npy a;
    gf_err e;
    ck_assert_int_eq(gf_npy_parse("\x93NUMPX\x01\x00\x00\x00", 10, &a, &e), GF_ERR_FORMAT);
    ck_assert_msg(strstr(e.msg, "not a .npy file") != NULL, "%s", e.msg);
    ck_assert_int_eq(gf_npy_parse("\x93NUMPY\x01", 7, &a, &e), GF_ERR_FORMAT);
    ck_assert_int_eq(gf_npy_parse("\x93NUMPY\x04\x00\x00\x00", 10, &a, &e), GF_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(e.msg, "version 4.0") != NULL, "%s", e.msg);
    ck_assert_int_eq(gf_npy_parse("\x93NUMPY\x01\x00\xff\x00{}", 12, &a, &e), GF_ERR_FORMAT);
    ck_assert_msg(strstr(e.msg, "the header says 255 bytes but the file has 2") != NULL, "%s",
                  e.msg);
    ck_assert_int_eq(gf_npy_parse("\x93NUMPY\x02\x00\xff\xff\xff\xff", 12, &a, &e), GF_ERR_FORMAT);
    ck_assert_int_eq(gf_npy_parse("\x93NUMPY\x01\x00\x03\x00{\0}", 13, &a, &e), GF_ERR_FORMAT);
    ck_assert_msg(strstr(e.msg, "NUL") != NULL, "%s", e.msg);
}
END_TEST

/* Every prefix of a valid file and every single-byte change of its header
 * either parses or fails cleanly (run under ASan, this finds overreads). */
START_TEST(test_npy_truncations_and_flips)
{
    float f[4] = {1, 2, 3, 4};
    size_t len;
    unsigned char *good = npy_make(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
                                   f, sizeof f, &len);
    for (size_t n = 0; n < len; n++) {
        unsigned char *cut = malloc(n > 0 ? n : 1); /* exact size: ASan sees any overread */
        ck_assert_ptr_nonnull(cut);
        memcpy(cut, good, n);
        gf_npy a;
        gf_err e;
        ck_assert_int_ne(gf_npy_parse(cut, n, &a, &e), GF_OK);
        free(cut);
    }
    gf_test_rng rng;
    gf_test_rng_seed(&rng, 42);
    for (int t = 0; t < 2000; t++) {
        unsigned char *m = malloc(len);
        ck_assert_ptr_nonnull(m);
        memcpy(m, good, len);
        size_t at = (size_t)gf_test_rng_below(&rng, len - sizeof f);
        m[at] = (unsigned char)gf_test_rng_below(&rng, 256);
        gf_npy a;
        gf_err e;
        if (gf_npy_parse(m, len, &a, &e) == GF_OK) {
            ck_assert(a.data + a.nbytes <= m + len);
            float out[64];
            if (a.numel <= 16)
                gf_npy_convert(&a, GF_DT_F32, out, &e);
        }
        free(m);
    }
    free(good);
}
END_TEST

/* ---- Prometheus text ------------------------------------------------------------------- */

static const char prom_text[] =
    "# HELP gpufaas_requests_total Inference requests.\n"
    "# TYPE gpufaas_requests_total counter\n"
    "gpufaas_requests_total{function=\"m\",code=\"200\"} 41\n"
    "gpufaas_requests_total{function=\"m\",code=\"400\"} 2\n"
    "gpufaas_requests_total{function=\"q\\\"x\\\\y\\n\",code=\"200\"} 7 1700000000000\n"
    "\n"
    "gpufaas_d_bucket{function=\"m\",le=\"0.4\"} 40\r\n"
    "gpufaas_d_bucket{function=\"m\",le=\"0.1\"} 10\n"
    "gpufaas_d_bucket{function=\"m\",le=\"+Inf\"} 40\n"
    "gpufaas_d_bucket{function=\"m\",le=\"0.2\"} 20\n"
    "gpufaas_d_sum{function=\"m\"} 5.5\n"
    "gpufaas_up 1\n"
    "gpufaas_weird{a=\"1\",} NaN\n"
    "gpufaas_inf -Inf\n";

START_TEST(test_prom_parse)
{
    gf_prom p;
    gf_err e;
    ck_assert_int_eq(gf_prom_parse(prom_text, strlen(prom_text), &p, &e), GF_OK);
    ck_assert_uint_eq(p.n, 11);
    ck_assert_str_eq(p.v[0].name, "gpufaas_requests_total");
    ck_assert_int_eq(p.v[0].n_labels, 2);
    ck_assert_str_eq(gf_prom_label(&p.v[0], "code"), "200");
    ck_assert_ptr_null(gf_prom_label(&p.v[0], "le"));
    ck_assert_str_eq(gf_prom_label(&p.v[2], "function"), "q\"x\\y\n");
    ck_assert(p.v[2].value == 7);
    const char *const fm[] = {"function", "m", NULL}, *const fzz[] = {"function", "zz", NULL};
    const char *const fm200[] = {"function", "m", "code", "200", NULL};
    ck_assert(gf_prom_sum(&p, "gpufaas_requests_total", fm) == 43);
    ck_assert(gf_prom_sum(&p, "gpufaas_requests_total", fm200) == 41);
    ck_assert(gf_prom_sum(&p, "gpufaas_requests_total", NULL) == 50);
    ck_assert(gf_prom_sum(&p, "gpufaas_requests_total", fzz) == 0);
    ck_assert(gf_prom_sum(&p, "gpufaas_up", NULL) == 1);
    ck_assert(isnan(p.v[9].value));
    ck_assert(isinf(p.v[10].value) && p.v[10].value < 0);
    double le[8], cnt[8];
    size_t n = gf_prom_buckets(&p, "gpufaas_d", fm, le, cnt, 8);
    ck_assert_uint_eq(n, 4);
    ck_assert(le[0] == 0.1 && le[1] == 0.2 && le[2] == 0.4 && isinf(le[3]));
    ck_assert(cnt[0] == 10 && cnt[1] == 20 && cnt[2] == 40 && cnt[3] == 40);
    ck_assert_uint_eq(gf_prom_buckets(&p, "gpufaas_d", fm, le, cnt, 2), 2);
    gf_prom_free(&p);
    gf_prom_free(NULL);

    static const char *const bad[] = {
        "x{a=\"1\" 2\n",
        "x{a=1} 2\n",
        "x{a=\"1\"} \n",
        "x{a=\"1\"}2\n",
        "x 1abc\n",
        "9x 1\n",
        "x{a=\"\\",
        "x{=\"1\"} 1\n",
        "x{a=\"1\",b=\"1\",c=\"1\",d=\"1\",e=\"1\",f=\"1\",g=\"1\",h=\"1\",i=\"1\"} 1\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "ok 1\n%s", bad[i]);
        gf_err_clear(&e);
        ck_assert_msg(gf_prom_parse(text, strlen(text), &p, &e) != GF_OK, "accepted: %s", bad[i]);
        ck_assert_msg(strstr(e.msg, "metrics line 2") != NULL, "%s: %s", bad[i], e.msg);
        gf_prom_free(&p);
    }
}
END_TEST

START_TEST(test_prom_quantile)
{
    double le[4] = {0.1, 0.2, 0.4, INFINITY}, cnt[4] = {10, 20, 40, 40};
    /* rank 20 ends exactly at the top of the second bucket */
    ck_assert(fabs(gf_prom_quantile(0.5, le, cnt, 4) - 0.2) < 1e-12);
    /* rank 39.6: 0.2 + 0.2 * 19.6 / 20 */
    ck_assert(fabs(gf_prom_quantile(0.99, le, cnt, 4) - 0.396) < 1e-12);
    /* rank 5 in the first bucket, from 0 */
    ck_assert(fabs(gf_prom_quantile(0.125, le, cnt, 4) - 0.05) < 1e-12);
    /* in the +Inf bucket: the highest finite bound */
    double c2[4] = {1, 1, 1, 100};
    ck_assert(gf_prom_quantile(0.99, le, c2, 4) == 0.4);
    /* nothing observed */
    double c0[4] = {0, 0, 0, 0};
    ck_assert(isnan(gf_prom_quantile(0.99, le, c0, 4)));
    ck_assert(isnan(gf_prom_quantile(0.99, le, cnt, 0)));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gateway_cli_units");
    TCase *tc = tcase_create("npy");
    tcase_add_test(tc, test_npy_versions_and_shapes);
    tcase_add_test(tc, test_npy_dtypes_and_conversion);
    tcase_add_test(tc, test_npy_malformed);
    tcase_add_test(tc, test_npy_truncations_and_flips);
    suite_add_tcase(s, tc);
    tc = tcase_create("prom");
    tcase_add_test(tc, test_prom_parse);
    tcase_add_test(tc, test_prom_quantile);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
