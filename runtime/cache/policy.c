/* gpufaas — the parameter cache's eviction policy (LRU, GreedyDual-Size,
 * GreedyDual-Size-Frequency) and the models' residency (pin, priority
 * class, keep-warm time; core/residency.h): which idle model goes next, and
 * how many bytes evicting could give back. See cache.h for the model. */
#include "core/clock.h"
#include "cache/cache_impl.h"

#include <pthread.h>
#include <stdatomic.h>

#include "cache/slab.h"

/* ---- policy ---------------------------------------------------------------- */

/* GDS's reload cost per byte of m if evicted now (microseconds per byte). */
static double gds_cost_per_byte(const gf_cache *c, const gf_cache_model *m)
{
    double bw = m->host_ready ? c->bw_host : c->bw_store;
    double setup = c->cfg.setup_cost_us > 0 ? c->cfg.setup_cost_us : 100.0;
    return setup / (double)m->range_bytes + 1.0 / bw;
}

void gf_cache_touch(gf_cache *c, gf_cache_model *m)
{
    m->tick = ++c->clock;
    m->last_used_us = gf_mono_us();
    if (c->cfg.policy == GF_EVICT_GDSF) {
        /* GDSF: every miss costs the same (a cold request risks its SLO
         * whatever the size), weighed by how often the model was used:
         * clock + uses x cost / size, the small and the often used kept */
        double setup = c->cfg.setup_cost_us > 0 ? c->cfg.setup_cost_us : 100.0;
        double f = (double)(m->uses ? m->uses : 1);
        m->gds_h = c->gds_clock + f * setup / (double)m->range_bytes;
    } else {
        m->gds_h = c->gds_clock + gds_cost_per_byte(c, m);
    }
}

static double priority(const gf_cache *c, const gf_cache_model *m)
{
    return c->cfg.policy == GF_EVICT_LRU ? (double)m->tick : m->gds_h;
}

static bool evictable(const gf_cache_model *m)
{
    return atomic_load(&m->dev) == DEV_READY && m->refs == 0;
}

/* On the device (or loading) and inside its keep-warm time (not pinned). */
static bool kept_warm(const gf_cache_model *m, uint64_t now)
{
    int dev = atomic_load(&m->dev);
    return !m->res.pin && m->res.keep_warm_us > 0 && (dev == DEV_READY || dev == DEV_LOADING) &&
           now - m->last_used_us < m->res.keep_warm_us;
}

/* True when a should be evicted before b: the lower priority class, then
 * the policy's order. */
static bool evict_before(const gf_cache *c, const gf_cache_model *a, const gf_cache_model *b)
{
    if (a->res.priority != b->res.priority)
        return a->res.priority < b->res.priority;
    return priority(c, a) < priority(c, b);
}

/* Bytes on the device held by pinned and kept-warm models. Lock held. */
static uint64_t protected_bytes(const gf_cache *c, uint64_t now)
{
    uint64_t b = 0;
    for (size_t i = 0; i < c->n_models; i++) {
        const gf_cache_model *m = c->models[i];
        int dev = atomic_load(&m->dev);
        if ((m->res.pin && (dev == DEV_READY || dev == DEV_LOADING)) || kept_warm(m, now))
            b += m->range_bytes;
    }
    return b;
}

/* The idle device model to evict next (not `keep`), or NULL: never a
 * pinned one; one inside its keep-warm time only when nothing else is idle
 * and the protected bytes exceed the pin limit (the lowest class, then the
 * least recently used, loses its guarantee first). Lock held. */
gf_cache_model *gf_cache_pick_victim(gf_cache *c, const gf_cache_model *keep)
{
    uint64_t now = gf_mono_us();
    gf_cache_model *best = NULL, *warm = NULL;
    for (size_t i = 0; i < c->n_models; i++) {
        gf_cache_model *m = c->models[i];
        if (m == keep || !evictable(m) || m->res.pin)
            continue;
        if (kept_warm(m, now)) {
            if (warm == NULL || m->res.priority < warm->res.priority ||
                (m->res.priority == warm->res.priority && m->last_used_us < warm->last_used_us))
                warm = m;
        } else if (best == NULL || evict_before(c, m, best)) {
            best = m;
        }
    }
    if (best == NULL && warm != NULL && protected_bytes(c, now) > c->pin_limit)
        best = warm;
    return best;
}

/* ---- what evicting could give back ------------------------------------------ */

/* Bytes of the budget evicting every idle model pick_victim may take would
 * give back: the pages of idle paged models, and the page of each slab
 * whose models are all idle (evicting some of a slab's models frees no
 * page). Pinned models never count; kept-warm paged ones only as far as
 * the guarantees pass the pin limit. Lock held. */
uint64_t gf_cache_idle_bytes(gf_cache *c, const gf_cache_model *keep)
{
    uint64_t now = gf_mono_us(), idle = 0, warm = 0;
    for (size_t i = 0; i < c->n_slabs; i++)
        c->slabs[i]->mark = 0;
    for (size_t i = 0; i < c->n_models; i++) {
        gf_cache_model *o = c->models[i];
        if (o == keep || !evictable(o) || o->res.pin)
            continue;
        bool w = kept_warm(o, now);
        if (!o->small) {
            if (w)
                warm += o->range_bytes;
            else
                idle += o->range_bytes;
        } else if (o->slab != NULL && !w) {
            o->slab->mark++;
        }
    }
    for (size_t i = 0; i < c->n_slabs; i++)
        if (c->slabs[i]->mark == c->slabs[i]->n_ext)
            idle += c->page_size;
    uint64_t prot = protected_bytes(c, now);
    if (prot > c->pin_limit) /* the guarantees beyond the limit can go */
        idle += warm < prot - c->pin_limit ? warm : prot - c->pin_limit;
    return idle;
}

/* ---- residency ---------------------------------------------------------------- */

gf_residency gf_cache_model_residency(gf_cache *c, const gf_cache_model *m)
{
    pthread_mutex_lock(&c->lock);
    gf_residency r = m->res;
    pthread_mutex_unlock(&c->lock);
    return r;
}

gf_status gf_cache_model_set_residency(gf_cache *c, gf_cache_model *m, const gf_residency *r,
                                       gf_err *err)
{
    gf_status st = gf_residency_check(r, err);
    if (st != GF_OK)
        return gf_err_prefix(err, "model '%s'", m->key);
    pthread_mutex_lock(&c->lock);
    if (r->pin && !m->res.pin && c->pinned_bytes + m->range_bytes > c->pin_limit) {
        st = gf_err_set(err, GF_ERR_TOO_LARGE,
                        "pinning model '%s' (%zu bytes) would pin %llu bytes, more than the "
                        "pin limit of %llu bytes",
                        m->key, m->range_bytes,
                        (unsigned long long)(c->pinned_bytes + m->range_bytes),
                        (unsigned long long)c->pin_limit);
    } else {
        if (r->pin != m->res.pin)
            c->pinned_bytes =
                r->pin ? c->pinned_bytes + m->range_bytes : c->pinned_bytes - m->range_bytes;
        m->res = *r;
        pthread_cond_broadcast(&c->cond); /* an unpinned model may be evictable now */
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}
