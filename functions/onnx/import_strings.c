/* gpufaas — ONNX string tensors as class labels (functions/onnx).
 *
 * The device has no strings. What scikit-learn models output as strings
 * (skl2onnx: the label of a classifier trained with string classes) is
 * always one element of a fixed list, so the importer makes every string
 * value an I64 tensor of indices into a table of strings, and the graph
 * computes on the indices:
 *   - a string initializer (KNeighborsClassifier's class list) becomes the
 *     I64 tensor 0, 1, ..., n-1 of its shape, the table its elements;
 *   - a classifier's classlabels_strings (LinearClassifier, SVMClassifier,
 *     TreeEnsembleClassifier) becomes the integer labels 0 .. C-1, the table
 *     the strings, so its label output is the class's index;
 *   - ops that only move elements (Identity, Reshape, Gather,
 *     ArrayFeatureExtractor, ...) carry a table from input to output; any
 *     other use of a string value is refused at deploy, naming the node.
 * A graph output declared tensor(string) must end up with a table: the
 * graph keeps it (gf_onnx_graph.out_strings) and the kind answers the
 * strings as BYTES. String graph inputs are refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "functions/onnx/import_pb.h"

/* A table as one block: the struct, the pointers, the bytes (owned by p). */
static gf_status table_new(gf_onnx_parsed *p, size_t n, const ProtobufCBinaryData *s,
                           const char *what, gf_onnx_strings **out, gf_err *err)
{
    if (n == 0 || n > GF_ONNX_MAX_STRINGS)
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "%s: %zu strings (1 to %d are supported)",
                          what, n, GF_ONNX_MAX_STRINGS);
    size_t bytes = sizeof(gf_onnx_strings) + n * sizeof(char *);
    for (size_t k = 0; k < n; k++) {
        if (s[k].len > GF_ONNX_MAX_NAME || (s[k].len > 0 && memchr(s[k].data, 0, s[k].len)) ||
            !gf_utf8_valid((const char *)s[k].data, s[k].len, NULL))
            return gf_err_set(err, GF_ERR_UNSUPPORTED, "%s: string %zu is not UTF-8 text "
                              "without NUL of at most %d bytes", what, k, GF_ONNX_MAX_NAME);
        bytes += s[k].len + 1;
    }
    char *blk = malloc(bytes);
    if (blk == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    gf_onnx_strings *t = (gf_onnx_strings *)blk;
    t->n = (int32_t)n;
    t->s = (char **)(blk + sizeof *t);
    char *at = (char *)(t->s + n);
    for (size_t k = 0; k < n; k++) {
        t->s[k] = at;
        if (s[k].len > 0)
            memcpy(at, s[k].data, s[k].len);
        at[s[k].len] = '\0';
        at += s[k].len + 1;
    }
    *out = t;
    return gf_onnx_pb_own(p, blk, err);
}

static gf_status iota_new(gf_onnx_parsed *p, size_t n, int64_t **out, gf_err *err)
{
    int64_t *v = malloc((n ? n : 1) * sizeof *v);
    if (v == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < n; k++)
        v[k] = (int64_t)k;
    *out = v;
    return gf_onnx_pb_own(p, v, err);
}

gf_status gf_onnx_pb_strings_set(gf_onnx_parsed *p, int32_t v, const gf_onnx_strings *t,
                                 gf_err *err)
{
    size_t cap = (size_t)p->g->cap_values + 1;
    if (cap > p->n_vstr) {
        const gf_onnx_strings **nv = realloc(p->vstr, cap * sizeof *nv);
        if (nv == NULL)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        for (size_t i = p->n_vstr; i < cap; i++)
            nv[i] = NULL;
        p->vstr = nv;
        p->n_vstr = cap;
    }
    p->vstr[v] = t;
    return GF_OK;
}

static const gf_onnx_strings *strings_of(const gf_onnx_parsed *p, int32_t v)
{
    return v >= 0 && (size_t)v < p->n_vstr ? p->vstr[v] : NULL;
}

gf_status gf_onnx_pb_strings_tensor(gf_onnx_parsed *p, const Onnx__TensorProto *t,
                                    const char *name, Onnx__TensorProto *shadow,
                                    const gf_onnx_strings **tab, gf_err *err)
{
    char what[300];
    snprintf(what, sizeof what, "string tensor '%.200s'", name);
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "%s: strings in external data are not "
                          "supported", what);
    if (t->n_dims > GF_MAX_RANK)
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "%s has rank %zu", what, t->n_dims);
    size_t numel = 1;
    for (size_t k = 0; k < t->n_dims; k++) {
        if (t->dims[k] < 0 || t->dims[k] > GF_ONNX_MAX_STRINGS)
            return gf_err_set(err, GF_ERR_INVALID, "%s has an absurd dim %lld", what,
                              (long long)t->dims[k]);
        numel *= (size_t)t->dims[k];
        if (numel > GF_ONNX_MAX_STRINGS)
            return gf_err_set(err, GF_ERR_UNSUPPORTED, "%s has more than %d elements", what,
                              GF_ONNX_MAX_STRINGS);
    }
    if (numel != t->n_string_data)
        return gf_err_set(err, GF_ERR_INVALID, "%s: its shape holds %zu elements, it has %zu",
                          what, numel, t->n_string_data);
    gf_onnx_strings *s;
    int64_t *iota;
    gf_status st = table_new(p, numel, t->string_data, what, &s, err);
    if (st == GF_OK)
        st = iota_new(p, numel, &iota, err);
    if (st != GF_OK)
        return st;
    *shadow = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
    shadow->has_data_type = 1;
    shadow->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    shadow->n_dims = t->n_dims;
    shadow->dims = t->dims;
    shadow->n_int64_data = numel;
    shadow->int64_data = iota;
    shadow->name = t->name;
    *tab = s;
    return GF_OK;
}

static bool ml_domain(const char *d) { return d != NULL && strcmp(d, "ai.onnx.ml") == 0; }

gf_status gf_onnx_pb_strings_labels(gf_onnx_parsed *p, const Onnx__NodeProto **npp, gf_err *err)
{
    const Onnx__NodeProto *np = *npp;
    const char *op = np->op_type != NULL ? np->op_type : "";
    const char *ints = strcmp(op, "TreeEnsembleClassifier") == 0 ? "classlabels_int64s"
                     : strcmp(op, "LinearClassifier") == 0 || strcmp(op, "SVMClassifier") == 0
                         ? "classlabels_ints" : NULL;
    const Onnx__AttributeProto *sa = gf_onnx_pb_attr(np, "classlabels_strings");
    if (!ml_domain(np->domain) || ints == NULL || sa == NULL)
        return GF_OK;
    char what[300];
    snprintf(what, sizeof what, "node '%.200s' (%s): classlabels_strings",
             np->name != NULL ? np->name : "", op);
    if (sa->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS)
        return gf_err_set(err, GF_ERR_INVALID, "%s must be a list of strings", what);
    if (gf_onnx_pb_attr(np, ints) != NULL)
        return gf_err_set(err, GF_ERR_INVALID, "%s and %s are both given", what, ints);
    gf_onnx_strings *tab;
    int64_t *iota;
    gf_status st = table_new(p, sa->n_strings, sa->strings, what, &tab, err);
    if (st == GF_OK)
        st = iota_new(p, sa->n_strings, &iota, err);
    if (st != GF_OK)
        return st;
    /* the node as if its labels were 0 .. C-1 */
    size_t blk = sizeof(Onnx__NodeProto) + sizeof(Onnx__AttributeProto) +
                 np->n_attribute * sizeof(Onnx__AttributeProto *);
    char *b = malloc(blk);
    if (b == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    Onnx__NodeProto *sh = (Onnx__NodeProto *)b;
    Onnx__AttributeProto *ia = (Onnx__AttributeProto *)(sh + 1);
    Onnx__AttributeProto **attrs = (Onnx__AttributeProto **)(ia + 1);
    *sh = *np;
    *ia = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    ia->name = (char *)ints;
    ia->has_type = 1;
    ia->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    ia->n_ints = sa->n_strings;
    ia->ints = iota;
    for (size_t k = 0; k < np->n_attribute; k++)
        attrs[k] = np->attribute[k] == sa ? ia : np->attribute[k];
    sh->attribute = attrs;
    if ((st = gf_onnx_pb_own(p, b, err)) != GF_OK)
        return st;
    *npp = sh;
    /* the label output (0) holds indices into the table */
    int32_t v = np->n_output > 0 && np->output[0] != NULL && np->output[0][0]
                    ? gf_onnx_value_find(p->g, np->output[0]) : -1;
    return v >= 0 ? gf_onnx_pb_strings_set(p, v, tab, err) : GF_OK;
}

/* Ops that only move elements of input `in` to output 0. */
static bool moves(const gf_onnx_node *n, int in)
{
    static const char *const first[] = {"Identity", "Reshape", "Flatten", "Squeeze",
                                        "Unsqueeze", "Transpose", "Expand", "Slice", "Gather",
                                        "Tile"};
    if (ml_domain(n->domain))
        return strcmp(n->op_type, "ArrayFeatureExtractor") == 0 && in == 0;
    if (n->domain[0] != '\0' && strcmp(n->domain, "ai.onnx") != 0)
        return false;
    if (strcmp(n->op_type, "Concat") == 0)
        return true;
    for (size_t k = 0; k < sizeof first / sizeof first[0]; k++)
        if (strcmp(n->op_type, first[k]) == 0)
            return in == 0;
    return false;
}

gf_status gf_onnx_pb_strings_flow(gf_onnx_parsed *p, const bool *out_declared, gf_err *err)
{
    gf_onnx_graph *g = p->g;
    char lb[256];
    gf_status st;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const gf_onnx_node *n = &g->nodes[i];
        const gf_onnx_strings *tab = NULL;
        bool numeric = false;
        for (int32_t k = 0; k < n->n_in; k++) {
            const gf_onnx_strings *t = strings_of(p, n->in[k]);
            if (t == NULL) {
                numeric = numeric || (n->in[k] >= 0 && strcmp(n->op_type, "Concat") == 0);
                continue;
            }
            if (!moves(n, k))
                return gf_err_set(err, GF_ERR_UNSUPPORTED, "node %s reads strings (input "
                                  "'%.200s' is tensor(string)): gpufaas carries strings only "
                                  "as class labels, through Identity, Reshape, Flatten, "
                                  "Squeeze, Unsqueeze, Transpose, Expand, Slice, Gather, Tile, "
                                  "Concat and ArrayFeatureExtractor",
                                  gf_onnx_node_label(g, n, lb, sizeof lb),
                                  g->values[n->in[k]].name);
            if (tab != NULL && tab != t)
                return gf_err_set(err, GF_ERR_UNSUPPORTED, "node %s concatenates strings from "
                                  "different tensors, which gpufaas does not",
                                  gf_onnx_node_label(g, n, lb, sizeof lb));
            tab = t;
        }
        if (tab != NULL && numeric)
            return gf_err_set(err, GF_ERR_INVALID, "node %s concatenates strings and numbers",
                              gf_onnx_node_label(g, n, lb, sizeof lb));
        if (tab != NULL && n->n_out > 0 && n->out[0] >= 0 &&
            (st = gf_onnx_pb_strings_set(p, n->out[0], tab, err)) != GF_OK)
            return st;
    }
    for (int32_t i = 0; i < g->n_outputs; i++) {
        const gf_onnx_value *v = &g->values[g->outputs[i]];
        const gf_onnx_strings *t = strings_of(p, g->outputs[i]);
        if (out_declared[i] && t == NULL)
            return gf_err_set(err, GF_ERR_UNSUPPORTED, "output '%.200s' is tensor(string), "
                              "and not class labels gpufaas can give (strings from a "
                              "classifier's classlabels_strings or a string constant)",
                              v->name);
        if (!out_declared[i] && t != NULL)
            return gf_err_set(err, GF_ERR_INVALID, "output '%.200s' holds strings but the "
                              "graph declares it %s", v->name,
                              v->dtype == GF_DT_INVALID ? "without a type" : "numeric");
        if (t != NULL && (st = gf_onnx_graph_set_out_strings(
                              g, i, t->n, (const char *const *)t->s, err)) != GF_OK)
            return st;
    }
    return GF_OK;
}
