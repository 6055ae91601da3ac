/* A plugin that reports what the 1.1 accessors see, so a test can check
 * api->config and api->companion_path across the ABI boundary: its load
 * reads the config pointers the test names in config "/probe" and refuses
 * with a message listing each value ("ptr=type:value;..."), then the
 * companion file "graph". */
#include <stdio.h>
#include <string.h>

#include <gpufaas/function.h>

static void describe(char *buf, size_t cap, const gf_fn_cfg *v)
{
    switch (v->type) {
    case GF_FN_CFG_ABSENT: snprintf(buf, cap, "absent"); break;
    case GF_FN_CFG_NULL: snprintf(buf, cap, "null"); break;
    case GF_FN_CFG_BOOL: snprintf(buf, cap, "bool:%lld", (long long)v->i); break;
    case GF_FN_CFG_NUMBER:
        if (v->is_int)
            snprintf(buf, cap, "int:%lld", (long long)v->i);
        else
            snprintf(buf, cap, "num:%g", v->d);
        break;
    case GF_FN_CFG_STRING: snprintf(buf, cap, "str:%s(%zu)", v->s, v->n); break;
    case GF_FN_CFG_ARRAY: snprintf(buf, cap, "array:%zu", v->n); break;
    case GF_FN_CFG_OBJECT: {
        size_t used = (size_t)snprintf(buf, cap, "object:");
        for (size_t i = 0; i < v->n && used < cap; i++)
            used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? "," : "", v->keys[i]);
        break;
    }
    default: snprintf(buf, cap, "?"); break;
    }
}

static int cfg_load(const gf_fn_api *api, gf_fn_ctx *ctx, void **state)
{
    (void)state;
    if (!GF_FN_HAS(api, companion_path))
        return api->set_error(ctx, GF_ERR_UNSUPPORTED, "runtime older than 1.1");
    char out[400];
    size_t used = 0;
    out[0] = '\0';
    gf_fn_cfg probe;
    int rc = api->config(ctx, "/probe", &probe);
    if (rc != 0)
        return rc;
    for (size_t i = 0; probe.type == GF_FN_CFG_ARRAY && i < probe.n; i++) {
        char ptr[32], val[160];
        snprintf(ptr, sizeof ptr, "/probe/%zu", i);
        gf_fn_cfg p, v;
        if ((rc = api->config(ctx, ptr, &p)) != 0)
            return rc;
        if ((rc = api->config(ctx, p.s, &v)) != 0)
            return rc; /* a malformed pointer: the runtime's message */
        describe(val, sizeof val, &v);
        used += (size_t)snprintf(out + used, sizeof out - used, "%s=%s;", p.s, val);
        if (used >= sizeof out)
            break;
    }
    const char *g = api->companion_path(ctx, "graph");
    const char *base = g != NULL ? strrchr(g, '/') : NULL;
    return api->set_error(ctx, GF_ERR_INVALID, "cfg %s graph=%s", out,
                          base != NULL ? base + 1 : "none");
}

static int cfg_infer(const gf_fn_api *api, gf_fn_ctx *ctx, void *state)
{
    (void)state;
    return api->set_error(ctx, GF_ERR_STATE, "not for running");
}

static const gf_fn_desc desc = {sizeof(gf_fn_desc), GF_FN_ABI_VERSION, "cfgprobe", cfg_load,
                                cfg_infer, NULL};

GF_FN_EXPORT const gf_fn_desc *gf_function_entry(void);
GF_FN_EXPORT const gf_fn_desc *gf_function_entry(void)
{
    return &desc;
}
