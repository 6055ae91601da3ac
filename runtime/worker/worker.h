/* gpufaas — the worker process (runtime/worker).
 *
 * One gpufaas-worker per GPU (or per CPU slot), started by the gateway with
 * a connected Unix socket and kept warm: the backend (CUDA context, cuBLAS,
 * device page pool), the parameter cache and its pinned staging ring are
 * created once, in gf_worker_new, never per request. The protocol is
 * runtime/ipc.h (docs/protocol.md).
 *
 * Threads of a running worker:
 *   reader    (the thread calling gf_worker_run) reads frames, answers HELLO,
 *             PING and GET_STATS itself, queues LOAD/UNLOAD for the admin
 *             thread and INFER for the executor, and watches SIGTERM/SIGINT.
 *             When the executor is idle and a request is for a warm model
 *             whose function takes at most GF_WORKER_INLINE_US (100 us), the
 *             reader runs it itself: a thread hand-off costs more than that;
 *   executor  runs INFER requests one at a time on the compute stream. Once a
 *             request holds its lease, the first queued request of another
 *             model is leased too (by the executor, or by the reader when it
 *             arrives during a run), so that model's swap-in runs on the copy
 *             stream while the current one computes;
 *   admin     prepares function versions (kind load, derived parameters,
 *             cache registration, prefetch) and unloads them;
 *   events    forwards the cache's residency changes as EVENT frames.
 * Frames out are serialised by one writer lock. One thread at a time drives
 * the compute stream (the executor, or the reader on the quick path). Each
 * thread's code is its own file: reader.c, exec.c, admin.c, events.c;
 * start.c starts and stops them; worker.c holds what they share.
 */
#ifndef GF_WORKER_H
#define GF_WORKER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tier.h"
#include "core/error.h"
#include "core/log.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf_worker_config {
    const char *device;      /* "cpu" (default), "cuda" or "cuda:N"; borrowed */
    uint64_t device_memory;  /* device budget, bytes; 0 = the backend's default */
    uint64_t host_memory;    /* host tier budget, bytes (0 = no host tier) */
    const char *state_dir;   /* borrowed; derived parameters go to <state_dir>/derived */
    int fd;                  /* the connected socket to the gateway (inherited) */
    gf_evict_policy policy;  /* device-tier eviction */
    bool allow_native;       /* plugins may be loaded */
    int worker_id;           /* shown in logs ("worker 3") and READY */
    gf_log_level log_level;  /* GF_LOG_DEFAULT: GPUFAAS_LOG, else info */
    uint64_t max_frame;      /* payload limit of a frame (0 = GF_IPC_DEFAULT_MAX_FRAME) */
    int blas_threads;        /* cpu: OpenBLAS threads (0 = 1) */
    uint64_t copy_bandwidth; /* cpu only, for tests: emulated link, bytes/s (0 = memcpy) */
    uint64_t pin_limit;      /* device bytes pinned and kept-warm models may hold (0 = half the
                                device budget) */
    uint64_t page_size;      /* device page (and host tier page) size, bytes; 0 = the backend's
                                default (2 MiB); benchmarks that scale models down scale it too */
    bool swaps_in_order;     /* swap-ins take the link in the order they began (--swap-order
                                arrival), not the earliest due first (deadline) */
    bool fifo;               /* run requests strictly in arrival order (--schedule fifo); else
                                a request whose model is on the device runs while the one ahead
                                of it waits for its swap-in (ready-first) */
    bool by_deadline;        /* and of the requests that can run now, the one due soonest first
                                (--schedule deadline, the default) */
} gf_worker_config;

/* Defaults for every field (fd = -1: none). */
void gf_worker_config_init(gf_worker_config *cfg);

/* Parse the command line (argv[0] is the program) into cfg, which borrows the
 * argv strings. Flags take "--flag VALUE" or "--flag=VALUE"; sizes are parsed
 * by gf_size_parse (core/units.h). A bad or missing flag is GF_ERR_INVALID
 * naming it. */
gf_status gf_worker_parse_args(int argc, char **argv, gf_worker_config *cfg, gf_err *err);

typedef struct gf_worker gf_worker;

/* Initialise everything a worker keeps for its lifetime: check the socket
 * and the state directory, open the backend, create the cache. cfg is copied
 * (its strings too). A failure here is a start-up failure: the caller exits
 * with GF_WORKER_EXIT_FATAL when gf_worker_start_failure_is_fatal() says so. */
gf_status gf_worker_new(const gf_worker_config *cfg, gf_worker **out, gf_err *err);

/* True for the start-up failures a restart cannot fix (bad configuration, no
 * such device): the worker exits with GF_WORKER_EXIT_FATAL ("do not respawn"). */
bool gf_worker_start_failure_is_fatal(gf_status st);

/* Send READY, serve until SHUTDOWN (or SIGTERM/SIGINT) has drained, the
 * gateway closed the socket, or a malformed frame arrived. Returns the
 * process exit code (GF_WORKER_EXIT_*). Call once. */
int gf_worker_run(gf_worker *w);

/* The whole program: parse the command line, then serve (or run a one-shot
 * mode); returns the process exit code (GF_WORKER_EXIT_*). */
int gf_worker_main(int argc, char **argv);

/* True when argv asks for a one-shot mode: --probe or --validate
 * (runtime/ipc.h, "One-shot modes"). */
bool gf_worker_is_oneshot(int argc, char **argv);

/* Run the one-shot mode argv asks for: answer one JSON object on stdout and
 * return the process exit code (GF_WORKER_EXIT_FATAL for bad flags). */
int gf_worker_oneshot_main(int argc, char **argv);

/* Free everything (after gf_worker_run returned, or instead of it). NULL is a
 * no-op. Does not close cfg.fd's peer; closes fd. */
void gf_worker_free(gf_worker *w);

#ifdef __cplusplus
}
#endif

#endif /* GF_WORKER_H */
