/* Benchmark: a server's state at scale (issue 15), against real `gpufaas
 * serve` processes on loopback with cpu workers.
 *
 *   bench_state restart GPUFAAS WORKER [OLD_GPUFAAS OLD_WORKER]
 *     Deploys 100 functions totalling >= 4 GB (random FP32 weights, every
 *     byte written: no sparse files), stops the server, and times how long a
 *     start takes until GET /v2/health/ready answers 200 (the median of 3).
 *     With OLD_GPUFAAS, the same for that build (the commit before the
 *     change: tests/bench/bench_state.sh builds it) on a copy of the
 *     database pointing at the same files, for the ratio.
 *       restart_ready_s, restart_ready_s_before, restart_speedup,
 *       restart_functions, restart_gb.  Target: restart_ready_s < 2.
 *   bench_state upload GPUFAAS WORKER [OLD_GPUFAAS OLD_WORKER]
 *     A 2 GB deploy over loopback (curl's multipart upload, streamed from
 *     the file), from the request to the 201, to a fresh server; three
 *     rounds, each first timing what the disk does on its own (dd of as many
 *     bytes: through the page cache and synced, and direct), then this
 *     build, then OLD_GPUFAAS when given; medians. Also the CPU seconds of the
 *     gateway process and of the client (this process).
 *       upload_mb_per_s, upload_mb, upload_s, upload_server_cpu_s,
 *       upload_client_cpu_s, disk_mb_per_s, disk_direct_mb_per_s,
 *       upload_vs_disk, upload_vs_disk_direct; with OLD: upload_mb_per_s_before,
 *       upload_server_cpu_s_before, upload_speedup.  Target >= 500.
 *   bench_state store GPUFAAS WORKER
 *     Refused inference traffic (404: a function that does not exist) offered
 *     at 20,000 requests/s for 5 s; every answer must become an invocations
 *     row and none may be dropped.
 *       store_offered_rps, store_answered_rps, store_rows_per_s,
 *       store_rows_ratio (rows / answers, 1 when none is lost),
 *       store_dropped (gpufaas_store_records_total{outcome="dropped"}).
 *
 * Everything is written under $TMPDIR (or /tmp) and removed at the end.
 * Prints key=value lines; never fails on speed, fails on a wrong answer. */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "httpharness.h"
#include "loadgen.h"

#define IN 64
#define OUT 10

static void die(const char *fmt, const char *arg)
{
    fprintf(stderr, "bench_state: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    exit(1);
}

static char *tmpdir_make(const char *tag)
{
    const char *base = getenv("TMPDIR");
    char *d = NULL;
    if (asprintf(&d, "%s/gfbench%s.XXXXXX", base != NULL && base[0] ? base : "/tmp", tag) < 0 ||
        mkdtemp(d) == NULL)
        die("mkdtemp failed (%s)", tag);
    return d;
}

static void rmtree(const char *dir)
{
    char *cmd = NULL;
    if (asprintf(&cmd, "rm -rf '%s'", dir) >= 0 && system(cmd) != 0)
        fprintf(stderr, "bench_state: could not remove %s\n", dir);
    free(cmd);
}

/* ---- model files: an mlp IN -> hidden -> OUT, streamed to disk ---------------- */

/* Write a safetensors file of an nn.Sequential(Linear(IN, h), ReLU, Linear(h, OUT))
 * with random FP32 weights from seed, and its manifest; returns the bytes
 * written. Every byte is written: no holes. */
static uint64_t write_mlp(const char *weights, const char *manifest, const char *name,
                          int64_t h, uint64_t seed)
{
    int64_t n[4] = {h * IN, h, OUT * h, OUT};
    char header[1024];
    uint64_t off = 0, ends[4];
    for (int i = 0; i < 4; i++)
        ends[i] = (off += (uint64_t)n[i] * 4);
    int hl = snprintf(header, sizeof header,
                      "{\"0.weight\":{\"dtype\":\"F32\",\"shape\":[%lld,%d],\"data_offsets\":[0,%llu]},"
                      "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[%lld],\"data_offsets\":[%llu,%llu]},"
                      "\"2.weight\":{\"dtype\":\"F32\",\"shape\":[%d,%lld],\"data_offsets\":[%llu,%llu]},"
                      "\"2.bias\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%llu,%llu]}}",
                      (long long)h, IN, (unsigned long long)ends[0], (long long)h,
                      (unsigned long long)ends[0], (unsigned long long)ends[1], OUT, (long long)h,
                      (unsigned long long)ends[1], (unsigned long long)ends[2], OUT,
                      (unsigned long long)ends[2], (unsigned long long)ends[3]);
    while (hl % 8 != 0)
        header[hl++] = ' ';
    FILE *f = fopen(weights, "wb");
    if (f == NULL)
        die("cannot create %s", weights);
    uint64_t len = (uint64_t)hl;
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(len >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(header, 1, (size_t)hl, f);
    /* uniform in about +-1/sqrt(fan in): a mantissa of random bits under a
     * fixed small exponent */
    enum { CHUNK = 1 << 18 };
    uint32_t *buf = malloc(CHUNK * sizeof *buf);
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (uint64_t left = off / 4; left > 0;) {
        size_t k = left < CHUNK ? (size_t)left : CHUNK;
        for (size_t i = 0; i < k; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[i] = (uint32_t)(0x3c000000u | (x & 0x807fffffu)); /* +-[2^-7, 2^-6) */
        }
        if (fwrite(buf, 4, k, f) != k)
            die("cannot write %s (disk full?)", weights);
        left -= k;
    }
    free(buf);
    if (fclose(f) != 0)
        die("cannot write %s", weights);
    FILE *m = fopen(manifest, "w");
    if (m == NULL)
        die("cannot create %s", manifest);
    fprintf(m,
            "{\"name\":\"%s\",\"kind\":\"mlp\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
            "\"shape\":[-1,%d]}],\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":"
            "[-1,%d]}],\"max_batch_size\":8,\"config\":{\"activations\":[\"relu\",\"identity\"]}}",
            name, IN, OUT);
    fclose(m);
    return 8 + (uint64_t)hl + off;
}

/* ---- a server ---------------------------------------------------------------------- */

static void start(gf_hh_server *s, const char *dir, const char *gpufaas, const char *worker,
                  const char *state)
{
    gf_hh_server_init(s, dir);
    snprintf(s->state, sizeof s->state, "%s", state);
    /* the device budget holds the upload benchmark's 2 GB function (a deploy
     * that could never fit a worker is refused) */
    const char *log = getenv("GF_BENCH_LOG") != NULL ? getenv("GF_BENCH_LOG") : "warn";
    const char *args[] = {"--devices", "cpu:1", "--worker", worker, "--log-level", log,
                          "--device-memory", "3G", "--host-memory", "3G",
                          "--state-dir", state, NULL};
    char msg[256];
    if (gf_hh_server_start(s, gpufaas, args, 600, msg, sizeof msg) != 0) {
        gf_hh_server_dump_log(s, 4000);
        die("%s", msg);
    }
}

static void stop(gf_hh_server *s)
{
    if (gf_hh_server_stop(s, 60) != 0) {
        gf_hh_server_dump_log(s, 4000);
        die("%s", "the server did not stop cleanly");
    }
}

/* Seconds from starting `gpufaas serve` on state until it answers ready. */
static double ready_s(const char *dir, const char *gpufaas, const char *worker, const char *state)
{
    gf_hh_server s;
    double t0 = gf_lg_now();
    start(&s, dir, gpufaas, worker, state);
    for (;;) {
        gf_hh_resp r;
        long st = gf_hh_http(s.url, "GET", "/v2/health/ready", NULL, NULL, 0, false, &r);
        gf_hh_resp_free(&r);
        if (st == 200)
            break;
        if (gf_lg_now() - t0 > 900)
            die("%s", "the server was not ready within 15 minutes");
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    double t = gf_lg_now() - t0;
    gf_hh_thread_end();
    stop(&s);
    return t;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median3(const char *dir, const char *gpufaas, const char *worker, const char *state)
{
    double t[3];
    for (int i = 0; i < 3; i++)
        t[i] = ready_s(dir, gpufaas, worker, state);
    qsort(t, 3, sizeof t[0], cmp_d);
    return t[1];
}

/* ---- restart ---------------------------------------------------------------------- */

static int bench_restart(const char *gpufaas, const char *worker, const char *old_gpufaas,
                         const char *old_worker)
{
    enum { NF = 100 };
    const int64_t hidden = 136000; /* (64 + 10) * 136000 floats: 40.3 MB a function */
    char *dir = tmpdir_make("restart");
    char state[600], weights[700], manifest[700], name[32];
    snprintf(state, sizeof state, "%s/var", dir);
    gf_hh_server s;
    start(&s, dir, gpufaas, worker, state);
    uint64_t total = 0;
    for (int i = 0; i < NF; i++) {
        snprintf(name, sizeof name, "f%03d", i);
        snprintf(weights, sizeof weights, "%s/%s.safetensors", dir, name);
        snprintf(manifest, sizeof manifest, "%s/%s.json", dir, name);
        total += write_mlp(weights, manifest, name, hidden, (uint64_t)i + 1);
        gf_hh_resp r;
        long st = gf_hh_deploy(s.url, manifest, weights, NULL, &r);
        if (st != 201)
            die("deploy failed: %s", r.body.data != NULL ? r.body.data : "(no answer)");
        gf_hh_resp_free(&r);
        unlink(weights); /* the server has its copy */
    }
    gf_hh_thread_end();
    stop(&s);
    printf("restart_functions=%d\n", NF);
    printf("restart_gb=%.2f\n", (double)total / 1e9);
    fflush(stdout);
    double now = median3(dir, gpufaas, worker, state);
    printf("restart_ready_s=%.3f\n", now);
    fflush(stdout);
    if (old_gpufaas != NULL) {
        /* the build before the change, on a copy of the database (schema 1:
         * what it knows; the rows point at the same weights files) */
        char old_state[700], db[700], old_db[800];
        snprintf(old_state, sizeof old_state, "%s/var-before", dir);
        mkdir(old_state, 0755);
        snprintf(db, sizeof db, "%s/gpufaas.db", state);
        snprintf(old_db, sizeof old_db, "%s/gpufaas.db", old_state);
        sqlite3 *src = NULL, *dst = NULL;
        if (sqlite3_open(db, &src) != SQLITE_OK || sqlite3_open(old_db, &dst) != SQLITE_OK)
            die("%s", "cannot open the databases");
        sqlite3_backup *b = sqlite3_backup_init(dst, "main", src, "main");
        if (b == NULL || sqlite3_backup_step(b, -1) != SQLITE_DONE)
            die("%s", sqlite3_errmsg(dst));
        sqlite3_backup_finish(b);
        if (sqlite3_exec(dst, "PRAGMA user_version = 1", NULL, NULL, NULL) != SQLITE_OK)
            die("%s", sqlite3_errmsg(dst));
        sqlite3_close(src);
        sqlite3_close(dst);
        double before = ready_s(dir, old_gpufaas, old_worker, old_state);
        printf("restart_ready_s_before=%.3f\n", before);
        printf("restart_speedup=%.1f\n", before / now);
    }
    rmtree(dir);
    free(dir);
    return 0;
}

/* Seconds dd takes to write bytes of zeros to dst in 4 MiB blocks with
 * extra_flags (conv=fdatasync: through the page cache, then synced;
 * oflag=direct: straight to the disk): what this disk does on its own, now. */
static double dd_s(const char *dst, uint64_t bytes, const char *extra_flags)
{
    char *cmd = NULL;
    unsigned long long count = (bytes + (4u << 20) - 1) / (4u << 20);
    if (asprintf(&cmd, "dd if=/dev/zero of='%s' bs=4M count=%llu %s status=none", dst, count,
                 extra_flags) < 0)
        die("%s", "out of memory");
    double t0 = gf_lg_now();
    if (system(cmd) != 0)
        die("%s failed", cmd);
    double t = gf_lg_now() - t0;
    free(cmd);
    unlink(dst);
    return t;
}

/* CPU seconds (user + system) process pid has used so far; -1 when unknown. */
static double proc_cpu_s(pid_t pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    const char *p = strrchr(line, ')'); /* the command may hold spaces */
    unsigned long long ut, st;
    /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                            &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double self_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* ---- upload ----------------------------------------------------------------------- */

typedef struct {
    double s, server_cpu_s, client_cpu_s;
} upload_run;

/* One deploy of weights + manifest to a fresh server of gpufaas on its own
 * state dir (removed after). */
static upload_run upload_once(const char *dir, const char *gpufaas, const char *worker,
                              const char *weights, const char *manifest)
{
    char state[600];
    snprintf(state, sizeof state, "%s/var", dir);
    gf_hh_server s;
    start(&s, dir, gpufaas, worker, state);
    gf_hh_resp r;
    double server0 = proc_cpu_s(s.pid), client0 = self_cpu_s();
    double t0 = gf_lg_now();
    long st = gf_hh_deploy(s.url, manifest, weights, NULL, &r);
    upload_run u = {gf_lg_now() - t0, proc_cpu_s(s.pid) - server0, self_cpu_s() - client0};
    if (server0 < 0)
        u.server_cpu_s = -1;
    if (st != 201)
        die("the deploy failed: %s", r.body.data != NULL ? r.body.data : "(no answer)");
    gf_hh_resp_free(&r);
    gf_hh_thread_end();
    stop(&s);
    if (getenv("GF_BENCH_LOG") != NULL)
        gf_hh_server_dump_log(&s, 6000);
    rmtree(state);
    return u;
}

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof x[0], cmp_d);
    return x[n / 2];
}

static int bench_upload(const char *gpufaas, const char *worker, const char *old_gpufaas,
                        const char *old_worker)
{
    enum { ROUNDS = 3 };
    char *dir = tmpdir_make("upload");
    char weights[700], manifest[700];
    snprintf(weights, sizeof weights, "%s/big.safetensors", dir);
    snprintf(manifest, sizeof manifest, "%s/big.json", dir);
    const int64_t hidden = 6800000; /* (64 + 10) * 6.8M floats: 2.01 GB */
    uint64_t bytes = write_mlp(weights, manifest, "big", hidden, 7);
    double mb = (double)bytes / 1e6;
    char dd[700];
    snprintf(dd, sizeof dd, "%s/dd.bin", dir);
    /* rounds in turn: what the disk does on its own (same bytes, same file
     * system), this build, the build before; medians of each */
    double t[ROUNDS], scpu[ROUNDS], ccpu[ROUNDS], sync[ROUNDS], direct[ROUNDS], old[ROUNDS],
        oscpu[ROUNDS];
    for (int i = 0; i < ROUNDS; i++) {
        sync[i] = dd_s(dd, bytes, "conv=fdatasync");
        direct[i] = dd_s(dd, bytes, "oflag=direct conv=fdatasync");
        upload_run u = upload_once(dir, gpufaas, worker, weights, manifest);
        t[i] = u.s, scpu[i] = u.server_cpu_s, ccpu[i] = u.client_cpu_s;
        if (old_gpufaas != NULL) {
            u = upload_once(dir, old_gpufaas, old_worker, weights, manifest);
            old[i] = u.s, oscpu[i] = u.server_cpu_s;
        }
    }
    double tm = median(t, ROUNDS), dsync = median(sync, ROUNDS), ddirect = median(direct, ROUNDS);
    printf("upload_mb=%.0f\n", mb);
    printf("upload_s=%.3f\n", tm);
    printf("upload_mb_per_s=%.0f\n", mb / tm);
    printf("upload_server_cpu_s=%.3f (the gateway process: receive, hash, write)\n",
           median(scpu, ROUNDS));
    printf("upload_client_cpu_s=%.3f (libcurl reading and sending the file)\n",
           median(ccpu, ROUNDS));
    printf("disk_mb_per_s=%.0f (dd bs=4M conv=fdatasync, the same bytes)\n", mb / dsync);
    printf("disk_direct_mb_per_s=%.0f (dd bs=4M oflag=direct conv=fdatasync)\n", mb / ddirect);
    printf("upload_vs_disk=%.2f\n", dsync / tm);
    printf("upload_vs_disk_direct=%.2f\n", ddirect / tm);
    if (old_gpufaas != NULL) {
        double om = median(old, ROUNDS);
        printf("upload_mb_per_s_before=%.0f\n", mb / om);
        printf("upload_server_cpu_s_before=%.3f\n", median(oscpu, ROUNDS));
        printf("upload_speedup=%.2f\n", om / tm);
    }
    rmtree(dir);
    free(dir);
    return 0;
}

/* ---- the writer under refused traffic ------------------------------------------------ */

static double metric(const char *url, const char *sample)
{
    gf_hh_resp r;
    double v = -1;
    if (gf_hh_http(url, "GET", "/metrics", NULL, NULL, 0, false, &r) == 200) {
        const char *p = strstr(r.body.data, sample);
        if (p != NULL)
            v = atof(p + strlen(sample));
    }
    gf_hh_resp_free(&r);
    return v;
}

static int bench_store(const char *gpufaas, const char *worker)
{
    char *dir = tmpdir_make("store");
    char state[600];
    snprintf(state, sizeof state, "%s/var", dir);
    gf_hh_server s;
    start(&s, dir, gpufaas, worker, state);
    static const char body[] =
        "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,4],"
        "\"data\":[1,2,3,4]}]}";
    char req[512];
    int rl = snprintf(req, sizeof req,
                      "POST /v2/models/nope/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                      sizeof body - 1, body);
    static gf_lg g;
    g.req = req;
    g.req_len = (size_t)rl;
    g.expect = 404;
    g.rate = 20000;
    g.name = "bench_state";
    const double seconds = 5;
    uint16_t port = (uint16_t)atoi(strrchr(s.url, ':') + 1);
    gf_lg_run(&g, port, 32, 0, seconds);
    double answered = (double)g.n_total;
    sleep(2); /* the last group commit */
    char db[700];
    snprintf(db, sizeof db, "%s/gpufaas.db", state);
    sqlite3 *h = NULL;
    sqlite3_stmt *q = NULL;
    double rows = -1;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h, "SELECT count(*) FROM invocations WHERE http_code = 404", -1, &q,
                           NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        rows = (double)sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(h);
    double dropped = metric(s.url, "gpufaas_store_records_total{outcome=\"dropped\"} ");
    printf("store_offered_rps=%.0f\n", g.rate);
    printf("store_answered_rps=%.0f\n", answered / seconds);
    printf("store_rows_per_s=%.0f\n", rows / seconds);
    printf("store_rows_ratio=%.4f\n", answered > 0 ? rows / answered : 0);
    printf("store_dropped=%.0f\n", dropped);
    int rc = g.errors == 0 && rows == answered && dropped == 0 ? 0 : 1;
    if (rc != 0)
        fprintf(stderr, "bench_state: %ld unexpected answers, %.0f rows for %.0f answers, %.0f "
                "dropped\n", g.errors, rows, answered, dropped);
    gf_lg_free(&g);
    gf_hh_thread_end();
    stop(&s);
    rmtree(dir);
    free(dir);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench_state restart|upload|store GPUFAAS WORKER [OLD_GPUFAAS "
                        "OLD_WORKER]\n");
        return 2;
    }
    if (strcmp(argv[1], "restart") == 0)
        return bench_restart(argv[2], argv[3], argc > 5 ? argv[4] : NULL,
                             argc > 5 ? argv[5] : NULL);
    if (strcmp(argv[1], "upload") == 0)
        return bench_upload(argv[2], argv[3], argc > 5 ? argv[4] : NULL,
                            argc > 5 ? argv[5] : NULL);
    if (strcmp(argv[1], "store") == 0)
        return bench_store(argv[2], argv[3]);
    fprintf(stderr, "bench_state: unknown benchmark '%s'\n", argv[1]);
    return 2;
}
