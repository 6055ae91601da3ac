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

/* The descriptors of a convolution of geometry p (NCHW and NHWC
 * activations, the weights as given and as the primitive wants them) and
 * its primitive descriptor with act and a residual (sum) as post-ops;
 * false when oneDNN does not implement it (nothing to free then).
 * pd_out may be NULL: then only the descriptors. */
typedef struct conv_mds {
    dnnl_memory_desc_t src_nchw, src_nhwc, wei_user, wei_conv, bias, dst_nhwc, dst_nchw;
} conv_mds;

static bool conv_desc(gf_cpu_dnnl *d, const gf_conv2d_ex_params *p, bool has_bias, bool has_res,
                      gf_act act, conv_mds *md, dnnl_primitive_desc_t *pd_out)
{
    int64_t oh = gf_window_out(p->h, p->kh, p->stride_h, p->pad_t, p->pad_b, p->dil_h, 0);
    int64_t ow = gf_window_out(p->w, p->kw, p->stride_w, p->pad_l, p->pad_r, p->dil_w, 0);
    dnnl_dims_t sd = {p->n, p->c, p->h, p->w}, dd = {p->n, p->oc, oh, ow}, bd = {p->oc};
    dnnl_dims_t wd = {p->groups, p->oc / p->groups, p->c / p->groups, p->kh, p->kw};
    dnnl_dims_t str = {p->stride_h, p->stride_w}, dil = {p->dil_h - 1, p->dil_w - 1};
    dnnl_dims_t pl = {p->pad_t, p->pad_l}, pr = {p->pad_b, p->pad_r};
    dnnl_memory_desc_t wany;
    bool grouped = p->groups > 1;
    if (dnnl_memory_desc_init_by_tag(&md->src_nchw, 4, sd, dnnl_f32, dnnl_nchw) ||
        dnnl_memory_desc_init_by_tag(&md->src_nhwc, 4, sd, dnnl_f32, dnnl_nhwc) ||
        dnnl_memory_desc_init_by_tag(&md->dst_nchw, 4, dd, dnnl_f32, dnnl_nchw) ||
        dnnl_memory_desc_init_by_tag(&md->dst_nhwc, 4, dd, dnnl_f32, dnnl_nhwc) ||
        dnnl_memory_desc_init_by_tag(&md->bias, 1, bd, dnnl_f32, dnnl_x) ||
        /* ungrouped weights are wd without its group count */
        dnnl_memory_desc_init_by_tag(&md->wei_user, grouped ? 5 : 4, grouped ? wd : wd + 1,
                                     dnnl_f32, grouped ? dnnl_goihw : dnnl_oihw) ||
        dnnl_memory_desc_init_by_tag(&wany, grouped ? 5 : 4, grouped ? wd : wd + 1, dnnl_f32,
                                     dnnl_format_tag_any))
        return false;
    dnnl_convolution_desc_t cd;
    if (dnnl_dilated_convolution_forward_desc_init(
            &cd, dnnl_forward_inference, dnnl_convolution_direct, &md->src_nhwc, &wany,
            has_bias ? &md->bias : NULL, &md->dst_nhwc, str, dil, pl, pr) != dnnl_success)
        return false;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    bool ok = post_ops(&attr, &po, act, NULL, has_res ? SUM : NONE, NULL);
    dnnl_primitive_desc_t pd = NULL;
    if (ok)
        ok = dnnl_primitive_desc_create(&pd, &cd, attr, d->eng, NULL) == dnnl_success;
    if (ok)
        md->wei_conv = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    desc_free(NULL, po, attr);
    if (ok && pd_out != NULL)
        *pd_out = pd;
    else if (pd != NULL)
        dnnl_primitive_desc_destroy(pd);
    return ok;
}

/* Make c's primitives for c->key; false when oneDNN does not implement
 * it (c is left with nothing to release). */
static bool conv_make(gf_cpu_dnnl *d, gf_cpu_dnnl_conv *c)
{
    conv_mds md;
    dnnl_primitive_desc_t pd = NULL;
    bool ok = conv_desc(d, &c->key.p, c->key.has_bias, c->key.has_res, (gf_act)c->key.act, &md,
                        &pd) &&
              dnnl_primitive_create(&c->conv, pd) == dnnl_success;
    desc_free(pd, NULL, NULL);
    if (ok) {
        c->src_nchw = md.src_nchw;
        c->src_nhwc = md.src_nhwc;
        c->wei_user = md.wei_user;
        c->wei_conv = md.wei_conv;
        c->bias = md.bias;
        c->dst_nhwc = md.dst_nhwc;
        c->dst_nchw = md.dst_nchw;
    }
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

/* Run convolution c: the weights w in the user's layout (reordered into
 * scratch) or, when `ready` is not NULL, already in the primitive's; x, y
 * and res NCHW (reordered to and from NHWC in scratch) or NHWC as `layout`
 * (GF_CONV_*_NHWC) says. */
static int conv_exec(gf_cpu_dnnl *d, gf_cpu_dnnl_conv *c, const char *fn, float *y,
                     const float *x, const float *w, const void *ready, const float *bias,
                     const float *res, void *scratch, uint32_t layout)
{
    char *s = scratch;
    void *xs = s, *ws = s + up64(c->src_bytes), *ys = s + up64(c->src_bytes) + up64(c->wei_bytes);
    if (ready != NULL)
        ws = (void *)ready;
    if (layout & GF_CONV_X_NHWC)
        xs = (void *)x;
    if (layout & GF_CONV_Y_NHWC)
        ys = y;
    /* memories over our buffers: x, x NHWC, w, w reordered, bias, y NHWC, y, res */
    bool res_nchw = res != NULL && !(layout & GF_CONV_R_NHWC);
    struct {
        const dnnl_memory_desc_t *md;
        void *ptr;
    } spec[8] = {{&c->src_nchw, xs != x ? (void *)x : NULL},
                 {&c->src_nhwc, xs},
                 {&c->wei_user, ready == NULL ? (void *)w : NULL},
                 {&c->wei_conv, ws},
                 {&c->bias, (void *)bias},
                 {&c->dst_nhwc, ys},
                 {&c->dst_nchw, ys != y ? y : NULL},
                 {&c->dst_nchw, res_nchw ? (void *)res : NULL}};
    dnnl_memory_t m[8] = {NULL};
    bool ok = true;
    for (int i = 0; i < 8 && ok; i++)
        if (spec[i].ptr != NULL)
            ok = dnnl_memory_create(&m[i], spec[i].md, d->eng, spec[i].ptr) == dnnl_success;
    static const int from_to[2] = {DNNL_ARG_FROM, DNNL_ARG_TO};
    if (ok) {
        dnnl_memory_t a[2] = {m[0], m[1]}, b[2] = {m[2], m[3]}, r[2] = {m[7], m[5]};
        ok = (m[0] == NULL || exec(d, c->r_src, 2, from_to, a)) &&
             (ready != NULL || exec(d, c->r_wei, 2, from_to, b)) &&
             (!res_nchw || exec(d, c->r_res, 2, from_to, r));
        /* the sum post-op adds what the destination holds */
        if (ok && res != NULL && !res_nchw && res != ys)
            memcpy(ys, res, c->dst_bytes);
    }
    if (ok) {
        int which[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
        dnnl_memory_t a[4] = {m[1], m[3], m[5], m[4]};
        ok = exec(d, c->conv, c->key.has_bias ? 4 : 3, which, a);
    }
    if (ok && m[6] != NULL) {
        dnnl_memory_t a[2] = {m[5], m[6]};
        ok = exec(d, c->r_dst, 2, from_to, a);
    }
    ok = ok && dnnl_stream_wait(d->st) == dnnl_success;
    for (int i = 0; i < 8; i++)
        if (m[i] != NULL)
            dnnl_memory_destroy(m[i]);
    if (!ok)
        return gf_kerr(GF_ERR_INTERNAL, fn, "a oneDNN convolution failed to run");
    return 0;
}

int gf_cpu_dnnl_conv_run(gf_cpu_dnnl *d, gf_cpu_dnnl_conv *c, const char *fn, float *y,
                         const float *x, const float *w, const float *bias, const float *res,
                         void *scratch)
{
    return conv_exec(d, c, fn, y, x, w, NULL, bias, res, scratch, 0);
}

/* ---- packed weights ---- */

/* What the packed bytes start with; the weights follow at PACK_HDR. */
typedef struct pack_header {
    char magic[8];
    gf_conv2d_ex_params p;  /* the geometry they were packed for */
    dnnl_memory_desc_t md;  /* their layout */
} pack_header;

#define PACK_HDR 4096
_Static_assert(sizeof(pack_header) <= PACK_HDR, "the header fits its block");
static const char pack_magic[8] = "gfdnnl1";

/* The layout brgconv wants for p's weights, from a primitive descriptor
 * made for it with a bias and no post-ops (the weights' layout does not
 * depend on them); false when oneDNN has only its reference code for p. */
static bool pack_layout(gf_cpu_dnnl *d, const gf_conv2d_ex_params *p, conv_mds *md)
{
    dnnl_primitive_desc_t pd = NULL;
    if (!conv_desc(d, p, true, false, GF_ACT_IDENTITY, md, &pd))
        return false;
    const char *impl = NULL;
    bool ok = dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
              impl != NULL && strncmp(impl, "ref", 3) != 0;
    dnnl_primitive_desc_destroy(pd);
    return ok;
}

int64_t gf_cpu_dnnl_pack_size(gf_cpu_dnnl *d, const gf_conv2d_ex_params *p)
{
    conv_mds md;
    if (d == NULL || !pack_layout(d, p, &md))
        return 0;
    return PACK_HDR + (int64_t)dnnl_memory_desc_get_size(&md.wei_conv);
}

/* Reorder from (fmd, from) to (tmd, to) on a stream of its own (packing
 * may run on any thread). */
static bool reorder_once(gf_cpu_dnnl *d, const dnnl_memory_desc_t *fmd, const void *from,
                         const dnnl_memory_desc_t *tmd, void *to)
{
    dnnl_primitive_t r = NULL;
    dnnl_stream_t st = NULL;
    dnnl_memory_t mf = NULL, mt = NULL;
    bool ok = reorder(d, fmd, tmd, &r) &&
              dnnl_stream_create(&st, d->eng, dnnl_stream_default_flags) == dnnl_success &&
              dnnl_memory_create(&mf, fmd, d->eng, (void *)from) == dnnl_success &&
              dnnl_memory_create(&mt, tmd, d->eng, to) == dnnl_success;
    if (ok) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, mf}, {DNNL_ARG_TO, mt}};
        ok = dnnl_primitive_execute(r, st, 2, args) == dnnl_success &&
             dnnl_stream_wait(st) == dnnl_success;
    }
    if (mf != NULL)
        dnnl_memory_destroy(mf);
    if (mt != NULL)
        dnnl_memory_destroy(mt);
    if (st != NULL)
        dnnl_stream_destroy(st);
    if (r != NULL)
        dnnl_primitive_destroy(r);
    return ok;
}

int gf_cpu_dnnl_pack(gf_cpu_dnnl *d, const char *fn, void *packed, const gf_conv2d_ex_params *p,
                     const float *w)
{
    conv_mds md;
    if (d == NULL || !pack_layout(d, p, &md))
        return gf_kerr(GF_ERR_UNSUPPORTED, fn, "no packed form for this convolution "
                       "(conv2d_pack_size is 0)");
    pack_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, pack_magic, sizeof h.magic);
    h.p = *p;
    h.md = md.wei_conv;
    memset(packed, 0, PACK_HDR);
    memcpy(packed, &h, sizeof h);
    if (!reorder_once(d, &md.wei_user, w, &md.wei_conv, (char *)packed + PACK_HDR))
        return gf_kerr(GF_ERR_INTERNAL, fn, "a oneDNN reorder failed");
    return 0;
}

/* The header of packed when its magic is right and it was made for the c,
 * oc, kh, kw and groups of p; else NULL. */
static const pack_header *pack_check(const void *packed, const gf_conv2d_ex_params *p)
{
    const pack_header *h = packed;
    if (memcmp(h->magic, pack_magic, sizeof h->magic) != 0 || h->p.c != p->c ||
        h->p.oc != p->oc || h->p.kh != p->kh || h->p.kw != p->kw || h->p.groups != p->groups)
        return NULL;
    return h;
}

bool gf_cpu_dnnl_packed_fits(const void *packed, const gf_conv2d_ex_params *p)
{
    return pack_check(packed, p) != NULL;
}

int gf_cpu_dnnl_unpack(gf_cpu_dnnl *d, const char *fn, float *w, const void *packed,
                       const gf_conv2d_ex_params *p)
{
    const pack_header *h = pack_check(packed, p);
    conv_mds md;
    if (d == NULL || h == NULL || !conv_desc(d, p, false, false, GF_ACT_IDENTITY, &md, NULL) ||
        !reorder_once(d, &h->md, (const char *)packed + PACK_HDR, &md.wei_user, w))
        return gf_kerr(GF_ERR_INTERNAL, fn, "packed weights could not be unpacked");
    return 0;
}

int gf_cpu_dnnl_conv_run_packed(gf_cpu_dnnl *d, gf_cpu_dnnl_conv *c, const char *fn, float *y,
                                const float *x, const void *packed, const float *bias,
                                const float *res, void *scratch, uint32_t layout)
{
    const pack_header *h = pack_check(packed, &c->key.p);
    if (h == NULL)
        return gf_kerr(GF_ERR_INVALID, fn, "the weights were not packed for this convolution");
    const void *ready = (const char *)packed + PACK_HDR;
    if (!dnnl_memory_desc_equal(&h->md, &c->wei_conv)) {
        /* packed for another geometry, whose layout differs: reorder now */
        void *ws = (char *)scratch + up64(c->src_bytes);
        if (!reorder_once(d, &h->md, ready, &c->wei_conv, ws))
            return gf_kerr(GF_ERR_INTERNAL, fn, "a oneDNN reorder failed");
        ready = ws;
    }
    return conv_exec(d, c, fn, y, x, NULL, ready, bias, res, scratch, layout);
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

int64_t gf_cpu_dnnl_pack_size(gf_cpu_dnnl *d, const gf_conv2d_ex_params *p)
{
    (void)d, (void)p;
    return 0;
}

int gf_cpu_dnnl_pack(gf_cpu_dnnl *d, const char *fn, void *packed, const gf_conv2d_ex_params *p,
                     const float *w)
{
    (void)d, (void)packed, (void)p, (void)w;
    return gf_kerr(GF_ERR_UNSUPPORTED, fn, "built without oneDNN: no packed weights");
}

bool gf_cpu_dnnl_packed_fits(const void *packed, const gf_conv2d_ex_params *p)
{
    (void)packed, (void)p;
    return false;
}

int gf_cpu_dnnl_unpack(gf_cpu_dnnl *d, const char *fn, float *w, const void *packed,
                       const gf_conv2d_ex_params *p)
{
    (void)d, (void)w, (void)packed, (void)p;
    return gf_kerr(GF_ERR_UNSUPPORTED, fn, "built without oneDNN: no packed weights");
}

int gf_cpu_dnnl_conv_run_packed(gf_cpu_dnnl *d, gf_cpu_dnnl_conv *c, const char *fn, float *y,
                                const float *x, const void *packed, const float *bias,
                                const float *res, void *scratch, uint32_t layout)
{
    (void)layout;
    (void)d, (void)c, (void)y, (void)x, (void)packed, (void)bias, (void)res, (void)scratch;
    return gf_kerr(GF_ERR_UNSUPPORTED, fn, "built without oneDNN: no packed weights");
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
