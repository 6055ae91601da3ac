/* gpufaas — a repository load that brings a configuration or files (Triton's
 * load_model(config=..., files=...)), gateway/core: it deploys a new
 * version through gf_gw_deploy, the one way versions are made, so it is
 * validated exactly as a /v1 deploy is.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/core/internal.h"
#include "gateway/core/model_config.h"

/* What the current version of a function gives a load that leaves it out. */
typedef struct base_src {
    char *manifest_json; /* NULL = no current version */
    char *weights_path;
    char sha256[65];
    uint64_t bytes;
} base_src;

static void base_get(gf_gw *gw, const char *name, base_src *b)
{
    memset(b, 0, sizeof *b);
    pthread_mutex_lock(&gw->lock);
    gw_function *f = gw_function_find(gw, name);
    const gw_version *v = f != NULL && !f->deleted ? f->current : NULL;
    if (v != NULL && v->state == GF_STORE_VERSION_READY) {
        b->manifest_json = strdup(v->manifest_json);
        b->weights_path = strdup(v->weights_path);
        snprintf(b->sha256, sizeof b->sha256, "%s", v->sha256);
        b->bytes = v->bytes;
    }
    pthread_mutex_unlock(&gw->lock);
}

/* A second name for the current weights in the upload directory, which the
 * deploy then moves into the new version (the file is not copied). */
static gf_status stage_link(gf_gw *gw, const char *weights, char **out, gf_err *err)
{
    size_t n = strlen(gw->upload_dir) + 40;
    char *path = malloc(n);
    if (path == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    for (int attempt = 0; attempt < 16; attempt++) {
        snprintf(path, n, "%s/load-%ld-%d.part", gw->upload_dir, (long)getpid(),
                 rand() & 0xfffffff);
        if (link(weights, path) == 0) {
            *out = path;
            return GF_OK;
        }
        if (errno != EEXIST)
            break;
    }
    gf_status st = gf_err_set(err, GF_ERR_INTERNAL, "cannot stage %s for the new version: %s",
                              weights, strerror(errno));
    free(path);
    return st;
}

/* The lines of a labels file as a JSON array (a last empty line and \r
 * before \n dropped). */
static json_t *lines_of(const char *text, size_t len)
{
    json_t *arr = json_array();
    size_t at = 0;
    while (arr != NULL && at < len) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t end = nl != NULL ? (size_t)(nl - text) : len, n = end - at;
        if (n > 0 && text[at + n - 1] == '\r')
            n--;
        json_array_append_new(arr, json_stringn(text + at, n));
        at = end + 1;
    }
    return arr;
}

/* Replace every output's "labels_file" (a config's label_filename) in the
 * manifest text m by the "labels" of the file of the load it names, or the
 * base's labels when it names those. */
static gf_status resolve_labels(gf_buf *m, const gf_gw_load_req *req, const gf_manifest *base,
                                gf_err *err)
{
    json_t *j = json_loadb(m->data, m->len, 0, NULL);
    json_t *outs = json_object_get(j, "outputs");
    gf_status st = j != NULL ? GF_OK : gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    size_t i;
    json_t *o;
    json_array_foreach(outs, i, o) {
        const char *lf = json_string_value(json_object_get(o, "labels_file"));
        const char *name = json_string_value(json_object_get(o, "name"));
        if (lf == NULL || name == NULL || st != GF_OK)
            continue;
        json_t *labels = NULL;
        for (size_t k = 0; k < req->n_label_files && labels == NULL; k++)
            if (strcmp(req->label_files[k].name, lf) == 0)
                labels = lines_of(req->label_files[k].text, req->label_files[k].len);
        char mine[96];
        snprintf(mine, sizeof mine, "%s_labels.txt", name);
        long bo = base != NULL ? gf_manifest_output_index(base, name) : -1;
        if (labels == NULL && bo >= 0 && strcmp(lf, mine) == 0 &&
            base->outputs[bo].n_labels > 0) {
            labels = json_array();
            for (size_t k = 0; k < base->outputs[bo].n_labels; k++)
                json_array_append_new(labels, json_string(base->outputs[bo].labels[k]));
        }
        if (labels == NULL) {
            st = gf_err_set(err, GF_ERR_INVALID,
                            "config: output '%.60s': label_filename '%.80s' names no file of the "
                            "load (give it as file:1/%.80s)",
                            name, lf, lf);
            break;
        }
        json_object_del(o, "labels_file");
        json_object_set_new(o, "labels", labels);
    }
    char *text = st == GF_OK ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (st == GF_OK) {
        gf_buf_reset(m);
        st = text != NULL ? gf_buf_append_str(m, text) : GF_ERR_NOMEM;
        if (st != GF_OK)
            gf_err_set(err, st, "out of memory");
    }
    free(text);
    return st;
}

gf_status gf_gw_repo_load_new(gf_gw *gw, const gf_gw_load_req *req, gf_gw_deployed *out,
                              gf_err *err)
{
    memset(out, 0, sizeof *out);
    gf_buf_init(&out->json);
    json_t *cfg = NULL;
    gf_manifest *base = NULL;
    char *linked = NULL;
    gf_buf m;
    gf_buf_init(&m);
    base_src b;
    base_get(gw, req->name, &b);
    gf_status st = GF_OK;
    bool deployed = false;
    if (req->config != NULL) {
        json_error_t je;
        cfg = json_loadb(req->config, req->config_len, JSON_REJECT_DUPLICATES, &je);
        if (cfg == NULL) {
            st = gf_err_set(err, GF_ERR_INVALID, "parameters.config is not JSON: %s (at %d)",
                            je.text, je.position);
            goto out;
        }
    }
    /* a new model file derives its inputs and outputs: no base for it */
    if (b.manifest_json != NULL && !req->staged_is_model &&
        (st = gf_manifest_parse(b.manifest_json, strlen(b.manifest_json), &base, err)) != GF_OK)
        goto out;
    const char *weights = req->staged;
    const char *sha = req->sha256_hex;
    uint64_t bytes = req->bytes;
    if (weights == NULL) { /* a new configuration of the current weights */
        if (base == NULL) {
            st = gf_err_set(err, GF_ERR_NOT_FOUND,
                            "model '%s' is not deployed: give its files (file:1/<name>) with "
                            "the configuration",
                            req->name);
            goto out;
        }
        if (strcmp(base->kind, "onnx") == 0) {
            st = gf_err_set(err, GF_ERR_INVALID,
                            "model '%s' is an ONNX model: a new configuration needs its model "
                            "file too (files={\"file:1/model.onnx\": ...})",
                            req->name);
            goto out;
        }
        if ((st = stage_link(gw, b.weights_path, &linked, err)) != GF_OK)
            goto out;
        weights = linked;
        sha = b.sha256;
        bytes = b.bytes;
    }
    if (cfg != NULL) {
        st = gw_model_config_to_manifest(cfg, req->name, base, req->staged_is_model, &m, err);
        if (st == GF_OK)
            st = resolve_labels(&m, req, base, err);
    } else if (base != NULL) { /* new weights, the current manifest */
        st = gf_manifest_to_json(base, &m);
        if (st != GF_OK)
            gf_err_set(err, st, "out of memory");
    } else if (!req->staged_is_model) {
        st = gf_err_set(err, GF_ERR_INVALID,
                        "model '%s' is not deployed: a new model needs parameters.config (its "
                        "platform or kind, input and output) with its weights",
                        req->name);
    }
    if (st != GF_OK)
        goto out;
    if (m.len > 0 && cfg == NULL) { /* the base's version number is not the new one's */
        json_t *j = json_loadb(m.data, m.len, 0, NULL);
        json_object_del(j, "version");
        char *text = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        gf_buf_reset(&m);
        st = text != NULL ? gf_buf_append_str(&m, text) : GF_ERR_NOMEM;
        free(text);
        if (st != GF_OK) {
            gf_err_set(err, st, "out of memory");
            goto out;
        }
    }
    const char *extra[1] = {req->data_tmp};
    gf_gw_deploy_req d = {
        .manifest = m.len > 0 ? m.data : NULL,
        .manifest_len = m.len,
        .name = req->staged_is_model ? req->name : NULL,
        .kind = req->staged_is_model ? "onnx" : NULL,
        .weights_tmp = weights,
        .sha256_hex = sha,
        .bytes = bytes,
        .extra_tmp = req->data_tmp != NULL ? extra : NULL,
        .n_extra = req->data_tmp != NULL ? 1 : 0,
    };
    st = gf_gw_deploy(gw, &d, out, err);
    deployed = true; /* the deploy moved the staged files or removed them */
out:
    if (linked != NULL && !deployed)
        unlink(linked);
    if (!deployed && req->staged != NULL)
        unlink(req->staged);
    if (!deployed && req->data_tmp != NULL)
        unlink(req->data_tmp);
    free(linked);
    json_decref(cfg);
    gf_manifest_free(base);
    gf_buf_deinit(&m);
    free(b.manifest_json);
    free(b.weights_path);
    return st;
}
