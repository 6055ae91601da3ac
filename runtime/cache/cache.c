/* gpufaas — the parameter cache: tiers, page accounting, eviction, the models;
 * the loader thread and the host tier are in loader.c, the leases in lease.c,
 * the eviction policy and the models' residency in policy.c.
 * See cache.h for the model. */
#include "core/clock.h"
#include "cache/cache_impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/host_pool.h"
#include "cache/slab.h"
#include "core/fault.h"
#include "core/log.h"
#include "core/tensor.h"

#define GF_CACHE_ALIGN 256
#define GF_CACHE_DEFAULT_CHUNK ((size_t)4 << 20)
/* The host tier's page: small enough that a small model's host copy is not
 * a whole device page (2 MiB on a GPU), large enough for few copies. */
#define GF_CACHE_HOST_PAGE ((size_t)64 << 10)

void gf_cache_emit(gf_cache *c, gf_cache_event_kind kind, const gf_cache_model *m, gf_tier from,
                   gf_tier to, uint64_t bytes, uint64_t micros, const char *msg)
{
    if (c->cfg.on_event == NULL)
        return;
    gf_cache_event ev = {kind, m->key, from, to, bytes, micros, msg};
    c->cfg.on_event(c->cfg.event_arg, &ev);
}

/* ---- device tier ----------------------------------------------------------- */

/* Take small model m out of its slab; the slab's page goes back to the pool
 * with its last model. Lock held. */
static void slab_leave(gf_cache *c, gf_cache_model *m)
{
    gf_slab *s = m->slab;
    if (s == NULL)
        return;
    gf_slab_remove(s, m->slab_off);
    m->slab = NULL;
    m->va = NULL;
    if (s->n_ext > 0)
        return;
    gf_dev_unmap_range(c->be, s->va, 1);
    gf_dev_page_free(c->be, s->page);
    gf_dev_vrelease(c->be, s->va, c->page_size);
    gf_slab_deinit(s);
    for (size_t i = 0; i < c->n_slabs; i++) {
        if (c->slabs[i] == s) {
            c->slabs[i] = c->slabs[--c->n_slabs];
            break;
        }
    }
    free(s);
}

/* Place small model m in a slab with room: true, or false when none has. */
static bool slab_fit(gf_cache *c, gf_cache_model *m)
{
    for (size_t i = 0; i < c->n_slabs; i++) {
        size_t off;
        if (gf_slab_place(c->slabs[i], m->range_bytes, &off)) {
            m->slab = c->slabs[i];
            m->slab_off = off;
            m->va = m->slab->va + off;
            return true;
        }
    }
    return false;
}

/* A new slab over page pg, holding m at offset 0. Lock held; on failure
 * the page is still the caller's. */
static gf_status slab_open(gf_cache *c, gf_cache_model *m, int64_t pg, gf_err *err)
{
    gf_slab *s = calloc(1, sizeof *s);
    if (s == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory for a shared page");
    if (c->n_slabs == c->cap_slabs) {
        size_t cap = c->cap_slabs ? 2 * c->cap_slabs : 8;
        gf_slab **ns = realloc(c->slabs, cap * sizeof *ns);
        if (ns == NULL) {
            free(s);
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory for a shared page");
        }
        c->slabs = ns;
        c->cap_slabs = cap;
    }
    s->page = pg;
    s->size = c->page_size;
    gf_status st = gf_dev_vreserve(c->be, c->page_size, (void **)&s->va, err);
    if (st == GF_OK && (st = gf_dev_map_range(c->be, s->va, &pg, 1, err)) != GF_OK)
        gf_dev_vrelease(c->be, s->va, c->page_size);
    size_t off;
    if (st == GF_OK && !gf_slab_place(s, m->range_bytes, &off)) {
        gf_dev_unmap_range(c->be, s->va, 1);
        gf_dev_vrelease(c->be, s->va, c->page_size);
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory for a shared page");
    }
    if (st != GF_OK) {
        gf_slab_deinit(s);
        free(s);
        return st;
    }
    c->slabs[c->n_slabs++] = s;
    m->slab = s;
    m->slab_off = 0;
    m->va = s->va;
    return GF_OK;
}

/* Unmap and free the pages the model holds. Lock held. */
void gf_cache_release_pages(gf_cache *c, gf_cache_model *m)
{
    if (m->small) {
        slab_leave(c, m);
        return;
    }
    if (m->n_pages == 0 || m->pages[0] < 0)
        return;
    gf_dev_unmap_range(c->be, m->va, m->n_pages);
    for (size_t k = 0; k < m->n_pages; k++) {
        gf_dev_page_free(c->be, m->pages[k]);
        m->pages[k] = -1;
    }
}

/* Evict an idle device model. Lock held. */
static void evict_device(gf_cache *c, gf_cache_model *m)
{
    if (m->last_use_recorded) /* compute work reading the pages must finish first */
        gf_event_sync(c->be, m->last_use, NULL);
    gf_cache_release_pages(c, m);
    atomic_store(&m->dev, DEV_ABSENT);
    if (c->cfg.policy != GF_EVICT_LRU && m->gds_h > c->gds_clock)
        c->gds_clock = m->gds_h;
    c->st.evictions_device++;
    gf_cache_emit(c, GF_CACHE_EV_EVICT, m, GF_TIER_DEVICE,
                  m->host_ready ? GF_TIER_HOST : GF_TIER_STORE, m->range_bytes, 0, NULL);
}

/* True (after waiting for a load to finish) when some model other than keep
 * is loading without a lease: its pages become evictable when the load
 * completes. False at once when there is none. Lock held. */
static bool wait_for_unleased_load(gf_cache *c, const gf_cache_model *keep)
{
    for (size_t i = 0; i < c->n_models; i++) {
        gf_cache_model *o = c->models[i];
        if (o != keep && atomic_load(&o->dev) == DEV_LOADING && o->refs == 0) {
            pthread_cond_wait(&c->cond, &c->lock);
            return true;
        }
    }
    return false;
}

static uint64_t budget_free(gf_cache *c)
{
    uint64_t used, budget;
    gf_dev_usage(c->be, &used, &budget);
    return used < budget ? budget - used : 0;
}

/* Place small model m: in a slab's gap, else in a new slab, evicting idle
 * models until a gap or a page appears. Lock held. */
static gf_status place_small(gf_cache *c, gf_cache_model *m, gf_err *err)
{
    for (;;) {
        if (slab_fit(c, m))
            return GF_OK;
        int64_t pg;
        gf_status st = gf_dev_page_alloc(c->be, &pg, err);
        if (st == GF_OK) {
            if ((st = slab_open(c, m, pg, err)) != GF_OK) {
                gf_dev_page_free(c->be, pg);
                gf_err_prefix(err, "model '%s'", m->key);
            }
            return st;
        }
        if (st != GF_ERR_NO_DEVICE_MEM || budget_free(c) >= c->page_size) {
            gf_err_prefix(err, "model '%s'", m->key);
            return st;
        }
        gf_cache_model *v = gf_cache_pick_victim(c, m);
        if (v == NULL)
            return gf_err_set(err, GF_ERR_BUSY,
                              "model '%s' needs %zu bytes of device memory and nothing idle "
                              "is left to evict",
                              m->key, m->range_bytes);
        evict_device(c, v);
    }
}

/* Take and map the pages of m (or place a small one), evicting idle models
 * as needed. Lock held. */
gf_status gf_cache_make_room_and_map(gf_cache *c, gf_cache_model *m, gf_err *err)
{
    uint64_t budget;
    gf_dev_usage(c->be, NULL, &budget);
    if (m->range_bytes > budget)
        return gf_err_set(err, GF_ERR_TOO_LARGE,
                          "model '%s' needs %zu bytes of device memory but the whole device "
                          "budget is %llu bytes",
                          m->key, m->range_bytes, (unsigned long long)budget);
    /* a small model needs a gap in a slab, or one page for a new slab */
    size_t need = m->small ? c->page_size : m->range_bytes;
    for (;;) {
        if (m->small && slab_fit(c, m))
            return GF_OK;
        uint64_t idle = gf_cache_idle_bytes(c, m);
        uint64_t free_now = budget_free(c);
        if (free_now + idle >= need)
            break;
        if (wait_for_unleased_load(c, m)) {
            if (atomic_load(&m->dev) != DEV_ABSENT)
                return GF_ERR_STATE; /* another thread began loading m: look again */
            continue;
        }
        return gf_err_set(err, GF_ERR_BUSY,
                          "model '%s' needs %zu bytes of device memory: %llu are free and %llu "
                          "more held by idle models that may be evicted; the rest is in use, "
                          "pinned or kept warm",
                          m->key, m->range_bytes, (unsigned long long)free_now,
                          (unsigned long long)idle);
    }
    if (m->small)
        return place_small(c, m, err);
    gf_status st = GF_OK;
    for (size_t k = 0; k < m->n_pages && st == GF_OK; k++) {
        for (;;) {
            st = gf_dev_page_alloc(c->be, &m->pages[k], err);
            if (st != GF_ERR_NO_DEVICE_MEM || budget_free(c) >= c->page_size)
                break; /* success, or the device failed although the budget has room */
            gf_cache_model *v = gf_cache_pick_victim(c, m);
            if (v == NULL) {
                st = gf_err_set(err, GF_ERR_BUSY,
                                "model '%s' needs %zu bytes of device memory and nothing idle "
                                "is left to evict",
                                m->key, m->range_bytes);
                break;
            }
            evict_device(c, v);
        }
    }
    /* the whole range at once: one access change for it (cuMemSetAccess) */
    if (st == GF_OK && (st = gf_dev_map_range(c->be, m->va, m->pages, m->n_pages, err)) == GF_OK)
        return GF_OK;
    gf_err_prefix(err, "model '%s'", m->key);
    for (size_t k = 0; k < m->n_pages; k++) { /* none of them is mapped */
        gf_dev_page_free(c->be, m->pages[k]);
        m->pages[k] = -1;
    }
    return st;
}

/* ---- public: lifetime ------------------------------------------------------ */

/* The backend's reclaimer: an allocation (activations, the kernels'
 * workspace) that does not fit evicts idle models. */
static uint64_t cache_reclaim(void *arg, uint64_t bytes)
{
    return gf_cache_evict_idle(arg, bytes);
}

gf_status gf_cache_new(gf_backend *be, const gf_cache_config *cfg, gf_cache **out, gf_err *err)
{
    *out = NULL;
    gf_cache *c = calloc(1, sizeof *c);
    if (c == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory creating the cache");
    c->be = be;
    c->cfg = *cfg;
    c->copy = gf_backend_stream(be, GF_STREAM_COPY);
    c->compute = gf_backend_stream(be, GF_STREAM_COMPUTE);
    c->page_size = gf_dev_page_size(be);
    c->host_page = c->page_size < GF_CACHE_HOST_PAGE ? c->page_size : GF_CACHE_HOST_PAGE;
    c->chunk = cfg->chunk_bytes ? cfg->chunk_bytes : GF_CACHE_DEFAULT_CHUNK;
    c->bw_host = 10000.0; /* 10 GB/s until measured */
    c->bw_store = 2000.0; /* 2 GB/s until measured */
    c->st.host_budget = cfg->host_budget;
    uint64_t dev_budget;
    gf_dev_usage(be, NULL, &dev_budget);
    c->pin_limit = cfg->pin_limit > 0 ? cfg->pin_limit : dev_budget / 2;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    gf_status st;
    if (cfg->host_budget > 0 &&
        (st = gf_host_pool_new(be, cfg->host_budget, c->host_page, &c->host_pool, err)) != GF_OK)
        goto fail;
    c->n_ring = cfg->staging_buffers > 0 ? cfg->staging_buffers : 3;
    c->ring = calloc((size_t)c->n_ring, sizeof *c->ring);
    if (c->ring == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory for the staging ring");
        goto fail;
    }
    for (int i = 0; i < c->n_ring; i++) {
        if ((st = gf_host_alloc_pinned(be, c->chunk, &c->ring[i].buf, err)) != GF_OK ||
            (st = gf_event_new(be, &c->ring[i].ev, err)) != GF_OK)
            goto fail;
    }
    for (int i = 0; i < GF_CACHE_WINDOW; i++)
        if ((st = gf_event_new(be, &c->win[i], err)) != GF_OK)
            goto fail;
    int rc = pthread_create(&c->thread, NULL, gf_cache_loader_main, c);
    if (rc != 0) {
        st = gf_err_set(err, GF_ERR_NOMEM, "pthread_create(loader): %s", strerror(rc));
        goto fail;
    }
    c->thread_started = true;
    gf_backend_set_reclaim(be, cache_reclaim, c);
    c->reclaim_set = true;
    *out = c;
    return GF_OK;
fail:
    gf_cache_free(c);
    return st;
}

static void model_destroy(gf_cache *c, gf_cache_model *m)
{
    if (m == NULL)
        return;
    if (m->t != NULL)
        for (size_t i = 0; i < m->n; i++)
            gf_event_free(c->be, m->t[i].ev);
    gf_event_free(c->be, m->last_use);
    gf_event_free(c->be, m->done_ev);
    if (m->va != NULL && !m->small)
        gf_dev_vrelease(c->be, m->va, m->range_bytes);
    free(m->pages);
    free(m->t);
    free(m->by_name);
    gf_st_close(m->file);
    free(m->key);
    free(m);
}

void gf_cache_drain(gf_cache *c)
{
    pthread_mutex_lock(&c->lock);
    while (c->jobs_count > 0 || c->active > 0 || c->n_loading > 0 || c->n_pending > 0 ||
           c->win_count > 0)
        pthread_cond_wait(&c->cond, &c->lock);
    for (size_t i = 0; i < c->n_models; i++)
        while (c->models[i]->host_users > 0 || c->models[i]->host_filling)
            pthread_cond_wait(&c->cond, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

void gf_cache_free(gf_cache *c)
{
    if (c == NULL)
        return;
    if (c->reclaim_set)
        gf_backend_set_reclaim(c->be, NULL, NULL);
    if (c->thread_started) {
        gf_cache_drain(c);
        pthread_mutex_lock(&c->lock);
        c->stop = true;
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->lock);
        pthread_join(c->thread, NULL);
    }
    gf_stream_sync(c->be, c->copy, NULL);
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->n_models; i++) {
        gf_cache_model *m = c->models[i];
        if (m->refs > 0)
            GF_LOG_E("model '%s' still has %d lease(s) at cache free", m->key, m->refs);
        if (m->last_use_recorded)
            gf_event_sync(c->be, m->last_use, NULL);
        gf_cache_release_pages(c, m);
        gf_cache_free_host(c, m, false);
    }
    pthread_mutex_unlock(&c->lock);
    for (size_t i = 0; i < c->n_models; i++)
        model_destroy(c, c->models[i]);
    free(c->models);
    if (c->ring != NULL) {
        for (int i = 0; i < c->n_ring; i++) {
            gf_host_free_pinned(c->be, c->ring[i].buf);
            gf_event_free(c->be, c->ring[i].ev);
        }
        free(c->ring);
    }
    if (c->n_slabs > 0)
        GF_LOG_E("%zu shared pages still held at cache free", c->n_slabs);
    free(c->slabs);
    gf_host_pool_free(c->host_pool);
    for (int i = 0; i < GF_CACHE_WINDOW; i++)
        gf_event_free(c->be, c->win[i]);
    free(c->jobs);
    free(c->loading);
    free(c->pending);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c);
}

/* ---- public: models ---------------------------------------------------------- */

typedef struct {
    const char *name;
    size_t idx;
} name_ref;

static int cmp_name_refs(const void *a, const void *b)
{
    return strcmp(((const name_ref *)a)->name, ((const name_ref *)b)->name);
}

gf_status gf_cache_model_add(gf_cache *c, const char *key, const char *path,
                             const char *const *order, size_t n_order, gf_cache_model **out,
                             gf_err *err)
{
    *out = NULL;
    if (key == NULL || key[0] == '\0')
        return gf_err_set(err, GF_ERR_INVALID, "a model needs a non-empty key");
    if (GF_FAULT("cache_alloc"))
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory registering model '%s' "
                          "(injected fault)", key);
    gf_cache_model *m = calloc(1, sizeof *m);
    if (m == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory registering model '%s'", key);
    m->c = c;
    m->res = GF_RESIDENCY_DEFAULT;
    gf_status st;
    m->key = strdup(key);
    if (m->key == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    st = gf_st_open(path, &m->file, err);
    if (st != GF_OK) {
        gf_err_prefix(err, "model '%s'", key);
        goto fail;
    }
    m->n = order != NULL ? n_order : gf_st_count(m->file);
    size_t nt = m->n ? m->n : 1;
    m->t = calloc(nt, sizeof *m->t);
    m->by_name = malloc(nt * sizeof *m->by_name);
    name_ref *refs = malloc(nt * sizeof *refs);
    if (m->t == NULL || m->by_name == NULL || refs == NULL) {
        free(refs);
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    size_t off = 0;
    for (size_t i = 0; i < m->n; i++) {
        const gf_st_tensor *t;
        if (order != NULL) {
            t = gf_st_find(m->file, order[i]);
            if (t == NULL) {
                free(refs);
                st = gf_err_set(err, GF_ERR_NOT_FOUND, "model '%s': no tensor named '%s' in %s",
                                key, order[i], path);
                goto fail;
            }
        } else {
            t = gf_st_at(m->file, i);
        }
        m->t[i].st = t;
        m->t[i].offset = off;
        if (!gf_size_add(off, t->nbytes, &off) ||
            !gf_size_align_up(off, GF_CACHE_ALIGN, &off)) {
            free(refs);
            st = gf_err_set(err, GF_ERR_OVERFLOW, "model '%s' is too large", key);
            goto fail;
        }
        refs[i] = (name_ref){t->name, i};
    }
    qsort(refs, m->n, sizeof *refs, cmp_name_refs);
    for (size_t i = 0; i < m->n; i++) {
        if (i > 0 && strcmp(refs[i].name, refs[i - 1].name) == 0) {
            st = gf_err_set(err, GF_ERR_INVALID, "model '%s': tensor '%s' listed twice", key,
                            refs[i].name);
            free(refs);
            goto fail;
        }
        m->by_name[i] = refs[i].idx;
    }
    free(refs);
    m->layout_bytes = off;
    /* a model of at most a quarter page shares pages with others */
    m->small = off <= c->page_size / 4;
    if (!gf_size_align_up(off ? off : 1, m->small ? GF_CACHE_ALIGN : c->page_size,
                          &m->range_bytes) ||
        !gf_size_align_up(off ? off : 1, c->host_page, &m->host_bytes)) {
        st = gf_err_set(err, GF_ERR_OVERFLOW, "model '%s' is too large", key);
        goto fail;
    }
    m->n_host_pages = m->host_bytes / c->host_page;
    m->n_pages = m->small ? 0 : m->range_bytes / c->page_size;
    m->pages = malloc((m->n_pages ? m->n_pages : 1) * sizeof *m->pages);
    if (m->pages == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t k = 0; k < m->n_pages; k++)
        m->pages[k] = -1;
    for (size_t i = 0; i < m->n; i++)
        if ((st = gf_event_new(c->be, &m->t[i].ev, err)) != GF_OK)
            goto fail;
    if ((st = gf_event_new(c->be, &m->last_use, err)) != GF_OK ||
        (st = gf_event_new(c->be, &m->done_ev, err)) != GF_OK)
        goto fail;
    if (!m->small && (st = gf_dev_vreserve(c->be, m->range_bytes, (void **)&m->va, err)) != GF_OK)
        goto fail;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->n_models; i++) {
        if (strcmp(c->models[i]->key, key) == 0) {
            pthread_mutex_unlock(&c->lock);
            st = gf_err_set(err, GF_ERR_EXISTS, "model '%s' is already registered", key);
            goto fail;
        }
    }
    if (c->n_models == c->cap_models) {
        size_t cap = c->cap_models ? c->cap_models * 2 : 16;
        gf_cache_model **ms = realloc(c->models, cap * sizeof *ms);
        if (ms == NULL) {
            pthread_mutex_unlock(&c->lock);
            st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            goto fail;
        }
        c->models = ms;
        c->cap_models = cap;
    }
    c->models[c->n_models++] = m;
    gf_cache_touch(c, m);
    pthread_mutex_unlock(&c->lock);
    *out = m;
    return GF_OK;
fail:
    model_destroy(c, m);
    return st;
}

gf_status gf_cache_model_remove(gf_cache *c, gf_cache_model *m, gf_err *err)
{
    pthread_mutex_lock(&c->lock);
    int dev = atomic_load(&m->dev);
    if (m->refs > 0 || dev == DEV_LOADING || m->host_filling || m->host_users > 0) {
        pthread_mutex_unlock(&c->lock);
        return gf_err_set(err, GF_ERR_BUSY, "model '%s' is in use (%d lease(s)%s)", m->key,
                          m->refs, dev == DEV_LOADING ? ", loading" : "");
    }
    if (dev == DEV_READY)
        evict_device(c, m);
    gf_cache_free_host(c, m, true);
    if (m->res.pin)
        c->pinned_bytes -= m->range_bytes;
    for (size_t i = 0; i < c->n_models; i++) {
        if (c->models[i] == m) {
            c->models[i] = c->models[--c->n_models];
            break;
        }
    }
    pthread_mutex_unlock(&c->lock);
    model_destroy(c, m);
    return GF_OK;
}

gf_cache_model *gf_cache_model_find(gf_cache *c, const char *key)
{
    gf_cache_model *found = NULL;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->n_models; i++) {
        if (strcmp(c->models[i]->key, key) == 0) {
            found = c->models[i];
            break;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return found;
}

const char *gf_cache_model_key(const gf_cache_model *m) { return m->key; }
size_t gf_cache_model_count(const gf_cache_model *m) { return m->n; }
const gf_st_tensor *gf_cache_model_tensor(const gf_cache_model *m, size_t i) { return m->t[i].st; }
uint64_t gf_cache_model_device_bytes(const gf_cache_model *m) { return m->range_bytes; }
uint64_t gf_cache_model_host_bytes(const gf_cache_model *m) { return m->host_bytes; }
uint64_t gf_cache_model_copy_bytes(const gf_cache_model *m) { return m->layout_bytes; }
bool gf_cache_model_on_device(const gf_cache_model *m) { return atomic_load(&m->dev) == DEV_READY; }
bool gf_cache_model_loading(const gf_cache_model *m) { return atomic_load(&m->dev) == DEV_LOADING; }

long gf_cache_model_index(const gf_cache_model *m, const char *name)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = strcmp(m->t[m->by_name[mid]].st->name, name);
        if (r == 0)
            return (long)m->by_name[mid];
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* ---- public: placement ----------------------------------------------------------- */

gf_status gf_cache_prefetch(gf_cache *c, gf_cache_model *m, gf_tier tier, gf_err *err)
{
    gf_status st = GF_OK;
    pthread_mutex_lock(&c->lock);
    if (tier == GF_TIER_HOST) {
        if (!m->host_ready && !m->host_filling && m->host_users == 0 &&
            atomic_load(&m->dev) != DEV_LOADING) {
            if (m->host_bytes > c->cfg.host_budget)
                st = gf_err_set(err, GF_ERR_TOO_LARGE,
                                "model '%s' needs %zu bytes of host memory but the host budget "
                                "is %llu bytes",
                                m->key, m->host_bytes,
                                (unsigned long long)c->cfg.host_budget);
            else if ((st = gf_cache_push_job(c, m, JOB_HOST, err)) == GF_OK)
                m->host_users++;
        }
    } else if (tier == GF_TIER_DEVICE) {
        int dev;
        do {
            dev = atomic_load(&m->dev);
            st = GF_OK;
            if (dev == DEV_FAILED)
                st = gf_err_set(err, GF_ERR_BUSY, "model '%s': a failed load is still held",
                                m->key);
            else if (dev == DEV_ABSENT && (st = gf_cache_make_room_and_map(c, m, err)) == GF_OK)
                st = gf_cache_start_load(c, m, err);
        } while (st == GF_ERR_STATE);
        if (st == GF_OK)
            gf_cache_touch(c, m);
    } else {
        st = gf_err_set(err, GF_ERR_INVALID, "prefetch to tier %d is not possible", (int)tier);
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

gf_status gf_cache_evict(gf_cache *c, gf_cache_model *m, gf_tier tier, gf_err *err)
{
    gf_status st = GF_OK;
    pthread_mutex_lock(&c->lock);
    int dev = atomic_load(&m->dev);
    if (m->refs > 0 || dev == DEV_LOADING || dev == DEV_FAILED) {
        st = gf_err_set(err, GF_ERR_BUSY, "model '%s' is in use (%d lease(s)%s)", m->key,
                        m->refs, dev == DEV_LOADING ? ", loading" : "");
    } else {
        if (dev == DEV_READY)
            evict_device(c, m);
        if (tier == GF_TIER_HOST) {
            if (m->host_filling || m->host_users > 0)
                st = gf_err_set(err, GF_ERR_BUSY, "model '%s': its host copy is in use",
                                m->key);
            else
                gf_cache_free_host(c, m, true);
        }
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

uint64_t gf_cache_evict_idle(gf_cache *c, uint64_t bytes)
{
    pthread_mutex_lock(&c->lock);
    uint64_t free_now = budget_free(c);
    while (free_now < bytes) {
        gf_cache_model *v = gf_cache_pick_victim(c, NULL);
        if (v == NULL) {
            if (wait_for_unleased_load(c, NULL)) {
                free_now = budget_free(c);
                continue;
            }
            break;
        }
        evict_device(c, v);
        free_now = budget_free(c);
    }
    pthread_mutex_unlock(&c->lock);
    return free_now;
}

/* ---- public: observability ----------------------------------------------------------- */

void gf_cache_get_stats(gf_cache *c, gf_cache_stats *out)
{
    pthread_mutex_lock(&c->lock);
    *out = c->st;
    gf_dev_usage(c->be, &out->device_used, &out->device_budget);
    out->host_used = c->host_used;
    out->host_pinned = c->host_pool != NULL ? gf_host_pool_pinned(c->host_pool) : 0;
    out->host_budget = c->cfg.host_budget;
    out->pinned_bytes = c->pinned_bytes;
    out->pin_limit = c->pin_limit;
    out->models = (uint32_t)c->n_models;
    out->models_on_device = 0;
    out->models_in_host = 0;
    out->device_model_bytes = 0;
    for (size_t i = 0; i < c->n_models; i++) {
        int dev = atomic_load(&c->models[i]->dev);
        if (dev == DEV_READY || dev == DEV_LOADING) {
            out->models_on_device++;
            if (!c->models[i]->small)
                out->device_model_bytes += c->models[i]->range_bytes;
        }
        if (c->models[i]->host_ready)
            out->models_in_host++;
    }
    out->device_model_bytes += (uint64_t)c->n_slabs * c->page_size; /* shared pages */
    out->host_bw_gbps = c->bw_host / 1000.0;
    out->store_bw_gbps = c->bw_store / 1000.0;
    pthread_mutex_unlock(&c->lock);
}

void gf_cache_snapshot(gf_cache *c, void (*fn)(void *arg, const gf_cache_residency *r),
                       void *arg)
{
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->n_models; i++) {
        gf_cache_model *m = c->models[i];
        int dev = atomic_load(&m->dev);
        gf_cache_residency r = {
            .key = m->key,
            .on_device = dev == DEV_READY,
            .loading = dev == DEV_LOADING,
            .in_host = m->host_ready,
            .leases = m->refs,
            .device_bytes = (dev == DEV_READY || dev == DEV_LOADING) ? m->range_bytes : 0,
            .host_bytes = m->host_ready ? m->host_bytes : 0,
            .hits = m->hits,
            .last_used_us = m->last_used_us,
        };
        fn(arg, &r);
    }
    pthread_mutex_unlock(&c->lock);
}
