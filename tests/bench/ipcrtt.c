/* gpufaas benchmarks — the worker round trip alone (see ipcrtt.h). */
#include "ipcrtt.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/tensor.h"
#include "wharness.h"

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

/* Send what is in w->out and read the answer (EVENTs skipped) into *f, which
 * the caller deinits either way. Returns 0, or 1 after saying why. */
static int round_trip(gf_wh *w, gf_ipc_frame *f, gf_ipc_type want)
{
    gf_err e;
    gf_err_clear(&e);
    memset(f, 0, sizeof *f);
    if (gf_wh_send(w, &e) != GF_OK || gf_wh_recv(w, f, 30000, &e) != GF_OK) {
        fprintf(stderr, "ipcrtt: %s\n", gf_err_msg(&e));
        return 1;
    }
    if (f->h.type != (uint32_t)want) {
        gf_ipc_error er;
        if (f->h.type == GF_IPC_ERROR && gf_ipc_decode_error(f, &er, NULL) == GF_OK)
            fprintf(stderr, "ipcrtt: ERROR %u: %s\n", er.code, er.message);
        fprintf(stderr, "ipcrtt: got %s, wanted %s\n", gf_ipc_type_name(f->h.type),
                gf_ipc_type_name(want));
        return 1;
    }
    return 0;
}

/* Time rounds INFERs (after warmup) into lat; sums of the worker's times. */
static int time_infers(gf_wh *w, int warmup, int rounds, double *lat, double *q_sum, double *x_sum)
{
    float x[16];
    for (int i = 0; i < 16; i++)
        x[i] = (float)i / 16.0f;
    gf_ipc_tensor t = {.name = "x"};
    gf_err e;
    gf_err_clear(&e);
    if (gf_tensor_init(&t.t, GF_DT_F32, 2, (int64_t[]){1, 16}, x, GF_MEM_HOST, -1, &e) != GF_OK)
        return 1;
    gf_ipc_infer req = {"tiny@1", 1, &t, 0, 0, NULL};
    for (int i = 0; i < warmup + rounds; i++) {
        double t0 = now_us();
        gf_ipc_frame f;
        if (gf_ipc_encode_infer(&w->out, gf_wh_id(w), &req, &e) != GF_OK) {
            fprintf(stderr, "ipcrtt: INFER: %s\n", gf_err_msg(&e));
            return 1;
        }
        int bad = round_trip(w, &f, GF_IPC_RESULT);
        gf_ipc_result r;
        if (!bad && gf_ipc_decode_result(&f, &r, &e) != GF_OK) {
            fprintf(stderr, "ipcrtt: RESULT: %s\n", gf_err_msg(&e));
            bad = 1;
        } else if (!bad && r.n != 1) {
            fprintf(stderr, "ipcrtt: RESULT with %u outputs\n", (unsigned)r.n);
            gf_ipc_result_deinit(&r);
            bad = 1;
        }
        gf_ipc_frame_deinit(&f);
        if (bad)
            return 1;
        double t1 = now_us();
        if (i >= warmup) {
            *q_sum += (double)r.queue_us;
            *x_sum += (double)r.exec_us;
            lat[i - warmup] = t1 - t0;
        }
        gf_ipc_result_deinit(&r);
    }
    return 0;
}

static int time_pings(gf_wh *w, int warmup, int rounds, double *ping)
{
    gf_err e;
    gf_err_clear(&e);
    for (int i = 0; i < warmup + rounds; i++) {
        double t0 = now_us();
        gf_ipc_frame f;
        if (gf_ipc_encode_empty(&w->out, GF_IPC_PING, gf_wh_id(w), &e) != GF_OK)
            return 1;
        int bad = round_trip(w, &f, GF_IPC_PONG);
        gf_ipc_frame_deinit(&f);
        if (bad)
            return 1;
        if (i >= warmup)
            ping[i - warmup] = now_us() - t0;
    }
    return 0;
}

/* The worker's device allocation and free counters (its STATS). */
static int dev_counters(gf_wh *w, uint64_t *allocs, uint64_t *frees)
{
    gf_err e;
    gf_err_clear(&e);
    gf_ipc_frame f;
    if (gf_ipc_encode_empty(&w->out, GF_IPC_GET_STATS, gf_wh_id(w), &e) != GF_OK)
        return 1;
    int bad = round_trip(w, &f, GF_IPC_STATS);
    gf_ipc_stats s;
    if (!bad && gf_ipc_decode_stats(&f, &s, &e) != GF_OK)
        bad = 1;
    gf_ipc_frame_deinit(&f);
    if (bad)
        return 1;
    *allocs = s.device_allocs;
    *frees = s.device_frees;
    return 0;
}

int gf_ipcrtt_run(const char *device, const char *worker_exe, int warmup, int rounds,
                  gf_ipcrtt *out)
{
    int rc = 1;
    bool spawned = false;
    gf_wh w;
    gf_test_mlp m;
    int64_t dims[] = {16, 32, 4};
    gf_test_mlp_make(&m, 1, 2, dims, false, 8);
    char *manifest = gf_test_mlp_manifest(&m, "tiny");
    double *lat = malloc(sizeof(double) * (size_t)rounds);
    double *ping = malloc(sizeof(double) * (size_t)rounds);
    char dir[] = "/tmp/gfipcrtt.XXXXXX", weights[64] = "";
    memset(out, 0, sizeof *out);
    if (manifest == NULL || lat == NULL || ping == NULL || mkdtemp(dir) == NULL) {
        fprintf(stderr, "ipcrtt: out of memory or no temporary directory\n");
        goto done;
    }
    snprintf(weights, sizeof weights, "%s/tiny.safetensors", dir);
    gf_err e;
    gf_err_clear(&e);
    if (gf_test_mlp_write(&m, weights, GF_DT_F32, &e) != GF_OK) {
        fprintf(stderr, "ipcrtt: writing the model: %s\n", gf_err_msg(&e));
        goto done;
    }
    const char *extra[] = {"--device",    device,          "--device-memory",
                           "256M",        "--host-memory", "64M",
                           "--log-level", "warn",          NULL};
    if (gf_wh_spawn(&w, worker_exe, dir, extra, NULL, true, 60000, &e) != GF_OK) {
        fprintf(stderr, "ipcrtt: starting %s: %s\n", worker_exe, gf_err_msg(&e));
        gf_wh_free(&w);
        goto done;
    }
    spawned = true;
    snprintf(out->device_name, sizeof out->device_name, "%s", w.ready.device_name);
    gf_ipc_frame f;
    gf_ipc_load l = {"tiny@1", manifest, (uint32_t)strlen(manifest),
                     weights,  "",       GF_TIER_DEVICE};
    if (gf_ipc_encode_load(&w.out, gf_wh_id(&w), &l, &e) != GF_OK)
        goto done;
    int bad = round_trip(&w, &f, GF_IPC_LOADED);
    gf_ipc_frame_deinit(&f);
    double q_sum = 0, x_sum = 0;
    uint64_t a0, f0, a1, f1;
    double q2, x2;
    if (bad || time_infers(&w, warmup, rounds, lat, &q_sum, &x_sum) != 0 ||
        time_pings(&w, warmup, rounds, ping) != 0)
        goto done;
    /* warm now: what the device allocator does over `rounds` more requests */
    if (dev_counters(&w, &a0, &f0) != 0 || time_infers(&w, 0, rounds, ping, &q2, &x2) != 0 ||
        dev_counters(&w, &a1, &f1) != 0)
        goto done;
    out->device_allocs_per_request = (double)(a1 - a0) / rounds;
    out->device_frees_per_request = (double)(f1 - f0) / rounds;
    if (time_pings(&w, 0, rounds, ping) != 0)
        goto done;
    double sum = 0;
    for (int i = 0; i < rounds; i++)
        sum += lat[i];
    qsort(lat, (size_t)rounds, sizeof *lat, cmp_d);
    qsort(ping, (size_t)rounds, sizeof *ping, cmp_d);
    out->rounds = rounds;
    out->p50_us = lat[rounds / 2];
    out->p99_us = lat[(size_t)rounds * 99 / 100];
    out->mean_us = sum / rounds;
    out->ping_p50_us = ping[rounds / 2];
    out->queue_mean_us = q_sum / rounds;
    out->exec_mean_us = x_sum / rounds;
    if (gf_ipc_encode_empty(&w.out, GF_IPC_SHUTDOWN, gf_wh_id(&w), &e) == GF_OK &&
        gf_wh_send(&w, &e) == GF_OK && gf_wh_wait(&w, 30000, false) == 0)
        rc = 0;
done:
    if (spawned)
        gf_wh_free(&w); /* kills it if it still runs */
    free(lat);
    free(ping);
    free(manifest);
    gf_test_mlp_free(&m);
    if (weights[0] != '\0') {
        unlink(weights);
        char derived[96];
        snprintf(derived, sizeof derived, "%s/derived", dir);
        rmdir(derived);
        rmdir(dir);
    }
    return rc;
}
