// gpufaas — convolution and pooling on cuda (runtime/backend/cuda).
//
// conv2d_ex: im2col of a chunk of images into the workspace (a 1x1 stride-1
// unpadded convolution reads x as its own im2col), strided-batched cuBLAS
// gemms over images or groups, whichever is more, then one epilogue pass
// for bias + residual + activation. pool2d_ex: one thread per output
// element. The v1 conv2d and pools check their arguments as before and
// run the same code with the v2 geometry (kernel_args.c converts it).
#include "backend/cuda/cuda_kernels_impl.cuh"

// ---- kernels ----

/* im2col for nb images: col[img][(ci kh + ki) kw + kj][oy ow + ox] =
 * x[img][ci][iy][ix], 0 in the padding. One thread per col element, so
 * writes are coalesced along ox. Only the leading pads place the windows. */
static __global__ void k_im2col(float *col, const float *x, int64_t nb, gf_conv2d_ex_params p,
                                int64_t oh, int64_t ow)
{
    int64_t total = nb * p.c * p.kh * p.kw * oh * ow;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t ox = i % ow, t = i / ow;
        int64_t oy = t % oh;
        t /= oh;
        int64_t kj = t % p.kw;
        t /= p.kw;
        int64_t ki = t % p.kh;
        t /= p.kh; /* t = img * c + ci */
        int64_t iy = oy * p.stride_h - p.pad_t + ki * p.dil_h;
        int64_t ix = ox * p.stride_w - p.pad_l + kj * p.dil_w;
        float v = 0.0f;
        if (iy >= 0 && iy < p.h && ix >= 0 && ix < p.w)
            v = x[(t * p.h + iy) * p.w + ix];
        col[i] = v;
    }
}

/* y[i] = act((computed ? y[i] : 0) + bias[(i / ohw) % oc] + res[i]); bias
 * and res may be NULL. */
template <typename T>
static __global__ void k_conv_epilogue(float *y, int64_t n, int64_t ohw, int64_t oc,
                                       const T *bias, const float *res, int act, int computed)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v = computed ? y[i] : 0.0f;
        if (bias != NULL)
            v += ld(bias, (i / ohw) % oc);
        if (res != NULL)
            v += res[i];
        y[i] = act_apply(v, act);
    }
}

/* Taps i < k of a window starting at y0 with dilation d that land in
 * [lo, hi): the first and one past the last. */
static __device__ __forceinline__ void taps_in(int64_t y0, int64_t k, int64_t d, int64_t lo,
                                               int64_t hi, int64_t *first, int64_t *end)
{
    int64_t f = y0 >= lo ? 0 : (lo - y0 + d - 1) / d;
    int64_t e = y0 >= hi ? 0 : (hi - y0 + d - 1) / d;
    e = e > k ? k : e;
    *first = f > e ? e : f;
    *end = e;
}

/* max or average pooling: one thread per output element, the semantics of
 * gpufaas/kernels.h (as the cpu library). */
static __global__ void k_pool(float *y, const float *x, int64_t planes, gf_pool2d_ex_params p,
                              int64_t oh, int64_t ow, int is_max)
{
    int64_t total = planes * oh * ow;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t ox = i % ow, oy = (i / ow) % oh, pl = i / (ow * oh);
        int64_t y0 = oy * p.stride_h - p.pad_t, x0 = ox * p.stride_w - p.pad_l;
        int64_t i0, i1, j0, j1;
        taps_in(y0, p.kh, p.dil_h, 0, p.h, &i0, &i1);
        taps_in(x0, p.kw, p.dil_w, 0, p.w, &j0, &j1);
        const float *xp = x + pl * p.h * p.w;
        float r;
        if (is_max) {
            r = -INFINITY;
            for (int64_t a = i0; a < i1; a++)
                for (int64_t b = j0; b < j1; b++) {
                    float v = xp[(y0 + a * p.dil_h) * p.w + x0 + b * p.dil_w];
                    if (v > r || isnan(v)) /* NaN propagates, as in PyTorch */
                        r = v;
                }
        } else {
            float s = 0.0f;
            for (int64_t a = i0; a < i1; a++)
                for (int64_t b = j0; b < j1; b++)
                    s += xp[(y0 + a * p.dil_h) * p.w + x0 + b * p.dil_w];
            int64_t cnt = (i1 - i0) * (j1 - j0);
            if (p.count_include_pad) {
                int64_t c0, c1, d0, d1;
                taps_in(y0, p.kh, p.dil_h, -p.pad_t, p.h + p.pad_b, &c0, &c1);
                taps_in(x0, p.kw, p.dil_w, -p.pad_l, p.w + p.pad_r, &d0, &d1);
                cnt = (c1 - c0) * (d1 - d0);
            }
            r = cnt > 0 ? s / (float)cnt : NAN;
        }
        y[i] = r;
    }
}

// ---- convolution ----

/* The convolution itself, arguments checked (oh, ow from the check). */
static int conv_run(gf_cuda_kctx *ctx, const char *fn, gf_stream *s, float *y, const float *x,
                    const gf_conv2d_ex_params *p, int64_t oh, int64_t ow, const void *w,
                    const void *bias, gf_dtype w_dtype, const float *res, gf_act act)
{
    cudaStream_t st = s->stream;
    int64_t ohw = oh * ow, cg = p->c / p->groups, ocg = p->oc / p->groups;
    int64_t kk = cg * p->kh * p->kw;      /* gemm depth per group */
    int64_t img_in = p->c * p->h * p->w;  /* input floats per image */
    int64_t total = p->n * p->oc * ohw;
    gf_dtype bdt = bias != NULL ? w_dtype : GF_DT_F32;
    int rc;
    if (kk > 0) {
        bool direct = p->kh == 1 && p->kw == 1 && p->stride_h == 1 && p->stride_w == 1 &&
                      p->pad_t == 0 && p->pad_l == 0 && p->pad_b == 0 && p->pad_r == 0;
        int64_t per_img = p->c * p->kh * p->kw * ohw; /* im2col floats per image */
        int64_t nb = p->n;                            /* images per chunk */
        if (!direct) {
            nb = (int64_t)(GF_CHUNK_BYTES / sizeof(float)) / per_img;
            nb = nb < 1 ? 1 : (nb > p->n ? p->n : nb);
        }
        size_t wbytes = w_dtype != GF_DT_F32 ? f32_bytes(p->oc * kk) : 0;
        size_t need = wbytes + (direct ? 0 : f32_bytes(nb * per_img));
        void *ws = NULL;
        if (need > 0 && (rc = gf_cu_ws_get(ctx, fn, need, &ws)) != 0)
            return rc;
        const float *wf = (const float *)w;
        if (wbytes > 0) {
            gf_cu_widen_async((float *)ws, w, w_dtype, p->oc * kk, st);
            wf = (const float *)ws;
        }
        float *col = (float *)((char *)ws + wbytes);
        int brc = gf_cu_blas_bind(ctx, fn, st);
        if (brc != 0)
            return brc;
        cublasStatus_t bs;
        for (int64_t i0 = 0; i0 < p->n; i0 += nb) {
            int64_t cnt = p->n - i0 < nb ? p->n - i0 : nb;
            const float *cm = x + i0 * img_in; /* [cnt][c kh kw][ohw] */
            if (!direct) {
                k_im2col<<<grid_for(cnt * per_img, GF_THREADS), GF_THREADS, 0, st>>>(col, cm, cnt,
                                                                                  *p, oh, ow);
                cm = col;
            }
            float *yc = y + i0 * p->oc * ohw;
            /* Y_g[ocg, ohw] = W_g[ocg, kk] col_g[kk, ohw] for each image and
             * group, batched over whichever of the two is larger. */
            if (p->groups <= cnt) {
                for (int64_t g = 0; g < p->groups && bs == CUBLAS_STATUS_SUCCESS; g++)
                    bs = gf_cu_gemm_rm(ctx->blas, 0, 0, ocg, ohw, kk, 1.0f, wf + g * ocg * kk, kk,
                                       0, cm + g * kk * ohw, ohw, per_img, GF_DT_F32, 0.0f,
                                       yc + g * ocg * ohw, ohw, p->oc * ohw, cnt);
            } else {
                for (int64_t i = 0; i < cnt && bs == CUBLAS_STATUS_SUCCESS; i++)
                    bs = gf_cu_gemm_rm(ctx->blas, 0, 0, ocg, ohw, kk, 1.0f, wf, kk, ocg * kk,
                                       cm + i * per_img, ohw, kk * ohw, GF_DT_F32, 0.0f,
                                       yc + i * p->oc * ohw, ohw, ocg * ohw, p->groups);
            }
            if (bs != CUBLAS_STATUS_SUCCESS)
                return gf_cu_blas_fail(fn, "cublasSgemmStridedBatched", bs);
        }
    }
    /* No input channels (kk == 0): y = act(bias + residual). */
    if (kk > 0 && bias == NULL && res == NULL && act == GF_ACT_IDENTITY)
        return gf_cu_launched(fn, "im2col");
    GF_WDISPATCH(bdt, T,
                 k_conv_epilogue<T><<<grid_for(total, GF_THREADS), GF_THREADS, 0, st>>>(
                     y, total, ohw, p->oc, (const T *)bias, res, (int)act, kk > 0));
    return gf_cu_launched(fn, "im2col / epilogue");
}

int gf_cu_conv2d_ex(void *vctx, gf_stream *s, float *y, const float *x,
                    const gf_conv2d_ex_params *p, const void *w, const void *bias,
                    gf_dtype w_dtype, const float *residual, gf_act act)
{
    static const char fn[] = "conv2d_ex";
    gf_cuda_kctx *ctx = (gf_cuda_kctx *)vctx;
    int64_t oh = 0, ow = 0;
    bool noop;
    int rc = gf_kargs_conv2d_ex(y, x, p, w, w_dtype, act, &oh, &ow, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter(ctx, fn, s)) != 0)
        return rc;
    return conv_run(ctx, fn, s, y, x, p, oh, ow, w, bias, w_dtype, residual, act);
}

int gf_cu_conv2d(void *vctx, gf_stream *s, float *y, const float *x, const gf_conv2d_params *p,
                 const void *w, const void *bias, gf_dtype w_dtype, gf_act act)
{
    static const char fn[] = "conv2d";
    gf_cuda_kctx *ctx = (gf_cuda_kctx *)vctx;
    int64_t oh = 0, ow = 0;
    bool noop;
    int rc = gf_kargs_conv2d(y, x, p, w, w_dtype, act, &oh, &ow, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter(ctx, fn, s)) != 0)
        return rc;
    gf_conv2d_ex_params ex;
    gf_conv2d_params_to_ex(p, &ex);
    return conv_run(ctx, fn, s, y, x, &ex, oh, ow, w, bias, w_dtype, NULL, act);
}

// ---- pooling ----

static int pool_run(const char *fn, gf_stream *s, float *y, const float *x,
                    const gf_pool2d_ex_params *p, int64_t oh, int64_t ow, int is_max)
{
    int64_t planes = p->n * p->c;
    k_pool<<<grid_for(planes * oh * ow, GF_THREADS), GF_THREADS, 0, s->stream>>>(y, x, planes, *p,
                                                                                oh, ow, is_max);
    return gf_cu_launched(fn, "k_pool");
}

int gf_cu_pool2d_ex(void *vctx, gf_stream *s, gf_pool_kind kind, float *y, const float *x,
                    const gf_pool2d_ex_params *p)
{
    static const char fn[] = "pool2d_ex";
    int64_t oh = 0, ow = 0;
    bool noop;
    int rc = gf_kargs_pool2d_ex(kind, y, x, p, &oh, &ow, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter((gf_cuda_kctx *)vctx, fn, s)) != 0)
        return rc;
    return pool_run(fn, s, y, x, p, oh, ow, kind == GF_POOL_MAX);
}

static int pool_v1(void *vctx, const char *fn, gf_stream *s, float *y, const float *x,
                   const gf_pool2d_params *p, int is_max)
{
    int64_t oh = 0, ow = 0;
    bool noop;
    int rc = gf_kargs_pool2d(fn, y, x, p, &oh, &ow, &noop);
    if (rc != 0 || noop || (rc = gf_cu_enter((gf_cuda_kctx *)vctx, fn, s)) != 0)
        return rc;
    gf_pool2d_ex_params ex;
    gf_pool2d_params_to_ex(p, &ex);
    return pool_run(fn, s, y, x, &ex, oh, ow, is_max);
}

int gf_cu_maxpool2d(void *vctx, gf_stream *s, float *y, const float *x, const gf_pool2d_params *p)
{
    return pool_v1(vctx, "maxpool2d", s, y, x, p, 1);
}

int gf_cu_avgpool2d(void *vctx, gf_stream *s, float *y, const float *x, const gf_pool2d_params *p)
{
    return pool_v1(vctx, "avgpool2d", s, y, x, p, 0);
}
