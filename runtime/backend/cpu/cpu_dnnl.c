/* gpufaas — convolutions through oneDNN on the cpu (runtime/backend/cpu).
 * See cpu_dnnl.h. */
#include "backend/cpu/cpu_dnnl.h"

#include <stdlib.h>
#include <string.h>

#include "backend/kernel_args.h"
#include "gf_config.h"

#if GF_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>

/* libgomp's, which libdnnl runs on: the thread count is process-wide, as
 * OpenBLAS's is. */
void omp_set_num_threads(int n);

#define CACHE 64 /* geometries kept */

/* What a cached primitive is made for (compared bytewise: zeroed first):
 * a convolution (p, act, has_bias, has_res) or a matmul (mm, act,
 * has_bias, has_res). */
typedef struct conv_key {
    int32_t kind; /* 1 convolution, 2 matmul */
    int32_t act, has_bias, has_res;
    gf_conv2d_ex_params p;
    gf_cpu_gemm_shape mm;
} conv_key;

struct gf_cpu_dnnl_conv {
    conv_key key;
    uint64_t used;            /* LRU stamp; 0 = free slot */
    bool ok;                  /* oneDNN implements it (else only the key is kept) */
    dnnl_primitive_t conv, r_src, r_wei, r_res, r_dst; /* r_res NULL without residual */
    dnnl_memory_desc_t src_nchw, src_nhwc, wei_user, wei_conv, bias, dst_nhwc, dst_nchw;
    dnnl_memory_desc_t res; /* a matmul's residual (its binary post-op's input) */
    size_t src_bytes, wei_bytes, dst_bytes; /* scratch: NHWC x, weights, NHWC y */
};

struct gf_cpu_dnnl {
    dnnl_engine_t eng;
    dnnl_stream_t st;
    uint64_t clock;
    gf_cpu_dnnl_conv cache[CACHE];
};

static void conv_release(gf_cpu_dnnl_conv *c)
{
    dnnl_primitive_t *ps[5] = {&c->conv, &c->r_src, &c->r_wei, &c->r_res, &c->r_dst};
    for (int i = 0; i < 5; i++)
        if (*ps[i] != NULL) {
            dnnl_primitive_destroy(*ps[i]);
            *ps[i] = NULL;
        }
    c->used = 0;
    c->ok = false;
}

gf_status gf_cpu_dnnl_new(int threads, gf_cpu_dnnl **out, gf_err *err)
{
    *out = NULL;
    const char *env = getenv("GF_CPU_DNNL");
    if (env != NULL && strcmp(env, "0") == 0)
        return GF_OK;
    gf_cpu_dnnl *d = calloc(1, sizeof *d);
    if (d == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "%s: out of memory", __func__);
    if (dnnl_engine_create(&d->eng, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&d->st, d->eng, dnnl_stream_default_flags) != dnnl_success) {
        gf_cpu_dnnl_free(d);
        return GF_OK; /* no oneDNN here: the im2col path serves */
    }
    omp_set_num_threads(threads > 0 ? threads : 1);
    *out = d;
    return GF_OK;
}

void gf_cpu_dnnl_free(gf_cpu_dnnl *d)
{
    if (d == NULL)
        return;
    for (int i = 0; i < CACHE; i++)
        conv_release(&d->cache[i]);
    if (d->st != NULL)
        dnnl_stream_destroy(d->st);
    if (d->eng != NULL)
        dnnl_engine_destroy(d->eng);
    free(d);
}

static dnnl_alg_kind_t eltwise_of(gf_act act, float *alpha)
{
    *alpha = 0.0f;
    switch (act) {
    case GF_ACT_RELU: return dnnl_eltwise_relu;
    case GF_ACT_GELU_ERF: return dnnl_eltwise_gelu_erf;
    case GF_ACT_GELU_TANH: return dnnl_eltwise_gelu_tanh;
    case GF_ACT_SILU: *alpha = 1.0f; return dnnl_eltwise_swish;
    case GF_ACT_TANH: return dnnl_eltwise_tanh;
    case GF_ACT_SIGMOID: return dnnl_eltwise_logistic;
    default: return dnnl_alg_kind_undef;
    }
}

/* How a residual joins the result: not at all, oneDNN's sum post-op (the
 * destination holds it before the call) or a binary add of a tensor. */
enum res_how { NONE, SUM, BINARY };

/* attr with post-ops: a binary add of bias_md when not NULL, the residual
 * as `how` (binary: res_md), then act. false when oneDNN has no such
 * post-op (the caller frees *attr, *po). */
static bool post_ops(dnnl_primitive_attr_t *attr, dnnl_post_ops_t *po, gf_act act,
                     const dnnl_memory_desc_t *bias_md, enum res_how how,
                     const dnnl_memory_desc_t *res_md)
{
    float alpha;
    dnnl_alg_kind_t alg = eltwise_of(act, &alpha);
    if (alg == dnnl_alg_kind_undef && act != GF_ACT_IDENTITY)
        return false;
    return dnnl_primitive_attr_create(attr) == dnnl_success &&
           dnnl_post_ops_create(po) == dnnl_success &&
           (bias_md == NULL ||
            dnnl_post_ops_append_binary(*po, dnnl_binary_add, bias_md) == dnnl_success) &&
           (how != SUM || dnnl_post_ops_append_sum(*po, 1.0f) == dnnl_success) &&
           (how != BINARY ||
            dnnl_post_ops_append_binary(*po, dnnl_binary_add, res_md) == dnnl_success) &&
           (alg == dnnl_alg_kind_undef ||
            dnnl_post_ops_append_eltwise(*po, 1.0f, alg, alpha, 0.0f) == dnnl_success) &&
           dnnl_primitive_attr_set_post_ops(*attr, *po) == dnnl_success;
}

/* Free what making a primitive took (any may be NULL). */
static void desc_free(dnnl_primitive_desc_t pd, dnnl_post_ops_t po, dnnl_primitive_attr_t attr)
{
    if (pd != NULL)
        dnnl_primitive_desc_destroy(pd);
    if (po != NULL)
        dnnl_post_ops_destroy(po);
    if (attr != NULL)
        dnnl_primitive_attr_destroy(attr);
}

static bool reorder(gf_cpu_dnnl *d, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                    dnnl_primitive_t *out)
{
    dnnl_primitive_desc_t pd = NULL;
    bool ok = dnnl_reorder_primitive_desc_create(&pd, from, d->eng, to, d->eng, NULL) ==
                  dnnl_success &&
              dnnl_primitive_create(out, pd) == dnnl_success;
    if (pd != NULL)
        dnnl_primitive_desc_destroy(pd);
    return ok;
}

/* Make c's primitives for c->key; false when oneDNN does not implement
 * it (c is left with nothing to release). */
static bool conv_make(gf_cpu_dnnl *d, gf_cpu_dnnl_conv *c)
{
    const gf_conv2d_ex_params *p = &c->key.p;
    int64_t oh = gf_window_out(p->h, p->kh, p->stride_h, p->pad_t, p->pad_b, p->dil_h, 0);
    int64_t ow = gf_window_out(p->w, p->kw, p->stride_w, p->pad_l, p->pad_r, p->dil_w, 0);
    dnnl_dims_t sd = {p->n, p->c, p->h, p->w}, dd = {p->n, p->oc, oh, ow}, bd = {p->oc};
    dnnl_dims_t wd = {p->groups, p->oc / p->groups, p->c / p->groups, p->kh, p->kw};
    dnnl_dims_t str = {p->stride_h, p->stride_w}, dil = {p->dil_h - 1, p->dil_w - 1};
    dnnl_dims_t pl = {p->pad_t, p->pad_l}, pr = {p->pad_b, p->pad_r};
    dnnl_memory_desc_t wany;
    bool grouped = p->groups > 1;
    if (dnnl_memory_desc_init_by_tag(&c->src_nchw, 4, sd, dnnl_f32, dnnl_nchw) ||
        dnnl_memory_desc_init_by_tag(&c->src_nhwc, 4, sd, dnnl_f32, dnnl_nhwc) ||
        dnnl_memory_desc_init_by_tag(&c->dst_nchw, 4, dd, dnnl_f32, dnnl_nchw) ||
        dnnl_memory_desc_init_by_tag(&c->dst_nhwc, 4, dd, dnnl_f32, dnnl_nhwc) ||
        dnnl_memory_desc_init_by_tag(&c->bias, 1, bd, dnnl_f32, dnnl_x) ||
        /* ungrouped weights are wd without its group count */
        dnnl_memory_desc_init_by_tag(&c->wei_user, grouped ? 5 : 4, grouped ? wd : wd + 1,
                                     dnnl_f32, grouped ? dnnl_goihw : dnnl_oihw) ||
        dnnl_memory_desc_init_by_tag(&wany, grouped ? 5 : 4, grouped ? wd : wd + 1, dnnl_f32,
                                     dnnl_format_tag_any))
        return false;
    dnnl_convolution_desc_t cd;
    if (dnnl_dilated_convolution_forward_desc_init(
            &cd, dnnl_forward_inference, dnnl_convolution_direct, &c->src_nhwc, &wany,
            c->key.has_bias ? &c->bias : NULL, &c->dst_nhwc, str, dil, pl, pr) != dnnl_success)
        return false;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    bool ok = post_ops(&attr, &po, (gf_act)c->key.act, NULL, c->key.has_res ? SUM : NONE, NULL);
    dnnl_primitive_desc_t pd = NULL;
    if (ok)
        ok = dnnl_primitive_desc_create(&pd, &cd, attr, d->eng, NULL) == dnnl_success;
    if (ok) {
        c->wei_conv = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        ok = dnnl_primitive_create(&c->conv, pd) == dnnl_success;
    }
    desc_free(pd, po, attr);
    ok = ok && reorder(d, &c->src_nchw, &c->src_nhwc, &c->r_src) &&
         reorder(d, &c->wei_user, &c->wei_conv, &c->r_wei) &&
         reorder(d, &c->dst_nhwc, &c->dst_nchw, &c->r_dst) &&
         (!c->key.has_res || reorder(d, &c->dst_nchw, &c->dst_nhwc, &c->r_res));
    if (!ok) {
        conv_release(c);
        return false;
    }
    c->src_bytes = dnnl_memory_desc_get_size(&c->src_nhwc);
    c->wei_bytes = dnnl_memory_desc_get_size(&c->wei_conv);
    c->dst_bytes = dnnl_memory_desc_get_size(&c->dst_nhwc);
    return true;
}

/* Bytes rounded up to 64, for carving one scratch block. */
static size_t up64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* The entry for key, made with make() on a miss (evicting the least
 * recently used); NULL when oneDNN does not implement it. */
static gf_cpu_dnnl_conv *find(gf_cpu_dnnl *d, const conv_key *key,
                              bool (*make)(gf_cpu_dnnl *, gf_cpu_dnnl_conv *))
{
    gf_cpu_dnnl_conv *c = NULL, *victim = &d->cache[0];
    for (int i = 0; i < CACHE; i++) {
        gf_cpu_dnnl_conv *e = &d->cache[i];
        if (e->used != 0 && memcmp(&e->key, key, sizeof *key) == 0) {
            c = e;
            break;
        }
        if (e->used < victim->used)
            victim = e;
    }
    if (c == NULL) {
        conv_release(victim);
        c = victim;
        c->key = *key;
        c->ok = make(d, c);
    }
    c->used = ++d->clock;
    return c->ok ? c : NULL;
}

gf_cpu_dnnl_conv *gf_cpu_dnnl_conv_get(gf_cpu_dnnl *d, const gf_conv2d_ex_params *p,
                                       bool has_bias, bool has_res, gf_act act,
                                       size_t *scratch_bytes)
{
    if (d == NULL)
        return NULL;
    conv_key key;
    memset(&key, 0, sizeof key);
    key.kind = 1;
    key.p = *p;
    key.act = (int32_t)act;
    key.has_bias = has_bias;
    key.has_res = has_res;
    gf_cpu_dnnl_conv *c = find(d, &key, conv_make);
    if (c != NULL)
        *scratch_bytes = up64(c->src_bytes) + up64(c->wei_bytes) + up64(c->dst_bytes);
    return c;
}

/* Make the matmul of c->key.mm with its bias, residual and act. */
static bool gemm_make(gf_cpu_dnnl *d, gf_cpu_dnnl_conv *c)
{
    const gf_cpu_gemm_shape *mm = &c->key.mm;
    /* 3-d, batch first (A broadcast): brgemm takes a bias per row only as
     * a binary post-op of shape [1, m, 1], and only in 3-d */
    dnnl_dims_t ad = {1, mm->m, mm->k}, bd = {mm->batch, mm->k, mm->n},
                cd = {mm->batch, mm->m, mm->n}, biasd = {1, mm->m, 1};
    dnnl_dims_t as = {mm->m * mm->lda, mm->lda, 1}, bs = {mm->sb, mm->ldb, 1},
                cs = {mm->sc, mm->ldc, 1}, biass = {mm->m, 1, 1};
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    bool ok = dnnl_memory_desc_init_by_strides(&c->src_nchw, 3, ad, dnnl_f32, as) == dnnl_success &&
              dnnl_memory_desc_init_by_strides(&c->wei_user, 3, bd, dnnl_f32, bs) == dnnl_success &&
              dnnl_memory_desc_init_by_strides(&c->dst_nchw, 3, cd, dnnl_f32, cs) == dnnl_success &&
              dnnl_memory_desc_init_by_strides(&c->res, 3, cd, dnnl_f32, cs) == dnnl_success &&
              dnnl_memory_desc_init_by_strides(&c->bias, 3, biasd, dnnl_f32, biass) ==
                  dnnl_success &&
              dnnl_matmul_desc_init(&md, &c->src_nchw, &c->wei_user, NULL, &c->dst_nchw) ==
                  dnnl_success &&
              post_ops(&attr, &po, (gf_act)c->key.act, c->key.has_bias ? &c->bias : NULL,
                       c->key.has_res ? BINARY : NONE, &c->res) &&
              dnnl_primitive_desc_create(&pd, &md, attr, d->eng, NULL) == dnnl_success;
    if (ok) {
        /* the reference implementation is far slower than OpenBLAS */
        const char *impl = NULL;
        ok = dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
             impl != NULL && strncmp(impl, "ref", 3) != 0 &&
             dnnl_primitive_create(&c->conv, pd) == dnnl_success;
    }
    desc_free(pd, po, attr);
    if (!ok)
        conv_release(c);
    return ok;
}

gf_cpu_dnnl_conv *gf_cpu_dnnl_gemm_get(gf_cpu_dnnl *d, const gf_cpu_gemm_shape *sh,
                                       bool has_bias, bool has_res, gf_act act)
{
    if (d == NULL)
        return NULL;
    conv_key key;
    memset(&key, 0, sizeof key);
    key.kind = 2;
    key.act = (int32_t)act;
    key.has_bias = has_bias;
    key.has_res = has_res;
    key.mm = *sh;
    return find(d, &key, gemm_make);
}

/* Run prim with up to 5 (arg, memory) pairs. */
static bool exec(gf_cpu_dnnl *d, dnnl_primitive_t prim, int n, const int *which,
                 dnnl_memory_t *mem)
{
    dnnl_exec_arg_t args[5];
    for (int i = 0; i < n; i++) {
        args[i].arg = which[i];
        args[i].memory = mem[i];
    }
    return dnnl_primitive_execute(prim, d->st, n, args) == dnnl_success;
}

int gf_cpu_dnnl_conv_run(gf_cpu_dnnl *d, gf_cpu_dnnl_conv *c, const char *fn, float *y,
                         const float *x, const float *w, const float *bias, const float *res,
                         void *scratch)
{
    char *s = scratch;
    void *xs = s, *ws = s + up64(c->src_bytes), *ys = s + up64(c->src_bytes) + up64(c->wei_bytes);
    /* memories over our buffers: x, x NHWC, w, w reordered, bias, y NHWC, y, res */
    struct {
        const dnnl_memory_desc_t *md;
        void *ptr;
    } spec[8] = {{&c->src_nchw, (void *)x}, {&c->src_nhwc, xs},       {&c->wei_user, (void *)w},
                 {&c->wei_conv, ws},         {&c->bias, (void *)bias}, {&c->dst_nhwc, ys},
                 {&c->dst_nchw, y},          {&c->dst_nchw, (void *)res}};
    dnnl_memory_t m[8] = {NULL};
    bool ok = true;
    for (int i = 0; i < 8 && ok; i++)
        if (spec[i].ptr != NULL)
            ok = dnnl_memory_create(&m[i], spec[i].md, d->eng, spec[i].ptr) == dnnl_success;
    static const int from_to[2] = {DNNL_ARG_FROM, DNNL_ARG_TO};
    if (ok) {
        dnnl_memory_t a[2] = {m[0], m[1]}, b[2] = {m[2], m[3]}, r[2] = {m[7], m[5]};
        ok = exec(d, c->r_src, 2, from_to, a) && exec(d, c->r_wei, 2, from_to, b) &&
             (c->r_res == NULL || exec(d, c->r_res, 2, from_to, r));
    }
    if (ok) {
        int which[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
        dnnl_memory_t a[4] = {m[1], m[3], m[5], m[4]};
        ok = exec(d, c->conv, c->key.has_bias ? 4 : 3, which, a);
    }
    if (ok) {
        dnnl_memory_t a[2] = {m[5], m[6]};
        ok = exec(d, c->r_dst, 2, from_to, a) && dnnl_stream_wait(d->st) == dnnl_success;
    }
    for (int i = 0; i < 8; i++)
        if (m[i] != NULL)
            dnnl_memory_destroy(m[i]);
    if (!ok)
        return gf_kerr(GF_ERR_INTERNAL, fn, "a oneDNN convolution failed to run");
    return 0;
}

int gf_cpu_dnnl_gemm_run(gf_cpu_dnnl *d, gf_cpu_dnnl_conv *g, const char *fn, const float *a,
                         const float *b, float *c, const float *bias, const float *r)
{
    dnnl_memory_t m[5] = {NULL, NULL, NULL, NULL, NULL};
    /* post-ops: [bias], [residual], act */
    int res_arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(g->key.has_bias ? 1 : 0) | DNNL_ARG_SRC_1;
    int which[5] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST,
                    DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, res_arg};
    const dnnl_memory_desc_t *mds[5] = {&g->src_nchw, &g->wei_user, &g->dst_nchw, &g->bias,
                                        &g->res};
    void *ptrs[5] = {(void *)a, (void *)b, c, g->key.has_bias ? (void *)bias : NULL,
                     g->key.has_res ? (void *)r : NULL};
    int n = 0;
    bool ok = true;
    for (int i = 0; i < 5 && ok; i++)
        if (i < 3 || ptrs[i] != NULL) {
            ok = dnnl_memory_create(&m[n], mds[i], d->eng, ptrs[i]) == dnnl_success;
            which[n++] = which[i];
        }
    ok = ok && exec(d, g->conv, n, which, m) && dnnl_stream_wait(d->st) == dnnl_success;
    for (int i = 0; i < 5; i++)
        if (m[i] != NULL)
            dnnl_memory_destroy(m[i]);
    if (!ok)
        return gf_kerr(GF_ERR_INTERNAL, fn, "a oneDNN matmul failed to run");
    return 0;
}

#else /* no oneDNN: no context, every convolution takes the im2col path */

gf_status gf_cpu_dnnl_new(int threads, gf_cpu_dnnl **out, gf_err *err)
{
    (void)threads;
    (void)err;
    *out = NULL;
    return GF_OK;
}

void gf_cpu_dnnl_free(gf_cpu_dnnl *d)
{
    (void)d;
}

gf_cpu_dnnl_conv *gf_cpu_dnnl_conv_get(gf_cpu_dnnl *d, const gf_conv2d_ex_params *p,
                                       bool has_bias, bool has_res, gf_act act,
                                       size_t *scratch_bytes)
{
    (void)d, (void)p, (void)has_bias, (void)has_res, (void)act, (void)scratch_bytes;
    return NULL;
}

int gf_cpu_dnnl_conv_run(gf_cpu_dnnl *d, gf_cpu_dnnl_conv *c, const char *fn, float *y,
                         const float *x, const float *w, const float *bias, const float *res,
                         void *scratch)
{
    (void)d, (void)c, (void)y, (void)x, (void)w, (void)bias, (void)res, (void)scratch;
    return gf_kerr(GF_ERR_INTERNAL, fn, "built without oneDNN");
}

gf_cpu_dnnl_conv *gf_cpu_dnnl_gemm_get(gf_cpu_dnnl *d, const gf_cpu_gemm_shape *sh,
                                       bool has_bias, bool has_res, gf_act act)
{
    (void)d, (void)sh, (void)has_bias, (void)has_res, (void)act;
    return NULL;
}

int gf_cpu_dnnl_gemm_run(gf_cpu_dnnl *d, gf_cpu_dnnl_conv *g, const char *fn, const float *a,
                         const float *b, float *c, const float *bias, const float *r)
{
    (void)d, (void)g, (void)a, (void)b, (void)c, (void)bias, (void)r;
    return gf_kerr(GF_ERR_INTERNAL, fn, "built without oneDNN");
}
#endif
