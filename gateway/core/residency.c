/* gpufaas — residency in the gateway core: which functions stay on the
 * device (pin, priority classes, keep-warm time), from the manifest or set
 * at run time, with the pinned bytes capped by the pin limit.
 *
 * The worker's cache enforces the settings (runtime/cache); the gateway
 * keeps the run-time overrides (SQLite's functions.pin/.priority/
 * .keep_warm_us), checks the pin limit before it accepts a pin, sends the
 * settings with each LOAD and places pinned functions on a device. */
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "gateway/core/internal.h"

gf_residency gw_residency_of(const gw_version *v)
{
    return v->fn->has_res ? v->fn->res : v->mf->residency;
}

/* Send SET_RESIDENCY for v to w. Lock held. */
static void send_residency(gf_gw *gw, gw_worker *w, const gw_version *v, const gf_residency *r)
{
    gf_ipc_residency m = {.key = v->key,
                          .pin = r->pin ? 1u : 0u,
                          .priority = (uint32_t)r->priority,
                          .keep_warm_us = r->keep_warm_us};
    gf_buf b;
    gf_buf_init(&b);
    gf_err err;
    if (gf_ipc_encode_residency(&b, atomic_fetch_add(&gw->next_id, 1), &m, &err) == GF_OK) {
        gw_frame *f = gw_frame_adopt(&b);
        if (f != NULL) {
            gw_worker_send(w, f);
            gw_frame_unref(f);
        }
    }
    gf_buf_deinit(&b);
}

void gw_residency_after_load(gf_gw *gw, gw_worker *w, gw_version *v)
{
    if (v->fn->has_res)
        send_residency(gw, w, v, &v->fn->res);
}

/* The bytes pinned and kept-warm functions may hold on worker w. */
static uint64_t pin_limit_of(const gf_gw *gw, const gw_worker *w)
{
    if (w->have_stats && w->stats.pin_limit > 0)
        return w->stats.pin_limit;
    if (gw->cfg.pin_limit > 0)
        return gw->cfg.pin_limit;
    return w->ready.device_budget / 2;
}

/* bytes in whole pages of the largest page size of the workers up (the
 * device bytes of a version are known once a worker has loaded it; a
 * weights file rounded up to pages is the estimate until then). */
static uint64_t in_pages(const gf_gw *gw, uint64_t bytes)
{
    uint64_t page = 0;
    for (int i = 0; i < gw->n_workers; i++)
        if (gw->workers[i].state == GW_W_UP && gw->workers[i].ready.page_size > page)
            page = gw->workers[i].ready.page_size;
    return page > 0 ? (bytes + page - 1) / page * page : bytes;
}

gf_status gw_pin_check(gf_gw *gw, const gw_function *skip, uint64_t bytes, gf_err *err)
{
    /* Where a function lands is the router's choice, so count every pin
     * against each worker's limit. */
    bytes = in_pages(gw, bytes);
    uint64_t pinned = 0;
    for (size_t i = 0; i < gw->n_fns; i++) {
        const gw_function *f = gw->fns[i];
        if (f == skip || f->deleted || f->current == NULL)
            continue;
        gf_residency r = gw_residency_of(f->current);
        if (r.pin)
            pinned += in_pages(gw, f->current->device_bytes);
    }
    for (int i = 0; i < gw->n_workers; i++) {
        const gw_worker *w = &gw->workers[i];
        if (w->state != GW_W_UP)
            continue;
        uint64_t limit = pin_limit_of(gw, w);
        if (pinned + bytes > limit)
            return gf_err_set(err, GF_ERR_CONFLICT,
                              "pinning %llu more bytes would pin %llu bytes, over worker %d's "
                              "pin limit of %llu bytes (--pin-limit); unpin another function "
                              "first",
                              (unsigned long long)bytes, (unsigned long long)(pinned + bytes), i,
                              (unsigned long long)limit);
    }
    return GF_OK;
}

void gw_residency_place_pinned(gf_gw *gw)
{
    for (size_t i = 0; i < gw->n_fns; i++) {
        gw_function *f = gw->fns[i];
        gw_version *v = f->current;
        if (f->deleted || v == NULL || v->state != GF_STORE_VERSION_READY ||
            !gw_residency_of(v).pin)
            continue;
        bool placed = false;
        for (int k = 0; k < gw->n_workers; k++)
            placed = placed || (gw->workers[k].state == GW_W_UP && v->pl[k].state != GW_PL_NONE);
        if (placed)
            continue;
        gw_worker *w = gw_route(gw, v, -1, NULL);
        gf_err err;
        if (w != NULL && gw_worker_load(gw, w, v, GF_TIER_DEVICE, &err) != GF_OK)
            GF_LOG_W("function '%s' is pinned but could not be loaded: %s", f->name, err.msg);
    }
}

gf_status gf_gw_set_residency(gf_gw *gw, const char *name, const gf_residency *r, gf_buf *out,
                              gf_err *err)
{
    gf_status st;
    if (r != NULL && (st = gf_residency_check(r, err)) != GF_OK)
        return st;
    pthread_mutex_lock(&gw->deploy_lock); /* one change of a function at a time */
    pthread_mutex_lock(&gw->lock);
    gw_function *f = gf_function_name_valid(name) ? gw_function_find(gw, name) : NULL;
    if (f == NULL || f->deleted || f->current == NULL) {
        pthread_mutex_unlock(&gw->lock);
        pthread_mutex_unlock(&gw->deploy_lock);
        return gf_err_set(err, GF_ERR_NOT_FOUND, "function '%.80s' not found", name);
    }
    gf_residency want = r != NULL ? *r : f->current->mf->residency;
    st = want.pin ? gw_pin_check(gw, f, f->current->device_bytes, err) : GF_OK;
    pthread_mutex_unlock(&gw->lock);
    if (st == GF_OK) /* durable first: a restart keeps what was answered */
        st = gf_store_function_residency(gw->store, name, r, err);
    if (st != GF_OK) {
        pthread_mutex_unlock(&gw->deploy_lock);
        return st;
    }
    pthread_mutex_lock(&gw->lock);
    f->has_res = r != NULL;
    if (r != NULL)
        f->res = *r;
    /* every worker that has one of its versions gets the new settings */
    for (size_t k = 0; k < f->n; k++) {
        gw_version *v = f->versions[k];
        gf_residency eff = gw_residency_of(v);
        for (int i = 0; i < gw->n_workers; i++)
            if (gw->workers[i].state == GW_W_UP && v->pl[i].state != GW_PL_NONE)
                send_residency(gw, &gw->workers[i], v, &eff);
    }
    if (want.pin)
        gw_residency_place_pinned(gw);
    gw_version *cur = f->current;
    st = gf_buf_printf(out, "{\"function\":\"%s\",\"version\":%lld,\"residency\":", f->name,
                       (long long)cur->version);
    if (st == GF_OK)
        st = gf_residency_to_json(&want, out);
    if (st == GF_OK)
        st = gf_buf_printf(out, ",\"source\":\"%s\"}", f->has_res ? "api" : "manifest");
    pthread_mutex_unlock(&gw->lock);
    pthread_mutex_unlock(&gw->deploy_lock);
    GF_LOG_I("function '%s': residency %s (pin %s, priority %s, keep warm %.3f s)", name,
             r != NULL ? "set" : "back to the manifest's", want.pin ? "on" : "off",
             gf_priority_name(want.priority), (double)want.keep_warm_us / 1e6);
    return st;
}

/* ---- shared memory ------------------------------------------------------------------- */

void gf_gw_shm_forget(gf_gw *gw, const char *key)
{
    gf_buf b;
    gf_buf_init(&b);
    gf_err err;
    gw_frame *f = NULL;
    if (gf_ipc_encode_shm_forget(&b, atomic_fetch_add(&gw->next_id, 1), key, &err) == GF_OK)
        f = gw_frame_adopt(&b);
    else
        GF_LOG_W("SHM_FORGET for '%.100s': %s", key, gf_err_msg(&err));
    gf_buf_deinit(&b);
    if (f == NULL)
        return;
    pthread_mutex_lock(&gw->lock);
    for (int i = 0; i < gw->n_workers; i++)
        if (gw->workers[i].state == GW_W_UP)
            gw_worker_send(&gw->workers[i], f);
    pthread_mutex_unlock(&gw->lock);
    gw_frame_unref(f);
}
