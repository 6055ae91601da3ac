/* gpufaas benchmarks — the HTTP load generator (see loadgen.h). */
#include "density_loadgen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define LG_BUF 65536
#define LG_MAX_CONNS 512

double gf_dlg_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct lg_conn {
    int fd;           /* -1 when not connected */
    long req;         /* index of the request in flight, -1 when idle */
    double t_write;   /* when it was written */
    size_t sent;      /* bytes of it written */
    char in[LG_BUF];  /* the answer so far */
    size_t got;
    struct lg_conn *next_idle;
} lg_conn;

typedef struct lg {
    uint16_t port;
    const gf_dlg_targets *tg;
    gf_dlg_req *reqs;
    bool open_loop;   /* latency from the arrival time, else from the write */
    int epfd;
    lg_conn *conns;
    int n_conns, max_conns;
    lg_conn *idle;
    size_t settled;   /* requests with a final status */
    void (*done)(void *arg, long q); /* called once per settled request; may be NULL */
    void *done_arg;
    char *msg;
    size_t cap;
    bool failed;
} lg;

static int lg_fail(lg *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->msg, g->cap, fmt, ap);
    va_end(ap);
    g->failed = true;
    return -1;
}

static void lg_settle(lg *g, long q)
{
    g->settled++;
    if (g->done != NULL)
        g->done(g->done_arg, q);
}

static int lg_connect(lg *g, lg_conn *c)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return lg_fail(g, "socket: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(g->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        int e = errno;
        close(fd);
        return lg_fail(g, "connect to port %u: %s", g->port, strerror(e));
    }
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
        close(fd);
        return lg_fail(g, "fcntl: %s", strerror(errno));
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        close(fd);
        return lg_fail(g, "epoll_ctl: %s", strerror(errno));
    }
    c->fd = fd;
    return 0;
}

static void lg_close(lg *g, lg_conn *c)
{
    if (c->fd >= 0) {
        epoll_ctl(g->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
    }
    c->fd = -1;
}

static void lg_make_idle(lg *g, lg_conn *c)
{
    c->req = -1;
    c->next_idle = g->idle;
    g->idle = c;
}

/* Write what is left of the request; EPOLLOUT when the socket is full.
 * False when the connection is broken (the peer closed it). */
static bool lg_send(lg *g, lg_conn *c)
{
    int t = g->reqs[c->req].target;
    const char *p = g->tg->req[t];
    size_t len = g->tg->len[t];
    while (c->sent < len) {
        ssize_t w = write(c->fd, p + c->sent, len - c->sent);
        if (w < 0 && errno == EAGAIN) {
            struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
            epoll_ctl(g->epfd, EPOLL_CTL_MOD, c->fd, &ev);
            return true;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        c->sent += (size_t)w;
    }
    return true;
}

/* The request on c failed with its connection. */
static void lg_conn_failed(lg *g, lg_conn *c)
{
    long q = c->req;
    lg_close(g, c);
    lg_make_idle(g, c);
    if (q >= 0) {
        g->reqs[q].status = -1;
        lg_settle(g, q);
    }
}

/* Start request r on an idle connection (connecting one when needed);
 * false when no connection can take it now. */
static bool lg_start(lg *g, long r)
{
    lg_conn *c = g->idle;
    if (c != NULL) {
        g->idle = c->next_idle;
    } else if (g->n_conns < g->max_conns) {
        c = &g->conns[g->n_conns++];
        c->fd = -1;
    } else {
        return false;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        if (c->fd < 0 && lg_connect(g, c) != 0) {
            lg_make_idle(g, c);
            return false;
        }
        c->req = r;
        c->sent = 0;
        c->got = 0;
        c->t_write = gf_dlg_now();
        if (lg_send(g, c))
            return true;
        lg_close(g, c); /* the server closed it while idle: once more on a new one */
    }
    lg_conn_failed(g, c);
    return true;
}

static uint32_t json_u32(const char *body, const char *key)
{
    const char *p = strstr(body, key);
    return p != NULL ? (uint32_t)strtoul(p + strlen(key), NULL, 10) : 0;
}

/* Record the complete answer in c->in whose body starts at body. */
static void lg_record(lg *g, lg_conn *c, const char *body)
{
    gf_dlg_req *q = &g->reqs[c->req];
    q->status = atoi(c->in + 9); /* "HTTP/1.1 200 OK" */
    q->latency = gf_dlg_now() - (g->open_loop ? q->t : c->t_write);
    q->retry_after = -1;
    for (const char *h = strstr(c->in, "\r\n"); h != NULL && h < body; h = strstr(h + 2, "\r\n"))
        if (strncasecmp(h + 2, "Retry-After:", 12) == 0)
            q->retry_after = atoi(h + 14);
    if (q->status == 200) {
        q->cold = strstr(body, "\"cold\":true") != NULL;
        q->queue_us = json_u32(body, "\"queue\":");
        q->load_us = json_u32(body, "\"load\":");
        q->exec_us = json_u32(body, "\"exec\":");
        q->total_us = json_u32(body, "\"total\":");
    }
}

/* Read what arrived on c; settle its request when the answer is complete. */
static void lg_readable(lg *g, lg_conn *c)
{
    ssize_t r = read(c->fd, c->in + c->got, LG_BUF - 1 - c->got);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (r <= 0 || c->req < 0) { /* closed (or bytes nobody asked for) */
        lg_conn_failed(g, c);
        return;
    }
    c->got += (size_t)r;
    c->in[c->got] = '\0';
    char *end = strstr(c->in, "\r\n\r\n");
    if (end == NULL && c->got < LG_BUF - 1)
        return;
    size_t cl = 0;
    bool close_after = false;
    for (char *h = strstr(c->in, "\r\n"); h != NULL && end != NULL && h < end;
         h = strstr(h + 2, "\r\n")) {
        if (strncasecmp(h + 2, "Content-Length:", 15) == 0)
            cl = (size_t)strtoull(h + 17, NULL, 10);
        else if (strncasecmp(h + 2, "Connection: close", 17) == 0)
            close_after = true;
    }
    size_t body = end != NULL ? (size_t)(end + 4 - c->in) : c->got;
    if (c->got < body + cl && c->got < LG_BUF - 1)
        return;
    /* complete, or too large to keep (then counted by its status alone) */
    bool whole = c->got == body + cl;
    long q = c->req;
    lg_record(g, c, c->in + body);
    if (close_after || !whole)
        lg_close(g, c);
    lg_make_idle(g, c);
    lg_settle(g, q);
}

static int lg_init(lg *g, uint16_t port, const gf_dlg_targets *tg, gf_dlg_req *reqs, int max_conns,
                   bool open_loop, char *msg, size_t cap)
{
    memset(g, 0, sizeof *g);
    g->port = port;
    g->tg = tg;
    g->reqs = reqs;
    g->open_loop = open_loop;
    g->msg = msg;
    g->cap = cap;
    g->max_conns = max_conns < 1 ? 1 : max_conns > LG_MAX_CONNS ? LG_MAX_CONNS : max_conns;
    g->conns = calloc((size_t)g->max_conns, sizeof *g->conns);
    g->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (g->conns == NULL || g->epfd < 0) {
        free(g->conns);
        if (g->epfd >= 0)
            close(g->epfd);
        return lg_fail(g, "out of memory or epoll_create1 failed");
    }
    return 0;
}

static void lg_deinit(lg *g)
{
    for (int i = 0; i < g->n_conns; i++)
        lg_close(g, &g->conns[i]);
    close(g->epfd);
    free(g->conns);
}

/* Wait up to timeout_ms and handle the events. */
static int lg_events(lg *g, int timeout_ms, int timer_fd)
{
    struct epoll_event evs[64];
    int k = epoll_wait(g->epfd, evs, 64, timeout_ms);
    if (k < 0 && errno == EINTR)
        return 0;
    if (k < 0)
        return lg_fail(g, "epoll_wait: %s", strerror(errno));
    for (int i = 0; i < k; i++) {
        if (evs[i].data.ptr == NULL) { /* the timer */
            uint64_t x;
            if (read(timer_fd, &x, sizeof x) < 0 && errno != EAGAIN)
                return lg_fail(g, "timerfd read: %s", strerror(errno));
            continue;
        }
        lg_conn *c = evs[i].data.ptr;
        if (c->fd < 0)
            continue;
        if ((evs[i].events & EPOLLOUT) && c->req >= 0) {
            struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
            epoll_ctl(g->epfd, EPOLL_CTL_MOD, c->fd, &ev);
            if (!lg_send(g, c)) {
                lg_conn_failed(g, c);
                continue;
            }
        }
        if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
            lg_readable(g, c);
    }
    return 0;
}

/* ---- open loop ------------------------------------------------------------- */

int gf_dlg_open_loop(uint16_t port, const gf_dlg_targets *tg, gf_dlg_req *reqs, size_t n,
                    int max_conns, double deadline_s, char *msg, size_t cap)
{
    lg g;
    if (lg_init(&g, port, tg, reqs, max_conns, true, msg, cap) != 0)
        return -1;
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    struct epoll_event tev = {.events = EPOLLIN, .data.ptr = NULL};
    long *backlog = malloc((n ? n : 1) * sizeof *backlog); /* arrived, waiting for a connection */
    if (tfd < 0 || epoll_ctl(g.epfd, EPOLL_CTL_ADD, tfd, &tev) != 0 || backlog == NULL) {
        lg_fail(&g, "timerfd or memory: %s", strerror(errno));
        free(backlog);
        if (tfd >= 0)
            close(tfd);
        lg_deinit(&g);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        reqs[i].status = 0;
        reqs[i].latency = 0;
        reqs[i].cold = false;
        reqs[i].retry_after = -1;
    }
    size_t b_head = 0, b_tail = 0, next = 0;
    double start = gf_dlg_now();
    double last = n ? reqs[n - 1].t : 0;
    for (size_t i = 0; i < n; i++) /* arrival times become absolute */
        reqs[i].t += start;
    while (g.settled < n && !g.failed) {
        double now = gf_dlg_now();
        while (next < n && reqs[next].t <= now)
            backlog[b_tail++] = (long)next++;
        while (b_head < b_tail && lg_start(&g, backlog[b_head]))
            b_head++;
        if (g.failed || now - start > last + deadline_s)
            break;
        int timeout = 100;
        if (next < n) {
            double t = reqs[next].t;
            struct itimerspec its = {{0, 0}, {(time_t)t, (long)((t - (double)(time_t)t) * 1e9)}};
            if (its.it_value.tv_nsec >= 1000000000L)
                its.it_value.tv_nsec = 999999999L;
            timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
            timeout = -1;
        }
        if (lg_events(&g, timeout, tfd) != 0)
            break;
    }
    for (size_t i = 0; i < n; i++)
        reqs[i].t -= start;
    int rc = g.failed ? -1 : 0;
    free(backlog);
    close(tfd);
    lg_deinit(&g);
    return rc;
}

/* ---- closed loop ----------------------------------------------------------- */

typedef struct {
    gf_dlg_req *slots;
    double measure_from, stop_at;
    size_t answered, errors;
    long *free_slots; /* request slots not in flight */
    size_t n_free;
} cl_state;

static void cl_done(void *arg, long q)
{
    cl_state *s = arg;
    gf_dlg_req *r = &s->slots[q];
    double t_end = gf_dlg_now();
    if (r->status != 200) {
        if (s->errors++ < 3)
            fprintf(stderr, "loadgen: an answer with status %d\n", r->status);
    } else if (t_end - r->latency >= s->measure_from && t_end <= s->stop_at)
        s->answered++;
    s->free_slots[s->n_free++] = q;
}

int gf_dlg_closed_loop(uint16_t port, const gf_dlg_targets *tg, const int *seq, size_t n_seq,
                      int conns, double warmup_s, double seconds, size_t *answered,
                      size_t *errors, char *msg, size_t cap)
{
    if (conns < 1 || conns > LG_MAX_CONNS || n_seq == 0) {
        snprintf(msg, cap, "closed loop: 1..%d connections and a sequence, please", LG_MAX_CONNS);
        return -1;
    }
    gf_dlg_req *slots = calloc((size_t)conns, sizeof *slots);
    long *free_slots = calloc((size_t)conns, sizeof *free_slots);
    lg g;
    if (slots == NULL || free_slots == NULL ||
        lg_init(&g, port, tg, slots, conns, false, msg, cap) != 0) {
        if (slots == NULL || free_slots == NULL)
            snprintf(msg, cap, "out of memory");
        free(slots);
        free(free_slots);
        return -1;
    }
    cl_state s = {slots, 0, 0, 0, 0, free_slots, 0};
    g.done = cl_done;
    g.done_arg = &s;
    for (int i = conns - 1; i >= 0; i--)
        free_slots[s.n_free++] = i;
    double start = gf_dlg_now();
    s.measure_from = start + warmup_s;
    s.stop_at = s.measure_from + seconds;
    size_t pos = 0;
    for (;;) {
        double now = gf_dlg_now();
        while (now < s.stop_at && s.n_free > 0) {
            long q = s.free_slots[--s.n_free];
            slots[q].target = seq[pos++ % n_seq];
            slots[q].status = 0;
            if (!lg_start(&g, q)) {
                s.free_slots[s.n_free++] = q;
                break;
            }
        }
        if (g.failed)
            break;
        int busy = conns - (int)s.n_free;
        if (busy == 0 && now >= s.stop_at)
            break;
        if (now > s.stop_at + 30) {
            lg_fail(&g, "%d requests still unanswered 30 s after the end", busy);
            break;
        }
        if (lg_events(&g, 100, -1) != 0)
            break;
    }
    *answered = s.answered;
    *errors = s.errors;
    int rc = g.failed ? -1 : 0;
    lg_deinit(&g);
    free(slots);
    free(free_slots);
    return rc;
}
