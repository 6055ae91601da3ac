/* gpufaas — the function ABI: what a function kind (built in or a plugin)
 * implements and what the runtime offers it.
 *
 * A function = a kind (this code) + a manifest (JSON) + weights (safetensors).
 * A plugin is a shared object built against this header alone that exports
 *
 *     GF_FN_EXPORT const gf_fn_desc *gf_function_entry(void);
 *
 * The built-in kinds (mlp, resnet, bert) are written against exactly the same
 * interface.
 *
 * VERSIONING. GF_FN_ABI_MAJOR changes when a change breaks existing plugins;
 * GF_FN_ABI_MINOR when something is added (a member at the end of gf_fn_api or
 * gf_fn_desc). The loader accepts a plugin when its major equals the
 * runtime's and its minor is <= the runtime's. Structs start with their
 * size and are append-only: "members above are valid for version 1.0". Use
 * GF_FN_HAS(api, member) before calling a member added after 1.0 (a plugin
 * built for 1.1 that may run on a 1.0 runtime). 1.1 added the named status
 * codes (<gpufaas/status.h>), api->config and api->companion_path; 1.2
 * api->weight_use and the unused-weights rule (see weight_use); 1.3
 * api->upload; 1.4 api->input_host; 1.5 BYTES tensors (GF_DT_BYTES,
 * <gpufaas/types.h>) and api->output_bytes; 1.6 api->load_kernels; 1.7
 * api->download.
 *
 * LIFECYCLE. For each function version on each worker:
 *   load(ctx, &state)    once, on the host, before any parameter is on the
 *                        device: read the config, inspect the weights'
 *                        descriptors (and, for derived parameters, their
 *                        bytes), and declare the parameters infer will use,
 *                        in execution order (require / derive). Also run at
 *                        deploy time to validate a manifest against its
 *                        weights, with no device at all.
 *   infer(ctx, state)    per batch: compute outputs from inputs on the
 *                        compute stream with the kernel table.
 *   unload(state)        once, when the version is dropped.
 *
 * OWNERSHIP AND LIFETIMES. Everything the runtime hands over is borrowed and
 * valid until the call it was handed to returns: the ctx, strings, tensor
 * descriptors, parameter and workspace addresses. A function NEVER keeps a
 * parameter address between calls: the runtime may evict and reload (and
 * so move) parameters at any time between calls. `state` belongs to the
 * function (allocated in load, freed in unload) and must not hold device
 * pointers.
 *
 * ERRORS. Every entry point returns GF_OK (0) or a gf_status code from
 * <gpufaas/status.h>: GF_ERR_INVALID for input or weights that do not fit,
 * GF_ERR_UNSUPPORTED for a valid model this kind cannot run,
 * GF_ERR_NOT_FOUND, GF_ERR_NOMEM, GF_ERR_NO_DEVICE_MEM, ... Before returning
 * an error a function sets a message with api->set_error (which returns the
 * code, so `return api->set_error(ctx, GF_ERR_INVALID, "...")` works).
 * Runtime calls that fail set the message themselves: just return their
 * code.
 *
 * DEPLOY-TIME VALIDATION. A deploy is checked by a short-lived
 * `gpufaas-worker --validate` process, never inside the gateway: it runs
 * load with validating() == 1 and no device, so a kind that crashes on
 * hostile weights takes down that process and fails the deploy, nothing
 * else. A built-in kind may also convert the upload there (functions/
 * runtime.h, gf_fn_convert_fn; docs/architecture.md, "Deploy"): write the
 * version's safetensors weights and companion files (a graph, a vocabulary)
 * into a directory the gateway gives it, and derive the manifest to store.
 * The gateway publishes the companion files beside the weights; load finds
 * one with api->companion_path (1.1).
 *
 * THREADING. A version's load, infer and unload are never called
 * concurrently for the same state; different versions may run on different
 * threads. infer must only use the stream it is given.
 *
 * WHERE BUFFERS LIVE. Every gf_tensor says where its data is (mem,
 * device_id). In infer, inputs, outputs, parameters and workspace are on the
 * device of the kernel table (GF_MEM_DEVICE; on the cpu backend that is
 * host-addressable memory, but do not rely on it). In load, weight data
 * read with weight_data() is host memory (GF_MEM_HOST). BYTES inputs and
 * outputs are the exception: always host memory (see api->output_bytes).
 */
#ifndef GPUFAAS_FUNCTION_H
#define GPUFAAS_FUNCTION_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <gpufaas/kernels.h>
#include <gpufaas/status.h>
#include <gpufaas/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GF_FN_ABI_MAJOR 1
#define GF_FN_ABI_MINOR 7
#define GF_FN_ABI_VERSION ((uint32_t)((GF_FN_ABI_MAJOR << 16) | GF_FN_ABI_MINOR))

#if defined(__GNUC__)
#define GF_FN_EXPORT __attribute__((visibility("default")))
#else
#define GF_FN_EXPORT
#endif

/* Name of the symbol a plugin exports. */
#define GF_FN_ENTRY_SYMBOL "gf_function_entry"

/* Per-call context, owned by the runtime (opaque). */
typedef struct gf_fn_ctx gf_fn_ctx;

/* True when the api the runtime passed has `member` (added after 1.0). */
#define GF_FN_HAS(api, member) \
    ((api)->size >= offsetof(gf_fn_api, member) + sizeof((api)->member))

/* Log levels for gf_fn_api.log. */
enum { GF_FN_LOG_ERROR = 0, GF_FN_LOG_WARN = 1, GF_FN_LOG_INFO = 2, GF_FN_LOG_DEBUG = 3 };

/* A tensor's description from the manifest: shape dims may be -1 (any). */
typedef struct gf_fn_io {
    const char *name;
    gf_dtype dtype;
    int32_t rank;
    const int64_t *shape;
} gf_fn_io;

/* Types of a config value (gf_fn_cfg.type), 1.1. */
enum {
    GF_FN_CFG_ABSENT = 0, /* nothing at that pointer */
    GF_FN_CFG_NULL = 1,
    GF_FN_CFG_BOOL = 2,
    GF_FN_CFG_NUMBER = 3,
    GF_FN_CFG_STRING = 4,
    GF_FN_CFG_ARRAY = 5,
    GF_FN_CFG_OBJECT = 6,
};

/* One value of the manifest's "config" object, as api->config finds it
 * (1.1). What it points to is borrowed until the entry point returns. */
typedef struct gf_fn_cfg {
    int32_t type;            /* GF_FN_CFG_* */
    int32_t is_int;          /* NUMBER: an integer literal exact in int64 (then i is it) */
    int64_t i;               /* NUMBER when is_int; BOOL: 0 or 1 */
    double d;                /* NUMBER: its nearest double (also set when is_int) */
    const char *s;           /* STRING: UTF-8, NUL-terminated (n is its length) */
    size_t n;                /* STRING: bytes; ARRAY: items; OBJECT: members */
    const char *const *keys; /* OBJECT: its n member names, in document order */
} gf_fn_cfg;

/* What the runtime offers. One static table per runtime; ctx selects the
 * call. Members above a version comment are valid from that version on. */
typedef struct gf_fn_api {
    uint32_t size;        /* sizeof(gf_fn_api) of the runtime */
    uint32_t abi_version; /* GF_FN_ABI_VERSION of the runtime */

    /* -- any call -- */

    /* Set the message for the error about to be returned (code: a
     * gf_status). Returns code, so
     * `return api->set_error(ctx, GF_ERR_INVALID, "bad %s", x);` works. */
    int (*set_error)(gf_fn_ctx *ctx, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
    void (*log)(gf_fn_ctx *ctx, int level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

    /* The manifest's "config" object as JSON text ("{}" when absent); the
     * config accessor (1.1, below) reads it without a JSON parser. */
    const char *(*config_json)(gf_fn_ctx *ctx);
    /* The manifest's max_batch_size. */
    int64_t (*max_batch_size)(gf_fn_ctx *ctx);
    /* The manifest's inputs and outputs. i < count. */
    size_t (*input_count)(gf_fn_ctx *ctx);
    size_t (*output_count)(gf_fn_ctx *ctx);
    void (*input_spec)(gf_fn_ctx *ctx, size_t i, gf_fn_io *out);
    void (*output_spec)(gf_fn_ctx *ctx, size_t i, gf_fn_io *out);

    /* -- load only -- */

    /* Descriptor (dtype, rank, shape; data NULL) of the weights tensor
     * `name`. Returns GF_ERR_NOT_FOUND without setting an error when
     * absent. */
    int (*weight_info)(gf_fn_ctx *ctx, const char *name, gf_tensor *out);
    /* Number of tensors in the weights file and the name of the i-th (file
     * order); for kinds that discover their layers. */
    size_t (*weight_count)(gf_fn_ctx *ctx);
    const char *(*weight_name)(gf_fn_ctx *ctx, size_t i);
    /* Host bytes of a weights tensor (for derived parameters). May fail with
     * GF_ERR_UNSUPPORTED when validating without the data. */
    int (*weight_data)(gf_fn_ctx *ctx, const char *name, gf_tensor *out);
    /* Declare that infer uses weights tensor `name` as its next parameter.
     * dtype_mask: bit (1 << dtype) for each accepted dtype (0 = any). shape:
     * rank dims, -1 where any size is fine (NULL = any shape). Fails with a
     * message naming the tensor and both shapes when it is missing or
     * mis-shaped. *index is the parameter's index for param(). */
    int (*require)(gf_fn_ctx *ctx, const char *name, uint32_t dtype_mask, int32_t rank,
                   const int64_t *shape, size_t *index);
    /* Declare a derived parameter: a new tensor the function computes now,
     * on the host, into *data (runtime-owned, nbytes long, zeroed). It is
     * stored and swapped like any other parameter. *index as for require. */
    int (*derive)(gf_fn_ctx *ctx, const char *name, gf_dtype dtype, int32_t rank,
                  const int64_t *shape, void **data, size_t *index);
    /* True (1) when load runs only to validate (deploy time): derived data
     * need not be computed and weight_data may be unavailable. */
    int (*validating)(gf_fn_ctx *ctx);

    /* -- infer only -- */

    /* The kernel table and the compute stream. */
    const gf_kernels *(*kernels)(gf_fn_ctx *ctx);
    gf_stream *(*stream)(gf_fn_ctx *ctx);
    /* Parameter `index` (from require/derive) on the device, waiting (on
     * the stream) until it has arrived: call it just before its first use,
     * so that compute overlaps the copy of later parameters. */
    int (*param)(gf_fn_ctx *ctx, size_t index, gf_tensor *out);
    /* Device scratch of at least bytes (256-byte aligned), valid until infer
     * returns. Several calls give disjoint blocks. */
    int (*workspace)(gf_fn_ctx *ctx, size_t bytes, void **out);
    /* Input i, validated against the manifest (dtype, rank, fixed dims). */
    int (*input)(gf_fn_ctx *ctx, size_t i, gf_tensor *out);
    /* Allocate output i with the given shape (dtype from the manifest). */
    int (*output)(gf_fn_ctx *ctx, size_t i, int32_t rank, const int64_t *shape,
                  gf_tensor *out);
    /* members above are valid for version 1.0 */

    /* -- any call (1.1) -- */

    /* The config value at `pointer`, a JSON Pointer (RFC 6901) into the
     * manifest's config object: "" is the object itself, "/hidden_size" a
     * member, "/activations/0" an array item ("~1" stands for '/' in a key,
     * "~0" for '~'). A pointer that leads nowhere gives GF_OK with type
     * GF_FN_CFG_ABSENT; a malformed one (not starting with '/')
     * GF_ERR_INVALID with a message. */
    int (*config)(gf_fn_ctx *ctx, const char *pointer, gf_fn_cfg *out);

    /* -- load only (1.1) -- */

    /* The path of this version's companion file `suffix` ([a-z0-9_]+, e.g.
     * "graph"): a file its kind's converter wrote at deploy, published beside
     * the weights. NULL when the version has no such file. The string lives
     * until the entry point returns. */
    const char *(*companion_path)(gf_fn_ctx *ctx, const char *suffix);
    /* members above are valid for version 1.1 */

    /* -- load only (1.2) -- */

    /* Declare that load uses weights tensor `name` without making it a
     * parameter: a source of a derived parameter (when validating, too,
     * where the derived data is not computed), or a tensor the kind has
     * checked and that has no effect at inference (a BatchNorm's
     * num_batches_tracked). Returns GF_ERR_NOT_FOUND without setting an
     * error when absent.
     *
     * THE UNUSED-WEIGHTS RULE. After load returns 0, every tensor of the
     * weights file must have been required, read with weight_data or
     * declared with weight_use; otherwise the load fails (GF_ERR_INVALID) with a
     * message naming the tensors left over, so that a model is never served
     * without a part its file contains. The manifest's "ignore_weights"
     * lists tensors a deploy deliberately does without: they are invisible
     * to the kind (weight_info, weight_count and weight_name skip them).
     * For a plugin built for ABI 1.0 or 1.1, which cannot call weight_use, a
     * tensor it looked at with weight_info counts as used. */
    int (*weight_use)(gf_fn_ctx *ctx, const char *name);
    /* members above are valid for version 1.2 */

    /* -- infer only (1.3) -- */

    /* Copy bytes from host memory at src to dst, device memory of this call
     * (workspace or an output), ordered on the stream. src is read before the
     * call returns (so it may be reused at once). */
    int (*upload)(gf_fn_ctx *ctx, void *dst, const void *src, size_t bytes);
    /* members above are valid for version 1.3 */

    /* -- infer only (1.4) -- */

    /* Input i as the request brought it, in host memory (what api->input
     * has on the device): for a kind that reads an input's values on the
     * host (a shape, bounds). Borrowed until the entry point returns. */
    int (*input_host)(gf_fn_ctx *ctx, size_t i, gf_tensor *out);
    /* members above are valid for version 1.4 */

    /* -- infer only (1.5) -- */

    /* Set BYTES output i (its manifest datatype is BYTES) to the elements
     * of shape, row-major: element k is lens[k] bytes at elems[k] (host
     * memory, copied before the call returns; elems[k] may be NULL when
     * lens[k] is 0). api->output refuses a BYTES output, since its size
     * depends on the strings. A BYTES input (api->input and input_host
     * alike) is the host serialization of <gpufaas/types.h>, checked:
     * walk it with gf_fn_bytes_next below. */
    int (*output_bytes)(gf_fn_ctx *ctx, size_t i, int32_t rank, const int64_t *shape,
                        const void *const *elems, const size_t *lens);
    /* members above are valid for version 1.5 */

    /* -- load only (1.6) -- */

    /* The kernel table of the backend the version will run on, during
     * load, for its host-side members only (those that say "host only",
     * such as conv2d_pack: packing weights into a derived parameter in the
     * backend's layout). NULL when validating, or when load runs without a
     * backend. Borrowed until load returns. */
    const gf_kernels *(*load_kernels)(gf_fn_ctx *ctx);
    /* members above are valid for version 1.6 */

    /* -- infer only (1.7) -- */

    /* Copy bytes of device memory of this call at src (an input, an output,
     * workspace) to host memory at dst, ordered on the stream after the work
     * queued so far, and wait: dst holds the bytes when it returns (so a kind
     * can read a value it computed, such as class indices it turns into
     * BYTES labels with output_bytes). 0 bytes is a no-op; a NULL buffer
     * with bytes > 0 is GF_ERR_INVALID. It stalls the stream: use it for
     * small results, once per call. */
    int (*download)(gf_fn_ctx *ctx, void *dst, const void *src, size_t bytes);
    /* members above are valid for version 1.7 */
} gf_fn_api;

/* The next element of a BYTES tensor t (host data): 1 with *elem and *len
 * set and *pos advanced, 0 after the last one (or at a malformed one, which
 * the runtime never hands over). *pos starts at 0. */
static inline int gf_fn_bytes_next(const gf_tensor *t, size_t *pos, const void **elem,
                                   size_t *len)
{
    const unsigned char *p = (const unsigned char *)t->data;
    if (t->dtype != GF_DT_BYTES || p == NULL || *pos > t->nbytes || t->nbytes - *pos < 4)
        return 0;
    size_t n = (size_t)p[*pos] | (size_t)p[*pos + 1] << 8 | (size_t)p[*pos + 2] << 16 |
               (size_t)p[*pos + 3] << 24;
    if (n > t->nbytes - *pos - 4)
        return 0;
    *elem = p + *pos + 4;
    *len = n;
    *pos += 4 + n;
    return 1;
}

/* What a kind implements. */
typedef struct gf_fn_desc {
    uint32_t size;        /* sizeof(gf_fn_desc) of the plugin */
    uint32_t abi_version; /* GF_FN_ABI_VERSION the plugin was built with */
    const char *name;     /* the kind's name, [a-z0-9_]+ */
    /* See LIFECYCLE above. *state may be left NULL. */
    int (*load)(const gf_fn_api *api, gf_fn_ctx *ctx, void **state);
    int (*infer)(const gf_fn_api *api, gf_fn_ctx *ctx, void *state);
    void (*unload)(void *state);
    /* members above are valid for version 1.0 */
} gf_fn_desc;

typedef const gf_fn_desc *(*gf_fn_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* GPUFAAS_FUNCTION_H */
