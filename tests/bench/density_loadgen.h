/* gpufaas benchmarks — bench_density's HTTP load generator for `gpufaas serve`: one
 * thread, epoll, keep-alive connections to 127.0.0.1:PORT, one request in
 * flight per connection (no pipelining).
 *
 * Open loop (gf_dlg_open_loop): each request has an arrival time; it is
 * written at that time on an idle connection (a new one when none is idle,
 * up to a limit; beyond it the request waits in the generator). Its latency
 * runs from its arrival time, not from the write, so a slow server is
 * charged for the requests it makes wait (no coordinated omission).
 *
 * Closed loop (gf_dlg_closed_loop): C connections, each writing its next
 * request as soon as it has read the answer; for a throughput.
 *
 * Answers of POST /v1/functions/{name}/invoke are parsed for "cold" and
 * "timing_us"; any other answer is recorded by its status (503 with its
 * Retry-After). Free of Check and of the server's code. (loadgen.h is
 * bench_http's and bench_state's: one request body, fixed connections; this
 * one sends each function its own request on an arrival schedule.) */
#ifndef GF_BENCH_DENSITY_LOADGEN_H
#define GF_BENCH_DENSITY_LOADGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The requests to send, one per target (a function): whole HTTP requests. */
typedef struct gf_dlg_targets {
    char **req;   /* req[i]: the bytes of target i's request */
    size_t *len;
    size_t n;
} gf_dlg_targets;

/* One request of a run and what became of it. */
typedef struct gf_dlg_req {
    double t;          /* open loop: arrival, seconds after the start */
    int target;        /* index into the targets */
    /* filled by the run */
    double latency;    /* seconds: arrival (open loop) or write (closed loop) to the last byte */
    int status;        /* HTTP status; 0 when never answered, -1 when the connection failed */
    bool cold;         /* "cold": true */
    uint32_t queue_us, load_us, exec_us, total_us; /* "timing_us" */
    int retry_after;   /* seconds, when the answer had Retry-After; else -1 */
} gf_dlg_req;

/* Send reqs[0..n) (sorted by t) at their arrival times over at most
 * max_conns connections; returns when every one is answered or, deadline_s
 * after the last arrival, with the rest left unanswered (status 0). 0 on
 * success, -1 with msg filled when the generator itself fails. */
int gf_dlg_open_loop(uint16_t port, const gf_dlg_targets *tg, gf_dlg_req *reqs, size_t n,
                    int max_conns, double deadline_s, char *msg, size_t cap);

/* Closed loop over `conns` connections for warmup_s + seconds, taking the
 * targets in the order of seq (cycled). Sets *answered to the requests
 * written after the warm-up and answered before the end, *errors to the
 * answers (warm-up included) that were not 200. 0 on success, -1 with msg. */
int gf_dlg_closed_loop(uint16_t port, const gf_dlg_targets *tg, const int *seq, size_t n_seq,
                      int conns, double warmup_s, double seconds, size_t *answered,
                      size_t *errors, char *msg, size_t cap);

/* Monotonic seconds. */
double gf_dlg_now(void);

#endif /* GF_BENCH_DENSITY_LOADGEN_H */
