/* gpufaas — the route table and its handlers (gateway/http).
 *
 * Every endpoint is one line of gf_http_routes; docs/api.md documents them.
 * Handlers read what server.c prepared (the {m} name, already validated, the
 * {v} version, the body) and answer through gf_http_reply / gf_http_fail,
 * or start waiting (inference: on the core; admin calls: on the admin
 * thread, because they block).
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/residency.h"
#include "functions/manifest.h"
#include "gateway/http/http_impl.h"

#define GF_SMALL_BODY_MAX (64u * 1024) /* admin JSON bodies (load, unload, index) */

/* True when an object anywhere in v has a key twice. */
static bool has_dup_keys(const gf_json *v)
{
    if (v->type == GF_JSON_OBJECT) {
        if (gf_json_obj_find_dup(v) != -1)
            return true;
        for (size_t i = 0; i < v->u.obj.n; i++)
            if (has_dup_keys(v->u.obj.m[i].value))
                return true;
    } else if (v->type == GF_JSON_ARRAY) {
        for (size_t i = 0; i < v->u.arr.n; i++)
            if (has_dup_keys(v->u.arr.items[i]))
                return true;
    }
    return false;
}

bool gf_http_small_json_body(gf_http_req *r, gf_json_doc **doc, const gf_json **root)
{
    return gf_http_json_body(r, GF_SMALL_BODY_MAX, doc, root);
}

bool gf_http_json_body(gf_http_req *r, uint64_t limit, gf_json_doc **doc, const gf_json **root)
{
    *doc = NULL;
    *root = NULL;
    size_t len = r->body.len;
    const char *s = r->body.data;
    while (len > 0 && (s[0] == ' ' || s[0] == '\n' || s[0] == '\r' || s[0] == '\t')) {
        s++;
        len--;
    }
    if (len == 0)
        return true;
    if (len > limit) {
        gf_http_fail(r, GF_ERR_TOO_LARGE, "request body larger than %llu bytes",
                     (unsigned long long)limit);
        return false;
    }
    gf_err err;
    gf_status st = gf_json_parse(s, len, GF_CODEC_MAX_DEPTH, doc, &err);
    if (st != GF_OK) {
        gf_http_fail(r, st, "%s", err.msg);
        return false;
    }
    const gf_json *j = gf_json_doc_root(*doc);
    const char *bad = j->type != GF_JSON_OBJECT ? "the request body must be a JSON object"
                    : has_dup_keys(j)           ? "the request body has a key twice"
                                                : NULL;
    if (bad != NULL) {
        gf_json_doc_free(*doc);
        *doc = NULL;
        gf_http_fail(r, GF_ERR_INVALID, "%s", bad);
        return false;
    }
    *root = j;
    return true;
}

/* Reply 200 with a view of the core (JSON text in b, which it empties), or
 * the failure the view reports. */
static void reply_view(gf_http_req *r, gf_status st, gf_buf *b, const gf_err *err)
{
    if (st == GF_OK) {
        gf_http_reply_json(r, 200, b);
        return;
    }
    gf_buf_deinit(b);
    gf_http_fail(r, st, "%s", err != NULL && err->code == st && err->msg[0] != '\0'
                                  ? err->msg : gf_strerror(st));
}

/* Reply with a view of the whole core that cannot fail but for memory
 * (the lists: functions, workers, placements). */
static void reply_list(gf_http_req *r, gf_status (*view)(gf_gw *, gf_buf *))
{
    gf_buf b;
    gf_buf_init(&b);
    reply_view(r, view(r->srv->gw, &b), &b, NULL);
}

/* A failure the core reported: it counted the request already. */
static void reply_core_error(gf_http_req *r, gf_status st, const gf_err *err,
                             const char *fallback)
{
    r->core_answered = true;
    if (st == GF_OK)
        st = GF_ERR_INTERNAL;
    const char *msg = err->code != GF_OK && err->msg[0] != '\0' ? err->msg : fallback;
    gf_http_fail(r, st, "%s", msg);
}

/* ---- health and metadata ---------------------------------------------------------- */

static void h_live(gf_http_req *r)
{
    gf_http_reply(r, 200, NULL);
}

/* Triton answers readiness with an empty body: 200 when ready, 400 when not. */
static void h_ready(gf_http_req *r)
{
    r->core_answered = true;
    gf_http_reply(r, gf_gw_ready(r->srv->gw) ? 200 : 400, NULL);
}

/* The extensions GET /v2 lists: the ones this table serves, and only those. */
static const char *const extensions[] = {
    "binary_tensor_data", "model_repository", "model_configuration", "statistics", "logging",
    "system_shared_memory", "classification", NULL,
};

static void h_server_meta(gf_http_req *r)
{
    gf_buf b;
    gf_buf_init(&b);
    reply_view(r, gf_gw_server_metadata(r->srv->gw, extensions, &b), &b, NULL);
}

static void h_model_meta(gf_http_req *r)
{
    gf_err err;
    gf_err_clear(&err);
    gf_buf b;
    gf_buf_init(&b);
    gf_status st = gf_gw_model_metadata(r->srv->gw, r->name, r->version, &b, &err);
    if (st != GF_OK)
        r->core_answered = true;
    reply_view(r, st, &b, &err);
}

/* The model configuration extension: Triton's ModelConfig JSON. */
static void h_model_config(gf_http_req *r)
{
    gf_err err;
    gf_err_clear(&err);
    gf_buf b;
    gf_buf_init(&b);
    reply_view(r, gf_gw_model_config(r->srv->gw, r->name, r->version, &b, &err), &b, &err);
}

/* The statistics extension: every model (no {m}), one model, one version. */
static void h_model_stats(gf_http_req *r)
{
    gf_err err;
    gf_err_clear(&err);
    gf_buf b;
    gf_buf_init(&b);
    const char *name = strstr(r->route->pattern, "{m}") != NULL ? r->name : NULL;
    reply_view(r, gf_gw_model_stats(r->srv->gw, name, r->version, &b, &err), &b, &err);
}

static void h_model_ready(gf_http_req *r)
{
    r->core_answered = true;
    gf_http_reply(r, gf_gw_model_ready(r->srv->gw, r->name, r->version) ? 200 : 400, NULL);
}

/* ---- inference -------------------------------------------------------------------- */

static void infer_done(void *arg, gf_gw_result *res)
{
    gf_http_req *r = arg;
    r->result = res;
    gf_http_async_done(r);
}

/* The result is there: answer it in the v2 or the v1 shape. */
static void infer_finish(gf_http_req *r, bool v1)
{
    gf_gw_result *res = r->result;
    r->core_answered = true;
    if (res->status != GF_OK) {
        gf_http_fail(r, res->status, "%s",
                     res->message[0] != '\0' ? res->message : gf_strerror(res->status));
        return;
    }
    for (size_t k = 0; k < r->creq.n_outputs; k++) { /* classification's labels */
        char **labels;
        size_t n;
        if (r->creq.outputs[k].classify > 0 &&
            gf_gw_output_labels(r->srv->gw, res->function, res->version,
                                r->creq.outputs[k].name, &labels, &n) == GF_OK)
            gf_codec_set_labels(&r->creq, k, labels, n);
    }
    gf_buf out;
    gf_buf_init(&out);
    (void)gf_buf_reserve(&out, 512); /* a small answer in one allocation, not four */
    gf_err err;
    size_t header_len = 0;
    if (!v1 && r->reply_coding == GF_CODING_IDENTITY) {
        /* the binary outputs go out from where they lie (a slice of the
         * worker's RESULT): the response keeps the result until sent */
        gf_codec_iov iov;
        gf_status st = gf_codec_render_v2_iov(res, r->name, &r->creq, &out, &header_len, &iov,
                                              &err);
        if (st != GF_OK) {
            gf_buf_deinit(&out);
            gf_http_fail(r, st, "%s", gf_err_msg(&err));
            return;
        }
        char *head = gf_buf_steal(&out, NULL);
        r->result = NULL;
        gf_http_reply_iov(r, header_len > 0 ? "application/octet-stream" : "application/json",
                          head, &iov, res, header_len);
        return;
    }
    gf_status st = v1 ? gf_codec_render_v1(res, &r->creq, &out, &err)
                      : gf_codec_render_v2(res, r->name, &r->creq, &out, &header_len, &err);
    if (st != GF_OK) {
        gf_buf_deinit(&out);
        gf_http_fail(r, st, "%s", gf_err_msg(&err));
        return;
    }
    size_t len;
    char *bytes = gf_buf_steal(&out, &len);
    if (bytes == NULL) {
        gf_http_fail(r, GF_ERR_NOMEM, "out of memory rendering the response");
        return;
    }
    gf_http_reply_bytes(r, 200, header_len > 0 ? "application/octet-stream" : "application/json",
                        bytes, len, header_len);
}

static void infer_finish_v2(gf_http_req *r)
{
    infer_finish(r, false);
}

static void infer_finish_v1(gf_http_req *r)
{
    infer_finish(r, true);
}

static void infer_start(gf_http_req *r, bool v1)
{
    gf_codec_opts opts = {.half_as_json = v1, .max_depth = 0, .shm = v1 ? NULL : r->srv->shm};
    /* binary inputs stay where they are, in the body, which a hold keeps for
     * them from here (without memory for it: they are copied out) */
    size_t body_len = r->body.len;
    opts.body_hold = r->body.data != NULL ? gf_hold_of_malloc(r->body.data) : NULL;
    const char *body = r->body.data != NULL ? r->body.data : "";
    if (opts.body_hold != NULL)
        gf_buf_init(&r->body); /* the hold owns the bytes now */
    gf_err err;
    gf_status st = gf_codec_request_parse(body, body_len,
                                          gf_http_req_header(r, "Inference-Header-Content-Length"),
                                          &opts, &r->creq, &err);
    gf_hold_unref(opts.body_hold); /* what is left: the inputs' references */
    if (st != GF_OK) {
        gf_http_fail(r, st, "%s", gf_err_msg(&err));
        return;
    }
    gf_buf_deinit(&r->body); /* the inputs hold copies or slices */
    const char *outputs[GF_MANIFEST_MAX_IO];
    gf_gw_shm out_shm[GF_MANIFEST_MAX_IO];
    bool any_shm = false;
    size_t n_outputs = r->creq.n_outputs < GF_MANIFEST_MAX_IO ? r->creq.n_outputs
                                                              : GF_MANIFEST_MAX_IO;
    for (size_t i = 0; i < n_outputs; i++) {
        const gf_codec_output_sel *o = &r->creq.outputs[i];
        outputs[i] = o->name;
        /* into its region by the worker (a classified one is rendered here) */
        bool placed = o->shm != NULL && o->classify == 0;
        out_shm[i] = placed ? gf_shm_tensor_ref(o->shm, o->shm_offset, o->shm_size, false)
                            : (gf_gw_shm){0};
        any_shm |= placed;
    }
    gf_gw_infer_req q = {
        .function = r->name,
        .version = r->version,
        .inputs = r->creq.inputs,
        .n_inputs = r->creq.n_inputs,
        .outputs = outputs,
        .n_outputs = n_outputs,
        .out_shm = any_shm ? out_shm : NULL, /* r->creq holds the regions until answered */
        .done = infer_done,
        .done_arg = r,
        .t0_us = r->t0_ns / 1000,
        .timeout_us = r->creq.timeout_us,
    };
    r->creq.inputs = NULL; /* the core takes them over, whatever happens */
    r->creq.n_inputs = 0;
    gf_http_async_begin(r, v1 ? infer_finish_v1 : infer_finish_v2);
    gf_err_clear(&err);
    st = gf_gw_submit(r->srv->gw, &q, &err);
    if (st != GF_OK) {
        gf_http_async_cancel(r);
        reply_core_error(r, st, &err, gf_strerror(st)); /* a full queue: 429 + Retry-After */
    }
}

static void h_v2_infer(gf_http_req *r)
{
    infer_start(r, false);
}

static void h_v1_invoke(gf_http_req *r)
{
    infer_start(r, true);
}

/* ---- model repository extension --------------------------------------------------- */

static void h_repo_index(gf_http_req *r)
{
    gf_json_doc *doc;
    const gf_json *body;
    if (!gf_http_small_json_body(r, &doc, &body))
        return;
    const gf_json *ready = gf_json_get(body, "ready");
    bool ready_only = ready != NULL && ready->type == GF_JSON_BOOL && ready->u.b;
    bool bad = ready != NULL && ready->type != GF_JSON_BOOL;
    gf_json_doc_free(doc);
    if (bad) {
        gf_http_fail(r, GF_ERR_INVALID, "\"ready\" must be true or false");
        return;
    }
    gf_buf b;
    gf_buf_init(&b);
    reply_view(r, gf_gw_repo_index(r->srv->gw, ready_only, &b), &b, NULL);
}

/* An admin call: job(r) runs on the admin thread (the core may block), then
 * then(r) answers on a polling thread. */
static void admin_call(gf_http_req *r, gf_http_fn job, gf_http_fn then)
{
    gf_http_async_begin(r, then);
    gf_http_run_admin(r, job);
}

static void job_repo_load(gf_http_req *r)
{
    r->job_status = gf_gw_repo_load_on(r->srv->gw, r->name, r->load_worker, &r->job_err);
}

static void job_repo_unload(gf_http_req *r)
{
    r->job_status = gf_gw_repo_unload(r->srv->gw, r->name, &r->job_err);
}

/* Triton answers load and unload with 200 and an empty body. */
static void finish_empty(gf_http_req *r)
{
    if (r->job_status == GF_OK) {
        r->core_answered = true;
        gf_http_reply(r, 200, NULL);
    } else {
        reply_core_error(r, r->job_status, &r->job_err, "failed");
    }
}

static void repo_call(gf_http_req *r, gf_http_fn job)
{
    gf_json_doc *doc;
    const gf_json *body;
    if (!gf_http_small_json_body(r, &doc, &body))
        return;
    gf_json_doc_free(doc); /* parameters (config, unload_dependents) do not apply */
    admin_call(r, job, finish_empty);
}

/* gpufaas's extension: {"parameters": {"worker": N}} loads onto worker N.
 * Triton's parameters "config" and "file:<v>/<name>" deploy a new version
 * (load_files.c). */
static void h_repo_load(gf_http_req *r)
{
    gf_json_doc *doc;
    const gf_json *body;
    if (!gf_http_json_body(r, r->srv->cfg.max_body, &doc, &body))
        return;
    const gf_json *params = gf_json_get(body, "parameters");
    if (params != NULL && params->type != GF_JSON_OBJECT) {
        gf_json_doc_free(doc);
        gf_http_fail(r, GF_ERR_INVALID, "parameters must be an object");
        return;
    }
    if (gf_http_load_has_files(params)) {
        gf_http_load_files(r, params); /* it copies what it keeps */
        gf_json_doc_free(doc);
        return;
    }
    const gf_json *w = gf_json_get(params, "worker");
    r->load_worker = -1;
    bool bad = w != NULL && (w->type != GF_JSON_NUMBER || !w->u.num.is_int || w->u.num.i < 0 ||
                             w->u.num.i > INT_MAX);
    if (w != NULL && !bad)
        r->load_worker = (int)w->u.num.i;
    gf_json_doc_free(doc);
    if (bad) {
        gf_http_fail(r, GF_ERR_INVALID, "parameters.worker must be a worker id (an integer >= 0)");
        return;
    }
    admin_call(r, job_repo_load, finish_empty);
}

static void h_repo_unload(gf_http_req *r)
{
    repo_call(r, job_repo_unload);
}

/* ---- /v1 functions ---------------------------------------------------------------- */

static void h_fn_list(gf_http_req *r)
{
    reply_list(r, gf_gw_functions_json);
}

static void h_fn_get(gf_http_req *r)
{
    gf_err err;
    gf_err_clear(&err);
    gf_buf b;
    gf_buf_init(&b);
    reply_view(r, gf_gw_function_json(r->srv->gw, r->name, &b, &err), &b, &err);
}

/* DELETE /v1/functions/{m} (r->version 0): the whole function;
 * DELETE /v1/functions/{m}/versions/{v}: that version. */
static void job_delete(gf_http_req *r)
{
    r->job_status = r->version > 0
                        ? gf_gw_delete_version(r->srv->gw, r->name, r->version, &r->job_err)
                        : gf_gw_delete(r->srv->gw, r->name, &r->job_err);
}

static void finish_delete(gf_http_req *r)
{
    if (r->job_status != GF_OK) {
        reply_core_error(r, r->job_status, &r->job_err, "delete failed");
        return;
    }
    r->core_answered = true;
    gf_http_reply(r, 200,
                  r->version > 0 ? json_pack("{s:s, s:I, s:b}", "name", r->name, "version",
                                             (json_int_t)r->version, "deleted", 1)
                                 : json_pack("{s:s, s:b}", "name", r->name, "deleted", 1));
}

/* POST /v1/plugins: the body is a plugin's shared object. The core stores
 * it and has a worker load it (--probe); the kind it provides goes in
 * r->name (this route has no {m}). */
static void job_plugin(gf_http_req *r)
{
    r->job_status = gf_gw_plugin_add(r->srv->gw, r->body.data, r->body.len, r->name,
                                     sizeof r->name, &r->job_err);
}

static void finish_plugin(gf_http_req *r)
{
    if (r->job_status != GF_OK) {
        reply_core_error(r, r->job_status, &r->job_err, "adding the plugin failed");
        return;
    }
    gf_http_reply(r, 201, json_pack("{s:s}", "kind", r->name));
}

static void h_plugin_add(gf_http_req *r)
{
    admin_call(r, job_plugin, finish_plugin);
}

static void h_fn_delete(gf_http_req *r)
{
    admin_call(r, job_delete, finish_delete);
}

/* ?interface_change=allow: the deploy may change the function's interface.
 * Any other value is refused (false; answered). */
static bool interface_change_arg(gf_http_req *r, bool *allow)
{
    const char *v = gf_http_req_query(r, "interface_change");
    *allow = v != NULL && strcmp(v, "allow") == 0;
    if (v != NULL && !*allow) {
        gf_http_fail(r, GF_ERR_INVALID, "interface_change=%.32s: the only value is 'allow'", v);
        return false;
    }
    return true;
}

static void job_deploy(gf_http_req *r)
{
    size_t mlen;
    const char *m = gf_upload_manifest(r->upload, &mlen);
    const char *data = gf_upload_data_path(r->upload);
    gf_gw_deploy_req d = {
        .manifest = m,
        .manifest_len = mlen,
        .weights_tmp = gf_upload_path(r->upload),
        .sha256_hex = gf_upload_sha256(r->upload),
        .bytes = gf_upload_bytes(r->upload),
        .name = gf_upload_name(r->upload),
        .kind = gf_upload_is_model(r->upload) ? GF_UPLOAD_MODEL_KIND : NULL,
        .extra_tmp = data != NULL ? &data : NULL,
        .n_extra = data != NULL ? 1 : 0,
        .allow_interface_change = r->allow_interface_change,
    };
    r->job_status = gf_gw_deploy(r->srv->gw, &d, &r->deployed, &r->job_err);
    gf_upload_release(r->upload); /* the core moved it (success) or removed it (failure) */
}

/* 201 Created, with the new version and where the function is; 200 with the
 * existing version when the upload was one (an identical redeploy). */
static void finish_deploy(gf_http_req *r)
{
    r->core_answered = true;
    if (r->job_status != GF_OK) {
        reply_core_error(r, r->job_status, &r->job_err, "deploy failed");
        return;
    }
    char loc[96];
    snprintf(loc, sizeof loc, "/v1/functions/%s", r->deployed.name);
    gf_http_reply_json(r, r->deployed.created ? 201 : 200, &r->deployed.json);
    gf_http_header(r, MHD_HTTP_HEADER_LOCATION, loc);
}

static void h_fn_deploy(gf_http_req *r)
{
    if (!interface_change_arg(r, &r->allow_interface_change))
        return;
    gf_err err;
    gf_status st = gf_upload_finish(r->upload, &err);
    GF_LOG_D("deploy: %llu bytes received and staged in %.3f s",
             (unsigned long long)gf_upload_bytes(r->upload),
             (double)(gf_mono_ns() - r->t0_ns) / 1e9);
    if (st != GF_OK) {
        gf_http_fail(r, st, "%s", gf_err_msg(&err));
        return;
    }
    admin_call(r, job_deploy, finish_deploy);
}

/* ---- versions ---------------------------------------------------------------------- */

static void job_activate(gf_http_req *r)
{
    gf_buf_init(&r->job_out);
    r->job_status = gf_gw_activate(r->srv->gw, r->name, r->version, &r->job_out, &r->job_err);
}

/* 200 with the function (every version, which is current) after the change. */
static void finish_job_json(gf_http_req *r)
{
    if (r->job_status != GF_OK) {
        gf_buf_deinit(&r->job_out);
        reply_core_error(r, r->job_status, &r->job_err, "failed");
        return;
    }
    gf_http_reply_json(r, 200, &r->job_out);
}

static void h_version_activate(gf_http_req *r)
{
    admin_call(r, job_activate, finish_job_json);
}

static void job_fsck(gf_http_req *r)
{
    gf_buf_init(&r->job_out);
    r->job_status = gf_gw_fsck(r->srv->gw, &r->job_out, &r->job_err);
}

static void h_fsck(gf_http_req *r)
{
    admin_call(r, job_fsck, finish_job_json);
}

/* ---- residency --------------------------------------------------------------------- */

static void job_residency(gf_http_req *r)
{
    gf_buf_init(&r->job_out);
    r->job_status = gf_gw_set_residency(r->srv->gw, r->name,
                                        r->residency_reset ? NULL : &r->residency, &r->job_out,
                                        &r->job_err);
}

/* PUT {"pin": true, "priority": "high", "keep_warm_s": 30}: members left
 * out take their defaults (the whole residency is replaced). */
static void h_fn_residency_put(gf_http_req *r)
{
    if (r->body.len > GF_SMALL_BODY_MAX) {
        gf_http_fail(r, GF_ERR_TOO_LARGE, "request body larger than %u bytes", GF_SMALL_BODY_MAX);
        return;
    }
    gf_json_doc *doc = NULL;
    gf_err err;
    gf_err_clear(&err);
    gf_status st = gf_json_parse(r->body.data != NULL ? r->body.data : "", r->body.len,
                                 GF_CODEC_MAX_DEPTH, &doc, &err);
    if (st == GF_OK)
        st = gf_residency_from_json(gf_json_doc_root(doc), &r->residency, &err);
    gf_json_doc_free(doc);
    if (st != GF_OK) {
        gf_http_fail(r, GF_ERR_INVALID, "%s", gf_err_msg(&err));
        return;
    }
    r->residency_reset = false;
    admin_call(r, job_residency, finish_job_json);
}

static void h_fn_residency_delete(gf_http_req *r)
{
    r->residency_reset = true;
    admin_call(r, job_residency, finish_job_json);
}

static void h_workers(gf_http_req *r)
{
    reply_list(r, gf_gw_workers_json);
}

static void h_placements(gf_http_req *r)
{
    reply_list(r, gf_gw_placements_json);
}

/* ---- metrics ---------------------------------------------------------------------- */

static void h_metrics(gf_http_req *r)
{
    gf_buf b;
    gf_buf_init(&b);
    gf_status st = gf_gw_metrics_text(r->srv->gw, &b);
    size_t len;
    char *text = st == GF_OK ? gf_buf_steal(&b, &len) : NULL;
    if (text == NULL) {
        gf_buf_deinit(&b);
        gf_http_fail(r, st != GF_OK ? st : GF_ERR_NOMEM, "cannot render the metrics");
        return;
    }
    gf_http_reply_bytes(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, len, 0);
}

/* ---- the table -------------------------------------------------------------------- */

const gf_route gf_http_routes[] = {
    /* KServe Open Inference Protocol v2, as Triton serves it */
    {"GET", "/v2/health/live", h_live, 0},
    {"GET", "/v2/health/ready", h_ready, 0},
    {"GET", "/v2", h_server_meta, 0},
    {"GET", "/v2/models/stats", h_model_stats, 0}, /* before {m}: "stats" is no model */
    {"GET", "/v2/models/{m}", h_model_meta, 0},
    {"GET", "/v2/models/{m}/versions/{v}", h_model_meta, 0},
    {"GET", "/v2/models/{m}/ready", h_model_ready, 0},
    {"GET", "/v2/models/{m}/versions/{v}/ready", h_model_ready, 0},
    {"GET", "/v2/models/{m}/config", h_model_config, 0},
    {"GET", "/v2/models/{m}/versions/{v}/config", h_model_config, 0},
    {"GET", "/v2/models/{m}/stats", h_model_stats, 0},
    {"GET", "/v2/models/{m}/versions/{v}/stats", h_model_stats, 0},
    {"POST", "/v2/models/{m}/infer", h_v2_infer, GF_ROUTE_INFER},
    {"POST", "/v2/models/{m}/versions/{v}/infer", h_v2_infer, GF_ROUTE_INFER},
    /* the model repository extension */
    {"POST", "/v2/repository/index", h_repo_index, 0},
    {"POST", "/v2/repository/models/{m}/load", h_repo_load, GF_ROUTE_ADMIN},
    {"POST", "/v2/repository/models/{m}/unload", h_repo_unload, GF_ROUTE_ADMIN},
    /* the system shared memory extension; CUDA shared memory is refused */
    {"GET", "/v2/systemsharedmemory/status", gf_http_shm_status, 0},
    {"GET", "/v2/systemsharedmemory/region/{r}/status", gf_http_shm_status, 0},
    {"POST", "/v2/systemsharedmemory/region/{r}/register", gf_http_shm_register, GF_ROUTE_ADMIN},
    {"POST", "/v2/systemsharedmemory/region/{r}/unregister", gf_http_shm_unregister,
     GF_ROUTE_ADMIN},
    {"POST", "/v2/systemsharedmemory/unregister", gf_http_shm_unregister, GF_ROUTE_ADMIN},
    {"GET", "/v2/cudasharedmemory/status", gf_http_cuda_shm, 0},
    {"GET", "/v2/cudasharedmemory/region/{r}/status", gf_http_cuda_shm, 0},
    {"POST", "/v2/cudasharedmemory/region/{r}/register", gf_http_cuda_shm, 0},
    {"POST", "/v2/cudasharedmemory/region/{r}/unregister", gf_http_cuda_shm, 0},
    {"POST", "/v2/cudasharedmemory/unregister", gf_http_cuda_shm, 0},
    /* the logging extension */
    {"GET", "/v2/logging", gf_http_logging_get, 0},
    {"POST", "/v2/logging", gf_http_logging_set, GF_ROUTE_ADMIN},
    /* the FaaS API */
    {"GET", "/v1/functions", h_fn_list, 0},
    {"POST", "/v1/functions", h_fn_deploy, GF_ROUTE_ADMIN | GF_ROUTE_UPLOAD},
    {"GET", "/v1/functions/{m}", h_fn_get, 0},
    {"DELETE", "/v1/functions/{m}", h_fn_delete, GF_ROUTE_ADMIN},
    {"POST", "/v1/functions/{m}/invoke", h_v1_invoke, GF_ROUTE_INFER},
    {"POST", "/v1/functions/{m}/versions/{v}/activate", h_version_activate, GF_ROUTE_ADMIN},
    {"DELETE", "/v1/functions/{m}/versions/{v}", h_fn_delete, GF_ROUTE_ADMIN},
    {"POST", "/v1/fsck", h_fsck, GF_ROUTE_ADMIN},
    {"PUT", "/v1/functions/{m}/residency", h_fn_residency_put, GF_ROUTE_ADMIN},
    {"DELETE", "/v1/functions/{m}/residency", h_fn_residency_delete, GF_ROUTE_ADMIN},
    {"GET", "/v1/workers", h_workers, 0},
    {"POST", "/v1/plugins", h_plugin_add, GF_ROUTE_ADMIN},
    {"GET", "/v1/placements", h_placements, 0},
    /* Prometheus */
    {"GET", "/metrics", h_metrics, 0},
};

const size_t gf_http_nroutes = sizeof gf_http_routes / sizeof gf_http_routes[0];
