/* gpufaas — ONNX's decoded messages to the in-memory graph
 * (functions/onnx): values, nodes, attributes, initializers, checking every
 * count, name and type on the way. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/utf8.h"
#include "functions/onnx/import_pb.h"
#include "functions/onnx/optable.h"

#define own gf_onnx_pb_own

gf_status gf_onnx_pb_own(gf_onnx_parsed *p, void *buf, gf_err *err)
{
    if (buf == NULL)
        return GF_OK;
    void **no = realloc(p->owned, (p->n_owned + 1) * sizeof *no);
    if (no == NULL) {
        free(buf);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    p->owned = no;
    p->owned[p->n_owned++] = buf;
    return GF_OK;
}

/* An attribute tensor (small, inline). */
static gf_status attr_tensor(const Onnx__TensorProto *t, const char *what, gf_onnx_const **out,
                             gf_err *err)
{
    gf_dtype dt;
    int32_t rank;
    int64_t shape[GF_MAX_RANK];
    size_t nbytes;
    gf_status st = gf_onnx_pb_tensor_desc(t, what, &dt, &rank, shape, &nbytes, err);
    if (st != GF_OK)
        return st;
    if (nbytes > GF_ONNX_MAX_INLINE_BYTES)
        return gf_err_set(err, GF_ERR_TOO_LARGE, "%s: a tensor attribute of %zu bytes", what,
                          nbytes);
    const void *src;
    void *owned;
    if ((st = gf_onnx_pb_tensor_bytes(t, what, dt, nbytes, NULL, NULL, &src, &owned, err)) != GF_OK)
        return st;
    if ((st = gf_onnx_const_new(dt, rank, shape, out, err)) == GF_OK && nbytes)
        memcpy((*out)->data, src, nbytes);
    free(owned);
    return st;
}

static gf_status convert_attr(const Onnx__AttributeProto *a, gf_onnx_attr *out, gf_err *err)
{
    gf_status st = gf_onnx_pb_check_name(a->name, "an attribute name", err);
    if (st != GF_OK)
        return st;
    if ((out->name = strdup(a->name != NULL ? a->name : "")) == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    if (a->ref_attr_name != NULL && a->ref_attr_name[0])
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "attribute '%.64s' refers to a function "
                          "attribute (functions are not supported)", a->name);
    out->type = (gf_onnx_attr_type)a->type;
    switch ((int)a->type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: out->f = a->f; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: out->i = a->i; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        /* (an empty string has no data: memchr/memcpy of NULL are undefined) */
        if ((a->s.len > 0 && memchr(a->s.data, 0, a->s.len) != NULL) ||
            a->s.len > GF_ONNX_MAX_NAME ||
            !gf_utf8_valid((const char *)a->s.data, a->s.len, NULL))
            return gf_err_set(err, GF_ERR_UNSUPPORTED, "attribute '%.64s': a string that is "
                              "not short UTF-8 text", a->name);
        if ((out->s = malloc(a->s.len + 1)) == NULL)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        if (a->s.len > 0)
            memcpy(out->s, a->s.data, a->s.len);
        out->s[a->s.len] = '\0';
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS: {
        bool ints = a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        size_t n = ints ? a->n_ints : a->n_floats;
        if (n > GF_ONNX_MAX_ATTR_LIST)
            return gf_err_set(err, GF_ERR_TOO_LARGE, "attribute '%.64s' has %zu values", a->name,
                              n);
        out->n = n;
        if (ints) {
            if ((out->ints = malloc((n + 1) * sizeof *out->ints)) == NULL)
                return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            if (n)
                memcpy(out->ints, a->ints, n * sizeof *out->ints);
        } else {
            if ((out->floats = malloc((n + 1) * sizeof *out->floats)) == NULL)
                return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            if (n)
                memcpy(out->floats, a->floats, n * sizeof *out->floats);
        }
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
        if (a->n_strings > 1024)
            return gf_err_set(err, GF_ERR_TOO_LARGE, "attribute '%.64s' has %zu strings",
                              a->name, a->n_strings);
        out->n = a->n_strings;
        if ((out->strings = calloc(a->n_strings + 1, sizeof *out->strings)) == NULL)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < a->n_strings; i++) {
            const ProtobufCBinaryData *s = &a->strings[i];
            if (memchr(s->data, 0, s->len) != NULL || s->len > GF_ONNX_MAX_NAME ||
                !gf_utf8_valid((const char *)s->data, s->len, NULL))
                return gf_err_set(err, GF_ERR_UNSUPPORTED, "attribute '%.64s': a string that "
                                  "is not short UTF-8 text", a->name);
            if ((out->strings[i] = malloc(s->len + 1)) == NULL)
                return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            memcpy(out->strings[i], s->data, s->len);
            out->strings[i][s->len] = '\0';
        }
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
        if (a->t == NULL)
            return gf_err_set(err, GF_ERR_INVALID, "attribute '%.64s' has no tensor", a->name);
        return attr_tensor(a->t, a->name, &out->t, err);
    default:
        out->type = GF_ONNX_ATTR_GRAPH; /* any other kind: refused when the node is bound */
        break;
    }
    return GF_OK;
}

/* Value type from a ValueInfoProto (graph inputs and outputs). */
static gf_status value_type(const Onnx__ValueInfoProto *vi, gf_onnx_value *v, gf_err *err)
{
    const Onnx__TypeProto *tp = vi->type;
    if (tp == NULL || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
        tp->tensor_type == NULL)
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "'%.200s' is not a tensor (sequences, maps "
                          "and optionals are not supported)", v->name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    v->dtype = tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__STRING
                   ? GF_DT_BYTES : gf_onnx_dtype(tt->elem_type);
    if (v->dtype == GF_DT_INVALID)
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "'%.200s' has ONNX element type %d, which is "
                          "not supported", v->name, (int)tt->elem_type);
    if (tt->shape == NULL) {
        v->rank = -1;
        return GF_OK;
    }
    if (tt->shape->n_dim > GF_MAX_RANK)
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "'%.200s' has rank %zu (at most %d)", v->name,
                          tt->shape->n_dim, GF_MAX_RANK);
    v->rank = (int32_t)tt->shape->n_dim;
    for (size_t k = 0; k < tt->shape->n_dim; k++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[k];
        int64_t x = -1;
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            x = d->dim_value;
            if (x < 0 || x > (INT64_C(1) << 40))
                return gf_err_set(err, GF_ERR_INVALID, "'%.200s' has an absurd dim %" PRId64,
                                  v->name, x);
        }
        v->shape[k] = x;
    }
    return GF_OK;
}

static gf_status add_init(gf_onnx_parsed *p, const Onnx__TensorProto *t, const char *name,
                          const char **data_name, gf_err *err)
{
    gf_onnx_graph *g = p->g;
    gf_status st = gf_onnx_pb_check_name(name, "an initializer name", err);
    if (st != GF_OK)
        return st;
    if (name[0] == '\0')
        return gf_err_set(err, GF_ERR_INVALID, "an initializer has no name");
    if (strcmp(name, GF_ONNX_GRAPH_TENSOR) == 0 || strcmp(name, "__metadata__") == 0)
        return gf_err_set(err, GF_ERR_INVALID, "initializer name '%s' is reserved", name);
    int32_t v;
    if ((st = gf_onnx_value_add(g, name, GF_ONNX_V_INIT, &v, err)) != GF_OK)
        return st;
    Onnx__TensorProto shadow;
    const gf_onnx_strings *tab = NULL;
    if (t->has_data_type && t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__STRING) {
        if ((st = gf_onnx_pb_strings_tensor(p, t, name, &shadow, &tab, err)) != GF_OK ||
            (st = gf_onnx_pb_strings_set(p, v, tab, err)) != GF_OK)
            return st;
        t = &shadow;
    }
    gf_onnx_value *val = &g->values[v];
    size_t nbytes;
    if ((st = gf_onnx_pb_tensor_desc(t, name, &val->dtype, &val->rank, val->shape, &nbytes, err)) != GF_OK)
        return st;
    void *owned;
    const void *src;
    st = gf_onnx_pb_tensor_bytes(t, name, val->dtype, nbytes, p->data.p != NULL || p->data.len ? &p->data
                                                                                      : NULL,
                      *data_name, &src, &owned, err);
    if (st != GF_OK)
        return st;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        for (size_t i = 0; i < t->n_external_data; i++)
            if (t->external_data[i]->key && strcmp(t->external_data[i]->key, "location") == 0)
                *data_name = t->external_data[i]->value;
    if ((st = own(p, owned, err)) != GF_OK)
        return st;
    /* the per-value arrays grow with the graph */
    size_t cap = (size_t)g->cap_values + 1;
    const void **ni = realloc(p->init, cap * sizeof *ni);
    if (ni != NULL)
        p->init = ni;
    size_t *nl = realloc(p->init_len, cap * sizeof *nl);
    if (nl != NULL)
        p->init_len = nl;
    if (ni == NULL || nl == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    for (size_t i = p->n_init_alloc; i < cap; i++) {
        p->init[i] = NULL;
        p->init_len[i] = 0;
    }
    if (cap > p->n_init_alloc)
        p->n_init_alloc = cap;
    p->init[v] = src;
    p->init_len[v] = nbytes;
    return GF_OK;
}

/* A Constant node becomes an initializer named by its output. */
static gf_status constant_to_init(gf_onnx_parsed *p, const Onnx__NodeProto *n,
                                  const char **data_name, gf_err *err)
{
    if (n->n_output != 1 || n->n_attribute != 1 || n->output[0] == NULL || !n->output[0][0])
        return gf_err_set(err, GF_ERR_INVALID, "Constant node '%.200s' needs one output and one "
                          "value attribute", n->name ? n->name : "");
    const Onnx__AttributeProto *a = n->attribute[0];
    const char *an = a->name ? a->name : "";
    Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
    int64_t one = 1;
    if (strcmp(an, "value") == 0 && a->t != NULL) {
        t = *a->t;
    } else if (strcmp(an, "value_float") == 0) {
        t.data_type = 1;
        t.n_float_data = 1;
        t.float_data = (float *)&a->f;
    } else if (strcmp(an, "value_floats") == 0) {
        t.data_type = 1;
        t.n_dims = 1;
        one = (int64_t)a->n_floats;
        t.dims = &one;
        t.n_float_data = a->n_floats;
        t.float_data = a->floats;
    } else if (strcmp(an, "value_int") == 0) {
        t.data_type = 7;
        t.n_int64_data = 1;
        t.int64_data = (int64_t *)&a->i;
    } else if (strcmp(an, "value_ints") == 0) {
        t.data_type = 7;
        t.n_dims = 1;
        one = (int64_t)a->n_ints;
        t.dims = &one;
        t.n_int64_data = a->n_ints;
        t.int64_data = a->ints;
    } else {
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "Constant node '%.200s', domain ai.onnx: "
                          "attribute '%.64s' is not supported (value, value_float(s) and "
                          "value_int(s) are)", n->name ? n->name : n->output[0], an);
    }
    t.has_data_type = 1;
    return add_init(p, &t, n->output[0], data_name, err);
}

/* An initializer named "<node>.<what>" (made unique) holding bytes data
 * (dtype 1 F32 or 7 I64, dims[rank]); its value index in *v. */
static gf_status lifted_init(gf_onnx_parsed *p, int32_t ni, const char *what,
                             const Onnx__TensorProto *t, const char **data_name, int32_t *v,
                             gf_err *err)
{
    gf_onnx_graph *g = p->g;
    const gf_onnx_node *n = &g->nodes[ni];
    const char *base = n->name[0] ? n->name : (n->n_out > 0 && n->out[0] >= 0
                                                   ? g->values[n->out[0]].name : "ml");
    char name[GF_ONNX_MAX_NAME + 80];
    snprintf(name, sizeof name, "%.900s.%.64s", base, what);
    for (int u = 2; gf_onnx_value_find(g, name) >= 0 && u < 1000; u++)
        snprintf(name, sizeof name, "%.900s.%.64s.%d", base, what, u);
    gf_status st = add_init(p, t, name, data_name, err);
    if (st == GF_OK)
        *v = gf_onnx_value_find(g, name);
    return st;
}

/* A raw tensor over buf (owned by p from here on, also on failure). */
static gf_status raw_init(gf_onnx_parsed *p, int32_t ni, const char *what, void *buf,
                          int32_t dtype, int64_t numel, const char **data_name, int32_t *v,
                          gf_err *err)
{
    gf_status st = own(p, buf, err);
    if (st != GF_OK)
        return st;
    Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
    t.has_data_type = 1;
    t.data_type = dtype;
    t.n_dims = 1;
    t.dims = &numel;
    t.has_raw_data = 1;
    t.raw_data.data = buf;
    t.raw_data.len = (size_t)numel * (dtype == 1 ? 4 : 8);
    return lifted_init(p, ni, what, &t, data_name, v, err);
}

/* A tree ensemble's tables (import_trees.c) as inputs first..first+5. */
static gf_status lift_trees(gf_onnx_parsed *p, const Onnx__NodeProto *np, int32_t ni,
                            int first, bool classifier, const char *lb, const char **data_name,
                            gf_err *err)
{
    gf_onnx_trees tt;
    gf_status st = gf_onnx_trees_build(np, classifier, lb, &tt, err);
    if (st != GF_OK)
        return st;
    int64_t *meta = malloc(sizeof tt.meta);
    if (meta != NULL)
        memcpy(meta, tt.meta, sizeof tt.meta);
    struct { const char *what; void *buf; int32_t dtype; int64_t numel; } tab[] = {
        {"trees.feature", tt.feat, 7, tt.m}, {"trees.threshold", tt.thr, 1, tt.m},
        {"trees.next", tt.next, 7, 3 * tt.m}, {"trees.leaf", tt.leaf, 1, tt.m * tt.c},
        {"trees.roots", tt.roots, 7, tt.t}, {"trees.meta", meta, 7, GF_ONNX_TREE_META}};
    if (meta == NULL) {
        gf_onnx_trees_free(&tt);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    for (int k = 0; k < GF_ONNX_TREE_TABLES; k++) {
        int32_t v = -1;
        if (st == GF_OK)
            st = raw_init(p, ni, tab[k].what, tab[k].buf, tab[k].dtype, tab[k].numel, data_name,
                          &v, err);
        else
            free(tab[k].buf);
        p->g->nodes[ni].in[first + k] = v;
    }
    return st;
}

/* An SVMClassifier's matrices (import_svm.c) as inputs first..first+2. */
static gf_status lift_svm(gf_onnx_parsed *p, const Onnx__NodeProto *np, int32_t ni, int first,
                          const char *lb, const char **data_name, gf_err *err)
{
    gf_onnx_svm t;
    gf_status st = gf_onnx_svm_build(np, lb, &t, err);
    if (st != GF_OK)
        return st;
    struct { const char *what; void *buf; int64_t numel; } tab[GF_ONNX_SVM_TABLES] = {
        {"svm.pairs", t.pairs, t.v * t.p}, {"svm.votes", t.votes, t.p * t.c},
        {"svm.vote_base", t.vote_base, t.c}};
    for (int k = 0; k < GF_ONNX_SVM_TABLES; k++) {
        int32_t v = -1;
        if (st == GF_OK)
            st = raw_init(p, ni, tab[k].what, tab[k].buf, 1, tab[k].numel, data_name, &v, err);
        else
            free(tab[k].buf);
        p->g->nodes[ni].in[first + k] = v;
    }
    return st;
}

/* Scan's body (a graph; import_scan.c turns the one the plan runs into a
 * string). */
static bool scan_body(const Onnx__NodeProto *np, const Onnx__AttributeProto *a)
{
    return np->op_type != NULL && strcmp(np->op_type, "Scan") == 0 &&
           (np->domain == NULL || np->domain[0] == '\0' || strcmp(np->domain, "ai.onnx") == 0) &&
           a->name != NULL && strcmp(a->name, "body") == 0;
}

/* Attributes a derived-table op's importer consumes (they leave the node). */
static bool consumed(const gf_onnx_op *op, const char *name)
{
    if (strncmp(op->type, "TreeEnsemble", 12) == 0)
        return gf_onnx_trees_consumes(name);
    if (strcmp(op->type, "SVMClassifier") == 0)
        return strcmp(name, "coefficients") == 0 || strcmp(name, "vectors_per_class") == 0;
    return false;
}

/* The weights an ai.onnx.ml op keeps in attributes (its spec's W and J
 * entries) become initializers named "<node>.<attribute>", appended as
 * inputs 1, 2, ...; *lifted_by is then the op (whose spec says which
 * attributes the node no longer has). A tree ensemble's trees become the
 * tables import_trees.c makes, an SVMClassifier's coefficients the matrices
 * import_svm.c makes, appended after those.
 * ZipMap is refused here, before its output type is: it is how skl2onnx
 * outputs probabilities unless told otherwise. */
static gf_status lift_attrs(gf_onnx_parsed *p, const Onnx__NodeProto *np, int32_t ni,
                            const gf_onnx_op **lifted_by, const char **data_name, gf_err *err)
{
    *lifted_by = NULL;
    gf_onnx_graph *g = p->g;
    gf_onnx_node *n = &g->nodes[ni];
    char lb[256];
    if (strcmp(n->domain, "ai.onnx.ml") == 0 && strcmp(n->op_type, "ZipMap") == 0)
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "node %s, domain ai.onnx.ml: ZipMap outputs "
                          "a sequence of maps, which KServe cannot carry; export without it: "
                          "skl2onnx.to_onnx(model, X, options={'zipmap': False})",
                          gf_onnx_node_label(g, n, lb, sizeof lb));
    char why[256];
    const gf_onnx_op *op = gf_onnx_op_find(n->domain, n->op_type, n->opset, why, sizeof why);
    int nl = op != NULL ? gf_onnx_lifted_count(op) : 0;
    if (nl == 0)
        return GF_OK;
    bool cls = strcmp(op->type, "TreeEnsembleClassifier") == 0;
    bool trees = cls || strcmp(op->type, "TreeEnsembleRegressor") == 0;
    bool svm = strcmp(op->type, "SVMClassifier") == 0;
    int extra = trees ? GF_ONNX_TREE_TABLES : svm ? GF_ONNX_SVM_TABLES : 0;
    if (n->n_in != 1)
        return gf_err_set(err, GF_ERR_INVALID, "node %s: %d inputs, expected 1",
                          gf_onnx_node_label(g, n, lb, sizeof lb), n->n_in);
    int32_t *in = realloc(n->in, (size_t)(1 + nl + extra) * sizeof *in);
    if (in == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    n->in = in;
    for (int k = 1; k <= nl + extra; k++)
        n->in[k] = -1;
    n->n_in = 1 + nl + extra;
    *lifted_by = op;
    gf_onnx_node_label(g, n, lb, sizeof lb);
    for (size_t k = 0; k < np->n_attribute; k++) {
        const Onnx__AttributeProto *a = np->attribute[k];
        char code = 0;
        int at = a->name != NULL ? gf_onnx_lifted_input(op, a->name, &code) : 0;
        if (at == 0)
            continue;
        bool fl = code == 'W';
        if (a->type != (fl ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS
                           : ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS))
            return gf_err_set(err, GF_ERR_INVALID, "node %s: attribute '%.64s' must be a list "
                              "of %s", lb, a->name, fl ? "floats" : "ints");
        size_t cnt = fl ? a->n_floats : a->n_ints;
        if (cnt == 0)
            continue;
        if (cnt > (size_t)1 << 28)
            return gf_err_set(err, GF_ERR_TOO_LARGE, "node %s: attribute '%.64s' has %zu values",
                              lb, a->name, cnt);
        Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
        int64_t dim = (int64_t)cnt;
        t.has_data_type = 1;
        t.data_type = fl ? 1 : 7;
        t.n_dims = 1;
        t.dims = &dim;
        if (fl) {
            t.n_float_data = cnt;
            t.float_data = a->floats;
        } else {
            t.n_int64_data = cnt;
            t.int64_data = a->ints;
        }
        int32_t v;
        gf_status st = lifted_init(p, ni, a->name, &t, data_name, &v, err);
        if (st != GF_OK)
            return st;
        g->nodes[ni].in[at] = v;
    }
    if (svm)
        return lift_svm(p, np, ni, 1 + nl, lb, data_name, err);
    return trees ? lift_trees(p, np, ni, 1 + nl, cls, lb, data_name, err) : GF_OK;
}

gf_status gf_onnx_pb_build(gf_onnx_parsed *p, gf_err *err)
{
    const Onnx__ModelProto *m = p->model;
    gf_onnx_graph *g = p->g;
    gf_status st;
    if (m->graph == NULL)
        return gf_err_set(err, GF_ERR_INVALID, "the model has no graph");
    if (m->n_opset_import == 0 || m->n_opset_import > 64)
        return gf_err_set(err, GF_ERR_INVALID, "the model imports %zu opsets (1 to 64 expected)",
                          m->n_opset_import);
    g->opsets = calloc(m->n_opset_import, sizeof *g->opsets);
    if (g->opsets == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = m->opset_import[i]->domain ? m->opset_import[i]->domain : "";
        if ((st = gf_onnx_pb_check_name(d, "an opset domain", err)) != GF_OK)
            return st;
        g->opsets[i].domain = strdup(d);
        g->opsets[i].version = m->opset_import[i]->version;
        g->n_opsets = (int32_t)i + 1;
        if (g->opsets[i].domain == NULL)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    char prod[300];
    snprintf(prod, sizeof prod, "%.140s %.140s", m->producer_name ? m->producer_name : "",
             m->producer_version ? m->producer_version : "");
    if (!gf_utf8_valid(prod, strlen(prod), NULL))
        snprintf(prod, sizeof prod, "?");
    if ((g->producer = strdup(prod)) == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    const Onnx__GraphProto *gp = m->graph;
    if (gp->n_node > GF_ONNX_MAX_NODES || gp->n_initializer > GF_ONNX_MAX_VALUES)
        return gf_err_set(err, GF_ERR_TOO_LARGE, "the graph has %zu nodes and %zu initializers",
                          gp->n_node, gp->n_initializer);
    if (gp->n_sparse_initializer > 0)
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "sparse initializers are not supported");
    const char *data_name = NULL;
    for (size_t i = 0; i < gp->n_initializer; i++)
        if ((st = add_init(p, gp->initializer[i], gp->initializer[i]->name
                                                      ? gp->initializer[i]->name : "",
                           &data_name, err)) != GF_OK)
            return st;
    /* graph inputs (IR < 4 also lists initializers there: skipped) */
    g->inputs = calloc(gp->n_input + 1, sizeof *g->inputs);
    if (g->inputs == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < gp->n_input; i++) {
        const char *name = gp->input[i]->name ? gp->input[i]->name : "";
        int32_t v = gf_onnx_value_find(g, name);
        if (v >= 0 && g->values[v].kind == GF_ONNX_V_INIT)
            continue;
        if ((st = gf_onnx_pb_check_name(name, "an input name", err)) != GF_OK ||
            (st = gf_onnx_value_add(g, name, GF_ONNX_V_INPUT, &v, err)) != GF_OK)
            return st;
        if ((st = value_type(gp->input[i], &g->values[v], err)) != GF_OK)
            return st;
        if (g->values[v].rank < 0)
            return gf_err_set(err, GF_ERR_UNSUPPORTED, "input '%.200s' has no shape", name);
        if (g->values[v].dtype == GF_DT_BYTES)
            return gf_err_set(err, GF_ERR_UNSUPPORTED, "input '%.200s' is tensor(string): "
                              "gpufaas gives strings as outputs (class labels) but does not "
                              "take them as inputs", name);
        g->inputs[g->n_inputs++] = v;
    }
    /* node outputs first (nodes may come in any order), then the nodes */
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        if (n->op_type != NULL && strcmp(n->op_type, "Constant") == 0 &&
            (n->domain == NULL || n->domain[0] == '\0' || strcmp(n->domain, "ai.onnx") == 0)) {
            if ((st = constant_to_init(p, n, &data_name, err)) != GF_OK)
                return st;
            continue;
        }
        if (n->n_output > GF_ONNX_MAX_NODE_IO || n->n_input > GF_ONNX_MAX_NODE_IO)
            return gf_err_set(err, GF_ERR_TOO_LARGE, "node '%.200s' has %zu inputs and %zu "
                              "outputs", n->name ? n->name : "", n->n_input, n->n_output);
        for (size_t k = 0; k < n->n_output; k++) {
            const char *name = n->output[k] ? n->output[k] : "";
            int32_t v;
            if (name[0] == '\0')
                continue;
            if ((st = gf_onnx_pb_check_name(name, "a value name", err)) != GF_OK ||
                (st = gf_onnx_value_add(g, name, GF_ONNX_V_NODE, &v, err)) != GF_OK)
                return st;
        }
    }
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        if (np->op_type != NULL && strcmp(np->op_type, "Constant") == 0 &&
            (np->domain == NULL || np->domain[0] == '\0' || strcmp(np->domain, "ai.onnx") == 0))
            continue;
        if ((st = gf_onnx_pb_strings_labels(p, &np, err)) != GF_OK)
            return st;
        gf_onnx_node *n = gf_onnx_node_add(g, err);
        if (n == NULL)
            return err != NULL ? err->code : GF_ERR_NOMEM;
        if ((st = gf_onnx_pb_check_name(np->name ? np->name : "", "a node name", err)) != GF_OK ||
            (st = gf_onnx_pb_check_name(np->op_type ? np->op_type : "", "an op type", err)) != GF_OK ||
            (st = gf_onnx_pb_check_name(np->domain ? np->domain : "", "a domain", err)) != GF_OK)
            return st;
        n->name = strdup(np->name ? np->name : "");
        n->op_type = strdup(np->op_type ? np->op_type : "");
        n->domain = strdup(np->domain ? np->domain : "");
        n->in = malloc((np->n_input + 1) * sizeof *n->in);
        n->out = malloc((np->n_output + 1) * sizeof *n->out);
        n->attrs = calloc(np->n_attribute + 1, sizeof *n->attrs);
        if (n->name == NULL || n->op_type == NULL || n->domain == NULL || n->in == NULL ||
            n->out == NULL || n->attrs == NULL)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        n->opset = gf_onnx_graph_opset(g, n->domain);
        for (size_t k = 0; k < np->n_output; k++) {
            const char *name = np->output[k] ? np->output[k] : "";
            n->out[k] = name[0] ? gf_onnx_value_find(g, name) : -1;
        }
        n->n_out = (int32_t)np->n_output;
        for (size_t k = 0; k < np->n_input; k++) {
            const char *name = np->input[k] ? np->input[k] : "";
            int32_t v = -1;
            if (name[0]) {
                v = gf_onnx_value_find(g, name);
                if (v < 0) {
                    char lb[256];
                    return gf_err_set(err, GF_ERR_INVALID, "input '%.200s' of node %s is "
                                      "consumed but never produced (not a graph input, an "
                                      "initializer or a node output)", name,
                                      gf_onnx_node_label(g, n, lb, sizeof lb));
                }
            }
            n->in[k] = v;
        }
        n->n_in = (int32_t)np->n_input;
        if (np->n_attribute > GF_ONNX_MAX_ATTRS)
            return gf_err_set(err, GF_ERR_TOO_LARGE, "node '%.200s' has %zu attributes",
                              n->name, np->n_attribute);
        const gf_onnx_op *lop;
        if ((st = lift_attrs(p, np, (int32_t)(g->n_nodes - 1), &lop, &data_name, err)) != GF_OK)
            return st;
        n = &g->nodes[g->n_nodes - 1];
        for (size_t k = 0; k < np->n_attribute; k++) {
            char code;
            if (lop != NULL && np->attribute[k]->name != NULL &&
                (gf_onnx_lifted_input(lop, np->attribute[k]->name, &code) > 0 ||
                 consumed(lop, np->attribute[k]->name)))
                continue;
            if (scan_body(np, np->attribute[k])) {
                gf_onnx_attr *a = &n->attrs[n->n_attrs++];
                const char *kind;
                char lb[256];
                if ((st = gf_onnx_scan_body(np, np->attribute[k], gf_onnx_node_label(
                         g, n, lb, sizeof lb), &kind, err)) != GF_OK)
                    return st;
                a->type = GF_ONNX_ATTR_STRING;
                if ((a->name = strdup("body")) == NULL || (a->s = strdup(kind)) == NULL)
                    return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
                continue;
            }
            if ((st = convert_attr(np->attribute[k], &n->attrs[n->n_attrs], err)) != GF_OK) {
                n->n_attrs++;
                gf_err_prefix(err, "node '%.200s' (%.64s)", n->name, n->op_type);
                return st;
            }
            n->n_attrs++;
        }
    }
    if (gp->n_output == 0)
        return gf_err_set(err, GF_ERR_INVALID, "the graph has no outputs");
    g->outputs = calloc(gp->n_output, sizeof *g->outputs);
    bool *out_str = calloc(gp->n_output, sizeof *out_str);
    if (out_str != NULL && (st = own(p, out_str, err)) != GF_OK)
        return st;
    if (g->outputs == NULL || out_str == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name = gp->output[i]->name ? gp->output[i]->name : "";
        int32_t v = gf_onnx_value_find(g, name);
        if (v < 0)
            return gf_err_set(err, GF_ERR_INVALID, "graph output '%.200s' is never produced",
                              name);
        gf_onnx_value tmp = {.name = (char *)name};
        if ((st = value_type(gp->output[i], &tmp, err)) != GF_OK)
            return st;
        if (tmp.dtype == GF_DT_BYTES) { /* indices into its strings (import_strings.c) */
            out_str[i] = true;
            tmp.dtype = GF_DT_I64;
        }
        if (g->values[v].kind == GF_ONNX_V_NODE) {
            g->values[v].dtype = tmp.dtype;
            g->values[v].rank = tmp.rank;
            memcpy(g->values[v].shape, tmp.shape, sizeof tmp.shape);
        }
        g->outputs[g->n_outputs++] = v;
    }
    if ((st = gf_onnx_pb_compute_f32(p, err)) != GF_OK ||
        (st = gf_onnx_graph_wire(g, err)) != GF_OK)
        return st;
    return gf_onnx_pb_strings_flow(p, out_str, err);
}

