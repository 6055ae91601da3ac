/* Tests for byte sizes as people write them (runtime/core/units.c). */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "core/units.h"
#include "testutil.h"

START_TEST(test_parse_sizes)
{
    static const struct {
        const char *s;
        uint64_t v;
    } ok[] = {
        {"0", 0},           {"4096", 4096},           {"1K", 1024},
        {"1k", 1024},       {"64KB", 64 << 10},       {"64KiB", 64 << 10},
        {"512M", 512u << 20}, {"2G", 2ull << 30},     {"2GiB", 2ull << 30},
        {"1T", 1ull << 40}, {"16777215T", 16777215ull << 40},
        {"18446744073709551615", UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint64_t v = 1;
        gf_err err;
        ck_assert_msg(gf_size_parse(ok[i].s, &v, &err) == GF_OK, "%s: %s", ok[i].s, err.msg);
        ck_assert_msg(v == ok[i].v, "%s -> %llu", ok[i].s, (unsigned long long)v);
    }
    static const char *const bad[] = {"", "-1", "+1", " 1", "1 ", "1.5G", "G", "1X", "1KK",
                                      "1Ki", "1iB", "1b", "0x10", "1e3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 7;
        gf_err err;
        ck_assert_msg(gf_size_parse(bad[i], &v, &err) == GF_ERR_INVALID, "'%s' accepted", bad[i]);
        ck_assert_msg(strstr(err.msg, "is not a size") != NULL, "%s", err.msg);
        ck_assert(v == 7);
    }
    uint64_t v;
    gf_err err;
    ck_assert(gf_size_parse(NULL, &v, &err) == GF_ERR_INVALID);
    ck_assert(gf_size_parse("18446744073709551616", &v, &err) == GF_ERR_OVERFLOW);
    ck_assert(gf_size_parse("16777216T", &v, &err) == GF_ERR_OVERFLOW);
    ck_assert_msg(strstr(err.msg, "too large") != NULL, "%s", err.msg);
}
END_TEST

START_TEST(test_format_sizes)
{
    char b[32];
    ck_assert_str_eq(gf_size_format(0, b, sizeof b), "0 B");
    ck_assert_str_eq(gf_size_format(1023, b, sizeof b), "1023 B");
    ck_assert_str_eq(gf_size_format(1024, b, sizeof b), "1 KiB");
    ck_assert_str_eq(gf_size_format(1536, b, sizeof b), "1.5 KiB");
    ck_assert_str_eq(gf_size_format(512ull << 20, b, sizeof b), "512 MiB");
    ck_assert_str_eq(gf_size_format(3ull << 40, b, sizeof b), "3 TiB");
    ck_assert_str_eq(gf_size_format(UINT64_MAX, b, sizeof b), "16 EiB");
    ck_assert_str_eq(gf_size_format(1ull << 30, b, 4), "1 G"); /* truncated, terminated */
    /* the exact form reads back as it was */
    static const uint64_t exact[] = {0, 1500, 1024, 64ull << 20, 16ull << 30, 3ull << 40,
                                     5ull << 50, (64ull << 20) + 1024};
    static const char *const text[] = {"0", "1500", "1K", "64M", "16G", "3T", "5120T",
                                       "65537K"};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        ck_assert_str_eq(gf_size_format_exact(exact[i], b, sizeof b), text[i]);
        uint64_t back;
        ck_assert_int_eq(gf_size_parse(b, &back, NULL), GF_OK);
        ck_assert_uint_eq(back, exact[i]);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("core_units");
    TCase *tc = tcase_create("units");
    tcase_add_test(tc, test_parse_sizes);
    tcase_add_test(tc, test_format_sizes);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
