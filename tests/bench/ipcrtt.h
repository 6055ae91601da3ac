/* gpufaas benchmarks — the worker round trip alone (no HTTP): a tiny mlp
 * (16 -> 32 -> 4, batch 1, FP32) on a real gpufaas-worker driven over its
 * socketpair. Used by bench_ipc, and by bench_http to subtract it from the
 * HTTP latency. */
#ifndef GF_BENCH_IPCRTT_H
#define GF_BENCH_IPCRTT_H

typedef struct gf_ipcrtt {
    char device_name[128]; /* the worker's READY, e.g. "cpu (OpenBLAS, 1 thread)" */
    int rounds;
    double p50_us, p99_us, mean_us; /* INFER written -> RESULT read and decoded */
    double ping_p50_us;             /* PING -> PONG */
    double queue_mean_us;           /* the worker's own queue_us */
    double exec_mean_us;            /* the worker's own exec_us */
    /* the worker's device allocations and frees per warm request (its STATS
     * before and after `rounds` more requests): 0 with the request arena */
    double device_allocs_per_request, device_frees_per_request;
} gf_ipcrtt;

/* Start worker_exe on device ("cpu", "cuda:0") in a temporary directory,
 * load the tiny mlp, time `rounds` INFERs and PINGs after `warmup` of each,
 * shut the worker down and fill *out. Returns 0, or 1 after printing what
 * failed to stderr. */
int gf_ipcrtt_run(const char *device, const char *worker_exe, int warmup, int rounds,
                  gf_ipcrtt *out);

#endif /* GF_BENCH_IPCRTT_H */
