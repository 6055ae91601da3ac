// gpufaas — the cuda kernel library's gemm and gemm_batched (runtime/backend/cuda;
// the rest of the table is cuda_kernels.cu).
//
// gemm, row-major on a column-major library: C = op(A) op(B) is computed as
// C^T = op(B)^T op(A)^T, i.e. cuBLAS is called with the operands swapped and
// m, n swapped, and each row-major matrix read as its column-major transpose.
// Operand dtypes: F32 x F32 -> cublasSgemm[StridedBatched]; two half operands
// of the same type (F16 x F16, BF16 x BF16) -> cublasGemm[StridedBatched]Ex
// with CUBLAS_COMPUTE_32F (products of halves are exact in FP32, sums in
// FP32); any other mix with at most 16 rows on one side of C (a small
// batch) and the half operand stored along the depth (nn.Linear's weights
// with trans_b) -> k_gemm_small, which reads the half operand once as it is;
// any other mix -> each half operand is widened to FP32 into the
// workspace with our cast kernel, then cublasSgemm. We never narrow
// activations: the contract computes in FP32. The default cuBLAS math mode is
// kept, so FP32 gemm does not use TF32.
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

/* C = beta C for a batch of m x n matrices (k == 0 or alpha == 0); with
 * beta == 0, C becomes 0 without being read. */
static __global__ void k_scale(float *c, int64_t m, int64_t n, int64_t ldc, int64_t stride,
                        int64_t batch, float beta)
{
    int64_t total = batch * m * n;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t j = i % n, r = (i / n) % m, b = i / (n * m);
        float *p = c + b * stride + r * ldc + j;
        *p = beta == 0.0f ? 0.0f : beta * *p;
    }
}

/* ---- gemm ---- */

/* Rows of C (or of C^T) up to which a mixed-dtype gemm reads its half
 * operand directly instead of widening it (small batches: one pass over
 * the weights at 2 bytes each, where widening would read 2, write 4 and
 * read 4 again). */
#define GF_SMALL_ROWS 16

/* C = alpha P Q + beta C for `batch` problems, P with R <= GF_SMALL_ROWS
 * rows and depth K, Q with depth K and N columns, stored contiguously along
 * the depth (Q(kk, j) = q[j qcs + kk]). One warp per column j of C: its
 * lanes split the depth, so Q is read coalesced and once; each lane keeps R
 * partial sums (FP32), reduced across the warp at the end. Elements:
 * P(r, kk) = p[r prs + kk pcs], C(r, j) = c[r crs + j ccs]; s* are batch
 * strides. With beta == 0, C is not read. */
template <typename TP, typename TQ>
static __global__ void k_gemm_small(int64_t R, int64_t N, int64_t K, float alpha, const TP *p,
                                    int64_t prs, int64_t pcs, int64_t sp, const TQ *q,
                                    int64_t qcs, int64_t sq, float beta, float *c, int64_t crs,
                                    int64_t ccs, int64_t sc, int64_t batch)
{
    int lane = threadIdx.x & 31;
    int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
    int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    /* w is the same for every lane of a warp: the shuffles see all 32 */
    for (int64_t w = warp; w < N * batch; w += nwarps) {
        int64_t j = w % N, b = w / N;
        const TP *pb = p + b * sp;
        const TQ *qj = q + b * sq + j * qcs;
        float acc[GF_SMALL_ROWS];
#pragma unroll
        for (int r = 0; r < GF_SMALL_ROWS; r++)
            acc[r] = 0.0f;
        for (int64_t kk = lane; kk < K; kk += 32) {
            float qv = ld(qj, kk);
#pragma unroll
            for (int r = 0; r < GF_SMALL_ROWS; r++)
                if (r < R)
                    acc[r] += ld(pb, r * prs + kk * pcs) * qv;
        }
        float *cj = c + b * sc + j * ccs;
#pragma unroll
        for (int r = 0; r < GF_SMALL_ROWS; r++) {
            if (r < R) { /* R is the same for every lane */
                float v = warp_reduce<false>(acc[r]);
                if (lane == 0) {
                    float *o = cj + r * crs;
                    *o = beta == 0.0f ? alpha * v : alpha * v + beta * *o;
                }
            }
        }
    }
}

static cudaDataType cuda_type(gf_dtype dt)
{
    return dt == GF_DT_F16 ? CUDA_R_16F : dt == GF_DT_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* Row-major C = alpha op(A) op(B) + beta C for `batch` matrices (strides in
 * elements), arguments already checked; A and B either both F32 or both the
 * same half type. Queued on the handle's stream. */
cublasStatus_t gf_cu_gemm_rm(cublasHandle_t h, int ta, int tb, int64_t m, int64_t n, int64_t k,
                              float alpha, const void *a, int64_t lda, int64_t sa, const void *b,
                              int64_t ldb, int64_t sb, gf_dtype dt, float beta, float *c,
                              int64_t ldc, int64_t sc, int64_t batch)
{
    cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (dt == GF_DT_F32) {
        if (batch == 1)
            return cublasSgemm(h, ob, oa, (int)n, (int)m, (int)k, &alpha, (const float *)b,
                               (int)ldb, (const float *)a, (int)lda, &beta, c, (int)ldc);
        return cublasSgemmStridedBatched(h, ob, oa, (int)n, (int)m, (int)k, &alpha,
                                         (const float *)b, (int)ldb, (long long)sb,
                                         (const float *)a, (int)lda, (long long)sa, &beta, c,
                                         (int)ldc, (long long)sc, (int)batch);
    }
    cudaDataType ty = cuda_type(dt);
    if (batch == 1)
        return cublasGemmEx(h, ob, oa, (int)n, (int)m, (int)k, &alpha, b, ty, (int)ldb, a, ty,
                            (int)lda, &beta, c, CUDA_R_32F, (int)ldc, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT);
    return cublasGemmStridedBatchedEx(h, ob, oa, (int)n, (int)m, (int)k, &alpha, b, ty, (int)ldb,
                                      (long long)sb, a, ty, (int)lda, (long long)sa, &beta, c,
                                      CUDA_R_32F, (int)ldc, (long long)sc, (int)batch,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

/* Elements spanned by `batch` row-major matrices of rows x cols with
 * leading dimension ld and batch stride (0 when rows or cols is 0). */
static int64_t span_of(int64_t rows, int64_t cols, int64_t ld, int64_t stride, int64_t batch)
{
    if (rows == 0 || cols == 0)
        return 0;
    return (batch - 1) * stride + (rows - 1) * ld + cols;
}

/* The gemm both members share; arguments checked, m, n, batch > 0. */
static int gemm_any(gf_cuda_kctx *c, const char *fn, cudaStream_t st, int ta, int tb, int64_t m,
                    int64_t n, int64_t k, float alpha, const void *a, gf_dtype adt, int64_t lda,
                    int64_t sa, const void *b, gf_dtype bdt, int64_t ldb, int64_t sb, float beta,
                    float *cm, int64_t ldc, int64_t scm, int64_t batch)
{
    if (k == 0 || alpha == 0.0f) {
        /* C = beta C, explicitly: with beta == 0 C is not read. */
        if (beta != 1.0f)
            k_scale<<<grid_for(batch * m * n, GF_THREADS), GF_THREADS, 0, st>>>(cm, m, n, ldc, scm,
                                                                               batch, beta);
        return gf_cu_launched(fn, "scaling C");
    }
    int brc = gf_cu_blas_bind(c, fn, st);
    if (brc != 0)
        return brc;
    cublasStatus_t bs;
    if (adt != bdt) {
        /* Mixed dtypes with few rows on one side (a small batch through a
         * layer whose half weights are stored along the depth, as
         * nn.Linear's [out, in] with trans_b): read the half operand as it
         * is, in one pass, instead of widening it into the workspace. */
        if (m <= GF_SMALL_ROWS && tb) {
            /* P = op(A) [m, k], Q(kk, j) = B[j ldb + kk], C as stored */
            unsigned g = grid_for(n * batch, GF_THREADS / 32);
            GF_WDISPATCH(adt, TP, GF_WDISPATCH(bdt, TQ,
                k_gemm_small<TP, TQ><<<g, GF_THREADS, 0, st>>>(
                    m, n, k, alpha, (const TP *)a, ta ? 1 : lda, ta ? lda : 1, sa,
                    (const TQ *)b, ldb, sb, beta, cm, ldc, 1, scm, batch)));
            return gf_cu_launched(fn, "k_gemm_small");
        }
        if (n <= GF_SMALL_ROWS && !ta) {
            /* C^T = op(B)^T op(A)^T: P(j, kk) = op(B)(kk, j), Q(kk, i) =
             * A[i lda + kk], C^T(j, i) = C[i ldc + j] */
            unsigned g = grid_for(m * batch, GF_THREADS / 32);
            GF_WDISPATCH(bdt, TP, GF_WDISPATCH(adt, TQ,
                k_gemm_small<TP, TQ><<<g, GF_THREADS, 0, st>>>(
                    n, m, k, alpha, (const TP *)b, tb ? ldb : 1, tb ? 1 : ldb, sb,
                    (const TQ *)a, lda, sa, beta, cm, 1, ldc, scm, batch)));
            return gf_cu_launched(fn, "k_gemm_small");
        }
    }
    gf_dtype dt = adt;
    if (adt != bdt || adt == GF_DT_F32) {
        /* Mixed: widen each half operand to FP32 in the workspace, keeping
         * its leading dimension and stride (the span between its first and
         * last element is converted, gaps included). */
        int64_t na = adt == GF_DT_F32 ? 0 : span_of(ta ? k : m, ta ? m : k, lda, sa, batch);
        int64_t nb = bdt == GF_DT_F32 ? 0 : span_of(tb ? n : k, tb ? k : n, ldb, sb, batch);
        if (na > 0 || nb > 0) {
            void *ws;
            int rc = gf_cu_ws_get(c, fn, f32_bytes(na) + f32_bytes(nb), &ws);
            if (rc != 0)
                return rc;
            float *aw = (float *)ws, *bw = (float *)((char *)ws + f32_bytes(na));
            if (na > 0) {
                gf_cu_widen_async(aw, a, adt, na, st);
                a = aw;
            }
            if (nb > 0) {
                gf_cu_widen_async(bw, b, bdt, nb, st);
                b = bw;
            }
            int rc2 = gf_cu_launched(fn, "widening an operand");
            if (rc2 != 0)
                return rc2;
        }
        dt = GF_DT_F32;
    }
    bs = gf_cu_gemm_rm(c->blas, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, dt, beta, cm, ldc, scm,
                 batch);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return gf_cu_blas_fail(fn, dt == GF_DT_F32 ? "cublasSgemm" : "cublasGemmEx", bs);
    return 0;
}

int gf_cu_gemm(void *vctx, gf_stream *s, int trans_a, int trans_b, int64_t m, int64_t n,
                 int64_t k, float alpha, const void *a, gf_dtype a_dtype, int64_t lda,
                 const void *b, gf_dtype b_dtype, int64_t ldb, float beta, float *c,
                 int64_t ldc)
{
    static const char fn[] = "gemm";
    gf_cuda_kctx *ctx = (gf_cuda_kctx *)vctx;
    bool noop;
    int rc = gf_kargs_gemm(fn, trans_a, trans_b, m, n, k, a, a_dtype, lda, 0, b, b_dtype, ldb, 0,
                           c, ldc, 0, 1, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter(ctx, fn, s)) != 0)
        return rc;
    return gemm_any(ctx, fn, s->stream, trans_a, trans_b, m, n, k, alpha, a, a_dtype, lda, 0, b,
                    b_dtype, ldb, 0, beta, c, ldc, 0, 1);
}

int gf_cu_gemm_batched(void *vctx, gf_stream *s, int trans_a, int trans_b, int64_t m,
                       int64_t n, int64_t k, float alpha, const void *a, gf_dtype a_dtype,
                       int64_t lda, int64_t stride_a, const void *b, gf_dtype b_dtype,
                       int64_t ldb, int64_t stride_b, float beta, float *c, int64_t ldc,
                       int64_t stride_c, int64_t batch)
{
    static const char fn[] = "gemm_batched";
    gf_cuda_kctx *ctx = (gf_cuda_kctx *)vctx;
    bool noop;
    int rc = gf_kargs_gemm(fn, trans_a, trans_b, m, n, k, a, a_dtype, lda, stride_a, b, b_dtype,
                           ldb, stride_b, c, ldc, stride_c, batch, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter(ctx, fn, s)) != 0)
        return rc;
    return gemm_any(ctx, fn, s->stream, trans_a, trans_b, m, n, k, alpha, a, a_dtype, lda,
                    stride_a, b, b_dtype, ldb, stride_b, beta, c, ldc, stride_c, batch);
}
