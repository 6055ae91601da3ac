/* gpufaas top — what a refresh shows (gateway/cli): the figures derived from
 * two scrapes (rates and p99 from counter and histogram differences), the
 * screen's text (memory bars per worker and tier, a row per function
 * version, the recent swaps) and the same figures as JSON for --once --json.
 * The scrapes, the terminal and the command are in cmd_top.c. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/cli/client.h"
#include "gateway/cli/prom.h"
#include "gateway/cli/top.h"

#define MAX_BUCKETS 32 /* histogram buckets read per function */

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

/* ---- drawing ---------------------------------------------------------------------------- */

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
void gf_top_render(top_state *s, screen *sc, int cols)
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
json_t *gf_top_snapshot_json(const top_state *s)
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
