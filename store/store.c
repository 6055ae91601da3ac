/* gpufaas — the state database: its statements, open and close, reads
 * (the catalog, recovery at start) and counters. The records and the store
 * thread are store_records.c and store_thread.c; store_impl.h has the state.
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

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "core/fault.h"
#include "core/log.h"
#include "core/residency.h"
#include "store/schema.h"
#include "store/store_impl.h"

static const char *const gf_store_sql[GF_SQL_COUNT_] = {
    [GF_SQL_BEGIN] = "BEGIN IMMEDIATE",
    [GF_SQL_COMMIT] = "COMMIT",
    [GF_SQL_ROLLBACK] = "ROLLBACK",
    [GF_SQL_SAVEPOINT] = "SAVEPOINT gf_admin",
    [GF_SQL_RELEASE] = "RELEASE gf_admin",
    [GF_SQL_ROLLBACK_TO] = "ROLLBACK TO gf_admin",
    [GF_SQL_INV_INSERT] =
        "INSERT INTO invocations (function, version, worker_id, status, http_code, batch_size,"
        " cold, queue_us, load_us, exec_us, total_us, at, reason, slo_us, slo)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
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
                         " ON CONFLICT (name) DO UPDATE SET deleted_at = NULL, unloaded_at = NULL",
    [GF_SQL_V_NEXT] =
        "SELECT COALESCE(MAX(version), 0) + 1 FROM function_versions WHERE function = ?1",
    [GF_SQL_V_INSERT] = "INSERT INTO function_versions (function, version, kind, manifest,"
                        " weights_path, bytes, sha256, created_at, file_mtime_ns, file_inode,"
                        " checked_at)"
                        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?8)",
    [GF_SQL_V_STATE] = "SELECT state FROM function_versions WHERE function = ?1 AND version = ?2",
    [GF_SQL_FN_PUBLISH] = "UPDATE functions SET current_version = ?2, unloaded_at = NULL"
                          " WHERE name = ?1",
    [GF_SQL_FN_DELETE] = "UPDATE functions SET deleted_at = ?2, current_version = NULL"
                         " WHERE name = ?1 AND deleted_at IS NULL",
    [GF_SQL_V_DELETE_ALL] = "UPDATE function_versions SET state = 'deleted' WHERE function = ?1",
    [GF_SQL_PL_DELETE_FN] = "DELETE FROM placements WHERE function = ?1",
    [GF_SQL_V_BROKEN] = "UPDATE function_versions SET state = 'broken', state_reason = ?3"
                        " WHERE function = ?1 AND version = ?2 AND state <> 'deleted'",
    [GF_SQL_V_DELETE_ONE] = "UPDATE function_versions SET state = 'deleted'"
                            " WHERE function = ?1 AND version = ?2 AND state <> 'deleted'",
    [GF_SQL_PL_DELETE_VERSION] = "DELETE FROM placements WHERE function = ?1 AND version = ?2",
    [GF_SQL_FN_UNPUBLISH] = "UPDATE functions SET current_version = NULL"
                            " WHERE name = ?1 AND current_version = ?2",
    /* ?2: when, or NULL: loaded again */
    [GF_SQL_FN_UNLOADED] = "UPDATE functions SET unloaded_at = ?2"
                           " WHERE name = ?1 AND deleted_at IS NULL",
    /* ?5: hashed, so checked_at moves; the identity is recorded either way */
    [GF_SQL_V_CHECKED] = "UPDATE function_versions SET file_mtime_ns = ?3, file_inode = ?4,"
                         " checked_at = CASE WHEN ?5 THEN ?6 ELSE checked_at END"
                         " WHERE function = ?1 AND version = ?2 AND state = 'ready'",
    [GF_SQL_W_REGISTER] =
        "INSERT INTO workers (id, device, pid, state, device_budget, host_budget, started_at)"
        " VALUES (?1, ?2, ?3, 'starting', ?4, ?5, ?6)"
        " ON CONFLICT (id) DO UPDATE SET device = excluded.device, pid = excluded.pid,"
        " state = 'starting', device_budget = excluded.device_budget, device_used = 0,"
        " host_budget = excluded.host_budget, host_used = 0, started_at = excluded.started_at,"
        " last_heartbeat = NULL",
    /* NULLs: back to the manifest's residency */
    [GF_SQL_FN_RESIDENCY] = "UPDATE functions SET pin = ?2, priority = ?3, keep_warm_us = ?4"
                            " WHERE name = ?1 AND deleted_at IS NULL",
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

const char *gf_store_sql_text(enum gf_store_stmt_id id)
{
    return id >= 0 && id < GF_SQL_COUNT_ ? gf_store_sql[id] : NULL;
}

/* On the read-only connection. */
static const char gf_store_sql_catalog[] =
    "SELECT v.function, v.version, v.kind, v.manifest, v.weights_path, v.bytes, v.sha256,"
    " v.created_at, v.state, v.state_reason, (f.current_version IS v.version),"
    " v.file_mtime_ns, v.file_inode, v.checked_at, f.pin, f.priority, f.keep_warm_us"
    " FROM function_versions v JOIN functions f ON f.name = v.function"
    " WHERE v.state <> 'deleted' ORDER BY v.function, v.version";
static const char gf_store_sql_functions[] =
    "SELECT f.name, (SELECT COALESCE(MAX(v.version), 0) FROM function_versions v"
    "  WHERE v.function = f.name), f.deleted_at IS NOT NULL, f.unloaded_at IS NOT NULL"
    " FROM functions f ORDER BY f.name";

/* ---- small helpers ----------------------------------------------------------- */


const char *gf_store_slo_name(gf_store_slo s)
{
    static const char *const names[] = {"none", "met", "cold", "queue", "exec", "failed"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "none";
}

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
gf_status gf_store_check_name(const char *what, const char *name, gf_err *err)
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
gf_status gf_store_check_text(const char *what, const char *s, size_t max, gf_err *err)
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
    sqlite3_finalize(s->rd_functions);
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
    if ((st = gf_store_prepare(s->rdb, gf_store_sql_catalog, &s->rd_catalog, err)) != GF_OK ||
        (st = gf_store_prepare(s->rdb, gf_store_sql_functions, &s->rd_functions, err)) != GF_OK)
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
    for (size_t i = 0; i < c->n_functions; i++)
        free(c->functions[i].name);
    free(c->versions);
    free(c->functions);
    free(c);
}

/* A malloc'd copy of a text column, or NULL for SQL NULL (or no memory). */
static char *gf_store_col_dup(sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    return t != NULL ? strdup((const char *)t) : NULL;
}

/* Make room for one more element of size sz in *arr (n used, *cap). */
static bool gf_store_grow(void **arr, size_t n, size_t *cap, size_t sz)
{
    if (n < *cap)
        return true;
    size_t ncap = *cap == 0 ? 16 : *cap * 2;
    void *na = ncap > SIZE_MAX / sz ? NULL : realloc(*arr, ncap * sz);
    if (na == NULL)
        return false;
    *arr = na;
    *cap = ncap;
    return true;
}

/* One row of the catalog query into v (zeroed here). False when out of
 * memory. */
static bool gf_store_read_version(sqlite3_stmt *q, gf_store_version_info *v)
{
    memset(v, 0, sizeof *v);
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
    v->file.bytes = v->bytes;
    v->file.mtime_ns = sqlite3_column_int64(q, 11);
    int64_t ino = sqlite3_column_int64(q, 12);
    v->file.inode = ino > 0 ? (uint64_t)ino : 0;
    v->checked_at_us = sqlite3_column_int64(q, 13);
    v->has_residency = sqlite3_column_type(q, 14) != SQLITE_NULL;
    v->residency = GF_RESIDENCY_DEFAULT;
    if (v->has_residency) {
        v->residency.pin = sqlite3_column_int(q, 14) != 0;
        const char *pr = (const char *)sqlite3_column_text(q, 15);
        if (pr == NULL || gf_priority_parse(pr, &v->residency.priority, NULL) != GF_OK)
            v->residency.priority = GF_PRIORITY_NORMAL;
        int64_t kw = sqlite3_column_int64(q, 16);
        v->residency.keep_warm_us = kw > 0 ? (uint64_t)kw : 0;
    }
    return v->function != NULL && v->kind != NULL && v->manifest != NULL &&
           v->weights_path != NULL;
}

gf_status gf_store_catalog_load(gf_store *s, gf_store_catalog **out, gf_err *err)
{
    *out = NULL;
    gf_store_catalog *c = calloc(1, sizeof *c);
    if (c == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "gf_store_catalog_load: out of memory");
    size_t cap = 0, fcap = 0;
    gf_status st = GF_OK;
    pthread_mutex_lock(&s->rd_lock);
    /* one read transaction, so that the versions and the functions agree */
    sqlite3_exec(s->rdb, "BEGIN", NULL, NULL, NULL);
    sqlite3_stmt *q = s->rd_catalog;
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (!gf_store_grow((void **)&c->versions, c->n, &cap, sizeof *c->versions)) {
            st = gf_err_set(err, GF_ERR_NOMEM, "gf_store_catalog_load: out of memory");
            break;
        }
        if (!gf_store_read_version(q, &c->versions[c->n++])) {
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
    q = s->rd_functions;
    while (st == GF_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (!gf_store_grow((void **)&c->functions, c->n_functions, &fcap, sizeof *c->functions)) {
            st = gf_err_set(err, GF_ERR_NOMEM, "gf_store_catalog_load: out of memory");
            break;
        }
        gf_store_function_info *f = &c->functions[c->n_functions++];
        f->name = gf_store_col_dup(q, 0);
        f->max_version = sqlite3_column_int64(q, 1);
        f->deleted = sqlite3_column_int(q, 2) != 0;
        f->unloaded = sqlite3_column_int(q, 3) != 0;
        if (f->name == NULL)
            st = gf_err_set(err, GF_ERR_NOMEM, "gf_store_catalog_load: out of memory");
    }
    if (st == GF_OK && rc != SQLITE_DONE) {
        gf_status code = gf_store_sqlite_status(rc);
        st = gf_err_set(err, code == GF_OK ? GF_ERR_INTERNAL : code, "reading the functions: %s",
                        sqlite3_errmsg(s->rdb));
    }
    sqlite3_reset(q);
    sqlite3_exec(s->rdb, "COMMIT", NULL, NULL, NULL);
    pthread_mutex_unlock(&s->rd_lock);
    if (st != GF_OK) {
        gf_store_catalog_free(c);
        return st;
    }
    *out = c;
    return GF_OK;
}

char *gf_store_version_path(const gf_store_version_info *v, const char *base_dir)
{
    if (v->weights_path[0] == '/' || base_dir == NULL)
        return strdup(v->weights_path);
    char *full = NULL;
    return asprintf(&full, "%s/%s", base_dir, v->weights_path) < 0 ? NULL : full;
}

gf_status gf_store_file_id_of(const char *path, gf_store_file_id *out, gf_err *err)
{
    memset(out, 0, sizeof *out);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        int e = errno;
        return gf_err_set(err, e == ENOENT ? GF_ERR_NOT_FOUND : GF_ERR_IO, "weights file %s: %s",
                          path, e == ENOENT ? "missing" : strerror(e));
    }
    if (!S_ISREG(sb.st_mode))
        return gf_err_set(err, GF_ERR_IO, "weights file %s is not a regular file", path);
    out->bytes = (uint64_t)sb.st_size;
    out->mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
    out->inode = (uint64_t)sb.st_ino;
    return GF_OK;
}

gf_status gf_store_file_check(const char *path, const gf_store_version_info *v,
                              gf_store_check_depth depth, const _Atomic bool *stop,
                              gf_store_check_result *out)
{
    memset(out, 0, sizeof *out);
    gf_err e;
    if (gf_store_file_id_of(path, &out->id, &e) != GF_OK) {
        snprintf(out->why, sizeof out->why, "%s", e.msg);
        return GF_OK;
    }
    if (out->id.bytes != v->bytes) {
        snprintf(out->why, sizeof out->why, "weights file %s has %llu bytes, recorded %llu", path,
                 (unsigned long long)out->id.bytes, (unsigned long long)v->bytes);
        return GF_OK;
    }
    bool same = v->file.inode != 0 && v->file.inode == out->id.inode &&
                v->file.mtime_ns == out->id.mtime_ns;
    if (depth == GF_STORE_CHECK_QUICK && same) {
        out->ok = true;
        return GF_OK;
    }
    char hex[GF_SHA256_HEX_LEN];
    gf_status st = gf_sha256_file_until(path, stop, hex, NULL, &e);
    if (st == GF_ERR_CLOSED || st == GF_ERR_NOMEM)
        return st;
    out->hashed = true;
    if (st != GF_OK)
        snprintf(out->why, sizeof out->why, "%s", e.msg);
    else if (strcmp(hex, v->sha256) != 0)
        snprintf(out->why, sizeof out->why, "weights file %s has sha256 %s, recorded %s", path,
                 hex, v->sha256);
    else
        out->ok = true;
    return GF_OK;
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
    gf_store_check_result *chk = malloc(sizeof *chk);
    if (chk == NULL) {
        gf_store_catalog_free(c);
        return gf_err_set(err, GF_ERR_NOMEM, "gf_store_recover: out of memory");
    }
    for (size_t i = 0; i < c->n && st == GF_OK; i++) {
        gf_store_version_info *v = &c->versions[i];
        if (v->state != GF_STORE_VERSION_READY)
            continue;
        char *path = gf_store_version_path(v, base_dir);
        st = path == NULL ? gf_err_set(err, GF_ERR_NOMEM, "gf_store_recover: out of memory")
                          : gf_store_file_check(path, v, GF_STORE_CHECK_QUICK, NULL, chk);
        free(path);
        if (st != GF_OK)
            break;
        c->hashed_now += chk->hashed;
        if (chk->ok && chk->hashed) {
            /* its identity had changed (a copy, a restore, a first start after
             * an upgrade): the content is right, remember the file as it is */
            v->hashed_now = true;
            v->file = chk->id;
            gf_err e2;
            if (gf_store_version_checked(s, v->function, v->version, &chk->id, true, &e2) ==
                GF_OK)
                v->checked_at_us = gf_wall_us();
            else
                GF_LOG_W("function '%s' version %lld: recording its file: %s", v->function,
                         (long long)v->version, e2.msg);
        }
        if (chk->ok)
            continue;
        GF_LOG_W("function '%s' version %lld marked broken: %s", v->function, (long long)v->version,
                 chk->why);
        char *reason = strdup(chk->why);
        if (reason == NULL) {
            st = gf_err_set(err, GF_ERR_NOMEM, "gf_store_recover: out of memory");
            break;
        }
        gf_store_req r = {.op = GF_REQ_BROKEN,
                          .function = v->function,
                          .version = v->version,
                          .reason = chk->why};
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
    free(chk);
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
