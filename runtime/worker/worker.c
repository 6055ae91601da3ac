/* gpufaas — the worker process: frames in, inference out. See worker.h for
 * the threads and docs/protocol.md for the messages.
 *
 * Locks, in the only order they may nest:
 *   cache lock (inside gf_cache_*) -> w->lock -> w->ev_lock
 * w->lock is never held while calling into the cache or the functions
 * runtime, so the cache's event callback may take it. w->wlock (one frame at
 * a time on the socket) is taken with no other lock held.
 */
#include "core/clock.h"
#include "core/ema.h"
#include "worker/worker.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/sha256.h"
#include "core/tensor.h"
#include "core/units.h"
#include "functions/manifest.h"
#include "functions/runtime.h"
#include "ipc.h"

#define GF_WORKER_BUCKETS 256
#define GF_WORKER_EVQ_MAX 4096     /* queued EVENTs before new ones are dropped */
#define GF_WORKER_BUSY_WAIT_MS 100 /* wait for cache progress when an acquire is BUSY ... */
#define GF_WORKER_BUSY_TRIES 50    /* ... this many times before answering ERROR */
#define GF_WORKER_INLINE_US 100    /* warm requests this quick may run on the reader */

/* ---- state ------------------------------------------------------------------ */

typedef enum { WM_PREPARING = 0, WM_READY = 1, WM_FAILED = 2 } wm_prep;

/* A function version on this worker. Fields marked (L) are under w->lock;
 * mf/plan/cm are written by the admin thread before prep becomes READY and
 * are read-only afterwards. */
typedef struct wmodel {
    struct wmodel *next; /* (L) bucket chain */
    char *key;
    wm_prep prep;          /* (L) */
    bool unloading;        /* (L) an UNLOAD was received: hidden from lookups */
    bool in_table;         /* (L) */
    int refs;              /* (L) the table, queued requests and admin jobs */
    int pending;           /* (L) INFER requests queued or running */
    uint64_t loaded_at_us; /* (L) when the last device load of it completed */
    double exec_us;        /* (L) moving average of its function time (core/ema.h), 0 = unknown */
    char *manifest_text;   /* as received, for comparing a repeated LOAD */
    size_t manifest_len;
    char *weights_path;
    char *plugin_path; /* "" for built-in kinds */
    gf_manifest *mf;
    gf_fn_plan *plan; /* borrows mf */
    gf_cache_model *cm;
    gf_status fail_code; /* when prep is FAILED */
    char fail_msg[GF_ERR_MSG_MAX];
} wmodel;

/* A queued INFER. Owned by the queue, then by the executor. */
typedef struct wreq {
    struct wreq *next, *prev;
    uint64_t id;
    wmodel *m;          /* a reference */
    gf_ipc_frame frame; /* owns the payload the tensors point into */
    gf_ipc_infer msg;
    uint64_t t_recv_us;
    gf_lease *lease; /* (w->lock while queued) acquired ahead, or at its turn */
} wreq;

typedef enum { JOB_LOAD = 0, JOB_UNLOAD = 1 } job_kind;

typedef struct wjob {
    struct wjob *next;
    job_kind kind;
    uint64_t id;
    wmodel *m; /* a reference */
    int32_t tier;
} wjob;

typedef struct wevent {
    gf_ipc_event ev;
    char *key, *msg; /* owned */
} wevent;

struct gf_worker {
    gf_worker_config cfg;
    char *device; /* owned copies of cfg strings */
    char *state_dir;
    char *derived_dir;
    int fd;
    gf_backend *be;
    gf_cache *cache;
    uint64_t t_start_us;
    int sig_fd, wake_fd; /* eventfds: a signal arrived / a thread finished */
    struct sigaction old_term, old_int;
    bool handlers_set;

    pthread_mutex_t lock;
    pthread_cond_t exec_cond;     /* queue, model readiness, stop */
    pthread_cond_t admin_cond;    /* jobs, pending counts, stop */
    pthread_cond_t progress_cond; /* the cache made progress (a load ended, a lease left) */
    uint64_t progress;
    wmodel *buckets[GF_WORKER_BUCKETS];
    wreq *q_head, *q_tail;
    uint64_t q_len;
    wjob *j_head, *j_tail;
    bool draining; /* SHUTDOWN/SIGTERM: refuse new work, exit when idle */
    bool stopping; /* EOF, malformed frame, I/O error: drop queued work, exit */
    int exit_code;
    char stop_why[192]; /* why requests are refused while stopping ("" = the default) */
    bool exec_done, admin_done;
    uint64_t n_requests, n_errors;
    wreq *ahead;         /* the queued request holding a lease taken ahead, or NULL */
    bool ahead_pending;  /* a lease ahead is being acquired: the queue must stay */
    bool exec_acquiring; /* the executor waits for room: take nothing ahead */
    wmodel *running;     /* the model of the request running now (executor or reader) */
    bool reader_running; /* the reader runs a quick request itself (see handle_infer) */

    pthread_mutex_t wlock;
    bool write_failed; /* under wlock */

    pthread_mutex_t ev_lock;
    pthread_cond_t ev_cond;
    wevent *evq;
    size_t ev_head, ev_count;
    uint64_t ev_seq, ev_sent, ev_dropped;
    bool ev_stop;

    pthread_t exec_thread, admin_thread, ev_thread;
    bool exec_started, admin_started, ev_started;
};


static char *dup_str(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

/* ---- configuration ---------------------------------------------------------------- */

void gf_worker_config_init(gf_worker_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->device = "cpu";
    cfg->host_memory = (uint64_t)2 << 30;
    cfg->fd = -1;
    cfg->policy = GF_EVICT_LRU;
    cfg->log_level = GF_LOG_DEFAULT;
    cfg->max_frame = GF_IPC_DEFAULT_MAX_FRAME;
    cfg->blas_threads = 1;
}

static gf_status parse_int(const char *flag, const char *s, long lo, long hi, long *out,
                           gf_err *err)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return gf_err_set(err, GF_ERR_INVALID, "%s: '%s' is not an integer in [%ld, %ld]", flag, s,
                          lo, hi);
    *out = v;
    return GF_OK;
}

gf_status gf_worker_parse_args(int argc, char **argv, gf_worker_config *cfg, gf_err *err)
{
    gf_worker_config_init(cfg);
    bool have_fd = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0)
            return gf_err_set(err, GF_ERR_INVALID, "unexpected argument '%s'", a);
        char name[64];
        const char *val = NULL;
        const char *eq = strchr(a, '=');
        size_t nl = eq != NULL ? (size_t)(eq - a) : strlen(a);
        if (nl >= sizeof name)
            return gf_err_set(err, GF_ERR_INVALID, "unknown flag '%s'", a);
        memcpy(name, a, nl);
        name[nl] = '\0';
        if (strcmp(name, "--allow-native-functions") == 0) {
            if (eq != NULL)
                return gf_err_set(err, GF_ERR_INVALID, "%s takes no value", name);
            cfg->allow_native = true;
            continue;
        }
        if (eq != NULL) {
            val = eq + 1;
        } else {
            if (i + 1 >= argc)
                return gf_err_set(err, GF_ERR_INVALID, "%s needs a value", name);
            val = argv[++i];
        }
        long v;
        gf_status st = GF_OK;
        if (strcmp(name, "--device") == 0) {
            cfg->device = val;
        } else if (strcmp(name, "--device-memory") == 0) {
            st = gf_size_parse(val, &cfg->device_memory, err);
        } else if (strcmp(name, "--host-memory") == 0) {
            st = gf_size_parse(val, &cfg->host_memory, err);
        } else if (strcmp(name, "--max-frame") == 0) {
            st = gf_size_parse(val, &cfg->max_frame, err);
            if (st == GF_OK && (cfg->max_frame < 4096 || cfg->max_frame > ((uint64_t)1 << 40)))
                st = gf_err_set(err, GF_ERR_INVALID, "between 4K and 1T");
        } else if (strcmp(name, "--copy-bandwidth") == 0) {
            st = gf_size_parse(val, &cfg->copy_bandwidth, err);
        } else if (strcmp(name, "--state-dir") == 0) {
            cfg->state_dir = val;
        } else if (strcmp(name, "--fd") == 0) {
            if ((st = parse_int(name, val, 0, INT_MAX, &v, err)) == GF_OK) {
                cfg->fd = (int)v;
                have_fd = true;
            }
        } else if (strcmp(name, "--worker-id") == 0) {
            if ((st = parse_int(name, val, 0, 1000000, &v, err)) == GF_OK)
                cfg->worker_id = (int)v;
        } else if (strcmp(name, "--blas-threads") == 0) {
            if ((st = parse_int(name, val, 1, 256, &v, err)) == GF_OK)
                cfg->blas_threads = (int)v;
        } else if (strcmp(name, "--policy") == 0) {
            st = gf_evict_policy_parse(val, &cfg->policy, err);
        } else if (strcmp(name, "--log-level") == 0) {
            gf_log_level lv;
            if (gf_log_level_parse(val, &lv) != 0)
                st = gf_err_set(err, GF_ERR_INVALID,
                                "'%s' is not error, warn, info, debug "
                                "or trace",
                                val);
            else
                cfg->log_level = lv;
        } else {
            return gf_err_set(err, GF_ERR_INVALID, "unknown flag '%s'", name);
        }
        if (st != GF_OK)
            return gf_err_prefix(err, "%s", name);
    }
    if (!have_fd)
        return gf_err_set(err, GF_ERR_INVALID, "--fd is required (the socket to the gateway)");
    if (cfg->state_dir == NULL || cfg->state_dir[0] == '\0')
        return gf_err_set(err, GF_ERR_INVALID, "--state-dir is required");
    return GF_OK;
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
static wmodel *table_find(gf_worker *w, const char *key)
{
    for (wmodel *m = w->buckets[bucket_of(key)]; m != NULL; m = m->next)
        if (!m->unloading && strcmp(m->key, key) == 0)
            return m;
    return NULL;
}

/* Any version named key with cache state (unloading ones included), or NULL. */
static wmodel *table_find_cached(gf_worker *w, const char *key)
{
    for (wmodel *m = w->buckets[bucket_of(key)]; m != NULL; m = m->next)
        if (m->cm != NULL && strcmp(m->key, key) == 0)
            return m;
    return NULL;
}

static void table_insert(gf_worker *w, wmodel *m)
{
    size_t b = bucket_of(m->key);
    m->next = w->buckets[b];
    w->buckets[b] = m;
    m->in_table = true;
    m->refs++;
}

static void wmodel_free(wmodel *m)
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
static void wmodel_unref(wmodel *m)
{
    if (--m->refs > 0)
        return;
    if (m->cm != NULL || m->plan != NULL || m->mf != NULL)
        GF_LOG_E("function version '%s' freed with live state (bug)", m->key);
    wmodel_free(m);
}

static void table_remove(gf_worker *w, wmodel *m)
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
    wmodel_unref(m);
}

/* ---- sending ----------------------------------------------------------------------- */

static void wake_main(gf_worker *w)
{
    uint64_t one = 1;
    ssize_t n = write(w->wake_fd, &one, sizeof one);
    (void)n; /* a full counter wakes the reader just as well */
}

/* Enter the stopping state (EOF, malformed frame, I/O error): queued work is
 * dropped and every thread winds down. The first reason sets the exit code. */
static void begin_stop(gf_worker *w, int code)
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
static const char *stop_message(gf_worker *w, const char *dflt, char *buf, size_t cap)
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
static bool device_lost(gf_worker *w, gf_status st, gf_err *err)
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
        begin_stop(w, GF_WORKER_EXIT_DEVICE);
    }
    gf_err_prefix(err, "device %s is lost (the worker restarts)", w->device);
    return true;
}

/* Write the frame in b (one whole frame) and empty b. No lock may be held. A
 * failed write means the gateway is gone: the worker stops. */
static gf_status send_buf(gf_worker *w, gf_buf *b)
{
    gf_err err;
    gf_err_clear(&err);
    gf_status st;
    pthread_mutex_lock(&w->wlock);
    if (w->write_failed) {
        st = GF_ERR_CLOSED;
    } else {
        st = gf_ipc_write_all(w->fd, b->data, b->len, -1, &err);
        if (st != GF_OK) {
            w->write_failed = true;
            GF_LOG_W("sending to the gateway failed: %s", gf_err_msg(&err));
        }
    }
    pthread_mutex_unlock(&w->wlock);
    gf_buf_reset(b);
    if (st != GF_OK)
        begin_stop(w, st == GF_ERR_CLOSED ? GF_WORKER_EXIT_OK : GF_WORKER_EXIT_FAILURE);
    return st;
}

/* Encode with `st` (an encoder's result) and send; a failed encode is logged. */
static void send_encoded(gf_worker *w, gf_buf *b, gf_status st, const gf_err *err, const char *what)
{
    if (st != GF_OK) {
        GF_LOG_E("encoding %s failed: %s", what, gf_err_msg(err));
        gf_buf_reset(b);
        return;
    }
    send_buf(w, b);
}

static void reply_error(gf_worker *w, gf_buf *b, uint64_t id, gf_status code, const char *msg)
{
    gf_err err;
    gf_err_clear(&err);
    GF_LOG_D("request %llu: %s: %s", (unsigned long long)id, gf_status_name(code), msg);
    send_encoded(w, b, gf_ipc_encode_error(b, id, code, msg, &err), &err, "ERROR");
}

static void reply_empty(gf_worker *w, gf_buf *b, gf_ipc_type type, uint64_t id)
{
    gf_err err;
    gf_err_clear(&err);
    send_encoded(w, b, gf_ipc_encode_empty(b, type, id, &err), &err, gf_ipc_type_name(type));
}

/* ---- cache events ------------------------------------------------------------------ */

/* The cache's callback: runs with the cache lock held, on the thread where
 * the change happened. Records load completion for RESULT timings, wakes
 * waiters, and queues an EVENT (hits are only counted, in STATS). */
static void on_cache_event(void *arg, const gf_cache_event *ev)
{
    gf_worker *w = arg;
    if (ev->kind == GF_CACHE_EV_HIT)
        return;
    uint64_t t = gf_mono_us();
    pthread_mutex_lock(&w->lock);
    if (ev->to == GF_TIER_DEVICE && ev->kind != GF_CACHE_EV_EVICT) {
        wmodel *m = table_find_cached(w, ev->key);
        if (m != NULL)
            m->loaded_at_us = t;
    }
    w->progress++;
    pthread_cond_broadcast(&w->progress_cond);
    pthread_mutex_unlock(&w->lock);

    pthread_mutex_lock(&w->ev_lock);
    uint64_t seq = ++w->ev_seq;
    if (w->ev_count >= GF_WORKER_EVQ_MAX || w->ev_stop) {
        w->ev_dropped++;
    } else {
        wevent *e = &w->evq[(w->ev_head + w->ev_count) % GF_WORKER_EVQ_MAX];
        e->key = strdup(ev->key);
        e->msg = ev->message != NULL ? strdup(ev->message) : NULL;
        if (e->key == NULL || (ev->message != NULL && e->msg == NULL)) {
            free(e->key);
            free(e->msg);
            w->ev_dropped++;
        } else {
            e->ev = (gf_ipc_event){
                .seq = seq,
                .time_us = (uint64_t)gf_wall_us(),
                .kind = ev->kind == GF_CACHE_EV_LOAD    ? GF_IPC_EV_LOADED
                        : ev->kind == GF_CACHE_EV_EVICT ? GF_IPC_EV_EVICTED
                                                        : GF_IPC_EV_FAILED,
                .from = (int32_t)ev->from,
                .to = (int32_t)ev->to,
                .bytes = ev->bytes,
                .micros = ev->micros,
            };
            w->ev_count++;
            pthread_cond_signal(&w->ev_cond);
        }
    }
    pthread_mutex_unlock(&w->ev_lock);
}

static void *events_main(void *arg)
{
    gf_worker *w = arg;
    gf_buf b;
    gf_buf_init(&b);
    pthread_mutex_lock(&w->ev_lock);
    for (;;) {
        while (w->ev_count == 0 && !w->ev_stop)
            pthread_cond_wait(&w->ev_cond, &w->ev_lock);
        if (w->ev_count == 0)
            break;
        wevent e = w->evq[w->ev_head];
        w->ev_head = (w->ev_head + 1) % GF_WORKER_EVQ_MAX;
        w->ev_count--;
        pthread_mutex_unlock(&w->ev_lock);
        e.ev.key = e.key;
        e.ev.message = e.msg;
        gf_err err;
        gf_err_clear(&err);
        send_encoded(w, &b, gf_ipc_encode_event(&b, &e.ev, &err), &err, "EVENT");
        free(e.key);
        free(e.msg);
        pthread_mutex_lock(&w->ev_lock);
        w->ev_sent++;
    }
    pthread_mutex_unlock(&w->ev_lock);
    gf_buf_deinit(&b);
    return NULL;
}

/* ---- READY and STATS -------------------------------------------------------------- */

static void send_ready(gf_worker *w, gf_buf *b, uint64_t id)
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
    send_encoded(w, b, gf_ipc_encode_ready(b, id, &r, &err), &err, "READY");
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

static void send_stats(gf_worker *w, gf_buf *b, uint64_t id)
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
    };
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
    send_encoded(w, b, gf_ipc_encode_stats(b, id, &s, &err), &err, "STATS");
}

/* ---- admin: LOAD and UNLOAD ----------------------------------------------------------- */

/* <derived_dir>/<key made safe>-<16 hex of its SHA-256>.safetensors, malloc'd. */
static char *derived_path(const gf_worker *w, const char *key)
{
    char safe[65];
    size_t n = 0;
    for (const char *p = key; *p != '\0' && n < sizeof safe - 1; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || (c == '.' && n > 0);
        safe[n++] = ok ? c : '_';
    }
    safe[n] = '\0';
    unsigned char dig[GF_SHA256_LEN];
    char hex[GF_SHA256_HEX_LEN];
    gf_sha256_buf(key, strlen(key), dig);
    gf_sha256_hex(dig, hex);
    hex[16] = '\0';
    size_t len = strlen(w->derived_dir) + n + 16 + 32;
    char *path = malloc(len);
    if (path != NULL)
        snprintf(path, len, "%s/%s-%s.safetensors", w->derived_dir, safe, hex);
    return path;
}

/* Start moving m's weights towards tier; returns the tier the prefetch went
 * to (lower than asked when the device or host has no room now). Fails only
 * when the model can never fit the device (GF_ERR_TOO_LARGE). */
static gf_status prefetch(gf_worker *w, wmodel *m, int32_t tier, int32_t *done, gf_err *err)
{
    *done = GF_TIER_STORE;
    gf_err e;
    gf_err_clear(&e);
    if (tier == GF_TIER_DEVICE) {
        gf_status st = gf_cache_prefetch(w->cache, m->cm, GF_TIER_DEVICE, &e);
        if (st == GF_OK) {
            *done = GF_TIER_DEVICE;
            return GF_OK;
        }
        if (st == GF_ERR_TOO_LARGE) {
            *err = e;
            return st;
        }
        GF_LOG_I("prefetch of '%s' to the device deferred: %s", m->key, gf_err_msg(&e));
    }
    if (tier >= GF_TIER_HOST && w->cfg.host_memory > 0) {
        gf_status st = gf_cache_prefetch(w->cache, m->cm, GF_TIER_HOST, &e);
        if (st == GF_OK)
            *done = GF_TIER_HOST;
        else
            GF_LOG_I("prefetch of '%s' to the host tier skipped: %s", m->key, gf_err_msg(&e));
    }
    return GF_OK;
}

/* Wait until the cache made progress since generation gen (a load ended, a
 * lease was released), the worker stops, or GF_WORKER_BUSY_WAIT_MS pass. */
static void progress_wait(gf_worker *w, uint64_t gen)
{
    struct timespec dl;
    gf_deadline_after(CLOCK_REALTIME, (uint64_t)GF_WORKER_BUSY_WAIT_MS * 1000000u, &dl);
    pthread_mutex_lock(&w->lock);
    while (w->progress == gen && !w->stopping)
        if (pthread_cond_timedwait(&w->progress_cond, &w->lock, &dl) != 0)
            break;
    pthread_mutex_unlock(&w->lock);
}

/* Release what the admin thread built for m (cache model, plan, manifest). */
static void release_model_state(gf_worker *w, wmodel *m)
{
    if (m->cm != NULL) {
        for (;;) {
            gf_err err;
            gf_err_clear(&err);
            pthread_mutex_lock(&w->lock);
            uint64_t gen = w->progress;
            pthread_mutex_unlock(&w->lock);
            gf_status st = gf_cache_model_remove(w->cache, m->cm, &err);
            if (st != GF_ERR_BUSY) {
                if (st != GF_OK)
                    GF_LOG_E("removing '%s' from the cache: %s", m->key, gf_err_msg(&err));
                break;
            }
            /* a prefetch is still loading it: wait for the cache to move on */
            progress_wait(w, gen);
        }
        m->cm = NULL;
    }
    gf_fn_plan_free(m->plan);
    m->plan = NULL;
    gf_manifest_free(m->mf);
    m->mf = NULL;
}

/* Build everything for a first LOAD of m. On failure everything taken is
 * released and err says why. */
static gf_status prepare_model(gf_worker *w, wmodel *m, int32_t tier, gf_ipc_loaded *out,
                               gf_err *err)
{
    uint64_t t0 = gf_mono_us();
    char *dpath = NULL;
    gf_manifest *mf = NULL;
    gf_fn_plan *plan = NULL;
    gf_cache_model *cm = NULL;
    const gf_fn_kind *kind = NULL;
    gf_status st = gf_manifest_parse(m->manifest_text, m->manifest_len, &mf, err);
    if (st != GF_OK) {
        gf_err_prefix(err, "manifest");
        goto fail;
    }
    if (m->plugin_path[0] != '\0') {
        if ((st = gf_fn_plugin_load(m->plugin_path, w->cfg.allow_native, &kind, err)) != GF_OK)
            goto fail;
        if (strcmp(gf_fn_kind_name(kind), mf->kind) != 0) {
            st = gf_err_set(err, GF_ERR_INVALID,
                            "the plugin %s implements kind '%s' but the manifest names '%s'",
                            m->plugin_path, gf_fn_kind_name(kind), mf->kind);
            goto fail;
        }
    } else if ((kind = gf_fn_kind_find(mf->kind)) == NULL) {
        st = gf_err_set(err, GF_ERR_NOT_FOUND,
                        "no kind '%s' on this worker (built-in, or a plugin named in LOAD)",
                        mf->kind);
        goto fail;
    }
    if ((dpath = derived_path(w, m->key)) == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((st = gf_fn_prepare(kind, mf, m->weights_path, dpath, &plan, err)) != GF_OK)
        goto fail;
    if ((st = gf_cache_model_add(w->cache, m->key, gf_fn_plan_cache_path(plan),
                                 gf_fn_plan_param_names(plan), gf_fn_plan_param_count(plan), &cm,
                                 err)) != GF_OK)
        goto fail;
    free(dpath);
    dpath = NULL;
    m->mf = mf;
    m->plan = plan;
    m->cm = cm;
    if ((st = prefetch(w, m, tier, &out->tier, err)) != GF_OK) {
        release_model_state(w, m);
        return st;
    }
    out->n_params = (uint32_t)gf_fn_plan_param_count(plan);
    out->device_bytes = gf_cache_model_device_bytes(cm);
    out->host_bytes = gf_cache_model_host_bytes(cm);
    out->prepare_us = gf_mono_us() - t0;
    return GF_OK;
fail:
    if (cm != NULL)
        gf_cache_model_remove(w->cache, cm, NULL);
    gf_fn_plan_free(plan);
    gf_manifest_free(mf);
    free(dpath);
    return st;
}

static void do_load(gf_worker *w, wjob *j, gf_buf *b)
{
    wmodel *m = j->m;
    gf_err err;
    gf_err_clear(&err);
    gf_ipc_loaded out;
    memset(&out, 0, sizeof out);
    pthread_mutex_lock(&w->lock);
    wm_prep prep = m->prep;
    pthread_mutex_unlock(&w->lock);
    gf_status st;
    if (prep == WM_READY) { /* loaded before: just place it again */
        st = prefetch(w, m, j->tier, &out.tier, &err);
        out.n_params = (uint32_t)gf_fn_plan_param_count(m->plan);
        out.device_bytes = gf_cache_model_device_bytes(m->cm);
        out.host_bytes = gf_cache_model_host_bytes(m->cm);
    } else if (prep == WM_FAILED) {
        st = gf_err_set(&err, m->fail_code, "%s", m->fail_msg);
    } else {
        st = prepare_model(w, m, j->tier, &out, &err);
        pthread_mutex_lock(&w->lock);
        if (st == GF_OK) {
            m->prep = WM_READY;
        } else {
            m->prep = WM_FAILED;
            m->fail_code = st;
            snprintf(m->fail_msg, sizeof m->fail_msg, "%s", gf_err_msg(&err));
            table_remove(w, m); /* a later LOAD starts afresh */
        }
        pthread_cond_broadcast(&w->exec_cond);
        pthread_mutex_unlock(&w->lock);
    }
    if (st != GF_OK) {
        device_lost(w, st, &err);
        GF_LOG_W("LOAD '%s' failed: %s", m->key, gf_err_msg(&err));
        reply_error(w, b, j->id, st, gf_err_msg(&err));
        return;
    }
    GF_LOG_I("loaded '%s': %u parameters, %llu device bytes, prefetch to tier %d", m->key,
             out.n_params, (unsigned long long)out.device_bytes, out.tier);
    send_encoded(w, b, gf_ipc_encode_loaded(b, j->id, &out, &err), &err, "LOADED");
}

static void do_unload(gf_worker *w, wjob *j, gf_buf *b)
{
    wmodel *m = j->m;
    pthread_mutex_lock(&w->lock);
    while (m->pending > 0 && !w->stopping)
        pthread_cond_wait(&w->admin_cond, &w->lock);
    bool stop = w->stopping;
    pthread_mutex_unlock(&w->lock);
    if (stop)
        return; /* the teardown releases it */
    release_model_state(w, m);
    pthread_mutex_lock(&w->lock);
    table_remove(w, m);
    pthread_mutex_unlock(&w->lock);
    GF_LOG_I("unloaded '%s'", m->key);
    reply_empty(w, b, GF_IPC_UNLOADED, j->id);
}

static void *admin_main(void *arg)
{
    gf_worker *w = arg;
    gf_buf b;
    gf_buf_init(&b);
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->stopping && w->j_head == NULL && !w->draining)
            pthread_cond_wait(&w->admin_cond, &w->lock);
        if (w->stopping || w->j_head == NULL)
            break;
        wjob *j = w->j_head;
        w->j_head = j->next;
        if (w->j_head == NULL)
            w->j_tail = NULL;
        pthread_mutex_unlock(&w->lock);
        if (j->kind == JOB_LOAD)
            do_load(w, j, &b);
        else
            do_unload(w, j, &b);
        pthread_mutex_lock(&w->lock);
        wmodel_unref(j->m);
        free(j);
        pthread_cond_broadcast(&w->exec_cond);
    }
    /* stopping: drop the jobs left; their models fail so no request waits */
    while (w->j_head != NULL) {
        wjob *j = w->j_head;
        w->j_head = j->next;
        if (j->m->prep == WM_PREPARING) {
            j->m->prep = WM_FAILED;
            j->m->fail_code = GF_ERR_CLOSED;
            snprintf(j->m->fail_msg, sizeof j->m->fail_msg, "the worker is stopping");
        }
        wmodel_unref(j->m);
        free(j);
    }
    w->j_tail = NULL;
    w->admin_done = true;
    pthread_cond_broadcast(&w->exec_cond);
    pthread_mutex_unlock(&w->lock);
    wake_main(w);
    gf_buf_deinit(&b);
    return NULL;
}

/* ---- executor: INFER ------------------------------------------------------------------ */

/* First queued request whose model is no longer preparing. w->lock held. */
static wreq *first_runnable(gf_worker *w)
{
    for (wreq *r = w->q_head; r != NULL; r = r->next)
        if (r->m->prep != WM_PREPARING)
            return r;
    return NULL;
}

static void queue_unlink(gf_worker *w, wreq *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        w->q_head = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    else
        w->q_tail = r->prev;
    r->next = r->prev = NULL;
    w->q_len--;
}

/* Take r's lease from it (w->lock held); the caller releases it. */
static gf_lease *take_lease(gf_worker *w, wreq *r)
{
    gf_lease *l = r->lease;
    r->lease = NULL;
    if (w->ahead == r)
        w->ahead = NULL;
    return l;
}

/* Release l (no lock held; NULL is a no-op) and wake whoever waits for room. */
static void lease_drop(gf_worker *w, gf_lease *l)
{
    if (l == NULL)
        return;
    gf_lease_release(l);
    pthread_mutex_lock(&w->lock);
    w->progress++;
    pthread_cond_broadcast(&w->progress_cond);
    pthread_mutex_unlock(&w->lock);
}

static void release_lease(gf_worker *w, wreq *r)
{
    pthread_mutex_lock(&w->lock);
    gf_lease *l = take_lease(w, r);
    pthread_mutex_unlock(&w->lock);
    lease_drop(w, l);
}

/* Lease the model of the first queued request of another model than the one
 * running, so that its swap-in runs on the copy stream while the compute
 * stream runs the current request (overlap across requests). At most one
 * request is leased ahead; a BUSY cache means it simply loads at its turn.
 * Called by the executor once its request holds a lease, and by the reader
 * when a request arrives while another runs. No lock held. */
static void lease_ahead(gf_worker *w)
{
    pthread_mutex_lock(&w->lock);
    wreq *r = NULL;
    if (w->ahead == NULL && !w->ahead_pending && !w->stopping && w->running != NULL &&
        !w->exec_acquiring) {
        for (wreq *q = w->q_head; q != NULL && r == NULL; q = q->next)
            if (q->m->prep == WM_READY && q->lease == NULL && q->m != w->running)
                r = q;
    }
    if (r == NULL) {
        pthread_mutex_unlock(&w->lock);
        return;
    }
    w->ahead_pending = true; /* the executor leaves the queue alone until we are done */
    gf_cache_model *cm = r->m->cm;
    pthread_mutex_unlock(&w->lock);
    gf_lease *l = NULL;
    gf_status st = gf_cache_acquire(w->cache, cm, &l, NULL);
    pthread_mutex_lock(&w->lock);
    w->ahead_pending = false;
    if (st == GF_OK) {
        r->lease = l;
        w->ahead = r;
    }
    pthread_cond_broadcast(&w->exec_cond);
    pthread_mutex_unlock(&w->lock);
}

/* Acquire r's lease (r is the executor's, off the queue), waiting (never
 * spinning) while the device is full of leased or loading models. */
static gf_status acquire_wait(gf_worker *w, wreq *r, gf_err *err)
{
    pthread_mutex_lock(&w->lock);
    w->exec_acquiring = true;
    pthread_mutex_unlock(&w->lock);
    gf_status st;
    for (int tries = 0;; tries++) {
        pthread_mutex_lock(&w->lock);
        while (w->ahead_pending)
            pthread_cond_wait(&w->exec_cond, &w->lock);
        uint64_t gen = w->progress;
        bool stop = w->stopping;
        pthread_mutex_unlock(&w->lock);
        if (stop) {
            st = gf_err_set(err, GF_ERR_CLOSED, "the worker is stopping");
            break;
        }
        if ((st = gf_cache_acquire(w->cache, r->m->cm, &r->lease, err)) != GF_ERR_BUSY)
            break;
        /* the lease we took ahead for a later request may be in the way */
        pthread_mutex_lock(&w->lock);
        gf_lease *ahead = w->ahead != NULL ? take_lease(w, w->ahead) : NULL;
        pthread_mutex_unlock(&w->lock);
        if (ahead != NULL) {
            lease_drop(w, ahead);
            continue;
        }
        if (tries >= GF_WORKER_BUSY_TRIES)
            break;
        progress_wait(w, gen);
    }
    pthread_mutex_lock(&w->lock);
    w->exec_acquiring = false;
    pthread_mutex_unlock(&w->lock);
    return st;
}

/* Put the request's tensors in manifest order. */
static gf_status map_inputs(const wmodel *m, const gf_ipc_infer *msg, gf_tensor *in, gf_err *err)
{
    const gf_manifest *mf = m->mf;
    bool seen[GF_MANIFEST_MAX_IO] = {false};
    if (msg->n != mf->n_inputs)
        return gf_err_set(err, GF_ERR_INVALID,
                          "function '%s' takes %zu input(s) (the first is '%s') but the request "
                          "has %u",
                          m->key, mf->n_inputs, mf->inputs[0].name, msg->n);
    for (uint32_t i = 0; i < msg->n; i++) {
        long k = gf_manifest_input_index(mf, msg->t[i].name);
        if (k < 0)
            return gf_err_set(err, GF_ERR_INVALID, "function '%s' has no input '%s'", m->key,
                              msg->t[i].name);
        if (seen[k])
            return gf_err_set(err, GF_ERR_INVALID, "input '%s' is given twice", msg->t[i].name);
        seen[k] = true;
        in[k] = msg->t[i].t;
    }
    return GF_OK;
}

/* Run cur and leave its answer (RESULT or ERROR) encoded in b, unsent: the
 * caller first marks the device free, so that the next request, which may
 * arrive as soon as the answer is out, finds it so. */
static void run_request(gf_worker *w, wreq *cur, gf_buf *b)
{
    uint64_t t_start = gf_mono_us();
    wmodel *m = cur->m;
    gf_err err;
    gf_err_clear(&err);
    gf_status st = GF_OK;
    gf_fn_outputs outs = {0, NULL};
    gf_fn_timing timing = {0};
    gf_tensor in[GF_MANIFEST_MAX_IO];
    if (m->prep == WM_FAILED) {
        st = gf_err_set(&err, m->fail_code, "function version '%s' failed to load: %s", m->key,
                        m->fail_msg);
        goto reply;
    }
    if ((st = map_inputs(m, &cur->msg, in, &err)) != GF_OK)
        goto reply;
    if (cur->lease == NULL && (st = acquire_wait(w, cur, &err)) != GF_OK)
        goto reply;
    lease_ahead(w);
    st = gf_fn_infer(m->plan, w->be, w->cache, cur->lease, in, m->mf->n_inputs, &outs, &timing,
                     &err);
    device_lost(w, st, &err);
    if (st == GF_OK) {
        pthread_mutex_lock(&w->lock);
        m->exec_us = gf_ema(m->exec_us, (double)timing.exec_us);
        pthread_mutex_unlock(&w->lock);
    }
reply:;
    bool cold = cur->lease != NULL && gf_lease_cold(cur->lease);
    int32_t src = cur->lease != NULL ? (int32_t)gf_lease_source(cur->lease) : GF_TIER_NONE;
    uint64_t load_us = 0;
    if (st == GF_OK && cold && gf_lease_wait_all(cur->lease, NULL) == GF_OK) {
        pthread_mutex_lock(&w->lock);
        uint64_t loaded = m->loaded_at_us;
        pthread_mutex_unlock(&w->lock);
        load_us = loaded > t_start ? loaded - t_start : 0;
    }
    release_lease(w, cur);
    if (st == GF_OK) {
        gf_ipc_tensor ot[GF_MANIFEST_MAX_IO];
        size_t n = outs.n;
        if (n > m->mf->n_outputs || n > GF_MANIFEST_MAX_IO) {
            st = gf_err_set(&err, GF_ERR_INTERNAL, "function '%s' returned %zu outputs, not %zu",
                            m->key, n, m->mf->n_outputs);
        } else {
            for (size_t i = 0; i < n; i++) {
                ot[i].name = m->mf->outputs[i].name;
                ot[i].t = outs.t[i];
            }
            gf_ipc_result res = {
                .flags = cold ? GF_IPC_RESULT_COLD : 0,
                .source_tier = src,
                .queue_us = t_start - cur->t_recv_us,
                .load_us = load_us,
                .exec_us = timing.exec_us,
                .n = (uint32_t)n,
                .t = ot,
            };
            st = gf_ipc_encode_result(b, cur->id, &res, &err);
        }
    }
    gf_fn_outputs_free(&outs);
    if (st != GF_OK) {
        pthread_mutex_lock(&w->lock);
        w->n_errors++;
        pthread_mutex_unlock(&w->lock);
    }
    if (st != GF_OK) {
        gf_buf_reset(b);
        GF_LOG_D("request %llu: %s", (unsigned long long)cur->id, gf_err_msg(&err));
        gf_err e2;
        gf_err_clear(&e2);
        if (gf_ipc_encode_error(b, cur->id, st, gf_err_msg(&err), &e2) != GF_OK)
            GF_LOG_E("encoding ERROR failed: %s", gf_err_msg(&e2));
    }
}

static void request_free(gf_worker *w, wreq *r)
{
    release_lease(w, r);
    gf_ipc_infer_deinit(&r->msg);
    gf_ipc_frame_deinit(&r->frame);
    pthread_mutex_lock(&w->lock);
    r->m->pending--;
    wmodel_unref(r->m);
    pthread_cond_broadcast(&w->admin_cond);
    pthread_mutex_unlock(&w->lock);
    free(r);
}

static void *exec_main(void *arg)
{
    gf_worker *w = arg;
    gf_buf b;
    gf_buf_init(&b);
    b.limit = (size_t)(GF_IPC_HEADER_SIZE + w->cfg.max_frame);
    pthread_mutex_lock(&w->lock);
    for (;;) {
        wreq *cur = NULL;
        for (;;) {
            if (w->ahead_pending || w->reader_running) { /* the reader is using the queue
                                                          * or the device */
                pthread_cond_wait(&w->exec_cond, &w->lock);
                continue;
            }
            if (w->stopping || (cur = first_runnable(w)) != NULL ||
                (w->draining && w->q_head == NULL))
                break;
            pthread_cond_wait(&w->exec_cond, &w->lock);
        }
        if (cur == NULL)
            break;
        queue_unlink(w, cur);
        if (w->ahead == cur)
            w->ahead = NULL; /* its turn came: it keeps its lease */
        w->running = cur->m;
        pthread_mutex_unlock(&w->lock);
        run_request(w, cur, &b);
        request_free(w, cur);
        pthread_mutex_lock(&w->lock);
        w->running = NULL;
        pthread_mutex_unlock(&w->lock);
        send_buf(w, &b);
        pthread_mutex_lock(&w->lock);
    }
    /* stopping: answer what is left so the gateway can retry it elsewhere */
    while (w->ahead_pending)
        pthread_cond_wait(&w->exec_cond, &w->lock);
    while (w->q_head != NULL) {
        wreq *r = w->q_head;
        queue_unlink(w, r);
        w->n_errors++;
        char why[sizeof w->stop_why];
        stop_message(w, "the worker is stopping", why, sizeof why);
        pthread_mutex_unlock(&w->lock);
        reply_error(w, &b, r->id, GF_ERR_CLOSED, why);
        request_free(w, r);
        pthread_mutex_lock(&w->lock);
    }
    w->exec_done = true;
    pthread_cond_broadcast(&w->admin_cond);
    pthread_mutex_unlock(&w->lock);
    wake_main(w);
    gf_buf_deinit(&b);
    return NULL;
}

/* ---- reader: frames in -------------------------------------------------------------- */

typedef enum { RD_CONTINUE = -1 } rd_result;

static int protocol_error(gf_worker *w, gf_buf *b, uint64_t id, gf_status code, const char *msg)
{
    GF_LOG_E("malformed frame from the gateway (closing): %s", msg);
    reply_error(w, b, id, code, msg);
    return GF_WORKER_EXIT_PROTOCOL;
}

/* True while new work is refused; the reason goes to why (cap bytes). */
static bool refusing(gf_worker *w, char *why, size_t cap)
{
    pthread_mutex_lock(&w->lock);
    bool r = w->draining || w->stopping;
    if (r)
        stop_message(w, "the worker is shutting down", why, cap);
    pthread_mutex_unlock(&w->lock);
    return r;
}

static void handle_load(gf_worker *w, gf_buf *b, uint64_t id, const gf_ipc_load *msg)
{
    char why[sizeof w->stop_why];
    if (refusing(w, why, sizeof why)) {
        reply_error(w, b, id, GF_ERR_CLOSED, why);
        return;
    }
    if (msg->key[0] == '\0') {
        reply_error(w, b, id, GF_ERR_INVALID, "LOAD: the key is empty");
        return;
    }
    if (msg->tier != GF_TIER_STORE && msg->tier != GF_TIER_HOST &&
        msg->tier != GF_TIER_DEVICE) {
        char text[96];
        snprintf(text, sizeof text, "LOAD: tier %d is not 0 (store), 1 (host) or 2 (device)",
                 msg->tier);
        {
            reply_error(w, b, id, GF_ERR_INVALID, text);
            return;
        }
    }
    if (msg->plugin_path[0] != '\0' && !w->cfg.allow_native) {
        reply_error(w, b, id, GF_ERR_PERMISSION,
                    "plugins (native functions) are not allowed on this worker; start it "
                    "with --allow-native-functions");
        return;
    }
    wjob *j = calloc(1, sizeof *j);
    if (j == NULL) {
        reply_error(w, b, id, GF_ERR_NOMEM, "out of memory");
        return;
    }
    j->kind = JOB_LOAD;
    j->id = id;
    j->tier = msg->tier;
    pthread_mutex_lock(&w->lock);
    wmodel *m = table_find(w, msg->key);
    if (m != NULL) {
        if (m->manifest_len != msg->manifest_len ||
            memcmp(m->manifest_text, msg->manifest, msg->manifest_len) != 0 ||
            strcmp(m->weights_path, msg->weights_path) != 0 ||
            strcmp(m->plugin_path, msg->plugin_path) != 0) {
            pthread_mutex_unlock(&w->lock);
            free(j);
            {
                reply_error(w, b, id, GF_ERR_EXISTS,
                            "this key is loaded with another manifest, weights or plugin; "
                            "UNLOAD it first");
                return;
            }
        }
    } else {
        m = calloc(1, sizeof *m);
        if (m != NULL) {
            m->key = dup_str(msg->key);
            m->manifest_text = malloc(msg->manifest_len + 1);
            m->weights_path = dup_str(msg->weights_path);
            m->plugin_path = dup_str(msg->plugin_path);
        }
        if (m == NULL || m->key == NULL || m->manifest_text == NULL || m->weights_path == NULL ||
            m->plugin_path == NULL) {
            pthread_mutex_unlock(&w->lock);
            wmodel_free(m);
            free(j);
            {
                reply_error(w, b, id, GF_ERR_NOMEM, "out of memory");
                return;
            }
        }
        memcpy(m->manifest_text, msg->manifest, msg->manifest_len + 1);
        m->manifest_len = msg->manifest_len;
        m->prep = WM_PREPARING;
        table_insert(w, m);
    }
    m->refs++;
    j->m = m;
    if (w->j_tail != NULL)
        w->j_tail->next = j;
    else
        w->j_head = j;
    w->j_tail = j;
    pthread_cond_signal(&w->admin_cond);
    pthread_mutex_unlock(&w->lock);
}

static void handle_unload(gf_worker *w, gf_buf *b, uint64_t id, const gf_ipc_unload *msg)
{
    char why[sizeof w->stop_why];
    if (refusing(w, why, sizeof why)) {
        reply_error(w, b, id, GF_ERR_CLOSED, why);
        return;
    }
    wjob *j = calloc(1, sizeof *j);
    if (j == NULL) {
        reply_error(w, b, id, GF_ERR_NOMEM, "out of memory");
        return;
    }
    pthread_mutex_lock(&w->lock);
    wmodel *m = table_find(w, msg->key);
    if (m == NULL) {
        pthread_mutex_unlock(&w->lock);
        free(j);
        {
            reply_error(w, b, id, GF_ERR_NOT_FOUND, "no such function version on this worker");
            return;
        }
    }
    m->unloading = true;
    m->refs++;
    j->kind = JOB_UNLOAD;
    j->id = id;
    j->m = m;
    if (w->j_tail != NULL)
        w->j_tail->next = j;
    else
        w->j_head = j;
    w->j_tail = j;
    pthread_cond_signal(&w->admin_cond);
    pthread_mutex_unlock(&w->lock);
}

/* Queue an INFER; takes the frame (and the decoded message) in every case. */
static void handle_infer(gf_worker *w, gf_buf *b, gf_ipc_frame *f, gf_ipc_infer *msg,
                         uint64_t t_recv)
{
    uint64_t id = f->h.request_id;
    wreq *r = NULL;
    pthread_mutex_lock(&w->lock);
    w->n_requests++;
    pthread_mutex_unlock(&w->lock);
    char why[sizeof w->stop_why];
    if (refusing(w, why, sizeof why)) {
        reply_error(w, b, id, GF_ERR_CLOSED, why);
        goto drop;
    }
    if ((r = calloc(1, sizeof *r)) == NULL) {
        reply_error(w, b, id, GF_ERR_NOMEM, "out of memory");
        goto drop;
    }
    pthread_mutex_lock(&w->lock);
    wmodel *m = table_find(w, msg->key);
    if (m == NULL) {
        pthread_mutex_unlock(&w->lock);
        free(r);
        char text[GF_IPC_MAX_KEY + 64];
        snprintf(text, sizeof text, "no function version '%s' on this worker", msg->key);
        reply_error(w, b, id, GF_ERR_NOT_FOUND, text);
        goto drop;
    }
    m->refs++;
    m->pending++;
    r->id = id;
    r->m = m;
    r->frame = *f;
    r->msg = *msg;
    r->t_recv_us = t_recv;
    memset(f, 0, sizeof *f);
    memset(msg, 0, sizeof *msg);
    /* Fast path: with the executor idle, a request for a warm model whose
     * function takes microseconds runs right here, saving the hand-off to the
     * executor (a thread wake-up costs more than such a request). */
    bool quick = w->running == NULL && w->q_head == NULL && !w->ahead_pending &&
                 !w->exec_acquiring && m->prep == WM_READY && m->exec_us > 0 &&
                 m->exec_us <= GF_WORKER_INLINE_US;
    if (quick) {
        w->running = m;
        w->reader_running = true;
        pthread_mutex_unlock(&w->lock);
        gf_lease *l = NULL;
        gf_status st = gf_cache_acquire(w->cache, m->cm, &l, NULL);
        if (st == GF_OK && !gf_lease_cold(l)) {
            r->lease = l;
            run_request(w, r, b);
            request_free(w, r);
            pthread_mutex_lock(&w->lock);
            w->running = NULL;
            w->reader_running = false;
            pthread_cond_broadcast(&w->exec_cond);
            pthread_mutex_unlock(&w->lock);
            send_buf(w, b);
            return;
        }
        /* it has to load (or wait for room): the executor's job, lease and all */
        pthread_mutex_lock(&w->lock);
        r->lease = st == GF_OK ? l : NULL;
        w->running = NULL;
        w->reader_running = false;
    }
    r->prev = w->q_tail;
    if (w->q_tail != NULL)
        w->q_tail->next = r;
    else
        w->q_head = r;
    w->q_tail = r;
    w->q_len++;
    pthread_cond_broadcast(&w->exec_cond);
    pthread_mutex_unlock(&w->lock);
    if (!quick)
        lease_ahead(w);
    return;
drop:
    pthread_mutex_lock(&w->lock);
    w->n_errors++;
    pthread_mutex_unlock(&w->lock);
    gf_ipc_infer_deinit(msg);
    gf_ipc_frame_deinit(f);
}

static void begin_drain(gf_worker *w)
{
    pthread_mutex_lock(&w->lock);
    w->draining = true;
    pthread_cond_broadcast(&w->exec_cond);
    pthread_cond_broadcast(&w->admin_cond);
    pthread_mutex_unlock(&w->lock);
}

/* Handle one whole frame; RD_CONTINUE, or the exit code of a protocol error.
 * Takes the frame. */
static int handle_frame(gf_worker *w, gf_buf *b, gf_ipc_frame *f)
{
    uint64_t t_recv = gf_mono_us();
    uint64_t id = f->h.request_id;
    const gf_ipc_msg_info *mi = gf_ipc_msg_info_of(f->h.type);
    gf_err err;
    gf_err_clear(&err);
    int rc = RD_CONTINUE;
    GF_LOG_T("frame %s id %llu, %llu bytes", mi->name, (unsigned long long)id,
             (unsigned long long)f->h.payload_len);
    if (mi->direction != 'W') {
        snprintf(err.msg, sizeof err.msg, "%s frames go from a worker to the gateway", mi->name);
        rc = protocol_error(w, b, id, GF_ERR_PROTOCOL, err.msg);
        goto done;
    }
    switch ((gf_ipc_type)f->h.type) {
    case GF_IPC_HELLO:
        send_ready(w, b, id);
        break;
    case GF_IPC_PING:
        reply_empty(w, b, GF_IPC_PONG, id);
        break;
    case GF_IPC_GET_STATS:
        send_stats(w, b, id);
        break;
    case GF_IPC_SHUTDOWN:
        GF_LOG_I("SHUTDOWN: finishing the work in flight");
        begin_drain(w);
        break;
    case GF_IPC_LOAD: {
        gf_ipc_load msg;
        if (gf_ipc_decode_load(f, &msg, &err) != GF_OK)
            rc = protocol_error(w, b, id, err.code, err.msg);
        else
            handle_load(w, b, id, &msg);
        break;
    }
    case GF_IPC_UNLOAD: {
        gf_ipc_unload msg;
        if (gf_ipc_decode_unload(f, &msg, &err) != GF_OK)
            rc = protocol_error(w, b, id, err.code, err.msg);
        else
            handle_unload(w, b, id, &msg);
        break;
    }
    case GF_IPC_INFER: {
        gf_ipc_infer msg;
        gf_status st = gf_ipc_decode_infer(f, &msg, &err);
        if (st == GF_OK) {
            handle_infer(w, b, f, &msg, t_recv);
        } else {
            gf_ipc_infer_deinit(&msg);
            if (st == GF_ERR_NOMEM)
                reply_error(w, b, id, st, err.msg);
            else
                rc = protocol_error(w, b, id, st, err.msg);
        }
        break;
    }
    default:
        rc = protocol_error(w, b, id, GF_ERR_PROTOCOL, "unexpected message type");
        break;
    }
done:
    gf_ipc_frame_deinit(f);
    return rc;
}

/* Read and handle frames until the socket would block. Returns RD_CONTINUE,
 * or an exit code when reading must stop. */
static int read_frames(gf_worker *w, gf_ipc_reader *rd, gf_buf *b)
{
    for (;;) {
        gf_ipc_frame f;
        gf_err err;
        gf_err_clear(&err);
        gf_status st = gf_ipc_reader_next(rd, &f, &err);
        switch (st) {
        case GF_OK: {
            int rc = handle_frame(w, b, &f);
            if (rc != RD_CONTINUE)
                return rc;
            break;
        }
        case GF_ERR_BUSY:
            return RD_CONTINUE;
        case GF_ERR_NOMEM: /* the payload was skipped; the stream is intact */
            GF_LOG_W("%s", err.msg);
            reply_error(w, b, f.h.request_id, st, err.msg);
            break;
        case GF_ERR_CLOSED:
            GF_LOG_I("the gateway closed the connection");
            return GF_WORKER_EXIT_OK;
        case GF_ERR_PROTOCOL:
        case GF_ERR_TOO_LARGE:
            return protocol_error(w, b, f.h.request_id, st, err.msg);
        default:
            GF_LOG_E("reading from the gateway: %s", gf_err_msg(&err));
            return GF_WORKER_EXIT_FAILURE;
        }
    }
}

/* ---- lifetime ---------------------------------------------------------------------- */

bool gf_worker_start_failure_is_fatal(gf_status st)
{
    switch (st) {
    case GF_ERR_INVALID:
    case GF_ERR_NOT_FOUND:
    case GF_ERR_UNSUPPORTED:
    case GF_ERR_TOO_LARGE:
    case GF_ERR_PERMISSION:
    case GF_ERR_OVERFLOW:
    case GF_ERR_NO_DEVICE_MEM:
        return true;
    default:
        return false;
    }
}

/* SIGTERM and SIGINT mean "finish the work in flight, then exit", as
 * SHUTDOWN does. Threads started before main (OpenBLAS's pool) cannot have
 * the signals blocked, so a handler catches them on whichever thread and
 * wakes the reader through an eventfd (write(2) is async-signal-safe). */
static volatile sig_atomic_t gf_worker_signo;
static int gf_worker_sig_fd = -1;

static void on_signal(int signo)
{
    int saved = errno;
    gf_worker_signo = signo;
    uint64_t one = 1;
    ssize_t n = write(gf_worker_sig_fd, &one, sizeof one);
    (void)n;
    errno = saved;
}

static gf_status setup_signals(gf_worker *w, gf_err *err)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    if ((w->sig_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
        return gf_err_set(err, GF_ERR_IO, "eventfd: %s", strerror(errno));
    gf_worker_sig_fd = w->sig_fd;
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGTERM, &sa, &w->old_term) != 0 || sigaction(SIGINT, &sa, &w->old_int) != 0)
        return gf_err_set(err, GF_ERR_IO, "sigaction: %s", strerror(errno));
    w->handlers_set = true;
    return GF_OK;
}

gf_status gf_worker_new(const gf_worker_config *cfg, gf_worker **out, gf_err *err)
{
    *out = NULL;
    gf_status st;
    struct stat sb;
    if (cfg->fd < 0 || fstat(cfg->fd, &sb) != 0)
        return gf_err_set(err, GF_ERR_INVALID, "--fd %d is not an open descriptor", cfg->fd);
    if (!S_ISSOCK(sb.st_mode))
        return gf_err_set(err, GF_ERR_INVALID, "--fd %d is not a socket", cfg->fd);
    if (stat(cfg->state_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return gf_err_set(err, GF_ERR_INVALID, "--state-dir %s is not a directory", cfg->state_dir);
    gf_worker *w = calloc(1, sizeof *w);
    if (w == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    w->cfg = *cfg;
    w->fd = cfg->fd;
    w->sig_fd = w->wake_fd = -1;
    w->t_start_us = gf_mono_us();
    if (w->cfg.max_frame == 0)
        w->cfg.max_frame = GF_IPC_DEFAULT_MAX_FRAME;
    pthread_mutex_init(&w->lock, NULL);
    pthread_mutex_init(&w->wlock, NULL);
    pthread_mutex_init(&w->ev_lock, NULL);
    pthread_cond_init(&w->exec_cond, NULL);
    pthread_cond_init(&w->admin_cond, NULL);
    pthread_cond_init(&w->progress_cond, NULL);
    pthread_cond_init(&w->ev_cond, NULL);
    w->device = dup_str(cfg->device != NULL ? cfg->device : "cpu");
    w->state_dir = dup_str(cfg->state_dir);
    size_t dl = strlen(cfg->state_dir) + sizeof "/derived";
    w->derived_dir = malloc(dl);
    w->evq = calloc(GF_WORKER_EVQ_MAX, sizeof *w->evq);
    if (w->device == NULL || w->state_dir == NULL || w->derived_dir == NULL || w->evq == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    w->cfg.device = w->device;
    w->cfg.state_dir = w->state_dir;
    snprintf(w->derived_dir, dl, "%s/derived", cfg->state_dir);
    if (mkdir(w->derived_dir, 0755) != 0 && errno != EEXIST) {
        st = gf_err_set(err, GF_ERR_INVALID, "mkdir(%s): %s", w->derived_dir, strerror(errno));
        goto fail;
    }
    int fl = fcntl(w->fd, F_GETFL);
    if (fl < 0 || fcntl(w->fd, F_SETFL, fl | O_NONBLOCK) != 0 ||
        fcntl(w->fd, F_SETFD, FD_CLOEXEC) != 0) {
        st = gf_err_set(err, GF_ERR_IO, "fcntl(fd %d): %s", w->fd, strerror(errno));
        goto fail;
    }
    if ((st = setup_signals(w, err)) != GF_OK)
        goto fail;
    if ((w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        st = gf_err_set(err, GF_ERR_IO, "eventfd: %s", strerror(errno));
        goto fail;
    }
    gf_backend_config bc = {
        .device = w->device,
        .device_budget = (size_t)cfg->device_memory,
        .blas_threads = cfg->blas_threads,
        .cpu_copy_bandwidth = cfg->copy_bandwidth,
    };
    if ((st = gf_backend_open(&bc, &w->be, err)) != GF_OK) {
        gf_err_prefix(err, "device '%s'", w->device);
        goto fail;
    }
    gf_cache_config cc = {
        .host_budget = cfg->host_memory,
        .policy = cfg->policy,
        .on_event = on_cache_event,
        .event_arg = w,
    };
    if ((st = gf_cache_new(w->be, &cc, &w->cache, err)) != GF_OK) {
        gf_err_prefix(err, "parameter cache");
        goto fail;
    }
    gf_device_info info;
    gf_backend_info(w->be, &info);
    GF_LOG_I("ready: %s, device budget %llu bytes, host tier %llu bytes, policy %s", info.name,
             (unsigned long long)info.budget, (unsigned long long)cfg->host_memory,
             gf_evict_policy_name(cfg->policy));
    *out = w;
    return GF_OK;
fail:
    gf_worker_free(w);
    return st;
}

static bool start_thread(pthread_t *t, void *(*fn)(void *), gf_worker *w, bool *started)
{
    *started = pthread_create(t, NULL, fn, w) == 0;
    if (!*started)
        GF_LOG_E("pthread_create failed");
    return *started;
}

int gf_worker_run(gf_worker *w)
{
    gf_err err;
    gf_err_clear(&err);
    gf_buf b;
    gf_buf_init(&b);
    b.limit = (size_t)(GF_IPC_HEADER_SIZE + w->cfg.max_frame); /* RESULTs of quick requests */
    gf_ipc_reader rd;
    int code = GF_WORKER_EXIT_FAILURE;
    if (gf_ipc_reader_init(&rd, w->fd, w->cfg.max_frame, &err) != GF_OK) {
        GF_LOG_E("%s", gf_err_msg(&err));
        gf_ipc_reader_deinit(&rd);
        return GF_WORKER_EXIT_FAILURE;
    }
    if (!start_thread(&w->ev_thread, events_main, w, &w->ev_started) ||
        !start_thread(&w->exec_thread, exec_main, w, &w->exec_started) ||
        !start_thread(&w->admin_thread, admin_main, w, &w->admin_started)) {
        begin_stop(w, GF_WORKER_EXIT_FAILURE);
        goto out;
    }
    send_ready(w, &b, 0);

    bool reading = true;
    for (;;) {
        struct pollfd p[3] = {
            {reading ? w->fd : -1, POLLIN, 0},
            {w->sig_fd, POLLIN, 0},
            {w->wake_fd, POLLIN, 0},
        };
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            GF_LOG_E("poll: %s", strerror(errno));
            begin_stop(w, GF_WORKER_EXIT_FAILURE);
            break;
        }
        if (p[1].revents != 0) {
            uint64_t v;
            if (read(w->sig_fd, &v, sizeof v) == (ssize_t)sizeof v) {
                GF_LOG_I("signal %d: finishing the work in flight", (int)gf_worker_signo);
                begin_drain(w);
            }
        }
        if (reading && p[0].revents != 0) {
            int rc = read_frames(w, &rd, &b);
            if (rc != RD_CONTINUE) {
                reading = false;
                /* end of stream after SHUTDOWN: the gateway may have closed
                 * only its writing half and still wants the results (if it
                 * is gone, the next write fails and stops us) */
                pthread_mutex_lock(&w->lock);
                bool drain_on = rc == GF_WORKER_EXIT_OK && w->draining;
                pthread_mutex_unlock(&w->lock);
                if (!drain_on)
                    begin_stop(w, rc);
            }
        }
        if (p[2].revents != 0) {
            uint64_t v;
            ssize_t n = read(w->wake_fd, &v, sizeof v);
            (void)n;
        }
        pthread_mutex_lock(&w->lock);
        bool done = w->exec_done && w->admin_done;
        pthread_mutex_unlock(&w->lock);
        if (done)
            break;
    }
out:
    if (w->exec_started)
        pthread_join(w->exec_thread, NULL);
    if (w->admin_started)
        pthread_join(w->admin_thread, NULL);
    w->exec_started = w->admin_started = false;
    pthread_mutex_lock(&w->lock);
    code = w->exit_code;
    pthread_mutex_unlock(&w->lock);
    gf_ipc_reader_deinit(&rd);
    gf_buf_deinit(&b);
    GF_LOG_I("exiting with code %d", code);
    return code;
}

void gf_worker_free(gf_worker *w)
{
    if (w == NULL)
        return;
    if (w->exec_started || w->admin_started) {
        begin_stop(w, GF_WORKER_EXIT_FAILURE);
        if (w->exec_started)
            pthread_join(w->exec_thread, NULL);
        if (w->admin_started)
            pthread_join(w->admin_thread, NULL);
    }
    /* flush the events queued so far, then stop forwarding */
    pthread_mutex_lock(&w->ev_lock);
    w->ev_stop = true;
    pthread_cond_broadcast(&w->ev_cond);
    pthread_mutex_unlock(&w->ev_lock);
    if (w->ev_started)
        pthread_join(w->ev_thread, NULL);
    if (w->cache != NULL)
        gf_cache_drain(w->cache);
    for (size_t i = 0; i < GF_WORKER_BUCKETS; i++) {
        while (w->buckets[i] != NULL) {
            wmodel *m = w->buckets[i];
            release_model_state(w, m);
            table_remove(w, m);
        }
    }
    gf_cache_free(w->cache);
    gf_backend_free(w->be);
    if (w->evq != NULL) {
        for (size_t i = 0; i < w->ev_count; i++) {
            wevent *e = &w->evq[(w->ev_head + i) % GF_WORKER_EVQ_MAX];
            free(e->key);
            free(e->msg);
        }
        free(w->evq);
    }
    if (w->handlers_set) {
        sigaction(SIGTERM, &w->old_term, NULL);
        sigaction(SIGINT, &w->old_int, NULL);
    }
    if (w->sig_fd >= 0) {
        gf_worker_sig_fd = -1;
        close(w->sig_fd);
    }
    if (w->wake_fd >= 0)
        close(w->wake_fd);
    if (w->fd >= 0)
        close(w->fd);
    pthread_mutex_destroy(&w->lock);
    pthread_mutex_destroy(&w->wlock);
    pthread_mutex_destroy(&w->ev_lock);
    pthread_cond_destroy(&w->exec_cond);
    pthread_cond_destroy(&w->admin_cond);
    pthread_cond_destroy(&w->progress_cond);
    pthread_cond_destroy(&w->ev_cond);
    free(w->device);
    free(w->state_dir);
    free(w->derived_dir);
    free(w);
}
