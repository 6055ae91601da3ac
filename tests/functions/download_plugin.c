/* Test plugin `rowmax`: y[i] = scale * max_j x[i, j], computed on the host
 * from device memory read back with api->download (ABI 1.7): the input and
 * the parameter 'scale' [1] are device memory of the call; the answer goes
 * back with api->upload. Also checks download's edges: 0 bytes is a no-op,
 * a NULL buffer is GF_ERR_INVALID. */
#include <stdlib.h>
#include <string.h>

#include <gpufaas/function.h>

static int rm_load(const gf_fn_api *api, gf_fn_ctx *ctx, void **state)
{
    if (!GF_FN_HAS(api, download))
        return api->set_error(ctx, GF_ERR_UNSUPPORTED, "rowmax needs ABI 1.7 (download)");
    size_t *idx = malloc(sizeof *idx);
    if (idx == NULL)
        return api->set_error(ctx, GF_ERR_NOMEM, "out of memory");
    int64_t shape[1] = {1};
    int rc = api->require(ctx, "scale", 1u << GF_DT_F32, 1, shape, idx);
    if (rc != 0) {
        free(idx);
        return rc;
    }
    *state = idx;
    return 0;
}

static int rm_infer(const gf_fn_api *api, gf_fn_ctx *ctx, void *state)
{
    gf_tensor x, sc, y;
    int rc = api->input(ctx, 0, &x);
    if (rc == 0)
        rc = api->param(ctx, *(const size_t *)state, &sc);
    if (rc != 0 || x.rank != 2)
        return rc ? rc : api->set_error(ctx, GF_ERR_INVALID, "x must be a matrix");
    int64_t rows = x.shape[0], cols = x.shape[1];
    float *h = malloc((size_t)(rows * cols + 1) * sizeof *h), scale = 0;
    float *m = malloc((size_t)(rows + 1) * sizeof *m);
    if (h == NULL || m == NULL)
        rc = api->set_error(ctx, GF_ERR_NOMEM, "out of memory");
    if (rc == 0)
        rc = api->download(ctx, h, x.data, x.nbytes);
    if (rc == 0)
        rc = api->download(ctx, &scale, sc.data, sizeof scale);
    if (rc == 0)
        rc = api->download(ctx, NULL, x.data, 0); /* nothing to copy */
    for (int64_t i = 0; rc == 0 && i < rows; i++) {
        m[i] = h[i * cols];
        for (int64_t j = 1; j < cols; j++)
            m[i] = h[i * cols + j] > m[i] ? h[i * cols + j] : m[i];
        m[i] *= scale;
    }
    if (rc == 0)
        rc = api->output(ctx, 0, 1, &rows, &y);
    if (rc == 0)
        rc = api->upload(ctx, y.data, m, (size_t)rows * sizeof *m);
    free(h);
    free(m);
    return rc;
}

static void rm_unload(void *state)
{
    free(state);
}

static const gf_fn_desc desc = {sizeof(gf_fn_desc), GF_FN_ABI_VERSION, "rowmax", rm_load,
                                rm_infer, rm_unload};

GF_FN_EXPORT const gf_fn_desc *gf_function_entry(void);
GF_FN_EXPORT const gf_fn_desc *gf_function_entry(void)
{
    return &desc;
}
