/* Tests for store/ that involve other processes: a writer SIGKILLed in the
 * middle of a stream (crash safety), a reader process and the sqlite3
 * command-line tool reading during heavy writes, and every sqlite3 recipe of
 * docs/operations.md run as written against a populated database. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"
#include "store_testlib.h"
#include "testutil.h"

static char *tmpdir;
static char *dbpath;

static void setup(void)
{
    tmpdir = gf_test_tmpdir();
    dbpath = gf_test_path(tmpdir, GF_STORE_DB_NAME);
}

static void teardown(void)
{
    free(dbpath);
    gf_test_rmtree(tmpdir);
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- crash safety ------------------------------------------------------- */

static int crash_report_fd = -1;

/* On the child's store thread after each commit: tell the parent how many
 * records are committed in all (8-byte writes to a pipe are atomic). */
static void crash_report(void *arg, uint64_t records, uint64_t total)
{
    (void)arg;
    (void)records;
    ssize_t w = write(crash_report_fd, &total, sizeof total);
    (void)w;
}

/* The child: writes invocations numbered 0, 1, 2, ... (in queue_us) as fast
 * as the store takes them, until it is killed. Plain C: no Check here. */
static void crash_child(const char *path, int fd)
{
    crash_report_fd = fd;
    gf_store_config c;
    gf_store_config_default(&c);
    c.batch_max = 256;
    c.commit_interval_ms = 5;
    c.on_commit = crash_report;
    gf_store *s;
    if (gf_store_open(path, &c, &s, NULL) != GF_OK)
        _exit(2);
    for (int64_t seq = 0;;) {
        gf_store_invocation r = st_inv_rec("crash", seq);
        gf_status st = gf_store_log_invocation(s, &r);
        if (st == GF_OK)
            seq++;
        else if (st == GF_ERR_BUSY)
            sched_yield();
        else
            _exit(3);
    }
}

/* Kill a writer once it has reported at least `after` committed records;
 * returns the last count it reported before it died. */
static uint64_t crash_round(const char *path, uint64_t after)
{
    int p[2];
    ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(p[0]);
        crash_child(path, p[1]);
        _exit(4);
    }
    close(p[1]);
    uint64_t last = 0;
    bool killed = false;
    double deadline = mono_s() + 30;
    for (;;) {
        struct pollfd pf = {p[0], POLLIN, 0};
        int r = poll(&pf, 1, 1000);
        ck_assert_msg(mono_s() < deadline, "the writer reported only %llu records in 30 s",
                      (unsigned long long)last);
        if (r <= 0)
            continue;
        uint64_t v;
        ssize_t n = read(p[0], &v, sizeof v);
        if (n == 0)
            break; /* the child is gone and the pipe is drained */
        if (n < 0 && errno == EINTR)
            continue;
        ck_assert_int_eq(n, (ssize_t)sizeof v);
        ck_assert_uint_ge(v, last);
        last = v;
        if (!killed && last >= after) {
            ck_assert_int_eq(kill(pid, SIGKILL), 0);
            killed = true;
        }
    }
    close(p[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "the writer ended otherwise (status %d)", status);
    return last;
}

/* A writer is SIGKILLed mid-stream, three times at different points; each
 * time the file passes integrity_check and holds every record the writer had
 * reported committed, as a gap-free prefix of what it wrote. */
START_TEST(test_crash_safety)
{
    gf_test_rng rng;
    gf_test_rng_seed(&rng, 0xc4a54);
    for (int round = 0; round < 3; round++) {
        char name[32];
        snprintf(name, sizeof name, "crash%d.db", round);
        char *path = gf_test_path(tmpdir, name);
        uint64_t after = 2000 + gf_test_rng_below(&rng, 6000) * (uint64_t)(round + 1);
        uint64_t committed = crash_round(path, after);
        ck_assert_uint_ge(committed, after);

        sqlite3 *db = st_raw_open(path, 0); /* read-write: it may recover the WAL */
        char *ok = st_q_text(db, "PRAGMA integrity_check");
        ck_assert_str_eq(ok, "ok");
        free(ok);
        int64_t n = st_q_int(db, "SELECT count(*) FROM invocations");
        ck_assert_msg((uint64_t)n >= committed, "round %d: %lld rows, %llu reported committed",
                      round, (long long)n, (unsigned long long)committed);
        ck_assert_int_eq(st_q_int(db, "SELECT count(DISTINCT queue_us) FROM invocations"), n);
        ck_assert_int_eq(st_q_int(db, "SELECT min(queue_us) FROM invocations"), 0);
        ck_assert_int_eq(st_q_int(db, "SELECT max(queue_us) FROM invocations"), n - 1);
        sqlite3_close(db);
        /* and the gateway can start on it again */
        gf_store *s = st_open(path, NULL);
        st_close(s);
        free(path);
    }
}
END_TEST

/* ---- readers during heavy writes ------------------------------------------- */

typedef struct {
    gf_store *s;
    atomic_int stop;
    uint64_t records;
    uint64_t admin_failures;
} load_gen;

/* Heavy writes: invocations, swaps, placement hits and heartbeats as fast as
 * the store takes them, plus a deploy and a publish every 2000 records. */
static void *load_main(void *arg)
{
    load_gen *g = arg;
    int64_t version = 100;
    for (uint64_t i = 0; !atomic_load(&g->stop); i++) {
        gf_store_invocation r = {.function = (i & 1) ? "resnet50" : "bert-base",
                                 .version = (i & 1) ? 2 : 1,
                                 .worker = (int32_t)(i & 1),
                                 .status = GF_OK,
                                 .http_code = 200,
                                 .batch_size = 8,
                                 .queue_us = 100,
                                 .exec_us = 1000,
                                 .total_us = 1200};
        if (gf_store_log_invocation(g->s, &r) == GF_OK)
            g->records++;
        if (i % 16 == 0) {
            gf_store_swap sw = {.worker = 0,
                                .function = "resnet50",
                                .version = 2,
                                .from = GF_TIER_HOST,
                                .to = GF_TIER_DEVICE,
                                .bytes = 1 << 20,
                                .elapsed_us = 80};
            gf_store_log_swap(g->s, &sw);
            gf_store_placement p = {
                .function = "resnet50", .version = 2, .worker = 0, .tier = GF_TIER_DEVICE};
            gf_store_log_placement_hit(g->s, &p, 1);
            gf_store_heartbeat hb = {.worker = 0,
                                     .device_budget = 8ull << 30,
                                     .device_used = (uint64_t)i,
                                     .host_budget = 1ull << 30};
            gf_store_log_heartbeat(g->s, &hb);
        }
        if (i % 2000 == 1999) {
            gf_store_version_spec spec = {
                .function = "churn",
                .version = ++version,
                .kind = "mlp",
                .manifest = "{\"kind\":\"mlp\"}",
                .weights_path = "churn.safetensors",
                .bytes = 10,
                .sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                .publish = true};
            if (gf_store_version_deploy(g->s, &spec, NULL, NULL) != GF_OK)
                g->admin_failures++;
        }
    }
    return NULL;
}

/* Open a store on dbpath, populate it and start the load thread. */
static gf_store *load_start(load_gen *g, pthread_t *t)
{
    gf_store *s = st_open(dbpath, NULL);
    st_populate(s, tmpdir);
    memset(g, 0, sizeof *g);
    g->s = s;
    atomic_init(&g->stop, 0);
    ck_assert_int_eq(pthread_create(t, NULL, load_main, g), 0);
    return s;
}

static void load_stop(load_gen *g, pthread_t t)
{
    atomic_store(&g->stop, 1);
    pthread_join(t, NULL);
    ck_assert_uint_eq(g->admin_failures, 0);
}

/* The reader process: its own connection, no busy handler (so any lock
 * conflict would show as an error), every view and a count, in a loop for
 * `seconds`. Plain C; the exit status says how it went. */
static void reader_child(const char *path, double seconds)
{
    static const char *const queries[] = {
        "SELECT count(*) FROM invocations", "SELECT * FROM v_placement",
        "SELECT * FROM v_function_stats",   "SELECT * FROM v_worker_memory",
        "SELECT * FROM v_recent_swaps",
    };
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        _exit(10);
    /* at least `seconds` of reading beside the writes, and at least 5 rounds
     * however slowly a loaded machine runs them (60 s more at most) */
    double end = mono_s() + seconds, cap = end + 60;
    long rounds = 0;
    int64_t last_count = 0;
    while ((mono_s() < end || rounds < 5) && mono_s() < cap) {
        for (size_t q = 0; q < sizeof queries / sizeof queries[0]; q++) {
            sqlite3_stmt *st = NULL;
            int rc = sqlite3_prepare_v2(db, queries[q], -1, &st, NULL);
            long rows = 0;
            if (rc == SQLITE_OK)
                rc = SQLITE_ROW;
            while (rc == SQLITE_ROW && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                if (q == 0) {
                    int64_t c = sqlite3_column_int64(st, 0);
                    if (c < last_count) {
                        fprintf(stderr, "reader: count went back from %lld to %lld\n",
                                (long long)last_count, (long long)c);
                        _exit(11);
                    }
                    last_count = c;
                }
                rows++;
            }
            if (rc != SQLITE_DONE) {
                fprintf(stderr, "reader: '%s' failed: %s\n", queries[q], sqlite3_errmsg(db));
                _exit(12);
            }
            sqlite3_finalize(st);
            if (q == 1 && rows == 0)
                _exit(13);
        }
        rounds++;
    }
    sqlite3_close(db);
    _exit(rounds >= 5 ? 0 : 14);
}

/* The reader runs as this program re-executed with --reader (a fresh process:
 * forking a process whose store thread may hold SQLite's mutexes would not
 * be). */
START_TEST(test_reader_process_during_writes)
{
    load_gen g;
    pthread_t t;
    gf_store *s = load_start(&g, &t);
    char *argv[] = {"/proc/self/exe", "--reader", dbpath, "1.5", NULL};
    char *errs = NULL;
    int rc = gf_test_run_cmd(argv, NULL, &errs, 60);
    load_stop(&g, t);
    ck_assert_msg(rc == 0, "reader failed: exit %d: %s", rc, errs);
    free(errs);
    ck_assert_uint_gt(g.records, 1000);
    gf_err err;
    ck_assert_int_eq(gf_store_flush(s, &err), GF_OK);
    gf_store_stats stats;
    gf_store_stats_get(s, &stats);
    ck_assert_uint_eq(stats.lost, 0);
    ck_assert_uint_eq(stats.rejected, 0);
    st_close(s);
}
END_TEST

/* `sqlite3 gpufaas.db 'select * from v_placement'`, exactly as an operator
 * types it, while the server writes as fast as it can. */
START_TEST(test_sqlite3_cli_during_writes)
{
    const char *cli = gf_test_prog("GF_SQLITE3");
    load_gen g;
    pthread_t t;
    gf_store *s = load_start(&g, &t);
    ck_assert_int_eq(chdir(tmpdir), 0);
    for (int i = 0; i < 15; i++) {
        char *argv[] = {(char *)cli, "gpufaas.db", "select * from v_placement", NULL};
        char *out = NULL, *errs = NULL;
        int rc = gf_test_run_cmd(argv, &out, &errs, 30);
        ck_assert_msg(rc == 0 && errs[0] == '\0', "run %d: exit %d, stderr: %s", i, rc, errs);
        ck_assert_msg(strstr(out, "resnet50|2|1|device|0|cuda:0|ready|") != NULL, "%s", out);
        free(out);
        free(errs);
        char *argv2[] = {(char *)cli, "gpufaas.db", "select count(*) from invocations", NULL};
        rc = gf_test_run_cmd(argv2, &out, &errs, 30);
        ck_assert_msg(rc == 0 && errs[0] == '\0', "count: exit %d, stderr: %s", rc, errs);
        free(out);
        free(errs);
    }
    load_stop(&g, t);
    st_close(s);
}
END_TEST

/* v_function_slo and v_residency against the populated database, through the
 * sqlite3 tool: resnet50 v2's 100 requests have a 50 ms SLO (1..100 ms,
 * every 20th from the 8th a timeout, every 10th cold), bert-base is pinned
 * at run time. */
START_TEST(test_slo_and_residency_views)
{
    const char *cli = gf_test_prog("GF_SQLITE3");
    gf_store *s = st_open(dbpath, NULL);
    st_populate(s, tmpdir);
    static const struct {
        const char *sql, *want;
    } q[] = {
        {"SELECT requests, with_slo, met, missed, met_pct, cold, missed_cold, missed_queue, "
         "missed_exec, missed_failed, slo_ms FROM v_function_slo WHERE function = 'resnet50' "
         "AND version = 2",
         "100|100|47|53|47.0|10|5|0|43|5|50.0\n"},
        {"SELECT COUNT(*) FROM v_function_slo WHERE function = 'bert-base' AND with_slo = 0",
         "1\n"},
        {"SELECT function, pin, priority, keep_warm_s, source FROM v_residency "
         "ORDER BY function",
         "bert-base|1|high|30.0|api\nmlp-small|0|normal|0|manifest\n"
         "resnet50|0|normal|0|manifest\n"},
    };
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        char *argv[] = {(char *)cli, dbpath, (char *)q[i].sql, NULL};
        char *out = NULL, *errs = NULL;
        int rc = gf_test_run_cmd(argv, &out, &errs, 30);
        ck_assert_msg(rc == 0 && errs[0] == '\0', "'%s': exit %d, %s", q[i].sql, rc, errs);
        ck_assert_msg(strcmp(out, q[i].want) == 0, "'%s' printed '%s', want '%s'", q[i].sql, out,
                      q[i].want);
        free(out);
        free(errs);
    }
    st_close(s);
}
END_TEST

/* ---- docs/operations.md ----------------------------------------------------- */

/* The ```sh blocks of text that run sqlite3, in order (malloc'd strings). */
static size_t doc_recipes(char *text, char **out, size_t max)
{
    size_t n = 0;
    char *p = text;
    while ((p = strstr(p, "\n```sh\n")) != NULL && n < max) {
        char *body = p + 7;
        char *end = strstr(body, "\n```");
        ck_assert_ptr_nonnull(end);
        *end = '\0';
        if (strstr(body, "sqlite3") != NULL)
            out[n++] = body;
        p = end + 1;
    }
    return n;
}

START_TEST(test_operations_recipes_run)
{
    const char *cli = gf_test_prog("GF_SQLITE3");
    const char *root = gf_test_prog("GF_SOURCE_ROOT");
    char *doc_path = gf_test_path(root, "docs/operations.md");
    char *text = gf_test_read_file(doc_path, NULL);
    ck_assert_msg(text != NULL, "cannot read %s", doc_path);

    gf_store *s = st_open(dbpath, NULL);
    st_populate(s, tmpdir);

    /* the recipes find sqlite3 on PATH and the file in $DB */
    char *dir = strdup(cli);
    *strrchr(dir, '/') = '\0';
    const char *old_path = getenv("PATH");
    char *path = malloc(strlen(dir) + strlen(old_path ? old_path : "") + 2);
    sprintf(path, "%s:%s", dir, old_path ? old_path : "");
    setenv("PATH", path, 1);
    setenv("DB", dbpath, 1);

    char *recipes[64];
    size_t n = doc_recipes(text, recipes, 64);
    ck_assert_msg(n >= 12, "only %zu sqlite3 recipes found in %s", n, doc_path);
    for (size_t i = 0; i < n; i++) {
        char *argv[] = {"/bin/sh", "-ec", recipes[i], NULL};
        char *out = NULL, *errs = NULL;
        int rc = gf_test_run_cmd(argv, &out, &errs, 30);
        ck_assert_msg(rc == 0 && errs[0] == '\0', "recipe %zu failed (exit %d):\n%s\nstderr: %s",
                      i + 1, rc, recipes[i], errs);
        /* sqlite3 prints nothing (not even the header) for an empty result:
         * every recipe must find rows in the populated database */
        ck_assert_msg(out[0] != '\0', "recipe %zu printed nothing:\n%s", i + 1, recipes[i]);
        free(out);
        free(errs);
    }
    st_close(s);
    free(path);
    free(dir);
    free(text);
    free(doc_path);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--reader") == 0)
        reader_child(argv[2], atof(argv[3]));
    Suite *su = suite_create("store_procs");
    TCase *tc = tcase_create("procs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, test_crash_safety);
    tcase_add_test(tc, test_reader_process_during_writes);
    if (getenv("GF_SQLITE3") != NULL) {
        tcase_add_test(tc, test_sqlite3_cli_during_writes);
        tcase_add_test(tc, test_operations_recipes_run);
        tcase_add_test(tc, test_slo_and_residency_views);
    } else {
        fprintf(stderr, "sqlite3 not found: the command-line tests do not run\n");
    }
    suite_add_tcase(su, tc);
    return gf_test_run_suite(su);
}
