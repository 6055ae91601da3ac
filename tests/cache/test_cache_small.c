/* Tests for small models in runtime/cache (cache/slab.h): models of at most
 * a quarter page share pages, on the cpu backend with real safetensors
 * files; the budget counts the shared pages exactly, eviction frees a
 * shared page with its last model, every byte arrives where it belongs, and
 * a small model's host copy is host pages (64 KiB), not a device page. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "testutil.h"

static char *tmpdir;
static void setup(void) { tmpdir = gf_test_tmpdir(); }
static void teardown(void)
{
    gf_test_rmtree(tmpdir);
    tmpdir = NULL;
}

/* A model of one F32 tensor of numel values depending on seed. */
static char *write_model(const char *name, size_t numel, uint32_t seed)
{
    float *data = malloc(numel * sizeof *data + 1);
    ck_assert_ptr_nonnull(data);
    for (size_t k = 0; k < numel; k++)
        data[k] = (float)(seed * 7919u + (uint32_t)k);
    int64_t shape = (int64_t)numel;
    gf_st_wtensor t = {"w", GF_DT_F32, 1, &shape, data};
    char *path = gf_test_path(tmpdir, name);
    gf_err err;
    ck_assert_msg(gf_st_write(path, &t, 1, NULL, 0, &err) == GF_OK, "%s", err.msg);
    free(data);
    return path;
}

static gf_backend *open_cpu(size_t page, size_t pages)
{
    gf_backend_config cfg = {.device = "cpu", .device_budget = pages * page, .page_size = page};
    gf_backend *be;
    gf_err err;
    ck_assert_msg(gf_backend_open(&cfg, &be, &err) == GF_OK, "%s", err.msg);
    ck_assert_uint_eq(gf_dev_page_size(be), page);
    return be;
}

/* Acquire m, wait for its tensors, compare them with the file, release. */
static void use(gf_backend *be, gf_cache *c, gf_cache_model *m)
{
    gf_lease *l;
    gf_err err;
    ck_assert_msg(gf_cache_acquire(c, m, &l, &err) == GF_OK, "%s", err.msg);
    ck_assert_msg(gf_lease_wait_all(l, &err) == GF_OK, "%s", err.msg);
    gf_stream *s = gf_backend_stream(be, GF_STREAM_COMPUTE);
    for (size_t i = 0; i < gf_cache_model_count(m); i++) {
        const gf_st_tensor *t = gf_cache_model_tensor(m, i);
        void *dev;
        ck_assert_msg(gf_lease_param(l, i, &dev, &err) == GF_OK, "%s", err.msg);
        ck_assert_uint_eq((uintptr_t)dev % 256, 0);
        char *back = malloc(t->nbytes);
        ck_assert_int_eq(gf_memcpy_async(be, s, back, dev, t->nbytes, GF_COPY_D2H, NULL), GF_OK);
        ck_assert_int_eq(gf_stream_sync(be, s, NULL), GF_OK);
        ck_assert_msg(memcmp(back, t->data, t->nbytes) == 0, "model %s: tensor %zu differs",
                      gf_cache_model_key(m), i);
        free(back);
    }
    gf_lease_release(l);
}

static gf_cache *new_cache(gf_backend *be, uint64_t host_budget)
{
    gf_cache_config cfg = {.host_budget = host_budget, .chunk_bytes = 64 << 10};
    gf_cache *c;
    gf_err err;
    ck_assert_msg(gf_cache_new(be, &cfg, &c, &err) == GF_OK, "%s", err.msg);
    return c;
}

/* 100 models of 20 KiB on 2 MiB pages: all resident in one page (plus the
 * rounding), where a page each would need 100; the host tier holds each in
 * one 64 KiB host page, not a 2 MiB one. */
START_TEST(test_hundred_small_models_take_one_page)
{
    enum { N = 100 };
    size_t page = (size_t)2 << 20;
    gf_backend *be = open_cpu(page, 8);
    gf_cache *c = new_cache(be, (uint64_t)N << 16);
    gf_cache_model *m[N];
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "s%d.safetensors", i);
        char *p = write_model(name, 5000, (uint32_t)i); /* 20,000 bytes */
        gf_err err;
        ck_assert_msg(gf_cache_model_add(c, name, p, NULL, 0, &m[i], &err) == GF_OK, "%s",
                      err.msg);
        free(p);
        ck_assert_uint_eq(gf_cache_model_device_bytes(m[i]), 20224); /* 256-byte multiple */
        ck_assert_uint_eq(gf_cache_model_host_bytes(m[i]), 64 << 10);
    }
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < N; i++)
            use(be, c, m[i]);
    gf_cache_stats st;
    gf_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.models_on_device, N);
    ck_assert_uint_eq(st.evictions_device, 0);
    /* 100 x 20,224 bytes = 0.96 of a page: two pages at most */
    uint64_t used;
    gf_dev_usage(be, &used, NULL);
    ck_assert_uint_le(used, 2 * page);
    ck_assert_uint_eq(used, st.device_model_bytes);
    /* the host tier was filled on the way: 100 host pages of 64 KiB */
    gf_cache_drain(c);
    gf_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.models_in_host, N);
    ck_assert_uint_eq(st.host_used, (uint64_t)N << 16);
    /* every model evicted: the shared pages go back to the pool */
    gf_cache_evict_idle(c, 8 * page);
    gf_dev_usage(be, &used, NULL);
    ck_assert_uint_eq(used, 0);
    gf_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.device_model_bytes, 0);
    gf_cache_free(c);
    gf_backend_free(be);
}
END_TEST

/* A budget of 4 pages of 64 KiB: small models fill shared pages, then a
 * 3-page model needs room: idle small models are evicted until a shared
 * page empties, the big model arrives intact, the small ones left are
 * intact, and a small model evicted comes back into a gap. */
START_TEST(test_eviction_frees_shared_pages_exactly)
{
    enum { N = 20 };
    size_t page = (size_t)64 << 10;
    gf_backend *be = open_cpu(page, 4);
    gf_cache *c = new_cache(be, 0);
    gf_cache_model *m[N];
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%d.safetensors", i);
        /* 1,000 to 4,000 floats: 4 KB to 16 KB, at most a quarter page */
        char *p = write_model(name, 1000 + (size_t)(i % 4) * 1000, (uint32_t)i + 1);
        gf_err err;
        ck_assert_msg(gf_cache_model_add(c, name, p, NULL, 0, &m[i], &err) == GF_OK, "%s",
                      err.msg);
        free(p);
        use(be, c, m[i]);
    }
    gf_cache_stats st;
    gf_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.models_on_device, N);
    uint64_t used;
    gf_dev_usage(be, &used, NULL);
    /* 20 models, 5 x (4,096 + 8,192 + 12,032 + 16,128) = 202,240 bytes: 4 pages */
    ck_assert_uint_eq(st.evictions_device, 0);
    ck_assert_uint_eq(used, 4 * page);
    ck_assert_uint_eq(st.device_model_bytes, 4 * page);
    char *bp = write_model("big.safetensors", 3 * page / 4 - 64, 999); /* 3 pages */
    gf_cache_model *big;
    gf_err err;
    ck_assert_msg(gf_cache_model_add(c, "big", bp, NULL, 0, &big, &err) == GF_OK, "%s", err.msg);
    free(bp);
    ck_assert_uint_eq(gf_cache_model_device_bytes(big), 3 * page);
    use(be, c, big);
    gf_dev_usage(be, &used, NULL);
    ck_assert_uint_le(used, 4 * page);
    gf_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.device_model_bytes, used);
    /* three shared pages had to empty: at least the models of three pages */
    ck_assert_uint_ge(st.evictions_device, 3);
    ck_assert_uint_lt(st.evictions_device, N);
    /* whatever is still on the device is intact; the others come back, in
     * turn evicting each other and the big model, never over the budget */
    for (int i = 0; i < N; i++) {
        use(be, c, m[i]);
        gf_dev_usage(be, &used, NULL);
        ck_assert_uint_le(used, 4 * page);
    }
    use(be, c, big);
    gf_cache_evict_idle(c, 4 * page);
    gf_dev_usage(be, &used, NULL);
    ck_assert_uint_eq(used, 0);
    gf_cache_free(c);
    gf_backend_free(be);
}
END_TEST

/* A leased small model keeps its shared page: a model needing the whole
 * budget is BUSY, not placed over it. */
START_TEST(test_leased_small_model_keeps_its_page)
{
    size_t page = (size_t)64 << 10;
    gf_backend *be = open_cpu(page, 2);
    gf_cache *c = new_cache(be, 0);
    char *sp = write_model("s.safetensors", 1000, 5);
    char *bp = write_model("b.safetensors", 2 * page / 4 - 64, 6);
    gf_cache_model *s, *b;
    gf_err err;
    ck_assert_int_eq(gf_cache_model_add(c, "s", sp, NULL, 0, &s, &err), GF_OK);
    ck_assert_int_eq(gf_cache_model_add(c, "b", bp, NULL, 0, &b, &err), GF_OK);
    gf_lease *l, *lb;
    ck_assert_int_eq(gf_cache_acquire(c, s, &l, &err), GF_OK);
    ck_assert_int_eq(gf_lease_wait_all(l, &err), GF_OK);
    ck_assert_int_eq(gf_cache_acquire(c, b, &lb, &err), GF_ERR_BUSY);
    gf_lease_release(l);
    use(be, c, b); /* now s is idle: evicted, its page freed */
    gf_cache_stats st;
    gf_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.evictions_device, 1);
    use(be, c, s);
    gf_cache_free(c);
    gf_backend_free(be);
    free(sp);
    free(bp);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cache_small");
    TCase *tc = tcase_create("small");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_hundred_small_models_take_one_page);
    tcase_add_test(tc, test_eviction_frees_shared_pages_exactly);
    tcase_add_test(tc, test_leased_small_model_keeps_its_page);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
