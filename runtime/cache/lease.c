/* gpufaas — the parameter cache's leases (cache.h "Leases"): acquire (a hit,
 * or room made and a load started), a parameter's address once its copy has
 * landed, and release. The state is cache_impl.h's. */
#include "cache/cache_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/fault.h"
#include "core/log.h"

/* ---- public: leases ------------------------------------------------------------ */

gf_status gf_cache_acquire(gf_cache *c, gf_cache_model *m, gf_lease **out, gf_err *err)
{
    return gf_cache_acquire_by(c, m, 0, out, err);
}

gf_status gf_cache_acquire_by(gf_cache *c, gf_cache_model *m, uint64_t due_us, gf_lease **out,
                              gf_err *err)
{
    *out = NULL;
    gf_lease *l = GF_FAULT("cache_alloc") ? NULL : malloc(sizeof *l);
    if (l == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory for a lease on '%s'", m->key);
    l->m = m;
    gf_status st = GF_OK;
    pthread_mutex_lock(&c->lock);
again:
    switch (atomic_load(&m->dev)) {
    case DEV_READY:
        l->cold = false;
        l->src = GF_TIER_DEVICE;
        m->hits++;
        c->st.hits++;
        gf_cache_emit(c, GF_CACHE_EV_HIT, m, GF_TIER_DEVICE, GF_TIER_DEVICE, m->range_bytes, 0,
                      NULL);
        break;
    case DEV_LOADING:
        l->cold = true;
        l->src = m->src;
        break;
    case DEV_FAILED:
        st = gf_err_set(err, m->load_status ? m->load_status : GF_ERR_DEVICE,
                        "model '%s': its last load failed and is still held: %s", m->key,
                        m->load_msg);
        break;
    default:
        st = gf_cache_make_room_and_map(c, m, err);
        if (st == GF_ERR_STATE)
            goto again;
        if (st == GF_OK)
            st = gf_cache_start_load(c, m, err);
        l->cold = true;
        l->src = m->src;
        break;
    }
    if (st == GF_OK) {
        m->refs++;
        m->uses++;
        gf_cache_touch(c, m);
        /* the load is as due as the most urgent lease waiting for it */
        if (due_us != 0 && atomic_load(&m->dev) == DEV_LOADING &&
            (m->deadline_us == 0 || due_us < m->deadline_us))
            m->deadline_us = due_us;
    }
    pthread_mutex_unlock(&c->lock);
    if (st != GF_OK) {
        free(l);
        return st;
    }
    *out = l;
    return GF_OK;
}

gf_status gf_lease_param(gf_lease *l, size_t i, void **dev, gf_err *err)
{
    gf_cache_model *m = l->m;
    gf_cache *c = m->c;
    *dev = NULL;
    if (i >= m->n)
        return gf_err_set(err, GF_ERR_INVALID, "model '%s' has %zu tensors, not %zu", m->key, m->n,
                          i + 1);
    if (atomic_load(&m->dev) == DEV_READY) {
        *dev = m->va + m->t[i].offset;
        return GF_OK;
    }
    pthread_mutex_lock(&c->lock);
    while (m->n_recorded <= i && m->load_status == GF_OK)
        pthread_cond_wait(&c->cond, &c->lock);
    gf_status st = m->load_status;
    if (st != GF_OK)
        gf_err_set(err, st, "loading model '%s' failed: %s", m->key, m->load_msg);
    pthread_mutex_unlock(&c->lock);
    if (st != GF_OK)
        return st;
    st = gf_stream_wait_event(c->be, c->compute, m->t[i].ev, err);
    if (st == GF_OK && gf_event_query(c->be, m->t[i].ev))
        st = gf_event_sync(c->be, m->t[i].ev, err); /* reports a failed copy */
    if (st != GF_OK) {
        gf_err_prefix(err, "loading tensor '%s' of model '%s'", m->t[i].st->name, m->key);
        return st;
    }
    *dev = m->va + m->t[i].offset;
    return GF_OK;
}

gf_status gf_lease_wait_all(gf_lease *l, gf_err *err)
{
    gf_cache_model *m = l->m;
    gf_cache *c = m->c;
    pthread_mutex_lock(&c->lock);
    while (atomic_load(&m->dev) == DEV_LOADING)
        pthread_cond_wait(&c->cond, &c->lock);
    gf_status st = atomic_load(&m->dev) == DEV_READY ? GF_OK : m->load_status;
    if (st != GF_OK)
        gf_err_set(err, st, "loading model '%s' failed: %s", m->key, m->load_msg);
    pthread_mutex_unlock(&c->lock);
    return st;
}

bool gf_lease_cold(const gf_lease *l)
{
    return l->cold;
}
gf_tier gf_lease_source(const gf_lease *l)
{
    return l->src;
}
gf_cache_model *gf_lease_model(const gf_lease *l)
{
    return l->m;
}

void gf_lease_release(gf_lease *l)
{
    if (l == NULL)
        return;
    gf_cache_model *m = l->m;
    gf_cache *c = m->c;
    pthread_mutex_lock(&c->lock);
    if (gf_event_record(c->be, m->last_use, c->compute, NULL) == GF_OK)
        m->last_use_recorded = true;
    m->refs--;
    gf_cache_touch(c, m);
    if (m->refs == 0 && atomic_load(&m->dev) == DEV_FAILED) {
        gf_event_sync(c->be, m->last_use, NULL);
        gf_cache_release_pages(c, m);
        atomic_store(&m->dev, DEV_ABSENT);
    }
    pthread_mutex_unlock(&c->lock);
    free(l);
}
