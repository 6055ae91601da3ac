/* gpufaas — the cpu backend: a budgeted heap, a memfd page pool mapped into
 * PROT_NONE reservations, a copy stream run by a thread, events made of
 * counters and condition variables. It honours the same contract as the cuda
 * backend so that every cache and scheduling behaviour is exercised on
 * machines without a GPU. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "backend/backend_impl.h"
#include "backend/cpu/cpu_kernels.h"
#include "core/fault.h"
#include "core/log.h"
#include "core/tensor.h"
#include "gf_config.h"

#define GF_CPU_DEFAULT_BUDGET ((uint64_t)1 << 30)

typedef enum { OP_COPY, OP_RECORD, OP_WAIT } cpu_op_kind;

typedef struct {
    cpu_op_kind kind;
    void *dst;
    const void *src;
    size_t n;
    gf_event *ev;
    uint64_t gen;
    double t_queued; /* OP_COPY under an emulated link: when it was queued (gf_mono_s) */
} cpu_op;

typedef struct cpu_ctx cpu_ctx;

struct gf_stream {
    cpu_ctx *ctx;
    gf_stream_kind kind;
    pthread_mutex_t lock;
    pthread_cond_t cond;  /* signals: op queued, op done, stop */
    cpu_op *ring;         /* queued ops (copy stream only) */
    size_t cap, head, count;
    uint64_t queued, done; /* ops queued and finished, ever */
    bool stop;
    bool thread_started;
    pthread_t thread;
    gf_status error;       /* first failure since the last sync (sticky) */
    char error_msg[256];
};

struct gf_event {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t recorded;  /* generation of the last record */
    uint64_t completed; /* highest generation completed */
    gf_status status;   /* error of the stream when the last record completed */
    char msg[256];
};

struct cpu_ctx {
    gf_backend *be;
    gf_cpu_kctx *kctx;
    struct gf_stream compute, copy;
    uint64_t copy_bandwidth;
    double link_free; /* the emulated link: when its last copy ends (gf_mono_s; copy thread) */
    gf_cpu_copy_hook hook;
    void *hook_arg;
    /* page pool */
    int memfd;
    size_t sys_page;
    /* the page pool (be->pool): a committed page is allocated in the memfd
     * and parked; a released one is a hole in the memfd */
    /* Every committed page has its page-table entries built once, in its
     * slot of the parking range. Mapping a page into a model's range moves
     * those entries there with mremap (cheap: page tables move whole when
     * 2 MiB-aligned), and unmapping moves them back. Mapping the memfd afresh
     * instead would rebuild a PTE per 4 KiB page on every swap-in, which
     * costs as much as the copy itself. */
    char *park;
    size_t park_bytes;
    void **mapped_at; /* per page: where it is mapped, NULL when parked */
    _Atomic int lost; /* the "device" is lost (fault injection only) */
};

/* A lost device (here only through the "device_lost" fault site, which the
 * compute stream's sync hits) fails every call that reaches it from then on,
 * as every CUDA call does after a sticky error. */
static bool cpu_is_lost(cpu_ctx *c)
{
    return atomic_load(&c->lost) != 0;
}

static gf_status cpu_lost_error(gf_err *err)
{
    return gf_err_set(err, GF_ERR_DEVICE, "the device is lost (injected fault: device_lost)");
}

/* ---- events ---------------------------------------------------------------- */

static gf_status cpu_event_new(gf_backend *be, gf_event **out, gf_err *err)
{
    (void)be;
    gf_event *ev = calloc(1, sizeof *ev);
    if (ev == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory for an event");
    pthread_mutex_init(&ev->lock, NULL);
    pthread_cond_init(&ev->cond, NULL);
    *out = ev;
    return GF_OK;
}

static void cpu_event_free(gf_backend *be, gf_event *ev)
{
    (void)be;
    pthread_mutex_destroy(&ev->lock);
    pthread_cond_destroy(&ev->cond);
    free(ev);
}

static void cpu_event_complete(gf_event *ev, uint64_t gen, gf_status status, const char *msg)
{
    pthread_mutex_lock(&ev->lock);
    if (gen > ev->completed) {
        ev->completed = gen;
        ev->status = status;
        snprintf(ev->msg, sizeof ev->msg, "%s", msg != NULL ? msg : "");
    }
    pthread_cond_broadcast(&ev->cond);
    pthread_mutex_unlock(&ev->lock);
}

static void cpu_event_wait_gen(gf_event *ev, uint64_t gen)
{
    pthread_mutex_lock(&ev->lock);
    while (ev->completed < gen)
        pthread_cond_wait(&ev->cond, &ev->lock);
    pthread_mutex_unlock(&ev->lock);
}

static bool cpu_event_query(gf_backend *be, gf_event *ev)
{
    (void)be;
    pthread_mutex_lock(&ev->lock);
    bool done = ev->completed >= ev->recorded;
    pthread_mutex_unlock(&ev->lock);
    return done;
}

static gf_status cpu_event_sync(gf_backend *be, gf_event *ev, gf_err *err)
{
    cpu_ctx *c = be->context;
    pthread_mutex_lock(&ev->lock);
    uint64_t want = ev->recorded;
    while (ev->completed < want)
        pthread_cond_wait(&ev->cond, &ev->lock);
    gf_status st = ev->status;
    if (st != GF_OK)
        gf_err_set(err, st, "%s", ev->msg);
    pthread_mutex_unlock(&ev->lock);
    if (st == GF_OK && cpu_is_lost(c))
        return cpu_lost_error(err);
    return st;
}

/* ---- the copy thread ------------------------------------------------------- */

static void cpu_sleep_until(double t)
{
    double now = gf_mono_s();
    if (t <= now)
        return;
    double d = t - now;
    struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Copy n bytes, at most at bandwidth bytes/s when set (emulating a link).
 * The link keeps its own time, as a DMA engine does: a copy queued (at
 * t_queued) before the one ahead of it ended starts when that one ended,
 * however late this thread woke, so copies queued back to back move at the
 * link's bandwidth whatever else the machine runs. */
static void cpu_copy_bytes(cpu_ctx *c, void *dst, const void *src, size_t n, double t_queued)
{
    if (c->copy_bandwidth == 0) {
        memcpy(dst, src, n);
        return;
    }
    const size_t chunk = 256 << 10;
    double start = t_queued > c->link_free ? t_queued : c->link_free;
    c->link_free = start + (double)n / (double)c->copy_bandwidth;
    for (size_t off = 0; off < n; off += chunk) {
        size_t len = n - off < chunk ? n - off : chunk;
        memcpy((char *)dst + off, (const char *)src + off, len);
        cpu_sleep_until(start + (double)(off + len) / (double)c->copy_bandwidth);
    }
}

static void cpu_stream_fail(struct gf_stream *s, gf_status st, const char *msg)
{
    /* called with s->lock held */
    if (s->error == GF_OK) {
        s->error = st;
        snprintf(s->error_msg, sizeof s->error_msg, "%s", msg);
    }
}

static void *cpu_copy_thread(void *arg)
{
    struct gf_stream *s = arg;
    cpu_ctx *c = s->ctx;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (s->count == 0 && !s->stop)
            pthread_cond_wait(&s->cond, &s->lock);
        if (s->count == 0 && s->stop)
            break;
        cpu_op op = s->ring[s->head];
        pthread_mutex_unlock(&s->lock);
        switch (op.kind) {
        case OP_COPY: {
            if (c->hook != NULL)
                c->hook(c->hook_arg, op.n);
            if (GF_FAULT("copy_exec")) {
                char msg[128];
                snprintf(msg, sizeof msg, "copy of %zu bytes failed on the copy stream "
                         "(injected fault)", op.n);
                pthread_mutex_lock(&s->lock);
                cpu_stream_fail(s, GF_ERR_DEVICE, msg);
                pthread_mutex_unlock(&s->lock);
            } else {
                cpu_copy_bytes(c, op.dst, op.src, op.n, op.t_queued);
            }
            break;
        }
        case OP_RECORD: {
            pthread_mutex_lock(&s->lock);
            gf_status st = s->error;
            char msg[256];
            memcpy(msg, s->error_msg, sizeof msg);
            pthread_mutex_unlock(&s->lock);
            cpu_event_complete(op.ev, op.gen, st, msg);
            break;
        }
        case OP_WAIT:
            cpu_event_wait_gen(op.ev, op.gen);
            break;
        }
        pthread_mutex_lock(&s->lock);
        s->head = (s->head + 1) % s->cap;
        s->count--;
        s->done++;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static gf_status cpu_enqueue(struct gf_stream *s, const cpu_op *op, gf_err *err)
{
    pthread_mutex_lock(&s->lock);
    if (s->count == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        cpu_op *ring = malloc(cap * sizeof *ring);
        if (ring == NULL) {
            pthread_mutex_unlock(&s->lock);
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory queueing on the copy stream");
        }
        for (size_t i = 0; i < s->count; i++)
            ring[i] = s->ring[(s->head + i) % s->cap];
        free(s->ring);
        s->ring = ring;
        s->cap = cap;
        s->head = 0;
    }
    s->ring[(s->head + s->count) % s->cap] = *op;
    s->count++;
    s->queued++;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return GF_OK;
}

static gf_status cpu_stream_init(cpu_ctx *c, struct gf_stream *s, gf_stream_kind kind,
                                 gf_err *err)
{
    memset(s, 0, sizeof *s);
    s->ctx = c;
    s->kind = kind;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    if (kind == GF_STREAM_COPY) {
        int rc = pthread_create(&s->thread, NULL, cpu_copy_thread, s);
        if (rc != 0)
            return gf_err_set(err, GF_ERR_NOMEM, "pthread_create(copy stream): %s",
                              strerror(rc));
        s->thread_started = true;
    }
    return GF_OK;
}

static void cpu_stream_deinit(struct gf_stream *s)
{
    if (s->ctx == NULL)
        return;
    if (s->thread_started) {
        pthread_mutex_lock(&s->lock);
        s->stop = true;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->thread, NULL);
    }
    free(s->ring);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    s->ctx = NULL;
}

/* ---- stream slots ------------------------------------------------------------ */

static gf_stream *cpu_stream(gf_backend *be, gf_stream_kind kind)
{
    cpu_ctx *c = be->context;
    return kind == GF_STREAM_COPY ? &c->copy : &c->compute;
}

static gf_status cpu_memcpy_async(gf_backend *be, gf_stream *s, void *dst, const void *src,
                                  size_t n, gf_copy_kind kind, gf_err *err)
{
    (void)kind;
    if (cpu_is_lost(be->context))
        return cpu_lost_error(err);
    if (s->kind == GF_STREAM_COMPUTE) {
        if (GF_FAULT("copy_exec"))
            return gf_err_set(err, GF_ERR_DEVICE, "copy of %zu bytes failed (injected fault)",
                              n);
        memcpy(dst, src, n); /* the compute stream is the caller: done on return */
        return GF_OK;
    }
    cpu_op op = {.kind = OP_COPY, .dst = dst, .src = src, .n = n};
    if (((cpu_ctx *)be->context)->copy_bandwidth != 0)
        op.t_queued = gf_mono_s();
    return cpu_enqueue(s, &op, err);
}

static gf_status cpu_stream_sync(gf_backend *be, gf_stream *s, gf_err *err)
{
    cpu_ctx *c = be->context;
    if (s->kind == GF_STREAM_COMPUTE && GF_FAULT("device_lost"))
        atomic_store(&c->lost, 1);
    pthread_mutex_lock(&s->lock);
    while (s->done < s->queued)
        pthread_cond_wait(&s->cond, &s->lock);
    if (cpu_is_lost(c)) {
        pthread_mutex_unlock(&s->lock);
        return cpu_lost_error(err);
    }
    gf_status st = s->error;
    if (st != GF_OK) {
        gf_err_set(err, st, "%s", s->error_msg);
        s->error = GF_OK;
        s->error_msg[0] = '\0';
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

static gf_status cpu_event_record(gf_backend *be, gf_event *ev, gf_stream *s, gf_err *err)
{
    if (cpu_is_lost(be->context))
        return cpu_lost_error(err);
    pthread_mutex_lock(&ev->lock);
    uint64_t gen = ++ev->recorded;
    pthread_mutex_unlock(&ev->lock);
    if (s->kind == GF_STREAM_COMPUTE) {
        cpu_event_complete(ev, gen, GF_OK, NULL);
        return GF_OK;
    }
    cpu_op op = {.kind = OP_RECORD, .ev = ev, .gen = gen};
    gf_status st = cpu_enqueue(s, &op, err);
    if (st != GF_OK)
        cpu_event_complete(ev, gen, st, "recording the event failed");
    return st;
}

static gf_status cpu_stream_wait_event(gf_backend *be, gf_stream *s, gf_event *ev, gf_err *err)
{
    if (cpu_is_lost(be->context))
        return cpu_lost_error(err);
    pthread_mutex_lock(&ev->lock);
    uint64_t gen = ev->recorded;
    pthread_mutex_unlock(&ev->lock);
    if (gen == 0)
        return GF_OK; /* never recorded: nothing to wait for */
    if (s->kind == GF_STREAM_COMPUTE) {
        cpu_event_wait_gen(ev, gen);
        return GF_OK;
    }
    cpu_op op = {.kind = OP_WAIT, .ev = ev, .gen = gen};
    return cpu_enqueue(s, &op, err);
}

static int cpu_kernel_sync(void *kctx, gf_stream *s)
{
    (void)kctx;
    return (int)cpu_stream_sync(s->ctx->be, s, NULL);
}

/* ---- memory ---------------------------------------------------------------- */

static gf_status cpu_dev_alloc(gf_backend *be, size_t size, void **out, gf_err *err)
{
    if (cpu_is_lost(be->context))
        return cpu_lost_error(err);
    void *p = NULL;
    int rc = posix_memalign(&p, 256, size ? size : 1);
    if (rc != 0)
        return gf_err_set(err, GF_ERR_NO_DEVICE_MEM, "posix_memalign(%zu): %s", size,
                          strerror(rc));
    *out = p;
    return GF_OK;
}

static void cpu_dev_free(gf_backend *be, void *ptr)
{
    (void)be;
    free(ptr);
}

static gf_status cpu_host_alloc(gf_backend *be, size_t size, void **out, gf_err *err)
{
    cpu_ctx *c = be->context;
    void *p = NULL;
    int rc = posix_memalign(&p, c->sys_page, size ? size : 1);
    if (rc != 0)
        return gf_err_set(err, GF_ERR_NOMEM, "pinned host allocation of %zu bytes: %s", size,
                          strerror(rc));
    *out = p;
    return GF_OK;
}

static void cpu_host_free(gf_backend *be, void *ptr)
{
    (void)be;
    free(ptr);
}

/* Reserve size bytes of address space aligned to align; NULL on failure. */
static void *cpu_reserve_aligned(size_t size, size_t align)
{
    size_t span;
    if (!gf_size_add(size, align, &span))
        return NULL;
    /* over-reserve by one alignment unit and trim both ends */
    char *p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uintptr_t base = ((uintptr_t)p + align - 1) / align * align;
    size_t head = base - (uintptr_t)p;
    if (head > 0)
        munmap(p, head);
    size_t tail = span - head - size;
    if (tail > 0)
        munmap((char *)base + size, tail);
    return (void *)base;
}

/* Put a PROT_NONE placeholder at [addr, addr + len), keeping the range ours. */
static int cpu_placeholder(void *addr, size_t len)
{
    void *p = mmap(addr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? -1 : 0;
}

static gf_status cpu_vreserve(gf_backend *be, size_t size, void **out, gf_err *err)
{
    void *p = cpu_reserve_aligned(size, be->page_size);
    if (p == NULL)
        return gf_err_set(err, GF_ERR_NO_DEVICE_MEM, "mmap(reserve %zu): %s", size,
                          strerror(errno));
    *out = p;
    return GF_OK;
}

static void cpu_vrelease(gf_backend *be, void *base, size_t size)
{
    (void)be;
    munmap(base, size);
}

static gf_status cpu_page_commit(gf_backend *be, int64_t p, gf_err *err)
{
    cpu_ctx *c = be->context;
    if (cpu_is_lost(c))
        return cpu_lost_error(err);
    /* commit the page's memory now rather than on first touch inside a copy,
     * as a GPU allocation would be, and build its page tables once in its
     * parking slot */
    off_t off = (off_t)p * (off_t)be->page_size;
    int rc = fallocate(c->memfd, 0, off, (off_t)be->page_size);
    if (rc == 0 || errno == EOPNOTSUPP) {
        void *slot = mmap(c->park + (size_t)p * be->page_size, be->page_size,
                          PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_POPULATE,
                          c->memfd, off);
        rc = slot == MAP_FAILED ? -1 : 0;
    }
    if (rc != 0)
        return gf_err_set(err, GF_ERR_NO_DEVICE_MEM, "committing page %lld: %s", (long long)p,
                          strerror(errno));
    return GF_OK;
}

static void cpu_page_release(gf_backend *be, int64_t p)
{
    cpu_ctx *c = be->context;
    /* give the memfd's memory back (as cuMemRelease does), and the page
     * tables with it: the slot becomes a placeholder again */
    off_t off = (off_t)p * (off_t)be->page_size;
    if (fallocate(c->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off,
                  (off_t)be->page_size) != 0)
        GF_LOG_W("releasing page %lld: fallocate(punch hole): %s", (long long)p,
                 strerror(errno));
    if (cpu_placeholder(c->park + (size_t)p * be->page_size, be->page_size) != 0)
        GF_LOG_W("releasing page %lld: re-reserving its slot: %s", (long long)p,
                 strerror(errno));
}

static gf_status cpu_map(gf_backend *be, void *addr, int64_t page, gf_err *err)
{
    cpu_ctx *c = be->context;
    if (cpu_is_lost(c))
        return cpu_lost_error(err);
    if (!gf_page_pool_is_committed(&be->pool, page) || c->mapped_at[page] != NULL)
        return gf_err_set(err, GF_ERR_INVALID, "page %lld is not an allocated, unmapped page",
                          (long long)page);
    if ((uintptr_t)addr % c->sys_page != 0)
        return gf_err_set(err, GF_ERR_INVALID, "map address %p is not page-aligned", addr);
    char *slot = c->park + (size_t)page * be->page_size;
    /* Move the page tables to addr (replacing its placeholder in one step).
     * MREMAP_DONTUNMAP leaves the slot mapped, with empty page tables: a
     * plain move would free the slot's range for a moment, and another
     * thread's mmap (malloc's, a sanitizer's) could be handed it before we
     * took it back. */
    void *p = mremap(slot, be->page_size, be->page_size,
                     MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, addr);
    if (p == MAP_FAILED && errno == EINVAL) {
        /* before Linux 5.13 (no MREMAP_DONTUNMAP for shared mappings): map
         * the page afresh over the placeholder; the slot keeps its mapping */
        p = mmap(addr, be->page_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_POPULATE,
                 c->memfd, (off_t)page * (off_t)be->page_size);
    }
    if (p == MAP_FAILED)
        return gf_err_set(err, GF_ERR_DEVICE, "mremap(page %lld to %p): %s", (long long)page,
                          addr, strerror(errno));
    c->mapped_at[page] = addr;
    return GF_OK;
}

static gf_status cpu_unmap(gf_backend *be, void *addr, gf_err *err)
{
    cpu_ctx *c = be->context;
    int64_t page = -1;
    for (int64_t i = 0; i < be->n_pages; i++) {
        if (c->mapped_at[i] == addr) {
            page = i;
            break;
        }
    }
    if (page < 0)
        return gf_err_set(err, GF_ERR_INVALID, "no page is mapped at %p", addr);
    char *slot = c->park + (size_t)page * be->page_size;
    /* the page tables back to the slot; addr stays mapped (see cpu_map) until
     * the placeholder replaces it in one step */
    void *p = mremap(addr, be->page_size, be->page_size,
                     MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, slot);
    if (p == MAP_FAILED && errno == EINVAL)
        p = slot; /* before Linux 5.13: the slot kept its own mapping of the page */
    if (p == MAP_FAILED)
        return gf_err_set(err, GF_ERR_DEVICE, "mremap(%p back to its slot): %s", addr,
                          strerror(errno));
    c->mapped_at[page] = NULL;
    if (cpu_placeholder(addr, be->page_size) != 0)
        return gf_err_set(err, GF_ERR_DEVICE, "re-reserving %p: %s", addr, strerror(errno));
    return GF_OK;
}

/* ---- info and lifetime ------------------------------------------------------- */

static void cpu_refresh_info(gf_backend *be, gf_device_info *info)
{
    (void)be;
    long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    info->free_memory = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
}

static bool cpu_lost(gf_backend *be)
{
    return cpu_is_lost(be->context);
}

static void cpu_free(gf_backend *be)
{
    cpu_ctx *c = be->context;
    if (c != NULL) {
        cpu_stream_deinit(&c->copy);
        cpu_stream_deinit(&c->compute);
        gf_cpu_kctx_free(c->kctx);
        if (c->memfd >= 0)
            close(c->memfd);
        if (c->park != NULL)
            munmap(c->park, c->park_bytes);
        free(c->mapped_at);
        free(c);
    }
    be->context = NULL;
}

static const struct gf_backend_iface cpu_iface = {
    /* .free = */ cpu_free,
    /* .refresh_info = */ cpu_refresh_info,
    /* .dev_alloc = */ cpu_dev_alloc,
    /* .dev_free = */ cpu_dev_free,
    /* .vreserve = */ cpu_vreserve,
    /* .vrelease = */ cpu_vrelease,
    /* .page_commit = */ cpu_page_commit,
    /* .page_release = */ cpu_page_release,
    /* .map = */ cpu_map,
    /* .unmap = */ cpu_unmap,
    /* .host_alloc = */ cpu_host_alloc,
    /* .host_free = */ cpu_host_free,
    /* .stream = */ cpu_stream,
    /* .memcpy_async = */ cpu_memcpy_async,
    /* .stream_sync = */ cpu_stream_sync,
    /* .event_new = */ cpu_event_new,
    /* .event_free = */ cpu_event_free,
    /* .event_record = */ cpu_event_record,
    /* .stream_wait_event = */ cpu_stream_wait_event,
    /* .event_query = */ cpu_event_query,
    /* .event_sync = */ cpu_event_sync,
    /* .lost = */ cpu_lost,
    /* .map_range = */ NULL, /* one mmap per page: nothing to save */
};

gf_status gf_backend_cpu_open(const gf_backend_config *cfg, gf_backend **out, gf_err *err)
{
    *out = NULL;
    long sp = sysconf(_SC_PAGESIZE);
    size_t sys_page = sp > 0 ? (size_t)sp : 4096;
    size_t page_size;
    gf_status pst = gf_page_size_choose(cfg->page_size, sys_page, (size_t)1 << 30, &page_size, err);
    if (pst != GF_OK)
        return pst;
    uint64_t budget = cfg->device_budget ? cfg->device_budget : GF_CPU_DEFAULT_BUDGET;
    if (budget > ((uint64_t)1 << 46))
        return gf_err_set(err, GF_ERR_INVALID, "device budget %llu is larger than 64 TiB",
                          (unsigned long long)budget);

    gf_backend *be = calloc(1, sizeof *be);
    cpu_ctx *c = calloc(1, sizeof *c);
    gf_status st;
    if (be == NULL || c == NULL) {
        free(be);
        free(c);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory opening the cpu backend");
    }
    be->iface = cpu_iface;
    be->context = c;
    be->page_size = page_size;
    be->budget = budget;
    c->be = be;
    c->memfd = -1;
    c->sys_page = sys_page;
    c->copy_bandwidth = cfg->cpu_copy_bandwidth;
    c->hook = cfg->cpu_copy_hook;
    c->hook_arg = cfg->cpu_copy_hook_arg;

    int64_t pool_pages = (int64_t)(budget / page_size);
    be->n_pages = pool_pages;
    c->mapped_at = calloc((size_t)(pool_pages ? pool_pages : 1), sizeof *c->mapped_at);
    if (c->mapped_at == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory for a pool of %lld pages",
                        (long long)pool_pages);
        goto fail;
    }
    c->memfd = memfd_create("gpufaas-device-pages", MFD_CLOEXEC);
    if (c->memfd < 0) {
        st = gf_err_set(err, GF_ERR_IO, "memfd_create: %s", strerror(errno));
        goto fail;
    }
    if (ftruncate(c->memfd, (off_t)pool_pages * (off_t)page_size) != 0) {
        st = gf_err_set(err, GF_ERR_IO, "ftruncate(page pool, %lld pages): %s",
                        (long long)pool_pages, strerror(errno));
        goto fail;
    }
    c->park_bytes = (size_t)(pool_pages ? pool_pages : 1) * page_size;
    c->park = cpu_reserve_aligned(c->park_bytes, page_size);
    if (c->park == NULL) {
        st = gf_err_set(err, GF_ERR_NO_DEVICE_MEM, "reserving the page pool's address range: %s",
                        strerror(errno));
        goto fail;
    }
    int threads = cfg->blas_threads > 0 ? cfg->blas_threads : 1;
    st = gf_cpu_kctx_new(threads, &c->kctx, err);
    if (st != GF_OK)
        goto fail;
    gf_cpu_kernels_fill(&be->kernels, c->kctx);
    be->kernels.sync = cpu_kernel_sync;
    if ((st = cpu_stream_init(c, &c->compute, GF_STREAM_COMPUTE, err)) != GF_OK ||
        (st = cpu_stream_init(c, &c->copy, GF_STREAM_COPY, err)) != GF_OK)
        goto fail;

    gf_device_info *info = &be->info;
    info->kind = GF_DEVICE_CPU;
    info->index = 0;
    snprintf(info->name, sizeof info->name, "cpu (%s, %d thread%s)",
             GF_HAVE_BLAS ? "OpenBLAS" : "reference loops", threads, threads == 1 ? "" : "s");
    long phys = sysconf(_SC_PHYS_PAGES);
    info->total_memory = phys > 0 ? (uint64_t)phys * sys_page : 0;
    *out = be;
    return GF_OK;
fail:
    cpu_free(be);
    free(be);
    return st;
}
