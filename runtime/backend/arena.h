/* gpufaas — the per-request device arena (runtime/backend).
 *
 * Device memory a request uses (its inputs, outputs, a function's
 * workspace and activations) comes from an arena that lives as long as its
 * backend (one per worker): a stack of blocks allocated with gf_dev_alloc,
 * bumped by each allocation and reset when the request is done. A request
 * that needs more than the arena holds grows it with one more block; its
 * reset then replaces the blocks with one block of the request's peak, so
 * the next request of that size allocates and frees nothing (on cuda no
 * cudaMalloc and no cudaFree, which synchronises the whole device and would
 * stop one request's compute from overlapping the next model's swap-in).
 * The memory it keeps counts against the device budget like any allocation
 * (gf_dev_alloc asks the cache to evict idle models to make room); every
 * 256 requests an arena holding more than 4x the largest of them (and at
 * least 256 KiB more) shrinks to that largest, so a burst of big batches does
 * not keep its memory for good.
 *
 * Threading: one thread at a time (the worker's executor). */
#ifndef GF_BACKEND_ARENA_H
#define GF_BACKEND_ARENA_H

#include <stddef.h>

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf_dev_arena gf_dev_arena;

/* A new, empty arena over be (no device memory until the first alloc). */
gf_status gf_dev_arena_new(gf_backend *be, gf_dev_arena **out, gf_err *err);
/* Frees the arena and its device memory; nothing queued may still use it.
 * NULL is a no-op. */
void gf_dev_arena_free(gf_dev_arena *a);

/* bytes of device memory (256-byte aligned; 0 bytes gives a valid pointer)
 * until the next reset. GF_ERR_NO_DEVICE_MEM as gf_dev_alloc when the
 * arena must grow and the budget has no room. */
gf_status gf_dev_arena_alloc(gf_dev_arena *a, size_t bytes, void **out, gf_err *err);

/* Hand back everything allocated since the last reset; the caller has
 * waited for every queued use of it (gf_stream_sync). Merges the blocks of
 * a request that grew the arena into one; shrinks it as arena.h says. */
void gf_dev_arena_reset(gf_dev_arena *a);

/* Device bytes the arena holds (its blocks). */
size_t gf_dev_arena_held(const gf_dev_arena *a);

#ifdef __cplusplus
}
#endif

#endif /* GF_BACKEND_ARENA_H */
