/* gpufaas — half-precision graphs computed in FP32 (functions/onnx).
 *
 * A model exported in FP16 or BF16 (model.half() before torch.onnx.export,
 * onnxconverter-common's float16 conversion) has half-precision inputs,
 * weights, intermediates and outputs. The kernels compute in FP32 (they
 * read FP16 and BF16 weights directly), so the importer rewrites such a
 * graph once, at deploy, before it is wired:
 *   - a half input stays half for the client and is cast to F32 by a Cast
 *     node its consumers read instead;
 *   - a half initializer read only where the ops take half weights (Conv's
 *     W and B, Gemm's and MatMul's B, BatchNormalization's statistics) stays
 *     half in the weights file; any other is stored as F32;
 *   - a Cast to FP16/BF16 inside the graph keeps its rounding and is cast
 *     back to F32; a ConstantOfShape of a half value makes F32;
 *   - a half output is cast from F32 by a Cast node at the end.
 * So every intermediate is F32 and the answer differs from a computation
 * in half precision only by the roundings FP32 avoids.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "functions/onnx/import_pb.h"

#define ONNX_F32 1
#define ONNX_F16 10
#define ONNX_BF16 16

static bool half(gf_dtype d) { return d == GF_DT_F16 || d == GF_DT_BF16; }

static bool weight_slot(const gf_onnx_node *n, int32_t k)
{
    if (n->domain[0] != '\0')
        return false;
    const char *t = n->op_type;
    return (strcmp(t, "Conv") == 0 && (k == 1 || k == 2)) ||
           ((strcmp(t, "Gemm") == 0 || strcmp(t, "MatMul") == 0) && k == 1) ||
           (strcmp(t, "BatchNormalization") == 0 && k >= 1 && k <= 4);
}

static int64_t attr_to(const gf_onnx_node *n)
{
    for (int32_t a = 0; a < n->n_attrs; a++)
        if (strcmp(n->attrs[a].name, "to") == 0 && n->attrs[a].type == GF_ONNX_ATTR_INT)
            return n->attrs[a].i;
    return 0;
}

static bool is_output(const gf_onnx_graph *g, int32_t v)
{
    for (int32_t i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == v)
            return true;
    return false;
}

/* A new node value named "<base>.<suffix>" (made unique), of dtype dt. */
static gf_status new_value(gf_onnx_graph *g, int32_t base, const char *suffix, gf_dtype dt,
                           int32_t *out, gf_err *err)
{
    char name[GF_ONNX_MAX_NAME + 64];
    snprintf(name, sizeof name, "%.1000s.%s", g->values[base].name, suffix);
    for (int u = 2; gf_onnx_value_find(g, name) >= 0 && u < 1000; u++)
        snprintf(name, sizeof name, "%.1000s.%s%d", g->values[base].name, suffix, u);
    gf_status st = gf_onnx_value_add(g, name, GF_ONNX_V_NODE, out, err);
    if (st != GF_OK)
        return st;
    gf_onnx_value *v = &g->values[*out], *b = &g->values[base];
    v->dtype = dt;
    v->rank = b->rank;
    memcpy(v->shape, b->shape, sizeof v->shape);
    return GF_OK;
}

/* out = Cast(in, to). */
static gf_status add_cast(gf_onnx_graph *g, int32_t in, int32_t out, int64_t to, gf_err *err)
{
    gf_onnx_node *n = gf_onnx_node_add(g, err);
    if (n == NULL)
        return err != NULL ? err->code : GF_ERR_NOMEM;
    char name[GF_ONNX_MAX_NAME + 16];
    snprintf(name, sizeof name, "%.1000s.cast", g->values[out].name);
    n->name = strdup(name);
    n->op_type = strdup("Cast");
    n->domain = strdup("");
    n->opset = gf_onnx_graph_opset(g, "");
    n->in = malloc(sizeof *n->in);
    n->out = malloc(sizeof *n->out);
    n->attrs = calloc(1, sizeof *n->attrs);
    if (n->name == NULL || n->op_type == NULL || n->domain == NULL || n->in == NULL ||
        n->out == NULL || n->attrs == NULL || (n->attrs[0].name = strdup("to")) == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    n->in[0] = in;
    n->out[0] = out;
    n->n_in = n->n_out = 1;
    n->attrs[0].type = GF_ONNX_ATTR_INT;
    n->attrs[0].i = to;
    n->n_attrs = 1;
    return GF_OK;
}

/* Initializer v's half data as F32 (owned by p). */
static gf_status init_to_f32(gf_onnx_parsed *p, int32_t v, gf_err *err)
{
    gf_onnx_value *val = &p->g->values[v];
    size_t n = p->init_len[v] / 2;
    float *f = malloc((n + 1) * sizeof *f);
    if (f == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    const uint16_t *h = p->init[v];
    for (size_t i = 0; i < n; i++) {
        uint16_t x;
        memcpy(&x, &h[i], 2);
        f[i] = val->dtype == GF_DT_F16 ? gf_f16_to_f32(x) : gf_bf16_to_f32(x);
    }
    gf_status st = gf_onnx_pb_own(p, f, err);
    if (st != GF_OK)
        return st;
    p->init[v] = f;
    p->init_len[v] = n * sizeof *f;
    val->dtype = GF_DT_F32;
    return GF_OK;
}

/* A ConstantOfShape value tensor of a half type, as F32. */
static gf_status const_to_f32(gf_onnx_const *c, gf_err *err)
{
    gf_onnx_const *f;
    gf_status st = gf_onnx_const_new(GF_DT_F32, c->rank, c->shape, &f, err);
    if (st != GF_OK)
        return st;
    const uint16_t *h = c->data;
    for (size_t i = 0; i < c->nbytes / 2; i++)
        ((float *)f->data)[i] = c->dtype == GF_DT_F16 ? gf_f16_to_f32(h[i]) : gf_bf16_to_f32(h[i]);
    free(c->data);
    *c = *f;
    free(f);
    return GF_OK;
}

gf_status gf_onnx_pb_compute_f32(gf_onnx_parsed *p, gf_err *err)
{
    gf_onnx_graph *g = p->g;
    int32_t n0 = g->n_nodes, nv0 = g->n_values;
    gf_status st = GF_OK;
    /* initializers: half stays only where every use takes half weights */
    for (int32_t v = 0; v < nv0 && st == GF_OK; v++) {
        if (g->values[v].kind != GF_ONNX_V_INIT || !half(g->values[v].dtype) ||
            is_output(g, v) || (size_t)v >= p->n_init_alloc || p->init[v] == NULL)
            continue;
        bool keep = true;
        for (int32_t i = 0; i < n0 && keep; i++)
            for (int32_t k = 0; k < g->nodes[i].n_in; k++)
                if (g->nodes[i].in[k] == v && !weight_slot(&g->nodes[i], k))
                    keep = false;
        if (!keep)
            st = init_to_f32(p, v, err);
    }
    /* inputs: cast to F32 once, the consumers read the cast */
    for (int32_t i = 0; i < g->n_inputs && st == GF_OK; i++) {
        int32_t v = g->inputs[i], nv;
        if (!half(g->values[v].dtype))
            continue;
        if ((st = new_value(g, v, "gf_f32", GF_DT_F32, &nv, err)) != GF_OK)
            break;
        for (int32_t j = 0; j < n0; j++)
            for (int32_t k = 0; k < g->nodes[j].n_in; k++)
                if (g->nodes[j].in[k] == v)
                    g->nodes[j].in[k] = nv;
        st = add_cast(g, v, nv, ONNX_F32, err);
    }
    /* Casts to half inside the graph: rounded, then back to F32;
     * ConstantOfShape of a half value: F32 */
    for (int32_t i = 0; i < n0 && st == GF_OK; i++) {
        gf_onnx_node *n = &g->nodes[i];
        if (n->domain[0] != '\0')
            continue;
        if (strcmp(n->op_type, "ConstantOfShape") == 0) {
            for (int32_t a = 0; a < n->n_attrs && st == GF_OK; a++)
                if (n->attrs[a].type == GF_ONNX_ATTR_TENSOR && n->attrs[a].t != NULL &&
                    half(n->attrs[a].t->dtype))
                    st = const_to_f32(n->attrs[a].t, err);
            continue;
        }
        int64_t to = strcmp(n->op_type, "Cast") == 0 ? attr_to(n) : 0;
        if ((to != ONNX_F16 && to != ONNX_BF16) || n->n_out != 1 || n->out[0] < 0 ||
            is_output(g, n->out[0]))
            continue;
        int32_t o = n->out[0], nv;
        if ((st = new_value(g, o, "gf_half", to == ONNX_F16 ? GF_DT_F16 : GF_DT_BF16, &nv,
                            err)) != GF_OK)
            break;
        g->nodes[i].out[0] = nv;
        g->values[o].dtype = GF_DT_F32;
        st = add_cast(g, nv, o, ONNX_F32, err);
    }
    /* outputs: cast from F32 at the end, unless made half by a Cast or
     * passed through from an input or an initializer */
    for (int32_t i = 0; i < g->n_outputs && st == GF_OK; i++) {
        int32_t o = g->outputs[i], prod = -1, slot = -1, nv;
        if (!half(g->values[o].dtype) || g->values[o].kind != GF_ONNX_V_NODE)
            continue;
        for (int32_t j = 0; j < n0 && prod < 0; j++)
            for (int32_t k = 0; k < g->nodes[j].n_out; k++)
                if (g->nodes[j].out[k] == o) {
                    prod = j;
                    slot = k;
                }
        if (prod < 0)
            continue;
        const gf_onnx_node *pn = &g->nodes[prod];
        int64_t to = pn->domain[0] == '\0' && strcmp(pn->op_type, "Cast") == 0 ? attr_to(pn) : 0;
        if (to == ONNX_F16 || to == ONNX_BF16)
            continue;
        if ((st = new_value(g, o, "gf_f32", GF_DT_INVALID, &nv, err)) != GF_OK)
            break;
        g->nodes[prod].out[slot] = nv;
        st = add_cast(g, nv, o, g->values[o].dtype == GF_DT_F16 ? ONNX_F16 : ONNX_BF16, err);
    }
    /* intermediates the file declared half are F32 now */
    for (int32_t v = 0; v < nv0 && st == GF_OK; v++)
        if (g->values[v].kind == GF_ONNX_V_NODE && half(g->values[v].dtype) && !is_output(g, v))
            g->values[v].dtype = GF_DT_INVALID;
    return st;
}
