/* gpufaas — what a worker's answers do to the gateway's state: each
 * connection's reader thread and one handler per message (READY, LOADED,
 * RESULT, ERROR, EVENT, STATS), and a connection that ends. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/clock.h"
#include "core/ema.h"
#include "core/log.h"
#include "gateway/core/internal.h"

/* ---- answers from a worker --------------------------------------------------------- */

/* Unlink the batch with id from w's in-flight list (lock held). */
static gw_batch *take_inflight(gw_worker *w, uint64_t id)
{
    for (gw_batch **pp = &w->inflight; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->id == id) {
            gw_batch *b = *pp;
            *pp = b->next;
            b->next = NULL;
            w->n_inflight--;
            w->queued_us -= b->est_us;
            if (w->queued_us < 0)
                w->queued_us = 0;
            return b;
        }
    }
    return NULL;
}

static gw_pending_load *take_load(gw_worker *w, uint64_t id)
{
    for (gw_pending_load **pp = &w->loads; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->id == id) {
            gw_pending_load *p = *pp;
            *pp = p->next;
            return p;
        }
    }
    return NULL;
}

static void on_ready(gw_worker *w, const gf_ipc_frame *f)
{
    gf_gw *gw = w->gw;
    gf_ipc_ready r;
    gf_err err;
    if (gf_ipc_decode_ready(f, &r, &err) != GF_OK) {
        GF_LOG_E("worker %d: bad READY: %s", w->id, err.msg);
        return;
    }
    pthread_mutex_lock(&gw->lock);
    w->ready = r;
    snprintf(w->device_name, sizeof w->device_name, "%s", r.device_name);
    w->ready.device_name = w->device_name;
    bool was_up = w->state == GW_W_UP;
    if (w->state == GW_W_STARTING) {
        w->state = GW_W_UP;
        w->up_us = gf_mono_us();
    }
    if (!was_up)
        gw_residency_place_pinned(gw); /* a new process holds nothing */
    pthread_cond_broadcast(&gw->cond);
    pthread_mutex_unlock(&gw->lock);
    if (!was_up) {
        GF_LOG_I("worker %d up: %s (%s), pid %d, device budget %llu MiB, host budget %llu MiB",
                 w->id, w->device, w->device_name, (int)w->pid,
                 (unsigned long long)(r.device_budget >> 20),
                 (unsigned long long)(r.host_budget >> 20));
        gf_store_log_worker_state(gw->store, w->id, GF_STORE_WORKER_READY, w->pid);
        gf_store_heartbeat hb = {w->id, r.device_budget, 0, r.host_budget, 0, 0};
        gf_store_log_heartbeat(gw->store, &hb);
    }
}

static void on_loaded(gw_worker *w, const gf_ipc_frame *f)
{
    gf_gw *gw = w->gw;
    gf_ipc_loaded m;
    gf_err err;
    if (gf_ipc_decode_loaded(f, &m, &err) != GF_OK) {
        GF_LOG_E("worker %d: bad LOADED: %s", w->id, err.msg);
        return;
    }
    pthread_mutex_lock(&gw->lock);
    gw_pending_load *p = take_load(w, f->h.request_id);
    if (p != NULL) {
        gw_version *v = p->v;
        gw_placement *pl = &v->pl[w->id];
        if (pl->state == GW_PL_LOADING && pl->load_id == p->id) {
            pl->state = GW_PL_REGISTERED;
            if (pl->tier < GF_TIER_STORE)
                pl->tier = GF_TIER_STORE;
            v->device_bytes = m.device_bytes;
            v->host_bytes = m.host_bytes;
            gw_batch *waiting = pl->waiting;
            pl->waiting = NULL;
            while (waiting != NULL) {
                gw_batch *b = waiting;
                waiting = b->next;
                gw_send_infer(gw, w, b); /* its estimate is already in queued_us */
            }
        }
        gw_version_unref(v);
        free(p);
    }
    pthread_mutex_unlock(&gw->lock);
}

/* f's payload as a hold (taken from f), or NULL without memory for one. */
static gf_hold *payload_hold(gf_ipc_frame *f)
{
    gf_hold *h = f->free_fn != NULL ? gf_hold_new(f->payload, f->free_fn, f->free_ctx)
                                    : gf_hold_of_malloc(f->payload);
    if (h != NULL)
        f->payload = NULL; /* the hold's now */
    return h;
}

static void on_result(gw_worker *w, gf_ipc_frame *f)
{
    gf_gw *gw = w->gw;
    gf_ipc_result r;
    gf_err err;
    gf_status st = gf_ipc_decode_result(f, &r, &err);
    pthread_mutex_lock(&gw->lock);
    gw_batch *b = take_inflight(w, f->h.request_id);
    if (b != NULL && st == GF_OK) {
        gw_placement *pl = &b->v->pl[w->id];
        double ex = (double)r.exec_us;
        pl->exec_us = gf_ema(pl->exec_us, ex);
        b->v->exec_us = gf_ema(b->v->exec_us, ex);
        /* every request of the batch ran from the device copy */
        gw_copy_used(gw, b->v, w->id, GF_TIER_DEVICE, b->n_reqs, gf_wall_us());
    }
    pthread_mutex_unlock(&gw->lock);
    if (b == NULL) {
        GF_LOG_W("worker %d: RESULT for unknown request %llu", w->id,
                 (unsigned long long)f->h.request_id);
    } else if (st != GF_OK) {
        gw_batch_fail(gw, b, GF_ERR_PROTOCOL, err.msg);
    } else {
        gf_hold *h = f->payload != NULL ? payload_hold(f) : NULL;
        gw_batch_complete(gw, b, &r, h, w->id);
        gf_hold_unref(h);
    }
    gf_ipc_result_deinit(&r);
}

static void on_error(gw_worker *w, const gf_ipc_frame *f)
{
    gf_gw *gw = w->gw;
    gf_ipc_error e;
    gf_err err;
    if (gf_ipc_decode_error(f, &e, &err) != GF_OK) {
        GF_LOG_E("worker %d: bad ERROR: %s", w->id, err.msg);
        return;
    }
    gf_status code = (gf_status)e.code;
    pthread_mutex_lock(&gw->lock);
    gw_batch *b = take_inflight(w, f->h.request_id);
    gw_batch *failed = NULL;
    gw_pending_load *p = b == NULL ? take_load(w, f->h.request_id) : NULL;
    if (p != NULL) {
        gw_placement *pl = &p->v->pl[w->id];
        GF_LOG_W("worker %d: loading '%s' failed: %s", w->id, p->v->key, e.message);
        if (pl->state == GW_PL_LOADING && pl->load_id == p->id) {
            pl->state = GW_PL_NONE;
            failed = pl->waiting;
            pl->waiting = NULL;
            for (gw_batch *x = failed; x != NULL; x = x->next)
                w->queued_us -= x->est_us;
            if (w->queued_us < 0)
                w->queued_us = 0;
        }
        gw_version_unref(p->v);
        free(p);
    }
    /* a worker that cannot run it any more (draining, its device lost)
     * answers CLOSED: that is the worker's state, not the request's, so it
     * is retried once on another worker, as when a worker dies */
    if (b != NULL && code == GF_ERR_CLOSED && b->attempts < 2 && !atomic_load(&gw->stopping))
        b = gw_dispatch_batch(gw, b, w->id);
    pthread_mutex_unlock(&gw->lock);
    if (b != NULL)
        gw_batch_fail(gw, b, code, e.message);
    while (failed != NULL) {
        gw_batch *x = failed;
        failed = x->next;
        x->next = NULL;
        gw_batch_fail(gw, x, code, e.message);
    }
    if (b == NULL && p == NULL)
        GF_LOG_D("worker %d: ERROR for request %llu: %s", w->id,
                 (unsigned long long)f->h.request_id, e.message);
}

static void on_event(gw_worker *w, const gf_ipc_frame *f)
{
    gf_gw *gw = w->gw;
    gf_ipc_event ev;
    gf_err err;
    if (gf_ipc_decode_event(f, &ev, &err) != GF_OK) {
        GF_LOG_E("worker %d: bad EVENT: %s", w->id, err.msg);
        return;
    }
    char wid[16];
    snprintf(wid, sizeof wid, "%d", w->id);
    pthread_mutex_lock(&gw->lock);
    gw_version *v = gw_version_by_key(gw, ev.key);
    if (v != NULL) {
        if (ev.kind == GF_IPC_EV_LOADED) {
            if (ev.to == GF_TIER_DEVICE && ev.from != GF_TIER_DEVICE)
                gw_stats_swap_in(gw, v, ev.bytes, ev.micros);
            if (ev.to >= GF_TIER_HOST)
                gw_copy_loaded(gw, v, w->id, ev.to, ev.bytes, (int64_t)ev.time_us);
            if (ev.from == GF_TIER_HOST && ev.to == GF_TIER_DEVICE)
                /* a swap-in the host copy fed */
                gw_copy_used(gw, v, w->id, GF_TIER_HOST, 1, (int64_t)ev.time_us);
        } else if (ev.kind == GF_IPC_EV_EVICTED && ev.from >= GF_TIER_HOST) {
            gw_copy_evicted(gw, v, w->id, ev.from);
        }
        if ((ev.kind == GF_IPC_EV_LOADED || ev.kind == GF_IPC_EV_EVICTED) && ev.from != ev.to &&
            ev.from >= GF_TIER_STORE && ev.to >= GF_TIER_STORE) {
            gf_store_swap sw = {w->id, v->fn->name, v->version, (gf_tier)ev.from,
                                (gf_tier)ev.to, ev.bytes, (int64_t)ev.micros, ev.time_us};
            gf_store_log_swap(gw->store, &sw);
        }
    }
    pthread_mutex_unlock(&gw->lock);
    if (ev.kind == GF_IPC_EV_LOADED) {
        const char *labels[3] = {wid, gf_tier_name((gf_tier)ev.from), gf_tier_name((gf_tier)ev.to)};
        gw_metric_add(gw->metrics, GW_M_SWAP_BYTES, labels, (double)ev.bytes);
        const char *l1[1] = {wid};
        gw_metric_observe(gw->metrics, GW_M_SWAP_DURATION, l1, (double)ev.micros * 1e-6);
    } else if (ev.kind == GF_IPC_EV_EVICTED && ev.from == GF_TIER_DEVICE) {
        const char *l1[1] = {wid};
        gw_metric_add(gw->metrics, GW_M_EVICTIONS, l1, 1);
    } else if (ev.kind == GF_IPC_EV_FAILED) {
        GF_LOG_W("worker %d: load of '%s' failed: %s", w->id, ev.key, ev.message);
    }
}

static void on_stats(gw_worker *w, const gf_ipc_frame *f)
{
    gf_gw *gw = w->gw;
    gf_ipc_stats s;
    if (gf_ipc_decode_stats(f, &s, NULL) != GF_OK)
        return;
    pthread_mutex_lock(&gw->lock);
    w->stats = s;
    w->have_stats = true;
    w->last_stats_us = gf_mono_us();
    pthread_mutex_unlock(&gw->lock);
    gf_store_heartbeat hb = {w->id, s.device_budget, s.device_used, s.host_budget, s.host_used,
                             0};
    gf_store_log_heartbeat(gw->store, &hb);
}

/* The connection ended: everything the worker held is retried elsewhere
 * once, or answered GF_ERR_CLOSED. */
static void worker_lost(gw_worker *w)
{
    gf_gw *gw = w->gw;
    gw_batch *lost = NULL;
    pthread_mutex_lock(&gw->lock);
    w->conn_closed = true;
    if (w->state == GW_W_UP || w->state == GW_W_STARTING)
        w->state = GW_W_DOWN;
    while (w->inflight != NULL) {
        gw_batch *b = w->inflight;
        w->inflight = b->next;
        b->next = lost;
        lost = b;
    }
    w->n_inflight = 0;
    w->queued_us = 0;
    gw_copies_forget_worker(gw, w->id); /* a new process will hold nothing */
    for (size_t i = 0; i < gw->n_fns; i++) {
        gw_function *fn = gw->fns[i];
        for (size_t k = 0; k < fn->n; k++) {
            gw_placement *pl = &fn->versions[k]->pl[w->id];
            while (pl->waiting != NULL) {
                gw_batch *b = pl->waiting;
                pl->waiting = b->next;
                b->next = lost;
                lost = b;
            }
            pl->state = GW_PL_NONE;
            pl->tier = GF_TIER_NONE;
        }
    }
    while (w->loads != NULL) {
        gw_pending_load *p = w->loads;
        w->loads = p->next;
        gw_version_unref(p->v);
        free(p);
    }
    pthread_cond_broadcast(&gw->cond);
    pthread_mutex_unlock(&gw->lock);
    while (lost != NULL) {
        gw_batch *b = lost;
        lost = b->next;
        b->next = NULL;
        gw_batch *back = b;
        if (b->attempts < 2 && !atomic_load(&gw->stopping)) {
            pthread_mutex_lock(&gw->lock);
            back = gw_dispatch_batch(gw, b, w->id);
            pthread_mutex_unlock(&gw->lock);
        }
        if (back != NULL) {
            char msg[160];
            snprintf(msg, sizeof msg, "worker %d stopped while running the request and no "
                     "other worker could take it", w->id);
            gw_batch_fail(gw, back, GF_ERR_CLOSED, msg);
        }
    }
}

void *gw_reader_main(void *arg)
{
    gw_worker *w = arg;
    gf_ipc_reader r;
    gf_err err;
    if (gf_ipc_reader_init(&r, w->fd, 0, &err) != GF_OK) {
        GF_LOG_E("worker %d: %s", w->id, err.msg);
        worker_lost(w);
        return NULL;
    }
    for (;;) {
        gf_ipc_frame f;
        gf_status st = gf_ipc_read_frame(&r, &f, -1, &err);
        if (st == GF_ERR_NOMEM)
            continue; /* the frame was skipped; the stream is intact */
        if (st != GF_OK) {
            if (st != GF_ERR_CLOSED)
                GF_LOG_W("worker %d: connection: %s", w->id, err.msg);
            break;
        }
        gw_send_defer_begin(); /* what answers send goes out after gw->lock */
        switch (f.h.type) {
        case GF_IPC_READY: on_ready(w, &f); break;
        case GF_IPC_LOADED: on_loaded(w, &f); break;
        case GF_IPC_RESULT: on_result(w, &f); break;
        case GF_IPC_ERROR: on_error(w, &f); break;
        case GF_IPC_EVENT: on_event(w, &f); break;
        case GF_IPC_STATS: on_stats(w, &f); break;
        default: break; /* PONG, UNLOADED */
        }
        gw_send_defer_end();
        gf_ipc_frame_deinit(&f);
    }
    gf_ipc_reader_deinit(&r);
    worker_lost(w);
    return NULL;
}
