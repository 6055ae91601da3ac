/* gpufaas — the parameter cache (runtime/cache).
 *
 * Why one GPU can serve far more models than fit in its memory. Each
 * registered model (one function version's weights) lives in up to three
 * tiers:
 *
 *   store tier   its safetensors file, mapped read-only (always there)
 *   host tier    a pinned host copy in pages of a pinned pool (pinned as the
 *                tier first grows, never freed on eviction), under a byte
 *                budget, LRU eviction
 *   device tier  physical device pages mapped into the model's own
 *                contiguous virtual range, under the backend's budget;
 *                accounted in whole pages, so a model fits whenever enough
 *                pages are free (the pool never fragments)
 *
 * A model is an ordered list of tensors (execution order: the order the
 * function declares, else file order), each 256-byte aligned in the range.
 *
 * Leases: gf_cache_acquire pins a model (reference count) and starts the
 * transfers it needs, returning at once. gf_lease_param(i) returns tensor i's
 * device address once that tensor is on the device (cuda: the compute stream
 * waits for that tensor's copy; cpu: the caller waits) — so compute starts on
 * tensor 0 while later tensors still copy (pipelined swap-in, as PipeSwitch).
 * A leased or loading model is never evicted. Two acquires of a model that is
 * loading share the load.
 *
 * Swap-in runs on the backend's copy stream, tensor by tensor, big tensors in
 * chunks: from the host tier directly, or from the store tier through the host
 * tier when it has room (filling it on the way) or else through a small ring
 * of pinned staging buffers. A loader thread owned by the cache does the
 * host-side work, so acquire never waits for bytes to move. The loads under
 * way share the copy stream a slice at a time (about 0.5 ms of the link
 * each), the earliest due first (gf_cache_acquire_by): a load due soon
 * overtakes a long one queued before it instead of waiting behind it.
 *
 * Eviction takes whole models, by a policy: LRU, GreedyDual-Size (priority
 * = clock + reload cost / size; reload cost = a fixed setup cost + bytes /
 * measured bandwidth of the tier the model would come back from), or
 * GreedyDual-Size-Frequency (clock + uses x a miss's cost / size, every miss
 * costing the same fixed setup cost: a cold request risks its SLO whatever
 * its size, so the small and the often used stay — Cherkasova's GDSF for the
 * hit ratio; with the reload time as the cost instead, cost / size is nearly
 * one constant and GDSF only counts uses). Each model's residency
 * (core/residency.h) comes first: pinned models are never evicted, models
 * inside their keep-warm time only when pinned and kept-warm bytes exceed
 * the pin limit, and an idle model of a lower priority class goes before
 * any of a higher one. Parameters are read-only, so eviction unmaps pages
 * and copies nothing back.
 *
 * Every load, hit and eviction is reported to a callback; counters and a
 * residency snapshot are available at any time.
 *
 * Threading: every function may be called from any thread; an internal mutex
 * protects the cache. gf_lease_param must be called by the thread that drives
 * the compute stream.
 */
#ifndef GF_CACHE_H
#define GF_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/error.h"
#include "core/residency.h"
#include "core/tier.h"
#include "core/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf_cache gf_cache;
typedef struct gf_cache_model gf_cache_model;
typedef struct gf_lease gf_lease;

/* gf_tier and gf_evict_policy: core/tier.h. */

typedef enum gf_cache_event_kind {
    GF_CACHE_EV_LOAD = 0,  /* a model arrived in tier `to` from tier `from` */
    GF_CACHE_EV_HIT = 1,   /* an acquire found the model on the device */
    GF_CACHE_EV_EVICT = 2, /* a model left tier `from` (to = the tier it now lives in) */
    GF_CACHE_EV_FAIL = 3,  /* a load failed (message in `message`) */
} gf_cache_event_kind;

typedef struct gf_cache_event {
    gf_cache_event_kind kind;
    const char *key;       /* the model's key; valid during the callback */
    gf_tier from, to;
    uint64_t bytes;        /* load: bytes copied; eviction: bytes the tier freed */
    uint64_t micros;       /* load: from acquire to the last byte on the device */
    const char *message;   /* GF_CACHE_EV_FAIL only, else NULL */
} gf_cache_event;

/* Called for every event, from the thread where it happened (a caller or the
 * loader thread), with the cache's lock held: it must be quick and must not
 * call back into the cache. */
typedef void (*gf_cache_event_fn)(void *arg, const gf_cache_event *ev);

typedef struct gf_cache_config {
    uint64_t host_budget;     /* bytes of pinned host tier (0 = no host tier) */
    gf_evict_policy policy;   /* device-tier policy; the host tier is always LRU */
    size_t chunk_bytes;       /* copy chunk for big tensors (0 = 4 MiB) */
    int staging_buffers;      /* pinned staging ring for store-tier loads (0 = 3) */
    double setup_cost_us;     /* GDS: fixed reload cost per model (0 = 100 us) */
    uint64_t pin_limit;       /* bytes that pinned and kept-warm models may hold on the device
                                 (0 = half the device budget) */
    bool loads_in_order;      /* the loads under way take the copy stream in the order they
                                 began, not the earliest due first (benchmarks' control) */
    gf_cache_event_fn on_event; /* may be NULL */
    void *event_arg;
} gf_cache_config;

/* Create a cache over backend be (borrowed; must outlive the cache). Starts
 * the loader thread, allocates the staging ring, and registers the cache as
 * the backend's reclaimer, so that a device allocation that does not fit
 * (activations, the kernels' workspace) evicts idle models: one cache per
 * backend. */
gf_status gf_cache_new(gf_backend *be, const gf_cache_config *cfg, gf_cache **out, gf_err *err);

/* Wait for in-flight loads, drop every model (all leases must be released),
 * stop the loader. NULL is a no-op. */
void gf_cache_free(gf_cache *c);

/* ---- models ---- */

/* Register the weights file at path under key (copied; unique in the cache).
 * order lists the names of the tensors to load, in execution order; NULL
 * loads every tensor in file order. The file is validated and mapped now; a
 * name in order that the file lacks is GF_ERR_NOT_FOUND naming it. A model
 * larger than the device budget is accepted here (acquire rejects it). The
 * model is owned by the cache; *out stays valid until gf_cache_model_remove. */
gf_status gf_cache_model_add(gf_cache *c, const char *key, const char *path,
                             const char *const *order, size_t n_order, gf_cache_model **out,
                             gf_err *err);

/* Drop a model from every tier and free it. GF_ERR_BUSY while it is leased
 * or loading. The caller makes sure no other thread is acquiring it. */
gf_status gf_cache_model_remove(gf_cache *c, gf_cache_model *m, gf_err *err);

/* The model registered under key, or NULL. */
gf_cache_model *gf_cache_model_find(gf_cache *c, const char *key);

const char *gf_cache_model_key(const gf_cache_model *m);
/* Tensors in execution order; the descriptors live as long as the model. */
size_t gf_cache_model_count(const gf_cache_model *m);
const gf_st_tensor *gf_cache_model_tensor(const gf_cache_model *m, size_t i);
/* Index of the tensor named name in execution order, or -1. */
long gf_cache_model_index(const gf_cache_model *m, const char *name);
/* Bytes the model occupies on the device and in the host tier (whole pages
 * in both: the host tier's pinned pages are the device's size), and the
 * bytes a swap-in copies (its tensors with their alignment). */
uint64_t gf_cache_model_device_bytes(const gf_cache_model *m);
uint64_t gf_cache_model_host_bytes(const gf_cache_model *m);
uint64_t gf_cache_model_copy_bytes(const gf_cache_model *m);
/* True when every tensor of m is on the device now (no swap-in needed). Any
 * thread, no lock; the answer may be stale by the time it is acted on (an
 * acquire then simply loads it again). */
bool gf_cache_model_on_device(const gf_cache_model *m);
/* True while a swap-in of m to the device is under way (the same caveat). */
bool gf_cache_model_loading(const gf_cache_model *m);

/* The residency of m (GF_RESIDENCY_DEFAULT until set). */
gf_residency gf_cache_model_residency(gf_cache *c, const gf_cache_model *m);

/* Set m's residency. Pinning a model whose pages would take the pinned
 * bytes past the pin limit is GF_ERR_TOO_LARGE (the message gives the
 * sizes) and changes nothing. Pinning does not load the model: prefetch it. */
gf_status gf_cache_model_set_residency(gf_cache *c, gf_cache_model *m, const gf_residency *r,
                                       gf_err *err);

/* ---- leases ---- */

/* Pin m and start whatever transfers it needs; returns at once.
 * GF_ERR_BUSY (not a failure): it cannot fit without evicting models that
 * are leased or loading — release something and retry. GF_ERR_TOO_LARGE: it
 * is larger than the whole device budget (the message gives both sizes).
 * On success *out is owned by the caller until gf_lease_release. */
gf_status gf_cache_acquire(gf_cache *c, gf_cache_model *m, gf_lease **out, gf_err *err);

/* gf_cache_acquire for a use due at due_us (gf_mono_us; 0 = no deadline).
 * When the model has to load (or is loading), its load is due by the
 * earliest deadline of the leases waiting for it: the loader shares the
 * copy stream between the loads under way a slice at a time, the earliest
 * due first, so a small load due soon overtakes a long one queued before
 * it. A load no lease gave a deadline (a prefetch, gf_cache_acquire) is due
 * GF_CACHE_UNDUE_US (one second) after it began. */
#define GF_CACHE_UNDUE_US 1000000u
gf_status gf_cache_acquire_by(gf_cache *c, gf_cache_model *m, uint64_t due_us, gf_lease **out,
                              gf_err *err);

/* Device address of tensor i (execution order) once it is on the device:
 * on cuda the compute stream waits for its copy; on cpu the caller waits.
 * Fails when the load failed. The address is valid until the release. */
gf_status gf_lease_param(gf_lease *l, size_t i, void **dev, gf_err *err);

/* True when this acquire had to load the model (it was not on the device or
 * another acquire's load was still running). */
bool gf_lease_cold(const gf_lease *l);
/* The tier the load read from (GF_TIER_DEVICE for a hit). */
gf_tier gf_lease_source(const gf_lease *l);
gf_cache_model *gf_lease_model(const gf_lease *l);

/* Wait until every tensor of the lease's model is on the device (or the load
 * failed, which is returned). */
gf_status gf_lease_wait_all(gf_lease *l, gf_err *err);

/* Unpin. Work queued on the compute stream that reads the parameters may
 * still be running: the cache waits for it before reusing the pages. */
void gf_lease_release(gf_lease *l);

/* ---- explicit placement ---- */

/* Start loading m into tier (GF_TIER_HOST or GF_TIER_DEVICE) without a
 * lease; returns at once. Already there: GF_OK. GF_ERR_BUSY / TOO_LARGE as
 * for acquire. */
gf_status gf_cache_prefetch(gf_cache *c, gf_cache_model *m, gf_tier tier, gf_err *err);

/* Evict m from tier (GF_TIER_DEVICE: device only; GF_TIER_HOST: host and
 * device). GF_ERR_BUSY while leased or loading. Not resident: GF_OK. */
gf_status gf_cache_evict(gf_cache *c, gf_cache_model *m, gf_tier tier, gf_err *err);

/* Evict idle device models (policy order) until at least bytes of the device
 * budget are free, or nothing idle is left. Returns the bytes now free.
 * gf_dev_alloc calls it when an allocation does not fit. */
uint64_t gf_cache_evict_idle(gf_cache *c, uint64_t bytes);

/* Wait until no load is in flight. */
void gf_cache_drain(gf_cache *c);

/* ---- observability ---- */

typedef struct gf_cache_stats {
    uint64_t hits, misses;                 /* acquires on / off the device */
    uint64_t loads_from_host, loads_from_store, load_failures;
    uint64_t evictions_device, evictions_host;
    uint64_t bytes_to_device, bytes_to_host;
    uint64_t load_us_total;                /* sum of load times */
    uint64_t device_used, device_budget;   /* backend accounting, bytes */
    uint64_t device_model_bytes;           /* pages held by models (shared pages included) */
    uint64_t host_used, host_budget;
    uint64_t host_pinned;                  /* pinned for the host tier so far (<= budget) */
    uint64_t pinned_bytes;                 /* device pages of the models pinned (resident or not) */
    uint64_t pin_limit;                    /* what pinned and kept-warm models may hold */
    uint32_t models, models_on_device, models_in_host;
    double host_bw_gbps, store_bw_gbps;    /* measured swap-in bandwidth (EWMA) */
} gf_cache_stats;

void gf_cache_get_stats(gf_cache *c, gf_cache_stats *out);

/* One model's residency, as seen by gf_cache_snapshot. */
typedef struct gf_cache_residency {
    const char *key;           /* valid during the callback */
    bool on_device, loading, in_host;
    int leases;
    uint64_t device_bytes, host_bytes;
    uint64_t hits;
    uint64_t last_used_us;     /* monotonic microseconds of the last acquire or release */
} gf_cache_residency;

/* Call fn for every model (under the lock: fn must not call the cache). */
void gf_cache_snapshot(gf_cache *c, void (*fn)(void *arg, const gf_cache_residency *r),
                       void *arg);

#ifdef __cplusplus
}
#endif

#endif /* GF_CACHE_H */
