/* Tests for runtime/cache on the cpu backend, with real safetensors files:
 * a randomised run with invariants after every step, exact LRU order,
 * GreedyDual-Size preferences, deterministic pipelining, tier limits, shared
 * loads, BUSY, and fault injection. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/cache.h"
#include "cache_testlib.h"
#include "core/fault.h"
#include "testutil.h"

static void setup(void) { ct_setup(); }
static void teardown(void) { ct_teardown(); }

/* ---- helpers ---- */

/* Check every tensor of a lease against the file, reading device memory
 * back through the backend. */
static void check_lease_bytes(gf_backend *be, gf_lease *l)
{
    gf_cache_model *m = gf_lease_model(l);
    gf_stream *s = gf_backend_stream(be, GF_STREAM_COMPUTE);
    for (size_t i = 0; i < gf_cache_model_count(m); i++) {
        const gf_st_tensor *t = gf_cache_model_tensor(m, i);
        void *dev;
        gf_err err;
        ck_assert_msg(gf_lease_param(l, i, &dev, &err) == GF_OK, "%s", err.msg);
        ck_assert_uint_eq((uintptr_t)dev % 256, 0);
        char *back = malloc(t->nbytes + 1);
        ck_assert_int_eq(gf_memcpy_async(be, s, back, dev, t->nbytes, GF_COPY_D2H, NULL), GF_OK);
        ck_assert_int_eq(gf_stream_sync(be, s, NULL), GF_OK);
        ck_assert_msg(memcmp(back, t->data, t->nbytes) == 0, "model %s tensor %zu differs",
                      gf_cache_model_key(m), i);
        free(back);
    }
}

/* ---- tests ---- */

START_TEST(test_basic_load_hit_and_tiers)
{
    ct_evlog L = {.lock = PTHREAD_MUTEX_INITIALIZER};
    gf_backend *be = ct_open_cpu(16, NULL, NULL);
    gf_cache *c = ct_new_cache(be, 8 * PAGE, GF_EVICT_LRU, &L);
    size_t numel[3] = {1, 3000, 50000};
    char *p = ct_write_model("a.safetensors", 3, numel, 1);
    gf_cache_model *m = ct_add(c, "a", p);
    ck_assert_uint_eq(gf_cache_model_count(m), 3);
    ck_assert_int_eq(gf_cache_model_index(m, "t1"), 1);
    ck_assert_int_eq(gf_cache_model_index(m, "nope"), -1);
    ck_assert_uint_eq(gf_cache_model_device_bytes(m) % PAGE, 0);
    gf_lease *l;
    gf_err err;
    ck_assert_int_eq(gf_cache_acquire(c, m, &l, &err), GF_OK);
    ck_assert(gf_lease_cold(l));
    ck_assert_int_eq(gf_lease_source(l), GF_TIER_STORE);
    check_lease_bytes(be, l);
    gf_lease_release(l);
    gf_cache_drain(c);
    /* the store load filled the host tier on the way */
    gf_cache_stats st;
    gf_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.loads_from_store, 1);
    ck_assert_uint_eq(st.models_in_host, 1);
    ck_assert_uint_eq(st.host_used, gf_cache_model_host_bytes(m));
    ck_assert_uint_eq(st.device_model_bytes, gf_cache_model_device_bytes(m));
    /* a hit */
    ck_assert_int_eq(gf_cache_acquire(c, m, &l, &err), GF_OK);
    ck_assert(!gf_lease_cold(l));
    ck_assert_int_eq(gf_lease_source(l), GF_TIER_DEVICE);
    check_lease_bytes(be, l);
    gf_lease_release(l);
    /* evict from the device; the next load comes from the host tier */
    ck_assert_int_eq(gf_cache_evict(c, m, GF_TIER_DEVICE, &err), GF_OK);
    ck_assert_int_eq(gf_cache_acquire(c, m, &l, &err), GF_OK);
    ck_assert_int_eq(gf_lease_source(l), GF_TIER_HOST);
    check_lease_bytes(be, l);
    gf_lease_release(l);
    gf_cache_drain(c);
    gf_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.loads_from_host, 1);
    ck_assert_uint_eq(st.hits, 1);
    ck_assert_int_eq(L.loads, 2);
    ck_assert_int_eq(L.hits, 1);
    /* evict from host and device; remove */
    ck_assert_int_eq(gf_cache_evict(c, m, GF_TIER_HOST, &err), GF_OK);
    gf_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.host_used, 0);
    ck_assert_uint_eq(st.device_model_bytes, 0);
    ck_assert_int_eq(gf_cache_model_remove(c, m, &err), GF_OK);
    ck_assert_ptr_null(gf_cache_model_find(c, "a"));
    gf_cache_free(c);
    uint64_t used;
    gf_dev_usage(be, &used, NULL);
    ck_assert_uint_eq(used, 0);
    gf_backend_free(be);
    free(p);
}
END_TEST

START_TEST(test_add_errors)
{
    gf_backend *be = ct_open_cpu(4, NULL, NULL);
    gf_cache *c = ct_new_cache(be, 0, GF_EVICT_LRU, NULL);
    size_t numel[2] = {10, 20};
    char *p = ct_write_model("m.safetensors", 2, numel, 2);
    gf_cache_model *m;
    gf_err err;
    const char *order[] = {"t1", "missing"};
    ck_assert_int_eq(gf_cache_model_add(c, "x", p, order, 2, &m, &err), GF_ERR_NOT_FOUND);
    ck_assert_msg(strstr(err.msg, "no tensor named 'missing'") != NULL, "%s", err.msg);
    const char *dup[] = {"t1", "t1"};
    ck_assert_int_eq(gf_cache_model_add(c, "x", p, dup, 2, &m, &err), GF_ERR_INVALID);
    const char *rev[] = {"t1", "t0"};
    ck_assert_int_eq(gf_cache_model_add(c, "x", p, rev, 2, &m, &err), GF_OK);
    ck_assert_str_eq(gf_cache_model_tensor(m, 0)->name, "t1"); /* declared order */
    ck_assert_int_eq(gf_cache_model_add(c, "x", p, NULL, 0, &m, &err), GF_ERR_EXISTS);
    ck_assert_int_eq(gf_cache_model_add(c, "y", "/nonexistent.safetensors", NULL, 0, &m, &err),
                     GF_ERR_NOT_FOUND);
    ck_assert_int_eq(gf_cache_model_add(c, "", p, NULL, 0, &m, &err), GF_ERR_INVALID);
    gf_cache_free(c);
    gf_backend_free(be);
    free(p);
}
END_TEST

START_TEST(test_exact_lru_order)
{
    ct_evlog L = {.lock = PTHREAD_MUTEX_INITIALIZER};
    gf_backend *be = ct_open_cpu(6, NULL, NULL); /* room for three 2-page models */
    gf_cache *c = ct_new_cache(be, 0, GF_EVICT_LRU, &L);
    const char *keys[5] = {"A", "B", "C", "D", "E"};
    gf_cache_model *m[5];
    char *paths[5];
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s.safetensors", keys[i]);
        paths[i] = ct_write_pages_model(name, 2, (uint32_t)i);
        m[i] = ct_add(c, keys[i], paths[i]);
    }
    gf_lease *l;
    gf_err err;
    int order[] = {0, 1, 2, 0, 3, 4, 1}; /* A B C A D(evicts B) E(evicts C) B(evicts A) */
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        ck_assert_msg(gf_cache_acquire(c, m[order[k]], &l, &err) == GF_OK, "%s", err.msg);
        ck_assert_int_eq(gf_lease_wait_all(l, &err), GF_OK);
        gf_lease_release(l);
    }
    ck_assert_str_eq(L.log, "B,C,A");
    gf_cache_free(c);
    gf_backend_free(be);
    for (int i = 0; i < 5; i++)
        free(paths[i]);
}
END_TEST

/* Device holds a big model that is also in the host tier (cheap to reload per
 * byte) and a small one only in the store tier (costly per byte, and the
 * least recently used). A new model needs one of them gone. */
static const char *gds_victim(gf_evict_policy pol)
{
    static char victim[64];
    ct_evlog L = {.lock = PTHREAD_MUTEX_INITIALIZER};
    gf_backend *be = ct_open_cpu(9, NULL, NULL);
    char *pb = ct_write_pages_model("big.safetensors", 6, 1);
    char *ps = ct_write_pages_model("small.safetensors", 1, 2);
    char *pn = ct_write_pages_model("new.safetensors", 3, 3);
    gf_cache *c = ct_new_cache(be, 6 * PAGE, pol, &L); /* host tier: exactly the big model */
    gf_cache_model *big = ct_add(c, "big", pb), *small = ct_add(c, "small", ps), *nw = ct_add(c, "new", pn);
    gf_err err;
    gf_lease *l;
    ck_assert_int_eq(gf_cache_acquire(c, small, &l, &err), GF_OK); /* least recent */
    ck_assert_int_eq(gf_lease_wait_all(l, &err), GF_OK);
    gf_lease_release(l);
    gf_cache_drain(c);
    /* the big model takes the whole host tier, pushing the small one out */
    ck_assert_int_eq(gf_cache_prefetch(c, big, GF_TIER_HOST, &err), GF_OK);
    gf_cache_drain(c);
    gf_cache_stats st;
    gf_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.models_in_host, 1);
    ck_assert_uint_eq(st.evictions_host, 1);
    ck_assert_int_eq(gf_cache_acquire(c, big, &l, &err), GF_OK);
    ck_assert_int_eq(gf_lease_source(l), GF_TIER_HOST);
    ck_assert_int_eq(gf_lease_wait_all(l, &err), GF_OK);
    gf_lease_release(l);
    ct_use(c, nw); /* 3 pages: 2 free */
    ck_assert_int_eq(L.evictions, 1);
    snprintf(victim, sizeof victim, "%.63s", L.log);
    gf_cache_free(c);
    gf_backend_free(be);
    free(pb);
    free(ps);
    free(pn);
    return victim;
}

START_TEST(test_greedy_dual_prefers_large_cheap)
{
    ck_assert_str_eq(gds_victim(GF_EVICT_LRU), "small");
    ck_assert_str_eq(gds_victim(GF_EVICT_GDS), "big");
}
END_TEST

/* The copy stream at about 1 GB/s at most: a load's time is its bytes'. */
static void slow_copy(void *arg, size_t n)
{
    (void)arg;
    struct timespec ts = {0, (long)(n + 999)};
    nanosleep(&ts, NULL);
}

/* Over a link slow enough that reloading costs its bytes' time, a small
 * model used once, then a big one (six times its pages) four times; a new
 * model needs one of them gone. */
static const char *size_victim(gf_evict_policy pol)
{
    static char victim[64];
    ct_evlog L = {.lock = PTHREAD_MUTEX_INITIALIZER};
    gf_backend *be = ct_open_cpu(9, slow_copy, NULL);
    char *pb = ct_write_pages_model("big.safetensors", 6, 1);
    char *ps = ct_write_pages_model("small.safetensors", 1, 2);
    char *pn = ct_write_pages_model("new.safetensors", 3, 3);
    gf_cache *c = ct_new_cache(be, 0, pol, &L);
    gf_cache_model *big = ct_add(c, "big", pb), *small = ct_add(c, "small", ps);
    gf_cache_model *nw = ct_add(c, "new", pn);
    gf_cache_model *use[] = {small, big, big, big, big, nw};
    for (size_t k = 0; k < sizeof use / sizeof use[0]; k++)
        ct_use(c, use[k]);
    ck_assert_int_eq(L.evictions, 1);
    snprintf(victim, sizeof victim, "%.63s", L.log);
    gf_cache_free(c);
    gf_backend_free(be);
    free(pb);
    free(ps);
    free(pn);
    return victim;
}

START_TEST(test_gdsf_counts_misses_not_bytes)
{
    /* LRU drops the least recent; GDSF, every miss costing the same, keeps
     * the small one although it was used less (4 uses / 6 pages < 1 / 1);
     * with the reload time as the cost, it would drop the small one (its
     * cost per byte about the big one's, and used a quarter as often) */
    ck_assert_str_eq(size_victim(GF_EVICT_LRU), "small");
    ck_assert_str_eq(size_victim(GF_EVICT_GDSF), "big");
}
END_TEST

/* copy-stream gate: holds each copy until allowed */
static bool model_loading(gf_cache *c)
{
    gf_cache_stats st;
    gf_cache_get_stats(c, &st);
    return st.loads_from_store + st.loads_from_host == 0;
}

START_TEST(test_pipelining_param0_before_the_rest)
{
    gf_test_gate g = GF_TEST_GATE_INIT;
    gf_backend *be = ct_open_cpu(16, gf_test_gate_hook, &g);
    gf_cache *c = ct_new_cache(be, 0, GF_EVICT_LRU, NULL); /* staging path */
    size_t numel[4] = {16384, 16384, 16384, 16384};   /* 64 KiB each: one chunk */
    char *p = ct_write_model("pipe.safetensors", 4, numel, 9);
    gf_cache_model *m = ct_add(c, "pipe", p);
    gf_lease *l, *l2;
    gf_err err;
    ck_assert_int_eq(gf_cache_acquire(c, m, &l, &err), GF_OK);
    /* a second acquire while loading shares the load */
    ck_assert_int_eq(gf_cache_acquire(c, m, &l2, &err), GF_OK);
    ck_assert(gf_lease_cold(l2));
    gf_test_gate_allow(&g, 1); /* only tensor 0's copy may run */
    void *d0;
    ck_assert_int_eq(gf_lease_param(l, 0, &d0, &err), GF_OK);
    ck_assert(memcmp(d0, gf_cache_model_tensor(m, 0)->data, 65536) == 0);
    /* tensors 1..3 are still in flight: the load has not completed and the
     * last tensor's bytes are not there yet */
    ck_assert(model_loading(c));
    const gf_st_tensor *t3 = gf_cache_model_tensor(m, 3);
    gf_cache_stats st;
    gf_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.misses, 1);
    gf_test_gate_allow(&g, 100);
    void *d3;
    ck_assert_int_eq(gf_lease_param(l2, 3, &d3, &err), GF_OK);
    ck_assert(memcmp(d3, t3->data, 65536) == 0);
    check_lease_bytes(be, l);
    gf_lease_release(l);
    gf_lease_release(l2);
    gf_cache_drain(c);
    gf_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.loads_from_store, 1); /* one load for both leases */
    gf_cache_free(c);
    gf_backend_free(be);
    free(p);
}
END_TEST

START_TEST(test_larger_than_host_and_device)
{
    gf_backend *be = ct_open_cpu(8, NULL, NULL);
    gf_cache *c = ct_new_cache(be, 2 * PAGE, GF_EVICT_LRU, NULL);
    char *p5 = ct_write_pages_model("five.safetensors", 5, 4);
    char *p9 = ct_write_pages_model("nine.safetensors", 9, 5);
    gf_cache_model *m5 = ct_add(c, "five", p5), *m9 = ct_add(c, "nine", p9);
    gf_lease *l;
    gf_err err;
    /* bigger than the host tier: streamed through the staging ring */
    ck_assert_int_eq(gf_cache_acquire(c, m5, &l, &err), GF_OK);
    check_lease_bytes(be, l);
    gf_lease_release(l);
    gf_cache_drain(c);
    gf_cache_stats st;
    gf_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.models_in_host, 0);
    ck_assert_uint_eq(st.loads_from_store, 1);
    ck_assert_int_eq(gf_cache_prefetch(c, m5, GF_TIER_HOST, &err), GF_ERR_TOO_LARGE);
    /* bigger than the device budget: rejected with both sizes */
    ck_assert_int_eq(gf_cache_acquire(c, m9, &l, &err), GF_ERR_TOO_LARGE);
    char want[128];
    snprintf(want, sizeof want, "needs %zu bytes", 9 * PAGE);
    ck_assert_msg(strstr(err.msg, want) != NULL, "%s", err.msg);
    snprintf(want, sizeof want, "budget is %zu bytes", 8 * PAGE);
    ck_assert_msg(strstr(err.msg, want) != NULL, "%s", err.msg);
    gf_cache_free(c);
    gf_backend_free(be);
    free(p5);
    free(p9);
}
END_TEST

START_TEST(test_busy_when_leased_models_fill_the_device)
{
    gf_backend *be = ct_open_cpu(4, NULL, NULL);
    gf_cache *c = ct_new_cache(be, 0, GF_EVICT_LRU, NULL);
    char *pa = ct_write_pages_model("a.safetensors", 3, 1), *pb = ct_write_pages_model("b.safetensors", 2, 2);
    gf_cache_model *a = ct_add(c, "a", pa), *b = ct_add(c, "b", pb);
    gf_lease *la, *lb;
    gf_err err;
    ck_assert_int_eq(gf_cache_acquire(c, a, &la, &err), GF_OK);
    ck_assert_int_eq(gf_cache_acquire(c, b, &lb, &err), GF_ERR_BUSY);
    ck_assert_ptr_null(lb);
    ck_assert_int_eq(gf_cache_evict(c, a, GF_TIER_DEVICE, &err), GF_ERR_BUSY);
    ck_assert_int_eq(gf_cache_model_remove(c, a, &err), GF_ERR_BUSY);
    check_lease_bytes(be, la); /* the leased model is intact */
    gf_lease_release(la);
    ck_assert_int_eq(gf_cache_acquire(c, b, &lb, &err), GF_OK); /* evicts a */
    check_lease_bytes(be, lb);
    /* activations: evict idle models to free budget */
    gf_lease_release(lb);
    ck_assert_uint_ge(gf_cache_evict_idle(c, 4 * PAGE), 4 * PAGE);
    gf_cache_free(c);
    gf_backend_free(be);
    free(pa);
    free(pb);
}
END_TEST

/* A device allocation that does not fit (activations, the cuda kernels'
 * workspace, which allocates inside a kernel call and cannot ask the cache
 * itself) evicts idle models through the backend's reclaimer; a leased model
 * stays, and the allocation fails naming the eviction. */
START_TEST(test_allocation_evicts_idle_models)
{
    ct_evlog L = {.lock = PTHREAD_MUTEX_INITIALIZER};
    gf_backend *be = ct_open_cpu(8, NULL, NULL);
    gf_cache *c = ct_new_cache(be, 0, GF_EVICT_LRU, &L);
    char *pa = ct_write_pages_model("a.safetensors", 6, 1);
    gf_cache_model *a = ct_add(c, "a", pa);
    gf_lease *l;
    gf_err err;
    ck_assert_int_eq(gf_cache_acquire(c, a, &l, &err), GF_OK);
    ck_assert_int_eq(gf_lease_wait_all(l, &err), GF_OK);
    gf_lease_release(l); /* idle on the device: 2 pages of the budget free */
    void *p;
    ck_assert_msg(gf_dev_alloc(be, 4 * PAGE, &p, &err) == GF_OK, "%s", err.msg);
    ck_assert_int_eq(L.evictions, 1);
    gf_cache_stats st;
    gf_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.models_on_device, 0);
    gf_dev_free(be, p);
    /* leased: not evicted, and the allocation says why it failed */
    ck_assert_int_eq(gf_cache_acquire(c, a, &l, &err), GF_OK);
    ck_assert_int_eq(gf_lease_wait_all(l, &err), GF_OK);
    ck_assert_int_eq(gf_dev_alloc(be, 4 * PAGE, &p, &err), GF_ERR_NO_DEVICE_MEM);
    ck_assert_msg(strstr(err.msg, "after evicting idle models") != NULL, "%s", err.msg);
    ck_assert_int_eq(L.evictions, 1);
    check_lease_bytes(be, l);
    gf_lease_release(l);
    /* a freed cache is no longer asked */
    gf_cache_free(c);
    ck_assert_int_eq(gf_dev_alloc(be, 8 * PAGE, &p, &err), GF_OK);
    void *q;
    ck_assert_int_eq(gf_dev_alloc(be, 1, &q, &err), GF_ERR_NO_DEVICE_MEM);
    ck_assert_msg(strstr(err.msg, "after evicting") == NULL, "%s", err.msg);
    gf_dev_free(be, p);
    gf_backend_free(be);
    free(pa);
}
END_TEST

START_TEST(test_randomised_invariants)
{
    enum { NM = 50, POOL = 24, MAXL = 4 };
    ct_evlog L = {.lock = PTHREAD_MUTEX_INITIALIZER};
    int leases_per_model[NM] = {0};
    char *keys[NM];
    L.leases = leases_per_model;
    L.keys = keys;
    L.n_models = NM;
    gf_backend *be = ct_open_cpu(POOL, NULL, NULL);
    gf_cache *c = ct_new_cache(be, 12 * PAGE, GF_EVICT_GDS, &L);
    gf_test_rng r;
    gf_test_rng_seed(&r, 2024);
    gf_cache_model *m[NM];
    char *paths[NM];
    for (int i = 0; i < NM; i++) {
        int nt = 1 + (int)gf_test_rng_below(&r, 5);
        size_t numel[5];
        for (int k = 0; k < nt; k++)
            numel[k] = 1 + gf_test_rng_below(&r, 40000); /* up to ~160 KiB per tensor */
        char name[32];
        snprintf(name, sizeof name, "m%d.safetensors", i);
        paths[i] = ct_write_model(name, nt, numel, (uint32_t)i + 100);
        keys[i] = malloc(16);
        snprintf(keys[i], 16, "m%d", i);
        m[i] = ct_add(c, keys[i], paths[i]);
    }
    gf_lease *held[MAXL] = {0};
    int held_idx[MAXL] = {0};
    gf_err err;
    int busy = 0, ok = 0;
    for (int step = 0; step < 3000; step++) {
        int op = (int)gf_test_rng_below(&r, 10);
        int i = (int)gf_test_rng_below(&r, NM);
        int slot = (int)gf_test_rng_below(&r, MAXL);
        if (op < 5) { /* acquire into an empty slot */
            if (held[slot] == NULL) {
                gf_status st = gf_cache_acquire(c, m[i], &held[slot], &err);
                ck_assert_msg(st == GF_OK || st == GF_ERR_BUSY, "%s", err.msg);
                if (st == GF_OK) {
                    held_idx[slot] = i;
                    pthread_mutex_lock(&L.lock);
                    leases_per_model[i]++;
                    pthread_mutex_unlock(&L.lock);
                    ok++;
                    if (gf_test_rng_below(&r, 4) == 0)
                        check_lease_bytes(be, held[slot]);
                } else {
                    busy++;
                }
            }
        } else if (op < 8) { /* release */
            if (held[slot] != NULL) {
                if (gf_test_rng_below(&r, 3) == 0)
                    check_lease_bytes(be, held[slot]);
                pthread_mutex_lock(&L.lock);
                leases_per_model[held_idx[slot]]--;
                pthread_mutex_unlock(&L.lock);
                gf_lease_release(held[slot]);
                held[slot] = NULL;
            }
        } else if (op == 8) {
            gf_status st = gf_cache_evict(c, m[i], gf_test_rng_below(&r, 2) ? GF_TIER_HOST
                                                                         : GF_TIER_DEVICE, &err);
            ck_assert(st == GF_OK || st == GF_ERR_BUSY);
        } else {
            gf_status st = gf_cache_prefetch(c, m[i], gf_test_rng_below(&r, 2) ? GF_TIER_HOST
                                                                              : GF_TIER_DEVICE,
                                             &err);
            ck_assert_msg(st == GF_OK || st == GF_ERR_BUSY || st == GF_ERR_TOO_LARGE, "%s",
                          err.msg);
        }
        /* invariants */
        gf_cache_stats st;
        gf_cache_get_stats(c, &st);
        ck_assert_uint_le(st.device_used, st.device_budget);
        ck_assert_uint_le(st.host_used, st.host_budget);
        ck_assert_uint_le(st.device_model_bytes, st.device_used);
        for (int s = 0; s < MAXL; s++) /* a leased model is never gone */
            if (held[s] != NULL)
                ck_assert_ptr_eq(gf_cache_model_find(c, keys[held_idx[s]]), m[held_idx[s]]);
    }
    for (int s = 0; s < MAXL; s++) {
        if (held[s] != NULL) {
            check_lease_bytes(be, held[s]);
            gf_lease_release(held[s]);
        }
    }
    gf_cache_drain(c);
    ck_assert_int_eq(L.violations, 0); /* no leased model was ever evicted */
    ck_assert_int_eq(L.fails, 0);
    ck_assert_int_gt(ok, 500);
    ck_assert_int_gt(L.evictions, 50);
    gf_cache_free(c);
    uint64_t used;
    gf_dev_usage(be, &used, NULL);
    ck_assert_uint_eq(used, 0);
    gf_backend_free(be);
    for (int i = 0; i < NM; i++) {
        free(paths[i]);
        free(keys[i]);
    }
    (void)busy;
}
END_TEST

START_TEST(test_faults_leave_cache_consistent)
{
    ct_evlog L = {.lock = PTHREAD_MUTEX_INITIALIZER};
    gf_backend *be = ct_open_cpu(8, NULL, NULL);
    gf_cache *c = ct_new_cache(be, 8 * PAGE, GF_EVICT_LRU, &L);
    char *p = ct_write_pages_model("f.safetensors", 3, 7);
    gf_cache_model *m;
    gf_err err;
    gf_fault_arm("cache_alloc", 1, 1);
    ck_assert_int_eq(gf_cache_model_add(c, "f", p, NULL, 0, &m, &err), GF_ERR_NOMEM);
    m = ct_add(c, "f", p);
    gf_lease *l;
    uint64_t used;
    /* mapping fails on the second page: nothing stays mapped or allocated */
    gf_fault_arm("dev_map", 2, 1);
    ck_assert_int_eq(gf_cache_acquire(c, m, &l, &err), GF_ERR_DEVICE);
    gf_dev_usage(be, &used, NULL);
    ck_assert_uint_eq(used, 0);
    gf_fault_arm("dev_page_alloc", 1, 1);
    ck_assert_int_eq(gf_cache_acquire(c, m, &l, &err), GF_ERR_NO_DEVICE_MEM);
    gf_dev_usage(be, &used, NULL);
    ck_assert_uint_eq(used, 0);
    gf_fault_arm("cache_alloc", 1, 1);
    ck_assert_int_eq(gf_cache_acquire(c, m, &l, &err), GF_ERR_NOMEM);
    /* pinned host memory cannot be had (the host tier's pool would grow now):
     * the load streams through staging instead */
    gf_fault_arm("host_alloc", 1, 1);
    ck_assert_int_eq(gf_cache_acquire(c, m, &l, &err), GF_OK);
    check_lease_bytes(be, l);
    gf_lease_release(l);
    gf_cache_drain(c);
    gf_cache_stats st;
    gf_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.models_in_host, 0);
    ck_assert_uint_eq(st.host_pinned, 0);
    ck_assert_int_eq(gf_cache_evict(c, m, GF_TIER_DEVICE, &err), GF_OK);
    /* a copy fails on the copy stream: the lease reports it; after the
     * release the model is loadable again */
    gf_fault_arm("copy_exec", 2, 1);
    ck_assert_int_eq(gf_cache_acquire(c, m, &l, &err), GF_OK);
    void *d;
    ck_assert_int_eq(gf_lease_wait_all(l, &err), GF_ERR_DEVICE);
    ck_assert_int_ne(gf_lease_param(l, 0, &d, &err), GF_OK);
    ck_assert_msg(strstr(err.msg, "loading model 'f' failed") != NULL, "%s", err.msg);
    gf_lease_release(l);
    gf_dev_usage(be, &used, NULL);
    ck_assert_uint_eq(used, 0);
    ck_assert_int_eq(L.fails, 1);
    /* the host copy that was being filled is dropped, not left half-written */
    gf_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.host_used, 0);
    ck_assert_uint_eq(st.load_failures, 1);
    /* and everything works again */
    ck_assert_int_eq(gf_cache_evict(c, m, GF_TIER_DEVICE, &err), GF_OK);
    ck_assert_int_eq(gf_cache_acquire(c, m, &l, &err), GF_OK);
    check_lease_bytes(be, l);
    gf_lease_release(l);
    gf_cache_free(c);
    gf_backend_free(be);
    free(p);
}
END_TEST

/* A load that fails after some of its copies were queued (here: queueing
 * the third fails) must not give its pages or its host copy back while
 * those copies still run: on a GPU, unmapping a range under a DMA is an
 * illegal address, which loses the context. The copy stream is held at the
 * gate: the failure is not completed (nothing released) until the queued
 * copies finish, and then everything is released and loadable again. */
START_TEST(test_failed_load_waits_for_its_queued_copies)
{
    gf_test_gate g = GF_TEST_GATE_INIT;
    gf_backend *be = ct_open_cpu(16, gf_test_gate_hook, &g);
    gf_cache *c = ct_new_cache(be, 16 * PAGE, GF_EVICT_LRU, NULL); /* fills the host tier */
    size_t numel[4] = {16384, 16384, 16384, 16384};              /* 64 KiB each: one chunk */
    char *p = ct_write_model("q.safetensors", 4, numel, 11);
    gf_cache_model *m = ct_add(c, "q", p);
    gf_lease *l;
    gf_err err;
    gf_fault_arm("memcpy_async", 3, 1);
    ck_assert_int_eq(gf_cache_acquire(c, m, &l, &err), GF_OK);
    gf_test_gate_wait_started(&g, 1); /* the first copy is running, the second queued */
    gf_cache_stats st;
    for (int i = 0; i < 30; i++) { /* 300 ms: the failure must wait for them */
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        gf_cache_get_stats(c, &st);
        ck_assert_msg(st.load_failures == 0, "the load failed with copies still queued");
    }
    ck_assert_int_eq(gf_fault_failures("memcpy_async"), 1);
    uint64_t used;
    gf_dev_usage(be, &used, NULL);
    ck_assert_uint_eq(used, gf_cache_model_device_bytes(m)); /* pages still held */
    gf_lease_release(l); /* leaves the load to finish by itself */
    gf_test_gate_allow(&g, 1000);
    gf_cache_drain(c);
    gf_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.load_failures, 1);
    ck_assert_uint_eq(st.host_used, 0);
    gf_dev_usage(be, &used, NULL);
    ck_assert_uint_eq(used, 0);
    ck_assert_int_eq(gf_cache_acquire(c, m, &l, &err), GF_OK);
    check_lease_bytes(be, l);
    gf_lease_release(l);
    gf_cache_free(c);
    gf_backend_free(be);
    free(p);
}
END_TEST

/* The host tier's pinned memory is pinned once, as the tier first grows,
 * and reused: filling a host copy and evicting one never call the pinned
 * allocator (cudaHostAlloc takes milliseconds, cudaFreeHost synchronises
 * the device). With every pinned allocation failing from then on, models
 * still come and go through the host tier. */
START_TEST(test_host_tier_pins_once)
{
    gf_backend *be = ct_open_cpu(16, NULL, NULL);
    gf_cache *c = ct_new_cache(be, 6 * PAGE, GF_EVICT_LRU, NULL);
    char *pa = ct_write_pages_model("a.safetensors", 3, 1), *pb = ct_write_pages_model("b.safetensors", 3, 2);
    char *pc = ct_write_pages_model("c.safetensors", 2, 3);
    gf_cache_model *a = ct_add(c, "a", pa), *b = ct_add(c, "b", pb), *m3 = ct_add(c, "c", pc);
    gf_err err;
    gf_cache_stats st;
    ck_assert_int_eq(gf_cache_prefetch(c, a, GF_TIER_HOST, &err), GF_OK);
    gf_cache_drain(c);
    gf_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.models_in_host, 1);
    ck_assert_uint_eq(st.host_used, 3 * PAGE);
    ck_assert_uint_eq(st.host_pinned, 6 * PAGE); /* one slab: the whole (small) budget */
    gf_fault_arm("host_alloc", 1, -1);           /* no pinned memory from now on */
    gf_cache_model *order[] = {b, m3, a, b, a, m3, b};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        gf_lease *l;
        ck_assert_int_eq(gf_cache_evict(c, order[i], GF_TIER_HOST, &err), GF_OK);
        ck_assert_int_eq(gf_cache_acquire(c, order[i], &l, &err), GF_OK); /* fills the host tier */
        check_lease_bytes(be, l);
        gf_lease_release(l);
        gf_cache_drain(c);
        ck_assert_int_eq(gf_cache_evict(c, order[i], GF_TIER_DEVICE, &err), GF_OK);
        ck_assert_int_eq(gf_cache_acquire(c, order[i], &l, &err), GF_OK); /* from the host tier */
        ck_assert_int_eq(gf_lease_source(l), GF_TIER_HOST);
        check_lease_bytes(be, l);
        gf_lease_release(l);
        gf_cache_drain(c);
        gf_cache_get_stats(c, &st);
        ck_assert_uint_le(st.host_used, 6 * PAGE);
        ck_assert_uint_eq(st.host_pinned, 6 * PAGE);
    }
    ck_assert_int_eq(gf_fault_failures("host_alloc"), 0); /* never asked */
    gf_cache_get_stats(c, &st);
    ck_assert_uint_gt(st.evictions_host, 0);
    gf_fault_reset();
    gf_cache_free(c);
    gf_backend_free(be);
    free(pa);
    free(pb);
    free(pc);
}
END_TEST

static void count_res(void *arg, const gf_cache_residency *r)
{
    int *n = arg;
    if (r->on_device)
        n[0]++;
    if (r->in_host)
        n[1]++;
    n[2] += r->leases;
}

START_TEST(test_prefetch_and_snapshot)
{
    gf_backend *be = ct_open_cpu(8, NULL, NULL);
    gf_cache *c = ct_new_cache(be, 8 * PAGE, GF_EVICT_LRU, NULL);
    char *pa = ct_write_pages_model("a.safetensors", 2, 1), *pb = ct_write_pages_model("b.safetensors", 2, 2);
    gf_cache_model *a = ct_add(c, "a", pa), *b = ct_add(c, "b", pb);
    gf_err err;
    ck_assert_int_eq(gf_cache_prefetch(c, a, GF_TIER_HOST, &err), GF_OK);
    ck_assert_int_eq(gf_cache_prefetch(c, b, GF_TIER_DEVICE, &err), GF_OK);
    ck_assert_int_eq(gf_cache_prefetch(c, b, GF_TIER_STORE, &err), GF_ERR_INVALID);
    gf_cache_drain(c);
    gf_lease *l;
    ck_assert_int_eq(gf_cache_acquire(c, b, &l, &err), GF_OK);
    ck_assert(!gf_lease_cold(l)); /* prefetched: a hit */
    int n[3] = {0, 0, 0};
    gf_cache_snapshot(c, count_res, n);
    ck_assert_int_eq(n[0], 1); /* b on the device */
    ck_assert_int_eq(n[1], 2); /* a and b in host */
    ck_assert_int_eq(n[2], 1);
    gf_lease_release(l);
    ck_assert_int_eq(gf_cache_acquire(c, a, &l, &err), GF_OK);
    ck_assert_int_eq(gf_lease_source(l), GF_TIER_HOST);
    check_lease_bytes(be, l);
    gf_lease_release(l);
    gf_cache_free(c);
    gf_backend_free(be);
    free(pa);
    free(pb);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cache");
    TCase *tc = tcase_create("cache");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_basic_load_hit_and_tiers);
    tcase_add_test(tc, test_add_errors);
    tcase_add_test(tc, test_exact_lru_order);
    tcase_add_test(tc, test_greedy_dual_prefers_large_cheap);
    tcase_add_test(tc, test_pipelining_param0_before_the_rest);
    tcase_add_test(tc, test_larger_than_host_and_device);
    tcase_add_test(tc, test_busy_when_leased_models_fill_the_device);
    tcase_add_test(tc, test_allocation_evicts_idle_models);
    tcase_add_test(tc, test_randomised_invariants);
    tcase_add_test(tc, test_gdsf_counts_misses_not_bytes);
    tcase_add_test(tc, test_faults_leave_cache_consistent);
    tcase_add_test(tc, test_failed_load_waits_for_its_queued_copies);
    tcase_add_test(tc, test_host_tier_pins_once);
    tcase_add_test(tc, test_prefetch_and_snapshot);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
