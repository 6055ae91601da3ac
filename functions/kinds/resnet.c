/* gpufaas — the `resnet` kind: torchvision ResNet-18/34/50/101/152.
 *
 * Weights are a torchvision state_dict saved with safetensors:
 *   conv1.weight [64,3,7,7], bn1.{weight,bias,running_mean,running_var} [64],
 *   layerL.B.convK.weight, layerL.B.bnK.*, layerL.0.downsample.0.weight,
 *   layerL.0.downsample.1.*, fc.weight [classes, 512*e], fc.bias [classes]
 * and each BatchNorm's num_batches_tracked. Basic blocks
 * (18, 34) have conv1/conv2 3x3; bottlenecks (50, 101, 152; e = 4) have
 * conv1 1x1, conv2 3x3 carrying the stride (torchvision's "v1.5"), conv3 1x1.
 *
 * Config (all optional): {"depth": 18|34|50|101|152, "num_classes": n,
 * "bn_eps": 1e-5}. Without depth it is inferred from the tensors present.
 *
 * Batchnorm follows THE FOLDING RULE (kind_util.h): with F32 weights it is
 * folded into the convolutions at load, as derived F32 parameters W' = W *
 * g / sqrt(v + eps) and b' = beta - m * g / sqrt(v + eps) computed in double,
 * and infer runs conv2d with fused bias and ReLU; with F16 or BF16 weights
 * the convolution uses its weights as stored and batchnorm (with the fused
 * ReLU) runs after it from the stored statistics, so no rounding is added.
 * Every tensor of the file is used: num_batches_tracked counters are checked
 * off (they have no effect at inference); anything else is refused by the
 * runtime (the unused-weights rule).
 *
 * Input [N,3,H,W] FP32 (any H, W large enough for five stride-2 stages);
 * output logits [N, classes] FP32.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpufaas/function.h>

#include "kind_util.h"
#include "kinds.h"

#define RN_KIND "resnet"
#define RN_NAME_MAX 96

typedef struct rn_conv {
    char name[RN_NAME_MAX]; /* "layer1.0.conv1", for messages */
    int64_t ic, oc, k, stride, pad;
    bool folded;   /* F32: batchnorm folded into w_idx, b_idx */
    size_t w_idx, b_idx; /* folded weight and bias (b_idx unused when !folded) */
    gf_ku_vecs bn; /* !folded: the batchnorm's statistics, applied after the conv */
} rn_conv;

typedef struct rn_block {
    rn_conv conv[3];
    int nconv;   /* 2 (basic) or 3 (bottleneck) */
    bool has_ds; /* a projection shortcut (downsample) */
    rn_conv ds;
} rn_block;

typedef struct rn_state {
    int depth;
    float eps; /* batchnorm epsilon (unfolded batchnorms) */
    bool bottleneck;
    rn_conv stem;
    rn_block *blocks;
    size_t nblocks;
    int64_t feat, classes; /* fc input and output widths */
    size_t fc_w, fc_b;
} rn_state;

/* Blocks per stage for each depth torchvision defines. */
static const struct {
    int depth;
    bool bottleneck;
    int blocks[4];
} rn_depths[] = {
    {18, false, {2, 2, 2, 2}},  {34, false, {3, 4, 6, 3}},  {50, true, {3, 4, 6, 3}},
    {101, true, {3, 4, 23, 3}}, {152, true, {3, 8, 36, 3}},
};
#define RN_NDEPTHS (sizeof rn_depths / sizeof rn_depths[0])

/* ---- load ---- */

/* Declare conv `conv` (weights conv.weight) followed by batchnorm `bn`, by
 * THE FOLDING RULE: F32 weights fold into derived "<conv>.weight.folded" and
 * "<conv>.bias.folded"; F16/BF16 weights are used as stored, with the
 * batchnorm's four vectors as parameters after them. */
static int rn_fold(const gf_fn_api *api, gf_fn_ctx *ctx, double eps, rn_conv *c, const char *conv,
                   const char *bn, int64_t ic, int64_t oc, int64_t k, int64_t stride, int64_t pad)
{
    char name[RN_NAME_MAX + 32];
    gf_tensor wi;
    int rc;
    snprintf(c->name, sizeof c->name, "%s", conv);
    c->ic = ic;
    c->oc = oc;
    c->k = k;
    c->stride = stride;
    c->pad = pad;
    const int64_t wshape[4] = {oc, ic, k, k};
    snprintf(name, sizeof name, "%s.weight", conv);
    if ((rc = gf_ku_expect(api, ctx, RN_KIND, name, GF_KU_FLOAT_MASK, 4, wshape, &wi)) != 0)
        return rc;
    c->folded = wi.dtype == GF_DT_F32;
    if (c->folded)
        return gf_ku_bn_fold(api, ctx, RN_KIND, name, NULL, bn, true, 4, wshape, eps, &c->w_idx,
                             &c->b_idx);
    if ((rc = api->require(ctx, name, GF_KU_FLOAT_MASK, 4, wshape, &c->w_idx)) != 0)
        return rc;
    return gf_ku_bn_declare(api, ctx, RN_KIND, bn, true, oc, &c->bn);
}

/* Number of blocks stage `layer` (1..4) has in the weights. */
static int rn_count_blocks(const gf_fn_api *api, gf_fn_ctx *ctx, int layer)
{
    char name[64];
    gf_tensor t;
    int n = 0;
    for (;;) {
        snprintf(name, sizeof name, "layer%d.%d.conv1.weight", layer, n);
        if (api->weight_info(ctx, name, &t) != 0 || n >= 1000)
            return n;
        n++;
    }
}

static int rn_config(const gf_fn_api *api, gf_fn_ctx *ctx, int64_t *depth, int64_t *classes,
                     double *eps)
{
    static const char *const known[] = {"depth", "num_classes", "bn_eps", NULL};
    int rc;
    if ((rc = gf_ku_cfg_known(api, ctx, RN_KIND, known)) != 0 ||
        (rc = gf_ku_cfg_int(api, ctx, RN_KIND, "depth", 1, 1000, depth, NULL)) != 0 ||
        (rc = gf_ku_cfg_int(api, ctx, RN_KIND, "num_classes", 1, INT32_MAX, classes, NULL)) != 0)
        return rc;
    return gf_ku_cfg_positive(api, ctx, RN_KIND, "bn_eps", 1.0, eps);
}

/* Output size of a convolution or pooling window along one axis (0 when
 * the input is smaller than the window). */
static int64_t rn_out(int64_t in, int64_t k, int64_t stride, int64_t pad)
{
    int64_t t = in + 2 * pad - k;
    return t < 0 ? 0 : t / stride + 1;
}

/* Walk the network for an h x w input: the largest activation (elements
 * per image). False when some stage would be empty (only for an empty
 * input: every stage maps a size >= 1 to a size >= 1). */
static bool rn_geometry(const rn_state *st, int64_t h, int64_t w, int64_t *max_el)
{
    int64_t mx = 0;
    h = rn_out(h, 7, 2, 3);
    w = rn_out(w, 7, 2, 3);
    mx = 64 * h * w;
    h = rn_out(h, 3, 2, 1); /* maxpool */
    w = rn_out(w, 3, 2, 1);
    if (h < 1 || w < 1)
        return false;
    for (size_t b = 0; b < st->nblocks; b++) {
        const rn_block *blk = &st->blocks[b];
        int64_t bh = h, bw = w;
        for (int j = 0; j < blk->nconv; j++) {
            const rn_conv *c = &blk->conv[j];
            bh = rn_out(bh, c->k, c->stride, c->pad);
            bw = rn_out(bw, c->k, c->stride, c->pad);
            if (bh < 1 || bw < 1)
                return false;
            if (c->oc * bh * bw > mx)
                mx = c->oc * bh * bw;
        }
        h = bh;
        w = bw;
    }
    *max_el = mx;
    return true;
}

static void rn_unload(void *state)
{
    rn_state *st = state;
    if (st == NULL)
        return;
    free(st->blocks);
    free(st);
}

/* Check the manifest's inputs and outputs against what this network takes. */
static int rn_check_io(const gf_fn_api *api, gf_fn_ctx *ctx, const rn_state *st)
{
    gf_fn_io io;
    char got[128];
    if (api->input_count(ctx) != 1 || api->output_count(ctx) != 1)
        return api->set_error(ctx, GF_ERR_INVALID,
                              "resnet takes one input [N, 3, H, W] and "
                              "gives one output [N, %" PRId64 "]; the manifest has %zu and %zu",
                              st->classes, api->input_count(ctx), api->output_count(ctx));
    api->input_spec(ctx, 0, &io);
    const int64_t in_shape[4] = {-1, 3, -1, -1};
    if (io.dtype != GF_DT_F32 || !gf_ku_io_matches(&io, 4, in_shape))
        return api->set_error(ctx, GF_ERR_INVALID,
                              "resnet input '%s' must be FP32 [N, 3, H, W], "
                              "the manifest says %s %s",
                              io.name, gf_ku_dtype_name(io.dtype),
                              gf_ku_shape_str(got, sizeof got, io.rank, io.shape));
    api->output_spec(ctx, 0, &io);
    const int64_t out_shape[2] = {-1, st->classes};
    if (io.dtype != GF_DT_F32 || !gf_ku_io_matches(&io, 2, out_shape))
        return api->set_error(ctx, GF_ERR_INVALID,
                              "resnet output '%s' must be FP32 [N, %" PRId64
                              "] (fc.weight has %" PRId64 " classes), the manifest says %s %s",
                              io.name, st->classes, st->classes, gf_ku_dtype_name(io.dtype),
                              gf_ku_shape_str(got, sizeof got, io.rank, io.shape));
    return 0;
}

static int rn_load(const gf_fn_api *api, gf_fn_ctx *ctx, void **state)
{
    int64_t depth = 0, classes = 0;
    double eps = 1e-5;
    int rc = rn_config(api, ctx, &depth, &classes, &eps);
    if (rc != 0)
        return rc;
    /* The blocks the weights have, and the depth they make. */
    gf_tensor t;
    bool bottleneck = api->weight_info(ctx, "layer1.0.conv3.weight", &t) == 0;
    int counts[4];
    for (int l = 0; l < 4; l++)
        counts[l] = rn_count_blocks(api, ctx, l + 1);
    int di = -1;
    for (size_t i = 0; i < RN_NDEPTHS; i++) {
        if (depth != 0 ? rn_depths[i].depth == depth
                       : (rn_depths[i].bottleneck == bottleneck &&
                          memcmp(rn_depths[i].blocks, counts, sizeof counts) == 0))
            di = (int)i;
    }
    if (di < 0 && depth != 0)
        return api->set_error(ctx, GF_ERR_INVALID,
                              "resnet config: depth %" PRId64 " is not one of "
                              "18, 34, 50, 101, 152",
                              depth);
    if (di < 0)
        return api->set_error(ctx, GF_ERR_INVALID,
                              "resnet: cannot tell the depth from the "
                              "weights (%s blocks per stage %d, %d, %d, %d); are these "
                              "torchvision ResNet weights? Set config \"depth\" to see what is "
                              "missing",
                              bottleneck ? "bottleneck" : "basic", counts[0], counts[1], counts[2],
                              counts[3]);
    for (int l = 0; l < 4; l++) {
        char name[64];
        snprintf(name, sizeof name, "layer%d.%d.conv1.weight", l + 1, rn_depths[di].blocks[l]);
        if (api->weight_info(ctx, name, &t) == 0)
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "resnet config: depth %d has %d blocks in "
                                  "layer%d but the weights have '%s'",
                                  rn_depths[di].depth, rn_depths[di].blocks[l], l + 1, name);
    }
    rn_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return api->set_error(ctx, GF_ERR_NOMEM, "out of memory");
    st->eps = (float)eps;
    st->depth = rn_depths[di].depth;
    st->bottleneck = rn_depths[di].bottleneck;
    for (int l = 0; l < 4; l++)
        st->nblocks += (size_t)rn_depths[di].blocks[l];
    st->blocks = calloc(st->nblocks, sizeof *st->blocks);
    if (st->blocks == NULL) {
        rc = api->set_error(ctx, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    /* Declare the parameters in execution order. */
    if ((rc = rn_fold(api, ctx, eps, &st->stem, "conv1", "bn1", 3, 64, 7, 2, 3)) != 0)
        goto fail;
    int64_t in = 64, e = st->bottleneck ? 4 : 1;
    size_t b = 0;
    for (int l = 0; l < 4; l++) {
        int64_t planes = (int64_t)64 << l;
        for (int j = 0; j < rn_depths[di].blocks[l]; j++, b++) {
            rn_block *blk = &st->blocks[b];
            int64_t s = (j == 0 && l > 0) ? 2 : 1;
            char conv[RN_NAME_MAX], bn[RN_NAME_MAX], pre[32];
            snprintf(pre, sizeof pre, "layer%d.%d", l + 1, j);
            blk->nconv = st->bottleneck ? 3 : 2;
            for (int q = 0; q < blk->nconv && rc == 0; q++) {
                int64_t ic, oc, k, stride;
                if (!st->bottleneck) {
                    ic = q == 0 ? in : planes;
                    oc = planes;
                    k = 3;
                    stride = q == 0 ? s : 1;
                } else {
                    ic = q == 0 ? in : planes;
                    oc = q == 2 ? planes * 4 : planes;
                    k = q == 1 ? 3 : 1;
                    stride = q == 1 ? s : 1;
                }
                snprintf(conv, sizeof conv, "%s.conv%d", pre, q + 1);
                snprintf(bn, sizeof bn, "%s.bn%d", pre, q + 1);
                rc = rn_fold(api, ctx, eps, &blk->conv[q], conv, bn, ic, oc, k, stride,
                             k == 3 ? 1 : 0);
            }
            if (rc != 0)
                goto fail;
            blk->has_ds = s != 1 || in != planes * e;
            if (blk->has_ds) {
                snprintf(conv, sizeof conv, "%s.downsample.0", pre);
                snprintf(bn, sizeof bn, "%s.downsample.1", pre);
                if ((rc = rn_fold(api, ctx, eps, &blk->ds, conv, bn, in, planes * e, 1, s, 0)) != 0)
                    goto fail;
            }
            in = planes * e;
        }
    }
    st->feat = in;
    /* The class count: from the config, else fc.bias, else fc.weight; the
     * require calls below check the others against it. */
    st->classes = classes;
    if (st->classes == 0 && api->weight_info(ctx, "fc.bias", &t) == 0 && t.rank == 1)
        st->classes = t.shape[0];
    if (st->classes == 0 && api->weight_info(ctx, "fc.weight", &t) == 0 && t.rank == 2)
        st->classes = t.shape[0];
    if (st->classes == 0) {
        const int64_t want[2] = {-1, in};
        rc = api->require(ctx, "fc.weight", GF_KU_FLOAT_MASK, 2, want, &st->fc_w);
        rc = rc ? rc : api->set_error(ctx, GF_ERR_INVALID, "resnet: fc.weight has no rows");
        goto fail;
    }
    const int64_t fcw[2] = {st->classes, in};
    if ((rc = api->require(ctx, "fc.weight", GF_KU_FLOAT_MASK, 2, fcw, &st->fc_w)) != 0 ||
        (rc = api->require(ctx, "fc.bias", GF_KU_FLOAT_MASK, 1, &st->classes, &st->fc_b)) != 0)
        goto fail;
    if ((rc = rn_check_io(api, ctx, st)) != 0)
        goto fail;
    *state = st;
    return 0;
fail:
    rn_unload(st);
    return rc;
}

/* ---- infer ---- */

typedef struct rn_run {
    const gf_fn_api *api;
    gf_fn_ctx *ctx;
    const gf_kernels *k;
    gf_stream *s;
    int64_t n;
    float eps;
} rn_run;

/* y = act(conv(x) + b) for folded convolution c on an h x w input; *h and
 * *w become the output size. */
static int rn_conv_run(const rn_run *r, const rn_conv *c, float *y, const float *x, int64_t *h,
                       int64_t *w, gf_act act)
{
    gf_tensor wt, bt = {0};
    int rc;
    if ((rc = r->api->param(r->ctx, c->w_idx, &wt)) != 0 ||
        (c->folded && (rc = r->api->param(r->ctx, c->b_idx, &bt)) != 0))
        return rc;
    const gf_conv2d_params p = {
        /* .n = */ r->n,
        /* .c = */ c->ic,
        /* .h = */ *h,
        /* .w = */ *w,
        /* .oc = */ c->oc,
        /* .kh = */ c->k,
        /* .kw = */ c->k,
        /* .stride_h = */ c->stride,
        /* .stride_w = */ c->stride,
        /* .pad_h = */ c->pad,
        /* .pad_w = */ c->pad,
        /* .dil_h = */ 1,
        /* .dil_w = */ 1,
        /* .groups = */ 1,
    };
    rc = r->k->conv2d(r->k->ctx, r->s, y, x, &p, wt.data, c->folded ? bt.data : NULL, wt.dtype,
                      c->folded ? act : GF_ACT_IDENTITY);
    if (rc != 0)
        return gf_ku_kerr(r->api, r->ctx, r->k, rc, c->name);
    *h = rn_out(*h, c->k, c->stride, c->pad);
    *w = rn_out(*w, c->k, c->stride, c->pad);
    if (c->folded)
        return 0;
    const void *v[4];
    if ((rc = gf_ku_vecs_get(r->api, r->ctx, &c->bn, v)) != 0)
        return rc;
    if ((rc = r->k->batchnorm(r->k->ctx, r->s, y, y, r->n, c->oc, *h * *w, v[0], v[1], v[2], v[3],
                              c->bn.dtype, r->eps, act)) != 0)
        return gf_ku_kerr(r->api, r->ctx, r->k, rc, c->name);
    return 0;
}

static int rn_infer(const gf_fn_api *api, gf_fn_ctx *ctx, void *state)
{
    const rn_state *st = state;
    rn_run r = {api, ctx, api->kernels(ctx), api->stream(ctx), 0, st->eps};
    const gf_kernels *k = r.k;
    gf_tensor x, out;
    int rc = api->input(ctx, 0, &x);
    if (rc != 0)
        return rc;
    if (x.rank != 4 || x.shape[1] != 3 || x.dtype != GF_DT_F32)
        return api->set_error(ctx, GF_ERR_INVALID, "resnet: the input must be FP32 [N, 3, H, W]");
    r.n = x.shape[0];
    int64_t h = x.shape[2], w = x.shape[3], max_el;
    if (!rn_geometry(st, h, w, &max_el))
        return api->set_error(ctx, GF_ERR_INVALID, "resnet: an empty %" PRId64 "x%" PRId64 " input",
                              h, w);
    /* Four rotating activation buffers of the largest activation, plus the
     * pooled features. */
    int64_t per, pooled;
    size_t bytes;
    if (__builtin_mul_overflow(max_el, r.n, &per) ||
        __builtin_mul_overflow(st->feat, r.n, &pooled) ||
        __builtin_mul_overflow((size_t)per, (size_t)4 * 4, &bytes) ||
        __builtin_add_overflow(bytes, (size_t)pooled * 4, &bytes))
        return api->set_error(ctx, GF_ERR_INVALID,
                              "resnet: activations for batch %" PRId64 " overflow", r.n);
    void *ws;
    if ((rc = api->workspace(ctx, bytes, &ws)) != 0)
        return rc;
    float *buf[4];
    for (int i = 0; i < 4; i++)
        buf[i] = (float *)ws + (size_t)i * (size_t)per;
    float *feat = (float *)ws + (size_t)4 * (size_t)per;

    /* stem: conv 7x7/2 + relu, maxpool 3x3/2 pad 1 */
    if ((rc = rn_conv_run(&r, &st->stem, buf[1], x.data, &h, &w, GF_ACT_RELU)) != 0)
        return rc;
    const gf_pool2d_params mp = {r.n, 64, h, w, 3, 3, 2, 2, 1, 1, 0};
    if ((rc = k->maxpool2d(k->ctx, r.s, buf[0], buf[1], &mp)) != 0)
        return gf_ku_kerr(api, ctx, k, rc, "maxpool");
    h = rn_out(h, 3, 2, 1);
    w = rn_out(w, 3, 2, 1);
    int cur = 0;
    int64_t c = 64;
    for (size_t b = 0; b < st->nblocks; b++) {
        const rn_block *blk = &st->blocks[b];
        int o[3], no = 0;
        for (int i = 0; i < 4; i++)
            if (i != cur)
                o[no++] = i;
        int64_t bh = h, bw = w;
        /* main path: the last conv has no activation; result in res */
        int res;
        if (blk->nconv == 2) {
            if ((rc = rn_conv_run(&r, &blk->conv[0], buf[o[0]], buf[cur], &bh, &bw, GF_ACT_RELU)) !=
                    0 ||
                (rc = rn_conv_run(&r, &blk->conv[1], buf[o[1]], buf[o[0]], &bh, &bw,
                                  GF_ACT_IDENTITY)) != 0)
                return rc;
            res = o[1];
        } else {
            if ((rc = rn_conv_run(&r, &blk->conv[0], buf[o[0]], buf[cur], &bh, &bw, GF_ACT_RELU)) !=
                    0 ||
                (rc = rn_conv_run(&r, &blk->conv[1], buf[o[1]], buf[o[0]], &bh, &bw,
                                  GF_ACT_RELU)) != 0 ||
                (rc = rn_conv_run(&r, &blk->conv[2], buf[o[0]], buf[o[1]], &bh, &bw,
                                  GF_ACT_IDENTITY)) != 0)
                return rc;
            res = o[0];
        }
        const float *id = buf[cur];
        if (blk->has_ds) {
            int64_t dh = h, dw = w;
            if ((rc = rn_conv_run(&r, &blk->ds, buf[o[2]], buf[cur], &dh, &dw, GF_ACT_IDENTITY)) !=
                0)
                return rc;
            id = buf[o[2]];
        }
        c = blk->conv[blk->nconv - 1].oc;
        if ((rc = k->add(k->ctx, r.s, buf[res], buf[res], id, r.n * c * bh * bw, GF_ACT_RELU)) != 0)
            return gf_ku_kerr(api, ctx, k, rc, "residual add");
        cur = res;
        h = bh;
        w = bw;
    }
    if ((rc = k->global_avgpool(k->ctx, r.s, feat, buf[cur], r.n, c, h * w)) != 0)
        return gf_ku_kerr(api, ctx, k, rc, "avgpool");
    gf_tensor fw, fb;
    const int64_t oshape[2] = {r.n, st->classes};
    if ((rc = api->output(ctx, 0, 2, oshape, &out)) != 0 ||
        (rc = api->param(ctx, st->fc_w, &fw)) != 0 || (rc = api->param(ctx, st->fc_b, &fb)) != 0)
        return rc;
    /* logits = feat fc.weight^T + fc.bias */
    if ((rc = k->gemm(k->ctx, r.s, 0, 1, r.n, st->classes, st->feat, 1.0f, feat, GF_DT_F32,
                      st->feat, fw.data, fw.dtype, st->feat, 0.0f, out.data, st->classes)) != 0)
        return gf_ku_kerr(api, ctx, k, rc, "fc");
    if ((rc = k->bias_act(k->ctx, r.s, out.data, r.n, st->classes, fb.data, fb.dtype,
                          GF_ACT_IDENTITY)) != 0)
        return gf_ku_kerr(api, ctx, k, rc, "fc bias");
    return 0;
}

static const gf_fn_desc rn_desc = {
    /* .size = */ sizeof(gf_fn_desc),
    /* .abi_version = */ GF_FN_ABI_VERSION,
    /* .name = */ RN_KIND,
    /* .load = */ rn_load,
    /* .infer = */ rn_infer,
    /* .unload = */ rn_unload,
};

const gf_fn_desc *gf_fn_kind_resnet(void)
{
    return &rn_desc;
}
