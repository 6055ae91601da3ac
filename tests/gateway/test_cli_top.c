/* Tests for `gpufaas top`, the live view, run in a pseudo-terminal as a
 * user runs it: what it draws, that it restores the terminal, how it ends on
 * q, a signal or a lost server, and its one-shot forms without a terminal.
 * Part of gateway_cli_client (test_cli_client.c starts the server). */
#include <check.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli_client_lib.h"
#include "core/buf.h"
#include "testutil.h"

typedef struct pty_run {
    pid_t pid;
    int master, slave; /* the parent keeps the slave to read its settings */
    gf_buf out;        /* everything top wrote */
} pty_run;

static void pty_start(pty_run *p, const char *interval)
{
    /* wide enough that a device line's list of models is never cut at the
     * terminal's edge, whatever other checks of this suite left deployed */
    struct winsize ws = {.ws_row = 50, .ws_col = 240};
    memset(p, 0, sizeof *p);
    gf_buf_init(&p->out);
    ck_assert_int_eq(openpty(&p->master, &p->slave, NULL, NULL, &ws), 0);
    const char *exe = gf_test_prog("GF_GPUFAAS");
    p->pid = fork();
    ck_assert_int_ge(p->pid, 0);
    if (p->pid == 0) {
        setsid();
        ioctl(p->slave, TIOCSCTTY, 0);
        dup2(p->slave, 0);
        dup2(p->slave, 1);
        dup2(p->slave, 2);
        close(p->master);
        close(p->slave);
        execl(exe, exe, "top", "--server", cc_server_url(), "--interval", interval, (char *)NULL);
        _exit(127);
    }
}

/* Read what top writes for up to ms milliseconds. */
static void pty_read(pty_run *p, int ms)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        int left = ms - (int)((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
        if (left <= 0)
            return;
        struct pollfd pf = {p->master, POLLIN, 0};
        if (poll(&pf, 1, left) <= 0)
            continue;
        char buf[4096];
        ssize_t n = read(p->master, buf, sizeof buf);
        if (n <= 0)
            return;
        ck_assert_int_eq(gf_buf_append(&p->out, buf, (size_t)n), GF_OK);
    }
}

/* Read until the output since byte `from` contains want, up to timeout_ms. */
static bool pty_wait_for(pty_run *p, size_t from, const char *want, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 100) {
        if (p->out.len > from && strstr(p->out.data + from, want) != NULL)
            return true;
        pty_read(p, 100);
    }
    return p->out.len > from && strstr(p->out.data + from, want) != NULL;
}

/* Wait for top to exit (reading on): its status (128 + signal when killed). */
static int pty_wait_exit(pty_run *p, int timeout_s)
{
    for (int i = 0; i < timeout_s * 10; i++) {
        int st;
        if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
            pty_read(p, 50);
            p->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        pty_read(p, 100);
    }
    kill(p->pid, SIGKILL);
    waitpid(p->pid, NULL, 0);
    p->pid = 0;
    ck_abort_msg("top did not exit within %d s", timeout_s);
    return -1;
}

/* The screen text without escape sequences and carriage returns. */
static char *plain(const gf_buf *b)
{
    char *s = malloc(b->len + 1);
    ck_assert_ptr_nonnull(s);
    size_t w = 0;
    for (size_t i = 0; i < b->len; i++) {
        if (b->data[i] == '\033' && i + 1 < b->len && b->data[i + 1] == '[') {
            i += 2;
            while (i < b->len && !(b->data[i] >= '@' && b->data[i] <= '~'))
                i++;
            s[w++] = '\n'; /* a cursor move or a line clear: a line ends */
            continue;
        }
        if (b->data[i] != '\r')
            s[w++] = b->data[i];
    }
    s[w] = '\0';
    return s;
}

/* The terminal is back to how it was: the alternate screen left, the cursor
 * shown, canonical mode and echo on. */
static void check_restored(pty_run *p)
{
    const char *leave = "\033[?25h\033[?1049l";
    ck_assert_msg(p->out.len >= strlen(leave) &&
                      strstr(p->out.data + p->out.len - strlen(leave) - 1, leave) != NULL,
                  "top did not restore the screen at exit");
    struct termios t;
    ck_assert_int_eq(tcgetattr(p->slave, &t), 0);
    ck_assert_msg((t.c_lflag & ICANON) && (t.c_lflag & ECHO) && (t.c_lflag & ISIG),
                  "terminal modes not restored (lflag %#x)", (unsigned)t.c_lflag);
}

static void pty_close(pty_run *p)
{
    close(p->master);
    close(p->slave);
    gf_buf_deinit(&p->out);
}

START_TEST(test_top_live)
{
    static const char *const fns[3] = {"tops1", "tops2", "tops3"};
    for (int i = 0; i < 3; i++)
        cc_deploy_identity(fns[i]);
    pty_run p;
    pty_start(&p, "0.3");
    ck_assert_msg(pty_wait_for(&p, 0, "RECENT SWAPS", 20000), "no frame:\n%s",
                  p.out.data ? p.out.data : "");
    ck_assert_msg(strstr(p.out.data, "\033[?1049h") != NULL, "no alternate screen");
    size_t mark = p.out.len;
    /* traffic: three models through a device that holds two, several times */
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 3; i++) {
            char *out, *err;
            ck_assert_int_eq(cc_cli(&out, &err, "invoke", fns[i], "--data", "[1, 2, 3, 4]", NULL), 0);
            cc_freeboth(&out, &err);
            pty_read(&p, 20);
        }
    }
    pty_read(&p, 1000);
    /* a swap seen: an arrival "tops1:1 -> w0 device", a move "w0 host -> device" or an
     * eviction */
    ck_assert_msg(pty_wait_for(&p, mark, " -> ", 5000) || pty_wait_for(&p, mark, "evicted", 100),
                  "no swap in:\n%s", cc_tail3k(p.out.data + mark));
    ck_assert_int_eq(write(p.master, "q", 1), 1);
    ck_assert_int_eq(pty_wait_exit(&p, 10), 0);
    check_restored(&p);

    char *screen = plain(&p.out);
    HAS(screen, "gpufaas top - ");
    HAS(screen, "workers up");
    HAS(screen, "worker 0  cpu:0  up");
    HAS(screen, "worker 1  cpu:1  up");
    HAS(screen, "  device [");
    HAS(screen, "  host   [");
    /* the device tier of a worker holding models: these small ones share one
     * 2 MiB page, beside the request arena's block (2.1 MiB) */
    HAS(screen, "] 2.1 MiB / 4 MiB");
    HAS(screen, "FUNCTION");
    HAS(screen, "P99");
    /* a model on a device line, by its label: these small ones take a cell
     * each of the bar (they share a page), so with several deployed the bar
     * shows only their first letters; the line's list after the sizes names
     * each in full */
    bool in_bar = false;
    for (const char *l = screen; (l = strstr(l, "  device [")) != NULL; l++)
        for (int i = 0; i < 3 && !in_bar; i++) {
            char label[16];
            snprintf(label, sizeof label, "%s:1", fns[i]);
            const char *end = strchr(l, '\n'), *at = strstr(l, label);
            in_bar = at != NULL && end != NULL && at < end;
        }
    ck_assert_msg(in_bar, "no model on a device line:\n%s", cc_tail3k(screen));
    /* some frame measured requests per second and a p99 for one of them */
    bool rate = false;
    for (char *l = strtok(screen, "\n"); l != NULL && !rate; l = strtok(NULL, "\n")) {
        char name[32], ver[16], req[16], errs[16], p99[16];
        if (sscanf(l, "%31s %15s %15s %15s %15s", name, ver, req, errs, p99) == 5 &&
            strncmp(name, "tops", 4) == 0 && atof(req) > 0 && strcmp(p99, "-") != 0)
            rate = true;
    }
    ck_assert_msg(rate, "no frame with a request rate and a p99");
    free(screen);
    pty_close(&p);
}
END_TEST

START_TEST(test_top_signals_and_no_tty)
{
    static const int sigs[2] = {SIGTERM, SIGINT};
    for (int i = 0; i < 2; i++) {
        pty_run p;
        pty_start(&p, "0.2");
        ck_assert_msg(pty_wait_for(&p, 0, "FUNCTION", 20000), "no frame");
        kill(p.pid, sigs[i]);
        ck_assert_int_eq(pty_wait_exit(&p, 10), 128 + sigs[i]);
        check_restored(&p);
        pty_close(&p);
    }
    /* no terminal: a clear error, and --once as the plain alternative */
    char *out, *err;
    ck_assert_int_eq(cc_cli(&out, &err, "top", NULL), 1);
    HAS(err, "gpufaas top: a live view needs a terminal");
    HAS(err, "--once");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cc_cli(&out, &err, "top", "--once", "--interval", "0.2", NULL), 0);
    HAS(out, "worker 0  cpu:0  up");
    HAS(out, "FUNCTION");
    HASNT(out, "\033");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cc_cli(&out, &err, "top", "--once", "--json", "--interval", "0.2", NULL), 0);
    json_t *j = json_loads(out, 0, NULL);
    ck_assert_msg(j != NULL, "not JSON: %s", out);
    ck_assert_uint_eq(json_array_size(json_object_get(j, "workers")), 2);
    ck_assert(json_is_array(json_object_get(j, "functions")));
    ck_assert(json_is_array(json_object_get(j, "recent_swaps")));
    ck_assert(json_number_value(json_object_get(j, "interval_s")) > 0.1);
    json_decref(j);
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cc_cli(&out, &err, "top", "--json", NULL), 2);
    HAS(err, "--json needs --once");
    cc_freeboth(&out, &err);
}
END_TEST

void cc_top_tests(TCase *tc)
{
    tcase_add_test(tc, test_top_live);
    tcase_add_test(tc, test_top_signals_and_no_tty);
}
