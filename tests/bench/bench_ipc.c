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
 * Prints key=value lines; never fails on speed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/tensor.h"
#include "wharness.h"

#define WARMUP 500
#define ROUNDS 20000

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void die(const char *what, const gf_err *e)
{
    fprintf(stderr, "bench_ipc: %s: %s\n", what, e != NULL ? gf_err_msg(e) : "failed");
    exit(1);
}

/* Send what is in w->out and read the answer (EVENTs skipped). */
static void round_trip(gf_wh *w, gf_ipc_frame *f, gf_ipc_type want)
{
    gf_err e;
    gf_err_clear(&e);
    if (gf_wh_send(w, &e) != GF_OK)
        die("send", &e);
    if (gf_wh_recv(w, f, 30000, &e) != GF_OK)
        die("recv", &e);
    if (f->h.type != (uint32_t)want) {
        gf_ipc_error er;
        if (f->h.type == GF_IPC_ERROR && gf_ipc_decode_error(f, &er, NULL) == GF_OK)
            fprintf(stderr, "bench_ipc: ERROR %u: %s\n", er.code, er.message);
        die(gf_ipc_type_name(f->h.type), NULL);
    }
}

int main(int argc, char **argv)
{
    const char *device = argc > 1 ? argv[1] : "cpu";
    const char *exe = argc > 2 ? argv[2] : getenv("GF_WORKER");
    if (exe == NULL) {
        fprintf(stderr, "usage: bench_ipc [cpu|cuda:N] WORKER_PATH (or set GF_WORKER)\n");
        return 2;
    }
    char dir[] = "/tmp/gfbench.XXXXXX";
    if (mkdtemp(dir) == NULL)
        die("mkdtemp", NULL);
    char weights[64];
    snprintf(weights, sizeof weights, "%s/tiny.safetensors", dir);
    gf_err e;
    gf_err_clear(&e);
    gf_wh_mlp m;
    int64_t dims[] = {16, 32, 4};
    gf_wh_mlp_make(&m, 1, 2, dims, false, 8);
    if (gf_wh_mlp_write(&m, weights, &e) != GF_OK)
        die("writing the model", &e);
    char *manifest = gf_wh_mlp_manifest(&m, "tiny");

    const char *extra[] = {"--device",    device,          "--device-memory",
                           "256M",        "--host-memory", "64M",
                           "--log-level", "warn",          NULL};
    gf_wh w;
    if (gf_wh_spawn(&w, exe, dir, extra, NULL, true, 60000, &e) != GF_OK)
        die("starting the worker", &e);
    printf("device=%s\n", w.ready.device_name);

    gf_ipc_frame f;
    gf_ipc_load l = {"tiny@1", manifest, (uint32_t)strlen(manifest),
                     weights,  "",       GF_IPC_TIER_DEVICE};
    if (gf_ipc_encode_load(&w.out, gf_wh_id(&w), &l, &e) != GF_OK)
        die("LOAD", &e);
    round_trip(&w, &f, GF_IPC_LOADED);
    gf_ipc_frame_deinit(&f);

    float x[16];
    for (int i = 0; i < 16; i++)
        x[i] = (float)i / 16.0f;
    gf_ipc_tensor t = {.name = "x"};
    if (gf_tensor_init(&t.t, GF_DT_F32, 2, (int64_t[]){1, 16}, x, GF_MEM_HOST, -1, &e) != GF_OK)
        die("tensor", &e);
    gf_ipc_infer req = {"tiny@1", 1, &t};
    double q_sum = 0, x_sum = 0; /* the worker's own queue and exec times */
    double *lat = malloc(sizeof(double) * ROUNDS);
    double *ping = malloc(sizeof(double) * ROUNDS);
    if (lat == NULL || ping == NULL)
        die("malloc", NULL);

    for (int i = 0; i < WARMUP + ROUNDS; i++) {
        double t0 = now_us();
        if (gf_ipc_encode_infer(&w.out, gf_wh_id(&w), &req, &e) != GF_OK)
            die("INFER", &e);
        round_trip(&w, &f, GF_IPC_RESULT);
        gf_ipc_result r;
        if (gf_ipc_decode_result(&f, &r, &e) != GF_OK || r.n != 1)
            die("RESULT", &e);
        double t1 = now_us();
        if (i >= WARMUP) {
            q_sum += (double)r.queue_us;
            x_sum += (double)r.exec_us;
        }
        gf_ipc_result_deinit(&r);
        gf_ipc_frame_deinit(&f);
        if (i >= WARMUP)
            lat[i - WARMUP] = t1 - t0;
    }
    for (int i = 0; i < WARMUP + ROUNDS; i++) {
        double t0 = now_us();
        if (gf_ipc_encode_empty(&w.out, GF_IPC_PING, gf_wh_id(&w), &e) != GF_OK)
            die("PING", &e);
        round_trip(&w, &f, GF_IPC_PONG);
        gf_ipc_frame_deinit(&f);
        if (i >= WARMUP)
            ping[i - WARMUP] = now_us() - t0;
    }

    double sum = 0;
    for (int i = 0; i < ROUNDS; i++)
        sum += lat[i];
    qsort(lat, ROUNDS, sizeof *lat, cmp_d);
    qsort(ping, ROUNDS, sizeof *ping, cmp_d);
    printf("rounds=%d\n", ROUNDS);
    printf("ipc_p50_us=%.1f\n", lat[ROUNDS / 2]);
    printf("ipc_p99_us=%.1f\n", lat[ROUNDS * 99 / 100]);
    printf("ipc_mean_us=%.1f\n", sum / ROUNDS);
    printf("ping_p50_us=%.1f\n", ping[ROUNDS / 2]);
    printf("worker_queue_mean_us=%.1f\n", q_sum / ROUNDS);
    printf("worker_exec_mean_us=%.1f\n", x_sum / ROUNDS);

    if (gf_ipc_encode_empty(&w.out, GF_IPC_SHUTDOWN, gf_wh_id(&w), &e) != GF_OK ||
        gf_wh_send(&w, &e) != GF_OK)
        die("SHUTDOWN", &e);
    int code = gf_wh_wait(&w, 30000, false);
    gf_wh_free(&w);
    free(lat);
    free(ping);
    free(manifest);
    gf_wh_mlp_free(&m);
    unlink(weights);
    char derived[96];
    snprintf(derived, sizeof derived, "%s/derived", dir);
    rmdir(derived);
    rmdir(dir);
    return code == 0 ? 0 : 1;
}
