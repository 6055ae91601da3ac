/* gpufaas — deploys and deletes through the shared store's log
 * (gateway/core): validate here, publish the objects, append the entry,
 * fold the log; the entry's outcome is the answer (sync.c's header). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "core/clock.h"
#include "core/log.h"
#include "core/path.h"
#include "store/sha256.h"
#include "gateway/core/internal.h"
#include "gateway/core/shared.h"
#include "gateway/core/sync_impl.h"

/* ---- deploys and deletes through the store ---------------------------------------- */

gf_status gw_sync_deploy(gf_gw *gw, const gw_sync_deploy_in *in, bool *taken,
                         gf_gw_deployed *out, gf_err *err)
{
    gw_sync *s = gw->sync;
    *taken = false;
    gf_shared_entry e;
    memset(&e, 0, sizeof e);
    e.op = GF_SHARED_DEPLOY;
    e.version = in->mf->version;
    e.interface_change = in->interface_change;
    e.kind = strdup(in->mf->kind);
    e.manifest = strdup(in->manifest_json);
    snprintf(e.weights.sha256, sizeof e.weights.sha256, "%s", in->sha256);
    e.weights.bytes = in->bytes;
    gf_status st = GF_OK;
    if (e.kind == NULL || e.manifest == NULL ||
        (in->n > 0 && (e.companions = calloc(in->n, sizeof *e.companions)) == NULL)) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < in->n; i++, e.n_companions++) {
        gf_shared_blob *b = &e.companions[i];
        snprintf(b->suffix, sizeof b->suffix, "%s", in->suffixes[i]);
        if ((st = gf_sha256_file(in->companions[i], b->sha256, &b->bytes, err)) != GF_OK)
            goto out;
    }
    /* the objects first (slow, and without the lock: the store is safe for that),
     * so that the entry never names what is not there yet */
    pthread_mutex_lock(&s->lock);
    st = gw_sync_ensure_open(s, err);
    pthread_mutex_unlock(&s->lock);
    if (st == GF_OK)
        st = gf_shared_object_put(s->sh, in->weights, &e.weights, err);
    for (size_t i = 0; st == GF_OK && i < e.n_companions; i++)
        st = gf_shared_object_put(s->sh, in->companions[i], &e.companions[i], err);
    if (st != GF_OK) {
        gw_sync_health(s, st, err);
        gf_err_prefix(err, "publishing to the shared store");
        st = err != NULL ? (err->code = GF_ERR_CLOSED) : GF_ERR_CLOSED;
        goto out;
    }
    pthread_mutex_lock(&s->lock);
    gw_sync_fn *f = gw_sync_fn_get(s, in->mf->name, true);
    uint64_t seq = 0;
    gf_shared_outcome o;
    memset(&o, 0, sizeof o);
    if (f == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    } else if ((st = gf_shared_append(s->sh, in->mf->name, &e, &seq, err)) != GF_OK ||
               (st = gw_sync_fold_new(s, f, seq, &o, err)) != GF_OK) {
        gw_sync_health(s, st, err);
        gf_err_prefix(err, "the shared store");
        st = err != NULL ? (err->code = GF_ERR_CLOSED) : GF_ERR_CLOSED;
    } else if (f->fold.seq < seq) {
        st = gf_err_set(err, GF_ERR_CLOSED, "the shared store does not show entry %llu of "
                        "'%s' yet", (unsigned long long)seq, in->mf->name);
    } else if (o.status != GF_OK) {
        st = gf_err_set(err, o.status, "%s", o.message); /* the rules' own words */
    } else {
        local_files lf = {o.version, strdup(in->weights), in->companions, in->suffixes, in->n};
        gw_sync_reconcile(s, f, o.identical ? NULL : &lf);
        *taken = lf.weights == NULL && !o.identical;
        free(lf.weights);
        pthread_mutex_lock(&gw->lock);
        gw_function *lfn = gw_function_find(gw, in->mf->name);
        gw_version *v = lfn != NULL ? gw_version_find(lfn, o.version) : NULL;
        if (v == NULL)
            st = gf_err_set(err, GF_ERR_CLOSED, "function '%s' version %lld is in the shared "
                            "store but not on this node: %s", in->mf->name,
                            (long long)o.version, f->fetch_err);
        else if ((st = gw_version_json(gw, v, !o.identical, &out->json)) != GF_OK)
            st = gf_err_set(err, st, "out of memory describing the new version");
        out->created = !o.identical;
        pthread_mutex_unlock(&gw->lock);
        snprintf(out->name, sizeof out->name, "%s", in->mf->name);
        out->version = o.version;
    }
    pthread_mutex_unlock(&s->lock);
out:
    gf_shared_entry_deinit(&e);
    return st;
}

gf_status gw_sync_op(gf_gw *gw, const char *name, gf_ver_op op, int64_t version, gf_err *err)
{
    static const struct {
        gf_shared_op op;
        const char *what;
    } ops[] = {
        [GF_VER_ACTIVATE] = {GF_SHARED_ACTIVATE, "the activation"},
        [GF_VER_DELETE_VERSION] = {GF_SHARED_DELETE_VERSION, "the delete"},
        [GF_VER_DELETE] = {GF_SHARED_DELETE, "the delete"},
    };
    if (op == GF_VER_DEPLOY || (size_t)op >= sizeof ops / sizeof ops[0])
        return gf_err_set(err, GF_ERR_INTERNAL, "gw_sync_op: op %d", (int)op);
    gw_sync *s = gw->sync;
    gf_shared_entry e;
    memset(&e, 0, sizeof e);
    e.op = ops[op].op;
    e.version = version;
    uint64_t seq = 0;
    gf_shared_outcome o;
    memset(&o, 0, sizeof o);
    pthread_mutex_lock(&s->lock);
    gw_sync_fn *f = gw_sync_fn_get(s, name, true);
    if (f == NULL) {
        pthread_mutex_unlock(&s->lock);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    gf_status st = gw_sync_fold_new(s, f, 0, NULL, err);
    if (st == GF_OK && f->fold.current == 0 && op == GF_VER_DELETE) {
        /* not in the store: only this node may have it (deployed before it used one,
         * or kept while it could not read the store) */
        pthread_mutex_unlock(&s->lock);
        return gw_delete_local(gw, name, err);
    }
    if (op == GF_VER_DELETE)
        e.version = f->fold.current; /* for people reading the log */
    if (st != GF_OK || (st = gf_shared_append(s->sh, name, &e, &seq, err)) != GF_OK ||
        (st = gw_sync_fold_new(s, f, seq, &o, err)) != GF_OK) {
        gw_sync_health(s, st, err);
        gf_err_prefix(err, "%s cannot reach the other nodes: the shared store", ops[op].what);
        st = err != NULL ? (err->code = GF_ERR_CLOSED) : GF_ERR_CLOSED;
    } else if (f->fold.seq < seq) {
        st = gf_err_set(err, GF_ERR_CLOSED, "the shared store does not show entry %llu of "
                        "'%s' yet", (unsigned long long)seq, name);
    } else if (o.status != GF_OK) {
        st = gf_err_set(err, o.status, "%s", o.message); /* the rules' own words */
    } else {
        gw_sync_reconcile(s, f, NULL);
    }
    pthread_mutex_unlock(&s->lock);
    gf_shared_entry_deinit(&e);
    return st;
}
