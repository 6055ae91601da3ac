/* gpufaas serve — run the gateway: workers, the HTTP APIs, /metrics.
 *
 * Every flag can also be set as an environment variable (GPUFAAS_<FLAG>, the
 * flag's name upper-cased with '-' as '_'); a flag on the command line wins.
 * SIGTERM or SIGINT: stop accepting, drain the core (in-flight requests
 * finish up to --drain-timeout), stop the HTTP server, exit 0. The signal
 * handler only sets a flag; the main thread does the rest.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <strings.h>
#include <time.h>

#include "core/log.h"
#include "core/units.h"
#include "gateway/cli/cli.h"
#include "gateway/core/gateway.h"
#include "gateway/http/http.h"

/* The flags, in the order --help lists them. */
enum {
    F_LISTEN,
    F_STATE_DIR,
    F_DEVICES,
    F_DEVICE_MEMORY,
    F_HOST_MEMORY,
    F_PAGE_SIZE,
    F_PIN_LIMIT,
    F_ADMIN_TOKEN,
    F_ALLOW_NATIVE,
    F_PLUGINS,
    F_MAX_BODY,
    F_MAX_UPLOAD,
    F_BODY_MEMORY,
    F_QUEUE_LIMIT,
    F_QUEUE_LIMIT_TOTAL,
    F_INFER_TIMEOUT,
    F_HEARTBEAT_TIMEOUT,
    F_POLICY,
    F_REPLICATE,
    F_SCHEDULE,
    F_SWAP_ORDER,
    F_DRAIN_TIMEOUT,
    F_HTTP_THREADS,
    F_MAX_CONNS,
    F_MAX_CONNS_PER_CLIENT,
    F_CONN_TIMEOUT,
    F_REQUEST_TIMEOUT,
    F_WORKER,
    F_SHARED_STORE,
    F_SHARED_SCAN,
    F_CPU_COPY_BANDWIDTH,
    F_LOG_LEVEL,
    F_COUNT_
};

/* A flag's default, shown in --help and used when the flag is not given:
 * the text, or a number from the gateway core's and the HTTP front's
 * defaults (gateway.h, http.h), the one place those are written. */
typedef enum { D_NONE, D_TEXT, D_SIZE, D_UINT } dflt_kind;

static const struct {
    const char *name; /* without "--" */
    const char *env;
    const char *arg;  /* NULL: a switch (no value) */
    dflt_kind dk;
    const char *dtext; /* D_TEXT */
    uint64_t dnum;     /* D_SIZE (bytes), D_UINT */
    const char *help;
} gf_serve_flags[F_COUNT_] = {
    [F_LISTEN] = {"listen", "GPUFAAS_LISTEN", "ADDR:PORT", D_TEXT, GF_HTTP_DEFAULT_LISTEN, 0,
                  "address to serve HTTP on (port 0: any free port)"},
    [F_STATE_DIR] = {"state-dir", "GPUFAAS_STATE_DIR", "DIR", D_TEXT, GF_GW_DEFAULT_STATE_DIR, 0,
                     "SQLite database and function store"},
    [F_DEVICES] = {"devices", "GPUFAAS_DEVICES", "SPEC", D_TEXT, GF_GW_DEFAULT_DEVICES, 0,
                   "auto | cpu:N | cuda:0,cuda:1 (one worker each)"},
    [F_DEVICE_MEMORY] = {"device-memory", "GPUFAAS_DEVICE_MEMORY", "SIZE", D_NONE, NULL, 0,
                         "device tier budget per worker (K/M/G, powers of 1024)"},
    [F_HOST_MEMORY] = {"host-memory", "GPUFAAS_HOST_MEMORY", "SIZE", D_NONE, NULL, 0,
                       "host tier budget per worker"},
    [F_PAGE_SIZE] = {"page-size", "GPUFAAS_PAGE_SIZE", "SIZE", D_NONE, NULL, 0,
                     "device page size, the unit of the device and host tiers (workers: 2M)"},
    [F_PIN_LIMIT] = {"pin-limit", "GPUFAAS_PIN_LIMIT", "SIZE", D_NONE, NULL, 0,
                     "device bytes pinned and kept-warm functions may hold per worker "
                     "(default: half the device budget)"},
    [F_ADMIN_TOKEN] = {"admin-token", "GPUFAAS_ADMIN_TOKEN", "TOKEN", D_NONE, NULL, 0,
                       "bearer token for deploy/delete/load/unload (prefer the variable)"},
    [F_ALLOW_NATIVE] = {"allow-native-functions", "GPUFAAS_ALLOW_NATIVE_FUNCTIONS", NULL, D_NONE,
                        NULL, 0, "allow plugin (shared object) function kinds"},
    [F_PLUGINS] = {"plugins", "GPUFAAS_PLUGINS", "SO[,SO...]", D_NONE, NULL, 0,
                   "plugin kinds to load (needs --allow-native-functions; POST /v1/plugins adds "
                   "more)"},
    [F_MAX_BODY] = {"max-body", "GPUFAAS_MAX_BODY", "SIZE", D_SIZE, NULL,
                    GF_HTTP_DEFAULT_MAX_BODY, "request body limit"},
    [F_MAX_UPLOAD] = {"max-upload", "GPUFAAS_MAX_UPLOAD", "SIZE", D_SIZE, NULL,
                      GF_HTTP_DEFAULT_MAX_UPLOAD, "weights file limit for a deploy"},
    [F_BODY_MEMORY] = {"body-memory", "GPUFAAS_BODY_MEMORY", "SIZE", D_SIZE, NULL,
                       GF_HTTP_DEFAULT_BODY_MEMORY,
                       "request bodies held at once, server-wide (503 beyond)"},
    [F_QUEUE_LIMIT] = {"queue-limit", "GPUFAAS_QUEUE_LIMIT", "N", D_UINT, NULL,
                       GF_GW_DEFAULT_QUEUE_LIMIT,
                       "requests held per function: queued, in flight or being sent (429 "
                       "beyond)"},
    [F_QUEUE_LIMIT_TOTAL] = {"queue-limit-total", "GPUFAAS_QUEUE_LIMIT_TOTAL", "N", D_UINT, NULL,
                             GF_GW_DEFAULT_QUEUE_LIMIT_TOTAL,
                             "requests held over every function (429 beyond)"},
    [F_INFER_TIMEOUT] = {"infer-timeout", "GPUFAAS_INFER_TIMEOUT", "MS", D_UINT, NULL,
                         GF_GW_DEFAULT_INFER_TIMEOUT_MS,
                         "a request's deadline unless it gives parameters.timeout (504; 0: none)"},
    [F_HEARTBEAT_TIMEOUT] = {"heartbeat-timeout", "GPUFAAS_HEARTBEAT_TIMEOUT", "MS", D_UINT, NULL,
                             GF_GW_DEFAULT_HEARTBEAT_TIMEOUT_MS,
                             "a worker silent this long is killed and restarted"},
    [F_POLICY] = {"policy", "GPUFAAS_POLICY", "lru|gds|gdsf", D_TEXT, "lru", 0,
                  "device-tier eviction: LRU, GreedyDual-Size or GreedyDual-Size-Frequency"},
    [F_REPLICATE] = {"replicate", "GPUFAAS_REPLICATE", "auto|on|off", D_TEXT, "auto", 0,
                     "prefetch a second replica of a function whose queue wait passes half its "
                     "SLO (auto: off when cpu workers are as many as the cores)"},
    [F_SCHEDULE] = {"schedule", "GPUFAAS_SCHEDULE", "deadline|ready-first|fifo", D_TEXT,
                    "deadline", 0,
                    "a worker's order: a request whose model is on the device may run while "
                    "the one ahead waits for its swap-in (ready-first), and of those that can "
                    "run the one due soonest first (deadline), or strictly arrival order"},
    [F_SWAP_ORDER] = {"swap-order", "GPUFAAS_SWAP_ORDER", "deadline|arrival", D_TEXT, "deadline",
                      0, "the order a worker's swap-ins share its link in: the one due soonest "
                      "(its request's arrival + SLO) first, a slice at a time, or as they began"},
    [F_DRAIN_TIMEOUT] = {"drain-timeout", "GPUFAAS_DRAIN_TIMEOUT", "SECONDS", D_UINT, NULL,
                         GF_GW_DEFAULT_DRAIN_TIMEOUT_MS / 1000,
                         "on SIGTERM, how long in-flight requests may finish"},
    [F_HTTP_THREADS] = {"http-threads", "GPUFAAS_HTTP_THREADS", "N", D_UINT, NULL,
                        GF_HTTP_DEFAULT_THREADS, "HTTP polling threads"},
    [F_MAX_CONNS] = {"max-conns", "GPUFAAS_MAX_CONNS", "N", D_UINT, NULL,
                     GF_HTTP_DEFAULT_MAX_CONNS, "open HTTP connections at most"},
    [F_MAX_CONNS_PER_CLIENT] = {"max-conns-per-client", "GPUFAAS_MAX_CONNS_PER_CLIENT", "N",
                                D_UINT, NULL, GF_HTTP_DEFAULT_MAX_CONNS_PER_CLIENT,
                                "open connections per client address (429 beyond)"},
    [F_CONN_TIMEOUT] = {"conn-timeout", "GPUFAAS_CONN_TIMEOUT", "SECONDS", D_UINT, NULL,
                        GF_HTTP_DEFAULT_CONN_TIMEOUT_S, "an idle connection is closed after"},
    [F_REQUEST_TIMEOUT] = {"request-timeout", "GPUFAAS_REQUEST_TIMEOUT", "SECONDS", D_UINT, NULL,
                           GF_HTTP_DEFAULT_REQUEST_TIMEOUT_S,
                           "a request's headers, then its body, must arrive within (408)"},
    [F_WORKER] = {"worker", "GPUFAAS_WORKER", "PATH", D_NONE, NULL, 0,
                  "the gpufaas-worker program (default: found next to gpufaas)"},
    [F_SHARED_STORE] = {"shared-store", "GPUFAAS_SHARED_STORE", "DIR", D_NONE, NULL, 0,
                        "a directory every node mounts (docs/cluster.md)"},
    [F_SHARED_SCAN] = {"shared-store-scan", "GPUFAAS_SHARED_STORE_SCAN", "MS", D_UINT, NULL,
                       GF_GW_DEFAULT_SHARED_SCAN_MS,
                       "how often to read the shared store for changes"},
    [F_CPU_COPY_BANDWIDTH] = {"cpu-copy-bandwidth", "GPUFAAS_CPU_COPY_BANDWIDTH", "SIZE", D_NONE,
                              NULL, 0,
                              "benchmarks: cpu workers copy to their device at SIZE bytes/s, "
                              "emulating a GPU's link"},
    [F_LOG_LEVEL] = {"log-level", "GPUFAAS_LOG_LEVEL", "LEVEL", D_TEXT, "info", 0,
                     "error | warn | info | debug | trace"},
};

/* The default of flag f as text (into buf), or NULL when it has none. */
static const char *flag_default(int f, char *buf, size_t cap)
{
    switch (gf_serve_flags[f].dk) {
    case D_TEXT: return gf_serve_flags[f].dtext;
    case D_SIZE: return gf_size_format_exact(gf_serve_flags[f].dnum, buf, cap);
    case D_UINT:
        snprintf(buf, cap, "%llu", (unsigned long long)gf_serve_flags[f].dnum);
        return buf;
    case D_NONE: break;
    }
    return NULL;
}

#define GF_SERVE_MAX_PLUGINS 16

static volatile sig_atomic_t gf_serve_signal;

static void gf_serve_on_signal(int sig)
{
    gf_serve_signal = sig;
}

static void serve_usage(FILE *out)
{
    fprintf(out, "usage: gpufaas serve [options]\n\n"
                 "Start the gateway: spawn the workers, serve the /v1 FaaS API, the KServe v2\n"
                 "inference protocol and /metrics over HTTP. Each option can also be set with\n"
                 "the environment variable shown; the command line wins.\n\noptions:\n");
    for (int i = 0; i < F_COUNT_; i++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", gf_serve_flags[i].name,
                 gf_serve_flags[i].arg != NULL ? " " : "",
                 gf_serve_flags[i].arg != NULL ? gf_serve_flags[i].arg : "");
        fprintf(out, "  %-34s %s", left, gf_serve_flags[i].help);
        char buf[32];
        const char *d = flag_default(i, buf, sizeof buf);
        if (d != NULL)
            fprintf(out, " [%s]", d);
        fprintf(out, "\n  %-34s   $%s\n", "", gf_serve_flags[i].env);
    }
    fprintf(out, "\nSIGTERM or SIGINT drains in-flight requests, stops the workers and exits 0.\n");
}

static int serve_bad(const char *flag, const char *msg)
{
    fprintf(stderr, "gpufaas serve: --%s: %s\n", flag, msg);
    return 2;
}

static bool parse_bool(const char *s, bool *out)
{
    if (strcasecmp(s, "1") == 0 || strcasecmp(s, "true") == 0 || strcasecmp(s, "yes") == 0 ||
        strcasecmp(s, "on") == 0)
        *out = true;
    else if (strcasecmp(s, "0") == 0 || strcasecmp(s, "false") == 0 || strcasecmp(s, "no") == 0 ||
             strcasecmp(s, "off") == 0 || s[0] == '\0')
        *out = false;
    else
        return false;
    return true;
}

static bool parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    uint64_t v;
    gf_err e;
    /* digits only: a plain number is a size without a suffix */
    if (s[strspn(s, "0123456789")] != '\0' || gf_size_parse(s, &v, &e) != GF_OK || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

int gf_cmd_serve(int argc, char **argv)
{
    if (gf_cli_wants_help(argc, argv)) {
        serve_usage(stdout);
        return 0;
    }
    const char *val[F_COUNT_] = {0};
    for (int i = 0; i < F_COUNT_; i++) {
        const char *e = getenv(gf_serve_flags[i].env);
        if (e != NULL)
            val[i] = e;
    }
    for (int a = 1; a < argc; a++) {
        const char *s = argv[a];
        if (strncmp(s, "--", 2) != 0) {
            fprintf(stderr, "gpufaas serve: unexpected argument '%s'\n", s);
            return 2;
        }
        s += 2;
        const char *eq = strchr(s, '=');
        size_t n = eq != NULL ? (size_t)(eq - s) : strlen(s);
        int f = -1;
        for (int i = 0; i < F_COUNT_; i++)
            if (strlen(gf_serve_flags[i].name) == n && strncmp(gf_serve_flags[i].name, s, n) == 0)
                f = i;
        if (f < 0) {
            fprintf(stderr, "gpufaas serve: unknown option '%s'\n\n", argv[a]);
            serve_usage(stderr);
            return 2;
        }
        if (gf_serve_flags[f].arg == NULL) {
            if (eq != NULL)
                val[f] = eq + 1;
            else
                val[f] = "1";
        } else if (eq != NULL) {
            val[f] = eq + 1;
        } else if (a + 1 < argc) {
            val[f] = argv[++a];
        } else {
            return serve_bad(gf_serve_flags[f].name, "needs a value");
        }
    }
    char dbuf[F_COUNT_][32];
    for (int i = 0; i < F_COUNT_; i++)
        if (val[i] == NULL)
            val[i] = flag_default(i, dbuf[i], sizeof dbuf[i]);

    gf_gw_config gc;
    memset(&gc, 0, sizeof gc);
    gf_http_config hc;
    memset(&hc, 0, sizeof hc);
    gf_err err;
    uint64_t u;
    gf_log_level level = GF_LOG_DEFAULT;
    if (getenv("GPUFAAS_LOG_LEVEL") != NULL ||
        val[F_LOG_LEVEL] != gf_serve_flags[F_LOG_LEVEL].dtext) {
        if (gf_log_level_parse(val[F_LOG_LEVEL], &level) != 0)
            return serve_bad("log-level", "expected error, warn, info, debug or trace");
    }
    hc.listen = val[F_LISTEN];
    gc.state_dir = val[F_STATE_DIR];
    if (gc.state_dir[0] == '\0')
        return serve_bad("state-dir", "must not be empty");
    gc.devices = val[F_DEVICES];
    if (val[F_DEVICE_MEMORY] != NULL) {
        if (gf_size_parse(val[F_DEVICE_MEMORY], &gc.device_memory, &err) != GF_OK)
            return serve_bad("device-memory", gf_err_msg(&err));
    }
    if (val[F_HOST_MEMORY] != NULL) {
        if (gf_size_parse(val[F_HOST_MEMORY], &gc.host_memory, &err) != GF_OK)
            return serve_bad("host-memory", gf_err_msg(&err));
    }
    if (val[F_PAGE_SIZE] != NULL) {
        if (gf_size_parse(val[F_PAGE_SIZE], &gc.page_size, &err) != GF_OK)
            return serve_bad("page-size", gf_err_msg(&err));
        if (gc.page_size < 4096 || gc.page_size > ((uint64_t)1 << 30))
            return serve_bad("page-size", "between 4K and 1G");
    }
    if (val[F_PIN_LIMIT] != NULL &&
        gf_size_parse(val[F_PIN_LIMIT], &gc.pin_limit, &err) != GF_OK)
        return serve_bad("pin-limit", gf_err_msg(&err));
    bool replicate = true;
    gc.replicate_auto = strcmp(val[F_REPLICATE], "auto") == 0;
    if (!gc.replicate_auto && !parse_bool(val[F_REPLICATE], &replicate))
        return serve_bad("replicate", "expected auto, on or off");
    gc.no_replicate = !replicate;
    if (strcmp(val[F_SCHEDULE], "fifo") != 0 && strcmp(val[F_SCHEDULE], "ready-first") != 0 &&
        strcmp(val[F_SCHEDULE], "deadline") != 0)
        return serve_bad("schedule", "expected deadline, ready-first or fifo");
    gc.schedule = val[F_SCHEDULE];
    if (strcmp(val[F_SWAP_ORDER], "deadline") != 0 && strcmp(val[F_SWAP_ORDER], "arrival") != 0)
        return serve_bad("swap-order", "expected deadline or arrival");
    gc.swap_order_arrival = strcmp(val[F_SWAP_ORDER], "arrival") == 0;
    if (val[F_CPU_COPY_BANDWIDTH] != NULL &&
        gf_size_parse(val[F_CPU_COPY_BANDWIDTH], &gc.cpu_copy_bandwidth, &err) != GF_OK)
        return serve_bad("cpu-copy-bandwidth", gf_err_msg(&err));
    /* the token stays in this process: workers and one-shot children
     * inherit the environment, and a plugin could read it there (unsetenv
     * drops the entry, not the string val[] points to) */
    unsetenv(gf_serve_flags[F_ADMIN_TOKEN].env);
    hc.admin_token = val[F_ADMIN_TOKEN];
    if (val[F_ALLOW_NATIVE] != NULL && !parse_bool(val[F_ALLOW_NATIVE], &gc.allow_native))
        return serve_bad("allow-native-functions", "expected 1/0, true/false, yes/no");
    char plugin_buf[4096];
    const char *plugins[GF_SERVE_MAX_PLUGINS];
    if (val[F_PLUGINS] != NULL && val[F_PLUGINS][0] != '\0') {
        if (!gc.allow_native)
            return serve_bad("plugins", "needs --allow-native-functions");
        if (strlen(val[F_PLUGINS]) >= sizeof plugin_buf)
            return serve_bad("plugins", "too long");
        snprintf(plugin_buf, sizeof plugin_buf, "%s", val[F_PLUGINS]);
        char *save = NULL;
        for (char *p = strtok_r(plugin_buf, ",", &save); p != NULL; p = strtok_r(NULL, ",", &save)) {
            if (gc.n_plugins == GF_SERVE_MAX_PLUGINS)
                return serve_bad("plugins", "at most 16");
            plugins[gc.n_plugins++] = p;
        }
        gc.plugins = plugins;
    }
    if (gf_size_parse(val[F_MAX_BODY], &hc.max_body, &err) != GF_OK || hc.max_body < 1024)
        return serve_bad("max-body", err.code != GF_OK ? gf_err_msg(&err) : "at least 1K");
    gf_err_clear(&err);
    if (gf_size_parse(val[F_MAX_UPLOAD], &hc.max_upload, &err) != GF_OK || hc.max_upload < 1024)
        return serve_bad("max-upload", err.code != GF_OK ? gf_err_msg(&err) : "at least 1K");
    gf_err_clear(&err);
    if (gf_size_parse(val[F_BODY_MEMORY], &hc.body_memory, &err) != GF_OK ||
        hc.body_memory < 64 * 1024)
        return serve_bad("body-memory", err.code != GF_OK ? gf_err_msg(&err) : "at least 64K");
    if (!parse_uint(val[F_QUEUE_LIMIT], 1, 1u << 24, &u))
        return serve_bad("queue-limit", "expected an integer in [1, 16777216]");
    gc.queue_limit = (size_t)u;
    if (!parse_uint(val[F_QUEUE_LIMIT_TOTAL], 1, 1u << 24, &u))
        return serve_bad("queue-limit-total", "expected an integer in [1, 16777216]");
    gc.queue_limit_total = (size_t)u;
    if (!parse_uint(val[F_INFER_TIMEOUT], 0, 24u * 3600 * 1000, &u))
        return serve_bad("infer-timeout", "expected milliseconds in [0, 86400000]");
    gc.infer_timeout_ms = u == 0 ? UINT32_MAX : (uint32_t)u;
    if (!parse_uint(val[F_HEARTBEAT_TIMEOUT], 500, 3600u * 1000, &u))
        return serve_bad("heartbeat-timeout", "expected milliseconds in [500, 3600000]");
    gc.heartbeat_timeout_ms = (uint32_t)u;
    if (gf_evict_policy_parse(val[F_POLICY], &gc.policy, NULL) != GF_OK)
        return serve_bad("policy", "expected lru, gds or gdsf");
    if (!parse_uint(val[F_DRAIN_TIMEOUT], 0, 3600, &u))
        return serve_bad("drain-timeout", "expected seconds in [0, 3600]");
    gc.drain_timeout_ms = u == 0 ? 1 : (uint32_t)(u * 1000);
    if (!parse_uint(val[F_HTTP_THREADS], 1, 64, &u))
        return serve_bad("http-threads", "expected an integer in [1, 64]");
    hc.threads = (unsigned)u;
    if (!parse_uint(val[F_MAX_CONNS], 4, 1u << 20, &u))
        return serve_bad("max-conns", "expected an integer in [4, 1048576]");
    hc.max_conns = (unsigned)u;
    if (!parse_uint(val[F_MAX_CONNS_PER_CLIENT], 1, 1u << 20, &u))
        return serve_bad("max-conns-per-client", "expected an integer in [1, 1048576]");
    hc.max_conns_per_client = (unsigned)u;
    if (!parse_uint(val[F_CONN_TIMEOUT], 1, 3600, &u))
        return serve_bad("conn-timeout", "expected seconds in [1, 3600]");
    hc.conn_timeout_s = (unsigned)u;
    if (!parse_uint(val[F_REQUEST_TIMEOUT], 1, 3600, &u))
        return serve_bad("request-timeout", "expected seconds in [1, 3600]");
    hc.request_timeout_s = (unsigned)u;
    gc.worker_path = val[F_WORKER];
    if (val[F_SHARED_STORE] != NULL && val[F_SHARED_STORE][0] != '\0')
        gc.shared_store = val[F_SHARED_STORE];
    if (!parse_uint(val[F_SHARED_SCAN], 50, 3600 * 1000, &u))
        return serve_bad("shared-store-scan", "expected milliseconds in [50, 3600000]");
    gc.shared_scan_ms = (uint32_t)u;
    gc.protocol_code = gf_http_status_of; /* what the core records: the HTTP front's codes */

    gf_log_init("gateway", level);
    umask(077); /* the state (database, weights, uploads) is this user's alone */

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = gf_serve_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    gf_gw *gw = NULL;
    gf_err_clear(&err);
    GF_LOG_I("starting: state %s, devices %s, policy %s", gc.state_dir, gc.devices,
             gf_evict_policy_name(gc.policy));
    if (gf_gw_new(&gc, &gw, &err) != GF_OK) {
        fprintf(stderr, "gpufaas serve: %s\n", gf_err_msg(&err));
        return 1;
    }
    gf_http *h = NULL;
    if (gf_http_start(gw, &hc, &h, &err) != GF_OK) {
        fprintf(stderr, "gpufaas serve: %s\n", gf_err_msg(&err));
        gf_gw_free(gw);
        return 1;
    }
    GF_LOG_I("listening on %s%s", gf_http_url(h),
             hc.admin_token != NULL && hc.admin_token[0] != '\0' ? " (admin token required)" : "");
    printf("gpufaas: serving on %s\n", gf_http_url(h));
    fflush(stdout);

    while (gf_serve_signal == 0) {
        struct timespec ts = {0, 100 * 1000 * 1000}; /* a signal cuts it short */
        nanosleep(&ts, NULL);
    }
    int sig = gf_serve_signal;
    GF_LOG_I("%s: no longer accepting connections, draining", sig == SIGINT ? "SIGINT" : "SIGTERM");
    gf_http_quiesce(h);
    gf_gw_shutdown(gw);
    gf_http_stop(h, 5000);
    gf_http_free(h);
    gf_gw_free(gw);
    GF_LOG_I("stopped");
    return 0;
}
