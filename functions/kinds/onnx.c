/* gpufaas — the built-in kind `onnx`: runs an imported ONNX graph
 * (functions/kinds).
 *
 * Written against the public function ABI (gpufaas/function.h, 1.3 for
 * upload; 1.7 for download, which string outputs need: the plan computes
 * class indices on the device, infer reads them back and answers the
 * strings they name with output_bytes). Deploy (functions/onnx/import.c) wrote the version's weights file:
 * the graph's initializers in order of first use, and the graph itself as
 * the U8 tensor GF_ONNX_GRAPH_TENSOR. load reads the graph back (no
 * protobuf), requires every initializer in that order, so the parameter
 * cache pages, swaps and pipelines them like any kind's, and keeps host
 * copies of the small ones for constant folding. When the backend packs
 * convolution weights (kernel table version 3, api->load_kernels), load
 * packs each Conv's F32 weights once, for the geometry a plan at batch 1
 * gives, into a derived parameter in their place: the parameter cache then
 * stores, swaps and pipelines the packed bytes like any weights, and no
 * call reorders them. infer compiles a plan per
 * set of input shapes (cached), takes the plan's arena as one workspace
 * block, and runs it with the kernel table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpufaas/function.h>

#include "core/dtype.h"
#include "functions/kinds/kinds.h"
#include "functions/onnx/graph.h"
#include "functions/onnx/plan.h"

#define PLAN_CACHE 8 /* compiled input shapes kept per version */

typedef struct {
    void *key;       /* the input shapes, then the host-read inputs' bytes; NULL when empty */
    size_t key_len;
    gf_onnx_plan *plan;
    uint64_t used;   /* for LRU */
} cached_plan;

typedef struct {
    gf_onnx_model *m;
    int32_t n_in;
    int32_t *graph_input; /* manifest input i -> graph input index */
    cached_plan cache[PLAN_CACHE];
    uint64_t tick;
    void **in_ptr, **out_ptr;
    int64_t (*shapes)[GF_MAX_RANK]; /* per graph input, this call's */
    gf_onnx_const *values;          /* per graph input: a view of a host-read one */
    const gf_onnx_const **value_ptr;
    bool any_host;                  /* some graph input is read on the host */
    char *key;                      /* this call's cache key */
    size_t key_cap;
} onnx_state;

static void onnx_unload(void *p)
{
    onnx_state *s = p;
    if (s == NULL)
        return;
    for (int i = 0; i < PLAN_CACHE; i++) {
        gf_onnx_plan_free(s->cache[i].plan);
        free(s->cache[i].key);
    }
    free(s->shapes);
    free(s->values);
    free(s->value_ptr);
    free(s->key);
    gf_onnx_model_free(s->m);
    free(s->graph_input);
    free(s->in_ptr);
    free(s->out_ptr);
    free(s);
}

/* What load packs: per value, the geometry and packed bytes (0: not). */
typedef struct {
    gf_conv2d_ex_params *p;
    int64_t *bytes;
} pack_plan;

/* Which initializers to pack: the Conv weights of a plan at batch 1 (every
 * other dimension of the inputs fixed, none read on the host), where lk has
 * a packed form. Packing is an optimisation: a graph this cannot plan is
 * left as it is. */
static void pack_choose(const onnx_state *s, const gf_kernels *lk, pack_plan *pp)
{
    const gf_onnx_graph *g = gf_onnx_model_graph(s->m);
    for (int32_t i = 0; i < g->n_inputs; i++) {
        const gf_onnx_value *v = &g->values[g->inputs[i]];
        if (s->any_host)
            return;
        for (int32_t k = 0; k < v->rank; k++) {
            if (v->shape[k] < 0 && k > 0)
                return;
            s->shapes[i][k] = v->shape[k] < 0 ? 1 : v->shape[k];
        }
    }
    /* the plan places parameters: stand-ins until load declares them */
    for (int32_t v = 0; v < g->n_values; v++)
        if (g->values[v].kind == GF_ONNX_V_INIT)
            gf_onnx_model_set_param(s->m, v, 0);
    gf_err e;
    gf_onnx_plan *plan;
    if (gf_onnx_plan_compile(s->m, (const int64_t(*)[GF_MAX_RANK])s->shapes, &plan, &e) != GF_OK)
        return;
    int32_t *vals = malloc(((size_t)g->n_values + 1) * sizeof *vals);
    gf_conv2d_ex_params *ps = malloc(((size_t)g->n_values + 1) * sizeof *ps);
    int32_t n = vals != NULL && ps != NULL ? gf_onnx_plan_conv_weights(plan, vals, ps) : 0;
    for (int32_t i = 0; i < n; i++) {
        pp->p[vals[i]] = ps[i];
        pp->bytes[vals[i]] = lk->conv2d_pack_size(lk->ctx, &ps[i]);
    }
    free(vals);
    free(ps);
    gf_onnx_plan_free(plan);
}

static int64_t v_numel(const gf_onnx_value *v)
{
    int64_t numel = 1;
    for (int32_t k = 0; k < v->rank; k++)
        numel *= v->shape[k];
    return numel;
}

/* The host bytes of initializer v, checked against the graph's type and
 * shape. */
static int weight_host(const gf_fn_api *api, gf_fn_ctx *ctx, const gf_onnx_value *v,
                       gf_tensor *t)
{
    int rc = api->weight_data(ctx, v->name, t);
    if (rc != 0)
        return rc;
    if (t->dtype != v->dtype || t->rank != v->rank ||
        memcmp(t->shape, v->shape, (size_t)v->rank * sizeof *t->shape) != 0)
        return api->set_error(ctx, GF_ERR_INVALID, "tensor '%.200s' does not have the graph's "
                              "type and shape", v->name);
    return 0;
}

/* Declare initializer v as its packed form, a derived parameter. */
static int pack_one(const gf_fn_api *api, gf_fn_ctx *ctx, onnx_state *s, const gf_kernels *lk,
                    int32_t v, const gf_conv2d_ex_params *p, int64_t bytes, const gf_tensor *w)
{
    const gf_onnx_value *gv = &gf_onnx_model_graph(s->m)->values[v];
    char name[600];
    snprintf(name, sizeof name, "gpufaas.packed.%.500s", gv->name);
    void *data;
    size_t idx;
    int rc = api->derive(ctx, name, GF_DT_U8, 1, &bytes, &data, &idx);
    if (rc != 0)
        return rc;
    if ((rc = lk->conv2d_pack(lk->ctx, data, p, w->data)) != 0)
        return api->set_error(ctx, rc, "packing the weights '%.200s': %s", gv->name,
                              lk->last_error(lk->ctx));
    gf_onnx_model_set_packed(s->m, v, idx);
    return 0;
}

static int onnx_load(const gf_fn_api *api, gf_fn_ctx *ctx, void **state)
{
    *state = NULL;
    gf_tensor gt;
    if (api->weight_info(ctx, GF_ONNX_GRAPH_TENSOR, &gt) != 0)
        return api->set_error(ctx, GF_ERR_INVALID, "the weights file has no ONNX graph (tensor "
                              "'%s'): deploy the model as an .onnx file (the 'model' part)",
                              GF_ONNX_GRAPH_TENSOR);
    int rc = api->weight_data(ctx, GF_ONNX_GRAPH_TENSOR, &gt);
    if (rc != 0)
        return rc;
    if (gt.dtype != GF_DT_U8 || gt.rank != 1)
        return api->set_error(ctx, GF_ERR_INVALID, "tensor '%s' must be U8 of rank 1",
                              GF_ONNX_GRAPH_TENSOR);
    gf_err e;
    gf_onnx_graph *g;
    if (gf_onnx_graph_from_json(gt.data, gt.nbytes, &g, &e) != GF_OK)
        return api->set_error(ctx, e.code, "%s", e.msg);
    onnx_state *s = calloc(1, sizeof *s);
    if (s == NULL) {
        gf_onnx_graph_free(g);
        return api->set_error(ctx, GF_ERR_NOMEM, "out of memory");
    }
    if (gf_onnx_model_new(g, &s->m, &e) != GF_OK) {
        free(s);
        return api->set_error(ctx, e.code, "%s", e.msg);
    }
    g = (gf_onnx_graph *)gf_onnx_model_graph(s->m);
    int32_t *order = malloc(((size_t)g->n_values + 1) * sizeof *order);
    s->n_in = g->n_inputs;
    s->graph_input = calloc((size_t)g->n_inputs + 1, sizeof *s->graph_input);
    s->in_ptr = calloc((size_t)g->n_inputs + 1, sizeof *s->in_ptr);
    s->out_ptr = calloc((size_t)g->n_outputs + 1, sizeof *s->out_ptr);
    s->shapes = calloc((size_t)g->n_inputs + 1, sizeof *s->shapes);
    s->values = calloc((size_t)g->n_inputs + 1, sizeof *s->values);
    s->value_ptr = calloc((size_t)g->n_inputs + 1, sizeof *s->value_ptr);
    for (int32_t i = 0; i < g->n_inputs; i++)
        s->any_host = s->any_host || gf_onnx_model_host_input(s->m, i);
    if (order == NULL || s->graph_input == NULL || s->in_ptr == NULL || s->out_ptr == NULL ||
        s->shapes == NULL || s->values == NULL || s->value_ptr == NULL) {
        free(order);
        onnx_unload(s);
        return api->set_error(ctx, GF_ERR_NOMEM, "out of memory");
    }
    /* the manifest names the graph's inputs (any order) and outputs (in order) */
    rc = 0;
    if (api->input_count(ctx) != (size_t)g->n_inputs || api->output_count(ctx) !=
        (size_t)g->n_outputs)
        rc = api->set_error(ctx, GF_ERR_INVALID, "the manifest has %zu inputs and %zu outputs; "
                            "the graph %d and %d", api->input_count(ctx),
                            api->output_count(ctx), g->n_inputs, g->n_outputs);
    for (size_t i = 0; rc == 0 && i < api->input_count(ctx); i++) {
        gf_fn_io io;
        api->input_spec(ctx, i, &io);
        int32_t v = gf_onnx_value_find(g, io.name), gi = -1;
        for (int32_t k = 0; k < g->n_inputs && v >= 0; k++)
            if (g->inputs[k] == v)
                gi = k;
        if (gi < 0 || io.dtype != g->values[v].dtype || io.rank != g->values[v].rank)
            rc = api->set_error(ctx, GF_ERR_INVALID, "manifest input '%.200s' is not an input "
                                "of the graph with that type and rank", io.name);
        else
            s->graph_input[i] = gi;
    }
    for (size_t i = 0; rc == 0 && i < api->output_count(ctx); i++) {
        gf_fn_io io;
        api->output_spec(ctx, i, &io);
        bool str = gf_onnx_graph_out_dtype(g, (int32_t)i, GF_DT_INVALID) == GF_DT_BYTES;
        if (strcmp(io.name, g->values[g->outputs[i]].name) != 0)
            rc = api->set_error(ctx, GF_ERR_INVALID, "manifest output %zu is '%.200s'; the "
                                "graph's is '%.200s'", i, io.name,
                                g->values[g->outputs[i]].name);
        else if (str != (io.dtype == GF_DT_BYTES))
            rc = api->set_error(ctx, GF_ERR_INVALID, "manifest output '%.200s' must be %s",
                                io.name, str ? "BYTES: the graph gives strings (class labels)"
                                             : "numeric, as the graph gives it");
        else if (str && (!GF_FN_HAS(api, download) || !GF_FN_HAS(api, output_bytes)))
            rc = api->set_error(ctx, GF_ERR_UNSUPPORTED, "output '%.200s' gives strings, "
                                "which needs a runtime with download (ABI 1.7)", io.name);
    }
    /* host copies of the small initializers, for folding (not when validating) */
    int32_t n = rc == 0 ? gf_onnx_init_order(g, order) : 0;
    for (int32_t i = 0; rc == 0 && i < n && !api->validating(ctx); i++) {
        const gf_onnx_value *v = &g->values[order[i]];
        gf_tensor t;
        if (v_numel(v) > GF_ONNX_HOST_INIT_MAX)
            continue;
        if ((rc = weight_host(api, ctx, v, &t)) != 0)
            break;
        if (gf_onnx_model_set_host(s->m, order[i], t.data, t.nbytes, &e) != GF_OK)
            rc = api->set_error(ctx, e.code, "%s", e.msg);
    }
    /* the weights the backend packs (none when validating) */
    const gf_kernels *lk = GF_FN_HAS(api, load_kernels) ? api->load_kernels(ctx) : NULL;
    pack_plan pp = {NULL, NULL};
    if (rc == 0 && lk != NULL && GF_KERNELS_HAS(lk, conv2d_pack_size) &&
        GF_KERNELS_HAS(lk, conv2d_pack) && GF_KERNELS_HAS(lk, conv2d_packed)) {
        pp.p = calloc((size_t)g->n_values + 1, sizeof *pp.p);
        pp.bytes = calloc((size_t)g->n_values + 1, sizeof *pp.bytes);
        if (pp.p == NULL || pp.bytes == NULL)
            rc = api->set_error(ctx, GF_ERR_NOMEM, "out of memory");
        else
            pack_choose(s, lk, &pp);
    }
    /* the parameters: every initializer (or its packed form), in first-use order */
    for (int32_t i = 0; rc == 0 && i < n; i++) {
        const gf_onnx_value *v = &g->values[order[i]];
        size_t idx;
        if (pp.bytes == NULL || pp.bytes[order[i]] == 0) {
            rc = api->require(ctx, v->name, 1u << v->dtype, v->rank, v->shape, &idx);
            if (rc == 0)
                gf_onnx_model_set_param(s->m, order[i], idx);
            continue;
        }
        gf_tensor t;
        if ((rc = weight_host(api, ctx, v, &t)) == 0)
            rc = pack_one(api, ctx, s, lk, order[i], &pp.p[order[i]], pp.bytes[order[i]], &t);
    }
    free(pp.p);
    free(pp.bytes);
    free(order);
    if (rc == 0 && n == 0) {
        /* the runtime wants at least one parameter: the graph itself */
        size_t idx;
        rc = api->require(ctx, GF_ONNX_GRAPH_TENSOR, 1u << GF_DT_U8, 1, NULL, &idx);
    }
    if (rc != 0) {
        onnx_unload(s);
        return rc;
    }
    *state = s;
    return 0;
}

static gf_status env_param(void *ctx, size_t index, void **out, gf_err *err)
{
    (void)err;
    const gf_fn_api **apip = ctx;
    const gf_fn_api *api = apip[0];
    gf_fn_ctx *fctx = (gf_fn_ctx *)apip[1];
    gf_tensor t;
    int rc = api->param(fctx, index, &t);
    *out = t.data;
    return (gf_status)rc;
}

static gf_status env_upload(void *ctx, void *dst, const void *src, size_t bytes, gf_err *err)
{
    (void)err;
    const gf_fn_api **apip = ctx;
    return (gf_status)apip[0]->upload((gf_fn_ctx *)apip[1], dst, src, bytes);
}

static int64_t numel_of(const gf_onnx_tinfo *t)
{
    int64_t n = 1;
    for (int32_t k = 0; k < t->rank; k++)
        n *= t->shape[k];
    return n;
}

/* String output i: the plan left its I64 indices at dev; answer the strings
 * they name as BYTES. */
static int strings_out(const gf_fn_api *api, gf_fn_ctx *ctx, const gf_onnx_graph *g, int32_t i,
                       const gf_onnx_tinfo *t, const void *dev)
{
    const gf_onnx_strings *tab = &g->out_strings[i];
    size_t n = (size_t)numel_of(t);
    int64_t *idx = malloc((n ? n : 1) * sizeof *idx);
    const void **elems = malloc((n ? n : 1) * sizeof *elems);
    size_t *lens = malloc((n ? n : 1) * sizeof *lens);
    int rc = idx == NULL || elems == NULL || lens == NULL
                 ? api->set_error(ctx, GF_ERR_NOMEM, "out of memory")
                 : api->download(ctx, idx, dev, n * sizeof *idx);
    for (size_t k = 0; rc == 0 && k < n; k++) {
        if (idx[k] < 0 || idx[k] >= tab->n) {
            rc = api->set_error(ctx, GF_ERR_INVALID, "output '%.200s': element %zu is string "
                                "%lld of %d", g->values[g->outputs[i]].name, k,
                                (long long)idx[k], tab->n);
            break;
        }
        elems[k] = tab->s[idx[k]];
        lens[k] = strlen(tab->s[idx[k]]);
    }
    if (rc == 0)
        rc = api->output_bytes(ctx, (size_t)i, t->rank, t->shape, elems, lens);
    free(idx);
    free(elems);
    free(lens);
    return rc;
}

static int onnx_infer(const gf_fn_api *api, gf_fn_ctx *ctx, void *state)
{
    onnx_state *s = state;
    const gf_onnx_graph *g = gf_onnx_model_graph(s->m);
    const gf_kernels *k = api->kernels(ctx);
    if (k == NULL || k->version < 2 || k->size < offsetof(gf_kernels, fill) + sizeof k->fill)
        return api->set_error(ctx, GF_ERR_UNSUPPORTED, "the backend's kernel table is older "
                              "than version 2, which the onnx kind needs");
    if (!GF_FN_HAS(api, upload))
        return api->set_error(ctx, GF_ERR_UNSUPPORTED, "the runtime lacks upload (ABI 1.3)");
    if (s->any_host && !GF_FN_HAS(api, input_host))
        return api->set_error(ctx, GF_ERR_UNSUPPORTED, "the runtime lacks input_host (ABI 1.4), "
                              "which this graph's host-read inputs need");
    int64_t (*shapes)[GF_MAX_RANK] = s->shapes;
    size_t key_len = (size_t)g->n_inputs * sizeof *shapes;
    for (int32_t i = 0; i < s->n_in; i++) {
        gf_tensor t;
        int rc = api->input(ctx, (size_t)i, &t);
        if (rc != 0)
            return rc;
        int32_t gi = s->graph_input[i];
        memcpy(shapes[gi], t.shape, sizeof t.shape);
        s->in_ptr[gi] = t.data;
        s->value_ptr[gi] = NULL;
        if (!gf_onnx_model_host_input(s->m, gi))
            continue;
        /* read on the host: its values are part of the plan (and of the key) */
        if ((rc = api->input_host(ctx, (size_t)i, &t)) != 0)
            return rc;
        uint64_t numel = 1;
        for (int32_t d = 0; d < t.rank; d++)
            numel *= (uint64_t)t.shape[d];
        if (numel > GF_ONNX_HOST_INPUT_MAX)
            return api->set_error(ctx, GF_ERR_INVALID, "input '%.200s' gives the graph a shape "
                                  "or bounds, read when the plan is made: at most %d elements, "
                                  "not %llu", g->values[g->inputs[gi]].name,
                                  GF_ONNX_HOST_INPUT_MAX, (unsigned long long)numel);
        s->values[gi] = (gf_onnx_const){.dtype = t.dtype, .rank = t.rank, .nbytes = t.nbytes,
                                        .data = t.data};
        memcpy(s->values[gi].shape, t.shape, sizeof t.shape);
        s->value_ptr[gi] = &s->values[gi];
        key_len += t.nbytes;
    }
    if (key_len > s->key_cap) {
        char *nk = realloc(s->key, key_len);
        if (nk == NULL)
            return api->set_error(ctx, GF_ERR_NOMEM, "out of memory");
        s->key = nk;
        s->key_cap = key_len;
    }
    size_t at = (size_t)g->n_inputs * sizeof *shapes;
    memcpy(s->key, shapes, at);
    for (int32_t gi = 0; gi < g->n_inputs; gi++)
        if (s->value_ptr[gi] != NULL && s->values[gi].nbytes > 0) {
            memcpy(s->key + at, s->values[gi].data, s->values[gi].nbytes);
            at += s->values[gi].nbytes;
        }
    /* the plan for these shapes (and host values): cached, else compiled */
    cached_plan *cp = NULL, *victim = &s->cache[0];
    for (int i = 0; i < PLAN_CACHE && cp == NULL; i++) {
        cached_plan *c = &s->cache[i];
        if (c->plan != NULL && c->key_len == key_len && memcmp(c->key, s->key, key_len) == 0)
            cp = c;
        else if (c->plan == NULL || (victim->plan != NULL && c->used < victim->used))
            victim = c;
    }
    if (cp == NULL) {
        gf_err e;
        gf_onnx_plan *p;
        if (gf_onnx_plan_compile_with(s->m, (const int64_t(*)[GF_MAX_RANK])shapes,
                                      s->any_host ? s->value_ptr : NULL, &p, &e) != GF_OK)
            return api->set_error(ctx, e.code, "%s", e.msg);
        void *key = malloc(key_len ? key_len : 1);
        if (key == NULL) {
            gf_onnx_plan_free(p);
            return api->set_error(ctx, GF_ERR_NOMEM, "out of memory");
        }
        memcpy(key, s->key, key_len);
        gf_onnx_plan_free(victim->plan);
        free(victim->key);
        victim->plan = p;
        victim->key = key;
        victim->key_len = key_len;
        cp = victim;
    }
    cp->used = ++s->tick;
    /* the arena, then the indices of the string outputs (BYTES: host memory,
     * set after the run) */
    void *arena = NULL;
    size_t ab = gf_onnx_plan_arena_bytes(cp->plan), total = (ab + 255) / 256 * 256;
    for (int32_t i = 0; i < g->n_outputs; i++)
        if (gf_onnx_graph_out_dtype(g, i, GF_DT_INVALID) == GF_DT_BYTES) {
            const gf_onnx_tinfo *t = gf_onnx_plan_output(cp->plan, i);
            if (t->dtype != GF_DT_I64)
                return api->set_error(ctx, GF_ERR_INVALID, "output '%.200s': string indices "
                                      "must be I64, the plan gives %s",
                                      g->values[g->outputs[i]].name,
                                      gf_dtype_st_name(t->dtype));
            total += ((size_t)numel_of(t) * 8 + 255) / 256 * 256;
        }
    if (total > 0) {
        int rc = api->workspace(ctx, total, &arena);
        if (rc != 0)
            return rc;
    }
    size_t soff = (ab + 255) / 256 * 256;
    for (int32_t i = 0; i < g->n_outputs; i++) {
        const gf_onnx_tinfo *t = gf_onnx_plan_output(cp->plan, i);
        if (gf_onnx_graph_out_dtype(g, i, GF_DT_INVALID) == GF_DT_BYTES) {
            s->out_ptr[i] = (char *)arena + soff;
            soff += ((size_t)numel_of(t) * 8 + 255) / 256 * 256;
            continue;
        }
        gf_tensor out;
        int rc = api->output(ctx, (size_t)i, t->rank, t->shape, &out);
        if (rc != 0)
            return rc;
        s->out_ptr[i] = out.data;
    }
    const void *pair[2] = {api, ctx};
    gf_onnx_env env = {.ctx = pair, .k = k, .s = api->stream(ctx), .param = env_param,
                       .upload = env_upload};
    gf_err e;
    gf_err_clear(&e);
    gf_status st = gf_onnx_plan_run(cp->plan, &env, s->in_ptr, s->out_ptr, arena, &e);
    if (st != GF_OK)
        return e.code != GF_OK ? api->set_error(ctx, e.code, "%s", e.msg) : (int)st;
    for (int32_t i = 0; i < g->n_outputs; i++)
        if (gf_onnx_graph_out_dtype(g, i, GF_DT_INVALID) == GF_DT_BYTES) {
            int rc = strings_out(api, ctx, g, i, gf_onnx_plan_output(cp->plan, i),
                                 s->out_ptr[i]);
            if (rc != 0)
                return rc;
        }
    return 0;
}

static const gf_fn_desc gf_onnx_desc = {
    /* .size = */ sizeof(gf_fn_desc),
    /* .abi_version = */ GF_FN_ABI_VERSION,
    /* .name = */ "onnx",
    /* .load = */ onnx_load,
    /* .infer = */ onnx_infer,
    /* .unload = */ onnx_unload,
};

const gf_fn_desc *gf_fn_kind_onnx(void) { return &gf_onnx_desc; }
