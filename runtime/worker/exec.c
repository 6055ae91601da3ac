/* gpufaas — the worker process: the executor thread — leases (and the one
 * taken ahead, so the next model swaps in during this compute), the order
 * requests run in (ready-first; by deadline among those that can run), and
 * INFER on the compute stream. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/clock.h"
#include "core/copies.h"
#include "core/ema.h"
#include "core/log.h"
#include "core/tensor.h"
#include "worker/worker_impl.h"

/* ---- executor: INFER ------------------------------------------------------------------ */

/* First queued request whose model is no longer preparing. w->lock held. */
static wreq *first_runnable(gf_worker *w)
{
    for (wreq *r = w->q_head; r != NULL; r = r->next)
        if (r->m->prep != WM_PREPARING)
            return r;
    return NULL;
}

static void queue_unlink(gf_worker *w, wreq *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        w->q_head = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    else
        w->q_tail = r->prev;
    r->next = r->prev = NULL;
    w->q_len--;
}

/* Take r's lease from it (w->lock held); the caller releases it. */
static gf_lease *take_lease(wreq *r)
{
    gf_lease *l = r->lease;
    r->lease = NULL;
    return l;
}

/* Release l (no lock held; NULL is a no-op) and wake whoever waits for room. */
static void lease_drop(gf_worker *w, gf_lease *l)
{
    if (l == NULL)
        return;
    gf_lease_release(l);
    pthread_mutex_lock(&w->lock);
    w->progress++;
    pthread_cond_broadcast(&w->progress_cond);
    pthread_mutex_unlock(&w->lock);
}

static void release_lease(gf_worker *w, wreq *r)
{
    pthread_mutex_lock(&w->lock);
    gf_lease *l = take_lease(r);
    pthread_mutex_unlock(&w->lock);
    lease_drop(w, l);
}

/* When r's parameters must be on the device for it to meet its function's
 * SLO: its receipt + slo_ms less its measured execution time; 0 (no
 * deadline) for a function without an SLO. w->lock held. */
uint64_t wk_request_due(const gf_worker *w, const wreq *r)
{
    (void)w;
    const wmodel *m = r->m;
    if (m->prep != WM_READY || m->mf->slo_ms <= 0)
        return 0;
    double slack = m->mf->slo_ms * 1e3 - m->exec_us;
    return r->t_recv_us + (slack > 1 ? (uint64_t)slack : 1);
}

/* Take queued request r's lease ahead (w->lock held on entry and on return;
 * dropped while the cache is asked). A BUSY cache leaves r without one until
 * the cache makes progress (ahead_gen). True when r holds its lease. */
static bool lease_ahead_of(gf_worker *w, wreq *r)
{
    w->ahead_pending = true; /* the executor leaves the queue alone until we are done */
    gf_cache_model *cm = r->m->cm;
    uint64_t gen = w->progress, due = wk_request_due(w, r);
    pthread_mutex_unlock(&w->lock);
    gf_lease *l = NULL;
    gf_status st = gf_cache_acquire_by(w->cache, cm, due, &l, NULL);
    pthread_mutex_lock(&w->lock);
    w->ahead_pending = false;
    if (st == GF_OK)
        r->lease = l;
    else
        r->ahead_gen = gen + 1; /* tried at this generation: again after progress */
    pthread_cond_broadcast(&w->exec_cond);
    return st == GF_OK;
}

/* May r's lease be taken ahead now? w->lock held. */
static bool ahead_due(const gf_worker *w, const wreq *r)
{
    return r->lease == NULL && r->m->prep == WM_READY && r->ahead_gen != w->progress + 1;
}

/* Lease the models of the first GF_WORKER_AHEAD queued requests, in queue
 * order, so that every swap-in they need starts on the copy stream as soon
 * as they arrive and runs while the compute stream runs the requests before
 * them (overlap across requests), and so that no model a queued request
 * needs is evicted to make room for another. A BUSY cache leaves a request
 * to load at its turn (or when a lease is given back). Called by the
 * executor once its request holds a lease, and by the reader when a request
 * arrives. No lock held. */
void wk_lease_ahead(gf_worker *w)
{
    pthread_mutex_lock(&w->lock);
    while (!w->ahead_pending && !w->stopping && !w->exec_acquiring) {
        wreq *r = NULL;
        int k = 0;
        for (wreq *q = w->q_head; q != NULL && k < GF_WORKER_AHEAD && r == NULL; q = q->next, k++)
            if (ahead_due(w, q))
                r = q;
        if (r == NULL || !lease_ahead_of(w, r))
            break;
    }
    pthread_mutex_unlock(&w->lock);
}

/* Ready-first. cur is the first runnable request and its model is not on
 * the device. Rather than wait for its swap-in with the compute stream
 * idle, start the swap (take cur's lease ahead) and run a later request
 * whose model is on the device meanwhile; with none, wait until the swap
 * lands or a request arrives. cur keeps its place at the head and runs as
 * soon as its parameters are there, later by at most the one request then
 * running. Returns the request to run, or NULL to pick again (the lock was
 * dropped, or waited on). w->lock held. */
static wreq *ready_first(gf_worker *w, wreq *cur)
{
    if (w->cfg.fifo || w->stopping || cur->m->prep != WM_READY ||
        gf_cache_model_on_device(cur->m->cm))
        return cur;
    if (cur->lease == NULL) {
        if (!ahead_due(w, cur))
            return cur; /* the cache had no room for it: it loads at its turn */
        cur->t_swap_wait_us = gf_mono_us();
        lease_ahead_of(w, cur);
        return NULL;
    }
    if (!gf_cache_model_loading(cur->m->cm))
        return cur; /* landed (or failed: it runs and answers the error) */
    if (cur->t_swap_wait_us == 0)
        cur->t_swap_wait_us = gf_mono_us();
    for (wreq *r = cur->next; r != NULL; r = r->next)
        if (r->m != cur->m && r->m->prep == WM_READY && gf_cache_model_on_device(r->m->cm))
            return r;
    /* a request that arrived while a lease was being taken ahead (by us, for
     * cur) found the reader unable to take its own: take it before waiting,
     * or its swap would start only once cur's had landed and run */
    int k = 0;
    for (wreq *r = w->q_head; r != NULL && k < GF_WORKER_AHEAD; r = r->next, k++)
        if (ahead_due(w, r)) {
            lease_ahead_of(w, r);
            return NULL;
        }
    /* woken by the load's event (wk_on_cache_event), a new request or a stop */
    pthread_cond_wait(&w->exec_cond, &w->lock);
    return NULL;
}

/* The order key of --schedule deadline, the swaps' rule (loader.c's
 * order_key): when r must start to meet its SLO (wk_request_due), or
 * GF_CACHE_UNDUE_US after its arrival without one; one already past that
 * counts GF_CACHE_UNDUE_US later, behind those that can still make it (it
 * is late either way, and would make them late too) but not for ever.
 * w->lock held. */
static uint64_t deadline_key(const gf_worker *w, const wreq *r, uint64_t now)
{
    uint64_t due = wk_request_due(w, r);
    if (due == 0)
        return r->t_recv_us + GF_CACHE_UNDUE_US;
    return due >= now ? due : due + GF_CACHE_UNDUE_US;
}

/* --schedule deadline: of chosen (what ready-first picked) and the queued
 * requests whose model is on the device, the one due soonest. A request
 * that has to load keeps its turn (ready-first starts its swap); only the
 * ones that can run at once are reordered. w->lock held. */
static wreq *by_deadline(gf_worker *w, wreq *chosen)
{
    if (!w->cfg.by_deadline || w->stopping || chosen->m->prep != WM_READY ||
        !gf_cache_model_on_device(chosen->m->cm))
        return chosen;
    uint64_t now = gf_mono_us(), best_key = deadline_key(w, chosen, now);
    wreq *best = chosen;
    for (wreq *r = w->q_head; r != NULL; r = r->next) {
        if (r == chosen || r->m->prep != WM_READY || !gf_cache_model_on_device(r->m->cm))
            continue;
        uint64_t k = deadline_key(w, r, now);
        if (k < best_key) {
            best = r;
            best_key = k;
        }
    }
    return best;
}

/* Acquire r's lease (r is the executor's, off the queue), waiting (never
 * spinning) while the device is full of leased or loading models. */
static gf_status acquire_wait(gf_worker *w, wreq *r, gf_err *err)
{
    pthread_mutex_lock(&w->lock);
    w->exec_acquiring = true;
    pthread_mutex_unlock(&w->lock);
    gf_status st;
    for (int tries = 0;; tries++) {
        pthread_mutex_lock(&w->lock);
        while (w->ahead_pending)
            pthread_cond_wait(&w->exec_cond, &w->lock);
        uint64_t gen = w->progress, due = wk_request_due(w, r);
        bool stop = w->stopping;
        pthread_mutex_unlock(&w->lock);
        if (stop) {
            st = gf_err_set(err, GF_ERR_CLOSED, "the worker is stopping");
            break;
        }
        if ((st = gf_cache_acquire_by(w->cache, r->m->cm, due, &r->lease, err)) != GF_ERR_BUSY)
            break;
        /* the leases taken ahead for later requests may be in the way: give
         * back the last queued one's, then try again */
        pthread_mutex_lock(&w->lock);
        wreq *last = NULL;
        for (wreq *q = w->q_head; q != NULL; q = q->next)
            if (q->lease != NULL)
                last = q;
        gf_lease *ahead = last != NULL ? take_lease(last) : NULL;
        pthread_mutex_unlock(&w->lock);
        if (ahead != NULL) {
            lease_drop(w, ahead);
            continue;
        }
        if (tries >= GF_WORKER_BUSY_TRIES)
            break;
        wk_progress_wait(w, gen);
    }
    pthread_mutex_lock(&w->lock);
    w->exec_acquiring = false;
    pthread_mutex_unlock(&w->lock);
    return st;
}

/* The request's tensors, which the gateway sends in manifest order (it
 * checked the request against the manifest: the one validation, gw_submit).
 * What is checked here is only what the protocol promises -- one tensor per
 * input, in that order, an outputs mask within the outputs -- not the
 * manifest's rules again; the function runtime's guard of its kernels
 * (gf_fn_infer) refuses a tensor they could not read. */
static gf_status map_inputs(const wmodel *m, const gf_ipc_infer *msg, gf_tensor *in, gf_err *err)
{
    const gf_manifest *mf = m->mf;
    if (msg->n != mf->n_inputs)
        return gf_err_set(err, GF_ERR_PROTOCOL, "INFER for '%s' has %u tensors, not one per "
                          "input (%zu) in manifest order", m->key, msg->n, mf->n_inputs);
    for (uint32_t i = 0; i < msg->n; i++) {
        if (strcmp(msg->t[i].name, mf->inputs[i].name) != 0)
            return gf_err_set(err, GF_ERR_PROTOCOL, "INFER for '%s': tensor %u is '%s', not "
                              "input '%s' (inputs go in manifest order)", m->key, i,
                              msg->t[i].name, mf->inputs[i].name);
        in[i] = msg->t[i].t;
    }
    if (mf->n_outputs < 64 && msg->outputs >> mf->n_outputs != 0)
        return gf_err_set(err, GF_ERR_PROTOCOL, "INFER for '%s' asks for outputs beyond its "
                          "%zu (mask 0x%llx)", m->key, mf->n_outputs,
                          (unsigned long long)msg->outputs);
    return GF_OK;
}

/* The shared memory a request's tensors use (inputs by reference, outputs
 * placed): the mappings it holds, and the BYTES inputs copied out. */
typedef struct req_shm {
    wk_shm_map *held[2 * GF_MANIFEST_MAX_IO];
    size_t n_held;
    void *owned[GF_MANIFEST_MAX_IO];
    size_t n_owned;
    gf_fn_dest dest[GF_MANIFEST_MAX_IO]; /* manifest order */
    bool any_dest;
} req_shm;

/* Point cur's inputs by reference at their mappings, and map its outputs'
 * destinations. A BYTES input is copied out of the object and checked (the
 * client may write the object while the function reads it); other inputs
 * are read straight from it (the host-to-device copy is the one copy). */
static gf_status shm_resolve(gf_worker *w, wreq *cur, req_shm *rs, gf_err *err)
{
    gf_ipc_infer *msg = &cur->msg;
    char what[GF_IPC_MAX_NAME + 32];
    for (uint32_t i = 0; i < msg->n; i++) {
        gf_ipc_tensor *t = &msg->t[i];
        if (t->shm_key == NULL)
            continue;
        snprintf(what, sizeof what, "input '%s'", t->name);
        void *p;
        gf_status st = wk_shm_span(&w->shm, what, t->shm_key, t->shm_offset, t->t.nbytes, &p,
                                   &rs->held[rs->n_held], err);
        if (st != GF_OK)
            return st;
        rs->n_held++;
        t->t.data = p;
        if (t->t.dtype != GF_DT_BYTES)
            continue;
        void *copy = malloc(t->t.nbytes > 0 ? t->t.nbytes : 1);
        if (copy == NULL)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory for %s", what);
        rs->owned[rs->n_owned++] = copy;
        memcpy(copy, p, t->t.nbytes);
        gf_copies_add(GF_COPY_IN, t->t.nbytes);
        t->t.data = copy;
        uint64_t numel = gf_tensor_numel(&t->t);
        if ((st = gf_bytes_check(copy, t->t.nbytes, numel, err)) != GF_OK) {
            gf_err_prefix(err, "%s (in shared memory '%s')", what, t->shm_key);
            return st;
        }
    }
    const gf_manifest *mf = cur->m->mf;
    for (uint32_t i = 0; i < msg->n_dests; i++) {
        const gf_ipc_shm_dest *d = &msg->dests[i];
        if (d->output >= mf->n_outputs)
            return gf_err_set(err, GF_ERR_INVALID, "a shared memory destination for output %u "
                              "of function '%s', which has %zu", d->output, cur->m->key,
                              mf->n_outputs);
        snprintf(what, sizeof what, "output '%s'", mf->outputs[d->output].name);
        void *p;
        gf_status st = wk_shm_span(&w->shm, what, d->key, d->offset, d->size, &p,
                                   &rs->held[rs->n_held], err);
        if (st != GF_OK)
            return st;
        rs->n_held++;
        rs->dest[d->output] = (gf_fn_dest){.data = p, .size = (size_t)d->size};
        rs->any_dest = true;
    }
    return GF_OK;
}

static void shm_done(gf_worker *w, req_shm *rs)
{
    for (size_t i = 0; i < rs->n_held; i++)
        wk_shm_release(&w->shm, rs->held[i]);
    for (size_t i = 0; i < rs->n_owned; i++)
        free(rs->owned[i]);
}

/* Run cur and leave its answer (RESULT or ERROR) encoded in b, unsent: the
 * caller first marks the device free, so that the next request, which may
 * arrive as soon as the answer is out, finds it so. */
void wk_run_request(gf_worker *w, wreq *cur, wk_answer *a)
{
    gf_buf *b = a->b;
    a->g->n = 0;
    uint64_t t_start = gf_mono_us();
    wmodel *m = cur->m;
    gf_err err;
    gf_err_clear(&err);
    gf_status st = GF_OK;
    gf_fn_outputs outs = {0};
    gf_fn_timing timing = {0};
    gf_tensor in[GF_MANIFEST_MAX_IO];
    req_shm rs;
    rs.n_held = rs.n_owned = 0;
    rs.any_dest = false;
    memset(rs.dest, 0, sizeof rs.dest);
    if (m->prep == WM_FAILED) {
        st = gf_err_set(&err, m->fail_code, "function version '%s' failed to load: %s", m->key,
                        m->fail_msg);
        goto reply;
    }
    if ((st = shm_resolve(w, cur, &rs, &err)) != GF_OK ||
        (st = map_inputs(m, &cur->msg, in, &err)) != GF_OK)
        goto reply;
    if (cur->lease == NULL && (st = acquire_wait(w, cur, &err)) != GF_OK)
        goto reply;
    wk_lease_ahead(w);
    /* the outputs copied back go to the pinned ring: the D2H is a DMA into
     * the buffers the RESULT is written from (wk_send_answer) */
    gf_fn_host_alloc pinned = {wk_pinned_alloc_out, wk_pinned_free, &w->pinned};
    st = gf_fn_infer_into(m->plan, w->be, w->cache, cur->lease, in, m->mf->n_inputs,
                          cur->msg.outputs, rs.any_dest ? rs.dest : NULL, &pinned, &outs,
                          &timing, &err);
    wk_device_lost(w, st, &err);
    if (st == GF_OK) {
        pthread_mutex_lock(&w->lock);
        m->exec_us = gf_ema(m->exec_us, (double)timing.exec_us);
        pthread_mutex_unlock(&w->lock);
    }
reply:;
    bool cold = cur->lease != NULL && gf_lease_cold(cur->lease);
    int32_t src = cur->lease != NULL ? (int32_t)gf_lease_source(cur->lease) : GF_TIER_NONE;
    /* the time ready-first held it back for its swap-in, until its
     * parameters landed, was the swap's, not the queue's */
    uint64_t queue_us = t_start - cur->t_recv_us, load_us = 0;
    if (st == GF_OK && cold && gf_lease_wait_all(cur->lease, NULL) == GF_OK) {
        pthread_mutex_lock(&w->lock);
        uint64_t loaded = m->loaded_at_us;
        pthread_mutex_unlock(&w->lock);
        uint64_t held = cur->t_swap_wait_us, landed = loaded < t_start ? loaded : t_start;
        uint64_t waited = held != 0 && landed > held ? landed - held : 0;
        queue_us -= waited < queue_us ? waited : queue_us;
        load_us = waited + (loaded > t_start ? loaded - t_start : 0);
    }
    release_lease(w, cur);
    if (st == GF_OK) {
        gf_ipc_tensor ot[GF_MANIFEST_MAX_IO];
        size_t n = outs.n;
        if (n > m->mf->n_outputs || n > GF_MANIFEST_MAX_IO) {
            st = gf_err_set(&err, GF_ERR_INTERNAL, "function '%s' returned %zu outputs, not %zu",
                            m->key, n, m->mf->n_outputs);
        } else {
            uint64_t want = cur->msg.outputs;
            size_t k = 0;
            for (size_t i = 0; i < n; i++) {
                if (want != 0 && (want >> i & 1) == 0)
                    continue; /* not asked for: neither copied back nor sent */
                ot[k].name = m->mf->outputs[i].name;
                ot[k].shm_key = NULL;
                ot[k].shm_offset = 0;
                for (uint32_t d = 0; (outs.placed >> i & 1) != 0 && d < cur->msg.n_dests; d++)
                    if (cur->msg.dests[d].output == i) { /* written there: sent by reference */
                        ot[k].shm_key = cur->msg.dests[d].key;
                        ot[k].shm_offset = cur->msg.dests[d].offset;
                    }
                ot[k++].t = outs.t[i];
            }
            gf_ipc_result res = {
                .flags = cold ? GF_IPC_RESULT_COLD : 0,
                .source_tier = src,
                .queue_us = queue_us,
                .load_us = load_us,
                .exec_us = timing.exec_us,
                .n = (uint32_t)k,
                .t = ot,
            };
            /* the outputs' bytes go out from outs' buffers (writev), not
             * copied into the frame: a keeps them until sent */
            st = gf_ipc_encode_result_gather(b, a->g, cur->id, &res, &err);
        }
    }
    if (st == GF_OK)
        a->outs = outs; /* sent from there (placed ones are not freed) */
    else
        gf_fn_outputs_free(&outs);
    shm_done(w, &rs); /* the RESULT's segments never point into a mapping */
    if (st != GF_OK) {
        pthread_mutex_lock(&w->lock);
        w->n_errors++;
        pthread_mutex_unlock(&w->lock);
    }
    if (st != GF_OK) {
        gf_buf_reset(b);
        a->g->n = 0;
        GF_LOG_D("request %llu: %s", (unsigned long long)cur->id, gf_err_msg(&err));
        gf_err e2;
        gf_err_clear(&e2);
        if (gf_ipc_encode_error(b, cur->id, st, gf_err_msg(&err), &e2) != GF_OK)
            GF_LOG_E("encoding ERROR failed: %s", gf_err_msg(&e2));
    }
}

void wk_request_free(gf_worker *w, wreq *r)
{
    release_lease(w, r);
    gf_ipc_infer_deinit(&r->msg);
    gf_ipc_frame_deinit(&r->frame);
    pthread_mutex_lock(&w->lock);
    r->m->pending--;
    wk_wmodel_unref(r->m);
    pthread_cond_broadcast(&w->admin_cond);
    pthread_mutex_unlock(&w->lock);
    free(r);
}

void *wk_exec_main(void *arg)
{
    gf_worker *w = arg;
    gf_buf b;
    gf_buf_init(&b);
    b.limit = (size_t)(GF_IPC_HEADER_SIZE + w->cfg.max_frame);
    gf_ipc_gather g;
    g.n = 0;
    wk_answer ans = {.b = &b, .g = &g};
    pthread_mutex_lock(&w->lock);
    for (;;) {
        wreq *cur = NULL;
        for (;;) {
            if (w->ahead_pending || w->reader_running) { /* the reader is using the queue
                                                          * or the device */
                pthread_cond_wait(&w->exec_cond, &w->lock);
                continue;
            }
            if (w->stopping || (cur = first_runnable(w)) != NULL ||
                (w->draining && w->q_head == NULL))
                break;
            pthread_cond_wait(&w->exec_cond, &w->lock);
        }
        if (cur == NULL)
            break;
        if ((cur = ready_first(w, cur)) == NULL)
            continue;
        cur = by_deadline(w, cur);
        queue_unlink(w, cur); /* its turn came: a lease taken ahead stays its */
        w->running = cur->m;
        pthread_mutex_unlock(&w->lock);
        wk_run_request(w, cur, &ans);
        wk_request_free(w, cur);
        pthread_mutex_lock(&w->lock);
        w->running = NULL;
        pthread_mutex_unlock(&w->lock);
        wk_send_answer(w, &ans);
        pthread_mutex_lock(&w->lock);
    }
    /* stopping: answer what is left so the gateway can retry it elsewhere */
    while (w->ahead_pending)
        pthread_cond_wait(&w->exec_cond, &w->lock);
    while (w->q_head != NULL) {
        wreq *r = w->q_head;
        queue_unlink(w, r);
        w->n_errors++;
        char why[sizeof w->stop_why];
        wk_stop_message(w, "the worker is stopping", why, sizeof why);
        pthread_mutex_unlock(&w->lock);
        wk_reply_error(w, &b, r->id, GF_ERR_CLOSED, why);
        wk_request_free(w, r);
        pthread_mutex_lock(&w->lock);
    }
    w->exec_done = true;
    pthread_cond_broadcast(&w->admin_cond);
    pthread_mutex_unlock(&w->lock);
    wk_wake_main(w);
    gf_buf_deinit(&b);
    return NULL;
}
