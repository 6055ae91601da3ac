/* `gpufaas serve`'s flags end to end: each bad value refused with a message
 * naming the flag (exit 2), the environment variables beneath the command
 * line, and the failures a second server meets (a taken port, a state
 * directory in use). A real `gpufaas serve` with cpu workers on loopback. */
#include <check.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hhfixture.h"
#include "testutil.h"

#define TOKEN "s3cret-token"

static gf_hh_server srv;
static char *test_dir; /* temporary directory: state (var), serve.log */

/* Start gpufaas serve with 2 cpu workers and the extra arguments
 * (NULL-terminated); returns when it prints where it listens. */
static void server_start_args(const char *const *extra)
{
    gf_hf_start(&srv, gf_hf_cpu2, extra, 60);
}

static void setup(void)
{
    gf_hf_setup(&srv, &test_dir);
}

static void teardown(void)
{
    gf_hf_teardown(&srv, &test_dir);
}

typedef gf_hh_resp resp;

static void resp_free(resp *r)
{
    gf_hh_resp_free(r);
}

static long http(const char *method, const char *path, const char *body, resp *r)
{
    return gf_hh_http(srv.url, method, path, NULL, body, body != NULL ? strlen(body) : 0, false,
                      r);
}

/* An error answer: the status, {"error": "..."} containing want. */
static void expect_error(long got, resp *r, long want_status, const char *want)
{
    ck_assert_msg(got == want_status, "status %ld, want %ld: %s", got, want_status,
                  r->body.data != NULL ? r->body.data : "");
    char why[512];
    ck_assert_msg(gf_hh_is_json_error(r, want, why, sizeof why), "%s", why);
}

/* Flags and their environment variables; the flag wins. */
START_TEST(test_serve_flags)
{
    const char *g = gf_test_prog("GF_GPUFAAS");
    struct {
        const char *arg1, *arg2;
        const char *want;
    } bad[] = {
        {"--policy", "foo", "--policy: expected lru, gds or gdsf"},
        {"--replicate", "maybe", "--replicate: expected auto, on or off"},
        {"--schedule", "lifo", "--schedule: expected deadline, ready-first or fifo"},
        {"--pin-limit", "lots", "--pin-limit: 'lots' is not a size"},
        {"--page-size", "1K", "--page-size: between 4K and 1G"},
        {"--cpu-copy-bandwidth", "fast", "--cpu-copy-bandwidth: 'fast' is not a size"},
        {"--max-body", "12Q", "--max-body: '12Q' is not a size"},
        {"--device-memory", "1.5G", "--device-memory: '1.5G' is not a size"},
        {"--queue-limit", "0", "--queue-limit: expected an integer"},
        {"--log-level", "loud", "--log-level: expected error"},
        {"--bogus", NULL, "unknown option '--bogus'"},
        {"--listen", NULL, "--listen: needs a value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {(char *)g, "serve", (char *)bad[i].arg1, (char *)bad[i].arg2, NULL};
        char *out, *err;
        ck_assert_int_eq(gf_test_run_cmd(argv, &out, &err, 30), 2);
        ck_assert_msg(strstr(err, bad[i].want) != NULL, "'%s' lacks '%s'", err, bad[i].want);
        free(out), free(err);
    }
    /* a bad address is reported, exit 1 */
    char *argv2[] = {
        (char *)g, "serve",     "--listen", "256.1.1.1:80", "--state-dir",
        srv.state, "--devices", "cpu:1",    "--worker",     (char *)gf_test_prog("GF_WORKER"),
        NULL};
    char *out, *err;
    ck_assert_int_eq(gf_test_run_cmd(argv2, &out, &err, 60), 1);
    ck_assert_msg(strstr(err, "--listen '256.1.1.1:80'") != NULL, "%s", err);
    free(out), free(err);

    /* the environment sets what the command line does not; the command line wins */
    setenv("GPUFAAS_POLICY", "bogus", 1);
    char *argv3[] = {(char *)g, "serve", NULL};
    ck_assert_int_eq(gf_test_run_cmd(argv3, &out, &err, 30), 2);
    ck_assert_msg(strstr(err, "--policy: expected lru, gds or gdsf") != NULL, "%s", err);
    free(out), free(err);
    setenv("GPUFAAS_ADMIN_TOKEN", TOKEN, 1);
    const char *extra[] = {"--policy", "gds", NULL};
    server_start_args(extra);
    unsetenv("GPUFAAS_POLICY");
    unsetenv("GPUFAAS_ADMIN_TOKEN");
    resp r;
    expect_error(http("DELETE", "/v1/functions/x", NULL, &r), &r, 401, "admin token");
    resp_free(&r);

    /* the same port twice: a clear failure */
    char port[128];
    snprintf(port, sizeof port, "%s", strrchr(srv.url, '/') + 1);
    char other_state[600];
    snprintf(other_state, sizeof other_state, "%s-other", srv.state);
    char *argv4[] = {
        (char *)g,   "serve",     "--listen", port,       "--state-dir",
        other_state, "--devices", "cpu:1",    "--worker", (char *)gf_test_prog("GF_WORKER"),
        NULL};
    int rc = gf_test_run_cmd(argv4, &out, &err, 60);
    ck_assert_msg(rc == 1 && strstr(err, "cannot listen on") != NULL, "rc %d: %s", rc, err);
    free(out), free(err);

    /* the same state directory twice: refused, naming the running server */
    char *argv5[] = {
        (char *)g, "serve",     "--listen", "127.0.0.1:0", "--state-dir",
        srv.state, "--devices", "cpu:1",    "--worker",    (char *)gf_test_prog("GF_WORKER"),
        NULL};
    rc = gf_test_run_cmd(argv5, &out, &err, 60);
    ck_assert_msg(rc == 1 && strstr(err, "is in use by another gpufaas serve") != NULL,
                  "rc %d: %s", rc, err);
    free(out), free(err);
}
END_TEST

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    Suite *s = suite_create("http_serve_flags");
    TCase *tc = tcase_create("serve_flags");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_serve_flags);
    suite_add_tcase(s, tc);
    int rc = gf_test_run_suite(s);
    curl_global_cleanup();
    return rc;
}
