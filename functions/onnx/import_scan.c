/* gpufaas — the Scan bodies the onnx kind runs (functions/onnx).
 *
 * Scan's body is a subgraph run once per slice of its scan inputs. The plan
 * has no subgraphs; what it has is the body skl2onnx writes for pairwise
 * squared Euclidean distances (its KNeighbors* converters, and any model
 * through skl2onnx.algebra.onnx_ops's cdist): one state S (the query rows,
 * [N, D]) and one scan input (the reference rows, [M, D], a row X per
 * iteration), and
 *     state_out = Identity(S)
 *     scan_out  = ReduceSumSquare(Sub(S, X), axes=[1], keepdims=0)   ([N])
 * so that Scan's outputs are S and the [M, N] squared distances. The
 * importer recognises exactly that body (Identity chains, Sub either way
 * round, axes 1 or -1 as the attribute or, from opset 18, a constant input)
 * and replaces the graph attribute with the string GF_ONNX_SCAN_SQEUCLIDEAN,
 * which ops_scan.c runs as one broadcast Sub and one reduction per block of
 * reference rows: the body's arithmetic, in the body's order. Any other
 * body is refused as unsupported, naming what it computes.
 */
#include <stdio.h>
#include <string.h>

#include "functions/onnx/import_pb.h"

/* What a body value is: one of the body inputs, their difference, or the
 * row sums of its squares. */
enum { F_NONE, F_STATE, F_ROW, F_DIFF, F_DIST };

#define BODY_MAX_NODES 16

typedef struct body_val {
    const char *name;
    int form;
} body_val;

static int form_of(const body_val *v, int n, const char *name)
{
    for (int i = n - 1; i >= 0; i--)
        if (strcmp(v[i].name, name) == 0)
            return v[i].form;
    return F_NONE;
}

static bool default_domain(const char *d)
{
    return d == NULL || d[0] == '\0' || strcmp(d, "ai.onnx") == 0;
}

/* The axes of a ReduceSumSquare in the body: the attribute, or input 1 (a
 * body initializer or a Constant node before it, kept in consts). */
static bool axes_are_last(const Onnx__NodeProto *n, const Onnx__GraphProto *b)
{
    const Onnx__AttributeProto *a = gf_onnx_pb_attr(n, "axes");
    const Onnx__AttributeProto *kd = gf_onnx_pb_attr(n, "keepdims");
    if (kd == NULL || kd->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT || kd->i != 0)
        return false;
    int64_t axis;
    if (a != NULL) {
        if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS || a->n_ints != 1 ||
            n->n_input != 1)
            return false;
        axis = a->ints[0];
    } else {
        if (n->n_input != 2 || n->input[1] == NULL)
            return false;
        const Onnx__TensorProto *t = NULL;
        for (size_t i = 0; i < b->n_initializer && t == NULL; i++)
            if (b->initializer[i]->name != NULL &&
                strcmp(b->initializer[i]->name, n->input[1]) == 0)
                t = b->initializer[i];
        for (size_t i = 0; i < b->n_node && t == NULL; i++) {
            const Onnx__NodeProto *c = b->node[i];
            if (c->op_type != NULL && strcmp(c->op_type, "Constant") == 0 &&
                c->n_output == 1 && c->output[0] != NULL &&
                strcmp(c->output[0], n->input[1]) == 0) {
                const Onnx__AttributeProto *v = gf_onnx_pb_attr(c, "value");
                if (v != NULL && v->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)
                    t = v->t;
            }
        }
        if (t == NULL || t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || t->n_dims > 1 ||
            (t->n_dims == 1 && t->dims[0] != 1))
            return false;
        if (t->n_int64_data == 1)
            axis = t->int64_data[0];
        else if (t->has_raw_data && t->raw_data.len == 8)
            memcpy(&axis, t->raw_data.data, 8); /* little-endian, as ONNX stores it */
        else
            return false;
    }
    return axis == 1 || axis == -1;
}

/* Scan's own attributes: one scan input, every axis and direction 0. */
static bool scan_attrs_plain(const Onnx__NodeProto *np)
{
    static const char *const lists[] = {"scan_input_axes", "scan_input_directions",
                                        "scan_output_axes", "scan_output_directions"};
    const Onnx__AttributeProto *ns = gf_onnx_pb_attr(np, "num_scan_inputs");
    if (ns == NULL || ns->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT || ns->i != 1)
        return false;
    for (size_t k = 0; k < sizeof lists / sizeof lists[0]; k++) {
        const Onnx__AttributeProto *a = gf_onnx_pb_attr(np, lists[k]);
        if (a == NULL)
            continue;
        if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)
            return false;
        for (size_t i = 0; i < a->n_ints; i++)
            if (a->ints[i] != 0)
                return false;
    }
    return np->n_input == 2 && np->n_output == 2;
}

gf_status gf_onnx_scan_body(const Onnx__NodeProto *np, const Onnx__AttributeProto *body,
                            const char *lb, const char **kind, gf_err *err)
{
    static const char *const unsupported =
        "node %s: gpufaas runs Scan only with the body skl2onnx writes for pairwise squared "
        "Euclidean distances (KNeighbors models: one state, one scan input, Identity of the "
        "state and ReduceSumSquare(Sub(state, row), axes=[1], keepdims=0)); %s";
    if (body->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH || body->g == NULL)
        return gf_err_set(err, GF_ERR_INVALID, "node %s: attribute 'body' must be a graph", lb);
    if (!scan_attrs_plain(np))
        return gf_err_set(err, GF_ERR_UNSUPPORTED, unsupported, lb,
                          "this one has other inputs, outputs, axes or directions");
    const Onnx__GraphProto *b = body->g;
    if (b->n_input != 2 || b->n_output != 2 || b->n_node > BODY_MAX_NODES ||
        b->input[0]->name == NULL || b->input[1]->name == NULL ||
        b->output[0]->name == NULL || b->output[1]->name == NULL)
        return gf_err_set(err, GF_ERR_UNSUPPORTED, unsupported, lb,
                          "this body has other inputs, outputs or more nodes");
    body_val v[2 + BODY_MAX_NODES];
    int nv = 0;
    v[nv++] = (body_val){b->input[0]->name, F_STATE};
    v[nv++] = (body_val){b->input[1]->name, F_ROW};
    for (size_t i = 0; i < b->n_node; i++) {
        const Onnx__NodeProto *n = b->node[i];
        const char *op = n->op_type != NULL ? n->op_type : "";
        if (strcmp(op, "Constant") == 0 && default_domain(n->domain))
            continue; /* only an axes input may use it: checked there */
        if (!default_domain(n->domain) || n->n_output != 1 || n->output[0] == NULL ||
            n->n_input < 1 || n->input[0] == NULL)
            return gf_err_set(err, GF_ERR_UNSUPPORTED, unsupported, lb,
                              "its body has a node of another form");
        int f0 = form_of(v, nv, n->input[0]), form = F_NONE;
        if (strcmp(op, "Identity") == 0 && n->n_input == 1) {
            form = f0;
        } else if (strcmp(op, "Sub") == 0 && n->n_input == 2 && n->input[1] != NULL) {
            int f1 = form_of(v, nv, n->input[1]);
            if ((f0 == F_STATE && f1 == F_ROW) || (f0 == F_ROW && f1 == F_STATE))
                form = F_DIFF;
        } else if (strcmp(op, "ReduceSumSquare") == 0 && f0 == F_DIFF && axes_are_last(n, b)) {
            form = F_DIST;
        }
        if (form == F_NONE) {
            char what[200];
            snprintf(what, sizeof what, "its body computes something else (node '%.64s', "
                     "%.64s)", n->output[0], op);
            return gf_err_set(err, GF_ERR_UNSUPPORTED, unsupported, lb, what);
        }
        v[nv++] = (body_val){n->output[0], form};
    }
    if (form_of(v, nv, b->output[0]->name) != F_STATE ||
        form_of(v, nv, b->output[1]->name) != F_DIST)
        return gf_err_set(err, GF_ERR_UNSUPPORTED, unsupported, lb,
                          "its body's outputs are something else");
    *kind = GF_ONNX_SCAN_SQEUCLIDEAN;
    return GF_OK;
}
