/* gpufaas — the host tier's pinned pages. See host_pool.h. */
#include "cache/host_pool.h"

#include "core/fault.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define GF_HOST_SLAB_BYTES ((uint64_t)64 << 20) /* pinned at a time as the tier grows */

struct gf_host_pool {
    gf_backend *be;
    size_t page;
    size_t max_pages;  /* budget / page */
    pthread_mutex_t lock;
    char **slabs;      /* each slab_pages[i] pages */
    size_t *slab_pages;
    size_t n_slabs, cap_slabs;
    size_t total;      /* pages in all slabs (<= max_pages) */
    size_t growing;    /* pages of slabs being pinned now, outside the lock */
    char **free;       /* free pages, sorted by address descending (lowest on top) */
    size_t n_free;
};

gf_status gf_host_pool_new(gf_backend *be, uint64_t budget, size_t page, gf_host_pool **out,
                           gf_err *err)
{
    *out = NULL;
    if (page == 0)
        return gf_err_set(err, GF_ERR_INVALID, "host pool: page size 0");
    gf_host_pool *p = calloc(1, sizeof *p);
    if (p == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory for the host pool");
    p->be = be;
    p->page = page;
    p->max_pages = (size_t)(budget / page);
    p->free = malloc((p->max_pages ? p->max_pages : 1) * sizeof *p->free);
    if (p->free == NULL) {
        free(p);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory for a host pool of %zu pages",
                          (size_t)(budget / page));
    }
    pthread_mutex_init(&p->lock, NULL);
    *out = p;
    return GF_OK;
}

void gf_host_pool_free(gf_host_pool *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->n_slabs; i++)
        gf_host_free_pinned(p->be, p->slabs[i]);
    free(p->slabs);
    free(p->slab_pages);
    free(p->free);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

size_t gf_host_pool_page(const gf_host_pool *p)
{
    return p->page;
}

static int cmp_desc(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (char *const *)a, y = (uintptr_t) * (char *const *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Add a pinned slab of n pages at base. Lock held. */
static gf_status add_slab(gf_host_pool *p, char *base, size_t n)
{
    if (p->n_slabs == p->cap_slabs) {
        size_t cap = p->cap_slabs ? p->cap_slabs * 2 : 8;
        char **s = realloc(p->slabs, cap * sizeof *s);
        if (s == NULL)
            return GF_ERR_NOMEM;
        p->slabs = s;
        size_t *sp = realloc(p->slab_pages, cap * sizeof *sp);
        if (sp == NULL)
            return GF_ERR_NOMEM;
        p->slab_pages = sp;
        p->cap_slabs = cap;
    }
    p->slabs[p->n_slabs] = base;
    p->slab_pages[p->n_slabs] = n;
    p->n_slabs++;
    p->total += n;
    for (size_t i = 0; i < n; i++)
        p->free[p->n_free++] = base + i * p->page;
    qsort(p->free, p->n_free, sizeof *p->free, cmp_desc);
    return GF_OK;
}

gf_status gf_host_pool_take(gf_host_pool *p, size_t n, char **pages, gf_err *err)
{
    pthread_mutex_lock(&p->lock);
    while (p->n_free < n) {
        size_t room = p->max_pages - p->total - p->growing;
        if (p->n_free + room < n) {
            size_t free_now = p->n_free;
            pthread_mutex_unlock(&p->lock);
            return gf_err_set(err, GF_ERR_NOMEM,
                              "the host tier's pool has %zu of the %zu pages needed free",
                              free_now, n);
        }
        /* pin a slab: the pages still missing, or a whole slab's worth */
        size_t want = n - p->n_free;
        size_t slab = (size_t)(GF_HOST_SLAB_BYTES / p->page);
        if (want < slab)
            want = slab;
        if (want > room)
            want = room;
        p->growing += want;
        pthread_mutex_unlock(&p->lock);
        void *base = NULL;
        gf_status st = gf_host_alloc_pinned(p->be, want * p->page, &base, err);
        pthread_mutex_lock(&p->lock);
        p->growing -= want;
        if (st == GF_OK && (st = add_slab(p, base, want)) != GF_OK) {
            gf_host_free_pinned(p->be, base);
            gf_err_set(err, st, "out of memory adding a slab to the host pool");
        }
        if (st != GF_OK) {
            pthread_mutex_unlock(&p->lock);
            return st;
        }
    }
    for (size_t i = 0; i < n; i++)
        pages[i] = p->free[--p->n_free];
    pthread_mutex_unlock(&p->lock);
    return GF_OK;
}

void gf_host_pool_put(gf_host_pool *p, size_t n, char *const *pages)
{
    if (n == 0)
        return;
    /* sort what comes back, then merge it into the free list from its low
     * end: O(free pages), not a sort of them all (a host tier of small pages
     * has hundreds of thousands) */
    char **in = malloc(n * sizeof *in);
    pthread_mutex_lock(&p->lock);
    if (n > p->max_pages - p->n_free)
        n = p->max_pages - p->n_free;
    if (in == NULL) { /* no room to sort apart: the slow way */
        for (size_t i = 0; i < n; i++)
            p->free[p->n_free++] = pages[i];
        qsort(p->free, p->n_free, sizeof *p->free, cmp_desc);
        pthread_mutex_unlock(&p->lock);
        return;
    }
    memcpy(in, pages, n * sizeof *in);
    qsort(in, n, sizeof *in, cmp_desc);
    size_t i = p->n_free, j = n, k = p->n_free + n;
    while (j > 0) {
        /* descending: the lowest address of the two goes to the end */
        if (i > 0 && (uintptr_t)p->free[i - 1] < (uintptr_t)in[j - 1])
            p->free[--k] = p->free[--i];
        else
            p->free[--k] = in[--j];
    }
    p->n_free += n;
    pthread_mutex_unlock(&p->lock);
    free(in);
}

uint64_t gf_host_pool_pinned(gf_host_pool *p)
{
    pthread_mutex_lock(&p->lock);
    uint64_t b = (uint64_t)p->total * p->page;
    pthread_mutex_unlock(&p->lock);
    return b;
}

size_t gf_host_pool_free_pages(gf_host_pool *p)
{
    pthread_mutex_lock(&p->lock);
    size_t n = p->n_free;
    pthread_mutex_unlock(&p->lock);
    return n;
}
