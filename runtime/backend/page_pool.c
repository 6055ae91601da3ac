/* gpufaas — the free list of a backend's physical page pool. */
#include "backend/page_pool.h"

#include <stdlib.h>

#include "backend/backend.h"

gf_status gf_page_pool_init(gf_page_pool *p, int64_t n, gf_err *err)
{
    pthread_mutex_init(&p->lock, NULL);
    p->n = n;
    p->free = malloc((size_t)(n ? n : 1) * sizeof *p->free);
    p->committed = calloc((size_t)(n ? n : 1), 1);
    if (p->free == NULL || p->committed == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory for a pool of %lld pages",
                          (long long)n);
    for (int64_t i = 0; i < n; i++) /* hand out low page numbers first */
        p->free[i] = n - 1 - i;
    p->n_free = n;
    return GF_OK;
}

void gf_page_pool_deinit(gf_page_pool *p)
{
    if (p->free == NULL && p->committed == NULL)
        return;
    free(p->free);
    free(p->committed);
    p->free = NULL;
    p->committed = NULL;
    pthread_mutex_destroy(&p->lock);
}

bool gf_page_pool_take(gf_page_pool *p, int64_t *page, bool *fresh)
{
    pthread_mutex_lock(&p->lock);
    bool ok = p->n_free > 0;
    if (ok) {
        *page = p->free[--p->n_free];
        *fresh = !p->committed[*page];
    }
    pthread_mutex_unlock(&p->lock);
    return ok;
}

void gf_page_pool_committed(gf_page_pool *p, int64_t page)
{
    pthread_mutex_lock(&p->lock);
    if (page >= 0 && page < p->n)
        p->committed[page] = 1;
    pthread_mutex_unlock(&p->lock);
}

void gf_page_pool_put(gf_page_pool *p, int64_t page)
{
    pthread_mutex_lock(&p->lock);
    if (page >= 0 && page < p->n && p->n_free < p->n)
        p->free[p->n_free++] = page;
    pthread_mutex_unlock(&p->lock);
}

bool gf_page_pool_is_committed(gf_page_pool *p, int64_t page)
{
    pthread_mutex_lock(&p->lock);
    bool c = page >= 0 && page < p->n && p->committed[page];
    pthread_mutex_unlock(&p->lock);
    return c;
}

gf_status gf_page_size_choose(size_t requested, size_t granularity, size_t max, size_t *out,
                              gf_err *err)
{
    size_t want = requested ? requested : GF_DEFAULT_PAGE_SIZE;
    if (granularity > want)
        want = granularity;
    size_t page = 1;
    while (page < want && page <= max / 2)
        page *= 2;
    if (page < want || page > max)
        return gf_err_set(err, GF_ERR_INVALID, "page size %zu is out of range (at most %zu)",
                          requested, max);
    if (granularity == 0 || page % granularity != 0)
        return gf_err_set(err, GF_ERR_INVALID,
                          "the device's allocation granularity %zu is not a power of two",
                          granularity);
    *out = page;
    return GF_OK;
}
