/* gpufaas — a function's versions (gateway/core): deploy, activate, delete
 * a version, delete the function. Each follows the rules of versions.h:
 * the decision is taken on a snapshot of the function under gw->lock and
 * applied under deploy_lock, which every change to versions holds, so
 * nothing changes between the two. The store is written before memory, so
 * that what is served is always what a restart would serve. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/path.h"
#include "gateway/core/internal.h"
#include "gateway/core/versions.h"
#include "store/sha256.h"

/* ---- a snapshot of a function for the rules ----------------------------------------- */

typedef struct snapshot {
    gf_ver_entry *e;
    gf_buf *ids; /* each entry's identity (its text is e[i].identity) */
    gf_ver_state s;
} snapshot;

static void snapshot_deinit(snapshot *sn)
{
    for (size_t i = 0; sn->ids != NULL && i < sn->s.n_live; i++)
        gf_buf_deinit(&sn->ids[i]);
    free(sn->ids);
    free(sn->e);
}

/* The live versions of the function named name (lock held). Strings borrow
 * from the registry, which cannot change under deploy_lock. */
static gf_status snapshot_take(gf_gw *gw, const char *name, snapshot *sn, gf_err *err)
{
    memset(sn, 0, sizeof *sn);
    sn->s.function = name;
    gw_function *f = gw_function_find(gw, name);
    if (f == NULL)
        return GF_OK;
    sn->s.max_version = f->max_version;
    if (f->deleted)
        return GF_OK;
    sn->e = calloc(f->n ? f->n : 1, sizeof *sn->e);
    sn->ids = calloc(f->n ? f->n : 1, sizeof *sn->ids);
    if (sn->e == NULL || sn->ids == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < f->n; i++) {
        const gw_version *v = f->versions[i];
        if (v->state == GF_STORE_VERSION_DELETED)
            continue;
        size_t k = sn->s.n_live++;
        gf_buf_init(&sn->ids[k]);
        if (gf_ver_identity(v->mf, &sn->ids[k]) != GF_OK)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        sn->e[k] = (gf_ver_entry){v->version,          v->state == GF_STORE_VERSION_READY,
                                  f->current == v,     v->sha256,
                                  sn->ids[k].data,     v->mf};
    }
    sn->s.live = sn->e;
    return GF_OK;
}

/* Decide r for the function named name (lock not held). */
static gf_status decide(gf_gw *gw, const char *name, const gf_ver_request *r, gf_ver_decision *d,
                        gf_err *err)
{
    snapshot sn;
    pthread_mutex_lock(&gw->lock);
    gf_status st = snapshot_take(gw, name, &sn, err);
    if (st == GF_OK)
        gf_ver_decide(&sn.s, r, d);
    pthread_mutex_unlock(&gw->lock);
    snapshot_deinit(&sn);
    if (st == GF_OK && d->status != GF_OK)
        st = gf_err_set(err, d->status, "%s", d->why);
    return st;
}

/* Warm the host tier of the worker that would run v (lock held). */
static void warm(gf_gw *gw, gw_version *v)
{
    gw_worker *w = gw_route(gw, v, -1, NULL);
    if (w != NULL)
        gw_worker_load(gw, w, v, GF_TIER_HOST, NULL);
}

/* ---- deploy ----------------------------------------------------------------------- */

/* A version's files on their way into the function store: where each is
 * now. A rename moves one; whatever is still somewhere when a deploy fails
 * is removed. */
typedef struct {
    char *weights;          /* the weights file (the upload, or the converted file) */
    size_t n;
    char **companions;      /* borrowed from the validation: paths updated in place */
    char *const *suffixes;
} vfiles;

static void vfiles_remove(vfiles *f)
{
    if (f->weights != NULL)
        unlink(f->weights);
    for (size_t i = 0; i < f->n; i++)
        unlink(f->companions[i]);
}

/* Move every file to <dir>/v<version>.safetensors and .<suffix>. */
static gf_status vfiles_place(vfiles *f, const char *dir, int64_t version, gf_err *err)
{
    char name[96];
    snprintf(name, sizeof name, "v%lld.safetensors", (long long)version);
    char *dst = gf_path_join(dir, name);
    if (dst == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    if (rename(f->weights, dst) != 0) {
        gf_status st = gf_err_set(err, GF_ERR_IO, "storing the weights: rename(%s, %s): %s",
                                  f->weights, dst, strerror(errno));
        free(dst);
        return st;
    }
    free(f->weights);
    f->weights = dst;
    for (size_t i = 0; i < f->n; i++) {
        char *c = gf_companion_path(f->weights, f->suffixes[i]);
        if (c == NULL)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        if (rename(f->companions[i], c) != 0) {
            gf_status st = gf_err_set(err, GF_ERR_IO, "storing companion file '%s': rename(%s, "
                                      "%s): %s", f->suffixes[i], f->companions[i], c,
                                      strerror(errno));
            free(c);
            return st;
        }
        free(f->companions[i]);
        f->companions[i] = c;
    }
    return GF_OK;
}

gf_status gw_publish_local(gf_gw *gw, gw_version *v, gf_err *err)
{
    pthread_mutex_lock(&gw->lock);
    bool already = v->fn->current == v;
    pthread_mutex_unlock(&gw->lock);
    if (already)
        return GF_OK;
    gf_status st = gf_store_version_publish(gw->store, v->fn->name, v->version, err);
    if (st != GF_OK)
        return st;
    pthread_mutex_lock(&gw->lock);
    v->fn->current = v; /* requests from now on get it; those in flight keep theirs */
    v->fn->unloaded = false; /* a deploy or an activation loads it */
    warm(gw, v);
    pthread_mutex_unlock(&gw->lock);
    GF_LOG_I("function '%s' version %lld is current", v->fn->name, (long long)v->version);
    return GF_OK;
}

/* Record the validated upload as version d->version of mf->name: its files
 * in place, the store, the registry, current (deploy_lock held). */
static gf_status create_version(gf_gw *gw, const gf_manifest *mf, const char *manifest_json,
                                vfiles *files, const char *sha, uint64_t bytes, int64_t version,
                                gw_version **out, gf_err *err)
{
    char *dir = gf_path_join(gw->functions_dir, mf->name);
    gf_status st = dir == NULL ? gf_err_set(err, GF_ERR_NOMEM, "out of memory")
                               : gw_make_dirs(dir, err);
    if (st == GF_OK)
        st = vfiles_place(files, dir, version, err);
    free(dir);
    if (st != GF_OK)
        return st;
    gf_store_version_spec spec = {.function = mf->name,
                                  .version = version,
                                  .kind = mf->kind,
                                  .manifest = manifest_json,
                                  .weights_path = files->weights,
                                  .bytes = bytes,
                                  .sha256 = sha,
                                  .publish = true};
    if (gf_store_file_id_of(files->weights, &spec.file, err) != GF_OK)
        return err != NULL ? err->code : GF_ERR_IO;
    if ((st = gf_store_version_deploy(gw->store, &spec, NULL, err)) != GF_OK)
        return st;
    /* durable: publish in memory. Requests from now on get the new version;
     * those in flight finish on the one they started with */
    pthread_mutex_lock(&gw->lock);
    gw_version *v;
    st = gw_registry_add(gw, mf->name, mf->kind, version, manifest_json, files->weights, sha,
                         bytes, GF_STORE_VERSION_READY, NULL, &v, err);
    if (st == GF_OK) {
        v->file = spec.file;
        v->verified = true; /* hashed as it streamed in */
        v->fn->current = v;
        v->fn->unloaded = false; /* a deploy loads it */
        warm(gw, v);
        *out = v;
    }
    pthread_mutex_unlock(&gw->lock);
    return st;
}

gf_status gf_gw_deploy(gf_gw *gw, const gf_gw_deploy_req *req, gf_gw_deployed *out,
                       gf_err *err)
{
    memset(out, 0, sizeof *out);
    gf_buf_init(&out->json);
    gf_manifest *mf = NULL;
    gf_validation val;
    memset(&val, 0, sizeof val);
    vfiles files = {0};
    char sha[GF_SHA256_HEX_LEN];
    uint64_t bytes = req->bytes;
    gf_buf mj, id;
    gf_buf_init(&mj);
    gf_buf_init(&id);
    gf_status st;
    pthread_mutex_lock(&gw->deploy_lock);
    if (atomic_load(&gw->stopping)) {
        st = gf_err_set(err, GF_ERR_CLOSED, "the server is shutting down");
        goto out;
    }
    /* the kind's code (validation, conversion) runs in a child, never here */
    const char *uploads[GF_MAX_UPLOADS];
    if (req->n_extra + 1 > GF_MAX_UPLOADS) {
        st = gf_err_set(err, GF_ERR_INVALID, "a deploy brings at most %d files", GF_MAX_UPLOADS);
        goto out;
    }
    uploads[0] = req->weights_tmp;
    for (size_t i = 0; i < req->n_extra; i++)
        uploads[1 + i] = req->extra_tmp[i];
    gf_fn_deploy_in in = {req->manifest, req->manifest_len, req->name, req->kind, uploads,
                          1 + req->n_extra};
    uint64_t t0 = gf_mono_us();
    st = gf_oneshot_validate(&gw->oneshot, &in, gw->upload_dir, &val, err);
    if (st != GF_OK)
        goto out;
    GF_LOG_D("deploy: validated in %.3f s", (double)(gf_mono_us() - t0) / 1e6);
    if ((st = gf_manifest_parse(val.manifest_json, strlen(val.manifest_json), &mf, err)) !=
        GF_OK) {
        gf_err_prefix(err, "the validator's manifest");
        st = err != NULL ? (err->code = GF_ERR_INTERNAL) : GF_ERR_INTERNAL;
        goto out;
    }
    if (val.weights == NULL && req->n_extra > 0) {
        st = gf_err_set(err, GF_ERR_INTERNAL, "kind '%s' took %zu files but wrote no weights",
                        mf->kind, 1 + req->n_extra);
        goto out;
    }
    files.n = val.n_companions;
    files.companions = val.companion_files;
    files.suffixes = val.companions;
    if (val.weights != NULL) {
        /* converted: the upload is spent; the new file is what is stored */
        unlink(req->weights_tmp);
        files.weights = strdup(val.weights);
        if (files.weights != NULL &&
            (st = gf_sha256_file(files.weights, sha, &bytes, err)) != GF_OK)
            goto out;
    } else {
        files.weights = strdup(req->weights_tmp);
        snprintf(sha, sizeof sha, "%s", req->sha256_hex);
    }
    if (files.weights == NULL || gf_manifest_to_json(mf, &mj) != GF_OK ||
        gf_ver_identity(mf, &id) != GF_OK) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (gw->sync != NULL) {
        /* the store's log chooses the version; every node installs it */
        gw_sync_deploy_in sin = {mf,          mj.data,           files.weights,
                                 sha,         bytes,             files.companions,
                                 files.suffixes, files.n,        req->allow_interface_change};
        bool taken = false;
        st = gw_sync_deploy(gw, &sin, &taken, out, err);
        if (taken) { /* moved into the function store: not ours to remove any more */
            free(files.weights);
            files.weights = NULL;
            files.n = 0;
        } else {
            vfiles_remove(&files); /* refused, or identical to a version there is */
        }
        if (st == GF_OK)
            GF_LOG_I("function '%s' version %lld deployed through the shared store (%s, %llu "
                     "bytes, sha256 %.12s...)", mf->name, (long long)out->version, mf->kind,
                     (unsigned long long)bytes, sha);
        goto out;
    }
    pthread_mutex_lock(&gw->lock);
    uint64_t budget = gw_max_device_budget(gw);
    /* a manifest's pin counts against the pin limit unless the function's
     * run-time override decides instead */
    gw_function *pf = gw_function_find(gw, mf->name);
    if (mf->residency.pin && (pf == NULL || pf->deleted || !pf->has_res) &&
        (st = gw_pin_check(gw, pf, bytes, err)) != GF_OK) {
        pthread_mutex_unlock(&gw->lock);
        gf_err_prefix(err, "function '%s' asks to be pinned", mf->name);
        goto out;
    }
    pthread_mutex_unlock(&gw->lock);
    if (budget > 0 && bytes > budget) {
        st = gf_err_set(err, GF_ERR_INVALID,
                        "function '%s': its parameters need %llu bytes of device memory, more "
                        "than any worker's device budget (the largest is %llu bytes): it could "
                        "never run here",
                        mf->name, (unsigned long long)bytes, (unsigned long long)budget);
        goto out;
    }
    /* which version this is, by the rules */
    gf_ver_request r = {GF_VER_DEPLOY, mf->version, sha, id.data, mf,
                        req->allow_interface_change};
    gf_ver_decision d;
    if ((st = decide(gw, mf->name, &r, &d, err)) != GF_OK)
        goto out;
    gw_version *v = NULL;
    if (d.outcome == GF_VER_EXISTING) {
        vfiles_remove(&files); /* the same bytes are stored already */
        pthread_mutex_lock(&gw->lock);
        v = gw_version_find(gw_function_find(gw, mf->name), d.version);
        pthread_mutex_unlock(&gw->lock);
        if (v == NULL) {
            st = gf_err_set(err, GF_ERR_INTERNAL, "version %lld vanished", (long long)d.version);
            goto out;
        }
        if ((st = gw_publish_local(gw, v, err)) != GF_OK)
            goto out;
    } else {
        st = create_version(gw, mf, mj.data, &files, sha, bytes, d.version, &v, err);
        if (st != GF_OK)
            goto out;
        out->created = true;
    }
    pthread_mutex_lock(&gw->lock);
    if ((st = gw_version_json(gw, v, out->created, &out->json)) != GF_OK)
        st = gf_err_set(err, st, "out of memory describing the version");
    pthread_mutex_unlock(&gw->lock);
    snprintf(out->name, sizeof out->name, "%s", mf->name);
    out->version = d.version;
    if (st != GF_OK)
        goto out;
    if (out->created)
        GF_LOG_I("function '%s' version %lld deployed (%s, %llu bytes, sha256 %.12s...%s)",
                 mf->name, (long long)d.version, mf->kind, (unsigned long long)bytes, sha,
                 val.weights != NULL ? ", converted" : "");
    else
        GF_LOG_I("function '%s': the upload is version %lld (the same weights and manifest)",
                 mf->name, (long long)d.version);
out:
    if (st != GF_OK) {
        vfiles_remove(&files);
        unlink(req->weights_tmp);
    }
    for (size_t i = 0; i < req->n_extra; i++) /* spent by the conversion, or refused */
        unlink(req->extra_tmp[i]);
    free(files.weights);
    gf_validation_deinit(&val);
    pthread_mutex_unlock(&gw->deploy_lock);
    gf_manifest_free(mf);
    gf_buf_deinit(&mj);
    gf_buf_deinit(&id);
    return st;
}

/* ---- activate ---------------------------------------------------------------------- */

gf_status gf_gw_activate(gf_gw *gw, const char *name, int64_t version, gf_buf *out,
                         gf_err *err)
{
    if (!gf_function_name_valid(name))
        return gf_err_set(err, GF_ERR_INVALID, "'%.80s' is not a valid function name", name);
    pthread_mutex_lock(&gw->deploy_lock);
    gf_ver_request r = {.op = GF_VER_ACTIVATE, .version = version};
    gf_ver_decision d;
    gf_status st = gw->sync != NULL ? gw_sync_op(gw, name, GF_VER_ACTIVATE, version, err)
                                    : decide(gw, name, &r, &d, err);
    gw_version *v = NULL;
    if (st == GF_OK && gw->sync != NULL) { /* the sync made it current here */
        pthread_mutex_lock(&gw->lock);
        v = gw_version_find(gw_function_find(gw, name), version);
        pthread_mutex_unlock(&gw->lock);
        if (v == NULL)
            st = gf_err_set(err, GF_ERR_CLOSED, "function '%s' version %lld is current in the "
                            "shared store but not on this node yet", name, (long long)version);
    } else if (st == GF_OK) {
        pthread_mutex_lock(&gw->lock);
        v = gw_version_find(gw_function_find(gw, name), version);
        pthread_mutex_unlock(&gw->lock);
        st = v != NULL ? gw_publish_local(gw, v, err)
                       : gf_err_set(err, GF_ERR_INTERNAL, "version %lld vanished",
                                    (long long)version);
    }
    if (st == GF_OK) {
        pthread_mutex_lock(&gw->lock);
        st = gw_function_json(gw, v->fn, out);
        pthread_mutex_unlock(&gw->lock);
        if (st != GF_OK)
            st = gf_err_set(err, st, "out of memory describing the function");
    }
    pthread_mutex_unlock(&gw->deploy_lock);
    return st;
}

/* ---- delete ----------------------------------------------------------------------- */

gf_status gw_delete_local(gf_gw *gw, const char *name, gf_err *err)
{
    pthread_mutex_lock(&gw->lock);
    gw_function *f = gw_function_find(gw, name);
    if (f == NULL || f->deleted) {
        pthread_mutex_unlock(&gw->lock);
        return gf_err_set(err, GF_ERR_NOT_FOUND, "function '%s' not found", name);
    }
    f->deleted = true;
    f->current = NULL;
    size_t n = f->n;
    gw_version **gone = calloc(n ? n : 1, sizeof *gone);
    size_t m = 0;
    while (f->n > 0) {
        gw_version *v = f->versions[f->n - 1];
        v->state = GF_STORE_VERSION_DELETED;
        gw_worker_unload_all(gw, v);
        if (gone != NULL) {
            gw_version_ref(v);
            gone[m++] = v;
        }
        gw_registry_drop(gw, v);
    }
    pthread_mutex_unlock(&gw->lock);
    gf_status st = gf_store_function_delete(gw->store, name, err);
    if (st != GF_OK && st != GF_ERR_NOT_FOUND)
        GF_LOG_W("deleting '%s' in the store: %s", name, gf_err_msg(err));
    for (size_t i = 0; i < m; i++) {
        gw_version_files_remove(gw, gone[i]);
        gw_version_unref(gone[i]);
    }
    free(gone);
    char *dir = gf_path_join(gw->functions_dir, name);
    if (dir != NULL) {
        gw_remove_files(dir); /* anything else left in its folder */
        rmdir(dir);
    }
    free(dir);
    GF_LOG_I("function '%s' deleted", name);
    return GF_OK;
}

gf_status gf_gw_delete(gf_gw *gw, const char *name, gf_err *err)
{
    if (!gf_function_name_valid(name))
        return gf_err_set(err, GF_ERR_INVALID, "'%.80s' is not a valid function name", name);
    pthread_mutex_lock(&gw->deploy_lock);
    gf_ver_request r = {.op = GF_VER_DELETE};
    gf_ver_decision d;
    gf_status st = gw->sync != NULL ? gw_sync_op(gw, name, GF_VER_DELETE, 0, err) /* by the log */
                                    : decide(gw, name, &r, &d, err);
    if (st == GF_OK && gw->sync == NULL)
        st = gw_delete_local(gw, name, err);
    pthread_mutex_unlock(&gw->deploy_lock);
    return st;
}

gf_status gw_delete_version_local(gf_gw *gw, const char *name, int64_t version, gf_err *err)
{
    gf_status st = gf_store_version_delete(gw->store, name, version, err);
    if (st != GF_OK)
        return st;
    pthread_mutex_lock(&gw->lock);
    gw_version *v = gw_version_find(gw_function_find(gw, name), version);
    if (v != NULL) {
        v->state = GF_STORE_VERSION_DELETED;
        gw_worker_unload_all(gw, v);
        gw_version_ref(v);
        gw_registry_drop(gw, v);
    }
    pthread_mutex_unlock(&gw->lock);
    if (v != NULL) {
        gw_version_files_remove(gw, v);
        gw_version_unref(v);
        GF_LOG_I("function '%s' version %lld deleted", name, (long long)version);
    }
    return GF_OK;
}

gf_status gf_gw_delete_version(gf_gw *gw, const char *name, int64_t version, gf_err *err)
{
    if (!gf_function_name_valid(name))
        return gf_err_set(err, GF_ERR_INVALID, "'%.80s' is not a valid function name", name);
    pthread_mutex_lock(&gw->deploy_lock);
    gf_ver_request r = {.op = GF_VER_DELETE_VERSION, .version = version};
    gf_ver_decision d;
    gf_status st = gw->sync != NULL ? gw_sync_op(gw, name, GF_VER_DELETE_VERSION, version, err)
                                    : decide(gw, name, &r, &d, err);
    if (st == GF_OK && gw->sync == NULL)
        st = d.outcome == GF_VER_REMOVE_ALL ? gw_delete_local(gw, name, err)
                                            : gw_delete_version_local(gw, name, version, err);
    pthread_mutex_unlock(&gw->deploy_lock);
    return st;
}
