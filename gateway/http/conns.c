/* gpufaas — the HTTP front's guard on connections (gateway/http).
 *
 * libmicrohttpd bounds connections in total and closes one idle for the
 * idle timeout, but every byte a client trickles resets that timer, and one
 * client may hold every connection. This file keeps, per TCP connection,
 * where its current request stands and when that phase began:
 *
 *   IDLE     waiting for a request (since the connection opened or the last
 *            reply was sent)
 *   HEADERS  the request line arrived (libmicrohttpd's URI log callback),
 *            the headers have not
 *   BODY     the headers arrived (first access call), the body has not
 *   BUSY     the request is read; the handler or the core has it (its own
 *            deadline is the core's, not this file's)
 *
 * A sweeper thread cuts a connection whose phase outlasts its deadline,
 * however many bytes it trickled: HEADERS after --request-timeout, IDLE
 * after the idle timeout plus that (no connection idle without sending
 * anything gets there: libmicrohttpd closes it first), BODY a little after
 * --request-timeout (the next chunk to arrive is answered 408 by server.c
 * first). Before HEADERS and IDLE cuts it writes a 408 itself: libmicrohttpd
 * writes nothing on the connection in those phases; a HEADERS cut whose
 * request line named an inference route is recorded as that inference's
 * answer (server.c gf_http_refused_headers).
 *
 * Per client (IP address): a connection beyond --max-conns-per-client is
 * marked when it opens; its first request is answered 429 with
 * Connection: close, and if it sends none it is cut after a second. One
 * beyond twice the limit is refused when it is accepted.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "core/clock.h"
#include "core/log.h"
#include "gateway/http/http_impl.h"

typedef enum { C_IDLE, C_HEADERS, C_BODY, C_BUSY } conn_phase;

/* The headers-phase cuts of one sweep, recorded once the lock is let go
 * (more wait for the next sweep). */
#define GF_CONN_RECORD_MAX 32
typedef struct headers_cut {
    char uri[256];
    uint64_t age_ns;
} headers_cut;

struct gf_http_conn {
    struct gf_http_conn *prev, *next;
    int fd;
    struct sockaddr_storage addr; /* the address only (port zeroed) */
    socklen_t alen;
    bool over_limit; /* opened beyond the per-client limit */
    bool cut;        /* shut down by the sweeper */
    conn_phase phase;
    uint64_t since_ns; /* when the phase began */
    char uri[256];     /* HEADERS: the request line's target (cut to fit) */
};

struct gf_http_conns {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    gf_http_conn *head;
    size_t n;
    uint64_t idle_ns, read_ns; /* the idle timeout; --request-timeout */
    unsigned per_client;
    gf_http *h;
    headers_cut cuts[GF_CONN_RECORD_MAX]; /* the sweeper's */
    pthread_t sweeper;
    bool started, stop;
};

/* Grace after its deadline before a connection still reading a body is cut
 * (its next chunk is answered 408 before that), and before a connection
 * over the per-client limit that sent nothing is. */
#define GF_CONN_GRACE_NS (1000u * 1000000u)
#define GF_CONN_SWEEP_NS (100u * 1000000u)

static bool same_client(const gf_http_conn *a, const struct sockaddr_storage *b, socklen_t blen)
{
    return a->alen == blen && memcmp(&a->addr, b, blen) == 0;
}

/* The client's address without its port, for counting. */
static void client_key(const struct sockaddr *sa, struct sockaddr_storage *out, socklen_t *len)
{
    memset(out, 0, sizeof *out);
    *len = 0;
    if (sa == NULL)
        return;
    if (sa->sa_family == AF_INET) {
        struct sockaddr_in *o = (struct sockaddr_in *)out;
        o->sin_family = AF_INET;
        o->sin_addr = ((const struct sockaddr_in *)sa)->sin_addr;
        *len = sizeof *o;
    } else if (sa->sa_family == AF_INET6) {
        struct sockaddr_in6 *o = (struct sockaddr_in6 *)out;
        o->sin6_family = AF_INET6;
        o->sin6_addr = ((const struct sockaddr_in6 *)sa)->sin6_addr;
        *len = sizeof *o;
    }
}

/* Write a 408 with a JSON body on a connection libmicrohttpd is not writing
 * to, without blocking (a client that reads nothing simply misses it). */
static void write_408(int fd, const char *what, unsigned secs)
{
    char body[256], msg[512];
    int bl = snprintf(body, sizeof body,
                      "{\"error\":\"the request %s did not arrive within %u s "
                      "(--request-timeout)\"}",
                      what, secs);
    int ml = snprintf(msg, sizeof msg,
                      "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
                      "Connection: close\r\nContent-Length: %d\r\n\r\n%s",
                      bl, body);
    if (ml > 0 && (size_t)ml < sizeof msg) {
        ssize_t w = send(fd, msg, (size_t)ml, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)w;
    }
}

static void *sweeper_main(void *arg)
{
    gf_http_conns *cs = arg;
    headers_cut *cuts = cs->cuts;
    pthread_mutex_lock(&cs->mu);
    while (!cs->stop) {
        uint64_t now = gf_mono_ns();
        size_t n_cuts = 0;
        for (gf_http_conn *c = cs->head; c != NULL; c = c->next) {
            if (c->cut)
                continue;
            uint64_t age = now - c->since_ns;
            const char *what = NULL;
            bool write = true;
            switch (c->phase) {
            case C_IDLE:
                if (c->over_limit && age > GF_CONN_GRACE_NS)
                    what = "", write = false;
                else if (age > cs->idle_ns + cs->read_ns)
                    what = "line";
                break;
            case C_HEADERS:
                if (age > cs->read_ns)
                    what = "headers";
                break;
            case C_BODY:
                if (age > cs->read_ns + GF_CONN_GRACE_NS)
                    what = "body";
                break;
            case C_BUSY: break;
            }
            if (what == NULL)
                continue;
            if (c->phase == C_HEADERS) { /* an inference is recorded: keep what it named */
                if (n_cuts == GF_CONN_RECORD_MAX)
                    continue;
                memcpy(cuts[n_cuts].uri, c->uri, sizeof c->uri);
                cuts[n_cuts++].age_ns = age;
            }
            if (write)
                write_408(c->fd, what, (unsigned)(cs->read_ns / 1000000000u));
            if (write)
                GF_LOG_I("closed a connection: the request %s did not arrive in time", what);
            shutdown(c->fd, SHUT_RDWR); /* libmicrohttpd sees the end and closes it */
            c->cut = true;
        }
        if (n_cuts > 0) {
            pthread_mutex_unlock(&cs->mu);
            for (size_t i = 0; i < n_cuts; i++)
                gf_http_refused_headers(cs->h, cuts[i].uri, cuts[i].age_ns / 1000);
            pthread_mutex_lock(&cs->mu);
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += GF_CONN_SWEEP_NS;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&cs->cond, &cs->mu, &ts);
    }
    pthread_mutex_unlock(&cs->mu);
    return NULL;
}

gf_status gf_http_conns_start(gf_http *h, gf_err *err)
{
    gf_http_conns *cs = calloc(1, sizeof *cs);
    if (cs == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&cs->mu, NULL);
    pthread_cond_init(&cs->cond, NULL);
    cs->idle_ns = (uint64_t)h->cfg.conn_timeout_s * 1000000000u;
    cs->read_ns = (uint64_t)h->cfg.request_timeout_s * 1000000000u;
    cs->per_client = h->cfg.max_conns_per_client;
    cs->h = h;
    if (pthread_create(&cs->sweeper, NULL, sweeper_main, cs) != 0) {
        pthread_mutex_destroy(&cs->mu);
        pthread_cond_destroy(&cs->cond);
        free(cs);
        return gf_err_set(err, GF_ERR_NOMEM, "cannot start the connection sweeper");
    }
    cs->started = true;
    h->conns = cs;
    return GF_OK;
}

void gf_http_conns_stop(gf_http *h)
{
    gf_http_conns *cs = h->conns;
    if (cs == NULL || !cs->started)
        return;
    pthread_mutex_lock(&cs->mu);
    cs->stop = true;
    pthread_cond_broadcast(&cs->cond);
    pthread_mutex_unlock(&cs->mu);
    pthread_join(cs->sweeper, NULL);
    cs->started = false;
}

void gf_http_conns_free(gf_http *h)
{
    gf_http_conns *cs = h->conns;
    if (cs == NULL)
        return;
    gf_http_conns_stop(h);
    /* libmicrohttpd has closed every connection (CLOSED freed each) */
    pthread_mutex_destroy(&cs->mu);
    pthread_cond_destroy(&cs->cond);
    free(cs);
    h->conns = NULL;
}

enum MHD_Result gf_http_conn_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    (void)addrlen;
    gf_http_conns *cs = ((gf_http *)cls)->conns;
    struct sockaddr_storage key;
    socklen_t klen;
    client_key(addr, &key, &klen);
    if (klen == 0)
        return MHD_YES;
    size_t same = 0;
    pthread_mutex_lock(&cs->mu);
    for (gf_http_conn *o = cs->head; o != NULL; o = o->next)
        same += same_client(o, &key, klen);
    pthread_mutex_unlock(&cs->mu);
    /* up to the limit: served; up to twice it: told 429 (or cut after a
     * second); beyond: not even accepted, so one client holds at most twice
     * its share of --max-conns however fast it reconnects */
    return same >= 2 * (size_t)cs->per_client ? MHD_NO : MHD_YES;
}

void gf_http_conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                         enum MHD_ConnectionNotificationCode toe)
{
    gf_http *h = cls;
    gf_http_conns *cs = h->conns;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        gf_http_conn *c = calloc(1, sizeof *c);
        *socket_context = c;
        if (c == NULL)
            return; /* unguarded, but served */
        const union MHD_ConnectionInfo *fi =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ai =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        c->fd = fi != NULL ? fi->connect_fd : -1;
        client_key(ai != NULL ? ai->client_addr : NULL, &c->addr, &c->alen);
        c->phase = C_IDLE;
        c->since_ns = gf_mono_ns();
        pthread_mutex_lock(&cs->mu);
        size_t same = 0;
        if (c->alen > 0)
            for (gf_http_conn *o = cs->head; o != NULL; o = o->next)
                same += same_client(o, &c->addr, c->alen) && !o->over_limit;
        c->over_limit = c->alen > 0 && same >= cs->per_client;
        c->next = cs->head;
        if (cs->head != NULL)
            cs->head->prev = c;
        cs->head = c;
        cs->n++;
        pthread_mutex_unlock(&cs->mu);
        return;
    }
    gf_http_conn *c = *socket_context;
    if (toe != MHD_CONNECTION_NOTIFY_CLOSED || c == NULL)
        return;
    pthread_mutex_lock(&cs->mu);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        cs->head = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    cs->n--;
    pthread_mutex_unlock(&cs->mu);
    free(c);
    *socket_context = NULL;
}

static gf_http_conn *conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci != NULL ? ci->socket_context : NULL;
}

static void set_phase(gf_http *h, gf_http_conn *c, conn_phase p)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&h->conns->mu);
    c->phase = p;
    c->since_ns = gf_mono_ns();
    pthread_mutex_unlock(&h->conns->mu);
}

void *gf_http_conn_uri_log(void *cls, const char *uri, struct MHD_Connection *conn)
{
    gf_http *h = cls;
    gf_http_conn *c = conn_of(conn);
    if (c != NULL) {
        pthread_mutex_lock(&h->conns->mu);
        c->phase = C_HEADERS;
        c->since_ns = gf_mono_ns();
        gf_str_copy(c->uri, sizeof c->uri, uri != NULL ? uri : "");
        pthread_mutex_unlock(&h->conns->mu);
    }
    return NULL; /* *con_cls stays NULL until the first access call */
}

bool gf_http_conn_begin(gf_http_req *r)
{
    gf_http_conn *c = conn_of(r->conn);
    r->sock = c;
    set_phase(r->srv, c, C_BODY);
    return c == NULL || !c->over_limit;
}

bool gf_http_conn_cut_late(gf_http_req *r)
{
    gf_http_conns *cs = r->srv->conns;
    gf_http_conn *c = r->sock;
    if (c == NULL || gf_mono_ns() - r->t0_ns <= cs->read_ns)
        return false;
    /* libmicrohttpd cannot queue a reply before the body is read, and writes
     * nothing while it reads one: the 408 goes on the socket from here */
    pthread_mutex_lock(&cs->mu);
    if (!c->cut)
        write_408(c->fd, "body", (unsigned)(cs->read_ns / 1000000000u));
    c->cut = true;
    pthread_mutex_unlock(&cs->mu);
    GF_LOG_I("closed a connection: the request body did not arrive in time");
    return true;
}

bool gf_http_conn_cut_in_body(const gf_http_req *r)
{
    gf_http_conn *c = r->sock;
    if (c == NULL)
        return false;
    pthread_mutex_lock(&r->srv->conns->mu);
    bool cut = c->cut && c->phase == C_BODY;
    pthread_mutex_unlock(&r->srv->conns->mu);
    return cut;
}

void gf_http_conn_read(gf_http_req *r)
{
    set_phase(r->srv, r->sock, C_BUSY);
}

void gf_http_conn_end(gf_http *h, struct MHD_Connection *conn)
{
    set_phase(h, conn_of(conn), C_IDLE);
}

unsigned gf_http_conns_per_client(const gf_http *h)
{
    return h->conns != NULL ? h->conns->per_client : 0;
}
