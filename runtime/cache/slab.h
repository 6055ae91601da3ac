/* gpufaas — shared pages for small models (runtime/cache).
 *
 * A model much smaller than a page does not take a page of its own: it is
 * placed in a slab, one page of the device pool mapped into a one-page
 * range of its own, shared by several small models at byte offsets (first
 * fit, 256-byte aligned). A slab's page is taken when its first model is
 * placed and given back when its last one leaves, so the budget counts the
 * pages slabs hold, and 100 models of 20 KiB take about one 2 MiB page
 * instead of 100. The cache owns slabs and calls these under its lock. */
#ifndef GF_CACHE_SLAB_H
#define GF_CACHE_SLAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gf_slab_extent {
    size_t off, len;
} gf_slab_extent;

typedef struct gf_slab {
    char *va;             /* the one-page range the page is mapped into */
    int64_t page;         /* the pool page behind it */
    size_t size;          /* the page size */
    gf_slab_extent *ext;  /* the models placed, sorted by offset */
    size_t n_ext, cap_ext;
    size_t used;          /* bytes of the extents */
    size_t mark;          /* scratch for the cache's eviction estimate */
} gf_slab;

/* Place len bytes (a multiple of 256, at most size) at the lowest offset
 * with room: true and *off, or false (no gap; or out of memory). */
bool gf_slab_place(gf_slab *s, size_t len, size_t *off);

/* Remove the extent placed at off (no-op when there is none). */
void gf_slab_remove(gf_slab *s, size_t off);

/* Free the extent list (the page and range are the cache's). */
void gf_slab_deinit(gf_slab *s);

#endif /* GF_CACHE_SLAB_H */
