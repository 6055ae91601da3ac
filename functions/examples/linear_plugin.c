/* gpufaas example plugin: the `linear` kind, y = x W^T + b.
 *
 * A complete function kind built against the public header alone, as any
 * plugin is: it needs nothing from the gpufaas tree but
 * <gpufaas/function.h>. Weights are a bare torch.nn.Linear's state_dict:
 *   weight [out, in] and bias [out] (F32, F16 or BF16)
 * saved with safetensors.torch.save_file(nn.Linear(in, out).state_dict(), ...).
 * One input [N, in] FP32 and one output [N, out] FP32.
 *
 * Build (see functions/examples/meson.build for the same with meson):
 *   cc -shared -fPIC -I<prefix>/include linear_plugin.c -o libgf_example_linear.so
 * and start the server with --allow-native-functions. */
#include <stdlib.h>

#include <gpufaas/function.h>

typedef struct {
    size_t w, b;    /* parameter indices */
    gf_dtype dtype; /* of the weights */
    int64_t in, out;
} linear_state;

static int linear_load(const gf_fn_api *api, gf_fn_ctx *ctx, void **state)
{
    if (api->input_count(ctx) != 1 || api->output_count(ctx) != 1)
        return api->set_error(ctx, GF_ERR_INVALID, "linear takes one input and one output");
    gf_tensor w;
    if (api->weight_info(ctx, "weight", &w) != 0 || w.rank != 2)
        return api->set_error(ctx, GF_ERR_INVALID,
                              "linear needs a tensor 'weight' of shape [out, in]");
    gf_fn_io in;
    api->input_spec(ctx, 0, &in);
    if (in.dtype != GF_DT_F32 || in.rank != 2 || (in.shape[1] != -1 && in.shape[1] != w.shape[1]))
        return api->set_error(ctx, GF_ERR_INVALID, "input '%s' must be FP32 [-1, %lld]", in.name,
                              (long long)w.shape[1]);
    linear_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return api->set_error(ctx, GF_ERR_NOMEM, "out of memory");
    s->dtype = w.dtype;
    s->in = w.shape[1];
    s->out = w.shape[0];
    uint32_t mask = (1u << GF_DT_F32) | (1u << GF_DT_F16) | (1u << GF_DT_BF16);
    int64_t bshape[1] = {s->out};
    int rc = api->require(ctx, "weight", mask, 2, w.shape, &s->w);
    if (rc == 0)
        rc = api->require(ctx, "bias", 1u << w.dtype, 1, bshape, &s->b);
    if (rc != 0) {
        free(s);
        return rc;
    }
    *state = s;
    return 0;
}

static int linear_infer(const gf_fn_api *api, gf_fn_ctx *ctx, void *state)
{
    linear_state *s = state;
    const gf_kernels *k = api->kernels(ctx);
    gf_stream *st = api->stream(ctx);
    gf_tensor x, y, w, b;
    int rc = api->input(ctx, 0, &x);
    if (rc != 0)
        return rc;
    int64_t shape[2] = {x.shape[0], s->out};
    if ((rc = api->output(ctx, 0, 2, shape, &y)) != 0 || (rc = api->param(ctx, s->w, &w)) != 0 ||
        (rc = api->param(ctx, s->b, &b)) != 0)
        return rc;
    rc = k->gemm(k->ctx, st, 0, 1, x.shape[0], s->out, s->in, 1.0f, x.data, GF_DT_F32, s->in,
                 w.data, s->dtype, s->in, 0.0f, y.data, s->out);
    if (rc == 0)
        rc = k->bias_act(k->ctx, st, y.data, x.shape[0], s->out, b.data, s->dtype,
                         GF_ACT_IDENTITY);
    if (rc != 0)
        return api->set_error(ctx, rc, "linear: %s", k->last_error(k->ctx));
    return 0;
}

static void linear_unload(void *state)
{
    free(state);
}

static const gf_fn_desc linear_desc = {
    /* .size = */ sizeof(gf_fn_desc),
    /* .abi_version = */ GF_FN_ABI_VERSION,
    /* .name = */ "linear",
    /* .load = */ linear_load,
    /* .infer = */ linear_infer,
    /* .unload = */ linear_unload,
};

GF_FN_EXPORT const gf_fn_desc *gf_function_entry(void);

GF_FN_EXPORT const gf_fn_desc *gf_function_entry(void)
{
    return &linear_desc;
}
