/* gpufaas tests — a real `gpufaas serve` process on a free loopback port, and
 * an HTTP client for it (libcurl, one keep-alive connection per thread). Used
 * by the HTTP tests in tests/gateway and by tests/bench/bench_http; free of
 * Check so the benchmark can use it too: functions report failure through
 * their return value and a message, and the caller asserts. */
#ifndef GF_HTTPHARNESS_H
#define GF_HTTPHARNESS_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/buf.h"

/* A `gpufaas serve` child process. Caller-owned; strings are copied in. */
typedef struct gf_hh_server {
    pid_t pid;       /* 0 when not running */
    char url[256];   /* "http://127.0.0.1:PORT" once started */
    char state[512]; /* its --state-dir */
    char log[512];   /* its stderr is appended here */
} gf_hh_server;

/* Prepare s for a server whose state is dir/var and whose log is
 * dir/serve.log (dir is borrowed only during the call). */
void gf_hh_server_init(gf_hh_server *s, const char *dir);

/* Start `exe serve --listen 127.0.0.1:0 --state-dir <state> args...` (args
 * NULL-terminated, may be NULL; a flag given twice: the later one wins) and
 * wait up to timeout_s for the line saying where it listens. 0 on success
 * (s->pid, s->url set); -1 with msg filled when it exits first, says
 * something else or is too slow (it is then killed and reaped). */
int gf_hh_server_start(gf_hh_server *s, const char *exe, const char *const *args, int timeout_s,
                       char *msg, size_t cap);

/* SIGTERM and wait up to timeout_s: its exit code, 128 + signal when a
 * signal ended it, -1 when it had to be SIGKILLed. 0 when not running. */
int gf_hh_server_stop(gf_hh_server *s, int timeout_s);

/* Print the last `tail` bytes of the server's log to stderr. */
void gf_hh_server_dump_log(const gf_hh_server *s, size_t tail);

/* ---- the client ---- */

typedef struct gf_hh_resp {
    long status; /* HTTP status; 0 when no answer */
    CURLcode rc;
    gf_buf body;   /* NUL-terminated when not empty */
    char ihcl[32]; /* Inference-Header-Content-Length */
    char ctype[128];
    char location[128];
    char retry_after[16];
    char conn[32]; /* Connection */
} gf_hh_resp;

/* `method base path` with extra headers (NULL-terminated, may be NULL) and
 * a body (NULL = none; sent as application/json; chunked = without a
 * Content-Length). Uses this thread's keep-alive connection. *r is filled
 * (gf_hh_resp_free). Returns the status, or -(CURLcode) when the transfer
 * failed. */
long gf_hh_http(const char *base, const char *method, const char *path, const char *const *headers,
                const void *body, size_t len, bool chunked, gf_hh_resp *r);

/* POST base/v1/functions as `curl -F manifest=@M -F weights=@W` does (W may be
 * NULL to leave that part out), with the bearer token when non-NULL. On a
 * connection of its own. Returns as gf_hh_http. */
long gf_hh_deploy(const char *base, const char *manifest_path, const char *weights_path,
                  const char *token, gf_hh_resp *r);

/* The same with a query string (without its '?'; NULL = none), as
 * "interface_change=allow". */
long gf_hh_deploy_query(const char *base, const char *query, const char *manifest_path,
                        const char *weights_path, const char *token, gf_hh_resp *r);

void gf_hh_resp_free(gf_hh_resp *r);

/* Close this thread's connection; call before a client thread ends. */
void gf_hh_thread_end(void);

/* True when r is a JSON error answer: Content-Type application/json and a
 * body {"error": "..."} whose message contains want. Otherwise false, with
 * why filled. */
bool gf_hh_is_json_error(const gf_hh_resp *r, const char *want, char *why, size_t cap);

#endif /* GF_HTTPHARNESS_H */
