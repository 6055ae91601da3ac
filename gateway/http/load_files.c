/* gpufaas — a repository load with a configuration and files (gateway/http):
 * Triton's load_model(config=..., files=...) sends
 *
 *   {"parameters": {"config": "<ModelConfig JSON>",
 *                   "file:1/model.onnx": "<base64>", ...}}
 *
 * Each file is decoded (OpenSSL's base64 decoder) into a staged file of the
 * upload directory, in chunks, with its SHA-256, through the deploy's
 * upload (upload.h): `<name>.safetensors` is the weights, `<name>.onnx` an
 * ONNX model, and one more file beside an ONNX model is its external data;
 * `<name>.txt` files are labels (what a config's label_filename names),
 * decoded into memory.
 * The core then deploys a new version (gf_gw_repo_load_new).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "functions/manifest.h"
#include "gateway/http/http_impl.h"

#define MAX_FILES 2 /* a model or weights, and an ONNX model's external data */
#define MAX_LABEL_FILES 4

/* A load's label files, decoded. */
struct gf_http_load_labels {
    struct gf_gw_text_file f[MAX_LABEL_FILES];
    gf_buf text[MAX_LABEL_FILES];
    char *names[MAX_LABEL_FILES];
    size_t n;
};

void gf_http_load_labels_free(struct gf_http_load_labels *l)
{
    if (l == NULL)
        return;
    for (size_t i = 0; i < l->n; i++) {
        gf_buf_deinit(&l->text[i]);
        free(l->names[i]);
    }
    free(l);
}

typedef struct load_file {
    const char *key;  /* "file:1/model.onnx" */
    const char *name; /* "model.onnx" */
    const gf_json *data;
} load_file;

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Where decoded bytes go: an upload's part, or a buffer (mem). */
static gf_status sink(gf_upload *u, const char *part, gf_buf *mem, const unsigned char *b,
                      uint64_t off, size_t n, gf_err *err)
{
    if (mem != NULL)
        return gf_buf_append(mem, b, n) == GF_OK
                   ? GF_OK
                   : gf_err_set(err, GF_ERR_TOO_LARGE, "a labels file is larger than %zu bytes",
                                (size_t)GF_MANIFEST_MAX_BYTES);
    if (gf_upload_feed(u, part, (const char *)b, off, n) != GF_OK)
        return gf_upload_finish(u, err); /* the failure the upload recorded, as err */
    return GF_OK;
}

/* Decode the base64 text of f into the upload's part, or into mem. */
static gf_status decode_into(gf_upload *u, const char *part, gf_buf *mem, const load_file *f,
                             gf_err *err)
{
    EVP_ENCODE_CTX *ctx = EVP_ENCODE_CTX_new();
    if (ctx == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory decoding %s", f->key);
    EVP_DecodeInit(ctx);
    const unsigned char *in = (const unsigned char *)f->data->u.str.s;
    size_t left = f->data->u.str.len;
    unsigned char out[48 * 1024 + 64];
    uint64_t off = 0;
    gf_status st = GF_OK;
    while (left > 0 && st == GF_OK) {
        int n = left > 64 * 1024 ? 64 * 1024 : (int)left;
        int got = 0;
        if (EVP_DecodeUpdate(ctx, out, &got, in, n) < 0) {
            st = gf_err_set(err, GF_ERR_INVALID, "parameters.%.80s is not base64", f->key);
            break;
        }
        in += n;
        left -= (size_t)n;
        if (got > 0 && (st = sink(u, part, mem, out, off, (size_t)got, err)) == GF_OK)
            off += (uint64_t)got;
    }
    int got = 0;
    if (st == GF_OK && EVP_DecodeFinal(ctx, out, &got) < 0)
        st = gf_err_set(err, GF_ERR_INVALID, "parameters.%.80s is not base64 (it ends early)",
                        f->key);
    if (st == GF_OK && got > 0)
        st = sink(u, part, mem, out, off, (size_t)got, err);
    off += (uint64_t)got;
    if (st == GF_OK && off == 0 && mem == NULL) /* an empty file: the part exists all the same */
        st = sink(u, part, NULL, (const unsigned char *)"", 0, 0, err);
    EVP_ENCODE_CTX_free(ctx);
    return st;
}

/* The files among params, checked: every key "file:<version>/<name>", one
 * version, a name we can deploy. Answers and returns -1 when bad. */
static int files_of(gf_http_req *r, const gf_json *params, load_file *files,
                    load_file *labels, size_t *n_labels)
{
    int n = 0;
    *n_labels = 0;
    const char *version = NULL;
    size_t vlen = 0;
    for (size_t i = 0; params != NULL && i < params->u.obj.n; i++) {
        const gf_json_member *m = &params->u.obj.m[i];
        if (strncmp(m->key, "file:", 5) != 0)
            continue;
        const char *ver = m->key + 5, *slash = strchr(ver, '/');
        bool digits = slash != NULL && slash > ver;
        for (const char *p = ver; digits && p < slash; p++)
            digits = *p >= '0' && *p <= '9';
        if (!digits || slash[1] == '\0' || strchr(slash + 1, '/') != NULL || ver[0] == '0') {
            gf_http_fail(r, GF_ERR_INVALID,
                         "parameters.%.80s: a file is named file:<version>/<name> "
                         "(file:1/model.onnx)",
                         m->key);
            return -1;
        }
        if (version != NULL && ((size_t)(slash - ver) != vlen || strncmp(ver, version, vlen))) {
            gf_http_fail(r, GF_ERR_INVALID, "the files name two versions (%.*s and %.*s): a "
                         "load deploys one", (int)vlen, version, (int)(slash - ver), ver);
            return -1;
        }
        version = ver;
        vlen = (size_t)(slash - ver);
        if (m->value->type != GF_JSON_STRING) {
            gf_http_fail(r, GF_ERR_INVALID, "parameters.%.80s must be a base64 string", m->key);
            return -1;
        }
        if (ends_with(slash + 1, ".txt")) {
            if (*n_labels == MAX_LABEL_FILES) {
                gf_http_fail(r, GF_ERR_INVALID, "a load brings at most %d labels files",
                             MAX_LABEL_FILES);
                return -1;
            }
            labels[(*n_labels)++] = (load_file){m->key, slash + 1, m->value};
            continue;
        }
        if (n == MAX_FILES) {
            gf_http_fail(r, GF_ERR_INVALID, "a load brings at most %d files (weights or an ONNX "
                         "model, and the model's external data)", MAX_FILES);
            return -1;
        }
        files[n++] = (load_file){m->key, slash + 1, m->value};
    }
    return n;
}

static void job_load_new(gf_http_req *r)
{
    gf_upload *u = r->upload;
    size_t clen = 0;
    const char *cfg = gf_upload_manifest(u, &clen); /* the config travels as the manifest part */
    gf_gw_load_req q = {
        .name = r->name,
        .config = clen > 0 ? cfg : NULL,
        .config_len = clen,
        .staged = gf_upload_path(u),
        .staged_is_model = gf_upload_is_model(u),
        .sha256_hex = gf_upload_sha256(u),
        .bytes = gf_upload_bytes(u),
        .data_tmp = gf_upload_data_path(u),
        .label_files = r->load_labels != NULL ? r->load_labels->f : NULL,
        .n_label_files = r->load_labels != NULL ? r->load_labels->n : 0,
    };
    gf_upload_release(u); /* the core takes the staged files over */
    r->job_status = gf_gw_repo_load_new(r->srv->gw, &q, &r->deployed, &r->job_err);
}

static void job_load_config(gf_http_req *r)
{
    size_t clen = 0;
    const char *cfg = gf_upload_manifest(r->upload, &clen);
    gf_gw_load_req q = {.name = r->name, .config = cfg, .config_len = clen,
                        .label_files = r->load_labels != NULL ? r->load_labels->f : NULL,
                        .n_label_files = r->load_labels != NULL ? r->load_labels->n : 0};
    r->job_status = gf_gw_repo_load_new(r->srv->gw, &q, &r->deployed, &r->job_err);
}

static void finish_load(gf_http_req *r)
{
    gf_buf_deinit(&r->deployed.json);
    r->core_answered = true;
    if (r->job_status == GF_OK)
        gf_http_reply(r, 200, NULL); /* Triton answers a load with an empty body */
    else
        gf_http_fail(r, r->job_status, "%s",
                     r->job_err.msg[0] != '\0' ? r->job_err.msg : gf_strerror(r->job_status));
}

bool gf_http_load_has_files(const gf_json *params)
{
    if (gf_json_get(params, "config") != NULL)
        return true;
    for (size_t i = 0; params != NULL && params->type == GF_JSON_OBJECT && i < params->u.obj.n;
         i++)
        if (strncmp(params->u.obj.m[i].key, "file:", 5) == 0)
            return true;
    return false;
}

void gf_http_load_files(gf_http_req *r, const gf_json *params)
{
    const gf_json *cfg = gf_json_get(params, "config");
    if (cfg != NULL && (cfg->type != GF_JSON_STRING || cfg->u.str.len == 0)) {
        gf_http_fail(r, GF_ERR_INVALID,
                     "parameters.config must be the model configuration as JSON text");
        return;
    }
    if (gf_json_get(params, "worker") != NULL) {
        gf_http_fail(r, GF_ERR_INVALID, "parameters.worker does not go with a configuration or "
                     "files: load the new version onto a worker with a second load");
        return;
    }
    load_file files[MAX_FILES], labels[MAX_LABEL_FILES];
    size_t n_labels;
    int n = files_of(r, params, files, labels, &n_labels);
    if (n < 0)
        return;
    if (n_labels > 0 && cfg == NULL) {
        gf_http_fail(r, GF_ERR_INVALID, "labels files go with a config whose outputs name them "
                     "(label_filename)");
        return;
    }
    int model = -1, weights = -1;
    for (int i = 0; i < n; i++) {
        if (ends_with(files[i].name, ".onnx"))
            model = i;
        else if (ends_with(files[i].name, ".safetensors"))
            weights = i;
    }
    const char *bad = model >= 0 && weights >= 0 ? "both an ONNX model and safetensors weights"
                    : n > 0 && model < 0 && weights < 0
                        ? "no <name>.safetensors weights and no <name>.onnx model"
                    : n == 2 && model < 0 ? "two weights files"
                                          : NULL;
    if (bad != NULL) {
        gf_http_fail(r, GF_ERR_INVALID, "the files bring %s (a load deploys weights, or an ONNX "
                     "model and its external data)", bad);
        return;
    }
    gf_err err;
    gf_http *h = r->srv;
    gf_status st = GF_OK;
    if (n_labels > 0 && (r->load_labels = calloc(1, sizeof *r->load_labels)) == NULL)
        st = gf_err_set(&err, GF_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n_labels && st == GF_OK; i++) {
        struct gf_http_load_labels *l = r->load_labels;
        gf_buf_init(&l->text[i]);
        l->text[i].limit = GF_MANIFEST_MAX_BYTES;
        l->names[i] = strdup(labels[i].name);
        l->n = i + 1;
        st = l->names[i] == NULL ? gf_err_set(&err, GF_ERR_NOMEM, "out of memory")
                                 : decode_into(NULL, NULL, &l->text[i], &labels[i], &err);
        l->f[i] = (struct gf_gw_text_file){l->names[i], l->text[i].data != NULL ? l->text[i].data
                                                                                 : "",
                                           l->text[i].len};
    }
    if (st == GF_OK)
        st = gf_upload_new(gf_gw_upload_dir(h->gw), h->cfg.max_upload, &r->upload, &err);
    if (st == GF_OK &&
        gf_upload_feed(r->upload, "manifest", cfg != NULL ? cfg->u.str.s : "", 0,
                       cfg != NULL ? cfg->u.str.len : 0) != GF_OK)
        st = gf_upload_finish(r->upload, &err);
    for (int i = 0; i < n && st == GF_OK; i++) {
        const char *part = i == model ? "model" : i == weights ? "weights" : "model_data";
        st = decode_into(r->upload, part, NULL, &files[i], &err);
    }
    if (st == GF_OK && n > 0)
        st = gf_upload_finish(r->upload, &err);
    if (st != GF_OK) {
        gf_http_fail(r, st, "%s", gf_err_msg(&err));
        return;
    }
    gf_http_async_begin(r, finish_load);
    gf_http_run_admin(r, n > 0 ? job_load_new : job_load_config);
}
