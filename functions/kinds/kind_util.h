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

static inline const char *gf_ku_dtype_name(gf_dtype dt)
{
    switch (dt) {
    case GF_DT_F32:
        return "F32";
    case GF_DT_F16:
        return "F16";
    case GF_DT_BF16:
        return "BF16";
    case GF_DT_I32:
        return "I32";
    case GF_DT_I64:
        return "I64";
    default:
        return "another dtype";
    }
}

/* Check, without declaring a parameter, that the weights hold tensor `name`
 * with a dtype in mask (0 = any) and the given shape (-1 = any size); *info
 * gets its descriptor. For tensors a kind only reads at load (the sources of
 * a derived parameter). Messages match those of api->require. */
static inline int gf_ku_expect(const gf_fn_api *api, gf_fn_ctx *ctx, const char *kind,
                               const char *name, uint32_t mask, int32_t rank, const int64_t *shape,
                               gf_tensor *info)
{
    if (api->weight_info(ctx, name, info) != 0)
        return api->set_error(ctx, GF_ERR_INVALID, "weights have no tensor '%s' (kind %s needs it)",
                              name, kind);
    if (mask != 0 && !(mask & (1u << info->dtype)))
        return api->set_error(ctx, GF_ERR_INVALID, "tensor '%s' is %s, expected F32, F16 or BF16",
                              name, gf_ku_dtype_name(info->dtype));
    bool ok = info->rank == rank;
    for (int32_t k = 0; ok && k < rank; k++)
        ok = shape[k] < 0 || shape[k] == info->shape[k];
    if (!ok) {
        char want[128], got[128];
        return api->set_error(ctx, GF_ERR_INVALID, "tensor '%s' has shape %s, expected %s", name,
                              gf_ku_shape_str(got, sizeof got, info->rank, info->shape),
                              gf_ku_shape_str(want, sizeof want, rank, shape));
    }
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

#endif /* GF_FUNCTIONS_KIND_UTIL_H */
