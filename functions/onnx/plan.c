/* gpufaas — compiling an ONNX graph into a plan, and running it
 * (functions/onnx). */
#include "functions/onnx/plan.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/tensor.h"
#include "functions/onnx/plan_internal.h"

/* ---- model --------------------------------------------------------------------- */

/* Which graph inputs the plan needs on the host: a value is needed when an
 * op reads it at a host input, or it is an input of a node (other than
 * Shape and Size, which read only shapes) whose output is needed; nodes are
 * in topological order, so one backward pass suffices. */
static gf_status mark_host_inputs(gf_onnx_model *m, gf_err *err)
{
    const gf_onnx_graph *g = m->g;
    bool *need = calloc((size_t)g->n_values + 1, sizeof *need);
    m->host_in = calloc((size_t)g->n_inputs + 1, sizeof *m->host_in);
    if (need == NULL || m->host_in == NULL) {
        free(need);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    for (int32_t i = g->n_nodes - 1; i >= 0; i--) {
        const gf_onnx_node *n = &g->nodes[i];
        bool out_needed = false;
        for (int32_t k = 0; k < n->n_out; k++)
            out_needed = out_needed || (n->out[k] >= 0 && need[n->out[k]]);
        bool shape_only = n->domain[0] == '\0' && (strcmp(n->op_type, "Shape") == 0 ||
                                                   strcmp(n->op_type, "Size") == 0);
        for (int32_t k = 0; k < n->n_in; k++) {
            if (n->in[k] < 0)
                continue;
            if ((out_needed && !shape_only) || (k < 32 && (n->op->host_inputs & (1u << k))))
                need[n->in[k]] = true;
        }
    }
    for (int32_t i = 0; i < g->n_inputs; i++)
        m->host_in[i] = need[g->inputs[i]];
    free(need);
    return GF_OK;
}

gf_status gf_onnx_model_new(gf_onnx_graph *g, gf_onnx_model **out, gf_err *err)
{
    *out = NULL;
    gf_status st = gf_onnx_graph_bind(g, err);
    if (st != GF_OK) {
        gf_onnx_graph_free(g);
        return st;
    }
    gf_onnx_model *m = calloc(1, sizeof *m);
    if (m == NULL) {
        gf_onnx_graph_free(g);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    m->g = g;
    m->host = calloc((size_t)g->n_values + 1, sizeof *m->host);
    m->param = malloc(((size_t)g->n_values + 1) * sizeof *m->param);
    m->packed = calloc((size_t)g->n_values + 1, sizeof *m->packed);
    if (m->host == NULL || m->param == NULL || m->packed == NULL) {
        gf_onnx_model_free(m);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    for (int32_t v = 0; v < g->n_values; v++)
        m->param[v] = -1;
    if ((st = mark_host_inputs(m, err)) != GF_OK) {
        gf_onnx_model_free(m);
        return st;
    }
    *out = m;
    return GF_OK;
}

bool gf_onnx_model_host_input(const gf_onnx_model *m, int32_t i) { return m->host_in[i]; }

void gf_onnx_model_free(gf_onnx_model *m)
{
    if (m == NULL)
        return;
    for (int32_t v = 0; m->host != NULL && v < m->g->n_values; v++)
        gf_onnx_const_free(m->host[v]);
    free(m->host);
    free(m->param);
    free(m->packed);
    free(m->host_in);
    gf_onnx_graph_free(m->g);
    free(m);
}

const gf_onnx_graph *gf_onnx_model_graph(const gf_onnx_model *m) { return m->g; }

void gf_onnx_model_set_param(gf_onnx_model *m, int32_t value, size_t param)
{
    m->param[value] = (int64_t)param;
}

void gf_onnx_model_set_packed(gf_onnx_model *m, int32_t value, size_t param)
{
    m->param[value] = (int64_t)param;
    m->packed[value] = true;
}

gf_status gf_onnx_model_set_host(gf_onnx_model *m, int32_t value, const void *data,
                                 size_t nbytes, gf_err *err)
{
    const gf_onnx_value *v = &m->g->values[value];
    gf_onnx_const *c;
    gf_status st = gf_onnx_const_new(v->dtype, v->rank, v->shape, &c, err);
    if (st != GF_OK)
        return st;
    if (c->nbytes != nbytes) {
        gf_onnx_const_free(c);
        return gf_err_set(err, GF_ERR_INVALID, "initializer '%.200s': %zu bytes, its shape needs "
                          "%zu", v->name, nbytes, c->nbytes);
    }
    if (nbytes)
        memcpy(c->data, data, nbytes);
    gf_onnx_const_free(m->host[value]);
    m->host[value] = c;
    return GF_OK;
}

int32_t gf_onnx_init_order(const gf_onnx_graph *g, int32_t *order)
{
    int32_t n = 0;
    for (int32_t v = 0; v < g->n_values; v++)
        if (g->values[v].kind == GF_ONNX_V_INIT && g->values[v].first_use >= 0)
            order[n++] = v;
    /* insertion sort: the file's order is usually first-use order already */
    for (int32_t i = 1; i < n; i++) {
        int32_t v = order[i], j = i - 1;
        int32_t fv = g->values[v].first_use;
        while (j >= 0 && (g->values[order[j]].first_use > fv ||
                          (g->values[order[j]].first_use == fv && order[j] > v))) {
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = v;
    }
    return n;
}

/* ---- compile ------------------------------------------------------------------- */

void gf_onnx_plan_free(gf_onnx_plan *p)
{
    if (p == NULL)
        return;
    const gf_onnx_graph *g = p->m->g;
    for (int32_t v = 0; p->folded != NULL && v < g->n_values; v++)
        gf_onnx_const_free(p->folded[v]);
    free(p->folded);
    for (int32_t i = 0; p->steps != NULL && i < p->n_steps; i++) {
        free(p->steps[i].uploads);
        gf_onnx_const_free(p->steps[i].sconst);
    }
    free(p->steps);
    free(p->copies);
    free(p->t);
    free(p->loc);
    free(p->ptr);
    free(p->rt_in);
    free(p->rt_out);
    free(p);
}

size_t gf_onnx_plan_arena_bytes(const gf_onnx_plan *p) { return p->arena; }
int32_t gf_onnx_plan_steps(const gf_onnx_plan *p) { return p->n_steps; }

int32_t gf_onnx_plan_nhwc_steps(const gf_onnx_plan *p)
{
    int32_t n = 0;
    for (int32_t i = 0; i < p->n_steps; i++)
        n += (p->steps[i].nhwc & GF_ONNX_NHWC_OUT) != 0;
    return n;
}

const gf_onnx_tinfo *gf_onnx_plan_output(const gf_onnx_plan *p, int32_t i)
{
    return &p->t[p->m->g->outputs[i]];
}

static size_t tinfo_bytes(const gf_onnx_tinfo *t)
{
    return (size_t)gf_onnx_numel(t) * gf_dtype_size(t->dtype);
}

/* Arena blocks live in offset order; an allocation takes the first gap that
 * fits. */
typedef struct {
    size_t off, size;
    int32_t last; /* last step that uses it */
} live_block;

typedef struct {
    live_block *b;
    size_t n, cap;
    size_t peak;
} arena_alloc;

static bool arena_take(arena_alloc *a, size_t bytes, int32_t last, size_t *off)
{
    size_t size = (bytes + GF_ONNX_ARENA_ALIGN - 1) / GF_ONNX_ARENA_ALIGN * GF_ONNX_ARENA_ALIGN;
    if (size == 0)
        size = GF_ONNX_ARENA_ALIGN;
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        live_block *nb = realloc(a->b, cap * sizeof *nb);
        if (nb == NULL)
            return false;
        a->b = nb;
        a->cap = cap;
    }
    size_t at = 0, pos = 0;
    for (; pos < a->n; pos++) {
        if (a->b[pos].off >= at + size)
            break;
        at = a->b[pos].off + a->b[pos].size;
    }
    memmove(&a->b[pos + 1], &a->b[pos], (a->n - pos) * sizeof *a->b);
    a->b[pos] = (live_block){at, size, last};
    a->n++;
    if (at + size > a->peak)
        a->peak = at + size;
    *off = at;
    return true;
}

static void arena_release(arena_alloc *a, int32_t before)
{
    size_t w = 0;
    for (size_t r = 0; r < a->n; r++)
        if (a->b[r].last >= before)
            a->b[w++] = a->b[r];
    a->n = w;
}

static int32_t root_of(const gf_onnx_plan *p, int32_t v)
{
    while (p->loc[v].kind == LOC_ALIAS)
        v = (int32_t)p->loc[v].idx;
    return v;
}

static gf_status check_inputs(gf_onnx_plan *p, const int64_t (*shapes)[GF_MAX_RANK],
                              const gf_onnx_const *const *values, gf_err *err)
{
    const gf_onnx_graph *g = p->m->g;
    for (int32_t i = 0; i < g->n_inputs; i++) {
        const gf_onnx_value *gv = &g->values[g->inputs[i]];
        gf_onnx_tinfo *t = &p->t[g->inputs[i]];
        t->dtype = gv->dtype;
        t->rank = gv->rank;
        for (int32_t k = 0; k < gv->rank; k++) {
            int64_t d = shapes[i][k];
            if (d < 0 || (gv->shape[k] >= 0 && gv->shape[k] != d) || d > (INT64_C(1) << 40)) {
                char want[128], got[128];
                gf_shape_str(want, sizeof want, gv->rank, gv->shape);
                gf_shape_str(got, sizeof got, gv->rank, shapes[i]);
                return gf_err_set(err, GF_ERR_INVALID, "input '%.200s' has shape %s; the graph "
                                  "declares %s", gv->name, got, want);
            }
            t->shape[k] = d;
        }
        uint64_t numel;
        if (gf_shape_numel(t->rank, t->shape, &numel, err) != GF_OK)
            return GF_ERR_INVALID;
        p->loc[g->inputs[i]] = (plan_loc){LOC_INPUT, i};
        const gf_onnx_const *hv = values != NULL ? values[i] : NULL;
        if (hv != NULL) {
            /* known on the host: a constant of this plan (the device has it too) */
            gf_onnx_const *c;
            gf_status st = gf_onnx_const_new(gv->dtype, gv->rank, t->shape, &c, err);
            if (st != GF_OK)
                return st;
            if (hv->dtype != gv->dtype || hv->nbytes != c->nbytes) {
                gf_onnx_const_free(c);
                return gf_err_set(err, GF_ERR_INVALID, "input '%.200s': host value of %zu "
                                  "bytes, its shape needs %zu", gv->name, hv->nbytes, c->nbytes);
            }
            if (c->nbytes)
                memcpy(c->data, hv->data, c->nbytes);
            p->folded[g->inputs[i]] = c;
            t->host = c;
        }
    }
    return GF_OK;
}

/* Infer every node; fold what folds; make the steps. */
static gf_status infer_nodes(gf_onnx_plan *p, gf_err *err)
{
    const gf_onnx_model *m = p->m;
    const gf_onnx_graph *g = m->g;
    const gf_onnx_tinfo **in = malloc(((size_t)p->max_io + 1) * sizeof *in);
    gf_onnx_tinfo *out = calloc((size_t)p->max_io + 1, sizeof *out);
    gf_onnx_const **fold = calloc((size_t)p->max_io + 1, sizeof *fold);
    gf_status st = GF_OK;
    if (in == NULL || out == NULL || fold == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto done;
    }
    char lb[256];
    for (int32_t i = 0; i < g->n_nodes && st == GF_OK; i++) {
        const gf_onnx_node *n = &g->nodes[i];
        const gf_onnx_op *op = n->op;
        bool all_host = true;
        for (int32_t k = 0; k < n->n_in; k++) {
            in[k] = n->in[k] >= 0 ? &p->t[n->in[k]] : NULL;
            if (in[k] != NULL && in[k]->host == NULL)
                all_host = false;
            if (in[k] != NULL && in[k]->dtype == GF_DT_INVALID && st == GF_OK)
                st = gf_err_set(err, GF_ERR_INTERNAL, "node %s: input %d has no type",
                                gf_onnx_node_label(g, n, lb, sizeof lb), k);
        }
        if (st != GF_OK)
            break;
        memset(out, 0, (size_t)n->n_out * sizeof *out);
        memset(fold, 0, (size_t)n->n_out * sizeof *fold);
        for (int32_t k = 0; k < n->n_in && k < 32; k++) {
            if ((op->host_inputs & (1u << k)) && in[k] != NULL && in[k]->host == NULL) {
                st = gf_err_set(err, GF_ERR_UNSUPPORTED, "node %s: input %d ('%.100s') must be "
                                "known when the plan is made (computed from shapes and "
                                "constants only), but it depends on the input data",
                                gf_onnx_node_label(g, n, lb, sizeof lb), k,
                                g->values[n->in[k]].name);
                break;
            }
        }
        if (st != GF_OK)
            break;
        gf_onnx_infer_ctx c = {.g = g, .n = n, .in = in, .out = out, .fold = fold,
                               .may_fold = all_host, .err = err};
        st = op->infer(&c);
        if (st != GF_OK) {
            for (int32_t k = 0; k < n->n_out; k++)
                gf_onnx_const_free(fold[k]);
            gf_onnx_const_free(c.step_const);
            break;
        }
        bool folded = n->n_out > 0 && fold[0] != NULL;
        if (folded || (op->flags & GF_ONNX_OP_HOST_ONLY)) {
            gf_onnx_const_free(c.step_const); /* no step runs */
            c.step_const = NULL;
        }
        for (int32_t k = 0; k < n->n_out; k++) {
            int32_t v = n->out[k];
            if (v < 0) {
                gf_onnx_const_free(fold[k]);
                continue;
            }
            p->t[v] = out[k];
            uint64_t numel, bytes;
            if (out[k].dtype == GF_DT_INVALID ||
                gf_shape_numel(out[k].rank, out[k].shape, &numel, NULL) != GF_OK ||
                !gf_u64_mul(numel, gf_dtype_size(out[k].dtype), &bytes) ||
                bytes > (UINT64_C(1) << 40)) {
                st = gf_err_set(err, GF_ERR_INVALID, "node %s: output %d has no valid type or "
                                "its size is absurd", gf_onnx_node_label(g, n, lb, sizeof lb),
                                k);
                break;
            }
            if (folded) {
                p->folded[v] = fold[k];
                p->t[v].host = fold[k];
            }
        }
        if (st != GF_OK || folded)
            continue;
        if (op->flags & GF_ONNX_OP_HOST_ONLY) {
            st = gf_err_set(err, GF_ERR_UNSUPPORTED, "node %s: its inputs must be known when "
                            "the plan is made (computed from shapes and constants only), but "
                            "they depend on the input data",
                            gf_onnx_node_label(g, n, lb, sizeof lb));
            break;
        }
        plan_step *s = &p->steps[p->n_steps++];
        s->node = i;
        s->out0 = n->n_out > 0 ? n->out[0] : -1;
        s->extra = -1;
        s->act = GF_ACT_IDENTITY;
        s->fuse = c.fuse;
        s->scratch = c.scratch;
        s->sconst = c.step_const;
        memcpy(s->aux, c.aux, sizeof s->aux);
        if ((op->flags & GF_ONNX_OP_ALIAS) && n->out[0] >= 0)
            p->loc[n->out[0]] = (plan_loc){LOC_ALIAS, n->in[0]};
    }
done:
    free(in);
    free(out);
    free(fold);
    return st;
}

static bool is_conv(const gf_onnx_node *n)
{
    return n->domain[0] == '\0' && strcmp(n->op_type, "Conv") == 0;
}

static gf_status place(gf_onnx_plan *p, gf_err *err)
{
    const gf_onnx_model *m = p->m;
    const gf_onnx_graph *g = m->g;
    int32_t nv = g->n_values;
    int32_t *last = malloc(((size_t)nv + 1) * sizeof *last);
    plan_copy *copies = calloc((size_t)g->n_outputs + 1, sizeof *copies);
    if (last == NULL || copies == NULL) {
        free(last);
        free(copies);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    p->copies = copies;
    for (int32_t v = 0; v < nv; v++)
        last[v] = -1;
    /* graph outputs: written in place by their step, or copied at the end */
    for (int32_t i = 0; i < g->n_outputs; i++) {
        int32_t v = g->outputs[i];
        bool direct = p->t[v].host == NULL && p->loc[v].kind == LOC_NONE &&
                      g->values[v].kind == GF_ONNX_V_NODE;
        if (direct)
            p->loc[v] = (plan_loc){LOC_OUTPUT, i};
        else
            p->copies[p->n_copies++] = (plan_copy){i, v};
    }
    /* uses on the device */
    gf_status st = GF_OK;
    for (int32_t si = 0; si < p->n_steps && st == GF_OK; si++) {
        plan_step *s = &p->steps[si];
        const gf_onnx_node *n = &g->nodes[s->node];
        for (int32_t k = 0; k <= n->n_in && st == GF_OK; k++) {
            int32_t v = k < n->n_in ? n->in[k] : s->extra; /* the fused input last */
            if (v >= 0 && m->packed[v] && !(k == 1 && is_conv(n)))
                st = gf_err_set(err, GF_ERR_INTERNAL, "initializer '%.200s' is packed for a "
                                "Conv but node '%.200s' reads it", g->values[v].name, n->name);
            else if (v >= 0 && m->packed[v])
                s->packed |= 1u << k;
            if (v < 0 || (k < n->n_in && k < 32 && (n->op->host_inputs & (1u << k))))
                continue;
            if (p->loc[v].kind == LOC_NONE && m->param[v] >= 0) {
                p->loc[v] = (plan_loc){LOC_PARAM, m->param[v]};
            } else if (p->loc[v].kind == LOC_NONE && p->t[v].host != NULL) {
                /* a folded constant a kernel reads: uploaded before its first use */
                int32_t *nu = realloc(s->uploads, ((size_t)s->n_uploads + 1) * sizeof *nu);
                if (nu == NULL) {
                    st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
                    break;
                }
                s->uploads = nu;
                s->uploads[s->n_uploads++] = v;
                p->loc[v] = (plan_loc){LOC_ARENA, -1};
            } else if (p->loc[v].kind == LOC_NONE && g->values[v].kind == GF_ONNX_V_INIT) {
                st = gf_err_set(err, GF_ERR_INTERNAL, "initializer '%.200s' has no parameter",
                                g->values[v].name);
                break;
            }
            int32_t r = root_of(p, v);
            if (last[r] < si)
                last[r] = si;
        }
    }
    for (int32_t i = 0; i < p->n_copies && st == GF_OK; i++) {
        int32_t v = p->copies[i].value;
        if (p->t[v].host != NULL)
            continue;
        if (p->loc[v].kind == LOC_NONE && m->param[v] >= 0)
            p->loc[v] = (plan_loc){LOC_PARAM, m->param[v]};
        last[root_of(p, v)] = p->n_steps;
    }
    /* arena: outputs, uploads and scratch of each step, freed after their last use */
    arena_alloc a = {0};
    for (int32_t si = 0; si < p->n_steps && st == GF_OK; si++) {
        plan_step *s = &p->steps[si];
        const gf_onnx_node *n = &g->nodes[s->node];
        arena_release(&a, si);
        size_t off;
        for (int32_t u = 0; u < s->n_uploads && st == GF_OK; u++) {
            int32_t v = s->uploads[u];
            if (!arena_take(&a, tinfo_bytes(&p->t[v]), last[v] < si ? si : last[v], &off))
                st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            p->loc[v].idx = (int64_t)off;
        }
        for (int32_t k = 0; k < n->n_out && st == GF_OK; k++) {
            int32_t v = k == 0 ? s->out0 : n->out[k];
            if (v < 0 || p->loc[v].kind != LOC_NONE)
                continue;
            if (!arena_take(&a, tinfo_bytes(&p->t[v]), last[v] < si ? si : last[v], &off))
                st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            p->loc[v] = (plan_loc){LOC_ARENA, (int64_t)off};
        }
        if (s->scratch > 0 && st == GF_OK) {
            if (!arena_take(&a, s->scratch, si, &off))
                st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            s->scratch_off = off;
        }
        if (s->sconst != NULL && st == GF_OK) {
            if (!arena_take(&a, s->sconst->nbytes, si, &off))
                st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            s->sconst_off = off;
        }
    }
    p->arena = a.peak;
    free(a.b);
    free(last);
    return st;
}

static bool is_global_pool(const gf_onnx_node *n)
{
    return n->domain[0] == '\0' && (strcmp(n->op_type, "GlobalAveragePool") == 0 ||
                                    strcmp(n->op_type, "GlobalMaxPool") == 0);
}

/* Channels last between convolutions: the output of a Conv step with packed
 * weights (which reads and writes either layout, conv2d_packed) is kept
 * NHWC when every step that reads it is such a Conv (as its X or its fused
 * residual) or a global pooling (a reduction over the positions either
 * way), and it is not a graph output. So a network of convolutions runs
 * without reordering its activations; any other reader gets NCHW. */
static gf_status choose_layouts(gf_onnx_plan *p, gf_err *err)
{
    const gf_onnx_graph *g = p->m->g;
    bool *nhwc = calloc((size_t)g->n_values + 1, sizeof *nhwc);
    if (nhwc == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    for (int32_t si = 0; si < p->n_steps; si++) {
        const plan_step *s = &p->steps[si];
        if ((s->packed & 2u) && s->out0 >= 0 && p->t[s->out0].rank == 4 &&
            p->loc[s->out0].kind == LOC_ARENA)
            nhwc[s->out0] = true;
    }
    for (int32_t i = 0; i < g->n_outputs; i++)
        nhwc[g->outputs[i]] = false;
    for (int32_t si = 0; si < p->n_steps; si++) {
        const plan_step *s = &p->steps[si];
        const gf_onnx_node *n = &g->nodes[s->node];
        bool conv = is_conv(n) && (s->packed & 2u);
        for (int32_t k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && !(k == 0 && (conv || is_global_pool(n))))
                nhwc[n->in[k]] = false;
        if (s->extra >= 0 && !conv)
            nhwc[s->extra] = false;
    }
    for (int32_t si = 0; si < p->n_steps; si++) {
        plan_step *s = &p->steps[si];
        const gf_onnx_node *n = &g->nodes[s->node];
        for (int32_t k = 0; k < n->n_in && k < 30; k++)
            if (n->in[k] >= 0 && nhwc[n->in[k]])
                s->nhwc |= 1u << k;
        if (s->extra >= 0 && nhwc[s->extra])
            s->nhwc |= GF_ONNX_NHWC_EXTRA;
        if (s->out0 >= 0 && nhwc[s->out0])
            s->nhwc |= GF_ONNX_NHWC_OUT;
    }
    free(nhwc);
    return GF_OK;
}

gf_status gf_onnx_plan_compile(const gf_onnx_model *m, const int64_t (*shapes)[GF_MAX_RANK],
                               gf_onnx_plan **out, gf_err *err)
{
    return gf_onnx_plan_compile_with(m, shapes, NULL, out, err);
}

gf_status gf_onnx_plan_compile_with(const gf_onnx_model *m, const int64_t (*shapes)[GF_MAX_RANK],
                                    const gf_onnx_const *const *values, gf_onnx_plan **out,
                                    gf_err *err)
{
    *out = NULL;
    const gf_onnx_graph *g = m->g;
    gf_onnx_plan *p = calloc(1, sizeof *p);
    if (p == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    p->m = m;
    size_t nv = (size_t)g->n_values + 1;
    p->max_io = 1;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].n_in > p->max_io)
            p->max_io = g->nodes[i].n_in;
        if (g->nodes[i].n_out > p->max_io)
            p->max_io = g->nodes[i].n_out;
    }
    p->t = calloc(nv, sizeof *p->t);
    p->folded = calloc(nv, sizeof *p->folded);
    p->loc = calloc(nv, sizeof *p->loc);
    p->ptr = calloc(nv, sizeof *p->ptr);
    p->steps = calloc((size_t)g->n_nodes + 1, sizeof *p->steps);
    p->rt_in = calloc((size_t)p->max_io + 1, sizeof *p->rt_in);
    p->rt_out = calloc((size_t)p->max_io + 1, sizeof *p->rt_out);
    gf_status st;
    if (p->t == NULL || p->folded == NULL || p->loc == NULL || p->ptr == NULL ||
        p->steps == NULL || p->rt_in == NULL || p->rt_out == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int32_t v = 0; v < g->n_values; v++) {
        const gf_onnx_value *gv = &g->values[v];
        if (gv->kind != GF_ONNX_V_INIT)
            continue;
        p->t[v].dtype = gv->dtype;
        p->t[v].rank = gv->rank;
        memcpy(p->t[v].shape, gv->shape, sizeof gv->shape);
        p->t[v].host = m->host[v];
    }
    if ((st = check_inputs(p, shapes, values, err)) != GF_OK || (st = infer_nodes(p, err)) != GF_OK ||
        (st = gf_onnx_plan_fuse(p, err)) != GF_OK || (st = place(p, err)) != GF_OK ||
        (st = choose_layouts(p, err)) != GF_OK)
        goto fail;
    *out = p;
    return GF_OK;
fail:
    gf_onnx_plan_free(p);
    return st;
}

int32_t gf_onnx_plan_conv_weights(const gf_onnx_plan *p, int32_t *values,
                                  gf_conv2d_ex_params *params)
{
    const gf_onnx_graph *g = p->m->g;
    int32_t n = 0;
    for (int32_t v = 0; v < g->n_values; v++) {
        const gf_onnx_value *gv = &g->values[v];
        if (gv->kind != GF_ONNX_V_INIT || gv->dtype != GF_DT_F32 || gv->rank != 4)
            continue;
        bool ok = true;
        for (int32_t i = 0; ok && i < g->n_outputs; i++)
            ok = g->outputs[i] != v;
        for (int32_t i = 0; ok && i < g->n_nodes; i++)
            for (int32_t k = 0; ok && k < g->nodes[i].n_in; k++)
                ok = g->nodes[i].in[k] != v || (k == 1 && is_conv(&g->nodes[i]));
        const gf_conv2d_ex_params *first = NULL;
        for (int32_t si = 0; ok && si < p->n_steps; si++) {
            const gf_onnx_node *nd = &g->nodes[p->steps[si].node];
            if (!is_conv(nd) || nd->in[1] != v)
                continue;
            const gf_conv2d_ex_params *q = (const gf_conv2d_ex_params *)p->steps[si].aux;
            if (first == NULL)
                first = q;
            ok = q->c == first->c && q->oc == first->oc && q->kh == first->kh &&
                 q->kw == first->kw && q->groups == first->groups;
        }
        if (ok && first != NULL) {
            values[n] = v;
            params[n++] = *first;
        }
    }
    return n;
}

/* ---- run ----------------------------------------------------------------------- */

static gf_status resolve(gf_onnx_plan *p, const gf_onnx_env *env, int32_t v, void **out,
                         gf_err *err)
{
    v = root_of(p, v);
    if (p->ptr[v] == NULL && p->loc[v].kind == LOC_PARAM) {
        gf_status st = env->param(env->ctx, (size_t)p->loc[v].idx, &p->ptr[v], err);
        if (st != GF_OK)
            return st;
    }
    *out = p->ptr[v];
    return GF_OK;
}

gf_status gf_onnx_plan_run(gf_onnx_plan *p, const gf_onnx_env *env, void *const *inputs,
                           void *const *outputs, void *arena, gf_err *err)
{
    const gf_onnx_graph *g = p->m->g;
    for (int32_t v = 0; v < g->n_values; v++) {
        const plan_loc *l = &p->loc[v];
        p->ptr[v] = l->kind == LOC_INPUT    ? inputs[l->idx]
                    : l->kind == LOC_OUTPUT ? outputs[l->idx]
                    : l->kind == LOC_ARENA  ? (char *)arena + l->idx
                                            : NULL;
    }
    gf_status st = GF_OK;
    for (int32_t si = 0; si < p->n_steps && st == GF_OK; si++) {
        const plan_step *s = &p->steps[si];
        const gf_onnx_node *n = &g->nodes[s->node];
        for (int32_t u = 0; u < s->n_uploads && st == GF_OK; u++) {
            int32_t v = s->uploads[u];
            const gf_onnx_const *h = p->t[v].host;
            st = env->upload(env->ctx, p->ptr[v], h->data, h->nbytes, err);
        }
        if (s->sconst != NULL && s->sconst->nbytes > 0 && st == GF_OK)
            st = env->upload(env->ctx, (char *)arena + s->sconst_off, s->sconst->data,
                             s->sconst->nbytes, err);
        for (int32_t k = 0; k < n->n_in && st == GF_OK; k++) {
            int32_t v = n->in[k];
            p->rt_in[k] = (gf_onnx_rt){NULL, NULL};
            if (v < 0)
                continue;
            p->rt_in[k].t = &p->t[v];
            if (!(k < 32 && (n->op->host_inputs & (1u << k))))
                st = resolve(p, env, v, &p->rt_in[k].data, err);
        }
        gf_onnx_rt extra = {NULL, NULL};
        if (s->extra >= 0 && st == GF_OK) {
            extra.t = &p->t[s->extra];
            st = resolve(p, env, s->extra, &extra.data, err);
        }
        for (int32_t k = 0; k < n->n_out && st == GF_OK; k++) {
            int32_t v = k == 0 ? s->out0 : n->out[k];
            p->rt_out[k] = (gf_onnx_rt){NULL, NULL};
            if (v < 0)
                continue;
            p->rt_out[k].t = &p->t[v];
            st = resolve(p, env, v, &p->rt_out[k].data, err);
        }
        if (st != GF_OK)
            break;
        gf_onnx_run_ctx c = {.g = g, .n = n, .err = err, .k = env->k, .s = env->s,
                             .in = p->rt_in, .out = p->rt_out,
                             .scratch = s->scratch ? (char *)arena + s->scratch_off : NULL,
                             .step_const = s->sconst ? (char *)arena + s->sconst_off : NULL,
                             .extra = s->extra >= 0 ? &extra : NULL, .act = (gf_act)s->act,
                             .aux = s->aux, .packed = s->packed, .nhwc = s->nhwc};
        st = n->op->run(&c);
    }
    for (int32_t i = 0; i < p->n_copies && st == GF_OK; i++) {
        int32_t v = p->copies[i].value;
        const gf_onnx_tinfo *t = &p->t[v];
        size_t bytes = tinfo_bytes(t);
        if (bytes == 0)
            continue;
        if (t->host != NULL) {
            st = env->upload(env->ctx, outputs[p->copies[i].out], t->host->data, bytes, err);
            continue;
        }
        void *src;
        if ((st = resolve(p, env, v, &src, err)) != GF_OK)
            break;
        int rc = env->k->copy2d(env->k->ctx, env->s, outputs[p->copies[i].out], (int64_t)bytes,
                                src, (int64_t)bytes, (int64_t)bytes, 1);
        if (rc != 0)
            st = gf_err_set(err, (gf_status)rc, "copying output '%.200s': %s",
                            g->values[v].name, env->k->last_error(env->k->ctx));
    }
    return st;
}
