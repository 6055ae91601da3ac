/* gpufaas — the free list of a backend's physical page pool. */
#include "backend/page_pool.h"

#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

gf_status gf_page_pool_init(gf_page_pool *p, int64_t n, gf_err *err)
{
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    size_t cnt = (size_t)(n ? n : 1);
    p->n = n;
    p->free_committed = malloc(cnt * sizeof *p->free_committed);
    p->free_fresh = malloc(cnt * sizeof *p->free_fresh);
    p->committed = calloc(cnt, 1);
    if (p->free_committed == NULL || p->free_fresh == NULL || p->committed == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory for a pool of %lld pages",
                          (long long)n);
    for (int64_t i = 0; i < n; i++) /* hand out low page numbers first */
        p->free_fresh[i] = n - 1 - i;
    p->n_free_fresh = n;
    return GF_OK;
}

void gf_page_pool_deinit(gf_page_pool *p)
{
    if (p->free_committed == NULL && p->free_fresh == NULL && p->committed == NULL)
        return;
    free(p->free_committed);
    free(p->free_fresh);
    free(p->committed);
    p->free_committed = p->free_fresh = NULL;
    p->committed = NULL;
    pthread_mutex_destroy(&p->lock);
}

bool gf_page_pool_take(gf_page_pool *p, int64_t *page, bool *fresh)
{
    pthread_mutex_lock(&p->lock);
    bool ok = true;
    if (p->n_free_committed > 0) {
        *page = p->free_committed[--p->n_free_committed];
        *fresh = false;
    } else if (p->n_free_fresh > 0) {
        *page = p->free_fresh[--p->n_free_fresh];
        *fresh = true;
    } else {
        ok = false;
    }
    pthread_mutex_unlock(&p->lock);
    return ok;
}

void gf_page_pool_committed(gf_page_pool *p, int64_t page)
{
    pthread_mutex_lock(&p->lock);
    if (page >= 0 && page < p->n && !p->committed[page]) {
        p->committed[page] = 1;
        p->n_committed++;
    }
    pthread_mutex_unlock(&p->lock);
}

void gf_page_pool_put(gf_page_pool *p, int64_t page)
{
    pthread_mutex_lock(&p->lock);
    if (page >= 0 && page < p->n && p->n_free_committed + p->n_free_fresh < p->n) {
        if (p->committed[page])
            p->free_committed[p->n_free_committed++] = page;
        else
            p->free_fresh[p->n_free_fresh++] = page;
    }
    pthread_mutex_unlock(&p->lock);
}

bool gf_page_pool_take_committed(gf_page_pool *p, int64_t *page)
{
    pthread_mutex_lock(&p->lock);
    bool ok = p->n_free_committed > 0;
    if (ok)
        *page = p->free_committed[--p->n_free_committed];
    pthread_mutex_unlock(&p->lock);
    return ok;
}

bool gf_page_pool_take_fresh(gf_page_pool *p, int64_t *page)
{
    pthread_mutex_lock(&p->lock);
    bool ok = p->n_free_fresh > 0;
    if (ok)
        *page = p->free_fresh[--p->n_free_fresh];
    pthread_mutex_unlock(&p->lock);
    return ok;
}

void gf_page_pool_released(gf_page_pool *p, int64_t page)
{
    pthread_mutex_lock(&p->lock);
    if (page >= 0 && page < p->n && p->committed[page]) {
        p->committed[page] = 0;
        p->n_committed--;
        if (p->n_free_committed + p->n_free_fresh < p->n)
            p->free_fresh[p->n_free_fresh++] = page;
    }
    pthread_mutex_unlock(&p->lock);
}

bool gf_page_pool_is_committed(gf_page_pool *p, int64_t page)
{
    if (p->committed == NULL)
        return false;
    pthread_mutex_lock(&p->lock);
    bool c = page >= 0 && page < p->n && p->committed[page];
    pthread_mutex_unlock(&p->lock);
    return c;
}

int64_t gf_page_pool_free_committed(gf_page_pool *p)
{
    pthread_mutex_lock(&p->lock);
    int64_t n = p->n_free_committed;
    pthread_mutex_unlock(&p->lock);
    return n;
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
