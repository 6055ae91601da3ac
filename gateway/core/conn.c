/* gpufaas — the gateway's worker connections: frames and each connection's
 * send queue and writer thread, and sending work (INFER, LOAD, UNLOAD) to a
 * worker. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/clock.h"
#include "core/log.h"
#include "gateway/core/internal.h"

/* ---- frames and the send queue ------------------------------------------------ */

gw_frame *gw_frame_adopt(gf_buf *b)
{
    gw_frame *f = calloc(1, sizeof *f);
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

gw_frame *gw_frame_adopt_gather(gf_buf *b, const gf_ipc_gather *g, gf_hold *const *holds,
                                size_t n)
{
    gw_frame *f = calloc(1, sizeof *f);
    struct iovec *iov = malloc((g->n ? g->n : 1) * sizeof *iov);
    gf_hold **h = malloc((n ? n : 1) * sizeof *h);
    if (f == NULL || iov == NULL || h == NULL) {
        free(f);
        free(iov);
        free(h);
        return NULL;
    }
    atomic_init(&f->refs, 1);
    f->n_iov = gf_ipc_gather_iov(g, b, iov); /* over b's bytes, which the frame takes */
    f->iov = iov;
    f->len = (size_t)g->len;
    f->data = gf_buf_steal(b, NULL);
    memcpy(h, holds, n * sizeof *h);
    f->holds = h;
    f->n_holds = n;
    return f;
}

void gw_frame_unref(gw_frame *f)
{
    if (f != NULL && atomic_fetch_sub(&f->refs, 1) == 1) {
        for (size_t i = 0; i < f->n_holds; i++)
            gf_hold_unref(f->holds[i]);
        free(f->holds);
        free(f->iov);
        free(f->data);
        free(f);
    }
}

/* f's segments: its iovecs, or one over data (in *one). */
static const struct iovec *frame_iov(const gw_frame *f, struct iovec *one, int *n)
{
    if (f->iov != NULL) {
        *n = f->n_iov;
        return f->iov;
    }
    one->iov_base = f->data;
    one->iov_len = f->len;
    *n = 1;
    return one;
}

/* Write what the socket takes of f from byte off without blocking; the new
 * offset. An error stops it early: the writer thread meets it again with
 * the rest. */
static size_t write_now(int fd, const gw_frame *f, size_t off)
{
    struct iovec one;
    int n;
    const struct iovec *iov = frame_iov(f, &one, &n);
    gf_ipc_writev_now(fd, iov, n, &off, NULL);
    return off;
}

/* This thread's deferred writes (gw_send_defer_begin): workers whose queue
 * it left a frame in for itself to write. */
#define GW_DEFER_MAX 16
static __thread int tl_defer;
static __thread gw_worker *tl_pending[GW_DEFER_MAX];
static __thread int tl_n_pending;

/* Queue s at the tail. slock held. */
static void sq_push(gw_worker *w, gw_send *s)
{
    s->next = NULL;
    if (w->sq_tail != NULL)
        w->sq_tail->next = s;
    else
        w->sq_head = s;
    w->sq_tail = s;
}

/* Write what the socket takes of the queue from this thread, while no
 * writer is at it; the writer gets the rest. slock held. */
static void sq_write_inline(gw_worker *w)
{
    while (w->sq_head != NULL && !w->sq_writing && !w->sq_stop && !w->sq_dead && w->fd >= 0) {
        gw_send *s = w->sq_head;
        s->off = write_now(w->fd, s->frame, s->off);
        if (s->off < s->frame->len)
            break;
        w->sq_head = s->next;
        if (w->sq_head == NULL)
            w->sq_tail = NULL;
        gw_frame_unref(s->frame);
        free(s);
    }
    if (w->sq_head != NULL)
        pthread_cond_signal(&w->scond);
}

void gw_send_defer_begin(void)
{
    tl_defer++;
}

void gw_send_defer_end(void)
{
    if (--tl_defer > 0)
        return;
    for (int i = 0; i < tl_n_pending; i++) {
        gw_worker *w = tl_pending[i];
        pthread_mutex_lock(&w->slock);
        sq_write_inline(w);
        pthread_mutex_unlock(&w->slock);
    }
    tl_n_pending = 0;
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
    bool inline_ok = w->sq_head == NULL && !w->sq_writing && !w->sq_stop && w->fd >= 0;
    size_t off = 0;
    if (inline_ok && tl_defer == 0) {
        /* nothing queued or being written: write it from this thread, which
         * saves waking the writer (a context switch per request, the larger
         * part of a small request's cost); what the socket does not take at
         * once is queued. sq_stop is set before the fd is closed, under
         * slock, so the fd is the connection's own while we hold it. */
        off = write_now(w->fd, f, 0);
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
    sq_push(w, s);
    bool mine = false; /* this thread writes the queue at gw_send_defer_end */
    for (int i = 0; tl_defer > 0 && i < tl_n_pending && !mine; i++)
        mine = tl_pending[i] == w;
    if (!mine && inline_ok && tl_defer > 0 && tl_n_pending < GW_DEFER_MAX) {
        /* written once the caller has let go of gw->lock, without waking
         * the writer */
        tl_pending[tl_n_pending++] = w;
        mine = true;
    }
    if (!mine)
        pthread_cond_signal(&w->scond);
    pthread_mutex_unlock(&w->slock);
}

/* Encode with enc into a fresh frame and queue it. */
gf_status gw_send_empty(gw_worker *w, gf_ipc_type type, uint64_t id)
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

void *gw_writer_main(void *arg)
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
        struct iovec one;
        int n;
        const struct iovec *iov = frame_iov(s->frame, &one, &n);
        size_t off = s->off;
        gf_status st;
        while ((st = gf_ipc_writev_some(w->fd, iov, n, &off, &err)) == GF_ERR_BUSY) {
            struct pollfd p = {w->fd, POLLOUT, 0};
            if (poll(&p, 1, 1000) < 0 && errno != EINTR)
                break;
        }
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

void gw_send_infer(gf_gw *gw, gw_worker *w, gw_batch *b)
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
    /* a LOAD on its way for this tier or a higher one will do; one for a
     * lower tier (a deploy's host warm) will not: a device load behind it
     * is sent, and the worker promotes the copy when it comes to it */
    if (pl->state == GW_PL_LOADING && pl->load_tier >= tier)
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
        pl->load_tier = tier;
    } else if (pl->state == GW_PL_LOADING && tier > pl->load_tier) {
        pl->load_tier = tier;
    }
    gw_worker_send(w, f);
    gw_frame_unref(f);
    gw_residency_after_load(gw, w, v); /* queued behind the LOAD on the worker */
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
    gw_copies_forget_version(gw, v);
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
        gw_send_infer(gw, w, b);
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
