/* gpufaas — the runtime side of the function ABI (functions/): the gf_fn_api
 * a kind is handed, and the call context behind it: errors and logs, the
 * manifest and config, weights and the parameters a load declares, the
 * device, workspace, inputs and outputs of a call. Loading and running are
 * in runtime.c. */
#include "functions/runtime_impl.h"

#include "core/clock.h"
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

/* Keep p until the call returns (freed by gf_fn_ctx_release); NULL when out of
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
void gf_fn_ctx_release(gf_fn_ctx *ctx)
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
int gf_fn_ctx_alloc(gf_fn_ctx *ctx, size_t bytes, void **out, const char *what)
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
    return gf_fn_ctx_alloc(ctx, bytes, out, "workspace");
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
    rc = gf_fn_ctx_alloc(ctx, t.nbytes, &t.data, "an output");
    if (rc != 0)
        return rc;
    ctx->out[i] = t;
    *out = t;
    return 0;
}

/* upload (H2D, queued on the stream) and download (D2H, waited for) */
static int api_copy(gf_fn_ctx *ctx, void *dst, const void *src, size_t bytes, gf_copy_kind dir)
{
    const char *what = dir == GF_COPY_H2D ? "upload" : "download";
    if (need_mode(ctx, CTX_INFER, what))
        return GF_ERR_STATE;
    if (bytes == 0)
        return 0;
    if (dst == NULL || src == NULL)
        return ctx_fail(ctx, GF_ERR_INVALID, "%s: NULL buffer", what);
    gf_status st = gf_memcpy_async(ctx->be, ctx->stream, dst, src, bytes, dir, ctx->err);
    if (st == GF_OK && dir == GF_COPY_D2H)
        st = gf_stream_sync(ctx->be, ctx->stream, ctx->err);
    if (st != GF_OK)
        ctx->error_set = true;
    return (int)st;
}

static int api_upload(gf_fn_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    return api_copy(ctx, dst, src, bytes, GF_COPY_H2D);
}

static int api_download(gf_fn_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    return api_copy(ctx, dst, src, bytes, GF_COPY_D2H);
}

const gf_fn_api gf_fn_runtime_api = {
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
    /* .download = */ api_download,
};
