/* gpufaas — the gateway core's internal structures (gateway/core only). */
#ifndef GF_GATEWAY_CORE_INTERNAL_H
#define GF_GATEWAY_CORE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "core/clock.h"
#include "core/floatfmt.h"
#include "functions/manifest.h"
#include "gateway/core/gateway.h"
#include "gateway/core/metrics.h"
#include "gateway/core/oneshot.h"
#include "gateway/core/versions.h"
#include "runtime/ipc.h"
#include "store/store.h"

#define GW_MAX_WORKERS 64
/* How often the supervisor hands the store the placements' hits: SQLite is
 * at most this plus a group commit (50 ms) behind GET /v1/placements. */
#define GW_HITS_FLUSH_US 500000u

typedef struct gw_worker gw_worker;
typedef struct gw_frame gw_frame;
typedef struct gw_version gw_version;
typedef struct gw_function gw_function;
typedef struct gw_sync gw_sync;

/* One inference request, from submit to its result. */
typedef struct gw_req {
    struct gw_req *next;     /* in the version's queue or a batch */
    gw_version *v;           /* pinned (a reference) */
    gf_gw_tensor *inputs;    /* manifest order, owned */
    int64_t rows;            /* its share of the batch dimension (1 without one) */
    uint64_t want;           /* the outputs it asked for: bit i = manifest output i */
    gf_ipc_shm_dest *dests;  /* its outputs placed in shared memory (keys borrowed from
                                the submitter until answered), malloc'd; NULL: none */
    uint32_t n_dests;
    bool alone;              /* shared memory by reference: never batched with others */
    gf_gw_done_fn done;
    void *done_arg;
    uint64_t t_submit_us;
    uint64_t deadline_us;    /* answered GF_ERR_DEADLINE past it, wherever it is */
    gf_gw_result *res;       /* allocated at submit, so answering never needs memory */
    bool expired;            /* in a batch, answered at its deadline (gw->lock); the
                                batch no longer answers it */
    atomic_int release;      /* expired: the sweep and the batch each add one when done
                                with it; the second frees it */
} gw_req;

/* Every output of mf, as a gw_req.want mask. */
_Static_assert(GF_MANIFEST_MAX_IO <= 64, "output masks are 64 bits");
static inline uint64_t gw_all_outputs(const gf_manifest *mf)
{
    return mf->n_outputs >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << mf->n_outputs) - 1;
}

/* A batch of requests sent as one INFER. */
typedef struct gw_batch {
    struct gw_batch *next;   /* in a worker's in-flight list or a pending list */
    gw_version *v;           /* pinned */
    gw_req *reqs;            /* linked in submit order */
    uint32_t n_reqs;
    int64_t rows;
    uint64_t want;           /* the outputs its requests asked for (the union), all
                                that the INFER asks the worker for and it returns */
    uint64_t id;             /* INFER request id */
    int worker;              /* where it was sent, -1 before */
    int attempts;            /* sends so far (a dead worker's batch is retried once) */
    double est_us;           /* the router's estimate, counted in the worker's queue */
    uint64_t t_dispatch_us;
    gw_frame *frame;         /* the encoded INFER, kept until the answer (for a retry) */
} gw_batch;

/* Where a version stands on one worker. */
typedef enum {
    GW_PL_NONE = 0,      /* not registered on the worker */
    GW_PL_LOADING,       /* LOAD sent, LOADED not yet back */
    GW_PL_REGISTERED,    /* the worker knows it */
} gw_pl_state;

/* A copy of a version's parameters in one tier of one worker: one row of
 * SQLite's placements table, of GET /v1/placements and of v_placement, all
 * written from here (placements.c). */
typedef struct gw_copy {
    bool present;            /* the worker reported it loaded (or ran the model from it) */
    uint64_t bytes;          /* what it holds, as the worker reported */
    uint64_t hits;           /* uses: requests run from a device copy; swap-ins to the
                                device a host copy fed */
    uint64_t hits_flushed;   /* of them, handed to the store (written within a second) */
    int64_t loaded_at_us;    /* wall clock */
    int64_t last_used_us;    /* wall clock; 0 = not used yet */
} gw_copy;

/* The copies a placement can have: host and device (the store tier is the
 * version's file, never a placement). */
#define GW_COPY_HOST 0
#define GW_COPY_DEVICE 1

typedef struct gw_placement {
    gw_pl_state state;
    int tier;                /* GF_TIER_* it is in now (from EVENTs) */
    uint64_t load_id;        /* request id of the LOAD in flight */
    int load_tier;           /* the highest GF_TIER_* a LOAD in flight asked for */
    gw_batch *waiting;       /* batches waiting for LOADED */
    double exec_us;          /* moving average (core/ema.h) of exec time per batch here */
    gw_copy copy[2];         /* GW_COPY_HOST, GW_COPY_DEVICE */
} gw_placement;

/* gw_version.mslots: the series a version's answers update every time
 * (stats.c: a phase's count and seconds, 2 per phase; accounting.c). */
enum {
    GW_SLOT_PHASES = 0,
    GW_SLOT_INFERENCES = 12,
    GW_SLOT_LAST_INFERENCE,
    GW_SLOT_REQUESTS_200, /* gpufaas_requests_total{code="200"} */
    GW_SLOT_DURATION,
    GW_SLOT_QUEUE,
    GW_VERSION_SLOTS
};

struct gw_version {
    gw_function *fn;
    int64_t version;
    char ver[GF_FMT_INT_MAX]; /* version as text: the label of its /metrics series */
    gf_manifest *mf;
    char *manifest_json;     /* canonical */
    char *weights_path;      /* absolute */
    char sha256[65];
    uint64_t bytes;
    uint64_t device_bytes;   /* device pages it takes, from LOADED (0 until known) */
    uint64_t host_bytes;     /* host tier bytes it takes, from LOADED (0 until known) */
    char key[96];            /* "name@version", the worker's model key */
    gf_store_vstate state;
    char *reason;            /* why broken */
    gf_store_file_id file;   /* the weights file's identity, as last checked */
    bool verified;           /* its sha256 was checked in this run (gw->lock) */
    bool checking;           /* a check is hashing it now (gw->lock) */
    atomic_int refs;         /* the registry's (until deleted) + one per pinned
                                request/batch/load; the last one frees it and its
                                /metrics series */
    gf_gw *gw;               /* whose metrics hold its series, and counts it */
    bool batchable;          /* every input's dim 0 is -1: requests can be concatenated */
    /* batcher (gw->qlock) */
    gw_req *q_head, *q_tail;
    size_t q_len;
    int64_t q_rows;
    bool in_ready_list;
    /* router (gw->lock) */
    gw_placement pl[GW_MAX_WORKERS];
    double exec_us;          /* moving average (core/ema.h) over all workers */
    /* the series its answers update, remembered (stats.c; the metrics' lock) */
    gw_metric_slot mslots[GW_VERSION_SLOTS];
};

struct gw_function {
    char name[64];
    char *kind;
    gw_version **versions;   /* ascending; the live ones (a deleted one leaves at once:
                                gw_registry_drop; the requests pinning it keep it alive) */
    size_t n, cap;
    gw_version *current;     /* published, or NULL */
    bool deleted;
    bool unloaded;           /* the repository extension unloaded it: UNAVAILABLE (not
                                ready, infer refused) until a load or a deploy */
    int64_t max_version;     /* the highest number the name ever had (versions.h) */
    bool has_res;            /* a run-time residency override is set (PUT .../residency) */
    gf_residency res;        /* it, when set; else each version's manifest decides */
    atomic_size_t held;      /* requests held, from submit to free (the queue limit) */
};

typedef enum {
    GW_W_STARTING = 0,
    GW_W_UP,
    GW_W_DOWN,      /* died; a restart is scheduled */
    GW_W_FAILED,    /* exited with the do-not-respawn code, or the gateway stops */
} gw_wstate;

/* An encoded frame, shared by a batch (kept for a retry) and a send queue:
 * its own bytes, or (gather form) its header and fields in data and the
 * tensors' bytes where they lie (request bodies, concatenated batches),
 * kept alive by its holds and written with writev. */
struct gw_frame {
    atomic_int refs;
    size_t len;        /* bytes on the wire */
    char *data;        /* the frame (iov NULL), or its own segments' bytes */
    struct iovec *iov; /* gather form: n_iov segments; NULL: data[0, len) */
    int n_iov;
    gf_hold **holds;   /* references on what the segments point into */
    size_t n_holds;
};

/* Take over the bytes of b (b is left empty); NULL on OOM (b untouched). */
gw_frame *gw_frame_adopt(gf_buf *b);
/* The gather form: b (g's own bytes, left empty) and the n holds (their
 * references taken over, the array copied); NULL on OOM (nothing taken). */
gw_frame *gw_frame_adopt_gather(gf_buf *b, const gf_ipc_gather *g, gf_hold *const *holds,
                                size_t n);
void gw_frame_unref(gw_frame *f);

typedef struct gw_send {
    struct gw_send *next;
    gw_frame *frame;
    size_t off; /* bytes of it already written (by gw_worker_send) */
} gw_send;

/* A LOAD waiting for its answer. */
typedef struct gw_pending_load {
    struct gw_pending_load *next;
    uint64_t id;
    gw_version *v;          /* pinned */
} gw_pending_load;

struct gw_worker {
    gf_gw *gw;
    int id;
    char device[32];
    gw_wstate state;
    pid_t pid;
    int fd;
    pthread_t reader;
    bool reader_running;
    pthread_mutex_t wlock;   /* one whole frame at a time on fd */
    gf_ipc_ready ready;      /* strings below are copies */
    char device_name[128];
    pthread_t writer;
    bool writer_running;
    pthread_mutex_t slock;   /* the send queue */
    pthread_cond_t scond;
    gw_send *sq_head, *sq_tail;
    bool sq_stop;            /* the writer should exit */
    bool sq_dead;            /* the writer failed: frames sent now are dropped */
    bool sq_writing;         /* the writer is writing a frame (outside slock) */
    gw_pending_load *loads;  /* LOADs in flight */
    bool exited;             /* the process was reaped */
    int exit_code;           /* when exited: its status (128 + signal when killed) */
    bool conn_closed;        /* the reader saw the end of the stream */
    gw_batch *inflight;      /* batches sent and not answered */
    uint32_t n_inflight;
    double queued_us;        /* the router's estimate of work queued here */
    gf_ipc_stats stats;
    bool have_stats;
    int restarts;
    uint64_t restart_at_us;  /* when DOWN: when to respawn */
    uint64_t backoff_ms;
    uint64_t started_us;
    uint64_t last_stats_us;
    uint64_t up_us;          /* when it last reported READY (the heartbeat clock starts) */
};

struct gf_gw {
    gf_gw_config cfg;
    char *state_dir;         /* absolute */
    int lock_fd;             /* holds the state directory's flock */
    char *upload_dir;
    char *functions_dir;
    char *worker_path;
    gf_oneshot_cfg oneshot;  /* how to run gpufaas-worker --probe / --validate */
    gf_probe probe;          /* what --probe found: CUDA devices, the plugins' kinds (and
                                those added since: plugins.c; gw->lock) */
    char **plugin_list;      /* every plugin's path, what oneshot.plugins points to
                                (deploy_lock) */
    size_t n_plugin_list;
    gf_store *store;
    gw_metrics *metrics;

    pthread_mutex_t lock;    /* registry, workers, placements, in-flight lists */
    pthread_cond_t cond;     /* worker state changes, in-flight drained */
    gw_function **fns;
    size_t n_fns, cap_fns;
    gw_worker workers[GW_MAX_WORKERS];
    int n_workers;
    atomic_uint_fast64_t next_id;
    atomic_bool stopping;
    atomic_int inflight_reqs; /* submitted and not yet answered */
    atomic_size_t held_reqs;  /* submitted and not yet freed (the total queue limit) */
    atomic_size_t versions_mem; /* gw_version structures allocated: the registry's and
                                   the deleted ones a request still pins */
    pthread_mutex_t deploy_lock; /* one deploy/delete at a time */

    /* batcher */
    pthread_mutex_t qlock;
    pthread_cond_t qcond;
    bool qcond_ready;        /* qcond was initialised */
    gw_version **ready;      /* versions with queued requests */
    size_t n_ready, cap_ready;
    pthread_t batcher;
    bool batcher_running;

    /* the shared store (sync.c); NULL without one */
    gw_sync *sync;

    /* supervisor */
    pthread_t supervisor;
    bool supervisor_running;
    uint64_t last_hits_flush_us; /* placement hits handed to the store (supervisor) */

    /* the background check of the weights files (files.c) */
    pthread_t checker;
    bool checker_running;
    _Atomic bool checker_stop;
    _Atomic bool checker_done; /* it went through every version */
    bool shut;               /* gf_gw_shutdown ran */
};

/* One answered inference request, as /metrics and SQLite's invocations see
 * it (accounting.c). Strings borrowed for the call. */
typedef struct gw_answer {
    const char *function;    /* the name the request gave; "" = none or not a valid name */
    int64_t version;         /* the version that served or refused it; 0 = none resolved */
    bool labelled;           /* function and version exist: the metrics carry them, else
                                "" (random names cannot grow /metrics) */
    gf_status status;
    int code;                /* the protocol code answered; 0 = the front's table's */
    const char *reason;      /* why it was refused or failed; NULL on success */
    int worker;              /* -1 when no worker ran it */
    bool cold;
    uint32_t batch_size;
    uint64_t queue_us, load_us, exec_us, total_us;
    int64_t slo_us;          /* the version's SLO (gw_slo_us); 0 = none */
    gw_metric_slot *slots;   /* the answering version's mslots (labelled); NULL = none */
} gw_answer;

/* A manifest's SLO in microseconds; 0 when it has none. */
int64_t gw_slo_us(const gf_manifest *mf);

/* How a fared against its SLO: none (no SLO, or a client error: a request
 * the client got wrong has no SLO to meet), met, late by what took most of
 * its time (queue; cold: the swap-in; exec), or failed (any other error,
 * admission's 503 included). The one place that decides it, for /metrics and
 * SQLite alike (pcode: the protocol code answered). */
gf_store_slo gw_slo_result(const gw_answer *a, int pcode);

/* Count a in /metrics and record its invocations row. Any thread, lock not
 * held. */
void gw_answer_record(gf_gw *gw, const gw_answer *a);

/* A request the core refused at submit (t0_us: when it arrived, monotonic),
 * resolved to the function and version it named as far as they exist.
 * Lock not held. */
void gw_answer_refused(gf_gw *gw, const char *function, int64_t version, gf_status st,
                       const char *reason, uint64_t t0_us);

/* ---- helpers shared by the core's files ---- */

/* The front end's protocol code for st (gf_gw_config.protocol_code), for
 * the records and metrics only; 0 without one. */
int gw_protocol_code(const gf_gw *gw, gf_status st);

/* views.c (lock held): the version as the JSON a deploy answers with
 * ("created": true/false added when created >= 0), and a function with
 * every version as GET /v1/functions/{name} answers. */
gf_status gw_version_json(gf_gw *gw, const gw_version *v, int created, gf_buf *out);
gf_status gw_function_json(gf_gw *gw, const gw_function *f, gf_buf *out);

void gw_version_ref(gw_version *v);
void gw_version_unref(gw_version *v);

/* gateway.c: why v cannot serve now, written into buf (cap bytes) and
 * returned, or NULL when it can (lock held): a broken version, a function
 * unloaded through the repository extension, or parameters larger than
 * every worker's device budget (it could never run). Cache eviction is no
 * reason: an evicted version swaps in on demand. */
const char *gw_version_unavailable(gf_gw *gw, const gw_version *v, char *buf, size_t cap);
/* The largest device budget of the workers (lock held); 0 = none known. */
uint64_t gw_max_device_budget(gf_gw *gw);

/* gateway.c: submit, and whether it may park a request whose function this
 * node does not know yet (sync.c resubmits without). */
gf_status gw_submit(gf_gw *gw, gf_gw_infer_req *req, bool may_park, gf_err *err);
/* deploy.c: delete function name here only: unload it, remove its files,
 * record it (deploy_lock held by the caller, or the sync lock). */
gf_status gw_delete_local(gf_gw *gw, const char *name, gf_err *err);
/* deploy.c: delete one version of name here only (the rules allowed it):
 * unload it, remove its files (derived ones too), record it. Same locking. */
gf_status gw_delete_version_local(gf_gw *gw, const char *name, int64_t version, gf_err *err);
/* deploy.c: make v current here (SQLite and memory) when it is not, and warm
 * it (deploy_lock or the sync lock held, gw->lock not). */
gf_status gw_publish_local(gf_gw *gw, gw_version *v, gf_err *err);

/* sync.c: the shared store on this node (gf_gw_config.shared_store). */
typedef struct gw_sync_deploy_in {
    const gf_manifest *mf;        /* the validated manifest */
    const char *manifest_json;    /* canonical */
    const char *weights;          /* the weights file to publish (its path) */
    const char *sha256;
    uint64_t bytes;
    char **companions;            /* paths of the companion files */
    char *const *suffixes;
    size_t n;
    bool interface_change;
} gw_sync_deploy_in;
/* Start the thread that keeps this node in step with the store. The store
 * need not be readable yet. */
gf_status gw_sync_start(gf_gw *gw, gf_err *err);
/* Stop it; requests still waiting for a lookup are refused. NULL sync: no-op. */
void gw_sync_stop(gf_gw *gw);
/* Deploy through the store (deploy_lock held): publish, append, fold; the
 * entry's outcome is the answer. *taken: the files were moved into this
 * node's function store (the caller must not remove them). */
gf_status gw_sync_deploy(gf_gw *gw, const gw_sync_deploy_in *in, bool *taken,
                         gf_gw_deployed *out, gf_err *err);
/* Activate (version), delete one version (version) or delete the function
 * (op GF_VER_DELETE, version ignored) through the store (deploy_lock held):
 * append the entry, fold, apply here; the entry's outcome is the answer. */
gf_status gw_sync_op(gf_gw *gw, const char *name, gf_ver_op op, int64_t version, gf_err *err);
/* Park an inference for a function (or version) this node does not know:
 * true when parked (inputs taken; the thread looks the function up and
 * resubmits it or answers it); false (inputs still the caller's) without a
 * store, when full or shutting down. */
bool gw_sync_park(gf_gw *gw, const gf_gw_infer_req *req, gf_gw_tensor *inputs, size_t n);
/* For the views: when this node does not know name (version 0: any), ask the
 * store and wait a bounded time. Takes gw->lock: call without it. */
void gw_sync_lookup(gf_gw *gw, const char *name, int64_t version);
/* Ready as far as the store goes (gw->lock held): true without a store, while
 * it can be read, and while this node holds something to serve. */
bool gw_sync_can_serve(gf_gw *gw);

/* files.c: the function store's files and their checks */
gf_status gw_make_dirs(const char *path, gf_err *err);             /* mkdir -p */
int gw_remove_files(const char *dir);        /* the files (not folders) in dir; how many */
char *gw_derived_path(const gf_gw *gw, const gw_version *v);       /* malloc'd */
/* Remove v's weights, companion and derived files (v's paths never change:
 * no lock needed). */
void gw_version_files_remove(gf_gw *gw, const gw_version *v);
/* At start, before the workers: remove what no live version owns under
 * functions/ and derived/. */
void gw_files_clean_orphans(gf_gw *gw);
gf_status gw_checker_start(gf_gw *gw, gf_err *err);
void gw_checker_stop(gf_gw *gw);

/* placements.c: the copies of each version on each worker (lock held) */
/* The worker reported a copy of v in tier (GF_TIER_HOST/DEVICE) loaded
 * or evicted, or ran a batch of v from its device. */
void gw_copy_loaded(gf_gw *gw, gw_version *v, int worker, int tier, uint64_t bytes,
                    int64_t at_us);
void gw_copy_evicted(gf_gw *gw, gw_version *v, int worker, int tier);
void gw_copy_used(gf_gw *gw, gw_version *v, int worker, int tier, uint32_t hits, int64_t at_us);
/* Forget every copy of worker (a new process holds nothing; the store
 * drops its rows itself). */
void gw_copies_forget_worker(gf_gw *gw, int worker);
/* Forget every copy of v (unloaded everywhere, or deleted). */
void gw_copies_forget_version(gf_gw *gw, gw_version *v);
/* Hand the store the hits and last uses of every copy since the last
 * flush (lock held). */
void gw_copies_flush_hits(gf_gw *gw);

/* plugins.c: the command line's plugins and the stored ones (after the
 * probe); free the list. */
gf_status gw_plugins_init(gf_gw *gw, gf_err *err);
void gw_plugins_free(gf_gw *gw);

/* registry.c */
/* The function named name, created (with no versions, not deleted) when
 * absent. NULL when out of memory. Lock held. */
gw_function *gw_function_ensure(gf_gw *gw, const char *name);
gw_function *gw_function_find(gf_gw *gw, const char *name);          /* lock held */
/* The live version `version` of f (0 = the current one); NULL when it does
 * not exist or was deleted. Lock held. */
gw_version *gw_version_find(gw_function *f, int64_t version);
/* The live version `version` (0 = the current one) of the function named
 * `name`, as a request names it: NULL for an invalid name, an unknown or
 * deleted function, or no such version. *fn (when not NULL) receives the
 * function, or NULL. Lock held. */
gw_version *gw_version_lookup(gf_gw *gw, const char *name, int64_t version, gw_function **fn);
gf_status gw_registry_recover(gf_gw *gw, gf_err *err);
gf_status gw_registry_add(gf_gw *gw, const char *name, const char *kind, int64_t version,
                          const char *manifest_json, const char *weights_path,
                          const char *sha256, uint64_t bytes, gf_store_vstate state,
                          const char *reason, gw_version **out, gf_err *err); /* lock held */
void gw_registry_free(gf_gw *gw);
/* Take v (just marked DELETED) out of its function's versions and drop the
 * registry's reference: whatever still pins it (a request, a batch, a LOAD)
 * keeps it until done, and the last reference frees it with its /metrics
 * series, so deploying and deleting versions leaves nothing behind. The
 * function itself stays (deleted, with its highest number: a redeploy
 * continues from there). Lock held. */
void gw_registry_drop(gf_gw *gw, gw_version *v);
gw_version *gw_version_by_key(gf_gw *gw, const char *key);           /* lock held */

/* workers.c: the processes */
gf_status gw_workers_start(gf_gw *gw, gf_err *err);
void gw_workers_stop(gf_gw *gw);

/* answers.c: a connection's reader thread (arg: its gw_worker). */
void *gw_reader_main(void *arg);

/* conn.c: a connection's writer thread (arg: its gw_worker); an encoded
 * message without a payload, queued; a batch's INFER, sent. */
void *gw_writer_main(void *arg);
gf_status gw_send_empty(gw_worker *w, gf_ipc_type type, uint64_t id);
void gw_send_infer(gf_gw *gw, gw_worker *w, gw_batch *b);
/* Route and send a batch whose frame is encoded (lock held). On failure
 * (no worker up) the batch is returned for the caller to fail after
 * unlocking; else NULL. exclude: a worker not to use (-1 none). */
gw_batch *gw_dispatch_batch(gf_gw *gw, gw_batch *b, int exclude);
/* Make sure version v is registered on worker w (lock held); tier:
 * GF_TIER_STORE/HOST/DEVICE prefetch target. */
gf_status gw_worker_load(gf_gw *gw, gw_worker *w, gw_version *v, int tier, gf_err *err);
void gw_worker_unload_all(gf_gw *gw, gw_version *v);                 /* lock held */
int gw_workers_up(gf_gw *gw);                                        /* lock held */

/* batcher.c */
/* The batcher's selection, pure functions of a version's queue (qlock held):
 * the queue is due when its head has waited max_queue_delay_us, it holds
 * max_batch_size rows, or the version cannot batch; else *deadline_us is
 * when it will be. */
bool gw_batch_due(const gw_version *v, uint64_t now_us, uint64_t *deadline_us);
/* Unlink the next batch from v's queue: the head and, when v batches, the
 * requests after it whose inputs agree past the batch dimension, up to
 * max_batch_size rows, in submit order (the others keep theirs). The batch
 * pins v. NULL when out of memory. */
gw_batch *gw_take_batch(gw_version *v);
/* Put a checked request in its version's queue (the version is pinned by
 * q); the queue limit was checked at submit. */
gf_status gw_enqueue(gf_gw *gw, gw_req *q, gf_err *err);
gf_status gw_batcher_start(gf_gw *gw, gf_err *err);
void gw_batcher_stop(gf_gw *gw);
/* Answer every request of b with an error and free it. */
void gw_batch_fail(gf_gw *gw, gw_batch *b, gf_status st, const char *msg);
/* Deliver a worker's RESULT to the requests of b and free it. */
/* payload: the RESULT frame's payload as a hold (the requests' outputs become
 * slices of it, each with a reference: no copy), or NULL (they are copied). */
void gw_batch_complete(gf_gw *gw, gw_batch *b, const gf_ipc_result *r, gf_hold *payload,
                       int worker);
void gw_req_finish(gf_gw *gw, gw_req *q, gf_gw_result *res);
/* Requests past their deadline in batches waiting for a LOAD or in flight
 * on a worker: gw_expire_collect (gw->lock held) marks up to cap of them
 * expired into out and returns how many; gw_expire_answer (without the
 * lock) answers them GF_ERR_DEADLINE. Queued ones are the batcher's. */
typedef struct gw_expired {
    gw_req *q;
    int worker;
    const char *where;
} gw_expired;
size_t gw_expire_collect(gf_gw *gw, uint64_t now_us, gw_expired *out, size_t cap);
void gw_expire_answer(gf_gw *gw, gw_expired *e, size_t n);
/* Shutting down past the drain timeout: answer every request in a batch
 * GF_ERR_CLOSED now, before the workers are stopped (takes gw->lock). */
void gw_abandon_inflight(gf_gw *gw);

/* residency.c (lock held) */
/* The residency v runs with: its function's run-time override, else its
 * manifest's. */
gf_residency gw_residency_of(const gw_version *v);
/* After a LOAD of v to w: send the override, if any (the worker applied the
 * manifest's itself). */
void gw_residency_after_load(gf_gw *gw, gw_worker *w, gw_version *v);
/* GF_OK when pinning `bytes` more keeps the pinned bytes of the current
 * versions (those of `skip` not counted; may be NULL) within every up
 * worker's pin limit; else GF_ERR_CONFLICT with the sizes. */
gf_status gw_pin_check(gf_gw *gw, const gw_function *skip, uint64_t bytes, gf_err *err);
/* Place every pinned current version that is on no device yet. */
void gw_residency_place_pinned(gf_gw *gw);

/* stats.c: Triton's statistics, recorded in the metrics registry. A
 * request's answer (rows: its share of the batch dimension), a batch a
 * worker ran, a load of v onto a device. */
void gw_stats_request(gf_gw *gw, gw_version *v, const gf_gw_result *res, int64_t rows);
void gw_stats_batch(gf_gw *gw, const gw_version *v, int64_t rows, uint64_t load_us,
                    uint64_t exec_us);
void gw_stats_swap_in(gf_gw *gw, const gw_version *v, uint64_t bytes, uint64_t micros);

/* router.c: the worker to run v on (lock held), or NULL when none is up. */
gw_worker *gw_route(gf_gw *gw, gw_version *v, int exclude, double *est_us);
/* The router's prediction of when a request for v sent now would finish,
 * microseconds from now (the best worker's queue + swap-in + execution);
 * < 0 when no worker is up. Lock held. */
double gw_route_predict_us(gf_gw *gw, gw_version *v);
/* After routing v to w with an estimated queue wait: start a second replica
 * on another worker when the wait exceeds half the SLO (lock held). */
void gw_route_replicate(gf_gw *gw, gw_version *v, gw_worker *chosen);
/* Whether a second replica can add compute on this machine: false when
 * every worker is a cpu worker and there are at least `cores` of them
 * (they all run on those cores, so a replica adds only a second swap and a
 * second copy in device memory: measured in docs/performance.md, "Levers");
 * true otherwise (a cuda worker has its own device). */
bool gw_replicas_add_compute(const gf_gw *gw, long cores);
/* Queue a frame to worker w (takes a reference). Lock held or not. When
 * the queue is idle the frame is written from the calling thread (saving the
 * writer's wake-up), at once, or, inside gw_send_defer_begin/end, at the
 * end: the request paths defer, so no socket is written with gw->lock held. */
void gw_worker_send(gw_worker *w, gw_frame *f);
/* Defer this thread's inline writes until the matching end (nests); call
 * end without gw->lock. */
void gw_send_defer_begin(void);
void gw_send_defer_end(void);

#endif /* GF_GATEWAY_CORE_INTERNAL_H */
