/* gpufaas — what the cpu kernel library's files share (runtime/backend/cpu).
 * Private to cpu_kernels.c, cpu_conv.c, cpu_elementwise.c and cpu_reduce.c. */
#ifndef GF_BACKEND_CPU_INTERNAL_H
#define GF_BACKEND_CPU_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpufaas/kernels.h>

#include "backend/cpu/cpu_kernels.h"

struct gf_cpu_kctx {
    int blas_threads;   /* OpenBLAS (and oneDNN) threads set at creation */
    struct gf_cpu_dnnl *dnnl; /* oneDNN convolutions, or NULL (cpu_dnnl.h) */
    void *scratch;      /* reusable work memory (64-byte aligned), grown on demand */
    size_t scratch_cap; /* bytes behind scratch */
};

#define GF_CPU_ALIGN 64

/* Scratch of at least n bytes (the previous contents are not kept). NULL,
 * with the error recorded under fn, when memory is exhausted. Valid until
 * the next call on the context. */
void *gf_cpu_scratch(gf_cpu_kctx *c, const char *fn, size_t n);

/* Bytes of `count` floats rounded up to the alignment, for carving several
 * regions from one scratch block; false on overflow. */
bool gf_cpu_f32_region(int64_t count, size_t *bytes);

/* Widen n weights of dtype dt (F32/F16/BF16) at src into dst. */
void gf_cpu_widen(float *dst, const void *src, gf_dtype dt, int64_t n);

/* A weight vector of n elements as FP32: w itself when F32 (or NULL), else
 * widened into dst. */
const float *gf_cpu_w_f32(const void *w, gf_dtype dt, int64_t n, float *dst);

/* Apply act to n floats in place. */
void gf_cpu_act(float *x, int64_t n, gf_act act);

/* C = alpha op(A) op(B) + beta C on FP32, row-major, arguments already
 * checked (m, n > 0; sizes fit an int). */
void gf_cpu_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                  int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

/* Softmax (log_ != 0: log-softmax) of each row of [rows, cols], stable;
 * y may equal x. Arguments checked, rows and cols > 0. */
void gf_cpu_softmax_rows(float *y, const float *x, int64_t rows, int64_t cols, int log_);

/* The members implemented outside cpu_kernels.c (same signatures as the
 * table's). */
int gf_cpu_conv2d(void *ctx, gf_stream *s, float *y, const float *x, const gf_conv2d_params *p,
                  const void *w, const void *bias, gf_dtype w_dtype, gf_act act);
int gf_cpu_conv2d_ex(void *ctx, gf_stream *s, float *y, const float *x,
                     const gf_conv2d_ex_params *p, const void *w, const void *bias,
                     gf_dtype w_dtype, const float *residual, gf_act act);
int64_t gf_cpu_conv2d_pack_size(void *ctx, const gf_conv2d_ex_params *p);
int gf_cpu_conv2d_pack(void *ctx, void *packed, const gf_conv2d_ex_params *p, const float *w);
int gf_cpu_conv2d_packed(void *ctx, gf_stream *s, float *y, const float *x,
                         const gf_conv2d_ex_params *p, const void *packed, const float *bias,
                         const float *residual, gf_act act, uint32_t layout);
int gf_cpu_maxpool2d(void *ctx, gf_stream *s, float *y, const float *x,
                     const gf_pool2d_params *p);
int gf_cpu_avgpool2d(void *ctx, gf_stream *s, float *y, const float *x,
                     const gf_pool2d_params *p);
int gf_cpu_pool2d_ex(void *ctx, gf_stream *s, gf_pool_kind kind, float *y, const float *x,
                     const gf_pool2d_ex_params *p);
int gf_cpu_unary(void *ctx, gf_stream *s, gf_unary_op op, float *y, const float *x, int64_t n,
                 float alpha, float beta);
int gf_cpu_binary(void *ctx, gf_stream *s, gf_binary_op op, int rank, const int64_t *out_shape,
                  void *y, const void *a, const int64_t *a_strides, const void *b,
                  const int64_t *b_strides, gf_dtype dtype);
int gf_cpu_where(void *ctx, gf_stream *s, int rank, const int64_t *out_shape, void *y,
                 const void *cond, const int64_t *c_strides, const void *a,
                 const int64_t *a_strides, const void *b, const int64_t *b_strides,
                 int64_t elem_size);
int gf_cpu_strided_copy(void *ctx, gf_stream *s, int rank, const int64_t *shape, void *y,
                        const int64_t *y_strides, const void *x, const int64_t *x_strides,
                        int64_t x_offset, int64_t elem_size);
int gf_cpu_gather(void *ctx, gf_stream *s, void *y, const void *x, int64_t outer,
                  int64_t axis_dim, int64_t inner, const void *ids, gf_dtype id_dtype,
                  int64_t n_ids, int64_t elem_size);
int gf_cpu_fill(void *ctx, gf_stream *s, void *y, int64_t n, const void *value,
                int64_t elem_size);
int gf_cpu_cast(void *ctx, gf_stream *s, void *dst, gf_dtype dst_dtype, const void *src,
                gf_dtype src_dtype, int64_t n);
int gf_cpu_cast_ex(void *ctx, gf_stream *s, void *dst, gf_dtype dst_dtype, const void *src,
                   gf_dtype src_dtype, int64_t n);
int gf_cpu_reduce(void *ctx, gf_stream *s, gf_reduce_op op, void *y, const float *x,
                  int64_t outer, int64_t rdim, int64_t inner);
int gf_cpu_softmax_axis(void *ctx, gf_stream *s, float *y, const float *x, int64_t outer,
                        int64_t dim, int64_t inner, int log);

#endif /* GF_BACKEND_CPU_INTERNAL_H */
