/* gpufaas — the command line's HTTP client (gateway/cli). */
#include "gateway/cli/client.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/tensor.h"
#include "core/units.h"
#include "functions/manifest.h"
#include "gf_config.h"

#define CONNECT_TIMEOUT_MS 5000L

void gf_cli_resp_init(gf_cli_resp *r)
{
    memset(r, 0, sizeof *r);
    gf_buf_init(&r->body);
}

void gf_cli_resp_deinit(gf_cli_resp *r)
{
    gf_buf_deinit(&r->body);
    r->status = 0;
    r->ihcl[0] = r->ctype[0] = '\0';
}

/* Store url into c->server: "host:port" gets "http://", trailing '/' go.
 * False when it is empty, too long or not http(s). */
static bool set_server(gf_cli_client *c, const char *url)
{
    const char *scheme = strstr(url, "://") != NULL ? "" : "http://";
    int n = snprintf(c->server, sizeof c->server, "%s%s", scheme, url);
    if (n <= 0 || (size_t)n >= sizeof c->server)
        return false;
    size_t len = (size_t)n;
    while (len > 0 && c->server[len - 1] == '/')
        c->server[--len] = '\0';
    if (strncasecmp(c->server, "http://", 7) != 0 && strncasecmp(c->server, "https://", 8) != 0)
        return false;
    const char *host = strstr(c->server, "://") + 3;
    return host[0] != '\0';
}

void gf_cli_client_init(gf_cli_client *c, const char *cmd)
{
    memset(c, 0, sizeof *c);
    c->cmd = cmd;
    const char *env = getenv("GPUFAAS_SERVER");
    if (env == NULL || env[0] == '\0' || !set_server(c, env))
        set_server(c, GF_CLI_DEFAULT_SERVER);
    env = getenv("GPUFAAS_TOKEN");
    c->token = env != NULL && env[0] != '\0' ? env : NULL;
}

void gf_cli_client_deinit(gf_cli_client *c)
{
    if (c->easy != NULL)
        curl_easy_cleanup(c->easy);
    c->easy = NULL;
}

void gf_cli_errorf(const gf_cli_client *c, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *m = msg; *m != '\0'; m++) /* a server's message must not drive the terminal */
        if ((unsigned char)*m < 0x20 || *m == 0x7f)
            *m = ' ';
    if (c->err_sink != NULL) {
        size_t n = strnlen(msg, GF_CLI_SINK_MAX - 1);
        memcpy(c->err_sink, msg, n);
        c->err_sink[n] = '\0';
    } else {
        fprintf(stderr, "gpufaas %s: %s\n", c->cmd, msg);
    }
}

/* The value of option `name` (without "--") at argv[*i], written either as
 * "--name value" or "--name=value"; NULL when argv[*i] is another option.
 * *missing is set when the value is absent. */
static const char *opt_value(int argc, char **argv, int *i, const char *name, bool *missing)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, "--", 2) != 0 || strncmp(a + 2, name, n) != 0)
        return NULL;
    if (a[2 + n] == '=')
        return a + 3 + n;
    if (a[2 + n] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

int gf_cli_client_opt(gf_cli_client *c, int argc, char **argv, int *i)
{
    bool missing = false;
    const char *v;
    if (strcmp(argv[*i], "--json") == 0) {
        c->json = true;
        return 1;
    }
    if ((v = opt_value(argc, argv, i, "server", &missing)) != NULL) {
        if (!set_server(c, v)) {
            gf_cli_errorf(c, "--server: '%s' is not an http:// or https:// URL", v);
            return -1;
        }
        return 1;
    }
    if (!missing && (v = opt_value(argc, argv, i, "token", &missing)) != NULL) {
        c->token = v[0] != '\0' ? v : NULL;
        return 1;
    }
    if (missing) {
        gf_cli_errorf(c, "%s needs a value", argv[*i]);
        return -1;
    }
    return 0;
}

int gf_cli_parse_simple(gf_cli_client *c, int argc, char **argv, void (*usage)(FILE *),
                        const char **pos, int max_pos, int *n_pos)
{
    *n_pos = 0;
    for (int i = 1; i < argc; i++) {
        int r = gf_cli_client_opt(c, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        if (argv[i][0] == '-' && argv[i][1] != '\0') {
            gf_cli_errorf(c, "unknown option '%s'", argv[i]);
            usage(stderr);
            return 2;
        }
        if (*n_pos == max_pos) {
            gf_cli_errorf(c, "unexpected argument '%s'", argv[i]);
            usage(stderr);
            return 2;
        }
        pos[(*n_pos)++] = argv[i];
    }
    return 0;
}

int gf_cli_take(const gf_cli_client *c, int argc, char **argv, int *i, const char *name,
                const char **val)
{
    bool missing = false;
    *val = opt_value(argc, argv, i, name, &missing);
    if (missing) {
        gf_cli_errorf(c, "--%s needs a value", name);
        return -1;
    }
    return *val != NULL ? 1 : 0;
}

bool gf_cli_name_ok(const gf_cli_client *c, const char *name)
{
    if (gf_function_name_valid(name))
        return true;
    gf_cli_errorf(c,
                  "'%s' is not a valid function name (lower-case letters, digits, '_', '.' "
                  "and '-', at most 63, starting with a letter or digit)",
                  name);
    return false;
}

void gf_cli_common_usage(FILE *out)
{
    fprintf(out,
            "common options:\n"
            "  --server URL     the gpufaas server [$GPUFAAS_SERVER, else %s]\n"
            "  --token TOKEN    bearer token for admin calls [$GPUFAAS_TOKEN]\n"
            "  --json           print machine-readable JSON on stdout\n"
            "  -h, --help       this text\n",
            GF_CLI_DEFAULT_SERVER);
}

/* ---- transfers ---------------------------------------------------------------------- */

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    gf_cli_resp *r = arg;
    size_t len;
    if (!gf_size_mul(size, n, &len))
        return 0;
    return gf_buf_append(&r->body, p, len) == GF_OK ? len : 0;
}

/* Copy the value of header `name` from line (len bytes) into dst. */
static void header_value(const char *line, size_t len, const char *name, char *dst, size_t cap)
{
    size_t k = strlen(name);
    if (len <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return;
    const char *v = line + k + 1;
    size_t vl = len - k - 1;
    while (vl > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        vl--;
    }
    while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
        vl--;
    if (vl >= cap)
        vl = cap - 1;
    memcpy(dst, v, vl);
    dst[vl] = '\0';
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    gf_cli_resp *r = arg;
    size_t len = size * n; /* libcurl: size is always 1 */
    if (len > 5 && strncmp(p, "HTTP/", 5) == 0) {
        /* a new response (after a 100 Continue): forget the previous headers */
        r->ihcl[0] = r->ctype[0] = '\0';
    }
    header_value(p, len, "Inference-Header-Content-Length", r->ihcl, sizeof r->ihcl);
    header_value(p, len, "Content-Type", r->ctype, sizeof r->ctype);
    return len;
}

CURL *gf_cli_prepare(gf_cli_client *c, const char *method, const char *path, gf_cli_resp *r)
{
    if (c->easy == NULL) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
            (c->easy = curl_easy_init()) == NULL) {
            gf_cli_errorf(c, "cannot initialise libcurl");
            return NULL;
        }
    } else {
        curl_easy_reset(c->easy); /* keeps the connection cache */
    }
    char url[2048];
    if (snprintf(url, sizeof url, "%s%s", c->server, path) >= (int)sizeof url) {
        gf_cli_errorf(c, "URL too long: %s%s", c->server, path);
        return NULL;
    }
    CURL *e = c->easy;
    c->errbuf[0] = '\0';
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "gpufaas-cli/" GF_VERSION);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    if (strcmp(method, "GET") == 0)
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    else if (strcmp(method, "POST") != 0)
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    return e;
}

int gf_cli_perform(gf_cli_client *c, struct curl_slist *headers, gf_cli_resp *r)
{
    struct curl_slist *h = NULL, *all = NULL;
    char auth[1100];
    if (c->token != NULL) {
        for (const char *t = c->token; *t != '\0'; t++)
            if ((unsigned char)*t < 0x20 || *t == 0x7f) {
                gf_cli_errorf(c, "the token contains control characters");
                return 1;
            }
        if (snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->token) >= (int)sizeof auth) {
            gf_cli_errorf(c, "the token is too long");
            return 1;
        }
        if ((h = curl_slist_append(NULL, auth)) == NULL) {
            gf_cli_errorf(c, "out of memory");
            return 1;
        }
        all = h;
    }
    /* extra headers after ours; restore the caller's list afterwards */
    struct curl_slist *tail = h;
    if (tail != NULL)
        tail->next = headers;
    else
        all = headers;
    if (all != NULL)
        curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, all);
    gf_buf_reset(&r->body);
    r->status = 0;
    r->ihcl[0] = r->ctype[0] = '\0';
    CURLcode rc = curl_easy_perform(c->easy);
    curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, NULL);
    if (tail != NULL) {
        tail->next = NULL;
        curl_slist_free_all(h);
    }
    curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &r->status);
    if (rc == CURLE_OK)
        return 0;
    if ((rc == CURLE_SEND_ERROR || rc == CURLE_RECV_ERROR) && r->status >= 400 && r->body.len > 0)
        return 0; /* the server answered early (a refused upload) and closed: show its answer */
    const char *detail = c->errbuf[0] != '\0' ? c->errbuf : curl_easy_strerror(rc);
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
        gf_cli_errorf(c,
                      "cannot reach the server at %s: connection refused (is 'gpufaas serve' "
                      "running there? set --server or GPUFAAS_SERVER)",
                      c->server);
        break;
    case CURLE_COULDNT_RESOLVE_HOST:
        gf_cli_errorf(c, "cannot reach the server at %s: unknown host", c->server);
        break;
    case CURLE_OPERATION_TIMEDOUT:
        gf_cli_errorf(c, "the server at %s did not answer in time", c->server);
        break;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
        gf_cli_errorf(c, "bad server URL '%s'", c->server);
        break;
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
        gf_cli_errorf(c, "the server at %s closed the connection (%s)", c->server, detail);
        break;
    case CURLE_READ_ERROR:
        gf_cli_errorf(c, "reading the upload failed (%s)", detail);
        break;
    case CURLE_ABORTED_BY_CALLBACK:
        gf_cli_errorf(c, "interrupted");
        break;
    case CURLE_WRITE_ERROR:
    case CURLE_OUT_OF_MEMORY:
        gf_cli_errorf(c, "out of memory receiving the answer from %s", c->server);
        break;
    default:
        gf_cli_errorf(c, "request to %s failed: %s", c->server, detail);
        break;
    }
    return 1;
}

void gf_cli_report_http(const gf_cli_client *c, const gf_cli_resp *r)
{
    const char *msg = NULL;
    json_t *j = NULL;
    if (r->body.len > 0) {
        j = json_loadb(r->body.data, r->body.len, 0, NULL);
        msg = json_string_value(json_object_get(j, "error"));
    }
    if (msg != NULL) {
        gf_cli_errorf(c, "%s", msg);
    } else if (r->body.len > 0) {
        /* not our JSON (a proxy?): the start of the body, on one line */
        char text[201];
        size_t n = r->body.len < 200 ? r->body.len : 200;
        for (size_t i = 0; i < n; i++) {
            unsigned char ch = (unsigned char)r->body.data[i];
            text[i] = ch < 0x20 || ch == 0x7f ? ' ' : (char)ch;
        }
        text[n] = '\0';
        gf_cli_errorf(c, "the server answered HTTP %ld: %s", r->status, text);
    } else {
        gf_cli_errorf(c, "the server answered HTTP %ld", r->status);
    }
    if (r->status == 401 && c->err_sink == NULL)
        fprintf(stderr, "hint: pass the server's admin token with --token or GPUFAAS_TOKEN\n");
    json_decref(j);
}

int gf_cli_call(gf_cli_client *c, const char *method, const char *path, const char *ctype,
                const void *body, size_t len, gf_cli_resp *r)
{
    CURL *e = gf_cli_prepare(c, method, path, r);
    if (e == NULL)
        return 1;
    struct curl_slist *h = NULL;
    char ct[160];
    if (body != NULL || strcmp(method, "POST") == 0) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body != NULL ? body : "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body != NULL ? len : 0));
        snprintf(ct, sizeof ct, "Content-Type: %s", ctype != NULL ? ctype : "application/json");
        if ((h = curl_slist_append(NULL, ct)) == NULL) {
            gf_cli_errorf(c, "out of memory");
            return 1;
        }
        if (strcmp(method, "POST") != 0)
            curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    }
    int rc = gf_cli_perform(c, h, r);
    curl_slist_free_all(h);
    return rc != 0 ? 1 : gf_cli_resp_ok(c, r);
}

int gf_cli_resp_ok(const gf_cli_client *c, const gf_cli_resp *r)
{
    if (r->status >= 200 && r->status <= 299)
        return 0;
    gf_cli_report_http(c, r);
    return 1;
}

json_t *gf_cli_resp_json(const gf_cli_client *c, const gf_cli_resp *r, const char *method,
                         const char *path)
{
    json_error_t je;
    json_t *j = json_loadb(r->body.data != NULL ? r->body.data : "", r->body.len, 0, &je);
    if (j == NULL)
        gf_cli_errorf(c, "the server's answer to %s %s is not JSON: %s", method, path, je.text);
    return j;
}

json_t *gf_cli_call_json(gf_cli_client *c, const char *method, const char *path, const char *ctype,
                         const void *body, size_t len)
{
    gf_cli_resp r;
    gf_cli_resp_init(&r);
    json_t *j = NULL;
    if (gf_cli_call(c, method, path, ctype, body, len, &r) == 0)
        j = gf_cli_resp_json(c, &r, method, path);
    gf_cli_resp_deinit(&r);
    return j;
}

json_t *gf_cli_get_json(gf_cli_client *c, const char *path)
{
    return gf_cli_call_json(c, "GET", path, NULL, NULL, 0);
}

int gf_cli_print_json(const gf_cli_client *c, const json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    if (s == NULL) {
        gf_cli_errorf(c, "cannot encode the JSON output (out of memory?)");
        return 1;
    }
    printf("%s\n", s);
    free(s);
    return 0;
}

/* ---- formatting ----------------------------------------------------------------------- */

bool gf_cli_appendf(char *buf, size_t cap, size_t *off, const char *fmt, ...)
{
    va_list ap, aq;
    va_start(ap, fmt);
    va_copy(aq, ap);
    int n = *off < cap ? vsnprintf(NULL, 0, fmt, ap) : -1;
    bool fits = n >= 0 && (size_t)n < cap - *off;
    if (fits)
        vsnprintf(buf + *off, cap - *off, fmt, aq);
    va_end(aq);
    va_end(ap);
    if (fits)
        *off += (size_t)n;
    return fits;
}

char *gf_cli_fmt_size(uint64_t bytes, char *buf, size_t cap)
{
    return gf_size_format(bytes, buf, cap);
}

char *gf_cli_fmt_seconds(double s, char *buf, size_t cap)
{
    if (!(s >= 0))
        snprintf(buf, cap, "-");
    else if (s < 1e-3)
        snprintf(buf, cap, "%.0f us", s * 1e6);
    else if (s < 1)
        snprintf(buf, cap, "%.1f ms", s * 1e3);
    else
        snprintf(buf, cap, "%.2f s", s);
    return buf;
}

long long gf_cli_json_int(const json_t *obj, const char *key, long long dflt)
{
    json_t *v = json_object_get(obj, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}

const char *gf_cli_json_str(const json_t *obj, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s != NULL ? s : dflt;
}

char *gf_cli_fmt_shape(const json_t *shape, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    if (cap < 3)
        return buf;
    off += (size_t)snprintf(buf, cap, "[");
    for (size_t i = 0; i < json_array_size(shape) && off < cap; i++) {
        json_t *d = json_array_get(shape, i);
        off += (size_t)snprintf(buf + off, cap - off, "%s%lld", i > 0 ? ", " : "",
                                json_is_integer(d) ? (long long)json_integer_value(d) : 0LL);
    }
    if (off < cap)
        snprintf(buf + off, cap - off, "]");
    return buf;
}

void gf_cli_table_init(gf_cli_table *t, size_t ncols)
{
    memset(t, 0, sizeof *t);
    t->ncols = ncols;
}

void gf_cli_table_row(gf_cli_table *t, ...)
{
    if (t->failed)
        return;
    if (t->nrows == t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 16, bytes;
        char **nc = NULL;
        if (gf_size_mul(ncap, t->ncols * sizeof *nc, &bytes))
            nc = realloc(t->cells, bytes);
        if (nc == NULL) {
            t->failed = true;
            return;
        }
        t->cells = nc;
        t->cap = ncap;
    }
    va_list ap;
    va_start(ap, t);
    char **row = t->cells + t->nrows * t->ncols;
    for (size_t k = 0; k < t->ncols; k++) {
        const char *s = va_arg(ap, const char *);
        row[k] = strdup(s != NULL ? s : "");
        if (row[k] == NULL)
            t->failed = true;
    }
    va_end(ap);
    t->nrows++;
}

int gf_cli_table_print(const gf_cli_table *t, const gf_cli_client *c, FILE *out)
{
    if (t->failed) {
        gf_cli_errorf(c, "out of memory");
        return 1;
    }
    size_t width[16] = {0};
    assert(t->ncols <= 16);
    for (size_t r = 0; r < t->nrows; r++)
        for (size_t k = 0; k < t->ncols; k++) {
            size_t l = strlen(t->cells[r * t->ncols + k]);
            if (l > width[k])
                width[k] = l;
        }
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t k = 0; k < t->ncols; k++) {
            const char *s = t->cells[r * t->ncols + k];
            if (k + 1 < t->ncols)
                fprintf(out, "%-*s  ", (int)width[k], s);
            else
                fprintf(out, "%s\n", s);
        }
    }
    return 0;
}

void gf_cli_table_deinit(gf_cli_table *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof *t);
}

bool gf_cli_parse_int(const char *s, long long lo, long long hi, long long *out)
{
    if (s == NULL || s[0] < '0' || s[0] > '9')
        return false;
    long long v = 0;
    for (const char *p = s; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return false;
        if (v > (hi - (*p - '0')) / 10)
            return false; /* beyond hi (and no overflow) */
        v = v * 10 + (*p - '0');
    }
    if (v < lo || v > hi)
        return false;
    *out = v;
    return true;
}
