/* gpufaas — the state database's request-path records: handed over from
 * any thread into the ring without waiting, and applied by the store thread
 * in its transaction. */
#include "core/clock.h"

#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "store/store_impl.h"

/* ---- handing records over ----------------------------------------------------- */

/* Wake the store thread now (a batch is full). Takes s->lock briefly; the
 * store thread never holds it across disk I/O. */
static void gf_store_kick(gf_store *s)
{
    pthread_mutex_lock(&s->lock);
    s->kick = true;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

/* Publish a filled record; wake the store thread when it fills a batch. */
static void gf_store_publish(gf_store *s, uint64_t pos)
{
    if (gf_ring_publish(&s->ring, pos) == s->cfg.batch_max)
        gf_store_kick(s);
}

/* Common part of every handover: checks, claim, header and name. Returns the
 * record to fill (then gf_store_publish) or NULL with *st set. */
static gf_store_rec *gf_store_begin_rec(gf_store *s, gf_store_rec_kind kind, const char *function,
                                         uint64_t *pos, gf_status *st)
{
    size_t n = 0;
    if (function != NULL) {
        n = strnlen(function, GF_STORE_NAME_MAX + 1);
        if (n == 0 || n > GF_STORE_NAME_MAX) {
            *st = GF_ERR_INVALID;
            return NULL;
        }
    }
    if (atomic_load_explicit(&s->closing, memory_order_relaxed)) {
        *st = GF_ERR_CLOSED;
        return NULL;
    }
    gf_store_rec *r = gf_ring_claim(&s->ring, pos);
    if (r == NULL) {
        *st = GF_ERR_BUSY;
        return NULL;
    }
    r->kind = kind;
    if (function != NULL)
        memcpy(r->function, function, n + 1);
    else
        r->function[0] = '\0';
    *st = GF_OK;
    return r;
}

static inline int64_t gf_store_at(int64_t at_us)
{
    return at_us != 0 ? at_us : gf_wall_us();
}

/* Copy the reason text r (may be NULL) into dst, cut to GF_STORE_REASON_MAX
 * bytes at a character boundary (a UTF-8 continuation byte never starts the
 * cut-off part). */
static void gf_store_copy_reason(char dst[GF_STORE_REASON_MAX + 1], const char *r)
{
    size_t n = r != NULL ? strnlen(r, GF_STORE_REASON_MAX + 1) : 0;
    if (n > GF_STORE_REASON_MAX) {
        n = GF_STORE_REASON_MAX;
        while (n > 0 && ((unsigned char)r[n] & 0xc0) == 0x80)
            n--;
    }
    if (n > 0)
        memcpy(dst, r, n);
    dst[n] = '\0';
}

gf_status gf_store_log_invocation(gf_store *s, const gf_store_invocation *rec)
{
    if (rec->worker < -1 || (unsigned)rec->status >= GF_STATUS_COUNT_ || rec->function == NULL)
        return GF_ERR_INVALID;
    uint64_t pos;
    gf_status st;
    /* "" (a request that named no function) is a valid name here */
    gf_store_rec *slot = gf_store_begin_rec(s, GF_REC_INVOCATION,
                                            rec->function[0] != '\0' ? rec->function : NULL,
                                            &pos, &st);
    if (slot == NULL)
        return st;
    slot->u.inv = *rec;
    slot->u.inv.function = NULL;
    slot->u.inv.reason = NULL;
    slot->u.inv.at_us = gf_store_at(rec->at_us);
    gf_store_copy_reason(slot->reason, rec->status != GF_OK ? rec->reason : NULL);
    gf_store_publish(s, pos);
    return GF_OK;
}

gf_status gf_store_log_swap(gf_store *s, const gf_store_swap *rec)
{
    if (rec->worker < 0 || !gf_tier_valid(rec->from) || !gf_tier_valid(rec->to) ||
        rec->from == rec->to ||
        rec->bytes > INT64_MAX || rec->function == NULL)
        return GF_ERR_INVALID;
    uint64_t pos;
    gf_status st;
    gf_store_rec *slot = gf_store_begin_rec(s, GF_REC_SWAP, rec->function, &pos, &st);
    if (slot == NULL)
        return st;
    slot->u.swap = *rec;
    slot->u.swap.function = NULL;
    slot->u.swap.at_us = gf_store_at(rec->at_us);
    gf_store_publish(s, pos);
    return GF_OK;
}

/* The three placement records: checks, then a copy of *rec (its name
 * included) into a slot. */
static gf_status gf_store_log_pl(gf_store *s, gf_store_rec_kind kind, const gf_store_placement *rec,
                                 uint32_t hits)
{
    if (rec->worker < 0 || (rec->tier != GF_TIER_HOST && rec->tier != GF_TIER_DEVICE) ||
        (unsigned)rec->state > GF_STORE_PLACEMENT_READY || rec->bytes > INT64_MAX ||
        rec->function == NULL)
        return GF_ERR_INVALID;
    uint64_t pos;
    gf_status st;
    gf_store_rec *slot = gf_store_begin_rec(s, kind, rec->function, &pos, &st);
    if (slot == NULL)
        return st;
    slot->u.pl = *rec;
    slot->u.pl.function = NULL;
    slot->u.pl.at_us = gf_store_at(rec->at_us);
    slot->hits = hits;
    gf_store_publish(s, pos);
    return GF_OK;
}

gf_status gf_store_log_placement(gf_store *s, const gf_store_placement *rec)
{
    return gf_store_log_pl(s, GF_REC_PLACEMENT, rec, 0);
}

gf_status gf_store_log_placement_hit(gf_store *s, const gf_store_placement *rec, uint32_t hits)
{
    return gf_store_log_pl(s, GF_REC_PLACEMENT_HIT, rec, hits);
}

gf_status gf_store_log_placement_remove(gf_store *s, const gf_store_placement *rec)
{
    return gf_store_log_pl(s, GF_REC_PLACEMENT_REMOVE, rec, 0);
}

/* Worker state and restart records (no pointers kept). */
static gf_status gf_store_log_ws(gf_store *s, gf_store_rec_kind kind, int32_t worker,
                                 gf_store_wstate state, int64_t pid, int64_t at_us)
{
    if (worker < 0 || (unsigned)state > GF_STORE_WORKER_DEAD)
        return GF_ERR_INVALID;
    uint64_t pos;
    gf_status st;
    gf_store_rec *slot = gf_store_begin_rec(s, kind, NULL, &pos, &st);
    if (slot == NULL)
        return st;
    slot->u.ws.worker = worker;
    slot->u.ws.state = state;
    slot->u.ws.pid = pid;
    slot->u.ws.at_us = gf_store_at(at_us);
    gf_store_publish(s, pos);
    return GF_OK;
}

gf_status gf_store_log_worker_state(gf_store *s, int32_t worker, gf_store_wstate state, int64_t pid)
{
    return gf_store_log_ws(s, GF_REC_WORKER_STATE, worker, state, pid, 0);
}

gf_status gf_store_log_restart(gf_store *s, int32_t worker, int64_t pid, int64_t at_us)
{
    if (pid < 0)
        return GF_ERR_INVALID;
    return gf_store_log_ws(s, GF_REC_RESTART, worker, GF_STORE_WORKER_STARTING, pid, at_us);
}

gf_status gf_store_log_heartbeat(gf_store *s, const gf_store_heartbeat *rec)
{
    if (rec->worker < 0 || rec->device_budget > INT64_MAX || rec->device_used > INT64_MAX ||
        rec->host_budget > INT64_MAX || rec->host_used > INT64_MAX)
        return GF_ERR_INVALID;
    uint64_t pos;
    gf_status st;
    gf_store_rec *slot = gf_store_begin_rec(s, GF_REC_HEARTBEAT, NULL, &pos, &st);
    if (slot == NULL)
        return st;
    slot->u.hb = *rec;
    slot->u.hb.at_us = gf_store_at(rec->at_us);
    gf_store_publish(s, pos);
    return GF_OK;
}

/* ---- the store thread: applying records ---------------------------------------- */

/* Step a write statement to completion and reset it. Returns the SQLite
 * code (SQLITE_DONE on success). */
int gf_store_exec(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    while (rc == SQLITE_ROW)
        rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc;
}

/* Bind a placement's key (?1..?4) from r; r's name must outlive the step. */
static void gf_store_bind_pl_key(sqlite3_stmt *st, const gf_store_rec *r)
{
    sqlite3_bind_text(st, 1, r->function, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, r->u.pl.version);
    sqlite3_bind_int(st, 3, r->u.pl.worker);
    sqlite3_bind_text(st, 4, gf_tier_name(r->u.pl.tier), -1, SQLITE_STATIC);
}

/* Apply one record. Returns SQLITE_DONE when it changed the database, or
 * another code; *why names the reason when it did not. */
int gf_store_apply(gf_store *s, const gf_store_rec *r, const char **why)
{
    sqlite3_stmt *st;
    int rc;
    bool need_row = false; /* an UPDATE that must hit a row */
    *why = NULL;
    switch ((gf_store_rec_kind)r->kind) {
    case GF_REC_INVOCATION: {
        const gf_store_invocation *v = &r->u.inv;
        st = s->stmt[GF_SQL_INV_INSERT];
        sqlite3_bind_text(st, 1, r->function, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, v->version);
        if (v->worker < 0)
            sqlite3_bind_null(st, 3);
        else
            sqlite3_bind_int(st, 3, v->worker);
        sqlite3_bind_text(st, 4, gf_status_name(v->status), -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 5, v->http_code);
        sqlite3_bind_int(st, 6, v->batch_size);
        sqlite3_bind_int(st, 7, v->cold ? 1 : 0);
        sqlite3_bind_int64(st, 8, v->queue_us);
        sqlite3_bind_int64(st, 9, v->load_us);
        sqlite3_bind_int64(st, 10, v->exec_us);
        sqlite3_bind_int64(st, 11, v->total_us);
        sqlite3_bind_int64(st, 12, v->at_us);
        if (r->reason[0] != '\0')
            sqlite3_bind_text(st, 13, r->reason, -1, SQLITE_STATIC);
        else
            sqlite3_bind_null(st, 13);
        if (v->slo_us > 0)
            sqlite3_bind_int64(st, 14, v->slo_us);
        else
            sqlite3_bind_null(st, 14);
        if (v->slo != GF_STORE_SLO_NONE)
            sqlite3_bind_text(st, 15, gf_store_slo_name(v->slo), -1, SQLITE_STATIC);
        else
            sqlite3_bind_null(st, 15);
        rc = gf_store_exec(st);
        break;
    }
    case GF_REC_SWAP: {
        const gf_store_swap *v = &r->u.swap;
        st = s->stmt[GF_SQL_SWAP_INSERT];
        sqlite3_bind_int(st, 1, v->worker);
        sqlite3_bind_text(st, 2, r->function, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, v->version);
        sqlite3_bind_text(st, 4, gf_tier_name(v->from), -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, gf_tier_name(v->to), -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 6, (int64_t)v->bytes);
        sqlite3_bind_int64(st, 7, v->elapsed_us);
        sqlite3_bind_int64(st, 8, v->at_us);
        rc = gf_store_exec(st);
        break;
    }
    case GF_REC_PLACEMENT:
        st = s->stmt[GF_SQL_PL_UPSERT];
        gf_store_bind_pl_key(st, r);
        sqlite3_bind_int64(st, 5, (int64_t)r->u.pl.bytes);
        sqlite3_bind_text(st, 6, gf_store_pstate_name(r->u.pl.state), -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 7, r->u.pl.at_us);
        rc = gf_store_exec(st);
        break;
    case GF_REC_PLACEMENT_HIT:
        st = s->stmt[GF_SQL_PL_HIT];
        gf_store_bind_pl_key(st, r);
        sqlite3_bind_int64(st, 5, r->hits);
        sqlite3_bind_int64(st, 6, r->u.pl.at_us);
        rc = gf_store_exec(st);
        need_row = true;
        *why = "no such placement";
        break;
    case GF_REC_PLACEMENT_REMOVE:
        st = s->stmt[GF_SQL_PL_REMOVE];
        gf_store_bind_pl_key(st, r);
        rc = gf_store_exec(st); /* removing what is not there is fine */
        break;
    case GF_REC_WORKER_STATE:
        st = s->stmt[GF_SQL_W_STATE];
        sqlite3_bind_int(st, 1, r->u.ws.worker);
        sqlite3_bind_text(st, 2, gf_store_wstate_name(r->u.ws.state), -1, SQLITE_STATIC);
        if (r->u.ws.pid < 0)
            sqlite3_bind_null(st, 3);
        else
            sqlite3_bind_int64(st, 3, r->u.ws.pid);
        rc = gf_store_exec(st);
        need_row = true;
        *why = "no such worker";
        break;
    case GF_REC_HEARTBEAT: {
        const gf_store_heartbeat *v = &r->u.hb;
        st = s->stmt[GF_SQL_W_HEARTBEAT];
        sqlite3_bind_int(st, 1, v->worker);
        sqlite3_bind_int64(st, 2, (int64_t)v->device_budget);
        sqlite3_bind_int64(st, 3, (int64_t)v->device_used);
        sqlite3_bind_int64(st, 4, (int64_t)v->host_budget);
        sqlite3_bind_int64(st, 5, (int64_t)v->host_used);
        sqlite3_bind_int64(st, 6, v->at_us);
        rc = gf_store_exec(st);
        need_row = true;
        *why = "no such worker";
        break;
    }
    case GF_REC_RESTART:
        st = s->stmt[GF_SQL_W_RESTART];
        sqlite3_bind_int(st, 1, r->u.ws.worker);
        sqlite3_bind_int64(st, 2, r->u.ws.pid);
        sqlite3_bind_int64(st, 3, r->u.ws.at_us);
        rc = gf_store_exec(st);
        if (rc == SQLITE_DONE && sqlite3_changes(s->db) == 0) {
            *why = "no such worker";
            return SQLITE_NOTFOUND;
        }
        if (rc == SQLITE_DONE) {
            st = s->stmt[GF_SQL_PL_CLEAR_WORKER];
            sqlite3_bind_int(st, 1, r->u.ws.worker);
            rc = gf_store_exec(st);
        }
        break;
    default:
        *why = "unknown record kind";
        return SQLITE_INTERNAL;
    }
    if (rc == SQLITE_DONE && need_row && sqlite3_changes(s->db) == 0)
        return SQLITE_NOTFOUND;
    if (rc != SQLITE_DONE)
        *why = sqlite3_errmsg(s->db);
    else
        *why = NULL;
    return rc;
}

/* Count a record the database refused; log a summary at most once a second. */
void gf_store_note_reject(gf_store *s, const gf_store_rec *r, const char *why)
{
    atomic_fetch_add_explicit(&s->rejected, 1, memory_order_relaxed);
    s->rejects_unreported++;
    snprintf(s->last_reject, sizeof s->last_reject, "record kind %u (function '%s'): %s", r->kind,
             r->function, why != NULL ? why : "refused");
}

/* Log drops and rejections since the last report, at most once a second
 * unless force. */
void gf_store_report(gf_store *s, bool force)
{
    int64_t now = (int64_t)gf_mono_us();
    uint64_t d = gf_ring_dropped(&s->ring);
    if (d != s->drops_reported && (force || now - s->last_drop_report_us >= 1000000)) {
        GF_LOG_W("store queue full: %llu record(s) dropped since the last report (%llu in all); "
                 "the database is not keeping up",
                 (unsigned long long)(d - s->drops_reported), (unsigned long long)d);
        s->drops_reported = d;
        s->last_drop_report_us = now;
    }
    if (s->rejects_unreported > 0 && (force || now - s->last_reject_report_us >= 1000000)) {
        GF_LOG_W("store: %llu record(s) refused by the database since the last report; last: %s",
                 (unsigned long long)s->rejects_unreported, s->last_reject);
        s->rejects_unreported = 0;
        s->last_reject_report_us = now;
    }
}
