/* gpufaas — the gateway core (gateway/core): everything behind HTTP.
 *
 * The HTTP front (gateway/http) turns requests into calls on this interface
 * and results into responses; the core owns the state and the threads:
 *
 *   registry    functions and versions in memory (rebuilt from SQLite and the
 *               state directory at start); a request pins the version it
 *               started on, so a new deploy never disturbs it
 *   batcher     one queue per function version; dynamic batching up to
 *               max_batch_size, waiting at most max_queue_delay_us
 *   router      picks a worker by queue wait + swap-in cost + exec estimate
 *   supervisor  spawns gpufaas-worker processes, restarts them, retries what
 *               a dead worker held
 *   store       every state change and invocation goes to SQLite (store/)
 *   metrics     counters and histograms, exposed as Prometheus text
 *
 * ERRORS. Every call returns a gf_status and fills the caller's gf_err with a
 * message naming the problem: GF_ERR_NOT_FOUND (no such function, version
 * or worker), GF_ERR_INVALID (inputs that do not fit the manifest, weights
 * that do not fit, a bad name), GF_ERR_BUSY (a full queue: retry),
 * GF_ERR_EXISTS (that version exists), GF_ERR_STATE (a version that cannot
 * serve), GF_ERR_CLOSED (shutting down, no worker up), ... The core chooses
 * no protocol code: the HTTP front maps statuses in one table
 * (gateway/http/status.c) and hands that table to the core as
 * gf_gw_config.protocol_code, which the core only uses to label what it
 * records (SQLite's invocations.http_code, /metrics' code label).
 *
 * Threading: every function here is thread-safe. Result callbacks run on a
 * core thread and must not block (they typically resume an HTTP
 * connection). The views write JSON text into a caller's gf_buf.
 */
#ifndef GF_GATEWAY_CORE_H
#define GF_GATEWAY_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpufaas/types.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/hold.h"
#include "core/residency.h"
#include "core/tier.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf_gw gf_gw;

/* The defaults of gf_gw_config, the one place they are written: a zero (or
 * NULL) field means its default, and gpufaas serve shows these in --help. */
#define GF_GW_DEFAULT_STATE_DIR "./var"
#define GF_GW_DEFAULT_DEVICES "auto"
#define GF_GW_DEFAULT_QUEUE_LIMIT 1024
#define GF_GW_DEFAULT_QUEUE_LIMIT_TOTAL 4096
#define GF_GW_DEFAULT_INFER_TIMEOUT_MS 60000
#define GF_GW_DEFAULT_HEARTBEAT_TIMEOUT_MS 5000
#define GF_GW_DEFAULT_DRAIN_TIMEOUT_MS 10000
#define GF_GW_DEFAULT_VALIDATE_TIMEOUT_MS 300000
#define GF_GW_DEFAULT_SHARED_SCAN_MS 2000

typedef struct gf_gw_config {
    const char *state_dir;       /* NULL = GF_GW_DEFAULT_STATE_DIR */
    const char *devices;         /* "auto", "cpu:N", "cpu", "cuda:0,cuda:1"; NULL = auto */
    uint64_t device_memory;      /* per worker, bytes; 0 = the worker's default */
    uint64_t host_memory;        /* per worker, bytes; 0 = the worker's default */
    const char *worker_path;     /* gpufaas-worker; NULL = next to the running binary */
    bool allow_native;           /* plugins (native function kinds) allowed */
    size_t queue_limit;          /* requests the gateway holds per function: queued, in
                                    flight or written towards a worker (0 = default) */
    size_t queue_limit_total;    /* the same over every function (0 = default) */
    uint32_t infer_timeout_ms;   /* a request's deadline when it names none (0 = default;
                                    UINT32_MAX = none) */
    uint32_t heartbeat_timeout_ms; /* a worker that answers no heartbeat for this long is
                                      killed and restarted (0 = default) */
    gf_evict_policy policy;      /* device-tier eviction policy of the workers */
    uint32_t drain_timeout_ms;   /* SIGTERM: how long in-flight work may finish (0 = default) */
    uint64_t retention_rows;     /* invocation rows kept (0 = store default) */
    uint64_t retention_age_s;    /* invocation age kept (0 = store default) */
    uint64_t cpu_copy_bandwidth; /* benchmarks: cpu workers emulate a host-to-device link of
                                    this many bytes/s (0 = memcpy speed) */
    uint64_t page_size;          /* workers' device page size, bytes (0 = their default, 2 MiB) */
    uint64_t pin_limit;          /* per worker: device bytes pinned and kept-warm functions may
                                    hold (0 = half the device budget) */
    bool no_replicate;           /* never prefetch a second replica of a function whose queue
                                    wait passes half its SLO (benchmarks measure the lever) */
    bool replicate_auto;         /* decide no_replicate when the workers are known: off where
                                    every worker is a cpu worker and they are at least as many
                                    as the machine's cores (gw_replicas_add_compute) */
    const char *schedule;        /* the workers' --schedule: deadline, ready-first or fifo
                                    (NULL: their default, deadline; benchmarks measure them) */
    bool swap_order_arrival;     /* workers' swap-ins take the link in the order they began
                                    (else the earliest due first; benchmarks' control) */
    const char *const *plugins;  /* shared objects of plugin kinds the workers may load
                                    (needs allow_native); may be NULL */
    size_t n_plugins;
    uint32_t validate_timeout_ms; /* how long a deploy's validation may take (0 = default) */
    const char *shared_store;    /* a directory every node mounts (docs/cluster.md); NULL =
                                    none: this node's catalog is its own */
    uint32_t shared_scan_ms;     /* how often to read the store for changes (0 = default) */
    int (*protocol_code)(gf_status st); /* the front end's code for a status (the HTTP
                                           front's table): recorded with each answer the
                                           core gives, never chosen by it; NULL = 0 */
} gf_gw_config;

/* Open the store, recover the catalogue, spawn the workers and wait (a
 * bounded time) for them to report READY. Fails when no worker comes up.
 * *out is owned by the caller (gf_gw_free). */
gf_status gf_gw_new(const gf_gw_config *cfg, gf_gw **out, gf_err *err);

/* Stop accepting requests (new submits get GF_ERR_CLOSED), let in-flight
 * ones finish up to the drain timeout (the rest are answered GF_ERR_CLOSED),
 * stop the workers (SHUTDOWN, then TERM, then KILL) and write the last hits.
 * The store stays open for the HTTP front's last records until gf_gw_free.
 * Idempotent. */
void gf_gw_shutdown(gf_gw *gw);

/* Shut down if needed, close the store (committing what is queued) and
 * free. Call after the HTTP front has stopped. NULL is a no-op. */
void gf_gw_free(gf_gw *gw);

/* Ready = not shutting down and at least one worker up (v2 health/ready). */
bool gf_gw_ready(gf_gw *gw);

/* The directory where the HTTP front stages uploads: on the same file system
 * as the function store, so that publishing is an atomic rename. */
const char *gf_gw_upload_dir(gf_gw *gw);

/* ---- inference ------------------------------------------------------------ */

/* A span of a system shared memory object (Triton's system shared memory
 * extension) that a tensor's bytes are in, or go to: the worker maps the
 * object itself, so the bytes never cross its socket. */
typedef struct gf_gw_shm {
    const char *key;  /* the object's shm_open name, kept alive by hold; NULL: none */
    uint64_t offset;  /* from the object's start */
    uint64_t size;    /* bytes of the span */
    void *hold;       /* what keeps the span registered and mapped (a region
                         reference), given back with put(hold) when the tensor is freed */
    void (*put)(void *hold);
} gf_gw_shm;

/* A named host tensor; data is malloc'd and owned by whoever owns the
 * struct. With shm.key set the bytes are in shared memory instead: data
 * then points at the gateway's mapping of the span (not owned), and the
 * tensor goes to the worker by reference. */
typedef struct gf_gw_tensor {
    char *name;
    gf_tensor t;
    gf_gw_shm shm;
    bool placed; /* an output the worker wrote into its shared memory destination:
                    t has no data, only the descriptor */
    gf_hold *hold; /* NULL: t.data is malloc'd and the tensor's own (but for shm); else
                      t.data is a slice of a buffer this reference keeps alive (a request
                      body, a RESULT frame's payload): zero copy (issue 16) */
} gf_gw_tensor;

/* The shared memory object key is no longer registered: every worker up
 * unmaps it (once no request of its uses it). Requests naming it later map
 * it again. Thread-safe. */
void gf_gw_shm_forget(gf_gw *gw, const char *key);

/* Free n tensors (names, owned data or their hold's reference, shared memory
 * holds) and the array.
 * NULL is a no-op. */
void gf_gw_tensors_free(gf_gw_tensor *t, size_t n);

/* The outcome of one request. Owned by the callback once delivered: free it
 * with gf_gw_result_free. */
typedef struct gf_gw_result {
    gf_status status;        /* GF_OK, or what went wrong */
    char message[512];       /* "" on success */
    char function[64];
    int64_t version;         /* the version that served it */
    size_t n_outputs;
    gf_gw_tensor *outputs;   /* manifest order */
    int worker;              /* worker id, -1 when none ran it */
    bool cold;               /* its parameters were not on the device */
    uint32_t batch_size;     /* requests in the batch it ran in */
    uint64_t queue_us, load_us, exec_us, total_us;
} gf_gw_result;

void gf_gw_result_free(gf_gw_result *r);

typedef void (*gf_gw_done_fn)(void *arg, gf_gw_result *r);

typedef struct gf_gw_infer_req {
    const char *function;    /* name */
    int64_t version;         /* 0 = the current version */
    gf_gw_tensor *inputs;    /* ownership passes to the core on every return */
    size_t n_inputs;
    const char *const *outputs; /* the outputs the request asks for by name (borrowed for
                                   the call); NULL with n_outputs 0 = all */
    size_t n_outputs;
    const gf_gw_shm *out_shm; /* NULL, or per requested output the span the worker writes
                                 it into (key NULL: none); the keys are borrowed until
                                 done is called. Such an output comes back placed */
    gf_gw_done_fn done;      /* called once, later, from a core thread */
    void *done_arg;
    uint64_t t0_us;          /* when the request arrived (monotonic); 0 = now */
    uint64_t timeout_us;     /* its deadline, from submit (parameters.timeout); 0 = the
                                server's (infer_timeout_ms) */
} gf_gw_infer_req;

/* Add a plugin kind while the server runs (needs allow_native, else
 * GF_ERR_PERMISSION): so (len bytes, an ELF shared object) is stored in the
 * state directory and loaded by a gpufaas-worker --probe child, never by
 * this process; the kind it provides is written to kind (cap bytes).
 * GF_ERR_INVALID when it does not load (the child's message), GF_ERR_EXISTS
 * when its kind is provided already. The same file again is a no-op. Stored
 * plugins are loaded again when the server starts. */
gf_status gf_gw_plugin_add(gf_gw *gw, const void *so, size_t len, char *kind, size_t cap,
                           gf_err *err);

/* Queue an inference. Checks at once, before any work, answering without
 * calling done: an unknown function or version (GF_ERR_NOT_FOUND), inputs
 * that do not match the manifest by name, count, datatype or shape, or a
 * requested output it does not have (GF_ERR_INVALID), the function or the
 * server holding its limit of requests (GF_ERR_BUSY: retry shortly), a
 * version that cannot serve (GF_ERR_STATE), shutting down or no worker
 * (GF_ERR_CLOSED). Every answer, a refusal here included, is counted in
 * /metrics and recorded in SQLite. On GF_OK done
 * will be called exactly once. inputs are taken over in every case (the
 * caller's pointers are cleared). */
gf_status gf_gw_submit(gf_gw *gw, gf_gw_infer_req *req, gf_err *err);

/* An inference request the front end refused before the core saw it (a body
 * that does not parse, a bad name or version in the path, a body over the
 * limit): counted in /metrics and recorded in SQLite like every answer.
 * function and version are what the request named (NULL, 0 when it named
 * none; borrowed), code the protocol code answered, reason the message
 * (borrowed), total_us how long it took. */
void gf_gw_refused(gf_gw *gw, const char *function, int64_t version, gf_status st, int code,
                   const char *reason, uint64_t total_us);

/* ---- functions ------------------------------------------------------------- */

typedef struct gf_gw_deploy_req {
    const char *manifest;    /* JSON text; NULL, or partial, for a kind that converts its
                                upload and derives the manifest (onnx) */
    size_t manifest_len;
    const char *name;        /* the function's name when given apart from the manifest */
    const char *kind;        /* the kind when given apart from the manifest (by the upload) */
    const char *weights_tmp; /* a staged file in gf_gw_upload_dir(): the weights, or the model
                                a kind converts; moved on success, removed on failure */
    const char *sha256_hex;  /* of the staged file, computed while streaming */
    uint64_t bytes;
    const char *const *extra_tmp; /* more staged files the kind converts with it (ONNX
                                     external data), removed after the deploy; may be NULL */
    size_t n_extra;
    bool allow_interface_change; /* the deploy may change the inputs or outputs clients of
                                    the current version see (?interface_change=allow) */
} gf_gw_deploy_req;

/* What a deploy made: the version as JSON text (the function, its version
 * and the invoke URLs), and its name and number. */
typedef struct gf_gw_deployed {
    gf_buf json;             /* caller-owned once filled (gf_buf_deinit) */
    char name[64];
    int64_t version;
    bool created;            /* false: the upload was what `version` already is (an
                                idempotent redeploy): no new version was made */
} gf_gw_deployed;

/* Validate the upload and the manifest against it (in a gpufaas-worker
 * --validate child, converting the upload when its kind does), store the
 * version's files, record it durably and publish it as current once it is
 * ready. The previous version serves until then. The version rules are
 * gateway/core/versions.h's: the next number when the manifest gives none,
 * the existing version (created = false) when the weights and manifest are
 * one that exists. On GF_OK *out is filled (out->json initialised by the
 * call). GF_ERR_INVALID for a manifest or upload that does not fit,
 * GF_ERR_EXISTS for a version number that is taken or was used,
 * GF_ERR_CONFLICT for an interface change not allowed. */
gf_status gf_gw_deploy(gf_gw *gw, const gf_gw_deploy_req *req, gf_gw_deployed *out,
                       gf_err *err);

/* Make version the one served (roll back or forward): requests from now on
 * get it, those in flight finish on theirs. Appends the function as
 * gf_gw_function_json does to out. GF_ERR_NOT_FOUND, GF_ERR_CONFLICT for a
 * broken version. */
gf_status gf_gw_activate(gf_gw *gw, const char *name, int64_t version, gf_buf *out,
                         gf_err *err);

/* Delete one version: unload it everywhere, remove its files (its derived
 * files too), keep its history rows; its number is never given again.
 * GF_ERR_CONFLICT for the current version while others exist; the only
 * version deletes the function. GF_ERR_NOT_FOUND when unknown. */
gf_status gf_gw_delete_version(gf_gw *gw, const char *name, int64_t version, gf_err *err);

/* Delete a function: unload it everywhere, remove its files, keep its
 * history rows. The name is free again; its version numbers continue.
 * GF_ERR_NOT_FOUND when unknown. */
gf_status gf_gw_delete(gf_gw *gw, const char *name, gf_err *err);

/* Hash every live version's weights file now and compare it with what was
 * recorded at publish; a version that does not match is marked broken (in
 * SQLite, with the reason, and no longer served). Appends the report to out:
 * {"checked": N, "bytes": B, "seconds": S, "broken": [{"function",
 * "version", "reason"}], "ok": [{"function", "version"}]}. Blocks for as
 * long as reading every file takes. */
gf_status gf_gw_fsck(gf_gw *gw, gf_buf *out, gf_err *err);

/* Repository extension: load = prefetch the current version onto a worker's
 * device (the router's choice); unload = evict it from every worker. */
gf_status gf_gw_repo_load(gf_gw *gw, const char *name, gf_err *err);
/* Load onto worker `worker`'s device (-1: the router's choice, as
 * gf_gw_repo_load). GF_ERR_NOT_FOUND for a worker that does not exist,
 * GF_ERR_CLOSED when it is not up. */
gf_status gf_gw_repo_load_on(gf_gw *gw, const char *name, int worker, gf_err *err);

/* A repository load that brings a configuration or files (Triton's
 * load_model(config=..., files=...)). */
typedef struct gf_gw_load_req {
    const char *name;        /* the model */
    const char *config;      /* ModelConfig JSON text (config_len bytes), NULL = none: what
                                it leaves out comes from the current version */
    size_t config_len;
    const char *staged;      /* a staged file in gf_gw_upload_dir(): new weights, or an ONNX
                                model (staged_is_model); NULL = the current weights */
    bool staged_is_model;
    const char *sha256_hex;  /* of staged */
    uint64_t bytes;
    const char *data_tmp;    /* a staged ONNX model's external data, NULL = none */
    const struct gf_gw_text_file {
        const char *name;    /* "labels.txt": what a config's label_filename names */
        const char *text;    /* its bytes, one label a line */
        size_t len;
    } *label_files;
    size_t n_label_files;
} gf_gw_load_req;

/* Copies of the labels of output `output` of function name's version
 * (0 = current): *labels (malloc'd array of malloc'd strings; free with
 * gf_gw_labels_free) and *n; *n is 0 when it has none or is unknown. */
gf_status gf_gw_output_labels(gf_gw *gw, const char *name, int64_t version, const char *output,
                              char ***labels, size_t *n);
void gf_gw_labels_free(char **labels, size_t n);

/* Deploy a new version of req->name from the config (gateway/core/
 * model_config.h's mapping) and the files, validated as gf_gw_deploy
 * validates a deploy; the staged files are taken over (moved or removed,
 * whatever happens). GF_ERR_INVALID naming what is wrong (a config field
 * we do not know, a config that is not JSON, a new model without a config
 * or a model file), GF_ERR_NOT_FOUND for a config alone naming a model that
 * is not deployed, else what gf_gw_deploy answers. */
gf_status gf_gw_repo_load_new(gf_gw *gw, const gf_gw_load_req *req, gf_gw_deployed *out,
                              gf_err *err);
gf_status gf_gw_repo_unload(gf_gw *gw, const char *name, gf_err *err);

/* Residency at run time: set the function's pin, priority and keep-warm
 * time (r), or go back to what its current version's manifest says (r
 * NULL). Recorded in SQLite (functions.pin, .priority, .keep_warm_us),
 * sent to every worker holding one of its versions; a pinned function is
 * loaded onto a device. GF_ERR_NOT_FOUND for an unknown function,
 * GF_ERR_INVALID for an out-of-range r, GF_ERR_CONFLICT when the pin would
 * pass the pin limit. On GF_OK appends {"function", "version",
 * "residency": {...}, "source": "api"|"manifest"} to out. */
gf_status gf_gw_set_residency(gf_gw *gw, const char *name, const gf_residency *r, gf_buf *out,
                              gf_err *err);

/* ---- reading state (JSON text for the APIs, gateway/core/views.c) --------------- */

/* Each view appends one JSON value to out. They fail only for want of memory
 * (GF_ERR_NOMEM), or GF_ERR_NOT_FOUND (with a message) where they name one
 * function. */

/* [{"name", "version", "state", "reason"}] as the v2 repository index; only
 * the READY ones when ready_only. */
gf_status gf_gw_repo_index(gf_gw *gw, bool ready_only, gf_buf *out);

/* {"functions": [{"name", "kind", "version", "versions": [...], "bytes",
 * "state", "placements": [...], "invoke": "/v1/functions/NAME/invoke"}]}. */
gf_status gf_gw_functions_json(gf_gw *gw, gf_buf *out);

/* One function with every version and where it is placed. */
gf_status gf_gw_function_json(gf_gw *gw, const char *name, gf_buf *out, gf_err *err);

/* v2 model metadata for name (version 0 = current): {"name", "versions":
 * ["1","2"], "platform": "gpufaas_<kind>", "inputs": [{"name", "datatype",
 * "shape"}], "outputs": [...]}. */
gf_status gf_gw_model_metadata(gf_gw *gw, const char *name, int64_t version, gf_buf *out,
                               gf_err *err);

/* True when the version (0 = current) exists and can serve (v2 .../ready). */
bool gf_gw_model_ready(gf_gw *gw, const char *name, int64_t version);

/* {"workers": [{"id", "device", "pid", "state", "device_memory": {"used",
 * "budget"}, "host_memory": {...}, "models": [...], "restarts"}]}. */
gf_status gf_gw_workers_json(gf_gw *gw, gf_buf *out);

/* {"placements": [{"function", "version", "worker", "tier", "bytes", "state",
 * "hits", "loaded_at_us", "last_used_at_us"}]}: one entry per copy (a version
 * in a worker's host tier and in its device tier is two), the rows of
 * SQLite's placements table. */
gf_status gf_gw_placements_json(gf_gw *gw, gf_buf *out);

/* {"name": "gpufaas", "version": "...", "extensions": [...]} for GET /v2:
 * extensions (NULL-terminated, static) are the ones the front end serves. */
gf_status gf_gw_server_metadata(gf_gw *gw, const char *const *extensions, gf_buf *out);

/* Triton's model configuration (ModelConfig JSON, gateway/core/model_config.h)
 * of name's version (0 = current). GF_ERR_NOT_FOUND naming it. */
gf_status gf_gw_model_config(gf_gw *gw, const char *name, int64_t version, gf_buf *out,
                             gf_err *err);

/* Triton's statistics: {"model_stats": [...]} for every version of every
 * function (name NULL), of one function (version 0), or of one version.
 * GF_ERR_NOT_FOUND naming what is unknown. */
gf_status gf_gw_model_stats(gf_gw *gw, const char *name, int64_t version, gf_buf *out,
                            gf_err *err);

/* Append the Prometheus text exposition of every metric. */
gf_status gf_gw_metrics_text(gf_gw *gw, gf_buf *out);


#ifdef __cplusplus
}
#endif

#endif /* GF_GATEWAY_CORE_H */
