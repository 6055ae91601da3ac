/* gpufaas — answering a request and waiting for its work (gateway/http):
 * replies with a body, JSON and errors (every failure through
 * gf_http_status_of), headers and the query, suspending a connection while
 * another thread works (gf_http_async_*), and the admin thread that runs
 * slow admin calls one at a time. libmicrohttpd's callbacks and the daemon
 * are in server.c. */
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

/* ---- replies ---------------------------------------------------------------------- */

static void reply_headers(gf_http_req *r, struct MHD_Response *resp, unsigned status,
                          const char *content_type, size_t len, size_t infer_header_len);

void gf_http_reply_bytes(gf_http_req *r, unsigned status, const char *content_type, char *bytes,
                         size_t len, size_t infer_header_len)
{
    assert(r->resp == NULL && !r->queued);
    struct MHD_Response *resp;
    if (r->reply_coding != GF_CODING_IDENTITY && bytes != NULL && len > 0) {
        char *z;
        size_t zlen;
        gf_err err;
        if (gf_http_deflate(r->reply_coding, bytes, len, &z, &zlen, &err) == GF_OK) {
            free(bytes);
            bytes = z;
            len = zlen;
        } else {
            GF_LOG_W("%s", gf_err_msg(&err));
            r->reply_coding = GF_CODING_IDENTITY; /* answer uncompressed */
        }
    }
    if (bytes == NULL || len == 0) {
        free(bytes);
        resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    } else {
        resp = MHD_create_response_from_buffer(len, bytes, MHD_RESPMEM_MUST_FREE);
        if (resp == NULL)
            free(bytes);
    }
    if (resp == NULL) {
        GF_LOG_E("MHD_create_response_from_buffer(%zu) failed", len);
        return; /* no reply: the connection is closed */
    }
    reply_headers(r, resp, status, content_type, len, infer_header_len);
}

/* What an iovec response keeps until libmicrohttpd lets go of it. */
typedef struct iov_keep {
    char *head;
    gf_gw_result *res;
} iov_keep;

static void iov_keep_free(void *cls)
{
    iov_keep *k = cls;
    free(k->head);
    gf_gw_result_free(k->res);
    free(k);
}

void gf_http_reply_iov(gf_http_req *r, const char *content_type, char *head,
                       const gf_codec_iov *iov, gf_gw_result *res, size_t infer_header_len)
{
    assert(r->resp == NULL && !r->queued && r->reply_coding == GF_CODING_IDENTITY);
    struct MHD_IoVec v[GF_CODEC_MAX_SEGS];
    size_t len = 0;
    for (size_t i = 0; i < iov->n; i++) {
        const gf_codec_seg *s = &iov->seg[i];
        v[i].iov_base = s->ext != NULL ? s->ext : head + s->off;
        v[i].iov_len = s->len;
        len += s->len;
    }
    iov_keep *k = malloc(sizeof *k);
    struct MHD_Response *resp = NULL;
    if (k != NULL) {
        *k = (iov_keep){head, res};
        resp = MHD_create_response_from_iovec(v, (unsigned)iov->n, iov_keep_free, k);
    }
    if (resp == NULL) {
        GF_LOG_E("MHD_create_response_from_iovec(%zu segments) failed", iov->n);
        free(k);
        free(head);
        gf_gw_result_free(res);
        return; /* no reply: the connection is closed */
    }
    reply_headers(r, resp, 200, content_type, len, infer_header_len);
}

/* The headers every reply has, and r's response set. */
static void reply_headers(gf_http_req *r, struct MHD_Response *resp, unsigned status,
                          const char *content_type, size_t len, size_t infer_header_len)
{
    if (content_type != NULL)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (infer_header_len > 0) {
        char v[24];
        snprintf(v, sizeof v, "%zu", infer_header_len);
        MHD_add_response_header(resp, "Inference-Header-Content-Length", v);
    }
    if (r->reply_coding != GF_CODING_IDENTITY && resp != NULL && len > 0)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING,
                                gf_http_coding_name(r->reply_coding));
    if (atomic_load(&r->srv->quiesced)) /* shutting down: clients should not reuse it */
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    r->resp = resp;
    r->status = status;
}

void gf_http_reply(gf_http_req *r, unsigned status, json_t *body)
{
    if (body == NULL) {
        gf_http_reply_bytes(r, status, NULL, NULL, 0, 0);
        return;
    }
    char *text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(body);
    if (text == NULL) {
        gf_http_fail(r, GF_ERR_NOMEM, "out of memory rendering the response");
        return;
    }
    gf_http_reply_bytes(r, status, "application/json", text, strlen(text), 0);
}

void gf_http_reply_json(gf_http_req *r, unsigned status, gf_buf *json)
{
    size_t len;
    char *text = gf_buf_steal(json, &len);
    if (text == NULL) {
        gf_http_fail(r, GF_ERR_NOMEM, "out of memory rendering the response");
        return;
    }
    gf_http_reply_bytes(r, status, "application/json", text, len, 0);
}

void gf_http_req_refused(gf_http_req *r, gf_status st, unsigned status, const char *msg)
{
    if (r->route == NULL || !(r->route->flags & GF_ROUTE_INFER) || r->core_answered)
        return;
    r->core_answered = true;
    gf_gw_refused(r->srv->gw, r->name, r->version, st, (int)status, msg,
                  (gf_mono_ns() - r->t0_ns) / 1000);
}

static void error_reply(gf_http_req *r, gf_status st, unsigned status, const char *fmt,
                        va_list ap) __attribute__((format(printf, 4, 0)));
static void error_reply(gf_http_req *r, gf_status st, unsigned status, const char *fmt,
                        va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    gf_http_req_refused(r, st, status, msg);
    gf_buf b;
    gf_buf_init(&b);
    /* built by hand: the message may quote bytes jansson would refuse */
    if (gf_buf_append_str(&b, "{\"error\":") != GF_OK ||
        gf_buf_append_json_str(&b, msg, strlen(msg)) != GF_OK ||
        gf_buf_append(&b, "}", 1) != GF_OK) {
        gf_buf_deinit(&b);
        gf_http_reply_bytes(r, status, NULL, NULL, 0, 0);
        return;
    }
    size_t len;
    char *text = gf_buf_steal(&b, &len);
    gf_http_reply_bytes(r, status, "application/json", text, text != NULL ? len : 0, 0);
}

void gf_http_error(gf_http_req *r, unsigned status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_reply(r, GF_ERR_INVALID, status, fmt, ap);
    va_end(ap);
}

void gf_http_fail(gf_http_req *r, gf_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_reply(r, st, (unsigned)gf_http_status_of(st), fmt, ap);
    va_end(ap);
    unsigned ra = gf_http_retry_after_s(st);
    if (ra > 0) {
        char v[16];
        snprintf(v, sizeof v, "%u", ra);
        gf_http_header(r, MHD_HTTP_HEADER_RETRY_AFTER, v);
    }
}

void gf_http_header(gf_http_req *r, const char *name, const char *value)
{
    if (r->resp != NULL)
        MHD_add_response_header(r->resp, name, value);
}

const char *gf_http_req_header(gf_http_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *gf_http_req_query(gf_http_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

/* ---- waiting ---------------------------------------------------------------------- */

void gf_http_async_begin(gf_http_req *r, gf_http_fn then)
{
    pthread_mutex_lock(&r->mu);
    assert(!r->async_pending);
    r->then = then;
    r->async_pending = true;
    r->async_done = false;
    pthread_mutex_unlock(&r->mu);
}

void gf_http_async_cancel(gf_http_req *r)
{
    pthread_mutex_lock(&r->mu);
    r->async_pending = false;
    r->then = NULL;
    pthread_mutex_unlock(&r->mu);
}

void gf_http_async_done(gf_http_req *r)
{
    pthread_mutex_lock(&r->mu);
    assert(r->async_pending && !r->async_done);
    r->async_done = true;
    bool resume = r->suspended;
    r->suspended = false;
    struct MHD_Connection *c = r->conn;
    pthread_mutex_unlock(&r->mu);
    /* a suspended connection cannot complete, so r and c are alive here */
    if (resume)
        MHD_resume_connection(c);
}

void *gf_http_admin_main(void *arg)
{
    gf_http *h = arg;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (h->jobs == NULL && !h->admin_stop)
            pthread_cond_wait(&h->cond, &h->mu);
        gf_http_job *j = h->jobs;
        if (j == NULL)
            break; /* stopping, and nothing left */
        h->jobs = j->next;
        if (h->jobs == NULL)
            h->jobs_tail = NULL;
        pthread_mutex_unlock(&h->mu);
        j->fn(j->r);
        gf_http_async_done(j->r);
        free(j);
        pthread_mutex_lock(&h->mu);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

void gf_http_run_admin(gf_http_req *r, gf_http_fn fn)
{
    gf_http *h = r->srv;
    gf_http_job *j = malloc(sizeof *j);
    pthread_mutex_lock(&h->mu);
    if (j == NULL || h->admin_stop || !h->admin_started) {
        /* no admin thread (any more) or no memory: run it here */
        pthread_mutex_unlock(&h->mu);
        free(j);
        fn(r);
        gf_http_async_done(r);
        return;
    }
    j->r = r;
    j->fn = fn;
    j->next = NULL;
    if (h->jobs_tail != NULL)
        h->jobs_tail->next = j;
    else
        h->jobs = j;
    h->jobs_tail = j;
    pthread_cond_signal(&h->cond);
    pthread_mutex_unlock(&h->mu);
}
