/* Tests for runtime/core: errors, logging, byte buffers, UTF-8, tensors, fault specs. */
#include <check.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/dtype.h"
#include "core/ema.h"
#include "core/error.h"
#include "core/fault.h"
#include "core/floatfmt.h"
#include "core/log.h"
#include "core/path.h"
#include "core/tensor.h"
#include "core/tier.h"
#include "core/utf8.h"
#include "testutil.h"

START_TEST(test_errors)
{
    for (int c = 0; c < GF_STATUS_COUNT_; c++) {
        ck_assert_ptr_nonnull(gf_strerror((gf_status)c));
        ck_assert_str_ne(gf_strerror((gf_status)c), "unknown error");
        ck_assert(strncmp(gf_status_name((gf_status)c), "GF_", 3) == 0);
    }
    ck_assert_str_eq(gf_strerror((gf_status)999), "unknown error");
    gf_err err;
    gf_err_clear(&err);
    ck_assert_int_eq(err.code, GF_OK);
    ck_assert_int_eq(gf_err_set(&err, GF_ERR_INVALID, "bad %s %d", "shape", 3), GF_ERR_INVALID);
    ck_assert_str_eq(err.msg, "bad shape 3");
    gf_err_prefix(&err, "tensor '%s'", "w");
    ck_assert_str_eq(err.msg, "tensor 'w': bad shape 3");
    ck_assert_int_eq(err.code, GF_ERR_INVALID);
    /* NULL err: the code still comes back */
    ck_assert_int_eq(gf_err_set(NULL, GF_ERR_IO, "x"), GF_ERR_IO);
    /* a message without text falls back to the code's description */
    gf_err_set(&err, GF_ERR_NOMEM, NULL);
    ck_assert_str_eq(gf_err_msg(&err), "out of memory");
    /* long messages are truncated, never overflow */
    char big[2000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    gf_err_set(&err, GF_ERR_FORMAT, "%s", big);
    ck_assert_uint_eq(strlen(err.msg), GF_ERR_MSG_MAX - 1);
    gf_err_prefix(&err, "%s", big);
    ck_assert_uint_eq(strlen(err.msg), GF_ERR_MSG_MAX - 1);
}
END_TEST

static int evaluated;
static int count_eval(void)
{
    return ++evaluated;
}

START_TEST(test_logging)
{
    char path[] = "/tmp/gflog.XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    gf_log_init("worker 3", GF_LOG_INFO);
    evaluated = 0;
    GF_LOG_D("hidden %d", count_eval()); /* level off: argument not evaluated */
    GF_LOG_I("shown %d", count_eval());
    gf_log_sigsafe("from a handler");
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(fd);
    ck_assert_int_eq(evaluated, 1);
    size_t n;
    char *text = gf_test_read_file(path, &n);
    unlink(path);
    ck_assert_ptr_nonnull(text);
    char pid[32];
    snprintf(pid, sizeof pid, "[%d]", (int)getpid());
    ck_assert_msg(strstr(text, "worker 3 INFO  test_logging_fn: shown 1\n") != NULL, "%s", text);
    ck_assert_msg(strstr(text, pid) != NULL, "%s", text);
    ck_assert_msg(strstr(text, "hidden") == NULL, "%s", text);
    ck_assert_msg(strstr(text, "Z [") != NULL, "no UTC time stamp: %s", text);
    ck_assert_msg(strstr(text, "worker 3 [") != NULL && strstr(text, "] from a handler\n"),
                  "%s", text);
    free(text);

    gf_log_level lv;
    ck_assert_int_eq(gf_log_level_parse("DEBUG", &lv), 0);
    ck_assert_int_eq(lv, GF_LOG_DEBUG);
    ck_assert_int_eq(gf_log_level_parse("4", &lv), 0);
    ck_assert_int_eq(lv, GF_LOG_TRACE);
    ck_assert_int_eq(gf_log_level_parse("loud", &lv), -1);
    setenv("GPUFAAS_LOG", "error", 1);
    gf_log_init(NULL, GF_LOG_DEFAULT);
    ck_assert_int_eq(gf_log_threshold, GF_LOG_ERROR);
    setenv("GPUFAAS_LOG", "bogus", 1);
    gf_log_init(NULL, GF_LOG_DEFAULT);
    ck_assert_int_eq(gf_log_threshold, GF_LOG_INFO);
    unsetenv("GPUFAAS_LOG");
}
END_TEST

START_TEST(test_buf)
{
    gf_buf b;
    gf_buf_init(&b);
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(gf_buf_printf(&b, "%d,", i), GF_OK);
    ck_assert(strncmp(b.data, "0,1,2,", 6) == 0);
    ck_assert_uint_eq(strlen(b.data), b.len);
    gf_buf_reset(&b);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_int_eq(gf_buf_append_json_str(&b, "a\"b\\c\n\x01\xc3\xa9\xff", 10), GF_OK);
    ck_assert_str_eq(b.data, "\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\xef\xbf\xbd\"");
    b.limit = 8;
    gf_buf_reset(&b);
    ck_assert_int_eq(gf_buf_append_str(&b, "12345678"), GF_OK);
    ck_assert_int_eq(gf_buf_append_str(&b, "9"), GF_ERR_TOO_LARGE);
    ck_assert_uint_eq(b.len, 8);
    size_t len;
    char *s = gf_buf_steal(&b, &len);
    ck_assert_str_eq(s, "12345678");
    ck_assert_uint_eq(len, 8);
    free(s);
    ck_assert_ptr_null(b.data);
    gf_buf_deinit(&b);
    /* gf_str_copy: what snprintf(dst, cap, "%s", src) leaves, at every cap */
    for (size_t cap = 0; cap <= 8; cap++) {
        char got[8] = "xxxxxxx", want[8] = "xxxxxxx";
        ck_assert_uint_eq(gf_str_copy(got, cap, "abcde"), 5);
        snprintf(want, cap, "%s", "abcde");
        ck_assert_int_eq(memcmp(got, want, sizeof got), 0);
    }
}
END_TEST

START_TEST(test_utf8)
{
    ck_assert(gf_utf8_valid("plain", 5, NULL));
    ck_assert(gf_utf8_valid("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf", 13, NULL));
    size_t at;
    ck_assert(!gf_utf8_valid("ab\x80", 3, &at));
    ck_assert_uint_eq(at, 2);
    ck_assert(!gf_utf8_valid("\xe0\x80\xaf", 3, NULL)); /* overlong */
    ck_assert(!gf_utf8_valid("\xed\xa0\x80", 3, NULL)); /* surrogate */
    ck_assert(!gf_utf8_valid("\xf4\x90\x80\x80", 4, NULL)); /* > U+10FFFF */
    ck_assert(!gf_utf8_valid("\xc3", 1, NULL));          /* truncated */
    ck_assert(!gf_utf8_valid("\xf8\x88\x80\x80\x80", 5, NULL));
    char out[4];
    ck_assert_uint_eq(gf_utf8_encode(0x20ac, out), 3);
    ck_assert(memcmp(out, "\xe2\x82\xac", 3) == 0);
    ck_assert_uint_eq(gf_utf8_encode(0xd800, out), 0);
    ck_assert_uint_eq(gf_utf8_encode(0x110000, out), 0);
    /* encode/validate agree on every code point */
    for (uint32_t cp = 0; cp <= 0x10ffff; cp += 7) {
        size_t n = gf_utf8_encode(cp, out);
        if (cp >= 0xd800 && cp <= 0xdfff)
            ck_assert_uint_eq(n, 0);
        else
            ck_assert(n > 0 && gf_utf8_seq_len(out, n) == n);
    }
}
END_TEST

START_TEST(test_tensor)
{
    gf_tensor t;
    gf_err err;
    int64_t shape[3] = {2, 3, 4};
    ck_assert_int_eq(gf_tensor_init(&t, GF_DT_F16, 3, shape, NULL, GF_MEM_DEVICE, 1, &err),
                     GF_OK);
    ck_assert_uint_eq(t.nbytes, 48);
    ck_assert_uint_eq(gf_tensor_numel(&t), 24);
    ck_assert_int_eq(t.device_id, 1);
    ck_assert_int_eq(gf_tensor_init(&t, GF_DT_F32, 1, shape, NULL, GF_MEM_HOST, 1, &err), GF_OK);
    ck_assert_int_eq(t.device_id, -1);
    int64_t neg[2] = {2, -1};
    ck_assert_int_eq(gf_tensor_init(&t, GF_DT_F32, 2, neg, NULL, GF_MEM_HOST, 0, &err),
                     GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "dimension 1 is negative") != NULL, "%s", err.msg);
    int64_t big[2] = {INT64_MAX, INT64_MAX};
    ck_assert_int_eq(gf_tensor_init(&t, GF_DT_F32, 2, big, NULL, GF_MEM_HOST, 0, &err),
                     GF_ERR_OVERFLOW);
    int64_t edge[1] = {(int64_t)(UINT64_MAX / 4 + 1)};
    ck_assert_int_eq(gf_tensor_init(&t, GF_DT_F32, 1, edge, NULL, GF_MEM_HOST, 0, &err),
                     GF_ERR_OVERFLOW);
    ck_assert_int_eq(gf_tensor_init(&t, GF_DT_F32, 9, shape, NULL, GF_MEM_HOST, 0, &err),
                     GF_ERR_INVALID);
    ck_assert_int_eq(gf_tensor_init(&t, GF_DT_INVALID, 1, shape, NULL, GF_MEM_HOST, 0, &err),
                     GF_ERR_INVALID);
    ck_assert_int_eq(gf_tensor_init(&t, GF_DT_F32, 0, NULL, NULL, GF_MEM_HOST, 0, &err), GF_OK);
    ck_assert_uint_eq(t.nbytes, 4); /* a scalar */
    char s[64];
    ck_assert_str_eq(gf_shape_str(s, sizeof s, 3, shape), "[2, 3, 4]");
    ck_assert_str_eq(gf_shape_str(s, sizeof s, 0, shape), "[]");
    ck_assert_str_eq(gf_shape_str(s, 6, 3, shape), "[2...");
    /* what the snprintf-built text was, cut at every capacity */
    const int64_t wide[] = {-9223372036854775807 - 1, 0, 42, 9223372036854775807};
    char want[128], got[128];
    snprintf(want, sizeof want, "[%lld, %lld, %lld, %lld]", (long long)wide[0],
             (long long)wide[1], (long long)wide[2], (long long)wide[3]);
    for (size_t cap = 1; cap <= sizeof got; cap++) {
        memset(got, 'x', sizeof got);
        gf_shape_str(got, cap, 4, wide);
        char w[128];
        snprintf(w, cap, "%s", want);
        if (strlen(want) >= cap && cap >= 4)
            memcpy(w + cap - 4, "...", 4);
        ck_assert_msg(strcmp(got, w) == 0, "cap %zu: '%s', expected '%s'", cap, got, w);
    }
    ck_assert(gf_shape_equal(3, shape, 3, (int64_t[]){2, 3, 4}));
    ck_assert(!gf_shape_equal(3, shape, 2, shape));
    size_t out;
    ck_assert(gf_size_align_up(257, 256, &out) && out == 512);
    ck_assert(!gf_size_align_up(SIZE_MAX - 3, 256, &out));
    ck_assert(!gf_size_mul(SIZE_MAX / 2 + 1, 2, &out));
    ck_assert(!gf_size_add(SIZE_MAX, 1, &out));
}
END_TEST

/* GPUFAAS_FAULTS-style specs: every entry is checked before any is armed. */
/* The execution-time average: the first sample is the average; later ones
 * move it by GF_EMA_WEIGHT of the difference; it follows a new level. */
START_TEST(test_ema)
{
    ck_assert(gf_ema(0, 100) == 100);
    double a = gf_ema(100, 200);
    ck_assert(a > 100 + 0.2 * 100 - 1e-9 && a < 100 + 0.2 * 100 + 1e-9);
    for (int i = 0; i < 60; i++)
        a = gf_ema(a, 50);
    ck_assert(a > 49.99 && a < 50.01);
}
END_TEST

/* Tier and policy names, what SQLite stores and the flags take. */
START_TEST(test_tier_names)
{
    ck_assert_str_eq(gf_tier_name(GF_TIER_STORE), "store");
    ck_assert_str_eq(gf_tier_name(GF_TIER_HOST), "host");
    ck_assert_str_eq(gf_tier_name(GF_TIER_DEVICE), "device");
    ck_assert_str_eq(gf_tier_name(GF_TIER_NONE), "none");
    ck_assert(!gf_tier_valid(GF_TIER_NONE) && gf_tier_valid(GF_TIER_DEVICE) && !gf_tier_valid(3));
    gf_evict_policy p;
    gf_err e;
    ck_assert_int_eq(gf_evict_policy_parse("GDS", &p, &e), GF_OK);
    ck_assert_int_eq(p, GF_EVICT_GDS);
    ck_assert_str_eq(gf_evict_policy_name(p), "gds");
    ck_assert_int_eq(gf_evict_policy_parse("lru", &p, &e), GF_OK);
    ck_assert_int_eq(p, GF_EVICT_LRU);
    ck_assert_int_eq(gf_evict_policy_parse("fifo", &p, &e), GF_ERR_INVALID);
    ck_assert_str_eq(e.msg, "'fifo' is not lru, gds or gdsf");
    ck_assert_int_eq(gf_evict_policy_parse("gdsf", &p, &e), GF_OK);
    ck_assert_int_eq(p, GF_EVICT_GDSF);
    ck_assert_str_eq(gf_evict_policy_name(p), "gdsf");
}
END_TEST

START_TEST(test_fault_spec)
{
    gf_err err;
    ck_assert_int_eq(gf_fault_arm_spec(NULL, &err), GF_OK);
    ck_assert_int_eq(gf_fault_arm_spec("", &err), GF_OK);
    ck_assert(!GF_FAULT("a"));
    ck_assert_int_eq(gf_fault_arm_spec("a:2,b:1:3", &err), GF_OK);
    ck_assert(!gf_fault_hit("a"));
    ck_assert(gf_fault_hit("a"));
    ck_assert(!gf_fault_hit("a")); /* repeat defaults to one */
    for (int i = 0; i < 3; i++)
        ck_assert(gf_fault_hit("b"));
    ck_assert(!gf_fault_hit("b"));
    ck_assert_int_eq(gf_fault_failures("b"), 3);
    gf_fault_reset();
    static const char *bad[] = {"a", "a:", ":1", "a:0", "a:x", "a:1:", "a:1:0", "a:1:2:3",
                                "ok:1,bad", "a:1,,b:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(gf_fault_arm_spec(bad[i], &err) == GF_ERR_INVALID, "'%s' accepted", bad[i]);
        ck_assert_msg(strstr(err.msg, "not site:nth[:repeat]") != NULL, "%s", err.msg);
    }
    ck_assert(!gf_fault_hit("ok")); /* nothing of a bad spec was armed */
    ck_assert_int_eq(gf_fault_arm_spec("x:1:-1", &err), GF_OK); /* every call from the first */
    for (int i = 0; i < 5; i++)
        ck_assert(gf_fault_hit("x"));
    gf_fault_reset();
}
END_TEST

/* Derived files are named by the model key: readable when the key is a safe
 * file name, otherwise made safe with a hash, and never the same for two
 * keys. */
/* gf_fmt_float_g writes exactly what snprintf's %.Ng does, at every
 * precision, for edge values and for 60,000 random float bit patterns
 * (normal, subnormal, near powers of ten and near rounding ties). */
static void fmt_matches(float f, int prec)
{
    char got[32], want[32];
    int n = gf_fmt_float_g(got, f, prec);
    snprintf(want, sizeof want, "%.*g", prec, (double)f);
    ck_assert_msg(strcmp(got, want) == 0, "%%.%dg of %a: '%s', snprintf '%s'", prec, (double)f,
                  got, want);
    ck_assert_int_eq(n, (int)strlen(want));
}

START_TEST(test_float_format)
{
    static const float edge[] = {0.0f,     -0.0f,   1.0f,      -1.0f,    0.5f,    0.1f,
                                 1e-5f,    1e-4f,   9.9999e-5f, 1e6f,     1e7f,    9999999.0f,
                                 99999999.0f, 1e9f, 123456789.0f, 3.4028235e38f, 1.17549435e-38f,
                                 1.4e-45f, 1e-45f,  2.5f,      0.125f,   1e38f,   1e-38f,
                                 0.0001f,  0.00001f, 100000.0f, 999999.5f, 0.3f,  16777216.0f};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++)
        for (int p = 1; p <= 9; p++)
            fmt_matches(edge[i], p);
    unsigned seed = 4242;
    int tried = 0, fast = 0;
    for (int i = 0; i < 60000; i++) {
        uint32_t bits = (uint32_t)rand_r(&seed) ^ ((uint32_t)rand_r(&seed) << 16);
        float f;
        memcpy(&f, &bits, sizeof f);
        if (i % 3 == 1) /* values such as a model outputs */
            f = (float)((double)rand_r(&seed) / RAND_MAX * 20.0 - 10.0);
        if (i % 3 == 2) /* a short decimal, and its neighbours */
            f = nextafterf((float)(rand_r(&seed) % 100000) / 1000.0f,
                           (rand_r(&seed) % 2) ? INFINITY : -INFINITY);
        if (!isfinite(f))
            continue;
        fmt_matches(f, 7);
        fmt_matches(f, 9);
        fmt_matches(f, 1 + i % 9);
        /* reading such text back: the fast answer is strtof's */
        char txt[32];
        for (int p = 6; p <= 9; p++) {
            int n = snprintf(txt, sizeof txt, "%.*g", p, (double)f);
            float back;
            tried++;
            if (gf_decimal_to_float_fast(txt, (size_t)n, &back)) {
                fast++;
                ck_assert_msg(memcmp(&back, &(float){strtof(txt, NULL)}, sizeof back) == 0,
                              "'%s': %a, strtof %a", txt, (double)back,
                              (double)strtof(txt, NULL));
            }
        }
    }
    ck_assert_msg(fast * 2 > tried, "the fast path took %d of %d", fast, tried);
    float back;
    ck_assert(!gf_decimal_to_float_fast("16777217", 8, &back)); /* halfway: strtof decides */
    ck_assert(!gf_decimal_to_float_fast("-16777219", 9, &back));
    ck_assert(gf_decimal_to_float_fast("16777218", 8, &back) && back == 16777218.0f);
    ck_assert(gf_decimal_to_float_fast("-2.5e-3", 7, &back) && back == strtof("-2.5e-3", NULL));
    ck_assert(!gf_decimal_to_float_fast("1e", 2, &back));
    ck_assert(!gf_decimal_to_float_fast("3.402823e+38", 12, &back)); /* 10^32: not exact */
    /* integers, as %" PRId64 / %" PRIu64 write them */
    static const int64_t ints[] = {0, 1, -1, 9, 10, -10, 99, 100, 123456789, -987654321,
                                   INT64_MAX, INT64_MIN, INT64_MIN + 1, 4294967296};
    char got[GF_FMT_INT_MAX], want[GF_FMT_INT_MAX];
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        snprintf(want, sizeof want, "%" PRId64, ints[i]);
        ck_assert_int_eq(gf_fmt_i64(got, ints[i]), (int)strlen(want));
        ck_assert_str_eq(got, want);
        snprintf(want, sizeof want, "%" PRIu64, (uint64_t)ints[i]);
        ck_assert_int_eq(gf_fmt_u64(got, (uint64_t)ints[i]), (int)strlen(want));
        ck_assert_str_eq(got, want);
    }
    char out[32];
    gf_fmt_float_g(out, NAN, 7);
    ck_assert_str_eq(out, "nan");
    gf_fmt_float_g(out, -INFINITY, 9);
    ck_assert_str_eq(out, "-inf");
}
END_TEST

START_TEST(test_derived_name)
{
    char *n = gf_derived_name("resnet18@3");
    ck_assert_str_eq(n, "resnet18@3.safetensors");
    free(n);
    const char *odd[] = {"a/b@1", "a_b@1", ".hidden@1", "", "x y@2", "x_y@2"};
    char *names[6];
    for (int i = 0; i < 6; i++) {
        names[i] = gf_derived_name(odd[i]);
        ck_assert_ptr_nonnull(names[i]);
        ck_assert_ptr_null(strchr(names[i], '/'));
        ck_assert(names[i][0] != '.');
        for (int k = 0; k < i; k++)
            ck_assert_str_ne(names[i], names[k]);
    }
    ck_assert_str_eq(names[1], "a_b@1.safetensors"); /* safe: no hash */
    ck_assert_int_eq(strncmp(names[0], "a_b@1-", 6), 0);
    for (int i = 0; i < 6; i++)
        free(names[i]);
    char long_key[400];
    memset(long_key, 'k', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = '\0';
    n = gf_derived_name(long_key);
    ck_assert_uint_lt(strlen(n), 255); /* a file name fits NAME_MAX */
    free(n);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("core_misc");
    TCase *tc = tcase_create("misc");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_logging);
    tcase_add_test(tc, test_buf);
    tcase_add_test(tc, test_utf8);
    tcase_add_test(tc, test_tensor);
    tcase_add_test(tc, test_fault_spec);
    tcase_add_test(tc, test_ema);
    tcase_add_test(tc, test_tier_names);
    tcase_add_test(tc, test_derived_name);
    tcase_add_test(tc, test_float_format);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
