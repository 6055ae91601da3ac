/* System tests over real HTTP on loopback: a real `gpufaas serve` process,
 * real gpufaas-worker processes (cpu) and a real SQLite file, driven the way
 * users drive it (multipart deploys, keep-alive invokes, /metrics,
 * /v1/workers, the sqlite3 command-line tool):
 *
 *   - 30 functions whose weights total more than 4x the device budget,
 *     invoked in a Zipf order by 3 clients: every output matches a naive
 *     reference; evictions show in /metrics and in the database;
 *   - a new version deployed under load: zero failed requests, both versions
 *     answer;
 *   - a worker SIGKILLed under load: every request gets a correct answer or a
 *     clean 503 with a JSON error, and the worker comes back;
 *   - the gateway restarted on its state directory: everything deployed is
 *     still there and serves.
 *
 * The models are mlps (tests/worker/wharness.h) with random weights; the
 * reference is its naive double-precision forward pass. */
#include <check.h>
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "hhfixture.h"
#include "testutil.h"
#include "wharness.h"

#define IN 16
#define OUT 4
#define MAX_BATCH 4
#define TOL 1e-4 /* largest |got - ref| / (1 + |ref|) */

static gf_hh_server srv;
static char *test_dir; /* the server's state (var), its log, the model files */

static void setup(void)
{
    gf_hf_setup(&srv, &test_dir);
}

static void teardown(void)
{
    gf_hf_teardown(&srv, &test_dir);
}

/* Start the server: n cpu workers with the given device budget, and more
 * flags (NULL-terminated, may be NULL). */
static void start_with(const char *devices, const char *device_memory, const char *const *extra)
{
    const char *args[] = {"--devices",     devices, "--device-memory", device_memory,
                          "--host-memory", "64M",   NULL};
    gf_hf_start(&srv, args, extra, 120);
}

static void start(const char *devices, const char *device_memory)
{
    start_with(devices, device_memory, NULL);
}

/* ---- functions: an mlp IN -> hidden (relu) -> OUT, its files, its deploy ---------- */

typedef struct model {
    char name[32];
    gf_test_mlp m;
    char *weights;  /* path of its safetensors file */
    char *manifest; /* path of its manifest */
} model;

/* Random weights from seed; files in the test directory (tag keeps two
 * versions of one name apart). */
static void model_make(model *f, const char *name, int tag, uint64_t seed, int64_t hidden)
{
    snprintf(f->name, sizeof f->name, "%s", name);
    int64_t dims[] = {IN, hidden, OUT};
    gf_test_mlp_make(&f->m, seed, 2, dims, false, MAX_BATCH);
    char file[96];
    snprintf(file, sizeof file, "%s-%d.safetensors", name, tag);
    f->weights = gf_test_path(test_dir, file);
    gf_err err;
    ck_assert_msg(gf_test_mlp_write(&f->m, f->weights, GF_DT_F32, &err) == GF_OK, "%s", gf_err_msg(&err));
    /* the harness's manifest, without its fixed version (each deploy gets the
     * next one) and with a short batching delay */
    char *text = gf_test_mlp_manifest(&f->m, name);
    json_t *j = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(j);
    json_object_del(j, "version");
    json_object_set_new(j, "max_queue_delay_us", json_integer(200));
    char *out = json_dumps(j, JSON_COMPACT);
    snprintf(file, sizeof file, "%s-%d.json", name, tag);
    f->manifest = gf_test_path(test_dir, file);
    gf_test_write_file(f->manifest, out, strlen(out));
    free(out);
    free(text);
    json_decref(j);
}

static void model_free(model *f)
{
    gf_test_mlp_free(&f->m);
    free(f->weights);
    free(f->manifest);
}

/* Deploy over HTTP (multipart); returns the version it got. */
static int64_t deploy(const model *f)
{
    gf_hh_resp r;
    long st = gf_hh_deploy(srv.url, f->manifest, f->weights, NULL, &r);
    ck_assert_msg(st == 201, "deploy %s: %ld %s", f->name, st, r.body.data);
    json_t *j = json_loadb(r.body.data, r.body.len, 0, NULL);
    int64_t v = (int64_t)json_integer_value(json_object_get(j, "version"));
    json_decref(j);
    gf_hh_resp_free(&r);
    ck_assert_int_gt(v, 0);
    return v;
}

/* The input of request i: batch rows of IN values in [-1, 1). */
static int input_for(uint64_t i, float *x)
{
    gf_test_rng g;
    gf_test_rng_seed(&g, 1000 + i);
    int batch = 1 + (int)(i % 3);
    for (int k = 0; k < batch * IN; k++)
        x[k] = gf_test_rng_float(&g, -1.0f, 1.0f);
    return batch;
}

/* An answer to one invoke. */
typedef struct answer {
    long status;     /* HTTP status, or -(CURLcode) */
    int64_t version; /* from a 200 */
    float y[MAX_BATCH * OUT];
    size_t n;         /* values in y */
    bool clean_error; /* a non-200 with {"error": ...} as application/json */
    char text[200];   /* the body's start, for messages */
} answer;

/* POST /v1/functions/{name}/invoke (version 0) or
 * /v2/models/{name}/versions/{v}/infer, on this thread's keep-alive connection. */
static void invoke(const char *name, int64_t version, const float *x, int batch, answer *a)
{
    gf_buf b;
    gf_buf_init(&b);
    gf_buf_printf(&b,
                  "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[%d,%d],"
                  "\"data\":[",
                  batch, IN);
    for (int k = 0; k < batch * IN; k++)
        gf_buf_printf(&b, "%s%.9g", k > 0 ? "," : "", (double)x[k]);
    gf_buf_append_str(&b, "]}]}");
    char path[160];
    if (version > 0)
        snprintf(path, sizeof path, "/v2/models/%s/versions/%lld/infer", name, (long long)version);
    else
        snprintf(path, sizeof path, "/v1/functions/%s/invoke", name);
    gf_hh_resp r;
    memset(a, 0, sizeof *a);
    a->status = gf_hh_http(srv.url, "POST", path, NULL, b.data, b.len, false, &r);
    gf_buf_deinit(&b);
    snprintf(a->text, sizeof a->text, "%s", r.body.data != NULL ? r.body.data : "");
    if (a->status == 200) {
        json_t *j = json_loadb(r.body.data, r.body.len, 0, NULL);
        json_t *v = json_object_get(j, version > 0 ? "model_version" : "version");
        a->version = json_is_string(v) ? atoll(json_string_value(v)) : json_integer_value(v);
        json_t *d = json_object_get(json_array_get(json_object_get(j, "outputs"), 0), "data");
        a->n = json_array_size(d) <= MAX_BATCH * OUT ? json_array_size(d) : 0;
        for (size_t k = 0; k < a->n; k++)
            a->y[k] = (float)json_number_value(json_array_get(d, k));
        json_decref(j);
    } else if (a->status > 0) {
        char why[256];
        a->clean_error = gf_hh_is_json_error(&r, "", why, sizeof why);
    }
    gf_hh_resp_free(&r);
}

/* The answer holds the model's outputs for x. */
static bool answer_correct(const answer *a, const gf_test_mlp *m, const float *x, int batch)
{
    float ref[MAX_BATCH * OUT];
    gf_test_mlp_ref_f32(m, x, batch, ref);
    return a->status == 200 && a->n == (size_t)(batch * OUT) &&
           gf_test_max_rel_err(a->y, ref, a->n) <= TOL;
}

/* GET path; the body (malloc'd, NUL-terminated). */
static char *get_text(const char *path)
{
    gf_hh_resp r;
    long st = gf_hh_http(srv.url, "GET", path, NULL, NULL, 0, false, &r);
    ck_assert_msg(st == 200, "GET %s: %ld", path, st);
    size_t n;
    char *t = gf_buf_steal(&r.body, &n);
    gf_hh_resp_free(&r);
    return t != NULL ? t : strdup("");
}

static json_t *get_json(const char *path)
{
    char *t = get_text(path);
    json_t *j = json_loads(t, 0, NULL);
    ck_assert_msg(j != NULL, "GET %s: not JSON: %.300s", path, t);
    free(t);
    return j;
}

/* Sum of the values of every series of metric whose labels contain `with`. */
static double metric_sum(const char *text, const char *metric, const char *with)
{
    double sum = 0;
    size_t ml = strlen(metric);
    for (const char *l = text; l != NULL && *l != '\0';) {
        const char *e = strchr(l, '\n');
        size_t n = e != NULL ? (size_t)(e - l) : strlen(l);
        if (n > ml && strncmp(l, metric, ml) == 0 && l[ml] == '{') {
            const char *close = memchr(l, '}', n);
            char labels[256];
            size_t ln = close != NULL ? (size_t)(close - l) : 0;
            snprintf(labels, sizeof labels, "%.*s", (int)ln, l);
            if (close != NULL && strstr(labels, with) != NULL)
                sum += strtod(close + 1, NULL);
        }
        l = e != NULL ? e + 1 : NULL;
    }
    return sum;
}

/* The first column of the first row of sql, run by the sqlite3 tool on the
 * state directory's database. */
static long long sql_int(const char *sql)
{
    char *db = gf_test_path(srv.state, "gpufaas.db");
    char *argv[] = {"/usr/bin/sqlite3", "-cmd", ".timeout 5000", db, (char *)sql, NULL};
    char *out = NULL, *err = NULL;
    int rc = gf_test_run_cmd(argv, &out, &err, 30);
    ck_assert_msg(rc == 0, "sqlite3 '%s': %d %s", sql, rc, err != NULL ? err : "");
    long long v = atoll(out);
    free(out);
    free(err);
    free(db);
    return v;
}

/* Poll sql until it gives at least want (the store commits in batches and
 * events arrive asynchronously); returns the last value. */
static long long sql_wait_at_least(const char *sql, long long want, int timeout_ms)
{
    long long v = sql_int(sql);
    for (int t = 0; v < want && t < timeout_ms; t += 100) {
        usleep(100 * 1000);
        v = sql_int(sql);
    }
    return v;
}

/* ---- 30 functions, 4x the device budget, Zipf order -------------------------------- */

#define NFN 30
#define NREQ 240
#define ZIPF_CLIENTS 3
#define DEVICE_MIB 24

typedef struct zipf_run {
    model *fns;
    const int *seq; /* function of request i */
    atomic_int next;
    atomic_int ok, wrong, failed;
} zipf_run;

static void *zipf_client(void *arg)
{
    zipf_run *z = arg;
    for (;;) {
        int i = atomic_fetch_add(&z->next, 1);
        if (i >= NREQ)
            break;
        const model *f = &z->fns[z->seq[i]];
        float x[MAX_BATCH * IN];
        int batch = input_for((uint64_t)i, x);
        answer a;
        invoke(f->name, 0, x, batch, &a);
        if (a.status != 200) {
            fprintf(stderr, "request %d (%s): %ld %s\n", i, f->name, a.status, a.text);
            atomic_fetch_add(&z->failed, 1);
        } else if (!answer_correct(&a, &f->m, x, batch)) {
            fprintf(stderr, "request %d (%s): wrong outputs\n", i, f->name);
            atomic_fetch_add(&z->wrong, 1);
        } else {
            atomic_fetch_add(&z->ok, 1);
        }
    }
    gf_hh_thread_end();
    return NULL;
}

START_TEST(test_zipf_over_device_budget)
{
    start("cpu:1", "24M");
    /* hidden widths that make the weights 2, 3, 4 or 5 MiB: every byte is a
     * parameter the mlp uses, so all of it swaps */
    static model fns[NFN];
    uint64_t total = 0;
    for (int i = 0; i < NFN; i++) {
        char name[16];
        snprintf(name, sizeof name, "z%02d", i);
        int64_t mib = 2 + i % 4;
        int64_t hidden = mib * (1 << 20) / 4 / (IN + 1 + OUT);
        model_make(&fns[i], name, 1, 500 + (uint64_t)i, hidden);
        total += (uint64_t)((IN + 1 + OUT) * hidden + OUT) * 4;
        deploy(&fns[i]);
    }
    ck_assert_msg(total >= 4ull * DEVICE_MIB * (1 << 20), "weights total %llu bytes",
                  (unsigned long long)total);

    /* a Zipf(0.9) sequence over a fixed shuffle of the functions */
    double cdf[NFN], sum = 0, acc = 0;
    for (int i = 0; i < NFN; i++)
        sum += 1.0 / pow(i + 1, 0.9);
    for (int i = 0; i < NFN; i++)
        cdf[i] = (acc += 1.0 / pow(i + 1, 0.9) / sum);
    static int seq[NREQ];
    gf_test_rng g;
    gf_test_rng_seed(&g, 42);
    for (int i = 0; i < NREQ; i++) {
        double u = (double)gf_test_rng_below(&g, 1u << 30) / (double)(1u << 30);
        int k = 0;
        while (k < NFN - 1 && cdf[k] < u)
            k++;
        seq[i] = (k * 7) % NFN;
    }
    zipf_run z = {.fns = fns, .seq = seq};
    pthread_t t[ZIPF_CLIENTS];
    for (int i = 0; i < ZIPF_CLIENTS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, zipf_client, &z), 0);
    for (int i = 0; i < ZIPF_CLIENTS; i++)
        pthread_join(t[i], NULL);
    if (atomic_load(&z.ok) != NREQ) /* a failing test ends here: no teardown to show it */
        gf_hh_server_dump_log(&srv, 8000);
    ck_assert_int_eq(atomic_load(&z.failed), 0);
    ck_assert_int_eq(atomic_load(&z.wrong), 0);
    ck_assert_int_eq(atomic_load(&z.ok), NREQ);

    /* /metrics: evictions from the device, bytes swapped onto it, cold starts */
    char *m = get_text("/metrics");
    ck_assert_msg(metric_sum(m, "gpufaas_evictions_total", "worker=\"0\"") > 0, "%s", m);
    double swapped = metric_sum(m, "gpufaas_swap_bytes_total", "to=\"device\"");
    ck_assert_msg(swapped >= 4.0 * DEVICE_MIB * (1 << 20),
                  "gpufaas_swap_bytes_total to the device: %.0f", swapped);
    ck_assert_msg(metric_sum(m, "gpufaas_cold_starts_total", "") >= NFN / 2, "%s", m);
    free(m);
    /* /v1/workers: the device tier never holds more than its budget */
    json_t *ws = get_json("/v1/workers");
    json_t *dm =
        json_object_get(json_array_get(json_object_get(ws, "workers"), 0), "device_memory");
    ck_assert_int_le(json_integer_value(json_object_get(dm, "used")),
                     json_integer_value(json_object_get(dm, "budget")));
    ck_assert_int_eq(json_integer_value(json_object_get(dm, "budget")), DEVICE_MIB << 20);
    json_decref(ws);

    /* the database, through sqlite3: evictions and loads as swap events,
     * every function in v_placement, some of them on the device */
    ck_assert_int_gt(sql_wait_at_least("SELECT count(*) FROM swap_events WHERE "
                                       "from_tier='device'",
                                       1, 5000),
                     0);
    ck_assert_int_ge(
        sql_wait_at_least("SELECT count(*) FROM swap_events WHERE to_tier='device'", NFN, 5000),
        NFN);
    ck_assert_int_eq(sql_int("SELECT count(DISTINCT function) FROM v_placement"), NFN);
    ck_assert_int_gt(
        sql_wait_at_least("SELECT count(*) FROM v_placement WHERE tier='device'", 1, 5000), 0);
    for (int i = 0; i < NFN; i++)
        model_free(&fns[i]);
}
END_TEST

/* ---- load from client threads ----------------------------------------------------- */

/* Clients invoking one function until told to stop; each answer is checked
 * against the model of the version that answered it. */
typedef struct load {
    const char *name;
    const gf_test_mlp *by_version[4]; /* [v]: the model of version v */
    atomic_int stop;
    atomic_int ok, wrong, clean_503, bad; /* bad: any other failure */
    atomic_int seen[4];                   /* 200s by version */
    atomic_int sent;
} load;

static void *load_client(void *arg)
{
    load *l = arg;
    for (uint64_t i = (uint64_t)pthread_self() % 1000u; !atomic_load(&l->stop); i++) {
        float x[MAX_BATCH * IN];
        int batch = input_for(i, x);
        answer a;
        atomic_fetch_add(&l->sent, 1);
        invoke(l->name, 0, x, batch, &a);
        if (a.status == 200) {
            const gf_test_mlp *m = a.version > 0 && a.version < 4 ? l->by_version[a.version] : NULL;
            if (m != NULL && answer_correct(&a, m, x, batch)) {
                atomic_fetch_add(&l->ok, 1);
                atomic_fetch_add(&l->seen[a.version], 1);
            } else {
                fprintf(stderr, "wrong answer from version %lld\n", (long long)a.version);
                atomic_fetch_add(&l->wrong, 1);
            }
        } else if (a.status == 503 && a.clean_error) {
            atomic_fetch_add(&l->clean_503, 1);
        } else {
            fprintf(stderr, "failed request: %ld %s\n", a.status, a.text);
            atomic_fetch_add(&l->bad, 1);
        }
    }
    gf_hh_thread_end();
    return NULL;
}

#define LOAD_CLIENTS 4

static void load_start(load *l, pthread_t *t)
{
    for (int i = 0; i < LOAD_CLIENTS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, load_client, l), 0);
}

static void load_stop(load *l, pthread_t *t)
{
    atomic_store(&l->stop, 1);
    for (int i = 0; i < LOAD_CLIENTS; i++)
        pthread_join(t[i], NULL);
}

/* Wait until at least n more requests were sent (the load is really running). */
static void load_wait_sent(load *l, int n)
{
    int until = atomic_load(&l->sent) + n;
    for (int i = 0; i < 3000 && atomic_load(&l->sent) < until; i++)
        usleep(10 * 1000);
    ck_assert_int_ge(atomic_load(&l->sent), until);
}

START_TEST(test_new_version_under_load)
{
    start("cpu:2", "64M");
    model v1, v2;
    model_make(&v1, "f", 1, 11, 16384);
    model_make(&v2, "f", 2, 22, 16384);
    ck_assert_int_eq(deploy(&v1), 1);
    load l = {.name = "f", .by_version = {NULL, &v1.m, &v2.m}};
    pthread_t t[LOAD_CLIENTS];
    load_start(&l, t);
    load_wait_sent(&l, 40);
    ck_assert_int_eq(deploy(&v2), 2); /* multipart upload while the clients run */
    for (int i = 0; i < 3000 && atomic_load(&l.seen[2]) < 40; i++)
        usleep(10 * 1000);
    load_stop(&l, t);
    ck_assert_int_eq(atomic_load(&l.bad), 0);
    ck_assert_int_eq(atomic_load(&l.clean_503), 0); /* zero failed requests */
    ck_assert_int_eq(atomic_load(&l.wrong), 0);
    ck_assert_int_gt(atomic_load(&l.seen[1]), 0);
    ck_assert_int_gt(atomic_load(&l.seen[2]), 0);
    ck_assert_int_eq(atomic_load(&l.ok), atomic_load(&l.sent));
    model_free(&v1);
    model_free(&v2);
}
END_TEST

/* ---- SIGKILL a worker under load ------------------------------------------------- */

/* Worker `id` from GET /v1/workers: its pid, state and restarts. */
static void worker_info(int id, pid_t *pid, char *state, size_t cap, int *restarts)
{
    json_t *ws = get_json("/v1/workers");
    json_t *arr = json_object_get(ws, "workers");
    json_t *w = NULL;
    for (size_t i = 0; i < json_array_size(arr); i++)
        if (json_integer_value(json_object_get(json_array_get(arr, i), "id")) == id)
            w = json_array_get(arr, i);
    ck_assert_ptr_nonnull(w);
    *pid = (pid_t)json_integer_value(json_object_get(w, "pid"));
    const char *s = json_string_value(json_object_get(w, "state"));
    snprintf(state, cap, "%s", s != NULL ? s : "?");
    *restarts = (int)json_integer_value(json_object_get(w, "restarts"));
    json_decref(ws);
}

/* The worker that holds name on its device (the one taking the load), else 0. */
static int worker_holding(const char *name)
{
    json_t *pl = get_json("/v1/placements");
    json_t *arr = json_object_get(pl, "placements");
    int id = 0;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *p = json_array_get(arr, i);
        if (strcmp(json_string_value(json_object_get(p, "function")), name) == 0 &&
            strcmp(json_string_value(json_object_get(p, "tier")), "device") == 0)
            id = (int)json_integer_value(json_object_get(p, "worker"));
    }
    json_decref(pl);
    return id;
}

START_TEST(test_worker_sigkill_under_load)
{
    /* The heartbeat's own kills are another test's (http_abuse): here a
     * restarted worker slow to answer its first heartbeats on a loaded
     * machine (under ASan) would be killed once more and make the one
     * restart two. A long timeout keeps this test to the SIGKILL's restart;
     * a worker that dies on its own after it still counts. */
    const char *hb[] = {"--heartbeat-timeout", "60000", NULL};
    start_with("cpu:2", "64M", hb);
    model f;
    model_make(&f, "k", 1, 33, 4096);
    deploy(&f);
    load l = {.name = "k", .by_version = {NULL, &f.m}};
    pthread_t t[LOAD_CLIENTS];
    load_start(&l, t);
    load_wait_sent(&l, 40);
    int id = worker_holding("k");
    pid_t pid;
    char state[32];
    int restarts;
    worker_info(id, &pid, state, sizeof state, &restarts);
    ck_assert_str_eq(state, "up");
    ck_assert_int_eq(restarts, 0);
    ck_assert_int_gt(pid, 0);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    load_wait_sent(&l, 100); /* the load goes on through the death and the restart */
    load_stop(&l, t);
    /* every request: a correct answer or a clean 503 */
    ck_assert_int_eq(atomic_load(&l.bad), 0);
    ck_assert_int_eq(atomic_load(&l.wrong), 0);
    ck_assert_int_eq(atomic_load(&l.ok) + atomic_load(&l.clean_503), atomic_load(&l.sent));
    ck_assert_int_gt(atomic_load(&l.ok), 0);
    /* the worker comes back: a new process, up, restarted once */
    pid_t pid2 = pid;
    for (int i = 0; i < 200; i++) {
        worker_info(id, &pid2, state, sizeof state, &restarts);
        if (strcmp(state, "up") == 0 && restarts >= 1)
            break;
        usleep(100 * 1000);
    }
    if (strcmp(state, "up") != 0 || restarts != 1)
        gf_hh_server_dump_log(&srv, 6000); /* why: a second death, a slow start */
    ck_assert_str_eq(state, "up");
    ck_assert_int_eq(restarts, 1);
    ck_assert_int_ne(pid2, pid);
    /* and everything serves again */
    float x[MAX_BATCH * IN];
    int batch = input_for(7, x);
    answer a;
    invoke("k", 0, x, batch, &a);
    ck_assert_msg(answer_correct(&a, &f.m, x, batch), "%ld %s", a.status, a.text);
    char *m = get_text("/metrics");
    ck_assert_msg(metric_sum(m, "gpufaas_worker_restarts_total", "") >= 1, "%s", m);
    free(m);
    gf_hh_thread_end();
    model_free(&f);
}
END_TEST

/* ---- restart the gateway -------------------------------------------------------- */

START_TEST(test_gateway_restart_keeps_functions)
{
    start("cpu:1", "64M");
    model a, b1, b2;
    model_make(&a, "a", 1, 71, 256);
    model_make(&b1, "b", 1, 72, 128);
    model_make(&b2, "b", 2, 73, 512);
    deploy(&a);
    deploy(&b1);
    deploy(&b2);
    float x[MAX_BATCH * IN];
    int batch = input_for(3, x);
    answer r;
    invoke("a", 0, x, batch, &r);
    ck_assert(answer_correct(&r, &a.m, x, batch));
    gf_hh_thread_end();

    int st = gf_hh_server_stop(&srv, 30);
    ck_assert_msg(st == 0, "SIGTERM: exit %d", st);
    start("cpu:1", "64M"); /* the same state directory */

    json_t *fl = get_json("/v1/functions");
    json_t *arr = json_object_get(fl, "functions");
    ck_assert_uint_eq(json_array_size(arr), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *f = json_array_get(arr, i);
        const char *name = json_string_value(json_object_get(f, "name"));
        int64_t cur = (int64_t)json_integer_value(json_object_get(f, "version"));
        ck_assert_int_eq(cur, strcmp(name, "b") == 0 ? 2 : 1);
        ck_assert_str_eq(json_string_value(json_object_get(f, "state")), "ready");
    }
    json_decref(fl);
    /* each serves: a, b's current version (2), and b's version 1 by number */
    for (uint64_t i = 0; i < 6; i++) {
        batch = input_for(i, x);
        invoke("a", 0, x, batch, &r);
        ck_assert_msg(answer_correct(&r, &a.m, x, batch), "a: %ld %s", r.status, r.text);
        invoke("b", 0, x, batch, &r);
        ck_assert_msg(answer_correct(&r, &b2.m, x, batch), "b: %ld %s", r.status, r.text);
        ck_assert_int_eq(r.version, 2);
        invoke("b", 1, x, batch, &r);
        ck_assert_msg(answer_correct(&r, &b1.m, x, batch), "b v1: %ld %s", r.status, r.text);
        ck_assert_int_eq(r.version, 1);
    }
    gf_hh_thread_end();
    model_free(&a);
    model_free(&b1);
    model_free(&b2);
}
END_TEST

static Suite *system_suite(void)
{
    Suite *s = suite_create("http_system");
    TCase *tc = tcase_create("system");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, test_zipf_over_device_budget);
    tcase_add_test(tc, test_new_version_under_load);
    tcase_add_test(tc, test_worker_sigkill_under_load);
    tcase_add_test(tc, test_gateway_restart_keeps_functions);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = gf_test_run_suite(system_suite());
    curl_global_cleanup();
    return rc;
}
