/* gpufaas — the `bert` kind: Hugging Face BertForSequenceClassification.
 *
 * Weights are the model's state_dict saved with safetensors:
 *   bert.embeddings.{word,position,token_type}_embeddings.weight,
 *   bert.embeddings.LayerNorm.{weight,bias},
 *   bert.encoder.layer.{i}.attention.self.{query,key,value}.{weight,bias},
 *   bert.encoder.layer.{i}.attention.output.dense.{weight,bias},
 *   bert.encoder.layer.{i}.attention.output.LayerNorm.{weight,bias},
 *   bert.encoder.layer.{i}.intermediate.dense.{weight,bias},
 *   bert.encoder.layer.{i}.output.dense.{weight,bias},
 *   bert.encoder.layer.{i}.output.LayerNorm.{weight,bias},
 *   bert.pooler.dense.{weight,bias}, classifier.{weight,bias}
 * and, from older transformers versions, the buffers bert.embeddings.
 * position_ids (checked to be 0, 1, 2, ...) and token_type_ids (all 0). Any
 * other tensor is refused by the runtime (the unused-weights rule).
 *
 * Config: the model's config.json as Hugging Face writes it. Read: hidden_size,
 * num_attention_heads, num_hidden_layers, intermediate_size, layer_norm_eps
 * (1e-12), max_position_embeddings, vocab_size, type_vocab_size, hidden_act
 * (gelu, gelu_new, gelu_pytorch_tanh, relu, silu), position_embedding_type
 * (absolute only). Sizes absent from the config are taken from the tensors,
 * but num_attention_heads is required: no tensor shape depends on it.
 * Fields that would change the forward pass are refused unless they say
 * what this kind computes (model_type "bert", is_decoder and
 * add_cross_attention false); id2label, when given, must have as many
 * labels as classifier.weight has rows. Other fields (dropout rates,
 * architectures...) have no effect at inference.
 *
 * Inputs (by name): input_ids [N,S] and optionally attention_mask [N,S]
 * (1 = attend) and token_type_ids [N,S] (all 0 when absent); INT32 or INT64.
 * Output: logits [N, num_labels] FP32.
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

#define BT_KIND "bert"

/* One Linear layer (weight [out, in], bias [out]) or LayerNorm (gamma, beta). */
typedef struct bt_pair {
    size_t w, b;
} bt_pair;

typedef struct bt_layer {
    bt_pair q, k, v, attn_out, attn_ln, inter, out, out_ln;
} bt_layer;

typedef struct bt_state {
    int64_t hidden, heads, layers, inter, vocab, max_pos, type_vocab, labels;
    int64_t id2label;  /* labels the config's id2label names, 0 when absent */
    float eps;
    gf_act act;
    size_t word, pos, type;
    bt_pair emb_ln;
    bt_layer *layer;
    bt_pair pooler, classifier;
    long in_ids, in_mask, in_type; /* manifest input indices, -1 when absent */
} bt_state;

static void bt_unload(void *state)
{
    bt_state *st = state;
    if (st == NULL)
        return;
    free(st->layer);
    free(st);
}

/* ---- load ---- */

static int bt_config(const gf_fn_api *api, gf_fn_ctx *ctx, bt_state *st, bool *heads_given)
{
    const int64_t big = (int64_t)1 << 31;
    int rc;
    if ((rc = gf_ku_cfg_int(api, ctx, BT_KIND, "hidden_size", 1, big, &st->hidden, NULL)) ||
        (rc = gf_ku_cfg_int(api, ctx, BT_KIND, "num_attention_heads", 1, big, &st->heads,
                            heads_given)) ||
        (rc = gf_ku_cfg_int(api, ctx, BT_KIND, "num_hidden_layers", 0, 100000, &st->layers,
                            NULL)) ||
        (rc = gf_ku_cfg_int(api, ctx, BT_KIND, "intermediate_size", 1, big, &st->inter, NULL)) ||
        (rc = gf_ku_cfg_int(api, ctx, BT_KIND, "max_position_embeddings", 1, big, &st->max_pos,
                            NULL)) ||
        (rc = gf_ku_cfg_int(api, ctx, BT_KIND, "vocab_size", 1, big, &st->vocab, NULL)) ||
        (rc = gf_ku_cfg_int(api, ctx, BT_KIND, "type_vocab_size", 1, big, &st->type_vocab, NULL)))
        return rc;
    double eps = st->eps;
    if ((rc = gf_ku_cfg_positive(api, ctx, BT_KIND, "layer_norm_eps", 1.0, &eps)) != 0)
        return rc;
    st->eps = (float)eps;
    gf_fn_cfg v;
    if ((rc = gf_ku_cfg_get(api, ctx, "hidden_act", &v)) != 0)
        return rc;
    if (v.type != GF_FN_CFG_ABSENT) {
        static const struct {
            const char *name;
            gf_act act;
        } acts[] = {
            {"gelu", GF_ACT_GELU_ERF},
            {"gelu_new", GF_ACT_GELU_TANH},
            {"gelu_pytorch_tanh", GF_ACT_GELU_TANH},
            {"relu", GF_ACT_RELU},
            {"silu", GF_ACT_SILU},
            {"swish", GF_ACT_SILU},
        };
        bool found = false;
        for (size_t i = 0; v.type == GF_FN_CFG_STRING && i < sizeof acts / sizeof acts[0]; i++)
            if (strcmp(v.s, acts[i].name) == 0) {
                st->act = acts[i].act;
                found = true;
            }
        if (!found)
            return api->set_error(ctx, GF_ERR_UNSUPPORTED,
                                  "bert config: \"hidden_act\" must be one "
                                  "of gelu, gelu_new, gelu_pytorch_tanh, relu, silu");
    }
    if ((rc = gf_ku_cfg_get(api, ctx, "model_type", &v)) != 0)
        return rc;
    if (v.type != GF_FN_CFG_ABSENT && (v.type != GF_FN_CFG_STRING || strcmp(v.s, "bert") != 0))
        return api->set_error(ctx, GF_ERR_UNSUPPORTED,
                              "bert config: \"model_type\" is %s%.32s%s; kind bert computes BERT "
                              "(model_type \"bert\")",
                              v.type == GF_FN_CFG_STRING ? "\"" : "",
                              v.type == GF_FN_CFG_STRING ? v.s : "not a string",
                              v.type == GF_FN_CFG_STRING ? "\"" : "");
    static const char *const off[] = {"is_decoder", "add_cross_attention"};
    for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) {
        if ((rc = gf_ku_cfg_get(api, ctx, off[i], &v)) != 0)
            return rc;
        if (v.type != GF_FN_CFG_ABSENT && (v.type != GF_FN_CFG_BOOL || v.i != 0))
            return api->set_error(ctx, GF_ERR_UNSUPPORTED,
                                  "bert config: \"%s\" must be false: kind bert runs the "
                                  "encoder of BertForSequenceClassification",
                                  off[i]);
    }
    if ((rc = gf_ku_cfg_get(api, ctx, "id2label", &v)) != 0)
        return rc;
    if (v.type == GF_FN_CFG_OBJECT)
        st->id2label = (int64_t)v.n;
    if ((rc = gf_ku_cfg_get(api, ctx, "position_embedding_type", &v)) != 0)
        return rc;
    if (v.type != GF_FN_CFG_ABSENT &&
        (v.type != GF_FN_CFG_STRING || strcmp(v.s, "absolute") != 0))
        return api->set_error(ctx, GF_ERR_UNSUPPORTED,
                              "bert config: only \"absolute\" "
                              "position_embedding_type is supported");
    return 0;
}

/* Dimension `dim` of weights tensor name into *out, unless *out is already
 * set (from the config: require then checks it). Missing tensors are left
 * to require's message. */
static void bt_dim(const gf_fn_api *api, gf_fn_ctx *ctx, const char *name, int32_t dim,
                   int64_t *out)
{
    gf_tensor t;
    if (*out == 0 && api->weight_info(ctx, name, &t) == 0 && t.rank > dim)
        *out = t.shape[dim];
}

/* Require prefix.weight [rows, cols] (or [rows] when cols < 0: a LayerNorm)
 * and prefix.bias [rows], both F32/F16/BF16; a LayerNorm's two must share a
 * dtype (the kernel takes one). */
static int bt_pair_req(const gf_fn_api *api, gf_fn_ctx *ctx, const char *prefix, int64_t rows,
                       int64_t cols, bt_pair *p)
{
    char name[160];
    int rc;
    const int64_t shape[2] = {rows, cols};
    snprintf(name, sizeof name, "%s.weight", prefix);
    if ((rc = api->require(ctx, name, GF_KU_FLOAT_MASK, cols < 0 ? 1 : 2, shape, &p->w)) != 0)
        return rc;
    snprintf(name, sizeof name, "%s.bias", prefix);
    if ((rc = api->require(ctx, name, GF_KU_FLOAT_MASK, 1, shape, &p->b)) != 0)
        return rc;
    if (cols < 0) {
        gf_tensor g, b;
        snprintf(name, sizeof name, "%s.weight", prefix);
        api->weight_info(ctx, name, &g);
        snprintf(name, sizeof name, "%s.bias", prefix);
        api->weight_info(ctx, name, &b);
        if (g.dtype != b.dtype)
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "%s.weight is %s but %s.bias is %s; a "
                                  "LayerNorm's two tensors must share a dtype",
                                  prefix, gf_ku_dtype_name(g.dtype), prefix,
                                  gf_ku_dtype_name(b.dtype));
    }
    return 0;
}

/* Find the inputs by name and check the manifest's shapes and dtypes. */
static int bt_check_io(const gf_fn_api *api, gf_fn_ctx *ctx, bt_state *st)
{
    gf_fn_io io;
    char got[128];
    st->in_ids = st->in_mask = st->in_type = -1;
    const int64_t any2[2] = {-1, -1};
    for (size_t i = 0; i < api->input_count(ctx); i++) {
        api->input_spec(ctx, i, &io);
        long *slot = strcmp(io.name, "input_ids") == 0        ? &st->in_ids
                     : strcmp(io.name, "attention_mask") == 0 ? &st->in_mask
                     : strcmp(io.name, "token_type_ids") == 0 ? &st->in_type
                                                              : NULL;
        if (slot == NULL)
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "bert: unknown input '%s' (inputs are "
                                  "input_ids, attention_mask, token_type_ids)",
                                  io.name);
        if (*slot >= 0)
            return api->set_error(ctx, GF_ERR_INVALID, "bert: input '%s' is listed twice", io.name);
        if (!(GF_KU_ID_MASK & (1u << io.dtype)) || !gf_ku_io_matches(&io, 2, any2))
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "bert input '%s' must be INT32 or INT64 "
                                  "[N, S], the manifest says %s %s",
                                  io.name, gf_ku_dtype_name(io.dtype),
                                  gf_ku_shape_str(got, sizeof got, io.rank, io.shape));
        if (io.shape[1] > st->max_pos)
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "bert input '%s': sequence length %" PRId64
                                  " exceeds max_position_embeddings %" PRId64,
                                  io.name, io.shape[1], st->max_pos);
        *slot = (long)i;
    }
    if (st->in_ids < 0)
        return api->set_error(ctx, GF_ERR_INVALID, "bert needs an input named 'input_ids'");
    if (api->output_count(ctx) != 1)
        return api->set_error(ctx, GF_ERR_INVALID,
                              "bert gives one output (logits), the manifest "
                              "has %zu",
                              api->output_count(ctx));
    api->output_spec(ctx, 0, &io);
    const int64_t out_shape[2] = {-1, st->labels};
    if (io.dtype != GF_DT_F32 || !gf_ku_io_matches(&io, 2, out_shape))
        return api->set_error(ctx, GF_ERR_INVALID,
                              "bert output '%s' must be FP32 [N, %" PRId64
                              "] (classifier.weight has %" PRId64 " labels), the manifest says "
                              "%s %s",
                              io.name, st->labels, st->labels, gf_ku_dtype_name(io.dtype),
                              gf_ku_shape_str(got, sizeof got, io.rank, io.shape));
    return 0;
}

/* The buffers older transformers versions save with the weights:
 * position_ids must be 0, 1, 2, ... (what this kind uses) and token_type_ids
 * all 0 (the default when a request has none); then they are used. */
static int bt_buffers(const gf_fn_api *api, gf_fn_ctx *ctx, const bt_state *st)
{
    static const char *const names[2] = {"bert.embeddings.position_ids",
                                         "bert.embeddings.token_type_ids"};
    for (int b = 0; b < 2; b++) {
        gf_tensor t;
        if (api->weight_info(ctx, names[b], &t) != 0)
            continue;
        int64_t n = t.rank == 1 ? t.shape[0] : t.rank == 2 && t.shape[0] == 1 ? t.shape[1] : -1;
        if (!(GF_KU_ID_MASK & (1u << t.dtype)) || n != st->max_pos) {
            char got[128];
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "tensor '%s' is %s %s, expected INT64 [1, %" PRId64 "]",
                                  names[b], gf_ku_dtype_name(t.dtype),
                                  gf_ku_shape_str(got, sizeof got, t.rank, t.shape), st->max_pos);
        }
        int rc = api->weight_data(ctx, names[b], &t);
        if (rc == GF_ERR_UNSUPPORTED) { /* validating without the data */
            api->weight_use(ctx, names[b]);
            continue;
        }
        if (rc != 0)
            return rc;
        for (int64_t i = 0; i < n; i++) {
            int64_t v = t.dtype == GF_DT_I64 ? ((const int64_t *)t.data)[i]
                                             : ((const int32_t *)t.data)[i];
            if (v != (b == 0 ? i : 0))
                return api->set_error(ctx, GF_ERR_INVALID,
                                      "tensor '%s' holds %" PRId64 " at %" PRId64 " where kind bert "
                                      "uses %" PRId64 "%s",
                                      names[b], v, i, b == 0 ? i : 0,
                                      b == 0 ? " (positions 0, 1, 2, ...)"
                                             : " (token type 0 when a request has none)");
        }
    }
    return 0;
}

static int bt_load(const gf_fn_api *api, gf_fn_ctx *ctx, void **state)
{
    bt_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return api->set_error(ctx, GF_ERR_NOMEM, "out of memory");
    st->eps = 1e-12f;
    st->act = GF_ACT_GELU_ERF;
    st->layers = -1;
    bool heads_given = false;
    int rc = bt_config(api, ctx, st, &heads_given);
    if (rc != 0)
        goto fail;
    /* Sizes the config left out come from the tensors. */
    bt_dim(api, ctx, "bert.embeddings.word_embeddings.weight", 0, &st->vocab);
    bt_dim(api, ctx, "bert.embeddings.word_embeddings.weight", 1, &st->hidden);
    bt_dim(api, ctx, "bert.embeddings.position_embeddings.weight", 0, &st->max_pos);
    bt_dim(api, ctx, "bert.embeddings.token_type_embeddings.weight", 0, &st->type_vocab);
    bt_dim(api, ctx, "bert.encoder.layer.0.intermediate.dense.weight", 0, &st->inter);
    bt_dim(api, ctx, "classifier.weight", 0, &st->labels);
    if (st->layers < 0) {
        gf_tensor t;
        char name[96];
        st->layers = 0;
        for (;;) {
            snprintf(name, sizeof name,
                     "bert.encoder.layer.%" PRId64 ".attention.self.query.weight", st->layers);
            if (api->weight_info(ctx, name, &t) != 0 || st->layers >= 100000)
                break;
            st->layers++;
        }
    }
    gf_tensor extra;
    char extra_name[96];
    snprintf(extra_name, sizeof extra_name,
             "bert.encoder.layer.%" PRId64 ".attention.self.query.weight", st->layers);
    if (api->weight_info(ctx, extra_name, &extra) == 0) {
        rc = api->set_error(ctx, GF_ERR_INVALID,
                            "bert config: num_hidden_layers is %" PRId64
                            " but the weights have '%s'",
                            st->layers, extra_name);
        goto fail;
    }
    /* Anything still 0 names a missing tensor: require reports it below. */
    if (heads_given && st->hidden > 0 && st->hidden % st->heads != 0) {
        rc = api->set_error(ctx, GF_ERR_INVALID,
                            "bert config: hidden_size %" PRId64 " is not a "
                            "multiple of num_attention_heads %" PRId64,
                            st->hidden, st->heads);
        goto fail;
    }
    int64_t h = st->hidden;
    const int64_t word[2] = {st->vocab ? st->vocab : -1, h ? h : -1};
    if ((rc = api->require(ctx, "bert.embeddings.word_embeddings.weight", GF_KU_FLOAT_MASK, 2, word,
                           &st->word)) != 0)
        goto fail;
    const int64_t pos[2] = {st->max_pos, h}, type[2] = {st->type_vocab ? st->type_vocab : -1, h};
    if ((rc = api->require(ctx, "bert.embeddings.position_embeddings.weight", GF_KU_FLOAT_MASK, 2,
                           pos, &st->pos)) != 0 ||
        (rc = api->require(ctx, "bert.embeddings.token_type_embeddings.weight", GF_KU_FLOAT_MASK, 2,
                           type, &st->type)) != 0 ||
        (rc = bt_pair_req(api, ctx, "bert.embeddings.LayerNorm", h, -1, &st->emb_ln)) != 0)
        goto fail;
    st->layer = calloc(st->layers ? (size_t)st->layers : 1, sizeof *st->layer);
    if (st->layer == NULL) {
        rc = api->set_error(ctx, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    int64_t in = st->inter ? st->inter : -1;
    for (int64_t i = 0; i < st->layers; i++) {
        bt_layer *l = &st->layer[i];
        char p[160];
        const struct {
            const char *suffix;
            int64_t rows, cols;
            bt_pair *pair;
        } parts[] = {
            {"attention.self.query", h, h, &l->q},
            {"attention.self.key", h, h, &l->k},
            {"attention.self.value", h, h, &l->v},
            {"attention.output.dense", h, h, &l->attn_out},
            {"attention.output.LayerNorm", h, -1, &l->attn_ln},
            {"intermediate.dense", in, h, &l->inter},
            {"output.dense", h, in, &l->out},
            {"output.LayerNorm", h, -1, &l->out_ln},
        };
        for (size_t j = 0; j < sizeof parts / sizeof parts[0]; j++) {
            snprintf(p, sizeof p, "bert.encoder.layer.%" PRId64 ".%s", i, parts[j].suffix);
            if ((rc = bt_pair_req(api, ctx, p, parts[j].rows, parts[j].cols, parts[j].pair)) != 0)
                goto fail;
        }
    }
    if ((rc = bt_pair_req(api, ctx, "bert.pooler.dense", h, h, &st->pooler)) != 0 ||
        (rc = bt_pair_req(api, ctx, "classifier", st->labels ? st->labels : -1, h,
                          &st->classifier)) != 0)
        goto fail;
    if (st->inter == 0 && st->layers > 0) /* unreachable: require named the tensor */
        st->inter = 1;
    if ((rc = bt_check_io(api, ctx, st)) != 0 || (rc = bt_buffers(api, ctx, st)) != 0)
        goto fail;
    if (st->id2label > 0 && st->id2label != st->labels) {
        rc = api->set_error(ctx, GF_ERR_INVALID,
                            "bert config: id2label names %" PRId64 " labels but "
                            "classifier.weight has %" PRId64 " rows",
                            st->id2label, st->labels);
        goto fail;
    }
    if (!heads_given) {
        /* the one size no tensor shape shows: 128 could be 2 heads of 64 or
         * 4 of 32, and a wrong guess answers wrongly without an error */
        char conv[96] = "";
        if (st->hidden % 64 == 0)
            snprintf(conv, sizeof conv, ": %" PRId64 " heads of 64 in Google's BERT, but "
                     "other models differ", st->hidden / 64);
        rc = api->set_error(ctx, GF_ERR_INVALID,
                            "bert config: set \"num_attention_heads\" (as in the model's "
                            "config.json): the weights do not determine it (hidden_size %" PRId64
                            " is heads x head size%s)",
                            st->hidden, conv);
        goto fail;
    }
    *state = st;
    return 0;
fail:
    bt_unload(st);
    return rc;
}

/* ---- infer ---- */

typedef struct bt_run {
    const gf_fn_api *api;
    gf_fn_ctx *ctx;
    const gf_kernels *k;
    gf_stream *s;
} bt_run;

/* y[rows, out] = act(x[rows, in] W^T + b) for Linear p. */
static int bt_linear(const bt_run *r, const bt_pair *p, float *y, const float *x, int64_t rows,
                     int64_t in, int64_t out, gf_act act, const char *what)
{
    gf_tensor w, b;
    int rc;
    if ((rc = r->api->param(r->ctx, p->w, &w)) != 0 || (rc = r->api->param(r->ctx, p->b, &b)) != 0)
        return rc;
    if ((rc = r->k->gemm(r->k->ctx, r->s, 0, 1, rows, out, in, 1.0f, x, GF_DT_F32, in, w.data,
                         w.dtype, in, 0.0f, y, out)) != 0 ||
        (rc = r->k->bias_act(r->k->ctx, r->s, y, rows, out, b.data, b.dtype, act)) != 0)
        return gf_ku_kerr(r->api, r->ctx, r->k, rc, what);
    return 0;
}

/* y = LayerNorm(x) over rows of h with p's gamma and beta. */
static int bt_layernorm(const bt_run *r, const bt_pair *p, float *y, const float *x, int64_t rows,
                        int64_t h, float eps, const char *what)
{
    gf_tensor g, b;
    int rc;
    if ((rc = r->api->param(r->ctx, p->w, &g)) != 0 || (rc = r->api->param(r->ctx, p->b, &b)) != 0)
        return rc;
    if ((rc = r->k->layernorm(r->k->ctx, r->s, y, x, rows, h, g.data, b.data, g.dtype, eps)) != 0)
        return gf_ku_kerr(r->api, r->ctx, r->k, rc, what);
    return 0;
}

static int bt_infer(const gf_fn_api *api, gf_fn_ctx *ctx, void *state)
{
    const bt_state *st = state;
    bt_run r = {api, ctx, api->kernels(ctx), api->stream(ctx)};
    const gf_kernels *k = r.k;
    gf_tensor ids, mask = {0}, types = {0}, t, out;
    int rc;
    if ((rc = api->input(ctx, (size_t)st->in_ids, &ids)) != 0 ||
        (st->in_mask >= 0 && (rc = api->input(ctx, (size_t)st->in_mask, &mask)) != 0) ||
        (st->in_type >= 0 && (rc = api->input(ctx, (size_t)st->in_type, &types)) != 0))
        return rc;
    int64_t n = ids.shape[0], s = ids.shape[1], h = st->hidden, nh = st->heads, d = h / nh;
    if ((st->in_mask >= 0 && (mask.shape[0] != n || mask.shape[1] != s)) ||
        (st->in_type >= 0 && (types.shape[0] != n || types.shape[1] != s)))
        return api->set_error(ctx, GF_ERR_INVALID,
                              "bert: input_ids is [%" PRId64 ", %" PRId64
                              "] but attention_mask or token_type_ids differ in shape",
                              n, s);
    if (s > st->max_pos)
        return api->set_error(ctx, GF_ERR_INVALID,
                              "bert: sequence length %" PRId64 " exceeds "
                              "max_position_embeddings %" PRId64,
                              s, st->max_pos);
    if (n == 0 || s == 0)
        return api->set_error(ctx, GF_ERR_INVALID, "bert: empty input [%" PRId64 ", %" PRId64 "]",
                              n, s);
    if (st->in_mask >= 0) { /* Hugging Face's mask is 1 (attend) or 0 (padding), nothing else */
        gf_tensor hm;
        if ((rc = api->input_host(ctx, (size_t)st->in_mask, &hm)) != 0)
            return rc;
        for (int64_t i = 0; i < n * s; i++) {
            int64_t v = hm.dtype == GF_DT_I64 ? ((const int64_t *)hm.data)[i]
                                              : ((const int32_t *)hm.data)[i];
            if (v != 0 && v != 1)
                return api->set_error(ctx, GF_ERR_INVALID,
                                      "bert: attention_mask[%" PRId64 ", %" PRId64 "] is %" PRId64
                                      "; it must be 1 (attend) or 0 (padding)",
                                      i / s, i % s, v);
        }
    }
    const int64_t oshape[2] = {n, st->labels};
    if ((rc = api->output(ctx, 0, 2, oshape, &out)) != 0)
        return rc;
    /* Workspace: X (hidden), A, Q, K, V, C [M, H]; I [M, inter]; P [S, H]
     * position rows; cls and pooled [N, H]. */
    int64_t m = n * s, mh, mi, total;
    if (__builtin_mul_overflow(m, h, &mh) || __builtin_mul_overflow(m, st->inter, &mi) ||
        __builtin_mul_overflow(mh, (int64_t)6, &total) ||
        __builtin_add_overflow(total, mi, &total) ||
        __builtin_add_overflow(total, s * h + 2 * n * h, &total) ||
        __builtin_mul_overflow(total, (int64_t)sizeof(float), &total))
        return api->set_error(ctx, GF_ERR_INVALID, "bert: activations overflow");
    float *ws;
    if ((rc = api->workspace(ctx, (size_t)total, (void **)&ws)) != 0)
        return rc;
    float *X = ws, *A = X + mh, *Q = A + mh, *K = Q + mh, *V = K + mh, *C = V + mh, *I = C + mh;
    float *P = I + mi, *cls = P + s * h, *pooled = cls + n * h;

    /* Embeddings: word + position + token type, then LayerNorm. */
    if ((rc = api->param(ctx, st->word, &t)) != 0)
        return rc;
    if ((rc = k->embedding(k->ctx, r.s, C, t.data, t.dtype, t.shape[0], h, ids.data, ids.dtype,
                           m)) != 0)
        return gf_ku_kerr(api, ctx, k, rc, "input_ids");
    if ((rc = api->param(ctx, st->pos, &t)) != 0)
        return rc;
    if ((rc = k->cast(k->ctx, r.s, P, GF_DT_F32, t.data, t.dtype, s * h)) != 0)
        return gf_ku_kerr(api, ctx, k, rc, "position embeddings");
    for (int64_t b = 0; b < n; b++)
        if ((rc = k->add(k->ctx, r.s, C + b * s * h, C + b * s * h, P, s * h, GF_ACT_IDENTITY)) !=
            0)
            return gf_ku_kerr(api, ctx, k, rc, "position embeddings");
    if ((rc = api->param(ctx, st->type, &t)) != 0)
        return rc;
    if (st->in_type >= 0) {
        if ((rc = k->embedding(k->ctx, r.s, A, t.data, t.dtype, t.shape[0], h, types.data,
                               types.dtype, m)) != 0 ||
            (rc = k->add(k->ctx, r.s, C, C, A, mh, GF_ACT_IDENTITY)) != 0)
            return gf_ku_kerr(api, ctx, k, rc, "token_type_ids");
    } else if ((rc = k->bias_act(k->ctx, r.s, C, m, h, t.data, t.dtype, GF_ACT_IDENTITY)) != 0) {
        /* every token has type 0: add row 0 of the table */
        return gf_ku_kerr(api, ctx, k, rc, "token type embeddings");
    }
    if ((rc = bt_layernorm(&r, &st->emb_ln, X, C, m, h, st->eps, "embeddings LayerNorm")) != 0)
        return rc;

    const float scale = 1.0f / sqrtf((float)d);
    for (int64_t i = 0; i < st->layers; i++) {
        const bt_layer *l = &st->layer[i];
        /* self-attention: project, split heads ([N,S,nh,d] -> [N,nh,S,d]) */
        float *heads[3] = {Q, K, V};
        const bt_pair *proj[3] = {&l->q, &l->k, &l->v};
        for (int j = 0; j < 3; j++) {
            if ((rc = bt_linear(&r, proj[j], A, X, m, h, h, GF_ACT_IDENTITY, "attention")) != 0)
                return rc;
            if ((rc = k->permute_0213(k->ctx, r.s, heads[j], A, n, s, nh, d)) != 0)
                return gf_ku_kerr(api, ctx, k, rc, "attention heads");
        }
        if ((rc = k->attention(k->ctx, r.s, C, Q, K, V, n, nh, s, d, scale,
                               st->in_mask >= 0 ? mask.data : NULL, mask.dtype)) != 0 ||
            (rc = k->permute_0213(k->ctx, r.s, A, C, n, nh, s, d)) != 0)
            return gf_ku_kerr(api, ctx, k, rc, "attention");
        /* x1 = LN(attn W_o + b_o + x) into A */
        if ((rc = bt_linear(&r, &l->attn_out, C, A, m, h, h, GF_ACT_IDENTITY,
                            "attention output")) != 0)
            return rc;
        if ((rc = k->add(k->ctx, r.s, C, C, X, mh, GF_ACT_IDENTITY)) != 0)
            return gf_ku_kerr(api, ctx, k, rc, "attention residual");
        if ((rc = bt_layernorm(&r, &l->attn_ln, A, C, m, h, st->eps, "attention LayerNorm")) != 0)
            return rc;
        /* x = LN(act(x1 W_i + b_i) W_o2 + b_o2 + x1) into X */
        if ((rc = bt_linear(&r, &l->inter, I, A, m, h, st->inter, st->act, "intermediate")) != 0 ||
            (rc = bt_linear(&r, &l->out, C, I, m, st->inter, h, GF_ACT_IDENTITY, "output")) != 0)
            return rc;
        if ((rc = k->add(k->ctx, r.s, C, C, A, mh, GF_ACT_IDENTITY)) != 0)
            return gf_ku_kerr(api, ctx, k, rc, "output residual");
        if ((rc = bt_layernorm(&r, &l->out_ln, X, C, m, h, st->eps, "output LayerNorm")) != 0)
            return rc;
    }
    /* pooler: tanh(dense(hidden state of [CLS], the first token)) */
    if ((rc = k->copy2d(k->ctx, r.s, cls, h * (int64_t)sizeof(float), X,
                        s * h * (int64_t)sizeof(float), h * (int64_t)sizeof(float), n)) != 0)
        return gf_ku_kerr(api, ctx, k, rc, "[CLS] rows");
    if ((rc = bt_linear(&r, &st->pooler, pooled, cls, n, h, h, GF_ACT_TANH, "pooler")) != 0)
        return rc;
    return bt_linear(&r, &st->classifier, out.data, pooled, n, h, st->labels, GF_ACT_IDENTITY,
                     "classifier");
}

static const gf_fn_desc bt_desc = {
    /* .size = */ sizeof(gf_fn_desc),
    /* .abi_version = */ GF_FN_ABI_VERSION,
    /* .name = */ BT_KIND,
    /* .load = */ bt_load,
    /* .infer = */ bt_infer,
    /* .unload = */ bt_unload,
};

const gf_fn_desc *gf_fn_kind_bert(void)
{
    return &bt_desc;
}
