/* A hostile plugin kind, `crash`: its load dies of a segmentation fault
 * when it validates a deploy. Where that runs (a short-lived gpufaas-worker
 * --validate) it must take down only that process. */
#include <signal.h>

#include <gpufaas/function.h>

static int crash_load(const gf_fn_api *api, gf_fn_ctx *ctx, void **state)
{
    (void)state;
    if (api->validating(ctx))
        raise(SIGSEGV);
    return api->set_error(ctx, GF_ERR_INVALID, "crash: only crashes");
}

static int crash_infer(const gf_fn_api *api, gf_fn_ctx *ctx, void *state)
{
    (void)state;
    return api->set_error(ctx, GF_ERR_STATE, "crash: not for running");
}

static const gf_fn_desc desc = {sizeof(gf_fn_desc), GF_FN_ABI_VERSION, "crash", crash_load,
                                crash_infer, NULL};

GF_FN_EXPORT const gf_fn_desc *gf_function_entry(void);
GF_FN_EXPORT const gf_fn_desc *gf_function_entry(void)
{
    return &desc;
}
