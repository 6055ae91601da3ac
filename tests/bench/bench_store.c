/* Benchmark: the state database's writer and its request-path handover.
 *
 *   bench_store [records]        (default 1000000)
 *
 * writer_records_per_s: invocation records the store thread commits per
 *   second, in steady state: one producer hands records over as fast as it
 *   can (retrying when the queue is full), from the first handover until a
 *   flush returns. Retention is set to 100,000 rows, so the store also deletes
 *   old rows while it inserts, as a long-running server does. Target >=
 *   100,000/s.
 * handoff_ns: the request path's cost of handing one record over, timed over
 *   bursts of 8192 handovers that fit in the queue (so none is dropped), with
 *   the store thread committing meanwhile. Target < 1000 ns.
 * handoff_ns_2threads: the same with two producer threads at once.
 *
 * The database is a file in $TMPDIR (or /tmp), removed at the end. Prints
 * key=value lines; never fails on speed. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static gf_store_invocation record(uint64_t i)
{
    static const char *const names[] = {"resnet50", "bert-base", "mlp-small", "whisper-tiny"};
    gf_store_invocation r = {.function = names[i & 3],
                             .version = 1,
                             .worker = (int32_t)(i & 1),
                             .status = (i % 97) ? GF_OK : GF_ERR_TIMEOUT,
                             .http_code = (i % 97) ? 200 : 504,
                             .batch_size = 8,
                             .cold = (i % 50) == 0,
                             .queue_us = (int64_t)(i % 700),
                             .load_us = 0,
                             .exec_us = 1500,
                             .total_us = 2300 + (int64_t)(i % 1000)};
    return r;
}

enum { BURST = 8192, BURSTS = 64 };

typedef struct {
    gf_store *s;
    uint64_t base;
    double seconds; /* time spent in handovers */
    uint64_t calls, refused;
} producer;

/* One burst of handovers, timed. */
static void *burst_main(void *arg)
{
    producer *p = arg;
    gf_store_invocation recs[64];
    for (int i = 0; i < 64; i++)
        recs[i] = record(p->base + (uint64_t)i);
    double t0 = now();
    for (int i = 0; i < BURST; i++)
        if (gf_store_log_invocation(p->s, &recs[i & 63]) != GF_OK)
            p->refused++;
    p->seconds += now() - t0;
    p->calls += BURST;
    return NULL;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    if (n <= 0) {
        fprintf(stderr, "usage: bench_store [records]\n");
        return 2;
    }
    const char *tmp = getenv("TMPDIR");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/gfbench.XXXXXX", tmp != NULL && tmp[0] ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("bench_store: mkdtemp");
        return 1;
    }
    char *path = NULL;
    gf_err err;
    gf_store_config cfg;
    gf_store_config_default(&cfg);
    cfg.retain_rows = 100000;
    gf_store *s = NULL;
    if (gf_store_default_path(dir, &path, &err) != GF_OK ||
        gf_store_open(path, &cfg, &s, &err) != GF_OK) {
        fprintf(stderr, "bench_store: %s\n", err.msg);
        return 1;
    }

    /* writer throughput */
    gf_store_stats before, after;
    gf_store_stats_get(s, &before);
    double t0 = now();
    uint64_t waits = 0;
    for (long i = 0; i < n; i++) {
        gf_store_invocation r = record((uint64_t)i);
        while (gf_store_log_invocation(s, &r) == GF_ERR_BUSY) {
            waits++;
            sched_yield();
        }
    }
    if (gf_store_flush(s, &err) != GF_OK) {
        fprintf(stderr, "bench_store: flush: %s\n", err.msg);
        return 1;
    }
    double secs = now() - t0;
    gf_store_stats_get(s, &after);
    uint64_t committed = after.committed - before.committed;
    printf("records=%ld\n", n);
    printf("writer_seconds=%.3f\n", secs);
    printf("writer_transactions=%llu\n", (unsigned long long)(after.commits - before.commits));
    printf("writer_records_per_txn=%.0f\n",
           (double)committed / (double)(after.commits - before.commits));
    printf("writer_queue_full_retries=%llu\n", (unsigned long long)waits);
    printf("writer_records_per_s=%.0f\n", (double)committed / secs);

    /* handover cost, one producer, then two */
    producer one = {.s = s};
    for (int b = 0; b < BURSTS; b++) {
        one.base = (uint64_t)b * BURST;
        burst_main(&one);
        gf_store_flush(s, NULL);
    }
    printf("handoff_refused=%llu\n", (unsigned long long)one.refused);
    printf("handoff_ns=%.1f\n", one.seconds * 1e9 / (double)one.calls);

    producer two[2] = {{.s = s}, {.s = s}};
    for (int b = 0; b < BURSTS / 2; b++) {
        pthread_t t[2];
        for (int k = 0; k < 2; k++) {
            two[k].base = (uint64_t)(b * 2 + k) * BURST;
            pthread_create(&t[k], NULL, burst_main, &two[k]);
        }
        for (int k = 0; k < 2; k++)
            pthread_join(t[k], NULL);
        gf_store_flush(s, NULL);
    }
    double sum = two[0].seconds + two[1].seconds;
    printf("handoff_ns_2threads=%.1f\n", sum * 1e9 / (double)(two[0].calls + two[1].calls));

    gf_store_stats_get(s, &after);
    printf("dropped=%llu lost=%llu\n", (unsigned long long)after.dropped,
           (unsigned long long)after.lost);
    int rc = gf_store_close(s, &err) == GF_OK ? 0 : 1;
    char f[600];
    static const char *const suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        snprintf(f, sizeof f, "%s%s", path, suffix[i]);
        unlink(f);
    }
    rmdir(dir);
    free(path);
    return rc;
}
