/* gpufaas — running functions (functions/): the kind registry, plugins, and
 * the runtime side of the function ABI (gpufaas/function.h).
 *
 * Used by the worker only: to load a version and run batches, and, in its
 * one-shot --validate mode, to check a deploy (functions/deploy.h). The
 * gateway never links it: it runs no function code.
 */
#ifndef GF_FUNCTIONS_RUNTIME_H
#define GF_FUNCTIONS_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>

#include <gpufaas/function.h>

#include "backend/backend.h"
#include "cache/cache.h"
#include "core/error.h"
#include "functions/manifest.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- kinds ---- */

typedef struct gf_fn_kind gf_fn_kind;

/* The kind named name: a built-in, or a plugin loaded earlier. NULL when
 * unknown. Thread-safe; kinds live until process exit. */
const gf_fn_kind *gf_fn_kind_find(const char *name);

/* Load a plugin (a shared object exporting gf_function_entry) and register
 * its kind. Refused (GF_ERR_PERMISSION) unless allow_native is true. The
 * ABI major must equal ours and its minor be <= ours; the message says both
 * versions otherwise. A name clash with another kind is GF_ERR_EXISTS
 * (loading the same path twice returns the kind already loaded). */
gf_status gf_fn_plugin_load(const char *path, bool allow_native, const gf_fn_kind **out,
                            gf_err *err);

const char *gf_fn_kind_name(const gf_fn_kind *k);
bool gf_fn_kind_is_plugin(const gf_fn_kind *k);
/* The shared object a plugin kind came from; NULL for a built-in. */
const char *gf_fn_kind_path(const gf_fn_kind *k);

/* Every kind known now: the built-ins in table order, then the plugins in
 * load order. i < gf_fn_kind_count(). */
size_t gf_fn_kind_count(void);
const gf_fn_kind *gf_fn_kind_at(size_t i);

/* What a converting kind gets at deploy (functions/deploy.h). Borrowed for
 * the call. */
typedef struct gf_fn_convert_req {
    const char *manifest;       /* the manifest as uploaded (len bytes), possibly partial
                                   ({"name": "x", "kind": "onnx"}); NULL when none came */
    size_t manifest_len;
    const char *name;           /* the function's name when the deploy gave it apart from
                                   the manifest; NULL otherwise */
    const char *const *uploads; /* the uploaded files: [0] the model, then its extra parts */
    size_t n_uploads;
    const char *out_dir;        /* an empty directory to write into */
} gf_fn_convert_req;

/* A built-in kind's deploy-time conversion of its uploads, run in the
 * validation process (gpufaas-worker --validate). It reads the uploads,
 * writes the version's safetensors weights to
 * <out_dir>/GF_CONVERTED_WEIGHTS and any companion file to
 * <out_dir>/GF_CONVERTED_BASE.<suffix> (functions/manifest.h), and returns
 * in *manifest_json (malloc'd, the caller frees) the complete manifest to
 * store, with the kind's name and the given name. The weights are then
 * validated like any upload. On failure the message names the problem. */
typedef gf_status (*gf_fn_convert_fn)(const gf_fn_convert_req *req, char **manifest_json,
                                      gf_err *err);

/* The kind's converter; NULL for kinds that take safetensors as uploaded
 * (and for every plugin). */
gf_fn_convert_fn gf_fn_kind_converter(const gf_fn_kind *k);

/* The kind's descriptor (its entry points). */
const gf_fn_desc *gf_fn_kind_desc(const gf_fn_kind *k);

/* Register a kind a program links in besides the built-in table (desc and
 * convert live as long as the process), as tests/worker's
 * gpufaas-worker-convtest does: listed after the built-ins with the
 * plugins, but not a plugin. GF_ERR_EXISTS when the name is taken. */
gf_status gf_fn_kind_register(const gf_fn_desc *desc, gf_fn_convert_fn convert, gf_err *err);

/* Names of the built-in kinds, NULL-terminated. */
const char *const *gf_fn_builtin_kinds(void);

/* ---- load ---- */

/* A loaded function version: the kind's state and the parameters it
 * declared, in execution order. */
typedef struct gf_fn_plan gf_fn_plan;

/* Validate mf against the weights at weights_path by running the kind's load
 * in validation mode (no device, derived data not computed). The message
 * names the offending tensor or field. */
gf_status gf_fn_validate(const gf_fn_kind *kind, const gf_manifest *mf, const char *weights_path,
                         gf_err *err);

/* Run the kind's load for real. When the kind derives parameters they are
 * written, with the parameters it requires, in execution order, to
 * derived_path (reused when it already holds exactly those tensors for the
 * same source file). mf is borrowed and must outlive the plan. */
gf_status gf_fn_prepare(const gf_fn_kind *kind, const gf_manifest *mf, const char *weights_path,
                        const char *derived_path, gf_fn_plan **out, gf_err *err);

/* The same for a version that will run on backend be (NULL: unknown): load
 * may then pack weights into derived parameters in be's layout
 * (api->load_kernels), so derived_path belongs to that backend (a worker's
 * own directory). */
gf_status gf_fn_prepare_on(const gf_fn_kind *kind, const gf_manifest *mf,
                           const char *weights_path, const char *derived_path, gf_backend *be,
                           gf_fn_plan **out, gf_err *err);

/* Calls the kind's unload. NULL is a no-op. */
void gf_fn_plan_free(gf_fn_plan *p);

/* The file the parameter cache should map for this plan (the weights, or the
 * derived file), and the parameter names in execution order (what to pass to
 * gf_cache_model_add). Valid as long as the plan. */
const char *gf_fn_plan_cache_path(const gf_fn_plan *p);
size_t gf_fn_plan_param_count(const gf_fn_plan *p);
const char *const *gf_fn_plan_param_names(const gf_fn_plan *p);
const gf_manifest *gf_fn_plan_manifest(const gf_fn_plan *p);

/* ---- infer ---- */

/* Host memory for the outputs copied back (gf_fn_infer_into): alloc(ctx,
 * size) (NULL: none, malloc is used), given back with free(ctx, p). The
 * worker gives its pinned ring, so the device-to-host copy is a DMA into
 * the buffer the RESULT is written from. */
typedef struct gf_fn_host_alloc {
    void *(*alloc)(void *ctx, size_t size);
    void (*free)(void *ctx, void *p);
    void *ctx;
} gf_fn_host_alloc;

/* Host tensors produced by gf_fn_infer; free with gf_fn_outputs_free. */
typedef struct gf_fn_outputs {
    size_t n;
    gf_tensor *t;    /* data in host memory owned by this struct, but for placed ones */
    uint64_t placed; /* bit i: output i's data is the caller's destination (gf_fn_dest) */
    uint64_t hosted; /* bit i: output i's data came from host.alloc */
    gf_fn_host_alloc host;
} gf_fn_outputs;

void gf_fn_outputs_free(gf_fn_outputs *o);

/* Timings of one call, for the worker's RESULT. */
typedef struct gf_fn_timing {
    uint64_t exec_us; /* from the first input copy to the last output copy */
} gf_fn_timing;

/* Run one batch: inputs (host memory, in manifest order) are copied to the
 * device (the kernels' guard refuses, GF_ERR_INVALID, an input they could not
 * read: a count, dtype or shape the manifest does not allow, with the message
 * of gf_manifest_check_tensor -- the rule the gateway applies to every request,
 * so one it passed passes here; the worker adds no check of its own),
 * the kind's infer runs with the lease's parameters, and the outputs come
 * back to host memory in *out (manifest order). When device memory for
 * workspace runs out, idle models are evicted from cache and the
 * allocation is retried once; then GF_ERR_NO_DEVICE_MEM with the sizes. */
gf_status gf_fn_infer(gf_fn_plan *p, gf_backend *be, gf_cache *cache, gf_lease *lease,
                      const gf_tensor *inputs, size_t n_inputs, gf_fn_outputs *out,
                      gf_fn_timing *timing, gf_err *err);

/* gf_fn_infer copying back only the outputs in `want` (bit i = the manifest's
 * output i; 0 = all): the others are computed but not copied to the host;
 * in *out they have their dtype and shape, data NULL and nbytes 0. */
gf_status gf_fn_infer_outputs(gf_fn_plan *p, gf_backend *be, gf_cache *cache, gf_lease *lease,
                              const gf_tensor *inputs, size_t n_inputs, uint64_t want,
                              gf_fn_outputs *out, gf_fn_timing *timing, gf_err *err);

/* Host memory the caller gives for an output (a shared memory span): the
 * output is copied back straight into it. */
typedef struct gf_fn_dest {
    void *data;  /* NULL: none (the output gets host memory of its own) */
    size_t size; /* bytes there; an output larger is GF_ERR_INVALID */
} gf_fn_dest;

/* gf_fn_infer_outputs with dests (NULL, or one per manifest output): an
 * output with a destination is copied back into it (BYTES, already on the
 * host, is copied there) and its tensor in *out points there (bit i of
 * out->placed); one that does not fit is GF_ERR_INVALID naming it and both
 * sizes (what may already have been written there is undefined). */
/* host (NULL: malloc) gives the memory of the outputs copied back without a
 * destination. */
gf_status gf_fn_infer_into(gf_fn_plan *p, gf_backend *be, gf_cache *cache, gf_lease *lease,
                           const gf_tensor *inputs, size_t n_inputs, uint64_t want,
                           const gf_fn_dest *dests, const gf_fn_host_alloc *host,
                           gf_fn_outputs *out, gf_fn_timing *timing, gf_err *err);

#ifdef __cplusplus
}
#endif

#endif /* GF_FUNCTIONS_RUNTIME_H */
