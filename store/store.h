/* gpufaas — the state database (store/): one SQLite file, one writer thread.
 *
 * The gateway keeps its live state in memory; this module records it in
 * SQLite so that (a) a restarted gateway gets back every deployed function and
 * (b) an operator can ask "where is model X, what was evicted, how many cold
 * starts" with the sqlite3 command-line tool while the server runs (the views
 * are described in docs/operations.md).
 *
 * Threading contract
 *  - gf_store_open() starts one store thread. It is the only code that writes
 *    the file; it owns the write connection.
 *  - Fire-and-forget records (gf_store_log_*) may be handed over from any
 *    number of threads at once. A handover copies the record into a bounded
 *    lock-free queue: it never takes a lock held across disk I/O, never waits
 *    on the disk and costs well under a microsecond. When the queue is full the
 *    record is dropped: the call returns GF_ERR_BUSY, the drop is counted
 *    (gf_store_stats.dropped) and the store thread logs a warning at most once
 *    a second. Blocking the request path on a slow disk would turn a logging
 *    hiccup into failed requests; losing a few history rows does not.
 *  - The store thread commits queued records in batches: as soon as
 *    batch_max records wait, and at least every commit_interval_ms otherwise
 *    (group commit: one transaction for many records).
 *  - Admin writes (deploy, publish, delete, mark broken, register a worker,
 *    flush, clear run state) are executed by the store thread too; the caller
 *    blocks until the transaction holding its change has been committed and
 *    gets its gf_status. Records a thread handed over before an admin call are
 *    committed no later than that admin change (program order is kept).
 *  - Reads (gf_store_catalog_load) use a separate read-only connection guarded
 *    by a mutex; the request path is not meant to read the database.
 *  - gf_store_close() must not race with other calls on the same store.
 *
 * Times are integer microseconds since the Unix epoch in the tables; the views
 * turn them into readable UTC times.
 *
 * Fault sites (core/fault.h) for tests: "store_open" (a connection),
 * "store_prepare" (a statement), "store_thread" (pthread_create),
 * "store_migrate" (a migration's commit), "store_begin" (BEGIN, seen as a
 * locked database), "store_commit" (COMMIT).
 */
#ifndef GF_STORE_STORE_H
#define GF_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/residency.h"
#include "core/tier.h"
#include "store/sha256.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf_store gf_store;

/* Longest function name the store accepts, in bytes without the NUL. Records
 * carry names inline so a handover never allocates. */
#define GF_STORE_NAME_MAX 127

/* Longest reason an invocation record keeps, in bytes without the NUL; a
 * longer one is cut at a character boundary. */
#define GF_STORE_REASON_MAX 255

/* File name of the database inside the state directory. */
#define GF_STORE_DB_NAME "gpufaas.db"

/* ---- configuration -------------------------------------------------------- */

/* Called on the store thread after each committed transaction. Must be quick
 * and must not call back into the store. records: fire-and-forget records in
 * this transaction; total: records committed since open. */
typedef void (*gf_store_commit_fn)(void *arg, uint64_t records, uint64_t total);

typedef struct gf_store_config {
    int64_t retain_rows;          /* newest invocations (and swap events) kept; < 0 = no limit */
    int64_t retain_age_s;         /* rows older than this are deleted; < 0 = no limit */
    uint32_t batch_max;           /* commit as soon as this many records wait (1 .. 1<<20) */
    uint32_t commit_interval_ms;  /* longest a queued record waits for its commit (1 .. 50) */
    uint32_t busy_timeout_ms;     /* SQLite busy timeout for both connections */
    uint32_t queue_cap;           /* records the queue holds (2 .. 1<<24); rounded up to 2^k */
    uint32_t retention_every_ms;  /* how often retention runs (it also runs on flush) */
    gf_store_commit_fn on_commit; /* optional (NULL); see gf_store_commit_fn */
    void *on_commit_arg;          /* passed to on_commit */
} gf_store_config;

/* Defaults: retain 1,000,000 rows and 7 days, batch_max 1024, commit
 * interval 50 ms, busy timeout 5000 ms, queue 32768 records (512 bytes each:
 * 16 MiB, a third of a second at 100,000 records/s), retention every
 * 1000 ms, no callback. c is caller-owned. */
void gf_store_config_default(gf_store_config *c);

/* ---- open / close --------------------------------------------------------- */

/* "<state_dir>/gpufaas.db", malloc'd into *out (caller frees). state_dir is
 * borrowed. */
gf_status gf_store_default_path(const char *state_dir, char **out, gf_err *err);

/* Open (creating when absent) the database at path (borrowed), switch it to
 * WAL with synchronous=NORMAL, foreign keys on and the busy timeout, migrate
 * its schema forward to the current version, and start the store thread.
 * cfg may be NULL (defaults); it is copied. On success *out owns the store
 * (gf_store_close). Errors: GF_ERR_INVALID (bad config), GF_ERR_FORMAT (not a
 * database), GF_ERR_UNSUPPORTED (schema newer than this build), GF_ERR_BUSY
 * (locked by another writer), GF_ERR_IO, GF_ERR_NOMEM. */
gf_status gf_store_open(const char *path, const gf_store_config *cfg, gf_store **out, gf_err *err);

/* Commit everything queued, stop and join the store thread, close the
 * database and free s (freed whatever the result). NULL is a no-op (GF_OK).
 * GF_ERR_IO when records were lost during the store's life (a failed commit;
 * see gf_store_stats.lost and the log), else GF_OK. No other call on s may
 * run concurrently with or after it. */
gf_status gf_store_close(gf_store *s, gf_err *err);

/* The schema version this build writes (PRAGMA user_version). */
int gf_store_schema_version(void);

/* ---- enumerations (stored as the text shown in the comments) ------------- */

/* Tiers are gf_tier (core/tier.h), stored as gf_tier_name(): 'store', 'host',
 * 'device'. */

typedef enum gf_store_pstate {
    GF_STORE_PLACEMENT_LOADING = 0, /* 'loading': copy in progress */
    GF_STORE_PLACEMENT_READY = 1,   /* 'ready': usable */
} gf_store_pstate;

typedef enum gf_store_wstate {
    GF_STORE_WORKER_STARTING = 0,   /* 'starting' */
    GF_STORE_WORKER_READY = 1,      /* 'ready' */
    GF_STORE_WORKER_RESTARTING = 2, /* 'restarting' */
    GF_STORE_WORKER_STOPPING = 3,   /* 'stopping' */
    GF_STORE_WORKER_DEAD = 4,       /* 'dead' */
} gf_store_wstate;

typedef enum gf_store_vstate {
    GF_STORE_VERSION_READY = 0,   /* 'ready': may be served */
    GF_STORE_VERSION_BROKEN = 1,  /* 'broken': never served (weights missing, bad, ...) */
    GF_STORE_VERSION_DELETED = 2, /* 'deleted': the function was deleted */
} gf_store_vstate;

/* How a request of a function with an SLO fared (invocations.slo); the
 * gateway decides it, once, when the request is answered. */
typedef enum gf_store_slo {
    GF_STORE_SLO_NONE = 0, /* NULL: the function has no SLO */
    GF_STORE_SLO_MET,      /* 'met': answered within it */
    GF_STORE_SLO_COLD,     /* 'cold': late, and its parameters had to be swapped in */
    GF_STORE_SLO_QUEUE,    /* 'queue': late, mostly waiting behind other requests */
    GF_STORE_SLO_EXEC,     /* 'exec': late, mostly running */
    GF_STORE_SLO_FAILED,   /* 'failed': not answered with a result (an error, admission) */
} gf_store_slo;

/* "met", "cold", "queue", "exec", "failed"; "none" for GF_STORE_SLO_NONE. */
const char *gf_store_slo_name(gf_store_slo s);
/* Text of each value as stored in the tables ("ready", "dead", ...). */
const char *gf_store_pstate_name(gf_store_pstate s);
const char *gf_store_wstate_name(gf_store_wstate s);
const char *gf_store_vstate_name(gf_store_vstate s);

/* ---- fire-and-forget records (request path) ------------------------------ */
/* Each gf_store_log_* copies *rec (and the strings it points to) and returns
 * at once. GF_OK: queued. GF_ERR_BUSY: queue full, record dropped and counted.
 * GF_ERR_INVALID: a name longer than GF_STORE_NAME_MAX or an enum out of range
 * (nothing queued). GF_ERR_CLOSED: the store is shutting down. A record the
 * database then refuses (e.g. a placement of an unknown version) is counted
 * in gf_store_stats.rejected and logged, never retried. at_us == 0 means "now"
 * (taken at the handover). */

typedef struct gf_store_invocation {
    const char *function; /* borrowed for the call; "" when the request named none */
    int64_t version;      /* the version that served or refused it; 0 = none resolved */
    int32_t worker;   /* -1 when no worker ran it (stored as NULL) */
    gf_status status; /* stored as gf_status_name(): 'GF_OK', 'GF_ERR_TIMEOUT', ... */
    int32_t http_code;
    int32_t batch_size;
    bool cold; /* had to load the model before running */
    int64_t queue_us, load_us, exec_us, total_us;
    int64_t at_us;      /* when it completed */
    const char *reason; /* why it was refused or failed (borrowed; NULL or "" = none,
                           stored as NULL, as it is for GF_OK); cut to
                           GF_STORE_REASON_MAX bytes */
    int64_t slo_us;     /* the function's SLO then; 0 = none (stored as NULL) */
    gf_store_slo slo;   /* how it fared against it (NONE: stored as NULL) */
} gf_store_invocation;
gf_status gf_store_log_invocation(gf_store *s, const gf_store_invocation *rec);

typedef struct gf_store_swap {
    int32_t worker;
    const char *function; /* borrowed for the call */
    int64_t version;
    gf_tier from, to; /* must differ; to < from is an eviction */
    uint64_t bytes;
    int64_t elapsed_us;
    int64_t at_us;
} gf_store_swap;
gf_status gf_store_log_swap(gf_store *s, const gf_store_swap *rec);

/* Upsert the placement (function, version, worker, tier): sets bytes and
 * state. loaded_at becomes at_us (0 = now) when the placement turns ready
 * (new, or from loading); a repeated "ready" keeps the first load time;
 * "loading" clears it. tier must be HOST or DEVICE (the store tier is every
 * version's weights file and is not a placement). */
typedef struct gf_store_placement {
    const char *function; /* borrowed for the call */
    int64_t version;
    int32_t worker;
    gf_tier tier;
    uint64_t bytes;
    gf_store_pstate state;
    int64_t at_us; /* when it became loading/ready */
} gf_store_placement;
gf_status gf_store_log_placement(gf_store *s, const gf_store_placement *rec);

/* A placement was used: hits += hits, last_used_at = max(last_used_at,
 * at_us). Reads rec's function, version, worker, tier and at_us. Counted as
 * rejected when no such placement exists. */
gf_status gf_store_log_placement_hit(gf_store *s, const gf_store_placement *rec, uint32_t hits);

/* The placement is gone (evicted or unloaded). Reads function, version,
 * worker, tier. */
gf_status gf_store_log_placement_remove(gf_store *s, const gf_store_placement *rec);

/* A worker's state changed (pid < 0: unchanged). */
gf_status gf_store_log_worker_state(gf_store *s, int32_t worker, gf_store_wstate state,
                                    int64_t pid);

/* A heartbeat: budgets and use in bytes, last_heartbeat = at_us. */
typedef struct gf_store_heartbeat {
    int32_t worker;
    uint64_t device_budget, device_used;
    uint64_t host_budget, host_used;
    int64_t at_us;
} gf_store_heartbeat;
gf_status gf_store_log_heartbeat(gf_store *s, const gf_store_heartbeat *rec);

/* A worker process was restarted as pid: restarts += 1, started_at = at_us
 * (0 = now), state 'starting', and its placements are dropped (a new process
 * holds nothing). */
gf_status gf_store_log_restart(gf_store *s, int32_t worker, int64_t pid, int64_t at_us);

/* ---- admin writes (the caller waits for the commit) ----------------------- */

/* What start-up checks of a weights file without reading it: recorded at
 * publish, compared at every start. A file whose identity still matches is
 * trusted until the background check has hashed it; one whose identity
 * changed is hashed before it is served. */
typedef struct gf_store_file_id {
    uint64_t bytes;
    int64_t mtime_ns; /* st_mtim */
    uint64_t inode;   /* st_ino; 0 = unknown */
} gf_store_file_id;

/* The identity of the file at path (borrowed), from stat. GF_ERR_NOT_FOUND
 * when it does not exist, GF_ERR_IO otherwise (also for a file that is not
 * a regular file). */
gf_status gf_store_file_id_of(const char *path, gf_store_file_id *out, gf_err *err);

typedef struct gf_store_version_spec {
    const char *function;     /* [A-Za-z0-9_.-], 1..GF_STORE_NAME_MAX bytes */
    int64_t version;          /* > 0, or 0: one more than the highest so far */
    const char *kind;         /* "mlp", "resnet", ... */
    const char *manifest;     /* JSON text (checked to be one JSON value) */
    const char *weights_path; /* absolute, or relative to the state directory */
    uint64_t bytes;           /* size of the weights file */
    const char *sha256;       /* 64 lowercase hex digits */
    bool publish;             /* also make it the current version, atomically */
    gf_store_file_id file;    /* the file as it was published (inode 0: unknown, so
                                 the next start hashes it) */
} gf_store_version_spec;

/* Record a new version (creating the function, or reviving a deleted one).
 * All strings are borrowed for the call. *version_out (may be NULL) gets the
 * version number. GF_ERR_EXISTS when that version exists, GF_ERR_INVALID on a
 * bad field (the message names it). */
gf_status gf_store_version_deploy(gf_store *s, const gf_store_version_spec *spec,
                                  int64_t *version_out, gf_err *err);

/* Make version the one served for function (borrowed). GF_ERR_NOT_FOUND when
 * absent, GF_ERR_STATE when broken or deleted. */
gf_status gf_store_version_publish(gf_store *s, const char *function, int64_t version, gf_err *err);

/* Delete one version: it becomes 'deleted' (its row and its history stay),
 * its placements go, and when it was current nothing is current. The
 * number is never given again (gf_store_function_info.max_version). Which
 * version may be deleted is the caller's rule (gateway/core/versions.c).
 * GF_ERR_NOT_FOUND when absent or already deleted. */
gf_status gf_store_version_delete(gf_store *s, const char *function, int64_t version, gf_err *err);

/* The version's file was found to be what was published: record its
 * identity now (*id, borrowed) and, when hashed, checked_at = now. A broken
 * or deleted version is left alone. GF_ERR_NOT_FOUND when absent. */
gf_status gf_store_version_checked(gf_store *s, const char *function, int64_t version,
                                   const gf_store_file_id *id, bool hashed, gf_err *err);

/* Delete a function: its versions become 'deleted', nothing is current, its
 * placements go. History (invocations, swap events) stays. The name may be
 * deployed again; version numbers continue. GF_ERR_NOT_FOUND when absent or
 * already deleted. */
gf_status gf_store_function_delete(gf_store *s, const char *function, gf_err *err);

/* Record the function's run-time residency override (functions.pin,
 * .priority, .keep_warm_us); r NULL clears it (back to the manifest's).
 * GF_ERR_NOT_FOUND for a function that does not exist. */
gf_status gf_store_function_residency(gf_store *s, const char *function, const gf_residency *r,
                                      gf_err *err);
/* Record that a function was unloaded through the repository API (unloaded
 * true: it stays UNAVAILABLE across restarts) or loaded again (false). A
 * publish (deploy, activate) clears it too. GF_ERR_NOT_FOUND when the
 * function is absent or deleted. */
gf_status gf_store_function_unloaded(gf_store *s, const char *function, bool unloaded,
                                     gf_err *err);

/* Mark a version broken (never served) with a reason (borrowed, may be NULL).
 * GF_ERR_NOT_FOUND when absent. The current version pointer is kept, so an
 * operator sees which version was meant to be served. */
gf_status gf_store_version_mark_broken(gf_store *s, const char *function, int64_t version,
                                       const char *reason, gf_err *err);

typedef struct gf_store_worker_spec {
    int32_t id;         /* the gateway's worker number, >= 0 */
    const char *device; /* "cuda:0", "cpu:1" (borrowed) */
    int64_t pid;
    uint64_t device_budget; /* bytes */
    uint64_t host_budget;   /* bytes */
} gf_store_worker_spec;

/* Insert or update a worker (state 'starting', started_at now, use 0). */
gf_status gf_store_worker_register(gf_store *s, const gf_store_worker_spec *w, gf_err *err);

/* Wait until every record handed over before this call is committed, and
 * apply retention now. */
gf_status gf_store_flush(gf_store *s, gf_err *err);

/* ---- recovery and reads ---------------------------------------------------- */

typedef struct gf_store_version_info {
    char *function; /* owned by the catalog */
    int64_t version;
    char *kind;
    char *manifest;
    char *weights_path; /* as recorded */
    uint64_t bytes;
    char sha256[GF_SHA256_HEX_LEN];
    int64_t created_at_us;
    gf_store_vstate state;
    char *state_reason; /* NULL unless broken */
    bool current;       /* the function's published version */
    gf_store_file_id file; /* as recorded (inode 0: never recorded) */
    int64_t checked_at_us; /* when its sha256 last matched; 0 = never */
    bool hashed_now;       /* gf_store_recover hashed it (its identity had changed) and
                              it matched */
    bool has_residency;     /* the function's run-time residency override is set: */
    gf_residency residency; /* (function-wide, repeated on each of its versions) */
} gf_store_version_info;

/* A function name ever deployed, deleted or not. */
typedef struct gf_store_function_info {
    char *name;          /* owned by the catalog */
    int64_t max_version; /* the highest version number it ever had (deleted ones too) */
    bool deleted;
    bool unloaded;       /* unloaded through the repository API (gf_store_function_unloaded) */
} gf_store_function_info;

typedef struct gf_store_catalog {
    gf_store_version_info *versions; /* ordered by function, version */
    size_t n;
    gf_store_function_info *functions; /* ordered by name */
    size_t n_functions;
    size_t broken_now; /* versions gf_store_recover marked broken */
    size_t hashed_now; /* files gf_store_recover read (their identity had changed) */
} gf_store_catalog;

/* Every version whose state is not 'deleted', and every function name, from
 * the read connection. *out owns the result (gf_store_catalog_free). */
gf_status gf_store_catalog_load(gf_store *s, gf_store_catalog **out, gf_err *err);

/* The weights path of v resolved against base_dir (borrowed, may be NULL =
 * as recorded), malloc'd; NULL when out of memory. */
char *gf_store_version_path(const gf_store_version_info *v, const char *base_dir);

/* How hard gf_store_file_check looks at a version's file. */
typedef enum gf_store_check_depth {
    GF_STORE_CHECK_QUICK = 0, /* stat: present, a regular file, the recorded size; the
                                 sha256 only when the identity differs from the recorded */
    GF_STORE_CHECK_FULL = 1,  /* the sha256 always */
} gf_store_check_depth;

/* The outcome of a check. */
typedef struct gf_store_check_result {
    bool ok;             /* the file is the one published */
    bool hashed;         /* its sha256 was computed (and matched when ok) */
    gf_store_file_id id; /* what stat says now (valid when the file exists) */
    char why[GF_ERR_MSG_MAX]; /* when !ok: missing, size, sha256, a read error */
} gf_store_check_result;

/* Check the file at path (borrowed: v's resolved path) against what v
 * recorded: the one decision, for start-up (QUICK), the background check and
 * fsck (FULL). GF_OK when the check ran (out->ok is the verdict);
 * GF_ERR_CLOSED when *stop (borrowed, may be NULL) became true while it
 * hashed; GF_ERR_NOMEM. No SQLite is touched. */
gf_status gf_store_file_check(const char *path, const gf_store_version_info *v,
                              gf_store_check_depth depth, const _Atomic bool *stop,
                              gf_store_check_result *out);

/* Start-up recovery, before any worker runs: clear the placements and workers
 * of the previous run, then check each 'ready' version's weights file
 * (relative paths resolved against base_dir, borrowed, may be NULL = cwd)
 * with GF_STORE_CHECK_QUICK: O(versions) stats, no reads, unless a file's
 * identity changed (then it is hashed, and its new identity recorded when
 * it matches). Missing, of the wrong size, or (hashed) with the wrong
 * sha256 -> marked broken with the reason, logged as a warning. *out gets
 * the catalog after the checks. The full hash of the others is the
 * caller's background check (gf_store_file_check, FULL). */
gf_status gf_store_recover(gf_store *s, const char *base_dir, gf_store_catalog **out, gf_err *err);

/* Free a catalog. NULL is a no-op. */
void gf_store_catalog_free(gf_store_catalog *c);

/* ---- counters -------------------------------------------------------------- */

typedef struct gf_store_stats {
    uint64_t enqueued;          /* records accepted by gf_store_log_* */
    uint64_t dropped;           /* records refused because the queue was full */
    uint64_t committed;         /* records committed */
    uint64_t rejected;          /* records the database refused (constraint), skipped */
    uint64_t lost;              /* records in transactions that failed to commit */
    uint64_t commits;           /* transactions committed (counted by SQLite's commit hook) */
    uint64_t admin_ops;         /* admin writes executed */
    uint64_t retention_deleted; /* rows removed by retention */
    uint32_t queue_len;         /* records waiting now */
    uint32_t queue_cap;         /* capacity of the queue */
} gf_store_stats;

/* A consistent-enough snapshot of the counters (each read atomically). */
void gf_store_stats_get(gf_store *s, gf_store_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* GF_STORE_STORE_H */
