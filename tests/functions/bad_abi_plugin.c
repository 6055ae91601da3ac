/* A plugin built for a future, incompatible function ABI (major 2): the
 * loader must refuse it with both versions in the message. */
#include <gpufaas/function.h>

static int nop_load(const gf_fn_api *api, gf_fn_ctx *ctx, void **state)
{
    (void)api;
    (void)ctx;
    (void)state;
    return 0;
}

static int nop_infer(const gf_fn_api *api, gf_fn_ctx *ctx, void *state)
{
    (void)api;
    (void)ctx;
    (void)state;
    return 0;
}

static const gf_fn_desc desc = {sizeof(gf_fn_desc), (2u << 16) | 0u, "future", nop_load,
                                nop_infer, NULL};

GF_FN_EXPORT const gf_fn_desc *gf_function_entry(void);
GF_FN_EXPORT const gf_fn_desc *gf_function_entry(void)
{
    return &desc;
}
