/* gpufaas — the store's insides (store/ only): its state and what its files
 * share.
 *   store.c          statements, open and close, reads (catalog, recovery), counters
 *   store_records.c  the request-path records: handed over (ring.c) and applied
 *   store_thread.c   the store thread: transactions, admin writes, retention
 */
#ifndef GF_STORE_IMPL_H
#define GF_STORE_IMPL_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/ring.h"
#include "store/store.h"

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
    GF_SQL_V_DELETE_ONE,
    GF_SQL_PL_DELETE_VERSION,
    GF_SQL_FN_UNPUBLISH,
    GF_SQL_FN_UNLOADED,
    GF_SQL_V_CHECKED,
    GF_SQL_W_REGISTER,
    GF_SQL_FN_RESIDENCY,
    GF_SQL_RUN_CLEAR_PL,
    GF_SQL_RUN_CLEAR_W,
    /* retention */
    GF_SQL_RET_INV_ROWS,
    GF_SQL_RET_INV_AGE,
    GF_SQL_RET_SWAP_ROWS,
    GF_SQL_RET_SWAP_AGE,
    GF_SQL_COUNT_
};

/* The text of statement id (the store prepares each once; tests read it). */
const char *gf_store_sql_text(enum gf_store_stmt_id id);

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
    /* Last, so a handover copies only strlen + 1 of each. */
    char function[GF_STORE_NAME_MAX + 1];
    char reason[GF_STORE_REASON_MAX + 1]; /* GF_REC_INVOCATION */
} gf_store_rec;

/* A record carries a function name and a refusal reason inline. */
_Static_assert(GF_RING_SLOT_SIZE(sizeof(gf_store_rec)) <= 512,
               "a queue slot should stay within 512 bytes");

typedef enum gf_store_req_op {
    GF_REQ_DEPLOY,
    GF_REQ_PUBLISH,
    GF_REQ_DELETE,
    GF_REQ_BROKEN,
    GF_REQ_VDELETE,
    GF_REQ_CHECKED,
    GF_REQ_WORKER,
    GF_REQ_FLUSH,
    GF_REQ_CLEAR_RUN,
    GF_REQ_RESIDENCY,
    GF_REQ_UNLOADED,
} gf_store_req_op;

/* An admin write, on its caller's stack while the caller waits. */
typedef struct gf_store_req {
    gf_store_req_op op;
    const gf_store_version_spec *spec;  /* GF_REQ_DEPLOY */
    const gf_store_worker_spec *worker; /* GF_REQ_WORKER */
    const char *function;               /* PUBLISH, DELETE, BROKEN, VDELETE, CHECKED, UNLOADED */
    int64_t version;                    /* PUBLISH, BROKEN, VDELETE, CHECKED; DEPLOY: the result */
    const char *reason;                 /* BROKEN */
    const gf_store_file_id *file;       /* CHECKED */
    bool hashed;                        /* CHECKED */
    const gf_residency *residency;      /* RESIDENCY (NULL: back to the manifest's) */
    bool unloaded;                      /* UNLOADED */
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
    sqlite3_stmt *rd_catalog, *rd_functions;

    /* Store thread only. */
    int64_t last_retention_us; /* monotonic */
    int64_t last_drop_report_us;
    uint64_t drops_reported;
    int64_t last_reject_report_us;
    uint64_t rejects_unreported;
    char last_reject[256];
};

/* ---- store.c ---- */

/* A function name as the store accepts it: 1..GF_STORE_NAME_MAX bytes of
 * [A-Za-z0-9_.-], starting with a letter or digit. */
gf_status gf_store_check_name(const char *what, const char *name, gf_err *err);

/* Printable text of 1..max bytes (no control characters). */
gf_status gf_store_check_text(const char *what, const char *s, size_t max, gf_err *err);

/* ---- store_records.c ---- */

/* Step a write statement to completion and reset it. Returns the SQLite
 * code (SQLITE_DONE on success). */
int gf_store_exec(sqlite3_stmt *st);

/* Apply one record. Returns SQLITE_DONE when it changed the database, or
 * another code; *why names the reason when it did not. */
int gf_store_apply(gf_store *s, const gf_store_rec *r, const char **why);

/* Count a record the database refused; log a summary at most once a second. */
void gf_store_note_reject(gf_store *s, const gf_store_rec *r, const char *why);

/* Log drops and rejections since the last report, at most once a second
 * unless force. */
void gf_store_report(gf_store *s, bool force);

/* ---- store_thread.c ---- */

/* The store thread (arg is the store): wait for a full batch, an admin
 * request, a stop or the commit interval, then run one transaction. */
void *gf_store_thread_main(void *arg);

/* Hand r to the store thread and wait for its transaction. Copies the
 * outcome into err. */
gf_status gf_store_submit(gf_store *s, gf_store_req *r, gf_err *err);

#endif /* GF_STORE_IMPL_H */
