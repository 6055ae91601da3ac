/* gpufaas-worker-convtest: the real gpufaas-worker with one more kind linked
 * in, `convtest`, whose deploy-time converter exercises everything a
 * converting kind (such as onnx) relies on, end to end through the gateway:
 *
 *   uploads    [0] a safetensors file with tensors W1 [h, in], b1, W2
 *              [out, h], b2, and the metadata entry "softmax" ("true" /
 *              "false"); [1] (optional) a text file, the note;
 *   manifest   partial or absent: the name (from it, or given apart) is all
 *              it needs;
 *   converter  writes weights.safetensors with the tensors renamed as an
 *              mlp's (0.weight, 0.bias, 2.weight, 2.bias) and a companion
 *              file weights.note ("converted: " + the note), and derives the
 *              whole manifest: inputs and outputs from the shapes, config
 *              from the metadata ({"softmax": true});
 *   load       refuses unless api->companion_path finds the note, then is
 *              mlp's load; infer is mlp's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
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
    if (strncmp(text, "converted:", 10) != 0)
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

/* The name: given apart, else the partial manifest's "name". */
static gf_status ct_name(const gf_fn_convert_req *req, char *buf, size_t cap, gf_err *err)
{
    if (req->name != NULL) {
        snprintf(buf, cap, "%s", req->name);
        return GF_OK;
    }
    gf_json_doc *doc;
    if (req->manifest == NULL ||
        gf_json_parse(req->manifest, req->manifest_len, 0, &doc, err) != GF_OK)
        return gf_err_set(err, GF_ERR_INVALID, "convtest: no name for the function");
    const gf_json *n = gf_json_get(gf_json_doc_root(doc), "name");
    gf_status st = n != NULL && n->type == GF_JSON_STRING
                       ? (snprintf(buf, cap, "%s", n->u.str.s), GF_OK)
                       : gf_err_set(err, GF_ERR_INVALID, "convtest: no name for the function");
    gf_json_doc_free(doc);
    return st;
}

static gf_status ct_convert(const gf_fn_convert_req *req, char **manifest_json, gf_err *err)
{
    char name[80];
    gf_status st = ct_name(req, name, sizeof name, err);
    if (st != GF_OK)
        return st;
    gf_st_file *f;
    if ((st = gf_st_open(req->uploads[0], &f, err)) != GF_OK)
        return gf_err_prefix(err, "convtest upload");
    static const char *const from[4] = {"W1", "b1", "W2", "b2"};
    static const char *const to[4] = {"0.weight", "0.bias", "2.weight", "2.bias"};
    gf_st_wtensor wt[4];
    for (int i = 0; i < 4; i++) {
        const gf_st_tensor *t = gf_st_find(f, from[i]);
        if (t == NULL || t->rank != (i % 2 ? 1 : 2)) {
            gf_st_close(f);
            return gf_err_set(err, GF_ERR_INVALID, "convtest upload lacks tensor '%s'", from[i]);
        }
        wt[i] = (gf_st_wtensor){to[i], t->dtype, t->rank, t->shape, t->data};
    }
    int64_t in = wt[0].shape[1], out = wt[2].shape[0];
    const char *sm = gf_st_meta_get(f, "softmax");
    bool softmax = sm != NULL && strcmp(sm, "true") == 0;
    char note[128] = "";
    if (req->n_uploads > 1) {
        FILE *nf = fopen(req->uploads[1], "r");
        if (nf == NULL || fgets(note, sizeof note, nf) == NULL)
            note[0] = '\0';
        if (nf != NULL)
            fclose(nf);
    }
    char *wpath = gf_path_join(req->out_dir, GF_CONVERTED_WEIGHTS);
    char *npath = gf_path_join(req->out_dir, GF_CONVERTED_BASE ".note");
    st = gf_st_write(wpath, wt, 4, NULL, 0, err);
    gf_st_close(f);
    FILE *n = st == GF_OK ? fopen(npath, "w") : NULL;
    if (st == GF_OK && (n == NULL || fprintf(n, "converted: %s\n", note) < 0))
        st = gf_err_set(err, GF_ERR_IO, "writing %s", npath);
    if (n != NULL)
        fclose(n);
    free(wpath);
    free(npath);
    if (st != GF_OK)
        return st;
    char text[1024];
    snprintf(text, sizeof text,
             "{\"name\":\"%s\",\"kind\":\"convtest\",\"inputs\":[{\"name\":\"x\",\"datatype\":"
             "\"FP32\",\"shape\":[-1,%lld]}],\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\","
             "\"shape\":[-1,%lld]}],\"max_batch_size\":4,\"config\":{\"softmax\":%s}}",
             name, (long long)in, (long long)out, softmax ? "true" : "false");
    *manifest_json = strdup(text);
    return *manifest_json != NULL ? GF_OK : gf_err_set(err, GF_ERR_NOMEM, "out of memory");
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
