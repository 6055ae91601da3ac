/* gpufaas — the parameter cache's loader thread and host tier
 * (cache_impl.h): device loads queued on the copy stream in chunks, from the
 * host copy or through the staging ring, their completion, and the host
 * tier's pinned copies. */
#include "cache/cache_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ema.h"
#include "core/log.h"
#include "core/tensor.h"

/* ---- host tier ----------------------------------------------------------- */

/* Give the host copy's pages back to the pool (no pinned memory is freed:
 * cudaFreeHost would wait for the device, here under the cache's lock). */
void gf_cache_free_host(gf_cache *c, gf_cache_model *m, bool report)
{
    if (m->host_pages == NULL)
        return;
    gf_host_pool_put(c->host_pool, m->n_host_pages, m->host_pages);
    free(m->host_pages);
    m->host_pages = NULL;
    c->host_used -= m->host_bytes;
    if (m->host_ready && report) {
        c->st.evictions_host++;
        gf_cache_emit(c, GF_CACHE_EV_EVICT, m, GF_TIER_HOST, GF_TIER_STORE, m->host_bytes, 0, NULL);
    }
    m->host_ready = false;
}

/* The host copy's bytes at [pos, pos + len): the address of pos, and in
 * *run how many of those bytes lie contiguously there (pages of one slab
 * taken together are adjacent). */
static char *host_at(const gf_cache *c, const gf_cache_model *m, size_t pos, size_t len,
                     size_t *run)
{
    size_t hp = c->host_page;
    size_t pg = pos / hp, off = pos % hp;
    char *p = m->host_pages[pg] + off;
    size_t n = hp - off;
    while (n < len && pg + 1 < m->n_host_pages && m->host_pages[pg + 1] == m->host_pages[pg] + hp) {
        pg++;
        n += hp;
    }
    *run = n < len ? n : len;
    return p;
}

/* Copy len bytes from src into the host copy at pos. */
static void host_fill(const gf_cache *c, gf_cache_model *m, size_t pos, const char *src, size_t len)
{
    for (size_t done = 0, run; done < len; done += run) {
        char *h = host_at(c, m, pos + done, len - done, &run);
        memcpy(h, src + done, run);
    }
}

/* Make host_used + need <= budget by evicting LRU host copies that no load
 * reads. Returns false when impossible. Lock held. */
static bool host_make_room(gf_cache *c, const gf_cache_model *keep, size_t need)
{
    if (need > c->cfg.host_budget)
        return false;
    while (c->host_used + need > c->cfg.host_budget) {
        gf_cache_model *v = NULL;
        for (size_t i = 0; i < c->n_models; i++) {
            gf_cache_model *m = c->models[i];
            if (m == keep || !m->host_ready || m->host_users > 0 || m->host_filling)
                continue;
            if (v == NULL || m->host_tick < v->host_tick)
                v = m;
        }
        if (v == NULL)
            return false;
        gf_cache_free_host(c, v, true);
    }
    return true;
}

/* Reserve host room for m and allocate its host copy; false if there is no
 * room or the allocation fails. Called by the loader without the lock. */
static bool host_reserve(gf_cache *c, gf_cache_model *m)
{
    pthread_mutex_lock(&c->lock);
    bool ok = c->host_pool != NULL && m->host_pages == NULL && !m->host_filling &&
              host_make_room(c, m, m->host_bytes);
    if (ok) {
        c->host_used += m->host_bytes;
        m->host_filling = true;
    }
    pthread_mutex_unlock(&c->lock);
    if (!ok)
        return false;
    gf_err err;
    gf_err_clear(&err);
    char **pages = malloc(m->n_host_pages * sizeof *pages);
    gf_status st = pages == NULL ? gf_err_set(&err, GF_ERR_NOMEM, "out of memory")
                                 : gf_host_pool_take(c->host_pool, m->n_host_pages, pages, &err);
    if (st != GF_OK) {
        GF_LOG_W("model '%s': host tier allocation failed, streaming instead: %s", m->key, err.msg);
        free(pages);
        pthread_mutex_lock(&c->lock);
        c->host_used -= m->host_bytes;
        m->host_filling = false;
        pthread_mutex_unlock(&c->lock);
        return false;
    }
    pthread_mutex_lock(&c->lock);
    m->host_pages = pages;
    pthread_mutex_unlock(&c->lock);
    return true;
}

/* ---- the loader ----------------------------------------------------------- */

static void set_recorded(gf_cache *c, gf_cache_model *m, size_t n)
{
    pthread_mutex_lock(&c->lock);
    m->n_recorded = n;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

static void fail_load(gf_cache *c, gf_cache_model *m, const gf_err *err)
{
    pthread_mutex_lock(&c->lock);
    if (m->load_status == GF_OK) {
        m->load_status = err->code != GF_OK ? err->code : GF_ERR_INTERNAL;
        snprintf(m->load_msg, sizeof m->load_msg, "%s", gf_err_msg(err));
    }
    m->n_recorded = m->n;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

/* Take up a device load: reserve its host copy when it fills one, and set
 * its cursor to the first byte. No lock held (the loader's fields). */
static void begin_device_job(gf_cache *c, gf_cache_model *m)
{
    m->ld_filling = m->src != GF_TIER_HOST && m->fill_host && host_reserve(c, m);
    m->ld_t = 0;
    m->ld_off = 0;
    m->ld_bytes = 0;
}

/* Queue the next slice of m's load on the copy stream: at most len_max
 * bytes of one tensor, from the host copy (filling it first when the load
 * fills it) or through the staging ring; after a tensor's last slice its
 * event, after the model's its done_ev. True when nothing of m is left to
 * queue. No lock held. */
static bool queue_slice(gf_cache *c, gf_cache_model *m, size_t len_max)
{
    gf_err err;
    gf_err_clear(&err);
    gf_status st = GF_OK;
    bool via_host = m->src == GF_TIER_HOST || m->ld_filling;
    if (m->ld_t < m->n) {
        const ctensor *t = &m->t[m->ld_t];
        size_t nbytes = t->st->nbytes, off = m->ld_off;
        size_t len = nbytes - off < len_max ? nbytes - off : len_max;
        const char *src = (const char *)t->st->data + off;
        char *dst = m->va + t->offset + off;
        if (len > 0 && via_host) {
            /* from the host copy, one copy per contiguous run of its pages */
            if (m->ld_filling)
                host_fill(c, m, t->offset + off, src, len);
            for (size_t done = 0, run; done < len && st == GF_OK; done += run) {
                char *h = host_at(c, m, t->offset + off + done, len - done, &run);
                st = gf_memcpy_async(c->be, c->copy, dst + done, h, run, GF_COPY_H2D, &err);
            }
        } else if (len > 0) {
            staging_slot *slot = &c->ring[c->ring_next];
            c->ring_next = (c->ring_next + 1) % c->n_ring;
            if (!slot->used || (st = gf_event_sync(c->be, slot->ev, &err)) == GF_OK) {
                memcpy(slot->buf, src, len);
                st = gf_memcpy_async(c->be, c->copy, dst, slot->buf, len, GF_COPY_H2D, &err);
                if (st == GF_OK)
                    st = gf_event_record(c->be, slot->ev, c->copy, &err);
                slot->used = true;
            }
        }
        m->ld_off += len;
        m->ld_bytes += len;
        if (st == GF_OK && m->ld_off >= nbytes) {
            if ((st = gf_event_record(c->be, t->ev, c->copy, &err)) == GF_OK)
                set_recorded(c, m, m->ld_t + 1);
            m->ld_t++;
            m->ld_off = 0;
        }
        if (st == GF_OK && m->ld_t < m->n)
            return false;
    }
    if (st == GF_OK)
        st = gf_event_record(c->be, m->done_ev, c->copy, &err);
    if (st != GF_OK) {
        fail_load(c, m, &err);
        /* The copies queued before the failure still write into the pages
         * and read the host copy or the staging ring: the completion (which
         * releases both) waits for done_ev, so record it after them, or
         * wait for the stream when even that fails. */
        if (gf_event_record(c->be, m->done_ev, c->copy, NULL) != GF_OK)
            gf_stream_sync(c->be, c->copy, NULL);
    }
    pthread_mutex_lock(&c->lock);
    m->fill_host = m->ld_filling;
    pthread_mutex_unlock(&c->lock);
    return true;
}

/* A device load finished (st: its outcome). */
static void complete_device_job(gf_cache *c, gf_cache_model *m, gf_status st, const gf_err *err)
{
    uint64_t t = gf_mono_us();
    pthread_mutex_lock(&c->lock);
    if (st != GF_OK && m->load_status == GF_OK) {
        m->load_status = st;
        snprintf(m->load_msg, sizeof m->load_msg, "%s", gf_err_msg(err));
    }
    uint64_t us = t > m->t_start_us ? t - m->t_start_us : 1;
    if (m->src == GF_TIER_HOST)
        m->host_users--;
    if (m->load_status == GF_OK) {
        atomic_store(&m->dev, DEV_READY);
        double bw = (double)m->layout_bytes / (double)us;
        if (m->src == GF_TIER_HOST) {
            c->st.loads_from_host++;
            c->bw_host = gf_ema(c->bw_host, bw);
        } else {
            c->st.loads_from_store++;
            c->bw_store = gf_ema(c->bw_store, bw);
        }
        c->st.bytes_to_device += m->layout_bytes;
        c->st.load_us_total += us;
        if (m->fill_host) {
            m->host_filling = false;
            m->host_ready = true;
            m->host_tick = ++c->clock;
            c->st.bytes_to_host += m->layout_bytes;
            gf_cache_emit(c, GF_CACHE_EV_LOAD, m, GF_TIER_STORE, GF_TIER_HOST, m->layout_bytes, us,
                          NULL);
        }
        gf_cache_touch(c, m);
        /* bytes copied; the pages it holds are gf_cache_model_device_bytes */
        gf_cache_emit(c, GF_CACHE_EV_LOAD, m, m->src, GF_TIER_DEVICE, m->layout_bytes, us, NULL);
    } else {
        c->st.load_failures++;
        GF_LOG_W("model '%s': load failed: %s", m->key, m->load_msg);
        if (m->fill_host) {
            m->host_filling = false;
            gf_cache_free_host(c, m, false);
        }
        gf_cache_emit(c, GF_CACHE_EV_FAIL, m, m->src, GF_TIER_DEVICE, m->range_bytes, us,
                      m->load_msg);
        if (m->refs == 0) {
            gf_cache_release_pages(c, m);
            atomic_store(&m->dev, DEV_ABSENT);
        } else {
            atomic_store(&m->dev, DEV_FAILED); /* cleaned up by the last release */
        }
    }
    m->fill_host = false;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

static void run_host_job(gf_cache *c, gf_cache_model *m)
{
    uint64_t t0 = gf_mono_us();
    bool ok = host_reserve(c, m);
    if (ok) {
        for (size_t i = 0; i < m->n; i++)
            host_fill(c, m, m->t[i].offset, m->t[i].st->data, m->t[i].st->nbytes);
    }
    pthread_mutex_lock(&c->lock);
    if (ok) {
        m->host_filling = false;
        m->host_ready = true;
        m->host_tick = ++c->clock;
        c->st.bytes_to_host += m->layout_bytes;
        gf_cache_emit(c, GF_CACHE_EV_LOAD, m, GF_TIER_STORE, GF_TIER_HOST, m->layout_bytes,
                      gf_mono_us() - t0, NULL);
    }
    m->host_users--; /* held by gf_cache_prefetch so the job's model stays */
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

/* When a load is due: its deadline, or GF_CACHE_UNDUE_US after it began
 * when no lease gave one. */
static uint64_t due_us(const gf_cache_model *m)
{
    return m->deadline_us != 0 ? m->deadline_us : m->t_start_us + GF_CACHE_UNDUE_US;
}

/* The copy stream's measured speed, bytes per microsecond: per slice once
 * measured, else the host tier's per load. Lock held. */
static double link_bw(const gf_cache *c)
{
    return c->bw_link > 0 ? c->bw_link : c->bw_host;
}

/* The order key of a load under way: when it is due, or after every load
 * that can still be done in time when its remaining bytes at the link's
 * speed cannot (now: gf_mono_us). Lock held. */
static uint64_t order_key(const gf_cache *c, const gf_cache_model *m, uint64_t now)
{
    uint64_t due = due_us(m);
    double left_us = (double)(m->layout_bytes - m->ld_bytes) / link_bw(c);
    if ((double)now + left_us > (double)due)
        return due + GF_CACHE_UNDUE_US;
    return due;
}

/* The loading model whose next slice goes on the link: the lowest order
 * key (then the earliest begun). Lock held; c->n_loading > 0. */
static size_t most_due(const gf_cache *c)
{
    if (c->cfg.loads_in_order) /* the loads began in this order: the first is the oldest */
        return 0;
    uint64_t now = gf_mono_us();
    size_t best = 0;
    uint64_t kb = order_key(c, c->loading[0], now);
    for (size_t i = 1; i < c->n_loading; i++) {
        const gf_cache_model *a = c->loading[i], *b = c->loading[best];
        uint64_t ka = order_key(c, a, now);
        if (ka < kb || (ka == kb && a->t_start_us < b->t_start_us)) {
            best = i;
            kb = ka;
        }
    }
    return best;
}

/* The bytes of one slice of m: about GF_CACHE_SLICE_US at the measured
 * bandwidth, from GF_CACHE_SLICE_MIN to the chunk. Every slice crosses the
 * copy stream's link, from the host tier or from a staging buffer the store
 * filled, so the link's speed sizes it (a store read slower than the link
 * bounds it further); until the link has been measured, the smallest slice,
 * so that a load due sooner is not queued behind a long one's first slices
 * sized for a guess. Lock held. */
static size_t slice_bytes(const gf_cache *c, const gf_cache_model *m)
{
    double bw = c->bw_link; /* bytes per us */
    if (m->src != GF_TIER_HOST && bw > 0 && c->bw_store < bw)
        bw = c->bw_store;
    double b = bw * GF_CACHE_SLICE_US;
    if (b < (double)GF_CACHE_SLICE_MIN)
        return GF_CACHE_SLICE_MIN < c->chunk ? GF_CACHE_SLICE_MIN : c->chunk;
    return b > (double)c->chunk ? c->chunk : (size_t)b;
}

/* Complete the queued loads whose copies are done, in any order. Lock held
 * on entry and return (dropped for each completion). */
static void complete_done(gf_cache *c)
{
    for (size_t i = 0; i < c->n_pending;) {
        gf_cache_model *m = c->pending[i];
        if (!gf_event_query(c->be, m->done_ev)) {
            i++;
            continue;
        }
        pthread_mutex_unlock(&c->lock);
        gf_err err;
        gf_err_clear(&err);
        gf_status st = gf_event_sync(c->be, m->done_ev, &err);
        if (st != GF_OK) /* clear the copy stream's sticky error for later loads */
            gf_stream_sync(c->be, c->copy, NULL);
        complete_device_job(c, m, st, &err);
        pthread_mutex_lock(&c->lock);
        memmove(c->pending + i, c->pending + i + 1, (c->n_pending - i - 1) * sizeof *c->pending);
        c->n_pending--;
        pthread_cond_broadcast(&c->cond);
    }
}

/* The loader. Jobs are taken up at once (a host job runs to its end); the
 * device loads under way share the copy stream a slice at a time, the most
 * due first (earliest deadline first), with at most GF_CACHE_WINDOW slices
 * queued on it, so that a load due sooner overtakes a long one within a
 * slice or two and the link never idles while a load waits. */
void *gf_cache_loader_main(void *arg)
{
    gf_cache *c = arg;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        if (c->jobs_count > 0) {
            cache_job job = c->jobs[c->jobs_head];
            c->jobs_head = (c->jobs_head + 1) % c->jobs_cap;
            c->jobs_count--;
            c->active++;
            pthread_mutex_unlock(&c->lock);
            if (job.kind == JOB_HOST)
                run_host_job(c, job.m);
            else
                begin_device_job(c, job.m);
            pthread_mutex_lock(&c->lock);
            if (job.kind == JOB_DEVICE)
                c->loading[c->n_loading++] = job.m;
            c->active--;
            pthread_cond_broadcast(&c->cond);
            continue;
        }
        if (c->n_loading > 0 && c->win_count < GF_CACHE_WINDOW) {
            size_t i = most_due(c);
            gf_cache_model *m = c->loading[i];
            size_t len = slice_bytes(c, m);
            pthread_mutex_unlock(&c->lock);
            uint64_t t = gf_mono_us();
            size_t before = m->ld_bytes;
            bool done = queue_slice(c, m, len);
            size_t k = (c->win_head + c->win_count) % GF_CACHE_WINDOW;
            bool marked = gf_event_record(c->be, c->win[k], c->copy, NULL) == GF_OK;
            pthread_mutex_lock(&c->lock);
            if (marked) {
                c->win_bytes[k] = m->ld_bytes - before;
                c->win_t[k] = t;
                c->win_count++;
            }
            if (done) { /* the rest keep the order they began in */
                memmove(c->loading + i, c->loading + i + 1,
                        (c->n_loading - i - 1) * sizeof *c->loading);
                c->n_loading--;
                c->pending[c->n_pending++] = m;
            }
            continue;
        }
        if (c->win_count > 0) { /* the oldest slice queued: then room for another */
            gf_event *ev = c->win[c->win_head];
            pthread_mutex_unlock(&c->lock);
            gf_event_sync(c->be, ev, NULL); /* a failure is the load's, reported by it */
            uint64_t t = gf_mono_us();
            pthread_mutex_lock(&c->lock);
            /* the slice had the link from when it was queued or the one
             * before it was done, whichever was later */
            size_t k = c->win_head;
            uint64_t from = c->win_t[k] > c->link_free_us ? c->win_t[k] : c->link_free_us;
            if (t > from && c->win_bytes[k] >= GF_CACHE_SLICE_MIN / 2)
                c->bw_link = gf_ema(c->bw_link, (double)c->win_bytes[k] / (double)(t - from));
            c->link_free_us = t;
            c->win_head = (c->win_head + 1) % GF_CACHE_WINDOW;
            c->win_count--;
            complete_done(c);
            pthread_cond_broadcast(&c->cond); /* gf_cache_drain waits for the window too */
            continue;
        }
        if (c->n_pending > 0) {
            gf_cache_model *m = c->pending[0];
            pthread_mutex_unlock(&c->lock);
            gf_event_sync(c->be, m->done_ev, NULL);
            pthread_mutex_lock(&c->lock);
            complete_done(c);
            continue;
        }
        if (c->stop)
            break;
        pthread_cond_wait(&c->cond, &c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* Queue a job. Lock held. */
gf_status gf_cache_push_job(gf_cache *c, gf_cache_model *m, job_kind kind, gf_err *err)
{
    if (c->jobs_count == c->jobs_cap ||
        c->n_pending + c->n_loading + (size_t)c->active + c->jobs_count + 1 > c->cap_pending) {
        size_t cap = c->jobs_cap ? c->jobs_cap * 2 : 16;
        cache_job *jobs = malloc(cap * sizeof *jobs);
        gf_cache_model **pend = realloc(c->pending, cap * sizeof *pend);
        if (pend != NULL)
            c->pending = pend;
        gf_cache_model **ld = pend != NULL ? realloc(c->loading, cap * sizeof *ld) : NULL;
        if (ld != NULL)
            c->loading = ld;
        if (jobs == NULL || pend == NULL || ld == NULL) {
            free(jobs);
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory queueing a load");
        }
        for (size_t i = 0; i < c->jobs_count; i++)
            jobs[i] = c->jobs[(c->jobs_head + i) % c->jobs_cap];
        free(c->jobs);
        c->jobs = jobs;
        c->jobs_cap = cap;
        c->jobs_head = 0;
        c->cap_pending = cap;
    }
    c->jobs[(c->jobs_head + c->jobs_count) % c->jobs_cap] = (cache_job){m, kind};
    c->jobs_count++;
    pthread_cond_broadcast(&c->cond);
    return GF_OK;
}

/* Begin a device load of m (pages already mapped). Lock held. */
gf_status gf_cache_start_load(gf_cache *c, gf_cache_model *m, gf_err *err)
{
    m->src = m->host_ready ? GF_TIER_HOST : GF_TIER_STORE;
    m->fill_host = m->src == GF_TIER_STORE && c->host_pool != NULL && m->host_pages == NULL &&
                   !m->host_filling;
    m->n_recorded = 0;
    m->deadline_us = 0; /* the lease that wants it sets one */
    m->load_status = GF_OK;
    m->load_msg[0] = '\0';
    m->t_start_us = gf_mono_us();
    gf_status st = gf_cache_push_job(c, m, JOB_DEVICE, err);
    if (st != GF_OK) {
        gf_cache_release_pages(c, m);
        return st;
    }
    if (m->src == GF_TIER_HOST)
        m->host_users++;
    atomic_store(&m->dev, DEV_LOADING);
    c->st.misses++;
    return GF_OK;
}
