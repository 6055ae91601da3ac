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

/* gw_metric_apply updates each family by its kind (a counter adds, a gauge
 * is set, a histogram observes) exactly as the one-at-a-time calls do, and
 * a label value longer than the key is cut off as before. */
START_TEST(test_apply_matches_single_calls)
{
    gw_metrics *a = gw_metrics_new(), *b = gw_metrics_new();
    const char *l2[2] = {"fn", "3"}, *l3[3] = {"fn", "3", "200"};
    char lng[600];
    memset(lng, 'x', sizeof lng - 1);
    lng[sizeof lng - 1] = '\0';
    const char *ll[2] = {lng, "1"};
    gw_metric_slot slots[2] = {{NULL, 0}, {NULL, 0}}; /* remembered lookups: the same sums */
    for (int i = 0; i < 3; i++) {
        const gw_metric_op ops[] = {
            {GW_M_REQUESTS, l3, 1, &slots[0]},
            {GW_M_LAST_INFERENCE, l2, 10.0 + i, NULL},
            {GW_M_REQUEST_DURATION, l2, 0.002 * (i + 1), &slots[1]},
            {GW_M_COLD_STARTS, ll, 2, NULL},
        };
        gw_metric_apply(a, ops, sizeof ops / sizeof ops[0]);
        gw_metric_add(b, GW_M_REQUESTS, l3, 1);
        gw_metric_set(b, GW_M_LAST_INFERENCE, l2, 10.0 + i);
        gw_metric_observe(b, GW_M_REQUEST_DURATION, l2, 0.002 * (i + 1));
        gw_metric_add(b, GW_M_COLD_STARTS, ll, 2);
    }
    gw_metric_apply(a, NULL, 0);
    ck_assert_double_eq(gw_metric_get(a, GW_M_REQUESTS, l3), 3);
    ck_assert_double_eq(gw_metric_get(a, GW_M_LAST_INFERENCE, l2), 12);
    ck_assert_double_eq(gw_metric_get(a, GW_M_COLD_STARTS, ll), 6);
    gf_buf ta, tb;
    gf_buf_init(&ta);
    gf_buf_init(&tb);
    ck_assert_int_eq(gw_metrics_write(a, &ta), GF_OK);
    ck_assert_int_eq(gw_metrics_write(b, &tb), GF_OK);
    ck_assert_str_eq(ta.data, tb.data);
    ck_assert_ptr_nonnull(strstr(ta.data, "gpufaas_request_duration_seconds_count{function=\"fn\","
                                          "version=\"3\"} 3\n"));
    ck_assert_ptr_nonnull(strstr(ta.data, "gpufaas_request_duration_seconds_bucket{function=\"fn\","
                                          "version=\"3\",le=\"0.005\"} 2\n"));
    /* the version's series go (its last reference): a remembered lookup is
     * not used after that (ASan would see it), the next update makes them anew */
    gw_metrics_forget_version(a, "fn", "3");
    ck_assert_double_eq(gw_metric_get(a, GW_M_REQUESTS, l3), 0);
    const gw_metric_op again[] = {{GW_M_REQUESTS, l3, 1, &slots[0]}};
    gw_metric_apply(a, again, 1);
    gw_metric_apply(a, again, 1);
    ck_assert_double_eq(gw_metric_get(a, GW_M_REQUESTS, l3), 2);
    gw_metric_clear(a, GW_M_REQUESTS);
    gw_metric_apply(a, again, 1);
    ck_assert_double_eq(gw_metric_get(a, GW_M_REQUESTS, l3), 1);
    gf_buf_deinit(&ta);
    gf_buf_deinit(&tb);
    gw_metrics_free(a);
    gw_metrics_free(b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gateway_metrics_doc");
    TCase *tc = tcase_create("metrics_doc");
    tcase_add_test(tc, test_every_series_documented);
    tcase_add_test(tc, test_many_series);
    tcase_add_test(tc, test_apply_matches_single_calls);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
