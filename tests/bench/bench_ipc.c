/* Benchmark: INFER round trip over the worker protocol (no HTTP).
 *
 *   bench_ipc [cpu|cuda:N] [WORKER_PATH]
 *
 * Starts a real gpufaas-worker (WORKER_PATH, else $GF_WORKER) on a
 * socketpair, loads a tiny mlp (16 -> 32 -> 4, batch 1) onto the device and
 * measures, from this side of the socket, the time from writing an INFER to
 * having read and decoded its RESULT.
 *
 * ipc_p50_us, ipc_p99_us   INFER round trip percentiles. Target p50 < 50 on cpu.
 * ipc_mean_us              its mean
 * ping_p50_us              PING -> PONG: the socket round trip and the reader alone
 * worker_queue_mean_us     RESULT's queue_us: receipt by the reader to the
 *                          start on the executor (the thread hand-off)
 * worker_exec_mean_us      RESULT's exec_us: the function itself
 * warm_overhead_us         ipc_mean_us - worker_exec_mean_us: what a warm
 *                          request costs beyond its function
 * device_allocs_per_request, device_frees_per_request
 *                          the worker's device allocator over warm requests
 *                          (its STATS): 0, the request arena serves them
 * Prints key=value lines; never fails on speed. */
#include <stdio.h>
#include <stdlib.h>

#include "ipcrtt.h"

#define WARMUP 500
#define ROUNDS 20000

int main(int argc, char **argv)
{
    const char *device = argc > 1 ? argv[1] : "cpu";
    const char *exe = argc > 2 ? argv[2] : getenv("GF_WORKER");
    if (exe == NULL) {
        fprintf(stderr, "usage: bench_ipc [cpu|cuda:N] WORKER_PATH (or set GF_WORKER)\n");
        return 2;
    }
    gf_ipcrtt r;
    if (gf_ipcrtt_run(device, exe, WARMUP, ROUNDS, &r) != 0)
        return 1;
    printf("device=%s\n", r.device_name);
    printf("rounds=%d\n", r.rounds);
    printf("ipc_p50_us=%.1f\n", r.p50_us);
    printf("ipc_p99_us=%.1f\n", r.p99_us);
    printf("ipc_mean_us=%.1f\n", r.mean_us);
    printf("ping_p50_us=%.1f\n", r.ping_p50_us);
    printf("worker_queue_mean_us=%.1f\n", r.queue_mean_us);
    printf("worker_exec_mean_us=%.1f\n", r.exec_mean_us);
    printf("device_allocs_per_request=%g\n", r.device_allocs_per_request);
    printf("device_frees_per_request=%g\n", r.device_frees_per_request);
    /* what a warm request costs beyond the function itself: the socket, the
     * codec, the reader and executor, the lease and the copies in and out */
    printf("warm_overhead_us=%.1f\n", r.mean_us - r.exec_mean_us);
    return 0;
}
