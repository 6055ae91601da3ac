/* gpufaas — what functions/runtime.c (loading a version, running a batch)
 * and functions/runtime_api.c (the gf_fn_api a kind calls) share: the plan
 * and the call context. Private to functions/. */
#ifndef GF_FUNCTIONS_RUNTIME_IMPL_H
#define GF_FUNCTIONS_RUNTIME_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/arena.h"
#include "core/json.h"
#include "core/tensor.h"
#include "functions/runtime.h"
#include "functions/weights.h"

typedef struct {
    char *name;
    gf_dtype dtype;
    int32_t rank;
    int64_t shape[GF_MAX_RANK];
    size_t nbytes;
    void *derived; /* host data of a derived parameter, NULL for a required one */
    bool is_derived;
} plan_param;

struct gf_fn_plan {
    const gf_fn_kind *kind;
    const gf_manifest *mf;
    void *state;
    bool loaded; /* load succeeded: unload is owed */
    plan_param *params;
    size_t n, cap;
    char **names;
    char *cache_path;
};

typedef enum { CTX_LOAD, CTX_INFER } ctx_mode;

struct gf_fn_ctx {
    ctx_mode mode;
    const gf_manifest *mf;
    gf_err *err;
    bool error_set;
    gf_json_doc *config;   /* mf->config_json parsed on the first api->config */
    void **owned;          /* handed out for this call (key lists, paths); freed after it */
    size_t n_owned, cap_owned;
    /* load */
    gf_fn_plan *plan;
    gf_fn_weights *weights; /* the file as the kind sees it, with what it used */
    const char *weights_path;
    bool legacy_use;        /* a plugin built before ABI 1.2: weight_info counts as use */
    bool validating;
    void **copies; /* aligned copies handed out by weight_data */
    size_t n_copies;
    /* infer */
    gf_backend *be;
    gf_cache *cache;
    gf_lease *lease;
    gf_stream *stream;
    int device_index;
    gf_tensor *in;   /* device copies of the inputs */
    const gf_tensor *host_in; /* the inputs as the request brought them (host memory) */
    gf_tensor *out;  /* device outputs, data NULL until output(); BYTES: host, owned */
    gf_dev_arena *arena; /* device memory of this call (reset after it) */
};

/* The table every kind is handed (the runtime's side of the ABI). */
extern const gf_fn_api gf_fn_runtime_api;

/* Free what the call handed out (ctx->owned) and the parsed config. */
void gf_fn_ctx_release(gf_fn_ctx *ctx);

/* bytes of device memory for this call (from its arena; freed when the call
 * ends), what naming the use in the message. Returns 0, or the failure's
 * code after setting it on ctx: GF_ERR_TOO_LARGE beyond the whole device
 * budget, GF_ERR_NO_DEVICE_MEM when what is free after evicting idle models
 * is not enough. */
int gf_fn_ctx_alloc(gf_fn_ctx *ctx, size_t bytes, void **out, const char *what);

#endif /* GF_FUNCTIONS_RUNTIME_IMPL_H */
