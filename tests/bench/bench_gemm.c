/* Benchmark: gemm through our kernel table.
 *
 *   bench_gemm [cpu|cuda:N] [blas_threads]
 *
 * cpu: square C = A B^T (the shape of a Linear layer) at n = 512 .. 4096
 * through gf_kernels.gemm, and OpenBLAS's cblas_sgemm (the library instance
 * the backend loaded, backend/cpu/cpu_blas.h) called directly on
 * the same buffers in the same run, repetitions interleaved so that noise
 * hits both alike. Prints GFLOP/s per size and gemm_overhead =
 * (t_ours - t_direct) / t_direct, the median over every repetition of every
 * size (target < 0.05). Without OpenBLAS (the GPU machine) only our figures
 * are printed. blas_threads defaults to 2.
 *
 * cuda: TFLOP/s of F32 (cublasSgemm), F16 x F16 and BF16 x BF16
 * (cublasGemmEx, FP32 accumulation) and F32 x F16 (weights widened, then
 * Sgemm) at n = 1024 .. 8192, then each dtype's best as f32_tflops,
 * f16_tflops, bf16_tflops, f32xf16_tflops; and the weight-streaming
 * bandwidth of small-batch gemm (m = 8, a Linear layer at batch 8: F16
 * weights are read directly, k_gemm_small), in GB/s of weights read.
 *
 * Key=value lines; never fails on speed. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "core/dtype.h"
#include "gf_config.h"

#include "backend/cpu/cpu_blas.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void fill(float *x, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
}

/* A device buffer holding n random floats (or their F16 encoding). */
static void *dev_random(gf_backend *be, size_t n, gf_dtype dt, unsigned seed)
{
    bool half = dt == GF_DT_F16 || dt == GF_DT_BF16;
    size_t es = half ? 2 : 4;
    float *h = malloc(n * sizeof(float));
    void *enc = half ? malloc(n * 2) : NULL;
    void *d = NULL;
    gf_err err;
    if (h == NULL || (half && enc == NULL) || gf_dev_alloc(be, n * es, &d, &err) != GF_OK) {
        fprintf(stderr, "bench_gemm: out of memory for %zu elements\n", n);
        exit(1);
    }
    fill(h, n, seed);
    if (dt == GF_DT_F16)
        gf_f32_to_f16_n(enc, h, n);
    else if (dt == GF_DT_BF16)
        gf_f32_to_bf16_n(enc, h, n);
    gf_stream *s = gf_backend_stream(be, GF_STREAM_COMPUTE);
    if (gf_memcpy_async(be, s, d, enc ? enc : (void *)h, n * es, GF_COPY_H2D, &err) != GF_OK ||
        gf_stream_sync(be, s, &err) != GF_OK) {
        fprintf(stderr, "bench_gemm: %s\n", err.msg);
        exit(1);
    }
    free(h);
    free(enc);
    return d;
}

/* How many repetitions at size n (fewer at large sizes: ~1 minute in all on
 * 2 cores). */
static int reps_for(int n)
{
    return n <= 512 ? 31 : n <= 1024 ? 15 : n <= 2048 ? 9 : 5;
}

static int bench_cpu(gf_backend *be)
{
    const gf_kernels *k = gf_backend_kernels(be);
    gf_stream *s = gf_backend_stream(be, GF_STREAM_COMPUTE);
    static const int sizes[] = {512, 1024, 2048, 4096};
    const gf_cpu_blas *blas = gf_cpu_blas_get();
    double ratios[128];
    int nratios = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int n = sizes[si], reps = reps_for(n);
        size_t nn = (size_t)n * (size_t)n;
        float *a = dev_random(be, nn, GF_DT_F32, 1), *b = dev_random(be, nn, GF_DT_F32, 2);
        float *c = dev_random(be, nn, GF_DT_F32, 3);
        double tours[40], tdirect[40];
        /* one warm-up of each, then timed repetitions, interleaved and in
         * alternating order so that cache state and noise favour neither */
        for (int r = -1; r < reps; r++) {
            double t_ours = 0, t_direct = 0;
            for (int half = 0; half < 2; half++) {
                bool ours = (half == 0) == (r % 2 == 0);
                double t0 = now();
                if (ours) {
                    int rc = k->gemm(k->ctx, s, 0, 1, n, n, n, 1.0f, a, GF_DT_F32, n, b,
                                     GF_DT_F32, n, 0.0f, c, n);
                    if (rc != 0) {
                        fprintf(stderr, "bench_gemm: gemm: %s\n", k->last_error(k->ctx));
                        return 1;
                    }
                    t_ours = now() - t0;
                } else {
                    if (blas != NULL) /* the library instance the backend uses */
                        blas->sgemm(101 /* CblasRowMajor */, 111 /* NoTrans */, 112 /* Trans */,
                                    n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
                    t_direct = now() - t0;
                }
            }
            if (r >= 0) {
                tours[r] = t_ours;
                tdirect[r] = t_direct;
                if (blas != NULL)
                    ratios[nratios++] = (t_ours - t_direct) / t_direct;
            }
        }
        double flop = 2.0 * n * (double)n * n;
        double mo = median(tours, reps);
        printf("n=%d reps=%d ours_gflops=%.1f", n, reps, flop / mo / 1e9);
        if (blas != NULL) {
            double md = median(tdirect, reps);
            printf(" direct_gflops=%.1f overhead=%.4f", flop / md / 1e9, (mo - md) / md);
        }
        printf("\n");
        fflush(stdout);
        gf_dev_free(be, a);
        gf_dev_free(be, b);
        gf_dev_free(be, c);
    }
    if (blas != NULL)
        printf("blas_core=%s\ngemm_overhead=%.4f\n", blas->core, median(ratios, nratios));
    else
        printf("note=no OpenBLAS: no direct comparison\n");
    return 0;
}

/* Seconds per gemm on the GPU: two warm-ups, then `reps` queued back to
 * back, wall clock up to the stream's sync. */
static double time_cuda(gf_backend *be, int m, int n, int kk, const void *a, gf_dtype adt,
                        const void *b, gf_dtype bdt, float *c, int reps)
{
    const gf_kernels *k = gf_backend_kernels(be);
    gf_stream *s = gf_backend_stream(be, GF_STREAM_COMPUTE);
    gf_err err;
    double t0 = 0;
    for (int r = -2; r < reps; r++) {
        if (r == 0) {
            if (gf_stream_sync(be, s, &err) != GF_OK)
                goto fail;
            t0 = now();
        }
        if (k->gemm(k->ctx, s, 0, 1, m, n, kk, 1.0f, a, adt, kk, b, bdt, kk, 0.0f, c, n) != 0) {
            fprintf(stderr, "bench_gemm: gemm: %s\n", k->last_error(k->ctx));
            exit(1);
        }
    }
    if (gf_stream_sync(be, s, &err) != GF_OK)
        goto fail;
    return (now() - t0) / reps;
fail:
    fprintf(stderr, "bench_gemm: %s\n", err.msg);
    exit(1);
}

static int bench_cuda(gf_backend *be)
{
    static const int sizes[] = {1024, 2048, 4096, 8192};
    double best[4] = {0, 0, 0, 0}; /* f32, f16, bf16, f32 x f16: the best size */
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int n = sizes[si], reps = n <= 2048 ? 50 : 10;
        size_t nn = (size_t)n * (size_t)n;
        float *a = dev_random(be, nn, GF_DT_F32, 1), *b = dev_random(be, nn, GF_DT_F32, 2);
        void *a16 = dev_random(be, nn, GF_DT_F16, 4), *b16 = dev_random(be, nn, GF_DT_F16, 5);
        void *abf = dev_random(be, nn, GF_DT_BF16, 10), *bbf = dev_random(be, nn, GF_DT_BF16, 11);
        float *c = dev_random(be, nn, GF_DT_F32, 3);
        double flop = 2.0 * n * (double)n * n;
        double tf[4] = {
            time_cuda(be, n, n, n, a, GF_DT_F32, b, GF_DT_F32, c, reps),
            time_cuda(be, n, n, n, a16, GF_DT_F16, b16, GF_DT_F16, c, reps),
            time_cuda(be, n, n, n, abf, GF_DT_BF16, bbf, GF_DT_BF16, c, reps),
            time_cuda(be, n, n, n, a, GF_DT_F32, b16, GF_DT_F16, c, reps),
        };
        for (int d = 0; d < 4; d++)
            if (flop / tf[d] / 1e12 > best[d])
                best[d] = flop / tf[d] / 1e12;
        printf("n=%d f32_tflops=%.2f f16_tflops=%.2f bf16_tflops=%.2f f32xf16_tflops=%.2f\n", n,
               flop / tf[0] / 1e12, flop / tf[1] / 1e12, flop / tf[2] / 1e12,
               flop / tf[3] / 1e12);
        fflush(stdout);
        gf_dev_free(be, a);
        gf_dev_free(be, b);
        gf_dev_free(be, a16);
        gf_dev_free(be, b16);
        gf_dev_free(be, abf);
        gf_dev_free(be, bbf);
        gf_dev_free(be, c);
    }
    /* the headline per dtype: its best size */
    printf("f32_tflops=%.2f\nf16_tflops=%.2f\nbf16_tflops=%.2f\nf32xf16_tflops=%.2f\n", best[0],
           best[1], best[2], best[3]);
    /* batch 8 through a 8192 x 8192 layer: bound by reading the weights */
    const int m = 8, n = 8192, kk = 8192;
    size_t nw = (size_t)n * kk;
    float *x = dev_random(be, (size_t)m * kk, GF_DT_F32, 6), *y = dev_random(be, (size_t)m * n,
                                                                              GF_DT_F32, 7);
    float *w32 = dev_random(be, nw, GF_DT_F32, 8);
    void *w16 = dev_random(be, nw, GF_DT_F16, 9);
    double t32 = time_cuda(be, m, n, kk, x, GF_DT_F32, w32, GF_DT_F32, y, 50);
    double tmix = time_cuda(be, m, n, kk, x, GF_DT_F32, w16, GF_DT_F16, y, 50);
    printf("batch8_f32_weights_gbps=%.0f\nbatch8_f16_weights_gbps=%.0f\n",
           (double)nw * 4 / t32 / 1e9, (double)nw * 2 / tmix / 1e9);
    gf_dev_free(be, x);
    gf_dev_free(be, y);
    gf_dev_free(be, w32);
    gf_dev_free(be, w16);
    return 0;
}

int main(int argc, char **argv)
{
    const char *dev = argc > 1 ? argv[1] : "cpu";
    int threads = argc > 2 ? atoi(argv[2]) : 2;
    bool cpu = strcmp(dev, "cpu") == 0;
    gf_backend_config cfg = {.device = dev, .blas_threads = threads,
                             /* the cuda backend commits its whole budget at open */
                             .device_budget = cpu ? (size_t)1 << 30 : (size_t)8 << 30};
    gf_backend *be;
    gf_err err;
    if (gf_backend_open(&cfg, &be, &err) != GF_OK) {
        fprintf(stderr, "bench_gemm: %s\n", err.msg);
        return cpu ? 1 : 77;
    }
    gf_device_info info;
    gf_backend_info(be, &info);
    printf("device=%s\n", info.name);
    if (cpu)
        printf("blas_threads=%d\n", threads > 0 ? threads : 1);
    int rc = cpu ? bench_cpu(be) : bench_cuda(be);
    gf_backend_free(be);
    return rc;
}
