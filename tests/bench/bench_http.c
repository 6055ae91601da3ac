/* Benchmark: the HTTP front under keep-alive load, and what it adds to the
 * worker round trip.
 *
 *   bench_http [GPUFAAS_PATH [WORKER_PATH [SECONDS [LEVELS]]]]
 *
 * Starts a real `gpufaas serve` (one cpu worker) on a free loopback port,
 * deploys a tiny mlp (16 -> 32 -> 4, FP32, max_queue_delay_us 0) over HTTP
 * and drives POST /v2/models/tiny/infer (batch 1, JSON) from a load
 * generator of its own: one thread, epoll, C keep-alive connections, one
 * request in flight per connection (no pipelining), each connection sending
 * its next request as soon as the answer is read (closed loop). Latency is
 * measured per request, from the write to the last byte of the answer.
 * SECONDS (default 3) are measured at each concurrency after 0.5 s of
 * warm-up. Every answer's status is checked, and one answer per concurrency
 * is compared with the model's naive reference. LEVELS (default 1,16,64)
 * lists the concurrencies; gateway_pid= and worker_pid= are printed before
 * the first, so a profiler can attach (perf record -p).
 *
 * Before that, the worker round trip alone (the same model on a
 * gpufaas-worker driven over its socketpair, as bench_ipc does).
 *
 *   rps_cN, p50_ms_cN, p50_us_cN, p99_ms_cN   requests/s and latency at N = 1, 16, 64
 *   device_allocs_per_request      the worker's device allocations per warm
 *                                  request (0: the request arena serves them)
 *   ipc_p50_us                     the worker round trip alone
 *   added_p50_us                   p50 at concurrency 1 minus ipc_p50_us: what
 *                                  HTTP, parsing, the batcher, the router and
 *                                  rendering add
 * Targets on 2 cores: rps_c64 >= 20000, p99_ms_c64 < 5, added_p50_us < 100.
 * The server, its worker and this load generator share the machine's cores.
 * Prints key=value lines; never fails on speed. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gf_config.h"
#include "httpharness.h"
#include "ipcrtt.h"
#include "loadgen.h"
#include "wharness.h"

#define IN 16
#define OUT 4
#define WARMUP_S 0.5

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_http: %s\n", what);
    exit(1);
}

/* ---- the run ---------------------------------------------------------------------- */

/* CPU time (user + system) a process has used so far, in microseconds; 0
 * when it cannot be read. */
static double cpu_us(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command may hold spaces */
    unsigned long long ut = 0, st = 0;
    if (p == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) * 1e6 / (double)sysconf(_SC_CLK_TCK);
}

/* Requests and batches sent to workers so far, from /metrics
 * (gpufaas_batch_size_sum and _count). */
static void batches(const char *url, double *reqs, double *n)
{
    gf_hh_resp r;
    *reqs = *n = 0;
    if (gf_hh_http(url, "GET", "/metrics", NULL, NULL, 0, false, &r) == 200) {
        /* labelled by function and version; earlier gateways (compare_http.sh
         * runs them) kept one histogram for all */
        static const char *const sums[] = {
            "\ngpufaas_batch_size_sum{function=\"tiny\",version=\"1\"} ",
            "\ngpufaas_batch_size_sum "};
        static const char *const cnts[] = {
            "\ngpufaas_batch_size_count{function=\"tiny\",version=\"1\"} ",
            "\ngpufaas_batch_size_count "};
        for (int i = 0; i < 2 && *n == 0; i++) {
            const char *s = strstr(r.body.data, sums[i]);
            const char *c = strstr(r.body.data, cnts[i]);
            if (s != NULL && c != NULL) {
                *reqs = strtod(s + strlen(sums[i]), NULL);
                *n = strtod(c + strlen(cnts[i]), NULL);
            }
        }
    }
    gf_hh_resp_free(&r);
}

/* The pid of worker 0, from GET /v1/workers. */
static pid_t worker_pid(const char *url)
{
    gf_hh_resp r;
    pid_t pid = 0;
    if (gf_hh_http(url, "GET", "/v1/workers", NULL, NULL, 0, false, &r) == 200) {
        json_t *j = json_loadb(r.body.data, r.body.len, 0, NULL);
        json_t *w = json_array_get(json_object_get(j, "workers"), 0);
        pid = (pid_t)json_integer_value(json_object_get(w, "pid"));
        json_decref(j);
    }
    gf_hh_resp_free(&r);
    return pid;
}

/* The sample answer holds the model's outputs for x. */
static bool sample_correct(const char *body, const gf_test_mlp *m, const float *x)
{
    float ref[OUT], got[OUT];
    gf_test_mlp_ref_f32(m, x, 1, ref);
    json_t *j = json_loads(body, 0, NULL);
    json_t *d = json_object_get(json_array_get(json_object_get(j, "outputs"), 0), "data");
    bool ok = json_array_size(d) == OUT;
    for (size_t i = 0; ok && i < OUT; i++)
        got[i] = (float)json_number_value(json_array_get(d, i));
    json_decref(j);
    return ok && gf_test_max_rel_err(got, ref, OUT) < 1e-4;
}

int main(int argc, char **argv)
{
    const char *gpufaas = argc > 1 ? argv[1] : GF_BUILD_DIR "/gateway/gpufaas";
    const char *worker = argc > 2 ? argv[2] : GF_BUILD_DIR "/runtime/worker/gpufaas-worker";
    double seconds = argc > 3 ? atof(argv[3]) : 3.0;
    int levels[8], n_levels = 0;
    const char *lv = argc > 4 ? argv[4] : "1,16,64";
    for (char *end; *lv != '\0' && n_levels < 8; lv = *end == ',' ? end + 1 : end) {
        long c = strtol(lv, &end, 10);
        if (end == lv || c < 1 || c > 4096)
            die("LEVELS: concurrencies 1-4096, comma-separated");
        levels[n_levels++] = (int)c;
    }
    if (seconds <= 0 || n_levels == 0)
        die("usage: bench_http [GPUFAAS_PATH [WORKER_PATH [SECONDS [LEVELS]]]]");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);

    /* the worker round trip alone, first, with nothing else running */
    gf_ipcrtt ipc;
    if (gf_ipcrtt_run("cpu", worker, 500, 20000, &ipc) != 0)
        die("the worker round trip failed");

    char dir[] = "/tmp/gfbenchhttp.XXXXXX";
    if (mkdtemp(dir) == NULL)
        die("mkdtemp failed");
    gf_test_mlp m;
    int64_t dims[] = {IN, 32, OUT};
    gf_test_mlp_make(&m, 1, 2, dims, false, 64);
    char weights[96], manifest[96];
    snprintf(weights, sizeof weights, "%s/tiny.safetensors", dir);
    snprintf(manifest, sizeof manifest, "%s/tiny.json", dir);
    gf_err e;
    if (gf_test_mlp_write(&m, weights, GF_DT_F32, &e) != GF_OK)
        die("writing the model failed");
    /* the harness's manifest, answering at once instead of waiting for a batch */
    char *mtext = gf_test_mlp_manifest(&m, "tiny");
    json_t *mj = json_loads(mtext, 0, NULL);
    free(mtext);
    json_object_set_new(mj, "max_queue_delay_us", json_integer(0));
    if (mj == NULL || json_dump_file(mj, manifest, JSON_COMPACT) != 0)
        die("writing the manifest failed");
    json_decref(mj);

    gf_hh_server srv;
    gf_hh_server_init(&srv, dir);
    const char *args[] = {"--devices", "cpu:1", "--worker", worker, "--log-level", "warn", NULL};
    char msg[256];
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (gf_hh_server_start(&srv, gpufaas, args, 60, msg, sizeof msg) != 0) {
        gf_hh_server_dump_log(&srv, 4000);
        die(msg);
    }
    gf_hh_resp r;
    if (gf_hh_deploy(srv.url, manifest, weights, NULL, &r) != 201)
        die("the deploy failed");
    gf_hh_resp_free(&r);
    pid_t wpid = worker_pid(srv.url);
    gf_hh_thread_end();

    float x[IN];
    char body[512];
    int bl = snprintf(
        body, sizeof body,
        "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,%d],\"data\":[", IN);
    for (int i = 0; i < IN; i++) {
        x[i] = (float)i / 16.0f - 0.5f;
        bl += snprintf(body + bl, sizeof body - (size_t)bl, "%s%.9g", i ? "," : "", (double)x[i]);
    }
    bl += snprintf(body + bl, sizeof body - (size_t)bl, "]}]}");
    char req[1024];
    int rl = snprintf(req, sizeof req,
                      "POST /v2/models/tiny/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
                      bl, body);
    uint16_t port = (uint16_t)atoi(strrchr(srv.url, ':') + 1);

    printf("device=%s\n", ipc.device_name);
    printf("cores=%ld (gpufaas serve, its worker and this load generator share them)\n", cores);
    printf("seconds=%.1f\n", seconds);
    printf("ipc_p50_us=%.1f\n", ipc.p50_us);
    printf("ipc_p99_us=%.1f\n", ipc.p99_us);
    printf("device_allocs_per_request=%g\n", ipc.device_allocs_per_request);
    printf("device_frees_per_request=%g\n", ipc.device_frees_per_request);
    printf("gateway_pid=%d\nworker_pid=%d\n", (int)srv.pid, (int)wpid);
    fflush(stdout);
    static gf_lg g;
    g.req = req;
    g.req_len = (size_t)rl;
    g.expect = 200;
    g.name = "bench_http";
    double p50_c1 = 0;
    int rc = 0;
    for (int l = 0; l < n_levels; l++) {
        int c = levels[l];
        double breq0, bn0, breq1, bn1;
        batches(srv.url, &breq0, &bn0);
        double gw0 = cpu_us(srv.pid), wk0 = wpid > 0 ? cpu_us(wpid) : 0;
        size_t done0 = g.n_total;
        gf_lg_run(&g, port, c, WARMUP_S, seconds);
        double answered = (double)(g.n_total - done0);
        if (g.n_lat == 0)
            die("no request completed");
        qsort(g.lat, g.n_lat, sizeof *g.lat, cmp_d);
        double p50 = g.lat[g.n_lat / 2], p99 = g.lat[g.n_lat * 99 / 100];
        if (c == 1)
            p50_c1 = p50;
        printf("rps_c%d=%.0f\n", c, (double)g.n_lat / seconds);
        printf("p50_ms_c%d=%.3f\n", c, p50 * 1e3);
        printf("p50_us_c%d=%.1f\n", c, p50 * 1e6);
        printf("p99_ms_c%d=%.3f\n", c, p99 * 1e3);
        /* CPU time per request: steadier than latency on a shared machine */
        printf("gateway_cpu_us_per_req_c%d=%.1f\n", c, (cpu_us(srv.pid) - gw0) / answered);
        if (wpid > 0)
            printf("worker_cpu_us_per_req_c%d=%.1f\n", c, (cpu_us(wpid) - wk0) / answered);
        batches(srv.url, &breq1, &bn1);
        if (bn1 > bn0)
            printf("batch_mean_c%d=%.2f\n", c, (breq1 - breq0) / (bn1 - bn0));
        if (g.errors > 0 || !g.have_sample || !sample_correct(g.sample, &m, x)) {
            printf("errors_c%d=%ld%s\n", c, g.errors, g.have_sample ? "" : " (no answer to check)");
            rc = 1;
        }
        fflush(stdout);
    }
    if (p50_c1 > 0)
        printf("added_p50_us=%.1f\n", p50_c1 * 1e6 - ipc.p50_us);
    gf_hh_thread_end();

    int st = gf_hh_server_stop(&srv, 30);
    if (st != 0) {
        gf_hh_server_dump_log(&srv, 4000);
        rc = 1;
    }
    curl_global_cleanup();
    gf_lg_free(&g);
    gf_test_mlp_free(&m);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        rc = 1;
    return rc;
}
