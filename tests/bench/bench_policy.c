/* Benchmark: eviction policies under a skewed load, through the gateway core
 * with a real worker (no HTTP).
 *
 *   bench_policy [WORKER_PATH]
 *
 * 100 functions whose weights are 2, 4, 6 or 8 MiB (25 of each; every byte a
 * parameter the mlp kind uses), a device budget (48 MiB) that holds about 10
 * of them, a host tier (256 MiB) that holds about half, and a cpu worker
 * whose copy stream emulates a 1 GB/s link, so a swap-in costs what it would
 * over PCIe relative to the tiny compute. 2,000 requests from 4 closed-loop
 * clients pick functions with a Zipf(0.9) law (the same sequence for both
 * policies). For LRU and for GreedyDual-Size it prints:
 *   slo_attainment_lru / _gds   fraction of requests answered within 20 ms
 *   cold_fraction_lru / _gds    fraction whose parameters were not on the device
 *   mean_swap_ms_lru / _gds     mean load time of the cold requests
 *   p50_ms_*, p99_ms_*          latency
 * First, the small-model case: 100 functions of 20 KiB, a device budget of
 * four 2 MiB pages, every function called twice in turn:
 *   models_resident_small       second-round calls that found their model on
 *                               the device (100 when small models share pages)
 * Never fails on speed. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/safetensors.h"
#include "store/sha256.h"
#include "gateway/core/gateway.h"
#include "gf_config.h"

#define NFN 100
#define NREQ 2000
#define CLIENTS 4
#define SLO_US 20000
#define IN 16
#define OUT 4

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
    uint64_t lat[NREQ];
    uint64_t load[NREQ];
    int cold[NREQ];
    int failed;
} results;

typedef struct {
    results *r;
    int idx;
} slot;

static void on_done(void *arg, gf_gw_result *res)
{
    slot *s = arg;
    results *r = s->r;
    pthread_mutex_lock(&r->lock);
    if (res->status == GF_OK) {
        r->lat[s->idx] = res->total_us;
        r->load[s->idx] = res->load_us;
        r->cold[s->idx] = res->cold;
    } else {
        r->lat[s->idx] = UINT64_MAX;
        r->failed++;
        fprintf(stderr, "bench_policy: request failed: %s\n", res->message);
    }
    r->done++;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
    gf_gw_result_free(res);
    free(s);
}

static int zipf_pick(const double *cdf, double u)
{
    int lo = 0, hi = NFN - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

typedef struct {
    gf_gw *gw;
    results *r;
    const int *seq;
    int start, step;
} client;

static void *client_main(void *arg)
{
    client *c = arg;
    for (int i = c->start; i < NREQ; i += c->step) {
        char name[16];
        snprintf(name, sizeof name, "f%02d", c->seq[i]);
        gf_gw_tensor *in = calloc(1, sizeof *in);
        in->name = strdup("x");
        in->t.dtype = GF_DT_F32;
        in->t.rank = 2;
        in->t.shape[0] = 1;
        in->t.shape[1] = IN;
        in->t.nbytes = IN * sizeof(float);
        in->t.data = calloc(IN, sizeof(float));
        in->t.device_id = -1;
        slot *s = malloc(sizeof *s);
        s->r = c->r;
        s->idx = i;
        int before;
        pthread_mutex_lock(&c->r->lock);
        before = c->r->done;
        pthread_mutex_unlock(&c->r->lock);
        gf_gw_infer_req req = {.function = name,
                               .inputs = in,
                               .n_inputs = 1,
                               .done = on_done,
                               .done_arg = s};
        gf_err err;
        if (gf_gw_submit(c->gw, &req, &err) != GF_OK) {
            fprintf(stderr, "bench_policy: submit: %s\n", err.msg);
            exit(1);
        }
        /* closed loop: wait for this request */
        pthread_mutex_lock(&c->r->lock);
        while (c->r->lat[i] == 0 && c->r->done >= before)
            pthread_cond_wait(&c->r->cond, &c->r->lock);
        pthread_mutex_unlock(&c->r->lock);
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Deploy an mlp 16 -> h -> 4 named name (exits on failure). */
static void deploy_mlp(gf_gw *gw, const char *name, int64_t h)
{
    gf_err err;
    float *w0 = malloc((size_t)(h * IN) * sizeof(float));
    float *b0 = malloc((size_t)h * sizeof(float));
    float *w1 = malloc((size_t)(OUT * h) * sizeof(float));
    float b1[OUT] = {0.1f, 0.2f, 0.3f, 0.4f};
    for (int64_t i = 0; i < h * IN; i++)
        w0[i] = (float)((i * 37) % 19) / 190.0f - 0.05f;
    for (int64_t i = 0; i < h; i++)
        b0[i] = 0.01f;
    for (int64_t i = 0; i < OUT * h; i++)
        w1[i] = (float)((i * 13) % 17) / 170.0f - 0.05f;
    gf_st_wtensor ts[4] = {{"0.weight", GF_DT_F32, 2, (int64_t[]){h, IN}, w0},
                           {"0.bias", GF_DT_F32, 1, (int64_t[]){h}, b0},
                           {"2.weight", GF_DT_F32, 2, (int64_t[]){OUT, h}, w1},
                           {"2.bias", GF_DT_F32, 1, (int64_t[]){OUT}, b1}};
    char tmp[700], sha[GF_SHA256_HEX_LEN], mf[512];
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", gf_gw_upload_dir(gw), name);
    gf_st_write(tmp, ts, 4, NULL, 0, NULL);
    free(w0);
    free(b0);
    free(w1);
    uint64_t size;
    gf_sha256_file(tmp, sha, &size, NULL);
    snprintf(mf, sizeof mf,
             "{\"name\":\"%s\",\"kind\":\"mlp\",\"inputs\":[{\"name\":\"x\",\"datatype\":"
             "\"FP32\",\"shape\":[-1,%d]}],\"outputs\":[{\"name\":\"y\",\"datatype\":"
             "\"FP32\",\"shape\":[-1,%d]}],\"slo_ms\":%d}",
             name, IN, OUT, SLO_US / 1000);
    gf_gw_deploy_req dr = {.manifest = mf, .manifest_len = strlen(mf), .weights_tmp = tmp,
                           .sha256_hex = sha, .bytes = size};
    gf_gw_deployed out;
    if (gf_gw_deploy(gw, &dr, &out, &err) != GF_OK) {
        fprintf(stderr, "bench_policy: deploy: %s\n", err.msg);
        exit(1);
    }
    gf_buf_deinit(&out.json);
}

/* One request to function name, waited for: true when it was warm. */
static bool infer_one(gf_gw *gw, const char *name, results *r, int idx)
{
    gf_gw_tensor *in = calloc(1, sizeof *in);
    in->name = strdup("x");
    in->t.dtype = GF_DT_F32;
    in->t.rank = 2;
    in->t.shape[0] = 1;
    in->t.shape[1] = IN;
    in->t.nbytes = IN * sizeof(float);
    in->t.data = calloc(IN, sizeof(float));
    in->t.device_id = -1;
    slot *s = malloc(sizeof *s);
    s->r = r;
    s->idx = idx;
    pthread_mutex_lock(&r->lock);
    int before = r->done;
    pthread_mutex_unlock(&r->lock);
    gf_gw_infer_req req = {.function = name, .inputs = in, .n_inputs = 1, .done = on_done,
                           .done_arg = s};
    gf_err err;
    if (gf_gw_submit(gw, &req, &err) != GF_OK) {
        fprintf(stderr, "bench_policy: submit: %s\n", err.msg);
        exit(1);
    }
    pthread_mutex_lock(&r->lock);
    while (r->done == before)
        pthread_cond_wait(&r->cond, &r->lock);
    bool warm = r->lat[idx] != 0 && r->lat[idx] != UINT64_MAX && !r->cold[idx];
    pthread_mutex_unlock(&r->lock);
    return warm;
}

/* Small models: NFN functions of 20 KiB each and a device budget of four
 * 2 MiB pages. Each is called once, then once more: the second round's warm
 * answers are the models that stayed resident (one page each, only 4 could;
 * sharing pages, all of them fit in about one). */
static void run_small(const char *dir, const char *worker)
{
    char state[512];
    snprintf(state, sizeof state, "%s/state-small", dir);
    gf_gw_config cfg = {.state_dir = state, .devices = "cpu:1", .device_memory = 8u << 20,
                        .host_memory = 64u << 20, .worker_path = worker,
                        .queue_limit = 4096};
    gf_gw *gw;
    gf_err err;
    if (gf_gw_new(&cfg, &gw, &err) != GF_OK) {
        fprintf(stderr, "bench_policy: %s\n", err.msg);
        exit(1);
    }
    /* 16 -> 243 -> 4: 4 x (243 x 21 + 4) = 20,428 bytes of weights */
    for (int f = 0; f < NFN; f++) {
        char name[16];
        snprintf(name, sizeof name, "s%02d", f);
        deploy_mlp(gw, name, 243);
    }
    results *r = calloc(1, sizeof *r);
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    int warm = 0;
    for (int round = 0; round < 2; round++) {
        for (int f = 0; f < NFN; f++) {
            char name[16];
            snprintf(name, sizeof name, "s%02d", f);
            bool w = infer_one(gw, name, r, round * NFN + f);
            if (round == 1)
                warm += w;
        }
    }
    printf("small_models=%d small_model_bytes=20428 small_device_budget_mib=8 page_mib=2\n",
           NFN);
    printf("models_resident_small=%d\n", warm);
    if (r->failed)
        printf("failed_small=%d\n", r->failed);
    fflush(stdout);
    gf_gw_free(gw);
    free(r);
}

static void run(const char *dir, const char *worker, gf_evict_policy pol, const int *seq,
                const char *tag)
{
    char state[512];
    snprintf(state, sizeof state, "%s/state-%s", dir, tag);
    gf_gw_config cfg = {.state_dir = state, .devices = "cpu:1", .device_memory = 48u << 20,
                        .host_memory = 256u << 20, .worker_path = worker, .policy = pol,
                        .cpu_copy_bandwidth = 1000u * 1000u * 1000u, .queue_limit = 4096};
    gf_gw *gw;
    gf_err err;
    if (gf_gw_new(&cfg, &gw, &err) != GF_OK) {
        fprintf(stderr, "bench_policy: %s\n", err.msg);
        exit(1);
    }
    /* deploy the functions: an mlp 16 -> H -> 4 whose hidden width H makes
     * its weights 2, 4, 6 or 8 MiB (every byte is a parameter the kind uses,
     * so all of it swaps) */
    for (int f = 0; f < NFN; f++) {
        size_t mib = (size_t)(2 + 2 * (f % 4));
        char name[16];
        snprintf(name, sizeof name, "f%02d", f);
        deploy_mlp(gw, name, (int64_t)(mib * (1u << 20) / 4 / (IN + OUT + 1)));
    }
    sleep(2); /* let the host-tier prefetches of the deploys finish */
    results *r = calloc(1, sizeof *r);
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    pthread_t t[CLIENTS];
    client c[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        c[i] = (client){gw, r, seq, i, CLIENTS};
        pthread_create(&t[i], NULL, client_main, &c[i]);
    }
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(t[i], NULL);
    int met = 0, cold = 0;
    double load_sum = 0;
    for (int i = 0; i < NREQ; i++) {
        met += r->lat[i] <= SLO_US;
        if (r->cold[i]) {
            cold++;
            load_sum += (double)r->load[i];
        }
    }
    qsort(r->lat, NREQ, sizeof r->lat[0], cmp_u64);
    printf("slo_attainment_%s=%.3f\n", tag, (double)met / NREQ);
    printf("cold_fraction_%s=%.3f\n", tag, (double)cold / NREQ);
    printf("mean_swap_ms_%s=%.2f\n", tag, cold ? load_sum / cold / 1000.0 : 0.0);
    printf("p50_ms_%s=%.2f\n", tag, (double)r->lat[NREQ / 2] / 1000.0);
    printf("p99_ms_%s=%.2f\n", tag, (double)r->lat[NREQ * 99 / 100] / 1000.0);
    if (r->failed)
        printf("failed_%s=%d\n", tag, r->failed);
    fflush(stdout);
    gf_gw_free(gw);
    free(r);
}

int main(int argc, char **argv)
{
    const char *worker = argc > 1 ? argv[1] : GF_BUILD_DIR "/runtime/worker/gpufaas-worker";
    char dir[] = "/tmp/gfpolicy.XXXXXX";
    if (mkdtemp(dir) == NULL)
        return 1;
    /* one request sequence for both policies */
    double cdf[NFN], sum = 0;
    for (int i = 0; i < NFN; i++)
        sum += 1.0 / pow(i + 1, 0.9);
    double acc = 0;
    for (int i = 0; i < NFN; i++) {
        acc += 1.0 / pow(i + 1, 0.9) / sum;
        cdf[i] = acc;
    }
    /* the popular functions are spread over the sizes */
    int perm[NFN];
    for (int i = 0; i < NFN; i++)
        perm[i] = (i * 37) % NFN;
    static int seq[NREQ];
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < NREQ; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        seq[i] = perm[zipf_pick(cdf, (double)(x >> 11) / 9007199254740992.0)];
    }
    printf("functions=%d requests=%d clients=%d slo_ms=%d device_budget_mib=48 "
           "link_gbps=1.0\n", NFN, NREQ, CLIENTS, SLO_US / 1000);
    run_small(dir, worker);
    run(dir, worker, GF_EVICT_LRU, seq, "lru");
    run(dir, worker, GF_EVICT_GDS, seq, "gds");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return 0;
}
