/* gpufaas — the JSON form of an ONNX graph (functions/onnx).
 *
 *   {"format": "gpufaas.onnx.graph", "version": 1, "producer": "pytorch 2.5",
 *    "opsets": [["", 17], ["ai.onnx.ml", 1]],
 *    "values": [[name, kind, dtype | null, shape | null], ...],
 *    "inputs": [value, ...], "outputs": [value, ...],
 *    "output_strings": [null | [string, ...], ...]   (optional: per output,
 *                      the strings its I64 indices name; gf_onnx_strings),
 *    "nodes": [{"op": "Conv", "domain": "", "name": "conv1",
 *               "in": [value | -1, ...], "out": [value | -1, ...],
 *               "attrs": [[name, type, v], ...]}, ...]}
 *
 * kind is 0 (node output), 1 (graph input) or 2 (initializer); shape dims are
 * >= 0 or -1 (symbolic). Attribute values: INT an integer, FLOAT the float's
 * 32 bits as an unsigned integer (exact, and NaN and infinities survive),
 * STRING a string, INTS and FLOATS arrays of those, STRINGS an array of
 * strings, TENSOR {"dtype", "shape", "hex"} with the little-endian bytes.
 * The reader checks every field and bound before the graph is used.
 */
#include "functions/onnx/graph.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/json.h"
#include "core/tensor.h"

static void put_str(gf_buf *b, const char *s) { gf_buf_append_json_str(b, s, strlen(s)); }

static void put_shape(gf_buf *b, int32_t rank, const int64_t *shape)
{
    if (rank < 0) {
        gf_buf_append_str(b, "null");
        return;
    }
    gf_buf_append_str(b, "[");
    for (int32_t k = 0; k < rank; k++)
        gf_buf_printf(b, "%s%" PRId64, k ? "," : "", shape[k]);
    gf_buf_append_str(b, "]");
}

static void put_ids(gf_buf *b, const int32_t *ids, int32_t n)
{
    gf_buf_append_str(b, "[");
    for (int32_t k = 0; k < n; k++)
        gf_buf_printf(b, "%s%d", k ? "," : "", ids[k]);
    gf_buf_append_str(b, "]");
}

static void put_attr(gf_buf *b, const gf_onnx_attr *a)
{
    gf_buf_append_str(b, "[");
    put_str(b, a->name);
    gf_buf_printf(b, ",%d,", (int)a->type);
    switch (a->type) {
    case GF_ONNX_ATTR_INT:
        gf_buf_printf(b, "%" PRId64, a->i);
        break;
    case GF_ONNX_ATTR_FLOAT:
        gf_buf_printf(b, "%" PRIu32, gf_f32_bits(a->f));
        break;
    case GF_ONNX_ATTR_STRING:
        put_str(b, a->s);
        break;
    case GF_ONNX_ATTR_INTS:
    case GF_ONNX_ATTR_FLOATS:
    case GF_ONNX_ATTR_STRINGS:
        gf_buf_append_str(b, "[");
        for (size_t k = 0; k < a->n; k++) {
            if (k)
                gf_buf_append_str(b, ",");
            if (a->type == GF_ONNX_ATTR_INTS)
                gf_buf_printf(b, "%" PRId64, a->ints[k]);
            else if (a->type == GF_ONNX_ATTR_FLOATS)
                gf_buf_printf(b, "%" PRIu32, gf_f32_bits(a->floats[k]));
            else
                put_str(b, a->strings[k]);
        }
        gf_buf_append_str(b, "]");
        break;
    case GF_ONNX_ATTR_TENSOR: {
        const gf_onnx_const *t = a->t;
        gf_buf_append_str(b, "{\"dtype\":");
        put_str(b, gf_dtype_st_name(t->dtype));
        gf_buf_append_str(b, ",\"shape\":");
        put_shape(b, t->rank, t->shape);
        gf_buf_append_str(b, ",\"hex\":\"");
        static const char hx[] = "0123456789abcdef";
        const unsigned char *p = t->data;
        for (size_t k = 0; k < t->nbytes; k++) {
            char two[2] = {hx[p[k] >> 4], hx[p[k] & 15]};
            gf_buf_append(b, two, 2);
        }
        gf_buf_append_str(b, "\"}");
        break;
    }
    default:
        gf_buf_append_str(b, "null");
    }
    gf_buf_append_str(b, "]");
}

gf_status gf_onnx_graph_to_json(const gf_onnx_graph *g, gf_buf *out, gf_err *err)
{
    gf_buf *b = out;
    size_t start = b->len;
    gf_buf_printf(b, "{\"format\":\"%s\",\"version\":%d,\"producer\":", GF_ONNX_GRAPH_FORMAT,
                  GF_ONNX_GRAPH_VERSION);
    put_str(b, g->producer != NULL ? g->producer : "");
    gf_buf_append_str(b, ",\"opsets\":[");
    for (int32_t i = 0; i < g->n_opsets; i++) {
        gf_buf_append_str(b, i ? ",[" : "[");
        put_str(b, g->opsets[i].domain);
        gf_buf_printf(b, ",%" PRId64 "]", g->opsets[i].version);
    }
    gf_buf_append_str(b, "],\n\"values\":[");
    for (int32_t i = 0; i < g->n_values; i++) {
        const gf_onnx_value *v = &g->values[i];
        gf_buf_append_str(b, i ? ",\n[" : "\n[");
        put_str(b, v->name);
        gf_buf_printf(b, ",%d,", (int)v->kind);
        if (v->dtype == GF_DT_INVALID)
            gf_buf_append_str(b, "null");
        else
            put_str(b, gf_dtype_st_name(v->dtype));
        gf_buf_append_str(b, ",");
        put_shape(b, v->rank, v->shape);
        gf_buf_append_str(b, "]");
    }
    gf_buf_append_str(b, "],\n\"inputs\":");
    put_ids(b, g->inputs, g->n_inputs);
    gf_buf_append_str(b, ",\"outputs\":");
    put_ids(b, g->outputs, g->n_outputs);
    if (g->out_strings != NULL) {
        gf_buf_append_str(b, ",\n\"output_strings\":[");
        for (int32_t i = 0; i < g->n_outputs; i++) {
            const gf_onnx_strings *t = &g->out_strings[i];
            gf_buf_append_str(b, i ? "," : "");
            if (t->n == 0) {
                gf_buf_append_str(b, "null");
                continue;
            }
            gf_buf_append_str(b, "[");
            for (int32_t k = 0; k < t->n; k++) {
                gf_buf_append_str(b, k ? "," : "");
                put_str(b, t->s[k]);
            }
            gf_buf_append_str(b, "]");
        }
        gf_buf_append_str(b, "]");
    }
    gf_buf_append_str(b, ",\n\"nodes\":[");
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const gf_onnx_node *n = &g->nodes[i];
        gf_buf_append_str(b, i ? ",\n{\"op\":" : "\n{\"op\":");
        put_str(b, n->op_type);
        gf_buf_append_str(b, ",\"domain\":");
        put_str(b, n->domain);
        gf_buf_append_str(b, ",\"name\":");
        put_str(b, n->name);
        gf_buf_append_str(b, ",\"in\":");
        put_ids(b, n->in, n->n_in);
        gf_buf_append_str(b, ",\"out\":");
        put_ids(b, n->out, n->n_out);
        gf_buf_append_str(b, ",\"attrs\":[");
        for (int32_t k = 0; k < n->n_attrs; k++) {
            if (k)
                gf_buf_append_str(b, ",");
            put_attr(b, &n->attrs[k]);
        }
        gf_buf_append_str(b, "]}");
    }
    if (gf_buf_append_str(b, "]}\n") != GF_OK || b->data == NULL) {
        b->len = start;
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory writing the graph");
    }
    return GF_OK;
}

/* ---- reading ------------------------------------------------------------------- */

#define BAD(...) gf_err_set(err, GF_ERR_FORMAT, "graph file: " __VA_ARGS__)

static gf_status get_string(const gf_json *v, const char *what, char **out, gf_err *err)
{
    if (v == NULL || v->type != GF_JSON_STRING)
        return BAD("%s must be a string", what);
    if (strlen(v->u.str.s) != v->u.str.len || v->u.str.len > GF_ONNX_MAX_NAME * 4)
        return BAD("%s contains a NUL byte or is too long", what);
    if ((*out = strdup(v->u.str.s)) == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    return GF_OK;
}

static bool is_int(const gf_json *v, int64_t lo, int64_t hi)
{
    return v != NULL && v->type == GF_JSON_NUMBER && v->u.num.is_int && v->u.num.i >= lo &&
           v->u.num.i <= hi;
}

static gf_status get_shape(const gf_json *v, int32_t *rank, int64_t *shape, bool allow_null,
                           gf_err *err)
{
    if (v != NULL && v->type == GF_JSON_NULL && allow_null) {
        *rank = -1;
        return GF_OK;
    }
    if (v == NULL || v->type != GF_JSON_ARRAY || v->u.arr.n > GF_MAX_RANK)
        return BAD("a shape must be an array of at most %d dims", GF_MAX_RANK);
    *rank = (int32_t)v->u.arr.n;
    for (size_t k = 0; k < v->u.arr.n; k++) {
        if (!is_int(v->u.arr.items[k], -1, INT64_C(1) << 48))
            return BAD("a shape dim must be an integer >= -1");
        shape[k] = v->u.arr.items[k]->u.num.i;
    }
    return GF_OK;
}

static gf_status get_dtype(const gf_json *v, gf_dtype *out, gf_err *err)
{
    if (v == NULL || v->type != GF_JSON_STRING)
        return BAD("a dtype must be a string");
    *out = gf_dtype_from_st_name(v->u.str.s, v->u.str.len);
    if (*out == GF_DT_INVALID)
        return BAD("unknown dtype '%.16s'", v->u.str.s);
    return GF_OK;
}

static gf_status get_ids(const gf_json *v, int32_t n_values, bool allow_absent, int32_t **out,
                         int32_t *n_out, gf_err *err)
{
    if (v == NULL || v->type != GF_JSON_ARRAY || v->u.arr.n > GF_ONNX_MAX_NODE_IO)
        return BAD("a value list must be an array of at most %d entries", GF_ONNX_MAX_NODE_IO);
    *n_out = (int32_t)v->u.arr.n;
    *out = malloc((v->u.arr.n + 1) * sizeof **out);
    if (*out == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < v->u.arr.n; k++) {
        if (!is_int(v->u.arr.items[k], allow_absent ? -1 : 0, n_values - 1))
            return BAD("value index out of range");
        (*out)[k] = (int32_t)v->u.arr.items[k]->u.num.i;
    }
    return GF_OK;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static gf_status get_attr(const gf_json *v, gf_onnx_attr *a, gf_err *err)
{
    if (v->type != GF_JSON_ARRAY || v->u.arr.n != 3)
        return BAD("an attribute must be [name, type, value]");
    gf_status st = get_string(v->u.arr.items[0], "an attribute name", &a->name, err);
    if (st != GF_OK)
        return st;
    const gf_json *ty = v->u.arr.items[1], *x = v->u.arr.items[2];
    if (!is_int(ty, 1, 8) || ty->u.num.i == GF_ONNX_ATTR_GRAPH)
        return BAD("attribute '%.64s': bad type", a->name);
    a->type = (gf_onnx_attr_type)ty->u.num.i;
    switch (a->type) {
    case GF_ONNX_ATTR_INT:
        if (!is_int(x, INT64_MIN, INT64_MAX))
            return BAD("attribute '%.64s' must be an integer", a->name);
        a->i = x->u.num.i;
        return GF_OK;
    case GF_ONNX_ATTR_FLOAT:
        if (!is_int(x, 0, UINT32_MAX))
            return BAD("attribute '%.64s' must hold a float's bits", a->name);
        a->f = gf_bits_f32((uint32_t)x->u.num.i);
        return GF_OK;
    case GF_ONNX_ATTR_STRING:
        return get_string(x, "a string attribute", &a->s, err);
    case GF_ONNX_ATTR_INTS:
    case GF_ONNX_ATTR_FLOATS:
    case GF_ONNX_ATTR_STRINGS: {
        if (x->type != GF_JSON_ARRAY || x->u.arr.n > GF_ONNX_MAX_ATTR_LIST)
            return BAD("attribute '%.64s' must be an array", a->name);
        size_t n = x->u.arr.n;
        a->n = n;
        if (a->type == GF_ONNX_ATTR_INTS)
            a->ints = malloc((n + 1) * sizeof *a->ints);
        else if (a->type == GF_ONNX_ATTR_FLOATS)
            a->floats = malloc((n + 1) * sizeof *a->floats);
        else
            a->strings = calloc(n + 1, sizeof *a->strings);
        if (a->ints == NULL && a->floats == NULL && a->strings == NULL)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        for (size_t k = 0; k < n; k++) {
            const gf_json *e = x->u.arr.items[k];
            if (a->type == GF_ONNX_ATTR_INTS) {
                if (!is_int(e, INT64_MIN, INT64_MAX))
                    return BAD("attribute '%.64s': not an integer", a->name);
                a->ints[k] = e->u.num.i;
            } else if (a->type == GF_ONNX_ATTR_FLOATS) {
                if (!is_int(e, 0, UINT32_MAX))
                    return BAD("attribute '%.64s': not a float's bits", a->name);
                a->floats[k] = gf_bits_f32((uint32_t)e->u.num.i);
            } else if ((st = get_string(e, "a string", &a->strings[k], err)) != GF_OK) {
                return st;
            }
        }
        return GF_OK;
    }
    case GF_ONNX_ATTR_TENSOR: {
        if (x->type != GF_JSON_OBJECT)
            return BAD("attribute '%.64s' must be a tensor object", a->name);
        gf_dtype dt;
        int32_t rank;
        int64_t shape[GF_MAX_RANK];
        const gf_json *hex = gf_json_get(x, "hex");
        if ((st = get_dtype(gf_json_get(x, "dtype"), &dt, err)) != GF_OK ||
            (st = get_shape(gf_json_get(x, "shape"), &rank, shape, false, err)) != GF_OK)
            return st;
        if (hex == NULL || hex->type != GF_JSON_STRING)
            return BAD("attribute '%.64s': tensor without data", a->name);
        if ((st = gf_onnx_const_new(dt, rank, shape, &a->t, err)) != GF_OK)
            return st;
        if (a->t->nbytes > GF_ONNX_MAX_INLINE_BYTES || hex->u.str.len != 2 * a->t->nbytes)
            return BAD("attribute '%.64s': tensor data does not match its shape", a->name);
        unsigned char *p = a->t->data;
        for (size_t k = 0; k < a->t->nbytes; k++) {
            int hi = hexval(hex->u.str.s[2 * k]), lo = hexval(hex->u.str.s[2 * k + 1]);
            if (hi < 0 || lo < 0)
                return BAD("attribute '%.64s': bad hex data", a->name);
            p[k] = (unsigned char)(hi << 4 | lo);
        }
        return GF_OK;
    }
    default:
        return BAD("attribute '%.64s': bad type", a->name);
    }
}

static gf_status read_node(gf_onnx_graph *g, const gf_json *o, gf_err *err)
{
    if (o->type != GF_JSON_OBJECT)
        return BAD("a node must be an object");
    gf_onnx_node *n = gf_onnx_node_add(g, err);
    if (n == NULL)
        return err != NULL ? err->code : GF_ERR_NOMEM;
    gf_status st;
    if ((st = get_string(gf_json_get(o, "op"), "a node's op", &n->op_type, err)) != GF_OK ||
        (st = get_string(gf_json_get(o, "domain"), "a node's domain", &n->domain, err)) != GF_OK ||
        (st = get_string(gf_json_get(o, "name"), "a node's name", &n->name, err)) != GF_OK ||
        (st = get_ids(gf_json_get(o, "in"), g->n_values, true, &n->in, &n->n_in, err)) != GF_OK ||
        (st = get_ids(gf_json_get(o, "out"), g->n_values, true, &n->out, &n->n_out, err)) !=
            GF_OK)
        return st;
    const gf_json *attrs = gf_json_get(o, "attrs");
    if (attrs == NULL || attrs->type != GF_JSON_ARRAY || attrs->u.arr.n > GF_ONNX_MAX_ATTRS)
        return BAD("node '%.64s': attrs must be an array of at most %d", n->name,
                   GF_ONNX_MAX_ATTRS);
    n->attrs = calloc(attrs->u.arr.n + 1, sizeof *n->attrs);
    if (n->attrs == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < attrs->u.arr.n; k++) {
        n->n_attrs = (int32_t)k + 1;
        if ((st = get_attr(attrs->u.arr.items[k], &n->attrs[k], err)) != GF_OK)
            return st;
    }
    n->opset = gf_onnx_graph_opset(g, n->domain);
    return GF_OK;
}

/* "output_strings" (optional): per graph output null or its strings. */
static gf_status get_out_strings(gf_onnx_graph *g, const gf_json *v, gf_err *err)
{
    if (v == NULL)
        return GF_OK;
    if (v->type != GF_JSON_ARRAY || v->u.arr.n != (size_t)g->n_outputs)
        return BAD("output_strings must be an array with an entry per output");
    for (int32_t i = 0; i < g->n_outputs; i++) {
        const gf_json *e = v->u.arr.items[i];
        if (e->type == GF_JSON_NULL)
            continue;
        if (e->type != GF_JSON_ARRAY || e->u.arr.n == 0 || e->u.arr.n > GF_ONNX_MAX_STRINGS)
            return BAD("output_strings[%d] must be null or 1 to %d strings", i,
                       GF_ONNX_MAX_STRINGS);
        const char **s = calloc(e->u.arr.n, sizeof *s);
        if (s == NULL)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        gf_status st = GF_OK;
        for (size_t k = 0; k < e->u.arr.n && st == GF_OK; k++) {
            const gf_json *x = e->u.arr.items[k];
            if (x->type != GF_JSON_STRING || strlen(x->u.str.s) != x->u.str.len)
                st = BAD("output_strings[%d][%zu] must be a string without NUL", i, k);
            else
                s[k] = x->u.str.s;
        }
        if (st == GF_OK)
            st = gf_onnx_graph_set_out_strings(g, i, (int32_t)e->u.arr.n, s, err);
        free(s);
        if (st != GF_OK)
            return st;
    }
    return GF_OK;
}

static gf_status read_graph(gf_onnx_graph *g, const gf_json *root, gf_err *err)
{
    gf_status st;
    if (root->type != GF_JSON_OBJECT)
        return BAD("not an object");
    const gf_json *fmt = gf_json_get(root, "format"), *ver = gf_json_get(root, "version");
    if (fmt == NULL || fmt->type != GF_JSON_STRING || strcmp(fmt->u.str.s, GF_ONNX_GRAPH_FORMAT))
        return BAD("format is not %s", GF_ONNX_GRAPH_FORMAT);
    if (!is_int(ver, GF_ONNX_GRAPH_VERSION, GF_ONNX_GRAPH_VERSION))
        return BAD("version is not %d (re-deploy the model to convert it)",
                   GF_ONNX_GRAPH_VERSION);
    if ((st = get_string(gf_json_get(root, "producer"), "producer", &g->producer, err)) != GF_OK)
        return st;
    const gf_json *ops = gf_json_get(root, "opsets");
    if (ops == NULL || ops->type != GF_JSON_ARRAY || ops->u.arr.n > 64)
        return BAD("opsets must be an array");
    g->opsets = calloc(ops->u.arr.n + 1, sizeof *g->opsets);
    if (g->opsets == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < ops->u.arr.n; i++) {
        const gf_json *e = ops->u.arr.items[i];
        if (e->type != GF_JSON_ARRAY || e->u.arr.n != 2 || !is_int(e->u.arr.items[1], 1, 1000))
            return BAD("an opset must be [domain, version]");
        g->n_opsets = (int32_t)i + 1;
        if ((st = get_string(e->u.arr.items[0], "an opset domain", &g->opsets[i].domain, err)) !=
            GF_OK)
            return st;
        g->opsets[i].version = e->u.arr.items[1]->u.num.i;
    }
    const gf_json *vals = gf_json_get(root, "values");
    if (vals == NULL || vals->type != GF_JSON_ARRAY || vals->u.arr.n > GF_ONNX_MAX_VALUES)
        return BAD("values must be an array of at most %d", GF_ONNX_MAX_VALUES);
    for (size_t i = 0; i < vals->u.arr.n; i++) {
        const gf_json *e = vals->u.arr.items[i];
        if (e->type != GF_JSON_ARRAY || e->u.arr.n != 4 || e->u.arr.items[0]->type !=
            GF_JSON_STRING || !is_int(e->u.arr.items[1], 0, 2))
            return BAD("a value must be [name, kind, dtype, shape]");
        const gf_json *nm = e->u.arr.items[0];
        if (strlen(nm->u.str.s) != nm->u.str.len)
            return BAD("a value name contains a NUL byte");
        int32_t idx;
        if ((st = gf_onnx_value_add(g, nm->u.str.s, (gf_onnx_vkind)e->u.arr.items[1]->u.num.i,
                                    &idx, err)) != GF_OK)
            return st;
        gf_onnx_value *v = &g->values[idx];
        if (e->u.arr.items[2]->type != GF_JSON_NULL &&
            (st = get_dtype(e->u.arr.items[2], &v->dtype, err)) != GF_OK)
            return st;
        if ((st = get_shape(e->u.arr.items[3], &v->rank, v->shape, true, err)) != GF_OK)
            return st;
        if (v->kind != GF_ONNX_V_NODE && (v->dtype == GF_DT_INVALID || v->rank < 0))
            return BAD("input or initializer '%.64s' without dtype and shape", v->name);
    }
    if ((st = get_ids(gf_json_get(root, "inputs"), g->n_values, false, &g->inputs, &g->n_inputs,
                      err)) != GF_OK ||
        (st = get_ids(gf_json_get(root, "outputs"), g->n_values, false, &g->outputs,
                      &g->n_outputs, err)) != GF_OK)
        return st;
    for (int32_t i = 0; i < g->n_inputs; i++)
        if (g->values[g->inputs[i]].kind != GF_ONNX_V_INPUT)
            return BAD("graph input %d is not an input value", i);
    if (g->n_outputs == 0)
        return BAD("the graph has no outputs");
    if ((st = get_out_strings(g, gf_json_get(root, "output_strings"), err)) != GF_OK)
        return st;
    const gf_json *nodes = gf_json_get(root, "nodes");
    if (nodes == NULL || nodes->type != GF_JSON_ARRAY || nodes->u.arr.n > GF_ONNX_MAX_NODES)
        return BAD("nodes must be an array of at most %d", GF_ONNX_MAX_NODES);
    for (size_t i = 0; i < nodes->u.arr.n; i++)
        if ((st = read_node(g, nodes->u.arr.items[i], err)) != GF_OK)
            return st;
    return gf_onnx_graph_wire(g, err);
}

gf_status gf_onnx_graph_from_json(const char *text, size_t len, gf_onnx_graph **out,
                                  gf_err *err)
{
    *out = NULL;
    if (len > GF_ONNX_MAX_GRAPH_JSON)
        return BAD("%zu bytes is more than the limit of %u", len, GF_ONNX_MAX_GRAPH_JSON);
    gf_json_doc *doc;
    gf_status st = gf_json_parse(text, len, 16, &doc, err);
    if (st != GF_OK) {
        gf_err_prefix(err, "graph file");
        return st;
    }
    gf_onnx_graph *g;
    if ((st = gf_onnx_graph_new(&g, err)) == GF_OK)
        st = read_graph(g, gf_json_doc_root(doc), err);
    gf_json_doc_free(doc);
    if (st != GF_OK) {
        gf_onnx_graph_free(g);
        return st;
    }
    *out = g;
    return GF_OK;
}
