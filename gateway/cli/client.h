/* gpufaas — the command line's HTTP client (gateway/cli).
 *
 * Every subcommand that talks to a server (deploy, invoke, ls, rm, ps, load,
 * unload, top) goes through one gf_cli_client: it holds the server URL and
 * the token (from --server / --token, else GPUFAAS_SERVER / GPUFAAS_TOKEN),
 * the --json switch, and one libcurl easy handle reused across requests (so
 * they share a keep-alive connection). The CLI never touches the database or
 * the state directory: everything it knows comes from the HTTP API.
 *
 * Failures are reported here, once, on stderr, as "gpufaas CMD: message":
 * a server that cannot be reached gets a sentence naming its URL (never
 * libcurl's raw code); an HTTP error gets the server's own message. Callers
 * then return exit status 1.
 *
 * Not thread-safe: one client per thread.
 */
#ifndef GF_GATEWAY_CLI_CLIENT_H
#define GF_GATEWAY_CLI_CLIENT_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/buf.h"

#define GF_CLI_DEFAULT_SERVER "http://127.0.0.1:8080"
#define GF_CLI_SINK_MAX 512

typedef struct gf_cli_client {
    const char *cmd;              /* subcommand name, for messages; static */
    char server[1024];            /* base URL, no trailing '/' */
    const char *token;            /* borrowed (argv or environ); NULL = none */
    bool json;                    /* --json: machine-readable output */
    long timeout_ms;              /* whole-request limit; 0 = none (inference may be slow) */
    CURL *easy;                   /* created on first use, reused */
    char *err_sink;               /* when set (GF_CLI_SINK_MAX bytes): messages are kept
                                     there instead of printed (top's screen owns stderr) */
    char errbuf[CURL_ERROR_SIZE]; /* libcurl's detail of the last transfer */
} gf_cli_client;

/* A response: status and body (the body always NUL-terminated). */
typedef struct gf_cli_resp {
    long status;    /* HTTP status; 0 when nothing was received */
    gf_buf body;    /* owned */
    char ihcl[24];  /* Inference-Header-Content-Length, "" when absent */
    char ctype[96]; /* Content-Type, "" when absent */
} gf_cli_resp;

void gf_cli_resp_init(gf_cli_resp *r);
void gf_cli_resp_deinit(gf_cli_resp *r);

/* Defaults: server from GPUFAAS_SERVER (else GF_CLI_DEFAULT_SERVER), token
 * from GPUFAAS_TOKEN. cmd is static ("deploy"). */
void gf_cli_client_init(gf_cli_client *c, const char *cmd);
/* Free the libcurl handle. The client may be initialised again afterwards. */
void gf_cli_client_deinit(gf_cli_client *c);

/* Parse the common options at argv[*i]: --server URL, --token TOKEN, --json
 * (also as --opt=value). Returns 1 when it consumed them (advancing *i past
 * a value), 0 when argv[*i] is not a common option, -1 on a bad value (the
 * message is printed; exit 2). */
int gf_cli_client_opt(gf_cli_client *c, int argc, char **argv, int *i);

/* The arguments of a command that takes only the common options and
 * positionals: at most max_pos of them go into pos[] (borrowed from argv),
 * their count into *n_pos. Returns 0, or 2 after reporting a usage error
 * (an unknown option, a bad value, too many arguments) and printing
 * usage(stderr). */
int gf_cli_parse_simple(gf_cli_client *c, int argc, char **argv, void (*usage)(FILE *),
                        const char **pos, int max_pos, int *n_pos);

/* A subcommand's own option with a value, at argv[*i]: "--name VALUE" or
 * "--name=VALUE". Returns 1 and sets *val (borrowed from argv), 0 when
 * argv[*i] is not --name, -1 when the value is missing (reported). */
int gf_cli_take(const gf_cli_client *c, int argc, char **argv, int *i, const char *name,
                const char **val);

/* True when name is a valid function name; otherwise reports it. */
bool gf_cli_name_ok(const gf_cli_client *c, const char *name);

/* The common options' lines for a subcommand's --help. */
void gf_cli_common_usage(FILE *out);

/* "gpufaas CMD: " + message + "\n" on stderr (or the message into
 * c->err_sink when set). */
void gf_cli_errorf(const gf_cli_client *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Reset the easy handle for METHOD on server + path (path starts with '/'),
 * with the token, the body sink into r, and the time limits. Returns the
 * handle, still owned by the client, for the caller to add options to
 * (a body, a progress callback); NULL on failure (reported). */
CURL *gf_cli_prepare(gf_cli_client *c, const char *method, const char *path, gf_cli_resp *r);

/* Run the prepared transfer with the extra headers (may be NULL; borrowed).
 * Returns 0 when an HTTP answer arrived (whatever its status: r->status),
 * 1 when the server could not be reached or the transfer failed (reported,
 * naming the server). */
int gf_cli_perform(gf_cli_client *c, struct curl_slist *headers, gf_cli_resp *r);

/* Report a non-2xx answer with the server's message ({"error": ...}), plus
 * a hint for 401. */
void gf_cli_report_http(const gf_cli_client *c, const gf_cli_resp *r);

/* 0 when r holds a 2xx answer; otherwise reports it (gf_cli_report_http)
 * and returns 1. */
int gf_cli_resp_ok(const gf_cli_client *c, const gf_cli_resp *r);

/* r's body as JSON: a new reference, or NULL after reporting "the server's
 * answer to METHOD PATH is not JSON". */
json_t *gf_cli_resp_json(const gf_cli_client *c, const gf_cli_resp *r, const char *method,
                         const char *path);

/* One call: method, path, an optional body (len bytes of content type
 * ctype; body NULL = none). Returns 0 on a 2xx answer; otherwise reports it
 * and returns 1. r receives the answer either way. */
int gf_cli_call(gf_cli_client *c, const char *method, const char *path, const char *ctype,
                const void *body, size_t len, gf_cli_resp *r);

/* gf_cli_call and parse the 2xx body as JSON. Returns a new reference, or
 * NULL after reporting the failure (transport, HTTP status or bad JSON). */
json_t *gf_cli_call_json(gf_cli_client *c, const char *method, const char *path, const char *ctype,
                         const void *body, size_t len);

/* GET path as JSON (gf_cli_call_json). */
json_t *gf_cli_get_json(gf_cli_client *c, const char *path);

/* Print j on stdout as one line of JSON (--json output). Returns 0, or 1
 * when it cannot be encoded (reported). */
int gf_cli_print_json(const gf_cli_client *c, const json_t *j);

/* Append printf-formatted text to buf (cap bytes, NUL-terminated; *off is
 * its length) when the whole of it fits: advances *off and returns true;
 * returns false, leaving buf and *off as they were, when it does not. For
 * the one-line lists of a table cell ("w0:device w1:host"). */
bool gf_cli_appendf(char *buf, size_t cap, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Human formats: "1.5 MiB" (gf_size_format) and "12.3 ms" / "850 us" /
 * "2.10 s". Return buf. */
char *gf_cli_fmt_size(uint64_t bytes, char *buf, size_t cap);
char *gf_cli_fmt_seconds(double s, char *buf, size_t cap);

/* Integer member of a JSON object, or dflt when absent or not an integer. */
long long gf_cli_json_int(const json_t *obj, const char *key, long long dflt);
/* String member, or dflt. */
const char *gf_cli_json_str(const json_t *obj, const char *key, const char *dflt);

/* "[-1, 64]" for a JSON array of integers. Returns buf. */
char *gf_cli_fmt_shape(const json_t *shape, char *buf, size_t cap);

/* A text table printed with aligned columns (two spaces between). */
typedef struct gf_cli_table {
    size_t ncols;
    size_t nrows, cap;
    char **cells; /* nrows * ncols, owned */
    bool failed;  /* an allocation failed: print says so */
} gf_cli_table;

void gf_cli_table_init(gf_cli_table *t, size_t ncols);
/* Append a row of ncols strings (copied). */
void gf_cli_table_row(gf_cli_table *t, ...);
/* Print to out; the last column is not padded. Returns 0, or 1 after an
 * allocation failure (reported as cmd's error). */
int gf_cli_table_print(const gf_cli_table *t, const gf_cli_client *c, FILE *out);
void gf_cli_table_deinit(gf_cli_table *t);

/* Parse a non-negative decimal integer in [lo, hi] (no sign, no suffix). */
bool gf_cli_parse_int(const char *s, long long lo, long long hi, long long *out);

#endif /* GF_GATEWAY_CLI_CLIENT_H */
