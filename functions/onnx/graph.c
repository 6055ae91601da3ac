/* gpufaas — an ONNX graph in memory: values, nodes, wiring (functions/onnx). */
#include "functions/onnx/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/tensor.h"

/* ---- name -> value index: open addressing, FNV-1a ------------------------------ */

struct gf_onnx_names {
    int32_t *slot; /* value index + 1; 0 = empty */
    size_t cap;    /* power of two */
};

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool names_grow(gf_onnx_graph *g)
{
    struct gf_onnx_names *m = g->names;
    size_t cap = m->cap ? m->cap * 2 : 256;
    int32_t *slot = calloc(cap, sizeof *slot);
    if (slot == NULL)
        return false;
    for (int32_t v = 0; v < g->n_values; v++) {
        size_t i = name_hash(g->values[v].name) & (cap - 1);
        while (slot[i] != 0)
            i = (i + 1) & (cap - 1);
        slot[i] = v + 1;
    }
    free(m->slot);
    m->slot = slot;
    m->cap = cap;
    return true;
}

int32_t gf_onnx_value_find(const gf_onnx_graph *g, const char *name)
{
    const struct gf_onnx_names *m = g->names;
    if (m->cap == 0)
        return -1;
    size_t i = name_hash(name) & (m->cap - 1);
    while (m->slot[i] != 0) {
        int32_t v = m->slot[i] - 1;
        if (strcmp(g->values[v].name, name) == 0)
            return v;
        i = (i + 1) & (m->cap - 1);
    }
    return -1;
}

/* ---- graph --------------------------------------------------------------------- */

gf_status gf_onnx_graph_new(gf_onnx_graph **out, gf_err *err)
{
    *out = NULL;
    gf_onnx_graph *g = calloc(1, sizeof *g);
    if (g != NULL && (g->names = calloc(1, sizeof *g->names)) == NULL) {
        free(g);
        g = NULL;
    }
    if (g == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    *out = g;
    return GF_OK;
}

void gf_onnx_const_free(gf_onnx_const *c)
{
    if (c == NULL)
        return;
    free(c->data);
    free(c);
}

gf_status gf_onnx_const_new(gf_dtype dtype, int32_t rank, const int64_t *shape,
                            gf_onnx_const **out, gf_err *err)
{
    *out = NULL;
    gf_tensor t;
    gf_status st = gf_tensor_init(&t, dtype, rank, shape, NULL, GF_MEM_HOST, -1, err);
    if (st != GF_OK)
        return st;
    gf_onnx_const *c = calloc(1, sizeof *c);
    if (c == NULL || (c->data = calloc(1, t.nbytes ? t.nbytes : 1)) == NULL) {
        free(c);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory for a %zu-byte constant", t.nbytes);
    }
    c->dtype = dtype;
    c->rank = rank;
    if (rank > 0)
        memcpy(c->shape, shape, (size_t)rank * sizeof *shape);
    c->nbytes = t.nbytes;
    *out = c;
    return GF_OK;
}

static void attr_deinit(gf_onnx_attr *a)
{
    free(a->name);
    free(a->s);
    free(a->ints);
    free(a->floats);
    for (size_t i = 0; a->strings != NULL && i < a->n; i++)
        free(a->strings[i]);
    free(a->strings);
    gf_onnx_const_free(a->t);
}

void gf_onnx_graph_free(gf_onnx_graph *g)
{
    if (g == NULL)
        return;
    for (int32_t i = 0; i < g->n_values; i++)
        free(g->values[i].name);
    free(g->values);
    for (int32_t i = 0; i < g->n_nodes; i++) {
        gf_onnx_node *n = &g->nodes[i];
        free(n->name);
        free(n->op_type);
        free(n->domain);
        free(n->in);
        free(n->out);
        for (int32_t k = 0; n->attrs != NULL && k < n->n_attrs; k++)
            attr_deinit(&n->attrs[k]);
        free(n->attrs);
    }
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    for (int32_t i = 0; i < g->n_opsets; i++)
        free(g->opsets[i].domain);
    free(g->opsets);
    free(g->producer);
    for (int32_t i = 0; g->out_strings != NULL && i < g->n_outputs; i++) {
        for (int32_t k = 0; k < g->out_strings[i].n; k++)
            free(g->out_strings[i].s[k]);
        free(g->out_strings[i].s);
    }
    free(g->out_strings);
    if (g->names != NULL)
        free(g->names->slot);
    free(g->names);
    free(g);
}

gf_status gf_onnx_value_add(gf_onnx_graph *g, const char *name, gf_onnx_vkind kind,
                            int32_t *index, gf_err *err)
{
    size_t len = strlen(name);
    if (len == 0 || len > GF_ONNX_MAX_NAME)
        return gf_err_set(err, GF_ERR_INVALID, "a value name is empty or longer than %d bytes",
                          GF_ONNX_MAX_NAME);
    if (gf_onnx_value_find(g, name) >= 0)
        return gf_err_set(err, GF_ERR_INVALID, "value '%.200s' is defined twice (as a graph "
                          "input, an initializer or a node output)", name);
    if (g->n_values >= GF_ONNX_MAX_VALUES)
        return gf_err_set(err, GF_ERR_TOO_LARGE, "the graph has more than %d values",
                          GF_ONNX_MAX_VALUES);
    if (g->n_values == g->cap_values) {
        int32_t cap = g->cap_values ? g->cap_values * 2 : 64;
        gf_onnx_value *nv = realloc(g->values, (size_t)cap * sizeof *nv);
        if (nv == NULL)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        g->values = nv;
        g->cap_values = cap;
    }
    if ((size_t)(g->n_values + 1) * 2 > g->names->cap && !names_grow(g))
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    gf_onnx_value *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    if ((v->name = strdup(name)) == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    v->kind = kind;
    v->rank = -1;
    v->producer = -1;
    v->first_use = -1;
    struct gf_onnx_names *m = g->names;
    size_t i = name_hash(name) & (m->cap - 1);
    while (m->slot[i] != 0)
        i = (i + 1) & (m->cap - 1);
    m->slot[i] = g->n_values + 1;
    *index = g->n_values++;
    return GF_OK;
}

gf_onnx_node *gf_onnx_node_add(gf_onnx_graph *g, gf_err *err)
{
    if (g->n_nodes >= GF_ONNX_MAX_NODES) {
        gf_err_set(err, GF_ERR_TOO_LARGE, "the graph has more than %d nodes", GF_ONNX_MAX_NODES);
        return NULL;
    }
    if (g->n_nodes == g->cap_nodes) {
        int32_t cap = g->cap_nodes ? g->cap_nodes * 2 : 64;
        gf_onnx_node *nn = realloc(g->nodes, (size_t)cap * sizeof *nn);
        if (nn == NULL) {
            gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            return NULL;
        }
        g->nodes = nn;
        g->cap_nodes = cap;
    }
    gf_onnx_node *n = &g->nodes[g->n_nodes++];
    memset(n, 0, sizeof *n);
    return n;
}

int64_t gf_onnx_graph_opset(const gf_onnx_graph *g, const char *domain)
{
    bool dflt = domain[0] == '\0' || strcmp(domain, "ai.onnx") == 0;
    for (int32_t i = 0; i < g->n_opsets; i++) {
        const char *d = g->opsets[i].domain;
        if (dflt ? (d[0] == '\0' || strcmp(d, "ai.onnx") == 0) : strcmp(d, domain) == 0)
            return g->opsets[i].version;
    }
    return 0;
}

const char *gf_onnx_node_label(const gf_onnx_graph *g, const gf_onnx_node *n, char *buf,
                               size_t cap)
{
    const char *name = n->name != NULL && n->name[0] ? n->name : NULL;
    if (name == NULL && n->n_out > 0 && n->out[0] >= 0)
        name = g->values[n->out[0]].name;
    snprintf(buf, cap, "'%.160s' (%.64s)", name != NULL ? name : "?", n->op_type);
    return buf;
}

const gf_onnx_attr *gf_onnx_attr_find(const gf_onnx_node *n, const char *name)
{
    for (int32_t i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0)
            return &n->attrs[i];
    return NULL;
}

/* ---- wiring: topological order (Kahn, a min-heap on file position) ------------- */

static void heap_push(int32_t *h, int32_t *n, int32_t v)
{
    int32_t i = (*n)++;
    h[i] = v;
    while (i > 0 && h[(i - 1) / 2] > h[i]) {
        int32_t p = (i - 1) / 2, t = h[p];
        h[p] = h[i];
        h[i] = t;
        i = p;
    }
}

static int32_t heap_pop(int32_t *h, int32_t *n)
{
    int32_t top = h[0];
    h[0] = h[--(*n)];
    for (int32_t i = 0;;) {
        int32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && h[l] < h[m])
            m = l;
        if (r < *n && h[r] < h[m])
            m = r;
        if (m == i)
            break;
        int32_t t = h[m];
        h[m] = h[i];
        h[i] = t;
        i = m;
    }
    return top;
}

gf_status gf_onnx_graph_wire(gf_onnx_graph *g, gf_err *err)
{
    char lb[256];
    int32_t nn = g->n_nodes, nv = g->n_values;
    for (int32_t v = 0; v < nv; v++) {
        g->values[v].producer = -1;
        g->values[v].first_use = -1;
    }
    for (int32_t i = 0; i < nn; i++) {
        const gf_onnx_node *n = &g->nodes[i];
        for (int32_t k = 0; k < n->n_out; k++) {
            int32_t v = n->out[k];
            if (v < 0)
                continue;
            if (v >= nv)
                return gf_err_set(err, GF_ERR_FORMAT, "node %s: output %d out of range",
                                  gf_onnx_node_label(g, n, lb, sizeof lb), k);
            gf_onnx_value *val = &g->values[v];
            if (val->kind != GF_ONNX_V_NODE || val->producer >= 0)
                return gf_err_set(err, GF_ERR_INVALID, "value '%.200s' is produced by node %s "
                                  "but is also %s", val->name,
                                  gf_onnx_node_label(g, n, lb, sizeof lb),
                                  val->kind == GF_ONNX_V_INPUT ? "a graph input"
                                  : val->kind == GF_ONNX_V_INIT ? "an initializer"
                                                                : "produced by another node");
            val->producer = i;
        }
    }
    /* consumers of each value (CSR) and the count of inputs each node waits for */
    int32_t *cnt = calloc((size_t)nv + 1, sizeof *cnt);
    int32_t *waits = calloc((size_t)nn + 1, sizeof *waits);
    int32_t *order = malloc(((size_t)nn + 1) * sizeof *order);
    int32_t *heap = malloc(((size_t)nn + 1) * sizeof *heap);
    int32_t *cons = NULL, *start = NULL;
    gf_status st = GF_OK;
    if (cnt == NULL || waits == NULL || order == NULL || heap == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto done;
    }
    size_t total = 0;
    for (int32_t i = 0; i < nn; i++) {
        const gf_onnx_node *n = &g->nodes[i];
        for (int32_t k = 0; k < n->n_in; k++) {
            int32_t v = n->in[k];
            if (v < 0)
                continue;
            if (v >= nv) {
                st = gf_err_set(err, GF_ERR_FORMAT, "node %s: input %d out of range",
                                gf_onnx_node_label(g, n, lb, sizeof lb), k);
                goto done;
            }
            const gf_onnx_value *val = &g->values[v];
            if (val->kind == GF_ONNX_V_NODE && val->producer < 0) {
                st = gf_err_set(err, GF_ERR_INVALID, "input '%.200s' of node %s is consumed "
                                "but never produced (not a graph input, an initializer or "
                                "a node output)", val->name,
                                gf_onnx_node_label(g, n, lb, sizeof lb));
                goto done;
            }
            if (val->kind == GF_ONNX_V_NODE) {
                cnt[v]++;
                waits[i]++;
                total++;
            }
        }
    }
    start = malloc(((size_t)nv + 1) * sizeof *start);
    cons = malloc((total + 1) * sizeof *cons);
    if (start == NULL || cons == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto done;
    }
    start[0] = 0;
    for (int32_t v = 0; v < nv; v++)
        start[v + 1] = start[v] + cnt[v];
    memset(cnt, 0, ((size_t)nv + 1) * sizeof *cnt);
    for (int32_t i = 0; i < nn; i++) {
        const gf_onnx_node *n = &g->nodes[i];
        for (int32_t k = 0; k < n->n_in; k++) {
            int32_t v = n->in[k];
            if (v >= 0 && g->values[v].kind == GF_ONNX_V_NODE)
                cons[start[v] + cnt[v]++] = i;
        }
    }
    int32_t hn = 0, done_n = 0;
    for (int32_t i = 0; i < nn; i++)
        if (waits[i] == 0)
            heap_push(heap, &hn, i);
    while (hn > 0) {
        int32_t i = heap_pop(heap, &hn);
        order[done_n++] = i;
        const gf_onnx_node *n = &g->nodes[i];
        for (int32_t k = 0; k < n->n_out; k++) {
            int32_t v = n->out[k];
            if (v < 0)
                continue;
            for (int32_t c = start[v]; c < start[v + 1]; c++)
                if (--waits[cons[c]] == 0)
                    heap_push(heap, &hn, cons[c]);
        }
    }
    if (done_n < nn) {
        int32_t stuck = -1;
        for (int32_t i = 0; i < nn && stuck < 0; i++)
            if (waits[i] > 0)
                stuck = i;
        st = gf_err_set(err, GF_ERR_INVALID, "the graph has a cycle: node %s depends on its "
                        "own output (%d nodes are on or behind a cycle)",
                        gf_onnx_node_label(g, &g->nodes[stuck], lb, sizeof lb), nn - done_n);
        goto done;
    }
    /* reorder the nodes */
    gf_onnx_node *sorted = malloc(((size_t)nn + 1) * sizeof *sorted);
    if (sorted == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < nn; i++)
        sorted[i] = g->nodes[order[i]];
    free(g->nodes);
    g->nodes = sorted;
    g->cap_nodes = nn;
    for (int32_t i = 0; i < nn; i++) {
        const gf_onnx_node *n = &g->nodes[i];
        for (int32_t k = 0; k < n->n_out; k++)
            if (n->out[k] >= 0)
                g->values[n->out[k]].producer = i;
        for (int32_t k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && g->values[n->in[k]].first_use < 0)
                g->values[n->in[k]].first_use = i;
    }
    for (int32_t k = 0; k < g->n_outputs; k++) {
        int32_t v = g->outputs[k];
        if (v < 0 || v >= nv) {
            st = gf_err_set(err, GF_ERR_FORMAT, "graph output %d out of range", k);
            goto done;
        }
        if (g->values[v].kind == GF_ONNX_V_NODE && g->values[v].producer < 0) {
            st = gf_err_set(err, GF_ERR_INVALID, "graph output '%.200s' is never produced",
                            g->values[v].name);
            goto done;
        }
    }
done:
    free(cnt);
    free(waits);
    free(order);
    free(heap);
    free(start);
    free(cons);
    return st;
}

gf_dtype gf_onnx_graph_out_dtype(const gf_onnx_graph *g, int32_t i, gf_dtype plan_dtype)
{
    return g->out_strings != NULL && g->out_strings[i].n > 0 ? GF_DT_BYTES : plan_dtype;
}

gf_status gf_onnx_graph_set_out_strings(gf_onnx_graph *g, int32_t i, int32_t n,
                                        const char *const *strings, gf_err *err)
{
    if (n < 0 || n > GF_ONNX_MAX_STRINGS || i < 0 || i >= g->n_outputs)
        return gf_err_set(err, GF_ERR_INVALID, "output %d: %d strings", i, n);
    if (g->out_strings == NULL &&
        (g->out_strings = calloc((size_t)g->n_outputs, sizeof *g->out_strings)) == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    gf_onnx_strings *t = &g->out_strings[i];
    for (int32_t k = 0; k < t->n; k++)
        free(t->s[k]);
    free(t->s);
    t->n = 0;
    if ((t->s = calloc((size_t)n + 1, sizeof *t->s)) == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    for (int32_t k = 0; k < n; k++) {
        if ((t->s[k] = strdup(strings[k])) == NULL)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        t->n = k + 1;
    }
    return GF_OK;
}
