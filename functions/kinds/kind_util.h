/* gpufaas — small helpers the built-in kinds share (functions/kinds).
 *
 * Written against the public ABI only (<gpufaas/function.h>; the kinds are
 * compiled with no other include path), so a kind that uses them stays a
 * plugin in all but packaging. Every helper that fails has already set the
 * error message through api->set_error and returns the code to pass on.
 */
#ifndef GF_FUNCTIONS_KIND_UTIL_H
#define GF_FUNCTIONS_KIND_UTIL_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <gpufaas/function.h>

/* The dtype masks kinds accept for weights. */
#define GF_KU_FLOAT_MASK ((1u << GF_DT_F32) | (1u << GF_DT_F16) | (1u << GF_DT_BF16))
#define GF_KU_ID_MASK ((1u << GF_DT_I32) | (1u << GF_DT_I64))

/* "[64, 3, 7, 7]" into buf (cap bytes); returns buf. */
static inline const char *gf_ku_shape_str(char *buf, size_t cap, int32_t rank, const int64_t *shape)
{
    size_t used = 0;
    int n = snprintf(buf, cap, "[");
    used = n > 0 ? (size_t)n : 0;
    for (int32_t i = 0; i < rank && used < cap; i++) {
        n = snprintf(buf + used, cap - used, "%s%" PRId64, i ? ", " : "", shape[i]);
        used += n > 0 ? (size_t)n : 0;
    }
    if (used < cap)
        snprintf(buf + used, cap - used, "]");
    return buf;
}

/* A dtype as KServe (and the manifest) spells it: "FP32", "INT64". */
static inline const char *gf_ku_dtype_name(gf_dtype dt)
{
    static const char *const names[GF_DT_COUNT_] = {
        [GF_DT_BOOL] = "BOOL",   [GF_DT_U8] = "UINT8",   [GF_DT_U16] = "UINT16",
        [GF_DT_U32] = "UINT32",  [GF_DT_U64] = "UINT64", [GF_DT_I8] = "INT8",
        [GF_DT_I16] = "INT16",   [GF_DT_I32] = "INT32",  [GF_DT_I64] = "INT64",
        [GF_DT_F16] = "FP16",    [GF_DT_BF16] = "BF16",  [GF_DT_F32] = "FP32",
        [GF_DT_F64] = "FP64",    [GF_DT_BYTES] = "BYTES",
    };
    return (unsigned)dt < GF_DT_COUNT_ && names[dt] != NULL ? names[dt] : "an invalid dtype";
}

/* Check, without declaring a parameter, that the weights hold tensor `name`
 * with a dtype in mask (0 = any) and the given shape (-1 = any size), and
 * mark it used (weight_use); *info gets its descriptor. For tensors a kind
 * only reads at load (the sources of a derived parameter). When the check
 * fails, api->require reports it, so the messages are the runtime's. */
static inline int gf_ku_expect(const gf_fn_api *api, gf_fn_ctx *ctx, const char *kind,
                               const char *name, uint32_t mask, int32_t rank, const int64_t *shape,
                               gf_tensor *info)
{
    bool ok = api->weight_info(ctx, name, info) == 0 &&
              (mask == 0 || (mask & (1u << info->dtype))) && info->rank == rank;
    for (int32_t k = 0; ok && k < rank; k++)
        ok = shape[k] < 0 || shape[k] == info->shape[k];
    if (!ok) {
        size_t unused;
        int rc = api->require(ctx, name, mask, rank, shape, &unused);
        return rc != 0 ? rc
                       : api->set_error(ctx, GF_ERR_INTERNAL, "%s: tensor '%s' passed require "
                                        "but not its own check", kind, name);
    }
    api->weight_use(ctx, name);
    return 0;
}

/* The config member `key` (a plain name: no '/' or '~') into *v; type
 * GF_FN_CFG_ABSENT when it is not there. */
static inline int gf_ku_cfg_get(const gf_fn_api *api, gf_fn_ctx *ctx, const char *key,
                                gf_fn_cfg *v)
{
    char ptr[128];
    snprintf(ptr, sizeof ptr, "/%s", key);
    return api->config(ctx, ptr, v);
}

/* Refuse a config member not named in known (NULL-terminated): "<kind>
 * config: unknown field "x" (known: a, b)". */
static inline int gf_ku_cfg_known(const gf_fn_api *api, gf_fn_ctx *ctx, const char *kind,
                                  const char *const *known)
{
    gf_fn_cfg root;
    int rc = api->config(ctx, "", &root);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < root.n; i++) {
        bool ok = false;
        for (size_t k = 0; known[k] != NULL && !ok; k++)
            ok = strcmp(root.keys[i], known[k]) == 0;
        if (!ok) {
            char list[256];
            size_t used = 0;
            list[0] = '\0';
            for (size_t k = 0; known[k] != NULL && used < sizeof list; k++) {
                int n = snprintf(list + used, sizeof list - used, "%s%s", k ? ", " : "", known[k]);
                used += n > 0 ? (size_t)n : 0;
            }
            return api->set_error(ctx, GF_ERR_INVALID,
                                  "%s config: unknown field \"%.64s\" (known: %s)", kind,
                                  root.keys[i], list);
        }
    }
    return 0;
}

/* Integer config field key in [lo, hi]; *out keeps its value when absent.
 * *given (may be NULL) says whether it was present. */
static inline int gf_ku_cfg_int(const gf_fn_api *api, gf_fn_ctx *ctx, const char *kind,
                                const char *key, int64_t lo, int64_t hi, int64_t *out, bool *given)
{
    gf_fn_cfg v;
    int rc = gf_ku_cfg_get(api, ctx, key, &v);
    if (rc != 0)
        return rc;
    if (given != NULL)
        *given = v.type != GF_FN_CFG_ABSENT;
    if (v.type == GF_FN_CFG_ABSENT)
        return 0;
    if (v.type != GF_FN_CFG_NUMBER || !v.is_int || v.i < lo || v.i > hi)
        return api->set_error(ctx, GF_ERR_INVALID,
                              "%s config: \"%s\" must be an integer in [%" PRId64 ", %" PRId64 "]",
                              kind, key, lo, hi);
    *out = v.i;
    return 0;
}

/* Number config field key in (0, hi]; *out keeps its value when absent. */
static inline int gf_ku_cfg_positive(const gf_fn_api *api, gf_fn_ctx *ctx, const char *kind,
                                     const char *key, double hi, double *out)
{
    gf_fn_cfg v;
    int rc = gf_ku_cfg_get(api, ctx, key, &v);
    if (rc != 0 || v.type == GF_FN_CFG_ABSENT)
        return rc;
    if (v.type != GF_FN_CFG_NUMBER || !(v.d > 0.0) || v.d > hi)
        return api->set_error(ctx, GF_ERR_INVALID,
                              "%s config: \"%s\" must be a number in (0, %g]", kind, key, hi);
    *out = v.d;
    return 0;
}

/* Report a failed kernel call: "<what>: <the kernel's message>". */
static inline int gf_ku_kerr(const gf_fn_api *api, gf_fn_ctx *ctx, const gf_kernels *k, int rc,
                             const char *what)
{
    const char *msg = k->last_error(k->ctx);
    return api->set_error(ctx, rc, "%s: %s", what, msg != NULL && msg[0] ? msg : "failed");
}

/* True when the manifest io spec has rank `rank` and every dim of want that
 * is >= 0 matches (or the spec says -1 there). */
static inline bool gf_ku_io_matches(const gf_fn_io *io, int32_t rank, const int64_t *want)
{
    if (io->rank != rank)
        return false;
    for (int32_t k = 0; k < rank; k++)
        if (want[k] >= 0 && io->shape[k] >= 0 && io->shape[k] != want[k])
            return false;
    return true;
}

/* ---- batchnorm and other per-channel vectors (kind_util.c) ----
 *
 * THE FOLDING RULE, one for every kind: a BatchNorm after a layer with F32
 * weights is folded into that layer at load (W' = W s, b' = (b - mean) s +
 * beta with s = gamma / sqrt(var + eps), in double, stored as F32: the
 * rounding is FP32's own). After F16 or BF16 weights it is not folded:
 * folding would round W s to the half dtype once more, adding its error to
 * that of the stored weights; the weights are used as stored and batchnorm
 * runs after the layer from the stored statistics (kernel batchnorm), as
 * PyTorch computes it. */

/* Element i of a F32, F16 or BF16 array, exactly widened. */
double gf_ku_get(const void *p, gf_dtype dt, size_t i);

/* Up to four [c] vectors one kernel reads with one dtype: a BatchNorm's
 * mean, var, gamma, beta or a LayerNorm's gamma, beta. */
typedef struct gf_ku_vecs {
    int n;            /* vectors in the group */
    bool present[4];  /* an absent one is NULL at run time (the kernel's default) */
    bool packed;      /* stored dtypes differ: one derived F32 [n, c] copy */
    gf_dtype dtype;   /* what the kernel reads */
    int64_t c;
    size_t idx[4];    /* parameter indices (packed: idx[0] for all) */
} gf_ku_vecs;

/* Declare the group names[0..n) (NULL or absent entries allowed where
 * !needed[j]): each must be FP32/FP16/BF16 of shape [c]. When they share a
 * dtype they become parameters as stored, else an exactly widened F32 copy
 * "<names[0]>.f32" is derived. */
int gf_ku_vecs_declare(const gf_fn_api *api, gf_fn_ctx *ctx, const char *kind,
                       const char *const *names, const bool *needed, int n, int64_t c,
                       gf_ku_vecs *v);

/* At infer: the group's device pointers (NULL for absent ones). */
int gf_ku_vecs_get(const gf_fn_api *api, gf_fn_ctx *ctx, const gf_ku_vecs *v, const void **ptr);

/* A BatchNorm `bn` ("<bn>.running_mean", ... ) of c channels, as a group in
 * the order mean, var, gamma, beta (gamma and beta absent when !affine). */
int gf_ku_bn_declare(const gf_fn_api *api, gf_fn_ctx *ctx, const char *kind, const char *bn,
                     bool affine, int64_t c, gf_ku_vecs *v);

/* Fold BatchNorm `bn` (c = wshape[0] channels) into the layer with weight
 * tensor wname (F32, rank wrank, shape wshape, rows = output channels) and
 * optional bias tensor bname (NULL: none): derives "<wname>.folded" and
 * "<bname or wname's prefix>.bias.folded", both F32, into *w_idx and
 * *b_idx; the sources are used (weight_use). eps > 0. */
int gf_ku_bn_fold(const gf_fn_api *api, gf_fn_ctx *ctx, const char *kind, const char *wname,
                  const char *bname, const char *bn, bool affine, int32_t wrank,
                  const int64_t *wshape, double eps, size_t *w_idx, size_t *b_idx);

/* Mark "<bn>.num_batches_tracked" used when present: a counter for
 * training that has no effect at inference. */
void gf_ku_bn_counter(const gf_fn_api *api, gf_fn_ctx *ctx, const char *bn);

#endif /* GF_FUNCTIONS_KIND_UTIL_H */
