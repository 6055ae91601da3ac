/* gpufaas benchmarks — the HTTP load generator (see loadgen.h). */
#include "loadgen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

double gf_lg_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const gf_lg *g, const char *what)
{
    fprintf(stderr, "%s: %s\n", g->name != NULL ? g->name : "loadgen", what);
    exit(1);
}

/* Write (the rest of) the request; wait for EPOLLOUT when the socket is full. */
static void conn_send(gf_lg *g, gf_lg_conn *c)
{
    while (c->sent < g->req_len) {
        ssize_t w = write(c->fd, g->req + c->sent, g->req_len - c->sent);
        if (w < 0 && errno == EAGAIN) {
            struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
            epoll_ctl(g->epfd, EPOLL_CTL_MOD, c->fd, &ev);
            return;
        }
        if (w <= 0)
            die(g, "write to the server failed");
        c->sent += (size_t)w;
    }
}

static void conn_start(gf_lg *g, gf_lg_conn *c)
{
    c->t0 = gf_lg_now();
    c->sent = 0;
    c->got = 0;
    c->busy = true;
    conn_send(g, c);
}

/* Length of a complete answer at the start of c->in, 0 when incomplete. */
static size_t answer_len(gf_lg_conn *c, int *status, size_t *body_off)
{
    c->in[c->got] = '\0';
    char *end = strstr(c->in, "\r\n\r\n");
    if (end == NULL)
        return 0;
    *status = atoi(c->in + 9); /* "HTTP/1.1 200 OK" */
    size_t cl = 0;
    for (char *h = strstr(c->in, "\r\n"); h != NULL && h < end; h = strstr(h + 2, "\r\n"))
        if (strncasecmp(h + 2, "Content-Length:", 15) == 0)
            cl = (size_t)strtoull(h + 17, NULL, 10);
    *body_off = (size_t)(end + 4 - c->in);
    return c->got >= *body_off + cl ? *body_off + cl : 0;
}

/* Read what arrived; on a complete answer record it; in a closed loop,
 * start the next request unless sending has stopped. */
static void conn_readable(gf_lg *g, gf_lg_conn *c, double measure_from, double stop_at)
{
    ssize_t r = read(c->fd, c->in + c->got, sizeof c->in - 1 - c->got);
    if (r < 0 && errno == EAGAIN)
        return;
    if (r <= 0)
        die(g, "the server closed a connection");
    c->got += (size_t)r;
    int status;
    size_t body;
    size_t len = answer_len(c, &status, &body);
    if (len == 0) {
        if (c->got == sizeof c->in - 1)
            die(g, "an answer larger than the buffer");
        return;
    }
    if (len != c->got)
        die(g, "bytes after the answer (the server answered twice?)");
    double t1 = gf_lg_now();
    c->busy = false;
    g->n_total++;
    if (status != g->expect) {
        g->errors++;
        if (g->errors <= 3)
            fprintf(stderr, "%s: status %d: %.200s\n", g->name, status, c->in + body);
    } else if (!g->have_sample) {
        snprintf(g->sample, sizeof g->sample, "%s", c->in + body);
        g->have_sample = true;
    }
    if (c->t0 >= measure_from && t1 <= stop_at) {
        if (g->n_lat == g->cap_lat) {
            g->cap_lat = g->cap_lat ? 2 * g->cap_lat : 65536;
            g->lat = realloc(g->lat, g->cap_lat * sizeof *g->lat);
            if (g->lat == NULL)
                die(g, "out of memory");
        }
        g->lat[g->n_lat++] = t1 - c->t0;
        g->n_measured++;
    }
    if (g->rate <= 0 && t1 < stop_at)
        conn_start(g, c);
}

/* A connected, non-blocking keep-alive connection to the server. */
static int connect_to(const gf_lg *g, uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die(g, "socket failed");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        die(g, "connect failed");
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)
        die(g, "fcntl failed");
    return fd;
}

void gf_lg_run(gf_lg *g, uint16_t port, int n, double warmup_s, double seconds)
{
    if (n < 1 || n > GF_LG_MAX_CONNS)
        die(g, "bad number of connections");
    g->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (g->epfd < 0)
        die(g, "epoll_create1 failed");
    g->n = n;
    g->n_lat = 0;
    g->n_measured = 0;
    g->errors = 0;
    g->have_sample = false;
    for (int i = 0; i < n; i++) {
        gf_lg_conn *c = &g->conns[i];
        memset(c, 0, sizeof *c);
        c->fd = connect_to(g, port);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0)
            die(g, "epoll_ctl failed");
    }
    double start = gf_lg_now();
    double measure_from = start + warmup_s, stop_at = measure_from + seconds;
    double next = start; /* open loop: when the next request is due */
    if (g->rate <= 0)
        for (int i = 0; i < n; i++)
            conn_start(g, &g->conns[i]);
    struct epoll_event evs[GF_LG_MAX_CONNS];
    for (;;) {
        double now = gf_lg_now();
        if (g->rate > 0) {
            /* start what is due, on free connections (a lag is caught up) */
            for (int i = 0; i < n && next <= now && next < stop_at; i++) {
                if (g->conns[i].busy)
                    continue;
                conn_start(g, &g->conns[i]);
                next += 1.0 / g->rate;
            }
        }
        int wait_ms = 1000;
        if (g->rate > 0 && next < stop_at)
            wait_ms = next <= now ? 0 : (int)((next - now) * 1000) + 1;
        int k = epoll_wait(g->epfd, evs, GF_LG_MAX_CONNS, wait_ms);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            die(g, "epoll_wait failed");
        for (int i = 0; i < k; i++) {
            gf_lg_conn *c = evs[i].data.ptr;
            if (evs[i].events & (EPOLLERR | EPOLLHUP))
                die(g, "a connection failed");
            if (evs[i].events & EPOLLOUT) {
                struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                epoll_ctl(g->epfd, EPOLL_CTL_MOD, c->fd, &ev);
                conn_send(g, c);
            }
            if (evs[i].events & EPOLLIN)
                conn_readable(g, c, measure_from, stop_at);
        }
        int busy = 0;
        for (int i = 0; i < n; i++)
            busy += g->conns[i].busy;
        bool more = g->rate > 0 && next < stop_at;
        if (busy == 0 && !more && gf_lg_now() >= (g->rate > 0 ? stop_at : start))
            break; /* only after stop_at does a connection stay idle */
    }
    for (int i = 0; i < n; i++)
        close(g->conns[i].fd);
    close(g->epfd);
}

void gf_lg_free(gf_lg *g)
{
    free(g->lat);
    g->lat = NULL;
    g->n_lat = g->cap_lat = 0;
}
