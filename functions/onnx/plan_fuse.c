/* gpufaas — fusing plan steps (functions/onnx).
 *
 * A step absorbs the steps after it that only transform its output, so the
 * intermediate tensors are never written and read back: Conv + Add of a
 * residual + Relu (ResNet's block end) and Conv + Sigmoid + Mul (SiLU,
 * EfficientNet) become one conv2d_ex call; Gemm or MatMul + Add of a bias
 * row + Relu become a gemm and one bias_act. A step says what it can absorb
 * (gf_onnx_infer_ctx.fuse); the value it hands on must have no other use
 * and not be a graph output, and a fused input must be ready before the
 * step runs (a graph input, a parameter, a constant or an earlier step's
 * output).
 */
#include <stdlib.h>
#include <string.h>

#include "functions/onnx/plan_internal.h"

typedef struct {
    gf_onnx_plan *p;
    int32_t *uses;      /* per value: how many node inputs read it (+ graph outputs, many) */
    int32_t *consumer;  /* per value: a node reading it */
    int32_t *step_of;   /* per node: its step, or -1 (folded) */
    int32_t *made_at;   /* per value: the step producing it, or -1 (ready from the start) */
} fuse_ctx;

static bool is_op(const gf_onnx_node *n, const char *type)
{
    return n->domain[0] == '\0' && strcmp(n->op_type, type) == 0;
}

static bool same_shape(const gf_onnx_tinfo *a, const gf_onnx_tinfo *b)
{
    if (a->rank != b->rank || a->dtype != b->dtype)
        return false;
    for (int32_t k = 0; k < a->rank; k++)
        if (a->shape[k] != b->shape[k])
            return false;
    return true;
}

/* The only consumer step of v (a single use, not a graph output), or -1. */
static int32_t sole_consumer(const fuse_ctx *f, int32_t v)
{
    if (v < 0 || f->uses[v] != 1)
        return -1;
    return f->step_of[f->consumer[v]];
}

/* The other input of a two-input node t that reads v, or -1. */
static int32_t other_input(const gf_onnx_node *t, int32_t v)
{
    if (t->n_in != 2)
        return -1;
    if (t->in[0] == v && t->in[1] != v)
        return t->in[1];
    if (t->in[1] == v && t->in[0] != v)
        return t->in[0];
    return -1;
}

/* Absorb step ti into s: s now writes ti's output. */
static void absorb(fuse_ctx *f, plan_step *s, int32_t ti)
{
    const gf_onnx_graph *g = f->p->m->g;
    plan_step *t = &f->p->steps[ti];
    t->dead = true;
    s->out0 = g->nodes[t->node].out[0];
}

/* One more fusion into step si; false when none applies. */
static bool fuse_one(fuse_ctx *f, int32_t si)
{
    gf_onnx_plan *p = f->p;
    const gf_onnx_graph *g = p->m->g;
    plan_step *s = &p->steps[si];
    int32_t v = s->out0;
    if (v < 0 || p->t[v].dtype != GF_DT_F32)
        return false;
    bool act_free = (s->fuse & GF_ONNX_FUSE_ACT) && s->act == GF_ACT_IDENTITY;
    /* SiLU: v feeds a Sigmoid and the Mul of v by it, and nothing else */
    if (act_free && f->uses[v] == 2) {
        int32_t sg = -1, mul = -1;
        for (int32_t i = si + 1; i < p->n_steps && (sg < 0 || mul < 0); i++) {
            const gf_onnx_node *n = &g->nodes[p->steps[i].node];
            if (p->steps[i].dead)
                continue;
            if (sg < 0 && is_op(n, "Sigmoid") && n->in[0] == v)
                sg = i;
            else if (mul < 0 && is_op(n, "Mul") && other_input(n, v) >= 0)
                mul = i;
        }
        if (sg >= 0 && mul >= 0) {
            const gf_onnx_node *ns = &g->nodes[p->steps[sg].node];
            const gf_onnx_node *nm = &g->nodes[p->steps[mul].node];
            if (sg < mul && other_input(nm, v) == ns->out[0] && sole_consumer(f, ns->out[0]) ==
                                                                     mul) {
                p->steps[sg].dead = true;
                absorb(f, s, mul);
                s->act = GF_ACT_SILU;
                return true;
            }
        }
    }
    int32_t ti = sole_consumer(f, v);
    if (ti < 0 || ti <= si || p->steps[ti].dead)
        return false;
    const gf_onnx_node *t = &g->nodes[p->steps[ti].node];
    if (act_free && is_op(t, "Relu")) {
        absorb(f, s, ti);
        s->act = GF_ACT_RELU;
        return true;
    }
    if (!is_op(t, "Add") || s->extra >= 0 || s->act != GF_ACT_IDENTITY)
        return false;
    int32_t r = other_input(t, v);
    if (r < 0 || f->made_at[r] >= si || !same_shape(&p->t[t->out[0]], &p->t[v]))
        return false;
    const gf_onnx_tinfo *rt = &p->t[r];
    bool residual = (s->fuse & GF_ONNX_FUSE_RESIDUAL) && same_shape(rt, &p->t[v]);
    /* a bias row: [n] or [1, ..., 1, n] over the last dim, F32, F16 or BF16 */
    bool bias = (s->fuse & GF_ONNX_FUSE_BIAS) && rt->rank >= 1 && p->t[v].rank >= 1 &&
                rt->shape[rt->rank - 1] == p->t[v].shape[p->t[v].rank - 1] &&
                (rt->dtype == GF_DT_F32 || rt->dtype == GF_DT_F16 || rt->dtype == GF_DT_BF16);
    for (int32_t k = 0; bias && k < rt->rank - 1; k++)
        bias = rt->shape[k] == 1;
    if (!residual && !bias)
        return false;
    s->extra = r;
    s->fuse &= residual ? ~(uint32_t)GF_ONNX_FUSE_BIAS : ~(uint32_t)GF_ONNX_FUSE_RESIDUAL;
    absorb(f, s, ti);
    return true;
}

gf_status gf_onnx_plan_fuse(gf_onnx_plan *p, gf_err *err)
{
    const gf_onnx_graph *g = p->m->g;
    size_t nv = (size_t)g->n_values + 1, nn = (size_t)g->n_nodes + 1;
    fuse_ctx f = {p, calloc(nv, sizeof *f.uses), calloc(nv, sizeof *f.consumer),
                  malloc(nn * sizeof *f.step_of), malloc(nv * sizeof *f.made_at)};
    if (f.uses == NULL || f.consumer == NULL || f.step_of == NULL || f.made_at == NULL) {
        free(f.uses);
        free(f.consumer);
        free(f.step_of);
        free(f.made_at);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        f.step_of[i] = -1;
        for (int32_t k = 0; k < g->nodes[i].n_in; k++) {
            int32_t v = g->nodes[i].in[k];
            if (v >= 0) {
                f.uses[v]++;
                f.consumer[v] = i;
            }
        }
    }
    for (int32_t i = 0; i < g->n_outputs; i++)
        f.uses[g->outputs[i]] += 1 << 20; /* a graph output is never fused away */
    for (int32_t v = 0; v < g->n_values; v++)
        f.made_at[v] = -1;
    for (int32_t si = 0; si < p->n_steps; si++) {
        const gf_onnx_node *n = &g->nodes[p->steps[si].node];
        f.step_of[p->steps[si].node] = si;
        for (int32_t k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0 && p->loc[n->out[k]].kind != LOC_ALIAS)
                f.made_at[n->out[k]] = si;
    }
    /* an alias (Reshape, Identity) is ready when what it views is */
    for (int32_t si = 0; si < p->n_steps; si++) {
        const gf_onnx_node *n = &g->nodes[p->steps[si].node];
        if (n->n_out > 0 && n->out[0] >= 0 && p->loc[n->out[0]].kind == LOC_ALIAS)
            f.made_at[n->out[0]] = si;
    }
    for (int32_t si = 0; si < p->n_steps; si++)
        if (!p->steps[si].dead && p->steps[si].fuse != 0)
            for (int guard = 0; guard < 4 && fuse_one(&f, si); guard++)
                ;
    int32_t w = 0;
    for (int32_t si = 0; si < p->n_steps; si++) {
        if (p->steps[si].dead) {
            free(p->steps[si].uploads);
            gf_onnx_const_free(p->steps[si].sconst);
            continue;
        }
        p->steps[w++] = p->steps[si];
    }
    p->n_steps = w;
    free(f.uses);
    free(f.consumer);
    free(f.step_of);
    free(f.made_at);
    return GF_OK;
}
