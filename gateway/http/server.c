/* gpufaas — the HTTP front: libmicrohttpd glue (gateway/http).
 *
 * Request life, in libmicrohttpd's callbacks:
 *   first call       allocate the gf_http_req, route, check the token, the
 *                    declared length and (uploads) the content type; an early
 *                    rejection is answered at once, before any body is read
 *   calls with data  append to the body (bounded) or feed the upload
 *   last call        run the handler; it answers, or starts waiting
 *   waiting          the connection is suspended; gf_http_async_done (any
 *                    thread) resumes it and the handler's `then` answers
 *   completion       free the request (and a staged upload left behind)
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/tensor.h"
#include "core/units.h"
#include "functions/manifest.h"
#include "gateway/http/http_impl.h"

/* Memory per connection for its request line, headers and read buffer
 * (bodies are copied out as they arrive, responses live in their own
 * buffers). libmicrohttpd 0.9.75 zeroes all of it but the bytes already read
 * of the next request (MHD_pool_reset, called by connection_reset) before
 * each request on a keep-alive connection, so its size is paid per request:
 * 128 KiB was a tenth of the gateway's CPU time on a tiny model (bench_http,
 * c64), and 32 KiB (its default) still a sixth of the gateway's instructions
 * per request. The read buffer is half the pool, so a body arrives in reads
 * of 8 KiB: a 2 GB upload took the same CPU seconds as with 16 KiB reads
 * (8 KiB, with 4 KiB reads, took 15% more). Headers may take most of it
 * (abuse_test: 12 KB of headers). docs/performance.md has the figures. */
#define GF_HTTP_CONN_MEMORY ((size_t)16 * 1024)

/* ---- routing ---------------------------------------------------------------------- */

/* The 408 of a body that did not arrive in time (written on the socket by
 * conns.c), recorded. */
static void req_refused_late(gf_http_req *r)
{
    gf_http_req_refused(r, GF_ERR_TIMEOUT, 408,
                        "the request body did not arrive within --request-timeout: the "
                        "connection was closed");
}

/* libmicrohttpd decodes %HH in the path before it calls us unless told
 * otherwise; routing must see the path as sent (a %2F inside a name must not
 * add a segment, a %00 must not cut it), so nothing is decoded there and
 * route_match decodes each captured segment after the split. */
static size_t keep_escapes(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    return strlen(s);
}

static int hex_val(char c)
{
    return c >= '0' && c <= '9' ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

/* Percent-decode the n bytes at u into dst (cap > 0; cut to fit, and then
 * fails validation: the buffers are longer than any valid name or version).
 * False on a malformed escape or one that decodes to NUL. */
static bool segment_decode(const char *u, size_t n, char *dst, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char c = u[i];
        if (c == '%') {
            if (i + 2 >= n || hex_val(u[i + 1]) < 0 || hex_val(u[i + 2]) < 0)
                return false;
            c = (char)(hex_val(u[i + 1]) * 16 + hex_val(u[i + 2]));
            if (c == '\0')
                return false;
            i += 2;
        }
        if (k + 1 < cap)
            dst[k++] = c;
    }
    dst[k] = '\0';
    return true;
}

/* Match the raw (undecoded) path url against pattern segment by segment,
 * capturing the {m} and {v} segments, each percent-decoded after the split
 * (unvalidated). *bad_escape is set when a captured segment has a malformed
 * escape or a %00 (the route matched; the request is a 400). */
static bool route_match(const char *pattern, const char *url, char *m, size_t mcap, char *v,
                        size_t vcap, bool *bad_escape)
{
    const char *p = pattern, *u = url;
    for (;;) {
        if (*p == '\0' || *u == '\0')
            return *p == '\0' && *u == '\0';
        if (*p == '{') {
            const char *pe = strchr(p, '}');
            const char *ue = strchrnul(u, '/');
            size_t n = (size_t)(ue - u);
            if (pe == NULL || n == 0)
                return false;
            bool name = p[1] == 'm';
            if (!segment_decode(u, n, name ? m : v, name ? mcap : vcap))
                *bad_escape = true;
            p = pe + 1;
            u = ue;
            continue;
        }
        if (*p != *u)
            return false;
        p++;
        u++;
    }
}

static bool token_equal(const char *given, size_t glen, const char *want, size_t wlen)
{
    /* constant time in the given token: every byte is looked at */
    volatile unsigned char diff = glen != wlen;
    for (size_t i = 0; i < glen; i++)
        diff |= (unsigned char)given[i] ^ (unsigned char)(i < wlen ? want[i] : 0);
    return diff == 0;
}

/* Parse a positive version number. */
static bool parse_version(const char *s, int64_t *out)
{
    int64_t v = 0;
    if (*s == '\0')
        return false;
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9' || v > (INT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (*s - '0');
    }
    *out = v;
    return v > 0;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (s == NULL || *s == '\0')
        return false;
    for (; *s != '\0'; s++)
        if (*s < '0' || *s > '9' || !gf_u64_mul(v, 10, &v) ||
            !gf_u64_add(v, (uint64_t)(*s - '0'), &v))
            return false;
    *out = v;
    return true;
}

/* First callback: route and the checks that need no body. May answer. */
/* The route of method url (NULL when none), its {m} segment in name and its
 * {v} or {r} one in ver (unvalidated; name[72], ver[96]). *path_matched: some
 * route has the path; allow (64 bytes) the methods it takes; *bad_escape: a
 * captured segment is malformed. */
static const gf_route *route_find(const char *url, const char *method, char *name, char *ver,
                                  bool *path_matched, char *allow, bool *bad_escape)
{
    const char *m = strcmp(method, "HEAD") == 0 ? "GET" : method;
    *path_matched = false;
    allow[0] = '\0';
    /* the routes of this method first, in table order (the same route as
     * one pass over all would find): a POST to /v2/models/{m}/infer matches
     * no GET pattern on the way (each a decode of {m}) */
    for (size_t i = 0; i < gf_http_nroutes; i++) {
        const gf_route *rt = &gf_http_routes[i];
        if (strcmp(rt->method, m) != 0)
            continue;
        name[0] = ver[0] = '\0';
        *bad_escape = false;
        if (route_match(rt->pattern, url, name, 72, ver, 96, bad_escape)) {
            *path_matched = true;
            return rt;
        }
    }
    /* none: the methods the path takes, for a 405's Allow */
    for (size_t i = 0; i < gf_http_nroutes; i++) {
        const gf_route *rt = &gf_http_routes[i];
        name[0] = ver[0] = '\0';
        *bad_escape = false;
        if (!route_match(rt->pattern, url, name, 72, ver, 96, bad_escape))
            continue;
        *path_matched = true;
        if (strcmp(rt->method, m) != 0) {
            if (strstr(allow, rt->method) == NULL &&
                strlen(allow) + strlen(rt->method) + 3 < 64)
                snprintf(allow + strlen(allow), 64 - strlen(allow), "%s%s",
                         allow[0] != '\0' ? ", " : "", rt->method);
            continue;
        }
        return rt;
    }
    return NULL;
}

/* The route of method url and the function and version it names, as far as
 * they are valid (name: 72 bytes, "" when none; *version 0 when none). NULL
 * when no route takes it. */
static const gf_route *label_of(const char *url, const char *method, char *name,
                                int64_t *version)
{
    char seg[72], ver[96], allow[64];
    bool path_matched, bad_escape;
    const gf_route *rt = route_find(url, method, seg, ver, &path_matched, allow, &bad_escape);
    name[0] = '\0';
    *version = 0;
    if (rt == NULL || bad_escape)
        return rt;
    if (strstr(rt->pattern, "{m}") != NULL && gf_function_name_valid(seg))
        memcpy(name, seg, sizeof seg);
    if (strstr(rt->pattern, "{v}") != NULL && !parse_version(ver, version))
        *version = 0;
    return rt;
}

/* A request refused before its route is looked at (the connection is over
 * its client's limit): its route, function and version as far as they are
 * valid, so an inference is recorded under them. */
static void req_label(gf_http_req *r, const char *url, const char *method)
{
    r->route = label_of(url, method, r->name, &r->version);
}

void gf_http_refused_headers(gf_http *h, const char *uri, uint64_t age_us)
{
    char name[72];
    int64_t version;
    /* every inference route is a POST; the method is not known yet (the
     * headers never came), the target names what it was for */
    const gf_route *rt = label_of(uri, "POST", name, &version);
    if (rt == NULL || !(rt->flags & GF_ROUTE_INFER))
        return;
    gf_gw_refused(h->gw, name, version, GF_ERR_TIMEOUT, 408,
                  "the request headers did not arrive within --request-timeout: the "
                  "connection was closed", age_us);
}

static void req_begin(gf_http_req *r, const char *url, const char *method)
{
    gf_http *h = r->srv;
    r->reply_coding = gf_http_coding_accept(gf_http_req_header(r, MHD_HTTP_HEADER_ACCEPT_ENCODING));
    char name[72], ver[96]; /* ver: the {v} or {r} segment */
    bool path_matched, bad_escape;
    char allow[64];
    r->route = route_find(url, method, name, ver, &path_matched, allow, &bad_escape);
    if (r->route == NULL) {
        if (path_matched) {
            gf_http_error(r, 405, "method %s is not allowed on %s (allowed: %s)", method, url,
                          allow);
            gf_http_header(r, "Allow", allow);
        } else {
            gf_http_fail(r, GF_ERR_NOT_FOUND, "no such endpoint: %s %s", method, url);
        }
        return;
    }
    if (bad_escape) {
        gf_http_fail(r, GF_ERR_INVALID,
                     "malformed percent-escape or %%00 in the path %.200s", url);
        return;
    }
    if (strstr(r->route->pattern, "{m}") != NULL) {
        if (!gf_function_name_valid(name)) {
            gf_http_fail(r, GF_ERR_INVALID,
                         "invalid function name '%.64s' (lowercase letters, digits, '_', '.', "
                         "'-'; starting with a letter or digit; at most 63 characters)",
                         name);
            return;
        }
        gf_str_copy(r->name, sizeof r->name, name);
    }
    if (strstr(r->route->pattern, "{r}") != NULL) {
        if (!gf_shm_name_valid(ver)) {
            gf_http_fail(r, GF_ERR_INVALID,
                         "invalid shared memory region name '%.64s' (1 to %d letters, digits, "
                         "'_', '.', '-')",
                         ver, GF_SHM_NAME_MAX);
            return;
        }
        memcpy(r->region, ver, strlen(ver) + 1); /* valid: at most GF_SHM_NAME_MAX */
    }
    if (strstr(r->route->pattern, "{v}") != NULL && !parse_version(ver, &r->version)) {
        gf_http_fail(r, GF_ERR_INVALID, "invalid version '%.24s' (a positive integer)", ver);
        return;
    }
    if ((r->route->flags & GF_ROUTE_ADMIN) && h->token != NULL) {
        const char *auth = gf_http_req_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
        if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0) {
            gf_http_error(r, 401, "this call needs the admin token: Authorization: Bearer <token>");
            gf_http_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
            return;
        }
        const char *tok = auth + 7;
        while (*tok == ' ')
            tok++;
        if (!token_equal(tok, strlen(tok), h->token, h->token_len)) {
            gf_http_error(r, 401, "bad admin token");
            gf_http_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer error=\"invalid_token\"");
            return;
        }
    }
    bool upload = (r->route->flags & GF_ROUTE_UPLOAD) != 0;
    gf_err cerr;
    if (gf_http_coding_parse(gf_http_req_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING),
                             &r->body_coding, &cerr) != GF_OK) {
        gf_http_error(r, 415, "%s", gf_err_msg(&cerr));
        return;
    }
    if (upload && r->body_coding != GF_CODING_IDENTITY) {
        gf_http_error(r, 415, "a deploy's multipart/form-data body cannot be %s-encoded",
                      gf_http_coding_name(r->body_coding));
        return;
    }
    uint64_t limit =
        upload ? h->cfg.max_upload + GF_MANIFEST_MAX_BYTES + (1u << 20) : h->cfg.max_body;
    uint64_t cl;
    const char *cls = gf_http_req_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    bool have_cl = cls != NULL && parse_u64(cls, &cl);
    if (have_cl && cl > limit) {
        gf_http_fail(r, GF_ERR_TOO_LARGE,
                     "request body of %" PRIu64 " bytes is larger than the limit of %" PRIu64
                     " bytes (%s)",
                     cl, limit, upload ? "--max-upload" : "--max-body");
        return;
    }
    /* a small body in one allocation (the buffer doubles from 64 bytes as
     * its chunks come); a large one grows as it is charged */
    if (!upload && have_cl && cl <= 4096 && r->body_coding == GF_CODING_IDENTITY)
        (void)gf_buf_reserve(&r->body, (size_t)cl);
    if (upload) {
        const char *ct = gf_http_req_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
        if (ct == NULL || strncasecmp(ct, "multipart/form-data", 19) != 0) {
            gf_http_error(r, 415,
                          "deploy expects multipart/form-data with the parts 'manifest' and "
                          "'weights' (curl -F manifest=@m.json -F weights=@model.safetensors), "
                          "or an ONNX model (curl -F model=@model.onnx -F name=NAME)");
            return;
        }
        gf_err err;
        if (gf_upload_new(gf_gw_upload_dir(h->gw), h->cfg.max_upload, &r->upload, &err) != GF_OK) {
            gf_http_fail(r, err.code, "%s", gf_err_msg(&err));
            return;
        }
        r->pp = MHD_create_post_processor(r->conn, 64 * 1024, gf_upload_iter, r->upload);
        if (r->pp == NULL) {
            gf_http_error(r, 415, "multipart/form-data without a usable boundary");
            return;
        }
    }
}

bool gf_http_body_charge(gf_http_req *r, size_t n)
{
    gf_http *h = r->srv;
    uint64_t was = atomic_fetch_add(&h->body_bytes, n);
    if (was + n > h->cfg.body_memory) {
        atomic_fetch_sub(&h->body_bytes, n);
        r->body_over_budget = true;
        return false;
    }
    r->body_charged += n;
    return true;
}

/* The n bytes r held are given back to the budget. */
static void body_release(gf_http_req *r, size_t n)
{
    if (n > r->body_charged)
        n = (size_t)r->body_charged;
    atomic_fetch_sub(&r->srv->body_bytes, n);
    r->body_charged -= n;
}

static bool inflate_charge(void *arg, size_t n)
{
    return gf_http_body_charge(arg, n);
}

/* A chunk of the body. */
static void req_body(gf_http_req *r, const char *data, size_t n)
{
    if (r->resp != NULL || r->queued)
        return; /* answered early: the rest is ignored */
    if (r->upload != NULL) {
        if (r->pp != NULL && MHD_post_process(r->pp, data, n) != MHD_YES)
            gf_upload_fail(r->upload, GF_ERR_FORMAT, "malformed multipart/form-data body");
        return;
    }
    if (r->body_too_large || r->body_over_budget)
        return;
    if (!gf_http_body_charge(r, n)) {
        gf_buf_deinit(&r->body); /* what it held goes back at once */
        body_release(r, (size_t)r->body_charged);
        return;
    }
    gf_status st = gf_buf_append(&r->body, data, n);
    if (st != GF_OK) {
        r->body_too_large = true; /* GF_ERR_TOO_LARGE, or no memory for it */
        gf_buf_deinit(&r->body);
    }
}

/* The body is complete: run the handler. */
static void req_run(gf_http_req *r)
{
    if (r->body_over_budget) {
        char budget[32];
        gf_http_fail(r, GF_ERR_OVERLOADED,
                     "the request bodies the server holds would pass its budget with this one "
                     "(--body-memory %s): try again shortly",
                     gf_size_format(r->srv->cfg.body_memory, budget, sizeof budget));
        return;
    }
    if (r->body_too_large) {
        gf_http_fail(r, GF_ERR_TOO_LARGE,
                     "request body is larger than the limit of %" PRIu64 " bytes (--max-body)",
                     r->srv->cfg.max_body);
        return;
    }
    if (r->body_coding != GF_CODING_IDENTITY) {
        gf_buf plain;
        gf_buf_init(&plain);
        gf_err err;
        /* the inflated bytes are charged to the body budget as they come,
         * then the compressed ones are given back */
        uint64_t packed_charge = r->body_charged;
        gf_status st = gf_http_inflate(r->body_coding, r->body.data, r->body.len,
                                       r->srv->cfg.max_body, inflate_charge, r, &plain, &err);
        if (st != GF_OK) {
            body_release(r, (size_t)(r->body_charged - packed_charge)); /* freed already */
            gf_http_fail(r, st, "%s", gf_err_msg(&err));
            return;
        }
        size_t packed = r->body.len;
        gf_buf_deinit(&r->body);
        body_release(r, packed);
        r->body = plain;
    }
    if (r->pp != NULL) {
        if (MHD_destroy_post_processor(r->pp) != MHD_YES)
            gf_upload_fail(r->upload, GF_ERR_FORMAT,
                           "the multipart/form-data body ends early (no closing boundary)");
        r->pp = NULL;
    }
    r->route->fn(r);
}

static enum MHD_Result req_queue(gf_http_req *r)
{
    if (r->resp == NULL)
        return MHD_NO; /* could not even build a reply: close */
    enum MHD_Result ret = MHD_queue_response(r->conn, r->status, r->resp);
    MHD_destroy_response(r->resp);
    r->resp = NULL;
    r->queued = true;
    return ret;
}

/* After the handler or a `then`: answer, keep waiting, or run `then`. */
static enum MHD_Result req_settle(gf_http_req *r)
{
    for (;;) {
        if (r->resp != NULL)
            return req_queue(r);
        pthread_mutex_lock(&r->mu);
        if (!r->async_pending) {
            pthread_mutex_unlock(&r->mu);
            GF_LOG_E("%s %s: the handler gave no reply", r->method,
                     r->route != NULL ? r->route->pattern : "?");
            gf_http_fail(r, GF_ERR_INTERNAL, "internal error: no reply");
            return req_queue(r);
        }
        if (!r->async_done) {
            MHD_suspend_connection(r->conn);
            r->suspended = true;
            pthread_mutex_unlock(&r->mu);
            return MHD_YES;
        }
        gf_http_fn then = r->then;
        r->async_pending = false;
        r->async_done = false;
        r->then = NULL;
        pthread_mutex_unlock(&r->mu);
        then(r);
    }
}

static void req_free(gf_http_req *r)
{
    if (r->pp != NULL)
        MHD_destroy_post_processor(r->pp);
    gf_upload_free(r->upload);
    gf_http_load_labels_free(r->load_labels);
    if (r->resp != NULL)
        MHD_destroy_response(r->resp);
    gf_buf_deinit(&r->body);
    atomic_fetch_sub(&r->srv->body_bytes, r->body_charged);
    gf_codec_request_deinit(&r->creq);
    if (r->result != NULL)
        gf_gw_result_free(r->result);
    gf_buf_deinit(&r->deployed.json);
    gf_buf_deinit(&r->job_out);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static enum MHD_Result gf_http_access(void *cls, struct MHD_Connection *conn, const char *url,
                                      const char *method, const char *version,
                                      const char *upload_data, size_t *upload_data_size,
                                      void **con_cls)
{
    (void)version;
    gf_http *h = cls;
    gf_http_req *r = *con_cls;
    if (r == NULL) {
        r = calloc(1, sizeof *r);
        if (r == NULL)
            return MHD_NO;
        r->srv = h;
        r->conn = conn;
        r->t0_ns = gf_mono_ns();
        gf_str_copy(r->method, sizeof r->method, method);
        pthread_mutex_init(&r->mu, NULL);
        gf_buf_init(&r->body);
        r->body.limit = h->cfg.max_body;
        gf_err_clear(&r->job_err);
        atomic_fetch_add(&h->active, 1);
        *con_cls = r;
        if (!gf_http_conn_begin(r)) {
            req_label(r, url, method); /* an inference is recorded under its names */
            gf_http_fail(r, GF_ERR_BUSY,
                         "too many connections from this client (at most %u; "
                         "--max-conns-per-client): reuse one",
                         gf_http_conns_per_client(h));
            gf_http_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
            return req_queue(r);
        }
        req_begin(r, url, method);
        if (r->resp != NULL)
            return req_queue(r);
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n_data = *upload_data_size;
        *upload_data_size = 0;
        if (r->queued)
            return MHD_YES;
        if (gf_http_conn_cut_late(r)) {
            req_refused_late(r);
            return MHD_NO;
        }
        req_body(r, upload_data, n_data);
        return MHD_YES;
    }
    if (r->queued)
        return MHD_YES;
    if (!r->started) {
        r->started = true;
        gf_http_conn_read(r);
        req_run(r);
    }
    return req_settle(r);
}

static void gf_http_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                              enum MHD_RequestTerminationCode toe)
{
    gf_http *h = cls;
    gf_http_req *r = *con_cls;
    if (r == NULL)
        return;
    if (r->resp == NULL && !r->queued && gf_http_conn_cut_in_body(r))
        req_refused_late(r); /* the sweeper's 408: an answer, recorded like the others */
    GF_LOG_D("%s %s -> %u (%.3f ms)%s", r->method,
             r->route != NULL ? r->route->pattern : "(no route)", r->status,
             (double)(gf_mono_ns() - r->t0_ns) / 1e6,
             toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " [connection ended early]");
    req_free(r);
    *con_cls = NULL;
    gf_http_conn_end(h, conn);
    atomic_fetch_sub(&h->active, 1);
}

static void gf_http_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    GF_LOG_W("libmicrohttpd: %s", msg);
}

/* ---- the daemon ------------------------------------------------------------------- */

/* Bind and listen on spec; returns the socket or -1 with err set. */
static int listen_on(const char *spec, char *url, size_t url_cap, uint16_t *port_out, bool *v6,
                     gf_err *err)
{
    char host[256];
    const char *port;
    if (spec[0] == '[') {
        const char *e = strchr(spec, ']');
        if (e == NULL || e[1] != ':' || (size_t)(e - spec - 1) >= sizeof host) {
            gf_err_set(err, GF_ERR_INVALID, "--listen '%s': expected [ADDR]:PORT", spec);
            return -1;
        }
        memcpy(host, spec + 1, (size_t)(e - spec - 1));
        host[e - spec - 1] = '\0';
        port = e + 2;
    } else {
        const char *c = strrchr(spec, ':');
        if (c == NULL || (size_t)(c - spec) >= sizeof host) {
            gf_err_set(err, GF_ERR_INVALID, "--listen '%s': expected HOST:PORT", spec);
            return -1;
        }
        memcpy(host, spec, (size_t)(c - spec));
        host[c - spec] = '\0';
        port = c + 1;
    }
    uint64_t pv;
    if (!parse_u64(port, &pv) || pv > 65535) {
        gf_err_set(err, GF_ERR_INVALID, "--listen '%s': port '%s' is not a number in [0, 65535]",
                   spec, port);
        return -1;
    }
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = host[0] == '\0' ? AF_INET : AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gai = getaddrinfo(host[0] != '\0' ? host : NULL, port, &hints, &ai);
    if (gai != 0) {
        gf_err_set(err, GF_ERR_INVALID, "--listen '%s': %s", spec, gai_strerror(gai));
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        gf_err_set(err, GF_ERR_IO, "socket() failed: %s", strerror(errno));
        freeaddrinfo(ai);
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
        gf_err_set(err, GF_ERR_IO, "cannot listen on %s: %s", spec, strerror(errno));
        close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    *v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char addr[INET6_ADDRSTRLEN] = "?";
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &s6->sin6_addr, addr, sizeof addr);
            *port_out = ntohs(s6->sin6_port);
            snprintf(url, url_cap, "http://[%s]:%u", addr, *port_out);
        } else {
            struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &s4->sin_addr, addr, sizeof addr);
            *port_out = ntohs(s4->sin_port);
            snprintf(url, url_cap, "http://%s:%u", addr, *port_out);
        }
    }
    return fd;
}

gf_status gf_http_start(gf_gw *gw, const gf_http_config *cfg, gf_http **out, gf_err *err)
{
    gf_http *h = calloc(1, sizeof *h);
    if (h == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "%s: out of memory", __func__);
    h->gw = gw;
    h->cfg = *cfg;
    if (h->cfg.max_body == 0)
        h->cfg.max_body = GF_HTTP_DEFAULT_MAX_BODY;
    if (h->cfg.max_upload == 0)
        h->cfg.max_upload = GF_HTTP_DEFAULT_MAX_UPLOAD;
    if (h->cfg.threads == 0)
        h->cfg.threads = GF_HTTP_DEFAULT_THREADS;
    if (h->cfg.conn_timeout_s == 0)
        h->cfg.conn_timeout_s = GF_HTTP_DEFAULT_CONN_TIMEOUT_S;
    if (h->cfg.max_conns == 0)
        h->cfg.max_conns = GF_HTTP_DEFAULT_MAX_CONNS;
    if (h->cfg.max_conns_per_client == 0)
        h->cfg.max_conns_per_client = GF_HTTP_DEFAULT_MAX_CONNS_PER_CLIENT;
    if (h->cfg.body_memory == 0)
        h->cfg.body_memory = GF_HTTP_DEFAULT_BODY_MEMORY;
    if (h->cfg.request_timeout_s == 0)
        h->cfg.request_timeout_s = GF_HTTP_DEFAULT_REQUEST_TIMEOUT_S;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cond, NULL);
    atomic_init(&h->active, 0);
    if (gf_shm_table_new(gw, &h->shm) != GF_OK) {
        gf_http_free(h);
        return gf_err_set(err, GF_ERR_NOMEM, "%s: out of memory", __func__);
    }
    atomic_init(&h->quiesced, false);
    h->listen = strdup(cfg->listen != NULL ? cfg->listen : GF_HTTP_DEFAULT_LISTEN);
    if (cfg->admin_token != NULL && cfg->admin_token[0] != '\0') {
        h->token = strdup(cfg->admin_token);
        h->token_len = h->token != NULL ? strlen(h->token) : 0;
    }
    if (h->listen == NULL ||
        (cfg->admin_token != NULL && cfg->admin_token[0] != '\0' && h->token == NULL)) {
        gf_http_free(h);
        return gf_err_set(err, GF_ERR_NOMEM, "%s: out of memory", __func__);
    }
    h->cfg.listen = h->listen;
    h->cfg.admin_token = h->token;
    bool v6 = false;
    int fd = listen_on(h->listen, h->url, sizeof h->url, &h->port, &v6, err);
    if (fd < 0) {
        gf_http_free(h);
        return err != NULL ? err->code : GF_ERR_IO;
    }
    if (pthread_create(&h->admin, NULL, gf_http_admin_main, h) != 0) {
        close(fd);
        gf_http_free(h);
        return gf_err_set(err, GF_ERR_NOMEM, "%s: cannot start the admin thread", __func__);
    }
    h->admin_started = true;
    if (gf_http_conns_start(h, err) != GF_OK) {
        close(fd);
        gf_http_free(h);
        return err != NULL ? err->code : GF_ERR_NOMEM;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG | MHD_USE_TURBO | (v6 ? MHD_USE_IPv6 : 0);
    h->d = MHD_start_daemon(flags, 0, gf_http_conn_accept, h, gf_http_access, h, MHD_OPTION_EXTERNAL_LOGGER,
                            gf_http_mhd_log, h, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
                            MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)h->cfg.threads,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)h->cfg.conn_timeout_s,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned int)h->cfg.max_conns,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, GF_HTTP_CONN_MEMORY,
                            MHD_OPTION_NOTIFY_COMPLETED, gf_http_completed, h,
                            MHD_OPTION_UNESCAPE_CALLBACK, keep_escapes, NULL,
                            MHD_OPTION_NOTIFY_CONNECTION, gf_http_conn_notify, h,
                            MHD_OPTION_URI_LOG_CALLBACK, gf_http_conn_uri_log, h, MHD_OPTION_END);
    if (h->d == NULL) {
        close(fd);
        gf_http_free(h);
        return gf_err_set(err, GF_ERR_IO, "%s: MHD_start_daemon failed", __func__);
    }
    *out = h;
    return GF_OK;
}

uint16_t gf_http_port(const gf_http *h)
{
    return h->port;
}

const char *gf_http_url(const gf_http *h)
{
    return h->url;
}

void gf_http_quiesce(gf_http *h)
{
    if (h->d == NULL || atomic_load(&h->quiesced))
        return;
    atomic_store(&h->quiesced, true);
    MHD_socket s = MHD_quiesce_daemon(h->d);
    if (s != MHD_INVALID_SOCKET)
        close(s);
}

void gf_http_stop(gf_http *h, unsigned wait_ms)
{
    if (h->stopped)
        return;
    gf_http_quiesce(h);
    if (h->admin_started) {
        pthread_mutex_lock(&h->mu);
        h->admin_stop = true;
        pthread_cond_broadcast(&h->cond);
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->admin, NULL); /* runs what is queued first */
        h->admin_started = false;
    }
    uint64_t deadline = gf_mono_ns() + (uint64_t)wait_ms * 1000000u;
    while (atomic_load(&h->active) > 0 && gf_mono_ns() < deadline) {
        struct timespec ts = {0, 5 * 1000000};
        nanosleep(&ts, NULL);
    }
    long left = atomic_load(&h->active);
    if (left > 0)
        GF_LOG_W("stopping with %ld requests still in flight", left);
    gf_http_conns_stop(h);
    if (h->d != NULL) {
        MHD_stop_daemon(h->d);
        h->d = NULL;
    }
    h->stopped = true;
}

void gf_http_free(gf_http *h)
{
    if (h == NULL)
        return;
    gf_http_stop(h, 0);
    gf_http_conns_free(h);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cond);
    free(h->listen);
    free(h->token);
    gf_shm_table_free(h->shm);
    free(h);
}
