/* gpufaas top — a live view of a server, refreshed every second.
 *
 * Each refresh reads GET /v1/workers, /v1/placements, /v1/functions and
 * /metrics, and draws: per worker a memory bar per tier (device, host) with
 * the models resident in it; per function the requests per second, errors
 * per second, p99 latency and cold starts per second over the last interval
 * (differences between two scrapes of the counters and histogram buckets);
 * swap traffic per worker; and the recent swaps (models that arrived in or
 * left a tier between two refreshes).
 *
 * The terminal: the alternate screen, no cursor, no echo, keys read one at a
 * time (q, Q, Ctrl-C or Ctrl-D quit). It is restored on every way out: q,
 * SIGINT, SIGTERM and SIGHUP (their handlers only write to a self-pipe; the
 * loop restores the terminal and exits 128 + signal). Without a terminal
 * top says so and exits 1; --once prints one plain snapshot instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/buf.h"
#include "gateway/cli/cli.h"
#include "gateway/cli/client.h"
#include "gateway/cli/flags.h"
#include "gateway/cli/prom.h"

#define MAX_EVENTS 8   /* recent swaps kept */
#define MAX_BUCKETS 32 /* histogram buckets read per function */
#define FETCH_TIMEOUT_MS 2000L

enum { T_INTERVAL, T_ONCE, T_COUNT_ };

static void top_usage(FILE *out);

static const gf_cli_flag top_flags[T_COUNT_] = {
    [T_INTERVAL] = {"interval", 0, "SECONDS", 0, "time between refreshes [1]"},
    [T_ONCE] = {"once", 0, NULL, 0,
                "print one snapshot (two scrapes, one interval apart)\nas plain text (or, with "
                "--json, as JSON), without a\nterminal"},
};

static const gf_cli_cmd top_cmd = {"top", top_flags, T_COUNT_, top_usage};

static void top_usage(FILE *out)
{
    fprintf(out, "usage: gpufaas top [options]\n\n"
                 "A live view of the server, refreshed every second: each worker's device and\n"
                 "host memory as bars holding the resident models, requests/s, errors/s, p99\n"
                 "latency and cold starts/s per function, swap traffic, and the recent swaps.\n"
                 "Keys: q quits. Needs a terminal.\n\n"
                 "options:\n");
    gf_cli_flags_usage(out, &top_cmd);
    fputc('\n', out);
    gf_cli_common_usage(out);
}

/* ---- one scrape ------------------------------------------------------------------------- */

typedef struct snapshot {
    bool ok;
    double t; /* monotonic seconds */
    json_t *workers, *placements, *functions;
    gf_prom metrics;
} snapshot;

static void snapshot_clear(snapshot *s)
{
    json_decref(s->workers);
    json_decref(s->placements);
    json_decref(s->functions);
    gf_prom_free(&s->metrics);
    memset(s, 0, sizeof *s);
}

/* Fill *s; on failure s->ok is false and c->err_sink (or stderr) says why. */
static void fetch(gf_cli_client *c, snapshot *s)
{
    memset(s, 0, sizeof *s);
    s->t = gf_mono_s();
    s->workers = gf_cli_get_json(c, "/v1/workers");
    s->placements = s->workers != NULL ? gf_cli_get_json(c, "/v1/placements") : NULL;
    s->functions = s->placements != NULL ? gf_cli_get_json(c, "/v1/functions") : NULL;
    if (s->functions == NULL)
        return;
    gf_cli_resp r;
    gf_cli_resp_init(&r);
    if (gf_cli_call(c, "GET", "/metrics", NULL, NULL, 0, &r) == 0) {
        gf_err err;
        if (gf_prom_parse(r.body.data != NULL ? r.body.data : "", r.body.len, &s->metrics, &err) ==
            GF_OK)
            s->ok = true;
        else
            gf_cli_errorf(c, "cannot read /metrics: %s", gf_err_msg(&err));
    }
    gf_cli_resp_deinit(&r);
}

/* ---- derived figures --------------------------------------------------------------------- */

/* The value in p of the sample with s's name and labels; NAN when absent. */
static double same_series(const gf_prom *p, const gf_prom_sample *s)
{
    for (size_t i = 0; i < p->n; i++) {
        const gf_prom_sample *o = &p->v[i];
        if (strcmp(o->name, s->name) != 0 || o->n_labels != s->n_labels)
            continue;
        bool eq = true;
        for (int k = 0; k < s->n_labels && eq; k++) {
            const char *v = gf_prom_label(o, s->key[k]);
            eq = v != NULL && strcmp(v, s->val[k]) == 0;
        }
        if (eq)
            return o->value;
    }
    return NAN;
}

/* Increase of a counter sample since prev (a restarted server's counter
 * starts again from 0: then its whole value). */
static double increase(const gf_prom *prev, const gf_prom_sample *s)
{
    double before = same_series(prev, s);
    if (isnan(before) || s->value < before)
        return s->value;
    return s->value - before;
}

/* Sum of the increases of the samples called name that match (label pairs,
 * NULL-ended) and, when err_only, have a "code" label outside 2xx. */
static double sum_increase(const snapshot *cur, const snapshot *prev, const char *name,
                           gf_prom_match match, bool err_only)
{
    double sum = 0;
    for (size_t i = 0; i < cur->metrics.n; i++) {
        const gf_prom_sample *s = &cur->metrics.v[i];
        if (strcmp(s->name, name) != 0)
            continue;
        bool ok = true;
        for (size_t k = 0; match != NULL && match[k] != NULL && ok; k += 2) {
            const char *v = gf_prom_label(s, match[k]);
            ok = v != NULL && strcmp(v, match[k + 1]) == 0;
        }
        if (!ok)
            continue;
        const char *code = gf_prom_label(s, "code");
        if (err_only && (code == NULL || code[0] == '2'))
            continue;
        sum += increase(&prev->metrics, s);
    }
    return sum;
}

/* p99 of a function version's request latency over the interval (match:
 * its function and version labels), NAN without requests. */
static double p99_of(const snapshot *cur, const snapshot *prev, gf_prom_match match)
{
    double le[MAX_BUCKETS], now[MAX_BUCKETS], le0[MAX_BUCKETS], before[MAX_BUCKETS];
    const char *base = "gpufaas_request_duration_seconds";
    size_t n = gf_prom_buckets(&cur->metrics, base, match, le, now, MAX_BUCKETS);
    size_t n0 = gf_prom_buckets(&prev->metrics, base, match, le0, before, MAX_BUCKETS);
    for (size_t i = 0; i < n; i++) {
        double b = 0;
        for (size_t k = 0; k < n0; k++)
            if (le0[k] == le[i])
                b = before[k];
        now[i] = now[i] >= b ? now[i] - b : now[i];
    }
    return gf_prom_quantile(0.99, le, now, n);
}

/* ---- recent swaps ------------------------------------------------------------------------ */

typedef struct top_state {
    gf_cli_client *c;
    snapshot cur, prev;
    char events[MAX_EVENTS][160]; /* newest first */
    int n_events;
    char err[GF_CLI_SINK_MAX]; /* the last failure, "" when the last refresh worked */
    double interval;
} top_state;

static void add_event(top_state *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add_event(top_state *s, const char *fmt, ...)
{
    memmove(s->events[1], s->events[0], sizeof s->events[0] * (MAX_EVENTS - 1));
    char when[16];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(when, sizeof when, "%H:%M:%S", &tm);
    int n = snprintf(s->events[0], sizeof s->events[0], "%s  ", when);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof s->events[0])
        vsnprintf(s->events[0] + n, sizeof s->events[0] - (size_t)n, fmt, ap);
    va_end(ap);
    if (s->n_events < MAX_EVENTS)
        s->n_events++;
}

/* The highest tier of function:version on worker in a /v1/workers answer
 * (the server lists a version's copies together, the device one first), or
 * NULL. */
static const char *tier_in(const json_t *workers, long long wid, const char *fn, long long ver)
{
    const json_t *ws = json_object_get(workers, "workers");
    for (size_t i = 0; i < json_array_size(ws); i++) {
        const json_t *w = json_array_get(ws, i);
        if (gf_cli_json_int(w, "id", -1) != wid)
            continue;
        const json_t *ms = json_object_get(w, "models");
        for (size_t k = 0; k < json_array_size(ms); k++) {
            const json_t *m = json_array_get(ms, k);
            if (strcmp(gf_cli_json_str(m, "function", ""), fn) == 0 &&
                gf_cli_json_int(m, "version", -1) == ver)
                return gf_cli_json_str(m, "tier", "?");
        }
    }
    return NULL;
}

/* Record what moved between prev and cur: arrivals, tier changes, departures. */
static void diff_residency(top_state *s)
{
    if (s->prev.workers == NULL || s->cur.workers == NULL)
        return;
    for (int pass = 0; pass < 2; pass++) {
        const json_t *a = pass == 0 ? s->cur.workers : s->prev.workers;
        const json_t *b = pass == 0 ? s->prev.workers : s->cur.workers;
        const json_t *ws = json_object_get(a, "workers");
        for (size_t i = 0; i < json_array_size(ws); i++) {
            const json_t *w = json_array_get(ws, i);
            long long wid = gf_cli_json_int(w, "id", -1);
            const json_t *ms = json_object_get(w, "models");
            for (size_t k = 0; k < json_array_size(ms); k++) {
                const json_t *m = json_array_get(ms, k), *pm = k ? json_array_get(ms, k - 1) : NULL;
                const char *fn = gf_cli_json_str(m, "function", "?");
                long long ver = gf_cli_json_int(m, "version", 0);
                if (pm != NULL && strcmp(gf_cli_json_str(pm, "function", ""), fn) == 0 &&
                    gf_cli_json_int(pm, "version", -1) == ver)
                    continue; /* another copy of the same version: its highest tier counts */
                const char *tier = gf_cli_json_str(m, "tier", "?");
                const char *other = tier_in(b, wid, fn, ver);
                if (pass == 0 && other == NULL)
                    add_event(s, "%s:%lld -> w%lld %s", fn, ver, wid, tier);
                else if (pass == 0 && strcmp(other, tier) != 0)
                    add_event(s, "%s:%lld w%lld %s -> %s", fn, ver, wid, other, tier);
                else if (pass == 1 && other == NULL)
                    add_event(s, "%s:%lld evicted from w%lld %s", fn, ver, wid, tier);
            }
        }
    }
}

/* ---- drawing ---------------------------------------------------------------------------- */

typedef struct screen {
    gf_buf lines; /* '\n'-separated */
    bool failed;
} screen;

static void put(screen *sc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(screen *sc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (gf_buf_vprintf(&sc->lines, fmt, ap) != GF_OK || gf_buf_append(&sc->lines, "\n", 1) != GF_OK)
        sc->failed = true;
    va_end(ap);
}

/* A bar of width cells for one tier: each resident model a segment of its
 * size (its "function:version" label, then '='), memory in use that no model
 * accounts for as '#', free memory as '.'. */
static void draw_bar(char *dst, int width, uint64_t budget, uint64_t used, const json_t *pls,
                     long long wid, const char *tier)
{
    int pos = 0;
    uint64_t in_models = 0;
    for (size_t i = 0; i < json_array_size(pls) && pos < width; i++) {
        const json_t *p = json_array_get(pls, i);
        if (gf_cli_json_int(p, "worker", -1) != wid ||
            strcmp(gf_cli_json_str(p, "tier", ""), tier) != 0)
            continue;
        uint64_t bytes = (uint64_t)gf_cli_json_int(p, "bytes", 0);
        in_models += bytes;
        double share = budget > 0 ? (double)bytes * width / (double)budget : 0;
        int cells = share >= width ? width : (int)llround(share);
        if (cells < 1)
            cells = 1;
        if (cells > width - pos)
            cells = width - pos;
        char label[96];
        snprintf(label, sizeof label, "%s:%lld", gf_cli_json_str(p, "function", "?"),
                 gf_cli_json_int(p, "version", 0));
        size_t ll = strlen(label);
        for (int k = 0; k < cells; k++)
            dst[pos + k] = k == cells - 1 && cells > 1 ? '|' : (size_t)k < ll ? label[k] : '=';
        pos += cells;
    }
    if (used > in_models && budget > 0) {
        double share = (double)(used - in_models) * width / (double)budget;
        int cells = share >= width ? width : (int)llround(share);
        for (int k = 0; k < cells && pos < width; k++)
            dst[pos++] = '#';
    }
    while (pos < width)
        dst[pos++] = '.';
    dst[width] = '\0';
}

/* "a:1 b:2", the models on worker wid's tier, into buf ("" when none). */
static void tier_models(const json_t *pls, long long wid, const char *tier, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < json_array_size(pls) && off + 1 < cap; i++) {
        const json_t *p = json_array_get(pls, i);
        if (gf_cli_json_int(p, "worker", -1) != wid ||
            strcmp(gf_cli_json_str(p, "tier", ""), tier) != 0)
            continue;
        int n = snprintf(buf + off, cap - off, "%s%s:%lld", off > 0 ? " " : "",
                         gf_cli_json_str(p, "function", "?"), gf_cli_json_int(p, "version", 0));
        if (n < 0 || (size_t)n >= cap - off) {
            buf[off] = '\0';
            break;
        }
        off += (size_t)n;
    }
}

static void draw_workers(top_state *s, screen *sc, int cols)
{
    const json_t *ws = json_object_get(s->cur.workers, "workers");
    double dt = s->prev.ok ? s->cur.t - s->prev.t : 0;
    int width = cols - 40;
    width = width < 10 ? 10 : width > 80 ? 80 : width;
    for (size_t i = 0; i < json_array_size(ws); i++) {
        const json_t *w = json_array_get(ws, i);
        long long wid = gf_cli_json_int(w, "id", -1);
        put(sc, "worker %lld  %s  %s  pid %lld  in flight %lld  restarts %lld", wid,
            gf_cli_json_str(w, "device", "?"), gf_cli_json_str(w, "state", "?"),
            gf_cli_json_int(w, "pid", 0), gf_cli_json_int(w, "in_flight", 0),
            gf_cli_json_int(w, "restarts", 0));
        static const char *const tiers[2] = {"device", "host"};
        for (int t = 0; t < 2; t++) {
            const json_t *m = json_object_get(w, t == 0 ? "device_memory" : "host_memory");
            uint64_t used = (uint64_t)gf_cli_json_int(m, "used", 0);
            uint64_t budget = (uint64_t)gf_cli_json_int(m, "budget", 0);
            char bar[128], u[32], b[32], models[512];
            const json_t *pls = json_object_get(s->cur.placements, "placements");
            draw_bar(bar, width, budget, used, pls, wid, tiers[t]);
            tier_models(pls, wid, tiers[t], models, sizeof models);
            put(sc, "  %-6s [%s] %s / %s  %s", tiers[t], bar, gf_cli_fmt_size(used, u, sizeof u),
                gf_cli_fmt_size(budget, b, sizeof b), models);
        }
        if (dt <= 0)
            continue;
        /* swap traffic and evictions over the interval */
        char traffic[256] = "";
        size_t off = 0;
        char wname[24];
        snprintf(wname, sizeof wname, "%lld", wid);
        for (size_t k = 0; k < s->cur.metrics.n && off + 64 < sizeof traffic; k++) {
            const gf_prom_sample *m = &s->cur.metrics.v[k];
            const char *mw = gf_prom_label(m, "worker");
            if (strcmp(m->name, "gpufaas_swap_bytes_total") != 0 || mw == NULL ||
                strcmp(mw, wname) != 0)
                continue;
            double rate = increase(&s->prev.metrics, m) / dt;
            if (rate <= 0)
                continue;
            char r[32];
            off += (size_t)snprintf(traffic + off, sizeof traffic - off, "  %s->%s %s/s",
                                    gf_prom_label(m, "from") ? gf_prom_label(m, "from") : "?",
                                    gf_prom_label(m, "to") ? gf_prom_label(m, "to") : "?",
                                    gf_cli_fmt_size((uint64_t)rate, r, sizeof r));
        }
        const char *const bw[] = {"worker", wname, NULL};
        double ev = sum_increase(&s->cur, &s->prev, "gpufaas_evictions_total", bw, false) / dt;
        if (off > 0 || ev > 0)
            put(sc, "  swaps %s%s%.1f evictions/s", traffic, off > 0 ? "  " : " ", ev);
    }
}

/* A function's figures over the last interval. */
typedef struct fn_rates {
    bool have;             /* two scrapes: the rates mean something */
    double req, err, cold; /* per second */
    double p99;            /* seconds; NaN without requests */
} fn_rates;

/* The rates of version ver (as its label: "3") of function name: every
 * per-function series carries the version, so each version's traffic is
 * its own. */
static fn_rates rates_of(const top_state *s, const char *name, const char *ver)
{
    fn_rates r = {false, 0, 0, 0, NAN};
    double dt = s->prev.ok ? s->cur.t - s->prev.t : 0;
    if (dt <= 0)
        return r;
    const char *rq = "gpufaas_requests_total", *cs = "gpufaas_cold_starts_total";
    const char *const m[] = {"function", name, "version", ver, NULL};
    r.have = true;
    r.req = sum_increase(&s->cur, &s->prev, rq, m, false) / dt;
    r.err = sum_increase(&s->cur, &s->prev, rq, m, true) / dt;
    r.cold = sum_increase(&s->cur, &s->prev, cs, m, false) / dt;
    r.p99 = p99_of(&s->cur, &s->prev, m);
    return r;
}

/* "w0:device w0:host", where version ver of function name has copies, from
 * GET /v1/placements, into buf ("" when none). */
static void placed_of(const top_state *s, const char *name, long long ver, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    const json_t *pls = json_object_get(s->cur.placements, "placements");
    for (size_t k = 0; k < json_array_size(pls) && off + 32 < cap; k++) {
        const json_t *p = json_array_get(pls, k);
        if (strcmp(gf_cli_json_str(p, "function", ""), name) != 0 ||
            gf_cli_json_int(p, "version", -1) != ver)
            continue;
        off += (size_t)snprintf(buf + off, cap - off, "%sw%lld:%s", off ? " " : "",
                                gf_cli_json_int(p, "worker", -1), gf_cli_json_str(p, "tier", "?"));
    }
}

/* Calls row(s, f, version, current, rates, arg) for each version of function
 * f worth a row: the current one, and any other that had traffic in the
 * interval (a client pinned to it). */
typedef void (*version_row_fn)(top_state *s, const json_t *f, long long ver, bool current,
                               const fn_rates *r, void *arg);

static void each_version_row(top_state *s, const json_t *f, version_row_fn row, void *arg)
{
    const char *name = gf_cli_json_str(f, "name", "?");
    long long cur = gf_cli_json_int(f, "version", -1);
    const json_t *vs = json_object_get(f, "versions");
    bool cur_seen = false;
    for (size_t k = 0; k < json_array_size(vs); k++) {
        long long ver = (long long)json_integer_value(json_array_get(vs, k));
        char vl[24];
        snprintf(vl, sizeof vl, "%lld", ver);
        fn_rates r = rates_of(s, name, vl);
        if (ver != cur && !(r.have && r.req > 0))
            continue;
        cur_seen = cur_seen || ver == cur;
        row(s, f, ver, ver == cur, &r, arg);
    }
    if (!cur_seen) { /* no current version (all broken): one row, no figures */
        fn_rates none = {false, 0, 0, 0, NAN};
        row(s, f, cur, true, &none, arg);
    }
}

typedef struct draw_arg {
    screen *sc;
    int nw;
    bool other; /* a row of a version that is not the current one */
} draw_arg;

static void draw_row(top_state *s, const json_t *f, long long ver, bool current,
                     const fn_rates *r, void *arg)
{
    draw_arg *d = arg;
    const char *name = gf_cli_json_str(f, "name", "?");
    char req[24] = "-", err[24] = "-", p99[24] = "-", cold[24] = "-", vs[24] = "-";
    if (r->have) {
        snprintf(req, sizeof req, "%.1f", r->req);
        snprintf(err, sizeof err, "%.1f", r->err);
        snprintf(cold, sizeof cold, "%.1f", r->cold);
        if (!isnan(r->p99))
            gf_cli_fmt_seconds(r->p99, p99, sizeof p99);
    }
    if (ver >= 0)
        snprintf(vs, sizeof vs, "%lld%s", ver, current ? "" : "*");
    d->other = d->other || !current;
    char placed[256];
    placed_of(s, name, ver, placed, sizeof placed);
    put(d->sc, "%-*.*s  %7s  %8s  %8s  %9s  %7s  %s", d->nw, d->nw, name, vs, req, err, p99, cold,
        placed[0] != '\0' ? placed : "-");
}

static void draw_functions(top_state *s, screen *sc)
{
    const json_t *fns = json_object_get(s->cur.functions, "functions");
    int nw = 8;
    for (size_t i = 0; i < json_array_size(fns); i++) {
        int l = (int)strlen(gf_cli_json_str(json_array_get(fns, i), "name", ""));
        nw = l > nw ? (l > 32 ? 32 : l) : nw;
    }
    put(sc, "%-*s  %7s  %8s  %8s  %9s  %7s  %s", nw, "FUNCTION", "VERSION", "REQ/S", "ERR/S", "P99",
        "COLD/S", "PLACED");
    if (json_array_size(fns) == 0)
        put(sc, "(no functions deployed)");
    draw_arg d = {sc, nw, false};
    for (size_t i = 0; i < json_array_size(fns); i++)
        each_version_row(s, json_array_get(fns, i), draw_row, &d);
    if (d.other)
        put(sc, "(* not the current version: requests that name it)");
}

/* The whole frame as lines into sc. */
static void render(top_state *s, screen *sc, int cols)
{
    char when[16];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(when, sizeof when, "%H:%M:%S", &tm);
    const json_t *ws = json_object_get(s->cur.workers, "workers");
    int up = 0;
    for (size_t i = 0; i < json_array_size(ws); i++)
        up += strcmp(gf_cli_json_str(json_array_get(ws, i), "state", ""), "up") == 0;
    put(sc, "gpufaas top - %s - %s - %d/%zu workers up - %zu functions - q quits", s->c->server,
        when, up, json_array_size(ws),
        json_array_size(json_object_get(s->cur.functions, "functions")));
    if (s->err[0] != '\0')
        put(sc, "! %s (showing the last good refresh; retrying)", s->err);
    put(sc, "%s", "");
    draw_workers(s, sc, cols);
    put(sc, "%s", "");
    draw_functions(s, sc);
    put(sc, "%s", "");
    put(sc, "RECENT SWAPS");
    if (s->n_events == 0)
        put(sc, "(none seen yet)");
    for (int i = 0; i < s->n_events; i++)
        put(sc, "%s", s->events[i]);
}

/* One function version's row as JSON, appended to the array arg. */
static void json_row(top_state *s, const json_t *f, long long ver, bool current,
                     const fn_rates *r, void *arg)
{
    json_t *pls = json_array();
    const json_t *all = json_object_get(s->cur.placements, "placements");
    const char *name = gf_cli_json_str(f, "name", "?");
    for (size_t k = 0; k < json_array_size(all); k++) {
        const json_t *p = json_array_get(all, k);
        if (strcmp(gf_cli_json_str(p, "function", ""), name) == 0 &&
            gf_cli_json_int(p, "version", -1) == ver)
            json_array_append(pls, (json_t *)p);
    }
    json_t *o = json_pack("{s:s, s:o, s:b, s:o}", "name", name, "version",
                          ver >= 0 ? json_integer(ver) : json_null(), "current", current,
                          "placements", pls);
    if (o == NULL)
        return;
    json_object_set_new(o, "requests_per_s", r->have ? json_real(r->req) : json_null());
    json_object_set_new(o, "errors_per_s", r->have ? json_real(r->err) : json_null());
    json_object_set_new(o, "cold_starts_per_s", r->have ? json_real(r->cold) : json_null());
    json_object_set_new(o, "p99_s", !isnan(r->p99) ? json_real(r->p99) : json_null());
    json_array_append_new(arg, o);
}

/* --once --json: the same figures as one JSON object. NULL on OOM. */
static json_t *snapshot_json(const top_state *s)
{
    double dt = s->prev.ok ? s->cur.t - s->prev.t : 0;
    json_t *fns = json_array(), *traffic = json_array(), *events = json_array();
    const json_t *fl = json_object_get(s->cur.functions, "functions");
    for (size_t i = 0; i < json_array_size(fl) && fns != NULL; i++)
        each_version_row((top_state *)s, json_array_get(fl, i), json_row, fns);
    for (size_t k = 0; k < s->cur.metrics.n && dt > 0 && traffic != NULL; k++) {
        const gf_prom_sample *m = &s->cur.metrics.v[k];
        const char *w = gf_prom_label(m, "worker"), *from = gf_prom_label(m, "from"),
                   *to = gf_prom_label(m, "to");
        if (strcmp(m->name, "gpufaas_swap_bytes_total") != 0 || w == NULL || from == NULL ||
            to == NULL)
            continue;
        json_array_append_new(traffic,
                              json_pack("{s:s, s:s, s:s, s:f}", "worker", w, "from", from, "to", to,
                                        "bytes_per_s", increase(&s->prev.metrics, m) / dt));
    }
    for (int i = 0; i < s->n_events && events != NULL; i++)
        json_array_append_new(events, json_string(s->events[i]));
    return json_pack("{s:s, s:f, s:O, s:O, s:o, s:o, s:o}", "server", s->c->server, "interval_s",
                     dt, "workers", json_object_get(s->cur.workers, "workers"), "placements",
                     json_object_get(s->cur.placements, "placements"), "functions", fns,
                     "swap_rates", traffic, "recent_swaps", events);
}

/* Write the frame: at most rows lines of at most cols characters; with
 * ansi, over the previous frame (home, clear each line's end, clear below). */
static void emit(const screen *sc, int rows, int cols, bool ansi)
{
    gf_buf out;
    gf_buf_init(&out);
    if (ansi)
        gf_buf_append_str(&out, "\033[H");
    const char *p = sc->lines.data != NULL ? sc->lines.data : "";
    const char *end = p + sc->lines.len;
    int row = 0;
    while (p < end && (rows <= 0 || row < rows)) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);
        size_t shown = cols > 0 && n > (size_t)cols ? (size_t)cols : n;
        while (shown > 0 && p[shown - 1] == ' ')
            shown--;
        if (row > 0)
            gf_buf_append_str(&out, ansi ? "\r\n" : "\n");
        gf_buf_append(&out, p, shown);
        if (ansi)
            gf_buf_append_str(&out, "\033[K");
        row++;
        p = nl != NULL ? nl + 1 : end;
    }
    gf_buf_append_str(&out, ansi ? "\033[J" : "\n");
    size_t off = 0;
    while (off < out.len) {
        ssize_t w = write(STDOUT_FILENO, out.data + off, out.len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    gf_buf_deinit(&out);
}

/* One refresh: scrape, keep the previous good scrape for the rates. */
static void refresh(top_state *s)
{
    snapshot next;
    s->c->err_sink = s->err;
    s->err[0] = '\0';
    fetch(s->c, &next);
    if (!next.ok) {
        snapshot_clear(&next);
        if (s->err[0] == '\0')
            snprintf(s->err, sizeof s->err, "refresh failed");
        return;
    }
    snapshot_clear(&s->prev);
    s->prev = s->cur;
    s->cur = next;
    diff_residency(s);
}

/* ---- the terminal ------------------------------------------------------------------------ */

static int wake_fds[2] = {-1, -1};        /* the self-pipe */
static volatile sig_atomic_t stop_signal; /* SIGINT/SIGTERM/SIGHUP that arrived */
static volatile sig_atomic_t resized;     /* SIGWINCH */

static void on_signal(int sig)
{
    int saved = errno;
    if (sig == SIGWINCH)
        resized = 1;
    else
        stop_signal = sig;
    if (wake_fds[1] >= 0) {
        ssize_t r = write(wake_fds[1], "x", 1);
        (void)r;
    }
    errno = saved;
}

static void term_size(int *rows, int *cols)
{
    struct winsize ws;
    *rows = 24;
    *cols = 80;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
        *rows = ws.ws_row;
        *cols = ws.ws_col;
    }
}

static void write_all(const char *s)
{
    size_t n = strlen(s), off = 0;
    while (off < n) {
        ssize_t w = write(STDOUT_FILENO, s + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        off += (size_t)w;
    }
}

static int run_live(top_state *s)
{
    struct termios saved, raw;
    if (tcgetattr(STDIN_FILENO, &saved) != 0) {
        gf_cli_errorf(s->c, "cannot read the terminal's settings: %s", strerror(errno));
        return 1;
    }
    if (pipe2(wake_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
        gf_cli_errorf(s->c, "pipe: %s", strerror(errno));
        return 1;
    }
    struct sigaction sa, old[4];
    static const int sigs[4] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH};
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 4; i++)
        sigaction(sigs[i], &sa, &old[i]);
    raw = saved;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG | IEXTEN);
    raw.c_iflag &= ~(tcflag_t)(IXON | ICRNL);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    write_all("\033[?1049h\033[?25l\033[H\033[2J");

    int rc = 0;
    bool quit = false;
    double next = gf_mono_s();
    while (!quit && !stop_signal) {
        double now = gf_mono_s();
        if (now >= next) {
            refresh(s);
            int rows, cols;
            term_size(&rows, &cols);
            screen sc = {.failed = false};
            gf_buf_init(&sc.lines);
            render(s, &sc, cols);
            emit(&sc, rows, cols, true);
            gf_buf_deinit(&sc.lines);
            next = gf_mono_s() + s->interval;
            continue;
        }
        struct pollfd pf[2] = {{STDIN_FILENO, POLLIN, 0}, {wake_fds[0], POLLIN, 0}};
        int ms = (int)((next - now) * 1000) + 1;
        int n = poll(pf, 2, ms);
        if (n < 0 && errno != EINTR) {
            rc = 1;
            break;
        }
        if (n > 0 && (pf[1].revents & POLLIN)) {
            char drain[16];
            while (read(wake_fds[0], drain, sizeof drain) > 0) {
            }
            if (resized) {
                resized = 0;
                next = 0; /* redraw at the new size */
            }
        }
        if (n > 0 && (pf[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            char keys[32];
            ssize_t got = read(STDIN_FILENO, keys, sizeof keys);
            if (got <= 0) {
                quit = true; /* the terminal went away */
            }
            for (ssize_t k = 0; k < got; k++)
                if (keys[k] == 'q' || keys[k] == 'Q' || keys[k] == 3 || keys[k] == 4)
                    quit = true;
        }
    }
    write_all("\033[?25h\033[?1049l");
    tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    for (int i = 0; i < 4; i++)
        sigaction(sigs[i], &old[i], NULL);
    close(wake_fds[0]);
    close(wake_fds[1]);
    wake_fds[0] = wake_fds[1] = -1;
    if (stop_signal)
        rc = 128 + stop_signal;
    return rc;
}

int gf_cmd_top(int argc, char **argv)
{
    if (gf_cli_wants_help(argc, argv)) {
        top_usage(stdout);
        return 0;
    }
    gf_cli_client c;
    gf_cli_client_init(&c, "top");
    top_state s;
    memset(&s, 0, sizeof s);
    s.c = &c;
    s.interval = 1.0;
    gf_cli_val val[T_COUNT_];
    const char *pos[1];
    int n_pos;
    int rc = gf_cli_parse(&top_cmd, &c, val, argc, argv, pos, 0, &n_pos);
    if (rc != 0)
        goto out;
    rc = 2;
    bool once = val[T_ONCE].n > 0;
    if (!gf_cli_flag_num(&top_cmd, &c, T_INTERVAL, val, 0.1, false, 3600,
                         "a number of seconds in 0.1..3600", &s.interval))
        goto out;
    if (c.json && !once) {
        gf_cli_errorf(&c, "--json needs --once (a live view is for people)");
        rc = 2;
        goto out;
    }
    rc = 1;
    if (!once && (isatty(STDIN_FILENO) != 1 || isatty(STDOUT_FILENO) != 1)) {
        gf_cli_errorf(&c,
                      "a live view needs a terminal, and %s is not one; use 'gpufaas top "
                      "--once' for one plain snapshot, or 'gpufaas ps --json'",
                      isatty(STDOUT_FILENO) != 1 ? "standard output" : "standard input");
        goto out;
    }
    c.timeout_ms = FETCH_TIMEOUT_MS;
    /* the first scrape: an unreachable server is an error before the screen changes */
    fetch(&c, &s.cur);
    if (!s.cur.ok)
        goto out;
    if (once) {
        struct timespec ts = {(time_t)s.interval, (long)((s.interval - floor(s.interval)) * 1e9)};
        nanosleep(&ts, NULL);
        refresh(&s);
        if (s.err[0] != '\0') {
            c.err_sink = NULL;
            gf_cli_errorf(&c, "%s", s.err);
            goto out;
        }
        if (c.json) {
            json_t *j = snapshot_json(&s);
            rc = j != NULL ? gf_cli_print_json(&c, j) : 1;
            if (j == NULL)
                gf_cli_errorf(&c, "out of memory");
            json_decref(j);
            goto out;
        }
        screen sc = {.failed = false};
        gf_buf_init(&sc.lines);
        long long cols = 100; /* the bars' width: $COLUMNS when set, as a shell has it */
        const char *ce = getenv("COLUMNS");
        if (ce != NULL && !gf_cli_parse_int(ce, 40, 1000, &cols))
            cols = 100;
        render(&s, &sc, (int)cols);
        if (sc.failed)
            gf_cli_errorf(&c, "out of memory");
        else
            emit(&sc, 0, 0, false);
        gf_buf_deinit(&sc.lines);
        rc = sc.failed ? 1 : 0;
        goto out;
    }
    rc = run_live(&s);
out:
    snapshot_clear(&s.cur);
    snapshot_clear(&s.prev);
    gf_cli_client_deinit(&c);
    return rc;
}
