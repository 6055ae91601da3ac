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
#include "gateway/cli/top.h"

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

/* ---- recent swaps ------------------------------------------------------------------------ */

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
            gf_top_render(s, &sc, cols);
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
            json_t *j = gf_top_snapshot_json(&s);
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
        gf_top_render(&s, &sc, (int)cols);
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
