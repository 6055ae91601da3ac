/* gpufaas — the ONNX op table: lookup, binding nodes, the docs' table, and
 * helpers the op files share (functions/onnx). */
#include "functions/onnx/optable.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"

static const gf_onnx_op *const gf_onnx_lists[] = {
    gf_onnx_ops_elementwise, gf_onnx_ops_binary, gf_onnx_ops_shape, gf_onnx_ops_gather,
    gf_onnx_ops_scan, gf_onnx_ops_nn, gf_onnx_ops_ml, gf_onnx_ops_trees, gf_onnx_ops_svm,
};
#define N_LISTS (sizeof gf_onnx_lists / sizeof gf_onnx_lists[0])

static bool domain_default(const char *d) { return d[0] == '\0' || strcmp(d, "ai.onnx") == 0; }

static bool domain_eq(const char *a, const char *b)
{
    return domain_default(a) ? domain_default(b) : strcmp(a, b) == 0;
}

int gf_onnx_op_version(const gf_onnx_op *op, int64_t opset)
{
    int best = 0;
    for (int i = 0; i < 10 && op->since[i] != 0; i++) {
        int v = op->since[i] < 0 ? -op->since[i] : op->since[i];
        if (v <= opset)
            best = op->since[i];
    }
    return best;
}

static void versions_str(const gf_onnx_op *op, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < 10 && op->since[i] != 0 && used < cap; i++) {
        if (op->since[i] < 0)
            continue;
        int n = snprintf(buf + used, cap - used, "%s%d", used ? ", " : "", op->since[i]);
        used += n > 0 ? (size_t)n : 0;
    }
}

const gf_onnx_op *gf_onnx_op_find(const char *domain, const char *type, int64_t opset,
                                  char *why, size_t why_cap)
{
    const gf_onnx_op *op = NULL;
    bool domain_known = false;
    for (size_t l = 0; l < N_LISTS && op == NULL; l++)
        for (const gf_onnx_op *o = gf_onnx_lists[l]; o->type != NULL && op == NULL; o++) {
            if (domain_eq(o->domain, domain)) {
                domain_known = true;
                if (strcmp(o->type, type) == 0)
                    op = o;
            }
        }
    if (op == NULL) {
        if (!domain_known && strcmp(domain, "com.microsoft") == 0)
            snprintf(why, why_cap, "onnxruntime's contrib ops (com.microsoft) are not supported: "
                     "export with standard ONNX ops (no onnxruntime graph optimisation)");
        else if (!domain_known)
            snprintf(why, why_cap, "no ops of domain '%.64s' are supported", domain);
        else
            snprintf(why, why_cap, "op not supported");
        return NULL;
    }
    if (opset <= 0) {
        snprintf(why, why_cap, "the model imports no opset for domain '%.64s'",
                 domain[0] ? domain : "ai.onnx");
        return NULL;
    }
    /* an opset newer than ONNX's newest the table was checked against (onnx
     * 1.23: ai.onnx 28, ai.onnx.ml 5) may have changed what the op means */
    int64_t newest = domain_default(domain) ? GF_ONNX_OPSET_NEWEST : GF_ONNX_ML_OPSET_NEWEST;
    if (opset > newest) {
        snprintf(why, why_cap, "opset %" PRId64 " is newer than the newest this gpufaas knows "
                 "(%" PRId64 "): export with an opset of at most %" PRId64, opset, newest,
                 newest);
        return NULL;
    }
    int v = gf_onnx_op_version(op, opset);
    if (v <= 0) {
        char vs[64];
        versions_str(op, vs, sizeof vs);
        if (v == 0)
            snprintf(why, why_cap, "opset %" PRId64 " selects a version older than those "
                     "implemented (%s)", opset, vs);
        else
            snprintf(why, why_cap, "opset %" PRId64 " selects version %d, which is not "
                     "implemented (implemented: %s)", opset, -v, vs);
        return NULL;
    }
    return op;
}

static char attr_code(gf_onnx_attr_type t)
{
    switch (t) {
    case GF_ONNX_ATTR_FLOAT: return 'f';
    case GF_ONNX_ATTR_INT: return 'i';
    case GF_ONNX_ATTR_STRING: return 's';
    case GF_ONNX_ATTR_FLOATS: return 'F';
    case GF_ONNX_ATTR_INTS: return 'I';
    case GF_ONNX_ATTR_STRINGS: return 'S';
    case GF_ONNX_ATTR_TENSOR: return 'T';
    default: return '?';
    }
}

static const char *attr_type_name(char c)
{
    switch (c) {
    case 'f': return "a float";
    case 'i': return "an int";
    case 's': return "a string";
    case 'F': return "a list of floats";
    case 'I': return "a list of ints";
    case 'S': return "a list of strings";
    case 'T': return "a tensor";
    case 'W': return "a list of floats (weights)";
    case 'J': return "a list of ints (weights)";
    default: return "a graph or another type";
    }
}

/* The type code attribute `name` has in spec ("a:f,b:I"), or 0. */
static char spec_type(const char *spec, const char *name)
{
    size_t nl = strlen(name);
    for (const char *p = spec; p != NULL && *p;) {
        const char *colon = strchr(p, ':');
        if (colon == NULL)
            break;
        if ((size_t)(colon - p) == nl && strncmp(p, name, nl) == 0)
            return colon[1];
        p = strchr(colon, ',');
        if (p != NULL)
            p++;
    }
    return 0;
}

static void spec_names(const char *spec, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (const char *p = spec; p != NULL && *p && used + 1 < cap;) {
        const char *colon = strchr(p, ':');
        if (colon == NULL)
            break;
        int n = snprintf(buf + used, cap - used, "%s%.*s", used ? ", " : "", (int)(colon - p), p);
        used += n > 0 ? (size_t)n : 0;
        p = strchr(colon, ',');
        if (p != NULL)
            p++;
    }
    if (used == 0)
        snprintf(buf, cap, "none");
}

int gf_onnx_lifted_count(const gf_onnx_op *op)
{
    int n = 0;
    for (const char *p = op->attrs; p != NULL && (p = strchr(p, ':')) != NULL; p++)
        n += p[1] == 'W' || p[1] == 'J';
    return n;
}

int gf_onnx_lifted_input(const gf_onnx_op *op, const char *name, char *code)
{
    size_t nl = strlen(name);
    int k = 0;
    for (const char *p = op->attrs; p != NULL && *p;) {
        const char *colon = strchr(p, ':');
        if (colon == NULL)
            break;
        if (colon[1] == 'W' || colon[1] == 'J') {
            k++;
            if ((size_t)(colon - p) == nl && strncmp(p, name, nl) == 0) {
                *code = colon[1];
                return k;
            }
        }
        p = strchr(colon, ',');
        if (p != NULL)
            p++;
    }
    return 0;
}

static const char *domain_name(const char *d) { return d[0] ? d : "ai.onnx"; }

gf_status gf_onnx_node_bind(const gf_onnx_graph *g, gf_onnx_node *n, gf_err *err)
{
    char lb[256], why[256];
    gf_onnx_node_label(g, n, lb, sizeof lb);
    const gf_onnx_op *op = gf_onnx_op_find(n->domain, n->op_type, n->opset, why, sizeof why);
    if (op == NULL)
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "node %s, domain %s, opset %" PRId64 ": %s",
                          lb, domain_name(n->domain), n->opset, why);
    int v = gf_onnx_op_version(op, n->opset);
    if (n->n_in < op->min_in || (op->max_in >= 0 && n->n_in > op->max_in))
        return gf_err_set(err, GF_ERR_INVALID, "node %s (version %d): %d inputs, expected %d to "
                          "%d", lb, v, n->n_in, op->min_in, op->max_in);
    for (int k = 0; k < op->min_in; k++)
        if (n->in[k] < 0)
            return gf_err_set(err, GF_ERR_INVALID, "node %s: required input %d is empty", lb, k);
    if (n->n_out < op->min_out || n->n_out > op->max_out)
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "node %s (version %d): %d outputs; gpufaas "
                          "computes %d to %d", lb, v, n->n_out, op->min_out, op->max_out);
    for (int32_t k = 0; k < n->n_attrs; k++) {
        const gf_onnx_attr *a = &n->attrs[k];
        char want = spec_type(op->attrs, a->name);
        if (want == 0) {
            char names[256];
            spec_names(op->attrs, names, sizeof names);
            return gf_err_set(err, GF_ERR_UNSUPPORTED, "node %s, domain %s, opset %" PRId64
                              ": attribute '%.64s' is not understood (%s understands: %s)", lb,
                              domain_name(n->domain), n->opset, a->name, op->type, names);
        }
        if (want == 'W' || want == 'J')
            return gf_err_set(err, GF_ERR_INTERNAL, "node %s: attribute '%.64s' should have "
                              "become an initializer at import", lb, a->name);
        if (attr_code(a->type) != want)
            return gf_err_set(err, GF_ERR_INVALID, "node %s: attribute '%.64s' must be %s, not "
                              "%s", lb, a->name, attr_type_name(want),
                              attr_type_name(attr_code(a->type)));
        for (int32_t j = 0; j < k; j++)
            if (strcmp(n->attrs[j].name, a->name) == 0)
                return gf_err_set(err, GF_ERR_INVALID, "node %s: attribute '%.64s' is given "
                                  "twice", lb, a->name);
    }
    n->op = op;
    return GF_OK;
}

gf_status gf_onnx_graph_bind(gf_onnx_graph *g, gf_err *err)
{
    /* every node is checked; unsupported ops are listed once each */
    enum { MAXU = 16 };
    struct unsup { const char *type, *domain; int64_t opset; int32_t node, count; } u[MAXU];
    int nu = 0, more = 0;
    gf_err first;
    gf_err_clear(&first);
    char why[256];
    for (int32_t i = 0; i < g->n_nodes; i++) {
        gf_onnx_node *n = &g->nodes[i];
        if (gf_onnx_op_find(n->domain, n->op_type, n->opset, why, sizeof why) == NULL) {
            int j = 0;
            while (j < nu && !(strcmp(u[j].type, n->op_type) == 0 &&
                               strcmp(u[j].domain, n->domain) == 0))
                j++;
            if (j < nu) {
                u[j].count++;
            } else if (nu < MAXU) {
                u[nu++] = (struct unsup){n->op_type, n->domain, n->opset, i, 1};
            } else {
                more++;
            }
            continue;
        }
        if (first.code == GF_OK)
            gf_onnx_node_bind(g, n, &first);
        else
            gf_onnx_node_bind(g, n, NULL);
    }
    if (nu == 0) {
        if (first.code != GF_OK) {
            gf_err_set(err, first.code, "%s", first.msg);
            return first.code;
        }
        return GF_OK;
    }
    gf_buf b;
    gf_buf_init(&b);
    char lb[256];
    gf_onnx_node *n0 = &g->nodes[u[0].node];
    gf_onnx_op_find(n0->domain, n0->op_type, n0->opset, why, sizeof why);
    gf_buf_printf(&b, "%d unsupported op%s: ", nu + more, nu + more == 1 ? "" : "s");
    for (int j = 0; j < nu; j++) {
        gf_onnx_node *n = &g->nodes[u[j].node];
        gf_buf_printf(&b, "%s%s (domain %s, opset %" PRId64 ", node %s%s)", j ? "; " : "",
                      u[j].type, domain_name(u[j].domain), u[j].opset,
                      gf_onnx_node_label(g, n, lb, sizeof lb), u[j].count > 1 ? " and more" : "");
    }
    if (more)
        gf_buf_printf(&b, "; and %d more", more);
    gf_buf_printf(&b, " - first: %s", why);
    gf_status st = gf_err_set(err, GF_ERR_UNSUPPORTED, "%s", b.data ? b.data : "unsupported ops");
    gf_buf_deinit(&b);
    return st;
}

gf_status gf_onnx_optable_markdown(gf_buf *out)
{
    gf_buf_append_str(out, "| op | domain | opset versions | attributes | notes |\n"
                           "|---|---|---|---|---|\n");
    for (size_t l = 0; l < N_LISTS; l++)
        for (const gf_onnx_op *o = gf_onnx_lists[l]; o->type != NULL; o++) {
            char vs[64], names[512];
            versions_str(o, vs, sizeof vs);
            spec_names(o->attrs, names, sizeof names);
            gf_buf_printf(out, "| %s | %s | %s | %s | %s |\n", o->type, domain_name(o->domain),
                          vs, names, o->notes ? o->notes : "");
        }
    return out->data != NULL ? GF_OK : GF_ERR_NOMEM;
}

/* ---- helpers ------------------------------------------------------------------- */

/* "node 'x' (Op): <message>" into err. */
static gf_status node_failv(const gf_onnx_graph *g, const gf_onnx_node *n, gf_err *err,
                            gf_status code, const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));

static gf_status node_failv(const gf_onnx_graph *g, const gf_onnx_node *n, gf_err *err,
                            gf_status code, const char *fmt, va_list ap)
{
    char lb[256], msg[GF_ERR_MSG_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return gf_err_set(err, code, "node %s: %s", gf_onnx_node_label(g, n, lb, sizeof lb), msg);
}

gf_status gf_onnx_fail(const gf_onnx_infer_ctx *c, gf_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gf_status st = node_failv(c->g, c->n, c->err, code, fmt, ap);
    va_end(ap);
    return st;
}

int64_t gf_onnx_attr_int(const gf_onnx_node *n, const char *name, int64_t dflt)
{
    const gf_onnx_attr *a = gf_onnx_attr_find(n, name);
    return a != NULL && a->type == GF_ONNX_ATTR_INT ? a->i : dflt;
}

float gf_onnx_attr_float(const gf_onnx_node *n, const char *name, float dflt)
{
    const gf_onnx_attr *a = gf_onnx_attr_find(n, name);
    return a != NULL && a->type == GF_ONNX_ATTR_FLOAT ? a->f : dflt;
}

const char *gf_onnx_attr_str(const gf_onnx_node *n, const char *name, const char *dflt)
{
    const gf_onnx_attr *a = gf_onnx_attr_find(n, name);
    return a != NULL && a->type == GF_ONNX_ATTR_STRING ? a->s : dflt;
}

const int64_t *gf_onnx_attr_ints(const gf_onnx_node *n, const char *name, size_t *n_out)
{
    const gf_onnx_attr *a = gf_onnx_attr_find(n, name);
    if (a == NULL || a->type != GF_ONNX_ATTR_INTS) {
        *n_out = 0;
        return NULL;
    }
    *n_out = a->n;
    return a->ints;
}

int64_t gf_onnx_numel(const gf_onnx_tinfo *t)
{
    int64_t n = 1;
    for (int32_t k = 0; k < t->rank; k++)
        n *= t->shape[k];
    return n;
}

void gf_onnx_strides(int32_t rank, const int64_t *shape, int64_t *strides)
{
    int64_t s = 1;
    for (int32_t k = rank - 1; k >= 0; k--) {
        strides[k] = s;
        s *= shape[k];
    }
}

bool gf_onnx_axis(int64_t axis, int32_t rank, bool extra, int64_t *out)
{
    if (axis < -(int64_t)rank || axis > (int64_t)rank - (extra ? 0 : 1))
        return false;
    *out = axis < 0 ? axis + rank : axis;
    return true;
}

int64_t gf_onnx_const_i64(const gf_onnx_const *c, int64_t i)
{
    const char *p = (const char *)c->data;
    switch (c->dtype) {
    case GF_DT_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return v; }
    case GF_DT_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case GF_DT_I16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case GF_DT_I8: return (int8_t)p[i];
    case GF_DT_U8: case GF_DT_BOOL: return (unsigned char)p[i];
    case GF_DT_U16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case GF_DT_U32: { uint32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case GF_DT_U64: { uint64_t v; memcpy(&v, p + 8 * i, 8); return (int64_t)v; }
    default: return (int64_t)gf_onnx_const_f64(c, i);
    }
}

double gf_onnx_const_f64(const gf_onnx_const *c, int64_t i)
{
    const char *p = (const char *)c->data;
    switch (c->dtype) {
    case GF_DT_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case GF_DT_F64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    case GF_DT_F16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return gf_f16_to_f32(v); }
    case GF_DT_BF16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return gf_bf16_to_f32(v); }
    default: return (double)gf_onnx_const_i64(c, i);
    }
}

gf_status gf_onnx_fold_new(gf_onnx_infer_ctx *c, int32_t k, gf_dtype dtype, int32_t rank,
                           const int64_t *shape, gf_onnx_const **out)
{
    gf_status st = gf_onnx_const_new(dtype, rank, shape, out, c->err);
    if (st != GF_OK)
        return st;
    c->fold[k] = *out;
    gf_onnx_set_out(c, k, dtype, rank, shape);
    return GF_OK;
}

void gf_onnx_set_out(gf_onnx_infer_ctx *c, int32_t k, gf_dtype dtype, int32_t rank,
                     const int64_t *shape)
{
    gf_onnx_tinfo *t = &c->out[k];
    t->dtype = dtype;
    t->rank = rank;
    for (int32_t i = 0; i < rank; i++)
        t->shape[i] = shape[i];
    t->host = NULL;
}

gf_status gf_onnx_kfail(const gf_onnx_run_ctx *c, int rc)
{
    char lb[256];
    const char *m = c->k->last_error(c->k->ctx);
    gf_err_set(c->err, (gf_status)rc, "node %s: %s", gf_onnx_node_label(c->g, c->n, lb, sizeof lb),
               m != NULL && m[0] ? m : "kernel failed");
    return (gf_status)rc;
}

gf_status gf_onnx_rfail(const gf_onnx_run_ctx *c, gf_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gf_status st = node_failv(c->g, c->n, c->err, code, fmt, ap);
    va_end(ap);
    return st;
}

bool gf_onnx_broadcast(int32_t ra, const int64_t *a, int32_t rb, const int64_t *b,
                       int32_t *out_rank, int64_t *out)
{
    int32_t r = ra > rb ? ra : rb;
    for (int32_t k = 0; k < r; k++) {
        int64_t da = k - (r - ra) >= 0 ? a[k - (r - ra)] : 1;
        int64_t db = k - (r - rb) >= 0 ? b[k - (r - rb)] : 1;
        if (da != db && da != 1 && db != 1)
            return false;
        out[k] = da == 1 ? db : da;
    }
    *out_rank = r;
    return true;
}

void gf_onnx_bcast_strides(int32_t ra, const int64_t *a, int32_t out_rank, const int64_t *out,
                           int64_t *strides)
{
    int64_t dense[GF_MAX_RANK];
    gf_onnx_strides(ra, a, dense);
    for (int32_t k = 0; k < out_rank; k++) {
        int32_t j = k - (out_rank - ra);
        strides[k] = j < 0 || (a[j] == 1 && out[k] != 1) ? 0 : dense[j];
        if (j >= 0 && a[j] == 1)
            strides[k] = 0;
    }
}

gf_dtype gf_onnx_dtype(int64_t t)
{
    switch (t) {
    case 1: return GF_DT_F32;
    case 2: return GF_DT_U8;
    case 3: return GF_DT_I8;
    case 4: return GF_DT_U16;
    case 5: return GF_DT_I16;
    case 6: return GF_DT_I32;
    case 7: return GF_DT_I64;
    case 9: return GF_DT_BOOL;
    case 10: return GF_DT_F16;
    case 11: return GF_DT_F64;
    case 12: return GF_DT_U32;
    case 13: return GF_DT_U64;
    case 16: return GF_DT_BF16;
    default: return GF_DT_INVALID;
    }
}

void gf_onnx_const_set_i64(gf_onnx_const *c, int64_t i, int64_t v)
{
    char *p = (char *)c->data;
    switch (c->dtype) {
    case GF_DT_I64: memcpy(p + 8 * i, &v, 8); return;
    case GF_DT_U64: { uint64_t u = (uint64_t)v; memcpy(p + 8 * i, &u, 8); return; }
    case GF_DT_I32: { int32_t x = (int32_t)v; memcpy(p + 4 * i, &x, 4); return; }
    case GF_DT_U32: { uint32_t x = (uint32_t)v; memcpy(p + 4 * i, &x, 4); return; }
    case GF_DT_I16: { int16_t x = (int16_t)v; memcpy(p + 2 * i, &x, 2); return; }
    case GF_DT_U16: { uint16_t x = (uint16_t)v; memcpy(p + 2 * i, &x, 2); return; }
    case GF_DT_I8: p[i] = (char)(int8_t)v; return;
    case GF_DT_U8: p[i] = (char)(uint8_t)v; return;
    case GF_DT_BOOL: p[i] = v != 0; return;
    default: gf_onnx_const_set_f64(c, i, (double)v); return;
    }
}

void gf_onnx_const_set_f64(gf_onnx_const *c, int64_t i, double v)
{
    char *p = (char *)c->data;
    switch (c->dtype) {
    case GF_DT_F32: { float x = (float)v; memcpy(p + 4 * i, &x, 4); return; }
    case GF_DT_F64: memcpy(p + 8 * i, &v, 8); return;
    case GF_DT_F16: { uint16_t x = gf_f32_to_f16((float)v); memcpy(p + 2 * i, &x, 2); return; }
    case GF_DT_BF16: { uint16_t x = gf_f32_to_bf16((float)v); memcpy(p + 2 * i, &x, 2); return; }
    case GF_DT_BOOL: p[i] = v != 0; return;
    default:
        /* float to integer: truncate toward zero; NaN and out of range give 0 */
        if (!(v > -9.2233720368547758e18 && v < 9.2233720368547758e18))
            v = 0;
        gf_onnx_const_set_i64(c, i, (int64_t)v);
        return;
    }
}

int64_t gf_onnx_offset(int64_t i, int32_t rank, const int64_t *shape, const int64_t *strides)
{
    int64_t off = 0;
    for (int32_t k = rank - 1; k >= 0; k--) {
        int64_t d = shape[k] > 0 ? shape[k] : 1;
        off += (i % d) * strides[k];
        i /= d;
    }
    return off;
}
