/* gpufaas — the worker's insides (runtime/worker only): its state and what
 * its files share. One file per thread (worker.h lists them):
 *   start.c    the command line, start-up, the run, shutdown and freeing
 *   reader.c   frames in: answered at once, queued, or run on the quick path
 *   exec.c     the executor: leases and INFER on the compute stream
 *   admin.c    LOAD and UNLOAD: kind load, derived parameters, the cache
 *   events.c   the cache's residency changes as EVENT frames
 *   worker.c   what they share: the model table, stopping, frames out
 *
 * Locks, in the only order they may nest:
 *   cache lock (inside gf_cache_*) -> w->lock -> w->ev_lock
 * w->lock is never held while calling into the cache or the functions
 * runtime, so the cache's event callback may take it. w->wlock (one frame at
 * a time on the socket) is taken with no other lock held.
 */
#ifndef GF_WORKER_IMPL_H
#define GF_WORKER_IMPL_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cache/cache.h"
#include "core/buf.h"
#include "functions/manifest.h"
#include "functions/runtime.h"
#include "ipc.h"
#include "worker/worker.h"

#define GF_WORKER_BUCKETS 256
#define GF_WORKER_EVQ_MAX 4096     /* queued EVENTs before new ones are dropped */
#define GF_WORKER_BUSY_WAIT_MS 100 /* wait for cache progress when an acquire is BUSY ... */
#define GF_WORKER_BUSY_TRIES 50    /* ... this many times before answering ERROR */
#define GF_WORKER_INLINE_US 100    /* warm requests this quick may run on the reader */
#define GF_WORKER_AHEAD 8          /* queued requests whose leases are taken ahead */

/* ---- state ------------------------------------------------------------------ */

typedef enum { WM_PREPARING = 0, WM_READY = 1, WM_FAILED = 2 } wm_prep;

/* A function version on this worker. Fields marked (L) are under w->lock;
 * mf/plan/cm are written by the admin thread before prep becomes READY and
 * are read-only afterwards. */
typedef struct wmodel {
    struct wmodel *next; /* (L) bucket chain */
    char *key;
    wm_prep prep;          /* (L) */
    bool unloading;        /* (L) an UNLOAD was received: hidden from lookups */
    bool in_table;         /* (L) */
    int refs;              /* (L) the table, queued requests and admin jobs */
    int pending;           /* (L) INFER requests queued or running */
    uint64_t loaded_at_us; /* (L) when the last device load of it completed */
    double exec_us;        /* (L) moving average of its function time (core/ema.h), 0 = unknown */
    char *manifest_text;   /* as received, for comparing a repeated LOAD */
    size_t manifest_len;
    char *weights_path;
    char *plugin_path; /* "" for built-in kinds */
    gf_manifest *mf;
    gf_fn_plan *plan; /* borrows mf */
    gf_cache_model *cm;
    gf_status fail_code; /* when prep is FAILED */
    char fail_msg[GF_ERR_MSG_MAX];
} wmodel;

/* The pinned ring INFER payloads are read into and outputs copied back to (pinned.c). */
typedef struct wk_pinned {
    pthread_mutex_t lock;
    gf_backend *be;
    struct pin_hdr *free_list; /* buffers given back, for the next payloads */
    size_t pooled;             /* bytes of them */
    size_t total;              /* pinned bytes allocated (free or in use), <= limit */
    size_t limit;
} wk_pinned;

#define GF_WORKER_PINNED_LIMIT ((size_t)64 << 20)

void wk_pinned_init(wk_pinned *p, gf_backend *be, size_t limit);
/* After every payload it gave was freed. */
void wk_pinned_deinit(wk_pinned *p);
/* gf_ipc_payload_alloc's functions (ctx = the wk_pinned). */
void *wk_pinned_alloc(void *ctx, uint32_t type, size_t size);
void wk_pinned_free(void *ctx, void *payload);
/* gf_fn_host_alloc's: an output's host buffer (pinned when the ring has room). */
void *wk_pinned_alloc_out(void *ctx, size_t size);

/* A queued INFER. Owned by the queue, then by the executor. */
typedef struct wreq {
    struct wreq *next, *prev;
    uint64_t id;
    wmodel *m;          /* a reference */
    gf_ipc_frame frame; /* owns the payload the tensors point into */
    gf_ipc_infer msg;
    uint64_t t_recv_us;
    gf_lease *lease; /* (w->lock while queued) acquired ahead, or at its turn */
    uint64_t ahead_gen; /* w->progress + 1 when a lease ahead found the cache BUSY (0: never) */
    uint64_t t_swap_wait_us; /* when ready-first first held it back for its swap-in (0: never) */
} wreq;

/* A mapping of a system shared memory object (shm.c). */
#define WK_SHM_MAPS 16
typedef struct wk_shm_map {
    char key[GF_IPC_MAX_SHM_KEY + 1];
    dev_t dev;
    ino_t ino;
    void *base; /* the whole object; NULL: a free slot */
    size_t len;
    uint64_t used; /* when last used (the cache's tick) */
    int users;     /* requests using it now: not unmapped meanwhile */
    bool forgotten; /* SHM_FORGET came while in use: unmapped by its last user */
} wk_shm_map;

typedef struct wk_shm_cache {
    pthread_mutex_t lock;
    wk_shm_map m[WK_SHM_MAPS];
    uint64_t tick;
} wk_shm_cache;

typedef enum { JOB_LOAD = 0, JOB_UNLOAD = 1, JOB_RESIDENCY = 2 } job_kind;

typedef struct wjob {
    struct wjob *next;
    job_kind kind;
    uint64_t id;
    wmodel *m; /* a reference */
    int32_t tier;
    gf_residency res; /* JOB_RESIDENCY */
} wjob;

typedef struct wevent {
    gf_ipc_event ev;
    char *key, *msg; /* owned */
} wevent;

struct gf_worker {
    gf_worker_config cfg;
    char *device; /* owned copies of cfg strings */
    char *state_dir;
    char *derived_dir;
    int fd;
    gf_backend *be;
    gf_cache *cache;
    wk_pinned pinned;      /* INFER payloads (set up once be is open) */
    bool pinned_init;
    uint64_t t_start_us;
    int sig_fd, wake_fd; /* eventfds: a signal arrived / a thread finished */
    struct sigaction old_term, old_int;
    bool handlers_set;

    pthread_mutex_t lock;
    pthread_cond_t exec_cond;     /* queue, model readiness, stop */
    pthread_cond_t admin_cond;    /* jobs, pending counts, stop */
    pthread_cond_t progress_cond; /* the cache made progress (a load ended, a lease left) */
    uint64_t progress;
    wmodel *buckets[GF_WORKER_BUCKETS];
    wreq *q_head, *q_tail;
    uint64_t q_len;
    wjob *j_head, *j_tail;
    bool draining; /* SHUTDOWN/SIGTERM: refuse new work, exit when idle */
    bool stopping; /* EOF, malformed frame, I/O error: drop queued work, exit */
    int exit_code;
    char stop_why[192]; /* why requests are refused while stopping ("" = the default) */
    bool exec_done, admin_done;
    uint64_t n_requests, n_errors;
    bool ahead_pending;  /* a lease ahead is being acquired: the queue must stay */
    bool exec_acquiring; /* the executor waits for room: take nothing ahead */
    wmodel *running;     /* the model of the request running now (executor or reader) */
    bool reader_running; /* the reader runs a quick request itself (see handle_infer) */

    wk_shm_cache shm; /* shared memory objects of tensors sent by reference */

    pthread_mutex_t wlock;
    bool write_failed; /* under wlock */

    pthread_mutex_t ev_lock;
    pthread_cond_t ev_cond;
    wevent *evq;
    size_t ev_head, ev_count;
    uint64_t ev_seq, ev_sent, ev_dropped;
    bool ev_stop;

    pthread_t exec_thread, admin_thread, ev_thread;
    bool exec_started, admin_started, ev_started;
};

/* ---- worker.c ---- */

/* Enter the stopping state (EOF, malformed frame, I/O error): queued work is
 * dropped and every thread winds down. The first reason sets the exit code. */
void wk_begin_stop(gf_worker *w, int code);

/* After a device call failed (st): when the device is lost for good (a
 * CUDA fault left the context unusable, gf_backend_lost), nothing this
 * process does can use it again. Stop as on end of stream (queued requests
 * are answered GF_ERR_CLOSED: 503, try again) and exit with
 * GF_WORKER_EXIT_DEVICE, so the supervisor starts a fresh worker with a new
 * context. Notes it in err. Returns true when the device is lost. No lock
 * held. */
bool wk_device_lost(gf_worker *w, gf_status st, gf_err *err);

char *wk_dup_str(const char *s);

/* Wait until the cache made progress since generation gen (a load ended, a
 * lease was released), the worker stops, or GF_WORKER_BUSY_WAIT_MS pass. */
void wk_progress_wait(gf_worker *w, uint64_t gen);

void wk_reply_empty(gf_worker *w, gf_buf *b, gf_ipc_type type, uint64_t id);

void wk_reply_error(gf_worker *w, gf_buf *b, uint64_t id, gf_status code, const char *msg);

/* Write the frame in b (one whole frame) and empty b. No lock may be held. A
 * failed write means the gateway is gone: the worker stops. */
gf_status wk_send_buf(gf_worker *w, gf_buf *b);

/* An INFER's answer, built by wk_run_request and sent by wk_send_answer: a
 * RESULT in gather form (b holds its header and fields, g its segments, the
 * tensors' data being outs' host buffers, written with writev: no copy), or
 * any frame whole in b (g->n == 0). */
typedef struct wk_answer {
    gf_buf *b;
    gf_ipc_gather *g;
    gf_fn_outputs outs; /* what g points into; freed once sent */
} wk_answer;

/* Write a's frame (wk_send_buf's rules) and empty it. */
gf_status wk_send_answer(gf_worker *w, wk_answer *a);

/* Encode with `st` (an encoder's result) and send; a failed encode is logged. */
void wk_send_encoded(gf_worker *w, gf_buf *b, gf_status st, const gf_err *err, const char *what);

void wk_send_ready(gf_worker *w, gf_buf *b, uint64_t id);

void wk_send_stats(gf_worker *w, gf_buf *b, uint64_t id);

/* What a refused or dropped request is told while the worker stops. w->lock
 * held; copied into buf. */
const char *wk_stop_message(gf_worker *w, const char *dflt, char *buf, size_t cap);

/* The live (not unloading) version named key, or NULL. */
wmodel *wk_table_find(gf_worker *w, const char *key);

/* Any version named key with cache state (unloading ones included), or NULL. */
wmodel *wk_table_find_cached(gf_worker *w, const char *key);

void wk_table_insert(gf_worker *w, wmodel *m);

void wk_table_remove(gf_worker *w, wmodel *m);

void wk_wake_main(gf_worker *w);

void wk_wmodel_free(wmodel *m);

/* Drop a reference; the last one frees the entry (its cache and plan state
 * must already be released). */
void wk_wmodel_unref(wmodel *m);

/* ---- events.c ---- */

void *wk_events_main(void *arg);

/* The cache's callback: runs with the cache lock held, on the thread where
 * the change happened. Records load completion for RESULT timings, wakes
 * waiters, and queues an EVENT (hits are only counted, in STATS). */
void wk_on_cache_event(void *arg, const gf_cache_event *ev);

/* ---- admin.c ---- */

void *wk_admin_main(void *arg);

/* Release what the admin thread built for m (cache model, plan, manifest). */
void wk_release_model_state(gf_worker *w, wmodel *m);

/* ---- exec.c ---- */

void *wk_exec_main(void *arg);

/* Lease the models of the first GF_WORKER_AHEAD queued requests, in queue
 * order, so that every swap-in they need starts on the copy stream as soon
 * as they arrive and runs while the compute stream runs the requests before
 * them (overlap across requests), and so that no model a queued request
 * needs is evicted to make room for another. A BUSY cache leaves a request
 * to load at its turn (or when a lease is given back). Called by the
 * executor once its request holds a lease, and by the reader when a request
 * arrives. No lock held. */
void wk_lease_ahead(gf_worker *w);

void wk_request_free(gf_worker *w, wreq *r);

/* When r's parameters must be on the device for it to meet its function's
 * SLO (its receipt + slo_ms less the function's measured execution time),
 * the deadline its lease gives the cache's loader; 0 without an SLO.
 * w->lock held. */
uint64_t wk_request_due(const gf_worker *w, const wreq *r);

/* Run cur and leave its answer (RESULT or ERROR) encoded in b, unsent: the
 * caller first marks the device free, so that the next request, which may
 * arrive as soon as the answer is out, finds it so. */
void wk_run_request(gf_worker *w, wreq *cur, wk_answer *a);

/* ---- shm.c ---- */

void wk_shm_init(wk_shm_cache *c);
void wk_shm_deinit(wk_shm_cache *c);

/* The span [offset, offset + size) of shared memory object key, mapped
 * read-write: *out points at it and *held is the mapping it lies in (NULL
 * for an empty object), to give back with wk_shm_release when the request
 * is done. GF_ERR_INVALID (the request's: naming `what`, the object and the
 * sizes) when the object cannot be opened or mapped or the span lies past
 * its end now; GF_ERR_BUSY when WK_SHM_MAPS mappings are all in use. */
gf_status wk_shm_span(wk_shm_cache *c, const char *what, const char *key, uint64_t offset,
                      uint64_t size, void **out, wk_shm_map **held, gf_err *err);

/* NULL is a no-op. A mapping forgotten meanwhile is unmapped by its last user. */
void wk_shm_release(wk_shm_cache *c, wk_shm_map *m);

/* SHM_FORGET: unmap object key now, or (in use) when its last user releases it. */
void wk_shm_forget(wk_shm_cache *c, const char *key);

/* Objects mapped now (STATS shm_mappings). */
uint64_t wk_shm_count(wk_shm_cache *c);

/* ---- reader.c ---- */

/* What handling a frame returns when the worker goes on (else an exit code). */
typedef enum { RD_CONTINUE = -1 } rd_result;

void wk_begin_drain(gf_worker *w);

/* Read and handle frames until the socket would block. Returns RD_CONTINUE,
 * or an exit code when reading must stop. */
int wk_read_frames(gf_worker *w, gf_ipc_reader *rd, gf_buf *b);

#endif /* GF_WORKER_IMPL_H */
