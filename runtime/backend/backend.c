/* gpufaas — the device interface: opening backends, budget accounting, and
 * the public wrappers over each backend's slots. */
#include "backend/backend_impl.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/arena.h"
#include "core/clock.h"
#include "core/fault.h"
#include "core/log.h"
#include "gf_config.h"

/* ---- pointer -> size map ------------------------------------------------ */

#define GF_PS_EMPTY ((uintptr_t)0)
#define GF_PS_TOMB ((uintptr_t)1)

static size_t ps_hash(uintptr_t k, size_t cap)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k & (cap - 1);
}

static gf_status ps_grow(gf_ptr_sizes *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    if (m->n * 4 < m->cap) /* mostly tombstones: rehash at the same size */
        cap = m->cap;
    uintptr_t *keys = calloc(cap, sizeof *keys);
    size_t *vals = calloc(cap, sizeof *vals);
    if (keys == NULL || vals == NULL) {
        free(keys);
        free(vals);
        return GF_ERR_NOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i] <= GF_PS_TOMB)
            continue;
        size_t j = ps_hash(m->keys[i], cap);
        while (keys[j] != GF_PS_EMPTY)
            j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    m->tombs = 0;
    return GF_OK;
}

static gf_status ps_put(gf_ptr_sizes *m, void *p, size_t size)
{
    if ((m->n + m->tombs + 1) * 2 > m->cap) {
        gf_status st = ps_grow(m);
        if (st != GF_OK)
            return st;
    }
    uintptr_t k = (uintptr_t)p;
    size_t j = ps_hash(k, m->cap);
    while (m->keys[j] > GF_PS_TOMB)
        j = (j + 1) & (m->cap - 1);
    if (m->keys[j] == GF_PS_TOMB)
        m->tombs--;
    m->keys[j] = k;
    m->vals[j] = size;
    m->n++;
    return GF_OK;
}

/* Remove p; returns its size, or (size_t)-1 when p is unknown. */
static size_t ps_take(gf_ptr_sizes *m, void *p)
{
    if (m->cap == 0)
        return (size_t)-1;
    uintptr_t k = (uintptr_t)p;
    size_t j = ps_hash(k, m->cap);
    while (m->keys[j] != GF_PS_EMPTY) {
        if (m->keys[j] == k) {
            m->keys[j] = GF_PS_TOMB;
            m->tombs++;
            m->n--;
            return m->vals[j];
        }
        j = (j + 1) & (m->cap - 1);
    }
    return (size_t)-1;
}

/* ---- the cuda module ---------------------------------------------------- */

static pthread_once_t gf_cuda_once = PTHREAD_ONCE_INIT;
static const gf_backend_module *gf_cuda_mod;
static char gf_cuda_load_error[512];

static void gf_cuda_module_load(void)
{
#if GF_HAVE_CUDA_MODULE
    const char *candidates[3];
    int nc = 0;
    const char *env = getenv("GPUFAAS_CUDA_MODULE");
    if (env != NULL && env[0] != '\0')
        candidates[nc++] = env;
    candidates[nc++] = GF_BUILD_DIR "/runtime/libgf_backend_cuda.so";
    candidates[nc++] = GF_LIBDIR "/libgf_backend_cuda.so";
    for (int i = 0; i < nc; i++) {
        void *h = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) {
            snprintf(gf_cuda_load_error, sizeof gf_cuda_load_error, "dlopen(%s): %s",
                     candidates[i], dlerror());
            continue;
        }
        gf_backend_module_entry_fn entry =
            (gf_backend_module_entry_fn)(uintptr_t)dlsym(h, "gf_backend_cuda_module");
        const gf_backend_module *m = entry != NULL ? entry() : NULL;
        if (m == NULL || m->abi != GF_BACKEND_MODULE_ABI || m->size < sizeof *m) {
            snprintf(gf_cuda_load_error, sizeof gf_cuda_load_error,
                     "%s: not a compatible gpufaas cuda module", candidates[i]);
            dlclose(h);
            continue;
        }
        m->set_log(gf_log_role(), gf_log_threshold);
        gf_cuda_mod = m; /* the handle stays open for the life of the process */
        return;
    }
#else
    snprintf(gf_cuda_load_error, sizeof gf_cuda_load_error,
             "this build has no CUDA backend (configured without nvcc or with -Dcuda=disabled)");
#endif
}

static const gf_backend_module *gf_cuda_module(void)
{
    pthread_once(&gf_cuda_once, gf_cuda_module_load);
    return gf_cuda_mod;
}

int gf_backend_cuda_device_count(void)
{
    const gf_backend_module *m = gf_cuda_module();
    if (m == NULL)
        return 0;
    int n = m->device_count();
    return n > 0 ? n : 0;
}

/* ---- lifetime ------------------------------------------------------------- */

static gf_status gf_parse_device(const char *name, gf_device_kind *kind, int *index, gf_err *err)
{
    if (name == NULL || strcmp(name, "cpu") == 0) {
        *kind = GF_DEVICE_CPU;
        *index = 0;
        return GF_OK;
    }
    if (strcmp(name, "cuda") == 0) {
        *kind = GF_DEVICE_CUDA;
        *index = 0;
        return GF_OK;
    }
    if (strncmp(name, "cuda:", 5) == 0 && name[5] >= '0' && name[5] <= '9') {
        char *end;
        errno = 0;
        long v = strtol(name + 5, &end, 10);
        if (*end == '\0' && errno == 0 && v >= 0 && v < 1024) {
            *kind = GF_DEVICE_CUDA;
            *index = (int)v;
            return GF_OK;
        }
    }
    return gf_err_set(err, GF_ERR_INVALID, "unknown device '%s' (expected cpu, cuda or cuda:N)",
                      name);
}

/* The background commit of the pool (a backend that asks, be->precommit):
 * the device memory of the whole budget comes to exist while the backend
 * serves, so a swap-in creates none (one that comes first commits the fresh
 * pages it takes, gf_dev_page_alloc). One page at a time under acct_lock,
 * taken, committed and put back as one step: nobody sees the pool without
 * it, and held (allocations + committed pages) stays within the budget --
 * the thread stops where allocations have taken the room. A failure leaves
 * the rest fresh, to be committed on first use. */
static void *gf_precommit_main(void *arg)
{
    gf_backend *be = arg;
    uint64_t t0 = gf_mono_us();
    int64_t done = 0;
    while (!atomic_load(&be->precommit_stop)) {
        pthread_mutex_lock(&be->acct_lock);
        int64_t p;
        if (be->held > be->budget || be->budget - be->held < be->page_size ||
            !gf_page_pool_take_fresh(&be->pool, &p)) {
            pthread_mutex_unlock(&be->acct_lock);
            break;
        }
        gf_err err;
        gf_status st = be->iface.page_commit(be, p, &err);
        if (st == GF_OK) {
            gf_page_pool_committed(&be->pool, p);
            be->held += be->page_size;
            done++;
        }
        gf_page_pool_put(&be->pool, p);
        pthread_mutex_unlock(&be->acct_lock);
        if (st != GF_OK) {
            GF_LOG_W("%s: committing the page pool stopped after %lld of %lld pages: %s",
                     be->info.name, (long long)done, (long long)be->n_pages, err.msg);
            break;
        }
    }
    GF_LOG_D("%s: %lld pages committed in the background in %llu us", be->info.name,
             (long long)done, (unsigned long long)(gf_mono_us() - t0));
    atomic_store(&be->precommit_done, 1);
    return NULL;
}

bool gf_dev_precommit_done(gf_backend *be)
{
    return !be->precommit_started || atomic_load(&be->precommit_done) != 0;
}

gf_status gf_backend_open(const gf_backend_config *cfg, gf_backend **out, gf_err *err)
{
    *out = NULL;
    gf_device_kind kind;
    int index;
    gf_status st = gf_parse_device(cfg->device, &kind, &index, err);
    if (st != GF_OK)
        return st;
    gf_backend *be = NULL;
    if (kind == GF_DEVICE_CPU) {
        st = gf_backend_cpu_open(cfg, &be, err);
    } else {
        const gf_backend_module *m = gf_cuda_module();
        if (m == NULL)
            return gf_err_set(err, GF_ERR_NOT_FOUND, "cuda:%d: CUDA backend unavailable: %s",
                              index, gf_cuda_load_error);
        int n = m->device_count();
        if (index >= n)
            return gf_err_set(err, GF_ERR_NOT_FOUND, "cuda:%d: no such GPU (%d found)", index,
                              n > 0 ? n : 0);
        static const gf_backend_hostfns host = {gf_dev_alloc, gf_dev_free};
        st = m->open(cfg, index, &host, &be, err);
    }
    if (st != GF_OK)
        return st;
    if (pthread_mutex_init(&be->acct_lock, NULL) != 0) {
        be->iface.free(be);
        free(be);
        return gf_err_set(err, GF_ERR_NOMEM, "pthread_mutex_init failed");
    }
    if ((st = gf_page_pool_init(&be->pool, be->n_pages, err)) != GF_OK) {
        be->iface.free(be);
        gf_page_pool_deinit(&be->pool);
        pthread_mutex_destroy(&be->acct_lock);
        free(be);
        return st;
    }
    be->used = 0;
    be->held = 0;
    memset(&be->sizes, 0, sizeof be->sizes);
    be->acct_ready = true;
    if (cfg->precommit)
        be->precommit = true;
    atomic_init(&be->precommit_stop, 0);
    atomic_init(&be->precommit_done, 0);
    if (be->precommit)
        be->precommit_started =
            pthread_create(&be->precommit_thread, NULL, gf_precommit_main, be) == 0;
    if ((st = gf_dev_arena_new(be, &be->arena, err)) != GF_OK) {
        gf_backend_free(be);
        return st;
    }
    be->info.budget = be->budget;
    be->info.page_size = be->page_size;
    GF_LOG_D("opened %s: budget %llu bytes, page %zu bytes", be->info.name,
             (unsigned long long)be->budget, be->page_size);
    *out = be;
    return GF_OK;
}

void gf_backend_free(gf_backend *be)
{
    if (be == NULL)
        return;
    if (be->precommit_started) { /* it commits under acct_lock: stop it first */
        atomic_store(&be->precommit_stop, 1);
        pthread_join(be->precommit_thread, NULL);
        be->precommit_started = false;
    }
    /* First the arena and the implementation, which may still free through
     * gf_dev_free (the cuda kernels' workspace): the accounting must outlive
     * them. */
    gf_dev_arena_free(be->arena);
    be->iface.free(be);
    if (be->acct_ready) {
        if (be->sizes.n > 0)
            GF_LOG_W("%zu device allocations still live at close", be->sizes.n);
        free(be->sizes.keys);
        free(be->sizes.vals);
        gf_page_pool_deinit(&be->pool);
        pthread_mutex_destroy(&be->acct_lock);
    }
    free(be);
}

bool gf_backend_lost(gf_backend *be)
{
    if (atomic_load(&be->lost))
        return true;
    if (!be->iface.lost(be))
        return false;
    if (atomic_exchange(&be->lost, 1) == 0)
        GF_LOG_E("%s: the device is lost (a fault left its context unusable; every further "
                 "call fails until the process restarts)",
                 be->info.name);
    return true;
}

void gf_backend_info(gf_backend *be, gf_device_info *out)
{
    *out = be->info;
    be->iface.refresh_info(be, out);
}

gf_dev_arena *gf_backend_arena(gf_backend *be)
{
    return be->arena;
}

int gf_backend_device_index(gf_backend *be)
{
    return be->info.index;
}

const gf_kernels *gf_backend_kernels(gf_backend *be)
{
    return &be->kernels;
}

/* ---- device memory --------------------------------------------------------- */

static bool gf_budget_has_room(const gf_backend *be, size_t size)
{
    return size <= be->budget && be->used <= be->budget - size;
}

/* The budget refuses size more bytes. acct_lock held; unlocks it. */
static gf_status gf_budget_refuse(gf_backend *be, size_t size, const char *what,
                                  bool reclaimed, gf_err *err)
{
    uint64_t used = be->used;
    pthread_mutex_unlock(&be->acct_lock);
    return gf_err_set(err, GF_ERR_NO_DEVICE_MEM,
                      "device memory budget exhausted: %s of %zu bytes needs more than the "
                      "%llu free%s (%llu of %llu in use)",
                      what, size, (unsigned long long)(be->budget - used),
                      reclaimed ? " after evicting idle models" : "", (unsigned long long)used,
                      (unsigned long long)be->budget);
}

void gf_backend_set_reclaim(gf_backend *be, gf_reclaim_fn fn, void *arg)
{
    pthread_mutex_lock(&be->acct_lock);
    be->reclaim = fn;
    be->reclaim_arg = arg;
    pthread_mutex_unlock(&be->acct_lock);
}

/* Rounds of reclaiming one allocation may take: the room a reclaim made can
 * be taken by another thread first (a swap-in waiting for room wakes when an
 * eviction frees pages), and each such taker takes one model's pages, so a
 * few rounds suffice. */
#define GF_RECLAIM_ROUNDS 4

/* Wait until size more bytes fit in the budget, asking the reclaimer for
 * room; returns with acct_lock held on success, unlocked on refusal.
 * acct_lock held on entry. */
static gf_status gf_budget_room(gf_backend *be, size_t size, gf_err *err)
{
    for (int round = 0;; round++) {
        /* the fault site stands for "no room this time" (another thread took it) */
        bool fault = GF_FAULT("dev_alloc");
        if (!fault && gf_budget_has_room(be, size))
            return GF_OK;
        gf_reclaim_fn fn = be->reclaim;
        void *arg = be->reclaim_arg;
        if (fn == NULL || round == GF_RECLAIM_ROUNDS) {
            if (!fault)
                return gf_budget_refuse(be, size, "an allocation", round > 0, err);
            pthread_mutex_unlock(&be->acct_lock);
            return gf_err_set(err, GF_ERR_NO_DEVICE_MEM,
                              "device allocation of %zu bytes failed (injected fault)", size);
        }
        pthread_mutex_unlock(&be->acct_lock);
        uint64_t free_now = fn(arg, size);
        pthread_mutex_lock(&be->acct_lock);
        if (free_now < size && !gf_budget_has_room(be, size))
            return gf_budget_refuse(be, size, "an allocation", true, err); /* nothing idle */
    }
    return GF_OK;
}

/* Release free committed pages (their memory exists while they wait in the
 * pool) until `room` more bytes fit under the budget beside what is held,
 * or every one of them when all. acct_lock held. */
static void gf_pages_trim(gf_backend *be, uint64_t room, bool all)
{
    int64_t page;
    while ((all || be->held + room > be->budget) &&
           gf_page_pool_take_committed(&be->pool, &page)) {
        be->iface.page_release(be, page);
        gf_page_pool_released(&be->pool, page);
        be->held -= be->page_size;
    }
}

gf_status gf_dev_alloc(gf_backend *be, size_t size, void **out, gf_err *err)
{
    *out = NULL;
    pthread_mutex_lock(&be->acct_lock);
    gf_status st = gf_budget_room(be, size, err);
    if (st != GF_OK)
        return st;
    be->used += size;
    /* used <= budget - size, and held = used + the free committed pages, so
     * releasing enough of those always makes room */
    gf_pages_trim(be, size, false);
    be->held += size;
    pthread_mutex_unlock(&be->acct_lock);
    void *p = NULL;
    st = be->iface.dev_alloc(be, size, &p, err);
    if (st == GF_ERR_NO_DEVICE_MEM) {
        /* the device has less free than the budget says (another process,
         * the runtime's own): give back every free committed page, retry */
        pthread_mutex_lock(&be->acct_lock);
        int64_t before = gf_page_pool_free_committed(&be->pool);
        gf_pages_trim(be, 0, true);
        pthread_mutex_unlock(&be->acct_lock);
        if (before > 0)
            st = be->iface.dev_alloc(be, size, &p, err);
    }
    if (st == GF_OK) {
        pthread_mutex_lock(&be->acct_lock);
        st = ps_put(&be->sizes, p, size);
        pthread_mutex_unlock(&be->acct_lock);
        if (st != GF_OK) {
            be->iface.dev_free(be, p);
            gf_err_set(err, st, "out of host memory tracking a device allocation");
        }
    }
    if (st != GF_OK) {
        pthread_mutex_lock(&be->acct_lock);
        be->used -= size;
        be->held -= size;
        pthread_mutex_unlock(&be->acct_lock);
        return st;
    }
    atomic_fetch_add(&be->n_allocs, 1);
    *out = p;
    return GF_OK;
}

void gf_dev_free(gf_backend *be, void *ptr)
{
    if (ptr == NULL)
        return;
    if (!be->acct_ready) { /* a constructor cleaning up: nothing was counted */
        be->iface.dev_free(be, ptr);
        return;
    }
    pthread_mutex_lock(&be->acct_lock);
    size_t size = ps_take(&be->sizes, ptr);
    if (size != (size_t)-1) {
        be->used -= size;
        be->held -= size;
    }
    pthread_mutex_unlock(&be->acct_lock);
    if (size == (size_t)-1) {
        GF_LOG_E("gf_dev_free(%p): not a live device allocation", ptr);
        return;
    }
    atomic_fetch_add(&be->n_frees, 1);
    be->iface.dev_free(be, ptr);
}

void gf_dev_counters(gf_backend *be, uint64_t *allocs, uint64_t *frees)
{
    *allocs = atomic_load(&be->n_allocs);
    *frees = atomic_load(&be->n_frees);
}

void gf_dev_usage(gf_backend *be, uint64_t *used, uint64_t *budget)
{
    pthread_mutex_lock(&be->acct_lock);
    if (used != NULL)
        *used = be->used;
    if (budget != NULL)
        *budget = be->budget;
    pthread_mutex_unlock(&be->acct_lock);
}

uint64_t gf_dev_held(gf_backend *be)
{
    pthread_mutex_lock(&be->acct_lock);
    uint64_t held = be->held;
    pthread_mutex_unlock(&be->acct_lock);
    return held;
}

size_t gf_dev_page_size(gf_backend *be)
{
    return be->page_size;
}

gf_status gf_dev_vreserve(gf_backend *be, size_t size, void **out, gf_err *err)
{
    *out = NULL;
    if (size == 0 || size % be->page_size != 0)
        return gf_err_set(err, GF_ERR_INVALID,
                          "reservation of %zu bytes is not a positive multiple of the page "
                          "size %zu", size, be->page_size);
    return be->iface.vreserve(be, size, out, err);
}

void gf_dev_vrelease(gf_backend *be, void *base, size_t size)
{
    if (base != NULL)
        be->iface.vrelease(be, base, size);
}

gf_status gf_dev_page_alloc(gf_backend *be, int64_t *page, gf_err *err)
{
    *page = -1;
    if (GF_FAULT("dev_page_alloc"))
        return gf_err_set(err, GF_ERR_NO_DEVICE_MEM, "device page allocation failed "
                          "(injected fault)");
    pthread_mutex_lock(&be->acct_lock);
    if (!gf_budget_has_room(be, be->page_size))
        return gf_budget_refuse(be, be->page_size, "a page", false, err);
    int64_t p;
    bool fresh;
    if (!gf_page_pool_take(&be->pool, &p, &fresh)) {
        pthread_mutex_unlock(&be->acct_lock);
        return gf_err_set(err, GF_ERR_NO_DEVICE_MEM, "the page pool is empty (%lld pages)",
                          (long long)be->n_pages);
    }
    be->used += be->page_size;
    if (fresh) /* no committed page was free, so held == used before this one */
        be->held += be->page_size;
    pthread_mutex_unlock(&be->acct_lock);
    if (fresh) {
        gf_status st = be->iface.page_commit(be, p, err);
        if (st != GF_OK) {
            pthread_mutex_lock(&be->acct_lock);
            gf_page_pool_put(&be->pool, p);
            be->used -= be->page_size;
            be->held -= be->page_size;
            pthread_mutex_unlock(&be->acct_lock);
            return st;
        }
        gf_page_pool_committed(&be->pool, p);
    }
    atomic_fetch_add(&be->n_allocs, 1);
    *page = p;
    return GF_OK;
}

void gf_dev_page_free(gf_backend *be, int64_t page)
{
    if (page < 0)
        return;
    pthread_mutex_lock(&be->acct_lock);
    gf_page_pool_put(&be->pool, page); /* committed: held keeps counting it */
    be->used -= be->page_size;
    pthread_mutex_unlock(&be->acct_lock);
    atomic_fetch_add(&be->n_frees, 1);
}

gf_status gf_dev_map(gf_backend *be, void *addr, int64_t page, gf_err *err)
{
    if (GF_FAULT("dev_map"))
        return gf_err_set(err, GF_ERR_DEVICE, "mapping a device page failed (injected fault)");
    if (page < 0 || addr == NULL)
        return gf_err_set(err, GF_ERR_INVALID, "gf_dev_map: bad page %lld or address",
                          (long long)page);
    return be->iface.map(be, addr, page, err);
}

gf_status gf_dev_unmap(gf_backend *be, void *addr, gf_err *err)
{
    return be->iface.unmap(be, addr, err);
}

void gf_dev_unmap_range(gf_backend *be, void *addr, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        gf_err e;
        if (be->iface.unmap(be, (char *)addr + i * be->page_size, &e) != GF_OK)
            GF_LOG_E("unmapping a device page: %s", e.msg);
    }
}

gf_status gf_dev_map_range(gf_backend *be, void *addr, const int64_t *pages, size_t n,
                           gf_err *err)
{
    if (n == 0)
        return GF_OK;
    if (addr == NULL)
        return gf_err_set(err, GF_ERR_INVALID, "gf_dev_map_range: NULL address");
    for (size_t i = 0; i < n; i++) {
        if (GF_FAULT("dev_map")) /* the site counts pages, as gf_dev_map's */
            return gf_err_set(err, GF_ERR_DEVICE, "mapping device page %zu of %zu failed "
                              "(injected fault)", i + 1, n);
        if (pages[i] < 0)
            return gf_err_set(err, GF_ERR_INVALID, "gf_dev_map_range: bad page %lld",
                              (long long)pages[i]);
    }
    if (be->iface.map_range != NULL)
        return be->iface.map_range(be, addr, pages, n, err);
    for (size_t i = 0; i < n; i++) {
        gf_status st = be->iface.map(be, (char *)addr + i * be->page_size, pages[i], err);
        if (st != GF_OK) {
            gf_dev_unmap_range(be, addr, i);
            return st;
        }
    }
    return GF_OK;
}

/* ---- pinned host memory ---------------------------------------------------- */

gf_status gf_host_alloc_pinned(gf_backend *be, size_t size, void **out, gf_err *err)
{
    *out = NULL;
    if (GF_FAULT("host_alloc"))
        return gf_err_set(err, GF_ERR_NOMEM, "pinned host allocation of %zu bytes failed "
                          "(injected fault)", size);
    return be->iface.host_alloc(be, size, out, err);
}

void gf_host_free_pinned(gf_backend *be, void *ptr)
{
    if (ptr != NULL)
        be->iface.host_free(be, ptr);
}

/* ---- streams, copies, events ---------------------------------------------- */

gf_stream *gf_backend_stream(gf_backend *be, gf_stream_kind kind)
{
    return be->iface.stream(be, kind);
}

gf_status gf_memcpy_async(gf_backend *be, gf_stream *s, void *dst, const void *src, size_t n,
                          gf_copy_kind kind, gf_err *err)
{
    if (n == 0)
        return GF_OK;
    if (dst == NULL || src == NULL)
        return gf_err_set(err, GF_ERR_INVALID, "copy of %zu bytes with a NULL pointer", n);
    if (GF_FAULT("memcpy_async"))
        return gf_err_set(err, GF_ERR_DEVICE, "queueing a copy of %zu bytes failed "
                          "(injected fault)", n);
    return be->iface.memcpy_async(be, s, dst, src, n, kind, err);
}

gf_status gf_stream_sync(gf_backend *be, gf_stream *s, gf_err *err)
{
    return be->iface.stream_sync(be, s, err);
}

gf_status gf_event_new(gf_backend *be, gf_event **out, gf_err *err)
{
    *out = NULL;
    return be->iface.event_new(be, out, err);
}

void gf_event_free(gf_backend *be, gf_event *ev)
{
    if (ev != NULL)
        be->iface.event_free(be, ev);
}

gf_status gf_event_record(gf_backend *be, gf_event *ev, gf_stream *s, gf_err *err)
{
    return be->iface.event_record(be, ev, s, err);
}

gf_status gf_stream_wait_event(gf_backend *be, gf_stream *s, gf_event *ev, gf_err *err)
{
    return be->iface.stream_wait_event(be, s, ev, err);
}

bool gf_event_query(gf_backend *be, gf_event *ev)
{
    return be->iface.event_query(be, ev);
}

gf_status gf_event_sync(gf_backend *be, gf_event *ev, gf_err *err)
{
    return be->iface.event_sync(be, ev, err);
}
