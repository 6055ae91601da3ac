/* gpufaas — where each version's parameters are (gateway/core): the copies
 * of a version in the host and device tiers of each worker, as the worker
 * reports them. Every change to a copy is written through the store in the
 * same call, under gw->lock, so SQLite's placements rows follow the same
 * sequence as memory; hits and last use are batched: the supervisor hands
 * the store what changed about every half second, so the database is at
 * most a second behind GET /v1/placements. */
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "gateway/core/internal.h"

/* The copy of v on worker in tier (GF_TIER_HOST or DEVICE), or NULL. */
static gw_copy *copy_of(gw_version *v, int worker, int tier)
{
    if (worker < 0 || worker >= GW_MAX_WORKERS)
        return NULL;
    if (tier == GF_TIER_HOST)
        return &v->pl[worker].copy[GW_COPY_HOST];
    if (tier == GF_TIER_DEVICE)
        return &v->pl[worker].copy[GW_COPY_DEVICE];
    return NULL;
}

/* The router's view of a placement (pl->tier): the highest tier a copy is
 * in, else the store when the worker knows the version, else none. */
static void retier(gw_placement *pl)
{
    pl->tier = pl->copy[GW_COPY_DEVICE].present ? GF_TIER_DEVICE
             : pl->copy[GW_COPY_HOST].present   ? GF_TIER_HOST
             : pl->state == GW_PL_REGISTERED    ? GF_TIER_STORE
                                                : GF_TIER_NONE;
}

static gf_store_placement record_of(const gw_version *v, int worker, int tier,
                                    const gw_copy *c)
{
    return (gf_store_placement){v->fn->name,
                                v->version,
                                worker,
                                tier == GF_TIER_DEVICE ? GF_TIER_DEVICE : GF_TIER_HOST,
                                c->bytes,
                                GF_STORE_PLACEMENT_READY,
                                c->loaded_at_us};
}

/* What a copy of v takes of its tier: the device pages or host tier bytes
 * the worker said the model takes when it loaded it (what the worker's
 * memory figures count), else what the event moved. */
static uint64_t tier_bytes(const gw_version *v, int tier, uint64_t moved)
{
    uint64_t b = tier == GF_TIER_DEVICE ? v->device_bytes : v->host_bytes;
    return b != 0 ? b : moved;
}

void gw_copy_loaded(gf_gw *gw, gw_version *v, int worker, int tier, uint64_t bytes,
                    int64_t at_us)
{
    gw_copy *c = copy_of(v, worker, tier);
    if (c == NULL)
        return;
    bytes = tier_bytes(v, tier, bytes);
    if (!c->present) {
        memset(c, 0, sizeof *c);
        c->present = true;
        c->loaded_at_us = at_us != 0 ? at_us : gf_wall_us();
    }
    c->bytes = bytes;
    retier(&v->pl[worker]);
    gf_store_placement rec = record_of(v, worker, tier, c);
    gf_store_log_placement(gw->store, &rec);
}

void gw_copy_evicted(gf_gw *gw, gw_version *v, int worker, int tier)
{
    gw_copy *c = copy_of(v, worker, tier);
    if (c == NULL || !c->present)
        return;
    gf_store_placement rec = record_of(v, worker, tier, c);
    memset(c, 0, sizeof *c);
    retier(&v->pl[worker]);
    gf_store_log_placement_remove(gw->store, &rec);
}

void gw_copy_used(gf_gw *gw, gw_version *v, int worker, int tier, uint32_t hits, int64_t at_us)
{
    gw_copy *c = copy_of(v, worker, tier);
    if (c == NULL)
        return;
    if (!c->present) {
        /* the worker ran it from there before its EVENT said so (events and
         * results travel apart): the copy is there, the event will confirm */
        gw_copy_loaded(gw, v, worker, tier, v->bytes, at_us);
    }
    c->hits += hits;
    if (at_us > c->last_used_us)
        c->last_used_us = at_us;
}

/* Remove every copy of v on worker from memory and the store. */
static void forget(gf_gw *gw, gw_version *v, int worker)
{
    gw_copy_evicted(gw, v, worker, GF_TIER_DEVICE);
    gw_copy_evicted(gw, v, worker, GF_TIER_HOST);
}

void gw_copies_forget_worker(gf_gw *gw, int worker)
{
    for (size_t i = 0; i < gw->n_fns; i++)
        for (size_t k = 0; k < gw->fns[i]->n; k++)
            forget(gw, gw->fns[i]->versions[k], worker);
}

void gw_copies_forget_version(gf_gw *gw, gw_version *v)
{
    for (int w = 0; w < gw->n_workers; w++)
        forget(gw, v, w);
}

void gw_copies_flush_hits(gf_gw *gw)
{
    for (size_t i = 0; i < gw->n_fns; i++) {
        gw_function *f = gw->fns[i];
        for (size_t k = 0; k < f->n; k++) {
            gw_version *v = f->versions[k];
            for (int w = 0; w < gw->n_workers; w++) {
                for (int t = 0; t < 2; t++) {
                    gw_copy *c = &v->pl[w].copy[t];
                    if (!c->present || c->hits == c->hits_flushed)
                        continue;
                    int tier = t == GW_COPY_DEVICE ? GF_TIER_DEVICE : GF_TIER_HOST;
                    gf_store_placement rec = record_of(v, w, tier, c);
                    rec.at_us = c->last_used_us;
                    uint64_t delta = c->hits - c->hits_flushed;
                    if (delta > UINT32_MAX)
                        delta = UINT32_MAX;
                    /* a full queue: the delta waits for the next flush */
                    if (gf_store_log_placement_hit(gw->store, &rec, (uint32_t)delta) == GF_OK)
                        c->hits_flushed += delta;
                }
            }
        }
    }
    gw->last_hits_flush_us = gf_mono_us();
}
