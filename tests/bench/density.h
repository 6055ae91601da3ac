/* gpufaas benchmarks — bench_density's shared pieces: the function mix, the
 * server it drives, one trial at N functions. See bench_density.c. */
#ifndef GF_BENCH_DENSITY_H
#define GF_BENCH_DENSITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "httpharness.h"
#include "density_loadgen.h"

/* What the run is configured with (command line). */
typedef struct dn_opts {
    const char *gpufaas, *worker;
    const char *device; /* "cpu" or "cuda:0" */
    bool quick;
    double scale;             /* model sizes: 5-500 MB times this */
    uint64_t device_memory;   /* per worker */
    uint64_t page_size;       /* 0 = the workers' default */
    double slo_multiple;      /* SLO = this x the function's warm latency */
    bool slo_auto;            /* --slo-multiple auto: chosen from the queue model */
    double ratio;             /* emulated swap time / compute time at the reference size */
    double target;            /* attainment a trial must reach (0.99) */
    double load;              /* arrival rate / the all-warm throughput (0.5) */
    double max_ratio;         /* largest N searched, in device capacities */
    int rows;                 /* rows per request of a function at the reference size */
    double exec_exponent;     /* compute time grows as size^this (rows per request shrink) */
    double warmup_s, seconds; /* per trial: not counted, counted */
    const char *policies;     /* "lru,gds,..." */
    bool levers;
    size_t levers_at;   /* > 0: no search; the levers at this many functions */
    int lever_rounds;   /* pairs (baseline, lever) per lever */
    const char *lever_names; /* "pin,pin_tight,...": only these levers (NULL: all) */
    int repeats;        /* the search: trials per N, the majority decides */
    const char *keep;   /* keep the work directory here (NULL: a temporary one, removed) */
    const char *trials; /* "N@RPS,..." : run these trials instead of the search (RPS left
                           out: the run's rate) */
    bool uncontrolled;  /* with trials: each alone, no all-warm controls around it */
    const char *schedule; /* the workers' --schedule (NULL: their default, ready-first) */
    const char *variants; /* with trials: "FLAGS;FLAGS;..." servers to run each trial on in
                             turn (extra serve flags, space-separated), for paired
                             comparisons in one run */
} dn_opts;

/* One function of the mix. */
typedef struct dn_fn {
    char name[16];
    int64_t hidden;        /* mlp 16 -> hidden -> hidden -> 1 */
    int rows;              /* rows per request (its max_batch_size: no batching) */
    uint64_t bytes;        /* weights */
    uint64_t device_bytes; /* on the device: tensors 256-byte aligned, whole pages */
    double warm_ms;        /* calibrated warm latency */
    double exec_ms;        /* calibrated execution time in the worker (part of warm_ms) */
    double slo_ms;         /* slo_multiple x warm_ms */
    double swap_ms;        /* device_bytes over the emulated link (0: not emulated) */
    double weight;         /* Zipf popularity (rank = index) */
} dn_fn;

/* A trial's outcome over its counted requests. */
typedef struct dn_result {
    size_t n; /* functions */
    size_t requests;
    double attainment;                       /* answered 200 within the function's SLO / requests */
    double cold_fraction;                    /* of the answered */
    double rejected;                         /* answered 503 (admission, Retry-After) / requests */
    double p50_ms, p99_ms;                   /* latency of the answered 200s */
    double rate_rps;                         /* the arrival rate */
    double miss_cold, miss_queue, miss_exec; /* misses by their largest part / requests */
    double missed_cold_req, missed_warm_req; /* misses of cold and of warm requests / requests */
    double missed_big;                       /* misses of the largest tenth of the sizes /
                                                requests */
    size_t errors;                           /* other statuses, or no answer */
    /* where the time went (ms, means over the answered 200s and over the
     * misses among them): outside the gateway's own accounting (the client,
     * HTTP, parsing and rendering: latency - total), the gateway's and the
     * worker's queues, the swap, the execution */
    double all_outside, all_queue, all_load, all_exec;
    double miss_outside, miss_queue_ms, miss_load, miss_exec_ms;
    double p99_over_slo;   /* 99th percentile of latency / the function's SLO */
    double exec_inflation; /* mean execution time / its calibrated (unloaded) mean */
    /* the same arrivals replayed through one ideal FIFO executor, each
     * request taking its function's calibrated execution time plus its
     * calibrated overhead outside execution (warm_ms - exec_ms, not
     * queued): what queueing alone allows at this rate and SLO */
    double queue_model_attainment;
    /* the share of the machine's CPU time the hypervisor took from it
     * during the trial (steal, /proc/stat; -1 where unknown): a virtual
     * machine's vCPUs stall while it is high, whatever runs inside */
    double steal;
} dn_result;

/* The server of a run. */
typedef struct dn_server {
    gf_hh_server srv;
    uint16_t port;
    bool up;
} dn_server;

/* Start `gpufaas serve` on state dir <dir>/var with the run's budgets,
 * `policy`, `workers` cpu workers (or the cuda device), the emulated link
 * (bytes/s, 0 = none) and extra flags (NULL-terminated, may be NULL).
 * Exits the program with a message when it fails. */
void dn_server_start(dn_server *s, const dn_opts *o, const char *dir, const char *policy,
                     int workers, uint64_t link_bps, uint64_t host_memory,
                     const char *const *extra);
void dn_server_stop(dn_server *s);

/* Load functions 0..warm_n-1 (as many as fit on the device) onto it. */
void dn_prefetch(const dn_server *s, const dn_fn *fns, size_t warm_n);

/* The all-warm throughput, requests/s: functions 0..warm_n-1 prefetched,
 * then a closed loop of 8 connections over them with Zipf popularity. */
double dn_warm_rps(const dn_server *s, const dn_opts *o, const dn_fn *fns, size_t warm_n,
                   const gf_dlg_targets *tg);

/* One trial: Poisson arrivals at rate_rps over functions fns[0..n) with
 * Zipf popularity, o->warmup_s not counted then o->seconds counted. */
void dn_trial(const dn_server *s, const dn_opts *o, const dn_fn *fns, size_t n,
              const gf_dlg_targets *tg, double rate_rps, uint64_t seed, dn_result *out);

/* The fraction of `seconds` of Poisson arrivals at rate_rps over
 * fns[0..n) (Zipf popularity, arrivals `seed`) that one ideal FIFO executor
 * answers within `multiple` x their function's warm latency, each taking its
 * calibrated execution time (queued) plus its overhead outside execution
 * (warm_ms - exec_ms, not queued): what queueing alone allows. The trials'
 * queue_model_attainment= is the same model on their own arrivals. */
double dn_queue_model(const dn_fn *fns, size_t n, double rate_rps, double multiple,
                      double seconds, uint64_t seed);

/* o->load x the all-warm throughput (the arrival rate of the run's
 * trials): the lowest of three dn_warm_rps (printed), since on a shared
 * machine a throughput measured in a quiet second is not one it keeps. */
double dn_rate_of(const dn_server *s, const dn_opts *o, const dn_fn *fns, size_t warm_n,
                  const gf_dlg_targets *tg);

#define DN_TRIAL_TRIES 3
/* A trial that missed while the hypervisor took more than this share of
 * the machine's CPU time (steal=) does not count either: on this 2-vCPU
 * machine the all-warm set itself misses when steal reaches a few percent
 * (round 6: controls met 99% at steal 0.001, missed at 0.05-0.3). */
#define DN_MAX_STEAL 0.02

/* A trial at n functions and rate between two all-warm controls at the same
 * rate (functions 0..warm_n-1 prefetched, every one resident). The machine
 * is shared: a control that misses the target says it was too busy to meet
 * the SLO even with everything resident, and then the trial does not count
 * and is run again (DN_TRIAL_TRIES in all), as is a trial that failed with
 * steal= above DN_MAX_STEAL. The control after is run only when the trial
 * failed. Prints the trial (label) and any missed control.
 * True when *out stands; false when every try was spoilt (inconclusive). */
bool dn_controlled_trial(const dn_server *s, const dn_opts *o, const dn_fn *fns, size_t n,
                         size_t warm_n, const gf_dlg_targets *tg, double rate, uint64_t *seed,
                         const char *label, dn_result *out);

/* ---- the mix (density_mix.c) ---- */

#define DN_IN 16
#define DN_OUT 1
#define DN_MB 1e6

uint64_t dn_round_up(uint64_t x, uint64_t a);
/* n functions "fn0000".. with log-uniform sizes over 5-500 MB x o->scale,
 * Zipf(0.9) weights by index, rows per request for a compute time of
 * size^o->exec_exponent; device bytes in pages of `page`. */
void dn_mix_make(dn_fn *f, size_t n, const dn_opts *o, uint64_t page);
/* Write f's weights (seeded by i; unless present) and manifest under dir;
 * extra: more manifest members as a JSON object's text (may be NULL). */
void dn_fn_write(const dn_fn *f, size_t i, const char *dir, bool weights, const char *extra);
/* Deploy what dn_fn_write wrote (exits on failure). */
void dn_deploy(const dn_server *s, const dn_fn *f, const char *dir);
/* POST (body may be NULL), exiting unless the status is want. */
void dn_post(const dn_server *s, const char *path, const char *body, long want);
/* method path body, exiting unless the status is want. */
void dn_http(const dn_server *s, const char *method, const char *path, const char *body, long want);
/* The invoke requests, one per function (binary input, JSON answer). */
void dn_targets_make(gf_dlg_targets *tg, const dn_fn *f, size_t n);
void dn_targets_free(gf_dlg_targets *tg);

/* ---- levers (density_levers.c) ---- */

/* Measure each lever at n functions and the run's arrival rate with the
 * server s runs (policy), printing lever_<name>_attainment= and friends. */
void dn_levers(dn_server *s, const dn_opts *o, const char *model_dir, const char *state_dir,
               const char *policy, dn_fn *fns, size_t n, size_t warm_n, const gf_dlg_targets *tg,
               double rate, uint64_t link, uint64_t host);

/* Print a trial as one line "trial label=... n=... attainment=... ...". */
void dn_print_trial(const char *label, const dn_result *r);

/* Exit with a message. */
_Noreturn void dn_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The machine's 1-minute load average, as text (other engineers' work on a
 * shared machine shows up here, and in every latency). */
const char *dn_loadavg(void);

/* CPU time of the machine so far (/proc/stat's first line, in ticks): all
 * of it, and the part the hypervisor stole. False where unreadable. */
bool dn_cpu_ticks(uint64_t *total, uint64_t *steal);

/* Deterministic random numbers. */
uint64_t dn_rand(uint64_t *s);
double dn_uniform(uint64_t *s); /* in (0, 1) */

#endif /* GF_BENCH_DENSITY_H */
