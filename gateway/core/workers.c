/* gpufaas — the gateway's workers: spawning and supervising gpufaas-worker
 * processes, one reader and one writer thread per worker connection, and
 * what the worker protocol's answers do to the gateway's state. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/ema.h"
#include "core/log.h"
#include "gateway/core/internal.h"

/* ---- frames and the send queue ------------------------------------------------ */

gw_frame *gw_frame_adopt(gf_buf *b)
{
    gw_frame *f = malloc(sizeof *f);
    if (f == NULL)
        return NULL;
    atomic_init(&f->refs, 1);
    f->data = gf_buf_steal(b, &f->len);
    if (f->data == NULL) {
        free(f);
        return NULL;
    }
    return f;
}

void gw_frame_unref(gw_frame *f)
{
    if (f != NULL && atomic_fetch_sub(&f->refs, 1) == 1) {
        free(f->data);
        free(f);
    }
}

/* Write what the socket takes without blocking; the bytes written. An
 * error stops it early: the writer thread meets it again with the rest. */
static size_t write_now(int fd, const char *p, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = send(fd, p + done, len - done, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0)
            done += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else
            break;
    }
    return done;
}

void gw_worker_send(gw_worker *w, gw_frame *f)
{
    pthread_mutex_lock(&w->slock);
    if (w->sq_dead) {
        /* the connection is gone (its writer failed): drop the frame; what it
         * carried is answered when the reader fails the connection */
        pthread_mutex_unlock(&w->slock);
        return;
    }
    size_t off = 0;
    if (w->sq_head == NULL && !w->sq_writing && !w->sq_stop && w->fd >= 0) {
        /* nothing queued or being written: write it from this thread, which
         * saves waking the writer (a context switch per request, the larger
         * part of a small request's cost); what the socket does not take at
         * once is queued. sq_stop is set before the fd is closed, under
         * slock, so the fd is the connection's own while we hold it. */
        off = write_now(w->fd, f->data, f->len);
        if (off == f->len) {
            pthread_mutex_unlock(&w->slock);
            return;
        }
    }
    gw_send *s = malloc(sizeof *s);
    if (s == NULL) {
        GF_LOG_E("worker %d: out of memory queueing a frame", w->id);
        if (off > 0) /* half a frame is on the wire: the stream is lost */
            shutdown(w->fd, SHUT_RDWR);
        pthread_mutex_unlock(&w->slock);
        return;
    }
    atomic_fetch_add(&f->refs, 1);
    s->frame = f;
    s->off = off;
    s->next = NULL;
    if (w->sq_tail != NULL)
        w->sq_tail->next = s;
    else
        w->sq_head = s;
    w->sq_tail = s;
    pthread_cond_signal(&w->scond);
    pthread_mutex_unlock(&w->slock);
}

/* Encode with enc into a fresh frame and queue it. */
static gf_status send_empty(gw_worker *w, gf_ipc_type type, uint64_t id)
{
    gf_buf b;
    gf_buf_init(&b);
    gf_status st = gf_ipc_encode_empty(&b, type, id, NULL);
    gw_frame *f = st == GF_OK ? gw_frame_adopt(&b) : NULL;
    gf_buf_deinit(&b);
    if (f == NULL)
        return GF_ERR_NOMEM;
    gw_worker_send(w, f);
    gw_frame_unref(f);
    return GF_OK;
}

static void *writer_main(void *arg)
{
    gw_worker *w = arg;
    pthread_mutex_lock(&w->slock);
    for (;;) {
        while (w->sq_head == NULL && !w->sq_stop)
            pthread_cond_wait(&w->scond, &w->slock);
        if (w->sq_head == NULL)
            break;
        gw_send *s = w->sq_head;
        w->sq_head = s->next;
        if (w->sq_head == NULL)
            w->sq_tail = NULL;
        w->sq_writing = true;
        pthread_mutex_unlock(&w->slock);
        gf_err err;
        gf_status st =
            gf_ipc_write_all(w->fd, s->frame->data + s->off, s->frame->len - s->off, -1, &err);
        gw_frame_unref(s->frame);
        free(s);
        pthread_mutex_lock(&w->slock);
        w->sq_writing = false;
        if (st != GF_OK) {
            GF_LOG_D("worker %d: write failed: %s", w->id, err.msg);
            /* the reader sees the end of the stream and fails what is in
             * flight; frames sent from now on are dropped, not kept for the
             * next process (which would get requests it never should) */
            shutdown(w->fd, SHUT_RDWR);
            w->sq_dead = true;
            break;
        }
    }
    /* drop what is left */
    while (w->sq_head != NULL) {
        gw_send *s = w->sq_head;
        w->sq_head = s->next;
        gw_frame_unref(s->frame);
        free(s);
    }
    w->sq_tail = NULL;
    pthread_mutex_unlock(&w->slock);
    return NULL;
}

/* ---- sending work ---------------------------------------------------------------- */

static void send_infer(gf_gw *gw, gw_worker *w, gw_batch *b)
{
    (void)gw;
    b->worker = w->id;
    b->attempts++;
    b->t_dispatch_us = gf_mono_us();
    b->next = w->inflight;
    w->inflight = b;
    w->n_inflight++;
    gw_worker_send(w, b->frame);
}

gf_status gw_worker_load(gf_gw *gw, gw_worker *w, gw_version *v, int tier, gf_err *err)
{
    gw_placement *pl = &v->pl[w->id];
    if (pl->state == GW_PL_LOADING)
        return GF_OK;
    if (pl->state == GW_PL_REGISTERED && (tier <= GF_TIER_STORE || pl->tier >= tier))
        return GF_OK;
    const char *plugin = "";
    for (size_t i = 0; i < gw->probe.n_plugins; i++) {
        const char *kind = gw->probe.plugin_kinds[i];
        if (strcmp(kind, v->mf->kind) == 0)
            plugin = gw->probe.plugin_paths[i];
    }
    gw_pending_load *pend = malloc(sizeof *pend);
    if (pend == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    uint64_t id = atomic_fetch_add(&gw->next_id, 1);
    gf_ipc_load m = {.key = v->key, .manifest = v->manifest_json,
                     .manifest_len = (uint32_t)strlen(v->manifest_json),
                     .weights_path = v->weights_path, .plugin_path = plugin, .tier = tier};
    gf_buf b;
    gf_buf_init(&b);
    gf_status st = gf_ipc_encode_load(&b, id, &m, err);
    gw_frame *f = st == GF_OK ? gw_frame_adopt(&b) : NULL;
    gf_buf_deinit(&b);
    if (f == NULL) {
        free(pend);
        return st != GF_OK ? st : gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    pend->id = id;
    pend->v = v;
    gw_version_ref(v);
    pend->next = w->loads;
    w->loads = pend;
    if (pl->state == GW_PL_NONE) {
        pl->state = GW_PL_LOADING;
        pl->load_id = id;
    }
    gw_worker_send(w, f);
    gw_frame_unref(f);
    return GF_OK;
}

void gw_worker_unload_all(gf_gw *gw, gw_version *v)
{
    for (int i = 0; i < gw->n_workers; i++) {
        gw_worker *w = &gw->workers[i];
        if (v->pl[i].state == GW_PL_NONE || w->state != GW_W_UP)
            continue;
        gf_ipc_unload m = {.key = v->key};
        gf_buf b;
        gf_buf_init(&b);
        if (gf_ipc_encode_unload(&b, atomic_fetch_add(&gw->next_id, 1), &m, NULL) == GF_OK) {
            gw_frame *f = gw_frame_adopt(&b);
            if (f != NULL) {
                gw_worker_send(w, f);
                gw_frame_unref(f);
            }
        }
        gf_buf_deinit(&b);
        v->pl[i].state = GW_PL_NONE;
        v->pl[i].tier = GF_TIER_NONE;
    }
}

gw_batch *gw_dispatch_batch(gf_gw *gw, gw_batch *b, int exclude)
{
    double est;
    gw_worker *w = gw_route(gw, b->v, exclude, &est);
    if (w == NULL)
        return b;
    gw_placement *pl = &b->v->pl[w->id];
    if (pl->state == GW_PL_NONE && gw_worker_load(gw, w, b->v, GF_TIER_STORE, NULL) != GF_OK)
        return b;
    b->est_us = est;
    w->queued_us += est;
    if (pl->state == GW_PL_REGISTERED) {
        send_infer(gw, w, b);
    } else { /* wait for LOADED, then go */
        b->worker = w->id;
        b->next = pl->waiting;
        pl->waiting = b;
    }
    gw_route_replicate(gw, b->v, w);
    return NULL;
}

int gw_workers_up(gf_gw *gw)
{
    int n = 0;
    for (int i = 0; i < gw->n_workers; i++)
        n += gw->workers[i].state == GW_W_UP;
    return n;
}

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
    if (w->state == GW_W_STARTING)
        w->state = GW_W_UP;
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
            gw_batch *waiting = pl->waiting;
            pl->waiting = NULL;
            while (waiting != NULL) {
                gw_batch *b = waiting;
                waiting = b->next;
                send_infer(gw, w, b); /* its estimate is already in queued_us */
            }
        }
        gw_version_unref(v);
        free(p);
    }
    pthread_mutex_unlock(&gw->lock);
}

static void on_result(gw_worker *w, const gf_ipc_frame *f)
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
        pl->hits++;
        if (pl->tier < GF_TIER_DEVICE)
            pl->tier = GF_TIER_DEVICE; /* it ran there, so it is there now */
    }
    pthread_mutex_unlock(&gw->lock);
    if (b == NULL) {
        GF_LOG_W("worker %d: RESULT for unknown request %llu", w->id,
                 (unsigned long long)f->h.request_id);
    } else if (st != GF_OK) {
        gw_batch_fail(gw, b, GF_ERR_PROTOCOL, err.msg);
    } else {
        gw_batch_complete(gw, b, &r, w->id);
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
        gw_placement *pl = &v->pl[w->id];
        gf_store_placement prec = {v->fn->name, v->version, w->id, GF_TIER_DEVICE,
                                   ev.bytes, GF_STORE_PLACEMENT_READY, ev.time_us};
        if (ev.kind == GF_IPC_EV_LOADED) {
            if (ev.to > pl->tier)
                pl->tier = ev.to;
            prec.tier = (gf_tier)ev.to;
            if (ev.to >= GF_TIER_HOST)
                gf_store_log_placement(gw->store, &prec);
        } else if (ev.kind == GF_IPC_EV_EVICTED) {
            if (ev.from == GF_TIER_DEVICE && pl->tier == GF_TIER_DEVICE)
                pl->tier = ev.to;
            else if (ev.from == GF_TIER_HOST && pl->tier == GF_TIER_HOST)
                pl->tier = GF_TIER_STORE;
            prec.tier = (gf_tier)ev.from;
            if (ev.from >= GF_TIER_HOST)
                gf_store_log_placement_remove(gw->store, &prec);
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

static void *reader_main(void *arg)
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
        switch (f.h.type) {
        case GF_IPC_READY: on_ready(w, &f); break;
        case GF_IPC_LOADED: on_loaded(w, &f); break;
        case GF_IPC_RESULT: on_result(w, &f); break;
        case GF_IPC_ERROR: on_error(w, &f); break;
        case GF_IPC_EVENT: on_event(w, &f); break;
        case GF_IPC_STATS: on_stats(w, &f); break;
        default: break; /* PONG, UNLOADED */
        }
        gf_ipc_frame_deinit(&f);
    }
    gf_ipc_reader_deinit(&r);
    worker_lost(w);
    return NULL;
}

/* ---- processes -------------------------------------------------------------------- */

static void join_threads(gw_worker *w)
{
    if (w->writer_running) {
        pthread_mutex_lock(&w->slock);
        w->sq_stop = true;
        pthread_cond_signal(&w->scond);
        pthread_mutex_unlock(&w->slock);
        pthread_join(w->writer, NULL);
        w->writer_running = false;
    }
    if (w->reader_running) {
        pthread_join(w->reader, NULL);
        w->reader_running = false;
    }
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
}

/* Start worker w's process and threads. Lock NOT held. */
static gf_status spawn(gf_gw *gw, gw_worker *w, gf_err *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return gf_err_set(err, GF_ERR_IO, "socketpair: %s", strerror(errno));
    /* everything the child needs is built before fork: after it, only
     * async-signal-safe calls */
    char fdbuf[16], idbuf[16], dmem[32], hmem[32], bw[32];
    snprintf(fdbuf, sizeof fdbuf, "%d", 3);
    snprintf(idbuf, sizeof idbuf, "%d", w->id);
    snprintf(dmem, sizeof dmem, "%llu", (unsigned long long)gw->cfg.device_memory);
    snprintf(hmem, sizeof hmem, "%llu", (unsigned long long)gw->cfg.host_memory);
    snprintf(bw, sizeof bw, "%llu", (unsigned long long)gw->cfg.cpu_copy_bandwidth);
    static const char *const lv[] = {"error", "warn", "info", "debug", "trace"};
    int t = gf_log_threshold < 0 ? 0 : gf_log_threshold > 4 ? 4 : gf_log_threshold;
    const char *dev = strncmp(w->device, "cpu", 3) == 0 ? "cpu" : w->device;
    const char *argv[24];
    int a = 0;
    argv[a++] = gw->worker_path;
    argv[a++] = "--device";
    argv[a++] = dev;
    argv[a++] = "--fd";
    argv[a++] = fdbuf;
    argv[a++] = "--worker-id";
    argv[a++] = idbuf;
    argv[a++] = "--state-dir";
    argv[a++] = gw->state_dir;
    argv[a++] = "--policy";
    argv[a++] = gf_evict_policy_name(gw->cfg.policy);
    argv[a++] = "--log-level";
    argv[a++] = lv[t];
    if (gw->cfg.device_memory > 0) {
        argv[a++] = "--device-memory";
        argv[a++] = dmem;
    }
    if (gw->cfg.host_memory > 0) {
        argv[a++] = "--host-memory";
        argv[a++] = hmem;
    }
    if (gw->cfg.allow_native)
        argv[a++] = "--allow-native-functions";
    if (gw->cfg.cpu_copy_bandwidth > 0 && strcmp(dev, "cpu") == 0) {
        argv[a++] = "--copy-bandwidth";
        argv[a++] = bw;
    }
    argv[a] = NULL;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(sv[0]);
        close(sv[1]);
        return gf_err_set(err, GF_ERR_IO, "fork: %s", strerror(e));
    }
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        if (sv[1] == 3) {
            fcntl(3, F_SETFD, 0);
        } else {
            dup2(sv[1], 3); /* the copy does not inherit close-on-exec */
        }
        execv(gw->worker_path, (char *const *)argv);
        _exit(127);
    }
    close(sv[1]);
    pthread_mutex_lock(&gw->lock);
    w->fd = sv[0];
    w->pid = pid;
    w->state = GW_W_STARTING;
    w->exited = false;
    w->conn_closed = false;
    w->started_us = gf_mono_us();
    w->have_stats = false;
    pthread_mutex_unlock(&gw->lock);
    pthread_mutex_lock(&w->slock); /* gw_worker_send reads it to decide it may write */
    while (w->sq_head != NULL) { /* nothing meant for the previous process goes out */
        gw_send *s = w->sq_head;
        w->sq_head = s->next;
        gw_frame_unref(s->frame);
        free(s);
    }
    w->sq_tail = NULL;
    w->sq_stop = false;
    w->sq_dead = false;
    pthread_mutex_unlock(&w->slock);
    int rc = pthread_create(&w->writer, NULL, writer_main, w);
    if (rc == 0) {
        w->writer_running = true;
        rc = pthread_create(&w->reader, NULL, reader_main, w);
        w->reader_running = rc == 0;
    }
    if (rc != 0) {
        kill(pid, SIGKILL);
        return gf_err_set(err, GF_ERR_NOMEM, "pthread_create: %s", strerror(rc));
    }
    gf_store_worker_spec spec = {w->id, w->device, pid, gw->cfg.device_memory,
                                 gw->cfg.host_memory};
    gf_err e2;
    if (gf_store_worker_register(gw->store, &spec, &e2) != GF_OK)
        GF_LOG_W("worker %d: recording it: %s", w->id, e2.msg);
    return GF_OK;
}

static void *supervisor_main(void *arg)
{
    gf_gw *gw = arg;
    uint64_t last_stats = 0;
    pthread_mutex_lock(&gw->lock);
    while (gw->supervisor_running) {
        uint64_t now = gf_mono_us();
        /* reap */
        for (int i = 0; i < gw->n_workers; i++) {
            gw_worker *w = &gw->workers[i];
            if (w->pid <= 0 || w->exited)
                continue;
            int status;
            pid_t r = waitpid(w->pid, &status, WNOHANG);
            if (r != w->pid)
                continue;
            w->exited = true;
            w->exit_code = WIFEXITED(status) ? WEXITSTATUS(status)
                         : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
            bool stopping = atomic_load(&gw->stopping);
            if (w->exit_code == GF_WORKER_EXIT_FATAL || stopping) {
                if (!stopping)
                    GF_LOG_E("worker %d (%s) exited with the do-not-respawn code %d: it will not "
                             "be restarted (see its message above)", w->id, w->device,
                             w->exit_code);
                w->state = GW_W_FAILED;
            } else {
                if (now - w->started_us > 60u * 1000000u)
                    w->backoff_ms = 0;
                w->backoff_ms = w->backoff_ms == 0 ? 500 : w->backoff_ms * 2;
                if (w->backoff_ms > 30000)
                    w->backoff_ms = 30000;
                w->restart_at_us = now + w->backoff_ms * 1000u;
                w->state = GW_W_DOWN;
                GF_LOG_W("worker %d (%s) down (exit %d); restarting in %llu ms", w->id,
                         w->device, w->exit_code, (unsigned long long)w->backoff_ms);
            }
            gf_store_log_worker_state(gw->store, w->id, GF_STORE_WORKER_DEAD, -1);
            pthread_cond_broadcast(&gw->cond);
        }
        /* restart */
        for (int i = 0; i < gw->n_workers && !atomic_load(&gw->stopping); i++) {
            gw_worker *w = &gw->workers[i];
            if (w->state != GW_W_DOWN || !w->exited || now < w->restart_at_us)
                continue;
            pthread_mutex_unlock(&gw->lock);
            join_threads(w);
            gf_err err;
            gf_status st = spawn(gw, w, &err);
            pthread_mutex_lock(&gw->lock);
            if (st != GF_OK) {
                GF_LOG_E("worker %d: restart failed: %s", w->id, err.msg);
                w->restart_at_us = now + 5000000u;
                continue;
            }
            w->restarts++;
            char wid[16];
            snprintf(wid, sizeof wid, "%d", w->id);
            const char *l1[1] = {wid};
            gw_metric_add(gw->metrics, GW_M_WORKER_RESTARTS, l1, 1);
            gf_store_log_restart(gw->store, w->id, w->pid, 0);
        }
        /* heartbeats */
        if (now - last_stats >= 1000000u) {
            last_stats = now;
            for (int i = 0; i < gw->n_workers; i++)
                if (gw->workers[i].state == GW_W_UP)
                    send_empty(&gw->workers[i], GF_IPC_GET_STATS,
                               atomic_fetch_add(&gw->next_id, 1));
        }
        struct timespec ts;
        gf_deadline_after(CLOCK_REALTIME, 100u * 1000000u, &ts);
        pthread_cond_timedwait(&gw->cond, &gw->lock, &ts);
    }
    pthread_mutex_unlock(&gw->lock);
    return NULL;
}

/* ---- start and stop ------------------------------------------------------------------ */

/* "auto", "cpu", "cpu:N", "cuda:0,cuda:1" -> the device of each worker. */
static gf_status parse_devices(gf_gw *gw, const char *spec, gf_err *err)
{
    if (spec == NULL || spec[0] == '\0' || strcmp(spec, GF_GW_DEFAULT_DEVICES) == 0) {
        int n = gw->probe.cuda_devices; /* asked of gpufaas-worker --probe */
        if (n > GW_MAX_WORKERS)
            n = GW_MAX_WORKERS;
        for (int i = 0; i < n; i++)
            snprintf(gw->workers[i].device, sizeof gw->workers[i].device, "cuda:%d", i);
        if (n == 0) {
            snprintf(gw->workers[0].device, sizeof gw->workers[0].device, "cpu:0");
            n = 1;
        }
        gw->n_workers = n;
        return GF_OK;
    }
    if (strcmp(spec, "cpu") == 0)
        spec = "cpu:1";
    if (strncmp(spec, "cpu:", 4) == 0) {
        char *end;
        long n = strtol(spec + 4, &end, 10);
        if (*end != '\0' || n < 1 || n > GW_MAX_WORKERS)
            return gf_err_set(err, GF_ERR_INVALID, "--devices %s: the number of cpu workers must "
                              "be 1..%d", spec, GW_MAX_WORKERS);
        for (long i = 0; i < n; i++)
            snprintf(gw->workers[i].device, sizeof gw->workers[i].device, "cpu:%ld", i);
        gw->n_workers = (int)n;
        return GF_OK;
    }
    const char *p = spec;
    int n = 0;
    while (*p != '\0') {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[32];
        if (len == 0 || len >= sizeof item || n == GW_MAX_WORKERS)
            return gf_err_set(err, GF_ERR_INVALID, "--devices %s: malformed list", spec);
        memcpy(item, p, len);
        item[len] = '\0';
        char *end;
        if (strncmp(item, "cuda:", 5) != 0 || item[5] < '0' || item[5] > '9' ||
            (strtol(item + 5, &end, 10), *end != '\0'))
            return gf_err_set(err, GF_ERR_INVALID, "--devices: '%s' is not cuda:N (use auto, "
                              "cpu:N or a list such as cuda:0,cuda:1)", item);
        snprintf(gw->workers[n].device, sizeof gw->workers[n].device, "%s", item);
        n++;
        p += len;
        if (*p == ',')
            p++;
    }
    if (n == 0)
        return gf_err_set(err, GF_ERR_INVALID, "--devices: empty list");
    gw->n_workers = n;
    return GF_OK;
}

gf_status gw_workers_start(gf_gw *gw, gf_err *err)
{
    gf_status st = parse_devices(gw, gw->cfg.devices, err);
    if (st != GF_OK)
        return st;
    for (int i = 0; i < gw->n_workers; i++) {
        gw_worker *w = &gw->workers[i];
        w->gw = gw;
        w->id = i;
        w->fd = -1;
        pthread_mutex_init(&w->wlock, NULL);
        pthread_mutex_init(&w->slock, NULL);
        pthread_cond_init(&w->scond, NULL);
    }
    for (int i = 0; i < gw->n_workers; i++) {
        st = spawn(gw, &gw->workers[i], err);
        if (st != GF_OK)
            return st;
    }
    gw->supervisor_running = true;
    int rc = pthread_create(&gw->supervisor, NULL, supervisor_main, gw);
    if (rc != 0) {
        gw->supervisor_running = false;
        return gf_err_set(err, GF_ERR_NOMEM, "pthread_create(supervisor): %s", strerror(rc));
    }
    /* wait until every worker is up or has failed, at most 60 s */
    uint64_t deadline = gf_mono_us() + 60u * 1000000u;
    pthread_mutex_lock(&gw->lock);
    for (;;) {
        int up = 0, settled = 0;
        for (int i = 0; i < gw->n_workers; i++) {
            up += gw->workers[i].state == GW_W_UP;
            settled += gw->workers[i].state == GW_W_UP || gw->workers[i].state == GW_W_FAILED;
        }
        if (settled == gw->n_workers || gf_mono_us() > deadline) {
            pthread_mutex_unlock(&gw->lock);
            if (up == 0)
                return gf_err_set(err, GF_ERR_DEVICE,
                                  "no worker came up (%d tried; see the workers' messages "
                                  "above)", gw->n_workers);
            return GF_OK;
        }
        struct timespec ts;
        gf_deadline_after(CLOCK_REALTIME, 50u * 1000000u, &ts);
        pthread_cond_timedwait(&gw->cond, &gw->lock, &ts);
    }
}

void gw_workers_stop(gf_gw *gw)
{
    /* ask politely, then insist */
    for (int i = 0; i < gw->n_workers; i++)
        if (gw->workers[i].pid > 0 && !gw->workers[i].exited)
            send_empty(&gw->workers[i], GF_IPC_SHUTDOWN, atomic_fetch_add(&gw->next_id, 1));
    static const struct {
        int sig;
        uint64_t wait_ms;
    } steps[] = {{0, 5000}, {SIGTERM, 2000}, {SIGKILL, 2000}};
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        pthread_mutex_lock(&gw->lock);
        if (steps[s].sig != 0)
            for (int i = 0; i < gw->n_workers; i++)
                if (gw->workers[i].pid > 0 && !gw->workers[i].exited)
                    kill(gw->workers[i].pid, steps[s].sig);
        uint64_t deadline = gf_mono_us() + steps[s].wait_ms * 1000u;
        for (;;) {
            int alive = 0;
            for (int i = 0; i < gw->n_workers; i++)
                alive += gw->workers[i].pid > 0 && !gw->workers[i].exited;
            if (alive == 0 || gf_mono_us() > deadline)
                break;
            struct timespec ts;
            gf_deadline_after(CLOCK_REALTIME, 20u * 1000000u, &ts);
            pthread_cond_timedwait(&gw->cond, &gw->lock, &ts);
        }
        pthread_mutex_unlock(&gw->lock);
    }
    if (gw->supervisor_running) {
        pthread_mutex_lock(&gw->lock);
        gw->supervisor_running = false;
        pthread_cond_broadcast(&gw->cond);
        pthread_mutex_unlock(&gw->lock);
        pthread_join(gw->supervisor, NULL);
    }
    for (int i = 0; i < gw->n_workers; i++) {
        gw_worker *w = &gw->workers[i];
        if (w->pid > 0 && !w->exited)
            waitpid(w->pid, NULL, 0);
        join_threads(w);
        pthread_mutex_destroy(&w->wlock);
        pthread_mutex_destroy(&w->slock);
        pthread_cond_destroy(&w->scond);
    }
}
