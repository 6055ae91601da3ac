/* gpufaas — the route table and its handlers (gateway/http).
 *
 * Every endpoint is one line of gf_http_routes; docs/api.md documents them.
 * Handlers read what server.c prepared (the {m} name, already validated, the
 * {v} version, the body) and answer through gf_http_reply / gf_http_error,
 * or start waiting (inference: on the core; admin calls: on the admin
 * thread, because they block).
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "functions/manifest.h"
#include "gateway/http/http_impl.h"

#define GF_SMALL_BODY_MAX (64u * 1024) /* admin JSON bodies (load, unload, index) */

/* An optional small JSON object body (repository calls). Answers 4xx and
 * returns false when it is bad; *out is NULL for an empty body. */
static bool small_json_body(gf_http_req *r, json_t **out)
{
    *out = NULL;
    size_t len = r->body.len;
    const char *s = r->body.data;
    while (len > 0 && (s[0] == ' ' || s[0] == '\n' || s[0] == '\r' || s[0] == '\t')) {
        s++;
        len--;
    }
    if (len == 0)
        return true;
    if (len > GF_SMALL_BODY_MAX) {
        gf_http_error(r, 413, "request body larger than %u bytes", GF_SMALL_BODY_MAX);
        return false;
    }
    if (!gf_codec_depth_ok(s, len, GF_CODEC_MAX_DEPTH)) {
        gf_http_error(r, 400, "JSON nesting deeper than %d levels", GF_CODEC_MAX_DEPTH);
        return false;
    }
    json_error_t je;
    json_t *j = json_loadb(s, len, JSON_REJECT_DUPLICATES, &je);
    if (j == NULL) {
        gf_http_error(r, 400, "malformed JSON at line %d, column %d: %s", je.line, je.column,
                      je.text);
        return false;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        gf_http_error(r, 400, "the request body must be a JSON object");
        return false;
    }
    *out = j;
    return true;
}

/* Reply with a JSON value from the core; NULL means it failed (no memory). */
static void reply_view(gf_http_req *r, json_t *j)
{
    if (j == NULL)
        gf_http_error(r, 500, "cannot build the answer (out of memory?)");
    else
        gf_http_reply(r, 200, j);
}

/* An answer whose status the core chose. */
static void reply_core_error(gf_http_req *r, int status, const gf_err *err, const char *fallback)
{
    r->core_answered = true;
    const char *msg = err->code != GF_OK && err->msg[0] != '\0' ? err->msg : fallback;
    gf_http_error(r, status >= 400 && status <= 599 ? (unsigned)status : 500, "%s", msg);
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

static void h_server_meta(gf_http_req *r)
{
    reply_view(r, gf_gw_server_metadata(r->srv->gw));
}

static void h_model_meta(gf_http_req *r)
{
    int status = 404;
    gf_err err;
    gf_err_clear(&err);
    json_t *j = gf_gw_model_metadata(r->srv->gw, r->name, r->version, &status, &err);
    if (j != NULL)
        gf_http_reply(r, 200, j);
    else
        reply_core_error(r, status, &err, "unknown model");
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
    if (res->status != GF_OK || (res->http_status != 0 && res->http_status != 200)) {
        int st = res->http_status >= 400 && res->http_status <= 599 ? res->http_status : 500;
        gf_http_error(r, (unsigned)st, "%s",
                      res->message[0] != '\0' ? res->message : gf_strerror(res->status));
        return;
    }
    gf_buf out;
    gf_buf_init(&out);
    gf_err err;
    int status;
    size_t header_len = 0;
    gf_status st =
        v1 ? gf_codec_render_v1(res, &r->creq, &out, &status, &err)
           : gf_codec_render_v2(res, r->name, &r->creq, &out, &header_len, &status, &err);
    if (st != GF_OK) {
        gf_buf_deinit(&out);
        gf_http_error(r, (unsigned)status, "%s", gf_err_msg(&err));
        return;
    }
    size_t len;
    char *bytes = gf_buf_steal(&out, &len);
    if (bytes == NULL) {
        gf_http_error(r, 500, "out of memory rendering the response");
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
    gf_codec_opts opts = {.half_as_json = v1, .max_depth = 0};
    int status;
    gf_err err;
    gf_status st = gf_codec_request_parse(r->body.data != NULL ? r->body.data : "", r->body.len,
                                          gf_http_req_header(r, "Inference-Header-Content-Length"),
                                          &opts, &r->creq, &status, &err);
    if (st != GF_OK) {
        gf_http_error(r, (unsigned)status, "%s", gf_err_msg(&err));
        return;
    }
    gf_buf_deinit(&r->body); /* the inputs hold copies */
    gf_gw_infer_req q = {
        .function = r->name,
        .version = r->version,
        .inputs = r->creq.inputs,
        .n_inputs = r->creq.n_inputs,
        .done = infer_done,
        .done_arg = r,
    };
    r->creq.inputs = NULL; /* the core takes them over, whatever happens */
    r->creq.n_inputs = 0;
    gf_http_async_begin(r, v1 ? infer_finish_v1 : infer_finish_v2);
    int http_status = 500, retry_after = 0;
    gf_err_clear(&err);
    st = gf_gw_submit(r->srv->gw, &q, &http_status, &retry_after, &err);
    if (st != GF_OK) {
        gf_http_async_cancel(r);
        reply_core_error(r, http_status, &err, gf_strerror(st));
        if (http_status == 429) {
            char v[16];
            snprintf(v, sizeof v, "%d", retry_after > 0 ? retry_after : 1);
            gf_http_header(r, MHD_HTTP_HEADER_RETRY_AFTER, v);
        }
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
    json_t *body;
    if (!small_json_body(r, &body))
        return;
    bool ready_only = false;
    if (body != NULL) {
        json_t *ready = json_object_get(body, "ready");
        if (ready != NULL && !json_is_boolean(ready)) {
            json_decref(body);
            gf_http_error(r, 400, "\"ready\" must be true or false");
            return;
        }
        ready_only = ready != NULL && json_is_true(ready);
        json_decref(body);
    }
    json_t *idx = gf_gw_repo_index(r->srv->gw);
    if (idx != NULL && ready_only && json_is_array(idx)) {
        for (size_t i = json_array_size(idx); i-- > 0;) {
            const char *state = json_string_value(json_object_get(json_array_get(idx, i), "state"));
            if (state == NULL || strcmp(state, "READY") != 0)
                json_array_remove(idx, i);
        }
    }
    reply_view(r, idx);
}

static void job_repo_load(gf_http_req *r)
{
    r->job_status = 500;
    gf_gw_repo_load_on(r->srv->gw, r->name, r->load_worker, &r->job_status, &r->job_err);
}

static void job_repo_unload(gf_http_req *r)
{
    r->job_status = 500;
    gf_gw_repo_unload(r->srv->gw, r->name, &r->job_status, &r->job_err);
}

/* Triton answers load and unload with 200 and an empty body. */
static void finish_empty(gf_http_req *r)
{
    if (r->job_err.code == GF_OK && r->job_status >= 200 && r->job_status < 300) {
        r->core_answered = true;
        gf_http_reply(r, 200, NULL);
    } else {
        reply_core_error(r, r->job_status, &r->job_err, "failed");
    }
}

static void repo_call(gf_http_req *r, gf_http_fn job)
{
    json_t *body;
    if (!small_json_body(r, &body))
        return;
    json_decref(body); /* parameters (config, unload_dependents) do not apply */
    gf_http_async_begin(r, finish_empty);
    gf_http_run_admin(r, job);
}

/* gpufaas's extension: {"parameters": {"worker": N}} loads onto worker N. */
static void h_repo_load(gf_http_req *r)
{
    json_t *body;
    if (!small_json_body(r, &body))
        return;
    json_t *w = json_object_get(json_object_get(body, "parameters"), "worker");
    r->load_worker = -1;
    if (w != NULL && (!json_is_integer(w) || json_integer_value(w) < 0 ||
                      json_integer_value(w) > INT_MAX)) {
        json_decref(body);
        gf_http_error(r, 400, "parameters.worker must be a worker id (an integer >= 0)");
        return;
    }
    if (w != NULL)
        r->load_worker = (int)json_integer_value(w);
    json_decref(body);
    gf_http_async_begin(r, finish_empty);
    gf_http_run_admin(r, job_repo_load);
}

static void h_repo_unload(gf_http_req *r)
{
    repo_call(r, job_repo_unload);
}

/* ---- /v1 functions ---------------------------------------------------------------- */

static void h_fn_list(gf_http_req *r)
{
    reply_view(r, gf_gw_functions_json(r->srv->gw));
}

static void h_fn_get(gf_http_req *r)
{
    json_t *j = gf_gw_function_json(r->srv->gw, r->name);
    if (j == NULL)
        gf_http_error(r, 404, "function '%s' not found", r->name);
    else
        gf_http_reply(r, 200, j);
}

static void job_delete(gf_http_req *r)
{
    r->job_status = 500;
    gf_gw_delete(r->srv->gw, r->name, &r->job_status, &r->job_err);
}

static void finish_delete(gf_http_req *r)
{
    if (r->job_err.code != GF_OK || r->job_status < 200 || r->job_status >= 300) {
        reply_core_error(r, r->job_status, &r->job_err, "delete failed");
        return;
    }
    r->core_answered = true;
    json_t *j = json_pack("{s:s, s:b}", "name", r->name, "deleted", 1);
    reply_view(r, j);
}

static void h_fn_delete(gf_http_req *r)
{
    gf_http_async_begin(r, finish_delete);
    gf_http_run_admin(r, job_delete);
}

static void job_deploy(gf_http_req *r)
{
    size_t mlen;
    const char *m = gf_upload_manifest(r->upload, &mlen);
    gf_gw_deploy_req d = {
        .manifest = m,
        .manifest_len = mlen,
        .weights_tmp = gf_upload_path(r->upload),
        .sha256_hex = gf_upload_sha256(r->upload),
        .bytes = gf_upload_bytes(r->upload),
    };
    r->job_status = 500;
    gf_gw_deploy(r->srv->gw, &d, &r->job_json, &r->job_status, &r->job_err);
    gf_upload_release(r->upload); /* the core moved it (success) or removed it (failure) */
}

static void finish_deploy(gf_http_req *r)
{
    r->core_answered = true;
    if (r->job_err.code != GF_OK || r->job_json == NULL || r->job_status < 200 ||
        r->job_status >= 300) {
        reply_core_error(r, r->job_status, &r->job_err, "deploy failed");
        return;
    }
    json_t *j = r->job_json;
    r->job_json = NULL;
    char loc[96] = "";
    const char *name = json_string_value(json_object_get(j, "name"));
    if (name != NULL && gf_function_name_valid(name))
        snprintf(loc, sizeof loc, "/v1/functions/%s", name);
    gf_http_reply(r, (unsigned)r->job_status, j);
    if (loc[0] != '\0')
        gf_http_header(r, MHD_HTTP_HEADER_LOCATION, loc);
}

static void h_fn_deploy(gf_http_req *r)
{
    int status;
    gf_err err;
    if (gf_upload_finish(r->upload, &status, &err) != GF_OK) {
        gf_http_error(r, (unsigned)status, "%s", gf_err_msg(&err));
        return;
    }
    gf_http_async_begin(r, finish_deploy);
    gf_http_run_admin(r, job_deploy);
}

static void h_workers(gf_http_req *r)
{
    reply_view(r, gf_gw_workers_json(r->srv->gw));
}

static void h_placements(gf_http_req *r)
{
    reply_view(r, gf_gw_placements_json(r->srv->gw));
}

/* ---- metrics ---------------------------------------------------------------------- */

static void h_metrics(gf_http_req *r)
{
    gf_buf b;
    gf_buf_init(&b);
    if (gf_gw_metrics_text(r->srv->gw, &b) != GF_OK) {
        gf_buf_deinit(&b);
        gf_http_error(r, 500, "cannot render the metrics");
        return;
    }
    size_t len;
    char *text = gf_buf_steal(&b, &len);
    if (text == NULL) {
        gf_http_error(r, 500, "out of memory rendering the metrics");
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
    {"GET", "/v2/models/{m}", h_model_meta, 0},
    {"GET", "/v2/models/{m}/versions/{v}", h_model_meta, 0},
    {"GET", "/v2/models/{m}/ready", h_model_ready, 0},
    {"GET", "/v2/models/{m}/versions/{v}/ready", h_model_ready, 0},
    {"POST", "/v2/models/{m}/infer", h_v2_infer, 0},
    {"POST", "/v2/models/{m}/versions/{v}/infer", h_v2_infer, 0},
    /* the model repository extension */
    {"POST", "/v2/repository/index", h_repo_index, 0},
    {"POST", "/v2/repository/models/{m}/load", h_repo_load, GF_ROUTE_ADMIN},
    {"POST", "/v2/repository/models/{m}/unload", h_repo_unload, GF_ROUTE_ADMIN},
    /* the FaaS API */
    {"GET", "/v1/functions", h_fn_list, 0},
    {"POST", "/v1/functions", h_fn_deploy, GF_ROUTE_ADMIN | GF_ROUTE_UPLOAD},
    {"GET", "/v1/functions/{m}", h_fn_get, 0},
    {"DELETE", "/v1/functions/{m}", h_fn_delete, GF_ROUTE_ADMIN},
    {"POST", "/v1/functions/{m}/invoke", h_v1_invoke, 0},
    {"GET", "/v1/workers", h_workers, 0},
    {"GET", "/v1/placements", h_placements, 0},
    /* Prometheus */
    {"GET", "/metrics", h_metrics, 0},
};

const size_t gf_http_nroutes = sizeof gf_http_routes / sizeof gf_http_routes[0];
