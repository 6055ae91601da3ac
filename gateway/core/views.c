/* gpufaas — the gateway core's views: its state as the JSON the APIs answer
 * with (built with jansson, handed out as text), and the Prometheus text of
 * /metrics. Every view takes gw->lock for the time it reads. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/copies.h"
#include "core/dtype.h"
#include "gateway/core/internal.h"
#include "gateway/core/model_config.h"
#include "gf_config.h"

/* Append j (taken over) to out as compact JSON text. */
static gf_status emit(json_t *j, gf_buf *out)
{
    if (j == NULL)
        return GF_ERR_NOMEM;
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (text == NULL)
        return GF_ERR_NOMEM;
    gf_status st = gf_buf_append_str(out, text);
    free(text);
    return st;
}

static const char *vstate_str(gf_store_vstate s)
{
    return gf_store_vstate_name(s);
}

static json_t *io_json(const gf_manifest_io *io, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *shape = json_array();
        for (int32_t k = 0; k < io[i].rank; k++)
            json_array_append_new(shape, json_integer(io[i].shape[k]));
        json_array_append_new(arr, json_pack("{s:s, s:s, s:o}", "name", io[i].name, "datatype",
                                             gf_dtype_kserve_name(io[i].dtype), "shape", shape));
    }
    return arr;
}

/* A time in wall-clock microseconds, or null for 0 (never). */
static json_t *time_json(int64_t us)
{
    return us != 0 ? json_integer((json_int_t)us) : json_null();
}

/* One copy of v on worker w (tier index t) as JSON; with_version adds the
 * function and version (GET /v1/placements). */
static json_t *copy_json(const gw_version *v, int w, int t, bool with_version)
{
    const gw_copy *c = &v->pl[w].copy[t];
    json_t *j = json_pack("{s:i, s:s, s:I, s:s, s:I, s:o, s:o}", "worker", w, "tier",
                          gf_tier_name(t == GW_COPY_DEVICE ? GF_TIER_DEVICE : GF_TIER_HOST), "bytes", (json_int_t)c->bytes,
                          "state", "ready", "hits", (json_int_t)c->hits, "loaded_at_us",
                          time_json(c->loaded_at_us), "last_used_at_us",
                          time_json(c->last_used_us));
    if (j != NULL && with_version) {
        json_object_set_new(j, "function", json_string(v->fn->name));
        json_object_set_new(j, "version", json_integer((json_int_t)v->version));
    }
    return j;
}

/* Every copy of v: device ones first, by worker (v_placement's order). */
static json_t *placements_of(gf_gw *gw, const gw_version *v, json_t *arr, bool with_version)
{
    for (int t = GW_COPY_DEVICE; t >= GW_COPY_HOST; t--)
        for (int w = 0; w < gw->n_workers; w++)
            if (v->pl[w].copy[t].present)
                json_array_append_new(arr, copy_json(v, w, t, with_version));
    return arr;
}

static json_t *residency_json(const gf_residency *r)
{
    return json_pack("{s:b, s:s, s:f}", "pin", r->pin, "priority", gf_priority_name(r->priority),
                     "keep_warm_s", (double)r->keep_warm_us / 1e6);
}

static json_t *version_json(gf_gw *gw, const gw_version *v, int created)
{
    char invoke[160], v2[160];
    snprintf(invoke, sizeof invoke, "/v1/functions/%s/invoke", v->fn->name);
    snprintf(v2, sizeof v2, "/v2/models/%s/versions/%lld/infer", v->fn->name,
             (long long)v->version);
    json_t *j = json_pack("{s:s, s:I, s:s, s:s, s:I, s:s, s:b, s:s, s:s}", "name", v->fn->name,
                          "version", (json_int_t)v->version, "kind", v->mf->kind, "state",
                          vstate_str(v->state), "bytes", (json_int_t)v->bytes, "sha256",
                          v->sha256, "current", v->fn->current == v, "invoke", invoke, "v2", v2);
    if (j == NULL)
        return NULL;
    if (v->reason != NULL)
        json_object_set_new(j, "reason", json_string(v->reason));
    json_object_set_new(j, "inputs", io_json(v->mf->inputs, v->mf->n_inputs));
    json_object_set_new(j, "outputs", io_json(v->mf->outputs, v->mf->n_outputs));
    json_object_set_new(j, "max_batch_size", json_integer(v->mf->max_batch_size));
    if (v->mf->slo_ms > 0)
        json_object_set_new(j, "slo_ms", json_real(v->mf->slo_ms));
    json_object_set_new(j, "residency", residency_json(&v->mf->residency)); /* its manifest's */
    if (v->mf->admission_max_slo > 0)
        json_object_set_new(j, "admission", json_pack("{s:f}", "max_predicted_slo",
                                                      v->mf->admission_max_slo));
    json_object_set_new(j, "placements", placements_of(gw, v, json_array(), false));
    if (created >= 0)
        json_object_set_new(j, "created", json_boolean(created));
    return j;
}

static json_t *function_json(gf_gw *gw, const gw_function *f, bool detail)
{
    const gw_version *cur = f->current;
    json_t *j = json_pack("{s:s, s:s}", "name", f->name, "kind", f->kind ? f->kind : "");
    if (j == NULL)
        return NULL;
    json_object_set_new(j, "version", cur ? json_integer(cur->version) : json_null());
    json_object_set_new(j, "state", json_string(cur ? vstate_str(cur->state) : "unavailable"));
    char invoke[160];
    snprintf(invoke, sizeof invoke, "/v1/functions/%s/invoke", f->name);
    json_object_set_new(j, "invoke", json_string(invoke));
    if (cur != NULL) {
        json_object_set_new(j, "bytes", json_integer((json_int_t)cur->bytes));
        if (cur->mf->slo_ms > 0)
            json_object_set_new(j, "slo_ms", json_real(cur->mf->slo_ms));
        gf_residency res = gw_residency_of(cur);
        json_t *rj = residency_json(&res);
        json_object_set_new(rj, "source", json_string(f->has_res ? "api" : "manifest"));
        json_object_set_new(j, "residency", rj);
        json_object_set_new(j, "placements", placements_of(gw, cur, json_array(), false));
    }
    json_t *vs = json_array();
    for (size_t i = 0; i < f->n; i++) {
        if (f->versions[i]->state == GF_STORE_VERSION_DELETED)
            continue;
        json_array_append_new(vs, detail ? version_json(gw, f->versions[i], -1)
                                         : json_integer(f->versions[i]->version));
    }
    json_object_set_new(j, "versions", vs);
    return j;
}

gf_status gw_version_json(gf_gw *gw, const gw_version *v, int created, gf_buf *out)
{
    return emit(version_json(gw, v, created), out);
}

gf_status gw_function_json(gf_gw *gw, const gw_function *f, gf_buf *out)
{
    return emit(function_json(gw, f, true), out);
}

gf_status gf_gw_functions_json(gf_gw *gw, gf_buf *out)
{
    json_t *arr = json_array();
    pthread_mutex_lock(&gw->lock);
    for (size_t i = 0; i < gw->n_fns; i++)
        if (!gw->fns[i]->deleted)
            json_array_append_new(arr, function_json(gw, gw->fns[i], false));
    pthread_mutex_unlock(&gw->lock);
    return emit(json_pack("{s:o}", "functions", arr), out);
}

gf_status gf_gw_function_json(gf_gw *gw, const char *name, gf_buf *out, gf_err *err)
{
    json_t *j = NULL;
    gw_sync_lookup(gw, name, 0); /* not here yet: ask the shared store, if any */
    pthread_mutex_lock(&gw->lock);
    gw_function *f = gf_function_name_valid(name) ? gw_function_find(gw, name) : NULL;
    bool found = f != NULL && !f->deleted;
    if (found)
        j = function_json(gw, f, true);
    pthread_mutex_unlock(&gw->lock);
    if (!found)
        return gf_err_set(err, GF_ERR_NOT_FOUND, "function '%.80s' not found", name);
    return emit(j, out);
}

gf_status gf_gw_repo_index(gf_gw *gw, bool ready_only, gf_buf *out)
{
    json_t *arr = json_array();
    pthread_mutex_lock(&gw->lock);
    for (size_t i = 0; i < gw->n_fns; i++) {
        const gw_function *f = gw->fns[i];
        if (f->deleted)
            continue;
        for (size_t k = 0; k < f->n; k++) {
            const gw_version *v = f->versions[k];
            const char *ver = v->ver;
            if (v->state == GF_STORE_VERSION_DELETED)
                continue;
            char why[256];
            const char *reason = gw_version_unavailable(gw, v, why, sizeof why);
            bool ready = reason == NULL;
            if (ready_only && !ready)
                continue;
            json_t *e = json_pack("{s:s, s:s, s:s}", "name", f->name, "version", ver, "state",
                                  ready ? "READY" : "UNAVAILABLE");
            json_object_set_new(e, "reason", json_string(ready ? "" : reason));
            json_array_append_new(arr, e);
        }
    }
    pthread_mutex_unlock(&gw->lock);
    return emit(arr, out);
}

gf_status gf_gw_model_metadata(gf_gw *gw, const char *name, int64_t version, gf_buf *out,
                               gf_err *err)
{
    json_t *j = NULL;
    gf_status st = GF_OK;
    gw_sync_lookup(gw, name, version);
    pthread_mutex_lock(&gw->lock);
    gw_function *f;
    gw_version *v = gw_version_lookup(gw, name, version, &f);
    if (v == NULL || v->state == GF_STORE_VERSION_DELETED) {
        if (f == NULL || f->deleted)
            st = gf_err_set(err, GF_ERR_NOT_FOUND, "Request for unknown model: '%.80s' is not "
                            "found", name);
        else
            st = gf_err_set(err, GF_ERR_NOT_FOUND, "Request for unknown model: '%.80s' version "
                            "%lld is not found", name, (long long)version);
    } else {
        json_t *versions = json_array();
        for (size_t i = 0; i < f->n; i++) {
            if (f->versions[i]->state == GF_STORE_VERSION_DELETED)
                continue;
            json_array_append_new(versions, json_string(f->versions[i]->ver));
        }
        char platform[96];
        snprintf(platform, sizeof platform, "gpufaas_%s", v->mf->kind);
        j = json_pack("{s:s, s:o, s:s, s:o, s:o}", "name", f->name, "versions", versions,
                      "platform", platform, "inputs", io_json(v->mf->inputs, v->mf->n_inputs),
                      "outputs", io_json(v->mf->outputs, v->mf->n_outputs));
    }
    pthread_mutex_unlock(&gw->lock);
    return st != GF_OK ? st : emit(j, out);
}

bool gf_gw_model_ready(gf_gw *gw, const char *name, int64_t version)
{
    bool ready = false;
    gw_sync_lookup(gw, name, version);
    pthread_mutex_lock(&gw->lock);
    gw_version *v = gw_version_lookup(gw, name, version, NULL);
    char why[256];
    ready = v != NULL && gw_version_unavailable(gw, v, why, sizeof why) == NULL &&
            gw_workers_up(gw) > 0 &&
            !atomic_load(&gw->stopping);
    pthread_mutex_unlock(&gw->lock);
    return ready;
}

static const char *wstate_str(gw_wstate s)
{
    switch (s) {
    case GW_W_STARTING: return "starting";
    case GW_W_UP: return "up";
    case GW_W_DOWN: return "down";
    case GW_W_FAILED: return "failed";
    }
    return "?";
}

gf_status gf_gw_workers_json(gf_gw *gw, gf_buf *out)
{
    json_t *arr = json_array();
    pthread_mutex_lock(&gw->lock);
    for (int i = 0; i < gw->n_workers; i++) {
        const gw_worker *w = &gw->workers[i];
        json_t *models = json_array();
        for (size_t k = 0; k < gw->n_fns; k++)
            for (size_t m = 0; m < gw->fns[k]->n; m++) {
                const gw_version *v = gw->fns[k]->versions[m];
                for (int t = GW_COPY_DEVICE; t >= GW_COPY_HOST; t--)
                    if (v->pl[i].copy[t].present)
                        json_array_append_new(
                            models, json_pack("{s:s, s:I, s:s, s:I, s:I}", "function", v->fn->name,
                                              "version", (json_int_t)v->version, "tier",
                                              gf_tier_name(t == GW_COPY_DEVICE ? GF_TIER_DEVICE : GF_TIER_HOST), "bytes",
                                              (json_int_t)v->pl[i].copy[t].bytes, "hits",
                                              (json_int_t)v->pl[i].copy[t].hits));
            }
        uint64_t dbud = w->have_stats ? w->stats.device_budget : w->ready.device_budget;
        uint64_t hbud = w->have_stats ? w->stats.host_budget : w->ready.host_budget;
        json_t *j = json_pack("{s:i, s:s, s:s, s:i, s:s, s:i, s:i}", "id", i, "device", w->device,
                              "device_name", w->device_name, "pid", (int)w->pid, "state",
                              wstate_str(w->state), "restarts", w->restarts, "in_flight",
                              (int)w->n_inflight);
        json_object_set_new(j, "device_memory",
                            json_pack("{s:I, s:I}", "used",
                                      (json_int_t)(w->have_stats ? w->stats.device_used : 0),
                                      "budget", (json_int_t)dbud));
        json_object_set_new(j, "host_memory",
                            json_pack("{s:I, s:I}", "used",
                                      (json_int_t)(w->have_stats ? w->stats.host_used : 0),
                                      "budget", (json_int_t)hbud));
        json_object_set_new(j, "models", models);
        json_array_append_new(arr, j);
    }
    pthread_mutex_unlock(&gw->lock);
    return emit(json_pack("{s:o}", "workers", arr), out);
}

gf_status gf_gw_placements_json(gf_gw *gw, gf_buf *out)
{
    json_t *arr = json_array();
    pthread_mutex_lock(&gw->lock);
    for (size_t k = 0; k < gw->n_fns; k++)
        for (size_t m = 0; m < gw->fns[k]->n; m++)
            placements_of(gw, gw->fns[k]->versions[m], arr, true);
    pthread_mutex_unlock(&gw->lock);
    return emit(json_pack("{s:o}", "placements", arr), out);
}

gf_status gf_gw_server_metadata(gf_gw *gw, const char *const *extensions, gf_buf *out)
{
    (void)gw;
    json_t *ext = json_array();
    for (size_t i = 0; extensions != NULL && extensions[i] != NULL; i++)
        json_array_append_new(ext, json_string(extensions[i]));
    return emit(json_pack("{s:s, s:s, s:o}", "name", "gpufaas", "version", GF_VERSION,
                          "extensions", ext),
                out);
}

gf_status gf_gw_model_config(gf_gw *gw, const char *name, int64_t version, gf_buf *out,
                             gf_err *err)
{
    json_t *j = NULL;
    gf_status st = GF_OK;
    gw_sync_lookup(gw, name, version);
    pthread_mutex_lock(&gw->lock);
    gw_version *v = gw_version_lookup(gw, name, version, NULL);
    if (v == NULL || v->state == GF_STORE_VERSION_DELETED) {
        st = gf_err_set(err, GF_ERR_NOT_FOUND, "Request for unknown model: '%.80s'%s is not found",
                        name, version != 0 ? " (that version)" : "");
    } else {
        bool gpu = gw->n_workers > 0 && strncmp(gw->workers[0].device, "cuda", 4) == 0;
        gw_mc_extra x = {v->version, gw->n_workers, gpu};
        j = gw_model_config_of(v->mf, &x);
    }
    pthread_mutex_unlock(&gw->lock);
    return st != GF_OK ? st : emit(j, out);
}

gf_status gf_gw_metrics_text(gf_gw *gw, gf_buf *out)
{
    gw_metric_clear(gw->metrics, GW_M_WORKERS);
    gw_metric_clear(gw->metrics, GW_M_DEVICE_MEMORY);
    gw_metric_clear(gw->metrics, GW_M_HOST_MEMORY);
    int by_state[4] = {0, 0, 0, 0};
    pthread_mutex_lock(&gw->lock);
    for (int i = 0; i < gw->n_workers; i++) {
        const gw_worker *w = &gw->workers[i];
        by_state[w->state]++;
        char wid[16];
        snprintf(wid, sizeof wid, "%d", i);
        uint64_t dbud = w->have_stats ? w->stats.device_budget : w->ready.device_budget;
        uint64_t hbud = w->have_stats ? w->stats.host_budget : w->ready.host_budget;
        const char *lu[2] = {wid, "used"}, *lb[2] = {wid, "budget"};
        gw_metric_set(gw->metrics, GW_M_DEVICE_MEMORY, lu,
                      (double)(w->have_stats ? w->stats.device_used : 0));
        gw_metric_set(gw->metrics, GW_M_DEVICE_MEMORY, lb, (double)dbud);
        gw_metric_set(gw->metrics, GW_M_HOST_MEMORY, lu,
                      (double)(w->have_stats ? w->stats.host_used : 0));
        gw_metric_set(gw->metrics, GW_M_HOST_MEMORY, lb, (double)hbud);
        if (w->have_stats) {
            char proc[24];
            snprintf(proc, sizeof proc, "worker%d", i);
            const char *ci[2] = {proc, "in"}, *co[2] = {proc, "out"};
            gw_metric_set(gw->metrics, GW_M_TENSOR_COPIED, ci, (double)w->stats.copied_in_bytes);
            gw_metric_set(gw->metrics, GW_M_TENSOR_COPIED, co, (double)w->stats.copied_out_bytes);
        }
    }
    pthread_mutex_unlock(&gw->lock);
    const char *gi[2] = {"gateway", "in"}, *go[2] = {"gateway", "out"};
    gw_metric_set(gw->metrics, GW_M_TENSOR_COPIED, gi, (double)gf_copies_bytes(GF_COPY_IN));
    gw_metric_set(gw->metrics, GW_M_TENSOR_COPIED, go, (double)gf_copies_bytes(GF_COPY_OUT));
    for (int s = 0; s < 4; s++) {
        const char *l[1] = {wstate_str((gw_wstate)s)};
        gw_metric_set(gw->metrics, GW_M_WORKERS, l, by_state[s]);
    }
    size_t ready = 0, broken = 0, listed = 0;
    pthread_mutex_lock(&gw->lock);
    for (size_t k = 0; k < gw->n_fns; k++)
        for (size_t m = 0; m < gw->fns[k]->n; m++) {
            ready += gw->fns[k]->versions[m]->state == GF_STORE_VERSION_READY;
            broken += gw->fns[k]->versions[m]->state == GF_STORE_VERSION_BROKEN;
            listed++;
        }
    /* deleted ones are out of the registry; the requests pinning them hold them */
    size_t mem = atomic_load(&gw->versions_mem);
    pthread_mutex_unlock(&gw->lock);
    const char *lr[1] = {"ready"}, *lb[1] = {"broken"}, *ld[1] = {"deleted"};
    gw_metric_set(gw->metrics, GW_M_VERSIONS, lr, (double)ready);
    gw_metric_set(gw->metrics, GW_M_VERSIONS, lb, (double)broken);
    gw_metric_set(gw->metrics, GW_M_VERSIONS, ld, (double)(mem > listed ? mem - listed : 0));
    if (gw->store != NULL) {
        /* the store's own counters (a drop is also logged by the store) */
        gf_store_stats ss;
        gf_store_stats_get(gw->store, &ss);
        static const char *const outcome[4] = {"committed", "dropped", "rejected", "lost"};
        const uint64_t n[4] = {ss.committed, ss.dropped, ss.rejected, ss.lost};
        for (int i = 0; i < 4; i++) {
            const char *l[1] = {outcome[i]};
            gw_metric_set(gw->metrics, GW_M_STORE_RECORDS, l, (double)n[i]);
        }
    }
    return gw_metrics_write(gw->metrics, out);
}

gf_status gf_gw_output_labels(gf_gw *gw, const char *name, int64_t version, const char *output,
                              char ***labels, size_t *n)
{
    *labels = NULL;
    *n = 0;
    gf_status st = GF_OK;
    pthread_mutex_lock(&gw->lock);
    gw_version *v = gw_version_lookup(gw, name, version, NULL);
    long o = v != NULL ? gf_manifest_output_index(v->mf, output) : -1;
    size_t count = o >= 0 ? v->mf->outputs[o].n_labels : 0;
    char **copy = count > 0 ? calloc(count, sizeof *copy) : NULL;
    if (count > 0 && copy == NULL)
        st = GF_ERR_NOMEM;
    for (size_t i = 0; i < count && st == GF_OK; i++)
        if ((copy[i] = strdup(v->mf->outputs[o].labels[i])) == NULL)
            st = GF_ERR_NOMEM;
    pthread_mutex_unlock(&gw->lock);
    if (st != GF_OK) {
        gf_gw_labels_free(copy, count);
        return st;
    }
    *labels = copy;
    *n = count;
    return GF_OK;
}

void gf_gw_labels_free(char **labels, size_t n)
{
    for (size_t i = 0; labels != NULL && i < n; i++)
        free(labels[i]);
    free(labels);
}
