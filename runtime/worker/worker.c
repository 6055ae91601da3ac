/* gpufaas — the worker process (runtime/worker): what its threads share —
 * the model table, stopping, and frames out (errors, READY, STATS). See
 * worker_impl.h for the files and the lock order. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/copies.h"
#include "core/log.h"
#include "worker/worker_impl.h"

char *wk_dup_str(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

/* ---- model table (w->lock held) ------------------------------------------------------ */

static size_t bucket_of(const char *key)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)key; *p != '\0'; p++)
        h = (h ^ *p) * 16777619u;
    return h % GF_WORKER_BUCKETS;
}

/* The live (not unloading) version named key, or NULL. */
wmodel *wk_table_find(gf_worker *w, const char *key)
{
    for (wmodel *m = w->buckets[bucket_of(key)]; m != NULL; m = m->next)
        if (!m->unloading && strcmp(m->key, key) == 0)
            return m;
    return NULL;
}

/* Any version named key with cache state (unloading ones included), or NULL. */
wmodel *wk_table_find_cached(gf_worker *w, const char *key)
{
    for (wmodel *m = w->buckets[bucket_of(key)]; m != NULL; m = m->next)
        if (m->cm != NULL && strcmp(m->key, key) == 0)
            return m;
    return NULL;
}

void wk_table_insert(gf_worker *w, wmodel *m)
{
    size_t b = bucket_of(m->key);
    m->next = w->buckets[b];
    w->buckets[b] = m;
    m->in_table = true;
    m->refs++;
}

void wk_wmodel_free(wmodel *m)
{
    if (m == NULL)
        return;
    free(m->key);
    free(m->manifest_text);
    free(m->weights_path);
    free(m->plugin_path);
    free(m);
}

/* Drop a reference; the last one frees the entry (its cache and plan state
 * must already be released). */
void wk_wmodel_unref(wmodel *m)
{
    if (--m->refs > 0)
        return;
    if (m->cm != NULL || m->plan != NULL || m->mf != NULL)
        GF_LOG_E("function version '%s' freed with live state (bug)", m->key);
    wk_wmodel_free(m);
}

void wk_table_remove(gf_worker *w, wmodel *m)
{
    if (!m->in_table)
        return;
    wmodel **pp = &w->buckets[bucket_of(m->key)];
    while (*pp != NULL && *pp != m)
        pp = &(*pp)->next;
    if (*pp == m)
        *pp = m->next;
    m->next = NULL;
    m->in_table = false;
    wk_wmodel_unref(m);
}

/* ---- sending ----------------------------------------------------------------------- */

void wk_wake_main(gf_worker *w)
{
    uint64_t one = 1;
    ssize_t n = write(w->wake_fd, &one, sizeof one);
    (void)n; /* a full counter wakes the reader just as well */
}

/* Enter the stopping state (EOF, malformed frame, I/O error): queued work is
 * dropped and every thread winds down. The first reason sets the exit code. */
void wk_begin_stop(gf_worker *w, int code)
{
    pthread_mutex_lock(&w->lock);
    if (!w->stopping) {
        w->stopping = true;
        if (w->exit_code == GF_WORKER_EXIT_OK)
            w->exit_code = code;
    }
    pthread_cond_broadcast(&w->exec_cond);
    pthread_cond_broadcast(&w->admin_cond);
    pthread_cond_broadcast(&w->progress_cond);
    pthread_mutex_unlock(&w->lock);
}

/* What a refused or dropped request is told while the worker stops. w->lock
 * held; copied into buf. */
const char *wk_stop_message(gf_worker *w, const char *dflt, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", w->stop_why[0] != '\0' ? w->stop_why : dflt);
    return buf;
}

/* After a device call failed (st): when the device is lost for good (a
 * CUDA fault left the context unusable, gf_backend_lost), nothing this
 * process does can use it again. Stop as on end of stream (queued requests
 * are answered GF_ERR_CLOSED: 503, try again) and exit with
 * GF_WORKER_EXIT_DEVICE, so the supervisor starts a fresh worker with a new
 * context. Notes it in err. Returns true when the device is lost. No lock
 * held. */
bool wk_device_lost(gf_worker *w, gf_status st, gf_err *err)
{
    if (st == GF_OK || !gf_backend_lost(w->be))
        return false;
    pthread_mutex_lock(&w->lock);
    bool first = w->stop_why[0] == '\0';
    if (first)
        snprintf(w->stop_why, sizeof w->stop_why,
                 "the worker is stopping: device %s is lost (it restarts with a new context)",
                 w->device);
    pthread_mutex_unlock(&w->lock);
    if (first) {
        GF_LOG_E("device %s is lost: failing queued work and exiting with code %d (%s)",
                 w->device, GF_WORKER_EXIT_DEVICE, gf_err_msg(err));
        wk_begin_stop(w, GF_WORKER_EXIT_DEVICE);
    }
    gf_err_prefix(err, "device %s is lost (the worker restarts)", w->device);
    return true;
}

/* Write one whole frame (n iovecs) under the write lock. A failed write
 * means the gateway is gone: the worker stops. */
static gf_status send_iov(gf_worker *w, const struct iovec *iov, int n)
{
    gf_err err;
    gf_err_clear(&err);
    gf_status st;
    pthread_mutex_lock(&w->wlock);
    if (w->write_failed) {
        st = GF_ERR_CLOSED;
    } else {
        st = gf_ipc_writev_all(w->fd, iov, n, -1, &err);
        if (st != GF_OK) {
            w->write_failed = true;
            GF_LOG_W("sending to the gateway failed: %s", gf_err_msg(&err));
        }
    }
    pthread_mutex_unlock(&w->wlock);
    if (st != GF_OK)
        wk_begin_stop(w, st == GF_ERR_CLOSED ? GF_WORKER_EXIT_OK : GF_WORKER_EXIT_FAILURE);
    return st;
}

/* Write the frame in b (one whole frame) and empty b. No lock may be held. A
 * failed write means the gateway is gone: the worker stops. */
gf_status wk_send_buf(gf_worker *w, gf_buf *b)
{
    struct iovec one = {b->data, b->len};
    gf_status st = send_iov(w, &one, 1);
    gf_buf_reset(b);
    return st;
}

gf_status wk_send_answer(gf_worker *w, wk_answer *a)
{
    if (a->g->n == 0) {
        gf_fn_outputs_free(&a->outs);
        return wk_send_buf(w, a->b);
    }
    struct iovec iov[GF_IPC_GATHER_MAX];
    int n = gf_ipc_gather_iov(a->g, a->b, iov);
    gf_status st = send_iov(w, iov, n);
    a->g->n = 0;
    gf_buf_reset(a->b);
    gf_fn_outputs_free(&a->outs);
    return st;
}

/* Encode with `st` (an encoder's result) and send; a failed encode is logged. */
void wk_send_encoded(gf_worker *w, gf_buf *b, gf_status st, const gf_err *err, const char *what)
{
    if (st != GF_OK) {
        GF_LOG_E("encoding %s failed: %s", what, gf_err_msg(err));
        gf_buf_reset(b);
        return;
    }
    wk_send_buf(w, b);
}

void wk_reply_error(gf_worker *w, gf_buf *b, uint64_t id, gf_status code, const char *msg)
{
    gf_err err;
    gf_err_clear(&err);
    GF_LOG_D("request %llu: %s: %s", (unsigned long long)id, gf_status_name(code), msg);
    wk_send_encoded(w, b, gf_ipc_encode_error(b, id, code, msg, &err), &err, "ERROR");
}

void wk_reply_empty(gf_worker *w, gf_buf *b, gf_ipc_type type, uint64_t id)
{
    gf_err err;
    gf_err_clear(&err);
    wk_send_encoded(w, b, gf_ipc_encode_empty(b, type, id, &err), &err, gf_ipc_type_name(type));
}

/* ---- READY and STATS -------------------------------------------------------------- */

void wk_send_ready(gf_worker *w, gf_buf *b, uint64_t id)
{
    gf_device_info info;
    gf_backend_info(w->be, &info);
    gf_ipc_ready r = {
        .protocol_version = GF_IPC_VERSION,
        .worker_id = w->cfg.worker_id,
        .pid = (int32_t)getpid(),
        .flags = w->cfg.allow_native ? GF_IPC_READY_NATIVE : 0,
        .device_kind = (int32_t)info.kind,
        .device_index = info.index,
        .cc_major = info.cc_major,
        .cc_minor = info.cc_minor,
        .pcie_gen = info.pcie_gen,
        .pcie_width = info.pcie_width,
        .policy = (int32_t)w->cfg.policy,
        .total_memory = info.total_memory,
        .free_memory = info.free_memory,
        .device_budget = info.budget,
        .host_budget = w->cfg.host_memory,
        .page_size = info.page_size,
        .max_frame = w->cfg.max_frame,
        .link_peak_mbps = (uint64_t)(info.link_peak_gbps * 1000.0),
        .device_name = info.name,
    };
    gf_err err;
    gf_err_clear(&err);
    wk_send_encoded(w, b, gf_ipc_encode_ready(b, id, &r, &err), &err, "READY");
}

/* Resident bytes of this process, from /proc/self/statm (0 when unknown). */
static uint64_t process_rss(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        return 0;
    unsigned long long size = 0, rss = 0;
    int n = fscanf(f, "%llu %llu", &size, &rss);
    fclose(f);
    return n == 2 ? rss * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

/* MemAvailable from /proc/meminfo, in bytes (0 when unknown). */
static uint64_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (f == NULL)
        return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

void wk_send_stats(gf_worker *w, gf_buf *b, uint64_t id)
{
    gf_cache_stats cs;
    gf_cache_get_stats(w->cache, &cs);
    gf_device_info info;
    gf_backend_info(w->be, &info);
    gf_ipc_stats s = {
        .hits = cs.hits,
        .misses = cs.misses,
        .loads_from_host = cs.loads_from_host,
        .loads_from_store = cs.loads_from_store,
        .load_failures = cs.load_failures,
        .evictions_device = cs.evictions_device,
        .evictions_host = cs.evictions_host,
        .bytes_to_device = cs.bytes_to_device,
        .bytes_to_host = cs.bytes_to_host,
        .load_us_total = cs.load_us_total,
        .device_used = cs.device_used,
        .device_budget = cs.device_budget,
        .device_model_bytes = cs.device_model_bytes,
        .host_used = cs.host_used,
        .host_budget = cs.host_budget,
        .models = cs.models,
        .models_on_device = cs.models_on_device,
        .models_in_host = cs.models_in_host,
        .host_bw_bps = (uint64_t)(cs.host_bw_gbps * 1e9),
        .store_bw_bps = (uint64_t)(cs.store_bw_gbps * 1e9),
        .device_total = info.total_memory,
        .device_free = info.free_memory,
        .process_rss = process_rss(),
        .system_available = mem_available(),
        .uptime_us = gf_mono_us() - w->t_start_us,
        .pinned_bytes = cs.pinned_bytes,
        .pin_limit = cs.pin_limit,
        .copied_in_bytes = gf_copies_bytes(GF_COPY_IN),
        .copied_out_bytes = gf_copies_bytes(GF_COPY_OUT),
        .shm_mappings = wk_shm_count(&w->shm),
    };
    gf_dev_counters(w->be, &s.device_allocs, &s.device_frees);
    pthread_mutex_lock(&w->lock);
    s.requests = w->n_requests;
    s.request_errors = w->n_errors;
    s.queue_depth = w->q_len;
    pthread_mutex_unlock(&w->lock);
    pthread_mutex_lock(&w->ev_lock);
    s.events_sent = w->ev_sent;
    s.events_dropped = w->ev_dropped;
    pthread_mutex_unlock(&w->ev_lock);
    gf_err err;
    gf_err_clear(&err);
    wk_send_encoded(w, b, gf_ipc_encode_stats(b, id, &s, &err), &err, "STATS");
}

/* Wait until the cache made progress since generation gen (a load ended, a
 * lease was released), the worker stops, or GF_WORKER_BUSY_WAIT_MS pass. */
void wk_progress_wait(gf_worker *w, uint64_t gen)
{
    struct timespec dl;
    gf_deadline_after(CLOCK_REALTIME, (uint64_t)GF_WORKER_BUSY_WAIT_MS * 1000000u, &dl);
    pthread_mutex_lock(&w->lock);
    while (w->progress == gen && !w->stopping)
        if (pthread_cond_timedwait(&w->progress_cond, &w->lock, &dl) != 0)
            break;
    pthread_mutex_unlock(&w->lock);
}
