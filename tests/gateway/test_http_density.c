/* End-to-end tests of issue 21's levers and SLO accounting, as a user meets
 * them: a real `gpufaas serve` with a cpu worker on a small device, driven
 * over HTTP (libcurl), read back with the `gpufaas` command and the sqlite3
 * tool.
 *
 *  - residency: a manifest's pin, PUT/DELETE /v1/functions/{name}/residency,
 *    the pin limit (409) on PUT and on deploy, what /v1/functions, `gpufaas
 *    ls` and SQLite's v_residency show, and the setting surviving a restart;
 *  - SLO: per function, requests that met it and the misses by cause in
 *    /metrics and v_function_slo; admission by predicted completion (503 +
 *    Retry-After, recorded as 'failed'). */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hhfixture.h"
#include "testutil.h"
#include "mlp.h"
#include "wharness.h"

static gf_hh_server srv;
static char *test_dir;

static void server_start(void)
{
    /* 16 pages of 64 KiB, 2 of them for pins; each function here is 1 page */
    const char *argv[] = {"--devices",   "cpu:1", "--device-memory", "1M",  "--page-size", "64K",
                          "--pin-limit", "128K",  "--host-memory",   "16M", NULL};
    gf_hf_start(&srv, argv, NULL, 60);
}

static void server_stop(void)
{
    gf_hh_thread_end();
    int st = gf_hh_server_stop(&srv, 30);
    if (st != 0)
        gf_hh_server_dump_log(&srv, 4000);
    ck_assert_msg(st == 0, "gpufaas serve exited with %d after SIGTERM", st);
}

static void setup(void)
{
    test_dir = gf_test_tmpdir();
    gf_hh_server_init(&srv, test_dir);
    server_start();
}

static void teardown(void)
{
    server_stop();
    gf_test_rmtree(test_dir);
    test_dir = NULL;
}

/* Deploy an mlp of one page named name, with more manifest members (a JSON
 * object's text, may be NULL); the HTTP status. */
static long deploy(const char *name, const char *extra, gf_hh_resp *r)
{
    gf_test_mlp m;
    int64_t dims[] = {16, 256, 16};
    gf_test_mlp_make(&m, 7, 2, dims, false, 4);
    char file[64];
    snprintf(file, sizeof file, "%s.safetensors", name);
    char *wp = gf_test_path(test_dir, file);
    gf_err e;
    ck_assert_msg(gf_test_mlp_write(&m, wp, GF_DT_F32, &e) == GF_OK, "%s", e.msg);
    char *text = gf_test_mlp_manifest(&m, name);
    json_t *j = json_loads(text, 0, NULL);
    json_object_del(j, "version");
    if (extra != NULL) {
        json_t *x = json_loads(extra, 0, NULL);
        ck_assert_ptr_nonnull(x);
        json_object_update(j, x);
        json_decref(x);
    }
    snprintf(file, sizeof file, "%s.json", name);
    char *mp = gf_test_path(test_dir, file);
    ck_assert_int_eq(json_dump_file(j, mp, 0), 0);
    long st = gf_hh_deploy(srv.url, mp, wp, NULL, r);
    json_decref(j);
    free(text);
    free(mp);
    free(wp);
    gf_test_mlp_free(&m);
    return st;
}

static void deploy_ok(const char *name, const char *extra)
{
    gf_hh_resp r;
    long st = deploy(name, extra, &r);
    ck_assert_msg(st == 201, "deploy %s: %ld %s", name, st, r.body.data);
    gf_hh_resp_free(&r);
}

static long http(const char *method, const char *path, const char *body, gf_hh_resp *r)
{
    return gf_hh_http(srv.url, method, path, NULL, body, body != NULL ? strlen(body) : 0, false,
                      r);
}

static json_t *get_json(const char *path)
{
    gf_hh_resp r;
    long st = http("GET", path, NULL, &r);
    ck_assert_msg(st == 200, "GET %s: %ld", path, st);
    json_t *j = json_loadb(r.body.data, r.body.len, 0, NULL);
    ck_assert_ptr_nonnull(j);
    gf_hh_resp_free(&r);
    return j;
}

static long invoke(const char *name, gf_hh_resp *r)
{
    char path[96];
    snprintf(path, sizeof path, "/v1/functions/%s/invoke", name);
    return http("POST", path,
                "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,16],"
                "\"data\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}]}",
                r);
}

/* Run the sqlite3 tool on the server's database; its output. */
static char *sql(const char *query)
{
    char db[600];
    snprintf(db, sizeof db, "%s/gpufaas.db", srv.state);
    char *argv[] = {"/usr/bin/sqlite3", "-cmd", ".timeout 5000", db, (char *)query, NULL};
    char *out = NULL, *err = NULL;
    int rc = gf_test_run_cmd(argv, &out, &err, 30);
    ck_assert_msg(rc == 0, "sqlite3 '%s': %d %s", query, rc, err != NULL ? err : "");
    free(err);
    return out;
}

/* Poll sqlite3 until query prints want (the store commits within ms). */
static void sql_until(const char *query, const char *want)
{
    char *out = NULL;
    for (int i = 0; i < 100; i++) {
        free(out);
        out = sql(query);
        if (out != NULL && strcmp(out, want) == 0)
            break;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_assert_msg(out != NULL && strcmp(out, want) == 0, "'%s' printed '%s', want '%s'", query,
                  out != NULL ? out : "(nothing)", want);
    free(out);
}

static const json_t *residency_of(const json_t *fn)
{
    const json_t *r = json_object_get(fn, "residency");
    ck_assert_ptr_nonnull(r);
    return r;
}

START_TEST(test_residency_api_ls_sqlite_restart)
{
    deploy_ok("a", "{\"residency\":{\"pin\":true}}");
    deploy_ok("b", NULL);
    deploy_ok("c", NULL);
    json_t *j = get_json("/v1/functions/a");
    ck_assert(json_is_true(json_object_get(residency_of(j), "pin")));
    ck_assert_str_eq(json_string_value(json_object_get(residency_of(j), "source")), "manifest");
    json_decref(j);

    gf_hh_resp r;
    long st = http("PUT", "/v1/functions/b/residency",
                   "{\"pin\": true, \"priority\": \"high\", \"keep_warm_s\": 1.5}", &r);
    ck_assert_msg(st == 200, "%ld %s", st, r.body.data);
    j = json_loadb(r.body.data, r.body.len, 0, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(j, "source")), "api");
    ck_assert(json_is_true(json_object_get(json_object_get(j, "residency"), "pin")));
    json_decref(j);
    gf_hh_resp_free(&r);
    /* a and b fill the pin limit: c's pin is refused, at run time and at deploy */
    char why[512];
    st = http("PUT", "/v1/functions/c/residency", "{\"pin\": true}", &r);
    ck_assert_int_eq(st, 409);
    ck_assert_msg(gf_hh_is_json_error(&r, "pin limit", why, sizeof why), "%s", why);
    gf_hh_resp_free(&r);
    st = deploy("d", "{\"residency\":{\"pin\":true}}", &r);
    ck_assert_int_eq(st, 409);
    ck_assert_msg(gf_hh_is_json_error(&r, "asks to be pinned", why, sizeof why), "%s", why);
    gf_hh_resp_free(&r);
    /* bad bodies and names */
    st = http("PUT", "/v1/functions/c/residency", "{\"sticky\": 1}", &r);
    ck_assert_int_eq(st, 400);
    ck_assert_msg(gf_hh_is_json_error(&r, "unknown member \"sticky\"", why, sizeof why), "%s",
                  why);
    gf_hh_resp_free(&r);
    st = http("PUT", "/v1/functions/c/residency", "{\"priority\": \"urgent\"", &r);
    ck_assert_int_eq(st, 400);
    gf_hh_resp_free(&r);
    st = http("PUT", "/v1/functions/nobody/residency", "{}", &r);
    ck_assert_int_eq(st, 404);
    gf_hh_resp_free(&r);
    st = http("PUT", "/v1/functions/c/residency", "{\"priority\": \"low\"}", &r);
    ck_assert_int_eq(st, 200);
    gf_hh_resp_free(&r);

    /* what an operator sees */
    char *argv[] = {(char *)gf_test_prog("GF_GPUFAAS"), "ls", "--server", srv.url, NULL};
    char *out = NULL;
    ck_assert_int_eq(gf_test_run_cmd(argv, &out, NULL, 30), 0);
    ck_assert_msg(strstr(out, "RESIDENCY") != NULL && strstr(out, "pin high warm:1.5s (api)") &&
                      strstr(out, "low (api)"),
                  "%s", out);
    free(out);
    sql_until("SELECT function, pin, priority, keep_warm_s, source FROM v_residency "
              "ORDER BY function",
              "a|1|normal|0|manifest\nb|1|high|1.5|api\nc|0|low|0.0|api\n");
    /* a pinned function is on the device */
    for (int i = 0; i < 200; i++) {
        j = get_json("/v1/functions/a");
        const json_t *pl = json_array_get(json_object_get(j, "placements"), 0);
        bool on = pl != NULL && strcmp(json_string_value(json_object_get(pl, "tier")), "device")
                                    == 0;
        json_decref(j);
        if (on)
            break;
        ck_assert_msg(i < 199, "pinned function a never reached the device");
        usleep(50000);
    }

    /* the run-time setting survives a restart; DELETE goes back to the manifest */
    server_stop();
    server_start();
    j = get_json("/v1/functions/b");
    ck_assert_str_eq(json_string_value(json_object_get(residency_of(j), "source")), "api");
    ck_assert_str_eq(json_string_value(json_object_get(residency_of(j), "priority")), "high");
    json_decref(j);
    st = http("DELETE", "/v1/functions/b/residency", NULL, &r);
    ck_assert_msg(st == 200, "%ld %s", st, r.body.data);
    gf_hh_resp_free(&r);
    j = get_json("/v1/functions/b");
    ck_assert_str_eq(json_string_value(json_object_get(residency_of(j), "source")), "manifest");
    ck_assert(!json_is_true(json_object_get(residency_of(j), "pin")));
    json_decref(j);
    st = http("PUT", "/v1/functions/c/residency", "{\"pin\": true}", &r); /* room again */
    ck_assert_int_eq(st, 200);
    gf_hh_resp_free(&r);
}
END_TEST

/* The value of one series in /metrics text, or -1. */
static double metric(const char *text, const char *series)
{
    const char *p = strstr(text, series);
    return p != NULL ? strtod(p + strlen(series), NULL) : -1;
}

START_TEST(test_slo_accounting_and_admission)
{
    deploy_ok("fast", "{\"slo_ms\": 60000}");  /* always met */
    deploy_ok("late", "{\"slo_ms\": 0.001}");  /* never met, served anyway */
    deploy_ok("shed", "{\"slo_ms\": 0.001, \"admission\": {\"max_predicted_slo\": 1}}");
    gf_hh_resp r;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(invoke("fast", &r), 200);
        gf_hh_resp_free(&r);
    }
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(invoke("late", &r), 200);
        gf_hh_resp_free(&r);
    }
    /* a request the client got wrong has no SLO to meet: counted, not as a miss */
    ck_assert_int_eq(http("POST", "/v1/functions/late/invoke", "{\"inputs\": 7}", &r), 400);
    gf_hh_resp_free(&r);
    /* no worker can answer in a microsecond: refused at once, told when to retry */
    ck_assert_int_eq(invoke("shed", &r), 503);
    ck_assert_str_eq(r.retry_after, "1");
    char why[512];
    ck_assert_msg(gf_hh_is_json_error(&r, "more than 1 times its 0.001 ms SLO", why, sizeof why),
                  "%s", why);
    gf_hh_resp_free(&r);

    ck_assert_int_eq(http("GET", "/metrics", NULL, &r), 200);
    const char *m = r.body.data;
    ck_assert_msg(metric(m, "gpufaas_slo_requests_total{function=\"fast\",version=\"1\",result=\"met\"} ") == 3,
                  "no 3 met for fast in /metrics");
    double late = 0;
    const char *causes[] = {"cold", "queue", "exec"};
    for (int i = 0; i < 3; i++) {
        char s[128];
        snprintf(s, sizeof s, "gpufaas_slo_requests_total{function=\"late\",version=\"1\",result=\"%s\"} ",
                 causes[i]);
        double v = metric(m, s);
        late += v > 0 ? v : 0;
    }
    ck_assert_msg(late == 2, "late: %g missed, want 2", late);
    ck_assert(metric(m, "gpufaas_slo_requests_total{function=\"late\",version=\"1\",result=\"met\"} ") < 0);
    ck_assert(metric(m, "gpufaas_slo_requests_total{function=\"shed\",version=\"1\",result=\"failed\"} ") == 1);
    ck_assert(metric(m, "gpufaas_requests_total{function=\"shed\",version=\"1\",code=\"503\"} ") == 1);
    gf_hh_resp_free(&r);

    sql_until("SELECT function, requests, with_slo, met, missed, missed_cold + missed_queue + "
              "missed_exec, missed_failed FROM v_function_slo ORDER BY function",
              "fast|3|3|3|0|0|0\nlate|3|2|0|2|2|0\nshed|1|1|0|1|0|1\n");
    char *out = sql("SELECT status, http_code, slo_us, slo FROM invocations "
                    "WHERE function = 'shed'");
    ck_assert_str_eq(out, "GF_ERR_OVERLOADED|503|1|failed\n");
    free(out);
    /* a cold miss is blamed on the swap-in unless it mostly queued */
    out = sql("SELECT COUNT(*) FROM invocations WHERE function = 'late' AND cold = 1 "
              "AND slo NOT IN ('cold', 'queue')");
    ck_assert_str_eq(out, "0\n");
    free(out);
}
END_TEST

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    Suite *s = suite_create("http_density");
    TCase *tc = tcase_create("density");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_residency_api_ls_sqlite_restart);
    tcase_add_test(tc, test_slo_accounting_and_admission);
    suite_add_tcase(s, tc);
    int rc = gf_test_run_suite(s);
    curl_global_cleanup();
    return rc;
}
