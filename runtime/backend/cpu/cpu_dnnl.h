/* gpufaas — convolutions through oneDNN on the cpu (runtime/backend/cpu).
 *
 * oneDNN's direct convolutions (brgconv on AVX-512) run resnet-style
 * layers about twice as fast as im2col + OpenBLAS, but only with channels-
 * last activations and weights in its own blocked layout. So each call
 * reorders x from NCHW to NHWC, the weights to the layout the primitive
 * asks for and the residual (the sum post-op's input) to NHWC, runs the
 * convolution with bias and activation fused, and reorders the result
 * back to NCHW; measured, that is still about twice as fast per layer.
 * Primitives (and their reorders) are made once per geometry and kept in a
 * small LRU cache of the context; a geometry oneDNN does not implement is
 * remembered too and left to the caller's im2col path.
 *
 * Built without oneDNN (GF_HAVE_DNNL 0), or with GF_CPU_DNNL=0 in the
 * environment (how a test covers the im2col path), there is no context and
 * every call goes the im2col way.
 */
#ifndef GF_BACKEND_CPU_DNNL_H
#define GF_BACKEND_CPU_DNNL_H

#include <stdbool.h>
#include <stddef.h>

#include <gpufaas/kernels.h>

#include "core/error.h"

typedef struct gf_cpu_dnnl gf_cpu_dnnl;
typedef struct gf_cpu_dnnl_conv gf_cpu_dnnl_conv;

/* A oneDNN context running `threads` threads, or *out = NULL when oneDNN
 * is not built in or is switched off (not an error). */
gf_status gf_cpu_dnnl_new(int threads, gf_cpu_dnnl **out, gf_err *err);

/* Free the context and its cached primitives. NULL is a no-op. */
void gf_cpu_dnnl_free(gf_cpu_dnnl *d);

/* The cached convolution for geometry p (F32, bias and residual present
 * or not, act), made on first use; NULL when d is NULL or oneDNN does not
 * implement it. *scratch_bytes gets what gf_cpu_dnnl_conv_run needs. Valid
 * until the next call on d. */
gf_cpu_dnnl_conv *gf_cpu_dnnl_conv_get(gf_cpu_dnnl *d, const gf_conv2d_ex_params *p,
                                       bool has_bias, bool has_res, gf_act act,
                                       size_t *scratch_bytes);

/* y = act(conv(x, w) + bias + res) with c from gf_cpu_dnnl_conv_get; w and
 * bias F32; scratch holds its scratch_bytes (64-byte aligned). Returns 0
 * or a gf_status with the error recorded under fn. */
int gf_cpu_dnnl_conv_run(gf_cpu_dnnl *d, gf_cpu_dnnl_conv *c, const char *fn, float *y,
                         const float *x, const float *w, const float *bias, const float *res,
                         void *scratch);

/* The shape of a matmul: `batch` products C_i[m, n] = A[m, k] B_i[k, n],
 * row-major with leading dimensions lda, ldb, ldc, B_i = B + i sb and C_i
 * = C + i sc (A is shared), and a residual R_i laid out as C_i. */
typedef struct gf_cpu_gemm_shape {
    int64_t batch, m, n, k, lda, ldb, ldc, sb, sc;
} gf_cpu_gemm_shape;

/* A cached oneDNN matmul for F32 C_i = act(A B_i + bias[m] + R_i) of shape
 * sh, bias and R present or not (C is not read), act any gf_act oneDNN
 * has; NULL when d is NULL or oneDNN does not implement it (with those
 * post-ops) faster than its reference code. Valid until the next call on
 * d. (brgemm beats OpenBLAS by 5-30% on the 1x1 convolutions' shapes, and
 * the fused epilogue saves a pass over C.) */
gf_cpu_dnnl_conv *gf_cpu_dnnl_gemm_get(gf_cpu_dnnl *d, const gf_cpu_gemm_shape *sh,
                                       bool has_bias, bool has_res, gf_act act);

/* Run a matmul from gf_cpu_dnnl_gemm_get; bias and r as it was made for
 * (NULL when absent). Returns 0 or a gf_status. */
int gf_cpu_dnnl_gemm_run(gf_cpu_dnnl *d, gf_cpu_dnnl_conv *g, const char *fn, const float *a,
                         const float *b, float *c, const float *bias, const float *r);

/* Packed weights (the kernel table's conv2d_pack*): the bytes of F32
 * weights for p in the layout oneDNN's direct convolution reads, behind a
 * header naming the geometry and layout; 0 when d is NULL or oneDNN has
 * only its reference code for p. Thread-safe (no cached primitive is touched). */
int64_t gf_cpu_dnnl_pack_size(gf_cpu_dnnl *d, const gf_conv2d_ex_params *p);

/* Pack F32 [oc, c/groups, kh, kw] weights w for p into packed
 * (gf_cpu_dnnl_pack_size bytes). Thread-safe. Returns 0 or a gf_status. */
int gf_cpu_dnnl_pack(gf_cpu_dnnl *d, const char *fn, void *packed, const gf_conv2d_ex_params *p,
                     const float *w);

/* Whether packed was made by gf_cpu_dnnl_pack for p's c, oc, kh, kw and
 * groups. */
bool gf_cpu_dnnl_packed_fits(const void *packed, const gf_conv2d_ex_params *p);

/* Back to [oc, c/groups, kh, kw] (for a call oneDNN cannot run). */
int gf_cpu_dnnl_unpack(gf_cpu_dnnl *d, const char *fn, float *w, const void *packed,
                       const gf_conv2d_ex_params *p);

/* gf_cpu_dnnl_conv_run with packed weights: read where they are when c
 * wants their layout, else reordered into scratch (the same scratch_bytes
 * as gf_cpu_dnnl_conv_get gave); x, y, res NCHW or NHWC as layout
 * (GF_CONV_*_NHWC) says. */
int gf_cpu_dnnl_conv_run_packed(gf_cpu_dnnl *d, gf_cpu_dnnl_conv *c, const char *fn, float *y,
                                const float *x, const void *packed, const float *bias,
                                const float *res, void *scratch, uint32_t layout);

#endif /* GF_BACKEND_CPU_DNNL_H */
