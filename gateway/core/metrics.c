/* gpufaas — the gateway's metrics: definitions, updates, exposition. */
#include "gateway/core/metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { KIND_COUNTER, KIND_GAUGE, KIND_HISTOGRAM } metric_kind;

#define MAX_LABELS 4
#define MAX_BUCKETS 16

static const double duration_buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                          0.1,    0.25,  0.5,    1,     2.5,  5,     10};
static const double batch_buckets[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};

/* The definitions: one line per family. */
static const struct {
    const char *name;
    metric_kind kind;
    const char *help;
    int n_labels;
    const char *labels[MAX_LABELS];
    const double *buckets;
    int n_buckets;
} defs[GW_M_COUNT_] = {
    [GW_M_REQUESTS] = {"gpufaas_requests_total", KIND_COUNTER,
                       "Inference requests answered, refused ones included, by function, "
                       "version and HTTP status code.", 3, {"function", "version", "code"},
                       NULL, 0},
    [GW_M_REQUEST_DURATION] = {"gpufaas_request_duration_seconds", KIND_HISTOGRAM,
                               "Time from receiving an inference request to its answer.", 2,
                               {"function", "version"}, duration_buckets, 14},
    [GW_M_QUEUE_DURATION] = {"gpufaas_queue_duration_seconds", KIND_HISTOGRAM,
                             "Time a request waited in the gateway's batch queue and the "
                             "worker's queue.", 2, {"function", "version"}, duration_buckets, 14},
    [GW_M_COLD_STARTS] = {"gpufaas_cold_starts_total", KIND_COUNTER,
                          "Requests whose parameters were not on the device.", 2,
                          {"function", "version"}, NULL, 0},
    [GW_M_BATCH_SIZE] = {"gpufaas_batch_size", KIND_HISTOGRAM,
                         "Requests per batch sent to a worker.", 2, {"function", "version"},
                         batch_buckets, 10},
    [GW_M_SLO_REQUESTS] = {"gpufaas_slo_requests_total", KIND_COUNTER,
                           "Requests of functions with an SLO, by result: met, or late because "
                           "of the swap-in (cold), the queue or the execution (exec), or failed.",
                           3, {"function", "version", "result"}, NULL, 0},
    [GW_M_SWAP_BYTES] = {"gpufaas_swap_bytes_total", KIND_COUNTER,
                         "Bytes moved between tiers, by worker and direction.", 3,
                         {"worker", "from", "to"}, NULL, 0},
    [GW_M_SWAP_DURATION] = {"gpufaas_swap_duration_seconds", KIND_HISTOGRAM,
                            "Duration of loads into a tier.", 1, {"worker"}, duration_buckets,
                            14},
    [GW_M_EVICTIONS] = {"gpufaas_evictions_total", KIND_COUNTER,
                        "Models evicted from a worker's device.", 1, {"worker"}, NULL, 0},
    [GW_M_DEVICE_MEMORY] = {"gpufaas_device_memory_bytes", KIND_GAUGE,
                            "Device memory of a worker: used and budget.", 2, {"worker", "kind"},
                            NULL, 0},
    [GW_M_HOST_MEMORY] = {"gpufaas_host_memory_bytes", KIND_GAUGE,
                          "Host tier memory of a worker: used and budget.", 2,
                          {"worker", "kind"}, NULL, 0},
    [GW_M_WORKERS] = {"gpufaas_workers", KIND_GAUGE, "Workers by state.", 1, {"state"}, NULL, 0},
    [GW_M_WORKER_RESTARTS] = {"gpufaas_worker_restarts_total", KIND_COUNTER,
                              "Worker processes restarted after they died.", 1, {"worker"}, NULL,
                              0},
    [GW_M_STORE_RECORDS] = {"gpufaas_store_records_total", KIND_COUNTER,
                            "Records handed to the SQLite writer, by outcome: committed, "
                            "dropped (its queue was full), rejected (the database refused "
                            "them), lost (a commit failed).", 1, {"outcome"}, NULL, 0},
    [GW_M_VERSIONS] = {"gpufaas_function_versions", KIND_GAUGE,
                       "Function versions by state: ready, broken, and deleted ones that "
                       "requests in flight still hold (freed with their series once answered).",
                       1, {"state"}, NULL, 0},
    [GW_M_WORKER_HUNG] = {"gpufaas_worker_heartbeat_kills_total", KIND_COUNTER,
                          "Workers killed because they answered no heartbeat for "
                          "--heartbeat-timeout.", 1, {"worker"}, NULL, 0},
    [GW_M_SHARED_UP] = {"gpufaas_shared_store_up", KIND_GAUGE,
                        "1 when the shared store could be read at the last try, else 0 (only "
                        "with --shared-store).", 0, {NULL}, NULL, 0},
    [GW_M_SHARED_SYNCED] = {"gpufaas_shared_store_last_sync_timestamp_seconds", KIND_GAUGE,
                            "Unix time of the last successful read of the shared store.", 0,
                            {NULL}, NULL, 0},
    [GW_M_INFERENCES] = {"gpufaas_inference_count_total", KIND_COUNTER,
                         "Inferences (batch rows) answered successfully.", 2,
                         {"function", "version"}, NULL, 0},
    [GW_M_EXECUTIONS] = {"gpufaas_execution_count_total", KIND_COUNTER,
                         "Batches a worker ran successfully.", 2, {"function", "version"}, NULL,
                         0},
    [GW_M_PHASE_COUNT] = {"gpufaas_inference_phase_total", KIND_COUNTER,
                          "Requests timed in each phase (success, fail, queue, compute_input, "
                          "compute_infer, compute_output).", 3, {"function", "version", "phase"},
                          NULL, 0},
    [GW_M_PHASE_SECONDS] = {"gpufaas_inference_phase_seconds_total", KIND_COUNTER,
                            "Summed time of requests in each phase.", 3,
                            {"function", "version", "phase"}, NULL, 0},
    [GW_M_BATCH_EXECUTIONS] = {"gpufaas_batch_executions_total", KIND_COUNTER,
                               "Batches run, by batch size (rows).", 3,
                               {"function", "version", "batch_size"}, NULL, 0},
    [GW_M_BATCH_SECONDS] = {"gpufaas_batch_phase_seconds_total", KIND_COUNTER,
                            "Summed time of batches in each compute phase, by batch size.", 4,
                            {"function", "version", "batch_size", "phase"}, NULL, 0},
    [GW_M_LAST_INFERENCE] = {"gpufaas_last_inference_timestamp_seconds", KIND_GAUGE,
                             "Unix time of the last successful inference.", 2,
                             {"function", "version"}, NULL, 0},
    [GW_M_MODEL_SWAP_INS] = {"gpufaas_model_swap_ins_total", KIND_COUNTER,
                             "Loads of a model version onto a worker's device.", 2,
                             {"function", "version"}, NULL, 0},
    [GW_M_MODEL_SWAP_BYTES] = {"gpufaas_model_swap_in_bytes_total", KIND_COUNTER,
                               "Bytes of those loads.", 2, {"function", "version"}, NULL, 0},
    [GW_M_MODEL_SWAP_SECONDS] = {"gpufaas_model_swap_in_seconds_total", KIND_COUNTER,
                                 "Summed duration of those loads.", 2, {"function", "version"},
                                 NULL, 0},
    [GW_M_TENSOR_COPIED] = {"gpufaas_tensor_copied_bytes_total", KIND_COUNTER,
                            "Tensor bytes copied in user space on the request path (H2D and "
                            "D2H excluded), by process (gateway, workerN) and direction (in, "
                            "out): divided by the tensor bytes served, the copies per request.",
                            2, {"process", "direction"}, NULL, 0},
};

/* Chains per family in the index from label values to series: a lookup on
 * every answered request must not grow with the number of functions. */
#define INDEX_SIZE 1024

typedef struct series {
    struct series *next;  /* the family's series, newest first (written in this order) */
    struct series *hnext; /* the next in its index chain */
    uint32_t hash;        /* of key */
    char *key;          /* label values joined with \x1f, for lookups */
    char *vbuf;         /* a copy of key cut into the values */
    char **values;      /* label values, pointing into vbuf */
    double value;       /* counter/gauge; histogram: sum */
    uint64_t count;     /* histogram observations */
    uint64_t buckets[MAX_BUCKETS];
} series;

struct gw_metrics {
    pthread_mutex_t lock;
    uint64_t gen; /* bumped whenever a series is freed: remembered lookups
                     (gw_metric_slot) of an older gen look up again */
    series *families[GW_M_COUNT_];
    series **index[GW_M_COUNT_]; /* INDEX_SIZE chains, made with the family's first series */
};

gw_metrics *gw_metrics_new(void)
{
    gw_metrics *m = calloc(1, sizeof *m);
    if (m != NULL) {
        pthread_mutex_init(&m->lock, NULL);
        m->gen = 1; /* a zeroed slot is never current */
    }
    return m;
}

static void series_free(series *s)
{
    while (s != NULL) {
        series *next = s->next;
        free(s->key);
        free(s->vbuf);
        free(s->values);
        free(s);
        s = next;
    }
}

void gw_metric_clear(gw_metrics *m, gw_metric_id id)
{
    pthread_mutex_lock(&m->lock);
    series_free(m->families[id]);
    m->families[id] = NULL;
    m->gen++;
    if (m->index[id] != NULL)
        memset(m->index[id], 0, INDEX_SIZE * sizeof *m->index[id]);
    pthread_mutex_unlock(&m->lock);
}

void gw_metrics_free(gw_metrics *m)
{
    if (m == NULL)
        return;
    for (int i = 0; i < GW_M_COUNT_; i++) {
        series_free(m->families[i]);
        free(m->index[i]);
    }
    pthread_mutex_destroy(&m->lock);
    free(m);
}

/* Find or create the series of (id, labels). Lock held. NULL on OOM. On
 * every answered request (a dozen times): the key is built with memcpy, not
 * snprintf; values that would not fit the key are cut off (as before). */
static series *find(gw_metrics *m, gw_metric_id id, const char *const *labels, bool create)
{
    int n = defs[id].n_labels;
    char key[512];
    size_t used = 0;
    uint32_t h = 2166136261u; /* FNV-1a of the key, computed while it is built */
    for (int i = 0; i < n; i++) {
        const char *v = labels != NULL && labels[i] != NULL ? labels[i] : "";
        size_t len = strnlen(v, sizeof key), sep = i ? 1 : 0;
        if (len + sep >= sizeof key - used)
            break;
        if (sep) {
            key[used++] = '\x1f';
            h = (h ^ 0x1fu) * 16777619u;
        }
        for (size_t k = 0; k < len; k++) {
            key[used + k] = v[k];
            h = (h ^ (unsigned char)v[k]) * 16777619u;
        }
        used += len;
    }
    key[used] = '\0';
    if (m->index[id] != NULL)
        for (series *s = m->index[id][h % INDEX_SIZE]; s != NULL; s = s->hnext)
            if (s->hash == h && strcmp(s->key, key) == 0)
                return s;
    if (!create)
        return NULL;
    if (m->index[id] == NULL && (m->index[id] = calloc(INDEX_SIZE, sizeof *m->index[id])) == NULL)
        return NULL;
    series *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->hash = h;
    s->key = strdup(key);
    s->vbuf = strdup(key);
    s->values = calloc((size_t)(n ? n : 1), sizeof *s->values);
    if (s->key == NULL || s->vbuf == NULL || s->values == NULL) {
        s->next = NULL;
        series_free(s);
        return NULL;
    }
    char *p = s->vbuf;
    for (int i = 0; i < n; i++) {
        s->values[i] = p;
        char *sep = strchr(p, '\x1f');
        if (sep != NULL) {
            *sep = '\0';
            p = sep + 1;
        }
    }
    s->next = m->families[id];
    m->families[id] = s;
    s->hnext = m->index[id][h % INDEX_SIZE];
    m->index[id][h % INDEX_SIZE] = s;
    return s;
}

void gw_metric_add(gw_metrics *m, gw_metric_id id, const char *const *labels, double delta)
{
    pthread_mutex_lock(&m->lock);
    series *s = find(m, id, labels, true);
    if (s != NULL)
        s->value += delta;
    pthread_mutex_unlock(&m->lock);
}

void gw_metric_set(gw_metrics *m, gw_metric_id id, const char *const *labels, double value)
{
    pthread_mutex_lock(&m->lock);
    series *s = find(m, id, labels, true);
    if (s != NULL)
        s->value = value;
    pthread_mutex_unlock(&m->lock);
}

void gw_metric_observe(gw_metrics *m, gw_metric_id id, const char *const *labels, double value)
{
    pthread_mutex_lock(&m->lock);
    series *s = find(m, id, labels, true);
    if (s != NULL) {
        s->value += value;
        s->count++;
        for (int b = 0; b < defs[id].n_buckets; b++)
            if (value <= defs[id].buckets[b])
                s->buckets[b]++;
    }
    pthread_mutex_unlock(&m->lock);
}

/* One update of s by its family's kind (lock held). */
static void update(gw_metric_id id, series *s, double v)
{
    switch (defs[id].kind) {
    case KIND_COUNTER:
        s->value += v;
        break;
    case KIND_GAUGE:
        s->value = v;
        break;
    case KIND_HISTOGRAM:
        s->value += v;
        s->count++;
        for (int b = 0; b < defs[id].n_buckets; b++)
            if (v <= defs[id].buckets[b])
                s->buckets[b]++;
        break;
    }
}

void gw_metric_apply(gw_metrics *m, const gw_metric_op *ops, size_t n)
{
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < n; i++) {
        gw_metric_slot *sl = ops[i].slot;
        series *s;
        if (sl != NULL && sl->gen == m->gen) {
            s = sl->series;
        } else {
            s = find(m, ops[i].id, ops[i].labels, true);
            if (sl != NULL && s != NULL) {
                sl->series = s;
                sl->gen = m->gen;
            }
        }
        if (s != NULL)
            update(ops[i].id, s, ops[i].value);
    }
    pthread_mutex_unlock(&m->lock);
}

/* Unlink s from its family's index chain (lock held). */
static void index_unlink(gw_metrics *m, gw_metric_id id, const series *s)
{
    for (series **p = &m->index[id][s->hash % INDEX_SIZE]; *p != NULL; p = &(*p)->hnext)
        if (*p == s) {
            *p = s->hnext;
            return;
        }
}

void gw_metrics_forget_version(gw_metrics *m, const char *function, const char *version)
{
    pthread_mutex_lock(&m->lock);
    for (int id = 0; id < GW_M_COUNT_; id++) {
        if (defs[id].n_labels < 2 || strcmp(defs[id].labels[0], "function") != 0 ||
            strcmp(defs[id].labels[1], "version") != 0)
            continue;
        for (series **p = &m->families[id]; *p != NULL;) {
            series *s = *p;
            if (strcmp(s->values[0], function) != 0 || strcmp(s->values[1], version) != 0) {
                p = &s->next;
                continue;
            }
            *p = s->next;
            index_unlink(m, (gw_metric_id)id, s);
            s->next = NULL;
            series_free(s);
            m->gen++;
        }
    }
    pthread_mutex_unlock(&m->lock);
}

double gw_metric_get(gw_metrics *m, gw_metric_id id, const char *const *labels)
{
    pthread_mutex_lock(&m->lock);
    series *s = find(m, id, labels, false);
    double v = s != NULL ? s->value : 0;
    pthread_mutex_unlock(&m->lock);
    return v;
}

void gw_metric_each(gw_metrics *m, gw_metric_id id, const char *const *prefix, int n_prefix,
                    gw_metric_each_fn fn, void *arg)
{
    pthread_mutex_lock(&m->lock);
    for (const series *s = m->families[id]; s != NULL; s = s->next) {
        bool match = true;
        for (int i = 0; i < n_prefix && i < defs[id].n_labels && match; i++)
            match = strcmp(s->values[i], prefix[i] != NULL ? prefix[i] : "") == 0;
        if (match)
            fn(arg, (const char *const *)s->values, s->value);
    }
    pthread_mutex_unlock(&m->lock);
}

/* Label values are escaped as the text format asks: \\, \" and \n. */
static gf_status write_labels(gf_buf *b, gw_metric_id id, const series *s, const char *extra_k,
                              const char *extra_v)
{
    int n = defs[id].n_labels;
    if (n == 0 && extra_k == NULL)
        return GF_OK;
    gf_status st = gf_buf_append_str(b, "{");
    for (int i = 0; i < n && st == GF_OK; i++) {
        st = gf_buf_printf(b, "%s%s=\"", i ? "," : "", defs[id].labels[i]);
        for (const char *p = s->values[i]; st == GF_OK && *p; p++) {
            if (*p == '\\' || *p == '"')
                st = gf_buf_printf(b, "\\%c", *p);
            else if (*p == '\n')
                st = gf_buf_append_str(b, "\\n");
            else
                st = gf_buf_append(b, p, 1);
        }
        if (st == GF_OK)
            st = gf_buf_append_str(b, "\"");
    }
    if (st == GF_OK && extra_k != NULL)
        st = gf_buf_printf(b, "%s%s=\"%s\"", n ? "," : "", extra_k, extra_v);
    return st != GF_OK ? st : gf_buf_append_str(b, "}");
}

static gf_status write_num(gf_buf *b, double v)
{
    if (v == floor(v) && fabs(v) < 1e15)
        return gf_buf_printf(b, " %.0f\n", v);
    return gf_buf_printf(b, " %.9g\n", v);
}

gf_status gw_metrics_write(gw_metrics *m, gf_buf *out)
{
    static const char *const kinds[] = {"counter", "gauge", "histogram"};
    gf_status st = GF_OK;
    pthread_mutex_lock(&m->lock);
    for (int id = 0; id < GW_M_COUNT_ && st == GF_OK; id++) {
        st = gf_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", defs[id].name, defs[id].help,
                           defs[id].name, kinds[defs[id].kind]);
        for (const series *s = m->families[id]; s != NULL && st == GF_OK; s = s->next) {
            if (defs[id].kind != KIND_HISTOGRAM) {
                st = gf_buf_append_str(out, defs[id].name);
                if (st == GF_OK)
                    st = write_labels(out, (gw_metric_id)id, s, NULL, NULL);
                if (st == GF_OK)
                    st = write_num(out, s->value);
                continue;
            }
            for (int bk = 0; bk <= defs[id].n_buckets && st == GF_OK; bk++) {
                char le[32];
                if (bk < defs[id].n_buckets)
                    snprintf(le, sizeof le, "%g", defs[id].buckets[bk]);
                else
                    snprintf(le, sizeof le, "+Inf");
                st = gf_buf_printf(out, "%s_bucket", defs[id].name);
                if (st == GF_OK)
                    st = write_labels(out, (gw_metric_id)id, s, "le", le);
                if (st == GF_OK)
                    st = write_num(out, (double)(bk < defs[id].n_buckets ? s->buckets[bk]
                                                                         : s->count));
            }
            if (st == GF_OK)
                st = gf_buf_printf(out, "%s_sum", defs[id].name);
            if (st == GF_OK)
                st = write_labels(out, (gw_metric_id)id, s, NULL, NULL);
            if (st == GF_OK)
                st = write_num(out, s->value);
            if (st == GF_OK)
                st = gf_buf_printf(out, "%s_count", defs[id].name);
            if (st == GF_OK)
                st = write_labels(out, (gw_metric_id)id, s, NULL, NULL);
            if (st == GF_OK)
                st = write_num(out, (double)s->count);
        }
    }
    pthread_mutex_unlock(&m->lock);
    return st;
}
