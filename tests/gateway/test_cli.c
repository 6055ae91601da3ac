/* Tests for the `gpufaas` command line: the real binary, run as a user would. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "testutil.h"

static char *tmpdir;
static void setup(void) { tmpdir = gf_test_tmpdir(); }
static void teardown(void) { gf_test_rmtree(tmpdir); tmpdir = NULL; }

static int run(const char *a1, const char *a2, char **out, char **err)
{
    char *argv[] = {(char *)gf_test_prog("GF_GPUFAAS"), (char *)a1, (char *)a2, NULL};
    return gf_test_run_cmd(argv, out, err, 30);
}

START_TEST(test_version_and_help)
{
    char *out, *err;
    ck_assert_int_eq(run("version", NULL, &out, &err), 0);
    ck_assert_msg(strncmp(out, "gpufaas ", 8) == 0 && strstr(out, "backends: cpu"), "%s", out);
    free(out);
    free(err);
    ck_assert_int_eq(run("--help", NULL, &out, &err), 0);
    ck_assert_msg(strstr(out, "inspect") && strstr(out, "version"), "%s", out);
    free(out);
    free(err);
    const char *subs[] = {"version", "inspect"};
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(run(subs[i], "--help", &out, &err), 0);
        ck_assert_msg(strstr(out, "usage: gpufaas ") != NULL, "%s", out);
        free(out);
        free(err);
    }
    ck_assert_int_eq(run("frobnicate", NULL, &out, &err), 2);
    ck_assert_msg(strstr(err, "unknown command 'frobnicate'") != NULL, "%s", err);
    free(out);
    free(err);
    ck_assert_int_eq(run(NULL, NULL, &out, &err), 2);
    free(out);
    free(err);
}
END_TEST

START_TEST(test_inspect_valid)
{
    char *path = gf_test_path(tmpdir, "m.safetensors");
    float w[6] = {0};
    int64_t ws[2] = {2, 3}, bs[1] = {2};
    uint16_t b[2] = {0};
    gf_st_wtensor ts[2] = {{"0.weight", GF_DT_F32, 2, ws, w}, {"0.bias", GF_DT_BF16, 1, bs, b}};
    const char *meta[] = {"format", "pt"};
    gf_err e;
    ck_assert_int_eq(gf_st_write(path, ts, 2, meta, 1, &e), GF_OK);
    char *out, *err;
    ck_assert_int_eq(run("inspect", path, &out, &err), 0);
    ck_assert_msg(strstr(out, "tensors: 2") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "format = pt") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "0.weight  FP32   [2, 3]") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "0.bias    BF16   [2]") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "  24\n") != NULL && strstr(out, "  4\n") != NULL, "%s", out);
    ck_assert_str_eq(err, "");
    free(out);
    free(err);
    free(path);
}
END_TEST

START_TEST(test_inspect_malformed)
{
    char *path = gf_test_path(tmpdir, "bad.safetensors");
    const char hdr[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}";
    unsigned char buf[8 + sizeof hdr - 1 + 4] = {0};
    buf[0] = sizeof hdr - 1;
    memcpy(buf + 8, hdr, sizeof hdr - 1);
    gf_test_write_file(path, buf, sizeof buf);
    char *out, *err;
    ck_assert_int_eq(run("inspect", path, &out, &err), 1);
    ck_assert_msg(strstr(err, "data span is 4 bytes but shape [2] of FP32 needs 8") != NULL, "%s",
                  err);
    ck_assert_str_eq(out, "");
    free(out);
    free(err);
    ck_assert_int_eq(run("inspect", "/nonexistent/x.safetensors", &out, &err), 1);
    ck_assert_msg(strstr(err, "No such file") != NULL, "%s", err);
    free(out);
    free(err);
    ck_assert_int_eq(run("inspect", NULL, &out, &err), 2);
    free(out);
    free(err);
    ck_assert_int_eq(run("inspect", "--bogus", &out, &err), 2);
    ck_assert_msg(strstr(err, "unknown option '--bogus'") != NULL, "%s", err);
    free(out);
    free(err);
    free(path);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gateway_cli");
    TCase *tc = tcase_create("cli");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_version_and_help);
    tcase_add_test(tc, test_inspect_valid);
    tcase_add_test(tc, test_inspect_malformed);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
