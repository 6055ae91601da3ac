/* gpufaas — running functions: loading a version into a plan, running a
 * batch. The gf_fn_api a kind calls is in runtime_api.c; the kinds
 * themselves are in functions/registry.c. */
#include "core/clock.h"
#include "functions/runtime_impl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/bytes.h"
#include "core/copies.h"
#include "core/dtype.h"
#include "core/json.h"
#include "core/log.h"
#include "core/safetensors.h"
#include "backend/arena.h"
#include "core/tensor.h"
#include "functions/weights.h"

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
    int rc = gf_fn_kind_desc(kind)->load(&gf_fn_runtime_api, &ctx, &p->state);
    gf_fn_ctx_release(&ctx);
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
    for (size_t i = 0; i < o->n; i++) {
        if (i < 64 && (o->placed >> i & 1) != 0)
            continue;
        if (i < 64 && (o->hosted >> i & 1) != 0)
            o->host.free(o->host.ctx, o->t[i].data);
        else
            free(o->t[i].data);
    }
    free(o->t);
    o->t = NULL;
    o->n = 0;
    o->placed = 0;
    o->hosted = 0;
}

gf_status gf_fn_infer(gf_fn_plan *p, gf_backend *be, gf_cache *cache, gf_lease *lease,
                      const gf_tensor *inputs, size_t n_inputs, gf_fn_outputs *out,
                      gf_fn_timing *timing, gf_err *err)
{
    return gf_fn_infer_outputs(p, be, cache, lease, inputs, n_inputs, 0, out, timing, err);
}

gf_status gf_fn_infer_outputs(gf_fn_plan *p, gf_backend *be, gf_cache *cache, gf_lease *lease,
                              const gf_tensor *inputs, size_t n_inputs, uint64_t want,
                              gf_fn_outputs *out, gf_fn_timing *timing, gf_err *err)
{
    return gf_fn_infer_into(p, be, cache, lease, inputs, n_inputs, want, NULL, NULL, out, timing,
                            err);
}

/* Output i of the call into its destination d: D2H there (BYTES: copied
 * from the host). */
static gf_status output_into(gf_fn_ctx *ctx, size_t i, const gf_fn_dest *d, gf_tensor *host,
                             gf_err *err)
{
    const gf_tensor *o = &ctx->out[i];
    if (o->nbytes > d->size)
        return gf_err_set(err, GF_ERR_INVALID, "output '%s' has %zu bytes, more than its "
                          "shared_memory_byte_size %zu", ctx->mf->outputs[i].name, o->nbytes,
                          d->size);
    host->mem = GF_MEM_HOST;
    host->device_id = -1;
    host->data = d->data;
    if (o->dtype == GF_DT_BYTES) {
        if (o->nbytes > 0)
            memcpy(d->data, o->data, o->nbytes);
        gf_copies_add(GF_COPY_OUT, o->nbytes);
        return GF_OK;
    }
    return gf_memcpy_async(ctx->be, ctx->stream, d->data, o->data, o->nbytes, GF_COPY_D2H, err);
}

gf_status gf_fn_infer_into(gf_fn_plan *p, gf_backend *be, gf_cache *cache, gf_lease *lease,
                           const gf_tensor *inputs, size_t n_inputs, uint64_t want,
                           const gf_fn_dest *dests, const gf_fn_host_alloc *host,
                           gf_fn_outputs *out, gf_fn_timing *timing, gf_err *err)
{
    const gf_manifest *mf = p->mf;
    out->n = 0;
    out->t = NULL;
    out->placed = 0;
    out->hosted = 0;
    out->host = host != NULL && host->alloc != NULL ? *host : (gf_fn_host_alloc){0};
    uint64_t placed = 0, hosted = 0;
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
        if (gf_fn_ctx_alloc(&ctx, inputs[i].nbytes, &ctx.in[i].data, "an input") != 0) {
            st = err ? err->code : GF_ERR_NO_DEVICE_MEM;
            break;
        }
        st = gf_memcpy_async(be, ctx.stream, ctx.in[i].data, inputs[i].data, inputs[i].nbytes,
                             GF_COPY_H2D, err);
    }
    if (st != GF_OK)
        goto done;
    int rc = gf_fn_kind_desc(p->kind)->infer(&gf_fn_runtime_api, &ctx, p->state);
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
        if (want != 0 && (want >> i & 1) == 0) { /* not asked for: not copied back */
            host_out[i].data = NULL;
            host_out[i].nbytes = 0;
            host_out[i].mem = GF_MEM_HOST;
            host_out[i].device_id = -1;
            continue;
        }
        if (dests != NULL && dests[i].data != NULL) {
            st = output_into(&ctx, i, &dests[i], &host_out[i], err);
            placed |= (uint64_t)1 << i; /* i < GF_MANIFEST_MAX_IO = 64 */
            continue;
        }
        if (ctx.out[i].dtype == GF_DT_BYTES) {
            ctx.out[i].data = NULL; /* already on the host: handed over */
            continue;
        }
        host_out[i].mem = GF_MEM_HOST;
        host_out[i].device_id = -1;
        size_t n = ctx.out[i].nbytes ? ctx.out[i].nbytes : 1;
        host_out[i].data = out->host.alloc != NULL ? out->host.alloc(out->host.ctx, n) : NULL;
        if (host_out[i].data != NULL)
            hosted |= (uint64_t)1 << i; /* i < GF_MANIFEST_MAX_IO = 64 */
        else
            host_out[i].data = malloc(n);
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
    gf_fn_ctx_release(&ctx);
    /* every copy and kernel of the call is done (synced above) or, after a
     * failure, queued on the compute stream the next call also uses */
    gf_dev_arena_reset(ctx.arena);
    free(ctx.in);
    free(ctx.out);
    if (host_out != NULL) {
        out->n = mf->n_outputs;
        out->t = host_out;
        out->placed = placed;
        out->hosted = hosted;
        if (st != GF_OK)
            gf_fn_outputs_free(out);
    }
    if (timing != NULL)
        timing->exec_us = gf_mono_us() - t0;
    return st;
}
