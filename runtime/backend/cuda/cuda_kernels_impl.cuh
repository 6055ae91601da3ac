// gpufaas — what the cuda kernel library's .cu files share
// (runtime/backend/cuda). CUDA only; included by cuda_kernels.cu,
// cuda_conv.cu, cuda_elementwise.cu and cuda_reduce.cu.
//
// Device helpers here are static (each file gets its own copy); host
// helpers are defined once, in cuda_kernels.cu. Kernels are launched only
// from the file that defines them, so no relocatable device code is needed.
#ifndef GF_BACKEND_CUDA_KERNELS_IMPL_CUH
#define GF_BACKEND_CUDA_KERNELS_IMPL_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/kernel_args.h"

struct gf_cuda_kctx {
    gf_cuda_alloc_fn alloc_fn; /* the backend's device allocator (budgeted) */
    gf_cuda_free_fn free_fn;
    void *arg;
    int device;                /* ordinal current at creation; every call runs there */
    cublasHandle_t blas;
    void *ws;                  /* workspace, 256-byte aligned; NULL until first needed */
    size_t ws_cap;             /* bytes behind ws */
    /* cuBLAS's workspace, ours (so it counts against the budget and cuBLAS
     * allocates nothing on a request), set with every stream change:
     * cublasSetStream resets a handle's workspace to its default pool */
    void *blas_ws;
    size_t blas_ws_cap;
    cudaStream_t blas_stream;  /* the stream the handle is bound to */
    bool blas_bound;           /* blas_stream and blas_ws are set on the handle */
    int cc_major;
};

/* Elementwise kernels: threads per block and a cap on blocks (the rest is a
 * grid-stride loop). */
#define GF_THREADS 256
#define GF_MAX_BLOCKS (1 << 20)
/* Largest workspace one conv2d chunk or one attention chunk asks for. */
#define GF_CHUNK_BYTES ((size_t)128 << 20)

// ---- host helpers (cuda_kernels.cu) ----

/* Bind the cuBLAS handle to st with our workspace (allocated on first use
 * through the backend: 32 MiB on Hopper and later, 4 MiB before, as NVIDIA
 * recommends). 0 or a gf_status with the kernel error set. */
int gf_cu_blas_bind(gf_cuda_kctx *c, const char *fn, cudaStream_t st);

static inline unsigned grid_for(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    if (b < 1)
        b = 1;
    return (unsigned)(b > GF_MAX_BLOCKS ? GF_MAX_BLOCKS : b);
}

/* Threads for one block per row of `cols` elements: a multiple of 32, at
 * most GF_THREADS. */
static inline int row_threads(int64_t cols)
{
    int t = 32;
    while (t < GF_THREADS && t < cols)
        t *= 2;
    return t;
}

/* Bytes of count floats, rounded up to 256 (regions of one workspace). */
static inline size_t f32_bytes(int64_t count)
{
    return ((size_t)count * sizeof(float) + 255) & ~(size_t)255;
}

/* Make the context's device current on this thread (s must not be NULL). */
int gf_cu_enter(gf_cuda_kctx *c, const char *fn, gf_stream *s);

/* After queueing kernels: report a launch failure under fn. */
int gf_cu_launched(const char *fn, const char *what);

/* A failed cuBLAS call as a gf_status, recorded under fn. */
int gf_cu_blas_fail(const char *fn, const char *call, cublasStatus_t st);

/* Workspace of at least n bytes (contents not kept), grown on demand. */
int gf_cu_ws_get(gf_cuda_kctx *c, const char *fn, size_t n, void **out);

/* Widen n weights of dtype dt (F16/BF16) at src into dst (FP32). */
void gf_cu_widen_async(float *dst, const void *src, gf_dtype dt, int64_t n, cudaStream_t st);

/* Row-major C = alpha op(A) op(B) + beta C for `batch` matrices (strides in
 * elements), arguments checked; A and B both F32 or both the same half type. */
cublasStatus_t gf_cu_gemm_rm(cublasHandle_t h, int ta, int tb, int64_t m, int64_t n, int64_t k,
                             float alpha, const void *a, int64_t lda, int64_t sa, const void *b,
                             int64_t ldb, int64_t sb, gf_dtype dt, float beta, float *c,
                             int64_t ldc, int64_t sc, int64_t batch);

/* Softmax of rows x cols (log_: log-softmax), one block per row. */
void gf_cu_softmax_rows_async(float *y, const float *x, int64_t rows, int64_t cols, int log_,
                              cudaStream_t st);

// ---- device helpers ----

static __device__ __forceinline__ float ld(const float *p, int64_t i)
{
    return p[i];
}
static __device__ __forceinline__ float ld(const __half *p, int64_t i)
{
    return __half2float(p[i]);
}
static __device__ __forceinline__ float ld(const __nv_bfloat16 *p, int64_t i)
{
    return __bfloat162float(p[i]);
}

static __device__ __forceinline__ void st(float *p, int64_t i, float v)
{
    p[i] = v;
}
static __device__ __forceinline__ void st(__half *p, int64_t i, float v)
{
    p[i] = __float2half_rn(v);
}
static __device__ __forceinline__ void st(__nv_bfloat16 *p, int64_t i, float v)
{
    p[i] = __float2bfloat16_rn(v);
}

/* The activations, as the cpu library computes them. */
static __device__ __forceinline__ float act_apply(float x, int act)
{
    switch (act) {
    case GF_ACT_RELU:
        return x > 0.0f ? x : 0.0f;
    case GF_ACT_GELU_ERF:
        return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case GF_ACT_GELU_TANH:
        return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case GF_ACT_SILU:
        return x * (1.0f / (1.0f + expf(-x)));
    case GF_ACT_TANH:
        return tanhf(x);
    case GF_ACT_SIGMOID:
        return 1.0f / (1.0f + expf(-x));
    default:
        return x;
    }
}

template <bool MAX> static __device__ __forceinline__ float warp_reduce(float v)
{
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? fmaxf(v, u) : v + u;
    }
    return v;
}

/* Max or sum over the block (blockDim.x a multiple of 32, every thread
 * calling); sh is 32 floats of shared memory. Returns the result to all. */
template <bool MAX> static __device__ float block_reduce(float v, float *sh)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_reduce<MAX>(v);
    __syncthreads(); /* sh may still be read by the previous reduction */
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < nw ? sh[lane] : (MAX ? -INFINITY : 0.0f);
        v = warp_reduce<MAX>(v);
        if (lane == 0)
            sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}

/* Run the statements with T the device type of weight dtype dt (F32, F16,
 * BF16), e.g. GF_WDISPATCH(dt, T, k<T><<<g, b, 0, st>>>((const T *)w)). */
#define GF_WDISPATCH(dt, T, ...)                                                                  \
    do {                                                                                          \
        if ((dt) == GF_DT_F16) {                                                                  \
            typedef __half T;                                                                     \
            __VA_ARGS__;                                                                          \
        } else if ((dt) == GF_DT_BF16) {                                                          \
            typedef __nv_bfloat16 T;                                                              \
            __VA_ARGS__;                                                                          \
        } else {                                                                                  \
            typedef float T;                                                                      \
            __VA_ARGS__;                                                                          \
        }                                                                                         \
    } while (0)

/* Record a deferred error in the stream's words (the first one wins). */
static __device__ __forceinline__ void dev_error(long long *err, int kind, long long value,
                                                 long long limit)
{
    unsigned long long w = (unsigned long long)GF_ERR_INVALID | ((unsigned long long)kind << 32);
    if (atomicCAS((unsigned long long *)err, 0ull, w) == 0ull) {
        err[1] = value;
        err[2] = limit;
    }
}

// The members implemented outside cuda_kernels.cu (the table's signatures).
int gf_cu_gemm(void *ctx, gf_stream *s, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
               float alpha, const void *a, gf_dtype a_dtype, int64_t lda, const void *b,
               gf_dtype b_dtype, int64_t ldb, float beta, float *c, int64_t ldc);
int gf_cu_gemm_batched(void *ctx, gf_stream *s, int trans_a, int trans_b, int64_t m, int64_t n,
                       int64_t k, float alpha, const void *a, gf_dtype a_dtype, int64_t lda,
                       int64_t stride_a, const void *b, gf_dtype b_dtype, int64_t ldb,
                       int64_t stride_b, float beta, float *c, int64_t ldc, int64_t stride_c,
                       int64_t batch);
int gf_cu_conv2d(void *ctx, gf_stream *s, float *y, const float *x, const gf_conv2d_params *p,
                 const void *w, const void *bias, gf_dtype w_dtype, gf_act act);
int gf_cu_conv2d_ex(void *ctx, gf_stream *s, float *y, const float *x,
                    const gf_conv2d_ex_params *p, const void *w, const void *bias,
                    gf_dtype w_dtype, const float *residual, gf_act act);
int gf_cu_maxpool2d(void *ctx, gf_stream *s, float *y, const float *x, const gf_pool2d_params *p);
int gf_cu_avgpool2d(void *ctx, gf_stream *s, float *y, const float *x, const gf_pool2d_params *p);
int gf_cu_pool2d_ex(void *ctx, gf_stream *s, gf_pool_kind kind, float *y, const float *x,
                    const gf_pool2d_ex_params *p);
int gf_cu_unary(void *ctx, gf_stream *s, gf_unary_op op, float *y, const float *x, int64_t n,
                float alpha, float beta);
int gf_cu_binary(void *ctx, gf_stream *s, gf_binary_op op, int rank, const int64_t *out_shape,
                 void *y, const void *a, const int64_t *a_strides, const void *b,
                 const int64_t *b_strides, gf_dtype dtype);
int gf_cu_where(void *ctx, gf_stream *s, int rank, const int64_t *out_shape, void *y,
                const void *cond, const int64_t *c_strides, const void *a,
                const int64_t *a_strides, const void *b, const int64_t *b_strides,
                int64_t elem_size);
int gf_cu_strided_copy(void *ctx, gf_stream *s, int rank, const int64_t *shape, void *y,
                       const int64_t *y_strides, const void *x, const int64_t *x_strides,
                       int64_t x_offset, int64_t elem_size);
int gf_cu_gather(void *ctx, gf_stream *s, void *y, const void *x, int64_t outer,
                 int64_t axis_dim, int64_t inner, const void *ids, gf_dtype id_dtype,
                 int64_t n_ids, int64_t elem_size);
int gf_cu_fill(void *ctx, gf_stream *s, void *y, int64_t n, const void *value,
               int64_t elem_size);
int gf_cu_cast_ex(void *ctx, gf_stream *s, void *dst, gf_dtype dst_dtype, const void *src,
                  gf_dtype src_dtype, int64_t n);
int gf_cu_reduce(void *ctx, gf_stream *s, gf_reduce_op op, void *y, const float *x,
                 int64_t outer, int64_t rdim, int64_t inner);
int gf_cu_softmax_axis(void *ctx, gf_stream *s, float *y, const float *x, int64_t outer,
                       int64_t dim, int64_t inner, int log_);

#endif // GF_BACKEND_CUDA_KERNELS_IMPL_CUH
