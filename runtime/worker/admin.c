/* gpufaas — the worker process: the admin thread — LOAD (manifest, kind
 * load, derived parameters, cache registration, residency, prefetch),
 * SET_RESIDENCY and UNLOAD — so a slow kind load never stalls requests for
 * other models. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/path.h"
#include "worker/worker_impl.h"

/* ---- admin: LOAD and UNLOAD ----------------------------------------------------------- */

/* <derived_dir>/<gf_derived_name(key)>, malloc'd. */
static char *derived_path(const gf_worker *w, const char *key)
{
    char *name = gf_derived_name(key);
    char *path = name != NULL ? gf_path_join(w->derived_dir, name) : NULL;
    free(name);
    return path;
}

/* Start moving m's weights towards tier; returns the tier the prefetch went
 * to (lower than asked when the device or host has no room now). Fails only
 * when the model can never fit the device (GF_ERR_TOO_LARGE). */
static gf_status prefetch(gf_worker *w, wmodel *m, int32_t tier, int32_t *done, gf_err *err)
{
    *done = GF_TIER_STORE;
    gf_err e;
    gf_err_clear(&e);
    if (tier == GF_TIER_DEVICE) {
        gf_status st = gf_cache_prefetch(w->cache, m->cm, GF_TIER_DEVICE, &e);
        if (st == GF_OK) {
            *done = GF_TIER_DEVICE;
            return GF_OK;
        }
        if (st == GF_ERR_TOO_LARGE) {
            *err = e;
            return st;
        }
        GF_LOG_I("prefetch of '%s' to the device deferred: %s", m->key, gf_err_msg(&e));
    }
    if (tier >= GF_TIER_HOST && w->cfg.host_memory > 0) {
        gf_status st = gf_cache_prefetch(w->cache, m->cm, GF_TIER_HOST, &e);
        if (st == GF_OK)
            *done = GF_TIER_HOST;
        else
            GF_LOG_I("prefetch of '%s' to the host tier skipped: %s", m->key, gf_err_msg(&e));
    }
    return GF_OK;
}

/* Release what the admin thread built for m (cache model, plan, manifest). */
void wk_release_model_state(gf_worker *w, wmodel *m)
{
    if (m->cm != NULL) {
        for (;;) {
            gf_err err;
            gf_err_clear(&err);
            pthread_mutex_lock(&w->lock);
            uint64_t gen = w->progress;
            pthread_mutex_unlock(&w->lock);
            gf_status st = gf_cache_model_remove(w->cache, m->cm, &err);
            if (st != GF_ERR_BUSY) {
                if (st != GF_OK)
                    GF_LOG_E("removing '%s' from the cache: %s", m->key, gf_err_msg(&err));
                break;
            }
            /* a prefetch is still loading it: wait for the cache to move on */
            wk_progress_wait(w, gen);
        }
        m->cm = NULL;
    }
    gf_fn_plan_free(m->plan);
    m->plan = NULL;
    gf_manifest_free(m->mf);
    m->mf = NULL;
}

/* Give m's cache model residency r. A pin over the pin limit fails (the
 * rest of r is applied without the pin, and the failure is logged). */
static gf_status apply_residency(gf_worker *w, wmodel *m, const gf_residency *r, gf_err *err)
{
    gf_err e;
    gf_err_clear(&e);
    gf_status st = gf_cache_model_set_residency(w->cache, m->cm, r, &e);
    if (st != GF_OK) {
        GF_LOG_W("'%s': %s", m->key, gf_err_msg(&e));
        gf_residency unpinned = *r;
        unpinned.pin = false;
        gf_cache_model_set_residency(w->cache, m->cm, &unpinned, NULL);
        if (err != NULL)
            *err = e;
    }
    return st;
}

/* Build everything for a first LOAD of m. On failure everything taken is
 * released and err says why. */
static gf_status prepare_model(gf_worker *w, wmodel *m, int32_t tier, gf_ipc_loaded *out,
                               gf_err *err)
{
    uint64_t t0 = gf_mono_us();
    char *dpath = NULL;
    gf_manifest *mf = NULL;
    gf_fn_plan *plan = NULL;
    gf_cache_model *cm = NULL;
    const gf_fn_kind *kind = NULL;
    gf_status st = gf_manifest_parse(m->manifest_text, m->manifest_len, &mf, err);
    if (st != GF_OK) {
        gf_err_prefix(err, "manifest");
        goto fail;
    }
    if (m->plugin_path[0] != '\0') {
        if ((st = gf_fn_plugin_load(m->plugin_path, w->cfg.allow_native, &kind, err)) != GF_OK)
            goto fail;
        if (strcmp(gf_fn_kind_name(kind), mf->kind) != 0) {
            st = gf_err_set(err, GF_ERR_INVALID,
                            "the plugin %s implements kind '%s' but the manifest names '%s'",
                            m->plugin_path, gf_fn_kind_name(kind), mf->kind);
            goto fail;
        }
    } else if ((kind = gf_fn_kind_find(mf->kind)) == NULL) {
        st = gf_err_set(err, GF_ERR_NOT_FOUND,
                        "no kind '%s' on this worker (built-in, or a plugin named in LOAD)",
                        mf->kind);
        goto fail;
    }
    if ((dpath = derived_path(w, m->key)) == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((st = gf_fn_prepare_on(kind, mf, m->weights_path, dpath, w->be, &plan, err)) != GF_OK)
        goto fail;
    if ((st = gf_cache_model_add(w->cache, m->key, gf_fn_plan_cache_path(plan),
                                 gf_fn_plan_param_names(plan), gf_fn_plan_param_count(plan), &cm,
                                 err)) != GF_OK)
        goto fail;
    free(dpath);
    dpath = NULL;
    m->mf = mf;
    m->plan = plan;
    m->cm = cm;
    if (apply_residency(w, m, &mf->residency, NULL) == GF_OK && mf->residency.pin)
        tier = GF_TIER_DEVICE; /* pinned: on the device from the start */
    if ((st = prefetch(w, m, tier, &out->tier, err)) != GF_OK) {
        wk_release_model_state(w, m);
        return st;
    }
    out->n_params = (uint32_t)gf_fn_plan_param_count(plan);
    out->device_bytes = gf_cache_model_device_bytes(cm);
    out->host_bytes = gf_cache_model_host_bytes(cm);
    out->prepare_us = gf_mono_us() - t0;
    return GF_OK;
fail:
    if (cm != NULL)
        gf_cache_model_remove(w->cache, cm, NULL);
    gf_fn_plan_free(plan);
    gf_manifest_free(mf);
    free(dpath);
    return st;
}

static void do_load(gf_worker *w, wjob *j, gf_buf *b)
{
    wmodel *m = j->m;
    gf_err err;
    gf_err_clear(&err);
    gf_ipc_loaded out;
    memset(&out, 0, sizeof out);
    pthread_mutex_lock(&w->lock);
    wm_prep prep = m->prep;
    pthread_mutex_unlock(&w->lock);
    gf_status st;
    if (prep == WM_READY) { /* loaded before: just place it again */
        st = prefetch(w, m, j->tier, &out.tier, &err);
        out.n_params = (uint32_t)gf_fn_plan_param_count(m->plan);
        out.device_bytes = gf_cache_model_device_bytes(m->cm);
        out.host_bytes = gf_cache_model_host_bytes(m->cm);
    } else if (prep == WM_FAILED) {
        st = gf_err_set(&err, m->fail_code, "%s", m->fail_msg);
    } else {
        st = prepare_model(w, m, j->tier, &out, &err);
        pthread_mutex_lock(&w->lock);
        if (st == GF_OK) {
            m->prep = WM_READY;
        } else {
            m->prep = WM_FAILED;
            m->fail_code = st;
            snprintf(m->fail_msg, sizeof m->fail_msg, "%s", gf_err_msg(&err));
            wk_table_remove(w, m); /* a later LOAD starts afresh */
        }
        pthread_cond_broadcast(&w->exec_cond);
        pthread_mutex_unlock(&w->lock);
    }
    if (st != GF_OK) {
        wk_device_lost(w, st, &err);
        GF_LOG_W("LOAD '%s' failed: %s", m->key, gf_err_msg(&err));
        wk_reply_error(w, b, j->id, st, gf_err_msg(&err));
        return;
    }
    GF_LOG_I("loaded '%s': %u parameters, %llu device bytes, prefetch to tier %d", m->key,
             out.n_params, (unsigned long long)out.device_bytes, out.tier);
    wk_send_encoded(w, b, gf_ipc_encode_loaded(b, j->id, &out, &err), &err, "LOADED");
}

/* SET_RESIDENCY, after the LOADs queued before it. */
static void do_residency(gf_worker *w, wjob *j, gf_buf *b)
{
    wmodel *m = j->m;
    pthread_mutex_lock(&w->lock);
    bool ready = m->prep == WM_READY && !m->unloading;
    pthread_mutex_unlock(&w->lock);
    if (!ready) {
        wk_reply_error(w, b, j->id, GF_ERR_NOT_FOUND, "no such function version on this worker");
        return;
    }
    gf_err err;
    gf_err_clear(&err);
    gf_status st = apply_residency(w, m, &j->res, &err);
    if (st != GF_OK) {
        wk_reply_error(w, b, j->id, st, gf_err_msg(&err));
        return;
    }
    if (j->res.pin) {
        int32_t done;
        if (prefetch(w, m, GF_TIER_DEVICE, &done, &err) != GF_OK)
            GF_LOG_W("'%s' is pinned but cannot be placed on the device: %s", m->key,
                     gf_err_msg(&err));
    }
    GF_LOG_I("'%s': pin %s, priority %s, keep warm %.3f s", m->key, j->res.pin ? "on" : "off",
             gf_priority_name(j->res.priority), (double)j->res.keep_warm_us / 1e6);
    wk_reply_empty(w, b, GF_IPC_RESIDENCY_SET, j->id);
}

static void do_unload(gf_worker *w, wjob *j, gf_buf *b)
{
    wmodel *m = j->m;
    pthread_mutex_lock(&w->lock);
    while (m->pending > 0 && !w->stopping)
        pthread_cond_wait(&w->admin_cond, &w->lock);
    bool stop = w->stopping;
    pthread_mutex_unlock(&w->lock);
    if (stop)
        return; /* the teardown releases it */
    wk_release_model_state(w, m);
    pthread_mutex_lock(&w->lock);
    wk_table_remove(w, m);
    pthread_mutex_unlock(&w->lock);
    GF_LOG_I("unloaded '%s'", m->key);
    wk_reply_empty(w, b, GF_IPC_UNLOADED, j->id);
}

void *wk_admin_main(void *arg)
{
    gf_worker *w = arg;
    gf_buf b;
    gf_buf_init(&b);
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->stopping && w->j_head == NULL && !w->draining)
            pthread_cond_wait(&w->admin_cond, &w->lock);
        if (w->stopping || w->j_head == NULL)
            break;
        wjob *j = w->j_head;
        w->j_head = j->next;
        if (w->j_head == NULL)
            w->j_tail = NULL;
        pthread_mutex_unlock(&w->lock);
        if (j->kind == JOB_LOAD)
            do_load(w, j, &b);
        else if (j->kind == JOB_RESIDENCY)
            do_residency(w, j, &b);
        else
            do_unload(w, j, &b);
        pthread_mutex_lock(&w->lock);
        wk_wmodel_unref(j->m);
        free(j);
        pthread_cond_broadcast(&w->exec_cond);
    }
    /* stopping: drop the jobs left; their models fail so no request waits */
    while (w->j_head != NULL) {
        wjob *j = w->j_head;
        w->j_head = j->next;
        if (j->m->prep == WM_PREPARING) {
            j->m->prep = WM_FAILED;
            j->m->fail_code = GF_ERR_CLOSED;
            snprintf(j->m->fail_msg, sizeof j->m->fail_msg, "the worker is stopping");
        }
        wk_wmodel_unref(j->m);
        free(j);
    }
    w->j_tail = NULL;
    w->admin_done = true;
    pthread_cond_broadcast(&w->exec_cond);
    pthread_mutex_unlock(&w->lock);
    wk_wake_main(w);
    gf_buf_deinit(&b);
    return NULL;
}
