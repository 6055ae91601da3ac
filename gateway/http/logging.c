/* gpufaas — Triton's logging extension (gateway/http): GET /v2/logging reads
 * the gateway's log settings, POST /v2/logging changes them at run time.
 *
 * Triton's settings map onto the one threshold of runtime/core/log.h:
 *   log_verbose_level >= 2 -> trace, 1 -> debug;
 *   else log_info -> info, else log_warning -> warn, else log_error -> error,
 *   else nothing.
 * Read back, log_info is "threshold >= info" and so on. Lines go to stderr
 * only: log_file must be "" and log_format "default". The workers are other
 * processes and keep the level they were started with.
 */
#include <string.h>

#include "core/log.h"
#include "gateway/http/http_impl.h"

#define NOTHING (-1) /* a threshold below error: no line at all */

static json_t *settings(void)
{
    int t = gf_log_threshold;
    return json_pack("{s:s, s:b, s:b, s:b, s:i, s:s}", "log_file", "", "log_info",
                     t >= GF_LOG_INFO, "log_warning", t >= GF_LOG_WARN, "log_error",
                     t >= GF_LOG_ERROR, "log_verbose_level",
                     t > GF_LOG_INFO ? t - GF_LOG_INFO : 0, "log_format", "default");
}

void gf_http_logging_get(gf_http_req *r)
{
    gf_http_reply(r, 200, settings());
}

/* The boolean member key of body into *out (left alone when absent). */
static bool get_bool(gf_http_req *r, const gf_json *body, const char *key, bool *out)
{
    const gf_json *v = gf_json_get(body, key);
    if (v == NULL)
        return true;
    if (v->type != GF_JSON_BOOL) {
        gf_http_fail(r, GF_ERR_INVALID, "logging: %s must be true or false", key);
        return false;
    }
    *out = v->u.b;
    return true;
}

/* Check every member and compute the new threshold; answers and returns
 * false when one is bad. */
static bool new_threshold(gf_http_req *r, const gf_json *body, int *out)
{
    static const char *const known[] = {"log_file", "log_info", "log_warning", "log_error",
                                        "log_verbose_level", "log_format"};
    for (size_t i = 0; i < body->u.obj.n; i++) {
        bool ok = false;
        for (size_t k = 0; k < sizeof known / sizeof known[0] && !ok; k++)
            ok = strcmp(body->u.obj.m[i].key, known[k]) == 0;
        if (!ok) {
            gf_http_fail(r, GF_ERR_INVALID,
                         "logging: unknown setting '%.60s' (log_info, log_warning, log_error, "
                         "log_verbose_level, log_file, log_format)",
                         body->u.obj.m[i].key);
            return false;
        }
    }
    const gf_json *file = gf_json_get(body, "log_file");
    if (file != NULL && (file->type != GF_JSON_STRING || file->u.str.len != 0)) {
        gf_http_fail(r, GF_ERR_UNSUPPORTED,
                     "logging: log_file is not supported (gpufaas logs to stderr): give \"\"");
        return false;
    }
    const gf_json *fmt = gf_json_get(body, "log_format");
    if (fmt != NULL && (fmt->type != GF_JSON_STRING || strcmp(fmt->u.str.s, "default") != 0)) {
        gf_http_fail(r, GF_ERR_UNSUPPORTED, "logging: log_format must be \"default\"");
        return false;
    }
    int t = gf_log_threshold;
    bool info = t >= GF_LOG_INFO, warn = t >= GF_LOG_WARN, error = t >= GF_LOG_ERROR;
    int64_t verbose = t > GF_LOG_INFO ? t - GF_LOG_INFO : 0;
    if (!get_bool(r, body, "log_info", &info) || !get_bool(r, body, "log_warning", &warn) ||
        !get_bool(r, body, "log_error", &error))
        return false;
    const gf_json *v = gf_json_get(body, "log_verbose_level");
    if (v != NULL) {
        if (v->type != GF_JSON_NUMBER || !v->u.num.is_int || v->u.num.i < 0) {
            gf_http_fail(r, GF_ERR_INVALID, "logging: log_verbose_level must be an integer >= 0");
            return false;
        }
        verbose = v->u.num.i;
    }
    *out = verbose >= 2 ? GF_LOG_TRACE
         : verbose == 1 ? GF_LOG_DEBUG
         : info        ? GF_LOG_INFO
         : warn        ? GF_LOG_WARN
         : error       ? GF_LOG_ERROR
                       : NOTHING;
    return true;
}

void gf_http_logging_set(gf_http_req *r)
{
    gf_json_doc *doc;
    const gf_json *body;
    if (!gf_http_small_json_body(r, &doc, &body))
        return;
    int t = gf_log_threshold;
    bool ok = body == NULL || new_threshold(r, body, &t);
    gf_json_doc_free(doc);
    if (!ok)
        return;
    if (t != gf_log_threshold) {
        GF_LOG_I("log level changed through /v2/logging (threshold %d -> %d)",
                 gf_log_threshold, t);
        gf_log_threshold = t;
    }
    gf_http_reply(r, 200, settings());
}
