/* gpufaas — the worker process: the events thread, which sends the cache's
 * residency changes (loads, evictions, failures) as EVENT frames. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "worker/worker_impl.h"

/* ---- cache events ------------------------------------------------------------------ */

/* The cache's callback: runs with the cache lock held, on the thread where
 * the change happened. Records load completion for RESULT timings, wakes
 * waiters, and queues an EVENT (hits are only counted, in STATS). */
void wk_on_cache_event(void *arg, const gf_cache_event *ev)
{
    gf_worker *w = arg;
    if (ev->kind == GF_CACHE_EV_HIT)
        return;
    uint64_t t = gf_mono_us();
    pthread_mutex_lock(&w->lock);
    if (ev->to == GF_TIER_DEVICE && ev->kind != GF_CACHE_EV_EVICT) {
        wmodel *m = wk_table_find_cached(w, ev->key);
        if (m != NULL)
            m->loaded_at_us = t;
    }
    w->progress++;
    pthread_cond_broadcast(&w->progress_cond);
    if (ev->to == GF_TIER_DEVICE)
        pthread_cond_broadcast(&w->exec_cond); /* ready-first waits for a swap to land */
    pthread_mutex_unlock(&w->lock);

    pthread_mutex_lock(&w->ev_lock);
    uint64_t seq = ++w->ev_seq;
    if (w->ev_count >= GF_WORKER_EVQ_MAX || w->ev_stop) {
        w->ev_dropped++;
    } else {
        wevent *e = &w->evq[(w->ev_head + w->ev_count) % GF_WORKER_EVQ_MAX];
        e->key = strdup(ev->key);
        e->msg = ev->message != NULL ? strdup(ev->message) : NULL;
        if (e->key == NULL || (ev->message != NULL && e->msg == NULL)) {
            free(e->key);
            free(e->msg);
            w->ev_dropped++;
        } else {
            e->ev = (gf_ipc_event){
                .seq = seq,
                .time_us = (uint64_t)gf_wall_us(),
                .kind = ev->kind == GF_CACHE_EV_LOAD    ? GF_IPC_EV_LOADED
                        : ev->kind == GF_CACHE_EV_EVICT ? GF_IPC_EV_EVICTED
                                                        : GF_IPC_EV_FAILED,
                .from = (int32_t)ev->from,
                .to = (int32_t)ev->to,
                .bytes = ev->bytes,
                .micros = ev->micros,
            };
            w->ev_count++;
            pthread_cond_signal(&w->ev_cond);
        }
    }
    pthread_mutex_unlock(&w->ev_lock);
}

void *wk_events_main(void *arg)
{
    gf_worker *w = arg;
    gf_buf b;
    gf_buf_init(&b);
    pthread_mutex_lock(&w->ev_lock);
    for (;;) {
        while (w->ev_count == 0 && !w->ev_stop)
            pthread_cond_wait(&w->ev_cond, &w->ev_lock);
        if (w->ev_count == 0)
            break;
        wevent e = w->evq[w->ev_head];
        w->ev_head = (w->ev_head + 1) % GF_WORKER_EVQ_MAX;
        w->ev_count--;
        pthread_mutex_unlock(&w->ev_lock);
        e.ev.key = e.key;
        e.ev.message = e.msg;
        gf_err err;
        gf_err_clear(&err);
        wk_send_encoded(w, &b, gf_ipc_encode_event(&b, &e.ev, &err), &err, "EVENT");
        free(e.key);
        free(e.msg);
        pthread_mutex_lock(&w->ev_lock);
        w->ev_sent++;
    }
    pthread_mutex_unlock(&w->ev_lock);
    gf_buf_deinit(&b);
    return NULL;
}
