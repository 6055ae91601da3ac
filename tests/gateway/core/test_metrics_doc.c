/* docs/operations.md lists every /metrics series: each family of the one
 * table in gateway/core/metrics.c has its row there, with its type, and the
 * table names no family that does not exist. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/core/metrics.h"
#include "testutil.h"

START_TEST(test_every_series_documented)
{
    char *doc_path = gf_test_path(getenv("GF_SOURCE_ROOT"), "docs/operations.md");
    size_t n;
    char *doc = gf_test_read_file(doc_path, &n);
    ck_assert_ptr_nonnull(doc);
    gw_metrics *m = gw_metrics_new();
    gf_buf b;
    gf_buf_init(&b);
    ck_assert_int_eq(gw_metrics_write(m, &b), GF_OK);
    int families = 0;
    for (const char *p = b.data; (p = strstr(p, "# TYPE ")) != NULL; p++) {
        char name[128], kind[32], row[200];
        ck_assert_int_eq(sscanf(p, "# TYPE %127s %31s", name, kind), 2);
        snprintf(row, sizeof row, "| `%s` | %s |", name, kind);
        ck_assert_msg(strstr(doc, row) != NULL, "docs/operations.md has no row '%s'", row);
        families++;
    }
    ck_assert_int_ge(families, 10);
    /* and the other way round */
    for (const char *p = doc; (p = strstr(p, "\n| `gpufaas_")) != NULL; p++) {
        char name[128], want[160];
        ck_assert_int_eq(sscanf(p, "\n| `%127[^`]`", name), 1);
        snprintf(want, sizeof want, "# TYPE %s ", name);
        ck_assert_msg(strstr(b.data, want) != NULL, "docs/operations.md lists '%s', /metrics "
                      "has no such family", name);
    }
    gf_buf_deinit(&b);
    gw_metrics_free(m);
    free(doc);
    free(doc_path);
}
END_TEST

/* Thousands of series (a function per label value) each keep their own
 * value; a cleared family starts again from nothing. */
START_TEST(test_many_series)
{
    gw_metrics *m = gw_metrics_new();
    ck_assert_ptr_nonnull(m);
    enum { N = 5000 };
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < N; i++) {
            char fn[32], ver[16];
            snprintf(fn, sizeof fn, "fn%05d", i);
            snprintf(ver, sizeof ver, "%d", i % 7);
            const char *l2[2] = {fn, ver};
            gw_metric_add(m, GW_M_COLD_STARTS, l2, (double)(i + 1));
            gw_metric_set(m, GW_M_WORKERS, (const char *const[]){fn}, (double)i);
        }
    for (int i = 0; i < N; i++) {
        char fn[32], ver[16];
        snprintf(fn, sizeof fn, "fn%05d", i);
        snprintf(ver, sizeof ver, "%d", i % 7);
        const char *l2[2] = {fn, ver};
        ck_assert_double_eq(gw_metric_get(m, GW_M_COLD_STARTS, l2), 3.0 * (i + 1));
        snprintf(ver, sizeof ver, "%d", i % 7 + 1); /* another version: no such series */
        ck_assert_double_eq(gw_metric_get(m, GW_M_COLD_STARTS, l2), 0);
        ck_assert_double_eq(gw_metric_get(m, GW_M_WORKERS, (const char *const[]){fn}), i);
    }
    gw_metric_clear(m, GW_M_WORKERS);
    ck_assert_double_eq(gw_metric_get(m, GW_M_WORKERS, (const char *const[]){"fn00001"}), 0);
    gw_metric_set(m, GW_M_WORKERS, (const char *const[]){"fn00001"}, 5);
    ck_assert_double_eq(gw_metric_get(m, GW_M_WORKERS, (const char *const[]){"fn00001"}), 5);
    ck_assert_double_eq(gw_metric_get(m, GW_M_COLD_STARTS, (const char *const[]){"fn00002", "2"}),
                        9);
    gw_metrics_free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gateway_metrics_doc");
    TCase *tc = tcase_create("metrics_doc");
    tcase_add_test(tc, test_every_series_documented);
    tcase_add_test(tc, test_many_series);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
