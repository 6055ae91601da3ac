/* gpufaas — every answered inference request, accounted in one place: its
 * /metrics series and its invocations row in SQLite come from the same
 * gw_answer, so the two always count the same requests. A request refused
 * before any work (a bad body, an unknown function, a full queue) is
 * accounted here too, with its reason; and each request of a function with an
 * SLO, with how it fared against it. New per-request figures (Triton's
 * statistics) extend gw_answer and this file. */
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "gateway/core/internal.h"

int64_t gw_slo_us(const gf_manifest *mf)
{
    return mf->slo_ms > 0 ? (int64_t)(mf->slo_ms * 1000.0 + 0.5) : 0;
}

gf_store_slo gw_slo_result(const gw_answer *a, int pcode)
{
    if (a->slo_us <= 0)
        return GF_STORE_SLO_NONE;
    if (a->status != GF_OK)
        return pcode >= 400 && pcode < 500 && pcode != 429 ? GF_STORE_SLO_NONE
                                                           : GF_STORE_SLO_FAILED;
    if (a->total_us <= (uint64_t)a->slo_us)
        return GF_STORE_SLO_MET;
    if (a->queue_us >= a->exec_us && a->queue_us >= a->load_us)
        return GF_STORE_SLO_QUEUE;
    /* a cold request's execution waits for its parameters (pipelined), so
     * its lateness is the swap's unless it queued most */
    return a->cold ? GF_STORE_SLO_COLD : GF_STORE_SLO_EXEC;
}

void gw_answer_record(gf_gw *gw, const gw_answer *a)
{
    char ver[GF_FMT_INT_MAX] = "", code[GF_FMT_INT_MAX];
    if (a->labelled)
        gf_fmt_i64(ver, a->version);
    int pcode = a->code != 0 ? a->code : gw_protocol_code(gw, a->status);
    gf_fmt_i64(code, pcode);
    const char *fn = a->labelled ? a->function : "";
    const char *l3[3] = {fn, ver, code};
    const char *l2[2] = {fn, ver};
    gf_store_slo slo = gw_slo_result(a, pcode);
    const char *ls[3] = {fn, ver, slo != GF_STORE_SLO_NONE ? gf_store_slo_name(slo) : ""};
    gw_metric_op ops[5];
    size_t n = 0;
    gw_metric_slot *sl = a->labelled ? a->slots : NULL;
    ops[n++] = (gw_metric_op){GW_M_REQUESTS, l3, 1,
                              sl != NULL && pcode == 200 ? &sl[GW_SLOT_REQUESTS_200] : NULL};
    ops[n++] = (gw_metric_op){GW_M_REQUEST_DURATION, l2, (double)a->total_us * 1e-6,
                              sl != NULL ? &sl[GW_SLOT_DURATION] : NULL};
    if (a->worker >= 0)
        ops[n++] = (gw_metric_op){GW_M_QUEUE_DURATION, l2, (double)a->queue_us * 1e-6,
                                  sl != NULL ? &sl[GW_SLOT_QUEUE] : NULL};
    if (a->cold)
        ops[n++] = (gw_metric_op){GW_M_COLD_STARTS, l2, 1, NULL};
    if (slo != GF_STORE_SLO_NONE)
        ops[n++] = (gw_metric_op){GW_M_SLO_REQUESTS, ls, 1, NULL};
    gw_metric_apply(gw->metrics, ops, n);
    gf_store_invocation rec = {
        .function = a->function != NULL ? a->function : "",
        .version = a->version,
        .worker = a->worker,
        .status = a->status,
        .http_code = pcode,
        .batch_size = (int32_t)a->batch_size,
        .cold = a->cold,
        .queue_us = (int64_t)a->queue_us,
        .load_us = (int64_t)a->load_us,
        .exec_us = (int64_t)a->exec_us,
        .total_us = (int64_t)a->total_us,
        .at_us = 0,
        .reason = a->status != GF_OK ? a->reason : NULL,
        .slo_us = slo != GF_STORE_SLO_NONE ? a->slo_us : 0,
        .slo = slo,
    };
    /* a full queue drops the row; the store counts it (gpufaas_store_records_total) and logs */
    if (gw->store != NULL)
        gf_store_log_invocation(gw->store, &rec);
}

/* The function and version a refused request named, resolved as far as
 * they exist (lock not held). The version, when labelled, is returned
 * pinned until its answer is recorded (else a delete meanwhile could free
 * it and its series before the answer makes them again); NULL otherwise. */
static gw_version *resolve(gf_gw *gw, const char *function, int64_t version, gw_answer *a)
{
    a->function = function != NULL && gf_function_name_valid(function) ? function : "";
    a->version = version;
    a->labelled = false;
    if (a->function[0] == '\0')
        return NULL;
    pthread_mutex_lock(&gw->lock);
    gw_function *f = gw_function_find(gw, a->function);
    gw_version *v = f != NULL && !f->deleted ? gw_version_find(f, version) : NULL;
    if (v != NULL && v->state != GF_STORE_VERSION_DELETED) {
        a->version = v->version;
        a->labelled = true;
        a->slo_us = gw_slo_us(v->mf);
        gw_version_ref(v);
    } else {
        v = NULL;
    }
    pthread_mutex_unlock(&gw->lock);
    return v;
}

/* Resolve and record a refused answer. */
static void record_refused(gf_gw *gw, const char *function, int64_t version, gw_answer *a)
{
    gw_version *v = resolve(gw, function, version, a);
    gw_answer_record(gw, a);
    if (v != NULL)
        gw_version_unref(v);
}

void gf_gw_refused(gf_gw *gw, const char *function, int64_t version, gf_status st, int code,
                   const char *reason, uint64_t total_us)
{
    gw_answer a = {.status = st == GF_OK ? GF_ERR_INTERNAL : st,
                   .code = code,
                   .reason = reason,
                   .worker = -1,
                   .total_us = total_us};
    record_refused(gw, function, version, &a);
}

void gw_answer_refused(gf_gw *gw, const char *function, int64_t version, gf_status st,
                       const char *reason, uint64_t t0_us)
{
    gw_answer a = {.status = st == GF_OK ? GF_ERR_INTERNAL : st,
                   .reason = reason,
                   .worker = -1,
                   .total_us = gf_mono_us() - t0_us};
    record_refused(gw, function, version, &a);
}
