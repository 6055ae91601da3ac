/* gpufaas — the HTTP front (gateway/http): libmicrohttpd in front of the
 * gateway core (gateway/core/gateway.h).
 *
 * Serves /v1 (the FaaS API), /v2 (the KServe Open Inference Protocol as
 * Triton serves it) and /metrics; docs/api.md lists every endpoint. Requests
 * are read by a small pool of polling threads (epoll). A request waiting on
 * the core (an inference) or on a blocking admin call (deploy, delete, load,
 * unload; run by one admin thread) has its connection suspended, and resumed
 * when the answer is there: no thread is held per waiting request.
 *
 * Lifecycle: gf_http_start → (serving) → gf_http_quiesce (stop accepting) →
 * gf_gw_shutdown (the core drains; every waiting request is answered) →
 * gf_http_stop (wait for responses in flight, then stop) → gf_http_free.
 */
#ifndef GF_GATEWAY_HTTP_H
#define GF_GATEWAY_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "gateway/core/gateway.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The defaults of gf_http_config, the one place they are written: a zero (or
 * NULL) field means its default, and gpufaas serve shows these in --help. */
#define GF_HTTP_DEFAULT_LISTEN "127.0.0.1:8080"
#define GF_HTTP_DEFAULT_MAX_BODY (64ull << 20)   /* bytes of an inference or JSON body */
#define GF_HTTP_DEFAULT_MAX_UPLOAD (16ull << 30) /* bytes of a deployed weights file */
#define GF_HTTP_DEFAULT_THREADS 2
#define GF_HTTP_DEFAULT_CONN_TIMEOUT_S 60
#define GF_HTTP_DEFAULT_MAX_CONNS 1024
#define GF_HTTP_DEFAULT_MAX_CONNS_PER_CLIENT 256 /* a quarter: one client cannot take all */
#define GF_HTTP_DEFAULT_REQUEST_TIMEOUT_S 30     /* headers, and then the body, must arrive */
#define GF_HTTP_DEFAULT_BODY_MEMORY (1ull << 30)  /* bytes of request bodies held at once */

typedef struct gf_http_config {
    const char *listen;      /* "host:port", "[v6addr]:port", ":port" (all addresses);
                                port 0 = any free port (see gf_http_port); NULL = default */
    uint64_t max_body;       /* request body limit, bytes (0 = GF_HTTP_DEFAULT_MAX_BODY) */
    uint64_t max_upload;     /* weights upload limit, bytes (0 = GF_HTTP_DEFAULT_MAX_UPLOAD) */
    const char *admin_token; /* NULL or "" = admin calls need no token */
    unsigned threads;        /* polling threads (0 = default) */
    unsigned conn_timeout_s; /* idle connection timeout (0 = default) */
    unsigned max_conns;      /* open connections at most (0 = default) */
    unsigned max_conns_per_client; /* open connections per client address (0 = default);
                                      beyond: 429 and closed */
    uint64_t body_memory;    /* request bodies held at once, server-wide, bytes; beyond: 503
                                + Retry-After (0 = default) */
    unsigned request_timeout_s; /* a request's headers, then its body, must each arrive
                                   within this from their start, however they trickle:
                                   408 and closed (0 = default) */
} gf_http_config;

typedef struct gf_http gf_http;

/* The HTTP status code for a result code: the one table (status.c) through
 * which every answer that reports a gf_status goes (GF_ERR_INVALID 400,
 * GF_ERR_NOT_FOUND 404, GF_ERR_BUSY 429, GF_ERR_CLOSED 503, ...). The
 * gateway core gets it as gf_gw_config.protocol_code, to label its records. */
int gf_http_status_of(gf_status st);
/* Seconds a client should wait before retrying an answer of status st (its
 * Retry-After header), 0 when it is not worth retrying as it is. */
unsigned gf_http_retry_after_s(gf_status st);

/* Bind cfg->listen and start serving gw (borrowed: it must outlive the
 * server). cfg and its strings are copied. *out is the caller's
 * (gf_http_free). GF_ERR_INVALID for a bad address, GF_ERR_IO when it cannot
 * be bound. */
gf_status gf_http_start(gf_gw *gw, const gf_http_config *cfg, gf_http **out, gf_err *err);

/* The port actually bound (useful with port 0). */
uint16_t gf_http_port(const gf_http *h);

/* "http://127.0.0.1:8080", for messages. Lives as long as h. */
const char *gf_http_url(const gf_http *h);

/* Stop accepting new connections; open ones are still served. Idempotent. */
void gf_http_quiesce(gf_http *h);

/* Finish queued admin calls, wait up to wait_ms for requests in flight to be
 * answered, then stop the polling threads and close every connection.
 * Idempotent. Call after gf_gw_shutdown, so nothing waits on the core. */
void gf_http_stop(gf_http *h, unsigned wait_ms);

/* Stop if needed and free. NULL is a no-op. */
void gf_http_free(gf_http *h);

#ifdef __cplusplus
}
#endif

#endif /* GF_GATEWAY_HTTP_H */
