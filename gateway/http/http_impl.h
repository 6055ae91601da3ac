/* gpufaas — the HTTP front's insides, shared by server.c (libmicrohttpd glue)
 * and routes.c (the route table and its handlers). Not for other modules.
 *
 * One request = one gf_http_req, allocated on libmicrohttpd's first callback
 * and freed in its completion callback. A handler has one signature and
 * answers through gf_http_reply (JSON) or gf_http_reply_bytes (anything
 * else), which take ownership of the body. A handler that must wait calls
 * gf_http_async_begin(r, then) before handing the work to another thread;
 * that thread calls gf_http_async_done(r) when it is finished, and `then`
 * runs on the polling thread to answer.
 */
#ifndef GF_GATEWAY_HTTP_IMPL_H
#define GF_GATEWAY_HTTP_IMPL_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <microhttpd.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/json.h"
#include "gateway/core/gateway.h"
#include "gateway/http/codec.h"
#include "gateway/http/encoding.h"
#include "gateway/http/http.h"
#include "gateway/http/upload.h"

typedef struct gf_http_req gf_http_req;
typedef struct gf_http_conns gf_http_conns; /* conns.c */
typedef struct gf_http_conn gf_http_conn;   /* one TCP connection (conns.c) */

/* The one handler signature. */
typedef void (*gf_http_fn)(gf_http_req *r);

enum gf_route_flags {
    GF_ROUTE_ADMIN = 1u << 0,  /* needs the bearer token when one is configured */
    GF_ROUTE_UPLOAD = 1u << 1, /* multipart/form-data streamed through gf_upload */
    GF_ROUTE_INFER = 1u << 2,  /* an inference: every answer is counted in /metrics and
                                  recorded in SQLite, refusals here included */
};

typedef struct gf_route {
    const char *method;  /* "GET", "POST", "DELETE" */
    const char *pattern; /* "/v2/models/{m}/versions/{v}/infer": {m} a function name,
                            {v} a version number */
    gf_http_fn fn;
    unsigned flags; /* gf_route_flags */
} gf_route;

/* The route table (routes.c), matched in order. */
extern const gf_route gf_http_routes[];
extern const size_t gf_http_nroutes;

/* A job for the admin thread: fn(r) runs there, then gf_http_async_done(r). */
typedef struct gf_http_job {
    gf_http_req *r;
    gf_http_fn fn;
    struct gf_http_job *next;
} gf_http_job;

struct gf_http {
    gf_gw *gw;          /* borrowed */
    gf_http_config cfg; /* copy; strings below */
    char *listen;
    char *token; /* NULL = no token */
    size_t token_len;
    char url[96]; /* "http://host:port" */
    uint16_t port;
    struct MHD_Daemon *d;
    atomic_bool quiesced; /* no new connections; replies say Connection: close */
    bool stopped;
    atomic_long active; /* requests between first callback and completion */
    gf_http_conns *conns; /* the guard on connections (conns.c) */
    atomic_uint_fast64_t body_bytes; /* request bodies held now (cfg.body_memory bounds it) */
    /* the admin thread */
    pthread_t admin;
    bool admin_started;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    gf_http_job *jobs, *jobs_tail; /* FIFO */
    bool admin_stop;
    gf_shm_table *shm; /* the system shared memory extension's regions */
};

struct gf_http_req {
    gf_http *srv;
    struct MHD_Connection *conn;
    gf_http_conn *sock;    /* its connection's guard state (NULL: unguarded) */
    const gf_route *route; /* NULL when nothing matched */
    char method[8];
    char name[72];   /* the {m} segment, "" when none */
    char region[GF_SHM_NAME_MAX + 1]; /* the {r} segment (a shared memory region) */
    int64_t version; /* the {v} segment; 0 = current */
    uint64_t t0_ns;  /* first callback, monotonic */
    /* the body */
    gf_buf body; /* limit = max_body */
    bool body_too_large;
    gf_http_coding body_coding;  /* Content-Encoding: inflated before the handler runs */
    gf_http_coding reply_coding; /* from Accept-Encoding: replies are deflated with it */
    bool body_over_budget; /* the server's body memory was spent: 503 */
    uint64_t body_charged; /* bytes of body_bytes this request holds until it is freed */
    bool started;      /* the handler ran */
    gf_upload *upload; /* GF_ROUTE_UPLOAD, or a load's files */
    struct gf_http_load_labels *load_labels; /* a load's label files (load_files.c) */
    struct MHD_PostProcessor *pp;
    /* the reply */
    unsigned status;
    struct MHD_Response *resp; /* set by the reply helpers, queued by server.c */
    bool queued;
    bool core_answered; /* the core counted and recorded the answer (an inference's
                           result or refusal, or a refusal the front gave that it
                           handed to gf_gw_refused) */
    /* waiting */
    pthread_mutex_t mu; /* guards the three flags below */
    bool async_pending;
    bool async_done;
    bool suspended;
    gf_http_fn then; /* runs on the polling thread once done */
    /* what async work leaves behind */
    gf_codec_request creq; /* a parsed inference request */
    gf_gw_result *result;  /* an inference's result */
    gf_gw_deployed deployed; /* a deploy's answer */
    int load_worker;       /* repository load: the worker its parameters name, -1 = any */
    bool allow_interface_change; /* a deploy's ?interface_change=allow */
    gf_residency residency; /* PUT .../residency: the settings asked for */
    bool residency_reset;  /* DELETE .../residency: back to the manifest's */
    gf_buf job_out;        /* an admin call's JSON answer (activate, fsck, residency) */
    gf_status job_status;  /* an admin call's outcome (the message in job_err) */
    gf_err job_err;
};

/* ---- conns.c: deadlines and per-client limits on connections ---- */

/* Start / stop the sweeper (before MHD_start_daemon / MHD_stop_daemon). */
gf_status gf_http_conns_start(gf_http *h, gf_err *err);
void gf_http_conns_stop(gf_http *h);
void gf_http_conns_free(gf_http *h);
/* libmicrohttpd's accept policy, connection notifier and URI log callback
 * (cls = h). */
enum MHD_Result gf_http_conn_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);
void gf_http_conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                         enum MHD_ConnectionNotificationCode toe);
void *gf_http_conn_uri_log(void *cls, const char *uri, struct MHD_Connection *conn);
/* The headers of r arrived: false when its connection is over the
 * per-client limit (answer 429 and close). */
bool gf_http_conn_begin(gf_http_req *r);
/* The body of r is still arriving past --request-timeout: a 408 was written
 * on its connection, which the caller must close (MHD_NO). */
bool gf_http_conn_cut_late(gf_http_req *r);
/* The sweeper cut r's connection while its body was arriving (and wrote a
 * 408 on it): no more of it came. */
bool gf_http_conn_cut_in_body(const gf_http_req *r);
/* The body of r is read. */
void gf_http_conn_read(gf_http_req *r);
/* The connection's reply was sent: it waits for its next request. */
void gf_http_conn_end(gf_http *h, struct MHD_Connection *conn);
unsigned gf_http_conns_per_client(const gf_http *h);
/* server.c: a request whose headers did not arrive in time (age_us after its
 * request line) was answered 408 by the sweeper: when its target (the
 * request line's, as sent) is an inference route, it is recorded as that
 * inference's answer, under the function and version it names. */
void gf_http_refused_headers(gf_http *h, const char *uri, uint64_t age_us);

/* The one budget for memory held for request bodies (--body-memory,
 * server-wide): charge n more bytes to r, released when r is freed. False
 * (nothing charged; r->body_over_budget set, answered 503 + Retry-After when
 * the body ends) beyond it. Whatever holds bytes of a request body charges
 * them here (a decompressed body too), so there is one budget. */
bool gf_http_body_charge(gf_http_req *r, size_t n);

/* Answer with status and a JSON body (owned; NULL = empty body). Exactly one
 * reply per request. */
void gf_http_reply(gf_http_req *r, unsigned status, json_t *body);

/* Answer with len bytes (malloc'd, owned; may be NULL when len is 0) of
 * content_type (static string). infer_header_len > 0 adds the binary
 * extension's Inference-Header-Content-Length header. */
void gf_http_reply_bytes(gf_http_req *r, unsigned status, const char *content_type, char *bytes,
                         size_t len, size_t infer_header_len);

/* Answer a rendered inference (200) with its body as iov's segments over
 * head (malloc'd, owned) and res's outputs (res taken over: freed, with head,
 * when libmicrohttpd lets go of the response), without copying them. */
void gf_http_reply_iov(gf_http_req *r, const char *content_type, char *head,
                       const gf_codec_iov *iov, gf_gw_result *res, size_t infer_header_len);

/* Answer JSON text (the bytes of json; json is left empty) with status. */
void gf_http_reply_json(gf_http_req *r, unsigned status, gf_buf *json);

/* Answer {"error": "<message>"} with the HTTP code the one table gives st
 * (gf_http_status_of); a GF_ERR_BUSY (429) or GF_ERR_OVERLOADED (503) answer
 * says when to retry (Retry-After). The way to answer every failure that has a gf_status. */
void gf_http_fail(gf_http_req *r, gf_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Answer {"error": "<message>"} with an HTTP code no gf_status stands for:
 * what the protocol itself needs (401 without the token, 405 for a method a
 * path does not take, 415 for a body type we do not read), and Triton's 400
 * for "not ready". Everything else goes through gf_http_fail. */
void gf_http_error(gf_http_req *r, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Add a header to the reply already made (Retry-After, Location, ...). */
void gf_http_header(gf_http_req *r, const char *name, const char *value);

/* A request header (case-insensitive name), NULL when absent. Valid until
 * the request completes. */
const char *gf_http_req_header(gf_http_req *r, const char *name);

/* A query argument of the URL ("?interface_change=allow"), NULL when absent
 * ("" when given without a value). Valid until the request completes. */
const char *gf_http_req_query(gf_http_req *r, const char *name);

/* Mark r as waiting; then(r) will run on a polling thread after
 * gf_http_async_done. Call before handing r to another thread. */
void gf_http_async_begin(gf_http_req *r, gf_http_fn then);

/* Undo gf_http_async_begin when the hand-over failed (nobody will call
 * gf_http_async_done). */
void gf_http_async_cancel(gf_http_req *r);

/* The waiting is over: from any thread, exactly once per begin. */
void gf_http_async_done(gf_http_req *r);

/* Run fn(r) on the admin thread (for blocking core calls), then
 * gf_http_async_done(r). The caller has called gf_http_async_begin. */
void gf_http_run_admin(gf_http_req *r, gf_http_fn fn);

/* reply.c's, for server.c: an inference request refused before the core
 * (r's route is an inference and the core has not answered) is counted and
 * recorded like every other, once: st, the HTTP status and msg. */
void gf_http_req_refused(gf_http_req *r, gf_status st, unsigned status, const char *msg);

/* The admin thread's loop (arg: the gf_http): runs the queued jobs in order
 * until admin_stop and the queue is empty. */
void *gf_http_admin_main(void *arg);

/* routes.c: an optional small JSON object body (repository, logging and
 * shared-memory calls), read with the tree's one grammar. Answers 4xx and
 * returns false when it is bad; *doc is NULL for an empty body, else the
 * caller frees it and *root is the object. */
bool gf_http_small_json_body(gf_http_req *r, gf_json_doc **doc, const gf_json **root);
/* The same with a limit of limit bytes (a load that brings files). */
bool gf_http_json_body(gf_http_req *r, uint64_t limit, gf_json_doc **doc, const gf_json **root);

/* load_files.c: whether a load's parameters bring a config or files, and
 * the load that deploys a new version from them (answers, or starts the
 * admin job that will). */
bool gf_http_load_has_files(const gf_json *params);
void gf_http_load_files(gf_http_req *r, const gf_json *params);
void gf_http_load_labels_free(struct gf_http_load_labels *l);

/* shm_routes.c: Triton's system shared memory extension (and CUDA shared
 * memory's refusal). */
void gf_http_shm_status(gf_http_req *r);
void gf_http_shm_register(gf_http_req *r);
void gf_http_shm_unregister(gf_http_req *r);
void gf_http_cuda_shm(gf_http_req *r);

/* logging.c: Triton's logging extension, GET and POST /v2/logging. */
void gf_http_logging_get(gf_http_req *r);
void gf_http_logging_set(gf_http_req *r);

#endif /* GF_GATEWAY_HTTP_IMPL_H */
