/* Test plugin `double_linear`: y = x (2W)^T + b, where 2W is a DERIVED
 * parameter computed at load from the weights (as resnet folds batchnorm).
 * Built twice: for the current ABI, declaring its source tensor with
 * weight_use; and with DL_ABI_1_0 as a plugin built for ABI 1.0, which
 * cannot (weight_info then counts as use). */
#include <stdlib.h>
#include <string.h>

#include <gpufaas/function.h>

typedef struct {
    size_t w2, b;
    int64_t in, out;
} dl_state;

static int dl_load(const gf_fn_api *api, gf_fn_ctx *ctx, void **state)
{
    gf_tensor w;
    if (api->weight_info(ctx, "weight", &w) != 0 || w.rank != 2 || w.dtype != GF_DT_F32)
        return api->set_error(ctx, GF_ERR_INVALID, "double_linear needs an F32 'weight' [out, in]");
    dl_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return api->set_error(ctx, GF_ERR_NOMEM, "out of memory");
    s->out = w.shape[0];
    s->in = w.shape[1];
    void *data;
    int rc = api->derive(ctx, "weight_x2", GF_DT_F32, 2, w.shape, &data, &s->w2);
#ifndef DL_ABI_1_0
    if (rc == 0 && GF_FN_HAS(api, weight_use))
        rc = api->weight_use(ctx, "weight");
#endif
    if (rc == 0 && !api->validating(ctx)) {
        gf_tensor src;
        rc = api->weight_data(ctx, "weight", &src);
        if (rc == 0)
            for (int64_t i = 0; i < s->in * s->out; i++)
                ((float *)data)[i] = 2.0f * ((const float *)src.data)[i];
    }
    int64_t bshape[1] = {s->out};
    if (rc == 0)
        rc = api->require(ctx, "bias", 1u << GF_DT_F32, 1, bshape, &s->b);
    if (rc != 0) {
        free(s);
        return rc;
    }
    *state = s;
    return 0;
}

static int dl_infer(const gf_fn_api *api, gf_fn_ctx *ctx, void *state)
{
    dl_state *s = state;
    const gf_kernels *k = api->kernels(ctx);
    gf_tensor x, y, w, b;
    int rc = api->input(ctx, 0, &x);
    int64_t shape[2] = {x.shape[0], s->out};
    if (rc == 0)
        rc = api->output(ctx, 0, 2, shape, &y);
    if (rc == 0)
        rc = api->param(ctx, s->w2, &w);
    if (rc == 0)
        rc = api->param(ctx, s->b, &b);
    if (rc != 0)
        return rc;
    rc = k->gemm(k->ctx, api->stream(ctx), 0, 1, x.shape[0], s->out, s->in, 1.0f, x.data,
                 GF_DT_F32, s->in, w.data, GF_DT_F32, s->in, 0.0f, y.data, s->out);
    if (rc == 0)
        rc = k->bias_act(k->ctx, api->stream(ctx), y.data, x.shape[0], s->out, b.data,
                         GF_DT_F32, GF_ACT_IDENTITY);
    return rc;
}

static void dl_unload(void *state)
{
    free(state);
}

#ifdef DL_ABI_1_0
#define DL_ABI ((uint32_t)(1u << 16))
#define DL_NAME "double_linear_v10"
#else
#define DL_ABI GF_FN_ABI_VERSION
#define DL_NAME "double_linear"
#endif
static const gf_fn_desc desc = {sizeof(gf_fn_desc), DL_ABI, DL_NAME, dl_load, dl_infer,
                                dl_unload};

GF_FN_EXPORT const gf_fn_desc *gf_function_entry(void);
GF_FN_EXPORT const gf_fn_desc *gf_function_entry(void)
{
    return &desc;
}
