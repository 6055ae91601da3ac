/* gpufaas — the host tier's pinned pages (runtime/cache).
 *
 * The host tier keeps each model's pinned copy in fixed-size pages (the
 * device's page size, so a model takes as many pages in the host tier as on
 * the device), taken from slabs of pinned memory that the pool allocates as
 * the tier first grows and keeps until it is freed: never more than the
 * tier's budget. So neither the loader filling a host copy nor an eviction
 * dropping one calls the backend's pinned allocator: cudaHostAlloc pins
 * pages one by one (milliseconds for a large model) and serialises the
 * streams across it (the Programming Guide's implicit synchronization), and
 * cudaFreeHost waits for the device, both on paths that must not stall. Pages of one
 * slab handed out together are contiguous, so copies can span them.
 *
 * Thread-safe; a slab is allocated without the pool's lock held. */
#ifndef GF_CACHE_HOST_POOL_H
#define GF_CACHE_HOST_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/error.h"

typedef struct gf_host_pool gf_host_pool;

/* A pool of at most budget / page pages of `page` bytes (a multiple of the
 * system page) over backend be (borrowed; must outlive the pool). No
 * memory is pinned yet. *out is owned by the caller. */
gf_status gf_host_pool_new(gf_backend *be, uint64_t budget, size_t page, gf_host_pool **out,
                           gf_err *err);

/* Free every slab (no page may be in use). NULL is a no-op. */
void gf_host_pool_free(gf_host_pool *p);

size_t gf_host_pool_page(const gf_host_pool *p);

/* Take n pages into pages[0..n-1], lowest addresses of the free ones first,
 * pinning a new slab when too few are free. GF_ERR_NOMEM when the budget or
 * the pinned allocator cannot give them (then nothing is taken). */
gf_status gf_host_pool_take(gf_host_pool *p, size_t n, char **pages, gf_err *err);

/* Give back n pages taken earlier. */
void gf_host_pool_put(gf_host_pool *p, size_t n, char *const *pages);

/* Bytes pinned so far (slabs), and pages free in them. */
uint64_t gf_host_pool_pinned(gf_host_pool *p);
size_t gf_host_pool_free_pages(gf_host_pool *p);

#endif /* GF_CACHE_HOST_POOL_H */
