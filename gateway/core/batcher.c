/* gpufaas — the gateway's batcher: one queue per function version, dynamic
 * batching up to max_batch_size within max_queue_delay_us, and the way
 * results go back to each request. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/bytes.h"
#include "core/copies.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/tensor.h"
#include "gateway/core/internal.h"

void gf_gw_tensors_free(gf_gw_tensor *t, size_t n)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        free(t[i].name);
        if (t[i].shm.key != NULL) {
            if (t[i].shm.put != NULL)
                t[i].shm.put(t[i].shm.hold);
        } else if (t[i].hold != NULL) {
            gf_hold_unref(t[i].hold);
        } else {
            free(t[i].t.data);
        }
    }
    free(t);
}

void gf_gw_result_free(gf_gw_result *r)
{
    if (r == NULL)
        return;
    gf_gw_tensors_free(r->outputs, r->n_outputs);
    free(r);
}

/* Free q: it no longer counts against the queue limits. */
static void req_free(gf_gw *gw, gw_req *q)
{
    atomic_fetch_sub(&q->v->fn->held, 1);
    atomic_fetch_sub(&gw->held_reqs, 1);
    gf_gw_tensors_free(q->inputs, q->v->mf->n_inputs);
    gf_gw_result_free(q->res);
    gw_version_unref(q->v);
    free(q->dests);
    free(q);
}

/* Record q's answer and call its callback; q itself is the caller's. */
static void req_answer(gf_gw *gw, gw_req *q, gf_gw_result *res)
{
    gw_version *v = q->v;
    res->total_us = gf_mono_us() - q->t_submit_us;
    gf_str_copy(res->function, sizeof res->function, v->fn->name);
    res->version = v->version;
    gw_answer a = {.function = v->fn->name,
                   .version = v->version,
                   .labelled = true,
                   .slots = v->mslots,
                   .status = res->status,
                   .reason = res->status != GF_OK ? res->message : NULL,
                   .worker = res->worker,
                   .cold = res->cold,
                   .batch_size = res->batch_size,
                   .queue_us = res->queue_us,
                   .load_us = res->load_us,
                   .exec_us = res->exec_us,
                   .total_us = res->total_us,
                   .slo_us = gw_slo_us(v->mf)};
    gw_answer_record(gw, &a);
    gw_stats_request(gw, v, res, q->rows);
    if (q->res == res)
        q->res = NULL; /* delivered, not freed */
    atomic_fetch_sub(&gw->inflight_reqs, 1);
    q->done(q->done_arg, res);
}

void gw_req_finish(gf_gw *gw, gw_req *q, gf_gw_result *res)
{
    req_answer(gw, q, res);
    req_free(gw, q);
}

/* The batch b is done with q (answered or not): q is freed unless it was
 * answered at its deadline and the sweep is not done with it yet. True when
 * q was expired (the batch must not answer it). */
static bool req_expired_release(gf_gw *gw, gw_req *q)
{
    if (!q->expired)
        return false;
    if (atomic_fetch_add(&q->release, 1) == 1)
        req_free(gw, q);
    return true;
}

/* Answer q with an error, in the result allocated at submit. */
static void req_fail(gf_gw *gw, gw_req *q, gf_status st, const char *msg,
                     const gw_batch *b)
{
    if (req_expired_release(gw, q))
        return;
    gf_gw_result *r = q->res;
    gf_gw_tensors_free(r->outputs, r->n_outputs);
    memset(r, 0, sizeof *r);
    r->status = st;
    r->worker = b != NULL ? b->worker : -1;
    r->batch_size = b != NULL ? b->n_reqs : 0;
    gf_str_copy(r->message, sizeof r->message, msg != NULL ? msg : "");
    gw_req_finish(gw, q, r);
}

static void batch_free(gw_batch *b)
{
    gw_frame_unref(b->frame);
    gw_version_unref(b->v);
    free(b);
}

void gw_batch_fail(gf_gw *gw, gw_batch *b, gf_status st, const char *msg)
{
    gw_req *q = b->reqs;
    while (q != NULL) {
        gw_req *next = q->next;
        req_fail(gw, q, st, msg, b);
        q = next;
    }
    batch_free(b);
}

void gw_batch_complete(gf_gw *gw, gw_batch *b, const gf_ipc_result *r, gf_hold *payload,
                       int worker)
{
    const gf_manifest *mf = b->v->mf;
    char why[256] = "";
    /* map the worker's outputs to manifest order (those the batch asked
     * for: want) and check they split */
    const gf_ipc_tensor *outs[GF_MANIFEST_MAX_IO];
    size_t idx[GF_MANIFEST_MAX_IO], n_out = 0;
    uint64_t want = b->want != 0 ? b->want : gw_all_outputs(mf);
    for (size_t i = 0; i < mf->n_outputs; i++)
        if (want >> i & 1)
            idx[n_out++] = i;
    if (r->n != n_out) {
        snprintf(why, sizeof why, "the worker returned %u outputs, the request asked for %zu "
                 "(the manifest declares %zu)", r->n, n_out, mf->n_outputs);
    } else {
        for (size_t j = 0; j < n_out && why[0] == '\0'; j++) {
            const char *name = mf->outputs[idx[j]].name;
            outs[j] = NULL;
            for (uint32_t k = 0; k < r->n; k++)
                if (strcmp(r->t[k].name, name) == 0)
                    outs[j] = &r->t[k];
            if (outs[j] == NULL)
                snprintf(why, sizeof why, "the worker did not return output '%s'", name);
            else if (outs[j]->shm_key != NULL && b->n_reqs != 1)
                snprintf(why, sizeof why, "the worker placed output '%s' of a batch in shared "
                         "memory", name);
            else if (b->n_reqs > 1 &&
                     (outs[j]->t.rank < 1 || outs[j]->t.shape[0] != b->rows))
                snprintf(why, sizeof why, "output '%s' does not have one row per input row",
                         name);
        }
    }
    if (why[0] != '\0') {
        gw_batch_fail(gw, b, GF_ERR_INTERNAL, why);
        return;
    }
    gw_stats_batch(gw, b->v, b->rows, r->load_us, r->exec_us);
    int64_t row = 0;
    gw_req *q = b->reqs;
    while (q != NULL) {
        gw_req *next = q->next;
        int64_t rows = q->rows; /* q is freed once answered */
        if (req_expired_release(gw, q)) {
            row += rows;
            q = next;
            continue;
        }
        gf_gw_result *res = q->res;
        gf_gw_tensor *o = calloc(n_out ? n_out : 1, sizeof *o);
        bool ok = o != NULL;
        for (size_t i = 0; ok && i < n_out; i++) {
            const gf_tensor *src = &outs[i]->t;
            gf_tensor t = *src;
            size_t off = 0, len = src->nbytes;
            if (outs[i]->shm_key != NULL) { /* in its destination already: no bytes here */
                t.data = NULL;
                o[i].placed = true;
                o[i].t = t;
                ok = (o[i].name = strdup(mf->outputs[idx[i]].name)) != NULL;
                continue;
            }
            if (b->n_reqs > 1 && src->dtype == GF_DT_BYTES) {
                /* checked when the RESULT was decoded: find the rows' elements */
                uint64_t per_row = src->shape[0] > 0 ? gf_tensor_numel(src) /
                                                           (uint64_t)src->shape[0] : 0;
                ok = gf_bytes_span(src->data, src->nbytes, (uint64_t)row * per_row,
                                   (uint64_t)q->rows * per_row, &off, &len, NULL) == GF_OK;
                t.shape[0] = q->rows;
                t.nbytes = len;
            } else if (b->n_reqs > 1) {
                size_t row_bytes = src->shape[0] > 0 ? src->nbytes / (size_t)src->shape[0] : 0;
                off = (size_t)row * row_bytes;
                len = (size_t)q->rows * row_bytes;
                t.shape[0] = q->rows;
                t.nbytes = len;
            }
            if (payload != NULL) { /* a slice of the RESULT's payload: no copy */
                t.data = ok ? (char *)src->data + off : NULL;
                o[i].hold = ok ? gf_hold_ref(payload) : NULL;
            } else {
                t.data = ok ? malloc(len ? len : 1) : NULL;
                if (t.data != NULL) {
                    memcpy(t.data, (const char *)src->data + off, len);
                    gf_copies_add(GF_COPY_OUT, len);
                }
            }
            o[i].name = strdup(mf->outputs[idx[i]].name);
            ok = t.data != NULL && o[i].name != NULL;
            t.mem = GF_MEM_HOST;
            t.device_id = -1;
            o[i].t = t;
        }
        if (!ok) {
            gf_gw_tensors_free(o, n_out);
            req_fail(gw, q, GF_ERR_NOMEM, "out of memory building the response", b);
        } else {
            res->status = GF_OK;
            res->outputs = o;
            res->n_outputs = n_out;
            res->worker = worker;
            res->cold = (r->flags & GF_IPC_RESULT_COLD) != 0;
            res->batch_size = b->n_reqs;
            res->load_us = r->load_us;
            res->exec_us = r->exec_us;
            /* waiting in the gateway's queue plus in the worker's */
            uint64_t gw_wait = b->t_dispatch_us > q->t_submit_us ? b->t_dispatch_us - q->t_submit_us
                                                                : 0;
            res->queue_us = gw_wait + r->queue_us;
            gw_req_finish(gw, q, res);
        }
        row += rows;
        q = next;
    }
    batch_free(b);
}

/* ---- deadlines ------------------------------------------------------------------------- */

/* Answer q's deadline into its result (not yet delivered). */
static void deadline_result(gw_req *q, int worker, uint32_t batch, const char *where)
{
    gf_gw_result *r = q->res;
    gf_gw_tensors_free(r->outputs, r->n_outputs);
    memset(r, 0, sizeof *r);
    r->status = GF_ERR_DEADLINE;
    r->worker = worker;
    r->batch_size = batch;
    snprintf(r->message, sizeof r->message,
             "the request's deadline of %.3f s (parameters.timeout, or the server's "
             "--infer-timeout) passed while it %s",
             (double)(q->deadline_us - q->t_submit_us) / 1e6, where);
}

/* Unlink the requests of v's queue past their deadline (qlock held) onto
 * *out; *next is lowered to the earliest deadline left. */
static void expire_queued(gw_version *v, uint64_t now, gw_req **out, uint64_t *next)
{
    gw_req **pp = &v->q_head;
    v->q_tail = NULL;
    while (*pp != NULL) {
        gw_req *q = *pp;
        if (q->deadline_us != 0 && now >= q->deadline_us) {
            *pp = q->next;
            v->q_len--;
            v->q_rows -= q->rows;
            q->next = *out;
            *out = q;
            continue;
        }
        if (q->deadline_us != 0 && q->deadline_us < *next)
            *next = q->deadline_us;
        v->q_tail = q;
        pp = &q->next;
    }
}

/* now_us == UINT64_MAX: every request (shutting down), answered CLOSED. */
static size_t expire_batches(gw_batch *b, uint64_t now, int worker, const char *where,
                             gw_expired *out, size_t n, size_t cap)
{
    for (; b != NULL; b = b->next)
        for (gw_req *q = b->reqs; q != NULL && n < cap; q = q->next) {
            if (q->expired || (now != UINT64_MAX && (q->deadline_us == 0 || now < q->deadline_us)))
                continue;
            q->expired = true;
            if (now != UINT64_MAX) {
                deadline_result(q, worker, b->n_reqs, where);
            } else {
                gf_gw_result *r = q->res;
                gf_gw_tensors_free(r->outputs, r->n_outputs);
                memset(r, 0, sizeof *r);
                r->status = GF_ERR_CLOSED;
                r->worker = worker;
                snprintf(r->message, sizeof r->message, "the server is shutting down and the "
                         "request did not finish within --drain-timeout");
            }
            out[n++] = (gw_expired){q, worker, where};
        }
    return n;
}

size_t gw_expire_collect(gf_gw *gw, uint64_t now_us, gw_expired *out, size_t cap)
{
    size_t n = 0;
    for (int i = 0; i < gw->n_workers; i++)
        n = expire_batches(gw->workers[i].inflight, now_us, i, "was running on a worker", out,
                           n, cap);
    for (size_t f = 0; f < gw->n_fns; f++)
        for (size_t k = 0; k < gw->fns[f]->n; k++)
            for (int i = 0; i < gw->n_workers; i++)
                n = expire_batches(gw->fns[f]->versions[k]->pl[i].waiting, now_us, i,
                                   "waited for its model to load on a worker", out, n, cap);
    return n;
}

void gw_abandon_inflight(gf_gw *gw)
{
    gw_expired e[64];
    for (;;) {
        pthread_mutex_lock(&gw->lock);
        size_t n = gw_expire_collect(gw, UINT64_MAX, e, sizeof e / sizeof e[0]);
        pthread_mutex_unlock(&gw->lock);
        if (n == 0)
            return;
        gw_expire_answer(gw, e, n);
    }
}

void gw_expire_answer(gf_gw *gw, gw_expired *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        gw_req *q = e[i].q;
        req_answer(gw, q, q->res);
        if (atomic_fetch_add(&q->release, 1) == 1)
            req_free(gw, q); /* the batch was done with it first */
    }
}

/* ---- queues ---------------------------------------------------------------------------- */

static bool dispatch_now(gf_gw *gw, gw_req *q);

gf_status gw_enqueue(gf_gw *gw, gw_req *q, gf_err *err)
{
    gw_version *v = q->v;
    pthread_mutex_lock(&gw->qlock);
    /* A request that would not wait for batch-mates (no queue delay, or not
     * batchable), with nothing queued before it and no other request in
     * flight to share a batch with, goes to its worker from this thread:
     * waking the batcher would cost a context switch, the larger part of a
     * small request's time. Under load requests still meet in the queue. */
    if ((v->mf->max_queue_delay_us == 0 || !v->batchable) && v->q_head == NULL &&
        atomic_load(&gw->inflight_reqs) == 1) {
        pthread_mutex_unlock(&gw->qlock);
        if (dispatch_now(gw, q))
            return GF_OK;
        pthread_mutex_lock(&gw->qlock); /* no worker took it: the batcher answers it */
    }
    if (!v->in_ready_list) {
        if (gw->n_ready == gw->cap_ready) {
            size_t cap = gw->cap_ready ? gw->cap_ready * 2 : 32;
            gw_version **r = realloc(gw->ready, cap * sizeof *r);
            if (r == NULL) {
                pthread_mutex_unlock(&gw->qlock);
                return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            }
            gw->ready = r;
            gw->cap_ready = cap;
        }
        gw->ready[gw->n_ready++] = v;
        v->in_ready_list = true;
        gw_version_ref(v);
    }
    q->next = NULL;
    if (v->q_tail != NULL)
        v->q_tail->next = q;
    else
        v->q_head = q;
    v->q_tail = q;
    v->q_len++;
    v->q_rows += q->rows;
    pthread_cond_signal(&gw->qcond);
    pthread_mutex_unlock(&gw->qlock);
    return GF_OK;
}

/* Two requests may share a batch when every input has the same dims past
 * the batch dimension. */
static bool compatible(const gf_manifest *mf, const gw_req *a, const gw_req *b)
{
    for (size_t i = 0; i < mf->n_inputs; i++) {
        const gf_tensor *x = &a->inputs[i].t, *y = &b->inputs[i].t;
        if (x->rank != y->rank)
            return false;
        for (int32_t d = 1; d < x->rank; d++)
            if (x->shape[d] != y->shape[d])
                return false;
    }
    return true;
}

/* Take the next batch from v's queue (qlock held): the head request and the
 * compatible ones after it, up to max_batch_size rows. */
bool gw_batch_due(const gw_version *v, uint64_t now_us, uint64_t *deadline_us)
{
    const gw_req *head = v->q_head;
    if (head == NULL)
        return false;
    uint64_t delay = (uint64_t)v->mf->max_queue_delay_us;
    bool full = !v->batchable || v->q_rows >= v->mf->max_batch_size;
    if (full || now_us - head->t_submit_us >= delay)
        return true;
    *deadline_us = head->t_submit_us + delay;
    return false;
}

/* Requests looked at past the head for batch-mates before the batch goes as
 * it is: taking a batch costs O(batch), not O(queue), however many
 * incompatible requests wait behind it. */
#define GW_BATCH_SCAN 64

gw_batch *gw_take_batch(gw_version *v)
{
    gw_batch *b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->v = v;
    gw_version_ref(v);
    b->worker = -1;
    gw_req **tail = &b->reqs;
    gw_req *q = v->q_head;
    gw_req *first = q;
    gw_req **prev = &v->q_head;
    gw_req *kept = NULL; /* the last request left in the queue so far */
    int64_t scan = 2 * v->mf->max_batch_size > GW_BATCH_SCAN ? 2 * v->mf->max_batch_size
                                                             : GW_BATCH_SCAN;
    for (int64_t looked = 0; q != NULL; looked++) {
        gw_req *next = q->next;
        bool take = q == first || (v->batchable && !first->alone && !q->alone &&
                                   compatible(v->mf, first, q) &&
                                   b->rows + q->rows <= v->mf->max_batch_size);
        if (take) {
            if (q == v->q_tail) /* the tail leaves: the last one kept is the tail */
                v->q_tail = kept;
            *prev = next;
            q->next = NULL;
            *tail = q;
            tail = &q->next;
            b->rows += q->rows;
            b->n_reqs++;
            v->q_len--;
            v->q_rows -= q->rows;
        } else {
            kept = q;
            prev = &q->next;
        }
        if (!v->batchable || b->rows >= v->mf->max_batch_size || looked >= scan)
            break;
        q = next;
    }
    return b;
}

/* Encode the batch's INFER (its inputs concatenated along dim 0), in gather
 * form: the frame holds the header and fields, and references the inputs'
 * bytes where they lie (the request's own at batch 1, a slice of its body
 * for binary inputs; the concatenation otherwise), written with writev. */
static gf_status encode_batch(gf_gw *gw, gw_batch *b, gf_err *err)
{
    const gf_manifest *mf = b->v->mf;
    size_t n = mf->n_inputs, n_holds = 0;
    gf_ipc_tensor *t = calloc(n, sizeof *t);
    gf_hold **holds = calloc(n ? n : 1, sizeof *holds);
    gf_ipc_gather *g = malloc(sizeof *g);
    gf_status st = GF_OK;
    if (t == NULL || holds == NULL || g == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n && st == GF_OK; i++) {
        t[i].name = mf->inputs[i].name;
        t[i].t = b->reqs->inputs[i].t;
        if (b->n_reqs == 1) { /* by reference when in shared memory (such a request is
                               * alone: its bytes are never concatenated) */
            gf_gw_tensor *in = &b->reqs->inputs[i];
            t[i].shm_key = in->shm.key;
            t[i].shm_offset = in->shm.offset;
            if (in->shm.key != NULL)
                continue; /* no bytes in the frame */
            if (in->hold == NULL && (in->hold = gf_hold_of_malloc(in->t.data)) == NULL) {
                st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
                break;
            }
            holds[n_holds++] = gf_hold_ref(in->hold);
            continue;
        }
        size_t total = 0;
        for (gw_req *q = b->reqs; q != NULL; q = q->next)
            total += q->inputs[i].t.nbytes;
        char *data = malloc(total ? total : 1);
        gf_hold *h = data != NULL ? gf_hold_of_malloc(data) : NULL;
        if (h == NULL) {
            free(data);
            st = gf_err_set(err, GF_ERR_NOMEM, "out of memory batching %zu bytes", total);
            break;
        }
        holds[n_holds++] = h;
        size_t off = 0;
        for (gw_req *q = b->reqs; q != NULL; q = q->next) {
            memcpy(data + off, q->inputs[i].t.data, q->inputs[i].t.nbytes);
            off += q->inputs[i].t.nbytes;
        }
        gf_copies_add(GF_COPY_IN, total);
        t[i].t.data = data;
        t[i].t.nbytes = total;
        t[i].t.shape[0] = b->rows;
    }
    if (st == GF_OK) {
        b->id = atomic_fetch_add(&gw->next_id, 1);
        b->want = 0;
        for (gw_req *q = b->reqs; q != NULL; q = q->next)
            b->want |= q->want;
        /* only the outputs asked for come back (0: all of them); those with
         * a destination (a request alone) go straight into shared memory */
        const gw_req *one = b->n_reqs == 1 ? b->reqs : NULL;
        uint32_t n_dests = one != NULL ? one->n_dests : 0;
        uint64_t outputs = b->want == gw_all_outputs(mf) && n_dests == 0 ? 0 : b->want;
        gf_ipc_infer m = {.key = b->v->key, .n = (uint32_t)n, .t = t, .outputs = outputs,
                          .n_dests = n_dests, .dests = n_dests > 0 ? one->dests : NULL};
        gf_buf buf;
        gf_buf_init(&buf);
        st = gf_ipc_encode_infer_gather(&buf, g, b->id, &m, err);
        if (st == GF_OK) {
            if ((b->frame = gw_frame_adopt_gather(&buf, g, holds, n_holds)) == NULL)
                st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            else
                n_holds = 0; /* the frame's now */
        }
        gf_buf_deinit(&buf);
    }
out:
    for (size_t i = 0; i < n_holds; i++)
        gf_hold_unref(holds[i]);
    free(holds);
    free(g);
    free(t);
    return st;
}

/* Let go of q's inputs once its batch's frame holds them (the frame keeps
 * its own references), but for those in shared memory, which stay
 * registered until q is answered. */
static void req_inputs_release(gw_req *q)
{
    for (size_t i = 0; i < q->v->mf->n_inputs; i++) {
        gf_gw_tensor *in = &q->inputs[i];
        if (in->shm.key != NULL)
            continue;
        if (in->hold != NULL)
            gf_hold_unref(in->hold);
        else
            free(in->t.data);
        in->hold = NULL;
        in->t.data = NULL;
    }
}

/* Count a batch of n requests of v (which the registry keeps alive) under
 * its function and version. */
static void batch_observe(gf_gw *gw, const gw_version *v, uint32_t n)
{
    const char *l2[2] = {v->fn->name, v->ver};
    gw_metric_observe(gw->metrics, GW_M_BATCH_SIZE, l2, (double)n);
}

/* Send or fail one batch. */
static void dispatch(gf_gw *gw, gw_batch *b)
{
    gf_err err;
    if (encode_batch(gw, b, &err) != GF_OK) {
        gw_batch_fail(gw, b, err.code, err.msg);
        return;
    }
    /* the frame holds the inputs now; let go of them early */
    for (gw_req *q = b->reqs; q != NULL; q = q->next)
        req_inputs_release(q);
    batch_observe(gw, b->v, b->n_reqs);
    gw_send_defer_begin(); /* the frame is written after gw->lock is let go */
    pthread_mutex_lock(&gw->lock);
    gw_batch *back = gw_dispatch_batch(gw, b, -1);
    pthread_mutex_unlock(&gw->lock);
    gw_send_defer_end();
    if (back != NULL)
        gw_batch_fail(gw, back, GF_ERR_CLOSED, "no worker is available to run the request");
}

/* Send q alone, now, from this thread. False (q untouched, still holding its
 * inputs) when it cannot be encoded or no worker takes it: the caller queues
 * it, so an error is answered later, from the batcher, as any other. */
static bool dispatch_now(gf_gw *gw, gw_req *q)
{
    gw_batch *b = calloc(1, sizeof *b);
    if (b == NULL)
        return false;
    b->v = q->v;
    gw_version_ref(b->v);
    b->worker = -1;
    b->reqs = q;
    b->n_reqs = 1;
    b->rows = q->rows;
    q->next = NULL;
    const gw_version *v = q->v; /* the registry's: alive after q is answered */
    gf_err err;
    if (encode_batch(gw, b, &err) != GF_OK) {
        batch_free(b);
        return false;
    }
    gw_send_defer_begin(); /* the frame is written after gw->lock is let go */
    pthread_mutex_lock(&gw->lock);
    gw_batch *back = gw_dispatch_batch(gw, b, -1);
    if (back == NULL) {
        /* the frame holds the inputs now; q cannot be answered (and freed)
         * before gw->lock is released, so free them here */
        req_inputs_release(q);
    }
    pthread_mutex_unlock(&gw->lock);
    gw_send_defer_end();
    if (back != NULL) {
        batch_free(back);
        return false;
    }
    batch_observe(gw, v, 1);
    return true;
}

static void *batcher_main(void *arg)
{
    gf_gw *gw = arg;
    pthread_mutex_lock(&gw->qlock);
    while (gw->batcher_running) {
        uint64_t now = gf_mono_us();
        uint64_t next_deadline = UINT64_MAX;
        gw_batch *todo = NULL, **todo_tail = &todo;
        gw_req *expired = NULL;
        for (size_t i = 0; i < gw->n_ready;) {
            gw_version *v = gw->ready[i];
            expire_queued(v, now, &expired, &next_deadline);
            while (v->q_head != NULL) {
                uint64_t dl;
                if (!gw_batch_due(v, now, &dl)) {
                    if (dl < next_deadline)
                        next_deadline = dl;
                    break;
                }
                gw_batch *b = gw_take_batch(v);
                if (b == NULL)
                    break;
                *todo_tail = b;
                todo_tail = &b->next;
            }
            if (v->q_head == NULL) {
                v->in_ready_list = false;
                gw->ready[i] = gw->ready[--gw->n_ready];
                gw_version_unref(v);
            } else {
                i++;
            }
        }
        if (expired != NULL) {
            pthread_mutex_unlock(&gw->qlock);
            while (expired != NULL) {
                gw_req *q = expired;
                expired = q->next;
                q->next = NULL;
                deadline_result(q, -1, 0, "was queued in the gateway");
                gw_req_finish(gw, q, q->res);
            }
            pthread_mutex_lock(&gw->qlock);
        }
        if (todo != NULL) {
            pthread_mutex_unlock(&gw->qlock);
            while (todo != NULL) {
                gw_batch *b = todo;
                todo = b->next;
                b->next = NULL;
                dispatch(gw, b);
            }
            pthread_mutex_lock(&gw->qlock);
            continue;
        }
        if (next_deadline == UINT64_MAX) {
            pthread_cond_wait(&gw->qcond, &gw->qlock);
        } else {
            struct timespec ts;
            gf_deadline_after(CLOCK_MONOTONIC, (next_deadline - now) * 1000u, &ts);
            pthread_cond_timedwait(&gw->qcond, &gw->qlock, &ts);
        }
    }
    pthread_mutex_unlock(&gw->qlock);
    return NULL;
}

gf_status gw_batcher_start(gf_gw *gw, gf_err *err)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&gw->qcond, &ca);
    pthread_condattr_destroy(&ca);
    gw->qcond_ready = true;
    gw->batcher_running = true;
    int rc = pthread_create(&gw->batcher, NULL, batcher_main, gw);
    if (rc != 0) {
        gw->batcher_running = false;
        return gf_err_set(err, GF_ERR_NOMEM, "pthread_create(batcher): %s", strerror(rc));
    }
    return GF_OK;
}

void gw_batcher_stop(gf_gw *gw)
{
    if (gw->batcher_running) {
        pthread_mutex_lock(&gw->qlock);
        gw->batcher_running = false;
        pthread_cond_broadcast(&gw->qcond);
        pthread_mutex_unlock(&gw->qlock);
        pthread_join(gw->batcher, NULL);
    }
    /* answer what is still queued */
    pthread_mutex_lock(&gw->qlock);
    gw_req *left = NULL;
    for (size_t i = 0; i < gw->n_ready; i++) {
        gw_version *v = gw->ready[i];
        while (v->q_head != NULL) {
            gw_req *q = v->q_head;
            v->q_head = q->next;
            q->next = left;
            left = q;
        }
        v->q_tail = NULL;
        v->q_len = 0;
        v->q_rows = 0;
        v->in_ready_list = false;
        gw_version_unref(v);
    }
    gw->n_ready = 0;
    pthread_mutex_unlock(&gw->qlock);
    while (left != NULL) {
        gw_req *q = left;
        left = q->next;
        req_fail(gw, q, GF_ERR_CLOSED, "the server is shutting down", NULL);
    }
}
