/* gpufaas — the worker process: the reader thread — frames in, each
 * validated, answered at once (HELLO, PING, GET_STATS), queued (LOAD,
 * UNLOAD, INFER), or run on the quick path. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "worker/worker_impl.h"


static int protocol_error(gf_worker *w, gf_buf *b, uint64_t id, gf_status code, const char *msg)
{
    GF_LOG_E("malformed frame from the gateway (closing): %s", msg);
    wk_reply_error(w, b, id, code, msg);
    return GF_WORKER_EXIT_PROTOCOL;
}

/* True while new work is refused; the reason goes to why (cap bytes). */
static bool refusing(gf_worker *w, char *why, size_t cap)
{
    pthread_mutex_lock(&w->lock);
    bool r = w->draining || w->stopping;
    if (r)
        wk_stop_message(w, "the worker is shutting down", why, cap);
    pthread_mutex_unlock(&w->lock);
    return r;
}

/* Append j (its model referenced) to the admin thread's queue and wake it.
 * w->lock held; released here. */
static void job_queue_unlock(gf_worker *w, wjob *j)
{
    if (w->j_tail != NULL)
        w->j_tail->next = j;
    else
        w->j_head = j;
    w->j_tail = j;
    pthread_cond_signal(&w->admin_cond);
    pthread_mutex_unlock(&w->lock);
}

static void handle_load(gf_worker *w, gf_buf *b, uint64_t id, const gf_ipc_load *msg)
{
    char why[sizeof w->stop_why];
    if (refusing(w, why, sizeof why)) {
        wk_reply_error(w, b, id, GF_ERR_CLOSED, why);
        return;
    }
    if (msg->key[0] == '\0') {
        wk_reply_error(w, b, id, GF_ERR_INVALID, "LOAD: the key is empty");
        return;
    }
    if (msg->tier != GF_TIER_STORE && msg->tier != GF_TIER_HOST &&
        msg->tier != GF_TIER_DEVICE) {
        char text[96];
        snprintf(text, sizeof text, "LOAD: tier %d is not 0 (store), 1 (host) or 2 (device)",
                 msg->tier);
        {
            wk_reply_error(w, b, id, GF_ERR_INVALID, text);
            return;
        }
    }
    if (msg->plugin_path[0] != '\0' && !w->cfg.allow_native) {
        wk_reply_error(w, b, id, GF_ERR_PERMISSION,
                    "plugins (native functions) are not allowed on this worker; start it "
                    "with --allow-native-functions");
        return;
    }
    wjob *j = calloc(1, sizeof *j);
    if (j == NULL) {
        wk_reply_error(w, b, id, GF_ERR_NOMEM, "out of memory");
        return;
    }
    j->kind = JOB_LOAD;
    j->id = id;
    j->tier = msg->tier;
    pthread_mutex_lock(&w->lock);
    wmodel *m = wk_table_find(w, msg->key);
    if (m != NULL) {
        if (m->manifest_len != msg->manifest_len ||
            memcmp(m->manifest_text, msg->manifest, msg->manifest_len) != 0 ||
            strcmp(m->weights_path, msg->weights_path) != 0 ||
            strcmp(m->plugin_path, msg->plugin_path) != 0) {
            pthread_mutex_unlock(&w->lock);
            free(j);
            {
                wk_reply_error(w, b, id, GF_ERR_EXISTS,
                            "this key is loaded with another manifest, weights or plugin; "
                            "UNLOAD it first");
                return;
            }
        }
    } else {
        m = calloc(1, sizeof *m);
        if (m != NULL) {
            m->key = wk_dup_str(msg->key);
            m->manifest_text = malloc(msg->manifest_len + 1);
            m->weights_path = wk_dup_str(msg->weights_path);
            m->plugin_path = wk_dup_str(msg->plugin_path);
        }
        if (m == NULL || m->key == NULL || m->manifest_text == NULL || m->weights_path == NULL ||
            m->plugin_path == NULL) {
            pthread_mutex_unlock(&w->lock);
            wk_wmodel_free(m);
            free(j);
            {
                wk_reply_error(w, b, id, GF_ERR_NOMEM, "out of memory");
                return;
            }
        }
        memcpy(m->manifest_text, msg->manifest, msg->manifest_len + 1);
        m->manifest_len = msg->manifest_len;
        m->prep = WM_PREPARING;
        wk_table_insert(w, m);
    }
    m->refs++;
    j->m = m;
    job_queue_unlock(w, j);
}

/* A job of kind for the live version named key, its model referenced, with
 * w->lock held; or NULL (lock not held) after answering ERROR: refusing
 * work, out of memory, no such version. */
static wjob *job_for_key(gf_worker *w, gf_buf *b, uint64_t id, const char *key, job_kind kind)
{
    char why[sizeof w->stop_why];
    if (refusing(w, why, sizeof why)) {
        wk_reply_error(w, b, id, GF_ERR_CLOSED, why);
        return NULL;
    }
    wjob *j = calloc(1, sizeof *j);
    if (j == NULL) {
        wk_reply_error(w, b, id, GF_ERR_NOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_lock(&w->lock);
    wmodel *m = wk_table_find(w, key);
    if (m == NULL) {
        pthread_mutex_unlock(&w->lock);
        free(j);
        wk_reply_error(w, b, id, GF_ERR_NOT_FOUND, "no such function version on this worker");
        return NULL;
    }
    m->refs++;
    j->kind = kind;
    j->id = id;
    j->m = m;
    return j;
}

static void handle_unload(gf_worker *w, gf_buf *b, uint64_t id, const gf_ipc_unload *msg)
{
    wjob *j = job_for_key(w, b, id, msg->key, JOB_UNLOAD);
    if (j == NULL)
        return;
    j->m->unloading = true;
    job_queue_unlock(w, j);
}

/* SET_RESIDENCY: queued behind the LOADs before it, on the admin thread. */
static void handle_residency(gf_worker *w, gf_buf *b, uint64_t id, const gf_ipc_residency *msg)
{
    wjob *j = job_for_key(w, b, id, msg->key, JOB_RESIDENCY);
    if (j == NULL)
        return;
    j->res = (gf_residency){msg->pin != 0, (gf_priority)msg->priority, msg->keep_warm_us};
    job_queue_unlock(w, j);
}

/* Queue an INFER; takes the frame (and the decoded message) in every case. */
static void handle_infer(gf_worker *w, gf_buf *b, gf_ipc_frame *f, gf_ipc_infer *msg,
                         uint64_t t_recv)
{
    uint64_t id = f->h.request_id;
    wreq *r = NULL;
    pthread_mutex_lock(&w->lock);
    w->n_requests++;
    pthread_mutex_unlock(&w->lock);
    char why[sizeof w->stop_why];
    if (refusing(w, why, sizeof why)) {
        wk_reply_error(w, b, id, GF_ERR_CLOSED, why);
        goto drop;
    }
    if ((r = calloc(1, sizeof *r)) == NULL) {
        wk_reply_error(w, b, id, GF_ERR_NOMEM, "out of memory");
        goto drop;
    }
    pthread_mutex_lock(&w->lock);
    wmodel *m = wk_table_find(w, msg->key);
    if (m == NULL) {
        pthread_mutex_unlock(&w->lock);
        free(r);
        char text[GF_IPC_MAX_KEY + 64];
        snprintf(text, sizeof text, "no function version '%s' on this worker", msg->key);
        wk_reply_error(w, b, id, GF_ERR_NOT_FOUND, text);
        goto drop;
    }
    m->refs++;
    m->pending++;
    r->id = id;
    r->m = m;
    r->frame = *f;
    r->msg = *msg;
    r->t_recv_us = t_recv;
    memset(f, 0, sizeof *f);
    memset(msg, 0, sizeof *msg);
    /* Fast path: with the executor idle, a request for a warm model whose
     * function takes microseconds runs right here, saving the hand-off to the
     * executor (a thread wake-up costs more than such a request). */
    bool quick = w->running == NULL && w->q_head == NULL && !w->ahead_pending &&
                 !w->exec_acquiring && m->prep == WM_READY && m->exec_us > 0 &&
                 m->exec_us <= GF_WORKER_INLINE_US;
    if (quick) {
        w->running = m;
        w->reader_running = true;
        uint64_t due = wk_request_due(w, r);
        pthread_mutex_unlock(&w->lock);
        gf_lease *l = NULL;
        gf_status st = gf_cache_acquire_by(w->cache, m->cm, due, &l, NULL);
        if (st == GF_OK && !gf_lease_cold(l)) {
            r->lease = l;
            gf_ipc_gather g;
            wk_answer ans = {.b = b, .g = &g};
            wk_run_request(w, r, &ans);
            wk_request_free(w, r);
            pthread_mutex_lock(&w->lock);
            w->running = NULL;
            w->reader_running = false;
            pthread_cond_broadcast(&w->exec_cond);
            pthread_mutex_unlock(&w->lock);
            wk_send_answer(w, &ans);
            return;
        }
        /* it has to load (or wait for room): the executor's job, lease and all */
        pthread_mutex_lock(&w->lock);
        r->lease = st == GF_OK ? l : NULL;
        w->running = NULL;
        w->reader_running = false;
    }
    r->prev = w->q_tail;
    if (w->q_tail != NULL)
        w->q_tail->next = r;
    else
        w->q_head = r;
    w->q_tail = r;
    w->q_len++;
    pthread_cond_broadcast(&w->exec_cond);
    pthread_mutex_unlock(&w->lock);
    if (!quick)
        wk_lease_ahead(w);
    return;
drop:
    pthread_mutex_lock(&w->lock);
    w->n_errors++;
    pthread_mutex_unlock(&w->lock);
    gf_ipc_infer_deinit(msg);
    gf_ipc_frame_deinit(f);
}

void wk_begin_drain(gf_worker *w)
{
    pthread_mutex_lock(&w->lock);
    w->draining = true;
    pthread_cond_broadcast(&w->exec_cond);
    pthread_cond_broadcast(&w->admin_cond);
    pthread_mutex_unlock(&w->lock);
}

/* Handle one whole frame; RD_CONTINUE, or the exit code of a protocol error.
 * Takes the frame. */
static int handle_frame(gf_worker *w, gf_buf *b, gf_ipc_frame *f)
{
    uint64_t t_recv = gf_mono_us();
    uint64_t id = f->h.request_id;
    const gf_ipc_msg_info *mi = gf_ipc_msg_info_of(f->h.type);
    gf_err err;
    gf_err_clear(&err);
    int rc = RD_CONTINUE;
    GF_LOG_T("frame %s id %llu, %llu bytes", mi->name, (unsigned long long)id,
             (unsigned long long)f->h.payload_len);
    if (mi->direction != 'W') {
        snprintf(err.msg, sizeof err.msg, "%s frames go from a worker to the gateway", mi->name);
        rc = protocol_error(w, b, id, GF_ERR_PROTOCOL, err.msg);
        goto done;
    }
    switch ((gf_ipc_type)f->h.type) {
    case GF_IPC_HELLO:
        wk_send_ready(w, b, id);
        break;
    case GF_IPC_PING:
        wk_reply_empty(w, b, GF_IPC_PONG, id);
        break;
    case GF_IPC_GET_STATS:
        wk_send_stats(w, b, id);
        break;
    case GF_IPC_SHUTDOWN:
        GF_LOG_I("SHUTDOWN: finishing the work in flight");
        wk_begin_drain(w);
        break;
    case GF_IPC_LOAD: {
        gf_ipc_load msg;
        if (gf_ipc_decode_load(f, &msg, &err) != GF_OK)
            rc = protocol_error(w, b, id, err.code, err.msg);
        else
            handle_load(w, b, id, &msg);
        break;
    }
    case GF_IPC_UNLOAD: {
        gf_ipc_unload msg;
        if (gf_ipc_decode_unload(f, &msg, &err) != GF_OK)
            rc = protocol_error(w, b, id, err.code, err.msg);
        else
            handle_unload(w, b, id, &msg);
        break;
    }
    case GF_IPC_SHM_FORGET: {
        const char *key;
        if (gf_ipc_decode_shm_forget(f, &key, &err) != GF_OK)
            rc = protocol_error(w, b, id, err.code, err.msg);
        else
            wk_shm_forget(&w->shm, key);
        break;
    }
    case GF_IPC_SET_RESIDENCY: {
        gf_ipc_residency msg;
        if (gf_ipc_decode_residency(f, &msg, &err) != GF_OK)
            rc = protocol_error(w, b, id, err.code, err.msg);
        else
            handle_residency(w, b, id, &msg);
        break;
    }
    case GF_IPC_INFER: {
        gf_ipc_infer msg;
        gf_status st = gf_ipc_decode_infer(f, &msg, &err);
        if (st == GF_OK) {
            handle_infer(w, b, f, &msg, t_recv);
        } else {
            gf_ipc_infer_deinit(&msg);
            if (st == GF_ERR_NOMEM)
                wk_reply_error(w, b, id, st, err.msg);
            else
                rc = protocol_error(w, b, id, st, err.msg);
        }
        break;
    }
    default:
        rc = protocol_error(w, b, id, GF_ERR_PROTOCOL, "unexpected message type");
        break;
    }
done:
    gf_ipc_frame_deinit(f);
    return rc;
}

/* Read and handle frames until the socket would block. Returns RD_CONTINUE,
 * or an exit code when reading must stop. */
int wk_read_frames(gf_worker *w, gf_ipc_reader *rd, gf_buf *b)
{
    for (;;) {
        gf_ipc_frame f;
        gf_err err;
        gf_err_clear(&err);
        gf_status st = gf_ipc_reader_next(rd, &f, &err);
        switch (st) {
        case GF_OK: {
            int rc = handle_frame(w, b, &f);
            if (rc != RD_CONTINUE)
                return rc;
            break;
        }
        case GF_ERR_BUSY:
            return RD_CONTINUE;
        case GF_ERR_NOMEM: /* the payload was skipped; the stream is intact */
            GF_LOG_W("%s", err.msg);
            wk_reply_error(w, b, f.h.request_id, st, err.msg);
            break;
        case GF_ERR_CLOSED:
            GF_LOG_I("the gateway closed the connection");
            return GF_WORKER_EXIT_OK;
        case GF_ERR_PROTOCOL:
        case GF_ERR_TOO_LARGE:
            return protocol_error(w, b, f.h.request_id, st, err.msg);
        default:
            GF_LOG_E("reading from the gateway: %s", gf_err_msg(&err));
            return GF_WORKER_EXIT_FAILURE;
        }
    }
}
