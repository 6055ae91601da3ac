/* gpufaas — the state database's store thread: one transaction per batch of
 * records and admin writes (each in a savepoint), retention, and the admin
 * API's caller side that submits to it and waits. */
#include "core/clock.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/fault.h"
#include "core/json.h"
#include "core/log.h"
#include "core/residency.h"
#include "store/schema.h"
#include "store/store_impl.h"

/* ---- the store thread: admin writes ------------------------------------------------ */

/* Record in err the failure rc of the statement just run on s->db, as
 * "what: <SQLite message>". Returns the mapped code. */
static gf_status gf_store_sql_fail(gf_store *s, gf_err *err, int rc, const char *what)
{
    gf_status code = gf_store_sqlite_status(rc);
    if (code == GF_OK)
        code = GF_ERR_INTERNAL;
    return gf_err_set(err, code, "%s: %s", what, sqlite3_errmsg(s->db));
}

/* The admin operations, on the store thread inside a savepoint: each reads
 * its arguments from r (borrowed from the waiting caller), writes its error
 * into r->err and returns the status. */
static gf_status gf_store_do_deploy(gf_store *s, gf_store_req *r)
{
    const gf_store_version_spec *v = r->spec;
    int64_t now = gf_wall_us();
    sqlite3_stmt *st = s->stmt[GF_SQL_FN_UPSERT];
    sqlite3_bind_text(st, 1, v->function, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, now);
    int rc = gf_store_exec(st);
    if (rc != SQLITE_DONE)
        return gf_store_sql_fail(s, &r->err, rc, "recording the function");
    int64_t version = v->version;
    if (version == 0) {
        st = s->stmt[GF_SQL_V_NEXT];
        sqlite3_bind_text(st, 1, v->function, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
            version = sqlite3_column_int64(st, 0);
        sqlite3_reset(st);
        if (rc != SQLITE_ROW)
            return gf_store_sql_fail(s, &r->err, rc, "choosing the version number");
    }
    st = s->stmt[GF_SQL_V_INSERT];
    sqlite3_bind_text(st, 1, v->function, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, version);
    sqlite3_bind_text(st, 3, v->kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, v->manifest, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, v->weights_path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, (int64_t)v->bytes);
    sqlite3_bind_text(st, 7, v->sha256, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 8, now);
    if (v->file.inode != 0) {
        sqlite3_bind_int64(st, 9, v->file.mtime_ns);
        sqlite3_bind_int64(st, 10, (int64_t)v->file.inode);
    } else {
        sqlite3_bind_null(st, 9);
        sqlite3_bind_null(st, 10);
    }
    rc = gf_store_exec(st);
    if (rc == SQLITE_CONSTRAINT_PRIMARYKEY)
        return gf_err_set(&r->err, GF_ERR_EXISTS, "function '%s' version %lld exists", v->function,
                          (long long)version);
    if (rc != SQLITE_DONE)
        return gf_store_sql_fail(s, &r->err, rc, "recording the version");
    if (v->publish) {
        st = s->stmt[GF_SQL_FN_PUBLISH];
        sqlite3_bind_text(st, 1, v->function, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, version);
        rc = gf_store_exec(st);
        if (rc != SQLITE_DONE)
            return gf_store_sql_fail(s, &r->err, rc, "publishing the version");
    }
    r->version = version;
    return GF_OK;
}

static gf_status gf_store_do_publish(gf_store *s, gf_store_req *r)
{
    sqlite3_stmt *st = s->stmt[GF_SQL_V_STATE];
    sqlite3_bind_text(st, 1, r->function, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, r->version);
    int rc = sqlite3_step(st);
    char state[16] = "";
    if (rc == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        snprintf(state, sizeof state, "%s", t != NULL ? t : "");
    }
    sqlite3_reset(st);
    if (rc == SQLITE_DONE)
        return gf_err_set(&r->err, GF_ERR_NOT_FOUND, "function '%s' has no version %lld",
                          r->function, (long long)r->version);
    if (rc != SQLITE_ROW)
        return gf_store_sql_fail(s, &r->err, rc, "reading the version");
    if (strcmp(state, "ready") != 0)
        return gf_err_set(&r->err, GF_ERR_STATE, "function '%s' version %lld is %s", r->function,
                          (long long)r->version, state);
    st = s->stmt[GF_SQL_FN_PUBLISH];
    sqlite3_bind_text(st, 1, r->function, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, r->version);
    rc = gf_store_exec(st);
    if (rc != SQLITE_DONE)
        return gf_store_sql_fail(s, &r->err, rc, "publishing the version");
    return GF_OK;
}

static gf_status gf_store_do_delete(gf_store *s, gf_store_req *r)
{
    sqlite3_stmt *st = s->stmt[GF_SQL_FN_DELETE];
    sqlite3_bind_text(st, 1, r->function, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, gf_wall_us());
    int rc = gf_store_exec(st);
    if (rc != SQLITE_DONE)
        return gf_store_sql_fail(s, &r->err, rc, "deleting the function");
    if (sqlite3_changes(s->db) == 0)
        return gf_err_set(&r->err, GF_ERR_NOT_FOUND, "no function '%s'", r->function);
    static const enum gf_store_stmt_id then[] = {GF_SQL_V_DELETE_ALL, GF_SQL_PL_DELETE_FN};
    for (size_t i = 0; i < sizeof then / sizeof then[0]; i++) {
        st = s->stmt[then[i]];
        sqlite3_bind_text(st, 1, r->function, -1, SQLITE_STATIC);
        rc = gf_store_exec(st);
        if (rc != SQLITE_DONE)
            return gf_store_sql_fail(s, &r->err, rc, "deleting the function");
    }
    return GF_OK;
}

static gf_status gf_store_do_unloaded(gf_store *s, gf_store_req *r)
{
    sqlite3_stmt *st = s->stmt[GF_SQL_FN_UNLOADED];
    sqlite3_bind_text(st, 1, r->function, -1, SQLITE_STATIC);
    if (r->unloaded)
        sqlite3_bind_int64(st, 2, gf_wall_us());
    else
        sqlite3_bind_null(st, 2);
    int rc = gf_store_exec(st);
    if (rc != SQLITE_DONE)
        return gf_store_sql_fail(s, &r->err, rc, "recording the unload");
    if (sqlite3_changes(s->db) == 0)
        return gf_err_set(&r->err, GF_ERR_NOT_FOUND, "no function '%s'", r->function);
    return GF_OK;
}

static gf_status gf_store_do_broken(gf_store *s, gf_store_req *r)
{
    sqlite3_stmt *st = s->stmt[GF_SQL_V_BROKEN];
    sqlite3_bind_text(st, 1, r->function, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, r->version);
    if (r->reason != NULL)
        sqlite3_bind_text(st, 3, r->reason, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 3);
    int rc = gf_store_exec(st);
    if (rc != SQLITE_DONE)
        return gf_store_sql_fail(s, &r->err, rc, "marking the version broken");
    if (sqlite3_changes(s->db) == 0)
        return gf_err_set(&r->err, GF_ERR_NOT_FOUND, "function '%s' has no live version %lld",
                          r->function, (long long)r->version);
    return GF_OK;
}

static gf_status gf_store_do_vdelete(gf_store *s, gf_store_req *r)
{
    sqlite3_stmt *st = s->stmt[GF_SQL_V_DELETE_ONE];
    sqlite3_bind_text(st, 1, r->function, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, r->version);
    int rc = gf_store_exec(st);
    if (rc != SQLITE_DONE)
        return gf_store_sql_fail(s, &r->err, rc, "deleting the version");
    if (sqlite3_changes(s->db) == 0)
        return gf_err_set(&r->err, GF_ERR_NOT_FOUND, "function '%s' has no live version %lld",
                          r->function, (long long)r->version);
    static const enum gf_store_stmt_id then[] = {GF_SQL_PL_DELETE_VERSION, GF_SQL_FN_UNPUBLISH};
    for (size_t i = 0; i < sizeof then / sizeof then[0]; i++) {
        st = s->stmt[then[i]];
        sqlite3_bind_text(st, 1, r->function, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, r->version);
        rc = gf_store_exec(st);
        if (rc != SQLITE_DONE)
            return gf_store_sql_fail(s, &r->err, rc, "deleting the version");
    }
    return GF_OK;
}

static gf_status gf_store_do_checked(gf_store *s, gf_store_req *r)
{
    sqlite3_stmt *st = s->stmt[GF_SQL_V_CHECKED];
    sqlite3_bind_text(st, 1, r->function, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, r->version);
    sqlite3_bind_int64(st, 3, r->file->mtime_ns);
    sqlite3_bind_int64(st, 4, (int64_t)r->file->inode);
    sqlite3_bind_int(st, 5, r->hashed ? 1 : 0);
    sqlite3_bind_int64(st, 6, gf_wall_us());
    int rc = gf_store_exec(st);
    if (rc != SQLITE_DONE)
        return gf_store_sql_fail(s, &r->err, rc, "recording the version's file");
    if (sqlite3_changes(s->db) == 0)
        return gf_err_set(&r->err, GF_ERR_NOT_FOUND, "function '%s' has no ready version %lld",
                          r->function, (long long)r->version);
    return GF_OK;
}

static gf_status gf_store_do_worker(gf_store *s, gf_store_req *r)
{
    const gf_store_worker_spec *w = r->worker;
    sqlite3_stmt *st = s->stmt[GF_SQL_W_REGISTER];
    sqlite3_bind_int(st, 1, w->id);
    sqlite3_bind_text(st, 2, w->device, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, w->pid);
    sqlite3_bind_int64(st, 4, (int64_t)w->device_budget);
    sqlite3_bind_int64(st, 5, (int64_t)w->host_budget);
    sqlite3_bind_int64(st, 6, gf_wall_us());
    int rc = gf_store_exec(st);
    if (rc == SQLITE_DONE) {
        /* a (re)registered worker is a new process: it holds nothing */
        st = s->stmt[GF_SQL_PL_CLEAR_WORKER];
        sqlite3_bind_int(st, 1, w->id);
        rc = gf_store_exec(st);
    }
    if (rc != SQLITE_DONE)
        return gf_store_sql_fail(s, &r->err, rc, "registering the worker");
    return GF_OK;
}

static gf_status gf_store_do_clear_run(gf_store *s, gf_store_req *r)
{
    int rc = gf_store_exec(s->stmt[GF_SQL_RUN_CLEAR_PL]);
    if (rc == SQLITE_DONE)
        rc = gf_store_exec(s->stmt[GF_SQL_RUN_CLEAR_W]);
    if (rc != SQLITE_DONE)
        return gf_store_sql_fail(s, &r->err, rc, "clearing the previous run");
    return GF_OK;
}

static gf_status gf_store_do_residency(gf_store *s, gf_store_req *r)
{
    sqlite3_stmt *st = s->stmt[GF_SQL_FN_RESIDENCY];
    sqlite3_bind_text(st, 1, r->function, -1, SQLITE_STATIC);
    if (r->residency != NULL) {
        sqlite3_bind_int(st, 2, r->residency->pin ? 1 : 0);
        sqlite3_bind_text(st, 3, gf_priority_name(r->residency->priority), -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, (int64_t)r->residency->keep_warm_us);
    } else {
        for (int i = 2; i <= 4; i++)
            sqlite3_bind_null(st, i);
    }
    int rc = gf_store_exec(st);
    if (rc != SQLITE_DONE)
        return gf_store_sql_fail(s, &r->err, rc, "setting the residency");
    if (sqlite3_changes(s->db) == 0)
        return gf_err_set(&r->err, GF_ERR_NOT_FOUND, "no function '%s'", r->function);
    return GF_OK;
}

/* Run the admin operation r asks for. */
static gf_status gf_store_do_req(gf_store *s, gf_store_req *r)
{
    switch (r->op) {
    case GF_REQ_DEPLOY:
        return gf_store_do_deploy(s, r);
    case GF_REQ_PUBLISH:
        return gf_store_do_publish(s, r);
    case GF_REQ_DELETE:
        return gf_store_do_delete(s, r);
    case GF_REQ_BROKEN:
        return gf_store_do_broken(s, r);
    case GF_REQ_VDELETE:
        return gf_store_do_vdelete(s, r);
    case GF_REQ_CHECKED:
        return gf_store_do_checked(s, r);
    case GF_REQ_WORKER:
        return gf_store_do_worker(s, r);
    case GF_REQ_CLEAR_RUN:
        return gf_store_do_clear_run(s, r);
    case GF_REQ_RESIDENCY:
        return gf_store_do_residency(s, r);
    case GF_REQ_UNLOADED:
        return gf_store_do_unloaded(s, r);
    case GF_REQ_FLUSH:
        return GF_OK;
    }
    return gf_err_set(&r->err, GF_ERR_INTERNAL, "unknown admin request %d", (int)r->op);
}

/* Delete history beyond the configured row count and age. */
static int gf_store_retention(gf_store *s)
{
    static const enum gf_store_stmt_id by_rows[] = {GF_SQL_RET_INV_ROWS, GF_SQL_RET_SWAP_ROWS};
    static const enum gf_store_stmt_id by_age[] = {GF_SQL_RET_INV_AGE, GF_SQL_RET_SWAP_AGE};
    int64_t cutoff = gf_wall_us() - s->cfg.retain_age_s * 1000000;
    for (int i = 0; i < 2; i++) {
        if (s->cfg.retain_rows >= 0) {
            sqlite3_stmt *st = s->stmt[by_rows[i]];
            sqlite3_bind_int64(st, 1, s->cfg.retain_rows);
            int rc = gf_store_exec(st);
            if (rc != SQLITE_DONE)
                return rc;
            atomic_fetch_add_explicit(&s->retention_deleted, (uint64_t)sqlite3_changes(s->db),
                                      memory_order_relaxed);
        }
        if (s->cfg.retain_age_s >= 0) {
            sqlite3_stmt *st = s->stmt[by_age[i]];
            sqlite3_bind_int64(st, 1, cutoff);
            int rc = gf_store_exec(st);
            if (rc != SQLITE_DONE)
                return rc;
            atomic_fetch_add_explicit(&s->retention_deleted, (uint64_t)sqlite3_changes(s->db),
                                      memory_order_relaxed);
        }
    }
    return SQLITE_DONE;
}

/* ---- the store thread: one transaction ------------------------------------------- */

/* Throw away n queued records (the database cannot take them). */
static void gf_store_discard(gf_store *s, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        gf_ring_next(&s->ring);
        gf_ring_release(&s->ring);
    }
    atomic_fetch_add_explicit(&s->lost, n, memory_order_relaxed);
    gf_ring_retire(&s->ring);
}

/* Mark every request of the list done (statuses already set) and wake the
 * callers. */
static void gf_store_complete(gf_store *s, gf_store_req *reqs)
{
    if (reqs == NULL)
        return;
    pthread_mutex_lock(&s->lock);
    for (gf_store_req *r = reqs; r != NULL;) {
        gf_store_req *next = r->next; /* r may vanish once done is seen */
        r->done = true;
        r = next;
    }
    pthread_cond_broadcast(&s->done);
    pthread_mutex_unlock(&s->lock);
}

/* Give every still-successful request of the list the error code/msg
 * (msg borrowed, copied). */
static void gf_store_fail_reqs(gf_store_req *reqs, gf_status code, const char *msg)
{
    for (gf_store_req *r = reqs; r != NULL; r = r->next)
        if (r->status == GF_OK)
            r->status = gf_err_set(&r->err, code, "%s", msg);
}

/* One transaction: the queued records (up to batch_max, or all of them
 * when admin requests or a stop wait, so that records handed over before an
 * admin call commit with or before it), then each admin request in its own
 * savepoint, then retention when due. Returns false when BEGIN failed. */
static bool gf_store_txn(gf_store *s, gf_store_req *reqs, bool stopping)
{
    uint64_t pending = gf_ring_pending(&s->ring);
    uint64_t want = pending;
    if (reqs == NULL && !stopping && want > s->cfg.batch_max)
        want = s->cfg.batch_max;
    bool flush = stopping;
    for (gf_store_req *r = reqs; r != NULL; r = r->next)
        flush = flush || r->op == GF_REQ_FLUSH;
    int64_t mono = (int64_t)gf_mono_us();
    bool retention =
        (s->cfg.retain_rows >= 0 || s->cfg.retain_age_s >= 0) &&
        (flush || mono - s->last_retention_us >= (int64_t)s->cfg.retention_every_ms * 1000);
    if (want == 0 && reqs == NULL && !retention)
        return true;

    int rc = GF_FAULT("store_begin") ? SQLITE_BUSY : gf_store_exec(s->stmt[GF_SQL_BEGIN]);
    if (rc != SQLITE_DONE) {
        char msg[300];
        snprintf(msg, sizeof msg, "store: BEGIN failed: %s",
                 rc == SQLITE_BUSY ? "database is locked" : sqlite3_errmsg(s->db));
        GF_LOG_W("%s; %llu record(s) wait in the queue", msg, (unsigned long long)pending);
        gf_store_fail_reqs(reqs, gf_store_sqlite_status(rc), msg);
        if (stopping) {
            GF_LOG_E("store: closing: %llu queued record(s) lost", (unsigned long long)pending);
            gf_store_discard(s, pending);
        }
        gf_store_complete(s, reqs);
        return false;
    }

    uint64_t applied = 0;
    bool aborted = false; /* SQLite rolled the whole transaction back */
    char abort_msg[300] = "";
    for (uint64_t i = 0; i < want && !aborted; i++) {
        gf_store_rec *rec = gf_ring_next(&s->ring);
        const char *why;
        rc = gf_store_apply(s, rec, &why);
        if (rc == SQLITE_DONE) {
            applied++;
        } else if (sqlite3_get_autocommit(s->db)) {
            aborted = true;
            snprintf(abort_msg, sizeof abort_msg, "store: transaction aborted: %s",
                     sqlite3_errmsg(s->db));
            atomic_fetch_add_explicit(&s->lost, 1, memory_order_relaxed);
        } else {
            gf_store_note_reject(s, rec, why);
        }
        gf_ring_release(&s->ring);
    }
    for (gf_store_req *r = reqs; r != NULL && !aborted; r = r->next) {
        atomic_fetch_add_explicit(&s->admin_ops, 1, memory_order_relaxed);
        gf_store_exec(s->stmt[GF_SQL_SAVEPOINT]);
        r->status = gf_store_do_req(s, r);
        if (r->status != GF_OK && !sqlite3_get_autocommit(s->db))
            gf_store_exec(s->stmt[GF_SQL_ROLLBACK_TO]);
        if (sqlite3_get_autocommit(s->db)) {
            aborted = true;
            snprintf(abort_msg, sizeof abort_msg, "store: transaction aborted: %s",
                     sqlite3_errmsg(s->db));
        } else {
            gf_store_exec(s->stmt[GF_SQL_RELEASE]);
        }
    }
    if (retention && !aborted) {
        rc = gf_store_retention(s);
        if (rc != SQLITE_DONE && sqlite3_get_autocommit(s->db)) {
            aborted = true;
            snprintf(abort_msg, sizeof abort_msg, "store: retention: transaction aborted: %s",
                     sqlite3_errmsg(s->db));
        } else if (rc != SQLITE_DONE) {
            GF_LOG_W("store: retention failed: %s", sqlite3_errmsg(s->db));
        }
    }
    if (!aborted) {
        if (GF_FAULT("store_commit")) {
            rc = SQLITE_IOERR;
            snprintf(abort_msg, sizeof abort_msg, "store: COMMIT failed: injected fault");
        } else {
            rc = gf_store_exec(s->stmt[GF_SQL_COMMIT]);
            if (rc != SQLITE_DONE)
                snprintf(abort_msg, sizeof abort_msg, "store: COMMIT failed: %s",
                         sqlite3_errmsg(s->db));
        }
        if (rc != SQLITE_DONE) {
            aborted = true;
            if (!sqlite3_get_autocommit(s->db))
                gf_store_exec(s->stmt[GF_SQL_ROLLBACK]);
        }
    }
    gf_ring_retire(&s->ring);
    if (aborted) {
        GF_LOG_E("%s; %llu record(s) lost", abort_msg, (unsigned long long)applied);
        atomic_fetch_add_explicit(&s->lost, applied, memory_order_relaxed);
        gf_store_fail_reqs(reqs, GF_ERR_IO, abort_msg);
    } else {
        uint64_t total =
            atomic_fetch_add_explicit(&s->committed, applied, memory_order_relaxed) + applied;
        if (retention)
            s->last_retention_us = mono;
        if (s->cfg.on_commit != NULL)
            s->cfg.on_commit(s->cfg.on_commit_arg, applied, total);
    }
    gf_store_complete(s, reqs);
    return true;
}

/* *ts = the CLOCK_MONOTONIC time mono_us, for pthread_cond_timedwait. */
static void gf_store_timespec_at(struct timespec *ts, int64_t mono_us)
{
    ts->tv_sec = (time_t)(mono_us / 1000000);
    ts->tv_nsec = (long)(mono_us % 1000000) * 1000;
}

/* The store thread (arg is the store): wait for a full batch, an admin
 * request, a stop or the commit interval, then run one transaction. */
void *gf_store_thread_main(void *arg)
{
    gf_store *s = arg;
    const int64_t interval = (int64_t)s->cfg.commit_interval_ms * 1000;
    int64_t next = (int64_t)gf_mono_us() + interval;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        struct timespec ts;
        gf_store_timespec_at(&ts, next);
        while (!s->stop && s->reqs_head == NULL && !s->kick &&
               gf_ring_pending(&s->ring) < s->cfg.batch_max) {
            if (pthread_cond_timedwait(&s->wake, &s->lock, &ts) == ETIMEDOUT)
                break;
        }
        gf_store_req *reqs = s->reqs_head;
        s->reqs_head = s->reqs_tail = NULL;
        s->kick = false;
        bool stop = s->stop;
        pthread_mutex_unlock(&s->lock);

        bool began = gf_store_txn(s, reqs, stop);
        gf_store_report(s, stop);
        int64_t now = (int64_t)gf_mono_us();
        if (now >= next)
            next = now + interval;
        if (stop)
            break;
        if (!began) {
            /* the database is locked by someone else: back off for one interval */
            next = now + interval;
        }
    }
    return NULL;
}

/* Hand r to the store thread and wait for its transaction. Copies the
 * outcome into err. */
gf_status gf_store_submit(gf_store *s, gf_store_req *r, gf_err *err)
{
    r->status = GF_OK;
    gf_err_clear(&r->err);
    r->done = false;
    r->next = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->stop || !s->thread_started) {
        pthread_mutex_unlock(&s->lock);
        return gf_err_set(err, GF_ERR_CLOSED, "the store is closed");
    }
    if (s->reqs_tail != NULL)
        s->reqs_tail->next = r;
    else
        s->reqs_head = r;
    s->reqs_tail = r;
    pthread_cond_signal(&s->wake);
    while (!r->done)
        pthread_cond_wait(&s->done, &s->lock);
    pthread_mutex_unlock(&s->lock);
    if (r->status != GF_OK && err != NULL)
        *err = r->err;
    return r->status;
}

/* ---- admin API (caller side: checks, then submit) ------------------------------------- */

#define GF_STORE_MANIFEST_MAX (1u << 20)
#define GF_STORE_PATH_MAX 4096

gf_status gf_store_version_deploy(gf_store *s, const gf_store_version_spec *spec,
                                  int64_t *version_out, gf_err *err)
{
    gf_status st;
    if ((st = gf_store_check_name("function name", spec->function, err)) != GF_OK ||
        (st = gf_store_check_text("kind", spec->kind, GF_STORE_NAME_MAX, err)) != GF_OK ||
        (st = gf_store_check_text("weights path", spec->weights_path, GF_STORE_PATH_MAX, err)) !=
            GF_OK)
        return st;
    if (spec->version < 0 || spec->version == INT64_MAX)
        return gf_err_set(err, GF_ERR_INVALID, "version %lld is not positive",
                          (long long)spec->version);
    if (spec->bytes > INT64_MAX)
        return gf_err_set(err, GF_ERR_INVALID, "bytes %llu is too large",
                          (unsigned long long)spec->bytes);
    if (!gf_sha256_hex_valid(spec->sha256))
        return gf_err_set(err, GF_ERR_INVALID, "sha256 is not 64 lowercase hex digits");
    if (spec->file.inode > INT64_MAX)
        return gf_err_set(err, GF_ERR_INVALID, "inode %llu is out of range",
                          (unsigned long long)spec->file.inode);
    if (spec->manifest == NULL)
        return gf_err_set(err, GF_ERR_INVALID, "manifest is missing");
    size_t mlen = strnlen(spec->manifest, GF_STORE_MANIFEST_MAX + 1);
    if (mlen > GF_STORE_MANIFEST_MAX)
        return gf_err_set(err, GF_ERR_TOO_LARGE, "manifest is larger than %u bytes",
                          GF_STORE_MANIFEST_MAX);
    gf_json_doc *doc = NULL;
    st = gf_json_parse(spec->manifest, mlen, 0, &doc, err);
    gf_json_doc_free(doc);
    if (st != GF_OK)
        return gf_err_prefix(err, "manifest");
    gf_store_req r = {.op = GF_REQ_DEPLOY, .spec = spec};
    st = gf_store_submit(s, &r, err);
    if (st == GF_OK && version_out != NULL)
        *version_out = r.version;
    return st;
}

/* A function name (borrowed) and a positive version. */
static gf_status gf_store_check_fv(const char *function, int64_t version, gf_err *err)
{
    gf_status st = gf_store_check_name("function name", function, err);
    if (st == GF_OK && version <= 0)
        st = gf_err_set(err, GF_ERR_INVALID, "version %lld is not positive", (long long)version);
    return st;
}

gf_status gf_store_version_publish(gf_store *s, const char *function, int64_t version, gf_err *err)
{
    gf_status st = gf_store_check_fv(function, version, err);
    if (st != GF_OK)
        return st;
    gf_store_req r = {.op = GF_REQ_PUBLISH, .function = function, .version = version};
    return gf_store_submit(s, &r, err);
}

gf_status gf_store_function_delete(gf_store *s, const char *function, gf_err *err)
{
    gf_status st = gf_store_check_name("function name", function, err);
    if (st != GF_OK)
        return st;
    gf_store_req r = {.op = GF_REQ_DELETE, .function = function};
    return gf_store_submit(s, &r, err);
}

gf_status gf_store_function_unloaded(gf_store *s, const char *function, bool unloaded,
                                     gf_err *err)
{
    gf_status st = gf_store_check_name("function name", function, err);
    if (st != GF_OK)
        return st;
    gf_store_req r = {.op = GF_REQ_UNLOADED, .function = function, .unloaded = unloaded};
    return gf_store_submit(s, &r, err);
}

gf_status gf_store_version_mark_broken(gf_store *s, const char *function, int64_t version,
                                       const char *reason, gf_err *err)
{
    gf_status st = gf_store_check_fv(function, version, err);
    if (st != GF_OK)
        return st;
    gf_store_req r = {
        .op = GF_REQ_BROKEN, .function = function, .version = version, .reason = reason};
    return gf_store_submit(s, &r, err);
}

gf_status gf_store_version_delete(gf_store *s, const char *function, int64_t version, gf_err *err)
{
    gf_status st = gf_store_check_fv(function, version, err);
    if (st != GF_OK)
        return st;
    gf_store_req r = {.op = GF_REQ_VDELETE, .function = function, .version = version};
    return gf_store_submit(s, &r, err);
}

gf_status gf_store_version_checked(gf_store *s, const char *function, int64_t version,
                                   const gf_store_file_id *id, bool hashed, gf_err *err)
{
    gf_status st = gf_store_check_fv(function, version, err);
    if (st != GF_OK)
        return st;
    if (id->inode > INT64_MAX)
        return gf_err_set(err, GF_ERR_INVALID, "inode %llu is out of range",
                          (unsigned long long)id->inode);
    gf_store_req r = {.op = GF_REQ_CHECKED,
                      .function = function,
                      .version = version,
                      .file = id,
                      .hashed = hashed};
    return gf_store_submit(s, &r, err);
}

gf_status gf_store_function_residency(gf_store *s, const char *function, const gf_residency *r,
                                      gf_err *err)
{
    gf_status st = gf_store_check_name("function name", function, err);
    if (st == GF_OK && r != NULL)
        st = gf_residency_check(r, err);
    if (st != GF_OK)
        return st;
    gf_store_req r_ = {.op = GF_REQ_RESIDENCY, .function = function, .residency = r};
    return gf_store_submit(s, &r_, err);
}

gf_status gf_store_worker_register(gf_store *s, const gf_store_worker_spec *w, gf_err *err)
{
    if (w->id < 0)
        return gf_err_set(err, GF_ERR_INVALID, "worker id %d is negative", (int)w->id);
    gf_status st = gf_store_check_text("device", w->device, 63, err);
    if (st != GF_OK)
        return st;
    if (w->device_budget > INT64_MAX || w->host_budget > INT64_MAX || w->pid < 0)
        return gf_err_set(err, GF_ERR_INVALID, "worker %d: budget or pid out of range", (int)w->id);
    gf_store_req r = {.op = GF_REQ_WORKER, .worker = w};
    return gf_store_submit(s, &r, err);
}

gf_status gf_store_flush(gf_store *s, gf_err *err)
{
    gf_store_req r = {.op = GF_REQ_FLUSH};
    return gf_store_submit(s, &r, err);
}
