/* Versions a user manages, over real HTTP against a real `gpufaas serve`:
 * numbering, the 409s and what they say, an identical redeploy, activate,
 * delete a version, interface changes, delete and redeploy a name; and a
 * restart that reads no weights file: orphans removed, a tampered file
 * caught by the background check and by fsck, a replaced file caught at
 * start; deleted versions that leave nothing in the registry or /metrics.
 * The SQLite file is read as an operator reads it. */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "statelib.h"
#include "testutil.h"

static void setup(void) { sl_setup(); }
static void teardown(void) { sl_teardown(); }

#define HAS(s, want) ck_assert_msg(strstr((s), (want)) != NULL, "no '%s' in: %s", (want), (s))

/* The versions and the current one, as GET /v1/functions/NAME lists them:
 * "1,2 current 2" ("" when the function is not found). */
static void versions_of(const char *name, char *buf, size_t cap)
{
    char path[96];
    snprintf(path, sizeof path, "/v1/functions/%s", name);
    json_t *j = NULL;
    buf[0] = '\0';
    if (sl_call("GET", path, NULL, &j) != 200) {
        json_decref(j);
        return;
    }
    size_t off = 0;
    json_t *vs = json_object_get(j, "versions");
    for (size_t i = 0; i < json_array_size(vs); i++)
        off += (size_t)snprintf(buf + off, cap - off, "%s%lld", i ? "," : "",
                                (long long)json_integer_value(
                                    json_object_get(json_array_get(vs, i), "version")));
    snprintf(buf + off, cap - off, " current %lld",
             (long long)json_integer_value(json_object_get(j, "version")));
    json_decref(j);
}

/* There are arg invocation rows ("4"). */
static bool rows_are(void *arg)
{
    sqlite3 *db = sl_db();
    bool ok = sl_q_int(db, "SELECT count(*) FROM invocations") == atoll(arg);
    sqlite3_close(db);
    return ok;
}

START_TEST(test_versions_lifecycle)
{
    const char *args[] = {"--devices", "cpu:1", NULL};
    sl_start(args);
    sl_model a, b, c, wide;
    sl_model_make(&a, "f", 1, 11, 0, NULL);
    sl_model_make(&b, "f", 2, 22, 0, NULL);
    sl_model_make(&c, "f", 3, 33, 0, "\"version\": 2");
    sl_model_make(&wide, "f", 4, 44, 12, NULL); /* 12 inputs instead of 8 */
    int64_t v = 0, served = 0;
    char *body = NULL, vs[128];

    ck_assert_int_eq(sl_deploy(&a, NULL, &v, NULL), 201);
    ck_assert_int_eq(v, 1);
    ck_assert_int_eq(sl_deploy(&b, NULL, &v, NULL), 201);
    ck_assert_int_eq(v, 2);
    /* the same upload again: idempotent, nothing new */
    ck_assert_int_eq(sl_deploy(&b, NULL, &v, &body), 200);
    ck_assert_int_eq(v, 2);
    HAS(body, "\"created\":false");
    free(body);
    versions_of("f", vs, sizeof vs);
    ck_assert_str_eq(vs, "1,2 current 2");
    /* version 1's upload again: version 1 is served again */
    ck_assert_int_eq(sl_deploy(&a, NULL, &v, NULL), 200);
    ck_assert_int_eq(v, 1);
    ck_assert_int_eq(sl_invoke("f", 0, NULL, &served), 200);
    ck_assert_int_eq(served, 1);
    /* a version that exists, with other weights: 409 saying what to do */
    ck_assert_int_eq(sl_deploy(&c, NULL, NULL, &body), 409);
    HAS(body, "already has version 2");
    HAS(body, "version 3");
    free(body);
    /* activate: roll forward and back */
    json_t *j = NULL;
    ck_assert_int_eq(sl_call("POST", "/v1/functions/f/versions/2/activate", NULL, &j), 200);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "version")), 2);
    json_decref(j);
    ck_assert_int_eq(sl_invoke("f", 0, NULL, &served), 200);
    ck_assert_int_eq(served, 2);
    ck_assert_int_eq(sl_call("POST", "/v1/functions/f/versions/9/activate", NULL, &j), 404);
    HAS(json_string_value(json_object_get(j, "error")), "its versions: 1, 2");
    json_decref(j);
    /* delete a version: not the current one while others live */
    ck_assert_int_eq(sl_call("DELETE", "/v1/functions/f/versions/2", NULL, &j), 409);
    HAS(json_string_value(json_object_get(j, "error")), "activate another one first");
    json_decref(j);
    char *v1 = gf_test_path(sl_srv.state, "functions/f/v1.safetensors");
    ck_assert_int_eq(access(v1, F_OK), 0);
    ck_assert_int_eq(sl_call("DELETE", "/v1/functions/f/versions/1", NULL, NULL), 200);
    ck_assert_int_ne(access(v1, F_OK), 0);
    ck_assert_int_eq(sl_invoke("f", 1, NULL, NULL), 404);
    versions_of("f", vs, sizeof vs);
    ck_assert_str_eq(vs, "2 current 2");
    /* an interface change is refused unless the deploy says it means it */
    ck_assert_int_eq(sl_deploy(&wide, NULL, NULL, &body), 409);
    HAS(body, "input 'x': FP32 [-1,8] -> FP32 [-1,12]");
    HAS(body, "interface_change=allow");
    free(body);
    ck_assert_int_eq(sl_deploy(&wide, "interface_change=yes", NULL, &body), 400);
    free(body);
    ck_assert_int_eq(sl_deploy(&wide, "interface_change=allow", &v, NULL), 201);
    ck_assert_int_eq(v, 3);
    /* delete the function: the name is free, the numbers continue */
    ck_assert_int_eq(sl_call("DELETE", "/v1/functions/f", NULL, NULL), 200);
    ck_assert_int_eq(sl_call("GET", "/v1/functions/f", NULL, NULL), 404);
    ck_assert_int_eq(sl_deploy(&a, NULL, &v, NULL), 201);
    ck_assert_int_eq(v, 4);
    ck_assert_int_eq(sl_invoke("f", 0, NULL, &served), 200);
    ck_assert_int_eq(served, 4);
    /* the history stays, every row under a number of its own (the last row
     * is committed within a group commit) */
    sqlite3 *db = sl_db();
    ck_assert(sl_eventually(rows_are, "4", 5000));
    char *rows = sl_q_rows(db, "SELECT version, state FROM function_versions"
                               " WHERE function = 'f' ORDER BY version");
    ck_assert_str_eq(rows, "1|deleted\n2|deleted\n3|deleted\n4|ready\n");
    free(rows);
    rows = sl_q_rows(db, "SELECT version, http_code, count(*) FROM invocations"
                         " WHERE function = 'f' GROUP BY version, http_code ORDER BY 1, 2");
    ck_assert_str_eq(rows, "1|200|1\n1|404|1\n2|200|1\n4|200|1\n");
    free(rows);
    sqlite3_close(db);
    /* and a restart keeps all of it */
    ck_assert_int_eq(gf_hh_server_stop(&sl_srv, 30), 0);
    sl_start(args);
    versions_of("f", vs, sizeof vs);
    ck_assert_str_eq(vs, "4 current 4");
    ck_assert_int_eq(sl_deploy(&b, NULL, &v, NULL), 201);
    ck_assert_int_eq(v, 5);
    free(v1);
    sl_model_free(&a);
    sl_model_free(&b);
    sl_model_free(&c);
    sl_model_free(&wide);
}
END_TEST

/* ---- a restart in O(functions) ------------------------------------------------------ */

static char *state_path(const char *rel)
{
    return gf_test_path(sl_srv.state, rel);
}

static void plant(const char *rel, const char *text)
{
    char *p = state_path(rel);
    char *slash = strrchr(p, '/');
    *slash = '\0';
    mkdir(p, 0755);
    *slash = '/';
    gf_test_write_file(p, text, strlen(text));
    free(p);
}

static bool exists(const char *rel)
{
    char *p = state_path(rel);
    bool e = access(p, F_OK) == 0;
    free(p);
    return e;
}

static bool is_broken(void *arg)
{
    char path[96];
    snprintf(path, sizeof path, "/v1/functions/%s", (const char *)arg);
    json_t *j = sl_get(path);
    const char *st = json_string_value(json_object_get(j, "state"));
    bool broken = st != NULL && strcmp(st, "broken") == 0;
    json_decref(j);
    return broken;
}

START_TEST(test_restart_reads_no_weights)
{
    const char *args[] = {"--devices", "cpu:1", NULL};
    sl_start(args);
    sl_model good, tampered, replaced;
    sl_model_make(&good, "good", 1, 1, 0, NULL);
    sl_model_make(&tampered, "tampered", 1, 2, 0, NULL);
    sl_model_make(&replaced, "replaced", 1, 3, 0, NULL);
    ck_assert_int_eq(sl_deploy(&good, NULL, NULL, NULL), 201);
    ck_assert_int_eq(sl_deploy(&tampered, NULL, NULL, NULL), 201);
    ck_assert_int_eq(sl_deploy(&replaced, NULL, NULL, NULL), 201);
    ck_assert_int_eq(gf_hh_server_stop(&sl_srv, 30), 0);

    /* orphans: files no version owns, under functions/ and derived/ */
    plant("functions/good/v9.safetensors", "stale");
    plant("functions/good/notes.txt", "stray");
    plant("functions/ghost/v1.safetensors", "a function SQLite never saw");
    plant("derived/ghost@1.safetensors", "derived from nothing");
    plant("derived/good@1.safetensors", "good's derived file, kept");
    /* tampered: one byte changed in place, its size and mtime as published */
    char *tp = state_path("functions/tampered/v1.safetensors");
    struct stat sb;
    ck_assert_int_eq(stat(tp, &sb), 0);
    int fd = open(tp, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, "\x7f", 1, sb.st_size - 3), 1);
    close(fd);
    struct timespec times[2] = {sb.st_atim, sb.st_mtim};
    ck_assert_int_eq(utimensat(AT_FDCWD, tp, times, 0), 0);
    /* replaced: the same size, other bytes, a new file */
    char *rp = state_path("functions/replaced/v1.safetensors");
    size_t n;
    char *data = gf_test_read_file(rp, &n);
    data[n - 2] ^= 0x40;
    unlink(rp);
    gf_test_write_file(rp, data, n);
    free(data);

    sl_start(args);
    char *log = gf_test_read_file(sl_srv.log, &n);
    /* one file was read at start: the one whose identity changed */
    HAS(log, "restored 3 function version(s) from the store");
    HAS(log, "2 ready, 1 broken; 1 weights file(s) read because they had changed");
    HAS(log, "removed 4 file(s) under functions/ and derived/ that no version owns");
    free(log);
    ck_assert(!exists("functions/good/v9.safetensors"));
    ck_assert(!exists("functions/good/notes.txt"));
    ck_assert(!exists("functions/ghost"));
    ck_assert(!exists("derived/ghost@1.safetensors"));
    ck_assert(exists("derived/good@1.safetensors"));
    ck_assert(exists("functions/good/v1.safetensors"));
    ck_assert(is_broken("replaced"));
    ck_assert_int_eq(sl_invoke("replaced", 0, NULL, NULL), 503);
    ck_assert_int_eq(sl_invoke("good", 0, NULL, NULL), 200);
    /* the background check finds the tampered file soon after */
    ck_assert_msg(sl_eventually(is_broken, "tampered", 20000), "the tampered file is served");
    ck_assert_int_eq(sl_invoke("tampered", 0, NULL, NULL), 503);
    /* fsck reports both, and marks nothing good broken */
    json_t *r = NULL;
    ck_assert_int_eq(sl_call("POST", "/v1/fsck", NULL, &r), 200);
    ck_assert_int_eq(json_integer_value(json_object_get(r, "checked")), 3);
    ck_assert_uint_eq(json_array_size(json_object_get(r, "broken")), 2);
    ck_assert_uint_eq(json_array_size(json_object_get(r, "ok")), 1);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_array_get(json_object_get(r, "ok"), 0), "function")),
        "good");
    json_decref(r);
    sqlite3 *db = sl_db();
    char *rows = sl_q_rows(db, "SELECT function, state, state_reason LIKE '%sha256%'"
                               " FROM function_versions ORDER BY function");
    ck_assert_str_eq(rows, "good|ready|\nreplaced|broken|1\ntampered|broken|1\n");
    free(rows);
    ck_assert_int_eq(sl_q_int(db, "SELECT checked_at IS NOT NULL FROM function_versions"
                                  " WHERE function = 'good'"),
                     1);
    sqlite3_close(db);
    /* a deleted version's derived file goes with it */
    ck_assert_int_eq(sl_call("DELETE", "/v1/functions/good", NULL, NULL), 200);
    ck_assert(!exists("derived/good@1.safetensors"));
    ck_assert(!exists("functions/good"));
    /* the metrics say how many versions are broken */
    gf_hh_resp m;
    ck_assert_int_eq(gf_hh_http(sl_srv.url, "GET", "/metrics", NULL, NULL, 0, false, &m), 200);
    ck_assert(sl_metric(m.body.data, "gpufaas_function_versions", "state=\"broken\"") == 2);
    gf_hh_resp_free(&m);
    free(tp);
    free(rp);
    sl_model_free(&good);
    sl_model_free(&tampered);
    sl_model_free(&replaced);
}
END_TEST

/* The same through the command line: what each command prints and its exit
 * status. */
START_TEST(test_cli_versions)
{
    const char *args[] = {"--devices", "cpu:1", NULL};
    sl_start(args);
    sl_model a, b, wide;
    sl_model_make(&a, "g", 1, 5, 0, NULL);
    sl_model_make(&b, "g", 2, 6, 0, NULL);
    sl_model_make(&wide, "g", 3, 7, 10, NULL);
    char *out = NULL;
    const char *d1[] = {"deploy", "g", "--weights", a.weights, "--manifest", a.manifest, "-q", NULL};
    ck_assert_int_eq(sl_cli(&out, d1), 0);
    HAS(out, "deployed g version 1");
    free(out);
    ck_assert_int_eq(sl_cli(&out, d1), 0);
    HAS(out, "g version 1 already has these weights and this manifest: no new version");
    free(out);
    const char *d2[] = {"deploy", "g", "--weights", b.weights, "--manifest", b.manifest, "-q", NULL};
    ck_assert_int_eq(sl_cli(&out, d2), 0);
    HAS(out, "deployed g version 2");
    free(out);
    const char *d3[] = {"deploy",   "g",           "--weights", wide.weights,
                        "--manifest", wide.manifest, "-q",        NULL};
    ck_assert_int_eq(sl_cli(&out, d3), 1); /* the interface changes */
    free(out);
    const char *d3a[] = {"deploy", "g", "--weights", wide.weights, "--manifest", wide.manifest,
                         "-q", "--allow-interface-change", NULL};
    ck_assert_int_eq(sl_cli(&out, d3a), 0);
    HAS(out, "deployed g version 3");
    free(out);
    const char *act[] = {"activate", "g", "1", NULL};
    ck_assert_int_eq(sl_cli(&out, act), 0);
    HAS(out, "g version 1 is current (versions: 1, 2, 3)");
    free(out);
    const char *act_bad[] = {"activate", "g", "x", NULL};
    ck_assert_int_eq(sl_cli(&out, act_bad), 2);
    free(out);
    const char *rm_cur[] = {"rm", "g", "--version", "1", NULL};
    ck_assert_msg(sl_cli(&out, rm_cur) == 1, "%s", out); /* the current one */
    free(out);
    const char *rm2[] = {"rm", "g", "--version", "2", NULL};
    ck_assert_int_eq(sl_cli(&out, rm2), 0);
    HAS(out, "deleted g version 2");
    free(out);
    const char *rm_two[] = {"rm", "g", "h", "--version", "2", NULL};
    ck_assert_int_eq(sl_cli(&out, rm_two), 2);
    free(out);
    const char *fsck[] = {"fsck", NULL};
    ck_assert_int_eq(sl_cli(&out, fsck), 0);
    HAS(out, "checked 2 version(s)");
    HAS(out, "0 broken");
    free(out);
    /* a damaged file: fsck says which and exits 1 */
    char *v3 = gf_test_path(sl_srv.state, "functions/g/v3.safetensors");
    size_t n;
    char *data = gf_test_read_file(v3, &n);
    data[n - 1] ^= 1;
    gf_test_write_file(v3, data, n);
    free(data);
    free(v3);
    ck_assert_int_eq(sl_cli(&out, fsck), 1);
    HAS(out, "1 broken");
    HAS(out, "broken: g version 3: weights file");
    free(out);
    sl_model_free(&a);
    sl_model_free(&b);
    sl_model_free(&wide);
}
END_TEST

/* ---- deleted versions leave nothing behind --------------------------------------------- */

/* Samples in the text (lines that are not comments), and of them those whose
 * labels contain `has` (NULL: every sample). */
static size_t samples(const char *text, const char *has)
{
    size_t n = 0;
    for (const char *p = text; *p != '\0';) {
        const char *e = strchr(p, '\n');
        size_t len = e != NULL ? (size_t)(e - p) : strlen(p);
        if (len > 0 && p[0] != '#') {
            bool match = has == NULL;
            for (size_t i = 0; !match && i + strlen(has) <= len; i++)
                match = strncmp(p + i, has, strlen(has)) == 0;
            n += match;
        }
        p += len + (e != NULL);
    }
    return n;
}

static double deleted_held(const char *text)
{
    return sl_metric(text, "gpufaas_function_versions", "state=\"deleted\"");
}

static bool none_deleted_held(void *arg)
{
    (void)arg;
    char *t = sl_metrics();
    bool none = deleted_held(t) == 0;
    free(t);
    return none;
}

typedef struct held_arg {
    long status;
} held_arg;

/* Invoke slow until it is let in (a probe of one_held may hold the one
 * place for a moment): then it waits its ten seconds in the queue. */
static void *invoke_slow(void *p)
{
    long st;
    while ((st = sl_invoke("slow", 0, NULL, NULL)) == 429)
        usleep(50 * 1000);
    ((held_arg *)p)->status = st;
    gf_hh_thread_end();
    return NULL;
}

/* Another request is held: f's is refused by the total queue limit of 1,
 * twice 200 ms apart (not a refused try of slow's, which holds the place
 * for microseconds). */
static bool one_held(void *arg)
{
    (void)arg;
    if (sl_invoke("f", 0, NULL, NULL) != 429)
        return false;
    usleep(200 * 1000);
    return sl_invoke("f", 0, NULL, NULL) == 429;
}

/* Deploying and deleting many versions (one at a time and the whole
 * function) leaves the registry and /metrics as they were: a deleted
 * version's series go once nothing holds it, and a request that holds a
 * deleted version keeps it (counted as deleted in /metrics) until it is
 * answered. The ASan build's LeakSanitizer checks the server's exit. */
START_TEST(test_deleted_versions_leave_nothing)
{
    const char *args[] = {"--devices", "cpu:1", "--queue-limit-total", "1", NULL};
    sl_start(args);
    sl_model f, c1, c2, slow;
    sl_model_make(&f, "f", 1, 1, 0, NULL);
    sl_model_make(&c1, "churn", 1, 2, 0, NULL);
    sl_model_make(&c2, "churn", 2, 3, 0, NULL);
    ck_assert_int_eq(sl_deploy(&f, NULL, NULL, NULL), 201);
    ck_assert_int_eq(sl_invoke("f", 0, NULL, NULL), 200);
    size_t base = 0;
    int64_t v1, v2;
    for (int round = 0; round < 12; round++) {
        ck_assert_int_eq(sl_deploy(&c1, NULL, &v1, NULL), 201);
        ck_assert_int_eq(sl_invoke("churn", 0, NULL, NULL), 200);
        ck_assert_int_eq(sl_deploy(&c2, NULL, &v2, NULL), 201);
        ck_assert_int_eq(v2, v1 + 1);
        ck_assert_int_eq(sl_invoke("churn", v2, NULL, NULL), 200);
        char *t = sl_metrics();
        char want[96];
        snprintf(want, sizeof want, "function=\"churn\",version=\"%lld\",code=\"200\"",
                 (long long)v1);
        ck_assert_double_eq(sl_metric(t, "gpufaas_requests_total", want), 1);
        free(t);
        /* the old version, then the function */
        char path[96];
        snprintf(path, sizeof path, "/v1/functions/churn/versions/%lld", (long long)v1);
        ck_assert_int_eq(sl_call("DELETE", path, NULL, NULL), 200);
        t = sl_metrics();
        snprintf(want, sizeof want, "function=\"churn\",version=\"%lld\"", (long long)v1);
        ck_assert_uint_eq(samples(t, want), 0);
        snprintf(want, sizeof want, "function=\"churn\",version=\"%lld\"", (long long)v2);
        ck_assert_uint_gt(samples(t, want), 0);
        free(t);
        ck_assert_int_eq(sl_call("DELETE", "/v1/functions/churn", NULL, NULL), 200);
        /* the last request's hold on v2 may outlive its reply by a moment */
        ck_assert_msg(sl_eventually(none_deleted_held, NULL, 10000),
                      "round %d: a deleted version is still held", round);
        t = sl_metrics();
        ck_assert_uint_eq(samples(t, "function=\"churn\""), 0);
        ck_assert_double_eq(deleted_held(t), 0);
        ck_assert_double_eq(sl_metric(t, "gpufaas_function_versions", "state=\"ready\""), 1);
        /* every per-function series left is f's (or the unnamed one's) */
        ck_assert_uint_eq(samples(t, "function=\""),
                          samples(t, "function=\"f\"") + samples(t, "function=\"\""));
        if (round == 0)
            base = samples(t, "function=\"");
        ck_assert_uint_eq(samples(t, "function=\""), base);
        free(t);
    }
    /* a request holding a version that is deleted keeps it until answered */
    sl_model_make(&slow, "slow", 1, 4, 0, "\"max_queue_delay_us\": 10000000");
    ck_assert_int_eq(sl_deploy(&slow, NULL, NULL, NULL), 201);
    pthread_t th;
    held_arg ha = {0};
    pthread_create(&th, NULL, invoke_slow, &ha);
    ck_assert(sl_eventually(one_held, NULL, 20000));
    ck_assert_int_eq(sl_call("DELETE", "/v1/functions/slow", NULL, NULL), 200);
    char *t = sl_metrics();
    ck_assert_double_eq(deleted_held(t), 1);
    free(t);
    pthread_join(th, NULL);
    ck_assert_int_eq(ha.status, 404); /* its function is gone */
    /* the request lets go of the version when its connection is done with
     * the reply, which may be just after the client has read it */
    ck_assert_msg(sl_eventually(none_deleted_held, NULL, 10000),
                  "a deleted version is still held after its last request was answered");
    t = sl_metrics();
    ck_assert_double_eq(deleted_held(t), 0);
    ck_assert_uint_eq(samples(t, "function=\"slow\""), 0);
    free(t);
    sl_model_free(&f);
    sl_model_free(&c1);
    sl_model_free(&c2);
    sl_model_free(&slow);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http_versions");
    TCase *tc = tcase_create("versions");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_versions_lifecycle);
    tcase_add_test(tc, test_restart_reads_no_weights);
    tcase_add_test(tc, test_cli_versions);
    tcase_add_test(tc, test_deleted_versions_leave_nothing);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
