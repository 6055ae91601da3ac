// gpufaas — reductions and softmax over an axis on cuda
// (runtime/backend/cuda): reduce and softmax_axis.
//
// x is viewed as [outer, r, inner]. With inner = 1 each output reduces one
// contiguous row: one block per row, a strided pass per thread and a
// shuffle + shared-memory combine (arg max/min combine (value, index)
// pairs under a total order, so the answer does not depend on the order).
// Otherwise one thread per output walks r; neighbouring threads read
// neighbouring elements, so the loads are coalesced.
#include "backend/cuda/cuda_kernels_impl.cuh"

// ---- combining ----

/* A partial result: value, and for the arg ops the index (-1: none yet). */
struct part {
    float v;
    long long i;
};

/* The semantics of gpufaas/kernels.h for each op, on two partials. */
static __device__ __forceinline__ part combine(int op, part a, part b)
{
    switch (op) {
    case GF_REDUCE_MAX:
        a.v = isnan(a.v) || isnan(b.v) ? a.v + b.v : fmaxf(a.v, b.v);
        return a;
    case GF_REDUCE_MIN:
        a.v = isnan(a.v) || isnan(b.v) ? a.v + b.v : fminf(a.v, b.v);
        return a;
    case GF_REDUCE_PROD:
        a.v *= b.v;
        return a;
    case GF_REDUCE_ARGMAX:
    case GF_REDUCE_ARGMIN:
    case GF_REDUCE_ARGMAX_LAST:
    case GF_REDUCE_ARGMIN_LAST: {
        if (a.i < 0)
            return b;
        if (b.i < 0)
            return a;
        bool last = op == GF_REDUCE_ARGMAX_LAST || op == GF_REDUCE_ARGMIN_LAST;
        bool mx = op == GF_REDUCE_ARGMAX || op == GF_REDUCE_ARGMAX_LAST;
        bool an = isnan(a.v), bn = isnan(b.v);
        bool a_wins;
        if (an != bn)
            a_wins = an; /* a NaN is the extreme */
        else if (!an && a.v != b.v)
            a_wins = mx ? a.v > b.v : a.v < b.v;
        else
            a_wins = last ? a.i > b.i : a.i < b.i;
        return a_wins ? a : b;
    }
    default: /* the sums */
        a.v += b.v;
        return a;
    }
}

/* The term x contributes to a sum-like op. */
static __device__ __forceinline__ float term(int op, float x, float mx)
{
    switch (op) {
    case GF_REDUCE_SUM_SQUARE:
    case GF_REDUCE_L2: return x * x;
    case GF_REDUCE_L1: return fabsf(x);
    case GF_REDUCE_LOG_SUM_EXP: return expf(x - mx);
    default: return x;
    }
}

static __device__ __forceinline__ part identity(int op)
{
    part p;
    p.i = -1;
    p.v = op == GF_REDUCE_PROD ? 1.0f : op == GF_REDUCE_MAX ? -INFINITY
          : op == GF_REDUCE_MIN ? INFINITY : 0.0f;
    return p;
}

/* The final value from the combined partial over n terms. */
static __device__ __forceinline__ float finish(int op, float v, int64_t n, float mx)
{
    switch (op) {
    case GF_REDUCE_MEAN: return v / (float)n;
    case GF_REDUCE_L2: return sqrtf(v);
    case GF_REDUCE_LOG_SUM: return logf(v);
    case GF_REDUCE_LOG_SUM_EXP: return mx + logf(v);
    default: return v;
    }
}

/* Combine one partial per thread over the block (blockDim.x a multiple of
 * 32, at most 1024, every thread calling); the result goes to all. */
static __device__ part block_combine(int op, part p)
{
    __shared__ float sv[32];
    __shared__ long long si[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        part q;
        q.v = __shfl_xor_sync(0xffffffffu, p.v, o);
        q.i = __shfl_xor_sync(0xffffffffu, p.i, o);
        p = combine(op, p, q);
    }
    __syncthreads(); /* the shared words may still be read by the previous call */
    if (lane == 0) {
        sv[warp] = p.v;
        si[warp] = p.i;
    }
    __syncthreads();
    if (warp == 0) {
        part q = identity(op);
        if (lane < nw) {
            q.v = sv[lane];
            q.i = si[lane];
        }
        for (int o = 16; o > 0; o >>= 1) {
            part r;
            r.v = __shfl_xor_sync(0xffffffffu, q.v, o);
            r.i = __shfl_xor_sync(0xffffffffu, q.i, o);
            q = combine(op, q, r);
        }
        if (lane == 0) {
            sv[0] = q.v;
            si[0] = q.i;
        }
    }
    __syncthreads();
    p.v = sv[0];
    p.i = si[0];
    return p;
}

static __device__ __forceinline__ bool is_arg(int op)
{
    return op >= GF_REDUCE_ARGMAX;
}

/* The op partials combine with: the sum-like ops add their terms. */
static __device__ __forceinline__ int combine_op(int op)
{
    return op == GF_REDUCE_MAX || op == GF_REDUCE_MIN || op == GF_REDUCE_PROD || is_arg(op)
               ? op
               : GF_REDUCE_SUM;
}

// ---- kernels ----

/* inner == 1: one block per row of rdim elements. */
static __global__ void k_reduce_rows(void *y, const float *x, int64_t outer, int64_t rdim, int op)
{
    for (int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
        const float *xr = x + o * rdim;
        float mx = 0.0f;
        if (op == GF_REDUCE_LOG_SUM_EXP) {
            part m = identity(GF_REDUCE_MAX);
            for (int64_t j = threadIdx.x; j < rdim; j += blockDim.x)
                m = combine(GF_REDUCE_MAX, m, part{xr[j], 0});
            mx = block_combine(GF_REDUCE_MAX, m).v;
            if (isinf(mx) || isnan(mx)) { /* all -inf, some +inf, or NaN */
                if (threadIdx.x == 0)
                    ((float *)y)[o] = mx;
                continue;
            }
        }
        int cop = combine_op(op);
        part p = identity(cop);
        for (int64_t j = threadIdx.x; j < rdim; j += blockDim.x)
            p = combine(cop, p, part{term(op, xr[j], mx), j});
        p = block_combine(cop, p);
        if (threadIdx.x == 0) {
            if (is_arg(op))
                ((long long *)y)[o] = p.i;
            else
                ((float *)y)[o] = finish(op, p.v, rdim, mx);
        }
    }
}

/* inner > 1: one thread per output (o, i), walking r. */
static __global__ void k_reduce_cols(void *y, const float *x, int64_t outer, int64_t rdim,
                                     int64_t inner, int op)
{
    int64_t total = outer * inner;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t o = t / inner, i = t % inner;
        const float *xc = x + o * rdim * inner + i;
        float mx = 0.0f;
        if (op == GF_REDUCE_LOG_SUM_EXP) {
            part m = identity(GF_REDUCE_MAX);
            for (int64_t r = 0; r < rdim; r++)
                m = combine(GF_REDUCE_MAX, m, part{xc[r * inner], 0});
            mx = m.v;
            if (isinf(mx) || isnan(mx)) {
                ((float *)y)[t] = mx;
                continue;
            }
        }
        int cop = combine_op(op);
        part p = identity(cop);
        for (int64_t r = 0; r < rdim; r++)
            p = combine(cop, p, part{term(op, xc[r * inner], mx), r});
        if (is_arg(op))
            ((long long *)y)[t] = p.i;
        else
            ((float *)y)[t] = finish(op, p.v, rdim, mx);
    }
}

/* softmax over r for each (o, i), inner > 1: one thread per column. */
static __global__ void k_softmax_cols(float *y, const float *x, int64_t outer, int64_t dim,
                                      int64_t inner, int log_)
{
    int64_t total = outer * inner;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t o = t / inner, i = t % inner, base = o * dim * inner + i;
        float mx = x[base];
        for (int64_t r = 1; r < dim; r++)
            mx = fmaxf(mx, x[base + r * inner]);
        float s = 0.0f;
        for (int64_t r = 0; r < dim; r++)
            s += expf(x[base + r * inner] - mx);
        /* each element is read before this thread overwrites it: y may equal x */
        if (log_) {
            float lse = mx + logf(s);
            for (int64_t r = 0; r < dim; r++)
                y[base + r * inner] = x[base + r * inner] - lse;
        } else {
            float inv = 1.0f / s;
            for (int64_t r = 0; r < dim; r++)
                y[base + r * inner] = expf(x[base + r * inner] - mx) * inv;
        }
    }
}

// ---- members ----

int gf_cu_reduce(void *vctx, gf_stream *s, gf_reduce_op op, void *y, const float *x,
                 int64_t outer, int64_t rdim, int64_t inner)
{
    static const char fn[] = "reduce";
    bool noop;
    int rc = gf_kargs_reduce(op, y, x, outer, rdim, inner, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter((gf_cuda_kctx *)vctx, fn, s)) != 0)
        return rc;
    if (inner == 1 && rdim > 0) {
        unsigned g = (unsigned)(outer < GF_MAX_BLOCKS ? outer : GF_MAX_BLOCKS);
        k_reduce_rows<<<g, row_threads(rdim), 0, s->stream>>>(y, x, outer, rdim, (int)op);
    } else {
        k_reduce_cols<<<grid_for(outer * inner, GF_THREADS), GF_THREADS, 0, s->stream>>>(
            y, x, outer, rdim, inner, (int)op);
    }
    return gf_cu_launched(fn, "k_reduce");
}

int gf_cu_softmax_axis(void *vctx, gf_stream *s, float *y, const float *x, int64_t outer,
                       int64_t dim, int64_t inner, int log_)
{
    static const char fn[] = "softmax_axis";
    bool noop;
    int rc = gf_kargs_softmax_axis(y, x, outer, dim, inner, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter((gf_cuda_kctx *)vctx, fn, s)) != 0)
        return rc;
    if (inner == 1)
        gf_cu_softmax_rows_async(y, x, outer, dim, log_, s->stream);
    else
        k_softmax_cols<<<grid_for(outer * inner, GF_THREADS), GF_THREADS, 0, s->stream>>>(
            y, x, outer, dim, inner, log_);
    return gf_cu_launched(fn, "k_softmax");
}
