/* gpufaas — the kernel table: the operations a function computes with.
 *
 * Part of the function ABI (see gpufaas/function.h). Each backend (cpu, cuda)
 * provides one table with the same signatures, so a function runs unchanged on
 * either. Conventions for every kernel:
 *
 *  - The first argument is the table's `ctx`, the second the stream the work
 *    is ordered on (the compute stream a function is handed). On cuda a kernel
 *    is asynchronous: it returns once the work is queued. On cpu it has
 *    finished when it returns.
 *  - All pointers are device pointers of the table's device (on cpu: ordinary
 *    addresses). Tensors are dense and row-major. Activations are FP32;
 *    operands documented as "w" (weights) may be F32, F16 or BF16, named by the
 *    dtype argument next to them. Computation is in FP32.
 *  - Sizes are int64_t and must be >= 0; a size of 0 is a no-op.
 *  - Return value: GF_OK (0) on success, else a gf_status code of
 *    <gpufaas/status.h> (GF_ERR_INVALID for bad arguments,
 *    GF_ERR_UNSUPPORTED for an unsupported dtype, GF_ERR_NO_DEVICE_MEM when
 *    workspace does not fit, GF_ERR_DEVICE for a device failure). A human
 *    message for the last failure on the calling thread is available from
 *    last_error().
 *  - Errors a device can only detect while running (an out-of-range embedding
 *    index on cuda) are reported by the next sync() of that stream; on cpu they
 *    are reported at once. Out-of-range data is never read either way.
 *
 * Versioning: the table starts with its version and size; it is append-only
 * ("members above are valid for version N"). A caller checks `size` before
 * using a member added after version 1.
 */
#ifndef GPUFAAS_KERNELS_H
#define GPUFAAS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <gpufaas/status.h>
#include <gpufaas/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GF_KERNELS_VERSION 1

/* An ordered queue of work on one device (opaque). */
typedef struct gf_stream gf_stream;

/* Elementwise activations (fused into bias, add, conv and batchnorm). */
typedef enum gf_act {
    GF_ACT_IDENTITY = 0,
    GF_ACT_RELU = 1,
    GF_ACT_GELU_ERF = 2,  /* x * 0.5 * (1 + erf(x / sqrt 2)): PyTorch's default GELU */
    GF_ACT_GELU_TANH = 3, /* x * 0.5 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    GF_ACT_SILU = 4,      /* x * sigmoid(x) */
    GF_ACT_TANH = 5,
    GF_ACT_SIGMOID = 6,
    GF_ACT_COUNT_
} gf_act;

/* 2-d convolution geometry (NCHW input, OIHW weight, PyTorch semantics). */
typedef struct gf_conv2d_params {
    int64_t n, c, h, w;       /* input: batch, channels, height, width */
    int64_t oc, kh, kw;       /* output channels, kernel height, width */
    int64_t stride_h, stride_w;
    int64_t pad_h, pad_w;     /* zero padding on each side */
    int64_t dil_h, dil_w;     /* dilation (1 = dense) */
    int64_t groups;           /* c and oc divisible by groups; weight is [oc, c/groups, kh, kw] */
} gf_conv2d_params;

/* 2-d pooling geometry (NCHW). Output size as PyTorch with ceil_mode=False:
 * oh = (h + 2 pad_h - kh) / stride_h + 1. */
typedef struct gf_pool2d_params {
    int64_t n, c, h, w;
    int64_t kh, kw, stride_h, stride_w, pad_h, pad_w;
    int32_t count_include_pad; /* avgpool: divide by kh*kw (1) or by the in-bounds count (0) */
} gf_pool2d_params;

typedef struct gf_kernels {
    uint32_t version; /* GF_KERNELS_VERSION of the provider */
    uint32_t size;    /* sizeof(gf_kernels) of the provider */
    void *ctx;        /* first argument of every member */

    /* Message for the last failed call on this thread ("" if none). The
     * string lives until the next call on this thread. */
    const char *(*last_error)(void *ctx);

    /* Wait until all work queued on s has finished; report deferred errors. */
    int (*sync)(void *ctx, gf_stream *s);

    /* C[m,n] = alpha * op(A) * op(B) + beta * C, row-major. op(A) is [m,k]:
     * A is [m,k] (lda >= k) or, when trans_a, [k,m] (lda >= m); likewise B is
     * [k,n] or, when trans_b, [n,k]. A and B are F32/F16/BF16; C is F32.
     * With beta == 0, C is not read (may hold NaN). */
    int (*gemm)(void *ctx, gf_stream *s, int trans_a, int trans_b, int64_t m, int64_t n,
                int64_t k, float alpha, const void *a, gf_dtype a_dtype, int64_t lda,
                const void *b, gf_dtype b_dtype, int64_t ldb, float beta, float *c,
                int64_t ldc);

    /* batch independent gemms; matrix i of A starts at a + i*stride_a
     * elements, likewise B and C. */
    int (*gemm_batched)(void *ctx, gf_stream *s, int trans_a, int trans_b, int64_t m,
                        int64_t n, int64_t k, float alpha, const void *a, gf_dtype a_dtype,
                        int64_t lda, int64_t stride_a, const void *b, gf_dtype b_dtype,
                        int64_t ldb, int64_t stride_b, float beta, float *c, int64_t ldc,
                        int64_t stride_c, int64_t batch);

    /* x[r,c] = act(x[r,c] + bias[c]) in place; bias (w) may be NULL. */
    int (*bias_act)(void *ctx, gf_stream *s, float *x, int64_t rows, int64_t cols,
                    const void *bias, gf_dtype bias_dtype, gf_act act);

    /* Softmax (log_softmax when log != 0) over the last dimension, stable
     * (the row maximum is subtracted). y may equal x. */
    int (*softmax)(void *ctx, gf_stream *s, float *y, const float *x, int64_t rows,
                   int64_t cols, int log);

    /* y = (x - mean) / sqrt(var + eps) * gamma + beta over the last dimension
     * (biased variance, as PyTorch). gamma/beta (w) may be NULL (1 / 0). */
    int (*layernorm)(void *ctx, gf_stream *s, float *y, const float *x, int64_t rows,
                     int64_t cols, const void *gamma, const void *beta, gf_dtype w_dtype,
                     float eps);

    /* Inference batchnorm on NCHW (hw = H*W): y = act((x - mean[c]) /
     * sqrt(var[c] + eps) * gamma[c] + beta[c]). All four vectors (w) are [c]. */
    int (*batchnorm)(void *ctx, gf_stream *s, float *y, const float *x, int64_t n, int64_t c,
                     int64_t hw, const void *mean, const void *var, const void *gamma,
                     const void *beta, gf_dtype w_dtype, float eps, gf_act act);

    /* y = act(a + b), n elements; y may equal a or b (residual add). */
    int (*add)(void *ctx, gf_stream *s, float *y, const float *a, const float *b, int64_t n,
               gf_act act);

    /* y[n,oc,oh,ow] = act(conv(x, w) + bias[oc]); w (w) is [oc, c/groups, kh, kw];
     * bias (w_dtype too) may be NULL. oh = (h + 2 pad_h - dil_h (kh-1) - 1) /
     * stride_h + 1, likewise ow. Uses backend workspace. */
    int (*conv2d)(void *ctx, gf_stream *s, float *y, const float *x,
                  const gf_conv2d_params *p, const void *w, const void *bias,
                  gf_dtype w_dtype, gf_act act);

    /* Max pooling (padding never wins); average pooling; global average
     * pooling y[n,c] = mean over h*w of x[n,c,:,:]. */
    int (*maxpool2d)(void *ctx, gf_stream *s, float *y, const float *x,
                     const gf_pool2d_params *p);
    int (*avgpool2d)(void *ctx, gf_stream *s, float *y, const float *x,
                     const gf_pool2d_params *p);
    int (*global_avgpool)(void *ctx, gf_stream *s, float *y, const float *x, int64_t n,
                          int64_t c, int64_t hw);

    /* y[i,:] = table[ids[i],:] for i < n; table (w) is [vocab, dim]; ids are
     * I32 or I64. An index outside [0, vocab) is an error (GF_ERR_INVALID, the
     * message names the index); the row is never read. */
    int (*embedding)(void *ctx, gf_stream *s, float *y, const void *table, gf_dtype w_dtype,
                     int64_t vocab, int64_t dim, const void *ids, gf_dtype id_dtype, int64_t n);

    /* Scaled dot-product attention, q/k/v/out [b, h, s, d]:
     * out = softmax(q k^T * scale + mask) v, per (batch, head). mask is NULL or
     * [b, s] (I32 or I64, nonzero = attend to that key); masked keys get zero
     * weight; a row with every key masked attends uniformly. Uses workspace. */
    int (*attention)(void *ctx, gf_stream *s, float *out, const float *q, const float *k,
                     const float *v, int64_t b, int64_t h, int64_t seq, int64_t d, float scale,
                     const void *mask, gf_dtype mask_dtype);

    /* Elementwise conversion between F32, F16 and BF16 (any pair, including
     * the same type, which copies). n elements. */
    int (*cast)(void *ctx, gf_stream *s, void *dst, gf_dtype dst_dtype, const void *src,
                gf_dtype src_dtype, int64_t n);

    /* y[a,c,b,d] = x[a,b,c,d] for FP32: [B,S,H,D] <-> [B,H,S,D]. */
    int (*permute_0213)(void *ctx, gf_stream *s, float *y, const float *x, int64_t d0,
                        int64_t d1, int64_t d2, int64_t d3);

    /* Copy `rows` rows of `width` bytes: row r from src + r*src_pitch to
     * dst + r*dst_pitch (device to device, ordered on s). */
    int (*copy2d)(void *ctx, gf_stream *s, void *dst, int64_t dst_pitch, const void *src,
                  int64_t src_pitch, int64_t width, int64_t rows);
    /* members above are valid for version 1 */
} gf_kernels;

#ifdef __cplusplus
}
#endif

#endif /* GPUFAAS_KERNELS_H */
