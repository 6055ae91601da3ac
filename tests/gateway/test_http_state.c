/* The truth in SQLite and in /metrics, over real HTTP against a real
 * `gpufaas serve` with cpu workers:
 *   - every answered inference request is one invocations row, the ones
 *     refused before any work included (400 a bad body or an unknown
 *     output, 404, 413, 429, 503), with its reason; requests that are not
 *     inferences (metadata, repository calls, deploys) are in neither; the
 *     front's refusals for held memory and time (503 --body-memory, for a
 *     body as sent and as inflated, 408 a body trickling past
 *     --request-timeout) and the core's 504 at a request's deadline too;
 *   - after a mixed run (several functions and versions through a device
 *     that holds two models, warm and cold, refusals, a worker killed and
 *     restarted) GET /v1/placements, SQLite's placements and v_placement,
 *     /metrics, the workers table, and `gpufaas ps --json` and
 *     `gpufaas top --once --json` agree on every figure they share. */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include "statelib.h"
#include "testutil.h"

static void setup(void) { sl_setup(); }
static void teardown(void) { sl_teardown(); }

/* ---- refusals ---------------------------------------------------------------------- */

typedef struct slow_arg {
    long status;
} slow_arg;

static void *slow_invoke(void *p)
{
    slow_arg *a = p;
    a->status = sl_invoke("slow", 0, NULL, NULL);
    gf_hh_thread_end();
    return NULL;
}

/* n invocation rows are committed */
static bool rows_are(void *arg)
{
    sqlite3 *db = sl_db();
    bool ok = sl_q_int(db, "SELECT count(*) FROM invocations") == *(int64_t *)arg;
    sqlite3_close(db);
    return ok;
}

/* The server with args, f and slow (whose manifest adds slow_extra) deployed. */
static void start_f_and_slow(const char *const *args, sl_model *f, sl_model *slow,
                             const char *slow_extra)
{
    sl_start(args);
    sl_model_make(f, "f", 1, 1, 0, NULL);
    sl_model_make(slow, "slow", 1, 2, 0, slow_extra);
    ck_assert_int_eq(sl_deploy(f, NULL, NULL, NULL), 201);
    ck_assert_int_eq(sl_deploy(slow, NULL, NULL, NULL), 201);
}

START_TEST(test_refusals_recorded)
{
    const char *args[] = {"--devices", "cpu:1", "--max-body", "4K", "--queue-limit", "1", NULL};
    sl_model f, slow;
    /* batches of 8 wait a second for batch-mates: a second waiting request
     * finds the queue (limit 1) full */
    start_f_and_slow(args, &f, &slow, "\"max_queue_delay_us\": 1000000");
    int64_t n = 0;
    /* answered: 200 */
    ck_assert_int_eq(sl_invoke("f", 0, NULL, NULL), 200);
    n++;
    /* refused before any work */
    ck_assert_int_eq(sl_call("POST", "/v2/models/f/infer", "{\"inputs\": [", NULL), 400);
    n++;
    ck_assert_int_eq(sl_invoke("f", 0, "\"outputs\": [{\"name\": \"nope\"}]", NULL), 400);
    n++;
    ck_assert_int_eq(sl_invoke("nope", 0, NULL, NULL), 404);
    n++;
    ck_assert_int_eq(sl_invoke("f", 7, NULL, NULL), 404);
    n++;
    ck_assert_int_eq(sl_call("POST", "/v2/models/Bad!/infer", "{}", NULL), 400);
    n++;
    char big[6000];
    memset(big, ' ', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ck_assert_int_eq(sl_call("POST", "/v1/functions/f/invoke", big, NULL), 413);
    n++;
    pthread_t th[2];
    slow_arg sa[2];
    pthread_create(&th[0], NULL, slow_invoke, &sa[0]);
    usleep(200 * 1000); /* the first waits in the queue for a second */
    pthread_create(&th[1], NULL, slow_invoke, &sa[1]);
    pthread_join(th[0], NULL);
    pthread_join(th[1], NULL);
    ck_assert_int_eq(sa[0].status, 200);
    ck_assert_int_eq(sa[1].status, 429);
    n += 2;
    /* not inferences: counted nowhere */
    ck_assert_int_eq(sl_call("GET", "/v1/functions/nope", NULL, NULL), 404);
    ck_assert_int_eq(sl_call("GET", "/v2/models/nope", NULL, NULL), 404);
    ck_assert_int_eq(sl_call("POST", "/v2/repository/models/nope/load", NULL, NULL), 404);
    ck_assert_int_eq(sl_call("GET", "/v2/models/f/versions/3/ready", NULL, NULL), 400);
    ck_assert(sl_eventually(rows_are, &n, 5000));

    sqlite3 *db = sl_db();
    char *rows = sl_q_rows(db, "SELECT function, version, http_code, status, worker_id IS NULL,"
                               " reason FROM invocations ORDER BY id");
    ck_assert_str_eq(rows,
                     "f|1|200|GF_OK|0|\n"
                     "f|1|400|GF_ERR_INVALID|1|each entry of \"inputs\" must be an object\n"
                     "f|1|400|GF_ERR_INVALID|1|unknown output 'nope' requested (function 'f' "
                     "has y)\n"
                     "nope|0|404|GF_ERR_NOT_FOUND|1|function 'nope' not found\n"
                     "f|7|404|GF_ERR_NOT_FOUND|1|function 'f' has no version 7\n"
                     "|0|400|GF_ERR_INVALID|1|invalid function name 'Bad!' (lowercase letters, "
                     "digits, '_', '.', '-'; starting with a letter or digit; at most 63 "
                     "characters)\n"
                     "f|1|413|GF_ERR_TOO_LARGE|1|request body of 5999 bytes is larger than the "
                     "limit of 4096 bytes (--max-body)\n"
                     "slow|1|429|GF_ERR_BUSY|1|function 'slow' holds 1 requests (queued, in "
                     "flight or being sent to a worker), its limit (--queue-limit): try again "
                     "shortly\n"
                     "slow|1|200|GF_OK|0|\n");
    free(rows);
    /* the unknown output never reached a worker: one batch ran for f */
    char *m = sl_metrics();
    ck_assert(sl_metric(m, "gpufaas_batch_size_count", "function=\"f\",version=\"1\"") == 1);
    /* /metrics counts the same requests, under the same labels */
    /* the labels a row counts under: its function and version when they exist */
    rows = sl_q_rows(db, "WITH l AS (SELECT EXISTS (SELECT 1 FROM function_versions v"
                         "  WHERE v.function = i.function AND v.version = i.version) AS known,"
                         "  i.* FROM invocations i)"
                         " SELECT 'function=\"' || CASE WHEN known THEN function ELSE '' END ||"
                         " '\",version=\"' || CASE WHEN known THEN version ELSE '' END ||"
                         " '\",code=\"' || http_code || '\"', count(*) FROM l GROUP BY 1");
    int64_t total = 0;
    for (char *line = strtok(rows, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char *bar = strrchr(line, '|');
        *bar = '\0';
        int count = atoi(bar + 1);
        ck_assert_msg(sl_metric(m, "gpufaas_requests_total", line) == count,
                      "%s: SQLite %d, /metrics %g", line, count,
                      sl_metric(m, "gpufaas_requests_total", line));
        total += count;
    }
    ck_assert_int_eq(total, n);
    free(rows);
    /* and nothing more: the sum of every series is the number of requests */
    double sum = 0;
    for (const char *p = m; (p = strstr(p, "\ngpufaas_requests_total{")) != NULL; p++)
        sum += atof(strchr(strchr(p, '}'), ' '));
    ck_assert_msg(sum == (double)n, "gpufaas_requests_total sums to %g, %lld requests", sum,
                  (long long)n);
    free(m);
    /* the operator's recipe for "what was refused and why" finds them */
    ck_assert_int_eq(sl_q_int(db, "SELECT count(*) FROM invocations WHERE status <> 'GF_OK'"
                                  " AND reason IS NOT NULL"),
                     n - 2);
    ck_assert_int_eq(sl_q_int(db, "SELECT errors FROM v_function_stats WHERE function = 'f'"),
                     4); /* the bad body, the unknown output, version 7, the large body */
    sqlite3_close(db);
    /* and so does that recipe as docs/operations.md writes it, through the sqlite3 tool on
     * the server's own file: each refusal once, with its reason */
    char *out = sl_doc_recipe("What was refused (or failed) in the last hour, and why:");
    if (out != NULL) {
        const char *want[] = {"each entry of \"inputs\" must be an object",
                              "unknown output 'nope' requested", "function 'nope' not found",
                              "function 'f' has no version 7", "invalid function name 'Bad!'",
                              "(--max-body)", "function 'slow' "};
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            const char *hit = strstr(out, want[i]);
            ck_assert_msg(hit != NULL && strstr(hit + 1, want[i]) == NULL,
                          "'%s' is not in the recipe's answer once:\n%s", want[i], out);
        }
        free(out);
    } else {
        fprintf(stderr, "no sqlite3 tool: the operations.md recipe is not run\n");
    }
    sl_model_free(&f);
    sl_model_free(&slow);
}
END_TEST

/* ---- a mixed run, then every view agrees ---------------------------------------------- */

/* The copies of the placements table, as "function|version|worker|tier|bytes|state|hits|
 * loaded_at|last_used_at" lines, ordered. */
static char *db_placements(sqlite3 *db)
{
    return sl_q_rows(db, "SELECT function, version, worker_id, tier, bytes, state, hits,"
                         " loaded_at, COALESCE(last_used_at, '') FROM placements"
                         " ORDER BY function, version, worker_id, tier");
}

/* The same lines from GET /v1/placements. */
static char *api_placements(void)
{
    json_t *j = sl_get("/v1/placements");
    json_t *ps = json_object_get(j, "placements");
    size_t n = json_array_size(ps);
    char **lines = calloc(n + 1, sizeof *lines);
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_array_get(ps, i);
        char lu[32] = "";
        if (json_is_integer(json_object_get(p, "last_used_at_us")))
            snprintf(lu, sizeof lu, "%lld",
                     (long long)json_integer_value(json_object_get(p, "last_used_at_us")));
        if (asprintf(&lines[i], "%s|%lld|%lld|%s|%lld|%s|%lld|%lld|%s\n",
                     json_string_value(json_object_get(p, "function")),
                     (long long)json_integer_value(json_object_get(p, "version")),
                     (long long)json_integer_value(json_object_get(p, "worker")),
                     json_string_value(json_object_get(p, "tier")),
                     (long long)json_integer_value(json_object_get(p, "bytes")),
                     json_string_value(json_object_get(p, "state")),
                     (long long)json_integer_value(json_object_get(p, "hits")),
                     (long long)json_integer_value(json_object_get(p, "loaded_at_us")), lu) < 0)
            ck_abort();
    }
    /* the SQL order: function, version, worker, tier (text order: device < host) */
    for (size_t i = 1; i < n; i++)
        for (size_t k = i; k > 0 && strcmp(lines[k - 1], lines[k]) > 0; k--) {
            char *t = lines[k];
            lines[k] = lines[k - 1];
            lines[k - 1] = t;
        }
    gf_buf b;
    gf_buf_init(&b);
    for (size_t i = 0; i < n; i++) {
        gf_buf_append_str(&b, lines[i]);
        free(lines[i]);
    }
    free(lines);
    json_decref(j);
    char *s = gf_buf_steal(&b, NULL);
    return s != NULL ? s : strdup("");
}

/* SQLite's placements are /v1/placements' (hits are flushed within a second). */
static bool placements_agree(void *arg)
{
    char **why = arg;
    sqlite3 *db = sl_db();
    char *a = db_placements(db), *b = api_placements();
    sqlite3_close(db);
    bool same = strcmp(a, b) == 0;
    free(*why);
    if (asprintf(why, "SQLite:\n%s/v1/placements:\n%s", a, b) < 0)
        *why = NULL;
    free(a);
    free(b);
    return same;
}

/* The workers' memory and restarts: SQLite's workers table, /v1/workers and
 * /metrics, read while no heartbeat lands in between (retried otherwise). */
static bool workers_agree(void *arg)
{
    char **why = arg;
    sqlite3 *db = sl_db();
    char *rows = sl_q_rows(db, "SELECT id, device_used, host_used, restarts FROM workers"
                               " ORDER BY id");
    sqlite3_close(db);
    json_t *j = sl_get("/v1/workers");
    char *m = sl_metrics();
    gf_buf b;
    gf_buf_init(&b);
    bool ok = true;
    json_t *ws = json_object_get(j, "workers");
    for (size_t i = 0; i < json_array_size(ws); i++) {
        json_t *w = json_array_get(ws, i);
        long long id = json_integer_value(json_object_get(w, "id"));
        long long du = json_integer_value(json_object_get(json_object_get(w, "device_memory"),
                                                          "used"));
        long long hu = json_integer_value(json_object_get(json_object_get(w, "host_memory"),
                                                          "used"));
        long long rs = json_integer_value(json_object_get(w, "restarts"));
        gf_buf_printf(&b, "%lld|%lld|%lld|%lld\n", id, du, hu, rs);
        char l[64];
        snprintf(l, sizeof l, "worker=\"%lld\",kind=\"used\"", id);
        ok = ok && sl_metric(m, "gpufaas_device_memory_bytes", l) == du &&
             sl_metric(m, "gpufaas_host_memory_bytes", l) == hu;
        snprintf(l, sizeof l, "worker=\"%lld\"", id);
        ok = ok && sl_metric(m, "gpufaas_worker_restarts_total", l) == rs;
    }
    ok = ok && b.data != NULL && strcmp(rows, b.data) == 0;
    free(*why);
    if (asprintf(why, "SQLite:\n%s/v1/workers:\n%s", rows, b.data ? b.data : "") < 0)
        *why = NULL;
    free(rows);
    free(m);
    gf_buf_deinit(&b);
    json_decref(j);
    return ok;
}

/* Worker w's pid, from /v1/workers. */
static int worker_pid(int w)
{
    json_t *j = sl_get("/v1/workers");
    int pid = (int)json_integer_value(
        json_object_get(json_array_get(json_object_get(j, "workers"), (size_t)w), "pid"));
    json_decref(j);
    return pid;
}

static bool worker1_back(void *arg)
{
    int old = *(int *)arg;
    json_t *j = sl_get("/v1/workers");
    json_t *w = json_array_get(json_object_get(j, "workers"), 1);
    bool up = strcmp(json_string_value(json_object_get(w, "state")), "up") == 0 &&
              json_integer_value(json_object_get(w, "pid")) != old;
    json_decref(j);
    return up;
}

/* POST path with a body sent in two parts, the second after pause_ms, on a
 * connection of its own: the start of the reply ("" when none came). */
static void trickle(const char *path, int pause_ms, char *reply, size_t cap)
{
    int port = atoi(strrchr(sl_srv.url, ':') + 1);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char head[256];
    int n = snprintf(head, sizeof head, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     "application/json\r\nContent-Length: 100\r\n\r\n{\"inputs\"", path);
    ck_assert_int_eq(send(fd, head, (size_t)n, MSG_NOSIGNAL), n);
    usleep((useconds_t)pause_ms * 1000);
    ssize_t w = send(fd, ": [", 3, MSG_NOSIGNAL); /* may fail: the sweeper cut it first */
    (void)w;
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < cap && (r = recv(fd, reply + got, cap - 1 - got, 0)) > 0)
        got += (size_t)r;
    reply[got] = '\0';
    close(fd);
}

START_TEST(test_held_memory_and_time_refusals_recorded)
{
    const char *args[] = {"--devices", "cpu:1", "--max-body", "1M", "--body-memory", "64K",
                          "--request-timeout", "1", NULL};
    sl_model f, slow;
    start_f_and_slow(args, &f, &slow, "\"max_queue_delay_us\": 2000000");
    int64_t n = 0;
    ck_assert_int_eq(sl_invoke("f", 0, NULL, NULL), 200);
    n++;
    /* 504: its own deadline (100 ms) passes while it waits for batch-mates */
    ck_assert_int_eq(sl_invoke("slow", 0, "\"parameters\": {\"timeout\": 100000}", NULL), 504);
    n++;
    /* 503: a body of 100 KB, beyond the 64 KiB the server may hold */
    size_t big_len = 100000;
    char *big = malloc(big_len);
    memset(big, ' ', big_len);
    gf_hh_resp r;
    ck_assert_int_eq(gf_hh_http(sl_srv.url, "POST", "/v2/models/f/infer", NULL, big, big_len,
                                false, &r), 503);
    ck_assert_str_eq(r.retry_after, "1");
    gf_hh_resp_free(&r);
    n++;
    /* 503: 1 KB that inflates to the same 100 KB: the inflated bytes count */
    uLongf zlen = compressBound(big_len);
    unsigned char *z = malloc(zlen);
    ck_assert_int_eq(compress2(z, &zlen, (const unsigned char *)big, big_len, 9), Z_OK);
    ck_assert_uint_lt(zlen, 2000);
    const char *deflate[] = {"Content-Encoding: deflate", NULL};
    ck_assert_int_eq(gf_hh_http(sl_srv.url, "POST", "/v2/models/f/infer", deflate, z, zlen,
                                false, &r), 503);
    ck_assert_str_eq(r.retry_after, "1");
    gf_hh_resp_free(&r);
    n++;
    free(z);
    free(big);
    /* 408: a body still arriving after --request-timeout (1 s) */
    char reply[512];
    trickle("/v2/models/f/infer", 1400, reply, sizeof reply);
    ck_assert_msg(reply[0] == '\0' || strncmp(reply, "HTTP/1.1 408", 12) == 0, "%s", reply);
    n++;
    ck_assert(sl_eventually(rows_are, &n, 5000));
    sqlite3 *db = sl_db();
    char *rows = sl_q_rows(db, "SELECT function, version, http_code, status, reason"
                               " FROM invocations ORDER BY id");
    ck_assert_str_eq(rows,
                     "f|1|200|GF_OK|\n"
                     "slow|1|504|GF_ERR_DEADLINE|the request's deadline of 0.100 s "
                     "(parameters.timeout, or the server's --infer-timeout) passed while it "
                     "was queued in the gateway\n"
                     "f|1|503|GF_ERR_OVERLOADED|the request bodies the server holds would "
                     "pass its budget with this one (--body-memory 64 KiB): try again "
                     "shortly\n"
                     "f|1|503|GF_ERR_OVERLOADED|no memory left for the inflated deflate request "
                     "body (--body-memory): try again shortly\n"
                     "f|1|408|GF_ERR_TIMEOUT|the request body did not arrive within "
                     "--request-timeout: the connection was closed\n");
    free(rows);
    /* /metrics counts them under the same codes */
    char *m = sl_metrics();
    ck_assert(sl_metric(m, "gpufaas_requests_total",
                        "function=\"f\",version=\"1\",code=\"503\"") == 2);
    ck_assert(sl_metric(m, "gpufaas_requests_total",
                        "function=\"f\",version=\"1\",code=\"408\"") == 1);
    ck_assert(sl_metric(m, "gpufaas_requests_total",
                        "function=\"slow\",version=\"1\",code=\"504\"") == 1);
    free(m);
    sqlite3_close(db);
    sl_model_free(&f);
    sl_model_free(&slow);
}
END_TEST

START_TEST(test_mixed_run_every_view_agrees)
{
    /* a device that holds two of the models at once: swaps and evictions */
    const char *args[] = {"--devices", "cpu:2", "--device-memory", "4M", "--host-memory", "64M",
                          NULL};
    sl_start(args);
    enum { NF = 3 };
    sl_model fs[NF], f2;
    static const char *const names[NF] = {"alpha", "beta", "gamma"};
    for (int i = 0; i < NF; i++) {
        sl_model_make(&fs[i], names[i], 1, (uint64_t)(i + 1), 0, NULL);
        ck_assert_int_eq(sl_deploy(&fs[i], NULL, NULL, NULL), 201);
    }
    sl_model_make(&f2, "alpha", 2, 99, 0, NULL);
    ck_assert_int_eq(sl_deploy(&f2, NULL, NULL, NULL), 201); /* alpha 2 is current */
    int ok = 0;
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < NF; i++)
            ok += sl_invoke(names[i], 0, NULL, NULL) == 200;
        ok += sl_invoke("alpha", 1, NULL, NULL) == 200; /* a client pinned to version 1 */
        ck_assert_int_eq(sl_invoke("alpha", 0, "\"outputs\": [{\"name\": \"z\"}]", NULL), 400);
        ck_assert_int_eq(sl_invoke("ghost", 0, NULL, NULL), 404);
        if (round == 1) {
            /* a worker dies: the supervisor restarts it */
            int pid = worker_pid(1);
            ck_assert_int_eq(kill(pid, SIGKILL), 0);
            ck_assert(sl_eventually(worker1_back, &pid, 20000));
        }
    }
    ck_assert_int_eq(ok, 4 * (NF + 1));

    /* placements: SQLite's rows are /v1/placements' entries, field by field */
    char *why = NULL;
    ck_assert_msg(sl_eventually(placements_agree, &why, 5000), "%s", why);
    free(why);
    why = NULL;
    /* v_placement shows the same copies (and a store row for what is on no worker) */
    sqlite3 *db = sl_db();
    char *a = sl_q_rows(db, "SELECT function, version, worker, tier, hits FROM v_placement"
                            " WHERE tier <> 'store' ORDER BY 1, 2, 3, 4");
    char *b = sl_q_rows(db, "SELECT function, version, worker_id, tier, hits FROM placements"
                            " ORDER BY 1, 2, 3, 4");
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    ck_assert_int_eq(sl_q_int(db, "SELECT count(*) FROM v_placement v WHERE v.tier <> 'store'"
                                  " AND v.mib <> (SELECT ROUND(p.bytes / 1048576.0, 1) FROM"
                                  " placements p WHERE p.function = v.function AND p.version ="
                                  " v.version AND p.worker_id = v.worker AND p.tier = v.tier)"),
                     0);
    /* the hits: every request run on a worker is a hit of a device copy that
     * is still there, or of one evicted since */
    int64_t hits = sl_q_int(db, "SELECT COALESCE(SUM(hits), 0) FROM placements"
                                " WHERE tier = 'device'");
    ck_assert_int_le(hits, 4 * (NF + 1));
    ck_assert_int_gt(hits, 0);
    /* requests and cold starts: SQLite's rows are /metrics' counters */
    char *m = sl_metrics();
    char *rows = sl_q_rows(db, "SELECT function, version, http_code, count(*), SUM(cold)"
                               " FROM invocations WHERE function <> 'ghost'"
                               " GROUP BY 1, 2, 3 ORDER BY 1, 2, 3");
    for (char *line = strtok(rows, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char fn[64];
        long long ver, code, count, cold;
        ck_assert_int_eq(sscanf(line, "%63[^|]|%lld|%lld|%lld|%lld", fn, &ver, &code, &count,
                                &cold),
                         5);
        char l[160];
        snprintf(l, sizeof l, "function=\"%s\",version=\"%lld\",code=\"%lld\"", fn, ver, code);
        ck_assert_msg(sl_metric(m, "gpufaas_requests_total", l) == count, "%s", l);
        if (code == 200) {
            snprintf(l, sizeof l, "function=\"%s\",version=\"%lld\"", fn, ver);
            double mc = sl_metric(m, "gpufaas_cold_starts_total", l);
            ck_assert_msg((mc < 0 ? 0 : mc) == cold, "%s: cold %lld in SQLite, %g", l, cold, mc);
        }
    }
    free(rows);
    ck_assert(sl_metric(m, "gpufaas_requests_total", "function=\"\",version=\"\",code=\"404\"") ==
              4);
    ck_assert_int_eq(sl_q_int(db, "SELECT count(*) FROM invocations WHERE function = 'ghost'"),
                     4);
    /* swaps: the events SQLite kept are what /metrics counted */
    rows = sl_q_rows(db, "SELECT worker_id, from_tier, to_tier, SUM(bytes) FROM swap_events"
                         " WHERE to_tier = 'device' GROUP BY 1, 2, 3");
    for (char *line = strtok(rows, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        long long w, bytes;
        char from[16], to[16];
        ck_assert_int_eq(sscanf(line, "%lld|%15[^|]|%15[^|]|%lld", &w, from, to, &bytes), 4);
        char l[96];
        snprintf(l, sizeof l, "worker=\"%lld\",from=\"%s\",to=\"%s\"", w, from, to);
        ck_assert_msg(sl_metric(m, "gpufaas_swap_bytes_total", l) == bytes, "%s", l);
    }
    free(rows);
    free(m);
    sqlite3_close(db);
    /* the workers: memory and restarts */
    ck_assert_msg(sl_eventually(workers_agree, &why, 5000), "%s", why);
    free(why);
    why = NULL;

    /* the command line shows what the API says */
    char *out = NULL;
    const char *ps[] = {"ps", "--json", NULL};
    ck_assert_int_eq(sl_cli(&out, ps), 0);
    json_t *pj = json_loads(out, 0, NULL);
    free(out);
    json_t *wj = sl_get("/v1/workers");
    json_t *w1 = json_array_get(json_object_get(pj, "workers"), 1);
    json_t *a1 = json_array_get(json_object_get(wj, "workers"), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(w1, "restarts")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(a1, "restarts")), 1);
    ck_assert(json_equal(json_object_get(w1, "models"), json_object_get(a1, "models")));
    json_decref(pj);
    json_decref(wj);
    const char *top[] = {"top", "--once", "--json", "--interval", "0.2", NULL};
    ck_assert_int_eq(sl_cli(&out, top), 0);
    json_t *tj = json_loads(out, 0, NULL);
    ck_assert_msg(tj != NULL, "%s", out);
    free(out);
    json_t *pl = sl_get("/v1/placements");
    ck_assert(json_equal(json_object_get(tj, "placements"), json_object_get(pl, "placements")));
    /* top's rows are per version: alpha's current version 2 has a row of its own */
    json_t *tf = json_object_get(tj, "functions");
    bool alpha2 = false;
    for (size_t i = 0; i < json_array_size(tf); i++) {
        json_t *r = json_array_get(tf, i);
        if (strcmp(json_string_value(json_object_get(r, "name")), "alpha") == 0 &&
            json_integer_value(json_object_get(r, "version")) == 2)
            alpha2 = json_is_true(json_object_get(r, "current"));
    }
    ck_assert(alpha2);
    json_decref(tj);
    json_decref(pl);
    for (int i = 0; i < NF; i++)
        sl_model_free(&fs[i]);
    sl_model_free(&f2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http_state");
    TCase *tc = tcase_create("state");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_refusals_recorded);
    tcase_add_test(tc, test_held_memory_and_time_refusals_recorded);
    tcase_add_test(tc, test_mixed_run_every_view_agrees);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
