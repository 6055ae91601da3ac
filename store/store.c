/* gpufaas — the state database: queue, store thread, admin writes, recovery.
 *
 * Shape (see store.h for the contract):
 *
 *   request threads --gf_store_log_*--> bounded MPSC ring (lock-free) --+
 *   admin callers ---gf_store_req-----> list under s->lock -------------+--> store thread
 *                                                                          BEGIN IMMEDIATE
 *                                                                          records, then admin
 *                                                                          ops (one savepoint
 *                                                                          each), retention
 *                                                                          COMMIT, wake callers
 *
 * The ring is store/ring.c's (a bounded lock-free MPSC queue): the store
 * thread applies each record straight from its slot.
 */
#include "core/clock.h"
#include "store/ring.h"
#include "store/store.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "core/fault.h"
#include "core/json.h"
#include "core/log.h"
#include "store/schema.h"

/* ---- SQL: every statement the store runs, prepared once at open ---------- */

enum gf_store_stmt_id {
    GF_SQL_BEGIN,
    GF_SQL_COMMIT,
    GF_SQL_ROLLBACK,
    GF_SQL_SAVEPOINT,
    GF_SQL_RELEASE,
    GF_SQL_ROLLBACK_TO,
    /* fire-and-forget records */
    GF_SQL_INV_INSERT,
    GF_SQL_SWAP_INSERT,
    GF_SQL_PL_UPSERT,
    GF_SQL_PL_HIT,
    GF_SQL_PL_REMOVE,
    GF_SQL_W_STATE,
    GF_SQL_W_HEARTBEAT,
    GF_SQL_W_RESTART,
    GF_SQL_PL_CLEAR_WORKER,
    /* admin writes */
    GF_SQL_FN_UPSERT,
    GF_SQL_V_NEXT,
    GF_SQL_V_INSERT,
    GF_SQL_V_STATE,
    GF_SQL_FN_PUBLISH,
    GF_SQL_FN_DELETE,
    GF_SQL_V_DELETE_ALL,
    GF_SQL_PL_DELETE_FN,
    GF_SQL_V_BROKEN,
    GF_SQL_W_REGISTER,
    GF_SQL_RUN_CLEAR_PL,
    GF_SQL_RUN_CLEAR_W,
    /* retention */
    GF_SQL_RET_INV_ROWS,
    GF_SQL_RET_INV_AGE,
    GF_SQL_RET_SWAP_ROWS,
    GF_SQL_RET_SWAP_AGE,
    GF_SQL_COUNT_
};

static const char *const gf_store_sql[GF_SQL_COUNT_] = {
    [GF_SQL_BEGIN] = "BEGIN IMMEDIATE",
    [GF_SQL_COMMIT] = "COMMIT",
    [GF_SQL_ROLLBACK] = "ROLLBACK",
    [GF_SQL_SAVEPOINT] = "SAVEPOINT gf_admin",
    [GF_SQL_RELEASE] = "RELEASE gf_admin",
    [GF_SQL_ROLLBACK_TO] = "ROLLBACK TO gf_admin",
    [GF_SQL_INV_INSERT] =
        "INSERT INTO invocations (function, version, worker_id, status, http_code, batch_size,"
        " cold, queue_us, load_us, exec_us, total_us, at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    [GF_SQL_SWAP_INSERT] =
        "INSERT INTO swap_events (worker_id, function, version, from_tier, to_tier, bytes,"
        " elapsed_us, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    /* loaded_at: set when the placement becomes ready, cleared while it loads. */
    [GF_SQL_PL_UPSERT] =
        "INSERT INTO placements (function, version, worker_id, tier, bytes, state, loaded_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, CASE WHEN ?6 = 'ready' THEN ?7 END)"
        " ON CONFLICT (function, version, worker_id, tier) DO UPDATE SET"
        " bytes = excluded.bytes,"
        " loaded_at = CASE WHEN excluded.state = 'loading' THEN NULL"
        "                  WHEN placements.state = 'ready' THEN placements.loaded_at"
        "                  ELSE ?7 END,"
        " state = excluded.state",
    [GF_SQL_PL_HIT] = "UPDATE placements SET hits = hits + ?5,"
                      " last_used_at = MAX(COALESCE(last_used_at, 0), ?6)"
                      " WHERE function = ?1 AND version = ?2 AND worker_id = ?3 AND tier = ?4",
    [GF_SQL_PL_REMOVE] = "DELETE FROM placements"
                         " WHERE function = ?1 AND version = ?2 AND worker_id = ?3 AND tier = ?4",
    [GF_SQL_W_STATE] = "UPDATE workers SET state = ?2, pid = COALESCE(?3, pid) WHERE id = ?1",
    [GF_SQL_W_HEARTBEAT] = "UPDATE workers SET device_budget = ?2, device_used = ?3,"
                           " host_budget = ?4, host_used = ?5, last_heartbeat = ?6 WHERE id = ?1",
    [GF_SQL_W_RESTART] = "UPDATE workers SET restarts = restarts + 1, pid = ?2, started_at = ?3,"
                         " state = 'starting', device_used = 0, host_used = 0,"
                         " last_heartbeat = NULL WHERE id = ?1",
    [GF_SQL_PL_CLEAR_WORKER] = "DELETE FROM placements WHERE worker_id = ?1",
    [GF_SQL_FN_UPSERT] = "INSERT INTO functions (name, created_at) VALUES (?1, ?2)"
                         " ON CONFLICT (name) DO UPDATE SET deleted_at = NULL",
    [GF_SQL_V_NEXT] =
        "SELECT COALESCE(MAX(version), 0) + 1 FROM function_versions WHERE function = ?1",
    [GF_SQL_V_INSERT] = "INSERT INTO function_versions (function, version, kind, manifest,"
                        " weights_path, bytes, sha256, created_at)"
                        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [GF_SQL_V_STATE] = "SELECT state FROM function_versions WHERE function = ?1 AND version = ?2",
    [GF_SQL_FN_PUBLISH] = "UPDATE functions SET current_version = ?2 WHERE name = ?1",
    [GF_SQL_FN_DELETE] = "UPDATE functions SET deleted_at = ?2, current_version = NULL"
                         " WHERE name = ?1 AND deleted_at IS NULL",
    [GF_SQL_V_DELETE_ALL] = "UPDATE function_versions SET state = 'deleted' WHERE function = ?1",
    [GF_SQL_PL_DELETE_FN] = "DELETE FROM placements WHERE function = ?1",
    [GF_SQL_V_BROKEN] = "UPDATE function_versions SET state = 'broken', state_reason = ?3"
                        " WHERE function = ?1 AND version = ?2 AND state <> 'deleted'",
    [GF_SQL_W_REGISTER] =
        "INSERT INTO workers (id, device, pid, state, device_budget, host_budget, started_at)"
        " VALUES (?1, ?2, ?3, 'starting', ?4, ?5, ?6)"
        " ON CONFLICT (id) DO UPDATE SET device = excluded.device, pid = excluded.pid,"
        " state = 'starting', device_budget = excluded.device_budget, device_used = 0,"
        " host_budget = excluded.host_budget, host_used = 0, started_at = excluded.started_at,"
        " last_heartbeat = NULL",
    [GF_SQL_RUN_CLEAR_PL] = "DELETE FROM placements",
    [GF_SQL_RUN_CLEAR_W] = "DELETE FROM workers",
    /* ids grow in insertion order, so the newest N rows are the top N ids */
    [GF_SQL_RET_INV_ROWS] =
        "DELETE FROM invocations WHERE id <= (SELECT MAX(id) FROM invocations) - ?1",
    [GF_SQL_RET_INV_AGE] = "DELETE FROM invocations WHERE at < ?1",
    [GF_SQL_RET_SWAP_ROWS] =
        "DELETE FROM swap_events WHERE id <= (SELECT MAX(id) FROM swap_events) - ?1",
    [GF_SQL_RET_SWAP_AGE] = "DELETE FROM swap_events WHERE at < ?1",
};

/* On the read-only connection. */
static const char gf_store_sql_catalog[] =
    "SELECT v.function, v.version, v.kind, v.manifest, v.weights_path, v.bytes, v.sha256,"
    " v.created_at, v.state, v.state_reason, (f.current_version IS v.version)"
    " FROM function_versions v JOIN functions f ON f.name = v.function"
    " WHERE v.state <> 'deleted' ORDER BY v.function, v.version";

/* ---- records and the ring -------------------------------------------------- */

typedef enum gf_store_rec_kind {
    GF_REC_INVOCATION = 1,
    GF_REC_SWAP,
    GF_REC_PLACEMENT,
    GF_REC_PLACEMENT_HIT,
    GF_REC_PLACEMENT_REMOVE,
    GF_REC_WORKER_STATE,
    GF_REC_HEARTBEAT,
    GF_REC_RESTART,
} gf_store_rec_kind;

typedef struct gf_store_rec {
    uint32_t kind; /* gf_store_rec_kind */
    uint32_t hits; /* GF_REC_PLACEMENT_HIT */
    union {
        gf_store_invocation inv; /* .function unused (see below) */
        gf_store_swap swap;
        gf_store_placement pl;
        gf_store_heartbeat hb;
        struct {
            int32_t worker;
            gf_store_wstate state;
            int64_t pid; /* < 0: unchanged */
            int64_t at_us;
        } ws; /* GF_REC_WORKER_STATE and GF_REC_RESTART */
    } u;
    /* Last, so a handover copies only strlen + 1 of it. */
    char function[GF_STORE_NAME_MAX + 1];
} gf_store_rec;

_Static_assert(GF_RING_SLOT_SIZE(sizeof(gf_store_rec)) <= 256,
               "a queue slot should stay within 256 bytes");

typedef enum gf_store_req_op {
    GF_REQ_DEPLOY,
    GF_REQ_PUBLISH,
    GF_REQ_DELETE,
    GF_REQ_BROKEN,
    GF_REQ_WORKER,
    GF_REQ_FLUSH,
    GF_REQ_CLEAR_RUN,
} gf_store_req_op;

/* An admin write, on its caller's stack while the caller waits. */
typedef struct gf_store_req {
    gf_store_req_op op;
    const gf_store_version_spec *spec;  /* GF_REQ_DEPLOY */
    const gf_store_worker_spec *worker; /* GF_REQ_WORKER */
    const char *function;               /* PUBLISH, DELETE, BROKEN */
    int64_t version;                    /* PUBLISH, BROKEN; DEPLOY: the result */
    const char *reason;                 /* BROKEN */
    gf_status status;
    gf_err err;
    bool done; /* under s->lock */
    struct gf_store_req *next;
} gf_store_req;

struct gf_store {
    gf_store_config cfg;
    char *path;

    /* The request-path queue; the store thread retires its position after
     * each transaction (for the counts and the "batch is full" wake-up). */
    gf_ring ring;
    _Atomic int closing; /* set by gf_store_close: handovers answer GF_ERR_CLOSED */

    /* Counters written by the store thread, read by gf_store_stats_get. */
    _Atomic uint64_t committed, rejected, lost, commits, admin_ops, retention_deleted;

    /* Admin requests and wake-ups. */
    pthread_mutex_t lock;
    pthread_cond_t wake; /* store thread waits here */
    pthread_cond_t done; /* admin callers wait here */
    gf_store_req *reqs_head, *reqs_tail;
    bool kick; /* a batch is full: commit now */
    bool stop; /* close requested */
    bool lock_init, wake_init, done_init;
    pthread_t thread;
    bool thread_started;

    /* The write connection: the store thread's alone once it runs. */
    sqlite3 *db;
    sqlite3_stmt *stmt[GF_SQL_COUNT_];

    /* The read connection, for gf_store_catalog_load. */
    pthread_mutex_t rd_lock;
    bool rd_lock_init;
    sqlite3 *rdb;
    sqlite3_stmt *rd_catalog;

    /* Store thread only. */
    int64_t last_retention_us; /* monotonic */
    int64_t last_drop_report_us;
    uint64_t drops_reported;
    int64_t last_reject_report_us;
    uint64_t rejects_unreported;
    char last_reject[256];
};

/* ---- small helpers ----------------------------------------------------------- */


const char *gf_store_pstate_name(gf_store_pstate st)
{
    return st == GF_STORE_PLACEMENT_READY     ? "ready"
           : st == GF_STORE_PLACEMENT_LOADING ? "loading"
                                              : "?";
}

const char *gf_store_wstate_name(gf_store_wstate st)
{
    static const char *const names[] = {"starting", "ready", "restarting", "stopping", "dead"};
    return (unsigned)st < sizeof names / sizeof names[0] ? names[st] : "?";
}

const char *gf_store_vstate_name(gf_store_vstate st)
{
    static const char *const names[] = {"ready", "broken", "deleted"};
    return (unsigned)st < sizeof names / sizeof names[0] ? names[st] : "?";
}

/* The version state named by s (a column's text, may be NULL = ready). */
static gf_store_vstate gf_store_vstate_parse(const char *s)
{
    if (s != NULL && strcmp(s, "broken") == 0)
        return GF_STORE_VERSION_BROKEN;
    if (s != NULL && strcmp(s, "deleted") == 0)
        return GF_STORE_VERSION_DELETED;
    return GF_STORE_VERSION_READY;
}

int gf_store_schema_version(void)
{
    return (int)gf_store_migrations_n;
}

void gf_store_config_default(gf_store_config *c)
{
    memset(c, 0, sizeof *c);
    c->retain_rows = 1000000;
    c->retain_age_s = 7 * 24 * 3600;
    c->batch_max = 1024;
    c->commit_interval_ms = 50;
    c->busy_timeout_ms = 5000;
    c->queue_cap = 32768;
    c->retention_every_ms = 1000;
}

/* Ranges of a configuration (c borrowed). */
static gf_status gf_store_config_check(const gf_store_config *c, gf_err *err)
{
    if (c->batch_max < 1 || c->batch_max > (1u << 20))
        return gf_err_set(err, GF_ERR_INVALID, "store config: batch_max %u is not in 1..%u",
                          c->batch_max, 1u << 20);
    if (c->commit_interval_ms < 1 || c->commit_interval_ms > 50)
        return gf_err_set(err, GF_ERR_INVALID,
                          "store config: commit_interval_ms %u is not in 1..50",
                          c->commit_interval_ms);
    if (c->queue_cap < 2 || c->queue_cap > (1u << 24))
        return gf_err_set(err, GF_ERR_INVALID, "store config: queue_cap %u is not in 2..%u",
                          c->queue_cap, 1u << 24);
    if (c->busy_timeout_ms > INT_MAX)
        return gf_err_set(err, GF_ERR_INVALID, "store config: busy_timeout_ms %u is too large",
                          c->busy_timeout_ms);
    if (c->retention_every_ms < 1)
        return gf_err_set(err, GF_ERR_INVALID, "store config: retention_every_ms must be >= 1");
    if (c->retain_age_s > INT64_MAX / 1000000)
        return gf_err_set(err, GF_ERR_INVALID, "store config: retain_age_s %lld is too large",
                          (long long)c->retain_age_s);
    return GF_OK;
}

gf_status gf_store_default_path(const char *state_dir, char **out, gf_err *err)
{
    *out = NULL;
    if (state_dir == NULL || state_dir[0] == '\0')
        return gf_err_set(err, GF_ERR_INVALID, "state directory is empty");
    size_t n = strlen(state_dir);
    bool slash = state_dir[n - 1] == '/';
    size_t total = n + (slash ? 0 : 1) + sizeof GF_STORE_DB_NAME;
    char *p = malloc(total);
    if (p == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "gf_store_default_path: out of memory");
    snprintf(p, total, "%s%s%s", state_dir, slash ? "" : "/", GF_STORE_DB_NAME);
    *out = p;
    return GF_OK;
}

/* A function name as the store accepts it: 1..GF_STORE_NAME_MAX bytes of
 * [A-Za-z0-9_.-], starting with a letter or digit. */
static gf_status gf_store_check_name(const char *what, const char *name, gf_err *err)
{
    if (name == NULL || name[0] == '\0')
        return gf_err_set(err, GF_ERR_INVALID, "%s is empty", what);
    size_t n = strnlen(name, GF_STORE_NAME_MAX + 1);
    if (n > GF_STORE_NAME_MAX)
        return gf_err_set(err, GF_ERR_INVALID, "%s is longer than %d bytes", what,
                          GF_STORE_NAME_MAX);
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        bool alnum =
            (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (!alnum && (i == 0 || (ch != '_' && ch != '.' && ch != '-')))
            return gf_err_set(err, GF_ERR_INVALID,
                              "%s has a character not allowed at byte %zu (allowed: letters, "
                              "digits, '_', '.', '-'; first a letter or digit)",
                              what, i);
    }
    return GF_OK;
}

/* Printable text of 1..max bytes (no control characters). */
static gf_status gf_store_check_text(const char *what, const char *s, size_t max, gf_err *err)
{
    if (s == NULL || s[0] == '\0')
        return gf_err_set(err, GF_ERR_INVALID, "%s is empty", what);
    size_t n = strnlen(s, max + 1);
    if (n > max)
        return gf_err_set(err, GF_ERR_INVALID, "%s is longer than %zu bytes", what, max);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return gf_err_set(err, GF_ERR_INVALID, "%s has a control character at byte %zu", what,
                              i);
    return GF_OK;
}

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

gf_status gf_store_log_invocation(gf_store *s, const gf_store_invocation *rec)
{
    if (rec->worker < -1 || (unsigned)rec->status >= GF_STATUS_COUNT_ || rec->function == NULL)
        return GF_ERR_INVALID;
    uint64_t pos;
    gf_status st;
    gf_store_rec *slot = gf_store_begin_rec(s, GF_REC_INVOCATION, rec->function, &pos, &st);
    if (slot == NULL)
        return st;
    slot->u.inv = *rec;
    slot->u.inv.function = NULL;
    slot->u.inv.at_us = gf_store_at(rec->at_us);
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
static int gf_store_exec(sqlite3_stmt *st)
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
static int gf_store_apply(gf_store *s, const gf_store_rec *r, const char **why)
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
static void gf_store_note_reject(gf_store *s, const gf_store_rec *r, const char *why)
{
    atomic_fetch_add_explicit(&s->rejected, 1, memory_order_relaxed);
    s->rejects_unreported++;
    snprintf(s->last_reject, sizeof s->last_reject, "record kind %u (function '%s'): %s", r->kind,
             r->function, why != NULL ? why : "refused");
}

/* Log drops and rejections since the last report, at most once a second
 * unless force. */
static void gf_store_report(gf_store *s, bool force)
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
    case GF_REQ_WORKER:
        return gf_store_do_worker(s, r);
    case GF_REQ_CLEAR_RUN:
        return gf_store_do_clear_run(s, r);
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
static void *gf_store_thread_main(void *arg)
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
static gf_status gf_store_submit(gf_store *s, gf_store_req *r, gf_err *err)
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

/* ---- open / close ---------------------------------------------------------------------- */

/* SQLite's commit hook on the write connection (arg is the store): counts
 * transactions independently of the store's own bookkeeping. */
static int gf_store_commit_hook(void *arg)
{
    gf_store *s = arg;
    atomic_fetch_add_explicit(&s->commits, 1, memory_order_relaxed);
    return 0; /* let the commit proceed */
}

/* Free everything s holds; accepts a half-built store. The thread must have
 * been joined. */
static void gf_store_destroy(gf_store *s)
{
    for (int i = 0; i < GF_SQL_COUNT_; i++)
        sqlite3_finalize(s->stmt[i]);
    sqlite3_finalize(s->rd_catalog);
    if (s->rdb != NULL)
        sqlite3_close(s->rdb);
    if (s->db != NULL)
        sqlite3_close(s->db);
    if (s->lock_init)
        pthread_mutex_destroy(&s->lock);
    if (s->wake_init)
        pthread_cond_destroy(&s->wake);
    if (s->done_init)
        pthread_cond_destroy(&s->done);
    if (s->rd_lock_init)
        pthread_mutex_destroy(&s->rd_lock);
    gf_ring_deinit(&s->ring);
    free(s->path);
    free(s);
}

/* Run a PRAGMA (or other one-shot SQL) on db; when want is non-NULL the first
 * column of the first row must equal it (case-insensitive). */
static gf_status gf_store_pragma(sqlite3 *db, const char *path, const char *sql, const char *want,
                                 gf_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        gf_status code = gf_store_sqlite_status(rc);
        gf_err_set(err, code == GF_OK ? GF_ERR_INTERNAL : code, "%s: %s: %s", path, sql,
                   sqlite3_errmsg(db));
        sqlite3_finalize(st);
        return code == GF_OK ? GF_ERR_INTERNAL : code;
    }
    if (want != NULL) {
        const char *got = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
        if (got == NULL || strcasecmp(got, want) != 0) {
            gf_err_set(err, GF_ERR_UNSUPPORTED, "%s: %s answered '%s', wanted '%s'", path, sql,
                       got != NULL ? got : "", want);
            sqlite3_finalize(st);
            return GF_ERR_UNSUPPORTED;
        }
    }
    sqlite3_finalize(st);
    return GF_OK;
}

/* Prepare sql (static text) on db as a long-lived statement into *out.
 * Fault site "store_prepare". */
static gf_status gf_store_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **out, gf_err *err)
{
    int rc = GF_FAULT("store_prepare")
                 ? SQLITE_NOMEM
                 : sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, out, NULL);
    if (rc != SQLITE_OK) {
        gf_status code = gf_store_sqlite_status(rc);
        return gf_err_set(err, code == GF_OK ? GF_ERR_INTERNAL : code, "preparing '%.60s...': %s",
                          sql, rc == SQLITE_NOMEM ? "out of memory" : sqlite3_errmsg(db));
    }
    return GF_OK;
}

/* Open a connection with the busy timeout set. */
static gf_status gf_store_connect(const char *path, int flags, uint32_t busy_ms, sqlite3 **out,
                                  gf_err *err)
{
    *out = NULL;
    sqlite3 *db = NULL;
    int rc = GF_FAULT("store_open") ? SQLITE_CANTOPEN
                                    : sqlite3_open_v2(path, &db, flags | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        gf_status code = gf_store_sqlite_status(rc);
        gf_err_set(err, code == GF_OK ? GF_ERR_IO : code, "%s: cannot open: %s", path,
                   db != NULL ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close(db);
        return code == GF_OK ? GF_ERR_IO : code;
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, (int)busy_ms);
    *out = db;
    return GF_OK;
}

gf_status gf_store_open(const char *path, const gf_store_config *cfg, gf_store **out, gf_err *err)
{
    *out = NULL;
    gf_store_config c;
    if (cfg != NULL)
        c = *cfg;
    else
        gf_store_config_default(&c);
    gf_status st = gf_store_config_check(&c, err);
    if (st != GF_OK)
        return st;
    if (path == NULL || path[0] == '\0')
        return gf_err_set(err, GF_ERR_INVALID, "database path is empty");

    gf_store *s = NULL;
    if (posix_memalign((void **)&s, 64, sizeof *s) != 0)
        return gf_err_set(err, GF_ERR_NOMEM, "gf_store_open: out of memory");
    memset(s, 0, sizeof *s);
    s->cfg = c;
    s->path = strdup(path);
    if (s->path == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "gf_store_open: out of memory");
        goto fail;
    }
    if ((st = gf_ring_init(&s->ring, c.queue_cap, sizeof(gf_store_rec), err)) != GF_OK) {
        gf_err_prefix(err, "gf_store_open");
        goto fail;
    }
    s->cfg.queue_cap = (uint32_t)gf_ring_capacity(&s->ring);

    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    s->lock_init = pthread_mutex_init(&s->lock, NULL) == 0;
    s->wake_init = pthread_cond_init(&s->wake, &ca) == 0;
    s->done_init = pthread_cond_init(&s->done, NULL) == 0;
    s->rd_lock_init = pthread_mutex_init(&s->rd_lock, NULL) == 0;
    pthread_condattr_destroy(&ca);
    if (!s->lock_init || !s->wake_init || !s->done_init || !s->rd_lock_init) {
        st = gf_err_set(err, GF_ERR_NOMEM, "gf_store_open: cannot create locks");
        goto fail;
    }

    st = gf_store_connect(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, c.busy_timeout_ms,
                          &s->db, err);
    if (st != GF_OK)
        goto fail;
    if ((st = gf_store_pragma(s->db, path, "PRAGMA journal_mode = WAL", "wal", err)) != GF_OK ||
        (st = gf_store_pragma(s->db, path, "PRAGMA synchronous = NORMAL", NULL, err)) != GF_OK ||
        (st = gf_store_pragma(s->db, path, "PRAGMA foreign_keys = ON", NULL, err)) != GF_OK ||
        (st = gf_store_pragma(s->db, path, "PRAGMA journal_size_limit = 67108864", NULL, err)) !=
            GF_OK)
        goto fail;
    st = gf_store_schema_migrate(s->db, gf_store_schema_version(), err);
    if (st != GF_OK) {
        gf_err_prefix(err, "%s", path);
        goto fail;
    }
    for (int i = 0; i < GF_SQL_COUNT_; i++)
        if ((st = gf_store_prepare(s->db, gf_store_sql[i], &s->stmt[i], err)) != GF_OK)
            goto fail;
    sqlite3_commit_hook(s->db, gf_store_commit_hook, s);

    st = gf_store_connect(path, SQLITE_OPEN_READONLY, c.busy_timeout_ms, &s->rdb, err);
    if (st != GF_OK)
        goto fail;
    if ((st = gf_store_prepare(s->rdb, gf_store_sql_catalog, &s->rd_catalog, err)) != GF_OK)
        goto fail;

    s->last_retention_us = (int64_t)gf_mono_us();
    int prc = GF_FAULT("store_thread") ? EAGAIN
                                       : pthread_create(&s->thread, NULL, gf_store_thread_main, s);
    if (prc != 0) {
        st = gf_err_set(err, GF_ERR_NOMEM, "gf_store_open: pthread_create: %s", strerror(prc));
        goto fail;
    }
    s->thread_started = true;
    pthread_setname_np(s->thread, "gf-store");
    GF_LOG_D("store %s open (schema %d, batch %u, interval %u ms, queue %llu)", path,
             gf_store_schema_version(), c.batch_max, c.commit_interval_ms,
             (unsigned long long)gf_ring_capacity(&s->ring));
    *out = s;
    return GF_OK;
fail:
    gf_store_destroy(s);
    return st;
}

gf_status gf_store_close(gf_store *s, gf_err *err)
{
    if (s == NULL)
        return GF_OK;
    atomic_store(&s->closing, 1);
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    uint64_t lost = atomic_load(&s->lost);
    gf_store_destroy(s);
    if (lost > 0)
        return gf_err_set(err, GF_ERR_IO, "store: %llu record(s) were lost (see the log)",
                          (unsigned long long)lost);
    return GF_OK;
}

/* ---- reads ------------------------------------------------------------------------------- */

void gf_store_catalog_free(gf_store_catalog *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->n; i++) {
        gf_store_version_info *v = &c->versions[i];
        free(v->function);
        free(v->kind);
        free(v->manifest);
        free(v->weights_path);
        free(v->state_reason);
    }
    free(c->versions);
    free(c);
}

/* A malloc'd copy of a text column, or NULL for SQL NULL (or no memory). */
static char *gf_store_col_dup(sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    return t != NULL ? strdup((const char *)t) : NULL;
}

gf_status gf_store_catalog_load(gf_store *s, gf_store_catalog **out, gf_err *err)
{
    *out = NULL;
    gf_store_catalog *c = calloc(1, sizeof *c);
    if (c == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "gf_store_catalog_load: out of memory");
    size_t cap = 0;
    gf_status st = GF_OK;
    pthread_mutex_lock(&s->rd_lock);
    sqlite3_stmt *q = s->rd_catalog;
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (c->n == cap) {
            size_t ncap = cap == 0 ? 16 : cap * 2;
            gf_store_version_info *nv =
                ncap > SIZE_MAX / sizeof *nv ? NULL : realloc(c->versions, ncap * sizeof *nv);
            if (nv == NULL) {
                st = gf_err_set(err, GF_ERR_NOMEM, "gf_store_catalog_load: out of memory");
                break;
            }
            c->versions = nv;
            cap = ncap;
        }
        gf_store_version_info *v = &c->versions[c->n];
        memset(v, 0, sizeof *v);
        c->n++;
        v->function = gf_store_col_dup(q, 0);
        v->version = sqlite3_column_int64(q, 1);
        v->kind = gf_store_col_dup(q, 2);
        v->manifest = gf_store_col_dup(q, 3);
        v->weights_path = gf_store_col_dup(q, 4);
        v->bytes = (uint64_t)sqlite3_column_int64(q, 5);
        const char *sha = (const char *)sqlite3_column_text(q, 6);
        snprintf(v->sha256, sizeof v->sha256, "%s", sha != NULL ? sha : "");
        v->created_at_us = sqlite3_column_int64(q, 7);
        v->state = gf_store_vstate_parse((const char *)sqlite3_column_text(q, 8));
        v->state_reason = gf_store_col_dup(q, 9);
        v->current = sqlite3_column_int(q, 10) != 0;
        if (v->function == NULL || v->kind == NULL || v->manifest == NULL ||
            v->weights_path == NULL) {
            st = gf_err_set(err, GF_ERR_NOMEM, "gf_store_catalog_load: out of memory");
            break;
        }
    }
    if (st == GF_OK && rc != SQLITE_DONE) {
        gf_status code = gf_store_sqlite_status(rc);
        st = gf_err_set(err, code == GF_OK ? GF_ERR_INTERNAL : code, "reading the catalog: %s",
                        sqlite3_errmsg(s->rdb));
    }
    sqlite3_reset(q);
    pthread_mutex_unlock(&s->rd_lock);
    if (st != GF_OK) {
        gf_store_catalog_free(c);
        return st;
    }
    *out = c;
    return GF_OK;
}

/* Check one version's weights file; returns a reason (into why) when it is
 * missing or does not match, or "" when it is good. */
static void gf_store_check_weights(const gf_store_version_info *v, const char *base_dir, char *why,
                                   size_t why_len)
{
    why[0] = '\0';
    char *full = NULL;
    const char *path = v->weights_path;
    if (path[0] != '/' && base_dir != NULL) {
        if (asprintf(&full, "%s/%s", base_dir, path) < 0) {
            snprintf(why, why_len, "out of memory resolving the weights path");
            return;
        }
        path = full;
    }
    struct stat sb;
    if (stat(path, &sb) != 0) {
        snprintf(why, why_len, "weights file %s: %s", path,
                 errno == ENOENT ? "missing" : strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        snprintf(why, why_len, "weights file %s is not a regular file", path);
    } else if ((uint64_t)sb.st_size != v->bytes) {
        snprintf(why, why_len, "weights file %s has %lld bytes, recorded %llu", path,
                 (long long)sb.st_size, (unsigned long long)v->bytes);
    } else {
        char hex[GF_SHA256_HEX_LEN];
        gf_err e;
        if (gf_sha256_file(path, hex, NULL, &e) != GF_OK)
            snprintf(why, why_len, "%s", e.msg);
        else if (strcmp(hex, v->sha256) != 0)
            snprintf(why, why_len, "weights file %s has sha256 %s, recorded %s", path, hex,
                     v->sha256);
    }
    free(full);
}

gf_status gf_store_recover(gf_store *s, const char *base_dir, gf_store_catalog **out, gf_err *err)
{
    *out = NULL;
    gf_store_req clear = {.op = GF_REQ_CLEAR_RUN};
    gf_status st = gf_store_submit(s, &clear, err);
    if (st != GF_OK)
        return st;
    gf_store_catalog *c;
    st = gf_store_catalog_load(s, &c, err);
    if (st != GF_OK)
        return st;
    for (size_t i = 0; i < c->n; i++) {
        gf_store_version_info *v = &c->versions[i];
        if (v->state != GF_STORE_VERSION_READY)
            continue;
        char why[GF_ERR_MSG_MAX];
        gf_store_check_weights(v, base_dir, why, sizeof why);
        if (why[0] == '\0')
            continue;
        GF_LOG_W("function '%s' version %lld marked broken: %s", v->function, (long long)v->version,
                 why);
        char *reason = strdup(why);
        if (reason == NULL) {
            st = gf_err_set(err, GF_ERR_NOMEM, "gf_store_recover: out of memory");
            break;
        }
        gf_store_req r = {
            .op = GF_REQ_BROKEN, .function = v->function, .version = v->version, .reason = why};
        st = gf_store_submit(s, &r, err);
        if (st != GF_OK) {
            free(reason);
            break;
        }
        v->state = GF_STORE_VERSION_BROKEN;
        free(v->state_reason);
        v->state_reason = reason;
        c->broken_now++;
    }
    if (st != GF_OK) {
        gf_store_catalog_free(c);
        return st;
    }
    *out = c;
    return GF_OK;
}

/* ---- counters ------------------------------------------------------------------------------ */

void gf_store_stats_get(gf_store *s, gf_store_stats *out)
{
    memset(out, 0, sizeof *out);
    out->enqueued = gf_ring_claimed(&s->ring);
    out->dropped = gf_ring_dropped(&s->ring);
    out->committed = atomic_load_explicit(&s->committed, memory_order_relaxed);
    out->rejected = atomic_load_explicit(&s->rejected, memory_order_relaxed);
    out->lost = atomic_load_explicit(&s->lost, memory_order_relaxed);
    out->commits = atomic_load_explicit(&s->commits, memory_order_relaxed);
    out->admin_ops = atomic_load_explicit(&s->admin_ops, memory_order_relaxed);
    out->retention_deleted = atomic_load_explicit(&s->retention_deleted, memory_order_relaxed);
    out->queue_len = (uint32_t)gf_ring_queued(&s->ring);
    out->queue_cap = s->cfg.queue_cap;
}
