/* gpufaas — running functions: the runtime side of the function ABI (the
 * call context and gf_fn_api), loading a version into a plan, running a
 * batch. The kinds themselves are in functions/registry.c. */
#include "core/clock.h"
#include "functions/runtime.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/bytes.h"
#include "core/dtype.h"
#include "core/json.h"
#include "core/log.h"
#include "core/safetensors.h"
#include "backend/arena.h"
#include "core/tensor.h"
#include "functions/weights.h"

/* ---- plans and the call context ------------------------------------------------ */

typedef struct {
    char *name;
    gf_dtype dtype;
    int32_t rank;
    int64_t shape[GF_MAX_RANK];
    size_t nbytes;
    void *derived; /* host data of a derived parameter, NULL for a required one */
    bool is_derived;
} plan_param;

struct gf_fn_plan {
    const gf_fn_kind *kind;
    const gf_manifest *mf;
    void *state;
    bool loaded; /* load succeeded: unload is owed */
    plan_param *params;
    size_t n, cap;
    char **names;
    char *cache_path;
};

typedef enum { CTX_LOAD, CTX_INFER } ctx_mode;

struct gf_fn_ctx {
    ctx_mode mode;
    const gf_manifest *mf;
    gf_err *err;
    bool error_set;
    gf_json_doc *config;   /* mf->config_json parsed on the first api->config */
    void **owned;          /* handed out for this call (key lists, paths); freed after it */
    size_t n_owned, cap_owned;
    /* load */
    gf_fn_plan *plan;
    gf_fn_weights *weights; /* the file as the kind sees it, with what it used */
    const char *weights_path;
    bool legacy_use;        /* a plugin built before ABI 1.2: weight_info counts as use */
    bool validating;
    void **copies; /* aligned copies handed out by weight_data */
    size_t n_copies;
    /* infer */
    gf_backend *be;
    gf_cache *cache;
    gf_lease *lease;
    gf_stream *stream;
    int device_index;
    gf_tensor *in;   /* device copies of the inputs */
    const gf_tensor *host_in; /* the inputs as the request brought them (host memory) */
    gf_tensor *out;  /* device outputs, data NULL until output(); BYTES: host, owned */
    gf_dev_arena *arena; /* device memory of this call (reset after it) */
};

static int api_set_error(gf_fn_ctx *ctx, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gf_err_setv(ctx->err, (gf_status)(code ? code : GF_ERR_INTERNAL), fmt, ap);
    va_end(ap);
    ctx->error_set = true;
    return code;
}

/* An error raised by the runtime on the function's behalf. */
static int ctx_fail(gf_fn_ctx *ctx, gf_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int ctx_fail(gf_fn_ctx *ctx, gf_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gf_err_setv(ctx->err, code, fmt, ap);
    va_end(ap);
    ctx->error_set = true;
    return (int)code;
}

static void api_log(gf_fn_ctx *ctx, int level, const char *fmt, ...)
{
    if (level > gf_log_threshold)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    gf_log_write((gf_log_level)(level < 0 ? 0 : level > 4 ? 4 : level), ctx->mf->kind, "%s: %s",
                 ctx->mf->name, msg);
}

static const char *api_config_json(gf_fn_ctx *ctx) { return ctx->mf->config_json; }
static int64_t api_max_batch_size(gf_fn_ctx *ctx) { return ctx->mf->max_batch_size; }
static size_t api_input_count(gf_fn_ctx *ctx) { return ctx->mf->n_inputs; }
static size_t api_output_count(gf_fn_ctx *ctx) { return ctx->mf->n_outputs; }

static void io_spec(const gf_manifest_io *io, gf_fn_io *out)
{
    out->name = io->name;
    out->dtype = io->dtype;
    out->rank = io->rank;
    out->shape = io->shape;
}

static void api_input_spec(gf_fn_ctx *ctx, size_t i, gf_fn_io *out)
{
    io_spec(&ctx->mf->inputs[i < ctx->mf->n_inputs ? i : 0], out);
}

static void api_output_spec(gf_fn_ctx *ctx, size_t i, gf_fn_io *out)
{
    io_spec(&ctx->mf->outputs[i < ctx->mf->n_outputs ? i : 0], out);
}

/* Keep p until the call returns (freed by ctx_release); NULL when out of
 * memory (p is freed then). */
static void *ctx_own(gf_fn_ctx *ctx, void *p)
{
    if (p == NULL)
        return NULL;
    if (ctx->n_owned == ctx->cap_owned) {
        size_t cap = ctx->cap_owned ? 2 * ctx->cap_owned : 8;
        void **n = realloc(ctx->owned, cap * sizeof *n);
        if (n == NULL) {
            free(p);
            return NULL;
        }
        ctx->owned = n;
        ctx->cap_owned = cap;
    }
    ctx->owned[ctx->n_owned++] = p;
    return p;
}

/* What a call context holds once the entry point has returned. */
static void ctx_release(gf_fn_ctx *ctx)
{
    gf_json_doc_free(ctx->config);
    ctx->config = NULL;
    for (size_t i = 0; i < ctx->n_owned; i++)
        free(ctx->owned[i]);
    free(ctx->owned);
    ctx->owned = NULL;
    ctx->n_owned = ctx->cap_owned = 0;
}

static int api_config(gf_fn_ctx *ctx, const char *pointer, gf_fn_cfg *out)
{
    memset(out, 0, sizeof *out);
    gf_err e;
    if (ctx->config == NULL) {
        const char *text = ctx->mf->config_json != NULL ? ctx->mf->config_json : "{}";
        if (gf_json_parse(text, strlen(text), 0, &ctx->config, &e) != GF_OK)
            return ctx_fail(ctx, GF_ERR_INVALID, "config: %s", e.msg);
    }
    const gf_json *v;
    if (gf_json_pointer(gf_json_doc_root(ctx->config), pointer, &v, &e) != GF_OK)
        return ctx_fail(ctx, e.code, "config: %s", e.msg);
    if (v == NULL)
        return 0; /* GF_FN_CFG_ABSENT */
    switch (v->type) {
    case GF_JSON_NULL:
        out->type = GF_FN_CFG_NULL;
        break;
    case GF_JSON_BOOL:
        out->type = GF_FN_CFG_BOOL;
        out->i = v->u.b ? 1 : 0;
        break;
    case GF_JSON_NUMBER:
        out->type = GF_FN_CFG_NUMBER;
        out->is_int = v->u.num.is_int;
        out->i = v->u.num.is_int ? v->u.num.i : 0;
        out->d = v->u.num.d;
        break;
    case GF_JSON_STRING:
        out->type = GF_FN_CFG_STRING;
        out->s = v->u.str.s;
        out->n = v->u.str.len;
        break;
    case GF_JSON_ARRAY:
        out->type = GF_FN_CFG_ARRAY;
        out->n = v->u.arr.n;
        break;
    case GF_JSON_OBJECT: {
        const char **keys = ctx_own(ctx, malloc((v->u.obj.n + 1) * sizeof *keys));
        if (keys == NULL)
            return ctx_fail(ctx, GF_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < v->u.obj.n; i++)
            keys[i] = v->u.obj.m[i].key;
        out->type = GF_FN_CFG_OBJECT;
        out->n = v->u.obj.n;
        out->keys = keys;
        break;
    }
    }
    return 0;
}

static int need_mode(gf_fn_ctx *ctx, ctx_mode mode, const char *what)
{
    if (ctx->mode == mode)
        return 0;
    return ctx_fail(ctx, GF_ERR_STATE, "%s may only be called from %s", what,
                    mode == CTX_LOAD ? "load" : "infer");
}

static void st_to_tensor(const gf_st_tensor *t, gf_tensor *out)
{
    gf_tensor_init(out, t->dtype, t->rank, t->shape, NULL, GF_MEM_HOST, -1, NULL);
}

static int api_weight_info(gf_fn_ctx *ctx, const char *name, gf_tensor *out)
{
    if (need_mode(ctx, CTX_LOAD, "weight_info"))
        return GF_ERR_STATE;
    const gf_st_tensor *t = gf_fn_weights_find(ctx->weights, name);
    if (t == NULL)
        return GF_ERR_NOT_FOUND;
    if (ctx->legacy_use)
        gf_fn_weights_use(ctx->weights, name);
    st_to_tensor(t, out);
    return 0;
}

static size_t api_weight_count(gf_fn_ctx *ctx)
{
    return ctx->mode == CTX_LOAD ? ctx->weights->n : 0;
}

static const char *api_weight_name(gf_fn_ctx *ctx, size_t i)
{
    if (ctx->mode != CTX_LOAD || i >= ctx->weights->n)
        return NULL;
    return gf_fn_weights_at(ctx->weights, i)->name;
}

static int api_weight_data(gf_fn_ctx *ctx, const char *name, gf_tensor *out)
{
    if (need_mode(ctx, CTX_LOAD, "weight_data"))
        return GF_ERR_STATE;
    const gf_st_tensor *t = gf_fn_weights_find(ctx->weights, name);
    if (t == NULL)
        return ctx_fail(ctx, GF_ERR_NOT_FOUND, "weights have no tensor '%s'", name);
    gf_fn_weights_use(ctx->weights, name);
    st_to_tensor(t, out);
    const void *data = t->data;
    if ((uintptr_t)data % 16 != 0 && t->nbytes > 0) {
        /* the file does not align it: hand out an aligned copy */
        void **list = realloc(ctx->copies, (ctx->n_copies + 1) * sizeof *list);
        void *copy = NULL;
        if (list != NULL) {
            ctx->copies = list;
            if (posix_memalign(&copy, 64, t->nbytes) != 0)
                copy = NULL;
        }
        if (copy == NULL)
            return ctx_fail(ctx, GF_ERR_NOMEM, "out of memory copying tensor '%s'", name);
        memcpy(copy, data, t->nbytes);
        ctx->copies[ctx->n_copies++] = copy;
        data = copy;
    }
    out->data = (void *)data;
    return 0;
}

static const char *dtype_list(uint32_t mask, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 1; d < GF_DT_COUNT_; d++) {
        if (!(mask & (1u << d)))
            continue;
        int n = snprintf(buf + used, cap - used, "%s%s", used ? ", " : "",
                         gf_dtype_kserve_name((gf_dtype)d));
        if (n < 0 || (size_t)n >= cap - used)
            break;
        used += (size_t)n;
    }
    return buf;
}

static int plan_add(gf_fn_ctx *ctx, const char *name, gf_dtype dtype, int32_t rank,
                    const int64_t *shape, size_t *index, plan_param **out)
{
    gf_fn_plan *p = ctx->plan;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 32;
        plan_param *np = realloc(p->params, cap * sizeof *np);
        if (np == NULL)
            return ctx_fail(ctx, GF_ERR_NOMEM, "out of memory declaring parameter '%s'", name);
        p->params = np;
        p->cap = cap;
    }
    plan_param *pp = &p->params[p->n];
    memset(pp, 0, sizeof *pp);
    gf_tensor d;
    gf_err e;
    if (gf_tensor_init(&d, dtype, rank, shape, NULL, GF_MEM_HOST, -1, &e) != GF_OK)
        return ctx_fail(ctx, e.code, "parameter '%s': %s", name, e.msg);
    pp->name = strdup(name);
    if (pp->name == NULL)
        return ctx_fail(ctx, GF_ERR_NOMEM, "out of memory");
    pp->dtype = dtype;
    pp->rank = rank;
    memcpy(pp->shape, shape, (size_t)rank * sizeof *shape);
    pp->nbytes = d.nbytes;
    *index = p->n++;
    *out = pp;
    return 0;
}

static long plan_find(const gf_fn_plan *p, const char *name)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->params[i].name, name) == 0)
            return (long)i;
    return -1;
}

static int api_require(gf_fn_ctx *ctx, const char *name, uint32_t dtype_mask, int32_t rank,
                       const int64_t *shape, size_t *index)
{
    if (need_mode(ctx, CTX_LOAD, "require"))
        return GF_ERR_STATE;
    const gf_st_tensor *t = gf_fn_weights_find(ctx->weights, name);
    char want[128], got[128], dts[128];
    if (t == NULL)
        return ctx_fail(ctx, GF_ERR_INVALID, "weights have no tensor '%s' (kind %s needs it)%s",
                        name, ctx->mf->kind,
                        gf_fn_weights_missing_hint(ctx->weights, name, got, sizeof got));
    if (dtype_mask != 0 && !(dtype_mask & (1u << t->dtype)))
        return ctx_fail(ctx, GF_ERR_INVALID, "tensor '%s' is %s, expected %s", name,
                        gf_dtype_kserve_name(t->dtype), dtype_list(dtype_mask, dts, sizeof dts));
    if (shape != NULL) {
        bool ok = t->rank == rank;
        for (int32_t k = 0; ok && k < rank; k++)
            ok = shape[k] < 0 || shape[k] == t->shape[k];
        if (!ok) {
            gf_shape_str(want, sizeof want, rank, shape);
            gf_shape_str(got, sizeof got, t->rank, t->shape);
            return ctx_fail(ctx, GF_ERR_INVALID, "tensor '%s' has shape %s, expected %s", name,
                            got, want);
        }
    }
    gf_fn_weights_use(ctx->weights, name);
    long have = plan_find(ctx->plan, name);
    if (have >= 0) {
        *index = (size_t)have;
        return 0;
    }
    plan_param *pp;
    return plan_add(ctx, name, t->dtype, t->rank, t->shape, index, &pp);
}

static int api_weight_use(gf_fn_ctx *ctx, const char *name)
{
    if (need_mode(ctx, CTX_LOAD, "weight_use"))
        return GF_ERR_STATE;
    return gf_fn_weights_use(ctx->weights, name) ? 0 : GF_ERR_NOT_FOUND;
}

static int api_derive(gf_fn_ctx *ctx, const char *name, gf_dtype dtype, int32_t rank,
                      const int64_t *shape, void **data, size_t *index)
{
    *data = NULL;
    if (need_mode(ctx, CTX_LOAD, "derive"))
        return GF_ERR_STATE;
    if (name == NULL || name[0] == '\0' || gf_st_find(ctx->weights->f, name) != NULL ||
        plan_find(ctx->plan, name) >= 0)
        return ctx_fail(ctx, GF_ERR_INVALID, "derived parameter '%s': the name is empty or "
                        "already taken", name ? name : "");
    if (!gf_dtype_valid(dtype))
        return ctx_fail(ctx, GF_ERR_INVALID, "derived parameter '%s': invalid dtype", name);
    plan_param *pp;
    int rc = plan_add(ctx, name, dtype, rank, shape, index, &pp);
    if (rc != 0)
        return rc;
    pp->is_derived = true;
    if (!ctx->validating) {
        pp->derived = calloc(1, pp->nbytes ? pp->nbytes : 1);
        if (pp->derived == NULL)
            return ctx_fail(ctx, GF_ERR_NOMEM, "out of memory for derived parameter '%s' "
                            "(%zu bytes)", name, pp->nbytes);
        *data = pp->derived;
    }
    return 0;
}

static int api_validating(gf_fn_ctx *ctx) { return ctx->validating ? 1 : 0; }

static const char *api_companion_path(gf_fn_ctx *ctx, const char *suffix)
{
    if (ctx->mode != CTX_LOAD || ctx->weights_path == NULL || !gf_companion_suffix_valid(suffix))
        return NULL;
    char *path = gf_companion_path(ctx->weights_path, suffix);
    if (path == NULL || access(path, R_OK) != 0) {
        free(path);
        return NULL;
    }
    return ctx_own(ctx, path);
}

static const gf_kernels *api_kernels(gf_fn_ctx *ctx)
{
    return ctx->mode == CTX_INFER ? gf_backend_kernels(ctx->be) : NULL;
}

static const gf_kernels *api_load_kernels(gf_fn_ctx *ctx)
{
    return ctx->mode == CTX_LOAD && !ctx->validating && ctx->be != NULL
               ? gf_backend_kernels(ctx->be)
               : NULL;
}

static gf_stream *api_stream(gf_fn_ctx *ctx)
{
    return ctx->mode == CTX_INFER ? ctx->stream : NULL;
}

static int api_param(gf_fn_ctx *ctx, size_t index, gf_tensor *out)
{
    if (need_mode(ctx, CTX_INFER, "param"))
        return GF_ERR_STATE;
    gf_fn_plan *p = ctx->plan;
    if (index >= p->n)
        return ctx_fail(ctx, GF_ERR_INVALID, "parameter index %zu out of range (%zu declared)",
                        index, p->n);
    void *dev;
    gf_status st = gf_lease_param(ctx->lease, index, &dev, ctx->err);
    if (st != GF_OK) {
        ctx->error_set = true;
        return (int)st;
    }
    const plan_param *pp = &p->params[index];
    gf_tensor_init(out, pp->dtype, pp->rank, pp->shape, dev, GF_MEM_DEVICE, ctx->device_index,
                   NULL);
    return 0;
}

/* Device memory for this call, from the backend's arena (which, when it
 * must grow, evicts idle models through the cache if the budget is
 * exhausted). Handed back after the call. */
static int ctx_alloc(gf_fn_ctx *ctx, size_t bytes, void **out, const char *what)
{
    gf_err e;
    uint64_t used0, budget0;
    gf_dev_usage(ctx->be, &used0, &budget0);
    if (bytes > budget0) /* never fits, whatever is evicted: the request's fault, not busy */
        return ctx_fail(ctx, GF_ERR_TOO_LARGE,
                        "%s needs %zu bytes of device memory, more than the worker's whole "
                        "device budget (%llu bytes): send a smaller batch or input",
                        what, bytes, (unsigned long long)budget0);
    gf_status st = gf_dev_arena_alloc(ctx->arena, bytes, out, &e);
    if (st == GF_ERR_NO_DEVICE_MEM) {
        uint64_t used, budget;
        gf_dev_usage(ctx->be, &used, &budget);
        return ctx_fail(ctx, GF_ERR_NO_DEVICE_MEM,
                        "%s needs %zu bytes of device memory; after evicting idle models "
                        "%llu bytes are free (%llu of %llu in use)",
                        what, bytes, (unsigned long long)(used < budget ? budget - used : 0),
                        (unsigned long long)used, (unsigned long long)budget);
    }
    if (st != GF_OK)
        return ctx_fail(ctx, st, "%s: %s", what, e.msg);
    return 0;
}

static int api_workspace(gf_fn_ctx *ctx, size_t bytes, void **out)
{
    *out = NULL;
    if (need_mode(ctx, CTX_INFER, "workspace"))
        return GF_ERR_STATE;
    return ctx_alloc(ctx, bytes, out, "workspace");
}

/* Input i on the device, or as the request brought it (host). */
static int input_of(gf_fn_ctx *ctx, size_t i, bool host, gf_tensor *out)
{
    if (need_mode(ctx, CTX_INFER, host ? "input_host" : "input"))
        return GF_ERR_STATE;
    if (i >= ctx->mf->n_inputs)
        return ctx_fail(ctx, GF_ERR_INVALID, "input %zu out of range (%zu inputs)", i,
                        ctx->mf->n_inputs);
    *out = host ? ctx->host_in[i] : ctx->in[i];
    return 0;
}

static int api_input(gf_fn_ctx *ctx, size_t i, gf_tensor *out)
{
    return input_of(ctx, i, false, out);
}

static int api_input_host(gf_fn_ctx *ctx, size_t i, gf_tensor *out)
{
    return input_of(ctx, i, true, out);
}

/* The descriptor of output i with shape (data NULL), checked against the
 * manifest; an output is set once. */
static int output_check(gf_fn_ctx *ctx, size_t i, int32_t rank, const int64_t *shape,
                        gf_mem_kind mem, gf_tensor *t)
{
    const gf_manifest_io *spec = &ctx->mf->outputs[i];
    if (ctx->out[i].data != NULL || ctx->out[i].dtype != GF_DT_INVALID)
        return ctx_fail(ctx, GF_ERR_STATE, "output '%s' was already allocated", spec->name);
    gf_err e;
    gf_dtype numeric = spec->dtype == GF_DT_BYTES ? GF_DT_U8 : spec->dtype; /* size checked later */
    if (shape == NULL && rank > 0)
        return ctx_fail(ctx, GF_ERR_INVALID, "output '%s': NULL shape", spec->name);
    if (gf_tensor_init(t, numeric, rank, shape, NULL, mem, ctx->device_index, &e) != GF_OK)
        return ctx_fail(ctx, e.code, "output '%s': %s", spec->name, e.msg);
    t->dtype = spec->dtype;
    bool ok = rank == spec->rank;
    for (int32_t k = 0; ok && k < rank; k++)
        ok = spec->shape[k] < 0 || spec->shape[k] == shape[k];
    if (!ok) {
        char want[128], got[128];
        gf_shape_str(want, sizeof want, spec->rank, spec->shape);
        gf_shape_str(got, sizeof got, rank, shape);
        return ctx_fail(ctx, GF_ERR_INVALID, "output '%s': the function produced shape %s but "
                        "the manifest says %s", spec->name, got, want);
    }
    return 0;
}

static int api_output_bytes(gf_fn_ctx *ctx, size_t i, int32_t rank, const int64_t *shape,
                            const void *const *elems, const size_t *lens)
{
    if (need_mode(ctx, CTX_INFER, "output_bytes"))
        return GF_ERR_STATE;
    if (i >= ctx->mf->n_outputs)
        return ctx_fail(ctx, GF_ERR_INVALID, "output %zu out of range (%zu outputs)", i,
                        ctx->mf->n_outputs);
    const gf_manifest_io *spec = &ctx->mf->outputs[i];
    if (spec->dtype != GF_DT_BYTES)
        return ctx_fail(ctx, GF_ERR_INVALID, "output '%s' is %s, not BYTES: allocate it with "
                        "output", spec->name, gf_dtype_kserve_name(spec->dtype));
    gf_tensor t;
    int rc = output_check(ctx, i, rank, shape, GF_MEM_HOST, &t);
    if (rc != 0)
        return rc;
    uint64_t numel = t.nbytes; /* one byte per element above */
    if (numel > 0 && (elems == NULL || lens == NULL))
        return ctx_fail(ctx, GF_ERR_INVALID, "output '%s': NULL elements", spec->name);
    gf_buf b;
    gf_buf_init(&b);
    gf_err e;
    gf_status st = GF_OK;
    for (uint64_t k = 0; k < numel && st == GF_OK; k++) {
        if (elems[k] == NULL && lens[k] > 0)
            st = gf_err_set(&e, GF_ERR_INVALID, "element %llu is NULL", (unsigned long long)k);
        else
            st = gf_bytes_append(&b, elems[k], lens[k], &e);
    }
    size_t len = 0;
    char *data = st == GF_OK ? gf_buf_steal(&b, &len) : NULL;
    gf_buf_deinit(&b);
    if (st != GF_OK)
        return ctx_fail(ctx, e.code, "output '%s': %s", spec->name, e.msg);
    if (data == NULL)
        return ctx_fail(ctx, GF_ERR_NOMEM, "output '%s': out of memory", spec->name);
    if ((st = gf_tensor_init_bytes(&t, rank, shape, data, len, &e)) != GF_OK) {
        free(data);
        return ctx_fail(ctx, GF_ERR_INTERNAL, "output '%s': %s", spec->name, e.msg);
    }
    ctx->out[i] = t;
    return 0;
}

static int api_output(gf_fn_ctx *ctx, size_t i, int32_t rank, const int64_t *shape,
                      gf_tensor *out)
{
    if (need_mode(ctx, CTX_INFER, "output"))
        return GF_ERR_STATE;
    if (i >= ctx->mf->n_outputs)
        return ctx_fail(ctx, GF_ERR_INVALID, "output %zu out of range (%zu outputs)", i,
                        ctx->mf->n_outputs);
    const gf_manifest_io *spec = &ctx->mf->outputs[i];
    if (spec->dtype == GF_DT_BYTES)
        return ctx_fail(ctx, GF_ERR_INVALID, "output '%s' is BYTES: set it with output_bytes",
                        spec->name);
    gf_tensor t;
    int rc = output_check(ctx, i, rank, shape, GF_MEM_DEVICE, &t);
    if (rc != 0)
        return rc;
    rc = ctx_alloc(ctx, t.nbytes, &t.data, "an output");
    if (rc != 0)
        return rc;
    ctx->out[i] = t;
    *out = t;
    return 0;
}

static int api_upload(gf_fn_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    if (need_mode(ctx, CTX_INFER, "upload"))
        return GF_ERR_STATE;
    if (bytes == 0)
        return 0;
    if (dst == NULL || src == NULL)
        return ctx_fail(ctx, GF_ERR_INVALID, "upload: NULL buffer");
    gf_status st = gf_memcpy_async(ctx->be, ctx->stream, dst, src, bytes, GF_COPY_H2D, ctx->err);
    if (st != GF_OK)
        ctx->error_set = true;
    return (int)st;
}

static const gf_fn_api gf_runtime_api = {
    /* .size = */ sizeof(gf_fn_api),
    /* .abi_version = */ GF_FN_ABI_VERSION,
    /* .set_error = */ api_set_error,
    /* .log = */ api_log,
    /* .config_json = */ api_config_json,
    /* .max_batch_size = */ api_max_batch_size,
    /* .input_count = */ api_input_count,
    /* .output_count = */ api_output_count,
    /* .input_spec = */ api_input_spec,
    /* .output_spec = */ api_output_spec,
    /* .weight_info = */ api_weight_info,
    /* .weight_count = */ api_weight_count,
    /* .weight_name = */ api_weight_name,
    /* .weight_data = */ api_weight_data,
    /* .require = */ api_require,
    /* .derive = */ api_derive,
    /* .validating = */ api_validating,
    /* .kernels = */ api_kernels,
    /* .stream = */ api_stream,
    /* .param = */ api_param,
    /* .workspace = */ api_workspace,
    /* .input = */ api_input,
    /* .output = */ api_output,
    /* .config = */ api_config,
    /* .companion_path = */ api_companion_path,
    /* .weight_use = */ api_weight_use,
    /* .upload = */ api_upload,
    /* .input_host = */ api_input_host,
    /* .output_bytes = */ api_output_bytes,
    /* .load_kernels = */ api_load_kernels,
};

/* ---- load ---------------------------------------------------------------------- */

void gf_fn_plan_free(gf_fn_plan *p)
{
    if (p == NULL)
        return;
    if (p->loaded && gf_fn_kind_desc(p->kind)->unload != NULL)
        gf_fn_kind_desc(p->kind)->unload(p->state);
    for (size_t i = 0; i < p->n; i++) {
        free(p->params[i].name);
        free(p->params[i].derived);
    }
    free(p->params);
    free(p->names);
    free(p->cache_path);
    free(p);
}

const char *gf_fn_plan_cache_path(const gf_fn_plan *p) { return p->cache_path; }
size_t gf_fn_plan_param_count(const gf_fn_plan *p) { return p->n; }
const char *const *gf_fn_plan_param_names(const gf_fn_plan *p) { return (const char *const *)p->names; }
const gf_manifest *gf_fn_plan_manifest(const gf_fn_plan *p) { return p->mf; }

/* Run the kind's load. On success the plan holds the declared parameters. */
static gf_status run_load(const gf_fn_kind *kind, const gf_manifest *mf, gf_st_file *weights,
                          const char *weights_path, bool validating, gf_backend *be,
                          gf_fn_plan **out, gf_err *err)
{
    *out = NULL;
    if (strcmp(mf->kind, gf_fn_kind_desc(kind)->name) != 0)
        return gf_err_set(err, GF_ERR_INVALID, "manifest kind '%s' does not match kind '%s'",
                          mf->kind, gf_fn_kind_desc(kind)->name);
    gf_fn_plan *p = calloc(1, sizeof *p);
    if (p == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    p->kind = kind;
    p->mf = mf;
    gf_fn_weights view;
    gf_status st = gf_fn_weights_init(&view, weights, mf, err);
    if (st != GF_OK) {
        free(p);
        return st;
    }
    gf_fn_ctx ctx = {.mode = CTX_LOAD, .mf = mf, .err = err, .plan = p, .weights = &view,
                     .weights_path = weights_path, .be = be,
                     .legacy_use = (gf_fn_kind_desc(kind)->abi_version & 0xffffu) < 2,
                     .validating = validating};
    int rc = gf_fn_kind_desc(kind)->load(&gf_runtime_api, &ctx, &p->state);
    ctx_release(&ctx);
    for (size_t i = 0; i < ctx.n_copies; i++)
        free(ctx.copies[i]);
    free(ctx.copies);
    if (rc == 0) {
        /* the unused-weights rule (gpufaas/function.h) */
        p->loaded = true;
        st = gf_fn_weights_check_unused(&view, gf_fn_kind_desc(kind)->name, err);
        if (st != GF_OK) {
            gf_fn_weights_deinit(&view);
            gf_err_prefix(err, "function '%s'", mf->name);
            gf_fn_plan_free(p);
            return st;
        }
    }
    gf_fn_weights_deinit(&view);
    if (rc != 0) {
        if (!ctx.error_set)
            gf_err_set(err, (gf_status)rc, "kind '%s' failed to load (code %d)",
                       gf_fn_kind_desc(kind)->name, rc);
        gf_err_prefix(err, "function '%s'", mf->name);
        gf_fn_plan_free(p);
        return err != NULL ? (err->code ? err->code : GF_ERR_INVALID) : (gf_status)rc;
    }
    p->loaded = true;
    if (p->n == 0) {
        gf_fn_plan_free(p);
        return gf_err_set(err, GF_ERR_INVALID, "function '%s': kind '%s' declared no "
                          "parameters", mf->name, gf_fn_kind_desc(kind)->name);
    }
    p->names = malloc(p->n * sizeof *p->names);
    if (p->names == NULL) {
        gf_fn_plan_free(p);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < p->n; i++)
        p->names[i] = p->params[i].name;
    *out = p;
    return GF_OK;
}

gf_status gf_fn_validate(const gf_fn_kind *kind, const gf_manifest *mf, const char *weights_path,
                         gf_err *err)
{
    gf_st_file *w;
    gf_status st = gf_fn_weights_open(weights_path, &w, err);
    if (st != GF_OK)
        return st;
    gf_fn_plan *p;
    st = run_load(kind, mf, w, weights_path, true, NULL, &p, err);
    gf_fn_plan_free(p);
    gf_st_close(w);
    return st;
}

/* The identity of a weights file, recorded in the derived file's metadata. */
static void source_id(const char *path, char *buf, size_t cap)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        memset(&sb, 0, sizeof sb);
    snprintf(buf, cap, "%s|%lld|%lld.%09ld", path, (long long)sb.st_size,
             (long long)sb.st_mtim.tv_sec, (long)sb.st_mtim.tv_nsec);
}

/* True when the file at path already holds exactly the plan's parameters,
 * derived from the same source file by the same kind. */
static bool derived_reusable(const gf_fn_plan *p, const char *path, const char *src_id)
{
    gf_st_file *f;
    if (gf_st_open(path, &f, NULL) != GF_OK)
        return false;
    bool ok = gf_st_count(f) == p->n;
    const char *sid = gf_st_meta_get(f, "gpufaas.source");
    const char *kind = gf_st_meta_get(f, "gpufaas.kind");
    ok = ok && sid != NULL && strcmp(sid, src_id) == 0 && kind != NULL &&
         strcmp(kind, gf_fn_kind_desc(p->kind)->name) == 0;
    for (size_t i = 0; ok && i < p->n; i++) {
        const gf_st_tensor *t = gf_st_at(f, i);
        ok = strcmp(t->name, p->params[i].name) == 0 && t->dtype == p->params[i].dtype &&
             gf_shape_equal(t->rank, t->shape, p->params[i].rank, p->params[i].shape);
    }
    gf_st_close(f);
    return ok;
}

gf_status gf_fn_prepare(const gf_fn_kind *kind, const gf_manifest *mf, const char *weights_path,
                        const char *derived_path, gf_fn_plan **out, gf_err *err)
{
    return gf_fn_prepare_on(kind, mf, weights_path, derived_path, NULL, out, err);
}

gf_status gf_fn_prepare_on(const gf_fn_kind *kind, const gf_manifest *mf,
                           const char *weights_path, const char *derived_path, gf_backend *be,
                           gf_fn_plan **out, gf_err *err)
{
    *out = NULL;
    gf_st_file *w;
    gf_status st = gf_fn_weights_open(weights_path, &w, err);
    if (st != GF_OK)
        return st;
    gf_fn_plan *p;
    st = run_load(kind, mf, w, weights_path, false, be, &p, err);
    if (st != GF_OK) {
        gf_st_close(w);
        return st;
    }
    bool any_derived = false;
    for (size_t i = 0; i < p->n; i++)
        any_derived = any_derived || p->params[i].is_derived;
    if (!any_derived) {
        p->cache_path = strdup(weights_path);
    } else if (derived_path == NULL) {
        gf_st_close(w);
        gf_fn_plan_free(p);
        return gf_err_set(err, GF_ERR_INVALID, "function '%s': kind '%s' derives parameters "
                          "but no path was given for them", mf->name, gf_fn_kind_desc(kind)->name);
    } else {
        char sid[1200];
        source_id(weights_path, sid, sizeof sid);
        if (!derived_reusable(p, derived_path, sid)) {
            gf_st_wtensor *wt = calloc(p->n, sizeof *wt);
            if (wt == NULL) {
                st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            } else {
                for (size_t i = 0; i < p->n; i++) {
                    const plan_param *pp = &p->params[i];
                    wt[i] = (gf_st_wtensor){pp->name, pp->dtype, pp->rank, pp->shape,
                                            pp->is_derived ? pp->derived
                                                           : gf_st_find(w, pp->name)->data};
                }
                const char *meta[] = {"gpufaas.source", sid, "gpufaas.kind",
                                      gf_fn_kind_desc(kind)->name};
                st = gf_st_write(derived_path, wt, p->n, meta, 2, err);
                if (st != GF_OK)
                    gf_err_prefix(err, "writing derived parameters of '%s'", mf->name);
                free(wt);
            }
        }
        p->cache_path = st == GF_OK ? strdup(derived_path) : NULL;
    }
    gf_st_close(w);
    for (size_t i = 0; i < p->n; i++) { /* the file holds them now */
        free(p->params[i].derived);
        p->params[i].derived = NULL;
    }
    if (st == GF_OK && p->cache_path == NULL)
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    if (st != GF_OK) {
        gf_fn_plan_free(p);
        return st;
    }
    *out = p;
    return GF_OK;
}

/* ---- infer ------------------------------------------------------------------------ */

void gf_fn_outputs_free(gf_fn_outputs *o)
{
    if (o == NULL || o->t == NULL)
        return;
    for (size_t i = 0; i < o->n; i++)
        free(o->t[i].data);
    free(o->t);
    o->t = NULL;
    o->n = 0;
}

gf_status gf_fn_infer(gf_fn_plan *p, gf_backend *be, gf_cache *cache, gf_lease *lease,
                      const gf_tensor *inputs, size_t n_inputs, gf_fn_outputs *out,
                      gf_fn_timing *timing, gf_err *err)
{
    const gf_manifest *mf = p->mf;
    out->n = 0;
    out->t = NULL;
    uint64_t t0 = gf_mono_us();
    if (n_inputs != mf->n_inputs)
        return gf_err_set(err, GF_ERR_INVALID, "function '%s' takes %zu input(s), got %zu",
                          mf->name, mf->n_inputs, n_inputs);
    for (size_t i = 0; i < n_inputs; i++) {
        gf_status st = gf_manifest_check_tensor(mf, &mf->inputs[i], &inputs[i], err);
        if (st != GF_OK)
            return st;
    }
    gf_fn_ctx ctx = {.mode = CTX_INFER, .mf = mf, .err = err, .plan = p, .be = be,
                     .host_in = inputs,
                     .device_index = gf_backend_device_index(be),
                     .cache = cache, .lease = lease, .arena = gf_backend_arena(be),
                     .stream = gf_backend_stream(be, GF_STREAM_COMPUTE)};
    gf_status st = GF_OK;
    ctx.in = calloc(mf->n_inputs, sizeof *ctx.in);
    ctx.out = calloc(mf->n_outputs, sizeof *ctx.out);
    gf_tensor *host_out = calloc(mf->n_outputs, sizeof *host_out);
    if (ctx.in == NULL || ctx.out == NULL || host_out == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n_inputs && st == GF_OK; i++) {
        ctx.in[i] = inputs[i];
        if (inputs[i].dtype == GF_DT_BYTES)
            continue; /* strings stay on the host */
        ctx.in[i].mem = GF_MEM_DEVICE;
        ctx.in[i].device_id = ctx.device_index;
        if (ctx_alloc(&ctx, inputs[i].nbytes, &ctx.in[i].data, "an input") != 0) {
            st = err ? err->code : GF_ERR_NO_DEVICE_MEM;
            break;
        }
        st = gf_memcpy_async(be, ctx.stream, ctx.in[i].data, inputs[i].data, inputs[i].nbytes,
                             GF_COPY_H2D, err);
    }
    if (st != GF_OK)
        goto done;
    int rc = gf_fn_kind_desc(p->kind)->infer(&gf_runtime_api, &ctx, p->state);
    if (rc != 0) {
        if (!ctx.error_set)
            gf_err_set(err, (gf_status)rc, "kind '%s' failed (code %d)",
                       gf_fn_kind_desc(p->kind)->name, rc);
        st = err != NULL && err->code != GF_OK ? err->code : (gf_status)rc;
        gf_err_prefix(err, "function '%s'", mf->name);
        gf_stream_sync(be, ctx.stream, NULL);
        goto done;
    }
    for (size_t i = 0; i < mf->n_outputs && st == GF_OK; i++) {
        if (ctx.out[i].data == NULL && ctx.out[i].nbytes == 0 && ctx.out[i].dtype == 0) {
            st = gf_err_set(err, GF_ERR_INTERNAL, "function '%s': kind '%s' did not produce "
                            "output '%s'", mf->name, gf_fn_kind_desc(p->kind)->name,
                            mf->outputs[i].name);
            break;
        }
        host_out[i] = ctx.out[i];
        if (ctx.out[i].dtype == GF_DT_BYTES) {
            ctx.out[i].data = NULL; /* already on the host: handed over */
            continue;
        }
        host_out[i].mem = GF_MEM_HOST;
        host_out[i].device_id = -1;
        host_out[i].data = malloc(ctx.out[i].nbytes ? ctx.out[i].nbytes : 1);
        if (host_out[i].data == NULL) {
            st = gf_err_set(err, GF_ERR_NOMEM, "out of memory for output '%s'",
                            mf->outputs[i].name);
            break;
        }
        st = gf_memcpy_async(be, ctx.stream, host_out[i].data, ctx.out[i].data,
                             ctx.out[i].nbytes, GF_COPY_D2H, err);
    }
    gf_status sync = gf_stream_sync(be, ctx.stream, st == GF_OK ? err : NULL);
    if (st == GF_OK && sync != GF_OK) {
        st = sync;
        gf_err_prefix(err, "function '%s'", mf->name);
    }
done:
    for (size_t i = 0; ctx.out != NULL && i < mf->n_outputs; i++)
        if (ctx.out[i].dtype == GF_DT_BYTES)
            free(ctx.out[i].data); /* set by output_bytes, not handed over */
    ctx_release(&ctx);
    /* every copy and kernel of the call is done (synced above) or, after a
     * failure, queued on the compute stream the next call also uses */
    gf_dev_arena_reset(ctx.arena);
    free(ctx.in);
    free(ctx.out);
    if (st == GF_OK) {
        out->n = mf->n_outputs;
        out->t = host_out;
    } else if (host_out != NULL) {
        for (size_t i = 0; i < mf->n_outputs; i++)
            free(host_out[i].data);
        free(host_out);
    }
    if (timing != NULL)
        timing->exec_us = gf_mono_us() - t0;
    return st;
}
