/* gpufaas — the gateway's router: choose the worker that minimises the
 * expected completion time of a batch,
 *
 *     queue wait + swap-in cost + execution estimate
 *
 * queue wait   the estimates of the batches already sent to the worker and
 *              not answered;
 * swap-in      0 when the model is on the worker's device; bytes / the
 *              worker's measured host-tier bandwidth when it is in its host
 *              tier; bytes / its measured store bandwidth otherwise;
 * execution    a moving average of the version's execution time on that
 *              worker (on any worker until it has run there; 1 ms at first).
 *
 * Locality follows: a model that is warm somewhere keeps landing there until
 * that worker's queue outweighs a swap elsewhere. A function whose queue
 * wait exceeds half its SLO gets a second replica prefetched on another
 * worker. */
#include <string.h>

#include "core/log.h"
#include "gateway/core/internal.h"

#define DEFAULT_HOST_BPS 10e9  /* until the worker has measured it */
#define DEFAULT_STORE_BPS 2e9
#define DEFAULT_EXEC_US 1000.0

static double swap_us(const gw_worker *w, const gw_version *v, const gw_placement *pl)
{
    if (pl->tier == GF_TIER_DEVICE)
        return 0;
    double bps;
    if (pl->tier == GF_TIER_HOST)
        bps = w->have_stats && w->stats.host_bw_bps > 0 ? (double)w->stats.host_bw_bps
                                                        : DEFAULT_HOST_BPS;
    else
        bps = w->have_stats && w->stats.store_bw_bps > 0 ? (double)w->stats.store_bw_bps
                                                         : DEFAULT_STORE_BPS;
    return (double)(v->device_bytes ? v->device_bytes : v->bytes) / bps * 1e6;
}

static double exec_us(const gw_version *v, const gw_placement *pl)
{
    if (pl->exec_us > 0)
        return pl->exec_us;
    return v->exec_us > 0 ? v->exec_us : DEFAULT_EXEC_US;
}

gw_worker *gw_route(gf_gw *gw, gw_version *v, int exclude, double *est_us)
{
    gw_worker *best = NULL;
    double best_cost = 0, best_est = 0;
    for (int i = 0; i < gw->n_workers; i++) {
        gw_worker *w = &gw->workers[i];
        if (w->state != GW_W_UP || i == exclude)
            continue;
        const gw_placement *pl = &v->pl[i];
        double sw = swap_us(w, v, pl), ex = exec_us(v, pl);
        double cost = w->queued_us + sw + ex;
        if (best == NULL || cost < best_cost ||
            (cost == best_cost && w->n_inflight < best->n_inflight)) {
            best = w;
            best_cost = cost;
            best_est = sw + ex;
        }
    }
    if (est_us != NULL)
        *est_us = best_est;
    return best;
}

double gw_route_predict_us(gf_gw *gw, gw_version *v)
{
    double best = -1;
    for (int i = 0; i < gw->n_workers; i++) {
        gw_worker *w = &gw->workers[i];
        if (w->state != GW_W_UP)
            continue;
        const gw_placement *pl = &v->pl[i];
        double cost = w->queued_us + swap_us(w, v, pl) + exec_us(v, pl);
        if (best < 0 || cost < best)
            best = cost;
    }
    return best;
}

bool gw_replicas_add_compute(const gf_gw *gw, long cores)
{
    int cpu = 0;
    for (int i = 0; i < gw->n_workers; i++)
        cpu += strncmp(gw->workers[i].device, "cpu", 3) == 0;
    return cpu < gw->n_workers || (long)gw->n_workers < cores;
}

void gw_route_replicate(gf_gw *gw, gw_version *v, gw_worker *chosen)
{
    if (gw->cfg.no_replicate || v->mf->slo_ms <= 0 || chosen->queued_us <= v->mf->slo_ms * 1000.0 / 2)
        return;
    /* a second replica, on the best worker that does not have it yet */
    for (int i = 0; i < gw->n_workers; i++)
        if (i != chosen->id && gw->workers[i].state == GW_W_UP &&
            (v->pl[i].tier == GF_TIER_DEVICE || v->pl[i].state == GW_PL_LOADING))
            return; /* already replicated */
    gw_worker *other = gw_route(gw, v, chosen->id, NULL);
    if (other == NULL)
        return;
    gf_err err;
    if (gw_worker_load(gw, other, v, GF_TIER_DEVICE, &err) == GF_OK)
        GF_LOG_I("function '%s': queue wait %.1f ms exceeds half its %.1f ms SLO; prefetching a "
                 "replica on worker %d", v->fn->name, chosen->queued_us / 1000.0, v->mf->slo_ms,
                 other->id);
}
