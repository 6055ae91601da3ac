/* gpufaas benchmarks — an HTTP load generator (tests/bench): one thread,
 * epoll, C keep-alive connections to 127.0.0.1:PORT, one request in flight
 * per connection (no pipelining). Closed loop (each connection sends its
 * next request as soon as the answer is read) or open loop at a given rate
 * (requests start on a schedule, on whichever connection is free). Latency
 * is measured per request, from the write to the last byte of the answer.
 * Used by bench_http and bench_state. */
#ifndef GF_BENCH_LOADGEN_H
#define GF_BENCH_LOADGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GF_LG_MAX_CONNS 64

typedef struct gf_lg_conn {
    int fd;
    double t0;     /* when the request in flight was written */
    size_t sent;   /* bytes of the request written so far */
    char in[8192]; /* the answer so far */
    size_t got;
    bool busy; /* a request is in flight */
} gf_lg_conn;

typedef struct gf_lg {
    /* set by the caller */
    const char *req; /* the whole HTTP request */
    size_t req_len;
    int expect;  /* the status every answer should have (200) */
    double rate; /* requests/s to offer, 0 = closed loop */
    const char *name; /* for messages ("bench_http") */
    /* results, per run */
    double *lat; /* seconds, per measured request */
    size_t n_lat, cap_lat;
    long errors;       /* answers without the expected status */
    size_t n_total;    /* answers read, warm-up included, over every run */
    size_t n_measured; /* answers to requests started after the warm-up and read before the end */
    char sample[2048]; /* one answer's body with the expected status */
    bool have_sample;
    /* internal */
    int epfd;
    gf_lg_conn conns[GF_LG_MAX_CONNS];
    int n;
} gf_lg;

/* Run n connections for warmup_s + seconds: g->lat holds the latencies of
 * the requests written after the warm-up and answered before the end.
 * Exits the process with a message when the server cannot be reached or a
 * connection breaks. */
void gf_lg_run(gf_lg *g, uint16_t port, int n, double warmup_s, double seconds);

/* Free the latencies. */
void gf_lg_free(gf_lg *g);

/* Monotonic seconds. */
double gf_lg_now(void);

#endif /* GF_BENCH_LOADGEN_H */
