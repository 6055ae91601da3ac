/* Benchmark: ResNet-50's forward pass through the kernel table.
 *
 *   bench_conv [cpu|cuda:N] [threads] [reps]
 *
 * The layers an ONNX export of torchvision's resnet50 runs once batchnorm is
 * folded into the convolutions (as onnxruntime and our plan both do): the
 * 7x7 stem, max pooling, 16 bottlenecks (1x1, 3x3, 1x1 with the residual
 * added and ReLU fused into the last conv2d_ex; a 1x1 projection where the
 * shape changes), global average pooling and the classifier gemm, on random
 * F32 weights, at batch 1 and 8. threads is the OpenBLAS thread count
 * (default 1), reps the timed repetitions after one warm-up (default 5).
 *
 * Prints conv_resnet50_b1_ms and conv_resnet50_b8_ms (the median wall time),
 * the same as _cpu_ms in CPU time of the process (the work itself, which a
 * loaded machine does not inflate; with threads > 1 it sums them), and with
 * GF_BENCH_LAYERS=1 the CPU time of each layer kind (conv3x3_ms, conv1x1_ms,
 * stem_ms, pool_ms, other_ms) at batch 1 (=2: and each convolution's). Compare with onnxruntime's time
 * for the same model at the same thread count (bench_onnx prints
 * onnx_vs_ort_ratio for the whole ONNX path). Never fails on speed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"

static gf_backend *g_be;
static const gf_kernels *K;
static gf_stream *S;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU seconds of the whole process (all threads): on a loaded machine this
 * measures the work, where wall time measures the neighbours too. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_conv: %s failed (%d): %s\n", what, rc, K ? K->last_error(K->ctx) : "");
    exit(1);
}

/* A device buffer of n floats, random in [-scale, scale). */
static float *dev_floats(size_t n, float scale, unsigned seed)
{
    float *h = malloc(n * sizeof(float));
    if (h == NULL)
        die("malloc", 1);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        h[i] = ((float)(seed >> 8) / 16777216.0f * 2.0f - 1.0f) * scale;
    }
    void *d = NULL;
    gf_err err;
    if (gf_dev_alloc(g_be, n * sizeof(float), &d, &err) != GF_OK ||
        gf_memcpy_async(g_be, S, d, h, n * sizeof(float), GF_COPY_H2D, &err) != GF_OK ||
        gf_stream_sync(g_be, S, &err) != GF_OK) {
        fprintf(stderr, "bench_conv: device buffer: %s\n", err.msg);
        exit(1);
    }
    free(h);
    return d;
}

/* One convolution layer: geometry and weights (bias = folded batchnorm). */
typedef struct conv {
    gf_conv2d_ex_params p; /* n and h, w are set per call */
    float *w, *b;
    int kind; /* 0 stem, 1 conv1x1, 2 conv3x3 */
} conv;

static conv g_convs[64];
static int g_nconv;
static double g_kind_t[5];

static conv *conv_new(int64_t c, int64_t oc, int64_t k, int64_t stride, int kind)
{
    conv *cv = &g_convs[g_nconv++];
    int64_t pad = k / 2;
    cv->p = (gf_conv2d_ex_params){.c = c, .oc = oc, .kh = k, .kw = k, .stride_h = stride,
                                  .stride_w = stride, .pad_t = pad, .pad_l = pad, .pad_b = pad,
                                  .pad_r = pad, .dil_h = 1, .dil_w = 1, .groups = 1};
    /* uniform with variance 1 / fan-in: activations stay O(1), no subnormals */
    float scale = sqrtf(3.0f / (float)(c * k * k));
    cv->w = dev_floats((size_t)(oc * c * k * k), scale, (unsigned)g_nconv * 7919u);
    cv->b = dev_floats((size_t)oc, 0.1f, (unsigned)g_nconv * 104729u);
    cv->kind = kind;
    return cv;
}

/* y = act(conv(x) + bias + res); x is [n, c, h, w]; *h, *w become the output's. */
static void conv_run(conv *cv, float *y, const float *x, int64_t n, int64_t *h, int64_t *w,
                     const float *res, gf_act act, int timed)
{
    cv->p.n = n;
    cv->p.h = *h;
    cv->p.w = *w;
    double t0 = timed ? cpu_now() : 0;
    int rc = K->conv2d_ex(K->ctx, S, y, x, &cv->p, cv->w, cv->b, GF_DT_F32, res, act);
    if (rc != 0)
        die("conv2d_ex", rc);
    if (timed) {
        K->sync(K->ctx, S);
        double dt = cpu_now() - t0;
        g_kind_t[cv->kind] += dt;
        if (timed > 1) {
            int64_t oh = gf_window_out(*h, cv->p.kh, cv->p.stride_h, cv->p.pad_t, cv->p.pad_b, 1, 0);
            int64_t ow = gf_window_out(*w, cv->p.kw, cv->p.stride_w, cv->p.pad_l, cv->p.pad_r, 1, 0);
            double flop = 2.0 * (double)(n * cv->p.oc * oh * ow * cv->p.c * cv->p.kh * cv->p.kw);
            printf("layer k%lld s%lld c%lld oc%lld out%lldx%lld: %.3f ms %.1f GF/s\n",
                   (long long)cv->p.kh, (long long)cv->p.stride_h, (long long)cv->p.c,
                   (long long)cv->p.oc, (long long)oh, (long long)ow, dt * 1e3, flop / dt / 1e9);
        }
    }
    *h = gf_window_out(*h, cv->p.kh, cv->p.stride_h, cv->p.pad_t, cv->p.pad_b, 1, 0);
    *w = gf_window_out(*w, cv->p.kw, cv->p.stride_w, cv->p.pad_l, cv->p.pad_r, 1, 0);
}

typedef struct block {
    conv *c1, *c2, *c3, *down;
} block;

static block g_blocks[16];
static conv *g_stem;
static float *g_fc_w, *g_fc_b;

static void build(void)
{
    g_stem = conv_new(3, 64, 7, 2, 0);
    static const int depth[4] = {3, 4, 6, 3};
    int64_t in = 64;
    int nb = 0;
    for (int s = 0; s < 4; s++) {
        int64_t width = 64 << s;
        for (int i = 0; i < depth[s]; i++) {
            int64_t stride = (s > 0 && i == 0) ? 2 : 1;
            block *b = &g_blocks[nb++];
            b->c1 = conv_new(in, width, 1, 1, 1);
            b->c2 = conv_new(width, width, 3, stride, 2);
            b->c3 = conv_new(width, width * 4, 1, 1, 1);
            b->down = i == 0 ? conv_new(in, width * 4, 1, stride, 1) : NULL;
            in = width * 4;
        }
    }
    g_fc_w = dev_floats(1000 * 2048, 1.0f / 2048, 31337u);
    g_fc_b = dev_floats(1000, 0.1f, 4242u);
}

/* One forward pass at batch n of input [n, 3, 224, 224]; bufs: 4 of the
 * largest activation. */
static void forward(int64_t n, const float *input, float *const bufs[4], float *out, int timed)
{
    float *buf[4] = {bufs[0], bufs[1], bufs[2], bufs[3]};
    int64_t h = 224, w = 224;
    conv_run(g_stem, buf[1], input, n, &h, &w, NULL, GF_ACT_RELU, timed);
    gf_pool2d_ex_params pp = {n, 64, h, w, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0};
    double tp = timed ? cpu_now() : 0;
    int rc = K->pool2d_ex(K->ctx, S, GF_POOL_MAX, buf[0], buf[1], &pp);
    if (rc != 0)
        die("pool2d_ex", rc);
    if (timed) {
        K->sync(K->ctx, S);
        g_kind_t[3] += cpu_now() - tp;
    }
    h = gf_window_out(h, 3, 2, 1, 1, 1, 0);
    w = gf_window_out(w, 3, 2, 1, 1, 1, 0);
    float *x = buf[0];
    for (int i = 0; i < 16; i++) {
        block *b = &g_blocks[i];
        float *t1 = buf[1], *t2 = buf[2], *sc = x, *y = buf[3];
        int64_t h1 = h, w1 = w, h2, w2;
        conv_run(b->c1, t1, x, n, &h1, &w1, NULL, GF_ACT_RELU, timed);
        conv_run(b->c2, t2, t1, n, &h1, &w1, NULL, GF_ACT_RELU, timed);
        if (b->down != NULL) {
            h2 = h;
            w2 = w;
            conv_run(b->down, t1, x, n, &h2, &w2, NULL, GF_ACT_IDENTITY, timed);
            sc = t1;
        }
        h2 = h1;
        w2 = w1;
        conv_run(b->c3, y, t2, n, &h2, &w2, sc, GF_ACT_RELU, timed);
        /* rotate: the block's output becomes buf[0] */
        buf[3] = x;
        buf[0] = y;
        x = y;
        h = h2;
        w = w2;
    }
    double to = timed ? cpu_now() : 0;
    if ((rc = K->global_avgpool(K->ctx, S, buf[1], x, n, 2048, h * w)) != 0)
        die("global_avgpool", rc);
    if ((rc = K->gemm(K->ctx, S, 0, 1, n, 1000, 2048, 1.0f, buf[1], GF_DT_F32, 2048, g_fc_w,
                      GF_DT_F32, 2048, 0.0f, out, 1000)) != 0 ||
        (rc = K->bias_act(K->ctx, S, out, n, 1000, g_fc_b, GF_DT_F32, GF_ACT_IDENTITY)) != 0)
        die("classifier", rc);
    K->sync(K->ctx, S);
    if (timed)
        g_kind_t[4] += cpu_now() - to;
}

/* Median wall and CPU seconds of a forward pass at batch n. */
static double time_batch(int64_t n, int reps, double *cpu_med)
{
    size_t big = (size_t)(n * 64 * 112 * 112); /* the largest activation: the stem's output */
    float *buf[4];
    for (int i = 0; i < 4; i++)
        buf[i] = dev_floats(big, 1.0f, (unsigned)(i + 1));
    float *out = dev_floats((size_t)(n * 1000), 0, 1);
    float *input = dev_floats((size_t)(n * 3 * 224 * 224), 1.0f, 99u);
    forward(n, input, buf, out, 0); /* warm-up: workspace, caches */
    double *t = malloc(2 * (size_t)reps * sizeof(double)), *tc = t + reps;
    for (int r = 0; r < reps; r++) {
        double t0 = now(), c0 = cpu_now();
        forward(n, input, buf, out, 0);
        t[r] = now() - t0;
        tc[r] = cpu_now() - c0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    qsort(tc, (size_t)reps, sizeof *tc, cmp_double);
    double med = t[reps / 2];
    *cpu_med = tc[reps / 2];
    const char *layers = getenv("GF_BENCH_LAYERS");
    if (n == 1 && layers != NULL && atoi(layers) >= 1) {
        memset(g_kind_t, 0, sizeof g_kind_t);
        forward(n, input, buf, out, atoi(layers));
        static const char *names[5] = {"stem", "conv1x1", "conv3x3", "pool", "other"};
        for (int k = 0; k < 5; k++)
            printf("%s_ms=%.2f\n", names[k], g_kind_t[k] * 1e3);
    }
    free(t);
    for (int i = 0; i < 4; i++)
        gf_dev_free(g_be, buf[i]);
    gf_dev_free(g_be, out);
    gf_dev_free(g_be, input);
    return med;
}

int main(int argc, char **argv)
{
    const char *dev = argc > 1 ? argv[1] : "cpu";
    int threads = argc > 2 ? atoi(argv[2]) : 1, reps = argc > 3 ? atoi(argv[3]) : 5;
    if (reps < 1)
        reps = 1;
    gf_backend_config cfg = {.device = dev, .blas_threads = threads,
                             .device_budget = (size_t)6 << 30};
    gf_err err;
    if (gf_backend_open(&cfg, &g_be, &err) != GF_OK) {
        printf("bench_conv: cannot open %s: %s\n", dev, err.msg);
        return 0;
    }
    K = gf_backend_kernels(g_be);
    S = gf_backend_stream(g_be, GF_STREAM_COMPUTE);
    if (!GF_KERNELS_HAS(K, conv2d_ex) || !GF_KERNELS_HAS(K, pool2d_ex)) {
        printf("bench_conv: %s has no conv2d_ex / pool2d_ex\n", dev);
        return 0;
    }
    build();
    printf("device=%s\nthreads=%d\n", dev, threads);
    for (int64_t b = 1; b <= 8; b += 7) {
        double cpu, wall = time_batch(b, reps, &cpu);
        printf("conv_resnet50_b%d_ms=%.2f\nconv_resnet50_b%d_cpu_ms=%.2f\n", (int)b, wall * 1e3,
               (int)b, cpu * 1e3);
    }
    gf_backend_free(g_be);
    return 0;
}
