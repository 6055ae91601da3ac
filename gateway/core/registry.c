/* gpufaas — the gateway's registry: functions and versions in memory,
 * rebuilt at start from SQLite and the state directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "functions/manifest.h"
#include "gateway/core/internal.h"

gw_function *gw_function_find(gf_gw *gw, const char *name)
{
    for (size_t i = 0; i < gw->n_fns; i++)
        if (strcmp(gw->fns[i]->name, name) == 0)
            return gw->fns[i];
    return NULL;
}

gw_version *gw_version_find(gw_function *f, int64_t version)
{
    if (version == 0)
        return f->current;
    for (size_t i = 0; i < f->n; i++)
        if (f->versions[i]->version == version)
            return f->versions[i]->state != GF_STORE_VERSION_DELETED ? f->versions[i] : NULL;
    return NULL;
}

gw_version *gw_version_lookup(gf_gw *gw, const char *name, int64_t version, gw_function **fn)
{
    gw_function *f = gf_function_name_valid(name) ? gw_function_find(gw, name) : NULL;
    if (fn != NULL)
        *fn = f;
    return f != NULL && !f->deleted ? gw_version_find(f, version) : NULL;
}

gw_version *gw_version_by_key(gf_gw *gw, const char *key)
{
    const char *at = strrchr(key, '@');
    if (at == NULL || (size_t)(at - key) >= 64)
        return NULL;
    char name[64];
    memcpy(name, key, (size_t)(at - key));
    name[at - key] = '\0';
    gw_function *f = gw_function_find(gw, name);
    if (f == NULL)
        return NULL;
    return gw_version_find(f, strtoll(at + 1, NULL, 10));
}

static void version_destroy(gw_version *v)
{
    const char *at = strrchr(v->key, '@');
    if (v->gw != NULL && at != NULL) { /* its series go with it */
        char name[sizeof v->key];
        snprintf(name, sizeof name, "%.*s", (int)(at - v->key), v->key);
        gw_metrics_forget_version(v->gw->metrics, name, at + 1);
        atomic_fetch_sub(&v->gw->versions_mem, 1);
    }
    gf_manifest_free(v->mf);
    free(v->manifest_json);
    free(v->weights_path);
    free(v->reason);
    free(v);
}

void gw_version_ref(gw_version *v)
{
    atomic_fetch_add(&v->refs, 1);
}

void gw_version_unref(gw_version *v)
{
    if (atomic_fetch_sub(&v->refs, 1) == 1)
        version_destroy(v);
}

static void function_destroy(gw_function *f)
{
    for (size_t i = 0; i < f->n; i++)
        gw_version_unref(f->versions[i]);
    free(f->versions);
    free(f->kind);
    free(f);
}

void gw_registry_drop(gf_gw *gw, gw_version *v)
{
    (void)gw;
    gw_function *f = v->fn;
    for (size_t i = 0; i < f->n; i++) {
        if (f->versions[i] != v)
            continue;
        memmove(&f->versions[i], &f->versions[i + 1], (f->n - i - 1) * sizeof *f->versions);
        f->n--;
        if (f->current == v)
            f->current = NULL;
        gw_version_unref(v);
        return;
    }
}

void gw_registry_free(gf_gw *gw)
{
    for (size_t i = 0; i < gw->n_fns; i++)
        function_destroy(gw->fns[i]);
    free(gw->fns);
    gw->fns = NULL;
    gw->n_fns = 0;
}

gw_function *gw_function_ensure(gf_gw *gw, const char *name)
{
    gw_function *f = gw_function_find(gw, name);
    if (f != NULL)
        return f;
    if (gw->n_fns == gw->cap_fns) {
        size_t cap = gw->cap_fns ? gw->cap_fns * 2 : 16;
        gw_function **fs = realloc(gw->fns, cap * sizeof *fs);
        if (fs == NULL)
            return NULL;
        gw->fns = fs;
        gw->cap_fns = cap;
    }
    f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    snprintf(f->name, sizeof f->name, "%s", name);
    gw->fns[gw->n_fns++] = f;
    return f;
}

/* Add (or revive) function name and append a version to it. Lock held.
 * manifest_json is parsed here; the strings are copied. */
gf_status gw_registry_add(gf_gw *gw, const char *name, const char *kind, int64_t version,
                          const char *manifest_json, const char *weights_path,
                          const char *sha256, uint64_t bytes, gf_store_vstate state,
                          const char *reason, gw_version **out, gf_err *err)
{
    gw_version *v = calloc(1, sizeof *v);
    if (v == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    gf_status st = gf_manifest_parse(manifest_json, strlen(manifest_json), &v->mf, err);
    if (st != GF_OK) {
        free(v);
        return st;
    }
    gf_buf b;
    gf_buf_init(&b);
    st = gf_manifest_to_json(v->mf, &b);
    v->manifest_json = st == GF_OK ? gf_buf_steal(&b, NULL) : NULL;
    gf_buf_deinit(&b);
    v->weights_path = strdup(weights_path);
    v->reason = reason != NULL ? strdup(reason) : NULL;
    if (v->manifest_json == NULL || v->weights_path == NULL) {
        version_destroy(v);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    v->version = version;
    gf_fmt_i64(v->ver, version);
    snprintf(v->sha256, sizeof v->sha256, "%s", sha256 != NULL ? sha256 : "");
    v->bytes = bytes;
    v->device_bytes = bytes;
    v->state = state;
    snprintf(v->key, sizeof v->key, "%s@%lld", name, (long long)version);
    atomic_init(&v->refs, 1); /* the registry's */
    v->gw = gw;
    atomic_fetch_add(&gw->versions_mem, 1);
    v->batchable = true;
    for (size_t i = 0; i < v->mf->n_inputs; i++)
        v->batchable = v->batchable && v->mf->inputs[i].shape[0] == -1;
    for (size_t i = 0; i < v->mf->n_outputs; i++)
        v->batchable = v->batchable && v->mf->outputs[i].shape[0] == -1;
    for (int w = 0; w < GW_MAX_WORKERS; w++)
        v->pl[w].tier = GF_TIER_NONE;

    gw_function *f = gw_function_ensure(gw, name);
    if (f == NULL) {
        version_destroy(v);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    char *k = strdup(kind);
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 4;
        gw_version **vs = realloc(f->versions, cap * sizeof *vs);
        if (vs != NULL) {
            f->versions = vs;
            f->cap = cap;
        }
    }
    if (k == NULL || f->n == f->cap) {
        free(k);
        version_destroy(v);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    free(f->kind);
    f->kind = k;
    f->deleted = false;
    /* keep versions ascending */
    size_t pos = f->n;
    while (pos > 0 && f->versions[pos - 1]->version > version) {
        f->versions[pos] = f->versions[pos - 1];
        pos--;
    }
    f->versions[pos] = v;
    f->n++;
    v->fn = f;
    if (version > f->max_version)
        f->max_version = version;
    if (out != NULL)
        *out = v;
    return GF_OK;
}

gf_status gw_registry_recover(gf_gw *gw, gf_err *err)
{
    gf_store_catalog *cat;
    uint64_t t0 = gf_mono_us();
    gf_status st = gf_store_recover(gw->store, gw->state_dir, &cat, err);
    if (st != GF_OK)
        return st;
    size_t ready = 0, broken = 0;
    pthread_mutex_lock(&gw->lock);
    /* every name ever deployed, with the highest number it had: a deleted
     * function's numbers continue when it is deployed again */
    for (size_t i = 0; i < cat->n_functions && st == GF_OK; i++) {
        const gf_store_function_info *fi = &cat->functions[i];
        if (!gf_function_name_valid(fi->name))
            continue;
        gw_function *f = gw_function_ensure(gw, fi->name);
        if (f == NULL) {
            st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            break;
        }
        f->max_version = fi->max_version;
        f->deleted = true; /* until a live version is added */
        f->unloaded = fi->unloaded; /* a repository unload lasts until a load */
    }
    for (size_t i = 0; i < cat->n; i++) {
        const gf_store_version_info *vi = &cat->versions[i];
        char *path = NULL;
        if (vi->weights_path[0] == '/') {
            path = strdup(vi->weights_path);
        } else {
            size_t n = strlen(gw->state_dir) + strlen(vi->weights_path) + 2;
            path = malloc(n);
            if (path != NULL)
                snprintf(path, n, "%s/%s", gw->state_dir, vi->weights_path);
        }
        if (st != GF_OK)
            break;
        if (path == NULL) {
            st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            break;
        }
        gw_version *v;
        gf_err e;
        gf_status s2 = gw_registry_add(gw, vi->function, vi->kind, vi->version, vi->manifest,
                                       path, vi->sha256, vi->bytes, vi->state, vi->state_reason,
                                       &v, &e);
        free(path);
        if (s2 != GF_OK) {
            GF_LOG_W("function '%s' version %lld: cannot be restored: %s", vi->function,
                     (long long)vi->version, e.msg);
            continue;
        }
        v->file = vi->file;
        v->verified = vi->hashed_now; /* else the background check hashes it */
        if (vi->current) /* a broken current one stays current: it is answered 503 */
            v->fn->current = v;
        v->fn->has_res = vi->has_residency;
        if (vi->has_residency)
            v->fn->res = vi->residency;
        if (vi->state == GF_STORE_VERSION_READY) {
            ready++;
        } else {
            broken++;
            GF_LOG_W("function '%s' version %lld is broken and will not be served: %s",
                     vi->function, (long long)vi->version,
                     vi->state_reason ? vi->state_reason : "(no reason recorded)");
        }
    }
    pthread_mutex_unlock(&gw->lock);
    size_t hashed = cat->hashed_now;
    gf_store_catalog_free(cat);
    if (st == GF_OK)
        GF_LOG_I("restored %zu function version(s) from the store in %.3f s: %zu ready, %zu "
                 "broken; %zu weights file(s) read because they had changed",
                 ready + broken, (double)(gf_mono_us() - t0) / 1e6, ready, broken, hashed);
    return st;
}
