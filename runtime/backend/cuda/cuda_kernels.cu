// gpufaas — the cuda kernel library (runtime/backend/cuda).
//
// Implements gpufaas/kernels.h on an NVIDIA GPU: gemm with cuBLAS, the rest
// with our own kernels. Every member validates its arguments on the host
// (backend/kernel_args.c, shared with the cpu library, so both accept and
// reject the same calls), queues its work on the given stream and returns
// without waiting.
//
// gemm (cublas and our small-batch kernel) is in cuda_gemm.cu.
//
// Workspace: one device buffer per context, from the backend's allocator (so
// it counts against the device budget), grown on demand and kept. Growing
// waits for the device first, since queued work may still use the old
// buffer. Kernels that use it (gemm with mixed operand types, conv2d,
// batchnorm, attention) are ordered by their stream: do not run them on two
// streams of one backend at the same time.
//
// Deferred errors: embedding checks its indices on the device; a bad one is
// recorded in the stream's dev_error words (first error wins, by atomicCAS)
// and its row is neither read nor written. The backend's sync reports it.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_kernels_impl.cuh"
#include "backend/kernel_args.h"

/* ---- host helpers ---- */

/* Make the context's device current on this thread. */
int gf_cu_enter(gf_cuda_kctx *c, const char *fn, gf_stream *s)
{
    if (s == NULL)
        return gf_kerr(GF_ERR_INVALID, fn, "stream is NULL");
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || cur != c->device) {
        cudaError_t e = cudaSetDevice(c->device);
        if (e != cudaSuccess) {
            cudaGetLastError();
            return gf_kerr(GF_ERR_DEVICE, fn, "cudaSetDevice(%d) failed: %s", c->device,
                           cudaGetErrorString(e));
        }
    }
    return 0;
}

/* After queueing kernels: report a launch failure. */
int gf_cu_launched(const char *fn, const char *what)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return 0;
    return gf_kerr(GF_ERR_DEVICE, fn, "%s: %s (%s)", what, cudaGetErrorString(e),
                   cudaGetErrorName(e));
}

int gf_cu_blas_fail(const char *fn, const char *call, cublasStatus_t st)
{
    return gf_kerr(st == CUBLAS_STATUS_ALLOC_FAILED ? GF_ERR_NO_DEVICE_MEM : GF_ERR_DEVICE, fn,
                   "%s failed: %s", call, cublasGetStatusString(st));
}

/* Workspace of at least n bytes (contents not kept). */
int gf_cu_ws_get(gf_cuda_kctx *c, const char *fn, size_t n, void **out)
{
    if (n <= c->ws_cap) {
        *out = c->ws;
        return 0;
    }
    /* Grow by at least half, in MiB steps, so a run of growing requests
     * does not reallocate each time; fall back to the exact size. */
    size_t want = c->ws_cap + c->ws_cap / 2;
    if (want < n)
        want = n;
    want = (want + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
    if (c->ws != NULL) {
        cudaError_t e = cudaDeviceSynchronize(); /* queued work may use the old one */
        if (e != cudaSuccess)
            return gf_kerr(GF_ERR_DEVICE, fn, "cudaDeviceSynchronize before growing the "
                           "workspace: %s", cudaGetErrorString(e));
        c->free_fn(c->arg, c->ws);
        c->ws = NULL;
        c->ws_cap = 0;
    }
    void *p = NULL;
    if (c->alloc_fn(c->arg, want, &p) != 0) {
        want = n;
        if (c->alloc_fn(c->arg, want, &p) != 0)
            return gf_kerr(GF_ERR_NO_DEVICE_MEM, fn,
                           "no device memory for %zu bytes of workspace", n);
    }
    c->ws = p;
    c->ws_cap = want;
    *out = p;
    return 0;
}

int gf_cu_blas_bind(gf_cuda_kctx *c, const char *fn, cudaStream_t st)
{
    if (c->blas_bound && c->blas_stream == st)
        return 0;
    if (c->blas_ws == NULL) {
        size_t want = (c->cc_major >= 9 ? (size_t)32 : (size_t)4) << 20;
        void *p = NULL;
        if (c->alloc_fn(c->arg, want, &p) != 0)
            return gf_kerr(GF_ERR_NO_DEVICE_MEM, fn,
                           "no device memory for cuBLAS's %zu-byte workspace", want);
        c->blas_ws = p;
        c->blas_ws_cap = want;
    }
    c->blas_bound = false;
    cublasStatus_t bs = cublasSetStream(c->blas, st);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return gf_cu_blas_fail(fn, "cublasSetStream", bs);
    /* after the stream: setting a stream resets the workspace */
    bs = cublasSetWorkspace(c->blas, c->blas_ws, c->blas_ws_cap);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return gf_cu_blas_fail(fn, "cublasSetWorkspace", bs);
    c->blas_stream = st;
    c->blas_bound = true;
    return 0;
}

/* ---- elementwise kernels ---- */

template <typename D, typename S> static __global__ void k_cast(D *dst, const S *src, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        st(dst, i, ld(src, i));
}

/* x[r, c] = act(x[r, c] + bias[(i / inner) % nb]): bias per column (inner
 * 1, nb cols) or per channel of NCHW (inner hw, nb c); bias may be NULL. */
template <typename T>
static __global__ void k_bias_act(float *x, int64_t n, int64_t inner, int64_t nb, const T *bias, int act)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v = x[i];
        if (bias != NULL)
            v += ld(bias, (i / inner) % nb);
        x[i] = act_apply(v, act);
    }
}

static __global__ void k_add(float *y, const float *a, const float *b, int64_t n, int act)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = act_apply(a[i] + b[i], act);
}

/* ---- row kernels: one block per row ---- */

static __global__ void k_softmax(float *y, const float *x, int64_t rows, int64_t cols, int log_)
{
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float mx = -INFINITY;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
            mx = fmaxf(mx, xr[j]);
        mx = block_reduce<true>(mx, sh);
        float s = 0.0f;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
            s += expf(xr[j] - mx);
        s = block_reduce<false>(s, sh);
        /* Each thread rewrites only the elements it read: y may equal x. */
        if (log_) {
            float lse = mx + logf(s);
            for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
                yr[j] = xr[j] - lse;
        } else {
            float inv = 1.0f / s;
            for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
                yr[j] = expf(xr[j] - mx) * inv;
        }
    }
}

template <typename T>
static __global__ void k_layernorm(float *y, const float *x, int64_t rows, int64_t cols, const T *gamma,
                            const T *beta, float eps)
{
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float s = 0.0f;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
            s += xr[j];
        float mean = block_reduce<false>(s, sh) / (float)cols;
        float q = 0.0f; /* two passes: no cancellation */
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            float d = xr[j] - mean;
            q += d * d;
        }
        float rstd = 1.0f / sqrtf(block_reduce<false>(q, sh) / (float)cols + eps);
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            float v = (xr[j] - mean) * rstd;
            if (gamma != NULL)
                v *= ld(gamma, j);
            if (beta != NULL)
                v += ld(beta, j);
            yr[j] = v;
        }
    }
}

/* Attention's softmax over each row of scores [rows = nbh * seq, seq] in
 * place: keys with mask[batch, j] == 0 get weight 0; a row with no live
 * key attends uniformly. Row r belongs to (batch, head) bh0 + r / seq. */
template <typename M>
static __global__ void k_masked_softmax(float *sc, int64_t rows, int64_t seq, int64_t bh0, int64_t heads,
                                 const M *mask)
{
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        float *row = sc + r * seq;
        const M *mr = mask != NULL ? mask + ((bh0 + r / seq) / heads) * seq : NULL;
        float mx = -INFINITY, live = 0.0f;
        for (int64_t j = threadIdx.x; j < seq; j += blockDim.x)
            if (mr == NULL || mr[j] != 0) {
                mx = fmaxf(mx, row[j]);
                live += 1.0f;
            }
        mx = block_reduce<true>(mx, sh);
        live = block_reduce<false>(live, sh);
        if (live == 0.0f) {
            for (int64_t j = threadIdx.x; j < seq; j += blockDim.x)
                row[j] = 1.0f / (float)seq;
            continue;
        }
        float s = 0.0f;
        for (int64_t j = threadIdx.x; j < seq; j += blockDim.x) {
            float e = (mr == NULL || mr[j] != 0) ? expf(row[j] - mx) : 0.0f;
            row[j] = e;
            s += e;
        }
        float inv = 1.0f / block_reduce<false>(s, sh);
        for (int64_t j = threadIdx.x; j < seq; j += blockDim.x)
            row[j] *= inv;
    }
}

/* global average pooling: one warp per (n, c) plane. */
static __global__ void k_global_avgpool(float *y, const float *x, int64_t planes, int64_t hw)
{
    int lane = threadIdx.x & 31;
    int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
    int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t p = warp; p < planes; p += nwarps) {
        const float *xp = x + p * hw;
        float s = 0.0f;
        for (int64_t j = lane; j < hw; j += 32)
            s += xp[j];
        s = warp_reduce<false>(s);
        if (lane == 0)
            y[p] = s / (float)hw;
    }
}

/* ---- batchnorm ---- */

/* Fold the statistics into one scale and shift per channel, as the cpu
 * library does: sc = gamma / sqrt(var + eps), sh = beta - mean sc. */
template <typename T>
static __global__ void k_bn_fold(float *sc, float *sh, const T *mean, const T *var, const T *gamma,
                          const T *beta, int64_t c, float eps)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < c;
         i += (int64_t)gridDim.x * blockDim.x) {
        float g = gamma != NULL ? ld(gamma, i) : 1.0f, b = beta != NULL ? ld(beta, i) : 0.0f;
        float s = g / sqrtf(ld(var, i) + eps);
        sc[i] = s;
        sh[i] = b - ld(mean, i) * s;
    }
}

static __global__ void k_bn_apply(float *y, const float *x, int64_t n, int64_t hw, int64_t c,
                           const float *sc, const float *sh, int act)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t ch = (i / hw) % c;
        y[i] = act_apply(x[i] * sc[ch] + sh[ch], act);
    }
}

/* ---- embedding, permute ---- */

/* One block per output row; a row whose index is out of range is skipped
 * (never read, never written) and the first such index is recorded in err. */
template <typename T, typename I>
static __global__ void k_embedding(float *y, const T *table, int64_t vocab, int64_t dim, const I *ids,
                            int64_t n, long long *err)
{
    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
        int64_t id = (int64_t)ids[r];
        if (id < 0 || id >= vocab) {
            if (threadIdx.x == 0 &&
                atomicCAS((unsigned long long *)err, 0ull, (unsigned long long)GF_ERR_INVALID) ==
                    0ull) {
                err[1] = (long long)id;
                err[2] = (long long)vocab;
            }
            continue;
        }
        const T *src = table + id * dim;
        float *dst = y + r * dim;
        for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
            dst[j] = ld(src, j);
    }
}

/* y[a, c, b, e] = x[a, b, c, e]: one thread per output element, reads and
 * writes coalesced along e. */
static __global__ void k_permute_0213(float *y, const float *x, int64_t d0, int64_t d1, int64_t d2,
                               int64_t d3)
{
    int64_t total = d0 * d1 * d2 * d3;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t e = i % d3, t = i / d3;
        int64_t b = t % d1;
        t /= d1;
        int64_t c = t % d2, a = t / d2;
        y[i] = x[((a * d1 + b) * d2 + c) * d3 + e];
    }
}

/* ---- dtype dispatch ---- */

/* Widen n weights of dtype dt (F16/BF16) at src into dst (FP32). */
void gf_cu_widen_async(float *dst, const void *src, gf_dtype dt, int64_t n, cudaStream_t st)
{
    if (dt == GF_DT_F16)
        k_cast<float, __half><<<grid_for(n, GF_THREADS), GF_THREADS, 0, st>>>(
            dst, (const __half *)src, n);
    else
        k_cast<float, __nv_bfloat16><<<grid_for(n, GF_THREADS), GF_THREADS, 0, st>>>(
            dst, (const __nv_bfloat16 *)src, n);
}

/* bias (dtype dt, may be NULL) + act over n floats, bias index (i / inner)
 * % nb. Nothing is queued for identity without bias. */
static void bias_act_async(float *x, int64_t n, int64_t inner, int64_t nb, const void *bias,
                           gf_dtype dt, int act, cudaStream_t st)
{
    if (bias == NULL && act == GF_ACT_IDENTITY)
        return;
    if (bias == NULL)
        dt = GF_DT_F32;
    GF_WDISPATCH(dt, T,
                 k_bias_act<T><<<grid_for(n, GF_THREADS), GF_THREADS, 0, st>>>(
                     x, n, inner, nb, (const T *)bias, act));
}

/* ---- elementwise and row members ---- */

static int cu_bias_act(void *vctx, gf_stream *s, float *x, int64_t rows, int64_t cols,
                       const void *bias, gf_dtype bias_dtype, gf_act act)
{
    static const char fn[] = "bias_act";
    bool noop;
    int rc = gf_kargs_bias_act(x, rows, cols, bias, bias_dtype, act, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter((gf_cuda_kctx *)vctx, fn, s)) != 0)
        return rc;
    bias_act_async(x, rows * cols, 1, cols, bias, bias_dtype, (int)act, s->stream);
    return gf_cu_launched(fn, "k_bias_act");
}

void gf_cu_softmax_rows_async(float *y, const float *x, int64_t rows, int64_t cols, int log_,
                              cudaStream_t st)
{
    unsigned g = (unsigned)(rows < GF_MAX_BLOCKS ? rows : GF_MAX_BLOCKS);
    k_softmax<<<g, row_threads(cols), 0, st>>>(y, x, rows, cols, log_);
}

static int cu_softmax(void *vctx, gf_stream *s, float *y, const float *x, int64_t rows,
                      int64_t cols, int log_)
{
    static const char fn[] = "softmax";
    bool noop;
    int rc = gf_kargs_softmax(y, x, rows, cols, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter((gf_cuda_kctx *)vctx, fn, s)) != 0)
        return rc;
    gf_cu_softmax_rows_async(y, x, rows, cols, log_, s->stream);
    return gf_cu_launched(fn, "k_softmax");
}

static int cu_layernorm(void *vctx, gf_stream *s, float *y, const float *x, int64_t rows,
                        int64_t cols, const void *gamma, const void *beta, gf_dtype w_dtype,
                        float eps)
{
    static const char fn[] = "layernorm";
    bool noop;
    int rc = gf_kargs_layernorm(y, x, rows, cols, gamma, beta, w_dtype, eps, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter((gf_cuda_kctx *)vctx, fn, s)) != 0)
        return rc;
    unsigned g = (unsigned)(rows < GF_MAX_BLOCKS ? rows : GF_MAX_BLOCKS);
    if (gamma == NULL && beta == NULL)
        w_dtype = GF_DT_F32;
    GF_WDISPATCH(w_dtype, T,
                 k_layernorm<T><<<g, row_threads(cols), 0, s->stream>>>(
                     y, x, rows, cols, (const T *)gamma, (const T *)beta, eps));
    return gf_cu_launched(fn, "k_layernorm");
}

static int cu_batchnorm(void *vctx, gf_stream *s, float *y, const float *x, int64_t n, int64_t c,
                        int64_t hw, const void *mean, const void *var, const void *gamma,
                        const void *beta, gf_dtype w_dtype, float eps, gf_act act)
{
    static const char fn[] = "batchnorm";
    gf_cuda_kctx *ctx = (gf_cuda_kctx *)vctx;
    bool noop;
    int rc = gf_kargs_batchnorm(y, x, n, c, hw, mean, var, w_dtype, eps, act, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter(ctx, fn, s)) != 0)
        return rc;
    void *ws;
    if ((rc = gf_cu_ws_get(ctx, fn, 2 * f32_bytes(c), &ws)) != 0)
        return rc;
    float *sc = (float *)ws, *sh = (float *)((char *)ws + f32_bytes(c));
    GF_WDISPATCH(w_dtype, T,
                 k_bn_fold<T><<<grid_for(c, GF_THREADS), GF_THREADS, 0, s->stream>>>(
                     sc, sh, (const T *)mean, (const T *)var, (const T *)gamma, (const T *)beta,
                     c, eps));
    int64_t total = n * c * hw;
    k_bn_apply<<<grid_for(total, GF_THREADS), GF_THREADS, 0, s->stream>>>(y, x, total, hw, c, sc,
                                                                          sh, (int)act);
    return gf_cu_launched(fn, "k_bn_apply");
}

static int cu_add(void *vctx, gf_stream *s, float *y, const float *a, const float *b, int64_t n,
                  gf_act act)
{
    static const char fn[] = "add";
    bool noop;
    int rc = gf_kargs_add(y, a, b, n, act, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter((gf_cuda_kctx *)vctx, fn, s)) != 0)
        return rc;
    k_add<<<grid_for(n, GF_THREADS), GF_THREADS, 0, s->stream>>>(y, a, b, n, (int)act);
    return gf_cu_launched(fn, "k_add");
}

static int cu_global_avgpool(void *vctx, gf_stream *s, float *y, const float *x, int64_t n,
                             int64_t c, int64_t hw)
{
    static const char fn[] = "global_avgpool";
    bool noop;
    int rc = gf_kargs_global_avgpool(y, x, n, c, hw, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter((gf_cuda_kctx *)vctx, fn, s)) != 0)
        return rc;
    int64_t planes = n * c;
    k_global_avgpool<<<grid_for(planes, GF_THREADS / 32), GF_THREADS, 0, s->stream>>>(y, x, planes,
                                                                                     hw);
    return gf_cu_launched(fn, "k_global_avgpool");
}

/* ---- embedding ---- */

static int cu_embedding(void *vctx, gf_stream *s, float *y, const void *table, gf_dtype w_dtype,
                        int64_t vocab, int64_t dim, const void *ids, gf_dtype id_dtype, int64_t n)
{
    static const char fn[] = "embedding";
    bool noop;
    int rc = gf_kargs_embedding(y, table, w_dtype, vocab, dim, ids, id_dtype, n, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter((gf_cuda_kctx *)vctx, fn, s)) != 0)
        return rc;
    long long *dev_error = s->dev_error != NULL ? gf_cuda_stream_error_words(s) : NULL;
    if (dev_error == NULL)
        return gf_kerr(GF_ERR_INTERNAL, fn, "the stream has no device error word");
    unsigned g = (unsigned)(n < GF_MAX_BLOCKS ? n : GF_MAX_BLOCKS);
    int threads = row_threads(dim);
    if (id_dtype == GF_DT_I32)
        GF_WDISPATCH(w_dtype, T,
                     k_embedding<T, int32_t><<<g, threads, 0, s->stream>>>(
                         y, (const T *)table, vocab, dim, (const int32_t *)ids, n, dev_error));
    else
        GF_WDISPATCH(w_dtype, T,
                     k_embedding<T, int64_t><<<g, threads, 0, s->stream>>>(
                         y, (const T *)table, vocab, dim, (const int64_t *)ids, n, dev_error));
    return gf_cu_launched(fn, "k_embedding");
}

/* ---- attention ---- */

static int cu_attention(void *vctx, gf_stream *s, float *out, const float *q, const float *k,
                        const float *v, int64_t b, int64_t h, int64_t seq, int64_t d, float scale,
                        const void *mask, gf_dtype mask_dtype)
{
    static const char fn[] = "attention";
    gf_cuda_kctx *ctx = (gf_cuda_kctx *)vctx;
    bool noop;
    int rc = gf_kargs_attention(out, q, k, v, b, h, seq, d, mask, mask_dtype, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter(ctx, fn, s)) != 0)
        return rc;
    cudaStream_t st = s->stream;
    int64_t bh = b * h, ss = seq * seq, sd = seq * d;
    /* (batch, head) pairs per chunk, so the scores stay within the chunk
     * size (at least one pair). */
    int64_t cb = (int64_t)(GF_CHUNK_BYTES / sizeof(float)) / ss;
    cb = cb < 1 ? 1 : (cb > bh ? bh : cb);
    void *ws;
    if ((rc = gf_cu_ws_get(ctx, fn, f32_bytes(cb * ss), &ws)) != 0)
        return rc;
    float *sc = (float *)ws;
    int brc = gf_cu_blas_bind(ctx, fn, st);
    if (brc != 0)
        return brc;
    cublasStatus_t bs;
    int threads = row_threads(seq);
    for (int64_t p0 = 0; p0 < bh; p0 += cb) {
        int64_t cnt = bh - p0 < cb ? bh - p0 : cb;
        /* scores[i, j] = scale q_i . k_j */
        bs = gf_cu_gemm_rm(ctx->blas, 0, 1, seq, seq, d, scale, q + p0 * sd, d, sd, k + p0 * sd, d, sd,
                     GF_DT_F32, 0.0f, sc, seq, ss, cnt);
        if (bs != CUBLAS_STATUS_SUCCESS)
            return gf_cu_blas_fail(fn, "cublasSgemmStridedBatched (scores)", bs);
        int64_t rows = cnt * seq;
        unsigned g = (unsigned)(rows < GF_MAX_BLOCKS ? rows : GF_MAX_BLOCKS);
        if (mask != NULL && mask_dtype == GF_DT_I64)
            k_masked_softmax<int64_t><<<g, threads, 0, st>>>(sc, rows, seq, p0, h,
                                                             (const int64_t *)mask);
        else
            k_masked_softmax<int32_t><<<g, threads, 0, st>>>(sc, rows, seq, p0, h,
                                                             (const int32_t *)mask);
        if ((rc = gf_cu_launched(fn, "k_masked_softmax")) != 0)
            return rc;
        /* out = weights v */
        bs = gf_cu_gemm_rm(ctx->blas, 0, 0, seq, d, seq, 1.0f, sc, seq, ss, v + p0 * sd, d, sd,
                     GF_DT_F32, 0.0f, out + p0 * sd, d, sd, cnt);
        if (bs != CUBLAS_STATUS_SUCCESS)
            return gf_cu_blas_fail(fn, "cublasSgemmStridedBatched (values)", bs);
    }
    return 0;
}

/* ---- layout and dtype ---- */

static int cu_cast(void *vctx, gf_stream *s, void *dst, gf_dtype dst_dtype, const void *src,
                   gf_dtype src_dtype, int64_t n)
{
    static const char fn[] = "cast";
    bool noop;
    int rc = gf_kargs_cast(dst, dst_dtype, src, src_dtype, n, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter((gf_cuda_kctx *)vctx, fn, s)) != 0)
        return rc;
    if (dst_dtype == src_dtype) {
        if (dst == src)
            return 0;
        cudaError_t e = cudaMemcpyAsync(dst, src, (size_t)n * (size_t)gf_kw_size(src_dtype),
                                        cudaMemcpyDeviceToDevice, s->stream);
        if (e != cudaSuccess) {
            cudaGetLastError();
            return gf_kerr(GF_ERR_DEVICE, fn, "cudaMemcpyAsync failed: %s", cudaGetErrorString(e));
        }
        return 0;
    }
    unsigned g = grid_for(n, GF_THREADS);
    GF_WDISPATCH(dst_dtype, D,
                 GF_WDISPATCH(src_dtype, S,
                              k_cast<D, S><<<g, GF_THREADS, 0, s->stream>>>(
                                  (D *)dst, (const S *)src, n)));
    return gf_cu_launched(fn, "k_cast");
}

static int cu_permute_0213(void *vctx, gf_stream *s, float *y, const float *x, int64_t d0,
                           int64_t d1, int64_t d2, int64_t d3)
{
    static const char fn[] = "permute_0213";
    bool noop;
    int rc = gf_kargs_permute_0213(y, x, d0, d1, d2, d3, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter((gf_cuda_kctx *)vctx, fn, s)) != 0)
        return rc;
    k_permute_0213<<<grid_for(d0 * d1 * d2 * d3, GF_THREADS), GF_THREADS, 0, s->stream>>>(
        y, x, d0, d1, d2, d3);
    return gf_cu_launched(fn, "k_permute_0213");
}

static int cu_copy2d(void *vctx, gf_stream *s, void *dst, int64_t dst_pitch, const void *src,
                     int64_t src_pitch, int64_t width, int64_t rows)
{
    static const char fn[] = "copy2d";
    bool noop;
    int rc = gf_kargs_copy2d(dst, dst_pitch, src, src_pitch, width, rows, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter((gf_cuda_kctx *)vctx, fn, s)) != 0)
        return rc;
    cudaError_t e;
    if (rows == 1)
        e = cudaMemcpyAsync(dst, src, (size_t)width, cudaMemcpyDeviceToDevice, s->stream);
    else
        e = cudaMemcpy2DAsync(dst, (size_t)dst_pitch, src, (size_t)src_pitch, (size_t)width,
                              (size_t)rows, cudaMemcpyDeviceToDevice, s->stream);
    if (e == cudaErrorInvalidPitchValue || e == cudaErrorInvalidValue) {
        /* pitches beyond what the copy engine takes: row by row */
        cudaGetLastError();
        e = cudaSuccess;
        for (int64_t r = 0; r < rows && e == cudaSuccess; r++)
            e = cudaMemcpyAsync((char *)dst + r * dst_pitch, (const char *)src + r * src_pitch,
                                (size_t)width, cudaMemcpyDeviceToDevice, s->stream);
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        return gf_kerr(GF_ERR_DEVICE, fn, "cudaMemcpy2DAsync failed: %s", cudaGetErrorString(e));
    }
    return 0;
}

static const char *cu_last_error(void *ctx)
{
    (void)ctx;
    return gf_kerr_last();
}

/* ---- the table ---- */

extern "C" gf_status gf_cuda_kctx_new(gf_cuda_alloc_fn alloc_fn, gf_cuda_free_fn free_fn,
                                      void *arg, gf_cuda_kctx **out, gf_err *err)
{
    gf_cuda_kctx *c = (gf_cuda_kctx *)calloc(1, sizeof *c);
    if (c == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "%s: out of memory", __func__);
    c->alloc_fn = alloc_fn;
    c->free_fn = free_fn;
    c->arg = arg;
    cudaError_t e = cudaGetDevice(&c->device);
    if (e != cudaSuccess) {
        cudaGetLastError();
        free(c);
        return gf_err_set(err, GF_ERR_DEVICE, "%s: cudaGetDevice failed: %s", __func__,
                          cudaGetErrorString(e));
    }
    if (cudaDeviceGetAttribute(&c->cc_major, cudaDevAttrComputeCapabilityMajor, c->device) !=
        cudaSuccess) {
        cudaGetLastError();
        c->cc_major = 0;
    }
    cublasStatus_t bs = cublasCreate(&c->blas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        free(c);
        return gf_err_set(err, bs == CUBLAS_STATUS_ALLOC_FAILED ? GF_ERR_NO_DEVICE_MEM : GF_ERR_DEVICE,
                          "%s: cublasCreate failed: %s", __func__, cublasGetStatusString(bs));
    }
    *out = c;
    return GF_OK;
}

extern "C" void gf_cuda_kctx_free(gf_cuda_kctx *ctx)
{
    if (ctx == NULL)
        return;
    if (ctx->ws != NULL)
        ctx->free_fn(ctx->arg, ctx->ws);
    if (ctx->blas != NULL)
        cublasDestroy(ctx->blas);
    if (ctx->blas_ws != NULL) /* after the handle that used it */
        ctx->free_fn(ctx->arg, ctx->blas_ws);
    free(ctx);
}

/* The table, one labelled line per member in the order of gpufaas/kernels.h;
 * a backend instance gets a copy with its own context. */
static const gf_kernels gf_cuda_kernel_table = {
    /* .version = */ GF_KERNELS_VERSION,
    /* .size = */ sizeof(gf_kernels),
    /* .ctx = */ NULL, /* set per backend instance by the fill below */
    /* .last_error = */ cu_last_error,
    /* .sync = */ NULL,
    /* .gemm = */ gf_cu_gemm,
    /* .gemm_batched = */ gf_cu_gemm_batched,
    /* .bias_act = */ cu_bias_act,
    /* .softmax = */ cu_softmax,
    /* .layernorm = */ cu_layernorm,
    /* .batchnorm = */ cu_batchnorm,
    /* .add = */ cu_add,
    /* .conv2d = */ gf_cu_conv2d,
    /* .maxpool2d = */ gf_cu_maxpool2d,
    /* .avgpool2d = */ gf_cu_avgpool2d,
    /* .global_avgpool = */ cu_global_avgpool,
    /* .embedding = */ cu_embedding,
    /* .attention = */ cu_attention,
    /* .cast = */ cu_cast,
    /* .permute_0213 = */ cu_permute_0213,
    /* .copy2d = */ cu_copy2d,
    /* members below are valid for version 2 */
    /* .unary = */ gf_cu_unary,
    /* .binary = */ gf_cu_binary,
    /* .where = */ gf_cu_where,
    /* .strided_copy = */ gf_cu_strided_copy,
    /* .gather = */ gf_cu_gather,
    /* .reduce = */ gf_cu_reduce,
    /* .softmax_axis = */ gf_cu_softmax_axis,
    /* .conv2d_ex = */ gf_cu_conv2d_ex,
    /* .pool2d_ex = */ gf_cu_pool2d_ex,
    /* .cast_ex = */ gf_cu_cast_ex,
    /* .fill = */ gf_cu_fill,
    /* members below are valid for version 3: no packed weights on cuda */
    /* .conv2d_pack_size = */ NULL,
    /* .conv2d_pack = */ NULL,
    /* .conv2d_packed = */ NULL,
};

extern "C" void gf_cuda_kernels_fill(gf_kernels *k, gf_cuda_kctx *ctx)
{
    *k = gf_cuda_kernel_table;
    k->ctx = ctx;
}
