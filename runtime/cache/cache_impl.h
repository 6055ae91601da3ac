/* gpufaas — the parameter cache's insides (runtime/cache): what cache.c (the
 * tiers' accounting, eviction, the models), loader.c (the loader thread and
 * the host tier) and lease.c (acquire and release) share. Not for use outside
 * runtime/cache; the interface is cache.h. */
#ifndef GF_CACHE_IMPL_H
#define GF_CACHE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"
#include "cache/host_pool.h"
#include "cache/slab.h"

/* The loader shares the copy stream between the loads under way a slice
 * at a time, the most due first: a slice is about GF_CACHE_SLICE_US at the
 * link's measured bandwidth (GF_CACHE_SLICE_MIN bytes at least, and until
 * the link is measured; the chunk at most), and at most GF_CACHE_WINDOW slices are queued on the stream at
 * once. A load no lease gave a deadline is due GF_CACHE_UNDUE_US after it
 * began; one that cannot be done by its deadline any more at the measured
 * link speed goes after every load that still can (it is late either way,
 * and would make them late too). */
#define GF_CACHE_SLICE_US 500.0
#define GF_CACHE_SLICE_MIN ((size_t)64 << 10)
#define GF_CACHE_WINDOW 4

typedef enum { DEV_ABSENT = 0, DEV_LOADING = 1, DEV_READY = 2, DEV_FAILED = 3 } dev_state;
typedef enum { JOB_DEVICE = 0, JOB_HOST = 1 } job_kind;

typedef struct {
    const gf_st_tensor *st;
    size_t offset; /* in the device range and in the host copy */
    gf_event *ev;  /* recorded on the copy stream after the tensor's last chunk */
} ctensor;

struct gf_cache_model {
    gf_cache *c;
    char *key;
    gf_st_file *file;
    ctensor *t;
    size_t n;
    size_t *by_name;     /* indices into t, sorted by name */
    size_t layout_bytes; /* the tensors with their alignment (bytes a swap-in copies) */
    size_t range_bytes;  /* device bytes: layout rounded up to whole pages, or to 256 bytes
                            for a small model */
    size_t n_pages;      /* 0 for a small model */
    char *va;            /* the model's device range, reserved for its lifetime; a small
                            model's is in its slab, set while it is placed */
    int64_t *pages;      /* physical page behind each page of the range */
    bool small;          /* placed in a shared page (cache/slab.h) */
    gf_slab *slab;       /* small: the slab it is placed in, or NULL */
    size_t slab_off;
    size_t host_bytes;   /* layout rounded up to whole host pages */
    size_t n_host_pages;
    /* device tier */
    _Atomic int dev;     /* dev_state; READY is read without the lock by param */
    size_t n_recorded;   /* tensors whose event the loader has recorded */
    gf_status load_status;
    char load_msg[256];
    int refs;            /* leases */
    gf_event *last_use;  /* compute-stream work of the last lease */
    bool last_use_recorded;
    gf_event *done_ev;   /* recorded after the last tensor of a load */
    gf_tier src;         /* tier the current or last load reads from */
    uint64_t t_start_us;
    uint64_t deadline_us; /* when the load is due (the earliest its leases gave), 0 = none */
    size_t ld_t, ld_off;  /* the loader's cursor: the next slice's tensor and offset */
    size_t ld_bytes;      /* bytes of the load queued so far */
    bool ld_filling;      /* the load fills the host copy as it goes */
    uint64_t tick;       /* LRU clock value of the last use */
    uint64_t last_used_us;
    double gds_h;        /* GreedyDual-Size(-Frequency) priority */
    uint64_t hits;
    uint64_t uses;       /* acquires, for GDSF (kept across evictions) */
    gf_residency res;    /* pin, priority class, keep-warm time */
    /* host tier */
    char **host_pages;   /* pinned copy: n_host_pages pages of the host pool, or NULL */
    bool host_ready;     /* host_pages hold every byte */
    bool host_filling;   /* a load is filling host_pages */
    int host_users;      /* loads reading host_pages */
    uint64_t host_tick;
    bool fill_host;      /* the current device load fills the host tier */
};

typedef struct {
    gf_cache_model *m;
    job_kind kind;
} cache_job;

typedef struct {
    void *buf;
    gf_event *ev;
    bool used;
} staging_slot;

struct gf_cache {
    gf_backend *be;
    gf_stream *copy, *compute;
    gf_cache_config cfg;
    size_t page_size, chunk;
    size_t host_page;    /* the host pool's page (<= page_size) */
    gf_slab **slabs;     /* shared pages of small models */
    size_t n_slabs, cap_slabs;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* loader progress, job queue, completions */
    gf_cache_model **models;
    size_t n_models, cap_models;
    uint64_t clock;      /* LRU ticks */
    double gds_clock;    /* GreedyDual L */
    uint64_t pinned_bytes; /* range bytes of the models pinned */
    uint64_t pin_limit;  /* what pinned and kept-warm models may hold */
    double bw_host, bw_store; /* bytes per microsecond, measured (core/ema.h) */
    uint64_t host_used;  /* bytes of host pages taken by models */
    gf_host_pool *host_pool; /* the host tier's pinned pages (NULL without a host tier) */
    gf_cache_stats st;
    /* loader */
    pthread_t thread;
    bool thread_started, stop;
    cache_job *jobs;
    size_t jobs_head, jobs_count, jobs_cap;
    int active;               /* jobs the loader has taken and not finished queueing */
    gf_cache_model **loading; /* device loads with slices left to queue */
    size_t n_loading;
    gf_cache_model **pending; /* every slice queued on the copy stream, not yet complete */
    size_t n_pending, cap_pending; /* cap_pending: the room of loading and of pending */
    gf_event *win[GF_CACHE_WINDOW]; /* recorded after each slice queued (a ring) */
    size_t win_bytes[GF_CACHE_WINDOW];
    uint64_t win_t[GF_CACHE_WINDOW]; /* when each was queued */
    size_t win_head, win_count;
    uint64_t link_free_us; /* when the last slice seen done was */
    double bw_link;        /* bytes per microsecond the copy stream moves a slice at
                              (core/ema.h), 0 until measured */
    staging_slot *ring;
    int n_ring, ring_next;
    bool reclaim_set; /* registered as the backend's reclaimer */
};

struct gf_lease {
    gf_cache_model *m;
    bool cold;
    gf_tier src;
};

/* ---- between the files (c->lock held unless said) ------------------------- */

/* Report an event to cfg.on_event, if set. */
void gf_cache_emit(gf_cache *c, gf_cache_event_kind kind, const gf_cache_model *m, gf_tier from,
                   gf_tier to, uint64_t bytes, uint64_t micros, const char *msg);
/* policy.c. m was just used: its LRU tick and eviction priority. */
void gf_cache_touch(gf_cache *c, gf_cache_model *m);
/* The idle device model to evict next (not `keep`), or NULL:
 * never a pinned one; one inside its keep-warm time only when nothing else
 * is idle and the guarantees pass the pin limit. Lock held. */
gf_cache_model *gf_cache_pick_victim(gf_cache *c, const gf_cache_model *keep);
/* Bytes of the budget evicting every model gf_cache_pick_victim may take
 * would give back (not counting `keep`). Lock held. */
uint64_t gf_cache_idle_bytes(gf_cache *c, const gf_cache_model *keep);
/* Unmap and free the device pages m holds. */
void gf_cache_release_pages(gf_cache *c, gf_cache_model *m);
/* Take and map m's device pages (or its place in a shared slab), evicting
 * idle models as needed. GF_ERR_STATE: another thread began loading m while
 * this one waited; look again. */
gf_status gf_cache_make_room_and_map(gf_cache *c, gf_cache_model *m, gf_err *err);

/* Give m's host copy back to the pool; with report, a complete copy counts
 * as a host eviction. */
void gf_cache_free_host(gf_cache *c, gf_cache_model *m, bool report);
/* Begin a device load of m (its pages already mapped): queued for the
 * loader, from the host copy when it is complete, else from the store. */
gf_status gf_cache_start_load(gf_cache *c, gf_cache_model *m, gf_err *err);
/* Queue a job for the loader. */
gf_status gf_cache_push_job(gf_cache *c, gf_cache_model *m, job_kind kind, gf_err *err);
/* The loader thread (arg: the cache), started by gf_cache_new: it runs jobs
 * and completes loads until c->stop with nothing queued or pending. Takes
 * the lock itself. */
void *gf_cache_loader_main(void *arg);

#endif /* GF_CACHE_IMPL_H */
