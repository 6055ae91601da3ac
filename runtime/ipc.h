/* gpufaas — the worker protocol: frames between the gateway and a worker.
 *
 * The ONE definition of the wire format, shared by gpufaas-worker and the
 * gateway (docs/protocol.md is its prose form). Depends on runtime/core only.
 *
 * FRAMES. Every message is one frame over a connected stream socket:
 *
 *   offset  size  field
 *        0     4  magic        GF_IPC_MAGIC ("GFW1" as bytes)
 *        4     2  version      GF_IPC_VERSION; any other value closes the connection
 *        6     2  type         a GF_IPC_* message type from the table below
 *        8     8  request_id   chosen by the gateway, echoed by the answer; 0 = unsolicited
 *       16     8  payload_len  bytes after the header, <= the receiver's frame limit
 *       24     …  payload      the message's fields
 *
 * All integers are little-endian. The frame limit (default 1 GiB) is checked
 * before anything is allocated. Payload encodings (one table per message in
 * docs/protocol.md) use:
 *   u32/i32/u64/i64  fixed-width little-endian integers;
 *   str              u32 length n, n bytes, then one NUL byte; no NUL inside;
 *                    each string has a per-field length limit; names, keys and
 *                    messages are UTF-8. Decoded strings are C strings in place.
 *   tensor           str name, u32 dtype (gf_dtype), u32 rank (<= 8),
 *                    rank x i64 dims (>= 0), u64 nbytes (= numel x dtype size,
 *                    overflow-checked), zero padding to the next multiple of 8
 *                    (counted from the start of the frame), nbytes of data.
 *   shm tensor       the same up to nbytes, with GF_IPC_TENSOR_SHM set in the
 *                    dtype word, then str shm_key (the shm_open name of a
 *                    system shared memory object, <= GF_IPC_MAX_SHM_KEY) and
 *                    u64 shm_offset (from the object's start): the bytes are
 *                    there, not in the frame (no padding, no data).
 * A payload must be consumed exactly: bytes left over are an error.
 *
 * ERRORS. A frame that breaks these rules (bad magic or version, unknown type,
 * over the limit, a field out of bounds, truncated by end of stream) is a
 * protocol error: the receiver logs it, answers ERROR (GF_ERR_PROTOCOL) when
 * it can and closes the connection; the worker then exits with
 * GF_WORKER_EXIT_PROTOCOL. A well-formed request that cannot be served
 * (unknown function, wrong input shape, a failing function) is answered with
 * ERROR for that request id and the connection stays up.
 *
 * THREADING. The codec functions are pure. A gf_ipc_reader is used by one
 * thread; writers on one fd must serialise whole frames (the worker holds a
 * lock per frame).
 */
#ifndef GF_IPC_H
#define GF_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpufaas/types.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/tier.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- constants ---------------------------------------------------------- */

#define GF_IPC_MAGIC 0x31574647u /* bytes 'G' 'F' 'W' '1' */
#define GF_IPC_VERSION 1         /* bump on any incompatible change */
#define GF_IPC_HEADER_SIZE 24
#define GF_IPC_DEFAULT_MAX_FRAME ((uint64_t)1 << 30) /* payload bytes */

/* Per-field limits (bytes, excluding the NUL). */
#define GF_IPC_MAX_KEY 512         /* function version key */
#define GF_IPC_MAX_NAME 256        /* tensor name */
#define GF_IPC_MAX_PATH 4096       /* file paths */
#define GF_IPC_MAX_TEXT (1u << 20) /* manifest JSON (= GF_MANIFEST_MAX_BYTES) */
#define GF_IPC_MAX_MESSAGE 4096    /* ERROR / EVENT messages, device names */
#define GF_IPC_MAX_TENSORS 256     /* tensors in one INFER or RESULT */
#define GF_IPC_MAX_SHM_KEY 255     /* a shared memory object's name (NAME_MAX) */

/* The dtype word's flag of a tensor in shared memory (see "shm tensor"). */
#define GF_IPC_TENSOR_SHM 0x80000000u

/* Exit codes of gpufaas-worker. The gateway restarts a worker that exits
 * with anything but OK or FATAL (with backoff); FATAL means "do not respawn":
 * the configuration itself is wrong (bad flag, bad budget, no such device),
 * so a restart would fail the same way. The reason is on stderr. */
#define GF_WORKER_EXIT_OK 0       /* SHUTDOWN drained, or the gateway closed the socket */
#define GF_WORKER_EXIT_FAILURE 1  /* a runtime failure (socket I/O, out of memory) */
#define GF_WORKER_EXIT_PROTOCOL 2 /* the gateway broke the protocol (malformed frame) */
#define GF_WORKER_EXIT_DEVICE 3   /* the device was lost (a CUDA fault): respawn */
#define GF_WORKER_EXIT_FATAL 78   /* do not respawn (sysexits' EX_CONFIG) */

/* ONE-SHOT MODES. gpufaas-worker also runs as a short-lived child of the
 * gateway, for the work the gateway must not do itself (it runs no function
 * code and touches no device):
 *
 *   gpufaas-worker --probe [--allow-native-functions] [--plugin PATH]...
 *   gpufaas-worker --validate [--manifest FILE] [--name NAME] [--kind KIND]
 *                  --upload FILE [--upload FILE]... --out-dir DIR
 *                  [--allow-native-functions] [--plugin PATH]...
 *
 * (both also take --log-level). --validate's manifest may be partial or
 * absent for a kind that converts its uploads (functions/deploy.h); the
 * first --upload is the model or weights, the others its extra parts. Each writes ONE JSON object on stdout, at
 * most GF_IPC_ONESHOT_MAX_ANSWER bytes, and exits GF_WORKER_EXIT_OK:
 *
 *   {"ok": false, "code": N, "message": "..."}      no (N is a gf_status)
 *   --probe:    {"ok": true, "cuda_devices": N,
 *                "kinds": [{"name": "mlp", "plugin": ""}, ...,
 *                          {"name": "linear", "plugin": "/abs/path.so"}]}
 *   --validate: {"ok": true, "manifest": {the manifest to store, canonical},
 *                "weights": null | "weights.safetensors",
 *                "companions": ["graph", ...]}
 *
 * For --validate, DIR is an empty directory the gateway made on the function
 * store's file system; a kind that converts its uploads writes the version's
 * weights there as GF_CONVERTED_WEIGHTS and each companion file as
 * GF_CONVERTED_BASE ".<suffix>" (functions/manifest.h), and the answer says
 * which ("weights": null: the upload itself is the weights); the gateway
 * publishes them beside each other. Any other exit (bad flags: GF_WORKER_EXIT_FATAL; a crash; a
 * deadline passed) means no answer: the reason is on stderr. */
#define GF_IPC_ONESHOT_MAX_ANSWER (4u << 20)
#define GF_IPC_ONESHOT_MAX_PLUGINS 64
#define GF_IPC_ONESHOT_MAX_COMPANIONS 16

/* Tiers travel as the int32 values of gf_tier (core/tier.h). */

/* EVENT kinds: residency changes reported by the parameter cache. */
#define GF_IPC_EV_LOADED 1  /* a model arrived in tier `to` from tier `from` */
#define GF_IPC_EV_EVICTED 2 /* a model left tier `from`; it now lives in `to` */
#define GF_IPC_EV_FAILED 3  /* a load into `to` failed (message says why) */

/* RESULT flags. */
#define GF_IPC_RESULT_COLD 1u /* the parameters were not on the device when the request came */

/* READY flags. */
#define GF_IPC_READY_NATIVE 1u /* plugins (native functions) are allowed */

/* ---- the message table ---------------------------------------------------
 * X(NAME, value, direction, empty payload?, description). Values are stable.
 * "W" = gateway to worker, "G" = worker to gateway. */
#define GF_IPC_MESSAGES(X)                                                                         \
    X(HELLO, 1, 'W', true, "ask for READY again (device information)")                             \
    X(READY, 2, 'G', false, "start-up done or answer to HELLO: device information")                \
    X(LOAD, 3, 'W', false, "register a function version and prefetch its weights")                 \
    X(LOADED, 4, 'G', false, "LOAD done: sizes and the tier the prefetch went to")                 \
    X(UNLOAD, 5, 'W', false, "drop a function version (after its in-flight requests)")             \
    X(UNLOADED, 6, 'G', true, "UNLOAD done")                                                       \
    X(INFER, 7, 'W', false, "run a batch: function version key and input tensors")                 \
    X(RESULT, 8, 'G', false, "INFER done: output tensors, timings, cold flag, source tier")        \
    X(ERROR, 9, 'G', false, "a request failed: status code and message")                           \
    X(EVENT, 10, 'G', false, "a residency change in the parameter cache (unsolicited)")            \
    X(GET_STATS, 11, 'W', true, "ask for STATS")                                                   \
    X(STATS, 12, 'G', false, "cache counters, device and host memory, worker counters")            \
    X(PING, 13, 'W', true, "liveness check")                                                       \
    X(PONG, 14, 'G', true, "answer to PING")                                                       \
    X(SHUTDOWN, 15, 'W', true, "stop accepting work, finish what is in flight, exit 0")          \
    X(SET_RESIDENCY, 16, 'W', false, "set a function version's pin, priority and keep-warm time") \
    X(RESIDENCY_SET, 17, 'G', true, "SET_RESIDENCY done")                                         \
    X(SHM_FORGET, 18, 'W', false, "unmap a shared memory object (unregistered); no answer")

typedef enum gf_ipc_type {
#define GF_IPC_ENUM_(name, value, dir, empty, doc) GF_IPC_##name = value,
    GF_IPC_MESSAGES(GF_IPC_ENUM_)
#undef GF_IPC_ENUM_
        GF_IPC_TYPE_END_ /* one past the last value; not a type */
} gf_ipc_type;

typedef struct gf_ipc_msg_info {
    const char *name; /* "INFER" */
    char direction;   /* 'W': gateway to worker; 'G': worker to gateway */
    bool empty;       /* the payload must be empty */
    const char *doc;
} gf_ipc_msg_info;

/* The table entry of type, or NULL for a value that is not a type. Static. */
const gf_ipc_msg_info *gf_ipc_msg_info_of(uint32_t type);
/* The type's name, or "?" for an unknown value. Static. */
const char *gf_ipc_type_name(uint32_t type);

/* ---- STATS fields --------------------------------------------------------
 * X(field, description). On the wire: u32 count, then count u64 values in this
 * order. A reader takes the fields it knows and ignores extra ones, so fields
 * can be appended without a version bump. */
#define GF_IPC_STATS_FIELDS(X)                                                                     \
    X(hits, "acquires that found the model on the device")                                         \
    X(misses, "acquires that had to load")                                                         \
    X(loads_from_host, "device loads read from the host tier")                                     \
    X(loads_from_store, "device loads read from the store tier")                                   \
    X(load_failures, "loads that failed")                                                          \
    X(evictions_device, "models evicted from the device")                                          \
    X(evictions_host, "models evicted from the host tier")                                         \
    X(bytes_to_device, "bytes copied to the device")                                               \
    X(bytes_to_host, "bytes copied into the host tier")                                            \
    X(load_us_total, "sum of load times, microseconds")                                            \
    X(device_used, "device budget in use (models + activations), bytes")                           \
    X(device_budget, "device budget, bytes")                                                       \
    X(device_model_bytes, "device pages held by models, bytes")                                    \
    X(host_used, "host tier in use, bytes")                                                        \
    X(host_budget, "host tier budget, bytes")                                                      \
    X(models, "models registered")                                                                 \
    X(models_on_device, "models on the device or loading")                                         \
    X(models_in_host, "models with a complete host copy")                                          \
    X(host_bw_bps, "measured swap-in bandwidth from the host tier, bytes/s")                       \
    X(store_bw_bps, "measured swap-in bandwidth from the store tier, bytes/s")                     \
    X(device_total, "physical device memory, bytes")                                               \
    X(device_free, "free device memory now, bytes")                                                \
    X(process_rss, "resident memory of the worker process, bytes")                                 \
    X(system_available, "MemAvailable of the machine, bytes")                                      \
    X(requests, "INFER requests received")                                                         \
    X(request_errors, "INFER requests answered with ERROR")                                        \
    X(queue_depth, "INFER requests waiting now")                                                   \
    X(events_sent, "EVENT frames sent")                                                            \
    X(events_dropped, "EVENTs dropped because the queue was full")                                 \
    X(uptime_us, "microseconds since the worker started")                                          \
    X(device_allocs, "device allocations the backend made (none on a warm request)")             \
    X(device_frees, "device frees the backend made (none on a warm request)")               \
    X(pinned_bytes, "device bytes of the models pinned (resident or not)")                        \
    X(pin_limit, "device bytes pinned and kept-warm models may hold")                             \
    X(copied_in_bytes, "tensor bytes of INFERs copied in user space (core/copies.h)")              \
    X(copied_out_bytes, "tensor bytes of RESULTs copied in user space (core/copies.h)")           \
    X(shm_mappings, "shared memory objects the worker has mapped now")

typedef struct gf_ipc_stats {
#define GF_IPC_STATS_MEMBER_(field, doc) uint64_t field;
    GF_IPC_STATS_FIELDS(GF_IPC_STATS_MEMBER_)
#undef GF_IPC_STATS_MEMBER_
} gf_ipc_stats;

/* ---- decoded messages ----------------------------------------------------
 * Pointers in a decoded message point into the frame's payload: they live as
 * long as the frame. Strings are NUL-terminated in place. */

typedef struct gf_ipc_header {
    uint32_t type; /* gf_ipc_type */
    uint64_t request_id;
    uint64_t payload_len;
} gf_ipc_header;

/* A named tensor. In a decoded message t.data points into the payload
 * (8-byte aligned when the payload buffer is), t.mem is GF_MEM_HOST.
 * With shm_key set the bytes are in that shared memory object at
 * shm_offset, not in the frame: t.data is not encoded (NULL when decoded)
 * and t.nbytes is their size; for BYTES nobody has checked them yet. */
typedef struct gf_ipc_tensor {
    const char *name;
    gf_tensor t;
    const char *shm_key; /* NULL: inline */
    uint64_t shm_offset;
} gf_ipc_tensor;

/* An output the worker writes straight into a shared memory object: the
 * span [offset, offset + size) of object key; an output larger than size
 * is the request's error (GF_ERR_INVALID). */
typedef struct gf_ipc_shm_dest {
    uint32_t output; /* the manifest's output index; each at most once */
    const char *key;
    uint64_t offset, size;
} gf_ipc_shm_dest;

typedef struct gf_ipc_ready {
    uint32_t protocol_version; /* GF_IPC_VERSION of the worker */
    int32_t worker_id;
    int32_t pid;
    uint32_t flags;      /* GF_IPC_READY_* */
    int32_t device_kind; /* 0 cpu, 1 cuda (gf_device_kind) */
    int32_t device_index;
    int32_t cc_major, cc_minor;
    int32_t pcie_gen, pcie_width;
    int32_t policy; /* gf_evict_policy (core/tier.h) */
    uint64_t total_memory, free_memory;
    uint64_t device_budget, host_budget;
    uint64_t page_size;
    uint64_t max_frame;      /* the worker's frame limit */
    uint64_t link_peak_mbps; /* host<->device, megabytes/s; 0 unknown */
    const char *device_name; /* "NVIDIA H200", "cpu (OpenBLAS, 1 threads)" */
} gf_ipc_ready;

typedef struct gf_ipc_load {
    const char *key;      /* function version key, unique on the worker */
    const char *manifest; /* manifest JSON */
    uint32_t manifest_len;
    const char *weights_path; /* safetensors file readable by the worker */
    const char *plugin_path;  /* shared object of a plugin kind; "" for built-ins */
    int32_t tier;             /* GF_TIER_STORE (register only), _HOST or _DEVICE */
} gf_ipc_load;

typedef struct gf_ipc_loaded {
    int32_t tier;          /* tier the prefetch was started to (may be below the request) */
    uint32_t n_params;     /* parameters in execution order */
    uint64_t device_bytes; /* device pages the model takes */
    uint64_t host_bytes;   /* host tier bytes it takes */
    uint64_t prepare_us;   /* time of the kind's load (derived parameters included) */
} gf_ipc_loaded;

typedef struct gf_ipc_unload {
    const char *key;
} gf_ipc_unload;

/* SET_RESIDENCY: a run-time override of the manifest's residency. A pin
 * over the worker's pin limit is answered with ERROR (GF_ERR_TOO_LARGE);
 * a pinned model is prefetched to the device. */
typedef struct gf_ipc_residency {
    const char *key;
    uint32_t pin;          /* 0 or 1 */
    uint32_t priority;     /* gf_priority */
    uint64_t keep_warm_us; /* <= GF_KEEP_WARM_MAX_US */
} gf_ipc_residency;

typedef struct gf_ipc_infer {
    const char *key;
    uint32_t n;       /* tensors */
    gf_ipc_tensor *t; /* decoded: malloc'd array (gf_ipc_infer_deinit) */
    uint64_t outputs; /* the outputs to copy back and return: bit i = the manifest's
                       * output i; 0 = all. On the wire an optional u64 after the
                       * tensors, written only when not 0 */
    uint32_t n_dests;  /* outputs placed in shared memory (each among `outputs`, which
                        * must then not be 0). On the wire an optional u32 count and
                        * the dests after the mask, written only when not 0 */
    gf_ipc_shm_dest *dests; /* decoded: malloc'd array (gf_ipc_infer_deinit) */
} gf_ipc_infer;

typedef struct gf_ipc_result {
    uint32_t flags;      /* GF_IPC_RESULT_* */
    int32_t source_tier; /* tier the parameters came from (GF_TIER_DEVICE when warm) */
    uint64_t queue_us;   /* receipt to start of execution (waiting behind other requests),
                            less the time held back for its own swap-in (ready-first) */
    uint64_t load_us;    /* waiting for its parameters: held back for their swap-in, and
                            from the start of execution to the last one on the device */
    uint64_t exec_us;    /* the function: first input copy to last output copy */
    uint32_t n;
    gf_ipc_tensor *t; /* decoded: malloc'd array (gf_ipc_result_deinit) */
} gf_ipc_result;

typedef struct gf_ipc_error {
    uint32_t code; /* gf_status */
    const char *message;
} gf_ipc_error;

typedef struct gf_ipc_event {
    uint64_t seq;     /* 1, 2, ... per worker: a gap means events were dropped */
    uint64_t time_us; /* wall clock (CLOCK_REALTIME) microseconds */
    uint32_t kind;    /* GF_IPC_EV_* */
    int32_t from, to; /* GF_TIER_* */
    uint64_t bytes;
    uint64_t micros; /* loads: from the start of the load to its last byte */
    const char *key;
    const char *message; /* "" unless FAILED */
} gf_ipc_event;

/* ---- encoding --------------------------------------------------------------
 * Each encoder appends one whole frame (header + payload) to *b. The frame
 * must fit b->limit when one is set (gf_buf), else GF_ERR_TOO_LARGE; on any
 * failure *b is left as it was. Strings over their field's limit are
 * GF_ERR_TOO_LARGE (messages are truncated instead). Borrowed inputs. */

/* A frame whose payload is empty (HELLO, UNLOADED, GET_STATS, PING, PONG,
 * SHUTDOWN). */
gf_status gf_ipc_encode_empty(gf_buf *b, gf_ipc_type type, uint64_t id, gf_err *err);
gf_status gf_ipc_encode_ready(gf_buf *b, uint64_t id, const gf_ipc_ready *m, gf_err *err);
gf_status gf_ipc_encode_load(gf_buf *b, uint64_t id, const gf_ipc_load *m, gf_err *err);
gf_status gf_ipc_encode_loaded(gf_buf *b, uint64_t id, const gf_ipc_loaded *m, gf_err *err);
gf_status gf_ipc_encode_unload(gf_buf *b, uint64_t id, const gf_ipc_unload *m, gf_err *err);
gf_status gf_ipc_encode_residency(gf_buf *b, uint64_t id, const gf_ipc_residency *m, gf_err *err);
/* INFER and RESULT: every tensor must be host-addressable (t.data readable
 * for t.nbytes bytes) and consistent (t.nbytes = numel x dtype size). */
gf_status gf_ipc_encode_infer(gf_buf *b, uint64_t id, const gf_ipc_infer *m, gf_err *err);
gf_status gf_ipc_encode_result(gf_buf *b, uint64_t id, const gf_ipc_result *m, gf_err *err);
/* GATHER FORMS. The same frame on the wire, but the tensors' data stays
 * where it is: b gets the header and the fields, *g the frame as segments
 * (b's bytes and the tensors' data in turn), to write with writev
 * (gf_ipc_gather_iov + gf_ipc_writev_*) while the data is still alive. No
 * tensor byte is copied (nor counted, core/copies.h). b->limit bounds the
 * whole frame. g->n is 0 after a failure. */
typedef struct gf_ipc_seg {
    const void *ext; /* the data of a tensor; NULL: bytes [off, off + len) of b */
    size_t off, len;
} gf_ipc_seg;
#define GF_IPC_GATHER_MAX (2 * GF_IPC_MAX_TENSORS + 2)
typedef struct gf_ipc_gather {
    uint32_t n;   /* segments */
    uint64_t len; /* bytes of the frame */
    gf_ipc_seg seg[GF_IPC_GATHER_MAX];
} gf_ipc_gather;
gf_status gf_ipc_encode_infer_gather(gf_buf *b, gf_ipc_gather *g, uint64_t id,
                                     const gf_ipc_infer *m, gf_err *err);
gf_status gf_ipc_encode_result_gather(gf_buf *b, gf_ipc_gather *g, uint64_t id,
                                      const gf_ipc_result *m, gf_err *err);
/* g's segments as g->n iovecs into iov (room for g->n), over b's bytes as
 * they are now (b must not change before the write). Returns g->n. */
struct iovec;
int gf_ipc_gather_iov(const gf_ipc_gather *g, const gf_buf *b, struct iovec *iov);

/* SHM_FORGET: the shared memory object key (<= GF_IPC_MAX_SHM_KEY, not
 * empty) was unregistered: the worker unmaps it once no request uses it. */
gf_status gf_ipc_encode_shm_forget(gf_buf *b, uint64_t id, const char *key, gf_err *err);

/* message may be NULL (""); a message over GF_IPC_MAX_MESSAGE is truncated
 * at a UTF-8 boundary. */
gf_status gf_ipc_encode_error(gf_buf *b, uint64_t id, gf_status code, const char *message,
                              gf_err *err);
gf_status gf_ipc_encode_event(gf_buf *b, const gf_ipc_event *m, gf_err *err);
gf_status gf_ipc_encode_stats(gf_buf *b, uint64_t id, const gf_ipc_stats *m, gf_err *err);

/* ---- frames ---------------------------------------------------------------- */

/* A received frame. payload is malloc'd and owned by the frame (NULL when
 * payload_len is 0), 16-byte aligned. */
typedef struct gf_ipc_frame {
    gf_ipc_header h;
    unsigned char *payload;
    uint64_t copied; /* payload bytes the reader copied from its read-ahead buffer
                      * (the rest was read straight into the payload); decoding an
                      * INFER or RESULT counts that share of its tensor bytes as
                      * copied (core/copies.h) */
    void (*free_fn)(void *ctx, void *payload); /* how the payload goes back: NULL = free() */
    void *free_ctx;
} gf_ipc_frame;

/* Where a reader puts payloads: alloc returns at least size bytes, 16-byte
 * aligned, or NULL (type is the frame's gf_ipc_type, so an owner can put
 * INFER payloads in pinned memory); free gives them back. Both may be called
 * from any thread (frames outlive the reader's thread). */
typedef struct gf_ipc_payload_alloc {
    void *(*alloc)(void *ctx, uint32_t type, size_t size);
    void (*free)(void *ctx, void *payload);
    void *ctx;
} gf_ipc_payload_alloc;

/* Free the payload (free_fn, else free()); the frame is empty afterwards.
 * NULL is a no-op. */
void gf_ipc_frame_deinit(gf_ipc_frame *f);

/* Parse and check a 24-byte header: magic, version, a known type, an empty
 * payload where the table says so, payload_len <= max_frame. Failures are
 * GF_ERR_PROTOCOL (GF_ERR_TOO_LARGE for the length), naming the field. */
gf_status gf_ipc_header_parse(const unsigned char raw[GF_IPC_HEADER_SIZE], uint64_t max_frame,
                              gf_ipc_header *out, gf_err *err);

/* ---- decoding -------------------------------------------------------------
 * Each decoder checks that the frame has the right type, that every field is
 * in bounds and valid, and that the payload is consumed exactly; failures are
 * GF_ERR_PROTOCOL naming the field. *out borrows from f (see above); the
 * tensor arrays of INFER and RESULT are malloc'd: free them with the deinit
 * function (also after a failed decode, which leaves them NULL). */
gf_status gf_ipc_decode_ready(const gf_ipc_frame *f, gf_ipc_ready *out, gf_err *err);
gf_status gf_ipc_decode_load(const gf_ipc_frame *f, gf_ipc_load *out, gf_err *err);
gf_status gf_ipc_decode_loaded(const gf_ipc_frame *f, gf_ipc_loaded *out, gf_err *err);
gf_status gf_ipc_decode_unload(const gf_ipc_frame *f, gf_ipc_unload *out, gf_err *err);
/* Also checks pin (0/1), priority (a gf_priority) and keep_warm_us. */
gf_status gf_ipc_decode_residency(const gf_ipc_frame *f, gf_ipc_residency *out, gf_err *err);
gf_status gf_ipc_decode_infer(const gf_ipc_frame *f, gf_ipc_infer *out, gf_err *err);
gf_status gf_ipc_decode_shm_forget(const gf_ipc_frame *f, const char **key, gf_err *err);
gf_status gf_ipc_decode_result(const gf_ipc_frame *f, gf_ipc_result *out, gf_err *err);
gf_status gf_ipc_decode_error(const gf_ipc_frame *f, gf_ipc_error *out, gf_err *err);
gf_status gf_ipc_decode_event(const gf_ipc_frame *f, gf_ipc_event *out, gf_err *err);
gf_status gf_ipc_decode_stats(const gf_ipc_frame *f, gf_ipc_stats *out, gf_err *err);
void gf_ipc_infer_deinit(gf_ipc_infer *m);
void gf_ipc_result_deinit(gf_ipc_result *m);

/* ---- reading frames from a socket -------------------------------------------
 * A reader owns a read-ahead buffer and the frame being assembled; it does not
 * own fd. It works on blocking and non-blocking descriptors alike. */
typedef struct gf_ipc_reader {
    int fd;
    uint64_t max_frame; /* payload limit, checked before allocating */
    unsigned char hdr[GF_IPC_HEADER_SIZE];
    size_t hdr_fill;         /* header bytes received so far */
    bool in_payload;         /* the header is complete; assembling cur */
    gf_ipc_frame cur;        /* the frame being assembled */
    uint64_t fill;           /* payload bytes received so far */
    uint64_t discard;        /* payload bytes still to skip (allocation failed) */
    unsigned char *rbuf;     /* read-ahead buffer */
    size_t rpos, rlen, rcap; /* unread bytes are rbuf[rpos, rlen) */
    gf_status broken;        /* a fatal error seen (the stream is unusable), else GF_OK */
    gf_ipc_payload_alloc pa; /* where payloads go (alloc NULL: posix_memalign) */
} gf_ipc_reader;

/* max_frame 0 = GF_IPC_DEFAULT_MAX_FRAME. fd is borrowed. Payloads are
 * malloc'd unless r->pa is set after init (before the first frame).
 *
 * ZERO COPY. With nothing buffered the reader takes a header alone (24
 * bytes), then reads the payload straight into its buffer with readv, whose
 * second part takes the next frame's header and nothing more: a payload is
 * read straight into place whether its frame comes alone or behind others
 * (one readv per frame). Only a reader whose first read took more than a
 * header (the discard path's fill) can copy payload bytes (counted:
 * frame.copied). */
gf_status gf_ipc_reader_init(gf_ipc_reader *r, int fd, uint64_t max_frame, gf_err *err);
void gf_ipc_reader_deinit(gf_ipc_reader *r);

/* Assemble the next frame from what is buffered and what fd has now, without
 * blocking on a non-blocking fd (on a blocking fd a read may block).
 *   GF_OK           *f holds a whole frame; the caller owns it (deinit).
 *   GF_ERR_BUSY     no whole frame yet: wait for POLLIN and call again.
 *   GF_ERR_CLOSED   end of stream at a frame boundary.
 *   GF_ERR_PROTOCOL a bad header, or end of stream inside a frame: the
 *                   stream cannot be trusted any more. f->h holds the header
 *                   when it was readable (else type 0).
 *   GF_ERR_TOO_LARGE the length is over the limit (also fatal to the stream);
 *                   f->h holds the header.
 *   GF_ERR_NOMEM    the payload could not be allocated: f->h holds the header,
 *                   the payload is skipped and the stream stays usable.
 *   GF_ERR_IO       read(2) failed.
 * Call until it returns GF_ERR_BUSY before waiting on fd again: frames may be
 * buffered. */
gf_status gf_ipc_reader_next(gf_ipc_reader *r, gf_ipc_frame *f, gf_err *err);

/* Blocking form: polls fd while gf_ipc_reader_next says BUSY, up to
 * timeout_ms (< 0: forever); GF_ERR_TIMEOUT when it passes. */
gf_status gf_ipc_read_frame(gf_ipc_reader *r, gf_ipc_frame *f, int timeout_ms, gf_err *err);

/* ---- writing --------------------------------------------------------------- */

/* Write len bytes, as many as fd takes now; *written (in/out) counts the bytes
 * of data already written. GF_OK when all are written, GF_ERR_BUSY when fd
 * would block (wait for POLLOUT), GF_ERR_CLOSED when the peer is gone,
 * GF_ERR_IO otherwise. Never raises SIGPIPE on a socket. */
gf_status gf_ipc_write_some(int fd, const void *data, size_t len, size_t *written, gf_err *err);

/* Write all len bytes, polling when fd is non-blocking, up to timeout_ms in
 * total (< 0: forever). */
gf_status gf_ipc_write_all(int fd, const void *data, size_t len, int timeout_ms, gf_err *err);

/* The same over n iovecs (a frame's header and its tensors' bytes where they
 * lie: writev/sendmsg, no concatenation); *written counts the bytes of all
 * of them already written. The iovecs are not changed. */
struct iovec;
gf_status gf_ipc_writev_some(int fd, const struct iovec *iov, int n, size_t *written, gf_err *err);
/* gf_ipc_writev_some that never blocks, on a blocking socket too
 * (MSG_DONTWAIT): GF_ERR_BUSY when the socket takes no more now. */
gf_status gf_ipc_writev_now(int fd, const struct iovec *iov, int n, size_t *written, gf_err *err);
gf_status gf_ipc_writev_all(int fd, const struct iovec *iov, int n, int timeout_ms, gf_err *err);

#ifdef __cplusplus
}
#endif

#endif /* GF_IPC_H */
