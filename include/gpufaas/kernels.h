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
 * using a member added after version 1 (GF_KERNELS_HAS(k, member)).
 *
 * Version 2 adds what running ONNX graphs needs (unary, broadcasting binary,
 * where, strided_copy, gather, reduce, softmax_axis, conv2d_ex, pool2d_ex,
 * cast_ex, fill). Its conventions, beyond the ones above:
 *  - Shapes and strides are small host arrays (rank <= GF_MAX_RANK), read
 *    before the call returns: the caller may reuse them at once. Strides are
 *    in elements (not bytes) of the tensor they describe and may be 0 (a
 *    broadcast dimension) or negative. rank 0 is one element.
 *  - Element types other than F32 appear where ONNX needs them: I64/I32 for
 *    arithmetic on indices and shapes, BOOL (one byte, 0 or 1) for masks and
 *    comparison results. Integer arithmetic wraps (two's complement), never
 *    traps; an integer division or modulo by zero is an error (GF_ERR_INVALID
 *    at once on cpu, from the next sync on cuda).
 *  - An output may be the same buffer as an input only where the member says
 *    so; otherwise it must not overlap any input.
 *
 * Version 3 adds convolution weights packed once, at load, in the layout the
 * backend's convolutions read (conv2d_pack_size, conv2d_pack,
 * conv2d_packed), so that no call reorders them. A backend without a packed
 * form leaves the three NULL (the cuda backend does); one may also have no
 * packed form for some geometries (conv2d_pack_size 0). The packing members
 * work on host memory only and may be called before any device work, from
 * any thread (a function's load packs into derived parameters, which the
 * parameter cache then stores and swaps like any other: the packed bytes are
 * copied to the device as they are).
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

#define GF_KERNELS_VERSION 3

/* True when table k (a const gf_kernels *) provides member m: the provider's
 * table is large enough to hold it and the slot is filled. */
#define GF_KERNELS_HAS(k, m)                                                                      \
    ((k)->size >= offsetof(gf_kernels, m) + sizeof((k)->m) && (k)->m != NULL)

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

/* ---- version 2 types ---- */

/* Elementwise F32 functions of unary(), with ONNX semantics. alpha and beta
 * are the op's attributes where it has any (named per op), else ignored. */
typedef enum gf_unary_op {
    GF_UNARY_RELU = 0,        /* max(x, 0) */
    GF_UNARY_SIGMOID = 1,     /* 1 / (1 + e^-x) */
    GF_UNARY_TANH = 2,
    GF_UNARY_ERF = 3,
    GF_UNARY_EXP = 4,
    GF_UNARY_LOG = 5,         /* natural log; log(0) = -inf, log(<0) = NaN */
    GF_UNARY_SQRT = 6,
    GF_UNARY_RECIPROCAL = 7,  /* 1 / x */
    GF_UNARY_NEG = 8,
    GF_UNARY_ABS = 9,
    GF_UNARY_FLOOR = 10,
    GF_UNARY_CEIL = 11,
    GF_UNARY_ROUND = 12,      /* to nearest, halves to even (2.5 -> 2) */
    GF_UNARY_SIGN = 13,       /* -1, 0 or 1; NaN stays NaN */
    GF_UNARY_SIN = 14,
    GF_UNARY_COS = 15,
    GF_UNARY_SOFTPLUS = 16,   /* log(1 + e^x), without overflow */
    GF_UNARY_SOFTSIGN = 17,   /* x / (1 + |x|) */
    GF_UNARY_HARDSIGMOID = 18,/* max(0, min(1, alpha x + beta)) */
    GF_UNARY_HARDSWISH = 19,  /* x max(0, min(1, x / 6 + 1 / 2)) */
    GF_UNARY_LEAKYRELU = 20,  /* x < 0 ? alpha x : x */
    GF_UNARY_ELU = 21,        /* x < 0 ? alpha (e^x - 1) : x */
    GF_UNARY_SELU = 22,       /* beta (x <= 0 ? alpha (e^x - 1) : x): alpha, gamma = beta */
    GF_UNARY_CLIP = 23,       /* min(max(x, alpha), beta); NaN stays NaN */
    GF_UNARY_GELU_ERF = 24,   /* x (1 + erf(x / sqrt 2)) / 2 */
    GF_UNARY_GELU_TANH = 25,  /* x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) / 2 */
    GF_UNARY_POW_SCALAR = 26, /* x^alpha (C pow) */
    GF_UNARY_MISH = 27,       /* x tanh(softplus(x)) */
    GF_UNARY_TAN = 28,
    GF_UNARY_ASIN = 29,
    GF_UNARY_ACOS = 30,
    GF_UNARY_ATAN = 31,
    GF_UNARY_SINH = 32,
    GF_UNARY_COSH = 33,
    GF_UNARY_ASINH = 34,
    GF_UNARY_ACOSH = 35,
    GF_UNARY_ATANH = 36,
    GF_UNARY_CELU = 37,       /* max(0, x) + min(0, alpha (e^(x / alpha) - 1)) */
    GF_UNARY_THRESHOLDED_RELU = 38, /* x > alpha ? x : 0 */
    GF_UNARY_SHRINK = 39,     /* x < -alpha ? x + beta : x > alpha ? x - beta : 0 (lambd, bias) */
    GF_UNARY_IDENTITY = 40,   /* x */
    GF_UNARY_SILU = 41,       /* x sigmoid(x) */
    GF_UNARY_COUNT_
} gf_unary_op;

/* Elementwise operations of binary(): y = a OP b with broadcasting. */
typedef enum gf_binary_op {
    GF_BINARY_ADD = 0,
    GF_BINARY_SUB = 1,
    GF_BINARY_MUL = 2,
    GF_BINARY_DIV = 3,  /* F32: IEEE; integers: truncates toward zero */
    GF_BINARY_POW = 4,  /* F32: C pow; integers: exact (wrapping), a negative
                         * exponent gives 1 for a = 1, +-1 for a = -1, else 0 */
    GF_BINARY_MAX = 5,  /* F32: NaN in either input gives NaN */
    GF_BINARY_MIN = 6,
    GF_BINARY_MOD = 7,  /* result has the sign of b (ONNX Mod fmod=0, Python %) */
    GF_BINARY_FMOD = 8, /* result has the sign of a (ONNX Mod fmod=1, C fmod / %) */
    GF_BINARY_PRELU = 9,/* a < 0 ? a b : a (ONNX PRelu: a = x, b = slope) */
    /* comparisons: y is BOOL; F32 compares as IEEE (NaN is unordered) */
    GF_BINARY_EQUAL = 10,
    GF_BINARY_LESS = 11,
    GF_BINARY_LESS_EQUAL = 12,
    GF_BINARY_GREATER = 13,
    GF_BINARY_GREATER_EQUAL = 14,
    /* logic: inputs and y BOOL (any nonzero byte reads as true) */
    GF_BINARY_AND = 15,
    GF_BINARY_OR = 16,
    GF_BINARY_XOR = 17,
    GF_BINARY_COUNT_
} gf_binary_op;

/* Reductions of reduce() over the middle axis of [outer, rdim, inner]. Over
 * an empty axis (rdim == 0): SUM, SUM_SQUARE, L1, L2 give 0; PROD 1; MEAN
 * NaN; MAX -inf; MIN +inf; LOG_SUM and LOG_SUM_EXP -inf; ARG* are an error. */
typedef enum gf_reduce_op {
    GF_REDUCE_SUM = 0,
    GF_REDUCE_MEAN = 1,
    GF_REDUCE_MAX = 2,         /* NaN propagates */
    GF_REDUCE_MIN = 3,
    GF_REDUCE_PROD = 4,
    GF_REDUCE_SUM_SQUARE = 5,  /* sum x^2 */
    GF_REDUCE_L1 = 6,          /* sum |x| */
    GF_REDUCE_L2 = 7,          /* sqrt(sum x^2) */
    GF_REDUCE_LOG_SUM = 8,     /* log(sum x) */
    GF_REDUCE_LOG_SUM_EXP = 9, /* log(sum e^x), stable (the maximum is subtracted) */
    GF_REDUCE_ARGMAX = 10,     /* y is I64: index of the first maximum (a NaN counts as
                                * the maximum) */
    GF_REDUCE_ARGMIN = 11,     /* first minimum (likewise NaN) */
    GF_REDUCE_ARGMAX_LAST = 12,/* ONNX select_last_index = 1: the last one */
    GF_REDUCE_ARGMIN_LAST = 13,
    GF_REDUCE_COUNT_
} gf_reduce_op;

/* 2-d convolution with asymmetric padding (ONNX Conv; a 1-d Conv is h = kh
 * = 1). NCHW input, OIHW weight [oc, c/groups, kh, kw]. Output size:
 * oh = (h + pad_t + pad_b - dil_h (kh - 1) - 1) / stride_h + 1, likewise ow
 * with pad_l, pad_r (gf_window_out with ceil_mode 0). */
typedef struct gf_conv2d_ex_params {
    int64_t n, c, h, w;       /* input: batch, channels, height, width */
    int64_t oc, kh, kw;       /* output channels, kernel height, width */
    int64_t stride_h, stride_w;
    int64_t pad_t, pad_l, pad_b, pad_r; /* zeros above, left, below, right (ONNX pads order) */
    int64_t dil_h, dil_w;     /* dilation (1 = dense) */
    int64_t groups;           /* c and oc divisible by groups */
} gf_conv2d_ex_params;

/* Layouts of conv2d_packed's activations (bits of its `layout`): each of
 * x, y and the residual is NCHW unless its bit says NHWC (channels last:
 * [n, h, w, c]). */
enum {
    GF_CONV_X_NHWC = 1u << 0,
    GF_CONV_Y_NHWC = 1u << 1,
    GF_CONV_R_NHWC = 1u << 2,
};

/* Kinds of pool2d_ex. */
typedef enum gf_pool_kind {
    GF_POOL_MAX = 0, /* padding never wins; NaN propagates */
    GF_POOL_AVG = 1,
    GF_POOL_COUNT_
} gf_pool_kind;

/* 2-d pooling with ONNX's attributes (MaxPool, AveragePool; a 1-d pool is
 * h = kh = 1; GlobalMaxPool is kh = h, kw = w). Window (oy, ox) covers rows
 * oy stride_h - pad_t + i dil_h for i < kh, likewise columns. Output size:
 * gf_window_out. Each pad must be below the dilated window
 * (dil (k - 1) + 1), as onnxruntime requires. Max takes the input elements
 * in the window. Average divides the sum of the input elements in the
 * window by their count (count_include_pad = 0), or by the count of window
 * positions inside the padded input [-pad_t, h + pad_b) x [-pad_l, w +
 * pad_r) (count_include_pad = 1; with ceil_mode a window may reach past the
 * padding, and those positions do not count, as in PyTorch). A window with
 * no input element (possible only with large pads or dilations) gives -inf
 * (max) or NaN (average without padding). */
typedef struct gf_pool2d_ex_params {
    int64_t n, c, h, w;
    int64_t kh, kw, stride_h, stride_w;
    int64_t pad_t, pad_l, pad_b, pad_r;
    int64_t dil_h, dil_w;
    int32_t ceil_mode;         /* output size rounds up (1) or down (0) */
    int32_t count_include_pad; /* average: see above */
} gf_pool2d_ex_params;

/* Output extent of a sliding window along one axis, as ONNX and PyTorch
 * compute it: span = dil (k - 1) + 1; out = (in + pad_b + pad_e - span) /
 * stride + 1, rounded down, or up when ceil_mode (then the last window must
 * start inside the input or its leading pad, else out is one less). -1 when
 * the window does not fit the padded input. Arguments must be >= 0 (stride,
 * dil, k >= 1) and below 2^30. Used by conv2d_ex and pool2d_ex, and by
 * callers that infer shapes. */
static inline int64_t gf_window_out(int64_t in, int64_t k, int64_t stride, int64_t pad_b,
                                    int64_t pad_e, int64_t dil, int ceil_mode)
{
    int64_t span = dil * (k - 1) + 1, room = in + pad_b + pad_e - span;
    if (room < 0)
        return -1;
    int64_t out = (ceil_mode ? room + stride - 1 : room) / stride + 1;
    if (ceil_mode && (out - 1) * stride >= in + pad_b)
        out--;
    return out;
}

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

    /* y[i] = op(x[i]) for n F32 elements (gf_unary_op; alpha, beta as the op
     * names them). y may equal x. */
    int (*unary)(void *ctx, gf_stream *s, gf_unary_op op, float *y, const float *x, int64_t n,
                 float alpha, float beta);

    /* Broadcasting y = a op b: y is dense with shape out_shape[rank]; element
     * (i_0 .. i_r-1) reads a[sum i_k a_strides[k]] and b[sum i_k
     * b_strides[k]] (a broadcast dimension has stride 0). dtype is the
     * inputs' type: F32, I32 or I64 for arithmetic (y has that type) and
     * comparisons (y is BOOL); BOOL for logic. PRELU, POW: F32, I32, I64.
     * y may equal a (or b) when a (b) has y's type and its strides are
     * y's dense strides (in-place). Integer DIV, MOD, FMOD by zero:
     * GF_ERR_INVALID (cuda: from the next sync; those elements get 0). */
    int (*binary)(void *ctx, gf_stream *s, gf_binary_op op, int rank, const int64_t *out_shape,
                  void *y, const void *a, const int64_t *a_strides, const void *b,
                  const int64_t *b_strides, gf_dtype dtype);

    /* Broadcasting y = cond ? a : b, strides as for binary. cond is BOOL
     * (any nonzero byte is true); a, b and y hold elements of elem_size
     * bytes (1, 2, 4 or 8), any type. y may equal a or b under the same
     * condition as binary's. */
    int (*where)(void *ctx, gf_stream *s, int rank, const int64_t *out_shape, void *y,
                 const void *cond, const int64_t *c_strides, const void *a,
                 const int64_t *a_strides, const void *b, const int64_t *b_strides,
                 int64_t elem_size);

    /* Copy with arbitrary strides: for every index (i_0 .. i_r-1) of shape,
     * y[sum i_k y_strides[k]] = x[x_offset + sum i_k x_strides[k]]; y_strides
     * NULL means y is dense with that shape. Elements of elem_size bytes (1,
     * 2, 4 or 8). x strides may be 0 (Expand, Tile as [r, d] with stride 0
     * on r) or negative (Slice with negative steps); y strides must not be 0
     * on a dimension longer than 1, and y must not overlap x. Transpose,
     * Slice, Expand, Tile, Split; Concat and Pad write pieces of y through
     * y_strides. */
    int (*strided_copy)(void *ctx, gf_stream *s, int rank, const int64_t *shape, void *y,
                        const int64_t *y_strides, const void *x, const int64_t *x_strides,
                        int64_t x_offset, int64_t elem_size);

    /* ONNX Gather: x viewed as [outer, axis_dim, inner] elements of
     * elem_size bytes (1, 2, 4 or 8); y is [outer, n_ids, inner] with
     * y[o, j, i] = x[o, id_j, i]. ids are I32 or I64; a negative id counts
     * from the end (adds axis_dim). An id outside [-axis_dim, axis_dim) is
     * GF_ERR_INVALID naming it (cuda: from the next sync; its row is neither
     * read nor written). */
    int (*gather)(void *ctx, gf_stream *s, void *y, const void *x, int64_t outer,
                  int64_t axis_dim, int64_t inner, const void *ids, gf_dtype id_dtype,
                  int64_t n_ids, int64_t elem_size);

    /* y[o, i] = reduction over r of x[o, r, i], F32 x [outer, rdim, inner];
     * y is F32 [outer, inner], or I64 for the ARG* ops (gf_reduce_op). Other
     * axes: the caller transposes with strided_copy first, or reduces
     * repeatedly (adjacent axes merge into one rdim). */
    int (*reduce)(void *ctx, gf_stream *s, gf_reduce_op op, void *y, const float *x,
                  int64_t outer, int64_t rdim, int64_t inner);

    /* Softmax (log-softmax when log != 0) over the middle axis of
     * [outer, dim, inner], stable. y may equal x. (inner = 1 is softmax.) */
    int (*softmax_axis)(void *ctx, gf_stream *s, float *y, const float *x, int64_t outer,
                        int64_t dim, int64_t inner, int log);

    /* y[n,oc,oh,ow] = act(conv(x, w) + bias[oc] + residual[n,oc,oh,ow]), the
     * geometry in *p (gf_conv2d_ex_params). w (w) is [oc, c/groups, kh, kw];
     * bias (w_dtype too) and residual (F32, y's shape; must not overlap y)
     * may be NULL. Uses backend workspace. */
    int (*conv2d_ex)(void *ctx, gf_stream *s, float *y, const float *x,
                     const gf_conv2d_ex_params *p, const void *w, const void *bias,
                     gf_dtype w_dtype, const float *residual, gf_act act);

    /* Max or average pooling (gf_pool_kind) with the geometry in *p, F32
     * NCHW: y is [n, c, oh, ow]. */
    int (*pool2d_ex)(void *ctx, gf_stream *s, gf_pool_kind kind, float *y, const float *x,
                     const gf_pool2d_ex_params *p);

    /* Elementwise conversion between any two element types (every gf_dtype
     * but GF_DT_INVALID), ONNX Cast semantics: float to integer truncates
     * toward zero and saturates at the target's range (NaN gives 0); integer
     * to narrower integer wraps (two's complement); to BOOL is x != 0 (NaN is
     * true); from BOOL any nonzero byte is 1; to F16/BF16/F32 rounds to
     * nearest even (overflow gives infinity). Same type copies. n elements;
     * dst must not overlap src unless dst == src with equal types. */
    int (*cast_ex)(void *ctx, gf_stream *s, void *dst, gf_dtype dst_dtype, const void *src,
                   gf_dtype src_dtype, int64_t n);

    /* Set n elements of elem_size bytes (1, 2, 4 or 8) to the value whose
     * bytes are at value (a host pointer, read before the call returns). */
    int (*fill)(void *ctx, gf_stream *s, void *y, int64_t n, const void *value,
                int64_t elem_size);
    /* members above are valid for version 2 */

    /* Bytes of F32 [oc, c/groups, kh, kw] weights packed for convolutions of
     * geometry *p (and of any geometry differing from it only in n, h, w,
     * strides, pads or dilations), or 0 when the backend has no packed form
     * for it (then use conv2d_ex). Host only; no device work. */
    int64_t (*conv2d_pack_size)(void *ctx, const gf_conv2d_ex_params *p);

    /* Pack host F32 weights w [oc, c/groups, kh, kw] for *p into host memory
     * `packed` of conv2d_pack_size(p) bytes. The packed bytes describe
     * themselves (the geometry and layout they were made for). Host only; no
     * device work. */
    int (*conv2d_pack)(void *ctx, void *packed, const gf_conv2d_ex_params *p, const float *w);

    /* conv2d_ex with F32 bias and weights from conv2d_pack, copied to the
     * device as they are. The weights must have been packed for the same c,
     * oc, kh, kw and groups (else GF_ERR_INVALID); a geometry that differs
     * in anything else runs too (the backend then reorders them per call).
     * x, y and residual are NCHW or NHWC as the GF_CONV_*_NHWC bits of
     * layout say (the backend's convolutions run channels last: activations
     * kept NHWC between them are never reordered). */
    int (*conv2d_packed)(void *ctx, gf_stream *s, float *y, const float *x,
                         const gf_conv2d_ex_params *p, const void *packed, const float *bias,
                         const float *residual, gf_act act, uint32_t layout);
    /* members above are valid for version 3 */
} gf_kernels;

#ifdef __cplusplus
}
#endif

#endif /* GPUFAAS_KERNELS_H */
