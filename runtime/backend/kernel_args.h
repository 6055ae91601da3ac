/* gpufaas — argument checks shared by the kernel libraries (runtime/backend).
 *
 * Every kernel of gpufaas/kernels.h validates its arguments on the host
 * before doing or queueing any work. The checks live here, once, so the cpu
 * and cuda libraries accept and reject exactly the same calls with the same
 * codes and messages. Each gf_kargs_<kernel> returns 0 when the call may
 * proceed (and sets *noop when there is nothing to do: a size of 0), or a
 * gf_status code after recording "<kernel>: <what is wrong>" as this
 * thread's kernel error (gf_kerr_last).
 *
 * Limits common to both backends: gemm sizes and leading dimensions (also
 * those conv2d and attention derive) must fit an int, as cuBLAS and
 * OpenBLAS take them; spatial sizes must be below 2^31.
 *
 * Compiled into the cpu backend and, separately, into the cuda module.
 */
#ifndef GF_BACKEND_KERNEL_ARGS_H
#define GF_BACKEND_KERNEL_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#include <gpufaas/kernels.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Record "fn: message" as the calling thread's last kernel error; returns
 * code, so `return gf_kerr(GF_ERR_INVALID, "gemm", "...")` works. */
int gf_kerr(int code, const char *fn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The calling thread's last kernel error ("" if none); lives until the next
 * failing kernel call on this thread. */
const char *gf_kerr_last(void);

/* a * b into *out; false on int64 overflow. */
static inline bool gf_kmul64(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

/* Bytes per element of a weight dtype (F32 4, F16/BF16 2; 0 otherwise). */
static inline int gf_kw_size(gf_dtype dt)
{
    return dt == GF_DT_F32 ? 4 : (dt == GF_DT_F16 || dt == GF_DT_BF16) ? 2 : 0;
}

/* gemm and gemm_batched (batch 1 and strides 0 for gemm). Batched output
 * matrices must not overlap (stride_c >= (m - 1) ldc + n when batch > 1):
 * cuBLAS runs them in parallel. */
int gf_kargs_gemm(const char *fn, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *a,
                  gf_dtype adt, int64_t lda, int64_t stride_a, const void *b, gf_dtype bdt,
                  int64_t ldb, int64_t stride_b, const float *c, int64_t ldc, int64_t stride_c,
                  int64_t batch, bool *noop);

int gf_kargs_bias_act(const float *x, int64_t rows, int64_t cols, const void *bias,
                      gf_dtype bias_dtype, gf_act act, bool *noop);

int gf_kargs_softmax(const float *y, const float *x, int64_t rows, int64_t cols, bool *noop);

int gf_kargs_layernorm(const float *y, const float *x, int64_t rows, int64_t cols,
                       const void *gamma, const void *beta, gf_dtype w_dtype, float eps,
                       bool *noop);

/* batchnorm: mean and var are required; gamma and beta may be NULL (1, 0),
 * as for BatchNorm2d(affine=False). */
int gf_kargs_batchnorm(const float *y, const float *x, int64_t n, int64_t c, int64_t hw,
                       const void *mean, const void *var, gf_dtype w_dtype, float eps, gf_act act,
                       bool *noop);

int gf_kargs_add(const float *y, const float *a, const float *b, int64_t n, gf_act act,
                 bool *noop);

/* conv2d; *oh, *ow get the output size. */
int gf_kargs_conv2d(const float *y, const float *x, const gf_conv2d_params *p, const void *w,
                    gf_dtype w_dtype, gf_act act, int64_t *oh, int64_t *ow, bool *noop);

/* maxpool2d / avgpool2d (fn names which); *oh, *ow get the output size.
 * As PyTorch, padding is at most half the window, so no window lies
 * entirely in the padding. */
int gf_kargs_pool2d(const char *fn, const float *y, const float *x, const gf_pool2d_params *p,
                    int64_t *oh, int64_t *ow, bool *noop);

int gf_kargs_global_avgpool(const float *y, const float *x, int64_t n, int64_t c, int64_t hw,
                            bool *noop);

/* embedding: argument checks only; the indices themselves are checked by
 * the backend (they live on the device). */
int gf_kargs_embedding(const float *y, const void *table, gf_dtype w_dtype, int64_t vocab,
                       int64_t dim, const void *ids, gf_dtype id_dtype, int64_t n, bool *noop);

int gf_kargs_attention(const float *out, const float *q, const float *k, const float *v,
                       int64_t b, int64_t h, int64_t seq, int64_t d, const void *mask,
                       gf_dtype mask_dtype, bool *noop);

int gf_kargs_cast(const void *dst, gf_dtype dst_dtype, const void *src, gf_dtype src_dtype,
                  int64_t n, bool *noop);

int gf_kargs_permute_0213(const float *y, const float *x, int64_t d0, int64_t d1, int64_t d2,
                          int64_t d3, bool *noop);

int gf_kargs_copy2d(const void *dst, int64_t dst_pitch, const void *src, int64_t src_pitch,
                    int64_t width, int64_t rows, bool *noop);

/* ---- version 2 (kernel_args_v2.c) ---- */

/* Most operands one strided elementwise kernel has (where: y, cond, a, b). */
#define GF_KITER_MAX_OPS 4

/* The iteration space of a strided elementwise kernel once checked: dims of
 * extent 1 dropped and neighbouring dims merged wherever every operand's
 * strides allow, so a dense operation is rank 1 and a broadcast over rows
 * rank 2. Operand 0 is the output. Innermost dimension last. */
typedef struct gf_kiter {
    int rank;                                   /* 1..GF_MAX_RANK */
    int nops;                                   /* operands, 1..GF_KITER_MAX_OPS */
    int64_t n;                                  /* elements (product of shape) */
    int64_t shape[GF_MAX_RANK];
    int64_t st[GF_KITER_MAX_OPS][GF_MAX_RANK];  /* strides in elements, per operand */
} gf_kiter;

/* Element sizes the layout kernels move: 1, 2, 4 or 8 bytes. */
static inline bool gf_kelem_ok(int64_t es)
{
    return es == 1 || es == 2 || es == 4 || es == 8;
}

int gf_kargs_unary(const float *y, const float *x, int64_t n, gf_unary_op op, bool *noop);

/* binary: fills *it (operands y dense, a, b) and *out_dtype (y's type). */
int gf_kargs_binary(gf_binary_op op, int rank, const int64_t *shape, const void *y,
                    const void *a, const int64_t *as, const void *b, const int64_t *bs,
                    gf_dtype dt, gf_dtype *out_dtype, gf_kiter *it, bool *noop);

/* where: operands y dense, cond, a, b. */
int gf_kargs_where(int rank, const int64_t *shape, const void *y, const void *c,
                   const int64_t *cs, const void *a, const int64_t *as, const void *b,
                   const int64_t *bs, int64_t elem_size, gf_kiter *it, bool *noop);

/* strided_copy: operands y (dense when ys is NULL), x; x_offset is applied
 * by the caller. */
int gf_kargs_strided_copy(int rank, const int64_t *shape, const void *y, const int64_t *ys,
                          const void *x, const int64_t *xs, int64_t x_offset, int64_t elem_size,
                          gf_kiter *it, bool *noop);

/* gather: argument checks only; the ids are checked by the backend. */
int gf_kargs_gather(const void *y, const void *x, int64_t outer, int64_t axis_dim,
                    int64_t inner, const void *ids, gf_dtype id_dtype, int64_t n_ids,
                    int64_t elem_size, bool *noop);

int gf_kargs_reduce(gf_reduce_op op, const void *y, const float *x, int64_t outer,
                    int64_t rdim, int64_t inner, bool *noop);

int gf_kargs_softmax_axis(const float *y, const float *x, int64_t outer, int64_t dim,
                          int64_t inner, bool *noop);

/* conv2d_ex; *oh, *ow get the output size. */
int gf_kargs_conv2d_ex(const float *y, const float *x, const gf_conv2d_ex_params *p,
                       const void *w, gf_dtype w_dtype, gf_act act, int64_t *oh, int64_t *ow,
                       bool *noop);

/* pool2d_ex; *oh, *ow get the output size. */
int gf_kargs_pool2d_ex(gf_pool_kind kind, const float *y, const float *x,
                       const gf_pool2d_ex_params *p, int64_t *oh, int64_t *ow, bool *noop);

int gf_kargs_cast_ex(const void *dst, gf_dtype dst_dtype, const void *src, gf_dtype src_dtype,
                     int64_t n, bool *noop);

int gf_kargs_fill(const void *y, int64_t n, const void *value, int64_t elem_size, bool *noop);

/* The v1 conv2d and pooling geometry in the v2 form (symmetric pads,
 * pooling without dilation or ceil mode), so one implementation serves
 * both. */
void gf_conv2d_params_to_ex(const gf_conv2d_params *p, gf_conv2d_ex_params *ex);
void gf_pool2d_params_to_ex(const gf_pool2d_params *p, gf_pool2d_ex_params *ex);

#ifdef __cplusplus
}
#endif

#endif /* GF_BACKEND_KERNEL_ARGS_H */
