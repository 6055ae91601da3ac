/* gpufaas — the store's schema: one table of migrations (see schema.h).
 *
 * Conventions for every table and view here:
 *  - times are INTEGER microseconds since the Unix epoch, columns named *_at;
 *    durations are INTEGER microseconds, columns named *_us; sizes are bytes;
 *  - the views show times as UTC text ('2026-11-29 19:21:28.123') and sizes
 *    in MiB, for a person reading them in sqlite3;
 *  - enumerations are short lowercase words checked by CHECK constraints.
 *
 * To change the schema, append a migration; never edit one that shipped.
 */
#include "schema.h"

#include <stdio.h>

#include "core/fault.h"
#include "core/log.h"

/* A time column as readable UTC text with milliseconds. */
#define GF_T(col) "strftime('%Y-%m-%d %H:%M:%f', " col " / 1e6, 'unixepoch')"
/* Now, in microseconds since the epoch (second resolution is enough here). */
#define GF_NOW_US "(CAST(strftime('%s', 'now') AS INTEGER) * 1000000)"
/* A size in bytes as MiB with one decimal. */
#define GF_MIB(col) "ROUND(" col " / 1048576.0, 1)"
/* Order of the tiers, slowest first: a swap to a higher rank is a load. */
#define GF_TIER_RANK(col) "(CASE " col " WHEN 'device' THEN 2 WHEN 'host' THEN 1 ELSE 0 END)"

/* One SQL line per source line reads best: */
/* clang-format off */
static const char gf_store_schema_v1[] =
    /* A function is a name; what it runs is its current version. */
    "CREATE TABLE functions (\n"
    "    name            TEXT PRIMARY KEY NOT NULL,\n"
    "    current_version INTEGER,           -- the version served; NULL when none\n"
    "    created_at      INTEGER NOT NULL,  -- first deployed\n"
    "    deleted_at      INTEGER,           -- NULL while the function exists\n"
    "    FOREIGN KEY (name, current_version) REFERENCES function_versions (function, version)\n"
    ");\n"
    "CREATE TABLE function_versions (\n"
    "    function     TEXT NOT NULL REFERENCES functions (name),\n"
    "    version      INTEGER NOT NULL CHECK (version > 0),\n"
    "    kind         TEXT NOT NULL,             -- built-in kind or plugin: mlp, resnet, ...\n"
    "    manifest     TEXT NOT NULL,             -- the manifest, JSON text\n"
    "    weights_path TEXT NOT NULL,             -- absolute or relative to the state dir\n"
    "    bytes        INTEGER NOT NULL CHECK (bytes >= 0),\n"
    "    sha256       TEXT NOT NULL CHECK (length(sha256) = 64),\n"
    "    created_at   INTEGER NOT NULL,\n"
    "    state        TEXT NOT NULL DEFAULT 'ready'\n"
    "                 CHECK (state IN ('ready', 'broken', 'deleted')),\n"
    "    state_reason TEXT,                      -- why it is broken\n"
    "    PRIMARY KEY (function, version)\n"
    ") WITHOUT ROWID;\n"
    /* Workers of the current run (cleared at start: they are new processes). */
    "CREATE TABLE workers (\n"
    "    id             INTEGER PRIMARY KEY,    -- the gateway's worker number\n"
    "    device         TEXT NOT NULL,          -- cuda:0, cpu:1, ...\n"
    "    pid            INTEGER,\n"
    "    state          TEXT NOT NULL\n"
    "                   CHECK (state IN ('starting', 'ready', 'restarting', 'stopping', 'dead')),\n"
    "    device_budget  INTEGER NOT NULL DEFAULT 0 CHECK (device_budget >= 0),\n"
    "    device_used    INTEGER NOT NULL DEFAULT 0 CHECK (device_used >= 0),\n"
    "    host_budget    INTEGER NOT NULL DEFAULT 0 CHECK (host_budget >= 0),\n"
    "    host_used      INTEGER NOT NULL DEFAULT 0 CHECK (host_used >= 0),\n"
    "    started_at     INTEGER NOT NULL,\n"
    "    last_heartbeat INTEGER,\n"
    "    restarts       INTEGER NOT NULL DEFAULT 0\n"
    ");\n"
    /* Where each version's parameters live now, beyond the store tier. */
    "CREATE TABLE placements (\n"
    "    function     TEXT NOT NULL,\n"
    "    version      INTEGER NOT NULL,\n"
    "    worker_id    INTEGER NOT NULL REFERENCES workers (id) ON DELETE CASCADE,\n"
    "    tier         TEXT NOT NULL CHECK (tier IN ('host', 'device')),\n"
    "    bytes        INTEGER NOT NULL CHECK (bytes >= 0),\n"
    "    state        TEXT NOT NULL CHECK (state IN ('loading', 'ready')),\n"
    "    loaded_at    INTEGER,                  -- when it became ready; NULL while loading\n"
    "    last_used_at INTEGER,\n"
    "    hits         INTEGER NOT NULL DEFAULT 0,\n"
    "    PRIMARY KEY (function, version, worker_id, tier),\n"
    "    FOREIGN KEY (function, version) REFERENCES function_versions (function, version)\n"
    ") WITHOUT ROWID;\n"
    "CREATE INDEX placements_by_worker ON placements (worker_id);\n"
    /* History, bounded by retention (rows and age). No foreign keys: history
     * outlives workers and functions, and inserts stay cheap. */
    "CREATE TABLE invocations (\n"
    "    id         INTEGER PRIMARY KEY,         -- in insertion order\n"
    "    function   TEXT NOT NULL,\n"
    "    version    INTEGER NOT NULL,\n"
    "    worker_id  INTEGER,                     -- NULL when no worker ran it\n"
    "    status     TEXT NOT NULL,               -- 'GF_OK' or the error's name\n"
    "    http_code  INTEGER NOT NULL,\n"
    "    batch_size INTEGER NOT NULL,\n"
    "    cold       INTEGER NOT NULL CHECK (cold IN (0, 1)),\n"
    "    queue_us   INTEGER NOT NULL,\n"
    "    load_us    INTEGER NOT NULL,\n"
    "    exec_us    INTEGER NOT NULL,\n"
    "    total_us   INTEGER NOT NULL,\n"
    "    at         INTEGER NOT NULL             -- when it completed\n"
    ");\n"
    "CREATE INDEX invocations_by_at ON invocations (at);\n"
    "CREATE INDEX invocations_by_function ON invocations (function, at);\n"
    "CREATE TABLE swap_events (\n"
    "    id         INTEGER PRIMARY KEY,\n"
    "    worker_id  INTEGER NOT NULL,\n"
    "    function   TEXT NOT NULL,\n"
    "    version    INTEGER NOT NULL,\n"
    "    from_tier  TEXT NOT NULL CHECK (from_tier IN ('store', 'host', 'device')),\n"
    "    to_tier    TEXT NOT NULL CHECK (to_tier IN ('store', 'host', 'device')),\n"
    "    bytes      INTEGER NOT NULL CHECK (bytes >= 0),\n"
    "    elapsed_us INTEGER NOT NULL,\n"
    "    at         INTEGER NOT NULL,\n"
    "    CHECK (from_tier <> to_tier)\n"
    ");\n"
    "CREATE INDEX swap_events_by_at ON swap_events (at);\n"
    /* Where each live version is now: one row per placement, or one 'store'
     * row when it is only on disk. */
    "CREATE VIEW v_placement AS\n"
    "SELECT v.function,\n"
    "       v.version,\n"
    "       (f.current_version IS v.version) AS current,\n"
    "       COALESCE(p.tier, 'store') AS tier,\n"
    "       p.worker_id AS worker,\n"
    "       w.device,\n"
    "       COALESCE(p.state, v.state) AS state,\n"
    "       " GF_MIB("COALESCE(p.bytes, v.bytes)") " AS mib,\n"
    "       p.hits,\n"
    "       " GF_T("p.loaded_at") " AS loaded_at,\n"
    "       " GF_T("p.last_used_at") " AS last_used_at\n"
    "FROM function_versions v\n"
    "JOIN functions f ON f.name = v.function\n"
    "LEFT JOIN placements p ON p.function = v.function AND p.version = v.version\n"
    "LEFT JOIN workers w ON w.id = p.worker_id\n"
    "WHERE v.state <> 'deleted'\n"
    "ORDER BY v.function, v.version, " GF_TIER_RANK("p.tier") " DESC, p.worker_id;\n"
    /* Per function over the last hour. Percentiles are nearest-rank over
     * total_us of every request (errors included). */
    "CREATE VIEW v_function_stats AS\n"
    "WITH recent AS (\n"
    "    SELECT function, status, cold, queue_us, exec_us, total_us,\n"
    "           ROW_NUMBER() OVER (PARTITION BY function ORDER BY total_us) AS rn,\n"
    "           COUNT(*) OVER (PARTITION BY function) AS n\n"
    "    FROM invocations\n"
    "    WHERE at >= " GF_NOW_US " - 3600000000\n"
    ")\n"
    "SELECT function,\n"
    "       COUNT(*) AS requests,\n"
    "       SUM(status <> 'GF_OK') AS errors,\n"
    "       SUM(cold) AS cold_starts,\n"
    "       ROUND(100.0 * SUM(cold) / COUNT(*), 1) AS cold_pct,\n"
    "       ROUND(MAX(CASE WHEN rn = (n * 50 + 99) / 100 THEN total_us END) / 1000.0, 3)"
    " AS p50_ms,\n"
    "       ROUND(MAX(CASE WHEN rn = (n * 99 + 99) / 100 THEN total_us END) / 1000.0, 3)"
    " AS p99_ms,\n"
    "       ROUND(AVG(queue_us) / 1000.0, 3) AS avg_queue_ms,\n"
    "       ROUND(AVG(exec_us) / 1000.0, 3) AS avg_exec_ms\n"
    "FROM recent\n"
    "GROUP BY function\n"
    "ORDER BY requests DESC, function;\n"
    /* Budget, use (as last reported by the worker) and free space per tier. */
    "CREATE VIEW v_worker_memory AS\n"
    "SELECT w.id AS worker, w.device, w.state, t.tier,\n"
    "       " GF_MIB("t.budget") " AS budget_mib,\n"
    "       " GF_MIB("t.used") " AS used_mib,\n"
    "       " GF_MIB("MAX(t.budget - t.used, 0)") " AS free_mib,\n"
    "       (SELECT COUNT(*) FROM placements p\n"
    "         WHERE p.worker_id = w.id AND p.tier = t.tier) AS models,\n"
    "       " GF_T("w.last_heartbeat") " AS last_heartbeat\n"
    "FROM workers w\n"
    "JOIN (SELECT id, 'device' AS tier, device_budget AS budget, device_used AS used\n"
    "        FROM workers\n"
    "      UNION ALL\n"
    "      SELECT id, 'host', host_budget, host_used FROM workers) t ON t.id = w.id\n"
    "ORDER BY w.id, " GF_TIER_RANK("t.tier") " DESC;\n"
    /* Swaps of the last hour, newest first. direction 'in' = towards the
     * device, 'out' = an eviction. */
    "CREATE VIEW v_recent_swaps AS\n"
    "SELECT " GF_T("s.at") " AS at,\n"
    "       s.worker_id AS worker, s.function, s.version, s.from_tier, s.to_tier,\n"
    "       CASE WHEN " GF_TIER_RANK("s.to_tier") " > " GF_TIER_RANK("s.from_tier") "\n"
    "            THEN 'in' ELSE 'out' END AS direction,\n"
    "       " GF_MIB("s.bytes") " AS mib,\n"
    "       ROUND(s.elapsed_us / 1000.0, 3) AS ms,\n"
    "       CASE WHEN s.elapsed_us > 0 THEN ROUND(s.bytes / 1000.0 / s.elapsed_us, 2) END"
    " AS gb_per_s\n"
    "FROM swap_events s\n"
    "WHERE s.at >= " GF_NOW_US " - 3600000000\n"
    "ORDER BY s.at DESC, s.id DESC;\n";

/* Every answered inference request is one invocations row, refused ones
 * included: why it was refused (or failed) is kept with it. A version's
 * weights file is known at start by its size, mtime and inode (recorded at
 * publish, checked without reading the file) and its sha256 is re-checked in
 * the background: checked_at says when it last matched. */
static const char gf_store_schema_v2[] =
    "ALTER TABLE invocations ADD COLUMN reason TEXT;  -- why it was refused or failed; NULL when OK\n"
    "ALTER TABLE function_versions ADD COLUMN file_mtime_ns INTEGER;  -- the file at publish\n"
    "ALTER TABLE function_versions ADD COLUMN file_inode INTEGER;\n"
    "ALTER TABLE function_versions ADD COLUMN checked_at INTEGER;  -- its sha256 last matched\n";

/* Issue 21, density: each invocation's SLO and how it fared, the run-time
 * residency override, and the views that say which functions meet their SLO
 * and why not. */
static const char gf_store_schema_v3[] =
    "ALTER TABLE invocations ADD COLUMN slo_us INTEGER;  -- the SLO then; NULL when none\n"
    "ALTER TABLE invocations ADD COLUMN slo TEXT\n"
    "    CHECK (slo IN ('met', 'cold', 'queue', 'exec', 'failed'));  -- NULL when no SLO\n"
    /* the run-time residency override (PUT /v1/functions/{name}/residency);
     * NULL: the current version's manifest decides */
    "ALTER TABLE functions ADD COLUMN pin INTEGER CHECK (pin IN (0, 1));\n"
    "ALTER TABLE functions ADD COLUMN priority TEXT CHECK (priority IN ('low', 'normal', 'high'));\n"
    "ALTER TABLE functions ADD COLUMN keep_warm_us INTEGER CHECK (keep_warm_us >= 0);\n"
    /* Per function and version over the last hour: the requests that met
     * their SLO, and the misses by what made them late. */
    "CREATE VIEW v_function_slo AS\n"
    "SELECT function,\n"
    "       version,\n"
    "       COUNT(*) AS requests,\n"
    "       SUM(slo IS NOT NULL) AS with_slo,\n"
    "       SUM(slo = 'met') AS met,\n"
    "       SUM(slo IS NOT NULL AND slo <> 'met') AS missed,\n"
    "       ROUND(100.0 * SUM(slo = 'met') / NULLIF(SUM(slo IS NOT NULL), 0), 2) AS met_pct,\n"
    "       SUM(cold) AS cold,\n"
    "       SUM(slo = 'cold') AS missed_cold,\n"
    "       SUM(slo = 'queue') AS missed_queue,\n"
    "       SUM(slo = 'exec') AS missed_exec,\n"
    "       SUM(slo = 'failed') AS missed_failed,\n"
    "       ROUND(MAX(slo_us) / 1000.0, 2) AS slo_ms\n"
    "FROM invocations\n"
    "WHERE at >= " GF_NOW_US " - 3600000000\n"
    "GROUP BY function, version;\n"
    /* What keeps each live function on the device: the run-time override
     * when set, else its current version's manifest. */
    "CREATE VIEW v_residency AS\n"
    "SELECT f.name AS function,\n"
    "       f.current_version AS version,\n"
    "       CASE WHEN f.pin IS NOT NULL THEN f.pin\n"
    "            ELSE COALESCE(json_extract(v.manifest, '$.residency.pin'), 0) END AS pin,\n"
    "       CASE WHEN f.pin IS NOT NULL THEN f.priority\n"
    "            ELSE COALESCE(json_extract(v.manifest, '$.residency.priority'), 'normal') END"
    " AS priority,\n"
    "       CASE WHEN f.pin IS NOT NULL THEN f.keep_warm_us / 1e6\n"
    "            ELSE COALESCE(json_extract(v.manifest, '$.residency.keep_warm_s'), 0) END"
    " AS keep_warm_s,\n"
    "       CASE WHEN f.pin IS NOT NULL THEN 'api' ELSE 'manifest' END AS source,\n"
    "       json_extract(v.manifest, '$.slo_ms') AS slo_ms\n"
    "FROM functions f\n"
    "LEFT JOIN function_versions v ON v.function = f.name AND v.version = f.current_version\n"
    "WHERE f.deleted_at IS NULL;\n";
/* A function unloaded through the repository API stays unloaded (UNAVAILABLE)
 * across restarts until a load, a deploy or an activation. */
static const char gf_store_schema_v4[] =
    "ALTER TABLE functions ADD COLUMN unloaded_at INTEGER;  -- NULL while it may serve\n";
/* invocations.slo's CHECK as a chain of equalities: SQLite evaluates an IN
 * list of three or more values through an ephemeral table that it opens and
 * frees on every insert (~4.5 us of the store thread's time per request);
 * equalities accept and refuse the same values (NULL included) without it.
 * The constraint changes, the stored rows do not: the table's definition is
 * edited in place (SQLite's "ALTER TABLE" page, the procedure for changes that
 * leave the on-disk content alone; gf_store_edit_schema does the rest). */
static const char gf_store_schema_v5[] =
    "UPDATE sqlite_schema SET sql = replace(sql,"
    " 'CHECK (slo IN (''met'', ''cold'', ''queue'', ''exec'', ''failed''))',"
    " 'CHECK (slo = ''met'' OR slo = ''cold'' OR slo = ''queue'' OR slo = ''exec'''"
    " || ' OR slo = ''failed'')')"
    " WHERE type = 'table' AND name = 'invocations'"
    " AND instr(sql, 'CHECK (slo IN (''met'', ''cold'', ''queue'', ''exec'', ''failed''))') > 0";
/* clang-format on */

const gf_store_migration gf_store_migrations[] = {
    {1,
     "initial schema: functions, versions, workers, placements, invocations, swap events "
     "and the operator views",
     gf_store_schema_v1, false},
    {2,
     "invocations.reason (refused requests are recorded too); the weights file's identity "
     "(size, mtime, inode) and when its sha256 was last checked",
     gf_store_schema_v2, false},
    {3, "invocations.slo_us and .slo, the functions' residency override, v_function_slo, "
        "v_residency",
     gf_store_schema_v3, false},
    {4, "functions.unloaded_at (a repository unload lasts across restarts)", gf_store_schema_v4,
     false},
    {5, "invocations.slo checked by equalities, not IN (no ephemeral table per insert)",
     gf_store_schema_v5, true},
};
const size_t gf_store_migrations_n = sizeof gf_store_migrations / sizeof gf_store_migrations[0];

gf_status gf_store_sqlite_status(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
        return GF_OK;
    case SQLITE_NOMEM:
        return GF_ERR_NOMEM;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return GF_ERR_BUSY;
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
    case SQLITE_FORMAT:
        return GF_ERR_FORMAT;
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
    case SQLITE_TOOBIG:
        return GF_ERR_INVALID;
    case SQLITE_PERM:
    case SQLITE_AUTH:
    case SQLITE_READONLY:
        return GF_ERR_PERMISSION;
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_FULL:
    case SQLITE_PROTOCOL:
        return GF_ERR_IO;
    default:
        return GF_ERR_INTERNAL;
    }
}

gf_status gf_store_schema_get_version(sqlite3 *db, int *out, gf_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        gf_status code = gf_store_sqlite_status(rc);
        if (code == GF_OK)
            code = GF_ERR_INTERNAL;
        gf_err_set(err, code, "reading user_version: %s", sqlite3_errmsg(db));
        sqlite3_finalize(st);
        return code;
    }
    *out = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return GF_OK;
}

/* Run m->sql, one UPDATE of sqlite_schema that changes at most one row, as
 * SQLite's procedure for definition changes that leave the stored rows alone
 * says (inside the caller's transaction): writable_schema on, the UPDATE,
 * schema_version + 1 (every connection re-reads the schema), off. A file
 * whose definition is not the one expected keeps it (with a warning): the
 * change is an optimisation, and the file is valid either way. */
static gf_status gf_store_edit_schema(sqlite3 *db, const gf_store_migration *m, gf_err *err)
{
    sqlite3_stmt *q = NULL;
    int version = -1;
    int rc = sqlite3_prepare_v2(db, "PRAGMA schema_version", -1, &q, NULL);
    if (rc == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
        version = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    if (version < 0)
        return gf_err_set(err, GF_ERR_INTERNAL, "migration %d: reading schema_version: %s",
                          m->version, sqlite3_errmsg(db));
    gf_status st = GF_OK;
    rc = sqlite3_exec(db, "PRAGMA writable_schema = ON", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, m->sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        st = gf_err_set(err, gf_store_sqlite_status(rc), "migration %d (%s): %s", m->version,
                        m->summary, sqlite3_errmsg(db));
    bool changed = st == GF_OK && sqlite3_changes(db) == 1;
    if (st == GF_OK && !changed) /* edited by hand? a valid file all the same: keep it */
        GF_LOG_W("store: migration %d (%s): the definition it changes is not the one expected "
                 "in this file; left as it is", m->version, m->summary);
    if (changed) {
        char pragma[64];
        snprintf(pragma, sizeof pragma, "PRAGMA schema_version = %d", version + 1);
        rc = sqlite3_exec(db, pragma, NULL, NULL, NULL);
        if (rc != SQLITE_OK)
            st = gf_err_set(err, gf_store_sqlite_status(rc), "migration %d: %s: %s",
                            m->version, pragma, sqlite3_errmsg(db));
    }
    sqlite3_exec(db, "PRAGMA writable_schema = OFF", NULL, NULL, NULL);
    return st;
}

/* Apply migration m inside one write transaction, unless another process did
 * it first. */
static gf_status gf_store_migrate_step(sqlite3 *db, const gf_store_migration *m, gf_err *err)
{
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return gf_err_set(err, gf_store_sqlite_status(rc), "migration %d: BEGIN: %s", m->version,
                          sqlite3_errmsg(db));
    int have = 0;
    gf_status st = gf_store_schema_get_version(db, &have, err);
    if (st != GF_OK)
        goto fail;
    if (have >= m->version) {
        sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
        return GF_OK;
    }
    if (m->edits_schema) {
        st = gf_store_edit_schema(db, m, err);
        if (st != GF_OK)
            goto fail;
    } else {
        char *msg = NULL;
        rc = sqlite3_exec(db, m->sql, NULL, NULL, &msg);
        if (rc != SQLITE_OK) {
            st = gf_err_set(err, gf_store_sqlite_status(rc), "migration %d (%s): %s",
                            m->version, m->summary, msg != NULL ? msg : sqlite3_errstr(rc));
            sqlite3_free(msg);
            goto fail;
        }
    }
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", m->version);
    rc = sqlite3_exec(db, pragma, NULL, NULL, NULL);
    if (rc == SQLITE_OK && GF_FAULT("store_migrate")) {
        st = gf_err_set(err, GF_ERR_IO, "migration %d: commit: injected fault", m->version);
        goto fail;
    }
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        st = gf_err_set(err, gf_store_sqlite_status(rc), "migration %d: commit: %s", m->version,
                        sqlite3_errmsg(db));
        goto fail;
    }
    return GF_OK;
fail:
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return st;
}

gf_status gf_store_schema_migrate(sqlite3 *db, int target, gf_err *err)
{
    if (target < 1 || (size_t)target > gf_store_migrations_n)
        return gf_err_set(err, GF_ERR_INVALID, "schema version %d does not exist (1..%zu)", target,
                          gf_store_migrations_n);
    int have = 0;
    gf_status st = gf_store_schema_get_version(db, &have, err);
    if (st != GF_OK)
        return st;
    if (have > target)
        return gf_err_set(err, GF_ERR_UNSUPPORTED,
                          "database schema version %d is newer than this build's %d", have, target);
    for (size_t i = 0; i < gf_store_migrations_n; i++) {
        const gf_store_migration *m = &gf_store_migrations[i];
        if (m->version <= have || m->version > target)
            continue;
        st = gf_store_migrate_step(db, m, err);
        if (st != GF_OK)
            return st;
    }
    return GF_OK;
}
