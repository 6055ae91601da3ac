/* Benchmark: the parameter cache.
 *
 *   bench_cache [cpu|cuda:N]
 *
 * swap_efficiency   swap-in bandwidth host tier -> device (acquire to last
 *                   tensor ready) as a fraction of the raw copy-stream peak
 *                   measured in the same run. Target >= 0.9.
 * pipeline_ratio    cold forward pass of a 12-layer MLP (>= 100 MB of FP32
 *                   weights, in the host tier): pipelined (compute on layer i
 *                   while layer i+1 copies) over load-then-run. Copy and
 *                   compute are made comparable: on cpu the copy stream
 *                   emulates a link whose bandwidth equals the measured
 *                   compute rate; on cuda the batch is chosen so a layer's
 *                   gemm takes about as long as its copy. Target <= 0.65.
 * hit_overhead_us   acquire + release of a model already on the device.
 *                   Target < 2.
 * overlap_ratio     a forward pass of a resident model while the next model
 *                   swaps in from the host tier, over the two one after the
 *                   other: 1 = no overlap, 0.5 = the shorter hidden entirely
 *                   (the copy and compute streams run together; no
 *                   cudaMalloc/cudaFree on the request path stops them).
 * Prints key=value lines; never fails on speed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "cache/cache.h"


#define CHECK(x)                                                                               \
    do {                                                                                       \
        gf_err e_;                                                                             \
        gf_err_clear(&e_);                                                                     \
        if ((x) != GF_OK) {                                                                    \
            fprintf(stderr, "bench_cache: %s failed: %s\n", #x, e_.msg);                      \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static gf_backend *open_dev(const char *dev, uint64_t budget, uint64_t bw)
{
    gf_backend_config cfg = {.device = dev, .device_budget = budget, .cpu_copy_bandwidth = bw};
    gf_backend *be;
    gf_err err;
    if (gf_backend_open(&cfg, &be, &err) != GF_OK) {
        fprintf(stderr, "bench_cache: %s\n", err.msg);
        exit(strcmp(dev, "cpu") == 0 ? 1 : 77);
    }
    return be;
}

/* Write n tensors: (W [h,h], b [h]) pairs when mlp, else n tensors of
 * `numel` floats. */
static char *write_weights(const char *dir, const char *name, int layers, int64_t h)
{
    size_t n = (size_t)layers * 2;
    gf_st_wtensor *ts = calloc(n, sizeof *ts);
    char (*names)[32] = calloc(n, sizeof *names);
    int64_t wshape[2] = {h, h}, bshape[1] = {h};
    float *w = malloc((size_t)(h * h) * sizeof *w), *b = malloc((size_t)h * sizeof *b);
    for (int64_t i = 0; i < h * h; i++)
        w[i] = (float)((i * 7919) % 2001 - 1000) * (1.0f / (1000.0f * (float)h));
    for (int64_t i = 0; i < h; i++)
        b[i] = 0.01f;
    for (int l = 0; l < layers; l++) {
        snprintf(names[2 * l], 32, "%d.weight", 2 * l);
        snprintf(names[2 * l + 1], 32, "%d.bias", 2 * l);
        ts[2 * l] = (gf_st_wtensor){names[2 * l], GF_DT_F32, 2, wshape, w};
        ts[2 * l + 1] = (gf_st_wtensor){names[2 * l + 1], GF_DT_F32, 1, bshape, b};
    }
    size_t plen = strlen(dir) + strlen(name) + 2;
    char *path = malloc(plen);
    snprintf(path, plen, "%s/%s", dir, name);
    gf_err err;
    if (gf_st_write(path, ts, n, NULL, 0, &err) != GF_OK) {
        fprintf(stderr, "bench_cache: %s\n", err.msg);
        exit(1);
    }
    free(ts);
    free(names);
    free(w);
    free(b);
    return path;
}

/* One forward pass of the MLP with the lease's parameters; x, y [batch, h]. */
static void mlp_forward(gf_backend *be, gf_lease *l, int layers, int64_t h, int64_t batch,
                        float *x, float *y)
{
    const gf_kernels *k = gf_backend_kernels(be);
    gf_stream *s = gf_backend_stream(be, GF_STREAM_COMPUTE);
    for (int i = 0; i < layers; i++) {
        void *w, *b;
        CHECK(gf_lease_param(l, (size_t)(2 * i), &w, &e_));
        CHECK(gf_lease_param(l, (size_t)(2 * i + 1), &b, &e_));
        k->gemm(k->ctx, s, 0, 1, batch, h, h, 1.0f, x, GF_DT_F32, h, w, GF_DT_F32, h, 0.0f, y, h);
        k->bias_act(k->ctx, s, y, batch, h, b, GF_DT_F32, GF_ACT_RELU);
        float *t = x;
        x = y;
        y = t;
    }
    k->sync(k->ctx, s);
}

int main(int argc, char **argv)
{
    const char *dev = argc > 1 ? argv[1] : "cpu";
    bool cpu = strcmp(dev, "cpu") == 0;
    char dir[] = "/tmp/gfbench.XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    const int layers = 12;
    const int64_t h = 1536; /* 12 x 9.4 MB = 113 MB of weights */
    char *path = write_weights(dir, "mlp.safetensors", layers, h);
    size_t layer_bytes = (size_t)(h * h + h) * sizeof(float);

    /* ---- swap efficiency and hit overhead (no emulated link) ---- */
    /* 4 GiB on a GPU: the cuda backend commits its whole budget at open */
    gf_backend *be = open_dev(dev, cpu ? (512u << 20) : (4ull << 30), 0);
    gf_cache_config ccfg = {.host_budget = 512u << 20};
    gf_cache *c;
    CHECK(gf_cache_new(be, &ccfg, &c, &e_));
    gf_cache_model *m;
    CHECK(gf_cache_model_add(c, "mlp", path, NULL, 0, &m, &e_));
    size_t model_bytes = gf_cache_model_copy_bytes(m);
    printf("device=%s model_bytes=%zu\n", dev, model_bytes);
    CHECK(gf_cache_prefetch(c, m, GF_TIER_HOST, &e_));
    gf_cache_drain(c);

    /* raw peak: the same bytes, pinned -> device, 4 MiB chunks, on the copy stream */
    void *hbuf, *dbuf;
    CHECK(gf_host_alloc_pinned(be, model_bytes, &hbuf, &e_));
    CHECK(gf_dev_alloc(be, model_bytes, &dbuf, &e_));
    memset(hbuf, 1, model_bytes);
    gf_stream *cs = gf_backend_stream(be, GF_STREAM_COPY);
    double raw[5], swap[5];
    for (int r = 0; r < 6; r++) {
        double t0 = gf_bench_now();
        for (size_t off = 0; off < model_bytes; off += 4u << 20) {
            size_t len = model_bytes - off < (4u << 20) ? model_bytes - off : 4u << 20;
            gf_memcpy_async(be, cs, (char *)dbuf + off, (char *)hbuf + off, len, GF_COPY_H2D, NULL);
        }
        gf_stream_sync(be, cs, NULL);
        if (r > 0)
            raw[r - 1] = (double)model_bytes / (gf_bench_now() - t0) / 1e9;
    }
    gf_dev_free(be, dbuf);
    gf_host_free_pinned(be, hbuf);
    for (int r = 0; r < 6; r++) {
        CHECK(gf_cache_evict(c, m, GF_TIER_DEVICE, &e_));
        gf_lease *l;
        double t0 = gf_bench_now();
        CHECK(gf_cache_acquire(c, m, &l, &e_));
        CHECK(gf_lease_wait_all(l, &e_));
        double t = gf_bench_now() - t0;
        gf_lease_release(l);
        if (r > 0)
            swap[r - 1] = (double)model_bytes / t / 1e9;
    }
    double raw_gbps = gf_bench_median(raw, 5), swap_gbps = gf_bench_median(swap, 5);
    printf("raw_copy_gbps=%.2f swap_in_gbps=%.2f\n", raw_gbps, swap_gbps);
    printf("swap_efficiency=%.3f\n", swap_gbps / raw_gbps);

    /* hit overhead */
    gf_lease *l;
    CHECK(gf_cache_acquire(c, m, &l, &e_));
    CHECK(gf_lease_wait_all(l, &e_));
    gf_lease_release(l);
    const int iters = 1000000;
    double t0 = gf_bench_now();
    for (int i = 0; i < iters; i++) {
        gf_cache_acquire(c, m, &l, NULL);
        gf_lease_release(l);
    }
    printf("hit_overhead_us=%.3f\n", (gf_bench_now() - t0) / iters * 1e6);
    gf_cache_free(c);

    /* ---- pipelining ---- */
    const gf_kernels *k = gf_backend_kernels(be);
    if (k->gemm == NULL || k->bias_act == NULL) {
        printf("note=kernel library not built: pipeline_ratio not measured\n");
        gf_backend_free(be);
        unlink(path);
        rmdir(dir);
        free(path);
        return 0;
    }
    int64_t batch = 64;
    float *x, *y;
    CHECK(gf_dev_alloc(be, (size_t)(4096 * h) * sizeof(float), (void **)&x, &e_));
    CHECK(gf_dev_alloc(be, (size_t)(4096 * h) * sizeof(float), (void **)&y, &e_));
    /* calibrate: one layer's compute time at this batch with resident weights */
    {
        gf_cache *cc;
        CHECK(gf_cache_new(be, &ccfg, &cc, &e_));
        gf_cache_model *mm;
        CHECK(gf_cache_model_add(cc, "cal", path, NULL, 0, &mm, &e_));
        CHECK(gf_cache_acquire(cc, mm, &l, &e_));
        CHECK(gf_lease_wait_all(l, &e_));
        gf_stream *s = gf_backend_stream(be, GF_STREAM_COMPUTE);
        k->cast(k->ctx, s, x, GF_DT_F32, x, GF_DT_F32, 0);
        double per_layer = 0;
        for (int rep = 0; rep < 8; rep++) {
            double t = gf_bench_now();
            mlp_forward(be, l, layers, h, batch, x, y);
            double pl = (gf_bench_now() - t) / layers;
            if (rep == 0 || pl < per_layer)
                per_layer = pl;
            if (!cpu && pl < 0.5 * (double)layer_bytes / (raw_gbps * 1e9) && batch < 4096) {
                batch *= 2; /* cuda: grow the batch until a layer's gemm ~ its copy */
                rep = -1;
            }
        }
        gf_lease_release(l);
        gf_cache_free(cc);
        printf("batch=%lld layer_compute_ms=%.3f layer_bytes=%zu\n", (long long)batch,
               per_layer * 1e3, layer_bytes);
        if (cpu) {
            uint64_t bw = (uint64_t)((double)layer_bytes / per_layer);
            printf("emulated_link_gbps=%.3f\n", (double)bw / 1e9);
            gf_dev_free(be, x);
            gf_dev_free(be, y);
            gf_backend_free(be);
            be = open_dev(dev, 512u << 20, bw);
            k = gf_backend_kernels(be);
            CHECK(gf_dev_alloc(be, (size_t)(4096 * h) * sizeof(float), (void **)&x, &e_));
            CHECK(gf_dev_alloc(be, (size_t)(4096 * h) * sizeof(float), (void **)&y, &e_));
        }
    }
    CHECK(gf_cache_new(be, &ccfg, &c, &e_));
    CHECK(gf_cache_model_add(c, "mlp", path, NULL, 0, &m, &e_));
    CHECK(gf_cache_prefetch(c, m, GF_TIER_HOST, &e_));
    gf_cache_drain(c);
    double pipe[3], seq[3];
    for (int r = 0; r < 3; r++) {
        for (int mode = 0; mode < 2; mode++) {
            gf_cache_drain(c); /* the last load is complete, not only its tensors */
            CHECK(gf_cache_evict(c, m, GF_TIER_DEVICE, &e_));
            double t = gf_bench_now();
            CHECK(gf_cache_acquire(c, m, &l, &e_));
            if (mode == 1)
                CHECK(gf_lease_wait_all(l, &e_)); /* load, then run */
            mlp_forward(be, l, layers, h, batch, x, y);
            double dt = gf_bench_now() - t;
            gf_lease_release(l);
            (mode == 0 ? pipe : seq)[r] = dt;
        }
    }
    double p = gf_bench_median(pipe, 3), s = gf_bench_median(seq, 3);
    printf("pipelined_ms=%.1f load_then_run_ms=%.1f\n", p * 1e3, s * 1e3);
    printf("pipeline_ratio=%.3f\n", p / s);

    /* ---- overlap: compute of a resident model during the next one's swap-in ---- */
    gf_cache_model *a;
    gf_lease *la;
    CHECK(gf_cache_model_add(c, "a", path, NULL, 0, &a, &e_));
    CHECK(gf_cache_acquire(c, a, &la, &e_));
    CHECK(gf_lease_wait_all(la, &e_));
    double t_run[3], t_load[3], t_both[3];
    for (int r = 0; r < 3; r++) {
        double t = gf_bench_now();
        mlp_forward(be, la, layers, h, batch, x, y);
        t_run[r] = gf_bench_now() - t;
        gf_cache_drain(c);
        CHECK(gf_cache_evict(c, m, GF_TIER_DEVICE, &e_));
        t = gf_bench_now();
        CHECK(gf_cache_acquire(c, m, &l, &e_));
        CHECK(gf_lease_wait_all(l, &e_));
        t_load[r] = gf_bench_now() - t;
        gf_lease_release(l);
        gf_cache_drain(c);
        CHECK(gf_cache_evict(c, m, GF_TIER_DEVICE, &e_));
        t = gf_bench_now();
        CHECK(gf_cache_acquire(c, m, &l, &e_)); /* its copies start on the copy stream */
        mlp_forward(be, la, layers, h, batch, x, y);
        CHECK(gf_lease_wait_all(l, &e_));
        t_both[r] = gf_bench_now() - t;
        gf_lease_release(l);
    }
    gf_lease_release(la);
    double tr = gf_bench_median(t_run, 3), tl = gf_bench_median(t_load, 3),
           tb = gf_bench_median(t_both, 3);
    printf("run_ms=%.1f swap_in_ms=%.1f both_ms=%.1f\n", tr * 1e3, tl * 1e3, tb * 1e3);
    printf("overlap_ratio=%.3f\n", tb / (tr + tl));
    gf_cache_free(c);
    gf_dev_free(be, x);
    gf_dev_free(be, y);
    gf_backend_free(be);
    unlink(path);
    rmdir(dir);
    free(path);
    return 0;
}
