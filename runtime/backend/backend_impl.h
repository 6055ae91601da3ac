/* gpufaas — what a backend implements (runtime/backend).
 *
 * Only backend implementations (cpu/, cuda/) and backend.c include this. A
 * backend's open function allocates a struct gf_backend, fills `iface`,
 * `kernels` (all but nothing: `sync` included), `info`, `page_size`,
 * `budget`, `n_pages` and `context`, and returns it; backend.c then sets up
 * the budget accounting and the page pool, which live in one place for every
 * backend: the public wrappers check the budget, count bytes, take pages
 * from the pool, and hit the fault-injection sites before calling the slots
 * below. Slots never see a budget check.
 *
 * The budget bounds the device memory the backend holds: allocations plus
 * every committed page, including committed pages that are free in the pool
 * (their memory exists until released). `used` (what gf_dev_usage reports)
 * counts allocations and taken pages; `held` counts allocations and
 * committed pages, and held <= budget always: a page is committed only when
 * no committed page is free, and an allocation that would take held over the
 * budget first releases free committed pages.
 */
#ifndef GF_BACKEND_IMPL_H
#define GF_BACKEND_IMPL_H

#include <pthread.h>

#include "backend/backend.h"
#include "backend/page_pool.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gf_backend_iface {
    /* Wait for the streams, free be->context and everything in it, but not
     * be: backend.c's accounting is still live and frees be afterwards, so
     * this may give memory back through gf_dev_free (the cuda kernels'
     * workspace does). Also the constructor's cleanup on failure (then the
     * accounting is not set up yet and the constructor frees be). */
    void (*free)(gf_backend *be);
    void (*refresh_info)(gf_backend *be, gf_device_info *info); /* update free_memory */
    gf_status (*dev_alloc)(gf_backend *be, size_t size, void **out, gf_err *err);
    void (*dev_free)(gf_backend *be, void *ptr);
    gf_status (*vreserve)(gf_backend *be, size_t size, void **out, gf_err *err);
    void (*vrelease)(gf_backend *be, void *base, size_t size);
    /* Give pool page `page` (0..n_pages-1, without memory) its memory; then
     * release it again (it is free and unmapped). */
    gf_status (*page_commit)(gf_backend *be, int64_t page, gf_err *err);
    void (*page_release)(gf_backend *be, int64_t page);
    gf_status (*map)(gf_backend *be, void *addr, int64_t page, gf_err *err);
    gf_status (*unmap)(gf_backend *be, void *addr, gf_err *err);
    gf_status (*host_alloc)(gf_backend *be, size_t size, void **out, gf_err *err);
    void (*host_free)(gf_backend *be, void *ptr);
    gf_stream *(*stream)(gf_backend *be, gf_stream_kind kind);
    gf_status (*memcpy_async)(gf_backend *be, gf_stream *s, void *dst, const void *src,
                              size_t n, gf_copy_kind kind, gf_err *err);
    gf_status (*stream_sync)(gf_backend *be, gf_stream *s, gf_err *err);
    gf_status (*event_new)(gf_backend *be, gf_event **out, gf_err *err);
    void (*event_free)(gf_backend *be, gf_event *ev);
    gf_status (*event_record)(gf_backend *be, gf_event *ev, gf_stream *s, gf_err *err);
    gf_status (*stream_wait_event)(gf_backend *be, gf_stream *s, gf_event *ev, gf_err *err);
    bool (*event_query)(gf_backend *be, gf_event *ev);
    gf_status (*event_sync)(gf_backend *be, gf_event *ev, gf_err *err);
    /* True when the device is lost for good (see gf_backend_lost); may probe
     * the device. */
    bool (*lost)(gf_backend *be);
    /* Map n committed pages one after another from addr and make the whole
     * range accessible at once; on failure nothing stays mapped. NULL: the
     * pages are mapped one by one with `map`. */
    gf_status (*map_range)(gf_backend *be, void *addr, const int64_t *pages, size_t n,
                           gf_err *err);
};

/* dev_alloc pointer -> size, for accounting on free (open addressing). */
typedef struct gf_ptr_sizes {
    uintptr_t *keys; /* 0 = empty, 1 = deleted */
    size_t *vals;
    size_t cap, n, tombs;
} gf_ptr_sizes;

struct gf_backend {
    struct gf_backend_iface iface;
    gf_kernels kernels;
    gf_device_info info;   /* static fields filled by the implementation */
    size_t page_size;      /* in force; multiple of the device granularity */
    uint64_t budget;       /* bytes */
    int64_t n_pages;       /* pages in the pool (budget / page_size) */
    void *context;         /* the implementation's state */
    /* Set by the implementation (or gf_backend_config.precommit): every page
     * of the pool is committed from the start, by a thread of its own while
     * the backend serves (cuda: cuMemCreate costs ~0.2 ms a 2 MiB page, too
     * much for a swap-in to pay, and ~14 s for a whole H200 at start), so a
     * load only maps pages; one that comes first commits what it takes. */
    bool precommit;

    /* accounting and the page pool, owned by backend.c (see above); the
     * implementations read `pool` (gf_page_pool_is_committed) */
    pthread_mutex_t acct_lock;
    uint64_t used;         /* bytes of allocations + taken pages */
    uint64_t held;         /* bytes of allocations + committed pages (<= budget) */
    gf_page_pool pool;
    gf_ptr_sizes sizes;
    bool acct_ready;
    gf_reclaim_fn reclaim;  /* under acct_lock; may be NULL */
    void *reclaim_arg;
    _Atomic int lost;       /* gf_backend_lost answered true */
    _Atomic uint64_t n_allocs, n_frees; /* gf_dev_counters */
    struct gf_dev_arena *arena; /* gf_backend_arena: the per-request arena */
    /* the background commit of the pool (precommit): started by
     * gf_backend_open, stopped and joined by gf_backend_free */
    pthread_t precommit_thread;
    bool precommit_started;
    _Atomic int precommit_stop, precommit_done;
};

/* The cpu backend's constructor (cpu/cpu_backend.c). */
gf_status gf_backend_cpu_open(const gf_backend_config *cfg, gf_backend **out, gf_err *err);

/* The cuda module's entry point, exported by libgf_backend_cuda.so as the
 * symbol "gf_backend_cuda_module". Version 1; append-only. */
#define GF_BACKEND_MODULE_ABI 1

/* Services of the loading program a module calls back into (the module has
 * its own copy of runtime/core but not of backend.c, where the budget
 * accounting lives). */
typedef struct gf_backend_hostfns {
    gf_status (*dev_alloc)(gf_backend *be, size_t size, void **out, gf_err *err);
    void (*dev_free)(gf_backend *be, void *ptr);
} gf_backend_hostfns;

typedef struct gf_backend_module {
    uint32_t abi;  /* GF_BACKEND_MODULE_ABI */
    uint32_t size; /* sizeof(gf_backend_module) */
    /* Usable devices (0 when the driver is missing or too old). */
    int (*device_count)(void);
    /* Open device `index` as described by cfg. */
    gf_status (*open)(const gf_backend_config *cfg, int index, const gf_backend_hostfns *host,
                      gf_backend **out, gf_err *err);
    /* The module has its own copy of runtime/core: give it our log role/level. */
    void (*set_log)(const char *role, int level);
} gf_backend_module;

typedef const gf_backend_module *(*gf_backend_module_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* GF_BACKEND_IMPL_H */
