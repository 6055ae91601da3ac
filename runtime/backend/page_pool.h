/* gpufaas — the free lists of a backend's physical page pool
 * (runtime/backend; backend.c and the backend implementations).
 *
 * Pages are numbered 0..n-1. A page's memory is committed the first time it
 * is taken (cpu: fallocate + its page tables built; cuda: cuMemCreate) and
 * stays committed while it is free, so the next taker reuses it; a free
 * committed page can also be released (its memory given back), after which
 * it is fresh again. Taking prefers committed pages, so fresh pages are
 * committed only when no committed one is free. backend.c owns the pool and
 * does the accounting around it (backend_impl.h). Thread-safe. */
#ifndef GF_BACKEND_PAGE_POOL_H
#define GF_BACKEND_PAGE_POOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct gf_page_pool {
    pthread_mutex_t lock;
    int64_t n;                /* pages in the pool */
    int64_t n_committed;      /* pages whose memory exists, free or taken */
    int64_t n_free_committed; /* stack sizes */
    int64_t n_free_fresh;
    int64_t *free_committed;  /* free pages with memory (the last freed on top) */
    int64_t *free_fresh;      /* free pages without memory (low numbers on top) */
    unsigned char *committed; /* per page: its memory exists */
} gf_page_pool;

/* Caller-owned struct; n may be 0 (an empty pool). */
gf_status gf_page_pool_init(gf_page_pool *p, int64_t n, gf_err *err);
/* Frees the lists; a zeroed (never initialised) pool is fine. */
void gf_page_pool_deinit(gf_page_pool *p);

/* Take a free page, a committed one when there is one. False when none is
 * left. *fresh is true when the page has no memory: the caller commits it,
 * then calls gf_page_pool_committed, or gf_page_pool_put if committing
 * failed. */
bool gf_page_pool_take(gf_page_pool *p, int64_t *page, bool *fresh);
void gf_page_pool_committed(gf_page_pool *p, int64_t page);
/* Return a taken page (ignores numbers outside the pool). */
void gf_page_pool_put(gf_page_pool *p, int64_t page);
/* Take a free committed page in order to release its memory; false when
 * none is free. The caller releases it, then calls gf_page_pool_released. */
bool gf_page_pool_take_committed(gf_page_pool *p, int64_t *page);
/* Take a free fresh page (to commit it, then put it back); false when none. */
bool gf_page_pool_take_fresh(gf_page_pool *p, int64_t *page);
/* The page's memory is gone: it is free and fresh again. */
void gf_page_pool_released(gf_page_pool *p, int64_t page);
/* True when page is in the pool and committed. */
bool gf_page_pool_is_committed(gf_page_pool *p, int64_t page);
/* Free pages that hold memory. */
int64_t gf_page_pool_free_committed(gf_page_pool *p);

/* The page size in force when `requested` bytes are asked for (0 = the
 * default, GF_DEFAULT_PAGE_SIZE) on a device whose allocation granularity is
 * `granularity` (cpu: the system page; cuda: cuMemGetAllocationGranularity):
 * the smallest power of two that is at least both. A power of two, so that a
 * reservation can be aligned to whole pages (cuMemAddressReserve takes only a
 * power-of-two alignment). GF_ERR_INVALID above `max` or when no power of two
 * is a multiple of the granularity. */
gf_status gf_page_size_choose(size_t requested, size_t granularity, size_t max, size_t *out,
                              gf_err *err);

#endif /* GF_BACKEND_PAGE_POOL_H */
