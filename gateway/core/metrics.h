/* gpufaas — the gateway's metrics (gateway/core): one table of definitions,
 * thread-safe updates, Prometheus text exposition. */
#ifndef GF_GATEWAY_CORE_METRICS_H
#define GF_GATEWAY_CORE_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/error.h"

typedef struct gw_metrics gw_metrics;

/* The metric families, in the order they are exposed (the definitions, with
 * their names and help, are one table in metrics.c; docs/operations.md lists
 * them). Every per-function family carries {function, version}: a request
 * is counted under the version that served (or refused) it, and under ""
 * for both when it named no function or version that exists, so random
 * names cannot grow /metrics. */
typedef enum {
    GW_M_REQUESTS = 0,        /* counter   {function, version, code}: inference requests
                                 answered, refused ones included */
    GW_M_REQUEST_DURATION,    /* histogram {function, version} seconds */
    GW_M_QUEUE_DURATION,      /* histogram {function, version} seconds */
    GW_M_COLD_STARTS,         /* counter   {function, version} */
    GW_M_BATCH_SIZE,          /* histogram {function, version} requests per batch */
    GW_M_SLO_REQUESTS,        /* counter   {function, version, result} */
    GW_M_SWAP_BYTES,          /* counter   {worker, from, to} */
    GW_M_SWAP_DURATION,       /* histogram {worker} seconds */
    GW_M_EVICTIONS,           /* counter   {worker} */
    GW_M_DEVICE_MEMORY,       /* gauge     {worker, kind} */
    GW_M_HOST_MEMORY,         /* gauge     {worker, kind} */
    GW_M_WORKERS,             /* gauge     {state} */
    GW_M_WORKER_RESTARTS,     /* counter   {worker} */
    GW_M_STORE_RECORDS,       /* counter   {outcome}: committed, dropped, rejected, lost */
    GW_M_VERSIONS,            /* gauge     {state}: function versions ready, broken, deleted
                                 (held by requests in flight) */
    GW_M_WORKER_HUNG,         /* counter   {worker}: killed for a missed heartbeat */
    GW_M_SHARED_UP,           /* gauge     the shared store could be read at the last try */
    GW_M_SHARED_SYNCED,       /* gauge     Unix time of the last successful read of it */
    /* Triton's statistics extension reads these (gateway/core/stats.c) */
    GW_M_INFERENCES,          /* counter   {function, version}: rows inferred successfully */
    GW_M_EXECUTIONS,          /* counter   {function, version}: batches run successfully */
    GW_M_PHASE_COUNT,         /* counter   {function, version, phase}: requests timed */
    GW_M_PHASE_SECONDS,       /* counter   {function, version, phase}: their summed time */
    GW_M_BATCH_EXECUTIONS,    /* counter   {function, version, batch_size} */
    GW_M_BATCH_SECONDS,       /* counter   {function, version, batch_size, phase} */
    GW_M_LAST_INFERENCE,      /* gauge     {function, version}: Unix time, seconds */
    GW_M_MODEL_SWAP_INS,      /* counter   {function, version}: loads onto a device */
    GW_M_MODEL_SWAP_BYTES,    /* counter   {function, version}: their bytes */
    GW_M_MODEL_SWAP_SECONDS,  /* counter   {function, version}: their summed time */
    GW_M_TENSOR_COPIED,       /* counter   {process, direction}: core/copies.h's bytes */
    GW_M_COUNT_
} gw_metric_id;

gw_metrics *gw_metrics_new(void);
void gw_metrics_free(gw_metrics *m);

/* Add delta to a counter, or set a gauge, for the label values (as many as
 * the family has, in its order). */
void gw_metric_add(gw_metrics *m, gw_metric_id id, const char *const *labels, double delta);
void gw_metric_set(gw_metrics *m, gw_metric_id id, const char *const *labels, double value);
/* Record one observation in a histogram. */
void gw_metric_observe(gw_metrics *m, gw_metric_id id, const char *const *labels, double value);
/* Several updates under one lock: each adds value to a counter, sets a
 * gauge or observes value in a histogram, by the family's kind (a request's
 * figures are recorded with one call, not a lock and lookup each). */
typedef struct gw_metric_slot gw_metric_slot;
typedef struct gw_metric_op {
    gw_metric_id id;
    const char *const *labels;
    double value;
    gw_metric_slot *slot; /* NULL, or where this op's series is remembered: an op
                             with a slot always comes with the same labels */
} gw_metric_op;
/* A remembered lookup (the key's build, hash and compare cost more than the
 * update, for a dozen series per request): the series an op found, used
 * while no series has been freed since. Zeroed = empty. Read and written
 * under the metrics' lock; a version keeps one per series it updates on
 * every request. */
struct gw_metric_slot {
    void *series;
    uint64_t gen;
};
void gw_metric_apply(gw_metrics *m, const gw_metric_op *ops, size_t n);
/* Drop every series of a family (gauges recomputed from scratch). */
void gw_metric_clear(gw_metrics *m, gw_metric_id id);
/* Drop every series labelled with this function and version, of every
 * per-function family: a version that nothing refers to any more leaves
 * nothing behind (registry.c calls it when the last reference goes). */
void gw_metrics_forget_version(gw_metrics *m, const char *function, const char *version);
/* Current value of a counter/gauge series (0 when absent); for tests. */
double gw_metric_get(gw_metrics *m, gw_metric_id id, const char *const *labels);

/* Call fn for every series of a counter or gauge family whose first
 * n_prefix label values equal prefix's, with all its label values and its
 * value. The metrics' lock is held during the calls: fn must not call back
 * into m. */
typedef void (*gw_metric_each_fn)(void *arg, const char *const *labels, double value);
void gw_metric_each(gw_metrics *m, gw_metric_id id, const char *const *prefix, int n_prefix,
                    gw_metric_each_fn fn, void *arg);

/* Append the text exposition (version 0.0.4) of every family. */
gf_status gw_metrics_write(gw_metrics *m, gf_buf *out);

#endif /* GF_GATEWAY_CORE_METRICS_H */
