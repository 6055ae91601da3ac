/* Tests for the parameter cache's residency (pin with its limit, priority
 * classes, keep-warm time) and the GreedyDual-Size-Frequency policy, on the
 * cpu backend with real safetensors files. Each test fills a small device
 * with models of two pages and checks which one an eviction takes. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/cache.h"
#include "cache_testlib.h"
#include "core/residency.h"
#include "testutil.h"

static void setup(void) { ct_setup(); }
static void teardown(void) { ct_teardown(); }

/* n models "A", "B", ... of two pages each in cache c. */
typedef struct {
    gf_backend *be;
    gf_cache *c;
    ct_evlog L;
    gf_cache_model *m[8];
    char *path[8];
    int n;
} rig;

static void rig_open(rig *r, size_t device_pages, gf_evict_policy pol, uint64_t pin_limit, int n)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->L.lock, NULL);
    r->be = ct_open_cpu(device_pages, NULL, NULL);
    /* a setup cost that dwarfs bytes / bandwidth: the GreedyDual costs of
     * equal models stay equal while the measured bandwidth moves */
    gf_cache_config cfg = {.policy = pol, .chunk_bytes = 64 << 10, .on_event = ct_on_event,
                           .event_arg = &r->L, .pin_limit = pin_limit, .setup_cost_us = 1e6};
    gf_err err;
    ck_assert_msg(gf_cache_new(r->be, &cfg, &r->c, &err) == GF_OK, "%s", err.msg);
    r->n = n;
    for (int i = 0; i < n; i++) {
        char key[2] = {(char)('A' + i), '\0'}, file[32];
        snprintf(file, sizeof file, "%s.safetensors", key);
        r->path[i] = ct_write_pages_model(file, 2, (uint32_t)i);
        r->m[i] = ct_add(r->c, key, r->path[i]);
    }
}

static void rig_close(rig *r)
{
    gf_cache_free(r->c);
    gf_backend_free(r->be);
    for (int i = 0; i < r->n; i++)
        free(r->path[i]);
}

static void set_res(rig *r, int i, bool pin, gf_priority pr, uint64_t keep_warm_us)
{
    gf_residency res = {pin, pr, keep_warm_us};
    gf_err err;
    ck_assert_msg(gf_cache_model_set_residency(r->c, r->m[i], &res, &err) == GF_OK, "%s",
                  err.msg);
}

/* Device of 6 pages: A, B, C resident (A least recently used); D comes. */
static void fill_abc_then_d(rig *r)
{
    ct_use(r->c, r->m[0]);
    ct_use(r->c, r->m[1]);
    ct_use(r->c, r->m[2]);
    ct_use(r->c, r->m[3]);
}

START_TEST(test_pin_is_never_evicted)
{
    rig r;
    rig_open(&r, 6, GF_EVICT_LRU, 0, 5);
    set_res(&r, 0, true, GF_PRIORITY_NORMAL, 0);
    fill_abc_then_d(&r);
    ck_assert_str_eq(r.L.log, "B"); /* LRU alone would have taken A */
    ct_use(r.c, r.m[4]);             /* E: C is the least recent unpinned */
    ck_assert_str_eq(r.L.log, "B,C");
    gf_residency got = gf_cache_model_residency(r.c, r.m[0]);
    ck_assert(got.pin);
    /* unpinned, it is an ordinary model again: the least recently used */
    set_res(&r, 0, false, GF_PRIORITY_NORMAL, 0);
    ct_use(r.c, r.m[1]);
    ck_assert_str_eq(r.L.log, "B,C,A");
    rig_close(&r);
}
END_TEST

START_TEST(test_pin_limit_caps_pinned_bytes)
{
    rig r;
    rig_open(&r, 8, GF_EVICT_LRU, 4 * PAGE, 3);
    set_res(&r, 0, true, GF_PRIORITY_NORMAL, 0);
    set_res(&r, 1, true, GF_PRIORITY_NORMAL, 0);
    gf_residency pin = {true, GF_PRIORITY_NORMAL, 0};
    gf_err err;
    gf_err_clear(&err);
    ck_assert_int_eq(gf_cache_model_set_residency(r.c, r.m[2], &pin, &err), GF_ERR_TOO_LARGE);
    ck_assert_msg(strstr(err.msg, "pin limit of 262144 bytes") != NULL, "%s", err.msg);
    ck_assert(!gf_cache_model_residency(r.c, r.m[2]).pin); /* nothing changed */
    gf_cache_stats st;
    gf_cache_get_stats(r.c, &st);
    ck_assert_uint_eq(st.pinned_bytes, 4 * PAGE);
    ck_assert_uint_eq(st.pin_limit, 4 * PAGE);
    /* pinning twice does not count twice; unpinning makes room */
    set_res(&r, 0, true, GF_PRIORITY_HIGH, 0);
    set_res(&r, 1, false, GF_PRIORITY_NORMAL, 0);
    ck_assert_int_eq(gf_cache_model_set_residency(r.c, r.m[2], &pin, &err), GF_OK);
    gf_cache_get_stats(r.c, &st);
    ck_assert_uint_eq(st.pinned_bytes, 4 * PAGE);
    /* a removed pinned model gives its share back */
    ck_assert_int_eq(gf_cache_model_remove(r.c, r.m[2], &err), GF_OK);
    r.m[2] = NULL;
    gf_cache_get_stats(r.c, &st);
    ck_assert_uint_eq(st.pinned_bytes, 2 * PAGE);
    /* the default limit is half the device budget */
    gf_cache *c2 = ct_new_cache(r.be, 0, GF_EVICT_LRU, NULL);
    gf_cache_get_stats(c2, &st);
    ck_assert_uint_eq(st.pin_limit, 4 * PAGE);
    gf_cache_free(c2);
    /* out of range */
    gf_residency bad = {false, (gf_priority)7, 0};
    ck_assert_int_eq(gf_cache_model_set_residency(r.c, r.m[0], &bad, &err), GF_ERR_INVALID);
    bad = (gf_residency){false, GF_PRIORITY_LOW, GF_KEEP_WARM_MAX_US + 1};
    ck_assert_int_eq(gf_cache_model_set_residency(r.c, r.m[0], &bad, &err), GF_ERR_INVALID);
    rig_close(&r);
}
END_TEST

START_TEST(test_lower_priority_classes_go_first)
{
    rig r;
    rig_open(&r, 6, GF_EVICT_LRU, 0, 5);
    set_res(&r, 0, false, GF_PRIORITY_HIGH, 0);  /* A: the least recent, but high */
    set_res(&r, 1, false, GF_PRIORITY_NORMAL, 0);
    set_res(&r, 2, false, GF_PRIORITY_LOW, 0);   /* C: the most recent, but low */
    fill_abc_then_d(&r);
    ck_assert_str_eq(r.L.log, "C");
    ct_use(r.c, r.m[4]); /* E: B (normal) before A (high); D is normal and more recent */
    ck_assert_str_eq(r.L.log, "C,B");
    rig_close(&r);
}
END_TEST

START_TEST(test_keep_warm_protects_until_it_expires)
{
    rig r;
    rig_open(&r, 6, GF_EVICT_LRU, 0, 5);
    set_res(&r, 0, false, GF_PRIORITY_NORMAL, 60ull * 1000000); /* A: a minute */
    fill_abc_then_d(&r);
    ck_assert_str_eq(r.L.log, "B");
    /* a short guarantee runs out: C kept warm for 50 ms, then it is the LRU */
    set_res(&r, 2, false, GF_PRIORITY_NORMAL, 50000);
    struct timespec ts = {0, 150 * 1000 * 1000};
    nanosleep(&ts, NULL);
    ct_use(r.c, r.m[4]);
    ck_assert_str_eq(r.L.log, "B,C");
    rig_close(&r);
}
END_TEST

START_TEST(test_keep_warm_beyond_the_pin_limit_yields)
{
    /* 4 pages; A and B both kept warm, 4 pages protected against a limit of
     * 2: the least recently used of them (A) goes for C */
    rig r;
    rig_open(&r, 4, GF_EVICT_LRU, 2 * PAGE, 3);
    set_res(&r, 0, false, GF_PRIORITY_NORMAL, 60ull * 1000000);
    set_res(&r, 1, false, GF_PRIORITY_NORMAL, 60ull * 1000000);
    ct_use(r.c, r.m[0]);
    ct_use(r.c, r.m[1]);
    ct_use(r.c, r.m[2]);
    ck_assert_str_eq(r.L.log, "A");
    rig_close(&r);
    /* within the limit the guarantee holds: the device is full of kept-warm
     * models, so the acquire answers BUSY instead of evicting one */
    rig_open(&r, 4, GF_EVICT_LRU, 4 * PAGE, 3);
    set_res(&r, 0, false, GF_PRIORITY_NORMAL, 60ull * 1000000);
    set_res(&r, 1, false, GF_PRIORITY_NORMAL, 60ull * 1000000);
    ct_use(r.c, r.m[0]);
    ct_use(r.c, r.m[1]);
    gf_lease *l = NULL;
    gf_err err;
    gf_err_clear(&err);
    ck_assert_int_eq(gf_cache_acquire(r.c, r.m[2], &l, &err), GF_ERR_BUSY);
    ck_assert_msg(strstr(err.msg, "pinned or kept warm") != NULL, "%s", err.msg);
    ck_assert_int_eq(r.L.evictions, 0);
    rig_close(&r);
}
END_TEST

/* A used five times, then B once and C twice; D needs room. */
static const char *frequency_victim(gf_evict_policy pol)
{
    static char victim[32];
    rig r;
    rig_open(&r, 6, pol, 0, 4);
    for (int k = 0; k < 5; k++)
        ct_use(r.c, r.m[0]);
    ct_use(r.c, r.m[1]);
    ct_use(r.c, r.m[2]);
    ct_use(r.c, r.m[2]);
    ct_use(r.c, r.m[3]);
    snprintf(victim, sizeof victim, "%.31s", r.L.log);
    rig_close(&r);
    return victim;
}

START_TEST(test_gdsf_keeps_the_frequently_used)
{
    ck_assert_str_eq(frequency_victim(GF_EVICT_LRU), "A");  /* the least recent */
    ck_assert_str_eq(frequency_victim(GF_EVICT_GDSF), "B"); /* the least used */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cache_residency");
    TCase *tc = tcase_create("residency");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_pin_is_never_evicted);
    tcase_add_test(tc, test_pin_limit_caps_pinned_bytes);
    tcase_add_test(tc, test_lower_priority_classes_go_first);
    tcase_add_test(tc, test_keep_warm_protects_until_it_expires);
    tcase_add_test(tc, test_keep_warm_beyond_the_pin_limit_yields);
    tcase_add_test(tc, test_gdsf_keeps_the_frequently_used);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
