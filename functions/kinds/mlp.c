/* gpufaas — the `mlp` kind: a PyTorch nn.Sequential of Linear layers and
 * activations.
 *
 * Tensors are named as the state_dict names them: `<i>.weight` [out, in] and
 * `<i>.bias` [out] (optional) for the Linear module at index i of the
 * Sequential; the layers are taken in ascending index. Config:
 *   {"activations": ["relu", "relu", "identity"], "softmax": false}
 * one activation per Linear layer (identity, relu, gelu, gelu_tanh, silu,
 * tanh, sigmoid; default relu for all but the last, which is identity), and
 * an optional softmax over the last layer's output. One input [N, in] FP32,
 * one output [N, out] FP32. Weights F32, F16 or BF16.
 *
 * Written against gpufaas/function.h only, like a plugin. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpufaas/function.h>

#include "kind_util.h"
#include "kinds.h"

#define MLP_MAX_LAYERS 256
#define WEIGHT_DTYPES ((1u << GF_DT_F32) | (1u << GF_DT_F16) | (1u << GF_DT_BF16))

typedef struct {
    int n;                    /* layers */
    int64_t in, max_width;
    int64_t out[MLP_MAX_LAYERS];
    size_t w_idx[MLP_MAX_LAYERS], b_idx[MLP_MAX_LAYERS];
    int has_bias[MLP_MAX_LAYERS];
    gf_dtype w_dtype[MLP_MAX_LAYERS];
    gf_act act[MLP_MAX_LAYERS];
    int softmax;
} mlp_state;

static const struct {
    const char *name;
    gf_act act;
} mlp_acts[] = {
    {"identity", GF_ACT_IDENTITY}, {"linear", GF_ACT_IDENTITY}, {"relu", GF_ACT_RELU},
    {"gelu", GF_ACT_GELU_ERF},     {"gelu_tanh", GF_ACT_GELU_TANH}, {"silu", GF_ACT_SILU},
    {"tanh", GF_ACT_TANH},         {"sigmoid", GF_ACT_SIGMOID},
};

static int parse_layer_index(const char *name, long *idx)
{
    const char *dot = strchr(name, '.');
    if (dot == NULL || dot == name || strcmp(dot, ".weight") != 0)
        return -1;
    for (const char *p = name; p < dot; p++)
        if (*p < '0' || *p > '9')
            return -1;
    errno = 0;
    long v = strtol(name, NULL, 10);
    if (errno != 0 || v < 0 || v > 1000000)
        return -1;
    *idx = v;
    return 0;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

static int mlp_config(const gf_fn_api *api, gf_fn_ctx *ctx, mlp_state *s, int n_layers)
{
    static const char *const known[] = {"activations", "softmax", NULL};
    for (int i = 0; i < n_layers; i++)
        s->act[i] = i + 1 < n_layers ? GF_ACT_RELU : GF_ACT_IDENTITY;
    int rc = gf_ku_cfg_known(api, ctx, "mlp", known);
    gf_fn_cfg v;
    if (rc != 0 || (rc = api->config(ctx, "/softmax", &v)) != 0)
        return rc;
    if (v.type != GF_FN_CFG_ABSENT) {
        if (v.type != GF_FN_CFG_BOOL)
            return api->set_error(ctx, GF_ERR_INVALID, "config.softmax must be true or false");
        s->softmax = (int)v.i;
    }
    if ((rc = api->config(ctx, "/activations", &v)) != 0 || v.type == GF_FN_CFG_ABSENT)
        return rc;
    if (v.type != GF_FN_CFG_ARRAY)
        return api->set_error(ctx, GF_ERR_INVALID, "config.activations must be an array");
    if ((int)v.n != n_layers)
        return api->set_error(ctx, GF_ERR_INVALID,
                              "config.activations has %zu entries but the weights have "
                              "%d Linear layers", v.n, n_layers);
    for (int i = 0; i < n_layers; i++) {
        char ptr[48];
        gf_fn_cfg a;
        snprintf(ptr, sizeof ptr, "/activations/%d", i);
        if ((rc = api->config(ctx, ptr, &a)) != 0)
            return rc;
        size_t j, na = sizeof mlp_acts / sizeof mlp_acts[0];
        for (j = 0; j < na; j++)
            if (a.type == GF_FN_CFG_STRING && strcmp(a.s, mlp_acts[j].name) == 0)
                break;
        if (j == na)
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "config.activations[%d]: unknown activation (use "
                                  "identity, relu, gelu, gelu_tanh, silu, tanh or "
                                  "sigmoid)", i);
        s->act[i] = mlp_acts[j].act;
    }
    return 0;
}

static int mlp_load(const gf_fn_api *api, gf_fn_ctx *ctx, void **state)
{
    if (api->input_count(ctx) != 1 || api->output_count(ctx) != 1)
        return api->set_error(ctx, GF_ERR_INVALID, "mlp takes exactly one input and one output");
    gf_fn_io in, out;
    api->input_spec(ctx, 0, &in);
    api->output_spec(ctx, 0, &out);
    if (in.dtype != GF_DT_F32 || in.rank != 2 || out.dtype != GF_DT_F32 || out.rank != 2)
        return api->set_error(ctx, GF_ERR_INVALID,
                              "mlp's input and output must be FP32 of shape [-1, features]");
    /* discover the Linear layers: <i>.weight of rank 2, ascending i */
    long idx[MLP_MAX_LAYERS];
    int n = 0;
    size_t nw = api->weight_count(ctx);
    for (size_t i = 0; i < nw; i++) {
        long v;
        gf_tensor t;
        const char *name = api->weight_name(ctx, i);
        if (parse_layer_index(name, &v) != 0 || api->weight_info(ctx, name, &t) != 0 ||
            t.rank != 2)
            continue;
        if (n == MLP_MAX_LAYERS)
            return api->set_error(ctx, GF_ERR_UNSUPPORTED, "more than %d Linear layers",
                                  MLP_MAX_LAYERS);
        idx[n++] = v;
    }
    if (n == 0)
        return api->set_error(ctx, GF_ERR_INVALID, "weights have no Linear layer (tensors named "
                              "'<i>.weight' of rank 2, as nn.Sequential names them)");
    qsort(idx, (size_t)n, sizeof idx[0], cmp_long);
    mlp_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return api->set_error(ctx, GF_ERR_NOMEM, "out of memory");
    s->n = n;
    int rc = mlp_config(api, ctx, s, n);
    int64_t width = in.shape[1];
    for (int i = 0; i < n && rc == 0; i++) {
        char wname[32], bname[32];
        snprintf(wname, sizeof wname, "%ld.weight", idx[i]);
        snprintf(bname, sizeof bname, "%ld.bias", idx[i]);
        gf_tensor w;
        api->weight_info(ctx, wname, &w);
        int64_t want_w[2] = {-1, i == 0 ? in.shape[1] : width};
        if ((rc = api->require(ctx, wname, WEIGHT_DTYPES, 2, want_w, &s->w_idx[i])) != 0)
            break;
        s->w_dtype[i] = w.dtype;
        width = w.shape[0];
        s->out[i] = width;
        if (i == 0)
            s->in = w.shape[1];
        if (width > s->max_width)
            s->max_width = width;
        gf_tensor b;
        if (api->weight_info(ctx, bname, &b) == 0) {
            int64_t want_b[1] = {width};
            if ((rc = api->require(ctx, bname, 1u << w.dtype, 1, want_b, &s->b_idx[i])) != 0)
                break;
            s->has_bias[i] = 1;
        }
    }
    if (rc == 0 && out.shape[1] != -1 && out.shape[1] != width)
        rc = api->set_error(ctx, GF_ERR_INVALID,
                            "output '%s' has %lld features but the last layer produces %lld",
                            out.name, (long long)out.shape[1], (long long)width);
    if (rc != 0) {
        free(s);
        return rc;
    }
    *state = s;
    return 0;
}

static int mlp_infer(const gf_fn_api *api, gf_fn_ctx *ctx, void *state)
{
    mlp_state *s = state;
    const gf_kernels *k = api->kernels(ctx);
    gf_stream *st = api->stream(ctx);
    gf_tensor x;
    int rc = api->input(ctx, 0, &x);
    if (rc != 0)
        return rc;
    int64_t n = x.shape[0];
    if (x.shape[1] != s->in)
        return api->set_error(ctx, GF_ERR_INVALID, "input has %lld features, the first layer "
                              "takes %lld", (long long)x.shape[1], (long long)s->in);
    gf_tensor y;
    int64_t yshape[2] = {n, s->out[s->n - 1]};
    if ((rc = api->output(ctx, 0, 2, yshape, &y)) != 0)
        return rc;
    float *buf[2] = {NULL, NULL};
    if (s->n > 1) {
        size_t bytes = (size_t)n * (size_t)s->max_width * sizeof(float);
        if ((rc = api->workspace(ctx, bytes, (void **)&buf[0])) != 0 ||
            (rc = api->workspace(ctx, bytes, (void **)&buf[1])) != 0)
            return rc;
    }
    const float *cur = x.data;
    int64_t cur_w = s->in;
    for (int i = 0; i < s->n; i++) {
        float *dst = i + 1 == s->n ? (float *)y.data : buf[i % 2];
        gf_tensor w, b;
        if ((rc = api->param(ctx, s->w_idx[i], &w)) != 0)
            return rc;
        if (s->has_bias[i] && (rc = api->param(ctx, s->b_idx[i], &b)) != 0)
            return rc;
        rc = k->gemm(k->ctx, st, 0, 1, n, s->out[i], cur_w, 1.0f, cur, GF_DT_F32, cur_w, w.data,
                     s->w_dtype[i], cur_w, 0.0f, dst, s->out[i]);
        if (rc == 0 && (s->has_bias[i] || s->act[i] != GF_ACT_IDENTITY))
            rc = k->bias_act(k->ctx, st, dst, n, s->out[i], s->has_bias[i] ? b.data : NULL,
                             s->w_dtype[i], s->act[i]);
        if (rc != 0)
            return api->set_error(ctx, rc, "layer %d: %s", i, k->last_error(k->ctx));
        cur = dst;
        cur_w = s->out[i];
    }
    if (s->softmax && (rc = k->softmax(k->ctx, st, y.data, y.data, n, cur_w, 0)) != 0)
        return api->set_error(ctx, rc, "softmax: %s", k->last_error(k->ctx));
    return 0;
}

static void mlp_unload(void *state)
{
    free(state);
}

static const gf_fn_desc mlp_desc = {
    /* .size = */ sizeof(gf_fn_desc),
    /* .abi_version = */ GF_FN_ABI_VERSION,
    /* .name = */ "mlp",
    /* .load = */ mlp_load,
    /* .infer = */ mlp_infer,
    /* .unload = */ mlp_unload,
};

const gf_fn_desc *gf_fn_kind_mlp(void)
{
    return &mlp_desc;
}
