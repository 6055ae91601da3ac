/* gpufaas-worker-convtest: the real gpufaas-worker with one more kind linked
 * in, `convtest`, whose deploy-time converter exercises everything a
 * converting kind (such as onnx) relies on, end to end through the gateway:
 *
 *   upload     a safetensors file with tensors W1 [h, in], b1, W2 [out, h],
 *              b2, and the metadata entry "softmax" ("true" / "false");
 *   converter  writes weights.safetensors with them renamed as an mlp's
 *              (0.weight, 0.bias, 2.weight, 2.bias), a companion file
 *              weights.note, and derives the manifest's config from the
 *              metadata ({"softmax": true});
 *   load       refuses unless api->companion_path finds the note, then is
 *              mlp's load; infer is mlp's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/path.h"
#include "core/safetensors.h"
#include "functions/runtime.h"
#include "ipc.h"
#include "worker/worker.h"

static const gf_fn_desc *mlp(void)
{
    return gf_fn_kind_desc(gf_fn_kind_find("mlp"));
}

static int ct_load(const gf_fn_api *api, gf_fn_ctx *ctx, void **state)
{
    const char *note = api->companion_path(ctx, "note");
    if (note == NULL)
        return api->set_error(ctx, GF_ERR_NOT_FOUND, "convtest: the companion file 'note' is "
                              "missing");
    FILE *f = fopen(note, "r");
    char text[64] = "";
    if (f != NULL) {
        if (fgets(text, sizeof text, f) == NULL)
            text[0] = '\0';
        fclose(f);
    }
    if (strncmp(text, "converted", 9) != 0)
        return api->set_error(ctx, GF_ERR_INVALID, "convtest: the note says '%s'", text);
    return mlp()->load(api, ctx, state);
}

static int ct_infer(const gf_fn_api *api, gf_fn_ctx *ctx, void *state)
{
    return mlp()->infer(api, ctx, state);
}

static void ct_unload(void *state)
{
    mlp()->unload(state);
}

static const gf_fn_desc ct_desc = {sizeof(gf_fn_desc), GF_FN_ABI_VERSION, "convtest", ct_load,
                                   ct_infer, ct_unload};

static gf_status ct_convert(const gf_manifest *mf, const char *upload, const char *out_dir,
                            gf_manifest **derived, gf_err *err)
{
    gf_st_file *f;
    gf_status st = gf_st_open(upload, &f, err);
    if (st != GF_OK)
        return gf_err_prefix(err, "convtest upload");
    static const char *const from[4] = {"W1", "b1", "W2", "b2"};
    static const char *const to[4] = {"0.weight", "0.bias", "2.weight", "2.bias"};
    gf_st_wtensor wt[4];
    for (int i = 0; i < 4; i++) {
        const gf_st_tensor *t = gf_st_find(f, from[i]);
        if (t == NULL) {
            gf_st_close(f);
            return gf_err_set(err, GF_ERR_INVALID, "convtest upload has no tensor '%s'", from[i]);
        }
        wt[i] = (gf_st_wtensor){to[i], t->dtype, t->rank, t->shape, t->data};
    }
    const char *sm = gf_st_meta_get(f, "softmax");
    bool softmax = sm != NULL && strcmp(sm, "true") == 0;
    char *wpath = gf_path_join(out_dir, GF_CONVERTED_WEIGHTS);
    char *npath = gf_path_join(out_dir, GF_CONVERTED_BASE ".note");
    st = gf_st_write(wpath, wt, 4, NULL, 0, err);
    gf_st_close(f);
    FILE *n = st == GF_OK ? fopen(npath, "w") : NULL;
    if (st == GF_OK && (n == NULL || fprintf(n, "converted from %s\n", upload) < 0))
        st = gf_err_set(err, GF_ERR_IO, "writing %s", npath);
    if (n != NULL)
        fclose(n);
    free(wpath);
    free(npath);
    if (st != GF_OK)
        return st;
    if ((st = gf_manifest_clone(mf, derived, err)) != GF_OK)
        return st;
    free((*derived)->config_json);
    (*derived)->config_json = strdup(softmax ? "{\"softmax\":true}" : "{}");
    return (*derived)->config_json != NULL ? GF_OK : gf_err_set(err, GF_ERR_NOMEM, "oom");
}

int main(int argc, char **argv)
{
    gf_err err;
    if (gf_fn_kind_register(&ct_desc, ct_convert, &err) != GF_OK) {
        fprintf(stderr, "gpufaas-worker-convtest: %s\n", err.msg);
        return GF_WORKER_EXIT_FATAL;
    }
    return gf_worker_main(argc, argv);
}
