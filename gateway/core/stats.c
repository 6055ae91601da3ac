/* gpufaas — Triton's statistics extension (gateway/core): what the batcher
 * and the workers' events record, and the per-model view of it. The
 * numbers live in the metrics registry (metrics.h), so /metrics and
 * GET /v2/models/stats read one source.
 *
 * Phases, per request (inference_stats): success / fail = submit to
 * answer; queue = the gateway's batch queue and the worker's queue;
 * compute_input = the worker's swap-in of the parameters the request waited
 * for (our input copies are part of compute_infer); compute_infer = the
 * function, first input copy to last output copy; compute_output = the
 * gateway's split of a batch's outputs (counted, not timed: it is a copy).
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/core/internal.h"

static const char *const phases[] = {"success", "fail", "queue", "compute_input", "compute_infer",
                                     "compute_output"};
enum { PH_SUCCESS, PH_FAIL, PH_QUEUE, PH_INPUT, PH_INFER, PH_OUTPUT, PH_COUNT_ };

_Static_assert(GW_SLOT_PHASES + 2 * PH_COUNT_ <= GW_SLOT_INFERENCES,
               "gw_version.mslots: the phases overlap the next slots");

void gw_stats_request(gf_gw *gw, gw_version *v, const gf_gw_result *res, int64_t rows)
{
    const char *ver = v->ver;
    const char *fn = v->fn->name;
    const char *l2[2] = {fn, ver};
    const char *lp[PH_COUNT_][3];
    for (int p = 0; p < PH_COUNT_; p++) {
        lp[p][0] = fn;
        lp[p][1] = ver;
        lp[p][2] = phases[p];
    }
    /* every phase a request is timed in: its count and its summed seconds */
    gw_metric_op ops[2 * PH_COUNT_ + 2];
    size_t n = 0;
#define PHASE(ph, us)                                                                         \
    do {                                                                                      \
        gw_metric_slot *sl = &v->mslots[GW_SLOT_PHASES + 2 * (ph)];                           \
        ops[n++] = (gw_metric_op){GW_M_PHASE_COUNT, lp[ph], 1, sl};                          \
        ops[n++] = (gw_metric_op){GW_M_PHASE_SECONDS, lp[ph], (double)(us) * 1e-6, sl + 1};  \
    } while (0)
    if (res->status != GF_OK) {
        PHASE(PH_FAIL, res->total_us);
    } else {
        PHASE(PH_SUCCESS, res->total_us);
        PHASE(PH_QUEUE, res->queue_us);
        PHASE(PH_INPUT, res->load_us);
        PHASE(PH_INFER, res->exec_us);
        PHASE(PH_OUTPUT, 0);
#undef PHASE
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ops[n++] = (gw_metric_op){GW_M_INFERENCES, l2, (double)(rows > 0 ? rows : 1),
                                  &v->mslots[GW_SLOT_INFERENCES]};
        ops[n++] = (gw_metric_op){GW_M_LAST_INFERENCE, l2,
                                  (double)ts.tv_sec + (double)(ts.tv_nsec / 1000000) * 1e-3,
                                  &v->mslots[GW_SLOT_LAST_INFERENCE]};
    }
    gw_metric_apply(gw->metrics, ops, n);
}

void gw_stats_batch(gf_gw *gw, const gw_version *v, int64_t rows, uint64_t load_us,
                    uint64_t exec_us)
{
    const char *ver = v->ver;
    char bs[GF_FMT_INT_MAX];
    gf_fmt_i64(bs, rows > 0 ? rows : 1);
    const char *l2[2] = {v->fn->name, ver};
    const char *l3[3] = {v->fn->name, ver, bs};
    const char *li[4] = {v->fn->name, ver, bs, phases[PH_INPUT]};
    const char *lx[4] = {v->fn->name, ver, bs, phases[PH_INFER]};
    const char *lo[4] = {v->fn->name, ver, bs, phases[PH_OUTPUT]};
    const gw_metric_op ops[] = {
        {GW_M_EXECUTIONS, l2, 1, NULL},
        {GW_M_BATCH_EXECUTIONS, l3, 1, NULL},
        {GW_M_BATCH_SECONDS, li, (double)load_us * 1e-6, NULL},
        {GW_M_BATCH_SECONDS, lx, (double)exec_us * 1e-6, NULL},
        {GW_M_BATCH_SECONDS, lo, 0, NULL},
    };
    gw_metric_apply(gw->metrics, ops, sizeof ops / sizeof ops[0]);
}

void gw_stats_swap_in(gf_gw *gw, const gw_version *v, uint64_t bytes, uint64_t micros)
{
    const char *ver = v->ver;
    const char *l2[2] = {v->fn->name, ver};
    gw_metric_add(gw->metrics, GW_M_MODEL_SWAP_INS, l2, 1);
    gw_metric_add(gw->metrics, GW_M_MODEL_SWAP_BYTES, l2, (double)bytes);
    gw_metric_add(gw->metrics, GW_M_MODEL_SWAP_SECONDS, l2, (double)micros * 1e-6);
}

/* ---- the view ---------------------------------------------------------------------- */

static json_int_t ns_of(double seconds)
{
    return (json_int_t)(seconds * 1e9 + 0.5);
}

static json_t *duration(double count, double seconds)
{
    return json_pack("{s:I, s:I}", "count", (json_int_t)count, "ns", ns_of(seconds));
}

/* batch_stats: one entry per batch size seen. */
typedef struct batch_acc {
    json_t *by_size; /* {"8": {...}} */
    gw_metrics *m;
} batch_acc;

static void batch_seen(void *arg, const char *const *labels, double count)
{
    batch_acc *a = arg;
    json_t *e = json_object();
    json_object_set_new(e, "batch_size", json_integer(strtoll(labels[2], NULL, 10)));
    json_object_set_new(e, "count", json_integer((json_int_t)count)); /* shown by Triton too */
    json_object_set_new(a->by_size, labels[2], e);
}

static void batch_time(void *arg, const char *const *labels, double seconds)
{
    batch_acc *a = arg;
    json_t *e = json_object_get(a->by_size, labels[2]);
    if (e == NULL)
        return;
    json_t *c = json_object_get(e, "count");
    json_object_set_new(e, labels[3], duration(json_integer_value(c), seconds));
}

static json_t *model_stat(gf_gw *gw, const gw_version *v)
{
    const char *ver = v->ver;
    const char *fn = v->fn->name;
    const char *l2[2] = {fn, ver};
    gw_metrics *m = gw->metrics;
    json_t *inf = json_object();
    for (int p = 0; p < PH_COUNT_; p++) {
        const char *l3[3] = {fn, ver, phases[p]};
        json_object_set_new(inf, phases[p],
                            duration(gw_metric_get(m, GW_M_PHASE_COUNT, l3),
                                     gw_metric_get(m, GW_M_PHASE_SECONDS, l3)));
    }
    json_object_set_new(inf, "cache_hit", duration(0, 0)); /* no response cache */
    batch_acc a = {json_object(), m};
    gw_metric_each(m, GW_M_BATCH_EXECUTIONS, l2, 2, batch_seen, &a);
    gw_metric_each(m, GW_M_BATCH_SECONDS, l2, 2, batch_time, &a);
    json_t *batches = json_array();
    const char *k;
    json_t *e;
    json_object_foreach(a.by_size, k, e)
        json_array_append(batches, e);
    json_decref(a.by_size);
    /* ours: cold starts, swap-ins, and where the version is now */
    json_t *tiers = json_array();
    for (int w = 0; w < gw->n_workers; w++)
        if (v->pl[w].state != GW_PL_NONE)
            json_array_append_new(tiers, json_pack("{s:i, s:s}", "worker", w, "tier",
                                                   gf_tier_name((gf_tier)v->pl[w].tier)));
    json_t *ours = json_pack(
        "{s:I, s:o, s:I, s:o}", "cold_starts",
        (json_int_t)gw_metric_get(m, GW_M_COLD_STARTS, l2), "swap_in",
        duration(gw_metric_get(m, GW_M_MODEL_SWAP_INS, l2),
                 gw_metric_get(m, GW_M_MODEL_SWAP_SECONDS, l2)),
        "swap_in_bytes", (json_int_t)gw_metric_get(m, GW_M_MODEL_SWAP_BYTES, l2), "tiers",
        tiers);
    double last = gw_metric_get(m, GW_M_LAST_INFERENCE, l2);
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:o, s:o, s:o}", "name", fn, "version", ver,
                     "last_inference", (json_int_t)(last * 1e3 + 0.5), "inference_count",
                     (json_int_t)gw_metric_get(m, GW_M_INFERENCES, l2), "execution_count",
                     (json_int_t)gw_metric_get(m, GW_M_EXECUTIONS, l2), "inference_stats", inf,
                     "batch_stats", batches, "gpufaas", ours);
}

gf_status gf_gw_model_stats(gf_gw *gw, const char *name, int64_t version, gf_buf *out,
                            gf_err *err)
{
    if (name != NULL)
        gw_sync_lookup(gw, name, version);
    json_t *list = json_array();
    gf_status st = GF_OK;
    pthread_mutex_lock(&gw->lock);
    gw_function *one = NULL;
    if (name != NULL) {
        one = gf_function_name_valid(name) ? gw_function_find(gw, name) : NULL;
        if (one == NULL || one->deleted)
            st = gf_err_set(err, GF_ERR_NOT_FOUND, "Request for unknown model: '%.80s' is not "
                            "found", name);
        else if (version != 0 && gw_version_find(one, version) == NULL)
            st = gf_err_set(err, GF_ERR_NOT_FOUND, "Request for unknown model: '%.80s' version "
                            "%lld is not found", name, (long long)version);
    }
    for (size_t i = 0; i < gw->n_fns && st == GF_OK; i++) {
        const gw_function *f = gw->fns[i];
        if (f->deleted || (one != NULL && f != one))
            continue;
        for (size_t k = 0; k < f->n; k++) {
            const gw_version *v = f->versions[k];
            if (v->state == GF_STORE_VERSION_DELETED || (version != 0 && v->version != version))
                continue;
            json_array_append_new(list, model_stat(gw, v));
        }
    }
    pthread_mutex_unlock(&gw->lock);
    if (st != GF_OK) {
        json_decref(list);
        return st;
    }
    json_t *j = json_pack("{s:o}", "model_stats", list);
    char *text = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    st = text != NULL ? gf_buf_append_str(out, text) : GF_ERR_NOMEM;
    free(text);
    return st;
}
